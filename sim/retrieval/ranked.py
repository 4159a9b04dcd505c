"""What one retrieval method returned for one query, and what it examined doing so."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Ranked:
    """What one method returned for one query and what it examined."""

    tools: list[str]
    examined: int  # items scored: child summaries + tool descriptions
    tools_examined: int
    tokens: int
    leaves: list[str] = field(default_factory=list)
    # method-specific per-query columns (e.g. seed 003's per-tier times, sim.retrieval.tiered)
    extra: dict[str, float] = field(default_factory=dict)
