"""Live engine for scenarios: every node behind real sockets on 127.0.0.0/8, in real time.

The same node objects as the simulation run in one asyncio loop: authoritative servers on
their own addresses, resolvers serving stub clients, agents sending real stub queries.
This machine has no netem qdisc, so link delay and loss are emulated in user space: each
adapter holds a packet back for the one-way delay the scenario's path model draws (and
drops it when the model says lost) — the same model the simulation engine uses. Node
time is loop time minus the run's origin, so records line up with the simulation's.
With ``plan.dot`` the servers also listen for DNS over TLS and the resolvers query them
over persistent TLS 1.3 connections (:class:`sim.sockets.dot.DotUpstream`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Callable, Coroutine
from typing import Any

import numpy as np

from nodes.agent.stub import StubResult
from nodes.authoritative.memo import memo_off
from nodes.registry.base import Routes
from nodes.registry.server import RegistryServer
from sim.accounting import IPV4, TCP_SYN, TCP_TS, dot_port
from sim.build.faults import registry_address, registry_order
from sim.build.registries import REGISTRY_HOST, RegistrySetup
from sim.build.runplan import RunPlan
from sim.build.workload import Job
from sim.engines.base import EngineOutput
from sim.sockets.dot import DotUpstream
from sim.sockets.node import NodeEndpoint
from sim.sockets.server import ServerEndpoint
from sim.sockets.tcp import raise_fd_limit
from sim.sockets.timing import call_precisely, sleep_precisely

DRAIN_TIMEOUT = 30.0  # seconds to wait for stragglers after the last scheduled query


async def replay(plan: RunPlan, ask: Callable[[Job], None],
                 finished: dict[int, asyncio.Future], start: float) -> None:
    """Replay the workload: each agent's jobs in turn (closed loop; ``finished[job]`` is
    resolved when a job is done) or each at ``start + job.at`` loop time, then wait."""
    loop = asyncio.get_running_loop()
    if plan.closed_loop:
        async def agent_loop(jobs: list[Job]) -> None:
            for job in jobs:
                ask(job)
                await finished[job.index]
                if job.think:
                    await asyncio.sleep(job.think)

        await asyncio.gather(*(agent_loop([j for j in plan.jobs if j.agent == a])
                               for a in range(len(plan.agent_order))))
    else:
        for job in plan.jobs:
            assert job.at is not None  # open loop: every job has its time
            call_precisely(start + job.at - loop.time(), ask, job)
        last = max((j.at for j in plan.jobs if j.at is not None), default=0.0)
        await asyncio.wait(list(finished.values()), timeout=last + DRAIN_TIMEOUT)


def schedule_churn(plan: RunPlan, loop: asyncio.AbstractEventLoop, origin: float,
                   t0: float) -> None:
    """Tool changes (:mod:`sim.build.churn`) at their workload times from ``t0``, each
    applied with the node time (loop time minus ``origin``) it runs at."""
    if plan.churn is None:
        return

    def apply_now(apply: Callable[[float], None]) -> None:
        apply(loop.time() - origin)

    for at, apply in plan.churn.timeline(plan):  # before a probe due then
        call_precisely(origin + t0 + at - loop.time(), apply_now, apply)


def run_live(plan: RunPlan) -> EngineOutput:
    """Run one scheme of ``plan`` on loopback sockets (the catalogue's entry point). The
    servers compute every reply (no reply memo): in wall-clock time their work is part of
    what is measured."""
    with memo_off(plan.hierarchy.servers.values()):
        out = asyncio.run(_run_http(plan) if plan.registry is not None else _run(plan))
    out.link_emulation = "user-space"
    return out


async def _run_http(plan: RunPlan) -> EngineOutput:
    return await HttpRun(plan).run()


async def _run(plan: RunPlan) -> EngineOutput:
    loop = asyncio.get_running_loop()
    raise_fd_limit()
    out = EngineOutput(on_stub=plan.on_stub)
    rng = np.random.default_rng([plan.seed, 1])
    faults = plan.faults

    def shaper(src: str, dst: str, size: int) -> float | None:
        out.count(src, "tx_packets")
        out.count(src, "tx_bytes", size)
        delay = plan.path.one_way(plan.role_of[src], plan.role_of[dst], size, rng)
        if faults is not None:  # sim.build.faults: a crashed server neither sends nor receives
            delay = faults.fate(src, dst, loop.time() - origin, delay)
        if delay is None:
            out.lost += 1
        else:
            out.count(dst, "rx_packets")
            out.count(dst, "rx_bytes", size)
        return delay

    origin = loop.time()
    servers = [ServerEndpoint(s, (ip, plan.dns_port), shaper, origin)
               for ip, s in plan.hierarchy.servers.items()]
    resolvers = {ip: NodeEndpoint(node, (ip, plan.dns_port), ip, origin, shaper,
                                  on_done=out.add_walks)
                 for ip, node in plan.resolvers.items()}
    if plan.dot is not None:  # DNS over TLS between resolvers and servers
        _dot_endpoints(plan, servers, resolvers, out)
    finished: dict[int, asyncio.Future] = {}

    def on_stub(done: list[StubResult]) -> None:
        for stub in done:
            job = stub.tag
            assert isinstance(job, Job)  # the tag ask() asked with
            out.add_stub(job, stub)
            fut = finished.get(job.index)
            if fut is not None and not fut.done():
                fut.set_result(None)

    agents = {ip: NodeEndpoint(node, None, ip, origin, shaper, on_done=on_stub)
              for ip, node in plan.dns_agents().items()}
    endpoints: list[ServerEndpoint | NodeEndpoint] = [*servers, *resolvers.values(),
                                                      *agents.values()]
    try:
        for endpoint in endpoints:
            await endpoint.start()
        origin = loop.time()  # time zero once everything listens
        out.clock_offset = time.time() - (loop.time() - origin)  # wall clock at node time 0
        for endpoint in endpoints:
            endpoint.origin = origin
        if plan.warm_services:
            await asyncio.gather(*(ep.warm(service) for ep in resolvers.values()
                                   for service in plan.warm_services))
            out.warm_time = loop.time() - origin
        t0 = loop.time() - origin
        if faults is not None:
            faults.start(t0)
        schedule_churn(plan, loop, origin, t0)
        for job in plan.jobs:
            finished[job.index] = loop.create_future()

        def ask(job: Job) -> None:
            ip = plan.agent_order[job.agent]
            endpoint = agents[ip]
            now = endpoint.now()
            if job.at is not None:
                out.schedule_error.append(now - (t0 + job.at))
            plan.agents[ip].ask(job, plan.requests[job.index], now)
            endpoint.pump()

        await replay(plan, ask, finished, origin + t0)
        out.end_time = loop.time() - origin
        for ip in resolvers:  # walks that finished after their stub answer went out
            out.add_walks(plan.resolvers[ip].pop_results())
    finally:
        for endpoint in endpoints:
            endpoint.close()
        await asyncio.sleep(0)
    return out


def _dot_endpoints(plan: RunPlan, servers: list[ServerEndpoint],
                   resolvers: dict[str, NodeEndpoint], out: EngineOutput) -> None:
    """Give every server a DNS-over-TLS listener and every resolver its connections."""
    dot = plan.dot
    assert dot is not None
    server_ctx, client_ctx = dot.server_context(), dot.client_context()
    for server in servers:
        server.tls, server.tls_port = server_ctx, dot_port(plan.dns_port)
    numbers = itertools.count(1)  # connection numbers, unique over the run's resolvers
    for ip, endpoint in resolvers.items():
        def count(key: str, ip: str = ip, endpoint: NodeEndpoint = endpoint) -> None:
            endpoint.count(key)
            out.count(ip, key)  # dot_opened / dot_closed: the run's replay summary

        def deliver(d: bytes, s: tuple[str, int], endpoint: NodeEndpoint = endpoint) -> None:
            endpoint._receive(d, s, "tls")

        endpoint.dot = DotUpstream(
            ip, client_ctx, deliver, count, endpoint.shaper, dot.idle, dot.max_connections,
            numbers, dot.sizes, out.flows)


WRITE_TIMEOUT = 10.0  # seconds a registry response may take to drain to a slow reader
LINGER = 1.0  # seconds a registry reads (and drops) what follows an error before closing


async def start_registry(reg: RegistrySetup, tls: bool, now: Callable[[], float],
                         delay: Callable[[str, int], float] | None = None,
                         address: str | None = None, server: RegistryServer | None = None,
                         conns: set[asyncio.StreamWriter] | None = None,
                         write_timeout: float = WRITE_TIMEOUT, search: float = 0.0,
                         ) -> asyncio.base_events.Server:
    """Serve a registry over HTTP/1.1 (TLS 1.3 with ``tls``) on its address and port.

    ``delay(peer address, response bytes)`` gives the emulated one-way delay before each
    response is written; a peer's bad bytes get a 4xx (and, when the server gives the
    connection up, a short lingering close so the answer is not lost to a reset). The node
    decides the deadlines (request, idle keep-alive: its ``limits``) and the connection
    cap; here each read waits until the node's next deadline, and each write may take
    ``write_timeout`` seconds. ``now`` must advance (node time). A replica serves at
    ``address`` with its own ``server`` node; ``conns`` collects the open connections
    (so a crash can reset them). ``search`` seconds (``processing.registry``, modelled)
    pass before each answer to a search request, awaited so other connections are served
    meanwhile.
    """
    node = server if server is not None else reg.server
    handler = RegistryConnections(node, now, delay, conns, write_timeout, search)
    return await asyncio.start_server(
        handler.serve, address or reg.address, reg.port, reuse_address=True,
        ssl=reg.server_context() if tls else None,
        ssl_handshake_timeout=node.limits.request_timeout if tls else None)


async def linger(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Close our side, then read (and drop) what the peer still sends for ``LINGER`` s."""
    with contextlib.suppress(OSError, RuntimeError):
        if writer.can_write_eof():
            writer.write_eof()
    end = asyncio.get_running_loop().time() + LINGER
    with contextlib.suppress(TimeoutError, ConnectionError, OSError):
        while await asyncio.wait_for(reader.read(65536),
                                     end - asyncio.get_running_loop().time()):
            pass


