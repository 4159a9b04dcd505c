"""What DNS-over-TLS connections may cost a serving process (issue 45): a connection that
sends nothing holds no TLS buffers, an established one a small read buffer; handshakes are
bounded per client address (in number and rate) and per process; established TLS
connections share the process's memory budget.

Loopback only; client addresses differ per test (the rate allowance is per address and
per process). Python memory is measured with tracemalloc around the server's work, with
clients on blocking sockets (their TLS state is OpenSSL's, not traced).
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import tracemalloc
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest
from dnslib import QTYPE, DNSHeader, DNSQuestion, DNSRecord

from sim.accounting import dot_port
from sim.build.hierarchy import DOT_HOST, build_hierarchy, dot_setup
from sim.sockets.server import ServerEndpoint
from sim.sockets.tcp import TcpLimits
from topologies.synthetic import synthetic

T = TypeVar("T")
PORT = 24000 + os.getpid() % 15000
DEADLINE = 10.0  # seconds a client may wait for its answer (generous: a loaded machine)


@pytest.fixture(scope="module")
def hierarchy():  # type: ignore[no-untyped-def]
    return build_hierarchy(synthetic(n_tools=60, branching=2, depth=2, seed=3, n_orgs=0))


@pytest.fixture(scope="module")
def dot():  # type: ignore[no-untyped-def]
    return dot_setup(0)


def _query(qid: int = 7) -> bytes:
    q = DNSRecord(DNSHeader(id=qid))
    q.add_question(DNSQuestion("tools.", QTYPE.NS))
    return q.pack()


def _client_hello(dot) -> bytes:  # type: ignore[no-untyped-def]
    """The first flight of a TLS client that then never goes on."""
    tls = dot.client_context().wrap_bio(ssl.MemoryBIO(), out := ssl.MemoryBIO(),
                                        server_hostname=DOT_HOST)
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return out.read()


def _connect(addr: tuple[str, int], source: str, first: bytes = b"") -> socket.socket:
    s = socket.create_connection(addr, timeout=DEADLINE, source_address=(source, 0))
    if first:
        s.sendall(first)
    return s


def _ask(addr: tuple[str, int], ctx: ssl.SSLContext, source: str) -> DNSRecord:
    """One query over a new DoT connection from ``source`` (blocking)."""
    with _connect(addr, source) as raw, ctx.wrap_socket(raw, server_hostname=DOT_HOST) as s:
        wire = _query()
        s.sendall(len(wire).to_bytes(2, "big") + wire)
        head = _exactly(s, 2)
        return DNSRecord.parse(_exactly(s, int.from_bytes(head, "big")))


def _exactly(s: ssl.SSLSocket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        more = s.recv(n - len(data))
        if not more:
            raise ConnectionError("closed before the answer ended")
        data += more
    return data


def _serve(hierarchy, dot, port: int, limits: TcpLimits,  # type: ignore[no-untyped-def]
           attack: Callable[[tuple[str, int]], Awaitable[T]]) -> tuple[T, dict]:
    """The root server with DoT on ``port``'s DoT port under ``limits``; ``attack`` gets
    that address; returns what it returned and the server's counters."""
    address = hierarchy.root_hints[0]
    server = hierarchy.servers[address]
    server.stats.counts.clear()

    async def main() -> T:
        ep = ServerEndpoint(server, (address, port), tls=dot.server_context(),
                            tls_port=dot_port(port), tls_limits=limits)
        await ep.start()
        try:
            return await attack((address, dot_port(port)))
        finally:
            ep.close()
            await asyncio.sleep(0.05)

    got = asyncio.run(main())
    return got, dict(server.stats.counts)


def _in_thread(fn: Callable[[], T]) -> Awaitable[T]:
    return asyncio.get_running_loop().run_in_executor(None, fn)


def test_silent_connections_hold_no_tls_buffers(hierarchy, dot) -> None:
    """64 connections that never send a ClientHello: a few KiB each, not asyncio's 256 KiB
    TLS read buffer (which it allocates as the handshake starts, before any byte)."""
    n = 64
    limits = TcpLimits(handshake=30.0)

    async def attack(addr: tuple[str, int]) -> int:
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            held = [_connect(addr, "127.0.45.1") for _ in range(n)]
            await asyncio.sleep(0.5)  # accepted and waiting
            grown = tracemalloc.get_traced_memory()[0] - before
            reply = await _in_thread(lambda: _ask(addr, dot.client_context(), "127.0.45.2"))
            assert isinstance(reply, DNSRecord) and reply.header.rcode == 0
            for s in held:
                s.close()
            return grown
        finally:
            tracemalloc.stop()

    grown, counts = _serve(hierarchy, dot, PORT, limits, attack)
    assert isinstance(grown, int) and grown < n * 16 * 1024, f"{grown / n:.0f} B each"
    assert counts["tls_connections"] == 1


