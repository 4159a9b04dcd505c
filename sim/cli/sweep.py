"""``tooldns sweep``: one run per point of a scenario's sweep grid (resumable: finished points
are skipped)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from sim.cli.common import (
    add_format_arg,
    add_scenario_args,
    check_out,
    consoles,
    error,
    interruptible,
    positive_int,
    progress,
    say,
    scenario_from_args,
    stderr,
)

if TYPE_CHECKING:
    from rich.console import Console

    from sim.run.sweep import SweepResult
    from sim.scenario import Scenario

HELP = ("run a scenario's sweep grid, one run per point "
        "(resumes: finished points are skipped)")
DESCRIPTION = HELP


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="scenario YAML with a sweep: section")
    p.add_argument("--out", help="output directory (default: results/<scenario name>)")
    add_scenario_args(p)
    add_format_arg(p, "the table of points and schemes")
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
            check_out(args.out)
            scenario = scenario_from_args(args)
            if scenario.sweep is None and scenario.seeds == 1:
                raise ScenarioError(f"{args.file}: sweep: the scenario has no sweep section "
                                    f"(sweep: {{grid: {{<dotted field>: [values]}}}})")
            try:
                sweep_points(scenario)  # every point valid before anything runs
            except ScenarioError as exc:
                raise ScenarioError(f"{args.file}: {exc}") from None
            out = args.out or scenario.outputs.dir or Path("results") / scenario.name
            # progress bars and notes on stderr (-q: none); the table on stdout below
            status = _quiet() if consoles.quiet else consoles.err
            result = run_sweep(scenario, out, args.workers, console=status,
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
    _print_table(result, scenario, args.format)
    done = (f"{len(result.ran)} points run, {len(result.skipped)} already done; "
            f"{result.out_dir}/sweep.csv, sweep.parquet, sweep.json, sweep_<axis>.png, "
            f"points/<id>/")
    if args.format == "table":
        say(done)
    else:
        progress(done)
    if result.failed:
        error("sweep", f"{len(result.failed)} points failed: {', '.join(result.failed)}")
        return 1
    return 0


def _print_table(result: SweepResult, scenario: Scenario, fmt: str) -> None:
    """The sweep's table on stdout: rich tables that fit, or ``fmt`` text."""
    import sys

    from analysis.console import interval_grids, interval_text, sweep_grid, sweep_text
    from analysis.intervals import SEED
    from analysis.tables import print_grid
    from sim.run.sweep import grid_of

    axes = list(grid_of(scenario))
    title = (f"sweep {scenario.name}: {len(result.points)} points x {len(scenario.schemes)} "
             f"schemes")
    if SEED in axes and len(result.table):  # replications: intervals, per-seed rows on file
        if fmt == "table":
            for grid in interval_grids(result.table, axes, title):
                print_grid(grid, consoles.out)
        else:
            sys.stdout.write(interval_text(result.table, axes, title, fmt))
    elif fmt == "table":
        print_grid(sweep_grid(result.table, axes, title), consoles.out)
    else:
        sys.stdout.write(sweep_text(result.table, axes, title, fmt))


def _quiet() -> Console:
    """A console that shows nothing (``-q``)."""
    import io

    from rich.console import Console

    return Console(file=io.StringIO())
