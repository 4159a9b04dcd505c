"""The figures of a whole output folder: a run's standard figures (and success over time
when it had faults), a sweep's metrics against each grid axis, an evaluation's retrieval
figures. The one module that knows every plot family.

    python3 -m analysis.plots.folder DIR     # (re)write the standard figures of a run/sweep/eval
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from analysis import results
from analysis.plots.faults import success_over_time
from analysis.plots.retrieval import plot_all
from analysis.plots.run import standard_plots
from analysis.plots.sweep import plot_sweep
from analysis.titles import eval_title, sweep_title


def write_figures(folder: Path, out: Path | None = None) -> list[Path]:
    """(Re)write the standard figures of a run, sweep or evaluation folder into ``out``
    (default: the folder itself); returns the files written."""
    out = out or folder
    out.mkdir(parents=True, exist_ok=True)
    kind = results.kind_of(folder)
    if kind == "run":
        run = results.load_run(folder, partial=True)
        paths = standard_plots(run.records, out, run.title)
        if "faults" in run.summary:
            paths.append(success_over_time(run.summary, out))
        return paths
    if kind == "sweep":
        sweep = results.load_sweep(folder)
        return plot_sweep(sweep.table, sweep.grid, out, sweep_title(sweep.meta))
    if kind == "eval":
        ev = results.load_eval(folder)
        return plot_all(ev.per_query, out, eval_title(ev.meta))
    raise FileNotFoundError(f"{folder}: not a run, sweep or evaluation folder")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python3 -m analysis.plots.folder",
        description="(Re)write the standard figures of a tooldns output folder: a run's "
                    "latency CDF, bytes per query, cache help over time (and success over "
                    "time with faults); a sweep's metrics against each grid axis; an "
                    "evaluation's retrieval figures.")
    p.add_argument("dir", metavar="DIR", type=Path, help="output folder of tooldns run/sweep/eval")
    p.add_argument("--out", type=Path, help="write the figures here (default: DIR)")
    args = p.parse_args(argv)
    try:
        paths = write_figures(args.dir, args.out)
    except FileNotFoundError as exc:
        print(f"analysis.plots.folder: {exc}", file=sys.stderr)
        return 2
    for path in paths:
        print(path)
    return 0


if __name__ == "__main__":
    from analysis.pipes import guarded

    raise SystemExit(guarded(main))
