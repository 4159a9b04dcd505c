"""Who may transfer a zone, how many at once and how often (``nodes.authoritative.transfer.
TransferGate``): refused by default as NSD and Knot do, allowed by ACL (``--allow-transfer``,
``namespace.allow_transfer``), bounded per client and in all, rate-limited per client;
through ``AuthoritativeServer.transfer`` and on real sockets (``tooldns serve``'s
``LiveHierarchy``)."""

from __future__ import annotations

import asyncio
import socket

import dns.message
import dns.query
import dns.rcode
import dns.rdatatype
import pydantic
import pytest

from nodes.authoritative.server import AuthoritativeServer
from nodes.authoritative.transfer import TransferGate, TransferLimits, networks
from nodes.dns.zone import ServerRef, ToolRecord, ZoneData
from sim.build.hierarchy import build_hierarchy
from sim.scenario import NamespaceSpec
from topologies.synthetic import synthetic


def _zone() -> ZoneData:
    tools = tuple(ToolRecord(f"t{i}", f"tool{i}", "a tool", "mcp", f"tool{i}.weather.tools.",
                             f"127.64.0.{i + 1}", 443) for i in range(3))
    return ZoneData("weather.tools.", (ServerRef("ns1.weather.tools.", "127.9.0.1"),),
                    "weather", tools=tools)


def _axfr() -> bytes:
    return dns.message.make_query("weather.tools.", "AXFR").to_wire()


def _rcode(out: list[bytes] | None) -> int:
    assert out is not None and out
    return dns.message.from_wire(out[0]).rcode()


def test_refused_by_default_and_allowed_by_acl() -> None:
    server = AuthoritativeServer([_zone()])
    for src in ("127.0.0.1", "::1", "10.0.0.1"):
        assert _rcode(server.transfer(_axfr(), (src, 4000), 0.0)) == dns.rcode.REFUSED
    assert server.stats["xfr_refused_acl"] == 3 and server.stats["axfr"] == 0
    allowed = AuthoritativeServer([_zone()], transfer_acl=["192.0.2.0/24"])
    out = allowed.transfer(_axfr(), ("192.0.2.7", 4000), 0.0)
    assert _rcode(out) == dns.rcode.NOERROR and out is not None
    answer = [rr for m in out for rr in dns.message.from_wire(m, one_rr_per_rrset=True).answer]
    assert answer[0].rdtype == answer[-1].rdtype == dns.rdatatype.SOA and len(answer) > 5
    assert _rcode(allowed.transfer(_axfr(), ("192.0.3.7", 4000), 0.0)) == dns.rcode.REFUSED


def test_hierarchy_servers_refuse_unless_allowed() -> None:
    ns = synthetic(n_tools=20, branching=2, depth=1, seed=1, n_orgs=0)
    closed = build_hierarchy(ns)
    wire = dns.message.make_query("tools.", "AXFR").to_wire()
    tld = next(a for a, z in closed.zone_of.items() if z == "tools.")
    for src in ("127.0.0.1", *closed.servers):  # nor the hierarchy's own servers
        assert _rcode(closed.servers[tld].transfer(wire, (src, 1), 0.0)) == dns.rcode.REFUSED
    opened = build_hierarchy(ns, allow_transfer=["127.0.0.9"])
    assert _rcode(opened.servers[tld].transfer(wire, ("127.0.0.9", 1), 0.0)) == dns.rcode.NOERROR
    assert _rcode(opened.servers[tld].transfer(wire, ("127.0.0.1", 1), 0.0)) == dns.rcode.REFUSED


def test_scenario_field_allow_transfer() -> None:
    assert NamespaceSpec().allow_transfer == ()
    assert NamespaceSpec(allow_transfer=("127.0.0.1", "10.0.0.0/8")).allow_transfer
    with pytest.raises(pydantic.ValidationError, match="does not appear to be"):
        NamespaceSpec(allow_transfer=("10.0.0.0/33",))