def test_established_connections_hold_small_buffers(hierarchy, dot) -> None:
    n = 32

    async def attack(addr: tuple[str, int]) -> int:
        ctx = dot.client_context()

        def open_all() -> list[ssl.SSLSocket]:
            return [ctx.wrap_socket(_connect(addr, "127.0.45.3"), server_hostname=DOT_HOST)
                    for _ in range(n)]

        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            held = await _in_thread(open_all)
            await asyncio.sleep(0.5)
            grown = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        assert isinstance(held, list)
        for s in held:
            s.close()
        return grown

    grown, counts = _serve(hierarchy, dot, PORT + 1, TcpLimits(), attack)
    assert counts["tls_connections"] == n
    assert isinstance(grown, int) and grown < n * 64 * 1024, f"{grown / n:.0f} B each"


def test_handshakes_are_bounded_per_client_address(hierarchy, dot) -> None:
    """Ten stalled handshakes (a ClientHello, then nothing) from one address: at most four
    at once (``stall`` 0: the oldest is cut off at once); another address is answered."""
    limits = TcpLimits(handshakes_per_client=4, handshake=30.0, stall=0.0)
    hello = _client_hello(dot)

    async def attack(addr: tuple[str, int]) -> DNSRecord:
        held = []
        for _ in range(10):
            held.append(_connect(addr, "127.0.45.4", hello))
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.3)
        try:
            got = await _in_thread(lambda: _ask(addr, dot.client_context(), "127.0.45.5"))
            assert isinstance(got, DNSRecord)
            return got
        finally:
            for s in held:
                s.close()

    reply, counts = _serve(hierarchy, dot, PORT + 2, limits, attack)
    assert isinstance(reply, DNSRecord) and reply.header.rcode == 0
    assert counts["tls_handshake_client_evicted"] == 6


def test_handshakes_are_bounded_per_process(hierarchy, dot) -> None:
    """Stalled handshakes from many addresses: at most ``handshakes`` at once."""
    limits = TcpLimits(handshakes=5, handshake=30.0, stall=0.0)
    hello = _client_hello(dot)

    async def attack(addr: tuple[str, int]) -> None:
        held = []
        for i in range(8):
            held.append(_connect(addr, f"127.0.46.{i + 1}", hello))
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.3)
        for s in held:
            s.close()

    _, counts = _serve(hierarchy, dot, PORT + 3, limits, attack)
    assert counts["tls_handshake_process_evicted"] == 3


def test_handshake_rate_is_bounded_per_client_address(hierarchy, dot) -> None:
    """Twenty handshakes at once from one address, five a second allowed: most refused
    before any TLS work; a new address is answered."""
    limits = TcpLimits(handshake_rate=5.0)

    async def attack(addr: tuple[str, int]) -> DNSRecord:
        ctx = dot.client_context()

        def flood() -> int:
            ok = 0
            for _ in range(20):
                try:
                    with ctx.wrap_socket(_connect(addr, "127.0.45.6"),
                                         server_hostname=DOT_HOST):
                        ok += 1
                except OSError:
                    pass
            return ok

        done = await _in_thread(flood)
        assert isinstance(done, int) and done <= 10
        got = await _in_thread(lambda: _ask(addr, ctx, "127.0.45.7"))
        assert isinstance(got, DNSRecord)
        return got

    reply, counts = _serve(hierarchy, dot, PORT + 4, limits, attack)
    assert isinstance(reply, DNSRecord) and reply.header.rcode == 0
    assert counts["tls_handshake_rate_refused"] >= 10


