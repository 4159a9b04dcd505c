"""The three LLM steps behind the one client, end to end over loopback HTTP against the
deterministic stand-in (not a model): the ``llm`` scorer, the LLM router (in the evaluator
and inside authoritative servers), taxonomy labelling, and ``tooldns eval``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from nodes.dns.wire import normalise
from nodes.llmreply import LLMError
from nodes.llmrouter import LLMRouter, display_names, match_names
from nodes.resolver.types import Discovery
from nodes.scoring import LLMScorer, parse_ranking, top_k
from sim.cli.main import main
from sim.evalspec import TaxonomySpec
from sim.retrieval.hierarchy import InProcessHierarchy
from sim.retrieval.llm import LLMClient
from sim.retrieval.standin import StandIn
from tests.factories import wired
from topologies.datasets import synthetic_catalog
from topologies.llmlabels import LabelReport, llm_labels, parse_label
from topologies.synthetic import synthetic
from topologies.taxonomy import TaxonomyConfig, build_taxonomy
from topologies.taxonomy_namespace import taxonomy_namespace

TEXTS = ["Weather forecast for any city", "Stock prices and quotes", "Translate text",
         "Rain alerts by SMS for a city"]


@pytest.fixture(scope="module")
def standin() -> Iterator[StandIn]:
    with StandIn() as server:
        yield server


@pytest.fixture
def chat(standin: StandIn) -> LLMClient:
    return LLMClient(standin.url, timeout=5.0, retries=1, backoff=0.0, key_env="")


# ------------------------------------------------------------------ the llm scorer


def test_parse_ranking_survives_junk() -> None:
    assert parse_ranking("3, 1, 3, 9, 2", 4) == [2, 0, 1]  # repeats, out of range dropped
    assert parse_ranking("Sure! The top 3 are: 2, 4 and 1.", 4) == [1, 3, 0]
    assert parse_ranking("2 (converts mp3 files in 4 steps), 0.93, 1", 4) == [1, 0]
    assert parse_ranking("Candidate #4 then candidate 2", 4) == [3, 1]
    assert parse_ranking("1. Weather\n3. Rain", 4) == [0, 2]
    assert parse_ranking("other", 4) == [] and parse_ranking("", 4) == []


def test_llm_scorer_prompt_and_answers(standin: StandIn, chat: LLMClient) -> None:
    scorer = LLMScorer(chat, top=2)
    index = scorer.index(list("abcd"), TEXTS)
    assert top_k(index.scores("rain in my city"), 2) == [3, 0]
    prompt = standin.requests[-1]["messages"][0]["content"]
    assert "ranking expert in domain tools" in prompt and "top **2**" in prompt
    assert "User task: rain in my city\n" in prompt and "\n4. Rain alerts by SMS" in prompt
    assert standin.requests[-1]["temperature"] == 0
    for fault in ("prose", "think"):  # junk around the answer changes nothing
        standin.fail(fault)
        assert top_k(index.scores("rain in my city"), 2) == [3, 0]
    standin.fail("junk")
    assert not index.scores("rain in my city").any() and scorer.unparsed == 1
    assert scorer.calls == 4 and scorer.prompt_tokens > 0
    strict = LLMScorer(chat, top=2, strict=True).index(list("abcd"), TEXTS)
    standin.fail("junk")
    with pytest.raises(LLMError, match=r"answer names no candidate 1\.\.4"):
        strict.scores("rain in my city")
    standin.fail("empty")
    with pytest.raises(LLMError, match="no choices"):
        index.scores("rain")


# ------------------------------------------------------------------ the LLM router


def test_router_names_and_matching() -> None:
    names, parent = display_names(["weather.tools.", "web-search.tools."])
    assert (names, parent) == (["weather", "web-search"], "tools.")
    assert display_names(["t1", "t2"]) == (["t1", "t2"], None)
    assert match_names("**Web_Search**, weather.tools., web-search, nothing", names, parent) \
        == [1, 0]
    assert match_names("1. weather\n- the best is web search", names, parent) == [0, 1]
    assert match_names("other", names, parent) == []


def test_router_uses_the_papers_prompts(standin: StandIn, chat: LLMClient) -> None:
    router = LLMRouter(chat, top=1)
    tld = router.index(["weather.tools.", "finance.tools."], ["forecast rain", "stock prices"])
    assert list(tld.scores("stock market prices")) == [0.0, 2.0]
    prompt = standin.requests[-1]["messages"][0]["content"]
    assert prompt.startswith("You are a service-discovery ranking expert.\n")  # Prompt A
    assert "- finance: stock prices" in prompt and "top **1**" in prompt
    ns_level = router.index(["rain.weather.tools.", "wind.weather.tools."], ["rain", "wind"])
    assert list(ns_level.scores("wind speed")) == [0.0, 2.0]
    assert "expert in domain weather.tools.\n" in standin.requests[-1]["messages"][0]["content"]
    leaf = router.index(["t1", "t2"], ["sunny days", "stormy wind"])
    standin.fail("junk")
    assert not leaf.scores("wind").any() and router.unparsed == 1
    assert router.calls == 3


def test_router_in_servers_equals_router_in_the_evaluator(chat: LLMClient) -> None:
    """Authoritative servers (in memory, DNS wire) asking the LLM router pick what the
    evaluator's in-process walk picks, query by query."""
    ns = synthetic(n_tools=120, branching=3, depth=2, seed=2, n_queries=8)
    router = LLMRouter(chat, top=3)
    mine = [InProcessHierarchy(ns, router).walk(q.text, q.service, 3).tools for q in ns.queries]
    asked = router.calls
    _h, net = wired(ns, scorer=router)  # type: ignore[arg-type]
    by_target = {normalise(t.target): t.id for t in ns.tools.values()}
    theirs = []
    for q in ns.queries:
        net.resolver.discover(Discovery(q.text, service=q.service, k=3, beam=1), net.now)
        [result] = net.run()
        theirs.append([by_target[normalise(e.target)] for e in result.endpoints])
    assert mine == theirs and router.calls >= 2 * asked
    assert sum(q.truth[0] in w for q, w in zip(ns.queries, mine, strict=True)) >= 6


