"""The metric table's definitions on a hand-made records frame: each per-query aggregate
counts what its meaning says, the run's tally equals the records' aggregate (per scheme and
per phase), and every consumer (``per_phase``, ``Run.by_scheme``) reads the same keys."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from analysis.metrics import (
    METRICS,
    PHASE,
    PHASE_CHANGE,
    PHASE_TABLE,
    SCHEME_TABLE,
    SUMMARY,
    aggregate,
    aggregate_phases,
    grouped,
    mean_of,
)
from analysis.results import Run, per_phase
from sim.run.summary import Tally


def _row(scheme: str, phase: int, success: bool, exchanges: int, latency: float,
         cache_hits: int, sent: float) -> dict:
    return {"scheme": scheme, "phase": phase, "success": success, "hit_at_1": success,
            "hit_at_k": success, "exchanges": exchanges, "round_trips": exchanges,
            "latency_ms": latency, "bytes_up": 100 + 10 * exchanges,
            "bytes_down": 200 + 20 * exchanges, "packets_up": 1 + exchanges,
            "packets_down": 1 + exchanges, "tools_examined": 3 * exchanges,
            "encodings": exchanges, "compute_ns": 10_000 * exchanges + 100 * 3 * exchanges,
            "cache_hits": cache_hits, "sent_s": sent}


#: scheme "a": phase 0 (cold) and phase 1 (warm); "reg": a registry (always asks)
ROWS = [
    # phase 0: one answered from the caches alone, two walks that hit some cache yet
    # still asked upstream, one failure without any upstream query (not "answered")
    _row("a", 0, True, 0, 5.0, 3, 0.5),
    _row("a", 0, True, 2, 40.0, 1, 0.1),
    _row("a", 0, True, 4, 90.0, 2, 0.2),
    _row("a", 0, False, 0, 500.0, 0, 0.3),
    # phase 1: three from the caches, one asked once
    _row("a", 1, True, 0, 4.0, 2, 10.0),
    _row("a", 1, True, 0, 6.0, 2, 10.5),
    _row("a", 1, True, 0, 5.0, 2, 11.0),
    _row("a", 1, True, 1, 25.0, 2, 12.0),
    _row("reg", 0, True, 2, 30.0, 0, 0.1),
    _row("reg", 1, True, 2, 50.0, 0, 10.0),
]


@pytest.fixture
def records() -> pd.DataFrame:
    return pd.DataFrame(ROWS)


def _value(key: str, df: pd.DataFrame, tools: int = 0) -> float | int | None:
    return METRICS[key].value(df, tools)


def test_answered_without_upstream_counts_successes_with_no_upstream_query(
        records: pd.DataFrame) -> None:
    a0 = records[(records.scheme == "a") & (records.phase == 0)]
    # of 4: one answered from the caches; the failure with no upstream query is not
    assert _value("answered_without_upstream", a0) == 0.25
    a1 = records[(records.scheme == "a") & (records.phase == 1)]
    assert _value("answered_without_upstream", a1) == 0.75
    assert _value("answered_without_upstream", records[records.scheme == "reg"]) == 0.0


def test_any_cache_hit_counts_any_hit_even_when_upstream_was_asked(
        records: pd.DataFrame) -> None:
    a0 = records[(records.scheme == "a") & (records.phase == 0)]
    assert _value("any_cache_hit", a0) == 0.75  # 3 of 4 hit a cache; only 1 skipped upstream
    a1 = records[(records.scheme == "a") & (records.phase == 1)]
    assert _value("any_cache_hit", a1) == 1.0


def test_latency_mean_median_p95_are_of_the_successful_queries(records: pd.DataFrame) -> None:
    a0 = records[(records.scheme == "a") & (records.phase == 0)]
    assert _value("mean_latency_ms", a0) == pytest.approx(45.0)  # (5 + 40 + 90) / 3
    assert _value("median_latency_ms", a0) == 40.0
    assert _value("p95_latency_ms", a0) == pytest.approx(85.0)  # 40 + 0.9 * (90 - 40)
    failed = a0[~a0.success]
    assert _value("mean_latency_ms", failed) is None
    assert _value("median_latency_ms", failed) is None


def test_upstream_queries_and_start(records: pd.DataFrame) -> None:
    a0 = records[(records.scheme == "a") & (records.phase == 0)]
    assert _value("mean_upstream_queries", a0) == 1.5  # (0 + 2 + 4 + 0) / 4
    assert _value("start_s", a0) == 0.1
    assert _value("search_space_reduction", a0, tools=0) is None
    assert _value("search_space_reduction", a0, tools=60) == pytest.approx(1 - 4.5 / 60)


def test_compute_is_the_mean_of_the_records(records: pd.DataFrame) -> None:
    a0 = records[(records.scheme == "a") & (records.phase == 0)]
    assert _value("mean_encodings", a0) == 1.5  # (0 + 2 + 4 + 0) / 4
    assert _value("mean_compute_ms", a0) == pytest.approx(10_300 * 6 / 4 / 1e6)


def test_mean_of_does_not_depend_on_the_order() -> None:
    values = [1e16, 1.0, -1e16, 0.1, 0.2]
    assert mean_of(values) == mean_of(reversed(values)) == mean_of(sorted(values))
    assert mean_of(values) == pytest.approx(1.3 / 5)
    assert mean_of([]) is None


def test_the_tally_equals_the_records_aggregate_per_scheme_and_phase(
        records: pd.DataFrame) -> None:
    tally = Tally()
    for row in reversed(ROWS[:8]):  # order of arrival does not matter within a scheme
        tally.add(row)
    for row in ROWS[8:]:
        tally.add(row)
    assert tally.exact
    expect = aggregate(pd.concat([records[records.scheme == "a"].iloc[::-1],
                                  records[records.scheme == "reg"]]), 60)
    assert tally.schemes(60) == expect
    assert tally.phases(60) == aggregate_phases(records, 60)
    assert [r["phase"] for r in tally.phases(60)["a"]] == [0, 1]
    assert list(tally.phases(60)["a"][0]) == ["phase", *PHASE]


def test_a_non_integer_count_makes_the_tally_inexact() -> None:
    tally = Tally()
    tally.add({**ROWS[0], "exchanges": 0.5})
    assert not tally.exact


def test_per_phase_and_by_scheme_read_the_metric_table(records: pd.DataFrame) -> None:
    table = per_phase(records)
    assert list(table.columns) == [k for k in PHASE if METRICS[k].stat is not None]
    assert table.index.names == ["scheme", "phase"]
    assert table.loc[("a", 1), "answered_without_upstream"] == 0.75
    assert table.loc[("a", 0), "mean_latency_ms"] == pytest.approx(45.0)
    assert table["queries"].tolist() == [4, 4, 1, 1]
    run = Run(path=None, records=records, nodes=pd.DataFrame(),  # type: ignore[arg-type]
              summary={"namespace_stats": {"tools": 60}}, scenario={})
    by = run.by_scheme()
    assert list(by.columns) == list(SCHEME_TABLE)
    # the mean and the median each under its own name (no bare "latency_ms")
    assert by.loc["a", "mean_latency_ms"] == pytest.approx((5 + 40 + 90 + 4 + 6 + 5 + 25) / 7)
    assert by.loc["a", "median_latency_ms"] == 6.0
    assert "latency_ms" not in by.columns
    assert math.isnan(grouped(records[~records.success], ["scheme"],
                              ["mean_latency_ms"]).loc["a", "mean_latency_ms"])


def test_the_table_subsets_are_metric_keys() -> None:
    for keys in (SUMMARY, SCHEME_TABLE, PHASE, PHASE_TABLE, PHASE_CHANGE):
        assert set(keys) <= set(METRICS)
    assert set(PHASE_CHANGE) <= set(PHASE_TABLE)
    assert "any_cache_hit" in SUMMARY and "any_cache_hit" not in SCHEME_TABLE
    labels = [METRICS[k].label for k in SCHEME_TABLE]
    assert len(labels) == len(set(labels))  # no two columns under one header
    assert {METRICS[k].label for k in ("mean_latency_ms", "median_latency_ms",
                                       "p95_latency_ms")} == {"mean ms", "median ms", "p95 ms"}
