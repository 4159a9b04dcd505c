"""Readable synthetic namespaces (``vocabulary="readable"``): deterministic by seed, every
name a DNS label, intents routed to their tools about as well as with pseudo-words, and the
default (pseudo) untouched."""

from __future__ import annotations

import re

import pytest

from nodes.scoring import make_scorer, tokenize
from sim.retrieval.hierarchy import InProcessHierarchy
from topologies.namespace import ROOT, TLD, Namespace
from topologies.readable import ReadableWords, word_list
from topologies.synthetic import synthetic

LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


def readable(**kw: int) -> Namespace:
    return synthetic(vocabulary="readable", **kw)  # type: ignore[arg-type]


def fingerprint(ns: Namespace) -> list[str]:
    return ([f"{z}|{n.summary}|{n.children}" for z, n in ns.zones.items()]
            + [f"{t.id}|{t.name}|{t.description}|{t.zone}" for t in ns.tools.values()]
            + [f"{q.text}|{q.truth}" for q in ns.queries])


def test_word_list_is_usable() -> None:
    words = word_list()
    assert len(words.domains) >= 20 and len(words.filler) >= 40 and len(words.makers) >= 20
    nouns = [n for d in words.domains for n in (d.name, *d.nouns)]
    assert len(nouns) == len(set(nouns))  # zone words are unique across domains
    verbs = [v for d in words.domains for v in d.verbs]
    for w in nouns + verbs + [*words.filler, *words.qualifiers, *words.makers]:
        assert re.fullmatch(r"[a-z]+", w) and tokenize(w) == [w], w  # one token, no stop word


def test_deterministic_by_seed() -> None:
    kw = {"n_tools": 400, "branching": 4, "depth": 2, "n_orgs": 2}
    assert fingerprint(readable(seed=3, **kw)) == fingerprint(readable(seed=3, **kw))
    assert fingerprint(readable(seed=3, **kw)) != fingerprint(readable(seed=4, **kw))


@pytest.mark.parametrize(("tools", "branching", "depth", "orgs"),
                         [(300, 4, 2, 2), (200, 30, 1, 3), (20_000, 5, 3, 40)])
def test_names_are_labels_and_read_as_capabilities(tools: int, branching: int, depth: int,
                                                   orgs: int) -> None:
    ns = readable(n_tools=tools, branching=branching, depth=depth, n_orgs=orgs, seed=1)
    domains = {d.name for d in word_list().domains}
    for zone in ns.zones:
        if zone not in (ROOT, TLD):
            assert LABEL.match(zone.split(".")[0]), zone
    top = [z.split(".")[0] for z in ns.zones[TLD].children if not ns.zones[z].org]
    assert set(top) <= domains | {t for t in top if t.split("-")[0] in domains}
    assert len({t.split("-")[0] for t in top}) == min(branching, len(domains))
    names = [t.name for t in ns.tools.values()]
    assert len(set(names)) == len(names)  # unique, as pseudo tool names are
    verbs = {v for d in word_list().domains for v in d.verbs}
    for tool in ns.tools.values():
        assert LABEL.match(tool.slug) and tool.name.split("-")[0] in verbs, tool.name
        assert tool.description.startswith(tool.name.replace("-", " ") + ": ")
    for q in ns.queries:  # the intent opens with the capability, as the tool's name says
        assert q.text.startswith(ns.tools[q.truth[0]].name.replace("-", " "))


def test_spills_into_compounds_when_the_list_runs_out() -> None:
    import random

    words = ReadableWords(random.Random(0))
    zone = words.zone_words(None, 5)
    drawn = [words.zone_words(zone[0], 5) for _ in range(60)]  # 300 nouns of one domain
    flat = [w for ws in drawn for w in ws]
    assert len(set(flat)) == len(flat) and any("-" in w for w in flat)
    assert all(LABEL.match(w) for w in flat)


def hit_rate(ns: Namespace) -> float:
    hier = InProcessHierarchy(ns, make_scorer("bm25"))
    hits = sum(q.truth[0] in hier.walk(q.text, q.service, 3).tools for q in ns.queries)
    return hits / len(ns.queries)


TOLERANCE = 0.10  # readable hit@3 may trail pseudo by at most this (measured: see report)


def test_intents_route_about_as_well_as_pseudo_words() -> None:
    kw = {"n_tools": 600, "branching": 4, "depth": 2, "n_orgs": 2, "n_queries": 300}
    pseudo = hit_rate(synthetic(seed=5, **kw))
    read = hit_rate(readable(seed=5, **kw))
    assert read >= pseudo - TOLERANCE, (read, pseudo)
    assert read >= 0.8


def test_default_vocabulary_is_pseudo_and_unknown_rejected() -> None:
    kw = {"n_tools": 50, "branching": 2, "depth": 2, "seed": 2}
    assert fingerprint(synthetic(**kw)) == fingerprint(synthetic(vocabulary="pseudo", **kw))
    assert "-" not in synthetic(**kw).tools["t0000000"].name
    with pytest.raises(ValueError, match="vocabulary"):
        synthetic(vocabulary="klingon", **kw)
