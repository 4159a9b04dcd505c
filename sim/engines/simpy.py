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

import heapq
import itertools
from collections.abc import Callable, Generator, Iterator
from functools import partial
from time import perf_counter
from typing import cast

import numpy as np
import simpy
from mypy_extensions import mypyc_attr
from simpy.events import NORMAL

from nodes.agent.session import DnsAgent
from nodes.authoritative.server import AuthoritativeServer
from nodes.dns.codec import parse_query
from nodes.dns.wire import parse_intent_qname
from nodes.registry.base import Routes
from nodes.resolver.core import RecursiveResolver
from nodes.resolver.types import Outgoing, Step, Transport
from sim.accounting import IPV4, TCP, TCP_SYN, TCP_TS, UDP, TlsSizes
from sim.build.faults import registry_address, registry_order
from sim.build.runplan import AGENT_PORT, RunPlan, StubSink
from sim.build.workload import Job, Jobs, jobs_of
from sim.engines.base import EngineOutput
from sim.sockets.dotpool import DotConnection, DotPool
from topologies.gcpause import gc_paused
from topologies.uniforms import Uniforms

SYN_RTO = 1.0  # Linux initial retransmission timeout for SYN (RFC 6298 §2.1)
TCP_GIVE_UP = 60.0  # seconds of retransmissions after which a connection is dead (faults)
TX, RX = 0, 2  # DnsRun.traffic: [TX] packets sent, [TX + 1] their bytes; RX the same received


Callback = Callable[[simpy.Event], None]


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class _Call:
    """A bare simpy event for the message path: ``Environment.step`` pops it and runs its
    callbacks, as it would a Timeout's (same heap entry: time, priority NORMAL, next ID),
    without the Timeout's constructor or a closure per message."""

    __slots__ = ("callbacks",)
    _ok = True  # never fails (simpy's step checks it)
    callbacks: tuple[Callable[[object], None], ...] | None


def replay(env: simpy.Environment, plan: RunPlan, ask: Callable[[Job], None],
           done_events: dict[int, simpy.Event], t0: float) -> None:
    """Schedule the workload: each agent's jobs one after another (closed loop; the
    engine succeeds ``done_events[job]`` when a job finishes) or at their times from t0."""
    if plan.closed_loop:
        def agent_loop(jobs: Iterator[Job]) -> Generator[simpy.Event, object, None]:
            for job in jobs:  # made one at a time (workload.Jobs), not held for the run
                done = done_events[job.index] = env.event()
                ask(job)
                yield done
                if job.think:
                    yield env.timeout(job.think)

        for a in range(len(plan.agent_order)):
            env.process(agent_loop(jobs_of(plan.jobs, a)))
    else:
        # Open loop. A timeout per job scheduled now would hold a simpy event per job
        # (~640 bytes: 600 MiB for 10^6 jobs). Each job's timer is pushed when the one
        # before it in time fires instead, under the time and event id it would have had
        # now (the ids are reserved): as keys are unique, every event pops in the same
        # order as with all the timeouts scheduled at once.
        jobs, n = plan.jobs, len(plan.jobs)
        if not n:
            return
        now, first = env.now, next(env._eid)
        env._eid = itertools.count(first + n)  # ids first .. first + n - 1: the jobs'

        def at(job: Job) -> float:
            assert job.at is not None  # open loop: every job has its time
            return now + (t0 + job.at - now)  # as env.timeout(t0 + job.at - now) has it

        # workload.Jobs are in time order (a phase starts after the last job of the one
        # before); a list may not be (churn's probes are appended after the workload)
        order = iter(range(n) if isinstance(jobs, Jobs)
                     else sorted(range(n), key=lambda i: (at(jobs[i]), i)))

        def push(i: int) -> None:
            job = jobs[i]
            _JobTimer(env, at(job), first + i).callbacks.append(fire(job))

        def fire(job: Job) -> Callback:
            def go(_e: simpy.Event) -> None:
                following = next(order, None)
                if following is not None:
                    push(following)
                ask(job)
            return go

        push(next(order))


