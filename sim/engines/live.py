"""Live engine for scenarios: every node behind real sockets on 127.0.0.0/8, in real time.

The same node objects as the simulation run in one asyncio loop: authoritative servers on
their own addresses, resolvers serving stub clients, agents sending real stub queries.
This machine has no netem qdisc, so link delay and loss are emulated in user space: each
adapter holds a packet back for the one-way delay the scenario's path model draws (and
drops it when the model says lost) — the same model the simulation engine uses. Node
time is loop time minus the run's origin, so records line up with the simulation's.
With ``plan.dot`` the servers also listen for DNS over TLS and the resolvers query them
over persistent TLS 1.3 connections (:class:`sim.sockets.endpoints.DotUpstream`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Callable

import numpy as np

from nodes.agent.stub import StubResult
from nodes.registry.server import RegistryServer
from sim.accounting import IPV4, dot_port
from sim.build.faults import registry_address, registry_order
from sim.build.registries import RegistrySetup
from sim.build.runplan import RunPlan
from sim.build.workload import Job
from sim.engines.base import EngineOutput
from sim.sockets.endpoints import (
    DotUpstream,
    NodeEndpoint,
    ServerEndpoint,
    call_precisely,
    raise_fd_limit,
    sleep_precisely,
)

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
            call_precisely(start + job.at - loop.time(), ask, job)
        last = max((j.at for j in plan.jobs), default=0.0)
        await asyncio.wait(list(finished.values()), timeout=last + DRAIN_TIMEOUT)


def run_live(plan: RunPlan) -> EngineOutput:
    return asyncio.run(_run_http(plan) if plan.registry is not None else _run(plan))


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
            out.add_stub(stub.tag, stub)  # type: ignore[arg-type]
            fut = finished.get(stub.tag.index)  # type: ignore[attr-defined]
            if fut is not None and not fut.done():
                fut.set_result(None)

    agents = {ip: NodeEndpoint(node, None, ip, origin, shaper, on_done=on_stub)
              for ip, node in plan.agents.items()}
    endpoints = [*servers, *resolvers.values(), *agents.values()]
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
        if plan.churn is not None:  # sim.build.churn: tools change at their workload times
            for at, apply in plan.churn.timeline(plan):  # type: ignore[attr-defined]
                call_precisely(origin + t0 + at - loop.time(),  # before a probe due then
                               lambda apply=apply: apply(loop.time() - origin))
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
    server_ctx, client_ctx = dot.server_context(), dot.client_context()  # type: ignore[attr-defined]
    for endpoint in servers:
        endpoint.tls, endpoint.tls_port = server_ctx, dot_port(plan.dns_port)
    numbers = itertools.count(1)  # connection numbers, unique over the run's resolvers
    for ip, endpoint in resolvers.items():
        def count(key: str, ip: str = ip, endpoint: NodeEndpoint = endpoint) -> None:
            endpoint.count(key)
            out.count(ip, key)  # dot_opened / dot_closed: the run's replay summary

        endpoint.dot = DotUpstream(
            ip, client_ctx, lambda d, s, ep=endpoint: ep._receive(d, s, "tls"), count,
            endpoint.shaper, dot.idle, dot.max_connections, numbers, dot.sizes,  # type: ignore[attr-defined]
            out.flows)


WRITE_TIMEOUT = 10.0  # seconds a registry response may take to drain to a slow reader
LINGER = 1.0  # seconds a registry reads (and drops) what follows an error before closing


async def start_registry(reg: RegistrySetup, tls: bool, now: Callable[[], float],
                         delay: Callable[[str, int], float] | None = None,
                         address: str | None = None, server: object | None = None,
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
    node: RegistryServer = server if server is not None else reg.server  # type: ignore[assignment]

    async def write(writer: asyncio.StreamWriter, peer: tuple, reply: bytes) -> None:
        if delay is not None:
            await sleep_precisely(delay(peer[0], len(reply)))
        writer.write(reply)
        await asyncio.wait_for(writer.drain(), write_timeout)

    async def linger(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, RuntimeError):
            if writer.can_write_eof():
                writer.write_eof()
        end = asyncio.get_running_loop().time() + LINGER
        with contextlib.suppress(TimeoutError, ConnectionError, OSError):
            while await asyncio.wait_for(reader.read(65536),
                                         end - asyncio.get_running_loop().time()):
                pass

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")[:2]
        if not node.accept(peer, now()):
            with contextlib.suppress(ConnectionError, OSError):
                writer.write(node.refusal())
            writer.close()
            return
        if conns is not None:
            conns.add(writer)
        try:
            while True:
                deadline = node.deadline(peer)  # at least one look at what has arrived:
                wait = None if deadline is None else max(0.01, deadline - now())
                try:
                    data = await asyncio.wait_for(reader.read(65536), wait)
                except TimeoutError:
                    reply, close = node.on_timer(peer, now())
                    data = b"-"  # a timeout is the server giving up, as an error is
                else:
                    searched = node.app.searches() if search else 0
                    reply, close = node.receive(peer, data, now())
                    if reply and search and node.app.searches() > searched:
                        await sleep_precisely(search)  # the modelled search
                if reply:
                    await write(writer, peer, reply)
                if close or not data:
                    if data and reply:
                        await linger(reader, writer)
                    break
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

    return await asyncio.start_server(
        serve, address or reg.address, reg.port, reuse_address=True,
        ssl=reg.server_context() if tls else None,
        ssl_handshake_timeout=node.limits.request_timeout if tls else None)


async def _run_http(plan: RunPlan) -> EngineOutput:
    """A registry scheme on real sockets: HTTP/1.1 over TCP (and TLS 1.3 with ``ssl``).

    Link delays are emulated in user space as for DNS: connection set-up waits the drawn
    SYN/SYN-ACK (and ClientHello/server flight) one-way delays before connecting for real,
    and every request and response is held back for its one-way delay before it is
    written. Each connection's client (address, port) is recorded for capture matching.
    """
    from sim.accounting import TCP_SYN, TCP_TS
    from sim.build.registries import REGISTRY_HOST

    loop = asyncio.get_running_loop()
    raise_fd_limit()
    out = EngineOutput(on_stub=plan.on_stub)
    rng = np.random.default_rng([plan.seed, 1])
    reg = plan.registry
    rip, tls = reg.address, plan.tls  # type: ignore[attr-defined]

    faults = plan.faults

    def delay(src: str, dst: str, size: int) -> float:
        out.count(src, "tx_packets")
        out.count(src, "tx_bytes", size)
        total = 0.0
        d = plan.path.one_way(plan.role_of[src], plan.role_of[dst], size, rng)
        if faults is not None:  # crashed replicas refuse or reset for real (below)
            d = faults.fate(src, dst, now(), d, crashes=False)
        while d is None:  # a lost segment costs its retransmission timeout
            out.lost += 1
            total += 0.2
            d = plan.path.one_way(plan.role_of[src], plan.role_of[dst], size, rng)
            if faults is not None and total <= 60.0:
                d = faults.fate(src, dst, now() + total, d, crashes=False)
        out.count(dst, "rx_packets")
        out.count(dst, "rx_bytes", size)
        return total + d

    def wire(payload: int) -> int:
        return IPV4 + TCP_TS + (tls.records(payload) if tls is not None else payload)  # type: ignore[attr-defined]

    origin = loop.time()

    def now() -> float:
        return loop.time() - origin

    client_ctx = reg.client_context() if plan.tls is not None else None  # type: ignore[attr-defined]
    nodes = {registry_address(i): reg.server if i == 0 else  # type: ignore[attr-defined]
             RegistryServer(reg.server.app, name=f"{reg.server.name}-{i}",  # type: ignore[attr-defined]
                            limits=reg.server.limits,  # type: ignore[attr-defined]
                            max_connections=reg.server.max_connections)  # type: ignore[attr-defined]
             for i in range(plan.registry_replicas)}
    listening: dict[str, asyncio.base_events.Server] = {}
    server_conns: dict[str, set[asyncio.StreamWriter]] = {h: set() for h in nodes}
    host_of: dict[tuple[str, int], str] = {}
    agent_index = {ip: i for i, ip in enumerate(plan.agent_order)}

    async def serve_replica(host: str) -> None:
        listening[host] = await start_registry(
            reg, tls=plan.tls is not None, now=now,  # type: ignore[arg-type]
            delay=lambda peer, n: delay(host, peer, wire(n)), address=host,
            server=nodes[host], conns=server_conns[host], search=plan.registry_time)

    def crash(host: str) -> None:  # the process dies: no listener, connections reset
        server = listening.pop(host, None)
        if server is not None:
            server.close()
        for writer in list(server_conns[host]):
            writer.transport.abort()

    def restart(host: str) -> None:
        spawn(serve_replica(host))

    for host in nodes:
        await serve_replica(host)
    finished: dict[int, asyncio.Future] = {}
    writers: dict[tuple[str, int], asyncio.StreamWriter] = {}
    timers: dict[str, asyncio.TimerHandle] = {}
    tasks: set[asyncio.Task] = set()

    def spawn(coro) -> None:  # type: ignore[no-untyped-def]
        task = loop.create_task(coro)
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    async def open_conn(ip: str, conn: int) -> None:
        agent = plan.agents[ip]
        for host in registry_order(plan.registry_replicas, agent_index[ip]):
            await sleep_precisely(delay(ip, host, IPV4 + TCP_SYN))
            try:  # each address of the name in turn, as socket.create_connection does
                reader, writer = await asyncio.open_connection(
                    host, reg.port, ssl=client_ctx,  # type: ignore[attr-defined]
                    server_hostname=REGISTRY_HOST if client_ctx else None,
                    local_addr=(ip, 0))
            except OSError:  # refused: the RST travels back
                await sleep_precisely(delay(host, ip, IPV4 + TCP_SYN))
                continue
            wait = delay(host, ip, IPV4 + TCP_SYN)
            if tls is not None:
                wait += delay(ip, host, IPV4 + TCP_TS + tls.client_hello)  # type: ignore[attr-defined]
                wait += delay(host, ip, IPV4 + TCP_TS + tls.server_flight)  # type: ignore[attr-defined]
            await sleep_precisely(wait)
            host_of[(ip, conn)] = host
            break
        else:
            agent.closed(conn, now())  # type: ignore[attr-defined]
            pump(ip)
            return
        out.flows[(ip, writer.get_extra_info("sockname")[1])] = conn
        writers[(ip, conn)] = writer
        agent.connected(conn, now())  # type: ignore[attr-defined]
        pump(ip)
        try:
            while data := await reader.read(65536):
                agent.receive(conn, data, now())  # type: ignore[attr-defined]
                pump(ip)
        except (ConnectionError, OSError):
            pass
        writers.pop((ip, conn), None)
        agent.closed(conn, now())  # type: ignore[attr-defined]
        pump(ip)

    async def send(ip: str, conn: int, data: bytes) -> None:
        await sleep_precisely(delay(ip, host_of.get((ip, conn), rip), wire(len(data))))
        writer = writers.get((ip, conn))
        if writer is not None and not writer.is_closing():
            writer.write(data)

    def pump(ip: str) -> None:
        agent = plan.agents[ip]
        for act in agent.to_send():  # type: ignore[attr-defined]
            if act.kind == "open":
                spawn(open_conn(ip, act.conn))
            elif act.kind == "send":
                spawn(send(ip, act.conn, act.data))
            else:
                host_of.pop((ip, act.conn), None)
                writer = writers.pop((ip, act.conn), None)
                if writer is not None:
                    writer.close()
        for result in agent.pop_done():  # type: ignore[attr-defined]
            out.add_stub(result.tag, result)
            fut = finished.get(result.tag.index)
            if fut is not None and not fut.done():
                fut.set_result(None)
        when = agent.next_timer()
        old = timers.pop(ip, None)
        if old is not None:
            old.cancel()
        if when is not None:
            timers[ip] = loop.call_at(origin + when, fire, ip)

    def fire(ip: str) -> None:
        timers.pop(ip, None)
        plan.agents[ip].on_timer(now())
        pump(ip)

    def ask(job: Job) -> None:
        ip = plan.agent_order[job.agent]
        if job.at is not None:
            out.schedule_error.append(now() - job.at)
        plan.agents[ip].ask(job, plan.requests[job.index], now())
        pump(ip)

    try:
        origin = loop.time()
        out.clock_offset = time.time() - (loop.time() - origin)  # wall clock at node time 0
        if faults is not None:
            faults.start(0.0)
            for host in nodes:
                for start, end in faults.down_events({host}):
                    loop.call_at(origin + start, crash, host)
                    if end != float("inf"):
                        loop.call_at(origin + end, restart, host)
        if plan.churn is not None:  # sim.build.churn: the registry's index changes at these times
            for at, apply in plan.churn.timeline(plan):  # type: ignore[attr-defined]
                call_precisely(origin + at - loop.time(), lambda apply=apply: apply(now()))
        for job in plan.jobs:
            finished[job.index] = loop.create_future()
        await replay(plan, ask, finished, origin)
        out.end_time = now()
    finally:
        for writer in writers.values():
            writer.close()
        for handle in timers.values():
            handle.cancel()
        await asyncio.sleep(0.05)  # let FINs go out before the server closes
        for task in list(tasks):
            task.cancel()
        for server in listening.values():
            server.close()
    return out
