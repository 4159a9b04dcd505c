"""A slice of a run plan served in one process: the socket core of the live, Ray and
Mininet engines.

A :class:`HostPart` holds some of a plan's nodes — authoritative servers, resolvers, DNS
agents, or, for an HTTP-registry scheme, registry replicas and HTTP agents — plus what
they need of the run (path model, jobs of its agents, fault plan, churn, DNS over TLS).
:class:`NodeHost` serves them with the socket adapters (:mod:`sim.sockets`) in the running
asyncio loop, in phases the driver calls in order on every host: :meth:`NodeHost.start`
(bind every socket), :meth:`set_origin` (one shared time zero, given as wall-clock
time), :meth:`warm` (K = 0 warming of the host's resolvers), :meth:`replay` (faults and
churn scheduled, the host's agents replay their jobs from a shared wall time on),
:meth:`hang_up` (clients close their connections), :meth:`finish` (collect, close,
return its :class:`sim.engines.base.EngineOutput` piece, with what its nodes counted). A
part holds instances of the plan's nodes (:meth:`RunPlan.instantiate`), never the plan's
own. The live engine serves the whole plan as one part in its own process
(:func:`whole_plan`); Ray and Mininet split it (:func:`split_plan`) and fold the pieces
with :func:`sim.engines.base.merge_outputs`.

Link emulation: each packet is held back for the one-way delay the path model draws, or
dropped. Each sending node draws from its own (seed, node) stream, so a node's draws do not
depend on which process serves it; with no loss configured the draws change only timing,
never what is exchanged. With ``emulate=False`` (kernel netem does the delays, Mininet on a
full kernel) packets are only counted. Fault schedules (:class:`sim.build.faults.FaultPlan`)
act at the sending node's adapter, as on the live engine: a down node neither sends nor
receives, slow and lossy nodes and partitions delay or drop; a down registry replica's
listener closes and its connections reset. Each part has its own state of the schedule
(its loss draws are its own); :func:`sim.engines.base.merge_outputs` folds what each
observed.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from nodes.agent.session import DnsAgent
from nodes.agent.stub import StubResult
from nodes.authoritative.server import AuthoritativeServer
from nodes.registry.base import Catalogue
from nodes.registry.client import RegistryAgent, RegistryResult
from nodes.registry.server import RegistryServer
from nodes.resolver.core import RecursiveResolver
from nodes.resolver.types import Discovery
from nodes.scoring import model_loads
from nodes.searchcost import SearchCost
from sim.accounting import TlsSizes, dot_port, http_segment
from sim.build.faults import registry_address
from sim.build.hierarchy import DotSetup
from sim.build.registries import RegistrySetup, client_context
from sim.build.runplan import RunNodes, RunPlan, StockSetup, StubSink
from sim.build.workload import Job
from sim.engines.base import EngineOutput
from sim.engines.fidelity import HopModel, HopTimes
from sim.engines.stock import StockError, StockResolvers
from sim.sockets.dot import DotUpstream
from sim.sockets.node import NodeEndpoint
from sim.sockets.registry import RegistryReplicas, replica_nodes
from sim.sockets.registryclient import RegistryClients
from sim.sockets.server import ServerEndpoint
from sim.sockets.tcp import raise_fd_limit
from sim.sockets.timing import call_precisely
from sim.sockets.wirelog import WireExchange
from topologies.paths import PathModel

if TYPE_CHECKING:
    from sim.build.churn import ChurnSchedule
    from sim.build.faults import FaultState

DRAIN_TIMEOUT = 30.0  # seconds to wait for stragglers after the last scheduled job
RTO = 0.2  # seconds a lost TCP segment of a registry exchange costs (its retransmission)
DOT_NUMBERS = 1_000_000  # DNS-over-TLS connection numbers per host (unique over a run)


@dataclass
class HostPart:
    """What one process serves: a subset of a plan's nodes, and the jobs of its agents."""

    name: str
    seed: int
    scheme: str
    servers: dict[str, AuthoritativeServer]
    resolvers: dict[str, RecursiveResolver]
    agents: dict[str, DnsAgent]
    agent_order: list[str]
    role_of: dict[str, str]
    path: PathModel
    jobs: Sequence[Job]
    requests: dict[int, Discovery]
    node_index: dict[str, int]  # address -> stream number of its link RNG
    zone_of: dict[str, str] = field(default_factory=dict)  # of this part's servers
    warm_services: tuple[str, ...] = ()
    closed_loop: bool = False
    dns_port: int = 53
    emulate: bool = True
    number: int = 0  # this part's position in the run (DNS-over-TLS connection numbers)
    faults: FaultState | None = None  # this part's own state of the plan's faults
    churn: ChurnSchedule | None = None
    churn_applied: dict[int, float] = field(default_factory=dict)  # change -> node time
    dot: DotSetup | None = None
    # HTTP-registry schemes: the registry's name (address, port) and CA certificate, on
    # every part; its setup (with the index) only where replicas are served
    registry_endpoint: tuple[str, int] | None = None
    registry_ca: str = ""
    registry: RegistrySetup | None = None
    registry_nodes: dict[str, RegistryServer] = field(default_factory=dict)
    registry_agents: dict[str, RegistryAgent] = field(default_factory=dict)
    registry_replicas: int = 1
    registry_time: float = 0.0
    registry_cost: SearchCost | None = None  # processing.registry ``index``
    server_time: float = 50e-6  # the simulation's processing (what a hop's model charges)
    server_semantic_time: float | None = None
    semantic_times: dict[str, float] = field(default_factory=dict)  # ``index``, per server
    search_times: dict[str, float] = field(default_factory=dict)  # ``index``, per service
    tls: TlsSizes | None = None
    dense: bool = False  # the servers embed with the sentence model (model loads reported)
    stock: StockSetup | None = None  # a stock binary at the resolvers' addresses
    stock_addresses: frozenset[str] = frozenset()  # all of them (the parts' peers)

    @property
    def addresses(self) -> list[str]:
        return [*self.servers, *self.resolvers, *self.agents, *self.registry_nodes,
                *self.registry_agents]