class RegistryConnections:
    """The connections of one registry node on its listening socket (:func:`start_registry`
    describes the arguments)."""

    def __init__(self, node: RegistryServer, now: Callable[[], float],
                 delay: Callable[[str, int], float] | None,
                 conns: set[asyncio.StreamWriter] | None, write_timeout: float,
                 search: float) -> None:
        self.node, self.now, self.delay, self.conns = node, now, delay, conns
        self.write_timeout, self.search = write_timeout, search
        self.searches: Callable[[], int] | None = None  # the app's counter, when modelled
        if search:
            app = node.app
            assert isinstance(app, Routes)  # a search time needs the app's search counter
            self.searches = app.searches

    async def write(self, writer: asyncio.StreamWriter, peer: tuple[str, int],
                    reply: bytes) -> None:
        if self.delay is not None:
            await sleep_precisely(self.delay(peer[0], len(reply)))
        writer.write(reply)
        await asyncio.wait_for(writer.drain(), self.write_timeout)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One connection, from accept (or refusal at the cap) to close."""
        node, conns = self.node, self.conns
        peer = writer.get_extra_info("peername")[:2]
        if not node.accept(peer, self.now()):
            with contextlib.suppress(ConnectionError, OSError):
                writer.write(node.refusal())
            writer.close()
            return
        if conns is not None:
            conns.add(writer)
        try:
            await self.exchange(reader, writer, peer)
        except TimeoutError:  # the response did not drain within write_timeout
            node.lost(peer, "write_timeout")
            writer.transport.abort()
        except (ConnectionError, OSError):
            node.lost(peer, "reset")
        finally:
            node.lost(peer)
            if conns is not None:
                conns.discard(writer)
            writer.close()

    async def exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                       peer: tuple[str, int]) -> None:
        """Requests and responses until the node or the peer closes."""
        node, now, searches = self.node, self.now, self.searches
        while True:
            deadline = node.deadline(peer)  # at least one look at what has arrived:
            wait = None if deadline is None else max(0.01, deadline - now())
            try:
                data = await asyncio.wait_for(reader.read(65536), wait)
            except TimeoutError:
                reply, close = node.on_timer(peer, now())
                data = b"-"  # a timeout is the server giving up, as an error is
            else:
                searched = searches() if searches is not None else 0
                reply, close = node.receive(peer, data, now())
                if reply and searches is not None and searches() > searched:
                    await sleep_precisely(self.search)  # the modelled search
            if reply:
                await self.write(writer, peer, reply)
            if close or not data:
                if data and reply:
                    await linger(reader, writer)
                break


class HttpRun:
    """A registry scheme on real sockets: HTTP/1.1 over TCP (and TLS 1.3 with ``ssl``).

    Link delays are emulated in user space as for DNS: connection set-up waits the drawn
    SYN/SYN-ACK (and ClientHello/server flight) one-way delays before connecting for real,
    and every request and response is held back for its one-way delay before it is
    written. Each connection's client (address, port) is recorded for capture matching.
    Made inside the running loop; :meth:`run` serves the replicas and replays the workload.
    """

    def __init__(self, plan: RunPlan) -> None:
        self.plan = plan
        self.loop = asyncio.get_running_loop()
        self.out = EngineOutput(on_stub=plan.on_stub)
        self.rng = np.random.default_rng([plan.seed, 1])
        reg = plan.registry
        assert reg is not None  # run_live: a registry scheme
        self.reg = reg
        self.agents = plan.registry_agents()
        self.rip, self.tls = reg.address, plan.tls
        self.faults = plan.faults
        self.origin = self.loop.time()
        self.client_ctx = reg.client_context() if plan.tls is not None else None
        server = reg.server
        self.nodes = {registry_address(i): server if i == 0 else
                      RegistryServer(server.app, name=f"{server.name}-{i}",
                                     limits=server.limits,
                                     max_connections=server.max_connections)
                      for i in range(plan.registry_replicas)}
        self.listening: dict[str, asyncio.base_events.Server] = {}
        self.server_conns: dict[str, set[asyncio.StreamWriter]] = {h: set() for h in self.nodes}
        self.host_of: dict[tuple[str, int], str] = {}
        self.agent_index = {ip: i for i, ip in enumerate(plan.agent_order)}
        self.finished: dict[int, asyncio.Future] = {}
        self.writers: dict[tuple[str, int], asyncio.StreamWriter] = {}
        self.timers: dict[str, asyncio.TimerHandle] = {}
        self.tasks: set[asyncio.Task] = set()

    def now(self) -> float:
        return self.loop.time() - self.origin

    def delay(self, src: str, dst: str, size: int) -> float:
        """One segment's emulated delay; a lost one costs its retransmission timeout."""
        out, plan, faults = self.out, self.plan, self.faults
        out.count(src, "tx_packets")
        out.count(src, "tx_bytes", size)
        total = 0.0
        d = plan.path.one_way(plan.role_of[src], plan.role_of[dst], size, self.rng)
        if faults is not None:  # crashed replicas refuse or reset for real (below)
            d = faults.fate(src, dst, self.now(), d, crashes=False)
        while d is None:
            out.lost += 1
            total += 0.2
            d = plan.path.one_way(plan.role_of[src], plan.role_of[dst], size, self.rng)
            if faults is not None and total <= 60.0:
                d = faults.fate(src, dst, self.now() + total, d, crashes=False)
        out.count(dst, "rx_packets")
        out.count(dst, "rx_bytes", size)
        return total + d

    def wire(self, payload: int) -> int:
        tls = self.tls
        return IPV4 + TCP_TS + (tls.records(payload) if tls is not None else payload)

    async def serve_replica(self, host: str) -> None:
        plan = self.plan
        self.listening[host] = await start_registry(
            self.reg, tls=plan.tls is not None, now=self.now,
            delay=lambda peer, n: self.delay(host, peer, self.wire(n)), address=host,
            server=self.nodes[host], conns=self.server_conns[host], search=plan.registry_time)

    def crash(self, host: str) -> None:
        """The process dies: no listener, connections reset."""
        server = self.listening.pop(host, None)
        if server is not None:
            server.close()
        for writer in list(self.server_conns[host]):
            writer.transport.abort()

    def restart(self, host: str) -> None:
        self.spawn(self.serve_replica(host))

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = self.loop.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def connect(self, ip: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter,
                                             str] | None:
        """Each replica address in turn, as ``socket.create_connection`` does (None: every
        one refused); waits the emulated handshake delays."""
        delay, tls, port = self.delay, self.tls, self.reg.port
        for host in registry_order(self.plan.registry_replicas, self.agent_index[ip]):
            await sleep_precisely(delay(ip, host, IPV4 + TCP_SYN))
            try:
                reader, writer = await asyncio.open_connection(
                    host, port, ssl=self.client_ctx,
                    server_hostname=REGISTRY_HOST if self.client_ctx else None,
                    local_addr=(ip, 0))
            except OSError:  # refused: the RST travels back
                await sleep_precisely(delay(host, ip, IPV4 + TCP_SYN))
                continue
            wait = delay(host, ip, IPV4 + TCP_SYN)
            if tls is not None:
                wait += delay(ip, host, IPV4 + TCP_TS + tls.client_hello)
                wait += delay(host, ip, IPV4 + TCP_TS + tls.server_flight)
            await sleep_precisely(wait)
            return reader, writer, host
        return None

    async def open_conn(self, ip: str, conn: int) -> None:
        agent = self.agents[ip]
        opened = await self.connect(ip)
        if opened is None:
            agent.closed(conn, self.now())
            self.pump(ip)
            return
        reader, writer, self.host_of[(ip, conn)] = opened
        self.out.flows[(ip, writer.get_extra_info("sockname")[1])] = conn
        self.writers[(ip, conn)] = writer
        agent.connected(conn, self.now())
        self.pump(ip)
        try:
            while data := await reader.read(65536):
                agent.receive(conn, data, self.now())
                self.pump(ip)
        except (ConnectionError, OSError):
            pass
        self.writers.pop((ip, conn), None)
        agent.closed(conn, self.now())
        self.pump(ip)

    async def send(self, ip: str, conn: int, data: bytes) -> None:
        await sleep_precisely(self.delay(ip, self.host_of.get((ip, conn), self.rip),
                                         self.wire(len(data))))
        writer = self.writers.get((ip, conn))
        if writer is not None and not writer.is_closing():
            writer.write(data)

    def pump(self, ip: str) -> None:
        agent = self.agents[ip]
        for act in agent.to_send():
            if act.kind == "open":
                self.spawn(self.open_conn(ip, act.conn))
            elif act.kind == "send":
                self.spawn(self.send(ip, act.conn, act.data))
            else:
                self.host_of.pop((ip, act.conn), None)
                writer = self.writers.pop((ip, act.conn), None)
                if writer is not None:
                    writer.close()
        for result in agent.pop_done():
            job = result.tag
            assert isinstance(job, Job)  # the tag ask() asked with
            self.out.add_stub(job, result)
            fut = self.finished.get(job.index)
            if fut is not None and not fut.done():
                fut.set_result(None)
        when = agent.next_timer()
        old = self.timers.pop(ip, None)
        if old is not None:
            old.cancel()
        if when is not None:
            self.timers[ip] = self.loop.call_at(self.origin + when, self.fire, ip)

    def fire(self, ip: str) -> None:
        self.timers.pop(ip, None)
        self.agents[ip].on_timer(self.now())
        self.pump(ip)

    def ask(self, job: Job) -> None:
        ip = self.plan.agent_order[job.agent]
        if job.at is not None:
            self.out.schedule_error.append(self.now() - job.at)
        self.agents[ip].ask(job, self.plan.requests[job.index], self.now())
        self.pump(ip)

    def schedule(self) -> None:
        """Replica crashes and restarts, and churn, at their times from node time 0."""
        faults, loop, origin = self.faults, self.loop, self.origin
        if faults is not None:
            faults.start(0.0)
            for host in self.nodes:
                for start, end in faults.down_events({host}):
                    loop.call_at(origin + start, self.crash, host)
                    if end != float("inf"):
                        loop.call_at(origin + end, self.restart, host)
        schedule_churn(self.plan, loop, origin, 0.0)  # the registry's index changes then

    async def run(self) -> EngineOutput:
        for host in self.nodes:
            await self.serve_replica(host)
        loop = self.loop
        try:
            self.origin = loop.time()
            self.out.clock_offset = time.time() - (loop.time() - self.origin)  # at node time 0
            self.schedule()
            for job in self.plan.jobs:
                self.finished[job.index] = loop.create_future()
            await replay(self.plan, self.ask, self.finished, self.origin)
            self.out.end_time = self.now()
        finally:
            for writer in self.writers.values():
                writer.close()
            for handle in self.timers.values():
                handle.cancel()
            await asyncio.sleep(0.05)  # let FINs go out before the server closes
            for task in list(self.tasks):
                task.cancel()
            for server in self.listening.values():
                server.close()
        return self.out
