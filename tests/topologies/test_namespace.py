"""Namespace builders: the synthetic generator and the real catalogue (when present)."""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter
from pathlib import Path

import pytest

from nodes.resolver.types import Discovery
from sim.build.hierarchy import build_hierarchy
from sim.engines.memory import MemoryNetwork
from topologies.catalog import from_catalog
from topologies.draws import below, sample
from topologies.labels import dns_label
from topologies.namespace import ROOT, TLD, Namespace
from topologies.rogue import inject_rogue
from topologies.synthetic import synthetic, word_demand

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data" / "tools"
needs_catalog = pytest.mark.skipif(not (SHARED / "catalog.jsonl").exists(),
                                   reason="../shared/data/tools is not beside the repository")


@pytest.mark.parametrize(("n", "b", "d"), [(100, 2, 1), (1000, 4, 2), (3000, 3, 4)])
def test_synthetic_shape(n: int, b: int, d: int) -> None:
    ns = synthetic(n_tools=n, branching=b, depth=d, seed=1, n_orgs=2, org_tools=4)
    public = [z for z in ns.leaves() if ns.zones[z].org is None]
    assert len(public) == b**d
    assert all(ns.zones[z].depth == d for z in public)
    assert len(ns.tools) == n + 2 * 4
    orgs = [z for z, node in ns.zones.items() if node.org]
    assert len(orgs) == 2 and all(ns.zones[z].tools for z in orgs)
    # every tool is in exactly one leaf, and its truth path ends there
    assert sum(len(ns.zones[z].tools) for z in ns.leaves()) == len(ns.tools)
    for q in ns.queries[:20]:
        assert ns.oracle_truth()[q.text] >= {q.truth[0], *ns.path(ns.tools[q.truth[0]].zone)}


def test_synthetic_is_deterministic_per_seed() -> None:
    a, b = synthetic(500, 3, 2, seed=4), synthetic(500, 3, 2, seed=4)
    c = synthetic(500, 3, 2, seed=5)
    assert list(a.zones) == list(b.zones) and a.queries == b.queries
    assert list(a.zones) != list(c.zones)


def _fingerprint(ns: Namespace) -> str:
    h = hashlib.sha256()
    for z, node in ns.zones.items():
        h.update(f"{z}|{node.summary}|{node.children}|{node.tools}|{node.org}\n".encode())
    for t in ns.tools.values():
        h.update(f"{t.id}|{t.name}|{t.description}|{t.service}|{t.zone}|{t.slug}|{t.org}|"
                 f"{t.port}|{t.address}\n".encode())
    for q in ns.queries:
        h.update(f"{q.id}|{q.text}|{q.service}|{q.truth}\n".encode())
    return h.hexdigest()


def test_synthetic_output_is_pinned() -> None:
    """Digests of the generator before it was sped up (same draws, same namespaces)."""
    assert _fingerprint(synthetic(400, 3, 3, seed=3, n_orgs=2, org_tools=3, n_queries=50)) \
        == "f81ce281971966a960f2d5dbcbc6b94dbc3ec3570526eb6f76745f108cc4fb01"
    assert _fingerprint(synthetic(250, 5, 1, seed=11, n_orgs=1, n_queries=20,
                                  words_per_zone=4)) \
        == "24644f63657615c3e6f9ffd8a006eeaac1d435a0985373b5a3cc0e58b398651a"


def test_inlined_draws_match_random() -> None:
    """The generator inlines random.Random's choice/sample; this Python must agree."""
    a, b = random.Random(7), random.Random(7)
    for n in (1, 2, 4, 5, 17, 40, 20_000):
        pool = [str(i) for i in range(n)]
        assert [a.choice(pool) for _ in range(50)] == \
            [pool[below(b.getrandbits, n)] for _ in range(50)]
        for k in range(min(n, 5) + 1):
            assert a.sample(pool, k) == sample(b.getrandbits, pool, k)
    assert a.random() == b.random()


