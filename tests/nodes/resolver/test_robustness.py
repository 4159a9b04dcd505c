"""Hardening of the DNS side (issue 13): spoofing resistance (RFC 5452), bounded caches,
bounded TCP connections. Protocol cores first (no sockets), then the live adapters on
127.0.0.0/8 with real sockets, forged packets included (raw sockets need root; CI is root).
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
import struct
import time

import pytest
from dnslib import NS, QTYPE, RR, A, DNSHeader, DNSQuestion, DNSRecord

from nodes.agent.stub import StubAgent
from nodes.dns.cache import Entry, Store, footprint
from nodes.dns.wire import DEFAULT_OPTION_CODE, Intent, cursor_name, opt_record
from nodes.resolver.config import ResolverConfig
from nodes.resolver.core import RecursiveResolver
from nodes.resolver.types import Discovery
from sim.build.hierarchy import build_hierarchy
from sim.engines.memory import MemoryNetwork
from sim.sockets.hierarchy import LiveHierarchy
from sim.sockets.node import NodeEndpoint
from sim.sockets.server import ServerEndpoint
from sim.sockets.tcp import TcpLimits
from topologies.synthetic import synthetic

PORT = 21000 + os.getpid() % 20000
NS_ARGS = dict(n_tools=300, branching=3, depth=2, seed=5, n_queries=80)


def hierarchy():
    return build_hierarchy(synthetic(**NS_ARGS))


# ------------------------------------------------------------------ cores, no sockets


def test_store_evicts_least_recently_used_within_entry_and_byte_bounds() -> None:
    store = Store(max_entries=3, max_bytes=10**9)
    t = store.table("x")
    for k in "abc":
        t[k] = Entry(k, 1.0)
    assert t.get("a") is not None  # "a" is now the most recent: "b" goes first
    t["d"] = Entry("d", 1.0)
    assert [k for k in "abcd" if k in t] == ["a", "c", "d"]
    assert store.evictions == 1
    one = footprint(("k", 1)) + footprint("v" * 1000) + 120
    small = Store(max_entries=100, max_bytes=3 * one + 10)
    s = small.table("y")
    for i in range(10):
        s[("k", i)] = Entry("v" * 1000, 1.0)
        assert small.bytes <= small.max_bytes
    assert len(small) == 3 and small.evictions == 7
    assert small.evicted_bytes == 7 * one


def test_footprint_counts_what_objects_hold() -> None:
    assert footprint("x" * 10_000) > 10_000
    assert footprint(["x" * 10_000, "y" * 10_000]) > 20_000
    assert footprint({"a": ("x" * 5000,)}) > 5000


def test_resolver_memory_stays_within_its_cache_bound() -> None:
    ns = synthetic(**{**NS_ARGS, "n_queries": 300})
    h = build_hierarchy(ns)
    bound = 150_000
    net = MemoryNetwork(h, h.resolver(seed=1, config=ResolverConfig(cache_max_bytes=bound)))
    store = net.resolver.caches.store
    ok = 0
    for q in ns.queries:
        net.resolver.discover(Discovery(q.text, service=q.service, k=3), net.now)
        (result,) = net.run()
        ok += bool(result.endpoints)
        assert store.bytes <= bound
    assert ok == len(ns.queries)  # evicting cached data never breaks a walk
    assert store.evictions > 0
    unbounded = MemoryNetwork(h, h.resolver(seed=1))
    for q in ns.queries:
        unbounded.resolver.discover(Discovery(q.text, service=q.service, k=3), unbounded.now)
        unbounded.run()
    assert unbounded.resolver.caches.store.bytes > 2 * bound  # the bound did bind
    assert unbounded.resolver.caches.store.evictions == 0


def _pending_query(resolver: RecursiveResolver) -> tuple[int, bytes, tuple]:
    """Start a discovery; return the ID, bytes and server of its first upstream query."""
    resolver.discover(Discovery("weather forecast", k=1), 0.0)
    (out,) = resolver.to_send()
    return int.from_bytes(out.data[:2], "big"), out.data, out.dst


def test_resolver_accepts_only_the_answer_to_its_own_question() -> None:
    h = hierarchy()
    resolver = h.resolver(seed=3)
    qid, wire, server = _pending_query(resolver)
    genuine = h.servers[server[0]].handle(wire, ("127.0.53.1", 5353), 0.0, "udp")
    assert genuine is not None
    msg = DNSRecord.parse(genuine)

    def forged(**change) -> bytes:
        m = DNSRecord.parse(genuine)
        if "id" in change:
            m.header.id = change["id"]
        if "qname" in change:
            m.questions[0].qname = change["qname"]
        if "qtype" in change:
            m.questions[0].qtype = change["qtype"]
        if "qclass" in change:
            m.questions[0].qclass = change["qclass"]
        return m.pack()

    cases = [
        (forged(id=qid ^ 1), server, "udp", "unexpected_response"),
        (genuine, ("127.66.0.1", server[1]), "udp", "unexpected_response"),  # other source
        (genuine, (server[0], server[1] + 1), "udp", "unexpected_response"),  # other port
        (genuine, server, "tcp", "unexpected_response"),  # other transport
        (forged(qname="_mcp._tcp._evil.tools."), server, "udp", "mismatched_question"),
        (forged(qtype=QTYPE.A), server, "udp", "mismatched_question"),
        (forged(qclass=3), server, "udp", "mismatched_question"),
    ]
    for data, src, transport, counter in cases:
        before = resolver.stats[counter]
        resolver.receive(data, src, 0.01, transport)
        assert resolver.stats[counter] == before + 1, counter
        assert resolver.is_pending(qid)
        assert not resolver.to_send()  # nothing learned, walk not advanced
    resolver.receive(genuine, server, 0.02, "udp")
    assert not resolver.is_pending(qid) and resolver.to_send()  # the walk goes on
    assert msg.header.id == qid


def test_simulation_ids_come_from_the_seed() -> None:
    h = hierarchy()
    first = [_pending_query(h.resolver(seed=9))[0] for _ in range(2)]
    assert first[0] == first[1]  # same seed, same ID: simulation stays deterministic


def test_resolver_drops_stub_queries_beyond_max_clients() -> None:
    h = hierarchy()
    resolver = h.resolver(seed=1, config=ResolverConfig(max_clients=5))
    for i in range(20):
        q = DNSRecord(DNSHeader(id=i + 1, rd=1))
        q.add_question(DNSQuestion(cursor_name("mcp", "tools."), QTYPE.SRV))
        opt = opt_record(Intent(f"intent number {i}", k=1), DEFAULT_OPTION_CODE)
        q.add_ar(opt)
        resolver.receive(q.pack(), ("127.0.0.9", 4000 + i), 0.0, "udp")
    assert resolver.stats["client_dropped_overload"] == 15
    assert resolver._active_clients == 5


def test_packet_cache_is_bounded_in_bytes() -> None:
    h = hierarchy()
    server = next(s for s in h.servers.values() if "tools." in s.zones)
    server.packet_cache_size, server.packet_cache_bytes = 100_000, 200_000
    rng = random.Random(1)
    for i in range(400):  # distinct 6 kB intents over TCP: each a new cache key
        q = DNSRecord(DNSHeader(id=i))
        q.add_question(DNSQuestion(cursor_name("mcp", "tools."), QTYPE.SRV))
        text = " ".join(rng.choice(["weather", "maps", "tax"]) for _ in range(1000))
        q.add_ar(opt_record(Intent(text[:6000], k=1), DEFAULT_OPTION_CODE))
        assert server.handle(q.pack(), ("127.0.0.9", 5000), 0.0, "tcp") is not None
        assert server._cache_bytes <= 200_000
    assert 0 < len(server._cache) < 400
    assert server._cache_bytes == sum(len(k) + len(v[0]) + 220 for k, v in server._cache.items())


# ------------------------------------------------------------------ live, real sockets


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 120))


class _Spy:
    """A server seen through: the source port and ID of every UDP query it handles."""

    def __init__(self, server: object, seen: list[tuple[int, int]]) -> None:
        self._server, self._seen = server, seen

    def handle(self, wire, src, now, transport="udp"):  # type: ignore[no-untyped-def]
        if transport == "udp":
            self._seen.append((src[1], int.from_bytes(wire[:2], "big")))
        return self._server.handle(wire, src, now, transport)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:  # the rest of the server, as it is
        return getattr(self._server, name)


def test_live_queries_leave_from_random_ports_with_os_random_ids() -> None:
    async def main() -> tuple[list[int], list[int], int]:
        live = LiveHierarchy(hierarchy(), port=PORT)
        await live.start()
        seen: list[tuple[int, int]] = []  # (source port, ID) of every upstream query
        for endpoint in live.endpoints:
            endpoint.server = _Spy(endpoint.server, seen)  # type: ignore[assignment]
        try:
            ns = live.hierarchy.namespace
            for q in ns.queries[:40]:
                await live.resolver.discover(Discovery(q.text, service=q.service, k=2))
            return [p for p, _ in seen], [i for _, i in seen], len(live.resolver._upstream)
        finally:
            live.close()

    ports, ids, still_open = run(main())
    assert len(ports) >= 40
    assert len(set(ports)) >= 0.95 * len(ports)  # a fresh random port per query
    assert PORT not in ports and 53 not in ports
    assert still_open == 0  # every socket closed once its answer came
    seeded = random.Random(0)  # what the old fixed seed would have sent
    assert ids[:5] != [seeded.randrange(1, 65536) for _ in range(5)]


def _raw_udp(src: tuple[str, int], dst: tuple[str, int], payload: bytes) -> None:
    """Send one UDP datagram with a forged source address (raw socket; needs root)."""
    udp = struct.pack("!HHHH", src[1], dst[1], 8 + len(payload), 0) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, socket.IPPROTO_UDP, 0,
                     socket.inet_aton(src[0]), socket.inet_aton(dst[0]))
    with socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW) as s:
        s.sendto(ip + udp, (dst[0], 0))


needs_root = pytest.mark.skipif(os.geteuid() != 0 and not os.environ.get("CI"),
                                reason="forging source addresses needs a raw socket (root)")


@needs_root
def test_live_resolver_rejects_forged_answers_even_from_the_servers_address() -> None:
    """A root server that never answers; forged referrals arrive from its address (raw
    socket) at the resolver's listening port and at the query's own port, with wrong and
    right IDs. Only a forgery matching port, server, ID and question could be accepted."""
    h = hierarchy()
    root_ip = h.root_hints[0]

    async def main() -> dict:
        loop = asyncio.get_running_loop()
        # the root's address answers nothing: the resolver's first query stays pending
        config = ResolverConfig(dns_port=PORT, timeout=30.0, max_attempts=1)
        resolver = RecursiveResolver([root_ip], random.Random(0), config)
        ep = NodeEndpoint(resolver, ("127.0.53.7", PORT), source_ip="127.0.53.7")
        await ep.start()
        try:
            task = loop.create_task(ep.discover(Discovery("weather", k=1)))
            await asyncio.sleep(0.1)
            ((qid, pending),) = resolver._pending.items()
            (port,) = ep._upstream.ports
            root = (root_ip, PORT)

            def forgery(qid: int, qname: str = "_mcp._tcp._tools.") -> bytes:
                m = DNSRecord(DNSHeader(id=qid, qr=1, aa=1))
                m.add_question(DNSQuestion(qname, QTYPE.SRV))
                m.add_auth(RR("tools.", QTYPE.NS, rdata=NS("ns.evil."), ttl=86400))
                m.add_ar(RR("ns.evil.", QTYPE.A, rdata=A("127.66.6.6"), ttl=86400))
                return m.pack()

            sent = 0
            for guess in range(1, 65536, 97):  # blind: IDs sprayed at the listening port
                _raw_udp(root, ("127.0.53.7", PORT), forgery(guess))
                sent += 1
                if sent % 32 == 0:
                    await asyncio.sleep(0.005)  # let the loop read (no receive-buffer drops)
            for guess in range(1, 2000):  # the query's own port, every wrong ID
                if guess != qid:
                    _raw_udp(root, ("127.0.53.7", port), forgery(guess))
                    sent += 1
                    if sent % 32 == 0:
                        await asyncio.sleep(0.005)
            _raw_udp(("127.0.53.99", PORT), ("127.0.53.7", port), forgery(qid))  # other source
            _raw_udp(root, ("127.0.53.7", port), forgery(qid, "_mcp._tcp._evil.tools."))
            sent += 2
            await asyncio.sleep(0.5)
            still = resolver.is_pending(qid)
            counts = {**ep.stats, **resolver.stats, "sent": sent, "still_pending": still}
            # the control: the right port, server, ID and question is accepted
            _raw_udp(root, ("127.0.53.7", port), forgery(qid, pending.task.asks[0].qname))
            await asyncio.sleep(0.3)
            counts["control_accepted"] = not resolver.is_pending(qid)
            task.cancel()
            return counts
        finally:
            ep.close()

    counts = run(main())
    assert counts["still_pending"]
    # each forgery was read and dropped for its reason (a busy machine may lose a few to a
    # full receive buffer, which drops them too)
    assert counts["response_on_listen"] >= 0.9 * len(range(1, 65536, 97))
    assert counts["upstream_unexpected_answer"] >= 0.9 * (1998 + 1)
    assert counts["mismatched_question"] == 1
    assert counts["control_accepted"]  # so the rejections above are the checks at work


def _tcp_query(addr: tuple[str, int], qname: str = "tools.", timeout: float = 5.0) -> bytes:
    q = DNSRecord(DNSHeader(id=7))
    q.add_question(DNSQuestion(qname, QTYPE.NS))
    data = q.pack()
    with socket.create_connection(addr, timeout=timeout) as s:
        s.sendall(len(data).to_bytes(2, "big") + data)
        head = s.recv(2, socket.MSG_WAITALL)
        return s.recv(int.from_bytes(head, "big"), socket.MSG_WAITALL)


def test_held_tcp_connections_do_not_lock_out_other_clients() -> None:
    h = hierarchy()
    ip, server = next((ip, s) for ip, s in h.servers.items() if "tools." in s.zones)
    limits = TcpLimits(per_listener=16, idle=30.0, lifetime=300.0)

    async def main() -> tuple[bytes, dict]:
        ep = ServerEndpoint(server, (ip, PORT + 1), tcp_limits=limits)
        await ep.start()
        held = []
        try:
            for _ in range(100):  # an attacker opens connections and sends nothing
                held.append(await asyncio.open_connection(ip, PORT + 1))
            await asyncio.sleep(0.2)
            reply = await asyncio.to_thread(_tcp_query, (ip, PORT + 1))
            return reply, dict(server.stats.counts)
        finally:
            for _, w in held:
                w.close()
            ep.close()

    reply, counts = run(main())
    assert DNSRecord.parse(reply).header.rcode == 0
    assert counts["tcp_listener_full_evicted_idle"] >= 100 - 16


def test_tcp_deadlines_close_slow_and_stuck_peers() -> None:
    h = hierarchy()
    ip, server = next((ip, s) for ip, s in h.servers.items()
                      if any(h.namespace.zones[z].tools for z in s.zones))  # a leaf
    limits = TcpLimits(idle=0.5, message=0.3, lifetime=2.5, write=0.3)

    async def closed_within(writer_task, seconds: float) -> float:
        t0 = time.monotonic()
        await asyncio.wait_for(writer_task, seconds)
        return time.monotonic() - t0

    async def main() -> dict:
        ep = ServerEndpoint(server, (ip, PORT + 2), tcp_limits=limits)
        await ep.start()
        try:
            # slowloris: a length prefix, then one byte now and then
            r, w = await asyncio.open_connection(ip, PORT + 2)
            w.write(b"\x00\x40")

            async def trickle() -> None:  # until the server closes the connection
                while True:
                    w.write(b"x")
                    try:
                        if await asyncio.wait_for(r.read(1), 0.1) == b"":
                            return
                    except TimeoutError:
                        pass
                    except ConnectionError:
                        return
            slow = await closed_within(trickle(), 10)
            # a peer sending a query every 0.2 s outlives no lifetime
            r2, w2 = await asyncio.open_connection(ip, PORT + 2)
            q = DNSRecord(DNSHeader(id=1))
            q.add_question(DNSQuestion(server.zones[0], QTYPE.NS))
            frame = len(q.pack()).to_bytes(2, "big") + q.pack()
            t0 = time.monotonic()
            while time.monotonic() - t0 < 10:
                w2.write(frame)
                head = await r2.read(2)
                if not head:
                    break
                await r2.readexactly(int.from_bytes(head, "big"))
                await asyncio.sleep(0.2)
            lived = time.monotonic() - t0
            # a peer that never reads its replies: up to 11 MB of answers fill the buffers
            leaf = next(z for z in server.zones if h.namespace.zones[z].tools)
            q = DNSRecord(DNSHeader(id=2))
            q.add_question(DNSQuestion("_mcp._tcp." + leaf, QTYPE.SRV))
            frame = len(q.pack()).to_bytes(2, "big") + q.pack()
            ep.close()  # lifetime 2.5 s would end this one first: a listener without it
            ep = ServerEndpoint(server, (ip, PORT + 4), tcp_limits=TcpLimits(write=0.3))
            await ep.start()
            r3, w3 = await asyncio.open_connection(ip, PORT + 4)
            r3._transport.pause_reading()  # type: ignore[attr-defined]
            for _ in range(10_000):
                w3.write(frame)
            for _ in range(300):
                if server.stats.counts["tcp_write_timeout_closed"]:
                    break
                await asyncio.sleep(0.1)
            return {"slow": slow, "lived": lived, **server.stats.counts}
        finally:
            ep.close()

    out = run(main())
    assert out["slow"] < 5
    assert out["tcp_slow_message_closed"] >= 1
    assert 2.0 < out["lived"] < 8
    assert out["tcp_lifetime_closed"] >= 1
    assert out["tcp_write_timeout_closed"] >= 1


def test_serve_mode_keeps_no_per_query_results() -> None:
    async def main() -> tuple[int, int, int]:
        live = LiveHierarchy(hierarchy(), port=PORT + 3)
        await live.start()
        try:
            agent_ep = NodeEndpoint(
                StubAgent(("127.0.53.1", PORT + 3), random.Random(1)), source_ip="127.0.0.5")
            await agent_ep.start()
            done: list = []
            agent_ep.on_done = done.extend
            for i, q in enumerate(live.hierarchy.namespace.queries[:30]):
                agent_ep.node.ask(i, Discovery(q.text, service=q.service, k=2),
                                  agent_ep.now())
                agent_ep.pump()
            while len(done) < 30:
                await asyncio.sleep(0.05)
            agent_ep.close()
            return (len(live.resolver.results), sum(bool(d.endpoints) for d in done),
                    live.resolver.resolver._active_clients)
        finally:
            live.close()

    kept, answered, active = run(main())
    assert kept == 0 and active == 0
    assert answered == 30
