"""GRAIL as published (seed 002) and its ablations: candidate recall, synonyms,
pseudo-documents from the training split only, the ablation switches and α.

Small hand-made catalogues and a deterministic bag-of-words encoder (no model, no network).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from nodes.scoring import tokenize
from sim.evalspec import EvalScenario, check_method, grail_options
from sim.retrieval import evaluator as evaluate
from sim.retrieval.dataset import category_map, load_split
from sim.retrieval.evaluator import EvalConfig, Evaluator
from sim.retrieval.flat import FlatIndex
from sim.retrieval.grail import GrailIndex, mine_synonyms, pseudo_queries
from sim.retrieval.run import build_namespace, run_eval
from topologies.taxonomy import from_categories

SHARED = Path(__file__).resolve().parents[4] / "shared" / "data" / "tools"
DIM = 64


def bow(texts: list[str] | tuple[str, ...]) -> np.ndarray:
    """Unit bag-of-hashed-words vectors: deterministic and model-free."""
    out = np.zeros((len(texts), DIM), dtype=np.float32)
    for r, text in enumerate(texts):
        for w in tokenize(text) or [text]:
            h = hashlib.sha1(w.encode()).digest()
            out[r, h[0] % DIM] += 1.0
            out[r, h[1] % DIM] += 0.5
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


class Recorder:
    """An encoder that remembers every text it was asked to embed."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.texts += list(texts)
        return bow(texts)


def row(i: int, name: str, desc: str, path: list[str]) -> dict:
    return {"id": f"t{i}", "name": name, "description": desc, "protocol": "mcp",
            "category": path[0], "subcategory": None, "path": path, "slug": f"tool{i}",
            "source": "test"}


def small(rows: list[dict], queries: list[dict] = ()) -> tuple:
    ns = from_categories(rows).namespace(rows, queries)
    return ns, category_map(rows)


# A catalogue where the tag path and the dense path disagree: "weather" is a tag of
# t0 and t1 only (category), while the best dense matches of "weather in lisbon" are the
# lisbon tools t2, t3 (their descriptions share "lisbon"; no weather tag).
ROWS = [
    row(0, "skyapi", "sunny cloudy rain outlook", ["weather"]),
    row(1, "meteo", "forecast temperature wind", ["weather"]),
    row(2, "lisbonguide", "lisbon city guide lisbon trams", ["travel"]),
    row(3, "lisbonfood", "lisbon restaurants lisbon", ["food"]),
    row(4, "stocks", "market prices shares", ["finance"]),
    row(5, "crypto", "bitcoin prices wallet", ["finance"]),
]


def test_union_and_intersection_candidates_differ_as_the_paper_says() -> None:
    ns, cats = small(ROWS)
    g = GrailIndex(ns, bow, cats, dense_top=2, min_candidates=1)
    ids = g.ids["mcp"]
    intent = "weather in lisbon"
    q = bow([intent])[0]
    union = grail_options("grail:no-synonyms:no-pseudo")
    sparse = {ids[i] for i in g.sparse(intent, "mcp", union)}
    ctx = g.context("mcp", 0) @ q
    dense = {ids[i] for i in np.lexsort((np.arange(len(ids)), -ctx))[:2]}
    assert sparse == {"t0", "t1"} and dense == {"t2", "t3"}  # the example disagrees
    cand, scanned = g.candidates(intent, "mcp", q, union)
    assert {ids[i] for i in cand} == sparse | dense  # C = C_sparse ∪ C_dense
    assert len(scanned) == len(ids)  # the dense path scores the whole pool
    inter = grail_options("grail:no-synonyms:no-pseudo:intersect")
    cand_i, scanned_i = g.candidates(intent, "mcp", q, inter)
    assert {ids[i] for i in cand_i} == sparse  # the dense top-2 *within* the tags
    assert {ids[i] for i in scanned_i} == sparse
    got = g.rank(intent, "mcp", 0, union).tools
    assert set(got) == sparse | dense and set(g.rank(intent, "mcp", 0, inter).tools) == sparse
    # without the tag path only the dense top-2 remain ("w/o SLM")
    assert set(g.rank(intent, "mcp", 0, grail_options("grail:no-tags:no-pseudo")).tools) == dense


