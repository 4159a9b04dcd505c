"""One simpy run sharded over Ray workers (``engine_options.shards``, ``tooldns run --shards``).

The scenario's resolvers are split across ``workers`` shards (resolver ``r`` goes to shard
``r % workers``) and every agent goes with its resolver, so resolver caches see exactly
the queries they see in one process; jobs follow their agent. Authoritative servers (and
the registry of a registry scheme) are replicated in every shard. Each shard is a Ray
actor (:func:`_actor_class`, ``num_cpus=1``) that builds namespace, jobs and servers
itself from the scenario (everything is deterministic from scenario and seed; only the
scenario travels, as a dict), then, per scheme, builds the same plan as the driver
(:func:`sim.build.plan.make_plan`, with the driver's calibrated processing times), keeps its
shard's resolvers, agents and jobs (:func:`restrict`), and runs :func:`run_simpy` with its
own link-delay stream (``RunPlan.shard``). Its output comes back as compact pickled bytes
(:func:`pack`); the driver loads each piece as it arrives, merges them
(:func:`merge_shards`) into one :class:`EngineOutput` and adds the servers' counters up,
so records, ``nodes.csv`` and the summary come out of the runner unchanged. Actors and
their built run are kept for the next scheme and run of the same scenario; ``tooldns run``
starts them (:func:`start`) before the driver builds its own copy, so the builds overlap.

Exact per query as long as link delays do not change the walk (they do with loss or
timeouts; with replicas, the SRTT choice among them; with several agents on a resolver,
the order their queries meet its cache in): the walk, i.e. round trips, exchanges,
servers contacted, bytes and packets, resolver cache hits, tools examined and returned
tools; per node: resolvers' and agents' counters, servers' summed rx/tx and query
counters. Approximated: link-delay draws (another random stream
per shard: the same distribution, not the same packet by packet), server queueing (a
shard's servers see only its queries), server packet-cache hits (per shard), warming
(each shard starts its workload when its own resolvers are warm) and whatever follows
from these (latency; with loss or timeouts, retries and the walks they change).
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import pickle
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from nodes.registry.base import Routes
from sim.build.registries import RegistrySetup
from sim.build.runplan import RunPlan
from sim.engines.base import EngineOutput
from sim.engines.catalog import engine_info, engines_with
from sim.engines.nodehost import HostOutput, merge_outputs
from sim.errors import ScenarioError
from sim.scenario import Scenario
from topologies.gcpause import gc_paused

#: Processing times the driver sets on its plan (calibrated or fixed); shards use the same.
TIMES = ("server_time", "server_semantic_time", "resolver_time", "resolver_stub_time",
         "agent_time")


@dataclass
class ShardOutput:
    """What one shard sends back: its engine output and what its nodes counted during the
    run (server and registry counters as increments; fault bookkeeping)."""

    shard: int
    output: EngineOutput
    server_stats: dict[str, Counter[str]] = field(default_factory=dict)
    registry_stats: tuple[Counter[str], Counter[str]] | None = None  # server, application
    fault_origin: float | None = None
    fault_drops: Counter[str] = field(default_factory=Counter)
    fault_first_rx: dict[tuple[int, str], float] = field(default_factory=dict)
    cpu_s: float = 0.0  # the shard's CPU and wall time in run_simpy (not in any result file)
    wall_s: float = 0.0


# ------------------------------------------------------------------------ partition


def agent_shards(plan: RunPlan, workers: int) -> list[int]:
    """The shard of every agent (by index): its resolver's shard. Registry agents have no
    resolver; they follow the network's rule (agent ``i`` uses resolver ``i % R``)."""
    shard_of = {ip: i % workers for i, ip in enumerate(plan.resolvers)}
    out = []
    for i, ip in enumerate(plan.agent_order):
        resolver = getattr(plan.agents[ip], "resolver", None)
        if isinstance(resolver, tuple) and resolver[0] in shard_of:
            out.append(shard_of[resolver[0]])
        else:
            out.append(i % len(plan.resolvers) % workers)
    return out


