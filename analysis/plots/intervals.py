"""Replications as a figure: per metric, each scheme's mean over the seeds with its 95 %
confidence interval as an error bar (:mod:`analysis.intervals`); with other grid axes, one
bar group per value of the other axes' combination.

    from analysis.results import load_sweep
    from analysis.plots.intervals import interval_figure
    sw = load_sweep("results/quickstart")          # a run with seeds: 5
    interval_figure(sw.table, sw.axes)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from analysis.intervals import METHOD, SEED, interval_table, numeric_metrics
from analysis.metrics import METRICS, SWEEP_SHOWN
from analysis.plots.style import heading, new_grid, scheme_colors

FILE = "intervals.png"


def interval_figure(table: pd.DataFrame, axes: Sequence[str],
                    keys: Sequence[str] = SWEEP_SHOWN, title: str | None = None) -> Figure:
    """A panel per metric of ``keys``: a bar per scheme (grouped by the other axes' values)
    at the mean over seeds, the error bar its 95 % CI."""
    shown = numeric_metrics(table, keys)
    means = interval_table(table, axes, shown)
    rest = [a for a in axes if a != SEED]
    groups = (means[rest].astype(str).agg(", ".join, axis=1) if rest
              else pd.Series([""] * len(means), index=means.index))
    labels = list(dict.fromkeys(groups))
    schemes = list(dict.fromkeys(means.scheme))
    colors = scheme_colors(schemes)
    cols = min(3, max(1, len(shown)))
    rows = -(-len(shown) // cols) or 1
    fig, grid = new_grid((4.2 * cols, 3.2 * rows), rows, cols)
    width = 0.8 / max(1, len(schemes))
    for i, key in enumerate(shown):
        ax = grid[i // cols][i % cols]
        m = METRICS[key]
        for j, scheme in enumerate(schemes):
            mine = means[means.scheme == scheme]
            where = [labels.index(g) for g in groups[mine.index]]
            half = np.nan_to_num(mine[f"{key}_half"].to_numpy(dtype=float))
            ax.bar(np.asarray(where, dtype=float) + j * width, mine[key].to_numpy(dtype=float),
                   width, yerr=half, capsize=3, color=colors[scheme], label=scheme)
        ax.set_title(f"{m.label}" + (f" ({m.unit})" if m.unit else ""), fontsize=9)
        ax.set_xticks(np.arange(len(labels)) + width * (len(schemes) - 1) / 2)
        ax.set_xticklabels(labels if rest else [""] * len(labels), fontsize=7)
    for k in range(len(shown), rows * cols):
        grid[k // cols][k % cols].set_visible(False)
    grid[0][0].legend(fontsize=7)
    seeds = table[SEED].nunique() if SEED in table else 1
    heading(fig, f"mean ± 95 % CI over {seeds} seeds ({METHOD})", title or "")
    return fig