# ------------------------------------------------------------------ taxonomy labelling


def test_parse_label() -> None:
    assert parse_label("**Label:** maps-routing\nSummary: route planning.") == \
        ("maps-routing", "route planning.")
    assert parse_label("name = geo\ndescription: maps") == ("geo", "maps")
    assert parse_label("I cannot help with that") is None


def test_llm_labels_rename_zones_and_summaries(standin: StandIn, chat: LLMClient) -> None:
    rows, _ = synthetic_catalog(n_tools=90, branching=3, depth=2, seed=4, n_queries=5)
    tax = build_taxonomy(rows, TaxonomyConfig(branching=3, depth=2, leaf_size=10, seed=1))
    report = LabelReport()
    named = llm_labels(tax, rows, chat, report=report)
    assert report.asked == len(tax.summaries) == len(named.summaries)
    assert report.renamed > 0 and not report.unparsed
    prompt = standin.requests[-1]["messages"][0]["content"]
    assert prompt.startswith("Name this group of tools") and "inside the group" in prompt
    for path, summary in named.summaries.items():  # label: the two commonest words
        assert path[-1].count("-") >= 1 and summary.startswith(path[-1].replace("-", " "))
        siblings = [p[-1] for p in named.summaries if p[:-1] == path[:-1]]
        assert len(siblings) == len(set(siblings))
    leaves = {tuple(p) for ps in named.paths.values() for p in ps}
    assert leaves <= set(named.summaries) and set(named.paths) == set(tax.paths)
    assert llm_labels(tax, rows, chat) == named  # deterministic endpoint, same tree
    standin.fail("junk")
    with pytest.raises(LLMError, match=r"the answer for zone .* has no 'label:'"):
        llm_labels(tax, rows, chat)
    standin.fail("junk")
    kept = LabelReport()
    llm_labels(tax, rows, chat, strict=False, report=kept)
    assert len(kept.unparsed) == 1


def test_taxonomy_labels_option(chat: LLMClient) -> None:
    rows, queries = synthetic_catalog(n_tools=60, branching=2, depth=2, seed=4, n_queries=5)
    spec = TaxonomySpec(kind="cluster", branching=2, depth=2, leaf_size=10, labels="llm")
    ns = taxonomy_namespace(spec, rows, queries, chat=chat)
    named = [z for z in ns.zones if z not in (".", "tools.")]
    assert ns.tools and named and all("-" in z.split(".")[0] for z in named)
    with pytest.raises(ValueError, match="labels: llm names the zones of a clustered tree"):
        taxonomy_namespace(spec, rows, queries)
    from sim.scenario import NamespaceSpec

    with pytest.raises(ValueError, match="network scenarios do not take"):
        NamespaceSpec(source="catalog", catalog="x.jsonl", taxonomy=spec)


# ------------------------------------------------------------------ tooldns eval


def _eval_file(tmp_path: Path, url: str, methods: list[str], labels: bool = True) -> Path:
    doc = {"name": "llm-standin", "seed": 1,
           "dataset": {"source": "synthetic", "tools": 120, "branching": 3, "depth": 2,
                       "sample": 10},
           "taxonomy": {"kind": "cluster", "branching": 3, "depth": 2, "leaf_size": 10,
                        "labels": "llm"} if labels else {"kind": "categories"},
           "methods": methods, "k": 3, "plots": False,
           "llm": {"url": url, "model": "any", "timeout": 5, "retries": 1}}
    path = tmp_path / "eval.yaml"
    path.write_text(json.dumps(doc))  # JSON is YAML
    return path


def test_tooldns_eval_runs_the_llm_methods(standin: StandIn, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLDNS_LLM_KEY", "sk-eval")
    methods = ["flat:llm", "tooldns:llm", "tooldns:llm-router", "context", "flat:bm25"]
    out = tmp_path / "out"
    assert main(["eval", str(_eval_file(tmp_path, standin.url, methods)),
                 "--out", str(out)]) == 0
    summary = pd.read_csv(out / "summary.csv").set_index("method")
    assert list(summary.index) == methods and (summary.queries == 10).all()
    # every LLM method judged by the endpoint (context too); the stand-in's numbers say
    # nothing about a model, only that answers flow back into the metrics
    assert not summary.loc[methods[:4], "hit1_tool"].isna().any()
    assert summary.loc["flat:llm", "hitk_tool"] >= 0.5 and summary.loc["context", "tokens"] > 0
    doc = json.loads((out / "summary.json").read_text())
    assert doc["llm"]["calls"] > 40 and doc["llm"]["failures"] == 0
    assert doc["llm"]["model"] == "any" and standin.auth[-1] == "Bearer sk-eval"
    assert "sk-eval" not in (out / "summary.json").read_text()


def test_tooldns_eval_reports_an_endpoint_failure(standin: StandIn, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    standin.fail("400")  # the first request
    path = _eval_file(tmp_path, "http://127.0.0.1:9/v1", ["flat:llm"], labels=False)
    code = main(["eval", str(path), "--llm-url", standin.url,  # replaces the file's
                 "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert f"LLM endpoint {standin.url}/chat/completions: HTTP 400" in " ".join(err.split())
