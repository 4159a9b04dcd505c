"""Sweep figures: each summary metric against each grid axis, per scheme.

A sweep's ``sweep.csv`` has one row per (point, scheme) with the grid values and the
scheme's summary metrics (``analysis.results.load_sweep``). :func:`sweep_figure` draws,
for one grid axis, a panel per metric with a line per scheme and per combination of the
other axes' values (colour: scheme; line style and marker: the other axes; averaged over
the other axes when they have more than ``max_lines`` combinations). Works on any frame
of that shape, e.g. in a notebook:

    from analysis.results import load_sweep
    from analysis.plots.sweep import sweep_figure
    sw = load_sweep("results/sweep-branching-depth")
    sweep_figure(sw.table, "namespace.depth", sw.grid)

    python3 -m analysis.plots.sweep DIR      # sweep_<axis>.png for every axis, into DIR
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from analysis.metrics import METRICS
from analysis.pivot import axis_names, recorded, short, value_text
from analysis.plots.style import (
    heading,
    new_grid,
    same_as,
    save_figure,
    scheme_colors,
    value_axis,
)
from analysis.results import load_sweep
from analysis.titles import sweep_title

STYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
def _positions(values: pd.Series) -> tuple[pd.Series, list, bool]:
    """x positions of an axis's values: the values if all numeric, else their rank in order
    of first appearance (grid order); returns positions, tick values, numeric."""
    levels = list(pd.unique(values))
    if pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values):
        return values.astype(float), sorted(levels), True
    index = {v: i for i, v in enumerate(levels)}
    return values.map(index).astype(float), levels, False


def is_share(metric: str) -> bool:
    """A share (success, hit@K ...): unitless and formatted as a percentage."""
    m = METRICS[metric]
    return not m.unit and "%" in m.fmt


def coinciding(same: dict[str, str], scheme_of: dict[str, str]) -> list[str]:
    """Panel notes for lines of one scheme that lie on another scheme's (``k3 = k1``, with
    the other axes' values when only some of its lines do)."""
    pairs: dict[tuple[str, str], list[str]] = {}
    for a, b in same.items():
        if scheme_of[a] != scheme_of[b]:
            pairs.setdefault((scheme_of[a], scheme_of[b]), []).append(
                a.removeprefix(scheme_of[a]).lstrip(", "))
    total = {s: sum(1 for n in scheme_of if scheme_of[n] == s) for s in scheme_of.values()}
    notes = [f"{a} = {b}" + ("" if len(where) == total[a] else f" at {'; '.join(where)}")
             for (a, b), where in pairs.items()]
    return notes[:2] + ([f"(+{len(notes) - 2} more coinciding)"] if len(notes) > 2 else [])


Panel = tuple[str, list[str], str]  # metric, schemes, note


def panels(table: pd.DataFrame, metrics: Sequence[str]) -> list[Panel]:
    """A panel per metric with every scheme on its one axis: schemes are compared on the
    same scale (a log axis when the values span a decade, so a registry 200x a walk and
    the walk's own change along the grid both show)."""
    schemes = [str(s) for s in pd.unique(table["scheme"])] if "scheme" in table else []
    return [(metric, schemes, "") for metric in metrics]


