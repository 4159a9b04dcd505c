"""The run's ``summary.json`` blocks: per-scheme (and, with workload phases, per-phase)
outcome, latency, upstream queries, bytes and search space (from the records, or counted
as they are made: :class:`Tally`); the replay's schedule error; the session layer's
block."""

from __future__ import annotations

from array import array
from collections.abc import Mapping

import numpy as np
import pandas as pd

from analysis.metrics import (
    METRICS,
    PHASE,
    SUMMARY,
    Fold,
    Metric,
    aggregate,
    aggregate_phases,
    mean_of,
)
from nodes.agent.context import META_TOOL_TOKENS, static_tokens
from sim.build.sessions import session_scopes, session_tool
from sim.engines.base import EngineOutput
from sim.engines.fidelity import fidelity
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
    errors = _error_stats(output.schedule_error)
    replay: dict[str, object] = {"schedule_error_ms": errors,
                                 "warm_time_s": round(output.warm_time, 9),
                                 "end_time_s": round(output.end_time, 9),
                                 "lost_packets": output.lost,
                                 "completed": output.completed()}
    if output.link_emulation is not None:
        replay["link_emulation"] = output.link_emulation
    if output.model_loads is not None:
        replay["host_model_loads"] = output.model_loads
    if output.stock is not None:
        replay["stock_resolver"] = output.stock
    if output.hop_times is not None:  # a real-time engine: its timing against the model
        replay["fidelity"] = fidelity(output.hop_times, errors.get("p99"))
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


class _Sums:
    """One group's running figures: rows, each metric's sum / minimum / maximum of its
    term, the latencies of successful discoveries (8 bytes each) and whether every summed
    term was an integer (a float64 sum of integers below 2**53 is exact)."""

    __slots__ = ("exact", "latencies", "n", "values")

    def __init__(self) -> None:
        self.n = 0
        self.values: dict[str, int | float] = {}  # metric key -> its sum (mean), min or max
        self.latencies = array("d")
        self.exact = True

    def add(self, row: dict, folds: list[tuple[str, Fold]], latency: bool) -> None:
        self.n += 1
        values = self.values
        for key, fold in folds:
            term = fold.term
            assert term is not None  # folds with a term only (see Tally)
            v = term(row)
            kind = fold.kind
            if kind == "mean" or kind == "space":  # a sum: exact over integers only
                if type(v) is not int and type(v) is not bool:
                    self.exact = False
                values[key] = values.get(key, 0) + v
            elif key not in values:
                values[key] = v
            elif kind == "min":
                values[key] = min(values[key], v)
            else:
                values[key] = max(values[key], v)
        if latency and row["success"]:
            self.latencies.append(row["latency_ms"])

    def merge(self, other: _Sums, kinds: Mapping[str, str]) -> None:
        """Add ``other``'s rows (``kinds``: each metric key's fold kind)."""
        self.n += other.n
        self.exact = self.exact and other.exact
        values = self.values
        for key, v in other.values.items():
            if key not in values:
                values[key] = v
            elif kinds[key] == "min":
                values[key] = min(values[key], v)
            elif kinds[key] == "max":
                values[key] = max(values[key], v)
            else:
                values[key] += v
        self.latencies.extend(other.latencies)

    def figure(self, metric: Metric, tools: int) -> float | int | None:
        """``metric`` over this group, rounded as ``Metric.value`` rounds the frame's."""
        fold = metric.fold
        assert fold is not None
        kind = fold.kind
        if kind == "count":
            return metric.rounded(self.n)
        if kind == "ok_mean":
            return metric.rounded(mean_of(self.latencies))
        if kind == "ok_quantile":
            ok = pd.Series(np.frombuffer(self.latencies, dtype=np.float64)
                           if self.latencies else [], dtype=np.float64)
            if not len(ok):
                return None
            return metric.rounded(float(ok.median()) if fold.q is None
                                  else float(ok.quantile(fold.q)))
        v = self.values[metric.key]
        if kind == "mean":
            return metric.rounded(float(v) / self.n * fold.scale)
        if kind == "space":
            return metric.rounded(1 - float(v) / self.n / tools if tools else None)
        return metric.rounded(float(v))  # min, max


class Tally:
    """The summary's ``schemes`` and ``phases`` blocks counted row by row as records are
    made, from the metric table's own definitions (each metric's
    :class:`analysis.metrics.Fold`), so no frame of all records is needed and a metric
    added to the table is counted here too. Per (scheme, phase): the rows, each metric's
    sum, minimum or maximum, and the latencies of successful discoveries. Means of
    integers are exact, the mean latency sums with ``math.fsum``, minimum, median and
    quantile do not depend on the order: the figures equal
    :func:`analysis.metrics.aggregate` (and ``aggregate_phases``) on the records bit for
    bit. A non-integer term, or a summary metric without a fold, makes the tally inexact
    (the runner then reads the columns back instead)."""

    def __init__(self) -> None:
        self._groups: dict[str, dict[int, _Sums]] = {}  # scheme -> phase -> sums
        keys = dict.fromkeys((*SUMMARY, *PHASE))
        self._metrics = [METRICS[k] for k in keys]
        self._folds = [(m.key, m.fold) for m in self._metrics
                       if m.fold is not None and m.fold.term is not None]
        self._kinds = {key: fold.kind for key, fold in self._folds}
        self._latency = any(m.fold is not None and m.fold.kind.startswith("ok_")
                            for m in self._metrics)
        self._folded = all(m.fold is not None for m in self._metrics)

    @property
    def exact(self) -> bool:
        """Whether the tally's figures are the records' (every metric folded, every term an
        integer)."""
        return self._folded and all(s.exact for phases in self._groups.values()
                                    for s in phases.values())

    def add(self, row: dict) -> None:
        phases = self._groups.get(row["scheme"])
        if phases is None:
            phases = self._groups[row["scheme"]] = {}
        s = phases.get(row["phase"])
        if s is None:
            s = phases[row["phase"]] = _Sums()
        s.add(row, self._folds, self._latency)

    def drop(self, scheme: str) -> None:
        """Forget a scheme (its records were not kept)."""
        self._groups.pop(scheme, None)

    def schemes(self, tools: int) -> dict[str, dict]:
        """``summary.json`` "schemes", in the order the schemes were first counted."""
        out = {}
        for name, phases in self._groups.items():
            total = _Sums()
            for s in phases.values():
                total.merge(s, self._kinds)
            out[name] = {k: total.figure(METRICS[k], tools) for k in SUMMARY}
        return out

    def phases(self, tools: int) -> dict[str, list[dict]]:
        """``summary.json`` "phases": per scheme, one row per phase in phase order."""
        return {name: [{"phase": phase, **{k: phases[phase].figure(METRICS[k], tools)
                                           for k in PHASE}}
                       for phase in sorted(phases)]
                for name, phases in self._groups.items()}


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