def plan_addresses(plan: RunPlan) -> list[str]:
    """Every node a plan's run serves: servers, resolvers and agents of a DNS scheme; the
    agents and registry replicas of an HTTP-registry scheme (its DNS nodes stay idle)."""
    if plan.registry is not None:
        return [*plan.agents, *(registry_address(i) for i in range(plan.registry_replicas))]
    return [*plan.hierarchy.servers, *plan.resolvers, *plan.agents]


def _part(plan: RunPlan, name: str, ips: list[str], node_index: dict[str, int],
          emulate: bool, number: int) -> HostPart:
    chosen = set(ips)
    nodes: RunNodes = plan.instantiate(chosen)
    registry = nodes.registry
    agents: dict[str, DnsAgent] = {}
    http: dict[str, RegistryAgent] = {}
    if registry is None:
        agents = nodes.dns_agents()
    else:
        http = nodes.registry_agents()
    served = set(agents) | set(http)
    replicas = (replica_nodes(registry, plan.registry_replicas, ips, registry_address)
                if registry is not None else {})
    jobs = [j for j in plan.jobs if plan.agent_order[j.agent] in served]
    servers = nodes.servers
    return HostPart(
        name=name, seed=plan.seed, scheme=plan.scheme, servers=servers,
        resolvers=nodes.resolvers, agents=agents, agent_order=list(plan.agent_order),
        role_of=dict(plan.role_of), path=plan.path, jobs=jobs,
        requests={j.index: plan.requests[j.index] for j in jobs}, node_index=node_index,
        zone_of={ip: z for ip, z in plan.hierarchy.zone_of.items() if ip in servers},
        warm_services=plan.warm_services, closed_loop=plan.closed_loop,
        dns_port=plan.dns_port, emulate=emulate, number=number, faults=nodes.faults,
        churn=plan.churn, dot=plan.dot,
        registry_endpoint=(registry.address, registry.port) if registry is not None else None,
        registry_ca=registry.ca.cert_pem if registry is not None else "",
        registry=registry if replicas else None, registry_nodes=replicas,
        registry_agents=http, registry_replicas=plan.registry_replicas,
        registry_time=plan.registry_time, registry_cost=plan.registry_cost,
        server_time=plan.server_time, server_semantic_time=plan.server_semantic_time,
        semantic_times=dict(plan.semantic_times or {}), search_times=search_times(plan),
        tls=plan.tls,
        dense=plan.hierarchy.scorer_name == "dense", stock=plan.stock,
        stock_addresses=frozenset(plan.resolvers) if plan.stock else frozenset())