def sweep_figure(table: pd.DataFrame, axis: str, grid: dict[str, list] | Sequence[str],
                 metrics: Sequence[str] | None = None, title: str | None = None,
                 max_lines: int = 6) -> Figure:
    """Panels of ``metrics`` (keys of :data:`analysis.metrics.METRICS`; default: every one
    ``table`` records) against grid ``axis``: a line per scheme and combination of the
    other grid axes (their mean when there are more than ``max_lines`` combinations).
    Shares run from 0 to 100 %, other metrics from 0 or on a log axis when they span a
    decade; every scheme shares its metric's axis; lines that coincide with an earlier one
    are drawn wide and named in the panel."""
    others = [a for a in grid if a != axis and a in table.columns]
    names = axis_names([axis, *others])
    shown = panels(table, recorded(table) if metrics is None else
                   [m for m in metrics if m in table.columns])
    ncols = min(3, max(1, len(shown)))
    nrows = max(1, -(-len(shown) // ncols))
    fig, axes = new_grid((4.0 * ncols + 2.2, 3.1 * nrows), nrows, ncols)
    colors = scheme_colors(table.scheme) if "scheme" in table else {}
    combos = table[others].drop_duplicates() if others else pd.DataFrame(index=[0])
    averaged = len(combos) > max_lines
    x, ticks, numeric = _positions(table[axis])
    data = table.assign(_x=x)
    handles: dict[str, Line2D] = {}
    for k, (metric, schemes, note) in enumerate(shown):
        ax = axes[k // ncols][k % ncols]
        lines: dict[str, tuple[pd.Series, str, int]] = {}
        for scheme in schemes:
            rows = data[data.scheme == scheme]
            if averaged or not others:
                parts = [("", rows)]
            else:
                parts = [(", ".join(f"{names[a]}={value_text(v)}"
                                    for a, v in zip(others, key, strict=True)), g)
                         for key, g in rows.groupby(others, sort=False)]
            for j, (what, g) in enumerate(parts):
                name = f"{scheme}, {what}" if what else scheme
                lines[name] = (g.groupby("_x", sort=True)[metric].mean(), scheme, j)
        same = same_as({n: np.vstack([s.index, s.to_numpy(dtype=float)])
                        for n, (s, _, _) in lines.items()})
        for name, (line, scheme, j) in lines.items():
            # a line on top of an earlier one: wide and half transparent, both show
            wide = {"lw": 3.5, "alpha": 0.5} if name in same else {}
            (h,) = ax.plot(line.index, line.to_numpy(dtype=float), color=colors[scheme],
                           ls=STYLES[j % len(STYLES)], marker=MARKERS[j % len(MARKERS)],
                           ms=4, label=name, **wide)
            if name not in handles or not wide:  # the legend shows a plain line
                handles[name] = h
        value_axis(ax, data[data.scheme.isin(schemes)][metric], share=is_share(metric))
        ax.set_ylabel(METRICS[metric].axis_label, fontsize=8)
        ax.set_xlabel(f"{short(axis)} ({names[axis]})" if names[axis] != short(axis)
                      else short(axis), fontsize=8)
        notes = [note] if note else []
        notes += coinciding(same, {n: s for n, (_, s, _) in lines.items()})
        if notes:
            ax.set_title("\n".join(notes), fontsize=7)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=7)
        if numeric:
            ax.set_xticks(np.asarray(ticks, dtype=float), [f"{t:g}" for t in ticks])
        else:
            ax.set_xticks(np.arange(len(ticks)), [str(t) for t in ticks], rotation=20,
                          ha="right")
    for k in range(len(shown), nrows * ncols):  # unused panels
        axes[k // ncols][k % ncols].set_visible(False)
    what = f"metrics against {axis}"
    if averaged:
        what += f" (mean over {', '.join(short(a) for a in others)})"
    heading(fig, what, title or "")
    if handles:
        fig.legend(list(handles.values()), list(handles), loc="center left",
                   bbox_to_anchor=(1.0, 0.5), fontsize=7, frameon=False)
    fig.tight_layout()
    return fig


def file_name(axis: str) -> str:
    return "sweep_" + re.sub(r"[^A-Za-z0-9_-]+", "-", axis) + ".png"


def figures(table: pd.DataFrame, grid: dict[str, list] | Sequence[str],
            title: str | None = None) -> dict[str, Figure]:
    """One figure per grid axis, by file name (not written)."""
    return {file_name(axis): sweep_figure(table, axis, grid, title=title)
            for axis in grid if axis in table.columns and len(table)}


def plot_sweep(table: pd.DataFrame, grid: dict[str, list] | Sequence[str], out: Path,
               title: str | None = None) -> list[Path]:
    """Write ``sweep_<axis>.png`` for every grid axis into ``out``; returns the paths."""
    written = []
    for name, fig in figures(table, grid, title).items():
        save_figure(fig, out / name)
        written.append(out / name)
    return written


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m analysis.plots.sweep",
                                description="Write sweep_<axis>.png (every metric against "
                                            "each grid axis, per scheme) for a sweep folder.")
    p.add_argument("dir", metavar="DIR", type=Path, help="sweep folder (tooldns sweep)")
    p.add_argument("--out", type=Path, help="write the figures here (default: DIR)")
    args = p.parse_args(argv)
    try:
        sweep = load_sweep(args.dir)
    except FileNotFoundError as exc:
        print(f"analysis.plots.sweep: {exc}", file=sys.stderr)
        return 2
    out = args.out or args.dir
    out.mkdir(parents=True, exist_ok=True)
    for path in plot_sweep(sweep.table, sweep.grid, out, sweep_title(sweep.meta)):
        print(path)
    return 0


if __name__ == "__main__":
    from analysis.pipes import guarded

    raise SystemExit(guarded(main))
