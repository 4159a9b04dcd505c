"""Seed 003's multi-tier retrieval (tier order, priority merge, per-tier times), its Eq. 4
discovery accuracy, GRAIL's sparse-only baseline and the least-squares query adapter.

Small hand-made catalogues and deterministic bag-of-words encoders (no model, no network).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from sim.evalspec import check_method, grail_options
from sim.retrieval.adapter import AdapterIndex, fit_adapter
from sim.retrieval.dataset import category_map
from sim.retrieval.evaluator import EvalConfig, Evaluator
from sim.retrieval.grail import GrailIndex
from sim.retrieval.ranked import Ranked
from sim.retrieval.tiered import TieredIndex, name_phrase, stem, terms
from sim.tierspec import TIERED_PAPER, tiered_options
from tests.sim.retrieval.test_grail import ROWS, Recorder, bow, row, small
from tests.vectors import hashed_words
from topologies.datasets import stratified_split, synthetic_catalog
from topologies.namespace import Query
from topologies.taxonomy import from_categories

# t0 is the only expert tool (a training query asks for it); t1 shares system keywords with
# the query; t2 is the query's best dense match (most shared words) but no keyword tier's
TOOLS = [
    row(0, "WeatherNow", "current conditions outside", ["weather"]),
    row(1, "CityMuseum", "museum tickets and gallery opening hours", ["travel"]),
    row(2, "lisbonpage", "lisbon lisbon lisbon trams lisbon", ["travel"]),
    row(3, "GalleryFinder", "gallery guide for museum visits", ["travel"]),
    row(4, "stocks", "market prices shares", ["finance"]),
    row(5, "crypto", "bitcoin prices wallet", ["finance"]),
]
TRAIN = [{"query": "weather forecast for lisbon today", "tool_ids": ["t0"]}]
INTENT = "lisbon weather and museum gallery in lisbon"


def tiered_index(rows: list[dict] = TOOLS) -> tuple[TieredIndex, list[str]]:
    ns = from_categories(rows).namespace(rows, [])
    idx = TieredIndex(ns, bow, TRAIN)
    return idx, idx.services["mcp"].ids


def test_options_parse_and_validate() -> None:
    assert tiered_options("tiered") == TIERED_PAPER
    o = tiered_options("tiered:t1=2:t2=0.25:t3=0.3:limit=5:only=31:lazy")
    assert (o.t1, o.t2, o.t3, o.limit, o.tiers, o.lazy) == (2.0, 0.25, 0.3, 5, (1, 3), True)
    for bad in ("tiered:only=4", "tiered:only=11", "tiered:limit=x", "tiered:fast", "tiered:t1="):
        with pytest.raises(ValueError, match="unknown tiered option"):
            check_method(bad)
    check_method("tiered:limit=5")
    check_method("flat:dense-adapter")
    check_method("grail:sparse-only")
    assert grail_options("grail:sparse-count").sparse_only == "count"


def test_keyword_helpers() -> None:
    assert name_phrase("WeatherNow") == "weather now" and stem("tools") == "tool"
    assert stem("class") == "class" and terms("getWeatherForecasts") == {"weather", "forecast"}


def test_tiers_run_in_priority_order_and_merge_without_duplicates() -> None:
    idx, ids = tiered_index()
    svc = idx.services["mcp"]
    assert set(svc.expert_kw) == {0}  # only the tool the training split asks for
    t1 = idx.expert(INTENT, svc, TIERED_PAPER.t1).order
    t2 = idx.system(INTENT, svc, TIERED_PAPER.t2).order
    t3 = idx.vector(INTENT, svc, None, 0).order
    assert t1 == [0] and t2 and t3[0] == 2  # the dense tier's best is not tier 1's
    assert 0 in t3  # the expert tool is found by the vector tier too ...
    expected: list[int] = []
    for i in t1 + t2 + t3:
        if i not in expected:
            expected.append(i)
    got = idx.rank(INTENT, "mcp", 4)
    assert got.tools == [ids[i] for i in expected[:4]]  # ... yet listed once, first
    assert got.extra["tier"] == 1.0 and got.extra["n_tier1"] == 1.0
    assert got.extra["n_tier1"] + got.extra["n_tier2"] + got.extra["n_tier3"] == 4
    assert got.tools[0] == "t0" and "t2" in got.tools
    assert got.tools.index("t2") > max(got.tools.index(ids[i]) for i in t2 if ids[i] in
                                       got.tools[:4])
    for tier in (1, 2, 3):
        assert got.extra[f"tier{tier}_ms"] >= 0.0
    # tiers switched off: the vector tier alone ranks by cosine
    only3 = idx.rank(INTENT, "mcp", 3, tiered_options("tiered:only=3"))
    assert only3.tools == [ids[i] for i in t3[:3]] and only3.extra["tier"] == 3.0
    assert math.isnan(only3.extra["tier1_ms"]) and math.isnan(only3.extra["tier2_ms"])


def test_limit_and_lazy_skip_later_tiers() -> None:
    idx, _ = tiered_index()
    got = idx.rank(INTENT, "mcp", 10, tiered_options("tiered:limit=1:lazy"))
    assert got.tools == ["t0"]  # the paper's limit truncates the merged list
    assert not math.isnan(got.extra["tier1_ms"])
    assert math.isnan(got.extra["tier2_ms"]) and math.isnan(got.extra["tier3_ms"])
    eager = idx.rank(INTENT, "mcp", 10, tiered_options("tiered:limit=1"))
    assert eager.tools == ["t0"] and not math.isnan(eager.extra["tier3_ms"])
    # a threshold above every cosine leaves the vector tier empty
    strict = idx.rank(INTENT, "mcp", 10, tiered_options("tiered:only=3:t3=1.01"))
    assert strict.tools == [] and strict.extra["tier"] == 0.0


def test_per_tier_columns_in_the_evaluation() -> None:
    rows, queries = synthetic_catalog(n_tools=120, branching=2, depth=1, seed=1, n_queries=40)
    cats = category_map(rows)
    train, test = stratified_split(queries, lambda q: cats[q["tool_ids"][0]], 0.4, 0)
    ns = from_categories(rows).namespace(rows, test)
    ev = Evaluator(ns, cats, EvalConfig(methods=("flat:bm25", "tiered", "tiered:limit=5"),
                                        k=10), hashed_words, train)
    df = ev.run(ns.queries)
    tiered = df[df.method == "tiered"]
    for col in ("tier1_ms", "tier2_ms", "tier3_ms", "tier", "n_tier1", "n_tier2", "n_tier3",
                "disc_acc"):
        assert col in df.columns
    assert (tiered[["tier1_ms", "tier2_ms", "tier3_ms"]] >= 0).all().all()
    assert df[df.method == "flat:bm25"]["tier1_ms"].isna().all()
    assert set(tiered["tier"]) <= {0.0, 1.0, 2.0, 3.0}
    assert (df[df.method == "tiered:limit=5"]["returned"].str.split().str.len() <= 5).all()


def test_discovery_accuracy_is_eq_4() -> None:
    """Eq. 4: |discovered ∩ used| / |discovered|; used = the query's ground truth."""
    rows, _ = synthetic_catalog(n_tools=30, branching=2, depth=1, seed=2, n_queries=4)
    ns = from_categories(rows).namespace(rows, [])
    ev = Evaluator(ns, category_map(rows), EvalConfig(methods=("flat:bm25",), k=4))
    a, b, c, d, e = sorted(ns.tools)[:5]
    q = Query("q", "anything", ns.tools[a].service, (a, b))
    # discovered {a, c, b, d}, used {a, b}: 2 / 4
    assert ev._row("m", q, Ranked([a, c, b, d, e], 5, 5, 0), 0.0, 30, 4)["disc_acc"] == 0.5
    # K = 3 discovers {a, c, b}: 2 / 3
    assert ev._row("m", q, Ranked([a, c, b, d], 5, 5, 0), 0.0, 30, 3)["disc_acc"] == 2 / 3
    assert ev._row("m", q, Ranked([c], 5, 5, 0), 0.0, 30, 3)["disc_acc"] == 0.0
    assert math.isnan(ev._row("m", q, Ranked([], 5, 5, 0), 0.0, 30, 3)["disc_acc"])


