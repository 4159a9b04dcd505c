"""A2X's progressive search (seed 001) as a resolver policy: the evaluator's descent equals
the resolver walking servers in memory, query by query; caches; a network scenario."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nodes.resolver.config import ResolverConfig
from nodes.resolver.merge import SEARCHES
from nodes.resolver.types import Discovery
from nodes.scoring import DenseScorer, Scorer, make_scorer
from sim.build.hierarchy import build_hierarchy
from sim.cli.query import SEARCH_CHOICES
from sim.engines.memory import MemoryNetwork
from sim.retrieval.hierarchy import InProcessHierarchy
from sim.run.runner import run_scenario
from tests.factories import scenario
from tests.sim.retrieval.test_eval import dns_walk
from tests.vectors import hashed_words
from topologies.datasets import synthetic_catalog, write_jsonl
from topologies.namespace import Namespace
from topologies.synthetic import synthetic
from topologies.taxonomy import TaxonomyConfig, add_centroids, build_taxonomy

POLICIES = ("get_one", "get_important", "get_all")


def _tree(dense: bool) -> tuple[Namespace, Scorer]:
    """A clustered tree of 4 × 4 over 400 tools, noisy queries (a word dropped); dense:
    parents route by per-service centroids (hashed words)."""
    rows, queries = synthetic_catalog(n_tools=400, branching=4, depth=2, seed=8, n_queries=30)
    queries = [{**q, "query": " ".join(q["query"].split()[1:])} for q in queries]
    ns = build_taxonomy(rows, TaxonomyConfig(branching=4, depth=2, leaf_size=30)).namespace(
        rows, queries)
    if not dense:
        return ns, make_scorer("bm25")
    add_centroids(ns, hashed_words)
    return ns, DenseScorer(hashed_words)


@pytest.mark.parametrize("dense", [False, True], ids=["bm25", "dense"])
def test_a2x_descent_equals_resolver_walk(dense: bool) -> None:
    ns, scorer = _tree(dense)
    hier = InProcessHierarchy(ns, scorer)
    reached = {}
    # K = 3 of 4 children referred: A2X selects among what the servers refer; K = 10: all
    # of them (the selection over every eligible child)
    for policy, k in [(p, 3) for p in POLICIES] + [("get_all", 10)]:
        mine = [hier.walk(q.text, q.service, k, search=f"a2x-{policy}") for q in ns.queries]
        config = ResolverConfig(search=f"a2x-{policy}")
        assert [r.tools for r in mine] == dns_walk(ns, scorer, ns.queries, k, 1, config)
        reached[policy, k] = sum(len(r.leaves) for r in mine)
    # get_one follows one branch; the others descend into several
    assert reached["get_one", 3] == len(ns.queries)
    assert reached["get_one", 3] < reached["get_important", 3] <= reached["get_all", 3]
    assert reached["get_all", 3] < reached["get_all", 10]  # fewer referred, fewer selected
    # get_one is the split walk with beam 1 (leaves merged round-robin, one leaf)
    assert [hier.walk(q.text, q.service, 3, search="a2x-get_one").tools for q in ns.queries] == [
        hier.walk(q.text, q.service, 3).tools for q in ns.queries]


def test_a2x_walks_from_caches_and_without_scores() -> None:
    ns = synthetic(n_tools=300, branching=4, depth=2, seed=5, n_queries=6)
    h = build_hierarchy(ns, scorer="bm25")
    config = ResolverConfig(search="a2x-get_all")
    assert config.wants_scores and not config.merges_by_score and config.a2x_policy == "get_all"
    net = MemoryNetwork(h, h.resolver(seed=1, config=config))
    for q in ns.queries:
        found = []
        for _ in range(2):
            net.resolver.discover(Discovery(q.text, service=q.service, k=3), net.now)
            [result] = net.run()
            found.append(([e.target for e in result.endpoints], result.leaves, result.cache))
        assert found[0][:2] == found[1][:2] and found[0][0]
        assert found[1][2]["srv_hit"] == len(found[1][1])  # every leaf from the cache
    assert net.resolver.stats["missing_scores"] == 0
    # servers that ignore the option (another code): counted; the referred children then
    # count as equal, so get_all descends into all of them
    fresh = MemoryNetwork(h, h.resolver(seed=1, config=ResolverConfig(search="a2x-get_all",
                                                                     scores_code=65500)))
    q = ns.queries[0]
    fresh.resolver.discover(Discovery(q.text, service=q.service, k=2), fresh.now)
    [result] = fresh.run()
    assert fresh.resolver.stats["missing_scores"] > 0 and len(result.leaves) == 4
    with pytest.raises(ValueError, match="search: unknown 'a2x-get_some'"):
        ResolverConfig(search="a2x-get_some")
    assert tuple(SEARCHES) == SEARCH_CHOICES  # `tooldns query --search` spells them out


def test_a2x_schemes_in_a_network_scenario(tmp_path: Path) -> None:
    # engines-small (simpy) on the clustered tree of 400 tools with noisy queries (a word
    # dropped), 20 queries: a top-1 walk and the three A2X policies
    rows, queries = synthetic_catalog(n_tools=400, branching=4, depth=2, seed=8, n_queries=30)
    write_jsonl(tmp_path / "catalog.jsonl", rows)
    write_jsonl(tmp_path / "queries.jsonl", [
        {**q, "query": " ".join(q["query"].split()[1:])} for q in queries])
    sc = scenario("engines-small", **{
        "namespace.source": "catalog", "namespace.catalog": str(tmp_path / "catalog.jsonl"),
        "namespace.taxonomy": {"kind": "cluster", "branching": 4, "depth": 2,
                               "leaf_size": 30},
        "namespace.scorer": "bm25", "network.processing.model": "fixed",
        "workload.queries": 20, "workload.pool": 30, "workload.popularity": "uniform"})
    schemes = [{"name": "split", "k": 3}] + [
        {"name": p, "k": 3, "search": f"a2x-{p}"} for p in POLICIES]
    sc = sc.model_copy(update={"schemes": sc.schemes[:1]}).with_overrides(
        {"schemes": schemes})
    df = run_scenario(sc, out_dir=tmp_path / "run").records
    assert df.success.all() and set(df.scheme) == {"split", *POLICIES}
    by = {s: g.sort_values("job") for s, g in df.groupby("scheme")}
    # get_one reaches the split walk's tools; the scores option costs bytes (when not
    # answered from the cache)
    assert (by["get_one"].returned.to_numpy() == by["split"].returned.to_numpy()).all()
    one, split = by["get_one"].bytes_down.to_numpy(), by["split"].bytes_down.to_numpy()
    assert (one >= split).all() and (one > split).any()
    examined = {s: float(np.mean(g.tools_examined)) for s, g in by.items()}
    assert examined["get_one"] <= examined["get_important"] <= examined["get_all"]
    assert examined["get_all"] > examined["get_one"]