def test_synonym_mining_is_deterministic_and_finds_neighbours() -> None:
    table = {"car": [1, 0, 0], "automobile": [0.95, 0.05, 0], "vehicle": [0.8, 0.2, 0],
             "banana": [0, 0, 1], "fruit": [0, 0.1, 0.9], "stock": [0, 1, 0]}

    def enc(words: list[str]) -> np.ndarray:
        m = np.array([table[w] for w in words], dtype=np.float32)
        return m / np.linalg.norm(m, axis=1, keepdims=True)

    a = mine_synonyms(["car", "banana", "stock"], list(table), enc, per_tag=2, min_cosine=0.9)
    b = mine_synonyms(["stock", "banana", "car", "car"], list(reversed(table)), enc,
                      per_tag=2, min_cosine=0.9)
    assert a == b
    assert a["car"] == ("automobile", "vehicle") and a["banana"] == ("fruit",)
    assert "stock" not in a  # nothing close enough
    # with the bag-of-words encoder too: same dictionary from shuffled inputs
    words = [w for r in ROWS for w in tokenize(r["description"])]
    assert mine_synonyms(words[:8], words, bow, min_cosine=0.0) == \
        mine_synonyms(list(reversed(words[:8])), list(reversed(words)), bow, min_cosine=0.0)


def test_synonyms_expand_the_tag_index_only_when_on() -> None:
    ns, cats = small(ROWS)
    g = GrailIndex(ns, bow, cats, dense_top=1)
    g._synonyms = {"weather": ("climate",)}  # an injected dictionary: the switch is tested
    on = grail_options("grail:no-pseudo")
    off = grail_options("grail:no-pseudo:no-synonyms")
    ids = g.ids["mcp"]
    assert {ids[i] for i in g.sparse("climate report", "mcp", on)} == {"t0", "t1"}
    assert g.sparse("climate report", "mcp", off) == set()


def test_pseudo_documents_read_training_queries_only(monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path) -> None:
    # a small catalogue on disk; every query carries a word of its own ("uniqN")
    cats = ["weather", "travel", "food", "finance"]
    tools = [row(i, f"tool{i}", f"{cats[i % 4]} helper number {i}", [cats[i % 4]])
             for i in range(24)]
    queries = [{"query": f"please find {cats[i % 4]} help uniq{i:03d}", "tool_ids": [f"t{i % 24}"]}
               for i in range(60)]
    for name, data in (("catalog.jsonl", tools), ("queries.jsonl", queries)):
        (tmp_path / name).write_text("".join(json.dumps(x) + "\n" for x in data))
    spec = EvalScenario.model_validate({
        "seed": 3, "plots": False, "methods": ["grail", "grail:no-pseudo"],
        "dataset": {"source": "catalog", "catalog": str(tmp_path / "catalog.jsonl"),
                    "test_fraction": 0.4}})
    _, train, test = load_split(spec)
    assert train and test
    test_texts = {q["query"] for q in test}
    assert not test_texts & {q["query"] for q in train}
    rec = Recorder()
    monkeypatch.setattr(evaluate, "default_encoder", lambda: rec)
    res = run_eval(spec, tmp_path / "out")
    assert json.loads((tmp_path / "out" / "summary.json").read_text())[
        "grail_train_queries"] == len(train)
    assert len(res["summary"]) == 2
    # every text embedded that holds a test query is that query alone (the query vector);
    # training queries do reach the index (inside pseudo-documents), so this can fail
    leaked = [t for t in rec.texts for x in test_texts if x in t and t != x]
    assert leaked == []
    assert any("\n" + q["query"] in t for q in train for t in rec.texts)
    # the synonym vocabulary holds the training queries' own words, never the test ones'
    assert {w for q in train for w in tokenize(q["query"]) if w.startswith("uniq")} \
        <= set(rec.texts)
    assert not {w for x in test_texts for w in tokenize(x) if w.startswith("uniq")} \
        & set(rec.texts)


def test_pseudo_queries_cap_and_order() -> None:
    train = [{"query": f"q{i}", "tool_ids": ["a"] if i % 2 else ["a", "b"]} for i in range(30)]
    got = pseudo_queries(train, 3)
    assert got == {"a": ["q0", "q1", "q2"], "b": ["q0", "q2", "q4"]}


