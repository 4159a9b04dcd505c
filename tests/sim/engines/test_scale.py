"""What the fast simulation path must not change: shared servers across schemes, the
servers' packet cache switch, the resolver's fast codec against dnslib's, on whole runs."""

from __future__ import annotations

import pandas as pd
import pytest
from dnslib import DNSRecord

import nodes.agent.stub
import nodes.dns.message
import nodes.resolver.core
from sim.build.namespace import build_namespace
from sim.build.plan import make_plan, scenario_hierarchy
from sim.build.workload import build_jobs
from sim.run.runner import run_scenario
from sim.scenario import Scenario

BASE = {
    "name": "scale-check", "seed": 4,
    "namespace": {"tools": 600, "branching": 4, "depth": 2, "orgs": 1, "replicas": 2},
    "network": {"topology": "waxman", "nodes": 10, "resolvers": 2, "agents": 4,
                "link": {"delay": {"dist": "lognormal", "mean": 0.004, "std": 0.002},
                         "loss": 0.02}},
    "schemes": [{"name": "cached", "k": 3}, {"name": "nocache", "k": 2, "cache": False},
                {"name": "global", "k": 3, "beam": 2, "search": "global", "merge": "score"},
                {"name": "strip", "k": 1, "mode": "strip"}],
    "workload": {"queries": 120, "pool": 40, "popularity": "zipf",
                 "arrival": {"process": "poisson", "rate": 20.0}},
    "outputs": {"plots": False},
}


def _run(data: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    result = run_scenario(Scenario.model_validate(data), write=False)
    return result.records, result.load


def test_shared_servers_give_what_fresh_ones_give(monkeypatch: pytest.MonkeyPatch) -> None:
    """Schemes share one hierarchy (reset between them); building it per scheme, as before,
    gives the same records and the same per-node load, counters included."""
    shared = _run(BASE)
    import sim.run.runner as runner

    real = runner.make_plan

    def fresh(*args, **kwargs):  # type: ignore[no-untyped-def]
        kwargs["hierarchy"] = None
        return real(*args, **kwargs)

    monkeypatch.setattr(runner, "make_plan", fresh)
    alone = _run(BASE)
    pd.testing.assert_frame_equal(shared[0], alone[0])
    pd.testing.assert_frame_equal(shared[1], alone[1])
    assert shared[1].packet_cache_hit.sum() > 0


def test_packet_cache_off_changes_only_its_counter() -> None:
    on = _run(BASE)
    off = _run({**BASE, "caches": {"packet_cache": False}})
    pd.testing.assert_frame_equal(on[0], off[0])
    assert off[1].packet_cache_hit.sum() == 0 < on[1].packet_cache_hit.sum()
    cols = [c for c in on[1].columns if c != "packet_cache_hit"]
    pd.testing.assert_frame_equal(on[1][cols], off[1][cols])


def test_fast_codec_gives_dnslibs_results(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same run with the resolver's and agents' struct codec switched off (every
    message through dnslib, as before it existed) gives identical records and load."""
    fast = _run(BASE)
    monkeypatch.setattr(nodes.resolver.core, "parse_response", lambda wire: None)
    monkeypatch.setattr(nodes.agent.stub, "parse_response", lambda wire: None)
    monkeypatch.setattr(nodes.resolver.core, "encode_query", lambda *a, **k: None)
    monkeypatch.setattr(nodes.agent.stub, "encode_query", lambda *a, **k: None)
    monkeypatch.setattr(nodes.resolver.core, "parse_query", lambda wire: None)
    slow = _run(BASE)
    pd.testing.assert_frame_equal(fast[0], slow[0])
    pd.testing.assert_frame_equal(fast[1], slow[1])


def test_a_run_leaves_the_shared_servers_as_built_and_reset_forgets() -> None:
    """A run counts and caches in its servers' instances (its output reports them); the
    shared servers stay as built. ``reset`` still brings a server used directly back."""
    sc = Scenario.model_validate(BASE)
    ns = build_namespace(sc)
    jobs = build_jobs(sc, ns, sc.network.agents)
    hierarchy = scenario_hierarchy(sc, ns)
    from sim.engines.simpy import run_simpy

    plan, _ = make_plan(sc, sc.schemes[0], ns, jobs, hierarchy=hierarchy)
    out = run_simpy(plan)
    assert any(out.servers.values())  # the run's servers counted
    assert not any(s.stats.counts for s in hierarchy.servers.values())
    assert not any(s._cache for s in hierarchy.servers.values())
    server = hierarchy.servers[hierarchy.root_hints[0]]
    query = DNSRecord.question("tools.", "SOA").pack()
    assert server.handle(query, ("127.0.0.9", 5353), 0.0) is not None
    assert server.stats.counts and server._cache
    hierarchy.reset()
    assert not any(s.stats.counts for s in hierarchy.servers.values())
    assert not any(s._cache for s in hierarchy.servers.values())


def test_response_memo_gives_fresh_ids() -> None:
    """Two replies equal but for their ID read as two messages with their own IDs."""
    from dnslib import QTYPE, RR, A, DNSHeader, DNSQuestion, DNSRecord

    r = DNSRecord(DNSHeader(id=1, qr=1))
    r.add_question(DNSQuestion("a.tools.", QTYPE.A))
    r.add_answer(RR("a.tools.", QTYPE.A, ttl=5, rdata=A("127.0.0.1")))
    wire = bytes(r.pack())
    one = nodes.dns.message.parse_response(wire)
    two = nodes.dns.message.parse_response(b"\x12\x34" + wire[2:])
    assert one is not None and two is not None
    assert (one.header.id, two.header.id) == (1, 0x1234)
    assert two.wire[:2] == b"\x12\x34" and str(two.rr[0].rdata) == "127.0.0.1"
