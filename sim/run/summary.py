"""The run's ``summary.json`` blocks computed from the records: per-scheme outcome,
latency, bytes and search space; the replay's schedule error; the session layer's block."""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.metrics import aggregate
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
              "completed": len(output.stubs)}
    if dot:
        replay.update({key: sum(c.get(key, 0) for c in output.load.values())
                       for key in ("dot_opened", "dot_closed")})
    return replay


def summarise(sc: Scenario, engine: str, df: pd.DataFrame, ns: Namespace) -> dict:
    """The summary's head and its per-scheme block, from the per-query records."""
    schemes = aggregate(df, len(ns.tools))  # the metric table: summary.json "schemes"
    return {"scenario": sc.name, "engine": engine, "seed": sc.seed, "namespace": ns.origin,
            "namespace_stats": ns.stats(), "schemes": schemes}


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


