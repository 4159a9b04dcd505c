"""What the core hands the parts it drives (walk, iterate, validate): the configuration,
the caches (whose ``now`` is the clock) and the counters — never the resolver itself."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from nodes.resolver.caches import Caches
from nodes.resolver.config import ResolverConfig


@dataclass(frozen=True, slots=True)
class Context:
    """The narrow view of a resolver its tasks run with."""

    config: ResolverConfig
    caches: Caches
    stats: Counter[str]

    @property
    def now(self) -> float:
        return self.caches.now
