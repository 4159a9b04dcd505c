"""Retrieval-quality figures (PNG, headless matplotlib) from ``sim.evaluate`` records.

* ``hit_per_category_<scorer>.png`` — hit@1 (category definition) per category,
  hierarchical ToolDNS walk vs flat retrieval with the same scorer (paper Figs 7 and 9);
* ``recall_vs_examined.png`` — recall@K against items examined C(q): beam widths of the
  ToolDNS walk, A2X policies and flat retrieval;
* :func:`search_space` — C(q) against N for several depths (paper Fig 8).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

from analysis.plots import _save


def hit_per_category(df: pd.DataFrame, scorer: str, path: Path, top: int = 20) -> bool:
    """Bars per category for ``flat:scorer`` and ``tooldns:scorer``; False if either is absent."""
    flat, hier = f"flat:{scorer}", f"tooldns:{scorer}"
    sub = df[df.method.isin([flat, hier])]
    if sub.method.nunique() < 2:
        return False
    counts = sub[sub.method == hier].category.value_counts()
    cats = counts.index[:top].tolist()
    table = (sub[sub.category.isin(cats)].groupby(["category", "method"]).hit1_cat.mean()
             .unstack().reindex(cats))
    fig, ax = plt.subplots(figsize=(max(6, 0.45 * len(cats)), 4))
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
    _save(fig, path)
    return True


def recall_vs_examined(df: pd.DataFrame, path: Path) -> None:
    """One point per method: mean recall@K against mean C(q) (log scale)."""
    means = df.groupby("method", sort=False)[["recall_k", "examined"]].mean().dropna()
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for family, marker in (("flat", "s"), ("tooldns", "o"), ("a2x", "^"), ("grail", "D")):
        sel = means[[m.split(":")[0] == family for m in means.index]]
        if len(sel):
            ax.scatter(sel.examined, 100 * sel.recall_k, marker=marker, label=family)
            for name, r in sel.iterrows():
                ax.annotate(str(name).split(":", 1)[-1], (r.examined, 100 * r.recall_k),
                            fontsize=6, xytext=(3, 3), textcoords="offset points")
    for scorer in {m.split(":")[1] for m in means.index if m.startswith("tooldns:")}:
        beams = sorted(((int(m.split(":")[2]) if m.count(":") == 2 else 1), m)
                       for m in means.index if m.startswith(f"tooldns:{scorer}"))
        if len(beams) > 1:
            pts = means.loc[[m for _, m in beams]]
            ax.plot(pts.examined, 100 * pts.recall_k, lw=0.8, alpha=0.6)
    ax.set_xscale("log")
    ax.set_xlabel("items examined per query C(q)")
    ax.set_ylabel("recall@K (%)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    _save(fig, path)


def search_space(df: pd.DataFrame, path: Path) -> None:
    """``df`` columns: n_tools, depth, examined (mean C(q)); flat = N drawn for reference."""
    fig, ax = plt.subplots(figsize=(6, 4.5))
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
    _save(fig, path)


def plot_all(df: pd.DataFrame, out: Path) -> list[Path]:
    """The per-run figures into ``out``; returns the files written."""
    written = []
    for scorer in sorted({m.split(":")[1] for m in df.method if m.startswith("flat:")}):
        p = out / f"hit_per_category_{scorer}.png"
        if hit_per_category(df, scorer, p):
            written.append(p)
    if df.recall_k.notna().any():
        p = out / "recall_vs_examined.png"
        recall_vs_examined(df, p)
        written.append(p)
    return written
