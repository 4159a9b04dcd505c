"""The Ray engine: nodes in actors (many zones per actor) agree with the simulation."""

from __future__ import annotations

import os
import pickle
from collections import Counter
from pathlib import Path

import pytest

from sim.engines.nodehost import split_plan
from sim.engines.ray import group_nodes
from sim.run.runner import run_scenario
from sim.scenario import RaySpec
from tests.sim.engines.cases import SAME, assert_agrees, first_plan, small, two_schemes


def _port() -> int:
    return 30000 + os.getpid() % 20000


@pytest.mark.parametrize("placement", ["level", "org", "count"])
def test_groups_pack_many_zones_per_actor(placement: str) -> None:
    sc = small()
    plan = first_plan(sc, dns_port=15353)
    spec = RaySpec(placement=placement, zones_per_actor=4)  # type: ignore[arg-type]
    groups = group_nodes(plan, spec)
    nodes = [ip for _, ips in groups for ip in ips]
    everything = [*plan.hierarchy.servers, *plan.resolvers, *plan.agents]
    assert sorted(nodes) == sorted(everything) and len(nodes) == len(set(nodes))
    server_groups = [ips for name, ips in groups if name not in ("resolvers",)
                     and not name.startswith("agents-")]
    zones = [{plan.hierarchy.zone_of[ip] for ip in ips} for ips in server_groups]
    assert len(server_groups) < len(plan.hierarchy.servers) / 2  # many zones per actor
    if placement == "count":
        assert all(len(z) <= 4 for z in zones)
    if placement == "level":
        roles = {m["address"]: m["role"] for m in plan.hierarchy.manifest}
        assert all(len({roles[ip] for ip in ips}) == 1 for ips in server_groups)
        assert len(server_groups) == len(set(roles.values()))
    if placement == "org":
        orgs = {m["address"]: m["org"] for m in plan.hierarchy.manifest}
        assert all(len({orgs[ip] for ip in ips}) == 1 for ips in server_groups)
    parts = split_plan(plan, groups)
    assert sum(len(p.jobs) for p in parts) == len(plan.jobs)


def test_parts_survive_pickling_with_identical_replies() -> None:
    """Nodes travel to actors by pickle; a shipped server answers byte for byte the same."""
    plan = first_plan(small(), dns_port=15353)
    resolver = next(iter(plan.resolvers.values()))
    resolver.discover(plan.requests[0], 0.0)
    query = resolver.to_send()[0]
    server = plan.hierarchy.servers[query.dst[0]]
    shipped = pickle.loads(pickle.dumps(server))
    src = ("127.0.53.1", 5353)
    assert shipped.handle(query.data, src, 0.0, "udp") == server.handle(query.data, src, 0.0,
                                                                         "udp")


@pytest.mark.live
@pytest.mark.ray
def test_ray_agrees_with_simpy(ray_session,  # type: ignore[no-untyped-def]
                               tmp_path: Path) -> None:
    sc = two_schemes(small(**{"engine_options.ray.placement": "count",
                              "engine_options.ray.zones_per_actor": 8}))
    sim = run_scenario(sc, engine="simpy", out_dir=tmp_path / "sim").records
    ray = run_scenario(sc, engine="ray", out_dir=tmp_path / "ray", live_port=_port())
    assert (ray.out_dir / "summary.json").exists()
    assert set(ray.records.engine) == {"ray"}
    assert_agrees(sim, ray.records, lambda: run_scenario(
        sc, engine="ray", write=False, live_port=_port()).records)
    # per-node load comes back from the actors: every server that answered is counted
    load = ray.load
    servers = load[load.role == "server"]
    assert servers.semantic.sum() > 0 and (servers.tx_packets > 0).any()


@pytest.mark.live
@pytest.mark.ray
def test_ray_placements_exchange_the_same_bytes(ray_session,  # type: ignore[no-untyped-def]
                                                tmp_path: Path) -> None:
    """Placement moves zones between processes; what is exchanged never changes. Open-loop
    arrivals from three agents spread over two actors; without caches every walk stands
    alone, so overlapping walks cannot change each other's records."""
    base = small(**{"schemes": [{"name": "nocache", "k": 3, "cache": False}],
                    "workload.queries": 12, "network.agents": 3,
                    "workload.arrival": {"process": "poisson", "rate": 10.0},
                    "network.processing.model": "fixed", "engine_options.ray.agent_actors": 2})
    sim = run_scenario(base, engine="simpy", write=False).records.sort_values("job")
    actors = Counter()
    for placement in ("level", "org"):
        sc = base.with_overrides({"engine_options.ray.placement": placement})
        plan = first_plan(sc, dns_port=15353)
        actors[placement] = len(group_nodes(plan, sc.engine_options.ray))
        rec = run_scenario(sc, engine="ray", write=False, live_port=_port()).records
        rec = rec.sort_values("job")
        for column in SAME:
            assert sim[column].tolist() == rec[column].tolist(), (placement, column)
    assert actors["level"] == 7 and actors["org"] >= 5  # 4 levels or 2+ orgs, resolver, 2 agent
