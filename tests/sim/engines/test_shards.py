"""One simpy run sharded over Ray workers (sim.engines.shards) against the same run in one
process."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import sim.engines.shards as shards
from nodes.agent.stub import StubResult
from sim.build.runplan import RunPlan
from sim.cli.main import main
from sim.cli.run import with_shards
from sim.engines.base import EngineOutput
from sim.engines.simpy import run_simpy
from sim.errors import ScenarioError
from sim.loading import load_scenario, resolved_yaml
from sim.provenance import deterministic_summary
from sim.run.records import SESSION_COLUMNS, stub_walks
from sim.run.runner import RunResult, run_scenario
from sim.scenario import Scenario
from tests.sim.engines.cases import SAME, first_plan, small

# six resolvers with one agent each (closed loop: a resolver's queries come in one order
# whatever the link delays), one replica per zone (so every query meets the same server)
CASE = {"network.resolvers": 6, "network.agents": 6, "namespace.replicas": 1,
        "workload.queries": 48}
EXACT = (*SAME, "servers_contacted", "cache_hits", "cache_detail", "hit_at_1", "hit_at_k",
         "success", "timeouts")
LOAD = ("rx_packets", "rx_bytes", "tx_packets", "tx_bytes", "semantic", "referral",
        "standard", "nxdomain", "nodata", "formerr")


def sharded(workers: int, **overrides: object) -> Scenario:
    return small(**CASE, **{"engine_options.shards.workers": workers}, **overrides)


@pytest.fixture(scope="module")
def one_process(tmp_path_factory: pytest.TempPathFactory) -> tuple[pd.DataFrame, pd.DataFrame]:
    result = run_scenario(small(**CASE), out_dir=tmp_path_factory.mktemp("one"))
    return result.records, result.load


@pytest.fixture
def pieces(monkeypatch: pytest.MonkeyPatch) -> list[list[tuple[int, int]]]:
    """(shard, discoveries) of every piece the driver merges, one list per merge (scheme)."""
    seen: list[list[tuple[int, int]]] = []
    init, add = shards.ShardMerge.__init__, shards.ShardMerge.add

    def spy_init(self: shards.ShardMerge, plan: RunPlan, workers: int) -> None:
        seen.append([])
        init(self, plan, workers)

    def spy_add(self: shards.ShardMerge, piece: shards.ShardOutput) -> None:
        seen[-1].append((piece.shard, len(piece.output.stubs)))
        add(self, piece)

    monkeypatch.setattr(shards.ShardMerge, "__init__", spy_init)
    monkeypatch.setattr(shards.ShardMerge, "add", spy_add)
    return seen


@pytest.mark.ray
@pytest.mark.parametrize("workers", [3, 2])
def test_sharded_run_agrees_with_one_process(
        ray_session: Any, one_process: tuple[pd.DataFrame, pd.DataFrame],
        pieces: list, workers: int, tmp_path: Path) -> None:
    sc = sharded(workers)
    result = run_scenario(sc, out_dir=tmp_path)
    # the run really was split: every scheme merged one non-empty piece per shard
    assert len(pieces) == len(sc.schemes)
    for scheme in pieces:
        assert sorted(s for s, _ in scheme) == list(range(workers))
        assert all(n > 0 for _, n in scheme) and sum(n for _, n in scheme) == 48
    one, one_load = one_process
    key = ["scheme", "job"]
    a = one.sort_values(key).reset_index(drop=True)
    b = result.records.sort_values(key).reset_index(drop=True)
    assert len(a) == len(b) == 48 * len(sc.schemes) and a.success.all()
    for column in EXACT:
        assert a[column].tolist() == b[column].tolist(), column
    for scheme in a.scheme.unique():
        m1 = a[a.scheme == scheme].latency_ms.median()
        m2 = b[b.scheme == scheme].latency_ms.median()
        assert abs(m2 - m1) / m1 < 0.10, (scheme, m1, m2)
    assert result.summary["schemes"].keys() == {s.name for s in sc.schemes}
    for scheme, s in result.summary["schemes"].items():
        assert s["any_cache_hit"] == pytest.approx(
            (a[a.scheme == scheme].cache_hits > 0).mean())
    # per node: servers' summed counters (packet-cache hits are per shard), resolvers, agents
    la = one_load.sort_values(["scheme", "node"]).reset_index(drop=True)
    lb = result.load.sort_values(["scheme", "node"]).reset_index(drop=True)
    assert la.node.tolist() == lb.node.tolist()
    assert la.rx_packets.sum() > 0 and (la.role == "server").sum() > 10
    for column in LOAD:
        assert la[column].fillna(-1).tolist() == lb[column].fillna(-1).tolist(), column
    written = pd.read_csv(tmp_path / "nodes.csv")
    assert written.rx_bytes.sum() == la.rx_bytes.sum()


@pytest.mark.ray
def test_sharded_runs_are_deterministic(ray_session: Any, tmp_path: Path) -> None:
    """Same scenario, seed and shards: identical files (fixed processing, random delays),
    whether sharded by the file or by ``tooldns run --shards``."""
    sc = sharded(2, **{"network.processing.model": "fixed",
                       "network.link.delay.dist": "normal", "network.link.delay.std": 0.004})
    run_scenario(sc, out_dir=tmp_path / "a")
    path = tmp_path / "s.yaml"
    path.write_text(resolved_yaml(sc.with_overrides({"engine_options.shards.workers": 1})),
                    encoding="utf-8")
    assert main(["run", str(path), "--shards", "2", "--out", str(tmp_path / "b")]) == 0
    for name in ("results.csv", "nodes.csv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert deterministic_summary(tmp_path / "a") == deterministic_summary(tmp_path / "b")
    # per-shard link-delay streams: latencies differ from the one-process run packet by
    # packet, the exchanges do not
    one = run_scenario(sc.with_overrides({"engine_options.shards.workers": 1}),
                       write=False).records.sort_values(["scheme", "job"])
    two = pd.read_csv(tmp_path / "a" / "results.csv").sort_values(["scheme", "job"])
    assert one.round_trips.tolist() == two.round_trips.tolist()
    assert one.latency_ms.round(3).tolist() != two.latency_ms.round(3).tolist()


# DNS over TLS to the servers: one agent per resolver, A and AAAA (pipelined queries: the
# servers' pure ACKs), few connections per resolver (LRU closes) and a short idle timeout
# (idle closes, handshakes again), so every rule of the per-connection accounting is met
DOT: dict[str, Any] = {"network.resolvers": 2, "network.agents": 2, "namespace.replicas": 1,
       "namespace.aaaa": True, "workload.queries": 24, "network.processing.model": "fixed",
       "schemes": [{"name": "tls", "k": 3, "upstream": "tls", "upstream_connections": 3},
                   {"name": "tls-idle", "k": 3, "cache": False, "upstream": "tls",
                    "upstream_idle": 0.2}]}
# agent sessions: a small pool of intents (hits), few tools bound (LRU), a short TTL, a
# guard that trips and the wider fallback; a scheme without sessions beside
SESSION: dict[str, Any] = {"network.resolvers": 2, "network.agents": 2, "namespace.replicas": 1,
           "workload.queries": 40, "workload.pool": 6, "network.processing.model": "fixed",
           "schemes": [{"name": "plain", "k": 3}, {"name": "session", "k": 3}],
           "agents.session": {"schemes": ["session"], "capacity": 4, "ttl": 1.0,
                              "min_tools": 3, "fallback": "wider", "wider_k": 6,
                              "guard_window": 4, "guard_max_repeats": 2}}


def _sharded_and_one(overrides: dict, workers: int = 2) -> tuple[RunResult, RunResult]:
    """(one-process run, the run over ``workers`` Ray shards) of ``small(**overrides)``."""
    sc = small(**overrides)
    one = run_scenario(sc, write=False)
    two = run_scenario(sc.with_overrides({"engine_options.shards.workers": workers}),
                       write=False)
    return one, two


def _same_records(one: pd.DataFrame, two: pd.DataFrame, columns: tuple[str, ...]) -> None:
    key = ["scheme", "job"]
    a = one.sort_values(key).reset_index(drop=True)
    b = two.sort_values(key).reset_index(drop=True)
    assert len(a) == len(b) and a.success.all()
    for column in columns:
        assert a[column].tolist() == b[column].tolist(), column


@pytest.mark.ray
def test_sharded_dns_over_tls_agrees_with_one_process(
        ray_session: Any, pieces: list) -> None:
    """Every shard numbers its connections from 1: merged as they come, two shards'
    connections would be one to the records' per-connection ACK accounting."""
    one, two = _sharded_and_one(DOT)
    assert [sorted(s for s, _ in scheme) for scheme in pieces] == [[0, 1], [0, 1]]
    _same_records(one.records, two.records, (*SAME, "servers_contacted", "cache_hits"))
    for scheme in ("tls", "tls-idle"):
        r1, r2 = one.summary["replay"][scheme], two.summary["replay"][scheme]
        assert (r1["dot_opened"], r1["dot_closed"]) == (r2["dot_opened"], r2["dot_closed"])
        assert r1["dot_opened"] == r1["dot_closed"] > 12  # closes by LRU or idleness
    assert one.summary["schemes"] == two.summary["schemes"]


