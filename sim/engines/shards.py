"""One simpy run sharded over Ray workers (``engine_options.shards``, ``tooldns run --shards``).

Partition (``engine_options.shards.shard_by``):

* ``resolver`` (default) — resolver ``r`` goes to shard ``r % workers`` and every agent
  with its resolver, so resolver caches see exactly the queries they see in one process;
  needs ``workers <= network.resolvers``.
* ``agent`` — agent ``i`` goes to shard ``i % workers`` and each shard has its own copy of
  the resolvers its agents use: **the approximation** is that each copy has its own caches
  (answers, referrals, negative), SRTT estimates and warming, so cache hits, and what
  follows from them, differ from one process (a resolver shared by agents of ``n``
  shards also warms ``n`` times); with resolver caches off the walks are those of one
  process. Works with one resolver; needs ``workers <= network.agents``. Measured on one
  resolver, 64 agents, 2 shards, caches on (``bench_shards.py``, ``agent``): cache hits
  17,120 → 14,281, median latency +23 %, the same tools returned for every query.

Jobs follow their agent. Authoritative servers (and the registry of a registry scheme) are
replicated in every shard.

Shipping. The driver builds namespace, jobs and servers once (it needs them for the
records anyway); :func:`shared_build` pickles them with the scenario, once per scenario,
and the bytes go once into Ray's object store (``ray.put``); every actor
(:mod:`sim.engines.shardpool`) loads them from there (on another machine, Ray copies the
object once per node) and keeps them for the next scheme and run of the same scenario. So
workers need neither the input files nor a rebuild, and build only their shard's plan per
scheme (:func:`sim.build.plan.make_plan` over the shipped servers, then :func:`restrict`).
The servers are built lazily per zone (score indexes on first query), so each shard builds
only the leaf indexes its own queries reach. Dense servers are not shared between schemes
(:attr:`Hierarchy.shareable`), so with ``namespace.scorer: dense`` each worker builds them
per scheme, as the driver does. At 20,000 tools rebuilding namespace, jobs and servers
took 0.40 s per worker; pickling them once in the driver 0.28 s (10 MB) and loading them
0.21 s per worker (``benchmarks/bench_shards.py``, ``ship``): cheaper per worker, and
dearer only in the driver's serial part.

Each shard runs :func:`run_simpy` with its own link-delay stream (``RunPlan.shard``); its
output comes back as compact pickled bytes (:func:`pack`). The merge streams
(:class:`ShardMerge`): the driver waits for whichever shard finishes (``ray.wait``), loads
its bytes at once, and folds it into one :class:`EngineOutput` with the fold every partial
output goes through (:meth:`EngineOutput.absorb`, as a socket engine's processes do) as
soon as every lower-numbered shard has been fed, so the output's order is shard order
whatever the arrival order; each piece is released once fed. Each shard runs instances of
its plan's nodes, so its output carries its servers' counters from zero: the fold sums
them, and records, ``nodes.csv`` and the summary come out of the runner unchanged.

Exact per query as long as link delays do not change the walk (they do with loss or
timeouts; with replicas, the SRTT choice among them; with several agents on a resolver,
the order their queries meet its cache in) and, with ``shard_by: agent``, resolver caches
are off: the walk, i.e. round trips, exchanges, servers contacted, bytes and packets,
resolver cache hits, tools examined and returned tools; per node: resolvers' and agents'
counters, servers' summed rx/tx and query counters. Approximated: link-delay draws
(another random stream per shard: the same distribution, not the same packet by packet),
server queueing (a shard's servers see only its queries), server packet-cache hits (per
shard), warming (each shard starts its workload when its own resolvers are warm) and
whatever follows from these (latency; with loss or timeouts, retries and the walks they
change).

DNS over TLS to the servers (``schemes[].upstream: tls``). A resolver's connection table
(:class:`sim.sockets.dotpool.DotPool`) lives with the resolver in its shard; the exchanges
carry their connection number and whether they opened it (``Step.conn``, ``opened``) and
the resolvers' ``dot_opened``/``dot_closed`` counters are load counters, so the packed
piece loses nothing. What broke was the numbering: each shard's engine numbers connections
from 1, and the records' per-connection ACK accounting (:func:`sim.accounting.dot_acks` in
the recorder's :class:`~sim.accounting.DotModel`) groups the merged exchanges by number,
so two shards' connections were one and their pure ACKs wrong. Each shard renumbers its
connections into its own residue class (:func:`renumber_connections`). With ``shard_by:
resolver``, connections opened and closed, handshakes, and per exchange the bytes and
packets with their ACKs are the one-process run's as long as the exchanges' times are
(the ACK rules compare gaps with the 40 ms delayed-ACK timer, idleness with
``upstream_idle``): on constant link delays they are, but for server queueing (a shard's
servers see only its queries: microseconds, which move a decision only at its
threshold); with random delays they follow the shard's delay draws, like latency. With
``shard_by: agent`` every copy of a resolver has its own connection table (like its
caches): each copy opens its own connections (``dot_opened``/``dot_closed`` are summed
over the copies, more than one process opens) and the exchanges that open them pay
handshakes one process would not: approximated, even with caches off.

Agent sessions (``agents.session``). Each agent, its session and its jobs are in one shard
(both partitions); its per-job state (``SessionAgent.info``: hits, evictions, guard trips,
fallbacks, tools in context) comes back in the piece's output (``sessions``) and is folded
in before the piece's discoveries, so the records' session columns and the summary's
session block come out of the runner unchanged. A
session sees only its own agent's discoveries: exact whenever their answers are (as
above; ``shard_by: agent`` with resolver caches off), except that TTL and guard-period
evictions follow the shard's clock (the one-process times on constant delays, but for
server queueing). The registry fallback runs in process, per call, its cost modelled.
"""

