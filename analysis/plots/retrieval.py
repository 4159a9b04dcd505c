"""Retrieval-quality figures (PNG, headless matplotlib) from ``sim.retrieval.evaluator`` records.

* ``hit_per_category_<scorer>.png`` — hit@1 (category definition) per category,
  hierarchical ToolDNS walk vs flat retrieval with the same scorer (paper Figs 7 and 9);
* ``recall_vs_examined.png`` — recall@K against items examined C(q): beam widths of the
  ToolDNS walk, A2X policies and flat retrieval;
* :func:`search_space` — C(q) against N for several depths (paper Fig 8).

Each takes an optional ``title`` (evaluation name and seed) shown under the figure's own.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from analysis.plots.style import heading, new_figure, save_figure


def hit_per_category(df: pd.DataFrame, scorer: str, path: Path | None, top: int = 20,
                     title: str | None = None) -> Figure | None:
    """Bars per category for ``flat:scorer`` and ``tooldns:scorer`` (written to ``path``
    when given); None if either method is absent."""
    flat, hier = f"flat:{scorer}", f"tooldns:{scorer}"
    sub = df[df.method.isin([flat, hier])]
    if sub.method.nunique() < 2:
        return None
    counts = sub[sub.method == hier].category.value_counts()
    cats = counts.index[:top].tolist()
    table = (sub[sub.category.isin(cats)].groupby(["category", "method"]).hit1_cat.mean()
             .unstack().reindex(cats))
    fig, ax = new_figure((max(6, 0.45 * len(cats)), 4))
    width = 0.4
    xs = range(len(cats))
    ax.bar([x - width / 2 for x in xs], 100 * table[flat], width, label=f"flat ({scorer})")
    ax.bar([x + width / 2 for x in xs], 100 * table[hier], width,
           label=f"ToolDNS top-1 walk ({scorer})")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([f"{c} ({counts[c]})" for c in cats], rotation=70, ha="right",
                       fontsize=7)
    ax.set_ylabel("hit@1, same leaf category (%)")
    ax.set_ylim(0, 100)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    heading(ax, f"hit@1 per category, flat vs ToolDNS walk ({scorer})", title or "")
    if path is not None:
        save_figure(fig, path)
    return fig


def _clusters(xy: np.ndarray, radius: float) -> list[list[int]]:
    """Single-linkage groups of points (display pixels) closer than ``radius``."""
    groups: list[set[int]] = []
    for i in range(len(xy)):
        near = [g for g in groups if any(np.hypot(*(xy[i] - xy[j])) < radius for j in g)]
        merged = {i}.union(*near)
        groups = [g for g in groups if g not in near] + [merged]
    return sorted((sorted(g) for g in groups), key=lambda g: g[0])


def recall_vs_examined(df: pd.DataFrame, path: Path | None = None, title: str | None = None
                       ) -> Figure:
    """One point per method: mean recall@K against mean C(q) (log scale). Methods whose
    points lie within a few pixels of each other share one label (one name per line);
    the labels are then moved apart (adjustText, deterministic) with a leader line to
    their point, so none overlaps another."""
    from adjustText import adjust_text

    means = df.groupby("method", sort=False)[["recall_k", "examined"]].mean().dropna()
    fig, ax = new_figure((6.5, 4.5))
    for family, marker in (("flat", "s"), ("tooldns", "o"), ("a2x", "^"), ("grail", "D")):
        sel = means[[m.split(":")[0].split("-")[0] == family for m in means.index]]  # grail-…
        if len(sel):
            ax.scatter(sel.examined, 100 * sel.recall_k, marker=marker, label=family,
                       zorder=3)
    for scorer in {m.split(":")[1] for m in means.index if m.startswith("tooldns:")}:
        # the plain walk's beam widths (tooldns:S, tooldns:S:B) joined by a line
        beams = sorted(((int(m.split(":")[2]) if m.count(":") == 2 else 1), m)
                       for m in means.index
                       if m.startswith(f"tooldns:{scorer}") and m.count(":") <= 2
                       and (m.count(":") == 1 or m.split(":")[2].isdigit()))
        if len(beams) > 1:
            pts = means.loc[[m for _, m in beams]]
            ax.plot(pts.examined, 100 * pts.recall_k, lw=0.8, alpha=0.6)
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("items examined per query C(q)")
    ax.set_ylabel("recall@K (%)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    heading(ax, "recall@K against items examined", title or "")
    if len(means):
        ax.margins(0.12, 0.2)
        ax.autoscale_view()
        x, y = means.examined.to_numpy(), 100 * means.recall_k.to_numpy()
        pixels = ax.transData.transform(np.column_stack([x, y]))
        texts = []
        for group in _clusters(pixels, radius=14.0):
            names = [str(means.index[i]) for i in group]
            texts.append(ax.text(float(np.mean(x[group])), float(np.mean(y[group])),
                                 "\n".join(names), fontsize=6, zorder=4,
                                 va="center", linespacing=1.1))
        adjust_text(texts, x=x, y=y, ax=ax, expand=(1.2, 1.4),
                    arrowprops={"arrowstyle": "-", "color": "grey", "lw": 0.5})
    if path is not None:
        save_figure(fig, path)
    return fig


def search_space(df: pd.DataFrame, path: Path | None = None, title: str | None = None
                 ) -> Figure:
    """``df`` columns: n_tools, depth, examined (mean C(q)); flat = N drawn for reference."""
    fig, ax = new_figure((6, 4.5))
    ns = sorted(df.n_tools.unique())
    ax.plot(ns, ns, "k--", label="flat (exhaustive)")
    for depth, g in df.groupby("depth"):
        g = g.sort_values("n_tools")
        ax.plot(g.n_tools, g.examined, marker="o", label=f"ToolDNS depth {depth}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("tools in the namespace N")
    ax.set_ylabel("items examined per query C(q)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    heading(ax, "search space against namespace size", title or "")
    if path is not None:
        save_figure(fig, path)
    return fig


def figures(df: pd.DataFrame, title: str | None = None) -> dict[str, Figure]:
    """The per-run figures by file name (not written)."""
    out: dict[str, Figure] = {}
    for scorer in sorted({m.split(":")[1] for m in df.method if m.startswith("flat:")}):
        fig = hit_per_category(df, scorer, None, title=title)
        if fig is not None:
            out[f"hit_per_category_{scorer}.png"] = fig
    if df.recall_k.notna().any():
        out["recall_vs_examined.png"] = recall_vs_examined(df, None, title)
    return out


def plot_all(df: pd.DataFrame, out: Path, title: str | None = None) -> list[Path]:
    """The per-run figures into ``out``; returns the files written."""
    written = []
    for name, fig in figures(df, title).items():
        save_figure(fig, out / name)
        written.append(out / name)
    return written
