"""The recipes of docs/extending.md, each exercised by adding a toy one.

A toy engine registered in the catalogue runs a tiny scenario; a toy merge policy registered
in the merge table is named by a scenario and orders a resolver walk's results; a toy metric
appears in a summary, counted by the streaming tally; a toy scenario field validates; a toy
registry kind registered in the registry table validates in a scenario, is built by the
run's build code and answers real HTTP/1.1 through the registry server; a toy DNS client
strategy registered in the strategy table runs a scenario on simpy and live.
"""

from __future__ import annotations

import heapq
import itertools
import json
import os
from collections.abc import Callable, Hashable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd
import pytest
from pydantic import Field, ValidationError

from analysis.metrics import METRICS, SUMMARY, Fold, Metric, summarise_group
from nodes.agent.stub import StubAgent, StubResult
from nodes.registry.http import App, Request, Response, json_response
from nodes.resolver import merge
from nodes.resolver.config import ResolverConfig
from nodes.resolver.types import Discovery
from nodes.scoring import make_scorer
from sim.build.registries import RegistryInputs, build_registry
from sim.build.runplan import AGENT_PORT, RunPlan, StubSink
from sim.build.workload import Job
from sim.catalog import engines as catalog
from sim.catalog.engines import ENGINES
from sim.catalog.registries import REGISTRIES, RegistryEntry
from sim.catalog.strategies import STRATEGIES, DnsStrategy, Mode
from sim.engines.base import EngineOutput
from sim.errors import ScenarioError
from sim.loading import load_scenario
from sim.run.runner import run_scenario
from sim.run.summary import Tally
from sim.scenario import AgentSpec, Scenario
from sim.schemes import DnsScheme, RegistryScheme, resolver_config
from tests.factories import tiny_namespace, wired
from topologies.namespace import Namespace
from topologies.synthetic import synthetic

ROOT = Path(__file__).resolve().parents[1]
DELAY = 0.005  # the toy engine's one-way delay, every message
T = TypeVar("T")


def run_toy(plan: RunPlan, sink: StubSink | None = None) -> EngineOutput:
    """A new engine: every message takes DELAY seconds, nodes never queue, no loss."""
    out = EngineOutput(on_stub=sink)
    run = plan.instantiate()  # the plan's nodes, fresh for this run
    resolvers, agents, servers = run.resolvers, run.agents, run.servers
    nodes: dict[str, Any] = {**resolvers, **agents}
    port_of = {ip: AGENT_PORT for ip in agents} | {ip: plan.dns_port for ip in resolvers}
    events: list[tuple[float, int, str, Any]] = []
    seq = itertools.count()

    def pump(ip: str, now: float) -> None:
        for msg in nodes[ip].to_send():
            heapq.heappush(events, (now + DELAY, next(seq), "msg", (ip, msg)))
        if ip in resolvers:
            out.add_walks(resolvers[ip].pop_results())
        else:
            for stub in agents[ip].pop_done():
                assert isinstance(stub.tag, Job)
                out.add_stub(stub.tag, stub)
        when = nodes[ip].next_timer()
        if when is not None:
            heapq.heappush(events, (max(when, now), next(seq), "timer", ip))

    def deliver(now: float, src_ip: str, msg: Any) -> None:
        dst_ip, _port = msg.dst
        src = (src_ip, port_of[src_ip])
        server = servers.get(dst_ip)
        if server is not None:
            reply = server.handle(msg.data, src, now, msg.transport)
            if reply is not None:
                heapq.heappush(events, (now + DELAY, next(seq), "reply",
                                        (msg.dst, src_ip, reply, msg.transport)))
        elif dst_ip in nodes:
            nodes[dst_ip].receive(msg.data, src, now, msg.transport)
            pump(dst_ip, now)

    for ip, resolver in resolvers.items():
        for service in plan.warm_services:
            resolver.warm(service, 0.0)
        pump(ip, 0.0)
    for job in plan.jobs:
        heapq.heappush(events, (job.at or 0.0, next(seq), "ask", job))  # open loop only
    now = 0.0
    while events:
        now, _, kind, item = heapq.heappop(events)
        if kind == "ask":
            ip = plan.agent_order[item.agent]
            agents[ip].ask(item, plan.requests[item.index], now)
            pump(ip, now)
        elif kind == "msg":
            deliver(now, *item)
        elif kind == "reply":
            server_addr, dst_ip, data, transport = item
            nodes[dst_ip].receive(data, server_addr, now, transport)
            pump(dst_ip, now)
        else:
            when = nodes[item].next_timer()
            if when is not None and when <= now:
                nodes[item].on_timer(now)
                pump(item, now)
    out.end_time = now
    out.observe(run)  # what the nodes counted: servers, registry, faults, sessions
    return out