def restrict(plan: RunPlan, shard: int, workers: int) -> RunPlan:
    """Keep ``shard``'s resolvers, agents and jobs in ``plan`` (in place); servers stay."""
    mine = agent_shards(plan, workers)
    agents = {ip for ip, s in zip(plan.agent_order, mine, strict=True) if s == shard}
    plan.resolvers = {ip: r for i, (ip, r) in enumerate(plan.resolvers.items())
                      if i % workers == shard}
    plan.agents = {ip: a for ip, a in plan.agents.items() if ip in agents}
    plan.jobs = [j for j in plan.jobs if plan.agent_order[j.agent] in agents]
    plan.requests = {j.index: plan.requests[j.index] for j in plan.jobs}
    plan.shard = shard
    return plan


def check_shardable(sc: Scenario, engine: str, resolvers: int) -> None:
    """ScenarioError unless this run can be sharded (simpy; a resolver per shard)."""
    workers = sc.engine_options.shards.workers
    if not engine_info(engine).shards:
        able = " or ".join(engines_with("shards"))
        raise ScenarioError(f"engine_options.shards.workers: {workers} shards run the {able} "
                            f"engine only, not {engine!r} (use engine {able} or workers: 1)")
    if workers > resolvers:
        raise ScenarioError(f"engine_options.shards.workers: {workers} shards need at least "
                            f"as many resolvers (network.resolvers is {resolvers}): shards "
                            f"split the resolvers and every agent follows its resolver")


def fingerprint(jobs: list, ns: Any) -> str:
    """What driver and shards must agree on: the jobs and the namespace (zones, tools)."""
    h = hashlib.sha256()
    for job in jobs:
        h.update(f"{job.index},{job.agent},{job.query.id},{job.at};".encode())
    h.update(",".join(ns.zones).encode())
    h.update(",".join(ns.tools).encode())
    return h.hexdigest()


# ------------------------------------------------------------------------ a shard


class ShardState:
    """A shard's copy of the run: namespace, jobs and servers, built once per scenario."""

    def __init__(self, scenario: dict) -> None:
        from sim.build.namespace import build_namespace
        from sim.build.plan import scenario_hierarchy
        from sim.build.workload import build_jobs

        self.sc = Scenario.model_validate(scenario)
        self.ns = build_namespace(self.sc)
        self.jobs = build_jobs(self.sc, self.ns, self.sc.network.agents)
        # shared by the schemes when possible (dense servers are built per scheme)
        self.shared = None if self.sc.namespace.scorer == "dense" else scenario_hierarchy(
            self.sc, self.ns)

    def plan(self, scheme: str, times: dict[str, float | None], dns_port: int) -> RunPlan:
        """The driver's plan of ``scheme``, whole (as :func:`sim.build.plan.make_plan`
        builds it)."""
        from sim.build.plan import make_plan

        spec = next(s for s in self.sc.schemes if s.name == scheme)
        plan, _ = make_plan(self.sc, spec, self.ns, self.jobs, dns_port=dns_port,
                            hierarchy=self.shared)
        for name, value in times.items():
            setattr(plan, name, value)
        return plan

    def run(self, scheme: str, shard: int, workers: int, times: dict[str, float | None],
            dns_port: int = 53) -> ShardOutput:
        from sim.engines.simpy import run_simpy

        plan = restrict(self.plan(scheme, times, dns_port), shard, workers)
        servers = plan.hierarchy.servers
        before = {ip: Counter(s.stats.counts) for ip, s in servers.items()}
        reg = plan.registry
        reg_before: tuple[Counter[str], Counter[str]] | None = None
        if reg is not None:
            host, app = _registry_counters(reg)
            reg_before = Counter(host), Counter(app)
        cpu, wall = time.process_time(), time.perf_counter()
        output = run_simpy(plan)
        result = ShardOutput(shard, output, cpu_s=time.process_time() - cpu,
                             wall_s=time.perf_counter() - wall)
        for ip, server in servers.items():
            delta = _delta(server.stats.counts, before[ip])
            if any(delta.values()):
                result.server_stats[ip] = delta
        if reg is not None and reg_before is not None:
            host, app = _registry_counters(reg)
            result.registry_stats = (_delta(host, reg_before[0]), _delta(app, reg_before[1]))
        faults = plan.faults
        if faults is not None:
            result.fault_origin = faults.origin
            result.fault_drops = Counter(faults.drops)
            result.fault_first_rx = dict(faults.first_rx)
        return result


