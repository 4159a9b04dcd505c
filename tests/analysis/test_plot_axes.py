"""Sweep tables and figure axes: readable point names, pivots, tables split to fit a page,
per-metric axes (shares 0-100 %, labelled log ticks, zero-based linear), every scheme on
its metric's one axis, coinciding curves named, TTL expiry and phase starts on time plots."""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.pivot import axis_names, metric_pivot, point_names, split_columns, width
from analysis.plots import run as plots
from analysis.plots.style import new_figure, value_axis
from analysis.plots.sweep import panels, sweep_figure

GRID = {"namespace.branching": [2, 8], "namespace.depth": [1, 3]}


def _table() -> pd.DataFrame:
    rows = []
    for b in (2, 8):
        for d in (1, 3):
            for scheme, c in (("k1", 24 + b * d), ("k3", 24 + b * d), ("agentdns", 6000)):
                rows.append({"point": f"00{b}{d}-abcdef", "namespace.branching": b,
                             "namespace.depth": d, "scheme": scheme, "queries": 10,
                             "hit_at_k": 0.9 + 0.01 * d, "mean_round_trips": 1.0 + d,
                             "mean_bytes_up": 300.0 + b, "mean_tools_examined": float(c)})
    return pd.DataFrame(rows)


def test_point_names_and_pivot() -> None:
    table = _table()
    assert axis_names(["namespace.branching", "network.branching"]) == {
        "namespace.branching": "namespace.branching", "network.branching": "network.branching"}
    assert point_names(table, list(GRID)).iloc[-1] == "b=8,d=3"
    pivot = metric_pivot(table, "mean_round_trips", list(GRID))
    assert list(pivot.columns) == ["scheme", "b", "d=1", "d=3"]
    assert list(pivot.scheme) == ["k1", "k1", "k3", "k3", "agentdns", "agentdns"]
    assert pivot.iloc[1].tolist() == ["k1", "8", "2.00", "4.00"]
    one = metric_pivot(table[table["namespace.depth"] == 1], "hit_at_k", ["namespace.depth"])
    assert list(one.columns) == ["scheme", "d=1"] and one.iloc[0, 1] == "91.0%"


def test_wide_tables_are_split_with_their_keys() -> None:
    frame = pd.DataFrame({"point": ["b=8,d=3"], "scheme": ["k1"],
                          **{f"metric number {i}": ["123456.78"] for i in range(20)}})
    parts = split_columns(frame, 2, chars=60)
    assert len(parts) > 1
    assert all(list(p.columns[:2]) == ["point", "scheme"] for p in parts)
    assert all(width(p, list(p.columns)) <= 60 for p in parts)
    assert sum(len(p.columns) - 2 for p in parts) == 20


def test_axis_scale_per_metric() -> None:
    fig, ax = new_figure()
    assert value_axis(ax, [0.89, 0.95, 1.0], share=True) == "share"
    assert ax.get_ylim()[0] <= 0 and ax.get_ylim()[1] >= 1  # not zoomed to 0.89-1.00
    fig, ax = new_figure()
    assert value_axis(ax, [1.5, 2.0, 2.5]) == "linear" and ax.get_ylim()[0] == 0
    fig, ax = new_figure()
    ax.plot([0, 1], [24, 6000])
    assert value_axis(ax, [24, 246, 6000]) == "log"
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_yticklabels()
              if t.get_text() and 24 <= t.get_position()[1] <= 6000]
    assert len(labels) >= 5 and "100" in labels and "1000" in labels, labels


def test_latency_cdf_ticks_and_coinciding_curves() -> None:
    rng = np.random.default_rng(1)
    lat = np.sort(rng.uniform(20, 120, 50))
    df = pd.DataFrame({"scheme": ["K=3"] * 50 + ["K=1"] * 50 + ["other"] * 50,
                       "success": True, "latency_ms": np.concatenate([lat, lat, lat * 3]),
                       "sent_s": 0.0, "phase": 0})
    fig = plots.latency_cdf(df, title="t")
    ax = fig.axes[0]
    fig.canvas.draw()
    lo, hi = ax.get_xlim()
    ticks = [t.get_text() for t in ax.get_xticklabels()
             if t.get_text() and lo <= t.get_position()[0] <= hi]
    assert len(ticks) >= 4, ticks  # 20-360 ms: more than the one label of a bare log axis
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["K=3", "K=1 (same as K=3)", "other"]


def test_schemes_share_one_axis_per_metric() -> None:
    """A registry 200x a walk is drawn on the walk's axis (log, since the values span a
    decade), not on a panel of its own: the comparison is read off one scale."""
    table = _table()
    shown = panels(table, ["mean_tools_examined", "hit_at_k"])
    assert shown == [("mean_tools_examined", ["k1", "k3", "agentdns"], ""),
                     ("hit_at_k", ["k1", "k3", "agentdns"], "")]
    fig = sweep_figure(table, "namespace.depth", GRID,
                       metrics=["mean_tools_examined", "hit_at_k"])
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert len(axes) == 2
    examined = axes[0]
    assert examined.get_yscale() == "log"
    lo, hi = examined.get_ylim()
    assert lo <= 26 and hi >= 6000  # the walk's 26-48 items and the registry's 6,000
    assert {ln.get_label().split(",")[0] for ln in examined.get_lines()} == {
        "k1", "k3", "agentdns"}
    titles = [ax.get_title() for ax in axes]
    assert any("k3 = k1" in t for t in titles)  # K=3 lies on K=1 in every panel


def test_time_plot_marks_ttl_expiry_and_phases() -> None:
    df = pd.DataFrame({"scheme": "s", "sent_s": np.arange(0, 100, 1.0), "cache_hits": 1,
                       "round_trips": 1.0, "phase": np.repeat(np.arange(10), 10)})
    ttls = plots.ttl_marks({"caches": {"srv_ttl": 30, "a_ttl": 30, "ns_ttl": 86400}})
    assert ttls == {"SRV/A TTL": 30.0, "NS TTL": 86400.0}
    fig = plots.cache_hits_over_time(df, ttls=ttls, max_facets=6)  # 10 phases: one axis
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts.count("SRV/A TTL expiry") == 3  # at 30, 60 and 90 s
    assert "phase 1" in texts and "phase 9" in texts and "NS TTL expiry" not in texts