class _JobTimer(simpy.Event):
    """A timeout at ``at`` under event id ``eid``: what :meth:`simpy.Environment.schedule`
    does for a :class:`simpy.Timeout`, with an id reserved earlier instead of the next one
    (simpy's ``_queue`` entries are ``(time, priority, id, event)``, as since simpy 3;
    ``tests/sim/engines/test_simpy_replay.py`` checks the order against simpy's timeouts)."""

    def __init__(self, env: simpy.Environment, at: float, eid: int) -> None:
        self.env, self.callbacks = env, []
        self._value, self._ok = None, True  # triggered, like a Timeout, when it is pushed
        heapq.heappush(env._queue, (at, simpy.events.NORMAL, eid, self))


def run_simpy(plan: RunPlan, sink: StubSink | None = None) -> EngineOutput:
    """Run one scheme of ``plan`` in virtual time (the catalogue's entry point): instances
    of its nodes, every discovery told to ``sink`` as it ends.

    Without the cyclic garbage collector: a run makes almost no cyclic garbage (messages,
    steps and events are freed by reference counting; 32 objects were left for the
    collector after 2,000 and after 6,000 discoveries alike on the rate yardstick, a few
    thousand in some of quickstart's schemes), while each collection walks
    every live object of the namespace and servers — about 15 % of a run's time. The run
    loop (:func:`sim.run.runner.run_scheme`) keeps the collector off until what the run
    left behind is frozen, so that no collection walks it right after the run either."""
    with gc_paused():
        if plan.registry is not None:
            return HttpRun(plan, sink).run()
        return DnsRun(plan, sink).run()


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class DnsRun:
    """A ToolDNS scheme in virtual time: DNS messages between resolvers, servers and agents.

    Hot paths bind attributes to locals; a method reads ``self`` only where it has to.
    """

    def __init__(self, plan: RunPlan, sink: StubSink | None = None) -> None:
        self.plan = plan
        self.env = env = simpy.Environment()
        # network draws, the same for every scheme (a shard: its own), taken in blocks
        self.rng = Uniforms(np.random.default_rng(
            [plan.seed, 1] if plan.shard is None else [plan.seed, 1, plan.shard]))
        self.out = EngineOutput(on_stub=sink)
        self.run_nodes = nodes = plan.instantiate()
        # a calibration pre-run times node work with every reply computed
        self.measure: dict[str, list[float]] | None = {} if plan.measure else None
        if plan.measure:
            for server in nodes.servers.values():
                server.reply_memo = None
        self.resolvers = nodes.resolvers
        self.agents = nodes.dns_agents()
        self.traffic: dict[str, list[int]] = {}  # address -> tx/rx packets and bytes
        self.servers = servers = nodes.servers
        self.busy: dict[str, float] = {}
        self.armed: dict[str, float] = {}  # address -> when its timer fires (the earliest)
        self.horizon = 0.0  # the latest deadline a node has had: a phase ends there at least
        self.port_of = {ip: AGENT_PORT for ip in plan.agents}
        self.port_of.update({ip: plan.dns_port for ip in plan.resolvers})
        self.sender: dict[str, tuple[str, int]] = {}
        self.nodes: dict[str, RecursiveResolver | DnsAgent] = {**self.resolvers,
                                                              **self.agents}
        self.ip_of = {role: ip for ip, role in plan.role_of.items()}
        self.done_events: dict[int, simpy.Event] = {}
        self.faults = nodes.faults
        self.code = plan.hierarchy.option_code
        self.role_of = plan.role_of
        self.one_way = plan.path.one_way
        self.timeout = env.timeout
        # simpy's own scheduling (its queue, its event IDs) for the message path's _Call
        self.schedule = cast(Callable[[_Call, int, float], None], env.schedule)
        # IP + transport (+ TCP length field)
        self.head = {"udp": IPV4 + UDP, "tcp": IPV4 + TCP + 2}
        self.dot = dot = plan.dot
        if dot is not None:  # + one TLS record's overhead around the length field and message
            self.head["tls"] = IPV4 + TCP_TS + 2 + dot.sizes.record_overhead
        # DNS over TLS: each resolver's connections to the servers, numbered over the run
        self.dot_pools: dict[str, DotPool[str, DotConnection[str]]] = {}
        self.dot_numbers = itertools.count(1)
        # (kind, processing time) per address; the costly classes are told apart only when
        # they have their own time (or are being measured)
        self.base = {ip: ("agent", plan.agent_time) for ip in plan.agents}
        self.base.update({ip: ("resolver", plan.resolver_time) for ip in plan.resolvers})
        self.base.update({ip: ("server", plan.server_time) for ip in servers})
        # a semantic query's time per server address (processing server_semantic: a value,
        # or ``index``: each server's own; none: as any message)
        self.semantic_cost: dict[str, float] = (
            dict.fromkeys(servers, plan.server_semantic_time)
            if plan.server_semantic_time is not None else dict(plan.semantic_times or {}))
        self.split_server = bool(self.semantic_cost) or plan.measure
        self.zone_of = plan.hierarchy.zone_of
        self.split_stub = plan.resolver_stub_time is not None or plan.measure
        # address -> (its server, its node, kind, processing time): deliver's lookups, once
        self.dest: dict[str, tuple[AuthoritativeServer | None,
                                   RecursiveResolver | DnsAgent | None, str, float]] = {}

    def semantic(self, data: bytes, dst: str) -> bool:
        """Whether a query asks server ``dst`` to rank (servers' costly class): it carries
        the intent option, or its name is an intent name under the server's zone (the
        intent in the QNAME, as the records count a ranking pass)."""
        view = parse_query(data)
        if view is None:
            return False
        if any(c == self.code for c, _ in view.options):
            return True
        qname = str(view.qname)
        zone = self.zone_of.get(dst)
        return (qname[:1] in ("k", "K") and zone is not None
                and parse_intent_qname(qname, zone) is not None)

    def bump(self, address: str, slot: int, size: int) -> None:
        """One packet of ``size`` bytes sent (``slot`` :data:`TX`) or received (:data:`RX`)."""
        counts = self.traffic.get(address) or self.traffic_of(address)
        counts[slot] += 1
        counts[slot + 1] += size

    def traffic_of(self, address: str) -> list[int]:
        """``address``'s [tx packets, tx bytes, rx packets, rx bytes] (a new count)."""
        counts = self.traffic[address] = [0, 0, 0, 0]
        return counts

    def add_traffic(self) -> None:
        """Fold the packet and byte counts into the output's counters (once, at the end:
        only the run's totals are read)."""
        for address, counts in self.traffic.items():
            node = self.out.load.setdefault(address, {})
            for slot, packets, octets in ((TX, "tx_packets", "tx_bytes"),
                                          (RX, "rx_packets", "rx_bytes")):
                if counts[slot]:  # a node that never sent has no tx counters (as before)
                    node[packets] = node.get(packets, 0) + counts[slot]
                    node[octets] = node.get(octets, 0) + counts[slot + 1]
        self.traffic.clear()

    def transmit(self, src: str, msg: Outgoing) -> None:
        """Send ``msg`` from ``src`` (see :meth:`send`)."""
        self.send(src, msg.dst, msg.data, msg.transport, msg.reply, msg.step)

    def send(self, src: str, to: tuple[str, int], data: bytes, transport: Transport,
             reply: bool, step: Step | None) -> None:
        """Send ``data`` from ``src`` to ``to`` (an :class:`Outgoing`'s fields): its fate
        on the path now, its arrival later (the receiver's packet and bytes are counted now
        too: only the run's totals are read)."""
        dst = to[0]
        size = self.head[transport] + len(data)
        traffic = self.traffic  # self.bump, inlined (twice per message)
        counts = traffic.get(src) or self.traffic_of(src)
        counts[TX] += 1
        counts[TX + 1] += size
        role_of = self.role_of
        delay = self.one_way(role_of[src], role_of[dst], size, self.rng)
        faults = self.faults
        if faults is not None:  # sim.build.faults: crashed, partitioned, lossy, slow, delayed
            delay = faults.fate(src, dst, self.env.now, delay)
        if delay is None:
            self.out.lost += 1
            return
        if transport == "tcp" and not reply:  # SYN and SYN-ACK before the query
            delay += self.handshake(role_of[src], role_of[dst])
        elif transport == "tls":
            delay += self.dot_connection(src, dst, reply, step)
        counts = traffic.get(dst) or self.traffic_of(dst)
        counts[RX] += 1
        counts[RX + 1] += size
        sender = self.sender.get(src) or self.sender_of(src)
        if delay < 0:
            raise ValueError(f"Negative delay {delay}")
        ev = _Call()  # a Timeout(delay) calling deliver(dst, data, sender, transport)
        ev.callbacks = (partial(self.deliver, dst, data, sender, transport),)
        self.schedule(ev, NORMAL, delay)

    def sender_of(self, src: str) -> tuple[str, int]:
        """The (address, port) messages from ``src`` come from (kept)."""
        sender = self.sender[src] = (src, self.port_of.get(src, self.plan.dns_port))
        return sender

    def handshake(self, a: str, b: str) -> float:
        ip_of, rng, one_way, bump = self.ip_of, self.rng, self.plan.path.one_way, self.bump
        total = 0.0
        for x, y in ((a, b), (b, a)):
            bump(ip_of[x], TX, IPV4 + TCP)
            d = one_way(x, y, IPV4 + TCP, rng)
            while d is None:  # a lost SYN or SYN-ACK is sent again after the initial RTO
                total += SYN_RTO
                d = one_way(x, y, IPV4 + TCP, rng)
            bump(ip_of[y], RX, IPV4 + TCP)
            total += d
        return total

    def dot_connection(self, src: str, dst: str, reply: bool, step: Step | None) -> float:
        """Delay before a DNS-over-TLS message leaves: the handshakes when the resolver has
        no open connection to the server (a reply only refreshes its connection; ``step``:
        the query's exchange, annotated with its connection)."""
        now = self.env.now
        if reply:  # server -> resolver
            replied = self.dot_pools.get(dst)
            if replied is not None:
                replied.touch(src, now)
            return 0.0
        dot = self.dot
        assert dot is not None
        pool = self.dot_pools.get(src)
        if pool is None:
            pool = self.dot_pools[src] = DotPool(
                dot.idle, dot.max_connections, self.dot_numbers, DotConnection)
        conn, opened, closed = pool.use(dst, now)
        out = self.out
        for _conn, _why in closed:
            out.count(src, "dot_closed")
        if not opened:
            if step is not None:
                step.conn = conn.number
            return 0.0
        out.count(src, "dot_opened")
        if step is not None:
            step.conn, step.opened = conn.number, True
        return self.tls_flights(src, dst, dot.sizes)

    def tls_flights(self, src: str, dst: str, sizes: TlsSizes) -> float:
        """The TCP handshake, then ClientHello and the server flight (lost: sent again)."""
        role_of, one_way, rng, bump = self.role_of, self.one_way, self.rng, self.bump
        total = self.handshake(role_of[src], role_of[dst])
        for x, y, size in ((src, dst, sizes.client_hello), (dst, src, sizes.server_flight)):
            d = one_way(role_of[x], role_of[y], IPV4 + TCP_TS + size, rng)
            while d is None:  # a lost flight is sent again after the initial RTO
                total += SYN_RTO
                d = one_way(role_of[x], role_of[y], IPV4 + TCP_TS + size, rng)
            bump(x, TX, IPV4 + TCP_TS + size)
            bump(y, RX, IPV4 + TCP_TS + size)
            total += d
        return total

    def deliver(self, dst: str, data: bytes, src: tuple[str, int], transport: Transport,
                _event: object = None) -> None:
        """``data`` reaches ``dst``: handled now if it is idle, else when its queue is."""
        plan, env = self.plan, self.env
        server, node, kind, cost = self.dest.get(dst) or self.dest_of(dst)
        if server is not None:
            if self.split_server and self.semantic(data, dst):
                kind = "server_semantic"  # ranking (and maybe embedding) costs more
                cost = self.semantic_cost.get(dst, cost)
        elif kind == "resolver" and self.split_stub and src[0] in plan.agents:
            kind = "resolver_stub"  # starts a walk (and may embed the intent)
            if plan.resolver_stub_time is not None:
                cost = plan.resolver_stub_time
        busy = self.busy
        now = env.now
        start = max(now, busy.get(dst, 0.0))
        busy[dst] = start + cost
        if start + cost <= now:
            self.process(dst, data, src, transport, server, node, kind)
        else:
            ev = _Call()  # a Timeout calling process(...) when dst's queue reaches data
            ev.callbacks = (partial(self.process, dst, data, src, transport, server, node,
                                    kind),)
            self.schedule(ev, NORMAL, start + cost - now)

    def dest_of(self, dst: str) -> tuple[AuthoritativeServer | None,
                                         RecursiveResolver | DnsAgent | None, str, float]:
        """What :meth:`deliver` needs to know of an address (kept)."""
        kind, cost = self.base.get(dst, ("agent", self.plan.agent_time))
        server = self.servers.get(dst)
        entry = self.dest[dst] = (server, None if server is not None else self.nodes.get(dst),
                                  kind, cost)
        return entry

    def process(self, dst: str, data: bytes, src: tuple[str, int], transport: Transport,
                server: AuthoritativeServer | None,
                node: RecursiveResolver | DnsAgent | None, kind: str,
                _event: object = None) -> None:
        """``dst`` handles ``data`` once its queue reaches it (``server``: authoritative,
        else ``node``, a resolver or agent)."""
        now = self.env.now
        measure = self.measure
        t = perf_counter() if measure is not None else 0.0
        if server is not None:
            reply = server.handle(data, src, now, transport)
            if measure is not None:
                measure.setdefault(kind, []).append(perf_counter() - t)
            if reply is not None:
                self.send(dst, src, reply, transport, True, None)
            return
        if node is not None:
            node.receive(data, src, now, transport)
            if measure is not None:
                measure.setdefault(kind, []).append(perf_counter() - t)
            self.pump(dst)

    def pump(self, ip: str) -> None:
        node = self.nodes[ip]
        send = self.send
        for msg in node.to_send():
            send(ip, msg.dst, msg.data, msg.transport, msg.reply, msg.step)
        out = self.out
        resolver = self.resolvers.get(ip)
        if resolver is not None:
            out.add_walks(resolver.pop_results())
        else:
            done_events = self.done_events
            for stub in self.agents[ip].pop_done():
                job = stub.tag
                assert isinstance(job, Job)  # the tag go() asked with
                out.add_stub(job, stub)
                ev = done_events.pop(job.index, None)
                if ev is not None:
                    ev.succeed()
        when = node.next_timer()
        if when is not None:
            if when > self.horizon:
                self.horizon = when
            armed = self.armed
            at = armed.get(ip)
            if at is None or when < at:  # a later deadline waits for the armed timer
                armed[ip] = when
                fire = self.fire
                self.timeout(max(0.0, when - self.env.now)).callbacks.append(
                    lambda _e: fire(ip, when))

    def fire(self, ip: str, when: float) -> None:
        """The node's timer at ``when``: its expired deadlines (none, when the ones it was
        armed for were met), then the next timer is armed."""
        armed = self.armed
        if armed.get(ip) != when:
            return  # superseded by an earlier deadline
        del armed[ip]
        self.nodes[ip].on_timer(self.env.now)
        self.pump(ip)

    def ask(self, job: Job) -> None:
        plan, env = self.plan, self.env
        ip = plan.agent_order[job.agent]
        self.out.schedule_error.append(0.0)
        start = max(env.now, self.busy.get(ip, 0.0))  # the query leaves after the agent's work
        self.busy[ip] = start + plan.agent_time
        if start + plan.agent_time <= env.now:
            self.go(ip, job)
        else:
            go = self.go
            env.timeout(start + plan.agent_time - env.now).callbacks.append(
                lambda _e: go(ip, job))

    def go(self, ip: str, job: Job) -> None:
        """Agent ``ip`` sends ``job``'s query (its own processing is over)."""
        plan = self.plan
        t = perf_counter()
        self.agents[ip].ask(job, plan.requests[job.index], self.env.now)
        if self.measure is not None:
            self.measure.setdefault("agent", []).append(perf_counter() - t)
        self.pump(ip)

    def run(self) -> EngineOutput:
        """K = 0 warming, then the workload (faults and churn on its clock) to the end."""
        plan, env, out = self.plan, self.env, self.out
        nodes = self.run_nodes
        if plan.warm_services:
            for ip, resolver in self.resolvers.items():
                for service in plan.warm_services:
                    resolver.warm(service, env.now)
                self.pump(ip)
            self.settle()
            out.warm_time = env.now
        t0 = env.now
        if self.faults is not None:
            self.faults.start(t0)
        if plan.churn is not None:  # sim.build.churn: tools change at their workload times
            for at, apply in plan.churn.timeline(nodes.servers, plan.hierarchy.zone_of, None,
                                                 nodes.churn_applied):
                self.timeout(t0 + at - env.now).callbacks.append(self.now_to(apply))
        replay(env, plan, self.ask, self.done_events, t0)
        self.settle()
        out.end_time = env.now
        self.add_traffic()
        for ip, pool in self.dot_pools.items():  # DNS over TLS: still open at the end, closed
            if len(pool):
                out.count(ip, "dot_closed", len(pool))
        out.observe(nodes)
        if self.measure is not None:
            out.measured = self.measure
        return out

    def settle(self) -> None:
        """Run until nothing is left to happen, then on to the latest deadline a node had:
        a phase (warming, the workload) ends when the last query's timeout would have
        fired, answered or not, so its end does not depend on how timers are armed."""
        env = self.env
        env.run()
        if self.horizon > env.now:
            env.run(until=self.horizon)

    def now_to(self, apply: Callable[[float], None]) -> Callback:
        """A timeout callback calling ``apply`` with the time it fires at."""
        env = self.env
        return lambda _e: apply(env.now)


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class HttpRun:
    """A registry scheme: agents talk HTTP/1.1 (optionally over TLS) to one registry host.

    Connection set-up costs the TCP handshake (and the TLS 1.3 flights) in delay; each
    request and response travels as one message of its real bytes (TLS records added);
    wire packets and bytes come from :func:`sim.accounting.http_cost`. ``processing.registry``
    (modelled search time) delays each answer to a search request without occupying the
    registry (the app's ``searches()`` counter tells which requests searched).
    """

    def __init__(self, plan: RunPlan, sink: StubSink | None = None) -> None:
        from nodes.registry.server import RegistryServer

        self.plan = plan
        self.env = simpy.Environment()
        self.rng = Uniforms(np.random.default_rng(
            [plan.seed, 1] if plan.shard is None else [plan.seed, 1, plan.shard]))
        self.out = EngineOutput(on_stub=sink)
        self.run_nodes = nodes = plan.instantiate()
        self.measure: dict[str, list[float]] | None = {} if plan.measure else None
        reg = nodes.registry
        assert reg is not None  # run_simpy: a registry scheme
        self.agents = nodes.registry_agents()
        server = reg.server
        self.rip: str = reg.address
        self.tls = plan.tls
        self.faults = nodes.faults
        if self.faults is not None:
            self.faults.start(0.0)
        self.hosts = {registry_address(i): server if i == 0 else  # replicas share the app
                      RegistryServer(server.app, name=f"{server.name}-{i}")
                      for i in range(plan.registry_replicas)}
        self.host_of: dict[tuple[str, int], str] = {}  # (agent, connection) -> its replica
        self.agent_index = {ip: i for i, ip in enumerate(plan.agent_order)}
        self.busy: dict[str, float] = {}
        self.armed: dict[str, float] = {}
        self.done_events: dict[int, simpy.Event] = {}
        self.search = plan.registry_time  # processing.registry (modelled), per search request
        self.search_cost = plan.registry_cost  # or ``index``: by the items each search scored
        self.searches: Callable[[], int] | None = None  # the app's counter, when modelled
        self.scored: Callable[[], int] = int  # the app's items-scored counter (index)
        if self.search or self.search_cost is not None:
            app = server.app
            assert isinstance(app, Routes)  # a search time needs the app's search counter
            self.searches, self.scored = app.searches, app.scored

    def one_way(self, src: str, dst: str, size: int, rto: float) -> float:
        """One segment's delay, with TCP's retransmissions of a lost one after ``rto``."""
        out, plan, faults, now = self.out, self.plan, self.faults, self.env.now
        total = 0.0
        out.count(src, "tx_packets")
        out.count(src, "tx_bytes", size)
        d = plan.path.one_way(plan.role_of[src], plan.role_of[dst], size, self.rng)
        if faults is not None:
            d = faults.fate(src, dst, now, d, crashes=False)
        while d is None:  # TCP retransmits a lost segment after its timeout
            out.lost += 1
            total += rto
            d = plan.path.one_way(plan.role_of[src], plan.role_of[dst], size, self.rng)
            if faults is not None:
                if total > TCP_GIVE_UP:  # a partition that outlasts TCP: the peer is gone
                    return d if d is not None else total
                d = faults.fate(src, dst, now + total, d, crashes=False)
        out.count(dst, "rx_packets")
        out.count(dst, "rx_bytes", size)
        return total + d

    def refused(self, host: str, at: float) -> bool:
        """Is registry replica ``host`` down when a segment reaches it (RST comes back)?"""
        return self.faults is not None and self.faults.down(host, at)

    def reset(self, ip: str, conn: int, host: str, d: float) -> None:
        """The segment met a crashed replica: its RST reaches the agent after ``d`` more."""
        self.later(d + self.one_way(host, ip, IPV4 + TCP_SYN, 0.2), self.closed, ip, conn)

    def closed(self, ip: str, conn: int) -> None:
        self.host_of.pop((ip, conn), None)
        self.agents[ip].closed(conn, self.env.now)
        self.pump(ip)

    def wire(self, payload: int) -> int:
        tls = self.tls
        return IPV4 + TCP_TS + (tls.records(payload) if tls is not None else payload)

    def later(self, delay: float, fn: Callable[..., None], *args: object) -> None:
        self.env.timeout(delay).callbacks.append(lambda _e: fn(*args))

    def open(self, ip: str, conn: int) -> None:
        """Connect to each replica address in turn, as ``socket.create_connection`` does."""
        tls, now, one_way = self.tls, self.env.now, self.one_way
        d = 0.0
        for host in registry_order(self.plan.registry_replicas, self.agent_index[ip]):
            d += one_way(ip, host, IPV4 + TCP_SYN, SYN_RTO)
            if self.refused(host, now + d):
                d += one_way(host, ip, IPV4 + TCP_SYN, 0.2)  # RST
                continue
            d += one_way(host, ip, IPV4 + TCP_SYN, SYN_RTO)
            if tls is not None:  # ClientHello → server flight (1 RTT more)
                d += one_way(ip, host, IPV4 + TCP_TS + tls.client_hello, 0.2)
                d += one_way(host, ip, IPV4 + TCP_TS + tls.server_flight, 0.2)
            self.host_of[(ip, conn)] = host
            self.later(d, self.connected, ip, conn)
            return
        self.later(d, self.closed, ip, conn)  # every replica refused

    def pump(self, ip: str) -> None:
        agent = self.agents[ip]
        host_of, rip = self.host_of, self.rip
        for act in agent.to_send():
            if act.kind == "open":
                self.open(ip, act.conn)
            elif act.kind == "send":
                host = host_of.get((ip, act.conn), rip)
                d = self.one_way(ip, host, self.wire(len(act.data)), 0.2)
                if self.refused(host, self.env.now + d):
                    self.reset(ip, act.conn, host, d)
                else:
                    self.later(d, self.to_server, ip, act.conn, act.data)
            else:
                host = host_of.pop((ip, act.conn), rip)
                self.later(self.one_way(ip, host, IPV4 + TCP_TS, 0.2), self.to_server, ip,
                           act.conn, b"", host)
        for result in agent.pop_done():
            job = result.tag
            assert isinstance(job, Job)  # the tag ask() asked with
            self.out.add_stub(job, result)
            ev = self.done_events.pop(job.index, None)
            if ev is not None:
                ev.succeed()
        when = agent.next_timer()
        if when is not None and self.armed.get(ip) != when:
            self.armed[ip] = when
            self.later(max(0.0, when - self.env.now), self.fire, ip, when)

    def fire(self, ip: str, when: float) -> None:
        if self.armed.get(ip) == when:
            del self.armed[ip]
            self.agents[ip].on_timer(self.env.now)
            self.pump(ip)

    def connected(self, ip: str, conn: int) -> None:
        self.agents[ip].connected(conn, self.env.now)
        self.pump(ip)

    def to_server(self, ip: str, conn: int, data: bytes, host: str | None = None) -> None:
        host = host or self.host_of.get((ip, conn), self.rip)
        start = max(self.env.now, self.busy.get(host, 0.0))
        self.busy[host] = start + self.plan.server_time
        self.later(start + self.plan.server_time - self.env.now, self.serve, ip, conn, data,
                   host)

    def serve(self, ip: str, conn: int, data: bytes, host: str) -> None:
        """Replica ``host`` handles ``data`` from agent ``ip`` once its queue reaches it."""
        t = perf_counter()
        if self.refused(host, self.env.now):  # crashed while the request was queued
            if data:
                self.reset(ip, conn, host, 0.0)
            return
        searches, scored = self.searches, self.scored
        searched = searches() if searches is not None else 0
        items = scored()
        reply, _close = self.hosts[host].receive((ip, conn), data, self.env.now)
        if self.measure is not None:
            self.measure.setdefault("server", []).append(perf_counter() - t)
        if reply:
            d = self.one_way(host, ip, self.wire(len(reply)), 0.2)
            if searches is not None and searches() > searched:  # modelled search: delays
                # the answer to a search request, holds no CPU
                cost = self.search_cost
                d += self.search if cost is None else cost.search(scored() - items)
            self.later(d, self.to_agent, ip, conn, reply)

    def to_agent(self, ip: str, conn: int, data: bytes) -> None:
        start = max(self.env.now, self.busy.get(ip, 0.0))
        self.busy[ip] = start + self.plan.agent_time
        self.later(start + self.plan.agent_time - self.env.now, self.receive, ip, conn, data)

    def receive(self, ip: str, conn: int, data: bytes) -> None:
        self.agents[ip].receive(conn, data, self.env.now)
        self.pump(ip)

    def ask(self, job: Job) -> None:
        ip = self.plan.agent_order[job.agent]
        self.out.schedule_error.append(0.0)
        self.agents[ip].ask(job, self.plan.requests[job.index], self.env.now)
        self.pump(ip)

    def run(self) -> EngineOutput:
        plan, env, nodes = self.plan, self.env, self.run_nodes
        if plan.churn is not None:  # sim.build.churn: the registry's index changes then
            for at, apply in plan.churn.timeline({}, {}, nodes.registry, nodes.churn_applied):
                self.later(at, apply, at)
        replay(env, plan, self.ask, self.done_events, 0.0)
        env.run()
        self.out.end_time = env.now
        self.out.observe(nodes)
        if self.measure is not None:
            self.out.measured = self.measure
        return self.out
