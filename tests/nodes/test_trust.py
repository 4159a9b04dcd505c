"""Trust policies (nodes.trust) against a rogue publisher (topologies.rogue.inject_rogue):
in memory and as scenario runs with the central-registry comparison."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodes.dns.wire import is_subdomain
from nodes.resolver.config import ResolverConfig
from nodes.resolver.types import Discovery
from nodes.trust import TrustPolicy
from sim.build.trust import trust_policy
from sim.errors import ScenarioError
from sim.run.runner import run_scenario
from sim.scenario import Scenario
from sim.schemes import TrustSpec
from tests.factories import wired
from topologies.rogue import inject_rogue
from topologies.synthetic import synthetic


def _ns(mode: str = "public", n: int = 6):
    ns = synthetic(n_tools=240, branching=3, depth=2, seed=5, n_orgs=4, org_tools=10,
                   n_queries=80)
    inject_rogue(ns, n, mode=mode, seed=5)
    return ns


def test_policy_accepts_only_trusted_zones() -> None:
    p = TrustPolicy("certified", ("hku.weather.tools",))
    assert p.accepts("api.hku.weather.tools.") and not p.accepts("api.weather.tools.")
    assert TrustPolicy().accepts("anything.tools.")
    with pytest.raises(ValueError, match="trusted zone"):
        TrustPolicy("allowlist")


def test_rogue_copies_sit_beside_their_victims() -> None:
    ns = _ns()
    asked = {t for q in ns.queries for t in q.truth}
    assert len(ns.rogue) == 6
    for rid in ns.rogue:
        rogue = ns.tools[rid]
        victim = next(t for t in ns.tools.values() if t.name + "-pro" == rogue.name)
        assert victim.id in asked and rogue.zone == victim.zone
        assert ns.zones[rogue.zone].org is None  # a public branch
        assert rogue.org == "rogue" and victim.description in rogue.description
        assert rid in ns.zones[rogue.zone].tools and rogue.service == victim.service
    targets = [t.target for t in ns.tools.values()]
    assert len(targets) == len(set(targets))
    comp = _ns("compromised", 3)
    zones = {comp.tools[r].zone for r in comp.rogue}
    assert len(zones) == 1 and comp.zones[zones.pop()].org is not None
    with pytest.raises(ValueError, match="organisation"):
        inject_rogue(synthetic(n_tools=50, branching=2, depth=2, seed=1), 2, "compromised")


def _net(ns, policy: TrustPolicy | None):
    return wired(ns, scorer="bm25", seed=2, config=ResolverConfig(trust=policy))[1]


def test_open_walk_returns_rogue_copies_the_policies_do_not() -> None:
    ns = _ns()
    certified = sorted(z for z, n in ns.zones.items() if n.org)
    rogue_targets = {ns.tools[r].target for r in ns.rogue}
    victims = [q for q in ns.queries if any(ns.tools[r].name == ns.tools[q.truth[0]].name + "-pro"
                                            for r in ns.rogue)]
    got: dict[str, list] = {}
    for name, policy in (("open", None),
                         ("certified", TrustPolicy("certified", tuple(certified))),
                         ("ptc", TrustPolicy("public-then-certified", tuple(certified)))):
        net = _net(ns, policy)
        got[name] = []
        for q in victims:
            net.resolver.discover(Discovery(q.text, service=q.service, k=3), net.now)
            got[name].extend(net.run())
    assert any(e.target in rogue_targets for r in got["open"] for e in r.endpoints)
    for name in ("certified", "ptc"):
        for r in got[name]:
            assert all(any(is_subdomain(e.target, z) for z in certified) for e in r.endpoints)
    # certified never asks a public leaf; public-then-certified did, refused it, fell back
    leaves = {z for z, n in ns.zones.items() if not n.children and not n.org}
    assert not any(leaf in r.leaves for r in got["certified"] for leaf in leaves)
    assert sum(r.rejected for r in got["ptc"]) > 0
    assert all(r.endpoints for r in got["ptc"])


def test_policies_from_scenario_specs() -> None:
    ns = _ns()
    assert trust_policy(TrustSpec(), ns) is None
    assert trust_policy(TrustSpec(policy="org", org="x"), ns) is None
    cert = trust_policy(TrustSpec(policy="certified"), ns)
    assert cert is not None and len(cert.zones) == 4
    org = ns.zones[cert.zones[1]].org
    allow = trust_policy(TrustSpec(policy="allowlist", orgs=(org,)), ns)
    assert allow is not None and allow.zones == (cert.zones[1],)
    with pytest.raises(ScenarioError, match=r"trust\.orgs: .*nobody"):
        trust_policy(TrustSpec(policy="allowlist", orgs=("nobody",)), ns)
    with pytest.raises(ValueError, match="orgs"):
        TrustSpec(policy="allowlist")


def _scenario(mode: str, victim: str | None = None) -> Scenario:
    return Scenario.model_validate({
        "name": "rogue", "seed": 5,
        "namespace": {"tools": 240, "branching": 3, "depth": 2, "orgs": 4, "org_tools": 10,
                      "rogue": {"tools": 8, "mode": mode, "victim_org": victim}},
        "network": {"topology": "star", "nodes": 4, "agents": 2,
                    "link": {"delay": {"dist": "constant", "mean": 0.005}}},
        "schemes": [{"name": "open", "k": 3},
                    {"name": "certified", "k": 3, "trust": {"policy": "certified"}},
                    {"name": "ptc", "k": 3, "trust": {"policy": "public-then-certified"}},
                    {"name": "registry", "kind": "agentdns", "k": 3}],
        "workload": {"queries": 80, "pool": 40, "popularity": "zipf",
                     "arrival": {"process": "poisson", "rate": 50}},
        "outputs": {"plots": False}})


def test_rogue_scenario_counts_per_policy(tmp_path: Path) -> None:
    report = run_scenario(_scenario("public"), out_dir=tmp_path).summary["trust"]
    s = report["schemes"]
    assert report["rogue_tools"] == 8
    assert s["open"]["rogue_returned"] > 0 and s["registry"]["rogue_returned"] > 0
    assert s["certified"]["rogue_returned"] == 0 and s["ptc"]["rogue_returned"] == 0
    assert s["certified"]["recall_cost"] > 0  # public tools are out of reach
    assert s["open"]["recall_cost"] == 0 and s["registry"]["policy"] == "registry"


def test_compromised_org_passes_certified_but_not_an_allowlist(tmp_path: Path) -> None:
    ns_orgs = sorted({n.org for n in _ns().zones.values() if n.org})
    victim, other = ns_orgs[0], ns_orgs[1]
    sc = _scenario("compromised", victim).with_overrides({"schemes": [
        {"name": "allow", "k": 3, "trust": {"policy": "allowlist", "orgs": [other]}},
        {"name": "allow-victim", "k": 3, "trust": {"policy": "allowlist", "orgs": [victim]}}]})
    s = run_scenario(sc, out_dir=tmp_path).summary["trust"]["schemes"]
    assert s["allow"]["rogue_returned"] == 0
    assert s["allow-victim"]["rogue_returned"] > 0