def search_times(plan: RunPlan) -> dict[str, float]:
    """An AgentDNS search's modelled time per service under processing ``index`` (its
    catalogue's pool for the service ranked); empty otherwise."""
    cost, registry = plan.registry_cost, plan.registry
    catalogue = getattr(registry.server.app, "catalogue", None) if registry else None
    if cost is None or not isinstance(catalogue, Catalogue):
        return {}
    pools = Counter(t.service for t in catalogue.tools)
    return {service: cost.seconds(n) for service, n in sorted(pools.items())}


def split_plan(plan: RunPlan, groups: list[tuple[str, list[str]]],
               emulate: bool = True) -> list[HostPart]:
    """One :class:`HostPart` per (name, addresses) group; every node in exactly one group.
    The parts share the plan's objects until pickled (each process then has its own)."""
    everything = plan_addresses(plan)
    seen = [ip for _, ips in groups for ip in ips]
    if sorted(seen) != sorted(everything):
        raise ValueError("split_plan: groups must cover every node of the plan exactly once")
    node_index = {ip: i for i, ip in enumerate(sorted(everything))}
    return [_part(plan, name, ips, node_index, emulate, i)
            for i, (name, ips) in enumerate(groups)]


def whole_plan(plan: RunPlan) -> HostPart:
    """The whole plan as one part (the live engine: one process)."""
    return split_plan(plan, [("live", plan_addresses(plan))])[0]


def quiet_process() -> None:
    """Keep pauses out of a node process while it replays: the loaded nodes are frozen out
    of the cyclic garbage collector, which stays off until :meth:`NodeHost.finish` (a run
    is short), and the GIL is handed between threads (Ray's own) every 0.5 ms, not 5 ms."""
    gc.collect()
    gc.freeze()
    gc.disable()
    sys.setswitchinterval(0.0005)