from __future__ import annotations

import dataclasses
import io
import pickle
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from nodes.agent.session import JobInfo
from nodes.resolver.types import DiscoveryResult
from sim.build.hierarchy import Hierarchy
from sim.build.runplan import RunPlan, StubSink
from sim.build.workload import Job
from sim.catalog.engines import engine_info, engines_with
from sim.engines.base import EngineOutput
from sim.errors import ScenarioError
from sim.scenario import Scenario
from topologies.gcpause import gc_paused
from topologies.namespace import Namespace


@dataclass
class ShardOutput:
    """What one shard sends back: its engine output (with what its nodes counted) and where
    and how long it ran."""

    shard: int
    output: EngineOutput
    cpu_s: float = 0.0  # the shard's CPU and wall time in run_simpy (not in any result file)
    wall_s: float = 0.0
    node: str = ""  # the Ray node it ran on ("" in the driver's process)


@dataclass
class SharedBuild:
    """What every shard needs of the driver's build: shipped once per scenario."""

    scenario: dict  # the scenario as JSON data
    ns: Namespace
    jobs: Sequence[Job]
    hierarchy: Hierarchy | None  # the schemes' shared servers; None: built per scheme (dense)


#: The node kinds whose processing time (``RunPlan.<kind>_time``) the driver hands its shards.
KINDS = ("server", "server_semantic", "resolver", "resolver_stub", "agent", "registry")


def plan_times(plan: RunPlan) -> dict[str, float]:
    """The processing times of the driver's plan by node kind (those it has), for the
    shards' own plans of the scheme (:class:`sim.build.plan.PlanOptions` ``calibrated``)."""
    return {kind: value for kind in KINDS
            if (value := getattr(plan, f"{kind}_time")) is not None
            and not (kind == "registry" and plan.registry_cost is not None)}  # ``index``


def shared_build(sc: Scenario, plan: RunPlan) -> SharedBuild:
    """The driver's scenario, namespace, jobs and (shareable) servers, as built for ``plan``
    (a plan's servers are never run: runs use instances of them)."""
    hierarchy = plan.hierarchy
    return SharedBuild(sc.model_dump(mode="json"), hierarchy.namespace, plan.jobs,
                       hierarchy if hierarchy.shareable else None)


# ------------------------------------------------------------------------ partition


