"""Retrieval evaluation: the in-process walk equals the DNS walk; metrics; `tooldns eval`."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nodes.dns.wire import normalise
from nodes.resolver.config import ResolverConfig
from nodes.resolver.merge import select
from nodes.resolver.types import Discovery
from nodes.scoring import CachedEncoder, DenseScorer, Scorer, make_scorer
from sim.build.hierarchy import build_hierarchy
from sim.cli.main import main
from sim.engines.memory import MemoryNetwork
from sim.evalspec import load_eval
from sim.loading import load_scenario
from sim.retrieval.dataset import category_map
from sim.retrieval.evaluator import EvalConfig, Evaluator
from sim.retrieval.hierarchy import InProcessHierarchy
from sim.retrieval.ranked import Ranked
from sim.run.runner import run_scenario
from tests.factories import wired
from tests.vectors import hashed_words
from topologies.datasets import synthetic_catalog, write_jsonl
from topologies.namespace import Namespace
from topologies.synthetic import synthetic
from topologies.taxonomy import (
    TaxonomyConfig,
    add_centroids,
    add_representatives,
    build_taxonomy,
)

ROOT = Path(__file__).resolve().parents[3]


def evaluator_walks(ns: Namespace, scorer: Scorer, search: str) -> list:
    """Each query's tools by the evaluator's walk (K = 3, beam 2, merged by score): the
    global beam for ``search: global``, else the split walk."""
    hier = InProcessHierarchy(ns, scorer)
    if search == "global":
        return [hier.walk(q.text, q.service, 3, 2, search="global").tools for q in ns.queries]
    return [hier.walk(q.text, q.service, 3, 2, merge="score").tools for q in ns.queries]


def dns_walk(ns: Namespace, scorer: str | Scorer, queries, k: int, beam: int,
             config: ResolverConfig | None = None) -> list[list[str]]:
    _h, net = wired(ns, scorer=scorer, config=config)
    by_target = {normalise(t.target): t.id for t in ns.tools.values()}
    out = []
    for q in queries:
        net.resolver.discover(Discovery(q.text, service=q.service, k=k, beam=beam), net.now)
        [result] = net.run()
        out.append([by_target[normalise(e.target)] for e in result.endpoints])
    return out


@pytest.mark.parametrize(("scorer", "k", "beam"), [("bm25", 1, 1), ("bm25", 3, 1),
                                                   ("tfidf", 3, 2), ("bm25", 4, 3)])
def test_in_process_walk_equals_resolver_walk(scorer: str, k: int, beam: int) -> None:
    ns = synthetic(n_tools=300, branching=3, depth=2, seed=5, n_queries=40)
    hier = InProcessHierarchy(ns, make_scorer(scorer))
    mine = [hier.walk(q.text, q.service, k, beam).tools for q in ns.queries]
    assert mine == dns_walk(ns, scorer, ns.queries, k, beam)
    assert any(len(x) == k for x in mine)


def test_walk_equals_resolver_on_a_built_taxonomy() -> None:
    rows, queries = synthetic_catalog(n_tools=400, branching=4, depth=2, seed=8, n_queries=30)
    # noisy queries: one word dropped, so the walk sometimes errs and orders matter
    queries = [{**q, "query": " ".join(q["query"].split()[1:])} for q in queries]
    ns = build_taxonomy(rows, TaxonomyConfig(branching=3, depth=2, leaf_size=30)).namespace(
        rows, queries)
    hier = InProcessHierarchy(ns, make_scorer("bm25"))
    mine = [hier.walk(q.text, q.service, 3, 2).tools for q in ns.queries]
    assert mine == dns_walk(ns, "bm25", ns.queries, 3, 2)


@pytest.mark.parametrize("beam", [1, 3])
def test_routing_by_representatives_equals_resolver_walk(beam: int) -> None:
    ns = synthetic(n_tools=300, branching=3, depth=2, seed=6, n_queries=30)
    plain = InProcessHierarchy(ns, make_scorer("bm25"))
    before = [plain.walk(q.text, q.service, 3, beam) for q in ns.queries]
    add_representatives(ns, 4, seed=0)
    assert all(1 <= len(ns.zones[c].representatives) <= 4 for c in ns.zones["tools."].children)
    hier = InProcessHierarchy(ns, make_scorer("bm25"))
    mine = [hier.walk(q.text, q.service, 3, beam) for q in ns.queries]
    assert [r.tools for r in mine] == dns_walk(ns, "bm25", ns.queries, 3, beam)
    # each representative scored is an item examined: more than one summary per child
    assert sum(r.examined for r in mine) > sum(r.examined for r in before)


def test_score_merge_orders_the_leaves_tools_by_score() -> None:
    ns = synthetic(n_tools=300, branching=3, depth=2, seed=5, n_queries=20)
    hier = InProcessHierarchy(ns, make_scorer("bm25"))
    for q in ns.queries:
        rr = hier.walk(q.text, q.service, 0, 3)
        by_score = hier.walk(q.text, q.service, 0, 3, merge="score")
        assert sorted(by_score.tools) == sorted(rr.tools)
        score = {}
        for leaf in by_score.leaves:
            _, ids, index, _ = hier.leaf(leaf, q.service)
            score.update(zip(ids, np.asarray(index.scores(q.text)), strict=True))
        got = [score[t] for t in by_score.tools]
        assert got == sorted(got, reverse=True)


def test_global_beam_walk() -> None:
    ns = synthetic(n_tools=300, branching=3, depth=2, seed=5, n_queries=20)
    hier = InProcessHierarchy(ns, make_scorer("bm25"))
    for q in ns.queries:
        top1 = hier.walk(q.text, q.service, 5)
        assert hier.walk(q.text, q.service, 5, 1, search="global").tools == top1.tools
        wide = hier.walk(q.text, q.service, 5, 100, search="global")  # every leaf of the service
        assert set(wide.leaves) == {z for z in ns.leaves() if any(
            ns.tools[t].service == q.service for t in ns.zones[z].tools)}
        assert wide.tools_examined == sum(t.service == q.service for t in ns.tools.values())


@pytest.mark.parametrize(("scorer", "beam"), [("bm25", 2), ("bm25", 3), ("tfidf", 3)])
def test_score_merge_and_global_beam_equal_resolver_walks(scorer: str, beam: int) -> None:
    # the resolver gets the servers' scores in the scores option; the evaluator mirrors it
    ns = synthetic(n_tools=300, branching=3, depth=2, seed=5, n_queries=30)
    hier = InProcessHierarchy(ns, make_scorer(scorer))
    by_score = [hier.walk(q.text, q.service, 4, beam, merge="score").tools for q in ns.queries]
    assert by_score == dns_walk(ns, scorer, ns.queries, 4, beam,
                                ResolverConfig(merge="score"))
    wide = [hier.walk(q.text, q.service, 4, beam, search="global").tools for q in ns.queries]
    assert wide == dns_walk(ns, scorer, ns.queries, 4, beam, ResolverConfig(search="global"))
    assert wide != [hier.walk(q.text, q.service, 4, beam).tools for q in ns.queries]


@pytest.mark.parametrize("search", ["split", "global"])
def test_centroid_routing_equals_resolver_walk(search: str) -> None:
    rows, queries = synthetic_catalog(n_tools=400, branching=4, depth=2, seed=8, n_queries=30)
    queries = [{**q, "query": " ".join(q["query"].split()[1:])} for q in queries]
    ns = build_taxonomy(rows, TaxonomyConfig(branching=3, depth=2, leaf_size=30)).namespace(
        rows, queries)
    add_centroids(ns, hashed_words)
    for zone in ns.zones["tools."].children:  # one unit vector per service offered below
        node = ns.zones[zone]
        assert set(node.centroids) == ns.services_below()[zone]
        assert all(abs(np.linalg.norm(v) - 1) < 1e-5 for v in node.centroids.values())
    scorer = DenseScorer(hashed_words)
    mine = evaluator_walks(ns, scorer, search)
    config = ResolverConfig(search=search, merge="score")
    assert mine == dns_walk(ns, scorer, ns.queries, 3, 2, config)
    hier = InProcessHierarchy(ns, scorer)
    # the parent scores a child by cosine with the child's centroid for the query's service
    for q in ns.queries:
        _, kids, eligible, index = hier.children("tools.", q.service)
        want = [float(np.dot(ns.zones[kids[i]].centroids[q.service], hashed_words([q.text])[0]))
                for i in eligible]
        got = np.asarray(index.scores(q.text))[eligible]  # type: ignore[attr-defined]
        assert np.allclose(got, want, atol=1e-6)


def test_examined_counts_children_and_leaf_tools() -> None:
    ns = synthetic(n_tools=360, branching=3, depth=2, seed=5, n_queries=20)
    hier = InProcessHierarchy(ns, make_scorer("bm25"))
    below = ns.services_below()
    for q in ns.queries:
        r = hier.walk(q.text, q.service, 5)
        [leaf] = r.leaves
        top = ns.path(leaf)[1]
        n_children = sum(q.service in below[c] for c in ns.zones["tools."].children) + sum(
            q.service in below[c] for c in ns.zones[top].children)
        n_tools = sum(ns.tools[t].service == q.service for t in ns.zones[leaf].tools)
        assert (r.examined, r.tools_examined) == (n_children + n_tools, n_tools)


def test_a2x_policies_select_children() -> None:
    s = np.array([0.1, 0.9, 0.5, 0.85, 0.0])
    assert select(s, "get_one") == [1]
    assert select(s, "get_important") == [1, 3]
    assert select(s, "get_all") == [1, 3, 2]
    assert select(np.array([0.0, 0.0]), "get_important") == [0, 1]
    with pytest.raises(ValueError):
        select(s, "get_some")


def test_metrics_by_category_and_tool() -> None:
    ns = synthetic(n_tools=120, branching=2, depth=1, seed=1, n_queries=4)
    rows, _ = synthetic_catalog(n_tools=120, branching=2, depth=1, seed=1, n_queries=4)
    ev = Evaluator(ns, category_map(rows), EvalConfig(methods=("flat:bm25",), k=3))
    q = ns.queries[0]
    truth = q.truth[0]
    same_cat = next(t for t in ns.tools if t != truth and ns.tools[t].zone == ns.tools[truth].zone)
    other = next(t for t in ns.tools if ns.tools[t].zone != ns.tools[truth].zone)
    row = ev._row("m", q, Ranked([same_cat, truth, other], 10, 8, 99), 0.002, 120, 3)
    assert (row["hit1_cat"], row["hit1_tool"], row["hitk_tool"]) == (1.0, 0.0, 1.0)
    assert row["rr"] == 0.5 and row["recall_k"] == 1.0 and row["examined_frac"] == 10 / 120
    assert row["examined_frac_all"] == 10 / len(ns.tools)
    row = ev._row("m", q, Ranked([other], 10, 8, 99), 0.002, 120, 3)
    assert (row["hit1_cat"], row["hitk_cat"], row["rr"]) == (0.0, 0.0, 0.0)


def test_eval_command_on_a_catalogue(tmp_path: Path) -> None:
    rows, queries = synthetic_catalog(n_tools=300, branching=3, depth=2, seed=3, n_queries=40)
    write_jsonl(tmp_path / "catalog.jsonl", rows)
    write_jsonl(tmp_path / "queries.jsonl", queries)
    out = tmp_path / "out"
    code = main(["eval", "--catalog", str(tmp_path / "catalog.jsonl"), "--methods",
                 "flat:bm25,tooldns:bm25,tooldns:bm25:3,a2x:tfidf:get_all,context",
                 "--out", str(out), "-k", "5"])
    assert code == 0
    summary = pd.read_csv(out / "summary.csv").set_index("method")
    assert list(summary.index) == ["flat:bm25", "tooldns:bm25", "tooldns:bm25:3",
                                   "a2x:tfidf:get_all", "context"]
    assert (summary.queries == 40).all()
    assert summary.loc["flat:bm25", "examined"] > 5 * summary.loc["tooldns:bm25", "examined"]
    assert summary.loc["tooldns:bm25", "hitk_tool"] > 0.8  # synthetic queries are easy
    assert np.isnan(summary.loc["context", "hit1_cat"]) and summary.loc["context", "tokens"] > 0
    by_cat = pd.read_csv(out / "by_category.csv")
    assert set(by_cat.method) == set(summary.index) and by_cat.category.nunique() > 1
    assert (out / "table.md").read_text().startswith("| method |")
    assert (out / "hit_per_category_bm25.png").stat().st_size > 0
    assert main(["eval", "--catalog", str(tmp_path / "catalog.jsonl"), "--methods",
                 "flat:nope", "--out", str(out)]) == 2


def test_eval_files(tmp_path: Path) -> None:
    for path in sorted((ROOT / "scenarios" / "eval").glob("*.yaml")):
        spec = load_eval(path)
        assert spec.methods and spec.k >= 1
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ndataset: {source: synthetic, colour: red}\n")
    with pytest.raises(ValueError, match=r"bad.yaml: dataset.colour: Extra inputs"):
        load_eval(bad)


def test_hierarchical_walk_with_an_llm_scorer_counts_calls_and_tokens() -> None:
    """The LLM ranker in the walk (transport stubbed: ranks lines by words shared with the task)."""
    from nodes.scoring import LLMScorer

    def chat(body: dict) -> dict:
        prompt = body["messages"][0]["content"]
        task = set(prompt.split("User task: ")[1].split("\n")[0].split())
        lines = [line for line in prompt.splitlines() if line[:1].isdigit()]
        shared = [(len(task & set(line.split()[1:])), line.split(".")[0]) for line in lines]
        picks = [n for c, n in sorted(shared, key=lambda x: -x[0]) if c > 0]
        return {"choices": [{"message": {"content": ",".join(picks) or "other"}}]}

    ns = synthetic(n_tools=200, branching=3, depth=2, seed=2, n_queries=15)
    scorer = LLMScorer(chat, top=3)
    hier = InProcessHierarchy(ns, scorer)
    walks = [hier.walk(q.text, q.service, 3) for q in ns.queries]
    assert sum(q.truth[0] in w.tools for q, w in zip(ns.queries, walks, strict=True)) >= 12
    assert scorer.calls == 3 * len(ns.queries)  # TLD, level-1 zone, leaf: one prompt each
    assert scorer.prompt_tokens > 0 and all(w.tokens > 0 for w in walks)


def test_global_search_from_caches_and_without_scores() -> None:
    ns = synthetic(n_tools=300, branching=3, depth=2, seed=5, n_queries=10)
    h = build_hierarchy(ns, scorer="bm25")
    net = MemoryNetwork(h, h.resolver(seed=1, config=ResolverConfig(search="global")))
    q = ns.queries[0]
    found = []
    for _ in range(2):
        net.resolver.discover(Discovery(q.text, service=q.service, k=4, beam=2), net.now)
        [result] = net.run()
        found.append(([e.target for e in result.endpoints], result.cache))
    assert found[0][0] == found[1][0] and len(found[0][0]) == 4
    assert found[1][1]["srv_hit"] == 2  # both leaves answered from the cache, in order
    assert net.resolver.stats["missing_scores"] == 0
    # servers that do not know the option (here: another code) ignore it and answer
    # without scores: counted, and still a walk
    fresh = MemoryNetwork(h, h.resolver(seed=1, config=ResolverConfig(search="global",
                                                                     scores_code=65500)))
    fresh.resolver.discover(Discovery(q.text, service=q.service, k=4, beam=2), fresh.now)
    [result] = fresh.run()
    assert len(result.endpoints) == 4 and fresh.resolver.stats["missing_scores"] > 0


CATALOG = ROOT.parent / "shared" / "data" / "tools" / "catalog.jsonl"


@pytest.mark.skipif(not CATALOG.exists() and not os.environ.get("CI"),
                    reason="needs ../shared/data/tools (CI has it)")
def test_network_scenario_walks_a_centroid_tree_of_the_catalogue(tmp_path: Path) -> None:
    # scenarios/retrieval-network.yaml, cut to the A2A tools (327) and 12 queries: dense
    # servers routing by centroids, the global beam over the wire, and a flat registry
    sc = load_scenario(ROOT / "scenarios" / "retrieval-network.yaml").with_overrides({
        "namespace.protocols": ["a2a"], "namespace.cache_dir": str(tmp_path / "cache"),
        "namespace.taxonomy.branching": 4, "workload.queries": 12,
        "network.processing.model": "fixed", "network.nodes": 8})
    result = run_scenario(sc, out_dir=tmp_path / "run")
    df = result.records
    assert df.success.all() and set(df.scheme) == {
        "tooldns-top1", "tooldns-global6", "tooldns-global20", "tooldns-global20-emb",
        "agentdns"}
    by = df.groupby("scheme")
    assert by.hit_at_k.mean()["tooldns-global20"] >= by.hit_at_k.mean()["tooldns-top1"]
    # the global beam reads more of the tree and carries scores: more items and bytes
    assert by.tools_examined.mean()["tooldns-global20"] > by.tools_examined.mean()[
        "tooldns-top1"]
    assert by.bytes_down.mean()["tooldns-global6"] > by.bytes_down.mean()["tooldns-top1"]
    # the embedding travels in every semantic query: 384 float16 more, same answers
    emb, text = (df[df.scheme == s].sort_values("job") for s in ("tooldns-global20-emb",
                                                                   "tooldns-global20"))
    assert (emb.bytes_up.to_numpy() > text.bytes_up.to_numpy() + 768).all()
    assert (emb.returned.to_numpy() == text.returned.to_numpy()).mean() >= 0.9
    assert (tmp_path / "cache" / "all-MiniLM-L6-v2.npz").exists()  # embeddings kept


def test_resolver_sends_the_intent_embedding_and_dense_servers_use_it() -> None:
    ns = synthetic(n_tools=300, branching=3, depth=2, seed=5, n_queries=12)
    scorer = DenseScorer(CachedEncoder(hashed_words), model="hw")
    plain = dns_walk(ns, scorer, ns.queries, 3, 2, ResolverConfig(search="global"))
    h = build_hierarchy(ns, scorer=scorer)
    net = MemoryNetwork(h, h.resolver(seed=1, config=ResolverConfig(search="global",
                                                                     send_embedding=True)))
    by_target = {normalise(t.target): t.id for t in ns.tools.values()}
    sent, up = [], 0
    for q in ns.queries:
        net.resolver.discover(Discovery(q.text, service=q.service, k=3, beam=2), net.now)
        [result] = net.run()
        sent.append([by_target[normalise(e.target)] for e in result.endpoints])
        up += sum(s.bytes_out for s in result.steps if s.with_intent)
    assert sent == plain  # float16 on the wire does not change these rankings
    used = sum(s.stats["embedding_used"] for s in h.servers.values())
    assert used >= len(ns.queries) * 3  # every semantic query: TLD, a level, the leaves
    assert up > len(ns.queries) * 3 * (2 * 64)  # 64 float16 per query sent
    with pytest.raises(ValueError, match="send_embedding needs a dense scorer"):
        build_hierarchy(ns).resolver(config=ResolverConfig(send_embedding=True))
