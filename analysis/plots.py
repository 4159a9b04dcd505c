"""Standard plots of a run's per-query records (PNG, headless matplotlib).

* ``latency_cdf.png`` — CDF of discovery latency per scheme;
* ``bytes_per_query.png`` — mean IP bytes up/down per query per scheme;
* ``cache_hits_over_time.png`` — share of queries helped by a cache, per scheme, over time.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from sim.atomic import atomic_write

# fixed metadata so the same records give byte-identical PNG files
_META = {"Software": None}


def _save(fig: plt.Figure, path: Path) -> None:
    """Atomically (sim.atomic: a temporary file beside ``path``, removed on failure; mode
    from the umask; disk errors as one-line OutputError)."""
    try:
        atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=110,
                                                   bbox_inches="tight", metadata=_META))
    finally:
        plt.close(fig)


def latency_cdf(df: pd.DataFrame, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(6, 4))
    for scheme, g in df[df.success].groupby("scheme", sort=False):
        x = np.sort(g.latency_ms.to_numpy())
        ax.step(x, np.arange(1, len(x) + 1) / len(x), where="post", label=str(scheme))
    ax.set_xlabel("discovery latency (ms)")
    ax.set_ylabel("fraction of successful queries")
    ax.set_xscale("symlog", linthresh=1.0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    _save(fig, path)


def bytes_per_query(df: pd.DataFrame, path: Path) -> None:
    means = df.groupby("scheme", sort=False)[["bytes_up", "bytes_down"]].mean()
    fig, ax = plt.subplots(figsize=(6, 4))
    x = np.arange(len(means))
    ax.bar(x - 0.2, means.bytes_up, width=0.4, label="up (queries)")
    ax.bar(x + 0.2, means.bytes_down, width=0.4, label="down (responses)")
    ax.set_xticks(x, means.index, rotation=20, ha="right")
    ax.set_ylabel("IP bytes per query")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    _save(fig, path)


def cache_hits_over_time(df: pd.DataFrame, path: Path, bins: int = 20) -> None:
    fig, ax = plt.subplots(figsize=(6, 4))
    for scheme, g in df.groupby("scheme", sort=False):
        g = g.sort_values("sent_s")
        chunks = [g.iloc[i] for i in np.array_split(np.arange(len(g)), min(bins, len(g)))]
        t = [c.sent_s.mean() for c in chunks if len(c)]
        share = [(c.cache_hits > 0).mean() for c in chunks if len(c)]
        ax.plot(t, share, marker="o", ms=3, label=str(scheme))
    ax.set_xlabel("time (s)")
    ax.set_ylabel("queries helped by a cache")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    _save(fig, path)


def standard_plots(df: pd.DataFrame, out: Path) -> list[Path]:
    paths = [out / "latency_cdf.png", out / "bytes_per_query.png",
             out / "cache_hits_over_time.png"]
    if df.empty:
        return []
    latency_cdf(df, paths[0])
    bytes_per_query(df, paths[1])
    cache_hits_over_time(df, paths[2])
    return paths
