"""Real-time fidelity (live, Ray, Mininet): how far the wall clock strayed from the model.

A real-time engine runs the node code on real sockets and real clocks; its latencies are
the model's only while the machine keeps up. Following Mininet-HiFi's monitors, three
measures say whether it did:

* **per-hop excess.** Each exchange a resolver makes with a server, and each HTTP call an
  agent makes to a registry, is timed on the wall clock. The model's time for it is the
  median round trip the path model gives between the two roles (two one-way draws, the
  median of :data:`DRAWS` seeded draws; exact for constant delays) plus the processing the
  simulation charges there (``processing.server`` or ``server_semantic`` for a query with
  the intent; a registry's ``server`` plus ``registry`` for a search). The excess, measured
  minus modelled, is what the model does not contain: the node code's real CPU time beyond
  its modelled cost, the event loop's lag, the kernel. Link jitter spreads it on both
  sides; its median is robust to that, so the verdict reads the median and the p95 is
  reported beside it.
* **CPU saturation.** Each host process's CPU time over its replay, as a share of the wall
  time (one asyncio loop uses at most one core): a process near 100 % queues its messages.
* **schedule error.** How late queries were sent against their schedule (already in the
  replay block).

:func:`verdict` compares them with :data:`TOLERANCE`; the summary's ``replay`` block carries
the figures and the verdict, the console prints it under the table and the report marks a
run that is not within it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from nodes.registry.agentdns import AgentDNSRegistry
from nodes.registry.ans import ANSRegistry
from nodes.registry.client import RegistryResult
from nodes.registry.mcp import MCPRegistry
from nodes.resolver.types import DiscoveryResult
from topologies.paths import PathModel

#: HTTP calls that run a registry search (the client's call names are the apps' stats keys)
SEARCH_CALLS = frozenset(AgentDNSRegistry.search_routes + ANSRegistry.search_routes
                         + MCPRegistry.search_routes)
#: the search calls in which the registry ranks a pool (ANS's and the MCP Registry's
#: listings rank nothing: their clients do); the records count their ranking passes by it too
RANKING_CALLS = frozenset(AgentDNSRegistry.search_routes)
#: hops kept per host process for the quantiles (the first ones; counts cover all)
MAX_HOPS = 200_000
#: path-model draws per pair of roles for its median round trip
DRAWS = 201


@dataclass(frozen=True)
class Tolerance:
    """When a real-time run's latencies count as the model's."""

    median_ms: float = 1.0  # |median per-hop excess| ...
    median_share: float = 0.05  # ... or this share of the modelled hop, whichever is larger
    cpu: float = 0.9  # the busiest host process's CPU share over its replay
    schedule_p99_ms: float = 5.0  # 99th percentile of the schedule error


TOLERANCE = Tolerance()


@dataclass
class HopTimes:
    """Per-hop excess (seconds, measured minus modelled) of one host process, and its CPU
    share over the replay; folded across processes with :meth:`absorb`."""

    excess: list[float] = field(default_factory=list)
    hops: int = 0
    modelled: float = 0.0  # sum of the modelled round trips (seconds)
    cpu: list[float] = field(default_factory=list)  # per host process

    def add(self, measured: float, model: float) -> None:
        self.hops += 1
        self.modelled += model
        if len(self.excess) < MAX_HOPS:
            self.excess.append(measured - model)

    def absorb(self, other: HopTimes) -> None:
        self.excess.extend(other.excess[:max(0, MAX_HOPS - len(self.excess))])
        self.hops += other.hops
        self.modelled += other.modelled
        self.cpu.extend(other.cpu)


@dataclass
class HopModel:
    """The model's time for a hop: path round trips and the processing the simulation
    charges (seconds)."""

    path: PathModel
    role_of: dict[str, str]
    server: float
    server_semantic: float | None
    registry: float
    # processing ``index`` (nodes.searchcost): a semantic query's time per server address, and
    # an AgentDNS search's time per service (its pool ranked); empty: the values above
    semantic_times: Mapping[str, float] = field(default_factory=dict)
    search_times: Mapping[str, float] = field(default_factory=dict)
    _rtts: dict[tuple[str, str], float] = field(default_factory=dict)  # bounded by pairs

    def walks(self, resolver: str, walks: list[DiscoveryResult], into: HopTimes) -> None:
        """Every answered exchange of ``walks``, made by resolver ``resolver``."""
        for walk in walks:
            for step in walk.steps:
                if step.rtt is None:  # timed out: no round trip
                    continue
                rtt = self._rtt(resolver, step.server[0])
                if rtt is None:
                    continue
                work = self.server
                if step.with_intent:
                    work = (self.server_semantic if self.server_semantic is not None
                            else self.semantic_times.get(step.server[0], work))
                into.add(step.rtt, rtt + work)

    def calls(self, agent: str, registry: str, result: RegistryResult, into: HopTimes) -> None:
        """Every answered HTTP call of ``result`` (agent ``agent`` to ``registry``)."""
        rtt = self._rtt(agent, registry)
        for step in result.steps:
            if step.rtt is None or rtt is None:
                continue
            work = self.server
            if step.call in SEARCH_CALLS:
                work += (self.search_times.get(result.request.service, 0.0)
                         if step.call in RANKING_CALLS else 0.0) if self.search_times \
                    else self.registry
            into.add(step.rtt, rtt + work)

    def _rtt(self, src: str, dst: str) -> float | None:
        """The path model's median round trip between ``src`` and ``dst`` (seconds); None
        for an address the plan does not place (nothing to compare with)."""
        a, b = self.role_of.get(src), self.role_of.get(dst)
        if a is None or b is None:
            return None
        rtt = self._rtts.get((a, b))
        if rtt is None:
            rng = np.random.default_rng(0)  # the same model median in every process
            draws = [(x + y) for x, y in ((self.path.one_way(a, b, 0, rng),
                                           self.path.one_way(b, a, 0, rng))
                                          for _ in range(DRAWS)) if x is not None and y is not None]
            rtt = float(np.median(draws)) if draws else self.path.rtt_estimate(a, b)
            self._rtts[(a, b)] = rtt
        return rtt


def fidelity(hops: HopTimes, schedule_p99_ms: float | None,
             tolerance: Tolerance = TOLERANCE) -> dict:
    """The replay block's ``fidelity``: per-hop excess (ms), CPU, the verdict and why."""
    out: dict = {"hops": hops.hops}
    why: list[str] = []
    if hops.excess:
        arr = np.asarray(hops.excess) * 1000
        median, p95 = float(np.median(arr)), float(np.percentile(arr, 95))
        modelled = hops.modelled / hops.hops * 1000
        bound = max(tolerance.median_ms, tolerance.median_share * modelled)
        out.update({"excess_median_ms": round(median, 3), "excess_p95_ms": round(p95, 3),
                    "modelled_mean_ms": round(modelled, 3), "excess_bound_ms": round(bound, 3)})
        if abs(median) > bound:
            why.append(f"median per-hop excess {median:+.2f} ms, beyond ±{bound:.2f} ms")
    if hops.cpu:
        busiest = max(hops.cpu)
        out["cpu_busiest"] = round(busiest, 3)
        if busiest >= tolerance.cpu:
            why.append(f"a host process used {busiest:.0%} of a core "
                       f"(≥ {tolerance.cpu:.0%}: messages queue)")
    if schedule_p99_ms is not None and schedule_p99_ms > tolerance.schedule_p99_ms:
        why.append(f"p99 schedule error {schedule_p99_ms:.2f} ms > "
                   f"{tolerance.schedule_p99_ms:g} ms")
    out["tolerance"] = {"excess_median_ms": tolerance.median_ms,
                        "excess_median_share": tolerance.median_share, "cpu": tolerance.cpu,
                        "schedule_p99_ms": tolerance.schedule_p99_ms}
    out["within"] = not why
    out["why"] = why
    return out


def fidelity_line(scheme: str, block: dict) -> str:
    """One console line: the figures and the verdict."""
    parts = []
    if "excess_median_ms" in block:
        parts.append(f"per-hop excess over the model median {block['excess_median_ms']:+.2f} "
                     f"ms, p95 {block['excess_p95_ms']:+.2f} ms ({block['hops']} hops, "
                     f"modelled {block['modelled_mean_ms']:.2f} ms each)")
    if "cpu_busiest" in block:
        parts.append(f"busiest host process {block['cpu_busiest']:.0%} CPU")
    verdict = ("within tolerance" if block["within"]
               else "NOT within tolerance: " + "; ".join(block["why"]))
    return f"real-time fidelity, {scheme}: {'; '.join(parts) or 'no hops timed'} — {verdict}"
