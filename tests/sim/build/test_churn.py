"""Tool churn (sim.build.churn): a leaf server's reload, the resolver's cache until TTL, and
visibility measured through the simpy and live engines against a registry."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest
from dnslib import QTYPE, DNSRecord

from nodes.dns.zone import Ttls
from nodes.resolver.types import Discovery
from sim.build.hierarchy import build_hierarchy
from sim.engines.memory import MemoryNetwork
from sim.errors import ScenarioError
from sim.run.runner import run_scenario
from sim.scenario import Scenario
from topologies.synthetic import synthetic


def _leaf(h):  # type: ignore[no-untyped-def]
    """A leaf zone's server and the zone's first tool."""
    for ip, zone in sorted(h.zone_of.items()):
        data = h.servers[ip].zone_data(zone)
        if data.is_leaf and len(data.tools) >= 2:
            return ip, h.servers[ip], data
    raise AssertionError("no leaf")


def _ask(server, name: str, qtype: str) -> DNSRecord:  # type: ignore[no-untyped-def]
    wire = server.handle(DNSRecord.question(name, qtype).pack(), ("127.0.0.9", 5300), 0.0)
    return DNSRecord.parse(wire)


def test_server_applies_change_like_a_reload() -> None:
    h = build_hierarchy(synthetic(n_tools=40, branching=2, depth=1, seed=1))
    _ip, server, data = _leaf(h)
    zone, old = data.name, data.tools[0]
    owner = f"_{old.service}._{old.proto}.{zone}"
    serial = _ask(server, zone, "SOA").rr[0].rdata.times[0]
    before = _ask(server, owner, "SRV")
    assert _ask(server, owner, "SRV").rr == before.rr
    assert server.stats["packet_cache_hit"] == 1  # the second answer came from the cache
    added = replace(old, tool_id="new-1", name="fresh", target=f"fresh.{zone}",
                    address="127.66.0.1", port=8443)
    assert server.apply_change(zone, add=[added], remove=[old.tool_id]) == serial + 1
    after = _ask(server, owner, "SRV")
    assert server.stats["packet_cache_hit"] == 1  # flushed: answered from the new zone
    targets = {str(r.rdata.target) for r in after.rr}
    assert f"fresh.{zone}" in targets and old.target not in targets
    assert len(after.rr) == len(before.rr)
    assert _ask(server, zone, "SOA").rr[0].rdata.times[0] == serial + 1
    a = _ask(server, f"fresh.{zone}", "A")
    assert QTYPE[a.rr[0].rtype] == "A" and str(a.rr[0].rdata) == "127.66.0.1"
    assert DNSRecord.parse(server.handle(DNSRecord.question(old.target, "A").pack(),
                                         ("127.0.0.9", 5300), 0.0)).header.rcode == 3


def test_resolver_serves_cached_answer_until_ttl() -> None:
    ns = synthetic(n_tools=40, branching=2, depth=1, seed=1)
    h = build_hierarchy(ns, ttls=Ttls(srv=30, a=30))
    _ip, _server, data = _leaf(h)
    old = data.tools[0]
    intent = f"{old.name} {old.description}"
    net = MemoryNetwork(h, h.resolver(seed=1))

    def targets(now: float) -> set[str]:
        net.now = now
        result = net.resolver.discover(Discovery(intent, service=old.service, k=3), now)
        net.run()
        return {e.target for e in result.endpoints}

    assert old.target in targets(0.0)  # the walk reaches the tool's leaf
    for ip, zone in h.zone_of.items():
        if zone == data.name:
            h.servers[ip].apply_change(zone, remove=[old.tool_id])
    assert old.target in targets(10.0)  # the resolver's cached SRV answer, 20 s to live
    assert old.target in targets(29.9)
    assert old.target not in targets(30.5)  # expired: asked again, the tool is gone


CHURN = {
    "name": "churn-test", "seed": 3,
    "namespace": {"tools": 60, "branching": 2, "depth": 2, "orgs": 1},
    "network": {"topology": "star", "nodes": 4, "resolvers": 1, "agents": 2,
                "link": {"delay": {"dist": "constant", "mean": 0.002}}},
    "schemes": [{"name": "tooldns", "k": 3},
                {"name": "agentdns", "kind": "agentdns", "resolve": True}],
    "caches": {"srv_ttl": 10, "a_ttl": 10},
    "workload": {"queries": 40, "pool": 10, "arrival": {"process": "poisson", "rate": 2.0},
                 "churn": {"events": [{"at": 5.0, "action": "add"},
                                      {"at": 5.0, "action": "change"},
                                      {"at": 6.0, "action": "remove"}],
                           "probes": {"interval": 0.5, "before": 2.0, "duration": 14.0}}},
    "outputs": {"plots": False},
}


def test_simpy_visibility_follows_srv_ttl(tmp_path: Path) -> None:
    sc = Scenario.model_validate(CHURN)
    res = run_scenario(sc, out_dir=tmp_path)
    rows = [r for r in res.summary["churn"]["schemes"].items()]
    tooldns, agentdns = dict(rows)["tooldns"], dict(rows)["agentdns"]
    assert tooldns["visible"] == agentdns["visible"] == 3
    # cached 2 s before the change with a 10 s TTL: the change shows 8 s (+ one probe)
    # later, or sooner when a cached A record of the removed tool expires first (NXDOMAIN)
    assert 4.0 <= tooldns["median_visible_s"] <= tooldns["max_visible_s"] <= 10.0
    assert tooldns["max_visible_s"] >= 7.5
    sources = tooldns["stale_sources"]
    assert set(sources) <= {"resolver_answer", "resolver_a"}
    assert sources["resolver_answer"] >= 40 and tooldns["stale_answers"] >= 40
    assert agentdns["max_visible_s"] < 0.01 and agentdns["stale_answers"] == 0
    table = (tmp_path / "churn.csv").read_text(encoding="utf-8").splitlines()
    assert len(table) == 1 + 3 * 2 and table[0].startswith("scenario,engine,scheme")
    summary = json.loads((tmp_path / "summary.json").read_text(encoding="utf-8"))
    assert summary["schemes"]["tooldns"]["queries"] == 40  # probes not in the summary
    probes = res.records[res.records.churn_probe >= 0]
    assert len(probes) == 2 * 3 * 33 and set(probes.query_source) == {"churn-probe"}
    # the servers are shared by the schemes of a run: put back after each scheme
    again = run_scenario(sc, write=False)
    assert again.summary["churn"] == res.summary["churn"]


def test_live_engine_sees_the_same_changes() -> None:
    data = json.loads(json.dumps(CHURN))
    data["caches"] = {"srv_ttl": 1, "a_ttl": 1}
    data["workload"].update(queries=6, arrival={"process": "poisson", "rate": 6.0})
    data["workload"]["churn"] = {"events": [{"at": 0.5, "action": "add"},
                                            {"at": 0.5, "action": "remove"}],
                                 "probes": {"interval": 0.25, "before": 0.25,
                                            "duration": 1.5}}
    sc = Scenario.model_validate(data)
    res = run_scenario(sc, engine="live", write=False, live_port=30000 + os.getpid() % 20000)
    schemes = res.summary["churn"]["schemes"]
    assert schemes["tooldns"]["visible"] == schemes["agentdns"]["visible"] == 2
    assert schemes["tooldns"]["stale_probe_answers"] >= 2  # the cached answer, ~0.75 s
    assert 0.4 < schemes["tooldns"]["max_visible_s"] < 1.3
    assert schemes["agentdns"]["max_visible_s"] < 0.2
    assert schemes["agentdns"]["stale_answers"] == 0


@pytest.mark.parametrize(("change", "message"), [
    ({"events": [{"at": 5.0, "action": "remove", "count": 50, "zone": "LEAF"}]},
     "workload.churn.events.0.count: remove of 50 tools but leaf"),
    ({"events": [{"at": 500.0, "action": "add"}]},
     "workload.churn.events.0.at: 500 s is after the workload's last query"),
    ({"events": [{"at": 5.0, "action": "add", "zone": "nowhere.tools."}]},
     "workload.churn.events.0.zone: 'nowhere.tools.' is not a leaf zone"),
    ({"events": [{"at": 5.0, "action": "add"}], "probes": {"agent": 7}},
     "workload.churn.probes.agent: 7 but the network has 2 agents"),
])
def test_bad_churn_is_a_scenario_error(change: dict, message: str) -> None:
    data = json.loads(json.dumps(CHURN))
    if change["events"][0].get("zone") == "LEAF":
        ns = synthetic(n_tools=60, branching=2, depth=2, seed=3, n_orgs=1, n_queries=200)
        change["events"][0]["zone"] = sorted(z for z in ns.leaves() if ns.zones[z].tools)[0]
    data["workload"]["churn"] = change
    with pytest.raises(ScenarioError, match=message.replace("[", r"\[").replace("]", r"\]")):
        run_scenario(Scenario.model_validate(data), write=False)


def test_churn_needs_a_known_action() -> None:
    data = json.loads(json.dumps(CHURN))
    data["workload"]["churn"]["events"][0]["action"] = "rename"
    with pytest.raises(Exception, match=r"add.*change.*remove"):
        Scenario.model_validate(data)


def test_registries_update_their_index_at_once() -> None:
    from nodes.scoring import make_scorer
    from sim.build.churn import _registry_tool
    from sim.build.registries import build_registry

    ns = synthetic(n_tools=40, branching=2, depth=1, seed=1)
    h = build_hierarchy(ns)
    _ip, _server, data = _leaf(h)
    old = data.tools[0]
    moved = replace(old, address="127.66.0.9", port=10001)
    added = replace(old, tool_id="new-1", name="fresh churnadd0", target=f"fresh.{data.name}",
                    description=old.description + " churnadd0", address="127.66.0.1")
    for kind in ("agentdns", "ans-v0"):
        app = build_registry(kind, ns, make_scorer("bm25"), 1).server.app
        app.apply_change([_registry_tool(moved, data.name), _registry_tool(added, data.name)])
        found = app.catalogue.search(f"{added.name} {added.description}", 3, old.service)
        assert found[0].id == "new-1"
        now = {t.id: t for t in app.catalogue.tools}
        assert (now[old.tool_id].address, now[old.tool_id].port) == ("127.66.0.9", 10001)
        app.apply_change(remove=["new-1"])
        assert "new-1" not in {t.id for t in app.catalogue.tools}
        if kind == "ans-v0":
            assert _registry_tool(added, data.name).ans_name not in app._by_name
            assert app._by_name[_registry_tool(moved, data.name).ans_name].port == 10001


def test_interrupted_churn_run_keeps_probes_out_of_the_partial_summary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sim.catalog.engines import EngineInfo, engine_info

    real = engine_info("simpy").load()
    calls: list[str] = []

    def crash_second(plan, sink=None):  # type: ignore[no-untyped-def]
        calls.append(plan.scheme)
        if len(calls) == 2:
            raise RuntimeError("engine bug")
        return real(plan, sink)

    monkeypatch.setattr(EngineInfo, "load", lambda self: crash_second)
    with pytest.raises(RuntimeError, match="engine bug"):
        run_scenario(Scenario.model_validate(CHURN), out_dir=tmp_path)
    partial = json.loads((tmp_path / "partial.json").read_text(encoding="utf-8"))
    assert partial["finished_schemes"] == ["tooldns"]
    assert partial["schemes"]["tooldns"]["queries"] == 40  # the workload, not the probes
