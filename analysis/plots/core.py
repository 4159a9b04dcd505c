"""Standard plots of a run's per-query records (PNG, matplotlib's object API: no pyplot, no
global backend, so they work the same headless, in workers and in notebooks).

* ``latency_cdf.png`` — CDF of discovery latency per scheme (schemes with failures say so
  in the legend; one with no success is listed as such);
* ``bytes_per_query.png`` — mean IP bytes up/down per query per scheme;
* ``cache_hits_over_time.png`` — share of queries helped by a cache and mean round trips,
  per scheme over time, binned per workload phase (no line across the gap between phases);
* :func:`phase_bars` — mean round trips and median latency per phase and scheme (reports).

Every function takes the records (``analysis.results.load_run(...).records``), returns the
figure and, given a ``path``, also writes it; titles name scenario, engine and seed.
The same records give byte-identical PNG files (fixed dpi, no software/date metadata).

    python3 -m analysis.plots.core DIR     # (re)write the standard figures of a run/sweep/eval
"""

from __future__ import annotations

import argparse
import io
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from analysis.files import atomic_write

# fixed metadata so the same records give byte-identical PNG files
_META = {"Software": None}
DPI = 110
STANDARD = ("latency_cdf.png", "bytes_per_query.png", "cache_hits_over_time.png")


def new_figure(figsize: tuple[float, float] = (6, 4), nrows: int = 1, ncols: int = 1,
               **kw: object) -> tuple[Figure, Axes | np.ndarray]:
    """A figure with its own Agg canvas (not registered with pyplot) and its axes."""
    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    return fig, fig.subplots(nrows, ncols, **kw)


def png_bytes(fig: Figure) -> bytes:
    """The figure as PNG, exactly as :func:`_save` writes it."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight", metadata=_META)
    return buf.getvalue()


def _save(fig: Figure, path: Path) -> None:
    """Atomically (analysis.files: a temporary file beside ``path``, removed on failure; mode
    from the umask; disk errors as one-line OutputError)."""
    try:
        atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=DPI,
                                                   bbox_inches="tight", metadata=_META))
    finally:
        if (plt := sys.modules.get("matplotlib.pyplot")) is not None:
            plt.close(fig)  # a pyplot figure (older callers); a no-op for ours


def title_of(df: pd.DataFrame) -> str:
    """``scenario (engine, seed N)`` from a run's records ('' if they do not say)."""
    if df.empty or not {"scenario", "engine", "seed"} <= set(df.columns):
        return ""
    first = df.iloc[0]
    return f"{first.scenario} ({first.engine}, seed {first.seed})"


def _heading(ax: Axes | Figure, what: str, title: str | None, df: pd.DataFrame) -> None:
    title = title_of(df) if title is None else title
    text = f"{what}\n{title}" if title else what
    if isinstance(ax, Figure):
        ax.suptitle(text, fontsize=10)
    else:
        ax.set_title(text, fontsize=10)


def scheme_colors(schemes: Iterable[object]) -> dict[str, str]:
    """One colour per scheme, in order of first appearance (the same in every figure)."""
    names = list(dict.fromkeys(str(s) for s in schemes))
    palette = [f"C{i % 10}" for i in range(len(names))]
    return dict(zip(names, palette, strict=True))


def _schemes(df: pd.DataFrame) -> list[str]:
    return list(dict.fromkeys(str(s) for s in df.scheme))