def _tiny() -> Scenario:
    sc = load_scenario(ROOT / "scenarios" / "quickstart.yaml")
    return sc.model_copy(update={
        "schemes": tuple(s for s in sc.schemes if s.name == "tooldns"),
        "workload": sc.workload.model_copy(update={"queries": 20, "phases": 1}),
        "outputs": sc.outputs.model_copy(update={"plots": False}),
    })


def test_toy_engine_in_the_catalogue_runs_a_scenario(monkeypatch: pytest.MonkeyPatch) -> None:
    # the simpy entry's capabilities, minus what the toy cannot do
    cannot = catalog.Support("no", "the toy engine cannot")
    lacks: tuple[catalog.Feature, ...] = ("faults", "dot", "sessions", "churn", "shards")
    features = {**ENGINES["simpy"].features, **dict.fromkeys(lacks, cannot)}
    info = replace(ENGINES["simpy"], name="toy", entry=f"{__name__}:run_toy",
                   summary="fixed delay, in memory", features=features, progress=False)
    monkeypatch.setitem(ENGINES, "toy", info)
    assert catalog.engine_info("toy").load() is run_toy
    assert Scenario.model_validate({"name": "x", "engine": "toy"}).engine == "toy"
    result = run_scenario(_tiny(), engine="toy", write=False)
    tooldns = result.summary["schemes"]["tooldns"]
    assert tooldns["queries"] == 20 and tooldns["success"] == 1.0
    assert set(result.records.engine) == {"toy"}
    # every round trip costs exactly 2 × DELAY: latencies are whole multiples of it
    rt = result.records.round_trips + 1  # the agent ↔ resolver exchange
    assert (result.records.latency_ms - rt * 2 * DELAY * 1000).abs().max() < 1.0


def toy_reverse_merge(lists: Sequence[Sequence[T]], scores: Sequence[Sequence[float]] | None,
                      k: int, key: Callable[[T], Hashable] | None = None) -> list[T]:
    """A toy merge policy: round-robin from the last leaf reached to the first."""
    return merge.round_robin(lists[::-1], k, key)


def _walk(ns: Namespace, policy: str) -> list[list[str]]:
    """Each query's targets found by a beam-3 walk merging with ``policy``."""
    _, net = wired(ns, config=ResolverConfig(beam=3, merge=policy))
    found = []
    for q in ns.queries:
        net.resolver.discover(Discovery(q.text, service=q.service, k=2), net.now)
        (result,) = net.run()
        found.append([e.target for e in result.endpoints])
    return found


def test_toy_merge_policy_named_in_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[list[Hashable]]] = []  # the leaves' targets, each walk the toy merged

    def spy(lists: Sequence[Sequence[T]], scores: Sequence[Sequence[float]] | None, k: int,
            key: Callable[[T], Hashable] | None = None) -> list[T]:
        assert scores is None and key is not None  # split search; endpoints keyed by target
        calls.append([[key(e) for e in lst] for lst in lists])
        return toy_reverse_merge(lists, scores, k, key)

    monkeypatch.setitem(merge.MERGES, "toy", merge.MergePolicy(spy))
    scheme = Scenario.model_validate({"name": "x", "schemes": [
        {"name": "t", "merge": "toy"}]}).schemes[0]
    assert isinstance(scheme, DnsScheme)  # scenario files may name it, and it reaches the walk
    assert resolver_config(scheme, None, "", 53).merge_policy.merge is spy
    with pytest.raises(ValueError, match="unknown policy 'toyy'"):
        ResolverConfig(merge="toyy")
    ns = tiny_namespace()
    toy, default = _walk(ns, "toy"), _walk(ns, "auto")
    # the toy's order reaches the results: the last leaf's tools first
    assert toy == [merge.round_robin(lists[::-1], 2) for lists in calls]
    assert default == [merge.round_robin(lists, 2) for lists in calls]
    assert toy != default


