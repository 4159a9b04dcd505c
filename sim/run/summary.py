"""The run's ``summary.json`` blocks: per-scheme outcome, latency, bytes and search space
(from the records, or counted as they are made: :class:`Tally`); the replay's schedule
error; the session layer's block."""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from analysis.metrics import SUMMARY, aggregate
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
    if dot:
        replay.update({key: sum(c.get(key, 0) for c in output.load.values())
                       for key in ("dot_opened", "dot_closed")})
    return replay


def summarise(sc: Scenario, engine: str, df: pd.DataFrame | Tally, ns: Namespace) -> dict:
    """The summary's head and its per-scheme block, from the per-query records (or their
    :class:`Tally`, which must be :attr:`Tally.exact`)."""
    # the metric table: summary.json "schemes"
    schemes = df.schemes(len(ns.tools)) if isinstance(df, Tally) else aggregate(df, len(ns.tools))
    return {"scenario": sc.name, "engine": engine, "seed": sc.seed, "namespace": ns.origin,
            "namespace_stats": ns.stats(), "schemes": schemes}


#: integer columns a :class:`Tally` adds up (per row, ``packets`` = up + down)
_SUMS = ("success", "hit_at_1", "hit_at_k", "round_trips", "bytes_up", "bytes_down",
         "packets", "tools_examined", "cache_helped")


@dataclass
class _Sums:
    n: int = 0
    sums: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_SUMS, 0))
    latencies: array = field(default_factory=lambda: array("d"))  # successful ones (ms)


class Tally:
    """The summary's ``schemes`` block counted row by row as records are made: integer
    sums per scheme and the latencies of successful discoveries (8 bytes each), so no
    frame of all records is needed. Means of integers are exact (a float64 sum of
    integers below 2**53 is), and median and quantile do not depend on the order, so the
    figures equal :func:`analysis.metrics.aggregate` on the records bit for bit; a
    non-integer value, or a summary key not counted here, makes the tally inexact (the
    runner then reads the columns back instead)."""

    KEYS = ("queries", "success", "hit_at_1", "hit_at_k", "mean_round_trips",
            "median_latency_ms", "p95_latency_ms", "mean_bytes_up", "mean_bytes_down",
            "mean_packets", "mean_tools_examined", "search_space_reduction",
            "cache_hit_queries")

    def __init__(self) -> None:
        self._schemes: dict[str, _Sums] = {}
        self.exact = set(SUMMARY) <= set(self.KEYS)

    def add(self, row: dict) -> None:
        s = self._schemes.get(row["scheme"])
        if s is None:
            s = self._schemes[row["scheme"]] = _Sums()
        values = (row["success"], row["hit_at_1"], row["hit_at_k"], row["round_trips"],
                  row["bytes_up"], row["bytes_down"], row["packets_up"] + row["packets_down"],
                  row["tools_examined"], row["cache_hits"] > 0)
        sums = s.sums
        for key, value in zip(_SUMS, values, strict=True):
            if type(value) is not int and type(value) is not bool:
                self.exact = False
            sums[key] += value
        s.n += 1
        if row["success"]:
            s.latencies.append(row["latency_ms"])

    def drop(self, scheme: str) -> None:
        """Forget a scheme (its records were not kept)."""
        self._schemes.pop(scheme, None)

    def schemes(self, tools: int) -> dict[str, dict]:
        """``summary.json`` "schemes", in the order the schemes were first counted."""
        return {name: _figures(s, tools) for name, s in self._schemes.items()}


def _figures(s: _Sums, tools: int) -> dict:
    def mean(key: str) -> float:
        return float(s.sums[key]) / s.n

    ok = pd.Series(np.frombuffer(s.latencies, dtype=np.float64) if s.latencies else [],
                   dtype=np.float64)
    out = {"queries": s.n, "success": round(mean("success"), 6),
           "hit_at_1": round(mean("hit_at_1"), 6), "hit_at_k": round(mean("hit_at_k"), 6),
           "mean_round_trips": round(mean("round_trips"), 6),
           "median_latency_ms": round(float(ok.median()), 6) if len(ok) else None,
           "p95_latency_ms": round(float(ok.quantile(0.95)), 6) if len(ok) else None,
           "mean_bytes_up": round(mean("bytes_up"), 3),
           "mean_bytes_down": round(mean("bytes_down"), 3),
           "mean_packets": round(mean("packets"), 3),
           "mean_tools_examined": round(mean("tools_examined"), 3),
           "search_space_reduction": round(1 - mean("tools_examined") / tools, 6),
           "cache_hit_queries": round(mean("cache_helped"), 6)}
    return {k: out[k] for k in SUMMARY}


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