def test_established_tls_connections_share_a_memory_budget(hierarchy, dot) -> None:
    """A budget for 16 connections: idle ones beyond it are closed to admit new ones."""
    from sim.sockets.tcp import TLS_CONNECTION_BYTES

    limits = TcpLimits(tls_memory=16 * TLS_CONNECTION_BYTES, idle=60.0)

    async def attack(addr: tuple[str, int]) -> DNSRecord:
        ctx = dot.client_context()

        def hold() -> list[ssl.SSLSocket]:
            return [ctx.wrap_socket(_connect(addr, "127.0.45.8"), server_hostname=DOT_HOST)
                    for _ in range(20)]

        held = await _in_thread(hold)
        await asyncio.sleep(0.3)
        try:
            got = await _in_thread(lambda: _ask(addr, ctx, "127.0.45.9"))
            assert isinstance(got, DNSRecord)
            return got
        finally:
            assert isinstance(held, list)
            for s in held:
                s.close()

    reply, counts = _serve(hierarchy, dot, PORT + 5, limits, attack)
    assert isinstance(reply, DNSRecord) and reply.header.rcode == 0
    assert counts["tls_memory_full_evicted_idle"] == 5  # 21 connections, 16 kept


def test_a_burst_past_the_bound_waits_for_room_rather_than_cutting(hierarchy, dot) -> None:
    """Four handshakes from one address hold its bound without having stalled (``stall``
    60 s): a fifth waits in the queue, and is answered once one of the four goes."""
    limits = TcpLimits(handshakes_per_client=4, handshake=30.0, stall=60.0)
    hello = _client_hello(dot)

    async def attack(addr: tuple[str, int]) -> tuple[bool, DNSRecord]:
        held = [_connect(addr, "127.0.45.10", hello) for _ in range(4)]
        await asyncio.sleep(0.3)
        asking = asyncio.ensure_future(
            _in_thread(lambda: _ask(addr, dot.client_context(), "127.0.45.10")))
        await asyncio.sleep(0.5)
        waited = not asking.done()
        held.pop().close()  # room for one
        try:
            got = await asyncio.wait_for(asking, DEADLINE)
            assert isinstance(got, DNSRecord)
            return waited, got
        finally:
            for s in held:
                s.close()

    (waited, reply), counts = _serve(hierarchy, dot, PORT + 6, limits, attack)
    assert waited and reply.header.rcode == 0
    assert counts["tls_handshake_queued"] == 1 and "tls_handshake_client_evicted" not in counts


def test_handshake_rate_is_bounded_per_process(hierarchy, dot) -> None:
    """Twelve handshakes from twelve addresses, three a second allowed in the process."""
    limits = TcpLimits(process_handshake_rate=3.0)

    async def attack(addr: tuple[str, int]) -> int:
        ctx = dot.client_context()

        def flood() -> int:
            ok = 0
            for i in range(12):
                try:
                    with ctx.wrap_socket(_connect(addr, f"127.0.47.{i + 1}"),
                                         server_hostname=DOT_HOST):
                        ok += 1
                except OSError:
                    pass
            return ok

        done = await _in_thread(flood)
        assert isinstance(done, int)
        return done

    done, counts = _serve(hierarchy, dot, PORT + 7, limits, attack)
    assert isinstance(done, int) and done <= 6
    assert counts["tls_handshake_process_rate_refused"] >= 6


def test_tooldns_serve_bounds_the_handshake_rate_per_address(hierarchy, dot) -> None:
    """`tooldns serve` (LiveHierarchy) refuses a client's handshakes past 20 a second at
    its servers; its own resolver's address (DNS over TLS upstream) is not bounded."""
    from sim.sockets.hierarchy import LiveHierarchy

    hierarchy.reset()
    live = LiveHierarchy(hierarchy, port=PORT + 8, resolver_address="127.0.53.45", dot=dot)

    async def main() -> tuple[int, dict]:
        await live.start()
        try:
            tld = next(a for a, z in hierarchy.zone_of.items() if z == "tools.")
            addr, ctx = (tld, live.tls_port), dot.client_context()

            def flood(source: str = "127.0.45.11") -> int:
                ok = 0
                for _ in range(25):
                    try:
                        with ctx.wrap_socket(_connect(addr, source),
                                             server_hostname=DOT_HOST):
                            ok += 1
                    except OSError:
                        pass
                return ok

            done = await asyncio.gather(*(_in_thread(flood) for _ in range(4)))
            own = await _in_thread(lambda: flood(live.resolver_address))
            assert own == 25
            return sum(d for d in done if isinstance(d, int)), dict(
                hierarchy.servers[tld].stats.counts)
        finally:
            live.close()
            await asyncio.sleep(0.05)

    done, counts = asyncio.run(main())
    assert done < 80 and counts["tls_handshake_rate_refused"] == 100 - done