def test_toy_metric_appears_in_a_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    """One definition (its fold) serves a frame of records and the run's streaming tally:
    the toy metric added to the table and to SUMMARY shows in a run's summary, counted as
    the records are made, equal to its value over the records."""
    toy = Metric("max_round_trips", "max RTTs", "round trips", "{:.0f}",
                 "most sequential round trips of any query",
                 fold=Fold("max", lambda r: r["round_trips"]))
    monkeypatch.setitem(METRICS, toy.key, toy)
    records = pd.DataFrame({"round_trips": [1, 3, 2], "success": [True, True, False],
                            "hit_at_1": [1, 0, 0], "hit_at_k": [1, 1, 0],
                            "latency_ms": [10.0, 30.0, 20.0]})
    keys = ("queries", "success", toy.key)
    assert set(SUMMARY) >= {"queries", "success"}
    summary = summarise_group(records, keys=keys)
    assert summary["max_round_trips"] == 3 and summary["queries"] == 3
    # in a run: the streaming tally counts it (no records read back: the tally is exact)
    from sim.run import runner
    from sim.run import summary as run_summary

    monkeypatch.setattr(run_summary, "SUMMARY", (*SUMMARY, toy.key))
    given: list[object] = []  # what the summary was made from

    def summarise(sc: Scenario, engine: str, df: object, ns: Namespace) -> dict:
        given.append(df)
        return run_summary.summarise(sc, engine, df, ns)  # type: ignore[arg-type]

    monkeypatch.setattr(runner, "summarise", summarise)
    result = run_scenario(_tiny(), write=False)
    assert [type(g) for g in given] == [Tally]  # the tally, not the records read back
    got = result.summary["schemes"]["tooldns"]["max_round_trips"]
    assert got == int(result.records.round_trips.max()) > 0


class ToyAgents(AgentSpec):
    think_budget: float = Field(default=1.0, gt=0,
                                description="seconds an agent may think (toy)")


class ToyScenario(Scenario):
    agents: ToyAgents = ToyAgents()


def test_toy_scenario_field_validates() -> None:
    base = {"name": "toy"}
    assert ToyScenario.model_validate(base).agents.think_budget == 1.0
    assert ToyScenario.model_validate({**base, "agents": {"think_budget": 2.5}}
                                      ).agents.think_budget == 2.5
    with pytest.raises(ValidationError, match="think_budget"):
        ToyScenario.model_validate({**base, "agents": {"think_budget": 0}})
    with pytest.raises(ValidationError, match="think_budgt"):  # unknown keys are errors
        ToyScenario.model_validate({**base, "agents": {"think_budgt": 2}})
    schema = json.dumps(ToyScenario.model_json_schema())
    assert "seconds an agent may think (toy)" in schema


def toy_registry(req: Request, now: float) -> Response:
    """A toy registry application: one search route, every tool whose name holds the query."""
    tools = ["weather-now", "weather-history", "stock-quote"]
    if req.method == "POST" and req.target == "/search":
        query = str(req.json()["query"])  # type: ignore[index]
        return json_response(200, {"tools": [t for t in tools if query in t]}, "toy")
    return json_response(404, {"error": "no such route"}, "toy")


def toy_builder(given: RegistryInputs) -> tuple[App, str]:
    """The toy kind's entry in the registry table: its application, no token."""
    return toy_registry, ""


