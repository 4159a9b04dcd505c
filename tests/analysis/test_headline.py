"""Issue 26's acceptance: on ``scenarios/cache-warmth.yaml`` (simpy) the headline shows the
phase effect: the share of discoveries answered without any upstream query rises after
the cold phase and the mean latency falls, in ``summary.json`` "phases" and in the data
the printed per-phase tables show (``analysis.results.per_phase``), while a scheme
without caches stays flat. ``any_cache_hit`` (the old "cache-helped") barely moves: it is
why the effect was hidden."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from analysis.metrics import PHASE
from analysis.results import load_run, main, per_phase
from sim.loading import load_scenario
from sim.run.runner import run_scenario

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cache-warmth")
    run_scenario(load_scenario(ROOT / "scenarios" / "cache-warmth.yaml"), "simpy", out_dir=path)
    return path


def _assert_effect(rows: dict[str, list[dict]]) -> None:
    """``rows``: per scheme, per phase in order, the PHASE metrics."""
    for scheme in ("tooldns", "tooldns-k0-warmed"):
        cold, *warm = rows[scheme]
        assert cold["answered_without_upstream"] < 0.8, (scheme, cold)
        for w in warm:
            assert w["answered_without_upstream"] > 0.95, (scheme, w)
            assert w["answered_without_upstream"] - cold["answered_without_upstream"] > 0.15
            assert w["mean_latency_ms"] < 0.5 * cold["mean_latency_ms"], (scheme, w, cold)
            assert w["mean_upstream_queries"] < cold["mean_upstream_queries"]
            # the old metric: already ~100 % in the cold phase, so it shows no effect
            assert abs(w["any_cache_hit"] - cold["any_cache_hit"]) < 0.02
    cold, *warm = rows["tooldns-nocache"]
    for w in [cold, *warm]:
        assert w["answered_without_upstream"] == 0 and w["any_cache_hit"] == 0
        assert w["mean_latency_ms"] == pytest.approx(cold["mean_latency_ms"], rel=0.1)


def test_summary_has_the_phase_effect(out: Path) -> None:
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    phases = summary["phases"]
    assert list(phases) == list(summary["schemes"])
    for scheme, rows in phases.items():
        assert [r["phase"] for r in rows] == [0, 1, 2, 3]
        assert all(list(r) == ["phase", *PHASE] for r in rows)
        assert sum(r["queries"] for r in rows) == summary["schemes"][scheme]["queries"]
    _assert_effect(phases)


def test_the_printed_tables_data_has_the_phase_effect(out: Path) -> None:
    run = load_run(out)
    table = per_phase(run.records)
    rows = {str(scheme): [dict(table.loc[(scheme, p)]) for p in (0, 1, 2, 3)]
            for scheme in dict.fromkeys(table.index.get_level_values("scheme"))}
    _assert_effect(rows)
    # summary.json "phases" is the same figures, rounded
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    for scheme, got in rows.items():
        for row, stored in zip(got, summary["phases"][scheme], strict=True):
            assert row["mean_latency_ms"] == pytest.approx(stored["mean_latency_ms"],
                                                           abs=1e-6)


def test_analysis_results_names_mean_and_median_apart(out: Path) -> None:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main([str(out)]) == 0
    headers = {word for line in buf.getvalue().splitlines() for word in line.split()}
    assert {"mean_latency_ms", "median_latency_ms", "p95_latency_ms",
            "answered_without_upstream"} <= headers
    assert "latency_ms" not in headers


def test_the_console_phase_table_shows_the_effect(out: Path) -> None:
    from analysis.console import phase_grid
    from analysis.metrics import METRICS

    grid = phase_grid(load_run(out).records)
    no_up = grid.header.index(METRICS["answered_without_upstream"].label)
    mean = grid.header.index(METRICS["mean_latency_ms"].label)
    rows = {row[0]: row for row in grid.rows}
    for scheme in ("tooldns", "tooldns-k0-warmed"):
        shares = [float(c.rstrip("%")) for c in rows[scheme][no_up].split(" → ")]
        means = [float(c) for c in rows[scheme][mean].split(" → ")]
        assert len(shares) == len(means) == 4
        assert shares[0] < 80 and min(shares[1:]) > 95, (scheme, shares)
        assert max(means[1:]) < 0.5 * means[0], (scheme, means)