@pytest.mark.ray
@pytest.mark.parametrize("by", ["resolver", "agent"])
def test_sharded_sessions_agree_with_one_process(
        ray_session: Any, pieces: list, by: str) -> None:
    """The session agents' per-job state comes back with each shard's piece: the session
    columns and the summary's session block are the one-process run's (by agent: one
    resolver, its caches off, so the walks are those of one process)."""
    overrides: dict = {**SESSION, "engine_options.shards.shard_by": by}
    if by == "agent":
        overrides.update({"network.resolvers": 1,
                          "schemes": [{**s, "cache": False} for s in SESSION["schemes"]]})
    one, two = _sharded_and_one(overrides)
    assert [sorted(s for s, _ in scheme) for scheme in pieces] == [[0, 1], [0, 1]]
    _same_records(one.records, two.records, (*SAME, *SESSION_COLUMNS))
    block = one.summary["session"]["schemes"]["session"]
    assert block["hits"] > 0 and block["evictions_lru"] > 0 and block["guard_trips"] > 0
    assert two.summary["session"] == one.summary["session"]


def test_only_simpy_shards_and_each_shard_needs_a_resolver() -> None:
    with pytest.raises(ScenarioError, match=r"engine_options\.shards\.workers: .*simpy"):
        run_scenario(sharded(2), engine="live", write=False)
    with pytest.raises(ScenarioError, match=r"engine_options\.shards\.workers: .*resolvers"):
        run_scenario(sharded(7), write=False)
    with pytest.raises(ScenarioError, match=r"engine_options\.shards\.workers: .*agents"
                                            r".*shard_by: agent"):
        run_scenario(sharded(7, **{"engine_options.shards.shard_by": "agent"}), write=False)
    args = argparse.Namespace(file="f.yaml", shards=3, ray_address="ray://head:10001",
                              engine=None)
    sc = with_shards(small(**CASE), args)
    assert sc.engine_options.shards.workers == 3
    assert sc.engine_options.shards.address == "ray://head:10001"
    # --engine is folded into the scenario where the command reads it (scenario_from_args)
    with pytest.raises(ScenarioError, match=r"f\.yaml: engine_options\.shards\.workers"):
        with_shards(small(**CASE).with_overrides({"engine": "ray"}),
                    argparse.Namespace(**{**vars(args), "engine": "ray"}))