def test_toy_registry_through_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(REGISTRIES, "toy", RegistryEntry(
        "toy", "a toy registry", "this test", f"{__name__}:toy_builder"))
    scheme = Scenario.model_validate({"name": "x", "schemes": [{"name": "t", "kind": "toy"}]})
    assert isinstance(scheme.schemes[0], RegistryScheme)  # scenario files may name it
    ns = synthetic(n_tools=20, branching=2, depth=1, seed=1)
    setup = build_registry("toy", ns, make_scorer("bm25"), seed=1)
    server = setup.server
    assert server.app is toy_registry and server.name == "toy" and setup.token == ""
    body = json.dumps({"query": "weather"}).encode()
    request = (b"POST /search HTTP/1.1\r\nHost: registry.test\r\n"
               b"Content-Type: application/json\r\nContent-Length: "
               + str(len(body)).encode() + b"\r\n\r\n" + body)
    reply, closed = server.receive("conn-1", request, 0.0)
    assert reply.startswith(b"HTTP/1.1 200") and not closed
    assert json.loads(reply.split(b"\r\n\r\n", 1)[1]) == {"tools": ["weather-now",
                                                               "weather-history"]}
    reply, _ = server.receive("conn-2", b"GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n", 0.0)
    assert reply.startswith(b"HTTP/1.1 404")
    assert server.stats["connections"] == 2


class OverfetchAgent(StubAgent):
    """A toy client strategy's agent: asks its resolver for twice the K it wants (the
    intent option's K) and keeps the best K of the answer."""

    def ask(self, tag: object, request: Discovery, now: float) -> StubResult:
        return super().ask(tag, replace(request, k=2 * request.k), now)

    def pop_done(self) -> list[StubResult]:
        done = super().pop_done()
        for result in done:
            result.endpoints = result.endpoints[:result.request.k // 2]
        return done


OVERFETCH = DnsStrategy(
    "overfetch", "a toy: ask for 2K, keep K", "tests/test_extending.py",
    modes={"aware": Mode("aware", agent=f"{__name__}:OverfetchAgent")})


@pytest.mark.parametrize("engine", ["simpy", pytest.param("live", marks=pytest.mark.live)])
def test_toy_dns_strategy_in_the_catalogue(monkeypatch: pytest.MonkeyPatch, engine: str
                                           ) -> None:
    """A new DNS client strategy is one catalogue entry (and its agent): scenario files name
    it by ``kind``, its modes are checked, the plan builds its agents, every engine runs
    it, and the records show what it does (2K tools on the wire, K returned)."""
    monkeypatch.setitem(STRATEGIES, OVERFETCH.kind, OVERFETCH)
    base = _tiny()
    sc = base.model_copy(update={"schemes": (
        DnsScheme(name="plain", k=2), DnsScheme(name="toy", kind="overfetch", k=2))})
    assert sc.schemes[1].kind == "overfetch" and sc.schemes[1].mode == "aware"
    with pytest.raises(ValidationError, match="overfetch runs in 'aware', not 'qname'"):
        DnsScheme(name="t", kind="overfetch", mode="qname")
    df = run_scenario(sc, engine=engine, write=False, live_port=next(_TOY_PORTS)).records
    plain, toy = (df[df.scheme == n].set_index("job") for n in ("plain", "toy"))
    assert set(df.engine) == {engine} and plain.success.all() and toy.success.all()
    assert (toy.returned.str.split().str.len() <= 2).all()
    # the toy asks for four tools: its answers are longer than the plain scheme's
    assert (toy.bytes_down > plain.bytes_down).mean() > 0.8
    # and its best two are the plain walk's two (the same ranking, cut later)
    assert (toy.returned == plain.returned).mean() > 0.5
    # a strategy that does not run on an engine is refused before anything is built
    monkeypatch.setitem(STRATEGIES, OVERFETCH.kind, replace(OVERFETCH, engines=("toy",)))
    with pytest.raises(ScenarioError, match=r"schemes\.toy\.kind: the overfetch strategy "
                                            r"runs on toy, not on simpy"):
        run_scenario(sc, engine="simpy", write=False)


_TOY_PORTS = itertools.count(23000 + (os.getpid() % 200) * 8, 4)
