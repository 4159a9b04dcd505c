"""A slice of a run plan served in one process: the per-process core of the Ray and
Mininet engines.

A :class:`HostPart` holds some of a plan's servers, resolvers and agents (plus the path
model and the jobs of its agents); :class:`NodeHost` serves them with the live engine's
socket adapters (:mod:`sim.sockets`) in the running asyncio loop, in phases the driver calls
in order on every host: :meth:`NodeHost.start` (bind every socket), :meth:`set_origin`
(one shared time zero, given as wall-clock time), :meth:`warm` (K = 0 warming of the
host's resolvers), :meth:`replay` (the host's agents replay their jobs from a shared wall
time on), :meth:`finish` (collect, close, return an :class:`EngineOutput` piece). The
pieces merge with :func:`merge_outputs`.

Link emulation is the live engine's: each packet is held back for the one-way delay the
path model draws, or dropped. Across processes there is no single random stream, so each
sending node draws from its own (seed, node) stream; with no loss configured the draws
change only timing, never what is exchanged. With ``emulate=False`` (kernel netem does the
delays, Mininet on a full kernel) packets are only counted.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from nodes.agent.session import DnsAgent
from nodes.agent.stub import StubResult
from nodes.authoritative.server import AuthoritativeServer, ServerStats
from nodes.resolver.core import RecursiveResolver
from nodes.resolver.types import Discovery
from sim.build.runplan import RunPlan
from sim.build.workload import Job
from sim.engines.base import EngineOutput
from sim.errors import ScenarioError
from sim.sockets.node import NodeEndpoint
from sim.sockets.server import ServerEndpoint
from sim.sockets.tcp import raise_fd_limit
from sim.sockets.timing import call_precisely
from topologies.paths import PathModel

DRAIN_TIMEOUT = 30.0  # as the live engine: seconds to wait for stragglers after the last job


@dataclass
class HostPart:
    """What one process serves: a subset of a plan's nodes, and the jobs of its agents."""

    name: str
    seed: int
    servers: dict[str, AuthoritativeServer]
    resolvers: dict[str, RecursiveResolver]
    agents: dict[str, DnsAgent]
    agent_order: list[str]
    role_of: dict[str, str]
    path: PathModel
    jobs: list[Job]
    requests: dict[int, Discovery]
    node_index: dict[str, int]  # address -> stream number of its link RNG
    warm_services: tuple[str, ...] = ()
    closed_loop: bool = False
    dns_port: int = 53
    emulate: bool = True

    @property
    def addresses(self) -> list[str]:
        return [*self.servers, *self.resolvers, *self.agents]


def check_supported(plan: RunPlan, engine: str) -> None:
    """These engines run ToolDNS schemes; HTTP-registry schemes, fault schedules and the
    dense scorer are refused clearly."""
    if getattr(plan, "registry", None) is not None:
        raise ScenarioError(f"schemes: scheme {plan.scheme!r} is an HTTP-registry scheme; the "
                            f"{engine} engine runs ToolDNS schemes only (use simpy or live)")
    if plan.hierarchy.scorer_name == "dense":
        raise ScenarioError(f"namespace.scorer: the dense scorer runs on the simpy and live "
                            f"engines; the {engine} engine would load the sentence model in "
                            f"every host process (use simpy or live)")
    if getattr(plan, "faults", None) is not None:
        raise ScenarioError(f"faults: fault schedules run on the simpy and live engines; the "
                            f"{engine} engine does not apply them (remove faults: or change "
                            f"the engine)")


def split_plan(plan: RunPlan, groups: list[tuple[str, list[str]]],
               emulate: bool = True) -> list[HostPart]:
    """One :class:`HostPart` per (name, addresses) group; every node in exactly one group."""
    everything = [*plan.hierarchy.servers, *plan.resolvers, *plan.agents]
    seen = [ip for _, ips in groups for ip in ips]
    if sorted(seen) != sorted(everything):
        raise ValueError("split_plan: groups must cover every node of the plan exactly once")
    node_index = {ip: i for i, ip in enumerate(sorted(everything))}
    parts = []
    for name, ips in groups:
        chosen = set(ips)
        agents = {ip: a for ip, a in plan.dns_agents().items() if ip in chosen}
        jobs = [j for j in plan.jobs if plan.agent_order[j.agent] in agents]
        parts.append(HostPart(
            name=name, seed=plan.seed,
            servers={ip: s for ip, s in plan.hierarchy.servers.items() if ip in chosen},
            resolvers={ip: r for ip, r in plan.resolvers.items() if ip in chosen},
            agents=agents, agent_order=list(plan.agent_order), role_of=dict(plan.role_of),
            path=plan.path, jobs=jobs, requests={j.index: plan.requests[j.index] for j in jobs},
            node_index=node_index, warm_services=plan.warm_services,
            closed_loop=plan.closed_loop, dns_port=plan.dns_port, emulate=emulate))
    return parts


def quiet_process() -> None:
    """Keep pauses out of a node process while it replays: the loaded nodes are frozen out
    of the cyclic garbage collector, which stays off until :meth:`NodeHost.finish` (a run
    is short), and the GIL is handed between threads (Ray's own) every 0.5 ms, not 5 ms."""
    gc.collect()
    gc.freeze()
    gc.disable()
    sys.setswitchinterval(0.0005)


@dataclass
class HostOutput:
    """A host's :class:`EngineOutput` piece plus the state of its servers' counters."""

    output: EngineOutput
    server_stats: dict[str, ServerStats] = field(default_factory=dict)


