"""Fault schedules (sim.build.faults), resolver failover knobs, and outages on both engines."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from nodes.resolver.config import ResolverConfig
from nodes.resolver.types import Discovery
from sim.build.faults import (
    FaultPlan,
    FaultState,
    Interval,
    Nodes,
    build_fault_plan,
    registry_order,
    select,
)
from sim.build.hierarchy import build_hierarchy
from sim.engines.memory import MemoryNetwork
from sim.errors import ScenarioError
from sim.faultspec import FaultsSpec
from sim.loading import load_scenario
from sim.provenance import deterministic_summary
from sim.run.runner import run_scenario
from sim.scenario import Scenario
from tests.factories import tiny_namespace

NODES = Nodes(
    zone_servers={".": ["10.0.0.1", "10.0.0.2"], "tools.": ["10.0.1.1", "10.0.1.2"],
                  "a.tools.": ["10.0.2.1", "10.0.2.2"], "o.a.tools.": ["10.0.3.1", "10.0.3.2"]},
    roles={"10.0.0.1": "root", "10.0.0.2": "root", "10.0.1.1": "tld", "10.0.1.2": "tld",
           "10.0.2.1": "intermediate", "10.0.2.2": "intermediate", "10.0.3.1": "leaf",
           "10.0.3.2": "leaf"},
    orgs={"10.0.3.1": "o", "10.0.3.2": "o"},
    registries=["127.0.80.1", "127.0.80.2"], resolvers=["127.0.53.1"],
    agents=["127.2.0.1", "127.2.0.2"])


def plan_of(*events: dict, seed: int = 1, horizon: float = 100.0) -> FaultState:
    """One run's state of the schedule of ``events``, started at node time 10."""
    plan = build_fault_plan(FaultsSpec(events=events), NODES, seed, horizon)  # type: ignore[arg-type]
    state = plan.begin()
    state.start(10.0)  # workload time 0 = node time 10
    return state


def test_selectors_name_the_intended_nodes() -> None:
    assert select("replica:0", NODES) == {"10.0.0.1", "10.0.1.1", "10.0.2.1", "10.0.3.1"}
    assert select("zone:a.tools", NODES) == {"10.0.2.1", "10.0.2.2"}
    assert select("zone:a.tools.#1", NODES) == {"10.0.2.2"}
    assert select("role:leaf#0", NODES) == {"10.0.3.1"}
    assert select("org:o", NODES) == {"10.0.3.1", "10.0.3.2"}
    assert select("registry#1", NODES) == {"127.0.80.2"}
    assert select("agents", NODES) == {"127.2.0.1", "127.2.0.2"}
    assert "127.0.53.1" in select("*", NODES)
    assert select("servers", NODES) == select("*", NODES) - {"127.0.53.1", "127.2.0.1",
                                                             "127.2.0.2"}
    for bad in ("zone:nowhere", "replica:5", "registry#3", "address:1.2.3.4"):
        with pytest.raises(ScenarioError, match="names no node"):
            select(bad, NODES)


def test_down_drops_both_directions_only_inside_the_window() -> None:
    plan = plan_of({"kind": "down", "target": "zone:tools.#0", "at": 5, "duration": 10})
    srv, other = "10.0.1.1", "10.0.1.2"
    assert plan.fate("127.0.53.1", srv, 14.0, 0.01) == 0.01  # arrives at 14.01 < 15
    assert plan.fate("127.0.53.1", srv, 14.995, 0.01) is None  # arrives while down
    assert plan.fate(srv, "127.0.53.1", 20.0, 0.01) is None  # a crashed node sends nothing
    assert plan.fate("127.0.53.1", other, 20.0, 0.01) == 0.01
    assert plan.fate("127.0.53.1", srv, 25.0, 0.01) == 0.01  # restarted at 15 + 10
    assert plan.fate("127.0.53.1", srv, 25.0, None) is None  # lost by the network anyway
    assert plan.drops == {"receiver down": 1, "sender down": 1}
    assert plan.recovery() == [{"fault": 0, "address": srv, "down_s": 5.0, "restart_s": 15.0,
                                "first_packet_after_s": 0.01}]
    assert not plan.active_at(14.9) and plan.active_at(15.0) and not plan.active_at(25.0)


def test_slow_delay_partition_and_lossy() -> None:
    plan = plan_of(
        {"kind": "slow", "target": "zone:a.tools.#0", "delay": 0.2},
        {"kind": "delay", "target": "agents", "peer": "resolvers", "delay": 0.05},
        {"kind": "partition", "target": "role:leaf", "peer": "resolvers", "at": 50,
         "duration": 5},
        {"kind": "lossy", "target": "zone:a.tools.#1", "loss": 0.5})
    assert plan.fate("10.0.2.1", "127.0.53.1", 11.0, 0.01) == pytest.approx(0.21)
    assert plan.fate("127.0.53.1", "10.0.2.1", 11.0, 0.01) == pytest.approx(0.01)  # not slow in
    assert plan.fate("127.2.0.1", "127.0.53.1", 11.0, 0.01) == pytest.approx(0.06)
    assert plan.fate("127.0.53.1", "127.2.0.2", 11.0, 0.01) == pytest.approx(0.06)
    assert plan.fate("127.0.53.1", "10.0.3.1", 61.0, 0.01) is None
    assert plan.fate("10.0.3.2", "127.0.53.1", 64.9, 0.01) is None
    assert plan.fate("10.0.3.2", "127.0.53.1", 65.0, 0.01) == 0.01
    assert plan.fate("10.0.3.2", "127.2.0.1", 61.0, 0.01) == 0.01  # not across the cut
    kept = sum(plan.fate("127.0.53.1", "10.0.2.2", 11.0, 0.01) is not None
               for _ in range(2000))
    assert 850 < kept < 1150  # loss 0.5 on packets to the lossy replica