def latency_cdf(df: pd.DataFrame, path: Path | None = None, title: str | None = None
                ) -> Figure:
    """CDF of the latency of successful discoveries, one step line per scheme. A scheme
    whose queries did not all succeed says how many did; one with none is still listed."""
    fig, ax = new_figure()
    colors = scheme_colors(df.scheme)
    for scheme in _schemes(df):
        g = df[df.scheme == scheme]
        ok = g[g.success]
        if len(ok) == 0:  # a legend entry without a line: the scheme ran, nothing succeeded
            ax.plot([], [], color=colors[scheme], ls="--", label=f"{scheme} (0 successes)")
            continue
        label = scheme if len(ok) == len(g) else f"{scheme} ({len(ok)} of {len(g)} succeeded)"
        x = np.sort(ok.latency_ms.to_numpy())
        ax.step(x, np.arange(1, len(x) + 1) / len(x), where="post", color=colors[scheme],
                label=label)
    ax.set_xlabel("discovery latency (ms)")
    ax.set_ylabel("fraction of successful queries")
    ax.set_xscale("symlog", linthresh=1.0)
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    if len(df):
        ax.legend(fontsize=8)
    _heading(ax, "discovery latency CDF", title, df)
    if path is not None:
        _save(fig, path)
    return fig


def bytes_per_query(df: pd.DataFrame, path: Path | None = None, title: str | None = None
                    ) -> Figure:
    means = df.groupby("scheme", sort=False)[["bytes_up", "bytes_down"]].mean()
    fig, ax = new_figure()
    x = np.arange(len(means))
    ax.bar(x - 0.2, means.bytes_up, width=0.4, label="up (queries)")
    ax.bar(x + 0.2, means.bytes_down, width=0.4, label="down (responses)")
    ax.set_xticks(x, [str(s) for s in means.index], rotation=20, ha="right")
    ax.set_ylabel("IP bytes per query")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    _heading(ax, "bytes per query", title, df)
    if path is not None:
        _save(fig, path)
    return fig


def _phase_bins(g: pd.DataFrame, bins: int) -> pd.DataFrame:
    """Consecutive chunks of one scheme's queries in one phase (by send time): mean time,
    share helped by a cache, mean round trips."""
    g = g.sort_values("sent_s", kind="stable")
    rows = []
    for idx in np.array_split(np.arange(len(g)), min(bins, len(g))):
        c = g.iloc[idx]
        rows.append((c.sent_s.mean(), (c.cache_hits > 0).mean(), c.round_trips.mean()))
    return pd.DataFrame(rows, columns=["t", "cache", "round_trips"])


