"""The run's ``summary.json`` blocks: per-scheme (and, with workload phases, per-phase)
outcome, latency, upstream queries, bytes and search space (from the records, or counted
as they are made: :class:`Tally`); the replay's schedule error; the session layer's
block."""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from analysis.metrics import PHASE, SUMMARY, aggregate, aggregate_phases, mean_of
from nodes.agent.context import META_TOOL_TOKENS, static_tokens
from sim.build.sessions import session_scopes, session_tool
from sim.engines.base import EngineOutput
from sim.scenario import Scenario
from topologies.namespace import Namespace


def _error_stats(errors: list[float]) -> dict[str, float]:
    """Schedule error (ms): how late the engine sent queries against their schedule."""
    if not errors:
        return {}
    arr = np.abs(np.asarray(errors)) * 1000
    return {"median": round(float(np.median(arr)), 6),
            "p99": round(float(np.percentile(arr, 99)), 6), "max": round(float(arr.max()), 6)}


def replay_summary(output: EngineOutput, dot: bool) -> dict:
    """One scheme's ``replay`` block: schedule error, warm-up and end times, packets lost,
    discoveries completed; with DNS over TLS, the resolvers' connections opened, closed."""
    replay = {"schedule_error_ms": _error_stats(output.schedule_error),
              "warm_time_s": round(output.warm_time, 9),
              "end_time_s": round(output.end_time, 9),
              "lost_packets": output.lost,
              "completed": output.completed()}
    if output.link_emulation is not None:
        replay["link_emulation"] = output.link_emulation
    if output.model_loads is not None:
        replay["host_model_loads"] = output.model_loads
    if dot:
        replay.update({key: sum(c.get(key, 0) for c in output.load.values())
                       for key in ("dot_opened", "dot_closed")})
    return replay


def summarise(sc: Scenario, engine: str, df: pd.DataFrame | Tally, ns: Namespace) -> dict:
    """The summary's head, its per-scheme block and, when the workload has phases, its
    per-phase block (per scheme, one row per phase), from the per-query records (or their
    :class:`Tally`, which must be :attr:`Tally.exact`)."""
    tools = len(ns.tools)
    # the metric table: summary.json "schemes" and "phases"
    schemes = df.schemes(tools) if isinstance(df, Tally) else aggregate(df, tools)
    out = {"scenario": sc.name, "engine": engine, "seed": sc.seed, "namespace": ns.origin,
           "namespace_stats": ns.stats(), "schemes": schemes}
    if sc.workload.phases > 1:
        out["phases"] = df.phases(tools) if isinstance(df, Tally) else aggregate_phases(
            df, tools)
    return out


#: integer columns a :class:`Tally` adds up (per row, ``packets`` = up + down,
#: ``without_upstream`` = answered with no upstream exchange, ``any_cache_hit`` = a hit)
_SUMS = ("success", "hit_at_1", "hit_at_k", "without_upstream", "exchanges", "round_trips",
         "bytes_up", "bytes_down", "packets", "tools_examined", "any_cache_hit")


@dataclass
class _Sums:
    n: int = 0
    sums: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_SUMS, 0))
    latencies: array = field(default_factory=lambda: array("d"))  # successful ones (ms)
    start: float = math.inf  # the first send time (s)

    def merge(self, other: _Sums) -> None:
        self.n += other.n
        for key, value in other.sums.items():
            self.sums[key] += value
        self.latencies.extend(other.latencies)
        self.start = min(self.start, other.start)


class Tally:
    """The summary's ``schemes`` and ``phases`` blocks counted row by row as records are
    made: integer sums per (scheme, phase), the latencies of successful discoveries (8
    bytes each) and the first send time, so no frame of all records is needed. Means of
    integers are exact (a float64 sum of integers below 2**53 is), the mean latency sums
    with ``math.fsum`` (:func:`analysis.metrics.mean_of`), and minimum, median and
    quantile do not depend on the order, so the figures equal
    :func:`analysis.metrics.aggregate` (and ``aggregate_phases``) on the records bit for
    bit; a non-integer value, or a summary key not counted here, makes the tally inexact
    (the runner then reads the columns back instead)."""

    KEYS = ("queries", "success", "hit_at_1", "hit_at_k", "answered_without_upstream",
            "mean_upstream_queries", "mean_round_trips", "mean_latency_ms",
            "median_latency_ms", "p95_latency_ms", "mean_bytes_up", "mean_bytes_down",
            "mean_packets", "mean_bytes", "mean_tools_examined", "search_space_reduction",
            "any_cache_hit", "start_s")

    def __init__(self) -> None:
        self._groups: dict[str, dict[int, _Sums]] = {}  # scheme -> phase -> sums
        self.exact = set(SUMMARY) | set(PHASE) <= set(self.KEYS)

    def add(self, row: dict) -> None:
        phases = self._groups.get(row["scheme"])
        if phases is None:
            phases = self._groups[row["scheme"]] = {}
        s = phases.get(row["phase"])
        if s is None:
            s = phases[row["phase"]] = _Sums()
        values = (row["success"], row["hit_at_1"], row["hit_at_k"],
                  bool(row["success"]) and row["exchanges"] == 0, row["exchanges"],
                  row["round_trips"], row["bytes_up"], row["bytes_down"],
                  row["packets_up"] + row["packets_down"], row["tools_examined"],
                  row["cache_hits"] > 0)
        sums = s.sums
        for key, value in zip(_SUMS, values, strict=True):
            if type(value) is not int and type(value) is not bool:
                self.exact = False
            sums[key] += value
        s.n += 1
        s.start = min(s.start, row["sent_s"])
        if row["success"]:
            s.latencies.append(row["latency_ms"])

    def drop(self, scheme: str) -> None:
        """Forget a scheme (its records were not kept)."""
        self._groups.pop(scheme, None)

    def schemes(self, tools: int) -> dict[str, dict]:
        """``summary.json`` "schemes", in the order the schemes were first counted."""
        out = {}
        for name, phases in self._groups.items():
            total = _Sums()
            for s in phases.values():
                total.merge(s)
            out[name] = _figures(total, tools, SUMMARY)
        return out

    def phases(self, tools: int) -> dict[str, list[dict]]:
        """``summary.json`` "phases": per scheme, one row per phase in phase order."""
        return {name: [{"phase": phase, **_figures(phases[phase], tools, PHASE)}
                       for phase in sorted(phases)]
                for name, phases in self._groups.items()}