def test_random_process_is_seeded_and_bounded() -> None:
    spec = {"kind": "down", "target": "replica:1", "rate": 0.05, "duration": 3, "at": 10}
    a, b = plan_of(spec, seed=3, horizon=400), plan_of(spec, seed=3, horizon=400)
    c = plan_of(spec, seed=4, horizon=400)
    assert a.intervals == b.intervals and a.intervals != c.intervals
    assert all(iv.start >= 10 and iv.start < 400 and len(iv.targets) == 1
               for iv in a.intervals)
    per_node = len(a.intervals) / 4  # Poisson(0.05/s) over 390 s: about 19 per node
    assert 8 < per_node < 32
    mean = np.mean([iv.end - iv.start for iv in a.intervals])
    assert 1.5 < mean < 5.0


def test_windows_merge_and_start_gates_everything() -> None:
    plan = FaultPlan([Interval(0, "down", 1, 3, frozenset({"x"})),
                      Interval(1, "down", 2, 5, frozenset({"y"})),
                      Interval(2, "slow", 7, math.inf, frozenset({"x"}), delay=1)], 0)
    assert plan.windows() == [(1, 5), (7, math.inf)]
    state = plan.begin()
    assert not state.down("x", 2.0)  # not started (e.g. during K = 0 warming)
    state.start(0.0)
    assert state.down("x", 2.0) and state.down("y", 4.0) and not state.down("x", 4.0)


def test_registry_order_rotates_per_agent() -> None:
    assert registry_order(1, 5) == ["127.0.80.1"]
    assert registry_order(3, 4) == ["127.0.80.2", "127.0.80.3", "127.0.80.1"]


