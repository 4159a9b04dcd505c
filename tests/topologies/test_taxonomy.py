"""Taxonomy construction: shape caps, balance, labels, merging, multi-parent, statistics."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pytest

from topologies.datasets import synthetic_catalog
from topologies.taxonomy import (
    TaxonomyConfig,
    balance_stats,
    balanced_assign,
    build_taxonomy,
    from_categories,
)

LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return synthetic_catalog(n_tools=480, branching=4, depth=2, seed=2, n_queries=10)[0]


def test_balanced_assign_respects_capacity() -> None:
    sims = np.array([[0.9, 0.1], [0.8, 0.2], [0.7, 0.3], [0.1, 0.9]])
    assert balanced_assign(sims, 2).tolist() == [0, 0, 1, 1]
    assert balanced_assign(sims, 4).tolist() == [0, 0, 0, 1]
    with pytest.raises(ValueError):
        balanced_assign(sims, 1)


def test_tree_shape_labels_and_determinism(rows: list[dict]) -> None:
    cfg = TaxonomyConfig(branching=4, depth=2, leaf_size=20, slack=1.3, seed=0)
    tax = build_taxonomy(rows, cfg)
    assert tax.paths == build_taxonomy(rows, cfg).paths
    ns = tax.namespace(rows)
    stats = balance_stats(ns)
    assert stats["depth_max"] == 2 and stats["branching_max"] <= 4
    assert stats["tools"] == stats["placements"] == 480
    assert stats["leaf_max"] <= np.ceil(1.3 * np.ceil(1.3 * 480 / 4) / 4)
    for name, zone in ns.zones.items():
        if name not in (".", "tools."):
            assert LABEL.match(name.split(".")[0]), name
            assert zone.summary.split()[0] == name.split(".")[0].replace("-", " ")
        labels = [c.split(".")[0] for c in zone.children]
        assert len(labels) == len(set(labels))


def test_clusters_recover_the_synthetic_categories(rows: list[dict]) -> None:
    tax = build_taxonomy(rows, TaxonomyConfig(branching=4, depth=1, leaf_size=10))
    top = Counter((r["path"][0], tax.paths[r["id"]][0][0]) for r in rows)
    # each built top-level cluster is (almost) one true category: purity
    best: dict[str, int] = {}
    for (_, cluster), n in top.items():
        best[cluster] = max(best.get(cluster, 0), n)
    assert sum(best.values()) / len(rows) >= 0.9


def test_leaf_cap_stops_splitting_and_tiny_clusters_merge(rows: list[dict]) -> None:
    small = rows[:30]
    tax = build_taxonomy(small, TaxonomyConfig(branching=8, depth=3, leaf_size=40))
    assert all(p == [["all"]] for p in tax.paths.values())  # 30 <= leaf cap: one leaf
    tax = build_taxonomy(rows, TaxonomyConfig(branching=8, depth=1, leaf_size=5, min_size=50))
    sizes = Counter(tuple(p[0]) for p in tax.paths.values())
    assert min(sizes.values()) >= 50


def test_multi_parent_places_borderline_tools_twice() -> None:
    weather = "weather rain forecast temperature wind humidity storm"
    stocks = "stock price market shares trading dividend exchange"

    def row(i: int, words: list[str]) -> dict:
        return {"id": f"t{i}", "name": f"n{i}", "description": " ".join(words),
                "protocol": "mcp", "path": ["x"]}

    rng = np.random.default_rng(0)
    rows = [row(i, list(rng.choice(weather.split(), 4))) for i in range(30)]
    rows += [row(30 + i, list(rng.choice(stocks.split(), 4))) for i in range(30)]
    rows += [row(60 + i, weather.split()[i:i + 3] + stocks.split()[i:i + 3]) for i in range(4)]
    cfg = TaxonomyConfig(branching=2, depth=1, leaf_size=10, multi_parent=0.5)
    tax = build_taxonomy(rows, cfg)
    multi = sorted(tid for tid, p in tax.paths.items() if len(p) > 1)
    assert multi == ["t60", "t61", "t62", "t63"]
    assert all(len({tuple(x) for x in tax.paths[t]}) == 2 for t in multi)
    stats = balance_stats(tax.namespace(rows))
    assert stats["placements"] == 64 + 4 and stats["tools"] == 64
    assert build_taxonomy(rows, TaxonomyConfig(branching=2, depth=1, leaf_size=10)).paths[
        "t60"] in ([tax.paths["t60"][0]], [tax.paths["t60"][1]])


def test_from_categories_merges_small_leaves() -> None:
    rows = [{"id": f"t{i}", "name": f"n{i}", "description": "some words here",
             "protocol": "mcp", "path": p}
            for i, p in enumerate([["a", "x"]] * 5 + [["a", "y"]] + [["b"]] * 4 + [["c"]])]
    tax = from_categories(rows, min_size=3)
    assert Counter(tuple(p[0]) for p in tax.paths.values()) == {
        ("a", "x"): 5, ("a", "other"): 1, ("b",): 4, ("other",): 1}
    assert from_categories(rows).paths["t5"] == [["a", "y"]]


def test_balance_stats_of_a_known_tree() -> None:
    rows = [{"id": f"t{i}", "name": f"n{i}", "description": "words words", "protocol": "mcp",
             "path": p} for i, p in enumerate([["a"]] * 3 + [["b"]] * 1)]
    s = balance_stats(from_categories(rows).namespace(rows))
    assert (s["leaves"], s["leaf_min"], s["leaf_max"], s["leaf_mean"]) == (2, 1, 3, 2)
    assert s["leaf_gini"] == pytest.approx(0.25)
    assert s["branching_mean"] == 2 and s["depth_max"] == 1
