"""Sweeps: grid expansion, one run per point in spawned workers, a combined table, resume."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console

from analysis.metrics import METRICS, SCHEME_TABLE
from analysis.pivot import by_spread
from sim.cli import main as cli
from sim.errors import ScenarioError
from sim.loading import load_scenario
from sim.provenance import deterministic_summary
from sim.run.sweep import expand_grid, run_sweep, sweep_points
from sim.scenario import Scenario

ROOT = Path(__file__).resolve().parents[3]

TINY = """\
name: tiny-sweep
engine: simpy
seed: 2
namespace: {tools: 40, branching: 2, depth: 1, orgs: 0}
network: {topology: star, nodes: 4, agents: 2, link: {delay: {mean: 0.002}}}
schemes:
  - {name: k1, k: 1}
  - {name: k3, k: 3}
workload: {queries: 10, pool: 10, arrival: {rate: 20.0}}
sweep:
  grid:
    namespace.branching: [2, 3]
    schemes.0.k: [1, 2]
  workers: 2
"""
GRID = ["namespace.branching", "schemes.0.k"]


def _quiet() -> Console:
    return Console(file=io.StringIO(), width=200)


def _mtimes(out: Path) -> dict[str, int]:
    return {p.parent.name: p.stat().st_mtime_ns for p in (out / "points").glob("*/summary.json")}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Scenario, Path, object]:
    folder = tmp_path_factory.mktemp("sweep")
    path = folder / "tiny.yaml"
    path.write_text(TINY, encoding="utf-8")
    sc = load_scenario(path)
    out = folder / "out"
    result = run_sweep(sc, out, workers=2, console=_quiet())
    return sc, out, result


# ---------------------------------------------------------------------------- pure parts


def test_grid_expands_in_file_order_last_field_fastest() -> None:
    grid = {"a": [1, 2], "b": ["x", "y", "z"]}
    points = expand_grid(grid)
    assert points == [{"a": a, "b": b} for a in (1, 2) for b in ("x", "y", "z")]
    assert expand_grid({"a": [1]}) == [{"a": 1}]


def test_points_have_stable_ids_and_point_scenarios() -> None:
    sc = Scenario.model_validate({"name": "s", "sweep": {"grid": {"namespace.depth": [1, 2],
                                                                  "seed": [5, 6]}}})
    points = sweep_points(sc)
    assert [p.id for p in points] == [p.id for p in sweep_points(sc)]  # deterministic
    assert [p.id[:4] for p in points] == ["000-", "001-", "002-", "003-"]
    assert len({p.id for p in points}) == 4
    assert [(p.scenario.namespace.depth, p.scenario.seed) for p in points] == [
        (1, 5), (1, 6), (2, 5), (2, 6)]
    for p in points:
        assert p.scenario.name == f"s-{p.id}"
        assert p.scenario.sweep is None and p.scenario.outputs.plots is False
    # the id follows the point's whole scenario, so a changed base never reuses old results
    other = sweep_points(sc.with_overrides({"workload.queries": 7}))
    assert not {p.id for p in points} & {p.id for p in other}


def test_every_point_is_validated() -> None:
    sc = Scenario.model_validate({"name": "s", "sweep": {"grid": {"namespace.depth": [1, 99]}}})
    with pytest.raises(ScenarioError, match=r"point 1 \(namespace.depth=99\).*namespace.depth"):
        sweep_points(sc)


def test_no_sweep_section_and_ray_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="sweep"):
        run_sweep(Scenario(name="s"), tmp_path / "out", workers=1, console=_quiet())
    with pytest.raises(ScenarioError, match="sweep"):  # before any Ray is started
        run_sweep(Scenario(name="s"), tmp_path / "out", workers=1, use_ray=True)
    assert not (tmp_path / "out").exists()


def test_shipped_sweep_scenario_has_nine_points() -> None:
    sc = load_scenario(ROOT / "scenarios" / "sweep-branching-depth.yaml")
    points = sweep_points(sc)
    assert len(points) == 9 and sc.sweep is not None and sc.sweep.workers == 2
    assert [tuple(p.overrides.values()) for p in points] == [
        (b, d) for b in (2, 4, 8) for d in (1, 2, 3)]


# ---------------------------------------------------------------------------- running


def test_sweep_writes_points_and_one_row_per_point_and_scheme(tiny) -> None:
    sc, out, result = tiny
    ids = [p.id for p in result.points]
    assert sorted(result.ran) == ids and result.skipped == [] and result.failed == {}
    for p in result.points:
        folder = out / "points" / p.id
        assert {"summary.json", "results.csv", "results.parquet", "nodes.csv",
                "scenario.yaml"} <= {f.name for f in folder.iterdir()}
        assert not list(folder.glob("*.png"))  # plots off for sweep points
        assert not list(folder.glob(".*"))  # no temporary files left behind
        point = load_scenario(folder / "scenario.yaml")
        assert point.name == f"tiny-sweep-{p.id}" and point.sweep is None
        assert point.namespace.branching == p.overrides["namespace.branching"]
        assert point.schemes[0].k == p.overrides["schemes.0.k"]
    table = pd.read_csv(out / "sweep.csv")
    assert len(table) == 4 * 2
    assert list(table.columns[:4]) == ["point", *GRID, "scheme"]
    assert {"success", "hit_at_k", "mean_round_trips", "queries"} <= set(table.columns)
    assert table["point"].tolist() == [i for i in ids for _ in range(2)]
    assert table["scheme"].tolist() == ["k1", "k3"] * 4
    assert table[GRID].drop_duplicates().values.tolist() == [[2, 1], [2, 2], [3, 1], [3, 2]]
    assert (table["queries"] == 10).all()
    summary = json.loads((out / "points" / ids[0] / "summary.json").read_text())
    assert table.iloc[0]["success"] == pytest.approx(summary["schemes"]["k1"]["success"])
    parquet = pd.read_parquet(out / "sweep.parquet")
    pd.testing.assert_frame_equal(parquet, result.table)
    assert len(parquet) == 8 and list(parquet.columns) == list(table.columns)
    assert load_scenario(out / "scenario.yaml") == sc
    assert not list(out.glob(".*"))


def test_rerun_skips_every_finished_point(tiny) -> None:
    sc, out, first = tiny
    before = _mtimes(out)
    assert len(before) == 4
    again = run_sweep(sc, out, workers=2, console=_quiet())
    assert again.ran == [] and sorted(again.skipped) == sorted(before)
    assert _mtimes(out) == before
    pd.testing.assert_frame_equal(again.table, first.table)


def test_rerun_recomputes_only_a_point_without_summary(tiny, tmp_path: Path) -> None:
    sc, out, first = tiny
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    before = _mtimes(copy)
    victim = first.points[1].id
    (copy / "points" / victim / "summary.json").unlink()
    again = run_sweep(sc, copy, workers=2, console=_quiet())
    assert again.ran == [victim] and len(again.skipped) == 3
    after = _mtimes(copy)
    assert set(after) == set(before)
    assert {k for k in before if after[k] != before[k]} == {victim}
    # same seed, same point: the recomputed summary equals the first one
    assert (deterministic_summary(copy / "points" / victim)
            == deterministic_summary(out / "points" / victim))
    pd.testing.assert_frame_equal(again.table, first.table)


def test_cli_sweep_resumes_and_prints_the_table(tiny, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    out = tiny[1]
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY, encoding="utf-8")
    assert cli.main(["sweep", str(path), "--out", str(copy), "--workers", "1"]) == 0
    printed = capsys.readouterr().out
    assert "0 points run, 4 already done" in printed
    assert "namespace.branching" in "".join(printed.split()) and "k3" in printed
    table = pd.read_csv(copy / "sweep.csv")
    assert table.shape[0] == 8
    # the console leads with what the grid changes most (analysis.pivot.by_spread)
    first = METRICS[by_spread(table, SCHEME_TABLE)[0]].label
    assert "".join(first.split()) in "".join(printed.split())
    assert "metrics ranked by how much the grid changes them" in " ".join(printed.split())


def test_a_failing_point_is_reported_and_retried(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """A point that fails at run time (no zone of that organisation) does not stop the others
    and is not marked done."""
    text = TINY.replace("sweep:\n  grid:\n    namespace.branching: [2, 3]\n    schemes.0.k: [1, 2]",
                        "trust: {org: nobody}\nsweep:\n  grid:\n    trust.policy: [open, org]")
    assert "trust.policy" in text
    path = tmp_path / "failing.yaml"
    path.write_text(text, encoding="utf-8")
    sc = load_scenario(path)
    out = tmp_path / "out"
    result = run_sweep(sc, out, workers=1, console=_quiet())
    good, bad = (p.id for p in result.points)
    assert result.ran == [good] and list(result.failed) == [bad]
    assert "trust.org" in result.failed[bad] and "nobody" in result.failed[bad]
    assert not (out / "points" / bad / "summary.json").exists()
    table = pd.read_csv(out / "sweep.csv")
    assert table["point"].tolist() == [good, good]
    assert table["trust.policy"].tolist() == ["open", "open"]
    # the CLI retries only the failed point and exits 1
    assert cli.main(["sweep", str(path), "--out", str(out), "--workers", "1"]) == 1
    printed = capsys.readouterr()
    assert "0 points run, 1 already done" in " ".join(printed.out.split())
    assert f"1 points failed: {bad}" in " ".join(printed.err.split())  # errors on stderr