def _figures(s: _Sums, tools: int, keys: tuple[str, ...]) -> dict:
    """The ``keys`` metrics of one group's sums, rounded as ``Metric.value`` rounds."""
    def mean(key: str) -> float:
        return float(s.sums[key]) / s.n

    ok = pd.Series(np.frombuffer(s.latencies, dtype=np.float64) if s.latencies else [],
                   dtype=np.float64)
    mean_ok = mean_of(s.latencies)
    out = {"queries": s.n, "success": round(mean("success"), 6),
           "hit_at_1": round(mean("hit_at_1"), 6), "hit_at_k": round(mean("hit_at_k"), 6),
           "answered_without_upstream": round(mean("without_upstream"), 6),
           "mean_upstream_queries": round(mean("exchanges"), 6),
           "mean_round_trips": round(mean("round_trips"), 6),
           "mean_latency_ms": round(mean_ok, 6) if mean_ok is not None else None,
           "median_latency_ms": round(float(ok.median()), 6) if len(ok) else None,
           "p95_latency_ms": round(float(ok.quantile(0.95)), 6) if len(ok) else None,
           "mean_bytes_up": round(mean("bytes_up"), 3),
           "mean_bytes_down": round(mean("bytes_down"), 3),
           "mean_packets": round(mean("packets"), 3),
           "mean_bytes": round((float(s.sums["bytes_up"]) + s.sums["bytes_down"]) / s.n, 3),
           "mean_tools_examined": round(mean("tools_examined"), 3),
           "search_space_reduction": (round(1 - mean("tools_examined") / tools, 6)
                                      if tools else None),
           "any_cache_hit": round(mean("any_cache_hit"), 6),
           "start_s": round(float(s.start), 9)}  # float: the first send is at int 0
    return {k: out[k] for k in keys}


def session_summary(sc: Scenario, df: pd.DataFrame, ns: Namespace) -> dict:
    """The summary's ``session`` block: per scheme with sessions, hits, evictions, guard
    trips, fallbacks, RBAC drops and tool tokens (static: every tool in scope bound at
    once; dynamic: meta-tool + always-include + bound tools, per query)."""
    spec = sc.agents.session
    assert spec is not None
    scopes = session_scopes(sc)
    static = static_tokens((session_tool(ns, t) for t in ns.tools), scopes)
    out: dict = {"static_tokens": static, "meta_tool_tokens": META_TOOL_TOKENS,
                 "fallback": spec.fallback, "schemes": {}}
    if spec.fallback == "registry":
        out["fallback_cost"] = "modelled"  # not carried by the engine (nodes.agent.session)
    for scheme, g in df[df.session.astype(bool)].groupby("scheme", sort=False):
        fb = g.fallback[g.fallback != ""].value_counts()
        out["schemes"][scheme] = {
            "queries": len(g), "hits": int(g.session_hit.sum()),
            "misses": int((~g.session_hit.astype(bool)).sum()),
            "hit_rate": round(float(g.session_hit.mean()), 6),
            "evictions_ttl": int(g.evictions_ttl.sum()),
            "evictions_lru": int(g.evictions_lru.sum()),
            "evictions_guard": int(g.evictions_guard.sum()),
            "guard_trips": int(g.guard_trips.sum()),
            "redundant_searches": int(g.redundant_search.sum()),
            "fallbacks": {k: int(v) for k, v in sorted(fb.items())},
            "rbac_filtered": int(g.rbac_filtered.sum()),
            "mean_tools_in_context": round(float(g.tools_in_context.mean()), 3),
            "mean_context_tokens": round(float(g.context_tokens.mean()), 3),
            "max_context_tokens": int(g.context_tokens.max()),
            "token_reduction": (round(1 - float(g.context_tokens.mean()) / static, 6)
                                if static else None),
        }
        if spec.fallback == "registry":
            out["schemes"][scheme]["fallback_modelled"] = {
                "bytes": int((g.fallback_bytes_up + g.fallback_bytes_down).sum()),
                "packets": int(g.fallback_packets.sum()),
                "mean_delay_ms": round(float(g.fallback_delay_ms[g.fallback == "registry"]
                                             .mean()), 6) if (g.fallback == "registry").any()
                else 0.0}
    return out