def test_partition_keeps_agents_with_their_resolver() -> None:
    sc = small(**{"network.resolvers": 5, "network.agents": 13})
    whole = first_plan(sc)
    for workers in (2, 3, 5):
        parts = [shards.restrict(first_plan(sc), s, workers) for s in range(workers)]
        assert sorted(ip for p in parts for ip in p.resolvers) == sorted(whole.resolvers)
        assert sorted(ip for p in parts for ip in p.agents) == sorted(whole.agents)
        assert sorted(j.index for p in parts for j in p.jobs) == [j.index for j in whole.jobs]
        for p in parts:
            assert p.resolvers and p.agents and p.shard is not None
            assert all(a.resolver[0] in p.resolvers for a in p.agents.values())  # type: ignore[union-attr]
            assert p.hierarchy.servers.keys() == whole.hierarchy.servers.keys()


def test_partition_by_agent_copies_the_resolver() -> None:
    """One resolver, agents split: every shard has its own copy of it."""
    sc = small(**{"network.resolvers": 1, "network.agents": 7})
    whole = first_plan(sc)
    parts = [shards.restrict(first_plan(sc), s, 3, "agent") for s in range(3)]
    assert [len(p.agents) for p in parts] == [3, 2, 2]
    assert sorted(ip for p in parts for ip in p.agents) == sorted(whole.agents)
    assert sorted(j.index for p in parts for j in p.jobs) == [j.index for j in whole.jobs]
    for p in parts:
        assert list(p.resolvers) == list(whole.resolvers)
        assert {j.agent % 3 for j in p.jobs} == {p.shard}


