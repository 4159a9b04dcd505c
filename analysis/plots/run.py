"""Standard figures of a run's per-query records (PNG):

* ``latency_cdf.png`` — CDF of discovery latency per scheme (schemes with failures say so
  in the legend; one with no success is listed as such);
* ``bytes_per_query.png`` — mean IP bytes up/down per query per scheme;
* ``cache_hits_over_time.png`` — share of queries helped by a cache and mean round trips,
  per scheme over time, binned per workload phase (no line across the gap between phases;
  TTL expiry and phase starts marked);
* :func:`phase_bars` — mean round trips and median latency per phase and scheme (reports).

Every function takes the records (``analysis.results.load_run(...).records``), returns the
figure and, given a ``path``, also writes it; titles name scenario, engine and seed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from analysis.metrics import METRICS
from analysis.plots.style import (
    heading,
    new_figure,
    new_grid,
    same_as,
    save_figure,
    scheme_colors,
    schemes_of,
    value_axis,
)
from analysis.results import per_phase
from analysis.titles import records_title

STANDARD = ("latency_cdf.png", "bytes_per_query.png", "cache_hits_over_time.png")
#: the per-phase metrics :func:`phase_bars` draws by default
PHASE_BARS = ("answered_without_upstream", "mean_upstream_queries", "mean_latency_ms")


def latency_cdf(df: pd.DataFrame, path: Path | None = None, title: str | None = None
                ) -> Figure:
    """CDF of the latency of successful discoveries, one step line per scheme. A scheme
    whose queries did not all succeed says how many did; one with none is still listed."""
    fig, ax = new_figure()
    colors = scheme_colors(df.scheme)
    curves = {s: np.sort(df.latency_ms[(df.scheme == s) & df.success].to_numpy())
              for s in schemes_of(df)}
    same = same_as({s: x for s, x in curves.items() if len(x)})
    for scheme, x in curves.items():
        g = df[df.scheme == scheme]
        if len(x) == 0:  # a legend entry without a line: the scheme ran, nothing succeeded
            ax.plot([], [], color=colors[scheme], ls="--", label=f"{scheme} (0 successes)")
            continue
        label = scheme if len(x) == len(g) else f"{scheme} ({len(x)} of {len(g)} succeeded)"
        if scheme in same:  # drawn over the earlier curve: say so, and let it show through
            label += f" (same as {same[scheme]})"
        ax.step(x, np.arange(1, len(x) + 1) / len(x), where="post", color=colors[scheme],
                label=label, lw=3.5 if scheme in same else 1.5,
                alpha=0.5 if scheme in same else 1.0)
    ax.set_xlabel("discovery latency (ms)")
    ax.set_ylabel("fraction of successful queries")
    latencies = np.concatenate(list(curves.values())) if curves else np.array([])
    if len(latencies) and latencies.min() <= 0:  # a zero latency cannot sit on a log axis
        ax.set_xscale("symlog", linthresh=1.0)
    elif len(latencies):
        value_axis(ax, latencies, which="x", zero=False)
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    if len(df):
        ax.legend(fontsize=8)
    heading(ax, "discovery latency CDF", _title(title, df))
    if path is not None:
        save_figure(fig, path)
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
    heading(ax, "bytes per query", _title(title, df))
    if path is not None:
        save_figure(fig, path)
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


def ttl_marks(scenario: dict[str, Any]) -> dict[str, float]:
    """The record TTLs of a resolved scenario (its ``caches``), one label per distinct
    value: ``{"SRV/A TTL": 300.0, "NS TTL": 86400.0}``."""
    caches = scenario.get("caches") or {}
    by_value: dict[float, list[str]] = {}
    for key, name in (("srv_ttl", "SRV"), ("a_ttl", "A"), ("ns_ttl", "NS")):
        value = caches.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            by_value.setdefault(float(value), []).append(name)
    return {f"{'/'.join(names)} TTL": value for value, names in by_value.items()}


def _annotate_time(ax: Axes, lo: float, hi: float, ttls: dict[str, float], start: float,
                   boundaries: Sequence[tuple[float, str]]) -> None:
    """Vertical lines on a time axis spanning ``lo``..``hi``: where records cached at the
    workload's ``start`` expire (``start`` + n x TTL) and where phases begin."""
    for n, (label, ttl) in enumerate(ttls.items()):
        for t in np.arange(start + ttl, hi + 1e-9, ttl)[:20]:
            if lo <= t <= hi:
                ax.axvline(t, color="0.35", ls=":", lw=1)
                ax.annotate(f"{label} expiry", (t, 1.0), xycoords=("data", "axes fraction"),
                            xytext=(2, -10 - 9 * n), textcoords="offset points", fontsize=6,
                            color="0.3")
    for t, label in boundaries:
        if lo <= t <= hi:
            ax.axvline(t, color="0.5", ls="--", lw=1)
            ax.annotate(label, (t, 0.0), xycoords=("data", "axes fraction"),
                        xytext=(2, 3), textcoords="offset points", fontsize=6, color="0.3")


