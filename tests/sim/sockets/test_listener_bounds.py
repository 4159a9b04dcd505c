"""Listeners that cannot be filled: DNS over TLS and TCP with their bounds made small (8
connections), held by silent connections or by connections stopped in the middle of a
message, still answer a new client (the least active connection makes room); and a
resolver whose DNS-over-TLS server cannot be reached retries at once, on the zone's other
servers (strict) or in clear text where ``upstream_fallback`` allows it.

Loopback only, bounded in count and time; the timeouts of the held connections are set far
beyond each test's deadline, so a client answered in time was admitted by eviction.
"""

from __future__ import annotations

import asyncio
import os
import ssl
from collections.abc import Awaitable, Callable

import pytest
from dnslib import QTYPE, DNSHeader, DNSQuestion, DNSRecord

from nodes.resolver.config import ResolverConfig
from nodes.resolver.types import Discovery, DiscoveryResult
from sim.accounting import dot_port
from sim.build.hierarchy import DOT_HOST, build_hierarchy, dot_setup
from sim.sockets.dot import DotUpstream
from sim.sockets.node import NodeEndpoint
from sim.sockets.server import ServerEndpoint
from sim.sockets.tcp import TcpLimits
from topologies.synthetic import synthetic

PORT = 26000 + os.getpid() % 15000
HELD = 8
# only eviction admits a new client within DEADLINE: nothing times out before it
LIMITS = TcpLimits(per_listener=HELD, idle=60.0, message=60.0, lifetime=600.0,
                   handshake=60.0, stall=0.3)
DEADLINE = 5.0  # seconds a new client may take to be answered at all (generous)


@pytest.fixture(scope="module")
def hierarchy():  # type: ignore[no-untyped-def]
    return build_hierarchy(synthetic(n_tools=120, branching=2, depth=2, seed=3, n_orgs=0),
                           replicas=2)


@pytest.fixture(scope="module")
def dot():  # type: ignore[no-untyped-def]
    return dot_setup(0)


def _query(qid: int = 7) -> bytes:
    q = DNSRecord(DNSHeader(id=qid))
    q.add_question(DNSQuestion("tools.", QTYPE.NS))
    return q.pack()


async def _exchange(addr: tuple[str, int], tls: ssl.SSLContext | None = None) -> DNSRecord:
    """One query over a new connection (TLS with ``tls``), its answer within DEADLINE."""
    async def go() -> DNSRecord:
        reader, writer = await asyncio.open_connection(
            *addr, ssl=tls, server_hostname=DOT_HOST if tls else None)
        try:
            wire = _query()
            writer.write(len(wire).to_bytes(2, "big") + wire)
            head = await reader.readexactly(2)
            return DNSRecord.parse(await reader.readexactly(int.from_bytes(head, "big")))
        finally:
            writer.close()
    return await asyncio.wait_for(go(), DEADLINE)


async def _hold(addr: tuple[str, int], first: bytes | None,
                tls: ssl.SSLContext | None = None) -> list[asyncio.StreamWriter]:
    """Fill the listener: HELD + 4 connections, each sending ``first`` (if any) then
    nothing more."""
    held = []
    for _ in range(HELD + 4):
        _, writer = await asyncio.open_connection(
            *addr, ssl=tls, server_hostname=DOT_HOST if tls else None)
        if first:
            writer.write(first)
            await writer.drain()
        held.append(writer)
    await asyncio.sleep(LIMITS.stall + 0.2)  # read by the server, and stalled since
    return held


def _serve(hierarchy, dot, port: int,  # type: ignore[no-untyped-def]
           attack: Callable[[ServerEndpoint, tuple[str, int]], Awaitable[DNSRecord]]
           ) -> tuple[DNSRecord, dict]:
    address = hierarchy.root_hints[0]
    server = hierarchy.servers[address]
    server.stats.counts.clear()

    async def main() -> DNSRecord:
        ep = ServerEndpoint(server, (address, port), tcp_limits=LIMITS,
                            tls=dot.server_context(), tls_port=dot_port(port),
                            tls_limits=LIMITS)
        await ep.start()
        try:
            return await attack(ep, (address, port))
        finally:
            ep.close()
            await asyncio.sleep(0.05)

    reply = asyncio.run(main())
    return reply, dict(server.stats.counts)


def test_dot_listener_held_by_silent_connections_answers_a_new_client(hierarchy, dot) -> None:
    async def attack(ep: ServerEndpoint, addr: tuple[str, int]) -> DNSRecord:
        tls_addr = (addr[0], dot_port(addr[1]))
        held = await _hold(tls_addr, None)  # TCP only: never a ClientHello
        try:
            return await _exchange(tls_addr, dot.client_context())
        finally:
            for w in held:
                w.close()

    reply, counts = _serve(hierarchy, dot, PORT, attack)
    assert reply.header.rcode == 0 and reply.header.id == 7
    assert counts["tls_handshake_evicted"] >= 4  # the oldest silent ones made room


