"""Namespace builders: the synthetic generator and the real catalogue (when present)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from nodes.resolver import Discovery
from sim.hierarchy import build_hierarchy
from sim.memory import MemoryNetwork
from topologies.namespace import ROOT, TLD, dns_label, from_catalog, synthetic

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "tools"
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
