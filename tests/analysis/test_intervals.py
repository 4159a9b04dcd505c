"""Replications (``seeds: N``) and the conditions footer: the quickstart over five seeds gives
mean ± 95 % CI in the console, ``sweep.json`` and the report, equal to the t-interval
computed here from each seed's own ``summary.json``; paired differences likewise; the
comparison table's footer names the processing and registry-search settings."""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.conditions import conditions
from analysis.intervals import Interval, t_interval
from sim.loading import read_scenario

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"
T_975 = {2: 4.302652729911275, 4: 2.7764451051977987}  # t(0.975, df), from tables


def _tooldns(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sim.cli", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=600)


def _direct(values: list[float]) -> tuple[float, float]:
    """Mean and half-width by the textbook formula, without the module under test."""
    n = len(values)
    return statistics.fmean(values), T_975[n - 1] * statistics.stdev(values) / math.sqrt(n)


def test_t_interval_is_the_textbook_one() -> None:
    values = [12.0, 15.5, 11.25, 14.0, 13.0]
    mean, half = _direct(values)
    iv = t_interval(values)
    assert iv.n == 5 and iv.mean == pytest.approx(mean) and iv.half == pytest.approx(half)
    assert (iv.lo, iv.hi) == pytest.approx((mean - half, mean + half))
    assert math.isnan(t_interval([3.0]).half) and t_interval([]).n == 0
    assert t_interval([1.0, math.nan, 3.0]).n == 2  # missing values are not zeros
    assert Interval(-2.0, 1.0, 5).excludes_zero and not Interval(-2.0, 3.0, 5).excludes_zero


def test_quickstart_over_five_seeds(tmp_path: Path) -> None:
    out = tmp_path / "qs"
    done = _tooldns("run", str(QUICKSTART), "--seeds", "5", "--out", str(out),
                    "--set", "workload.queries=120")
    assert done.returncode == 0, done.stderr
    assert "mean ± 95 % CI over 5 seeds" in done.stdout
    assert "paired difference from tooldns" in done.stdout
    assert "processing: fixed" in done.stdout  # the footer under the intervals too
    # every seed a run of its own, seeds 1..5 (the quickstart's seed is 1)
    summaries = {}
    for folder in (out / "points").iterdir():
        s = json.loads((folder / "summary.json").read_text())
        summaries[s["seed"]] = s
    assert sorted(summaries) == [1, 2, 3, 4, 5]
    block = json.loads((out / "sweep.json").read_text())["intervals"]
    assert block["seeds"] == [1, 2, 3, 4, 5] and block["baseline"] == "tooldns"
    rows = {r["scheme"]: r for r in block["schemes"]}
    for scheme in ("tooldns", "agentdns", "tooldns-nocache"):
        for key in ("mean_latency_ms", "mean_bytes_down", "hit_at_1"):
            values = [summaries[seed]["schemes"][scheme][key] for seed in range(1, 6)]
            mean, half = _direct(values)
            got = rows[scheme][key]
            assert got["mean"] == pytest.approx(mean, rel=1e-9)
            assert got["hi"] - got["lo"] == pytest.approx(2 * half, rel=1e-9, abs=1e-12)
    paired = {r["scheme"]: r for r in block["paired"]}
    diffs = [summaries[seed]["schemes"]["agentdns"]["mean_bytes_down"]
             - summaries[seed]["schemes"]["tooldns"]["mean_bytes_down"] for seed in range(1, 6)]
    mean, half = _direct(diffs)
    assert paired["agentdns"]["mean_bytes_down"]["mean"] == pytest.approx(mean, rel=1e-9)
    assert paired["agentdns"]["mean_bytes_down"]["lo"] == pytest.approx(mean - half, rel=1e-9)
    assert (out / "intervals.csv").exists() and (out / "paired.csv").exists()
    # the report leads with the intervals
    done = _tooldns("report", str(out), "--format", "md")
    assert done.returncode == 0, done.stderr
    text = (out / "report.md").read_text()
    assert text.index("## Replications: means and 95 % intervals") < text.index("## Sweep")
    assert "registry search by the search compute model" in text
    # run again: every seed is done already, nothing runs
    again = _tooldns("run", str(QUICKSTART), "--seeds", "5", "--out", str(out),
                     "--set", "workload.queries=120")
    assert again.returncode == 0 and "0 replications run, 5 already done" in again.stderr


def test_the_footer_names_processing_and_registry_search(tmp_path: Path) -> None:
    done = _tooldns("run", str(QUICKSTART), "--out", str(tmp_path / "q"), "--format",
                    "markdown", "--set", "workload.queries=60")
    assert done.returncode == 0, done.stderr
    assert ("processing: fixed, server 50 µs per message (plus the same model over its "
            "zone's items with an intent), resolver 20 µs") in " ".join(done.stdout.split())
    assert ("registry search by the search compute model (bm25: "
            in " ".join(done.stdout.split()))
    assert "agentdns: HTTP/1.1 plaintext, a connection per call, no cache" in done.stdout
    assert "every scheme in plaintext" in done.stdout


def test_conditions_follow_the_scenario() -> None:
    sc = read_scenario(QUICKSTART).model_dump(mode="json")
    sc["network"]["processing"].update(model="calibrated")
    assert "processing: calibrated" in conditions(sc)[0]
    sc["network"]["processing"].update(model="fixed", registry=0.021)
    assert "registry search 21 ms per search" in conditions(sc)[0]
    sc["network"]["processing"].update(registry=0.0, server_semantic=None)
    assert "registry search 0 s (not modelled" in conditions(sc)[0]
    assert "(the same with an intent)" in conditions(sc)[0]
    for s in sc["schemes"]:
        if "upstream" not in s:
            s["tls"] = True
    assert "encryption differs between schemes" in conditions(sc)[1]


@pytest.mark.parametrize(("args", "says"), [
    (["--seeds", "3", "--capture"], "seeds: 3 replications run as separate runs; --capture"),
    (["--seeds", "0"], "--seeds"),
    (["--seed", str(2**32 - 2), "--seeds", "3"], "passes 2**32 - 1"),
])
def test_bad_replications_are_one_line(args: list[str], says: str) -> None:
    done = _tooldns("run", str(QUICKSTART), *args)
    assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr


def test_a_sweep_with_seeds_gives_intervals_per_grid_point(tmp_path: Path) -> None:
    from sim.run.sweep import grid_of, run_sweep
    from sim.scenario import Scenario

    sc = Scenario.model_validate({
        "name": "tiny-seeds", "seed": 4, "seeds": 3,
        "namespace": {"tools": 60, "branching": 3, "depth": 2, "orgs": 1},
        "network": {"topology": "star", "nodes": 4, "agents": 1},
        "schemes": [{"name": "tooldns", "k": 2}, {"name": "nocache", "k": 2,
                                                   "cache": False}],
        "workload": {"queries": 12, "arrival": {"rate": 50.0}},
        "outputs": {"plots": False},
        "sweep": {"grid": {"namespace.branching": [2, 3]}, "workers": 1}})
    assert grid_of(sc) == {"namespace.branching": [2, 3], "seed": [4, 5, 6]}
    result = run_sweep(sc, tmp_path / "s", workers=1)
    assert len(result.points) == 6 and not result.failed
    block = json.loads((tmp_path / "s" / "sweep.json").read_text())["intervals"]
    rows = {(r["namespace.branching"], r["scheme"]): r for r in block["schemes"]}
    assert set(rows) == {(b, s) for b in (2, 3) for s in ("tooldns", "nocache")}
    table = result.table
    for (b, scheme), row in rows.items():
        values = table[(table["namespace.branching"] == b)
                       & (table.scheme == scheme)].mean_bytes_down.tolist()
        mean, half = _direct(values)
        assert row["seeds"] == 3
        assert row["mean_bytes_down"]["mean"] == pytest.approx(mean)
        assert row["mean_bytes_down"]["hi"] == pytest.approx(mean + half)
    assert {r["scheme"] for r in block["paired"]} == {"nocache"}