def test_ablation_switches() -> None:
    rows = [row(0, "multi", "bake bread. repair bicycles.", ["misc"]),
            row(1, "baker", "bake bread and cakes", ["food"]),
            *ROWS[2:]]
    train = [{"query": "sourdough loaf recipe", "tool_ids": ["t1"]}]
    ns, cats = small(rows)
    g = GrailIndex(ns, bow, cats, train, dense_top=3)
    ids = g.ids["mcp"]
    # pseudo-documents change only the tools with training queries
    plain, pseudo = g.context("mcp", 0), g.context("mcp", 10)
    changed = {ids[i] for i in range(len(ids)) if not np.allclose(plain[i], pseudo[i])}
    assert changed == {"t1"}
    assert g.pseudo_documents("mcp", 10)[ids.index("t1")].endswith("\nsourdough loaf recipe")
    # MaxSim vs mean pooling on a two-capability tool: a query matching one capability
    q = bow(["repair bicycles."])[0]
    cand = np.array([ids.index("t0")])
    res_max = g.scores("mcp", q, cand, grail_options("grail:alpha=0"))[0]
    res_mean = g.scores("mcp", q, cand, grail_options("grail:alpha=0:no-maxsim"))[0]
    assert res_max == pytest.approx(1.0, abs=1e-5) and res_mean < 0.9
    # no-tags: candidates are exactly the dense top-3
    c, _ = g.candidates("bake weather", "mcp", q, grail_options("grail:no-tags"))
    assert len(c) == 3


def test_alpha_extremes_reduce_to_the_components() -> None:
    spec = EvalScenario.model_validate({
        "seed": 5, "dataset": {"source": "synthetic", "tools": 300, "branching": 4,
                               "depth": 2, "sample": 40, "test_fraction": 0.4}})
    rows, train, test = load_split(spec)
    ns, _ = build_namespace(spec, rows, test)
    g = GrailIndex(ns, bow, category_map(rows), train)
    flat = FlatIndex(ns, evaluate.make_scorer("dense", encoder=bow))
    for q in ns.queries[:25]:
        # α = 1 without pseudo-documents: flat dense retrieval (its top-10 ⊂ dense top-50)
        assert g.rank(q.text, q.service, 10, grail_options("grail:alpha=1:no-pseudo")).tools \
            == flat.rank(q.text, q.service, 10).tools
        # α = 0: the candidates ordered by MaxSim resonance alone
        opts = grail_options("grail:alpha=0")
        v = bow([q.text])[0]
        cand, _ = g.candidates(q.text, q.service, v, opts)
        vecs, owner = g.facets(q.service)
        best = np.full(len(g.ids[q.service]), -np.inf)
        np.maximum.at(best, owner, vecs @ v)
        order = cand[np.lexsort((cand, -best[cand]))][:10]
        assert g.rank(q.text, q.service, 10, opts).tools == [g.ids[q.service][i] for i in order]


def test_method_grammar() -> None:
    for ok in ("grail", "grail-intersect", "grail:no-maxsim", "grail:no-tags:alpha=0.25",
               "grail:pseudo=3:no-synonyms:intersect", "flat:dense", "tooldns:bm25:3:score"):
        check_method(ok)
    for bad in ("grail:nomaxsim", "grail:alpha=1.5", "grail:alpha=nan", "grail:pseudo=-1",
                "grail-intersect:no-tags", "grail2"):
        with pytest.raises(ValueError):
            check_method(bad)
    with pytest.raises(ValidationError, match="methods"):
        EvalScenario.model_validate({"methods": ["grail:alpha=2"]})
    assert grail_options("grail-intersect").recall == "intersect"
    ev = Evaluator(small(ROWS)[0], {}, EvalConfig(methods=("grail",)), bow)
    with pytest.raises(ValueError, match="unknown GRAIL option"):
        ev.runner("grail:bogus")


@pytest.mark.skipif(not (SHARED / "queries.jsonl").exists(),
                    reason="../shared/data/tools (the shared catalogue) is not present")
def test_shared_catalogue_split_keeps_test_texts_out_of_pseudo_documents() -> None:
    spec = EvalScenario.model_validate({
        "seed": 0, "dataset": {"source": "catalog", "catalog": str(SHARED / "catalog.jsonl"),
                               "test_fraction": 0.4}})
    _, train, test = load_split(spec)
    assert abs(len(test) / (len(train) + len(test)) - 0.4) < 0.01
    held = {q["query"].strip().lower() for q in test}
    kept = [r for r in train if r["query"].strip().lower() not in held]  # as run_eval does
    docs = pseudo_queries(kept, 10)
    assert not {x.strip().lower() for xs in docs.values() for x in xs} & held
