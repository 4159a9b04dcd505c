"""Sweeps as Ray tasks give the same files and table as the process-pool sweep."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from sim.cli.main import build_parser
from sim.loading import load_scenario
from sim.provenance import deterministic_summary
from sim.run.sweep import run_sweep

EIGHT = """\
name: eight-points
engine: simpy
seed: 3
namespace: {tools: 40, branching: 2, depth: 1, orgs: 0}
network: {topology: star, nodes: 4, agents: 2, link: {delay: {mean: 0.002}}}
schemes:
  - {name: k1, k: 1}
  - {name: k2, k: 2}
workload: {queries: 10, pool: 10, arrival: {rate: 20.0}}
sweep:
  grid:
    namespace.branching: [2, 3]
    namespace.depth: [1, 2]
    schemes.1.beam: [1, 2]
  workers: 2
"""


def _files(out: Path) -> dict[str, bytes]:
    """Every file's bytes; summaries without their provenance block (time, commit)."""
    return {str(p.relative_to(out)): (deterministic_summary(p.parent, p.name)
                                      if p.name in ("summary.json", "sweep.json")
                                      else p.read_bytes())
            for p in sorted(out.rglob("*")) if p.is_file()}


@pytest.mark.ray
def test_ray_sweep_equals_process_pool_sweep(ray_session, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "eight.yaml"
    path.write_text(EIGHT, encoding="utf-8")
    sc = load_scenario(path)
    quiet = Console(file=io.StringIO(), width=200)
    pool = run_sweep(sc, tmp_path / "pool", workers=2, console=quiet)
    ray = run_sweep(sc, tmp_path / "ray", workers=2, use_ray=True, console=quiet)
    assert len(ray.points) == 8 and len(ray.ran) == 8 and not ray.failed
    assert ray.ran == pool.ran
    assert len(ray.table) == 16  # 8 points x 2 schemes
    assert ray.table.equals(pool.table)
    # every point's files are byte for byte those of the pool run
    assert _files(tmp_path / "ray") == _files(tmp_path / "pool")
    # a rerun through Ray resumes: nothing left to do
    again = run_sweep(sc, tmp_path / "ray", workers=2, use_ray=True, console=quiet)
    assert again.ran == [] and len(again.skipped) == 8


def test_cli_accepts_ray_flags() -> None:
    args = build_parser().parse_args(["sweep", "x.yaml", "--ray-address", "ray://head:10001"])
    assert args.ray_address == "ray://head:10001" and not args.ray
    args = build_parser().parse_args(["sweep", "x.yaml", "--ray", "--workers", "2"])
    assert args.ray and args.ray_address is None and args.workers == 2
    assert build_parser().parse_args(["run", "x.yaml", "--engine", "mininet"]).engine == "mininet"