def test_sparse_only_grail_ranks_by_its_sparse_scores_without_embedding() -> None:
    ns, cats = small(ROWS)
    rec = Recorder()
    g = GrailIndex(ns, rec, cats)
    ids = g.ids["mcp"]
    intent = "weather prices for lisbon"
    count = grail_options("grail:sparse-count:no-synonyms")
    scores = g.sparse_counts(intent, "mcp", count)
    assert set(scores) == g.sparse(intent, "mcp", count)  # C_sparse, with its scores
    expected = sorted(scores, key=lambda i: (-scores[i], i))
    got = g.rank(intent, "mcp", 0, count)
    assert got.tools == [ids[i] for i in expected] and got.examined == len(scores)
    assert g.rank(intent, "mcp", 2, count).tools == got.tools[:2]
    paper = grail_options("grail:sparse-only:no-synonyms")  # SLM-Sort: random order
    one = g.rank(intent, "mcp", 0, paper).tools
    assert sorted(one) == sorted(got.tools) and g.rank(intent, "mcp", 0, paper).tools == one
    assert rec.texts == []  # nothing embedded: the sparse path alone
    g.rank(intent, "mcp", 0, grail_options("grail:sparse-only"))  # mined synonyms ...
    assert intent not in rec.texts  # ... but the query is never embedded


def test_adapter_recovers_a_linear_map_and_ranks_the_service_pool() -> None:
    rng = np.random.default_rng(0)
    q = rng.normal(size=(300, 6)).astype(np.float32)
    rot, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    w = fit_adapter(q, (q @ rot).astype(np.float32), 1e-6)
    assert np.allclose(w, rot, atol=1e-3)
    assert np.allclose(fit_adapter(q, q @ rot, 1e9), np.eye(6), atol=1e-3)  # λ → ∞: I
    rows, queries = synthetic_catalog(n_tools=120, branching=2, depth=1, seed=1, n_queries=60)
    cats = category_map(rows)
    train, test = stratified_split(queries, lambda r: cats[r["tool_ids"][0]], 0.4, 0)
    ns = from_categories(rows).namespace(rows, test)
    idx = AdapterIndex(ns, hashed_words, train)
    assert idx.info["pairs"] == sum(len(r["tool_ids"]) for r in train)
    got = idx.rank(test[0]["query"], ns.queries[0].service, 5)
    assert len(got.tools) == 5 and got.examined == len(idx.by_service[ns.queries[0].service][1])
