"""The same scenario on the simulation and the live engine, and determinism of simpy."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from sim.loading import load_scenario
from sim.provenance import deterministic_summary
from sim.run.runner import run_scenario
from sim.scenario import Scenario
from tests.sim.engines.cases import assert_agrees
from tests.sim.engines.cases import small as patient_small

SCENARIOS = Path(__file__).resolve().parents[3] / "scenarios"


def small() -> Scenario:
    """scenarios/engines-small.yaml: fixed delays, no loss, one closed-loop agent."""
    return load_scenario(SCENARIOS / "engines-small.yaml")


def _digest(path: Path) -> dict[str, str]:
    """Every file's hash; the summary's without its provenance block (time, commit)."""
    return {p.name: hashlib.sha256(deterministic_summary(path) if p.name == "summary.json"
                                   else p.read_bytes()).hexdigest()
            for p in sorted(path.iterdir()) if p.is_file()}


def test_simpy_runs_are_byte_identical(tmp_path: Path) -> None:
    # fixed processing times: calibration measures this machine and is not reproducible
    sc = small().with_overrides({"outputs.plots": True, "network.processing.model": "fixed"})
    a = run_scenario(sc, out_dir=tmp_path / "a")
    run_scenario(sc, out_dir=tmp_path / "b")
    assert a.records["success"].all()
    files = _digest(tmp_path / "a")
    assert {"results.parquet", "results.csv", "nodes.csv", "summary.json", "scenario.yaml",
            "latency_cdf.png"} <= set(files)
    assert files == _digest(tmp_path / "b")
    other = run_scenario(sc.with_overrides({"seed": 6}), out_dir=tmp_path / "c")
    assert _digest(tmp_path / "c")["results.csv"] != files["results.csv"]
    assert other.records["success"].all()


@pytest.mark.live
def test_simpy_and_live_agree(tmp_path: Path) -> None:
    # the simulation's processing times are measured on this machine (calibrated), since
    # the live engine pays real Python costs per message; timeouts of 5 s (cases.py)
    sc = patient_small()
    assert sc.network.processing.model == "calibrated"
    sim = run_scenario(sc, engine="simpy", out_dir=tmp_path / "sim").records
    live = run_scenario(sc, engine="live", out_dir=tmp_path / "live",
                        live_port=20000 + os.getpid() % 20000).records
    assert_agrees(sim, live, lambda: run_scenario(
        sc, engine="live", write=False, live_port=20000 + os.getpid() % 20000).records)


def test_outputs_load_back_for_analysis(tmp_path: Path) -> None:
    from analysis.results import load_run, load_runs

    sc = small().with_overrides({"network.processing.model": "fixed"})
    result = run_scenario(sc, out_dir=tmp_path / "r")
    run = load_run(tmp_path / "r")
    assert run.records.equals(result.records)
    assert run.summary["schemes"].keys() == result.summary["schemes"].keys()
    assert run.scenario["name"] == "engines-small"
    assert set(run.by_scheme().index) == {"tooldns", "beam2", "global2", "warmed"}
    assert set(run.nodes.role) >= {"server", "resolver", "agent"}
    both = load_runs([tmp_path / "r", tmp_path / "r"])
    assert len(both) == 2 * len(run.records)


def test_semantic_queries_have_their_own_processing_time(tmp_path: Path) -> None:
    # calibration measures servers' intent-carrying queries apart from plain ones (A, NS)
    from sim.build.namespace import build_namespace
    from sim.build.workload import build_jobs
    from sim.run.calibrate import calibrate

    sc = small()
    ns = build_namespace(sc)
    costs = calibrate(sc, ns, build_jobs(sc, ns, sc.network.agents))
    assert {"server", "server_semantic", "resolver"} <= set(costs)
    assert costs["server_semantic"] > costs["server"]  # ranking costs more than a lookup
    # a fixed semantic cost delays every semantic exchange of a walk by that much
    fixed = sc.with_overrides({"network.processing.model": "fixed"})
    base = run_scenario(fixed, write=False).records
    slow = run_scenario(fixed.with_overrides({"network.processing.server_semantic": 0.02}),
                        write=False).records
    assert (base.returned == slow.returned).all()
    extra = (slow.latency_ms - base.latency_ms).groupby(slow.scheme).mean()
    assert extra["tooldns"] > 20.0 and extra["warmed"] < extra["tooldns"]
