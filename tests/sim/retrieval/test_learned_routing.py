"""Learned routing: servers route by pseudo-document centroids over the wire exactly as the
evaluator does; the split and its checks in evaluation and network scenarios."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from nodes.resolver.config import ResolverConfig
from nodes.scoring import DenseScorer
from sim.evalspec import EvalScenario
from sim.loading import load_scenario
from sim.retrieval.run import run_eval
from sim.run.runner import run_scenario
from tests.sim.retrieval.test_eval import dns_walk, evaluator_walks
from tests.vectors import hashed_words
from topologies.datasets import load_catalog, load_queries, synthetic_catalog
from topologies.learned import log_split, pseudo_vectors
from topologies.taxonomy import TaxonomyConfig, add_centroids, build_taxonomy

ROOT = Path(__file__).resolve().parents[3]
CATALOG = ROOT.parent / "shared" / "data" / "tools" / "catalog.jsonl"


@pytest.mark.parametrize("search", ["split", "global"])
def test_learned_centroids_route_the_resolver_as_the_evaluator(search: str) -> None:
    rows, queries = synthetic_catalog(n_tools=400, branching=4, depth=2, seed=8, n_queries=90)
    queries = [{**q, "query": " ".join(q["query"].split()[1:])} for q in queries]
    log, test = log_split(rows, queries, 0.4, 0)
    ns = build_taxonomy(rows, TaxonomyConfig(branching=3, depth=2, leaf_size=30)).namespace(
        rows, test)
    plain = {z: dict(n.centroids) for z, n in ns.zones.items()}
    add_centroids(ns, hashed_words, pseudo_vectors(ns, hashed_words, log, per_tool=10))
    assert any(n.centroids != plain[z] for z, n in ns.zones.items())  # the log moved them
    scorer = DenseScorer(hashed_words)
    mine = evaluator_walks(ns, scorer, search)
    config = ResolverConfig(search=search, merge="score")
    assert len(ns.queries) == len(test) and mine == dns_walk(ns, scorer, ns.queries, 3, 2,
                                                              config)


def test_one_split_per_evaluation_and_per_scenario() -> None:
    tx = {"kind": "cluster", "vectors": "dense", "centroids": True,
          "routing_log": {"per_tool": 5, "test_fraction": 0.4}}
    dense = ["flat:dense", "tooldns:dense:4:global"]  # centroids route by vectors: dense
    with pytest.raises(ValueError, match=r"routing_log\.test_fraction"):
        EvalScenario.model_validate({"dataset": {"test_fraction": 0.3}, "taxonomy": tx,
                                     "methods": dense})
    EvalScenario.model_validate({"dataset": {"test_fraction": 0.4}, "taxonomy": tx,
                                 "methods": dense})
    with pytest.raises(ValueError, match="reads a training query log"):
        EvalScenario.model_validate({"methods": ["flat-log:dense"]})
    with pytest.raises(ValueError, match="set centroids: true"):
        EvalScenario.model_validate({"taxonomy": {**tx, "centroids": False}})
    sc = load_scenario(ROOT / "scenarios" / "learned-routing.yaml")
    with pytest.raises(ValueError, match="already replays only the test part"):
        sc.with_overrides({"workload.split": {"part": "test", "test_fraction": 0.4}})


@pytest.mark.skipif(not CATALOG.exists() and not os.environ.get("CI"),
                    reason="needs ../shared/data/tools (CI has it)")
def test_servers_and_evaluator_agree_query_by_query_on_the_catalogue(tmp_path: Path) -> None:
    # `tooldns eval` of the tree of scenarios/learned-routing.yaml cut to the A2A tools
    # (327), then the scenario itself: dense servers routing by learned centroids over the
    # wire, the test split replayed. The same tools for the same query, and no training
    # query replayed. (The evaluation runs first and leaves every embedding in the shared
    # cache, so the servers read the intents' vectors instead of running the model.)
    cache = str(tmp_path / "cache")
    sc = load_scenario(ROOT / "scenarios" / "learned-routing.yaml").with_overrides({
        "namespace.protocols": ["a2a"], "namespace.cache_dir": cache,
        "namespace.taxonomy.branching": 4, "workload.queries": 8,
        "network.processing.model": "fixed", "network.nodes": 8})
    sc = sc.model_copy(update={"schemes": sc.schemes[-2:-1]})  # tooldns-global10
    tx = sc.namespace.taxonomy
    assert tx is not None and tx.routing_log is not None
    [scheme] = sc.dns_schemes()
    method = f"tooldns:dense:{scheme.beam}:global"
    spec = EvalScenario.model_validate({
        "name": "learned", "seed": sc.seed, "cache_dir": cache, "plots": False,
        "dataset": {"source": "catalog", "catalog": str(CATALOG), "protocols": ["a2a"]},
        "taxonomy": tx.model_dump(), "k": 10, "methods": [method]})
    run_eval(spec, tmp_path / "eval")
    ev = pd.read_csv(tmp_path / "eval" / "per_query.csv", keep_default_na=False)
    rows = load_catalog(CATALOG, protocols=("a2a",))
    _, test = log_split(rows, load_queries(CATALOG.parent / "queries.jsonl",
                                           [r["id"] for r in rows]),
                        tx.routing_log.test_fraction, sc.seed)
    test_ids = {f"q{q['line']}" for q in test}
    assert set(ev["query"]) == test_ids  # the held-out queries, all of them
    df = run_scenario(sc, out_dir=tmp_path / "run").records
    assert set(df.query_id) <= test_ids and df.success.all() and len(df) == 8
    want = ev.set_index("query").returned
    got = df.set_index("query_id").returned
    assert (got == want.loc[got.index]).all()


def test_a_plain_variant_needs_a_walk_and_a_log() -> None:
    tx = {"kind": "cluster", "vectors": "dense", "centroids": True,
          "routing_log": {"per_tool": 5, "test_fraction": 0.4}}
    with pytest.raises(ValueError, match="only walks"):
        EvalScenario.model_validate({"taxonomy": tx, "methods": ["flat:dense@plain"]})
    with pytest.raises(ValueError, match=r"set taxonomy\.routing_log \(per_tool > 0\)"):
        EvalScenario.model_validate({"methods": ["tooldns:bm25@plain"]})
    with pytest.raises(ValueError, match="'bm25' scorer cannot score vectors"):
        EvalScenario.model_validate({"taxonomy": tx, "methods": ["tooldns:bm25:4@plain"]})
    EvalScenario.model_validate({"taxonomy": tx, "methods": ["tooldns:dense:4:global@plain"]})


@pytest.mark.skipif(not CATALOG.exists() and not os.environ.get("CI"),
                    reason="needs ../shared/data/tools (CI has it)")
def test_learned_and_plain_routing_in_one_file(tmp_path: Path) -> None:
    """``…@plain`` runs the walk on the same split's tree routed by the descriptions'
    centroids alone: its rows are those of a separate evaluation with ``per_tool: 0``, and
    paired.csv holds learned minus plain, query by query, beside each method minus flat."""
    from analysis.console import eval_grids

    cache = str(tmp_path / "cache")
    tx = {"kind": "cluster", "branching": 4, "depth": 2, "leaf_size": 40, "vectors": "dense",
          "centroids": True, "routing_log": {"per_tool": 10, "test_fraction": 0.4}}
    base = {"seed": 3, "cache_dir": cache, "plots": False, "k": 10,
            "dataset": {"source": "catalog", "catalog": str(CATALOG), "protocols": ["a2a"]}}
    walk = "tooldns:dense:4:global"
    both = EvalScenario.model_validate({**base, "name": "both", "taxonomy": tx,
                                        "methods": ["flat:dense", walk, walk + "@plain"]})
    result = run_eval(both, tmp_path / "both")
    plain = EvalScenario.model_validate({
        **base, "name": "plain", "methods": [walk],
        "taxonomy": {**tx, "routing_log": {"per_tool": 0, "test_fraction": 0.4}}})
    run_eval(plain, tmp_path / "plain")
    rows = pd.read_csv(tmp_path / "both" / "per_query.csv", keep_default_na=False)
    alone = pd.read_csv(tmp_path / "plain" / "per_query.csv", keep_default_na=False)
    mine = rows[rows.method == walk + "@plain"].set_index("query")
    assert len(mine) == len(alone) > 20
    assert (mine.returned == alone.set_index("query").returned.loc[mine.index]).all()
    paired = pd.read_csv(tmp_path / "both" / "paired.csv").set_index(["method", "baseline"])
    learned = rows[rows.method == walk].set_index("query").recall_k
    diff = (learned - mine.recall_k.loc[learned.index]).mean()
    assert paired.loc[(walk, walk + "@plain"), "recall_k"] == pytest.approx(diff)
    assert (walk + "@plain", "flat:dense") in paired.index
    grids = eval_grids(result["summary"], result["paired"], 10, "t")
    assert grids[0].title.startswith("each method minus flat:dense")  # the answer first
    assert grids[1].title.startswith("learned routing minus plain routing")


def test_a_split_by_tool_reports_seen_and_unseen_tools_apart(tmp_path: Path) -> None:
    """``dataset.split: by-tool``: a share of the tools is never in the log; per_query.csv
    says which queries' tools were (``seen``), by_seen.csv has each method on both."""
    spec = EvalScenario.model_validate({
        "name": "by-tool", "seed": 1, "plots": False, "k": 5,
        "taxonomy": {"kind": "cluster", "branching": 3, "depth": 2, "leaf_size": 30},
        "dataset": {"tools": 300, "branching": 3, "depth": 2, "sample": 400,
                    "test_fraction": 0.4, "split": "by-tool", "unseen_tools": 0.3},
        "methods": ["flat:bm25", "tooldns:bm25:2"]})
    result = run_eval(spec, tmp_path)
    rows = pd.read_csv(tmp_path / "per_query.csv")
    assert set(rows.seen) == {True, False}
    by_seen = pd.read_csv(tmp_path / "by_seen.csv")
    assert set(zip(by_seen.method, by_seen.seen, strict=True)) == {
        (m, s) for m in spec.methods for s in (True, False)}
    assert result["by_seen"] is not None
    import json

    split = json.loads((tmp_path / "summary.json").read_text())["split"]
    assert split["kind"] == "by-tool" and split["unseen_tools_share"] == 0.3
    first = rows[rows.method == "flat:bm25"]
    assert split["evaluated_unseen"] == int((~first.seen).sum()) > 0
    with pytest.raises(ValueError, match="by-tool holds tools out of a training log"):
        EvalScenario.model_validate({"dataset": {"split": "by-tool"}})