def _registry_counters(reg: RegistrySetup) -> tuple[Counter[str], Counter[str]]:
    """The registry host's counters and its application's (request counts)."""
    app = reg.server.app
    assert isinstance(app, Routes)  # the registry schemes' applications count requests
    return reg.server.stats, app.stats


def _delta(now: Counter[str], before: Counter[str]) -> Counter[str]:
    """What was counted since ``before`` (keys kept even at zero: they show in nodes.csv)."""
    return Counter({k: v - before.get(k, 0) for k, v in now.items()})


# ------------------------------------------------------------------------ shipping


class _Pickler(pickle.Pickler):
    """Pickles the dataclasses of an output (results, steps, endpoints, requests, jobs) as
    constructor calls on their fields: several times faster to load than the default
    object-state path, and the driver loads every shard's hundreds of thousands of them."""

    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file, protocol=5)
        from nodes.agent.stub import StubResult
        from nodes.registry.client import HttpStep, RegistryResult
        from nodes.resolver.types import Discovery, DiscoveryResult, Endpoint, Step
        from sim.build.workload import Job
        from topologies.namespace import Query

        self.fields: dict[type, tuple[str, ...]] = {}
        for cls in (Step, Endpoint, Discovery, DiscoveryResult, StubResult, HttpStep,
                    RegistryResult, Job, Query):
            fields = dataclasses.fields(cls)
            assert all(f.init for f in fields), cls  # rebuilt by calling the class
            self.fields[cls] = tuple(f.name for f in fields)

    def reducer_override(self, obj: object) -> Any:
        names = self.fields.get(type(obj))
        if names is None or len(getattr(obj, "__dict__", names)) != len(names):
            return NotImplemented  # not ours, or an attribute beyond the fields: as usual
        return type(obj), tuple(getattr(obj, n) for n in names)


def pack(result: ShardOutput) -> bytes:
    """A shard's output as bytes for the driver (:func:`unpack` reads them)."""
    buf = io.BytesIO()
    with gc_paused():
        _Pickler(buf).dump(result)
    return buf.getvalue()


def unpack(data: bytes) -> ShardOutput:
    with gc_paused():  # many new objects, no cycles: a collection would only walk the heap
        return pickle.loads(data)


# ------------------------------------------------------------------------ merging


def merge_shards(plan: RunPlan, pieces: list[ShardOutput]) -> EngineOutput:
    """One output from the shards' pieces (stubs, walks, load summed per address, lost
    summed, schedule errors concatenated, warm/end time the latest); the servers',
    registry's and fault plan's counters are added into the driver's ``plan``."""
    pieces = sorted(pieces, key=lambda p: p.shard)
    out = merge_outputs(plan, [HostOutput(p.output) for p in pieces])
    servers = plan.hierarchy.servers
    for piece in pieces:
        for ip, delta in piece.server_stats.items():
            servers[ip].stats.counts.update(delta)
        if piece.registry_stats is not None and plan.registry is not None:
            host, app = _registry_counters(plan.registry)
            host.update(piece.registry_stats[0])
            app.update(piece.registry_stats[1])
    faults = plan.faults
    if faults is not None:
        origins = [p.fault_origin for p in pieces if p.fault_origin is not None]
        if origins:
            faults.origin = max(origins)
        for piece in pieces:
            faults.drops.update(piece.fault_drops)
            for key, t in piece.fault_first_rx.items():
                first = faults.first_rx
                first[key] = min(t, first.get(key, t))
    return out


def run_local(sc: Scenario, plan: RunPlan) -> EngineOutput:
    """The sharded run in this process, one shard after another (no Ray): the same records
    as :func:`run_sharded` (for tests and to measure what sharding changes)."""
    workers = sc.engine_options.shards.workers
    check_shardable(sc, "simpy", len(plan.resolvers))
    state = ShardState(sc.model_dump(mode="json"))
    times = {name: getattr(plan, name) for name in TIMES}
    return merge_shards(plan, [state.run(plan.scheme, i, workers, times, plan.dns_port)
                               for i in range(workers)])


# ------------------------------------------------------------------------ Ray


_CLASS: Any = None
_POOL: dict[str, tuple[float, list[Any]]] = {}  # Ray session -> (CPUs per actor, actors)