def resolver_index(plan: RunPlan, i: int) -> int:
    """The index of agent ``i``'s resolver. Registry agents have none; they follow the
    network's rule (agent ``i`` uses resolver ``i % R``)."""
    resolver = getattr(plan.agents[plan.agent_order[i]], "resolver", None)
    order = list(plan.resolvers)
    if isinstance(resolver, tuple) and resolver[0] in plan.resolvers:
        return order.index(resolver[0])
    return i % len(order)


def agent_shards(plan: RunPlan, workers: int, by: str = "resolver") -> list[int]:
    """The shard of every agent (by index): its resolver's shard, or (``by="agent"``)
    ``i % workers``."""
    if by == "agent":
        return [i % workers for i in range(len(plan.agent_order))]
    return [resolver_index(plan, i) % workers for i in range(len(plan.agent_order))]


def restrict(plan: RunPlan, shard: int, workers: int, by: str = "resolver") -> RunPlan:
    """``plan`` with only ``shard``'s resolvers, agents and jobs (a new plan); servers stay."""
    mine = [i for i, s in enumerate(agent_shards(plan, workers, by)) if s == shard]
    agents = {plan.agent_order[i] for i in mine}
    if by == "agent":  # the resolvers these agents use (a copy of each per shard)
        used = {resolver_index(plan, i) for i in mine}
    else:
        used = set(range(shard, len(plan.resolvers), workers))
    return plan.with_shard(
        shard, {ip: r for i, (ip, r) in enumerate(plan.resolvers.items()) if i in used},
        {ip: a for ip, a in plan.agents.items() if ip in agents},
        [j for j in plan.jobs if plan.agent_order[j.agent] in agents])


def check_shardable(sc: Scenario, engine: str, resolvers: int) -> None:
    """ScenarioError unless this run can be sharded (simpy; a resolver, or with
    ``shard_by: agent`` an agent, per shard)."""
    spec = sc.engine_options.shards
    workers = spec.workers
    if not engine_info(engine).shards:
        able = " or ".join(engines_with("shards"))
        raise ScenarioError(f"engine_options.shards.workers: {workers} shards run the {able} "
                            f"engine only, not {engine!r} (use engine {able} or workers: 1)")
    if spec.shard_by == "agent" and workers > sc.network.agents:
        raise ScenarioError(f"engine_options.shards.workers: {workers} shards need at least "
                            f"as many agents (network.agents is {sc.network.agents}) with "
                            f"engine_options.shards.shard_by: agent")
    if spec.shard_by == "resolver" and workers > resolvers:
        raise ScenarioError(f"engine_options.shards.workers: {workers} shards need at least "
                            f"as many resolvers (network.resolvers is {resolvers}): shards "
                            f"split the resolvers and every agent follows its resolver "
                            f"(engine_options.shards.shard_by: agent splits the agents, "
                            f"with per-shard resolver caches)")


# ------------------------------------------------------------------------ a shard


class ShardState:
    """A shard's copy of the run: the driver's namespace, jobs and servers, kept for every
    scheme of the scenario."""

    def __init__(self, shared: SharedBuild) -> None:
        self.sc = Scenario.model_validate(shared.scenario)
        self.ns = shared.ns
        self.jobs = shared.jobs
        self.hierarchy = shared.hierarchy

    def plan(self, scheme: str, calibrated: dict[str, float], dns_port: int) -> RunPlan:
        """The driver's plan of ``scheme``, whole (as :func:`sim.build.plan.make_plan`
        builds it over the shipped servers, with the processing times the driver measured
        for it)."""
        from sim.build.plan import PlanOptions, make_plan

        spec = next(s for s in self.sc.schemes if s.name == scheme)
        plan, _ = make_plan(self.sc, spec, self.ns, self.jobs, dns_port=dns_port,
                            hierarchy=self.hierarchy,
                            options=PlanOptions(calibrated=calibrated))
        return plan

    def run(self, scheme: str, shard: int, workers: int, calibrated: dict[str, float],
            dns_port: int = 53) -> ShardOutput:
        from sim.engines.simpy import run_simpy

        by = self.sc.engine_options.shards.shard_by
        plan = restrict(self.plan(scheme, calibrated, dns_port), shard, workers, by)
        cpu, wall = time.process_time(), time.perf_counter()
        output = run_simpy(plan)
        result = ShardOutput(shard, output, cpu_s=time.process_time() - cpu,
                             wall_s=time.perf_counter() - wall)
        if plan.dot is not None:  # DNS over TLS: connection numbers unique over the shards
            renumber_connections(output, shard, workers)
        return result