class NodeHost:
    """Serves a :class:`HostPart` in the running asyncio loop (see the module docstring).
    ``sink``: the plan's record writer, when the whole run is in this process (live)."""

    def __init__(self, part: HostPart, sink: StubSink | None = None) -> None:
        self.part = part
        self.out = EngineOutput(on_stub=sink, hop_times=HopTimes())
        self.model = HopModel(part.path, part.role_of, part.server_time,
                              part.server_semantic_time, part.registry_time,
                              part.semantic_times, part.search_times)
        self.origin = 0.0
        self.t0 = 0.0  # node time of workload time 0
        self.finished: dict[int, asyncio.Future] = {}
        mine = set(part.addresses)
        self._rngs = {ip: np.random.default_rng([part.seed, 1, i])
                      for ip, i in part.node_index.items() if ip in mine}
        self.servers: list[ServerEndpoint] = []
        self.resolvers: dict[str, NodeEndpoint] = {}
        self.agents: dict[str, NodeEndpoint] = {}
        self.replicas: RegistryReplicas | None = None
        self.clients: RegistryClients | None = None
        self._agent_index = {ip: i for i, ip in enumerate(part.agent_order)}
        self._loads = model_loads()  # the process may be reused (Ray actors)
        self._hung_up = False
        self.stock: StockResolvers | None = None  # the binaries serving the resolvers
        self.wire: list[WireExchange] = []  # what the servers saw of them

    def node_now(self) -> float:
        return asyncio.get_running_loop().time() - self.origin

    def _draw(self, src: str, dst: str, size: int) -> float | None:
        part = self.part
        rng = self._rngs.get(src) or self._rngs.setdefault(
            src, np.random.default_rng([part.seed, 1, part.node_index[src]]))
        return part.path.one_way(part.role_of[src], part.role_of[dst], size, rng)

    def shaper(self, src: str, dst: str, size: int) -> float | None:
        """A datagram's (or DNS-over-TCP/TLS segment's) fate: its delay, None if lost."""
        out, part = self.out, self.part
        out.count(src, "tx_packets")
        out.count(src, "tx_bytes", size)
        delay = self._draw(src, dst, size) if part.emulate else 0.0
        if part.faults is not None:  # a crashed node neither sends nor receives
            delay = part.faults.fate(src, dst, self.node_now(), delay)
        if delay is None:
            out.lost += 1
        else:
            out.count(dst, "rx_packets")
            out.count(dst, "rx_bytes", size)
        return delay

    def segment(self, src: str, dst: str, size: int) -> float:
        """A registry connection's segment: its delay, a lost one costing its retransmission
        timeout (crashed replicas refuse or reset for real, in :class:`RegistryReplicas`)."""
        out, part, faults = self.out, self.part, self.part.faults
        out.count(src, "tx_packets")
        out.count(src, "tx_bytes", size)
        emulate = part.emulate
        total = 0.0
        d = self._draw(src, dst, size) if emulate else 0.0
        if faults is not None:
            d = faults.fate(src, dst, self.node_now(), d, crashes=False)
        while d is None:
            out.lost += 1
            total += RTO
            d = self._draw(src, dst, size) if emulate else 0.0
            if faults is not None and total <= 60.0:
                d = faults.fate(src, dst, self.node_now() + total, d, crashes=False)
        out.count(dst, "rx_packets")
        out.count(dst, "rx_bytes", size)
        return total + d

    @property
    def endpoints(self) -> list[ServerEndpoint | NodeEndpoint]:
        return [*self.servers, *self.resolvers.values(), *self.agents.values()]

    # -- phases --------------------------------------------------------------------

    async def start(self) -> int:
        """Bind every socket of the part; returns the number of nodes served. Servers
        compute every reply (no reply memo): in wall-clock time their work is measured."""
        raise_fd_limit()
        loop = asyncio.get_running_loop()
        part, origin = self.part, loop.time()
        self.origin = origin
        if part.registry_endpoint is not None:
            return await self._start_registry()
        for server in part.servers.values():
            server.reply_memo = None
        stock = part.stock_addresses  # every host: the binaries' addresses
        self.servers = [ServerEndpoint(s, (ip, part.dns_port), self.shaper, origin,
                                       external=stock, on_exchange=self.wire.append)
                        for ip, s in part.servers.items()]
        self.resolvers = {ip: NodeEndpoint(node, (ip, part.dns_port), ip, origin, self.shaper,
                                           on_done=self._walked(ip))
                          for ip, node in part.resolvers.items() if ip not in stock}
        if part.dot is not None:
            self._dot_endpoints(part.dot)
        self.agents = {ip: NodeEndpoint(node, None, ip, origin, self.shaper,
                                        on_done=self._on_stubs, external=stock)
                       for ip, node in part.agents.items()}
        for endpoint in self.endpoints:
            await endpoint.start()
        if part.stock is not None and part.resolvers:  # the servers listen: they may prime
            self.stock = StockResolvers(part.stock, sorted(part.resolvers), part.dns_port)
            try:
                await self.stock.start()
            except StockError:
                for endpoint in self.endpoints:
                    endpoint.close()
                raise
        return len(self.endpoints) + (len(self.stock.addresses) if self.stock else 0)

    def _dot_endpoints(self, dot: DotSetup) -> None:
        """Give every server a DNS-over-TLS listener and every resolver its connections."""
        part, out = self.part, self.out
        server_ctx = dot.server_context() if self.servers else None
        client_ctx = dot.client_context() if self.resolvers else None
        for server in self.servers:
            server.tls, server.tls_port = server_ctx, dot_port(part.dns_port)
        # connection numbers, unique over the run's resolvers (one block per part)
        numbers = itertools.count(part.number * DOT_NUMBERS + 1)
        for ip, endpoint in self.resolvers.items():
            def count(key: str, ip: str = ip, endpoint: NodeEndpoint = endpoint) -> None:
                endpoint.count(key)
                out.count(ip, key)  # dot_opened / dot_closed: the run's replay summary

            def deliver(d: bytes, s: tuple[str, int], endpoint: NodeEndpoint = endpoint) -> None:
                endpoint._receive(d, s, "tls")

            assert client_ctx is not None
            endpoint.dot = DotUpstream(
                ip, client_ctx, deliver, count, endpoint.shaper, dot.idle,
                dot.max_connections, numbers, dot.sizes, out.flows)

    async def _start_registry(self) -> int:
        part = self.part
        endpoint = part.registry_endpoint
        assert endpoint is not None
        tls = part.tls is not None
        if part.registry is not None:  # replicas served here
            self.replicas = RegistryReplicas(
                part.registry, part.registry_nodes, tls, self.node_now,
                lambda host, peer, n: self.segment(host, peer, http_segment(part.tls, n)),
                search=part.registry_cost or part.registry_time)
            await self.replicas.start()
        if part.registry_agents:
            self.clients = RegistryClients(
                part.registry_agents, endpoint, part.registry_replicas, self._agent_index,
                part.tls, client_context(part.registry_ca) if tls else None, self.segment,
                self.node_now, lambda: self.origin, self._on_result, self.out.flows)
        return len(part.registry_nodes) + len(part.registry_agents)

    def _loop_time_of(self, wall: float) -> float:
        """The running loop's clock reading at wall-clock time ``wall``."""
        return asyncio.get_running_loop().time() + (wall - time.time())

    async def set_origin(self, wall: float) -> None:
        """Node time zero is wall-clock time ``wall`` on every host (one machine: exact)."""
        self.origin = self._loop_time_of(wall)
        for endpoint in self.endpoints:
            endpoint.origin = self.origin

    async def warm(self) -> float:
        """K = 0 warming of this host's resolvers; returns the node time when done."""
        if self.part.warm_services and self.resolvers:
            await asyncio.gather(*(ep.warm(service) for ep in self.resolvers.values()
                                   for service in self.part.warm_services))
            self.out.warm_time = asyncio.get_running_loop().time() - self.origin
        return self.out.warm_time

    def _walked(self, resolver: str) -> Callable[[list], None]:
        """Resolver ``resolver``'s finished walks: their hops timed, then to the output."""
        hops, out = self.out.hop_times, self.out

        def walked(results: list) -> None:
            if hops is not None:
                self.model.walks(resolver, results, hops)
            out.add_walks(results)

        return walked

    def _done(self, job: Job, result: StubResult | RegistryResult) -> None:
        self.out.add_stub(job, result)
        fut = self.finished.get(job.index)
        if fut is not None and not fut.done():
            fut.set_result(None)

    def _on_stubs(self, done: list[StubResult]) -> None:
        for stub in done:
            job = stub.tag
            assert isinstance(job, Job)  # the tag replay() asked with
            self._done(job, stub)

    def _on_result(self, result: RegistryResult) -> None:
        job = result.tag
        assert isinstance(job, Job)  # the tag replay() asked with
        part, hops = self.part, self.out.hop_times
        if hops is not None and part.registry_endpoint is not None:
            self.model.calls(part.agent_order[job.agent], part.registry_endpoint[0], result,
                             hops)
        self._done(job, result)

    def _ask(self, job: Job) -> None:
        part = self.part
        ip = part.agent_order[job.agent]
        now = self.node_now()
        if job.at is not None:
            self.out.schedule_error.append(now - (self.t0 + job.at))
        if self.clients is not None:
            part.registry_agents[ip].ask(job, part.requests[job.index], now)
            self.clients.pump(ip)
        else:
            part.agents[ip].ask(job, part.requests[job.index], now)
            self.agents[ip].pump()

    def _schedule(self, start: float) -> None:
        """Faults and churn at their workload times (workload time 0 = loop time
        ``start``): the fault plan's clock, registry replicas' crashes and restarts, and
        each tool change applied to this part's servers (or registry) when it is due."""
        part, loop = self.part, asyncio.get_running_loop()
        if part.faults is not None:
            part.faults.start(self.t0)
            if self.stock is not None:  # a stock recursor's process crashes, then restarts
                stock = self.stock
                for ip in stock.addresses:
                    for down, up in part.faults.down_events({ip}):
                        loop.call_at(start + down, stock.crash, ip)
                        if up != float("inf"):
                            loop.call_at(start + up, stock.restart, ip)
            if self.replicas is not None:
                for host in part.registry_nodes:
                    for down, up in part.faults.down_events({host}):
                        loop.call_at(start + down, self.replicas.crash, host)
                        if up != float("inf"):
                            loop.call_at(start + up, self.replicas.restart, host)
        if part.churn is not None:
            def apply_now(apply: Callable[[float], None]) -> None:
                apply(self.node_now())

            registry = part.registry if part.registry_nodes else None
            for at, apply in part.churn.timeline(part.servers, part.zone_of, registry,
                                                 part.churn_applied):  # before a probe
                call_precisely(start + at - loop.time(), apply_now, apply)

    async def replay(self, t0_wall: float) -> int:
        """Replay this host's jobs, job times counted from wall-clock ``t0_wall``; returns
        the number completed."""
        loop = asyncio.get_running_loop()
        part = self.part
        start = self._loop_time_of(t0_wall)
        self.t0 = start - self.origin
        self._schedule(start)
        if not part.jobs:
            return 0
        for job in part.jobs:
            self.finished[job.index] = loop.create_future()
        cpu0, wall0 = time.process_time(), loop.time()
        if part.closed_loop:
            async def agent_loop(jobs: list[Job]) -> None:
                for job in jobs:
                    self._ask(job)
                    await self.finished[job.index]
                    if job.think:
                        await asyncio.sleep(job.think)

            await asyncio.sleep(max(0.0, start - loop.time()))
            by_agent: dict[int, list[Job]] = {}
            for job in part.jobs:
                by_agent.setdefault(job.agent, []).append(job)
            await asyncio.gather(*(agent_loop(jobs) for jobs in by_agent.values()))
        else:
            for job in part.jobs:
                assert job.at is not None  # open loop: every job has its time
                call_precisely(start + job.at - loop.time(), self._ask, job)
            last = max((j.at for j in part.jobs if j.at is not None), default=0.0)
            await asyncio.wait(list(self.finished.values()),
                               timeout=max(0.0, start - loop.time()) + last + DRAIN_TIMEOUT)
        self.out.end_time = loop.time() - self.origin
        if self.out.hop_times is not None and loop.time() > wall0:
            # this process's CPU over the replay (its one loop uses one core at most)
            self.out.hop_times.cpu.append((time.process_time() - cpu0) / (loop.time() - wall0))
        return sum(f.done() for f in self.finished.values())

    async def hang_up(self) -> None:
        """Close the connections this host's clients opened (resolvers' DNS over TLS, HTTP
        agents'), before any host closes its servers: a connection is then counted as
        closed by its client, as in one process, not as lost to a closing server."""
        if self._hung_up:
            return
        self._hung_up = True
        for endpoint in self.resolvers.values():
            if endpoint.dot is not None:
                endpoint.dot.close()
        if self.clients is not None:
            await self.clients.close()

    async def finish(self) -> EngineOutput:
        """Collect late walks, close every socket, return this host's piece."""
        part = self.part
        for ip in self.resolvers:  # walks that finished after their stub answer went out
            self._walked(ip)(part.resolvers[ip].pop_results())
        await self.hang_up()
        if self.stock is not None:
            self.stock.stop()
            self.out.stock = self.stock.report()
        self.out.wire = self.wire  # attributed once every host's piece is in
        if self.replicas is not None:
            self.replicas.close()
        for endpoint in self.endpoints:
            endpoint.close()
        await asyncio.sleep(0)
        out = self.out
        reg = part.registry
        nodes = RunNodes(part.servers, dict(part.resolvers),
                         {**part.agents, **part.registry_agents}, reg, part.faults,
                         part.churn_applied)
        out.observe(nodes, registry_here=reg is not None
                    and reg.server in part.registry_nodes.values())
        if part.dense:
            out.model_loads = model_loads() - self._loads
        return out
