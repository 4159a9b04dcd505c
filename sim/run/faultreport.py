"""What a fault schedule did to a run (``summary.json`` ``faults``): success over time,
extra latency and retries against the fault-free baseline, stale answers, packets the
faults dropped, recovery after each restart and load per replica
(:func:`fault_report`; the schedule itself is :mod:`sim.build.faults`)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import numpy as np
import pandas as pd

from sim.build.faults import FaultState
from sim.scenario import Scenario


def fault_report(sc: Scenario, df: pd.DataFrame, load: pd.DataFrame,
                 base: pd.DataFrame | None, plans: dict[str, FaultState | None],
                 streak: int = 5) -> tuple[pd.DataFrame, dict]:
    """Add ``during_fault`` to the records and summarise, per scheme: success (overall,
    during and outside faults) and over time, latency and retries against the fault-free
    ``base`` run (same queries), stale answers served, packets the faults dropped, time
    to recover after each restart (first packet the node gets; first query from which
    ``streak`` in a row succeed) and load per replica. ``plans``: per scheme, what its run's
    faults did (the schedule as its engine output reported it)."""
    assert sc.faults is not None
    width = sc.faults.bin
    df = df.copy()
    during = pd.Series(False, index=df.index)
    rel = pd.Series(0.0, index=df.index)
    for name, plan in plans.items():
        if plan is None:
            continue
        rows = df.scheme == name
        rel[rows] = df.sent_s[rows] - plan.origin
        during[rows] = np.array([plan.active_at(t) for t in df.sent_s[rows]], dtype=bool)
    df["during_fault"] = during
    out: dict[str, Any] = {"bin_s": width, "schemes": {}}
    for scheme, g in df.groupby("scheme", sort=False):
        plan = plans.get(str(scheme))
        ok = g[g.success]
        stale = g.cache_detail.map(lambda d: sum(v for k, v in json.loads(d).items()
                                                 if k.startswith("stale_")))
        times = rel[g.index]
        bins = (times // width).astype(int)
        timeline = [[round(float(b * width), 6), len(x), round(float(x.success.mean()), 6)]
                    for b, x in g.groupby(bins)]
        d = g[g.during_fault]
        entry: dict[str, Any] = {
            "queries": len(g),
            "success": round(float(g.success.mean()), 6),
            "queries_during_faults": len(d),
            "success_during_faults": round(float(d.success.mean()), 6) if len(d) else None,
            "success_outside_faults": round(float(g[~g.during_fault].success.mean()), 6)
            if (~g.during_fault).any() else None,
            "median_latency_ms": _q(ok.latency_ms, 0.5),
            "p95_latency_ms": _q(ok.latency_ms, 0.95),
            "mean_retries": round(float(g.retries.mean()), 6),
            "mean_timeouts": round(float(g.timeouts.mean()), 6),
            "stale_answers": int((stale > 0).sum()),
            "errors": {str(k): int(v) for k, v in g[~g.success].error.map(_error_kind)
                       .value_counts().items()},
            "timeline": timeline,
        }
        if base is not None:
            b = base[base.scheme == scheme].set_index("job")
            bok = b[b.success]
            entry["baseline"] = {
                "success": round(float(b.success.mean()), 6),
                "median_latency_ms": _q(bok.latency_ms, 0.5),
                "p95_latency_ms": _q(bok.latency_ms, 0.95),
                "mean_retries": round(float(b.retries.mean()), 6),
                "mean_round_trips": round(float(b.round_trips.mean()), 6),
            }
            both = g[g.success].set_index("job").join(
                bok[["latency_ms", "retries"]].add_suffix("_base"), how="inner")
            extra = both.latency_ms - both.latency_ms_base
            entry["extra_latency_ms"] = {"mean": _r(extra.mean()), "median": _q(extra, 0.5),
                                         "p95": _q(extra, 0.95)}
            entry["extra_retries"] = _r((both.retries - both.retries_base).mean())
            hit = both[both.during_fault]
            extra = hit.latency_ms - hit.latency_ms_base
            entry["extra_latency_during_faults_ms"] = {
                "mean": _r(extra.mean()), "median": _q(extra, 0.5), "p95": _q(extra, 0.95),
                "p99": _q(extra, 0.99), "max": _r(extra.max())}
            entry["success_drop"] = round(entry["baseline"]["success"] - entry["success"], 6)
        if plan is not None:
            entry["dropped_packets"] = dict(sorted(plan.drops.items()))
            mine = load[(load.scheme == scheme) & (load.rx_packets > 0)]
            entry["recovery"] = _recovery(plan, g, times, streak, set(mine.node))
        entry["load_by_replica"] = _replica_load(load[load.scheme == scheme])
        out["schemes"][str(scheme)] = entry
    return df, out


def _recovery(plan: FaultState, g: pd.DataFrame, times: pd.Series, streak: int,
              used: set[str]) -> list[dict]:
    restarts = [r for r in plan.recovery() if r["address"] in used]
    order = times.sort_values()
    success = g.success.reindex(order.index).tolist()
    when = order.tolist()
    for r in restarts:
        r["queries_ok_after_s"] = None
        for i, t in enumerate(when):
            if t >= r["restart_s"] and all(success[i:i + streak]) and i + streak <= len(when):
                r["queries_ok_after_s"] = round(t - r["restart_s"], 6)
                break
    # one row per fault event: the slowest of its targets
    merged: dict[tuple[int, float], dict] = {}
    for r in restarts:
        k = (r["fault"], r["restart_s"])
        m = merged.setdefault(k, {"fault": r["fault"], "down_s": round(r["down_s"], 6),
                                  "restart_s": round(r["restart_s"], 6), "nodes": 0,
                                  "first_packet_after_s": 0.0, "never_contacted": 0,
                                  "queries_ok_after_s": r["queries_ok_after_s"]})
        m["nodes"] += 1
        if r["first_packet_after_s"] is None:
            m["never_contacted"] += 1
        else:
            m["first_packet_after_s"] = max(m["first_packet_after_s"],
                                             r["first_packet_after_s"])
    return sorted(merged.values(), key=lambda m: (m["restart_s"], m["fault"]))


def _replica_load(load: pd.DataFrame) -> dict[str, int]:
    """Packets received per replica index (zone servers ranked by address; registries)."""
    out: Counter[str] = Counter()
    if load.empty:
        return {}
    servers = load[load.zone.fillna("") != ""]
    for _, zone in servers.groupby("zone"):
        ranked = sorted(_node_packets(zone),
                        key=lambda r: tuple(int(x) for x in r[0].split(".")))
        for i, (_node, rx) in enumerate(ranked):
            out[f"zone_replica_{i}"] += rx
    for node, rx in _node_packets(load[load.role == "registry"]):
        out[f"registry_{node}"] += rx
    return dict(sorted(out.items()))


def _node_packets(load: pd.DataFrame) -> list[tuple[str, int]]:
    """(address, packets received) per row of load records."""
    return [(str(node), int(rx)) for node, rx in zip(load["node"].tolist(),
                                                      load["rx_packets"].tolist(), strict=True)]


def _error_kind(error: str) -> str:
    text = str(error or "")
    return text.split(": ", 1)[-1] if text else "no tools"


def _q(series: pd.Series, q: float) -> float | None:
    return round(float(series.quantile(q)), 6) if len(series) else None


def _r(value: float) -> float | None:
    return None if pd.isna(value) else round(float(value), 6)