@pytest.mark.parametrize(("text", "field", "words"), [
    ("faults: {events: []}", "faults.events", "at least 1"),
    ("faults: {events: [{kind: slow, target: replica:0}]}", "faults.events.0.delay", "delay > 0"),
    ("faults: {events: [{kind: lossy, target: replica:0}]}", "faults.events.0.loss", "loss > 0"),
    ("faults: {events: [{kind: partition, target: agents}]}", "faults.events.0.peer",
     "other side"),
    ("faults: {events: [{kind: down, target: replica:0, rate: 1}]}",
     "faults.events.0.duration", "mean duration"),
    ("faults: {events: [{kind: down, target: 'zone:x!'}]}", "faults.events.0.target", "pattern"),
    ("faults: {events: [{kind: crash, target: replica:0}]}", "faults.events.0.kind", "'down'"),
    ("schemes: [{name: a, replicas: 2}]", "schemes.0.replicas", "registry schemes"),
    ("schemes: [{name: a, kind: agentdns, serve_stale: true}]", "schemes.0.serve_stale",
     "DNS schemes only"),
])
def test_bad_fault_sections_are_rejected(tmp_path: Path, text: str, field: str,
                                         words: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(f"name: x\n{text}\n")
    with pytest.raises(ScenarioError) as err:
        load_scenario(path)
    assert f"{path}: {field}: " in str(err.value) and words in str(err.value)


# ------------------------------------------------------------------ resolver knobs


def test_failover_then_srtt_decay_probes_the_restarted_replica() -> None:
    ns = tiny_namespace()
    h = build_hierarchy(ns, replicas=2)
    config = ResolverConfig(timeout=0.3, srtt_decay=0.5, cache=False)
    net = MemoryNetwork(h, h.resolver(seed=3, config=config))
    first = {z: sorted(a for a, zz in h.zone_of.items() if zz == z)[0] for z in ns.zones}
    net.dead = set(first.values())
    q = ns.queries[0]
    for _ in range(6):
        net.resolver.discover(Discovery(q.text, service=q.service, k=2), net.now)
        (r,) = net.run()
        assert r.endpoints  # always answered by the live replica
        net.now += 1
    slow = [s for s in r.steps if s.outcome == "timeout"]
    assert not slow  # the dead replicas are avoided once their SRTT is known
    net.dead = set()  # restart: decay brings the first replicas back into use
    used: set[str] = set()
    for _ in range(12):
        net.resolver.discover(Discovery(q.text, service=q.service, k=2), net.now)
        (r,) = net.run()
        used |= {s.server[0] for s in r.steps}
        net.now += 1
    assert used & set(first.values())


def test_serve_stale_answers_from_expired_data_when_the_leaf_is_down() -> None:
    ns = tiny_namespace()
    h = build_hierarchy(ns, replicas=1)
    q = ns.queries[0]
    leaf = ns.tools[q.truth[0]].zone
    leaf_ip = next(a for a, z in h.zone_of.items() if z == leaf)
    results = {}
    for stale in (False, True):
        config = ResolverConfig(timeout=0.2, max_attempts=2, serve_stale=stale)
        net = MemoryNetwork(h, h.resolver(seed=3, config=config))
        req = Discovery(q.text, service=q.service, k=2)
        net.resolver.discover(req, net.now)
        (warm,) = net.run()
        assert warm.endpoints
        net.now += 400  # SRV (300 s) and A records expired; delegations (1 day) still fresh
        net.dead = {leaf_ip}
        net.resolver.discover(req, net.now)
        (results[stale],) = net.run()
    assert not results[False].endpoints and "timeout" in results[False].error
    got = results[True]
    assert [e.target for e in got.endpoints] == [e.target for e in warm.endpoints]
    assert got.cache["stale_srv"] == 1 and got.cache["stale_a"] == len(got.endpoints)
    assert got.error is None


# ------------------------------------------------------------------ scenario runs


def outage(**over) -> Scenario:
    """One of two replicas of every zone down for the middle of the run; the registry (one
    host, or two replicas behind its name) down over the same window."""
    data = {
        "name": "outage", "seed": 4,
        "namespace": {"tools": 200, "branching": 3, "depth": 2, "orgs": 1, "replicas": 2},
        "network": {"topology": "star", "nodes": 5, "agents": 2,
                    "link": {"delay": {"dist": "constant", "mean": 0.01}}},
        "schemes": [{"name": "tooldns", "k": 3, "timeout": 0.3},
                    {"name": "agentdns", "kind": "agentdns", "k": 3},
                    {"name": "agentdns-2", "kind": "agentdns", "k": 3, "replicas": 2}],
        "workload": {"queries": 60, "pool": 20, "arrival": {"process": "poisson", "rate": 20}},
        "caches": {"srv_ttl": 1, "a_ttl": 1},
        "faults": {"events": [{"kind": "down", "target": "replica:0", "at": 0.5,
                               "duration": 1.5},
                              {"kind": "down", "target": "registry#0", "at": 0.5,
                               "duration": 1.5}], "bin": 0.5},
        "outputs": {"plots": False},
    }
    return Scenario.model_validate(data).with_overrides(over)


def _check_outage(result) -> None:
    f = result.summary["faults"]["schemes"]
    df = result.records
    dns = df[df.scheme == "tooldns"]
    assert dns.success.all() and dns.during_fault.sum() > 10
    assert f["tooldns"]["mean_retries"] > 0 and f["tooldns"]["dropped_packets"]["receiver down"]
    assert dns.latency_ms.max() > 300  # a 0.3 s timeout before failing over
    if "extra_latency_ms" in f["tooldns"]:  # against the fault-free run of the same queries
        assert f["tooldns"]["extra_latency_ms"]["p95"] > 100
        assert f["tooldns"]["baseline"]["mean_retries"] == 0
    single = df[(df.scheme == "agentdns") & df.during_fault & (df.sent_s < 1.9)]
    assert len(single) > 10 and not single.success.any()  # (a SYN sent at 1.99 s finds it up)
    assert set(single.error) <= {"connection refused", "connection closed"}
    assert (single.error == "connection refused").sum() >= len(single) - 2
    clear = df[(df.scheme == "agentdns") & ((df.sent_s < 0.3) | (df.sent_s > 2.0))]
    assert clear.success.all()  # (a request in flight when the registry crashes is lost)
    pair = df[(df.scheme == "agentdns-2") & df.during_fault]
    assert pair.success.mean() > 0.9
    assert f["agentdns-2"]["load_by_replica"]["registry_127.0.80.2"] > 0
    assert [r["restart_s"] for r in f["agentdns"]["recovery"]] == [2.0]


def test_outage_on_simpy_is_deterministic(tmp_path: Path) -> None:
    a = run_scenario(outage(**{"outputs.plots": True}), out_dir=tmp_path / "a")
    _check_outage(a)
    assert (tmp_path / "a" / "success_over_time.png").stat().st_size > 0
    run_scenario(outage(), out_dir=tmp_path / "b")
    assert (tmp_path / "a" / "results.csv").read_bytes() == \
        (tmp_path / "b" / "results.csv").read_bytes()
    assert deterministic_summary(tmp_path / "a") == deterministic_summary(tmp_path / "b")


@pytest.mark.live
def test_outage_on_live_sockets(tmp_path: Path) -> None:
    _check_outage(run_scenario(outage(**{"faults.baseline": False}), engine="live",
                               out_dir=tmp_path, live_port=15461))


def test_fault_selector_naming_nothing_fails_before_running(tmp_path: Path) -> None:
    sc = outage(**{"faults.events": [{"kind": "down", "target": "zone:nowhere.tools."}]})
    with pytest.raises(ScenarioError, match=r"faults\.events\.0: 'zone:nowhere.tools.' names"):
        run_scenario(sc, out_dir=tmp_path)
    assert not (tmp_path / "summary.json").exists()


