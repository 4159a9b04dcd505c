"""What every engine returns (:class:`EngineOutput`) and the engine call signature."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from nodes.agent.stub import StubResult
from nodes.registry.client import RegistryResult
from nodes.resolver.types import DiscoveryResult
from sim.build.runplan import RunPlan
from sim.build.workload import Job


@dataclass
class EngineOutput:
    stubs: list[tuple[Job, StubResult | RegistryResult]] = field(default_factory=list)
    walks: dict[tuple[str, int], list[DiscoveryResult]] = field(default_factory=dict)
    warmups: list[DiscoveryResult] = field(default_factory=list)
    load: dict[str, dict[str, float]] = field(default_factory=dict)  # address -> counters
    schedule_error: list[float] = field(default_factory=list)  # actual - scheduled send time
    lost: int = 0
    flows: dict[tuple[str, int], int] = field(default_factory=dict)  # live: (ip, port) -> conn
    clock_offset: float = 0.0  # live: wall-clock time minus node time (capture alignment)
    warm_time: float = 0.0
    end_time: float = 0.0
    on_stub: Callable[[int], None] | None = None  # told how many stubs are done, as they end

    def add_stub(self, job: Job, stub: StubResult | RegistryResult) -> None:
        self.stubs.append((job, stub))
        if self.on_stub is not None:
            self.on_stub(len(self.stubs))

    def count(self, address: str, key: str, value: float = 1) -> None:
        node = self.load.setdefault(address, {})
        node[key] = node.get(key, 0) + value

    def add_walks(self, results: list[DiscoveryResult]) -> None:
        for r in results:
            if r.client is None:
                self.warmups.append(r)
            else:
                (ip, _port), qid = r.client
                self.walks.setdefault((ip, qid), []).append(r)


Engine = Callable[[RunPlan], EngineOutput]