def _digest(out: EngineOutput) -> list:
    """What a merged output holds, in its order (stubs, walks, warm-ups, counters)."""
    return [[(j.index, s.sent, s.finished) for j, s in out.stubs],
            [(k, [w.started for w in ws]) for k, ws in out.walks.items()],
            [w.started for w in out.warmups], sorted(out.load.items()),
            out.schedule_error, out.lost, out.warm_time, out.end_time]


def test_merge_is_independent_of_arrival_order() -> None:
    """Pieces fed as they come, in any order: the same output, in shard order, every time;
    and (caches off) the same walks as the one-process run."""
    overrides = {"network.resolvers": 1, "network.agents": 6, "namespace.replicas": 1,
                 "workload.queries": 30, "engine_options.shards.workers": 3,
                 "engine_options.shards.shard_by": "agent", "network.processing.model": "fixed",
                 **{f"schemes.{i}.cache": False for i in range(4)}}
    sc = small(**overrides)
    plan = first_plan(sc)
    state = shards.ShardState(shards.unpack(shards.pack(shards.shared_build(sc, plan))))
    times = shards.plan_times(plan)
    packed = [shards.pack(state.run(plan.scheme, i, 3, times)) for i in range(3)]
    digests = []
    for order in ((0, 1, 2), (2, 1, 0), (1, 2, 0)):
        merge = shards.ShardMerge(3)
        for i in order:
            merge.add(shards.unpack(packed[i]))
        digests.append(_digest(merge.result()))
    assert digests[0] == digests[1] == digests[2]
    shard_of = [j.agent % 3 for j, _ in merge.out.stubs]
    assert shard_of == sorted(shard_of) and set(shard_of) == {0, 1, 2}
    with pytest.raises(RuntimeError, match="1 of 3 pieces"):
        partial = shards.ShardMerge(3)
        partial.add(shards.unpack(packed[0]))
        partial.add(shards.unpack(packed[2]))
        partial.result()
    one = _walk_steps(run_simpy(first_plan(sc)), plan)
    assert len(one) == 30 and all(len(steps) >= 3 for steps in one.values())
    assert _walk_steps(merge.out, plan) == one


def _walk_steps(out: EngineOutput, plan: RunPlan) -> dict[int, list[tuple]]:
    """Per job, the upstream exchanges of its walks (name, server, bytes out and in)."""
    return {j.index: [(s.qname, s.server, s.bytes_out, s.bytes_in)
                      for w in stub_walks(out, plan.agent_order[j.agent], stub)
                      for s in w.steps]
            for j, stub in out.stubs if isinstance(stub, StubResult)}


@pytest.mark.parametrize("text, problem", [
    ("engine_options: {shards: {workers: 0}}", "engine_options.shards.workers"),
    ("engine_options: {shards: {workers: two}}", "engine_options.shards.workers"),
    ("engine_options: {shards: {nodes: 2}}", "engine_options.shards.nodes: unknown field"),
    ("engine_options: {shards: {address: [1]}}", "engine_options.shards.address"),
    ("engine_options: {shards: {shard_by: zone}}", "engine_options.shards.shard_by"),
])
def test_scenario_rejects_bad_shards(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(f"name: s\n{text}\n", encoding="utf-8")
    with pytest.raises(ScenarioError, match=problem.replace(".", r"\.")):
        load_scenario(path)


def test_scenario_accepts_shards(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("name: s\nengine_options: {shards: {workers: 4, address: 'ray://h:10001'}}\n",
                    encoding="utf-8")
    spec = load_scenario(path).engine_options.shards
    assert (spec.workers, spec.address, spec.shard_by) == (4, "ray://h:10001", "resolver")
    assert Scenario(name="s").engine_options.shards.workers == 1  # off by default
