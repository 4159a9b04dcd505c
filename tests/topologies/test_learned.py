"""Learned routing's data: the log split, pseudo-documents and the centroids built on them."""

from __future__ import annotations

import numpy as np

from tests.vectors import hashed_words
from topologies.datasets import category_of, stratified_split, synthetic_catalog
from topologies.learned import log_coverage, log_split, pseudo_vectors, without_held_out
from topologies.taxonomy import TaxonomyConfig, add_centroids, build_taxonomy


def unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def test_log_split_is_the_category_split_without_held_out_texts() -> None:
    rows, queries = synthetic_catalog(n_tools=200, branching=3, depth=2, seed=2, n_queries=80)
    queries.append({**queries[0]})  # the same text twice: one copy may land in each part
    cats = {r["id"]: category_of(r) for r in rows}
    train, test = stratified_split(queries, lambda q: cats[q["tool_ids"][0]], 0.4, 7)
    log, held = log_split(rows, queries, 0.4, 7)
    assert held == test
    texts = {q["query"].strip().lower() for q in test}
    assert log == [r for r in train if r["query"].strip().lower() not in texts]
    assert not texts & {r["query"].strip().lower() for r in log}
    assert without_held_out(train, []) == train


def test_pseudo_document_is_description_plus_first_log_queries() -> None:
    rows, _ = synthetic_catalog(n_tools=60, branching=2, depth=1, seed=3, n_queries=5)
    ns = build_taxonomy(rows, TaxonomyConfig(branching=2, depth=1, leaf_size=40)).namespace(
        rows, [])
    a, b = sorted(ns.tools)[:2]
    log = [{"query": "alpha route", "tool_ids": [a]}, {"query": "beta path", "tool_ids": [a, b]},
           {"query": "gamma way", "tool_ids": [a]}]
    ids, vecs = pseudo_vectors(ns, hashed_words, log, per_tool=2)
    assert ids == sorted(ns.tools)

    def emb(text: str) -> np.ndarray:
        return unit(hashed_words([text])[0].astype(float))

    desc = {t: emb(f"{ns.tools[t].name} {ns.tools[t].description}") for t in ids}
    got = dict(zip(ids, vecs, strict=True))
    # the first two queries naming a (log order), not the third
    assert np.allclose(got[a], unit(desc[a] + emb("alpha route") + emb("beta path")))
    assert np.allclose(got[b], unit(desc[b] + emb("beta path")))
    c = ids[2]  # no query names it: its description alone
    assert np.allclose(got[c], desc[c])
    assert log_coverage(ns, log) == {a, b}


def test_learned_centroids_are_the_mean_pseudo_document_of_each_subtree() -> None:
    rows, queries = synthetic_catalog(n_tools=240, branching=3, depth=2, seed=4, n_queries=60)
    ns = build_taxonomy(rows, TaxonomyConfig(branching=3, depth=2, leaf_size=30)).namespace(
        rows, [])
    ids, vecs = pseudo_vectors(ns, hashed_words, queries, per_tool=10)
    add_centroids(ns, hashed_words, (ids, vecs))
    row = {t: i for i, t in enumerate(ids)}
    for zone in ns.zones["tools."].children:
        below = [t for t, tool in ns.tools.items() if zone in ns.path(tool.zone)]
        for service, centroid in ns.zones[zone].centroids.items():
            want = unit(sum(vecs[row[t]] for t in below if ns.tools[t].service == service))
            assert np.allclose(centroid, want, atol=1e-6)
    # without a log the pseudo-documents are the descriptions: plain centroids
    plain = build_taxonomy(rows, TaxonomyConfig(branching=3, depth=2, leaf_size=30)).namespace(
        rows, [])
    same = build_taxonomy(rows, TaxonomyConfig(branching=3, depth=2, leaf_size=30)).namespace(
        rows, [])
    add_centroids(plain, hashed_words)
    add_centroids(same, hashed_words, pseudo_vectors(same, hashed_words, [], per_tool=10))
    for zone, node in plain.zones.items():
        assert node.centroids.keys() == same.zones[zone].centroids.keys()
        for service, vec in node.centroids.items():
            assert np.allclose(vec, same.zones[zone].centroids[service], atol=1e-6)


def test_a_split_by_tool_keeps_every_query_of_a_held_out_tool_out_of_the_log() -> None:
    from topologies.datasets import tool_split

    rows, queries = synthetic_catalog(n_tools=200, branching=3, depth=2, seed=2, n_queries=300)
    cats = {r["id"]: category_of(r) for r in rows}
    train, test, unseen = tool_split(queries, cats.__getitem__, 0.25, 0.4, 7)
    named = {t for q in queries for t in q["tool_ids"]}
    per_cat: dict[str, list[str]] = {}
    for t in sorted(named):
        per_cat.setdefault(cats[t], []).append(t)
    assert len(unseen) == sum(round(0.25 * len(ts)) for ts in per_cat.values()) > 0
    assert not unseen & {t for q in train for t in q["tool_ids"]}  # no log query names one
    assert [q for q in queries if unseen & set(q["tool_ids"])] == [
        q for q in test if unseen & set(q["tool_ids"])]  # every one held out, in order
    assert sorted(map(id, train + test)) == sorted(map(id, queries))
    seen_test = [q for q in test if not unseen & set(q["tool_ids"])]
    assert seen_test  # the other tools' queries are split as by query
    assert tool_split(queries, cats.__getitem__, 0.25, 0.4, 7)[2] == unseen
    assert tool_split(queries, cats.__getitem__, 0.25, 0.4, 8)[2] != unseen