def _actor_class(ray: Any) -> Any:
    global _CLASS
    if _CLASS is None:
        @ray.remote
        class ShardWorker:
            """Holds one scenario's :class:`ShardState` (kept for the next scheme or run)."""

            def __init__(self) -> None:
                self.key = ""
                self.state: ShardState | None = None

            def prepare(self, scenario: dict, key: str) -> str:
                if key != self.key or self.state is None:
                    self.state, self.key = None, ""  # free the last scenario first
                    self.state, self.key = ShardState(scenario), key
                return fingerprint(self.state.jobs, self.state.ns)

            def run(self, scheme: str, shard: int, workers: int,
                    times: dict[str, float | None], dns_port: int) -> bytes:
                assert self.state is not None
                return pack(self.state.run(scheme, shard, workers, times, dns_port))

        _CLASS = ShardWorker
    return _CLASS


def shard_actors(ray: Any, workers: int) -> list[Any]:
    """``workers`` actors spread over the cluster's machines, one CPU each (a share of the
    CPUs when the cluster has fewer than ``workers``), reused within a Ray session."""
    ctx = ray.get_runtime_context()
    session = f"{ctx.get_node_id()}/{ctx.get_job_id()}"
    cpus = min(1.0, float(ray.cluster_resources().get("CPU", 1.0)) / workers)
    have_cpus, pool = _POOL.get(session, (cpus, []))
    if have_cpus != cpus:  # other sizes hold the CPUs these need: start afresh
        for actor in pool:
            ray.kill(actor)
        pool = []
    cls = _actor_class(ray)
    while len(pool) < workers:
        pool.append(cls.options(num_cpus=cpus, scheduling_strategy="SPREAD").remote())
    _POOL[session] = (cpus, pool)
    return pool[:workers]


def _keyed(sc: Scenario) -> tuple[dict, str]:
    data = sc.model_dump(mode="json")
    return data, hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def start(sc: Scenario) -> None:
    """Start Ray, the shard actors and their build of the run now, without waiting: called
    before the driver builds its own copy (``tooldns run``), the builds overlap."""
    from sim.engines.ray import ensure_ray

    spec = sc.engine_options.shards
    if spec.workers > 1:
        ray = ensure_ray(spec.address)
        data, key = _keyed(sc)
        for actor in shard_actors(ray, spec.workers):
            actor.prepare.remote(data, key)


def prepare(sc: Scenario, plan: RunPlan) -> list[Any]:
    """Start (or reuse) the shard actors and have each build the run from the scenario;
    check they built the same jobs, nodes and servers as the driver's ``plan``."""
    from sim.engines.ray import ensure_ray

    spec = sc.engine_options.shards
    ray = ensure_ray(spec.address)
    actors = shard_actors(ray, spec.workers)
    data, key = _keyed(sc)
    try:
        prints = ray.get([a.prepare.remote(data, key) for a in actors])
    except BaseException:
        _drop(ray)
        raise
    if any(p != fingerprint(plan.jobs, plan.hierarchy.namespace) for p in prints):
        raise RuntimeError("shards: a worker built other jobs or servers than the driver "
                           "(same project version and input files on every machine?)")
    return actors


def run_sharded(sc: Scenario, engine: str, plan: RunPlan) -> EngineOutput:
    """Run ``plan`` (the driver's whole plan of one scheme) as ``shards.workers`` shards on
    Ray actors; the merged output, with server counters added into ``plan``."""
    check_shardable(sc, engine, len(plan.resolvers))
    actors = prepare(sc, plan)
    import ray

    workers = len(actors)
    times = {name: getattr(plan, name) for name in TIMES}
    pending = [a.run.remote(plan.scheme, i, workers, times, plan.dns_port)
               for i, a in enumerate(actors)]
    pieces = []
    try:
        while pending:  # load each piece as it comes, while the other shards still run
            done, pending = ray.wait(pending, num_returns=1)
            pieces.append(unpack(ray.get(done[0])))
    except BaseException:  # an actor in an unknown state is not reused
        _drop(ray)
        raise
    with gc_paused():
        return merge_shards(plan, pieces)


def _drop(ray: Any) -> None:
    ctx = ray.get_runtime_context()
    _, pool = _POOL.pop(f"{ctx.get_node_id()}/{ctx.get_job_id()}", (0.0, []))
    for actor in pool:
        ray.kill(actor)