def cache_hits_over_time(df: pd.DataFrame, path: Path | None = None, bins: int = 20,
                         title: str | None = None, max_facets: int = 6) -> Figure:
    """Top: share of queries helped by a resolver cache; bottom: mean round trips per
    query; both per scheme over workload time, binned within each phase (``bins`` in all,
    shared out over the phases). Each phase gets its own column (time axes broken at the
    idle gaps; up to ``max_facets`` phases, else one axis with a line per phase), so no
    line crosses the gap between phases."""
    phase_ids = sorted(df.phase.unique()) if "phase" in df and len(df) else [0]
    columns = [[ph] for ph in phase_ids] if len(phase_ids) <= max_facets else [phase_ids]
    per_phase = max(2, bins // max(1, len(phase_ids)))
    width = 6.5 if len(columns) == 1 else min(3.0 + 2.3 * len(columns), 13.0)
    fig, axes = new_figure((width, 5.5), 2, len(columns), sharey="row", squeeze=False)
    colors = scheme_colors(df.scheme)
    for col, group in enumerate(columns):
        top, bottom = axes[0][col], axes[1][col]
        for scheme in _schemes(df):
            for ph in group:
                part = df[(df.scheme == scheme) & (df.phase == ph)] if "phase" in df else df[
                    df.scheme == scheme]
                if part.empty:
                    continue
                b = _phase_bins(part, per_phase)
                label = scheme if (col, ph) == (0, group[0]) else None
                top.plot(b.t, b.cache, marker="o", ms=3, color=colors[scheme], label=label)
                bottom.plot(b.t, b.round_trips, marker="o", ms=3, color=colors[scheme],
                            label=label)
        if len(columns) > 1:
            top.set_title(f"phase {group[0]}", fontsize=9)
        bottom.set_xlabel("workload time (s)")
        for ax in (top, bottom):
            ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("queries helped by a cache")
    axes[0][0].set_ylim(-0.02, 1.05)
    axes[1][0].set_ylabel("round trips per query")
    high = max(axes[1][0].get_ylim()[1], 1.0)  # autoscaled over the row (shared y)
    axes[1][0].set_ylim(-0.03 * high, high)
    if len(df):
        axes[0][0].legend(fontsize=7)
    _heading(fig, "cache help over time (binned per phase)", title, df)
    fig.tight_layout()
    if path is not None:
        _save(fig, path)
    return fig


def phase_bars(df: pd.DataFrame, path: Path | None = None, title: str | None = None,
               metrics: Sequence[tuple[str, str]] = (
                   ("mean_round_trips", "round trips per query"),
                   ("median_latency_ms", "median latency (ms)"))) -> Figure:
    """Per phase and scheme: grouped bars of :func:`analysis.results.per_phase` metrics."""
    from analysis.results import per_phase

    table = per_phase(df)
    schemes = _schemes(df)
    colors = scheme_colors(schemes)
    fig, axes = new_figure((4.2 * len(metrics), 3.8), 1, len(metrics), squeeze=False)
    phase_ids = sorted(df.phase.unique()) if len(df) else []
    width = 0.8 / max(1, len(schemes))
    for ax, (metric, label) in zip(axes[0], metrics, strict=True):
        for j, scheme in enumerate(schemes):
            vals = [table[metric].get((scheme, ph), np.nan) for ph in phase_ids]
            ax.bar(np.arange(len(phase_ids)) + (j - (len(schemes) - 1) / 2) * width, vals,
                   width, color=colors[scheme], label=scheme)
        ax.set_xticks(np.arange(len(phase_ids)), [f"phase {p}" for p in phase_ids])
        ax.set_ylabel(label)
        ax.grid(axis="y", alpha=0.3)
    if schemes:
        axes[0][0].legend(fontsize=7)
    _heading(fig, "per workload phase", title, df)
    fig.tight_layout()
    if path is not None:
        _save(fig, path)
    return fig


def standard_plots(df: pd.DataFrame, out: Path, title: str | None = None) -> list[Path]:
    """The three standard figures into ``out`` (none for no records); ``title`` (default:
    scenario, engine and seed from the records) heads each."""
    paths = [out / name for name in STANDARD]
    if df.empty:
        return []
    latency_cdf(df, paths[0], title)
    bytes_per_query(df, paths[1], title)
    cache_hits_over_time(df, paths[2], title=title)
    return paths


def write_figures(folder: Path, out: Path | None = None) -> list[Path]:
    """(Re)write the standard figures of a run, sweep or evaluation folder into ``out``
    (default: the folder itself); returns the files written."""
    from analysis import results

    out = out or folder
    out.mkdir(parents=True, exist_ok=True)
    kind = results.kind_of(folder)
    if kind == "run":
        run = results.load_run(folder, partial=True)
        paths = standard_plots(run.records, out, run.title)
        if "faults" in run.summary:
            from analysis.plots.faults import success_over_time

            paths.append(success_over_time(run.summary, out))
        return paths
    if kind == "sweep":
        from analysis.plots.sweep import plot_sweep

        sweep = results.load_sweep(folder)
        return plot_sweep(sweep.table, sweep.grid, out, sweep_title(sweep.meta))
    if kind == "eval":
        from analysis.plots.retrieval import plot_all

        ev = results.load_eval(folder)
        return plot_all(ev.per_query, out, eval_title(ev.meta))
    raise FileNotFoundError(f"{folder}: not a run, sweep or evaluation folder")


def sweep_title(meta: dict) -> str:
    return f"sweep {meta.get('scenario', '?')} (seed {meta.get('seed', '?')})"


def eval_title(meta: dict) -> str:
    return f"{meta.get('name', '?')} (seed {(meta.get('spec') or {}).get('seed', '?')})"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python3 -m analysis.plots.core",
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
        print(f"analysis.plots.core: {exc}", file=sys.stderr)
        return 2
    for path in paths:
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
