"""Discrete-event engine (simpy): the same node objects in virtual time, wire-exact.

Every message is the real encoded DNS message. A message from node A to node B takes the
one-way delay the path model draws for its IP size (link delays, serialisation, loss);
a TCP exchange first pays a handshake (one round trip). Each node handles one message at
a time for its processing time, so load queues. Timers (resolver retries, agent timeouts)
are simpy timeouts. Same scenario and seed → the same event order → identical results.

DNS over TLS between resolvers and servers (``plan.dot``, transport "tls"): each resolver
keeps one connection per server in a bounded table (least recently used closed first,
closed after ``idle`` seconds without traffic); the first exchange on a connection pays the
TCP handshake and the TLS 1.3 round trip (ClientHello → server flight, the measured
sizes; the client's Finished leaves with the query), later ones only their TLS records.
The exchange is marked on its Step (``conn``, ``opened``) for the accounting.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from time import perf_counter

import numpy as np
import simpy

from nodes.dns.codec import parse_query
from nodes.resolver.core import Outgoing
from sim.accounting import IPV4, TCP, TCP_TS, UDP
from sim.build.runplan import AGENT_PORT, RunPlan
from sim.build.workload import Job
from sim.engines.base import EngineOutput

SYN_RTO = 1.0  # Linux initial retransmission timeout for SYN (RFC 6298 §2.1)
TCP_GIVE_UP = 60.0  # seconds of retransmissions after which a connection is dead (faults)


def replay(env: simpy.Environment, plan: RunPlan, ask: Callable[[Job], None],
           done_events: dict[int, simpy.Event], t0: float) -> None:
    """Schedule the workload: each agent's jobs one after another (closed loop; the
    engine succeeds ``done_events[job]`` when a job finishes) or at their times from t0."""
    if plan.closed_loop:
        def agent_loop(jobs: list[Job]) -> Iterator[simpy.Event]:
            for job in jobs:
                done = done_events[job.index] = env.event()
                ask(job)
                yield done
                if job.think:
                    yield env.timeout(job.think)

        for a in range(len(plan.agent_order)):
            env.process(agent_loop([j for j in plan.jobs if j.agent == a]))
    else:
        for job in plan.jobs:
            env.timeout(t0 + job.at - env.now).callbacks.append(lambda _e, job=job: ask(job))


def run_simpy(plan: RunPlan) -> EngineOutput:
    if plan.registry is not None:
        return run_http_simpy(plan)
    env = simpy.Environment()
    rng = np.random.default_rng(  # network draws, the same for every scheme (a shard: its own)
        [plan.seed, 1] if plan.shard is None else [plan.seed, 1, plan.shard])
    out = EngineOutput(on_stub=plan.on_stub)
    servers = plan.hierarchy.servers
    busy: dict[str, float] = {}
    armed: dict[str, float] = {}
    port_of = {ip: AGENT_PORT for ip in plan.agents}
    port_of.update({ip: plan.dns_port for ip in plan.resolvers})
    nodes = {**plan.resolvers, **plan.agents}
    ip_of = {role: ip for ip, role in plan.role_of.items()}
    done_events: dict[int, simpy.Event] = {}
    faults = plan.faults
    code = plan.hierarchy.option_code

    def semantic(data: bytes) -> bool:
        """Whether a query carries the intent option (servers' costly class)."""
        view = parse_query(data)
        return view is not None and any(c == code for c, _ in view.options)

    load = out.load
    role_of = plan.role_of
    one_way = plan.path.one_way  # type: ignore[attr-defined]
    timeout = env.timeout
    head = {"udp": IPV4 + UDP, "tcp": IPV4 + TCP + 2}  # IP + transport (+ TCP length field)
    dot = plan.dot
    if dot is not None:  # + one TLS record's overhead around the length field and message
        head["tls"] = IPV4 + TCP_TS + 2 + dot.sizes.record_overhead  # type: ignore[attr-defined]
    # DNS over TLS: resolver -> server -> [connection number, last traffic time]
    dot_conns: dict[str, OrderedDict[str, list]] = {}
    dot_ids = [0]  # connections opened so far (numbers them)
    # (kind, processing time) per address; the costly classes are told apart only when
    # they have their own time (or are being measured)
    base = {ip: ("agent", plan.agent_time) for ip in plan.agents}
    base.update({ip: ("resolver", plan.resolver_time) for ip in plan.resolvers})
    base.update({ip: ("server", plan.server_time) for ip in servers})
    split_server = plan.server_semantic_time is not None or plan.measure is not None
    split_stub = plan.resolver_stub_time is not None or plan.measure is not None

    def bump(address: str, packets: str, octets: str, size: int) -> None:
        """``out.count`` for one packet and its bytes, inlined (twice per message)."""
        node = load.get(address)
        if node is None:
            node = load[address] = {}
        node[packets] = node.get(packets, 0) + 1
        node[octets] = node.get(octets, 0) + size

    def transmit(src: str, msg: Outgoing) -> None:
        dst = msg.dst[0]
        data, transport = msg.data, msg.transport
        size = head[transport] + len(data)
        bump(src, "tx_packets", "tx_bytes", size)
        delay = one_way(role_of[src], role_of[dst], size, rng)
        if faults is not None:  # sim.build.faults: crashed, partitioned, lossy, slow, delayed
            delay = faults.fate(src, dst, env.now, delay)
        if delay is None:
            out.lost += 1
            return
        if transport == "tcp" and not msg.reply:  # SYN and SYN-ACK before the query
            delay += handshake(role_of[src], role_of[dst])
        elif transport == "tls":
            delay += dot_connection(src, dst, msg)
        sender = (src, port_of.get(src, plan.dns_port))
        timeout(delay).callbacks.append(lambda _e: deliver(dst, data, sender, transport))

    def handshake(a: str, b: str) -> float:
        total = 0.0
        for x, y in ((a, b), (b, a)):
            out.count(ip_of[x], "tx_packets")
            out.count(ip_of[x], "tx_bytes", IPV4 + TCP)
            d = plan.path.one_way(x, y, IPV4 + TCP, rng)
            while d is None:  # a lost SYN or SYN-ACK is sent again after the initial RTO
                total += SYN_RTO
                d = plan.path.one_way(x, y, IPV4 + TCP, rng)
            out.count(ip_of[y], "rx_packets")
            out.count(ip_of[y], "rx_bytes", IPV4 + TCP)
            total += d
        return total

    def dot_connection(src: str, dst: str, msg: Outgoing) -> float:
        """Delay before a DNS-over-TLS message leaves: the handshakes when the resolver has
        no open connection to the server (a reply only refreshes its connection)."""
        now = env.now
        if msg.reply:  # server -> resolver
            entry = dot_conns.get(dst, {}).get(src)
            if entry is not None:
                entry[1] = now
            return 0.0
        table = dot_conns.setdefault(src, OrderedDict())
        entry = table.get(dst)
        if entry is not None and now - entry[1] > dot.idle:  # type: ignore[union-attr]
            del table[dst]  # closed by the idle timeout
            out.count(src, "dot_closed")
            entry = None
        step = msg.step
        if entry is not None:
            table.move_to_end(dst)
            entry[1] = now
            if step is not None:
                step.conn = entry[0]
            return 0.0
        if len(table) >= dot.max_connections:  # type: ignore[union-attr]
            table.popitem(last=False)  # the least recently used
            out.count(src, "dot_closed")
        out.count(src, "dot_opened")
        conn = dot_ids[0] = dot_ids[0] + 1
        table[dst] = [conn, now]
        if step is not None:
            step.conn, step.opened = conn, True
        sizes = dot.sizes  # type: ignore[union-attr]
        total = handshake(role_of[src], role_of[dst])
        for x, y, size in ((src, dst, sizes.client_hello), (dst, src, sizes.server_flight)):
            d = one_way(role_of[x], role_of[y], IPV4 + TCP_TS + size, rng)
            while d is None:  # a lost flight is sent again after the initial RTO
                total += SYN_RTO
                d = one_way(role_of[x], role_of[y], IPV4 + TCP_TS + size, rng)
            bump(x, "tx_packets", "tx_bytes", IPV4 + TCP_TS + size)
            bump(y, "rx_packets", "rx_bytes", IPV4 + TCP_TS + size)
            total += d
        return total

    def deliver(dst: str, data: bytes, src: tuple[str, int], transport: str) -> None:
        bump(dst, "rx_packets", "rx_bytes", len(data) + head[transport])
        server = servers.get(dst)
        kind, cost = base.get(dst, ("agent", plan.agent_time))
        if server is not None:
            if split_server and semantic(data):
                kind = "server_semantic"  # ranking (and maybe embedding) costs more
                if plan.server_semantic_time is not None:
                    cost = plan.server_semantic_time
        elif kind == "resolver" and split_stub and src[0] in plan.agents:
            kind = "resolver_stub"  # starts a walk (and may embed the intent)
            if plan.resolver_stub_time is not None:
                cost = plan.resolver_stub_time
        start = max(env.now, busy.get(dst, 0.0))
        busy[dst] = start + cost

        def process(_e: object = None) -> None:
            now = env.now
            t = perf_counter() if plan.measure is not None else 0.0
            if server is not None:
                reply = server.handle(data, src, now, transport)
                if plan.measure is not None:
                    plan.measure.setdefault(kind, []).append(perf_counter() - t)
                if reply is not None:
                    transmit(dst, Outgoing(reply, src, transport, reply=True))  # type: ignore[arg-type]
                return
            node = nodes.get(dst)
            if node is not None:
                node.receive(data, src, now, transport)  # type: ignore[arg-type]
                if plan.measure is not None:
                    plan.measure.setdefault(kind, []).append(perf_counter() - t)
                pump(dst)

        if start + cost <= env.now:
            process()
        else:
            env.timeout(start + cost - env.now).callbacks.append(process)

    def pump(ip: str) -> None:
        node = nodes[ip]
        for msg in node.to_send():
            transmit(ip, msg)
        if ip in plan.resolvers:
            out.add_walks(plan.resolvers[ip].pop_results())
        else:
            for stub in plan.agents[ip].pop_done():
                job = stub.tag
                out.add_stub(job, stub)  # type: ignore[arg-type]
                ev = done_events.pop(job.index, None)  # type: ignore[attr-defined]
                if ev is not None:
                    ev.succeed()
        when = node.next_timer()
        if when is not None and armed.get(ip) != when:
            armed[ip] = when
            env.timeout(max(0.0, when - env.now)).callbacks.append(
                lambda _e, ip=ip, when=when: fire(ip, when))

    def fire(ip: str, when: float) -> None:
        if armed.get(ip) != when:
            return  # superseded by an earlier or later deadline
        del armed[ip]
        nodes[ip].on_timer(env.now)
        pump(ip)

    # K = 0 warming before the workload
    if plan.warm_services:
        for ip, resolver in plan.resolvers.items():
            for service in plan.warm_services:
                resolver.warm(service, env.now)
            pump(ip)
        env.run()
        out.warm_time = env.now
    t0 = env.now
    if faults is not None:
        faults.start(t0)
    if plan.churn is not None:  # sim.build.churn: tools change at their workload times
        for at, apply in plan.churn.timeline(plan):  # type: ignore[attr-defined]
            timeout(t0 + at - env.now).callbacks.append(lambda _e, apply=apply: apply(env.now))

    def ask(job: Job) -> None:
        ip = plan.agent_order[job.agent]
        out.schedule_error.append(0.0)
        start = max(env.now, busy.get(ip, 0.0))  # the query leaves after the agent's work
        busy[ip] = start + plan.agent_time

        def go(_e: object = None) -> None:
            t = perf_counter()
            plan.agents[ip].ask(job, plan.requests[job.index], env.now)
            if plan.measure is not None:
                plan.measure.setdefault("agent", []).append(perf_counter() - t)
            pump(ip)

        if start + plan.agent_time <= env.now:
            go()
        else:
            env.timeout(start + plan.agent_time - env.now).callbacks.append(go)

    replay(env, plan, ask, done_events, t0)
    env.run()
    out.end_time = env.now
    for ip, table in dot_conns.items():  # DNS over TLS: still open at the end, closed now
        if table:
            out.count(ip, "dot_closed", len(table))
    return out


def run_http_simpy(plan: RunPlan) -> EngineOutput:
    """A registry scheme: agents talk HTTP/1.1 (optionally over TLS) to one registry host.

    Connection set-up costs the TCP handshake (and the TLS 1.3 flights) in delay; each
    request and response travels as one message of its real bytes (TLS records added);
    wire packets and bytes come from :func:`sim.accounting.http_cost`. ``processing.registry``
    (modelled search time) delays each answer to a search request without occupying the
    registry (the app's ``searches()`` counter tells which requests searched).
    """
    from nodes.registry.server import RegistryServer
    from sim.accounting import TCP_SYN, TCP_TS
    from sim.build.faults import registry_address, registry_order

    env = simpy.Environment()
    rng = np.random.default_rng(
        [plan.seed, 1] if plan.shard is None else [plan.seed, 1, plan.shard])
    out = EngineOutput(on_stub=plan.on_stub)
    reg = plan.registry
    server, rip = reg.server, reg.address  # type: ignore[attr-defined]
    tls = plan.tls
    faults = plan.faults
    if faults is not None:
        faults.start(0.0)
    hosts = {registry_address(i): server if i == 0 else  # replicas share the application
             RegistryServer(server.app, name=f"{server.name}-{i}")
             for i in range(plan.registry_replicas)}
    host_of: dict[tuple[str, int], str] = {}  # (agent, connection) -> replica it reached
    agent_index = {ip: i for i, ip in enumerate(plan.agent_order)}
    busy: dict[str, float] = {}
    armed: dict[str, float] = {}
    done_events: dict[int, simpy.Event] = {}
    search = plan.registry_time  # processing.registry (modelled), per search request
    app = server.app

    def one_way(src: str, dst: str, size: int, rto: float) -> float:
        total = 0.0
        out.count(src, "tx_packets")
        out.count(src, "tx_bytes", size)
        d = plan.path.one_way(plan.role_of[src], plan.role_of[dst], size, rng)
        if faults is not None:
            d = faults.fate(src, dst, env.now, d, crashes=False)
        while d is None:  # TCP retransmits a lost segment after its timeout
            out.lost += 1
            total += rto
            d = plan.path.one_way(plan.role_of[src], plan.role_of[dst], size, rng)
            if faults is not None:
                if total > TCP_GIVE_UP:  # a partition that outlasts TCP: the peer is gone
                    return d if d is not None else total
                d = faults.fate(src, dst, env.now + total, d, crashes=False)
        out.count(dst, "rx_packets")
        out.count(dst, "rx_bytes", size)
        return total + d

    def refused(host: str, ip: str, at: float) -> bool:
        """Is registry replica ``host`` down when a segment reaches it (RST comes back)?"""
        return faults is not None and faults.down(host, at)

    def reset(ip: str, conn: int, host: str, d: float) -> None:
        """The segment met a crashed replica: its RST reaches the agent after ``d`` more."""
        later(d + one_way(host, ip, IPV4 + TCP_SYN, 0.2), closed, ip, conn)

    def closed(ip: str, conn: int) -> None:
        host_of.pop((ip, conn), None)
        plan.agents[ip].closed(conn, env.now)  # type: ignore[attr-defined]
        pump(ip)

    def wire(payload: int) -> int:
        return IPV4 + TCP_TS + (tls.records(payload) if tls is not None else payload)  # type: ignore[attr-defined]

    def later(delay: float, fn, *args) -> None:  # type: ignore[no-untyped-def]
        env.timeout(delay).callbacks.append(lambda _e: fn(*args))

    def pump(ip: str) -> None:
        agent = plan.agents[ip]
        for act in agent.to_send():  # type: ignore[attr-defined]
            if act.kind == "open":  # each replica address in turn, as create_connection
                d = 0.0
                for host in registry_order(plan.registry_replicas, agent_index[ip]):
                    d += one_way(ip, host, IPV4 + TCP_SYN, SYN_RTO)
                    if refused(host, ip, env.now + d):
                        d += one_way(host, ip, IPV4 + TCP_SYN, 0.2)  # RST
                        continue
                    d += one_way(host, ip, IPV4 + TCP_SYN, SYN_RTO)
                    if tls is not None:  # ClientHello → server flight (1 RTT more)
                        d += one_way(ip, host, IPV4 + TCP_TS + tls.client_hello, 0.2)  # type: ignore[attr-defined]
                        d += one_way(host, ip, IPV4 + TCP_TS + tls.server_flight, 0.2)  # type: ignore[attr-defined]
                    host_of[(ip, act.conn)] = host
                    later(d, connected, ip, act.conn)
                    break
                else:
                    later(d, closed, ip, act.conn)  # every replica refused
            elif act.kind == "send":
                host = host_of.get((ip, act.conn), rip)
                d = one_way(ip, host, wire(len(act.data)), 0.2)
                if refused(host, ip, env.now + d):
                    reset(ip, act.conn, host, d)
                else:
                    later(d, to_server, ip, act.conn, act.data)
            else:
                host = host_of.pop((ip, act.conn), rip)
                later(one_way(ip, host, IPV4 + TCP_TS, 0.2), to_server, ip, act.conn, b"",
                      host)
        for result in agent.pop_done():  # type: ignore[attr-defined]
            out.add_stub(result.tag, result)
            ev = done_events.pop(result.tag.index, None)
            if ev is not None:
                ev.succeed()
        when = agent.next_timer()
        if when is not None and armed.get(ip) != when:
            armed[ip] = when
            later(max(0.0, when - env.now), fire, ip, when)

    def fire(ip: str, when: float) -> None:
        if armed.get(ip) == when:
            del armed[ip]
            plan.agents[ip].on_timer(env.now)
            pump(ip)

    def connected(ip: str, conn: int) -> None:
        plan.agents[ip].connected(conn, env.now)  # type: ignore[attr-defined]
        pump(ip)

    def to_server(ip: str, conn: int, data: bytes, host: str | None = None) -> None:
        host = host or host_of.get((ip, conn), rip)
        start = max(env.now, busy.get(host, 0.0))
        busy[host] = start + plan.server_time

        def process(_e: object = None) -> None:
            t = perf_counter()
            if refused(host, ip, env.now):  # crashed while the request was queued
                if data:
                    reset(ip, conn, host, 0.0)
                return
            searched = app.searches() if search else 0
            reply, _close = hosts[host].receive((ip, conn), data, env.now)
            if plan.measure is not None:
                plan.measure.setdefault("server", []).append(perf_counter() - t)
            if reply:
                d = one_way(host, ip, wire(len(reply)), 0.2)
                if search and app.searches() > searched:  # modelled search: delays
                    d += search  # the answer to a search request, holds no CPU
                later(d, to_agent, ip, conn, reply)

        later(start + plan.server_time - env.now, process)

    def to_agent(ip: str, conn: int, data: bytes) -> None:
        start = max(env.now, busy.get(ip, 0.0))
        busy[ip] = start + plan.agent_time

        def process() -> None:
            plan.agents[ip].receive(conn, data, env.now)  # type: ignore[attr-defined]
            pump(ip)

        later(start + plan.agent_time - env.now, process)

    def ask(job: Job) -> None:
        ip = plan.agent_order[job.agent]
        out.schedule_error.append(0.0)
        plan.agents[ip].ask(job, plan.requests[job.index], env.now)
        pump(ip)

    if plan.churn is not None:  # sim.build.churn: the registry's index changes at these times
        for at, apply in plan.churn.timeline(plan):  # type: ignore[attr-defined]
            later(at, apply, at)
    replay(env, plan, ask, done_events, 0.0)
    env.run()
    out.end_time = env.now
    return out
