"""A sharded simpy run (sim.engines.shards) on a 3-node Ray cluster started on this machine
(``ray.cluster_utils.Cluster``: a head and two more nodes, one CPU each): the shards land
on three different nodes and the walks match the one-process run."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from typing import Any

import pytest

import sim.engines.shards as shards
from sim.engines.base import EngineOutput
from sim.run.runner import run_scenario
from sim.scenario import Scenario
from tests.sim.engines.cases import SAME, small

STORE = 80 * 1024 * 1024  # bytes of object store per node (Ray's floor is 75 MiB)
EXACT = (*SAME, "servers_contacted", "cache_hits", "hit_at_1", "hit_at_k", "success")
LOAD = ("rx_packets", "rx_bytes", "tx_packets", "tx_bytes", "semantic", "referral",
        "standard", "nxdomain", "nodata")
#: (partition, overrides): one resolver shared by agents split over the shards (resolver
#: caches off, so each shard's copy of it walks as the one would), and three resolvers
#: split with their agents (caches on: the resolvers see the queries they see in one
#: process); no warming, one replica per zone, fixed processing times
CASES = {
    "agent": {"network.resolvers": 1, "network.agents": 6,
              **{f"schemes.{i}.cache": False for i in range(2)}},
    "resolver": {"network.resolvers": 3, "network.agents": 6},
}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """Ray connected to a head and two worker nodes on this machine; shut down after."""
    if os.environ.get("CI"):  # CI installs Ray (.ci/setup): a missing Ray is a failure there
        import ray
    else:
        ray = pytest.importorskip("ray", reason="Ray is not installed (bash .ci/setup)")
    from ray.cluster_utils import Cluster

    if ray.is_initialized():  # another module's local instance
        ray.shutdown()
    nodes = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "object_store_memory": STORE, "include_dashboard": False})
    try:
        for _ in range(2):
            nodes.add_node(num_cpus=1, object_store_memory=STORE)
        nodes.wait_for_nodes()
        ray.init(address=nodes.address, log_to_driver=False, logging_level=logging.WARNING)
        yield ray
    finally:
        ray.shutdown()
        nodes.shutdown()


def case(by: str, workers: int) -> Scenario:
    sc = small(**CASES[by], **{"namespace.replicas": 1, "workload.queries": 48,
                               "network.processing.model": "fixed",
                               "engine_options.shards.workers": workers,
                               "engine_options.shards.shard_by": by})
    return sc.model_copy(update={"schemes": sc.schemes[:2]})  # tooldns, beam2 (no warming)


@pytest.mark.ray
@pytest.mark.parametrize("by", ["agent", "resolver"])
def test_shards_run_on_three_nodes_and_match_one_process(
        cluster: Any, monkeypatch: pytest.MonkeyPatch, by: str) -> None:
    merged: list[dict[int, str]] = []  # per scheme: shard -> the Ray node it ran on
    result_of = shards.ShardMerge.result

    def spy(self: shards.ShardMerge) -> EngineOutput:
        merged.append(dict(self.nodes))
        return result_of(self)

    monkeypatch.setattr(shards.ShardMerge, "result", spy)
    sc = case(by, 3)
    many = run_scenario(sc, write=False)
    assert [len(m) for m in merged] == [3, 3]
    alive = {n["NodeID"] for n in cluster.nodes() if n["Alive"]}
    assert len(alive) == 3
    for nodes in merged:
        assert set(nodes.values()) == alive  # each shard on its own node

    one = run_scenario(case(by, 1), write=False)
    key = ["scheme", "job"]
    a = one.records.sort_values(key).reset_index(drop=True)
    b = many.records.sort_values(key).reset_index(drop=True)
    assert len(a) == len(b) == 96 and a.success.all()
    for column in EXACT:
        assert a[column].tolist() == b[column].tolist(), column
    if by == "resolver":  # caches on: the hits a resolver has in one process
        assert a.cache_hits.sum() > 0
    la = one.load.sort_values(["scheme", "node"]).reset_index(drop=True)
    lb = many.load.sort_values(["scheme", "node"]).reset_index(drop=True)
    assert la.node.tolist() == lb.node.tolist() and la.rx_packets.sum() > 0
    for column in LOAD:
        assert la[column].fillna(-1).tolist() == lb[column].fillna(-1).tolist(), column