def test_concurrent_transfers_per_client_and_in_all() -> None:
    server = AuthoritativeServer([_zone()], transfer_acl=["127.0.0.0/8"])
    gate = server.transfers
    limits = gate.limits
    held = []
    for _ in range(limits.per_client):  # the socket layer holds each while writing it
        out = server.transfer(_axfr(), ("127.0.0.1", 4000), 1.0)
        assert _rcode(out) == dns.rcode.NOERROR and out is not None
        held.append(iter(gate.sending(out, "127.0.0.1")))
    # the (N+1)th at once from the same address: REFUSED, counted
    refusal = server.transfer(_axfr(), ("127.0.0.1", 4001), 1.0)
    assert _rcode(refusal) == dns.rcode.REFUSED and refusal is not None
    assert server.stats["xfr_refused_busy"] == 1 and gate.in_progress == limits.per_client
    assert list(gate.sending(refusal, "127.0.0.1")) == refusal  # a refusal holds nothing
    assert gate.in_progress == limits.per_client
    # another client is not affected
    assert _rcode(server.transfer(_axfr(), ("127.0.0.2", 4000), 1.0)) == dns.rcode.NOERROR
    list(held.pop())  # one written to the end: its slot is free again
    out = server.transfer(_axfr(), ("127.0.0.1", 4002), 1.0)
    assert _rcode(out) == dns.rcode.NOERROR and out is not None
    held.append(iter(gate.sending(out, "127.0.0.1")))
    del held[:]  # connections dropped mid-transfer: their slots are freed too
    assert gate.in_progress == 0
    # the bound on everyone's transfers in progress
    clients = [f"127.0.1.{i}" for i in range(limits.total // limits.per_client + 1)]
    for address in clients[:-1]:
        for _ in range(limits.per_client):
            out = server.transfer(_axfr(), (address, 1), 2.0)
            assert out is not None
            held.append(iter(gate.sending(out, address)))
    assert gate.in_progress == limits.total
    assert _rcode(server.transfer(_axfr(), (clients[-1], 1), 2.0)) == dns.rcode.REFUSED
    assert server.stats["xfr_refused_full"] == 1


def test_transfers_started_per_client_are_rate_limited() -> None:
    server = AuthoritativeServer([_zone()], transfer_acl=["127.0.0.0/8"])
    limits = server.transfers.limits
    codes = [_rcode(server.transfer(_axfr(), ("127.0.0.1", 1), 10.0))
             for _ in range(limits.burst + 3)]
    assert codes == [dns.rcode.NOERROR] * limits.burst + [dns.rcode.REFUSED] * 3
    assert server.stats["xfr_refused_rate"] == 3
    assert _rcode(server.transfer(_axfr(), ("127.0.0.2", 1), 10.0)) == dns.rcode.NOERROR
    # one more token after 60 / per_minute seconds, not before
    later = 10.0 + 60.0 / limits.per_minute
    assert _rcode(server.transfer(_axfr(), ("127.0.0.1", 1), later - 0.1)) == dns.rcode.REFUSED
    assert _rcode(server.transfer(_axfr(), ("127.0.0.1", 1), later)) == dns.rcode.NOERROR
    assert _rcode(server.transfer(_axfr(), ("127.0.0.1", 1), later)) == dns.rcode.REFUSED


def test_client_table_is_bounded() -> None:
    gate = TransferGate(TransferLimits(clients=4))
    acl = networks(["10.0.0.0/8"])
    for i in range(50):
        assert gate.refusal(f"10.0.0.{i}", float(i), acl) == ""
    assert len(gate._clients) == 4
    assert gate.refusal("192.0.2.1", 0.0, acl) == "xfr_refused_acl"
    assert len(gate._clients) == 4  # refused by the ACL: not remembered


def _free_port(address: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp:
        tcp.bind((address, 0))
        port = tcp.getsockname()[1]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        udp.bind((address, port))
    return port


@pytest.mark.live
def test_live_transfer_refused_unless_allowed_and_released_after_writing() -> None:
    from sim.sockets.hierarchy import LiveHierarchy

    ns = synthetic(n_tools=20, branching=2, depth=1, seed=1, n_orgs=0)
    hierarchy = build_hierarchy(ns, first_address="127.75.0.1")
    address = next(a for a, z in hierarchy.zone_of.items() if z == "tools.")
    port = _free_port(address)
    closed = LiveHierarchy(hierarchy, port=port, resolver_address="127.75.255.1")
    query = dns.message.make_query("tools.", "AXFR")

    def axfr(source: str) -> dns.message.Message:
        return dns.query.tcp(query, address, port=port, timeout=5, source=source)

    async def main(live: LiveHierarchy, sources: list[str]) -> list[dns.message.Message]:
        await live.start()
        try:
            return [await asyncio.to_thread(axfr, source) for source in sources]
        finally:
            live.close()
            await asyncio.sleep(0.05)

    [refused] = asyncio.run(main(closed, ["127.0.0.1"]))
    assert refused.rcode() == dns.rcode.REFUSED and not refused.answer
    server = hierarchy.servers[address]
    assert server.stats["xfr_refused_acl"] == 1
    opened = LiveHierarchy(hierarchy, port=port, resolver_address="127.75.255.1",
                           allow_transfer=["127.0.0.3"])
    replies = asyncio.run(main(opened, ["127.0.0.3"] * 3 + ["127.0.0.1"]))
    for reply in replies[:3]:  # one after the other: each released once written
        assert reply.rcode() == dns.rcode.NOERROR and reply.answer[0].rdtype == dns.rdatatype.SOA
    assert replies[3].rcode() == dns.rcode.REFUSED
    assert server.stats["axfr"] == 3 and server.transfers.in_progress == 0
    assert server.stats["xfr_refused_busy"] == 0