def merge_outputs(plan: RunPlan, pieces: list[HostOutput], origin: float = 0.0) -> EngineOutput:
    """Sum the pieces into one output; copy server counters back into the plan's nodes.
    ``origin`` is the wall-clock time of node time zero (for aligning captures)."""
    out = EngineOutput()
    if hasattr(out, "clock_offset"):
        out.clock_offset = origin
    for piece in pieces:
        p = piece.output
        out.stubs.extend(p.stubs)
        for key, walks in p.walks.items():
            out.walks.setdefault(key, []).extend(walks)
        out.warmups.extend(p.warmups)
        for ip, counters in p.load.items():
            for k, v in counters.items():
                out.count(ip, k, v)
        out.schedule_error.extend(p.schedule_error)
        out.lost += p.lost
        if hasattr(p, "flows"):  # connection ids of captured flows (live adapters)
            out.flows.update(p.flows)
        out.warm_time = max(out.warm_time, p.warm_time)
        out.end_time = max(out.end_time, p.end_time)
        for ip, stats in piece.server_stats.items():
            plan.hierarchy.servers[ip].stats = stats
    out.stubs.sort(key=lambda js: js[0].index)
    return out


class NodeHost:
    """Serves a :class:`HostPart` in the running asyncio loop (see the module docstring)."""

    def __init__(self, part: HostPart) -> None:
        self.part = part
        self.out = EngineOutput()
        self.origin = 0.0
        self.finished: dict[int, asyncio.Future] = {}
        self._rngs = {ip: np.random.default_rng([part.seed, 1, i])
                      for ip, i in part.node_index.items() if ip in set(part.addresses)}
        self.servers: list[ServerEndpoint] = []
        self.resolvers: dict[str, NodeEndpoint] = {}
        self.agents: dict[str, NodeEndpoint] = {}

    def shaper(self, src: str, dst: str, size: int) -> float | None:
        out, part = self.out, self.part
        out.count(src, "tx_packets")
        out.count(src, "tx_bytes", size)
        if part.emulate:
            delay = part.path.one_way(part.role_of[src], part.role_of[dst], size,
                                      self._rngs[src])
        else:
            delay = 0.0
        if delay is None:
            out.lost += 1
        else:
            out.count(dst, "rx_packets")
            out.count(dst, "rx_bytes", size)
        return delay

    @property
    def endpoints(self) -> list[ServerEndpoint | NodeEndpoint]:
        return [*self.servers, *self.resolvers.values(), *self.agents.values()]

    # -- phases --------------------------------------------------------------------

    async def start(self) -> int:
        """Bind every socket of the part; returns the number of nodes served."""
        raise_fd_limit()
        loop = asyncio.get_running_loop()
        part, origin = self.part, loop.time()
        for server in part.servers.values():  # wall-clock time: every reply computed
            server.reply_memo = None
        self.servers = [ServerEndpoint(s, (ip, part.dns_port), self.shaper, origin)
                        for ip, s in part.servers.items()]
        self.resolvers = {ip: NodeEndpoint(node, (ip, part.dns_port), ip, origin, self.shaper,
                                           on_done=self.out.add_walks)
                          for ip, node in part.resolvers.items()}
        self.agents = {ip: NodeEndpoint(node, None, ip, origin, self.shaper,
                                        on_done=self._on_stub)
                       for ip, node in part.agents.items()}
        for endpoint in self.endpoints:
            await endpoint.start()
        return len(self.endpoints)

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

    def _on_stub(self, done: list[StubResult]) -> None:
        for stub in done:
            job = stub.tag
            assert isinstance(job, Job)  # the tag replay() asked with
            self.out.stubs.append((job, stub))
            fut = self.finished.get(job.index)
            if fut is not None and not fut.done():
                fut.set_result(None)

    async def replay(self, t0_wall: float) -> int:
        """Replay this host's jobs, job times counted from wall-clock ``t0_wall``; returns
        the number completed."""
        loop = asyncio.get_running_loop()
        part = self.part
        if not part.jobs:
            return 0
        start = self._loop_time_of(t0_wall)
        t0 = start - self.origin
        for job in part.jobs:
            self.finished[job.index] = loop.create_future()

        def ask(job: Job) -> None:
            ip = part.agent_order[job.agent]
            endpoint = self.agents[ip]
            now = endpoint.now()
            if job.at is not None:
                self.out.schedule_error.append(now - (t0 + job.at))
            part.agents[ip].ask(job, part.requests[job.index], now)
            endpoint.pump()

        if part.closed_loop:
            async def agent_loop(jobs: list[Job]) -> None:
                for job in jobs:
                    ask(job)
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
                call_precisely(start + job.at - loop.time(), ask, job)
            last = max((j.at for j in part.jobs if j.at is not None), default=0.0)
            await asyncio.wait(list(self.finished.values()),
                               timeout=max(0.0, start - loop.time()) + last + DRAIN_TIMEOUT)
        self.out.end_time = loop.time() - self.origin
        return sum(f.done() for f in self.finished.values())

    async def finish(self) -> HostOutput:
        """Collect late walks, close every socket, return this host's piece."""
        for ip in self.resolvers:
            self.out.add_walks(self.part.resolvers[ip].pop_results())
        for endpoint in self.endpoints:
            endpoint.close()
        await asyncio.sleep(0)
        return HostOutput(self.out, {ip: s.stats for ip, s in self.part.servers.items()})