def test_dot_listener_held_mid_message_answers_a_new_client(hierarchy, dot) -> None:
    async def attack(ep: ServerEndpoint, addr: tuple[str, int]) -> DNSRecord:
        tls_addr = (addr[0], dot_port(addr[1]))
        held = await _hold(tls_addr, b"\x00\x40", dot.client_context())  # 64 bytes announced
        try:
            return await _exchange(tls_addr, dot.client_context())
        finally:
            for w in held:
                w.close()

    reply, counts = _serve(hierarchy, dot, PORT + 1, attack)
    assert reply.header.rcode == 0 and reply.header.id == 7
    # the ones past the bound came while the others were still moving: refused, not they
    assert counts["tcp_listener_full_evicted_stalled"] >= 1


def test_tcp_listener_held_mid_message_answers_a_new_client(hierarchy, dot) -> None:
    async def attack(ep: ServerEndpoint, addr: tuple[str, int]) -> DNSRecord:
        held = await _hold(addr, b"\x00\x40")
        try:
            return await _exchange(addr)
        finally:
            for w in held:
                w.close()

    reply, counts = _serve(hierarchy, dot, PORT + 2, attack)
    assert reply.header.rcode == 0 and reply.header.id == 7
    assert counts["tcp_listener_full_evicted_stalled"] >= 1


def test_connections_still_moving_are_not_evicted(hierarchy, dot) -> None:
    """Mid-message for less than ``stall``: the new client is refused, not they."""
    patient = TcpLimits(per_listener=HELD, idle=60.0, message=60.0, stall=60.0)
    address = hierarchy.root_hints[0]
    server = hierarchy.servers[address]
    server.stats.counts.clear()

    async def main() -> bool:
        ep = ServerEndpoint(server, (address, PORT + 3), tcp_limits=patient)
        await ep.start()
        held = []
        try:
            for _ in range(HELD):
                _, w = await asyncio.open_connection(address, PORT + 3)
                w.write(b"\x00\x40")
                held.append(w)
            await asyncio.sleep(0.2)
            try:
                await _exchange((address, PORT + 3))
            except (asyncio.IncompleteReadError, ConnectionError):
                return False
            return True
        finally:
            for w in held:
                w.close()
            ep.close()
            await asyncio.sleep(0.05)

    assert asyncio.run(main()) is False
    assert server.stats.counts["tcp_listener_full_refused"] >= 1


# ------------------------------------------------------------------ resolver fallback


def _walk(hierarchy, dot, port: int, fallback: str,  # type: ignore[no-untyped-def]
          tls_down: set[str]) -> tuple[DiscoveryResult, dict]:
    """One discovery through a resolver with ``upstream: tls`` whose servers in
    ``tls_down`` have no DNS-over-TLS listener (connections refused)."""
    hierarchy.reset()
    config = ResolverConfig(upstream="tls", upstream_fallback=fallback,  # type: ignore[arg-type]
                            dns_port=port, cache=False, timeout=5.0)
    node = hierarchy.resolver(seed=1, config=config)

    async def main() -> tuple[DiscoveryResult, dict]:
        servers = [ServerEndpoint(s, (ip, port),
                                  tls=None if ip in tls_down else dot.server_context(),
                                  tls_port=dot_port(port))
                   for ip, s in hierarchy.servers.items()]
        resolver = NodeEndpoint(node, None, "127.0.53.20")
        resolver.dot = DotUpstream("127.0.53.20", dot.client_context(),
                                   lambda d, s: resolver._receive(d, s, "tls"),
                                   resolver.count)
        for ep in [*servers, resolver]:
            await ep.start()
        try:
            tool = next(iter(hierarchy.namespace.tools.values()))
            result = await asyncio.wait_for(resolver.discover(
                Discovery(intent=tool.description, k=2)), DEADLINE)
            return result, dict(node.stats)
        finally:
            resolver.close()
            for ep in servers:
                ep.close()
            await asyncio.sleep(0.05)

    return asyncio.run(main())


def _first_of_each_zone(hierarchy) -> set[str]:  # type: ignore[no-untyped-def]
    first: dict[str, str] = {}
    for ip, zone in sorted(hierarchy.zone_of.items()):
        first.setdefault(zone, ip)
    return set(first.values())


def test_strict_resolver_retries_at_once_on_another_server_over_tls(hierarchy, dot) -> None:
    down = _first_of_each_zone(hierarchy)  # every zone keeps one server with TLS
    result, stats = _walk(hierarchy, dot, PORT + 4, "none", down)
    assert result.endpoints  # answered, within DEADLINE though the timeout is 5 s
    assert stats["upstream_unreachable"] >= 1 and stats["upstream_lost"] >= 1
    assert {s.transport for s in result.steps} == {"tls"}  # never clear text
    assert all(s.server[0] not in down for s in result.steps if s.outcome == "NOERROR")


def test_strict_resolver_fails_rather_than_fall_back(hierarchy, dot) -> None:
    everything = set(hierarchy.servers)
    result, stats = _walk(hierarchy, dot, PORT + 5, "none", everything)
    assert not result.endpoints and stats["upstream_unreachable"] >= 1
    assert {s.transport for s in result.steps} == {"tls"}


@pytest.mark.parametrize("fallback", ["tcp", "udp"])
def test_opportunistic_resolver_falls_back_to_clear_text(hierarchy, dot,
                                                         fallback: str) -> None:
    everything = set(hierarchy.servers)
    result, stats = _walk(hierarchy, dot, PORT + 6, fallback, everything)
    assert result.endpoints
    assert fallback in {s.transport for s in result.steps}
    assert stats["upstream_unreachable"] >= 1
