"""``tooldns sweep``: one run per point of a scenario's sweep grid (resumable: finished points
are skipped)."""

from __future__ import annotations

import argparse
from pathlib import Path

from sim.cli.common import (
    add_scenario_args,
    consoles,
    error,
    interruptible,
    positive_int,
    say,
    scenario_from_args,
    stderr,
)

HELP = ("run a scenario's sweep grid, one run per point "
        "(resumes: finished points are skipped)")
DESCRIPTION = HELP


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="scenario YAML with a sweep: section")
    p.add_argument("--out", help="output directory (default: results/<scenario name>)")
    add_scenario_args(p)
    p.add_argument("--workers", type=positive_int,
                   help="worker processes (default: the file's sweep.workers)")
    p.add_argument("--ray", action="store_true",
                   help="run the points as Ray tasks (a local Ray instance with --workers CPUs)")
    p.add_argument("--ray-address", metavar="ADDRESS",
                   help="run the points as Ray tasks on this Ray cluster (implies --ray)")


def run(args: argparse.Namespace) -> int:
    from analysis.files import OutputError
    from sim.errors import ScenarioError
    from sim.run.sweep import run_sweep, sweep_points

    out = None
    with interruptible() as stopped:
        try:
            scenario = scenario_from_args(args)
            if scenario.sweep is None:
                raise ScenarioError(f"{args.file}: sweep: the scenario has no sweep section "
                                    f"(sweep: {{grid: {{<dotted field>: [values]}}}})")
            try:
                sweep_points(scenario)  # every point valid before anything runs
            except ScenarioError as exc:
                raise ScenarioError(f"{args.file}: {exc}") from None
            out = args.out or scenario.outputs.dir or Path("results") / scenario.name
            result = run_sweep(scenario, out, args.workers, console=consoles.out,
                               use_ray=args.ray or args.ray_address is not None,
                               ray_address=args.ray_address)
        except ScenarioError as exc:
            error("sweep", str(exc))
            return 2
        except OutputError as exc:
            error("sweep", str(exc))
            return 1
        except KeyboardInterrupt:
            if out is None:
                stderr("tooldns sweep: interrupted; nothing written")
            else:
                stderr(f"tooldns sweep: interrupted; finished points are kept in {out}/points/"
                       f", run the same command again to resume")
            return stopped.code
    say(f"{len(result.ran)} points run, {len(result.skipped)} already done; "
        f"{result.out_dir}/sweep.csv, sweep.parquet, sweep.json, sweep_<axis>.png, "
        f"points/<id>/")
    if result.failed:
        error("sweep", f"{len(result.failed)} points failed: {', '.join(result.failed)}")
        return 1
    return 0