@pytest.mark.parametrize("orgs", [0, 3])
def test_synthetic_never_runs_dry(orgs: int) -> None:
    """Beyond the word space (here shrunk to 2 consonants x 2 vowels: 16 two-syllable and
    64 three-syllable words) words spill into longer ones; the generator used to loop
    forever there (at about 359,300 tools with the full alphabet)."""
    letters = ("bk", "ai")
    kw = {"n_tools": 3000, "branching": 4, "depth": 2, "seed": 2, "n_orgs": orgs,
          "n_queries": 30}
    demand = word_demand(3000, 4, 2, orgs, 5, 5)
    assert demand[2] > 4**2 and demand[3] > 4**3  # the old generator would never finish
    ns = synthetic(**kw, _letters=letters)
    names = [t.name for t in ns.tools.values()]
    labels = [z.split(".")[0] for z in ns.zones if z not in (ROOT, TLD)]
    assert len(set(names)) == len(names) == 3000 + 5 * orgs
    assert len(set(labels)) == len(labels) and not set(labels) & set(names)
    assert all(set(w) <= set("bkai") and dns_label(w) == w for w in names + labels)
    assert max(len(w) for w in names) > 6  # longer words than asked for were needed
    targets = [t.target for t in ns.tools.values()]
    assert len(set(targets)) == len(targets)
    assert _fingerprint(ns) == _fingerprint(synthetic(**kw, _letters=letters))


def test_lookups_match_brute_force() -> None:
    """services_below and the lazy target -> id map agree with the plain definitions."""
    ns = synthetic(600, 3, 2, seed=4, n_orgs=2)
    inject_rogue(ns, 5, "public", seed=1)
    below = ns.services_below()
    for zone in ns.zones:
        expect = {t.service for t in ns.tools.values()
                  if zone == ROOT or zone in ns.path(t.zone)}
        assert below[zone] == expect
    ids = ns.target_ids()
    plain = {t.target: t.id for t in ns.tools.values()}
    for target, tid in plain.items():
        assert ids.get(target, target) == tid and target in ids and ids[target] == tid
    for other in ("nope.tools.", "x.nope.tools.", "", "tools."):
        assert ids.get(other, other) == other and other not in ids


def test_dns_label() -> None:
    assert dns_label("Finance & Crypto!") == "finance-crypto"
    assert dns_label("---") == "x"
    assert len(dns_label("a" * 100)) == 63


def test_catalog_format_errors_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "cat.jsonl"
    good = {"id": "a:1", "name": "x/y", "description": "does things", "protocol": "mcp",
            "path": ["cat"]}
    path.write_text(json.dumps(good) + "\n{not json}\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"cat\.jsonl:2"):
        from_catalog(path)


def test_small_catalog_tree(tmp_path: Path) -> None:
    rows = [
        {"id": "s:1", "name": "acme/weather", "description": "weather forecast api",
         "protocol": "mcp", "path": ["weather"]},
        {"id": "s:2", "name": "acme/history", "description": "historical weather archive",
         "protocol": "rest", "path": ["weather", "history"]},
        {"id": "s:3", "name": "other", "description": "translate english text",
         "protocol": "skill", "path": ["nlp"], "source": "composio"},
    ]
    path = tmp_path / "cat.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    ns = from_catalog(path)
    assert set(ns.zones) == {ROOT, TLD, "weather.tools.", "history.weather.tools.",
                             "general.weather.tools.", "nlp.tools."}
    assert ns.tools["s:1"].zone == "general.weather.tools."  # beside a subcategory
    assert ns.tools["s:1"].org == "acme" and ns.tools["s:3"].org == "composio"
    assert "weather" in ns.zones["weather.tools."].summary


@needs_catalog
def test_real_catalog_builds_and_resolves() -> None:
    ns = from_catalog(SHARED / "catalog.jsonl", SHARED / "queries.jsonl")
    stats = ns.stats()
    assert stats["tools"] == 25_897 and stats["queries"] > 19_000
    targets = [t.target for t in ns.tools.values()]
    assert len(set(targets)) == len(targets)
    assert all(len(label) <= 63 for t in targets for label in t.rstrip(".").split("."))
    hierarchy = build_hierarchy(ns, scorer="oracle")
    resolver = hierarchy.resolver(seed=2)
    net = MemoryNetwork(hierarchy, resolver)
    counts = Counter(q.text for q in ns.queries)
    sample = [q for q in ns.queries if counts[q.text] == 1][::1500]  # texts with one truth
    found = 0
    for q in sample:
        resolver.discover(Discovery(q.text, service=q.service, k=5), net.now)
        (result,) = net.run()
        truth = {ns.tools[t].target for t in q.truth}
        found += bool(truth & {e.target for e in result.endpoints})
        assert result.endpoints, (q.text, result.error)
    assert found == len(sample) >= 8  # the oracle follows the true path
