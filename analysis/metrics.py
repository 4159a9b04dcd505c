"""The metric table: every metric a run, sweep or evaluation reports, once, with its key
(the name in ``summary.json``, ``sweep.csv`` and the evaluation's ``summary.csv``), table
label, unit, format, figure axis label and, for the per-query aggregates, how it is
computed from a group of records. The console tables, reports, figures, ``per_phase`` and
the run summary all read it from here.

    from analysis.metrics import METRICS, aggregate, grouped
    aggregate(records, tools=2000)      # {scheme: {key: value}}: summary.json "schemes"
    grouped(records, ["scheme", "phase"], PHASE)   # the same, unrounded, as a frame
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import pandas as pd

#: a statistic of one group's records; ``tools`` is the namespace's tool count
Stat = Callable[["pd.DataFrame", int], float | None]
#: one record (a dict of its columns) or a group of records (a frame): a fold's term reads
#: either, so one expression serves the streaming tally and the frame
Row = Any
FoldKind = Literal["count", "mean", "min", "max", "ok_quantile", "ok_mean", "space"]


@dataclass(frozen=True)
class Fold:
    """How a per-query metric comes from a group of records, row by row, so that the
    run's streaming tally (``sim.run.summary.Tally``) and a frame of records
    (:meth:`value`) compute it from this one definition: ``count`` (rows), ``mean``,
    ``min`` or ``max`` of ``term`` (a function of one record, or of a frame's columns),
    ``ok_quantile`` (quantile ``q``, None: the median, of the successful records'
    ``latency_ms``), ``ok_mean`` (their mean, summed with ``math.fsum``), ``space`` (1 -
    the mean of ``term`` / the namespace's tools; None without tools)."""

    kind: FoldKind
    term: Callable[[Row], Any] | None = None
    q: float | None = None
    scale: float = 1.0  # a mean's unit (the term's unit times this)

    def __post_init__(self) -> None:
        needs_term = self.kind in ("mean", "min", "max", "space")
        if needs_term != (self.term is not None):
            raise ValueError(f"Fold({self.kind!r}): {'needs' if needs_term else 'takes no'} "
                             f"term")

    def value(self, g: pd.DataFrame, tools: int) -> float | None:
        """The fold over a frame of records (the record-based path)."""
        term = self.term
        kind = self.kind
        if kind == "count":
            return len(g)
        if kind in ("ok_quantile", "ok_mean"):
            ok = g.latency_ms[g.success]
            if kind == "ok_mean":
                return mean_of(ok.tolist())
            if not len(ok):
                return None
            return float(ok.median()) if self.q is None else float(ok.quantile(self.q))
        assert term is not None
        column = term(g)
        if kind == "mean":
            return float(column.mean()) * self.scale
        if kind == "min":
            return float(column.min())
        if kind == "max":
            return float(column.max())
        return 1 - float(column.mean()) / tools if tools else None  # space


@dataclass(frozen=True)
class Metric:
    key: str
    label: str  # column header in tables
    unit: str  # "" for counts and shares
    fmt: str  # str.format of one value in tables
    meaning: str
    axis: str = ""  # axis label in figures ("" = label)
    fold: Fold | None = None  # a per-query aggregate: how (None: computed elsewhere)
    digits: int | None = None  # rounding in summary.json (None with a fold: an integer)

    @property
    def axis_label(self) -> str:
        return self.axis or self.label

    @property
    def stat(self) -> Stat | None:
        """The statistic of one group's records, unrounded (its :attr:`fold`'s value)."""
        fold = self.fold
        return None if fold is None else fold.value

    def value(self, records: pd.DataFrame, tools: int = 0) -> float | int | None:
        """The statistic of ``records`` as ``summary.json`` stores it (rounded)."""
        if self.fold is None:
            raise ValueError(f"metric {self.key} is not aggregated from records")
        return self.rounded(self.fold.value(records, tools))

    def rounded(self, v: float | None) -> float | int | None:
        """``v`` as ``summary.json`` stores it."""
        if v is None:
            return None
        return int(v) if self.digits is None else round(float(v), self.digits)


def mean_of(values: Iterable[float]) -> float | None:
    """The mean of ``values`` with a correctly rounded sum (``math.fsum``), so it does not
    depend on their order (a run's tally and its records agree bit for bit); None if empty."""
    values = list(values)
    return math.fsum(values) / len(values) if values else None


def _col(name: str) -> Callable[[Row], Any]:
    return lambda r: r[name]


def _mean(column: str) -> Fold:
    return Fold("mean", _col(column))


_ALL = (
    # per-query aggregates (summary.json "schemes", per_phase)
    Metric("queries", "queries", "", "{}", "discoveries (queries) in the group",
           fold=Fold("count")),
    Metric("success", "success", "", "{:.1%}",
           "share of discoveries that returned an answer", fold=_mean("success"), digits=6),
    Metric("hit_at_1", "hit@1", "", "{:.1%}",
           "share whose first answer is a ground-truth tool", fold=_mean("hit_at_1"), digits=6),
    Metric("hit_at_k", "hit@K", "", "{:.1%}",
           "share with a ground-truth tool among the K answers", fold=_mean("hit_at_k"),
           digits=6),
    Metric("answered_without_upstream", "no upstream", "", "{:.1%}",
           "share of discoveries answered (success) without any upstream query "
           "(exchanges = 0): from the resolver's caches alone",
           axis="answered without upstream queries",
           fold=Fold("mean", lambda r: r["success"] & (r["exchanges"] == 0)), digits=6),
    Metric("mean_upstream_queries", "upstream queries", "queries", "{:.2f}",
           "mean upstream queries per discovery, retries included (ToolDNS: resolver to "
           "servers; registries: HTTP calls)", axis="upstream queries per discovery",
           fold=_mean("exchanges"), digits=6),
    Metric("mean_round_trips", "RTTs", "round trips", "{:.2f}",
           "mean sequential round trips per query", axis="round trips per query",
           fold=_mean("round_trips"), digits=6),
    Metric("mean_latency_ms", "mean ms", "ms", "{:.2f}",
           "mean discovery latency of the successful queries (null: none succeeded)",
           axis="mean latency (ms)", fold=Fold("ok_mean"), digits=6),
    Metric("median_latency_ms", "median ms", "ms", "{:.2f}",
           "median discovery latency of the successful queries (null: none succeeded)",
           axis="median latency (ms)", fold=Fold("ok_quantile"), digits=6),
    Metric("p95_latency_ms", "p95 ms", "ms", "{:.2f}",
           "95th percentile latency of the successful queries (null: none succeeded)",
           axis="p95 latency (ms)", fold=Fold("ok_quantile", q=0.95), digits=6),
    Metric("mean_bytes_up", "bytes up", "bytes", "{:.0f}",
           "mean IP bytes sent towards the servers per query", fold=_mean("bytes_up"),
           digits=3),
    Metric("mean_bytes_down", "bytes down", "bytes", "{:.0f}",
           "mean IP bytes received per query", axis="bytes down per query",
           fold=_mean("bytes_down"), digits=3),
    Metric("mean_packets", "packets", "packets", "{:.2f}",
           "mean IP packets (both directions) per query",
           fold=Fold("mean", lambda r: r["packets_up"] + r["packets_down"]), digits=3),
    Metric("mean_bytes", "bytes", "bytes", "{:.0f}",
           "mean IP bytes (both directions) per query",
           fold=Fold("mean", lambda r: r["bytes_up"] + r["bytes_down"]), digits=3),
    Metric("mean_tools_examined", "C(q)", "items", "{:.1f}",
           "mean items scored per query C(q)", axis="items examined C(q)",
           fold=_mean("tools_examined"), digits=3),
    Metric("mean_encodings", "encodings", "encodings", "{:.2f}",
           "mean intent encodings per query (ranking passes; embeddings with a dense "
           "scorer)", fold=_mean("encodings"), digits=3),
    Metric("mean_compute_ms", "compute ms", "ms", "{:.3f}",
           "mean search compute per query under the search compute model "
           "(nodes.searchcost: encodings and items scored)", axis="search compute (ms)",
           fold=Fold("mean", _col("compute_ns"), scale=1e-6), digits=6),
    Metric("search_space_reduction", "search space saved", "", "{:.1%}",
           "1 - mean C(q) / tools in the namespace (null: no tools)",
           fold=Fold("space", _col("tools_examined")),
           digits=6),
    Metric("any_cache_hit", "any cache hit", "", "{:.1%}",
           "share of discoveries with at least one resolver cache hit anywhere in their "
           "walks (NS, referral, SRV or A record), whether or not they still queried "
           "upstream (see answered_without_upstream)",
           fold=Fold("mean", lambda r: r["cache_hits"] > 0), digits=6),
    Metric("start_s", "starts at s", "s", "{:.1f}", "send time of the group's first query",
           fold=Fold("min", _col("sent_s")), digits=9),
    # trust (summary.json "trust.schemes")
    Metric("policy", "policy", "", "{}", "trust policy of the scheme"),
    Metric("rogue_returned", "rogue returned", "tools", "{}",
           "rogue tools among all answers"),
    Metric("queries_with_rogue", "queries with rogue", "queries", "{}",
           "queries with a rogue tool among their answers"),
    Metric("rogue_at_1", "rogue at #1", "queries", "{}",
           "queries whose first answer is a rogue tool"),
    Metric("recall_at_k", "recall@K", "", "{:.1%}", "share with a ground-truth tool in the K"),
    Metric("recall_cost", "recall cost", "", "{:+.1%}", "recall@K lost against the open policy"),
    Metric("latency_cost_ms", "latency cost ms", "ms", "{:+.2f}",
           "extra median latency against the open policy"),
    # faults (summary.json "faults.schemes", flattened by analysis.report.fault_rows)
    Metric("success_during_faults", "during faults", "", "{:.1%}",
           "success of the queries sent while a fault was active"),
    Metric("success_outside_faults", "outside faults", "", "{:.1%}",
           "success of the queries sent while no fault was active"),
    Metric("baseline_success", "fault-free", "", "{:.1%}",
           "success of the same workload without faults"),
    Metric("extra_mean_ms", "extra ms during (mean)", "ms", "{:.2f}",
           "mean extra latency during faults against the fault-free run"),
    Metric("extra_p95_ms", "extra ms during (p95)", "ms", "{:.2f}",
           "95th percentile extra latency during faults"),
    Metric("mean_retries", "retries", "retries", "{:.3f}", "mean upstream retries per query"),
    Metric("stale_answers", "stale answers", "queries", "{}",
           "queries answered from stale cache entries"),
    Metric("recovered_after_s", "recovered after s (worst)", "s", "{:.2f}",
           "after the slowest restart, time until queries succeed again"),
    # retrieval evaluation (summary.csv of tooldns eval)
    Metric("hit1_cat", "hit@1 category", "", "{:.1%}",
           "the top answer is in the query's category"),
    Metric("hitk_cat", "hit@K category", "", "{:.1%}",
           "one of the top K is in the query's category"),
    Metric("hit1_tool", "hit@1 tool", "", "{:.1%}", "the top answer is a ground-truth tool"),
    Metric("hitk_tool", "hit@K tool", "", "{:.1%}", "one of the top K is a ground-truth tool"),
    Metric("recall_k", "recall@K", "", "{:.1%}",
           "share of the ground-truth tools in the top K"),
    Metric("rr", "MRR", "", "{:.3f}", "mean reciprocal rank of the first ground-truth tool"),
    Metric("examined", "C(q)", "items", "{:.1f}", "items scored per query"),
    Metric("examined_frac", "C(q) / pool", "", "{:.3f}", "items scored per item in the pool"),
    Metric("tokens", "LLM tokens", "tokens", "{:.0f}", "LLM tokens per query"),
    Metric("time_ms", "ms per query", "ms", "{:.2f}", "wall time per query"),
)

#: the footnote of the comparison table per scheme
NOTE = ("per query; no upstream = answered from the resolver's caches alone; upstream "
        "queries = resolver→servers (registries: HTTP calls), retries included; latency "
        "of the successful queries; RTTs = sequential round trips (ToolDNS: "
        "resolver↔servers; registries: TCP/TLS handshakes + HTTP calls); bytes/packets at "
        "the IP layer incl. the agent↔resolver exchange; C(q) = items scored (servers, "
        "registry, ANS client); compute = the search compute model's time for the "
        "query's ranking passes (nodes.searchcost)")

#: every metric by key
METRICS: dict[str, Metric] = {m.key: m for m in _ALL}

#: summary.json "schemes": the per-scheme aggregates of a run's records
SUMMARY = ("queries", "success", "hit_at_1", "hit_at_k", "answered_without_upstream",
           "mean_upstream_queries", "mean_round_trips", "mean_latency_ms",
           "median_latency_ms", "p95_latency_ms", "mean_bytes_up", "mean_bytes_down",
           "mean_packets", "mean_tools_examined", "mean_encodings", "mean_compute_ms",
           "search_space_reduction", "any_cache_hit")
#: the comparison table per scheme (console, reports, sweep report); any_cache_hit is left
#: out: nearly every walk hits some cache, so it hides the effect answered_without_upstream
#: shows
SCHEME_TABLE = tuple(k for k in SUMMARY if k not in ("search_space_reduction",
                                                     "any_cache_hit", "mean_encodings"))
#: per (scheme, phase) aggregates: summary.json "phases" and analysis.results.per_phase
PHASE = ("queries", "success", "hit_at_k", "answered_without_upstream",
         "mean_upstream_queries", "mean_round_trips", "mean_latency_ms", "median_latency_ms",
         "p95_latency_ms", "mean_bytes", "any_cache_hit", "start_s")
#: the per-phase table of reports
PHASE_TABLE = tuple(k for k in PHASE if k not in ("hit_at_k", "any_cache_hit"))
#: what a repeated workload changes: the per-phase console table (``a → b → c``)
PHASE_CHANGE = ("answered_without_upstream", "mean_upstream_queries", "mean_latency_ms",
                "median_latency_ms")
#: the sweep's console table and figures (columns of sweep.csv)
SWEEP_SHOWN = ("success", "hit_at_k", "mean_round_trips", "median_latency_ms",
               "mean_bytes_down", "mean_tools_examined")
TRUST_TABLE = ("policy", "rogue_returned", "queries_with_rogue", "rogue_at_1", "recall_at_k",
               "hit_at_1", "recall_cost", "median_latency_ms", "latency_cost_ms")
FAULT_TABLE = ("success", "success_during_faults", "success_outside_faults",
               "baseline_success", "extra_mean_ms", "extra_p95_ms", "mean_retries",
               "stale_answers", "recovered_after_s")
EVAL_TABLE = ("queries", "hit1_cat", "hitk_cat", "hit1_tool", "hitk_tool", "recall_k", "rr",
              "examined", "examined_frac", "tokens", "time_ms")


def format_value(fmt: str, value: object) -> str:
    """One table cell: ``-`` for a missing or NaN value, ``str`` if ``fmt`` does not fit."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    try:
        return fmt.format(value)
    except (ValueError, TypeError):
        return str(value)


def metrics(keys: Iterable[str]) -> list[Metric]:
    """The metrics of ``keys``, in that order."""
    return [METRICS[k] for k in keys]


def summarise_group(records: pd.DataFrame, tools: int = 0, keys: Iterable[str] = SUMMARY
                    ) -> dict[str, Any]:
    """The ``keys`` metrics of one group of records, rounded as ``summary.json`` has them."""
    return {k: METRICS[k].value(records, tools) for k in keys}


def aggregate(records: pd.DataFrame, tools: int, by: str = "scheme",
              keys: Iterable[str] = SUMMARY) -> dict[str, dict[str, Any]]:
    """Per ``by`` value (in order of appearance), the ``keys`` metrics of its records:
    ``summary.json`` "schemes" (``tools``: tools in the namespace)."""
    keys = tuple(keys)
    return {str(name): summarise_group(g, tools, keys)
            for name, g in records.groupby(by, sort=False)}


def aggregate_phases(records: pd.DataFrame, tools: int, keys: Iterable[str] = PHASE
                     ) -> dict[str, list[dict[str, Any]]]:
    """Per scheme (in order of appearance), one row per workload phase (in phase order):
    ``{"phase": p, **keys metrics}``, rounded: ``summary.json`` "phases"."""
    keys = tuple(keys)
    out: dict[str, list[dict[str, Any]]] = {}
    for scheme, g in records.groupby("scheme", sort=False):
        out[str(scheme)] = [{"phase": int(phase), **summarise_group(g[g.phase == phase], tools,
                                                                    keys)}
                            for phase in sorted(g.phase.unique())]
    return out



def grouped(records: pd.DataFrame, by: list[str], keys: Iterable[str], tools: int = 0
            ) -> pd.DataFrame:
    """One row per ``by`` group (in order of appearance; index named ``by``), one column
    per metric of ``keys`` that is aggregated from records, unrounded (NaN: no value)."""
    import pandas as pd

    shown = [m for m in metrics(keys) if m.stat is not None]
    index: list[Any] = []
    rows = []
    for name, g in records.groupby(by, sort=False):
        index.append(name if len(by) > 1 else name[0])
        rows.append({m.key: _nan(m.stat(g, tools)) for m in shown if m.stat is not None})
    idx = (pd.MultiIndex.from_tuples(index, names=by) if len(by) > 1
           else pd.Index(index, name=by[0]))
    out = pd.DataFrame(rows, index=idx, columns=[m.key for m in shown])
    if "queries" in out and len(out):
        out["queries"] = out["queries"].astype(int)
    return out


def _nan(value: float | None) -> float:
    return float("nan") if value is None else value