def renumber_connections(output: EngineOutput, shard: int, workers: int) -> None:
    """Make a shard's DNS-over-TLS connection numbers unique over the run (in place).

    Every shard's engine numbers its resolvers' connections from 1, and the records'
    accounting (:func:`sim.accounting.dot_acks`, the recorder's
    :class:`~sim.accounting.DotModel`) groups the merged output's exchanges by that number:
    two shards' connections under one number would be one connection to it, and their
    pure ACKs (the gap to the next exchange on the connection, pipelined queries) wrong.
    Connection ``n`` of shard ``s`` of ``w`` becomes ``(n - 1) * w + s + 1``."""
    seen: set[int] = set()
    walks: list[DiscoveryResult] = [*output.warmups]
    for ws in output.walks.values():
        walks.extend(ws)
    for walk in walks:
        for step in walk.steps:
            if step.conn and id(step) not in seen:
                seen.add(id(step))
                step.conn = (step.conn - 1) * workers + shard + 1


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
        from topologies.namespace import Query

        self.fields: dict[type, tuple[str, ...]] = {}
        for cls in (Step, Endpoint, Discovery, DiscoveryResult, StubResult, HttpStep,
                    RegistryResult, Job, Query, JobInfo):
            fields = dataclasses.fields(cls)
            assert all(f.init for f in fields), cls  # rebuilt by calling the class
            self.fields[cls] = tuple(f.name for f in fields)

    def reducer_override(self, obj: object) -> Any:
        names = self.fields.get(type(obj))
        if names is None or len(getattr(obj, "__dict__", names)) != len(names):
            return NotImplemented  # not ours, or an attribute beyond the fields: as usual
        return type(obj), tuple(getattr(obj, n) for n in names)


def pack(obj: ShardOutput | SharedBuild) -> bytes:
    """A shard's output (or the driver's shared build) as bytes (:func:`unpack` reads them)."""
    buf = io.BytesIO()
    with gc_paused():
        _Pickler(buf).dump(obj)
    return buf.getvalue()


def unpack(data: bytes) -> Any:
    with gc_paused():  # many new objects, no cycles: a collection would only walk the heap
        return pickle.loads(data)


# ------------------------------------------------------------------------ merging


class ShardMerge:
    """One :class:`EngineOutput` fed from the shards' pieces as they arrive.

    A piece is folded in (:meth:`EngineOutput.absorb`) once every lower-numbered shard has
    been, so the output's lists are in shard order whatever the arrival order, and then
    dropped."""

    def __init__(self, workers: int, on_stub: StubSink | None = None) -> None:
        self.workers = workers
        self.out = EngineOutput(on_stub=on_stub)
        self.waiting: dict[int, ShardOutput] = {}
        self.fed = 0  # shards 0 .. fed-1 are in the output
        self.nodes: dict[int, str] = {}  # shard -> Ray node it ran on

    def add(self, piece: ShardOutput) -> None:
        if not 0 <= piece.shard < self.workers or piece.shard in self.waiting \
                or piece.shard < self.fed:
            raise RuntimeError(f"shards: unexpected piece of shard {piece.shard}")
        self.waiting[piece.shard] = piece
        with gc_paused():
            while self.fed in self.waiting:
                fed = self.waiting.pop(self.fed)
                self.nodes[fed.shard] = fed.node
                self.out.absorb(fed.output)
                self.fed += 1

    def result(self) -> EngineOutput:
        """The merged output, once every shard's piece is in."""
        if self.fed != self.workers:
            raise RuntimeError(f"shards: {self.fed} of {self.workers} pieces merged")
        return self.out


def merge_shards(pieces: list[ShardOutput], on_stub: StubSink | None = None) -> EngineOutput:
    """One output from all the shards' pieces (in any order): :class:`ShardMerge`."""
    merge = ShardMerge(len(pieces), on_stub)
    for piece in pieces:
        merge.add(piece)
    return merge.result()