def cache_hits_over_time(df: pd.DataFrame, path: Path | None = None, bins: int = 20,
                         title: str | None = None, max_facets: int = 6,
                         ttls: dict[str, float] | None = None) -> Figure:
    """Top: share of queries helped by a resolver cache; bottom: mean round trips per
    query; both per scheme over workload time, binned within each phase (``bins`` in all,
    shared out over the phases). Each phase gets its own column (time axes broken at the
    idle gaps; up to ``max_facets`` phases, else one axis with a line per phase and the
    phase starts marked), so no line crosses the gap between phases. ``ttls`` (label:
    seconds, e.g. :func:`ttl_marks`) marks where records cached at the start expire."""
    phase_ids = sorted(df.phase.unique()) if "phase" in df and len(df) else [0]
    columns = [[ph] for ph in phase_ids] if len(phase_ids) <= max_facets else [phase_ids]
    per_phase = max(2, bins // max(1, len(phase_ids)))
    width = 6.5 if len(columns) == 1 else min(3.0 + 2.3 * len(columns), 13.0)
    fig, axes = new_grid((width, 5.5), 2, len(columns), sharey="row")
    colors = scheme_colors(df.scheme)
    for col, group in enumerate(columns):
        top, bottom = axes[0][col], axes[1][col]
        for scheme in schemes_of(df):
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
        part = df[df.phase.isin(group)] if "phase" in df else df
        if len(part):
            starts = [] if len(group) == 1 else [
                (float(df[df.phase == ph].sent_s.min()), f"phase {ph}") for ph in group[1:]]
            lo, hi = float(part.sent_s.min()), float(part.sent_s.max())
            for ax in (top, bottom):
                _annotate_time(ax, lo, hi, ttls or {}, float(df.sent_s.min()), starts)
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
    heading(fig, "cache help over time (binned per phase)", _title(title, df))
    fig.tight_layout()
    if path is not None:
        save_figure(fig, path)
    return fig


def phase_bars(df: pd.DataFrame, path: Path | None = None, title: str | None = None,
               metrics: Sequence[str] = PHASE_BARS) -> Figure:
    """Per phase and scheme: grouped bars of :func:`analysis.results.per_phase` metrics
    (keys of :data:`analysis.metrics.METRICS`, each on its axis label)."""
    table = per_phase(df)
    schemes = schemes_of(df)
    colors = scheme_colors(schemes)
    fig, axes = new_grid((4.2 * len(metrics), 3.8), 1, len(metrics))
    phase_ids = sorted(df.phase.unique()) if len(df) else []
    width = 0.8 / max(1, len(schemes))
    for ax, metric in zip(axes[0], metrics, strict=True):
        for j, scheme in enumerate(schemes):
            vals = [table[metric].get((scheme, ph), np.nan) for ph in phase_ids]
            ax.bar(np.arange(len(phase_ids)) + (j - (len(schemes) - 1) / 2) * width, vals,
                   width, color=colors[scheme], label=scheme)
        ax.set_xticks(np.arange(len(phase_ids)), [f"phase {p}" for p in phase_ids])
        ax.set_ylabel(METRICS[metric].axis)
        ax.grid(axis="y", alpha=0.3)
    if schemes:
        axes[0][0].legend(fontsize=7)
    heading(fig, "per workload phase", _title(title, df))
    fig.tight_layout()
    if path is not None:
        save_figure(fig, path)
    return fig


def standard_plots(df: pd.DataFrame, out: Path, title: str | None = None,
                   ttls: dict[str, float] | None = None) -> list[Path]:
    """The three standard figures into ``out`` (none for no records); ``title`` (default:
    scenario, engine and seed from the records) heads each; ``ttls`` as for
    :func:`cache_hits_over_time`."""
    paths = [out / name for name in STANDARD]
    if df.empty:
        return []
    latency_cdf(df, paths[0], title)
    bytes_per_query(df, paths[1], title)
    cache_hits_over_time(df, paths[2], title=title, ttls=ttls)
    return paths


def _title(title: str | None, df: pd.DataFrame) -> str:
    return records_title(df) if title is None else title
