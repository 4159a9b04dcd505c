"""Name-level fuzzing: label lengths 0–255, names over 255 bytes, compression pointer tricks.

Part of the fuzz suite (:mod:`tests.nodes.test_fuzz` has the message-level mutations and the
namespace these run against). Every core is called directly (no sockets): the
authoritative server (UDP, TCP, TLS and the zone transfer entry), the resolver (stub
queries, and upstream replies carrying a bad name from the right server) and the agent
(replies from its resolver). For a name that is certainly malformed — a label length byte
of 64–191 (reserved and extended label types), over 255 bytes in all, a pointer that loops,
points forward, past the end, or (in the question) anywhere — the checks are: no exception
escapes, the reply is a FORMERR with the query's ID or nothing, and the malformed counter
went up by one. Names from any length byte (0–255) get the weaker check: no exception, and
what goes out is a DNS response with the query's ID.
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass

from dnslib import QTYPE, RR, DNSRecord
from dnslib import SRV as SRVData
from hypothesis import given
from hypothesis import strategies as st

from nodes.agent.stub import StubAgent
from nodes.resolver.core import RecursiveResolver
from nodes.resolver.types import Discovery
from tests.nodes.test_fuzz import (
    FUZZ,
    HIER,
    LEAF_TOOL,
    NS,
    SRC,
    _drive,
    _fresh_network,
    _servers,
    assert_discovery_succeeds,
    assert_servers_still_answer,
)

FORMERR = 1
SAFE = b"abcdefghijklmnopqrstuvwxyz0123456789-_"
#: malformed wherever they stand; "header" (a pointer below offset 12) only in a question
ILLEGAL = ("long_label", "long_name", "long_via_pointer", "loop", "forward", "past_end")


@dataclass(frozen=True)
class BadName:
    """A recipe for a name: its kind, legal labels before the trick, and the trick's
    parameter (a label length, a pointer distance)."""

    kind: str
    prefix: tuple[bytes, ...]
    value: int
    fill: bytes

    def render(self, at: int, tail: int) -> bytes:
        """The name's bytes when it starts at offset ``at`` with ``tail`` bytes after it."""
        head = b"".join(bytes([len(x)]) + x for x in self.prefix)
        ptr = at + len(head)  # where a pointer (or the odd label) goes
        if self.kind == "long_label":  # a length byte of 64–191, then what is there
            return head + bytes([self.value]) + self.fill + b"\x00"
        if self.kind == "raw":  # any length byte, then some bytes and a terminator
            return head + bytes([self.value]) + self.fill + b"\x00"
        if self.kind in ("long_name", "long_via_pointer"):
            labels = b"".join(bytes([63]) + SAFE[i % 7:][:1] * 63 for i in range(4))
            body = head + labels + bytes([self.value % 60 + 1]) + b"z" * (self.value % 60 + 1)
            return body + (b"\xc0\x0c" if self.kind == "long_via_pointer" else b"\x00")
        if self.kind == "loop":  # to the name's start, or to the pointer itself
            target = at if self.value % 2 else ptr
        elif self.kind == "forward":  # past the pointer, maybe inside the message
            target = ptr + 2 + self.value % 24
        elif self.kind == "past_end":
            target = min(at + len(head) + 2 + tail + self.value, 0x3FFF)
        else:  # "header"
            target = self.value % 12
        return head + (0xC000 | target).to_bytes(2, "big")


legal_label = st.binary(min_size=1, max_size=63).filter(lambda b: b.isascii()) | st.builds(
    lambda n, c: c * n, st.integers(1, 63), st.sampled_from([b"a", b"_", b"-", b"9"]))


@st.composite
def bad_names(draw, kinds: tuple[str, ...] = (*ILLEGAL, "header")) -> BadName:
    kind = draw(st.sampled_from(kinds))
    prefix = tuple(draw(st.lists(legal_label, max_size=3)))
    if kind == "long_label":
        value = draw(st.integers(64, 191))
    elif kind == "raw":
        value = draw(st.integers(0, 255))
    else:
        value = draw(st.integers(0, 300))
    fill = b""
    if kind in ("long_label", "raw"):  # the whole label, or some bytes
        fill = draw(st.just(b"q" * value) | st.binary(max_size=200))
    return BadName(kind, prefix, value, fill)


def query_with(name: BadName, qid: int, qtype: int, edns: bool) -> bytes:
    tail = 4 + (11 if edns else 0)
    wire = name.render(12, tail)
    opt = b"\x00" + struct.pack("!HHIH", 41, 1232, 0, 0) if edns else b""
    return struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, int(edns)) + wire + struct.pack(
        "!HH", qtype, 1) + opt


def assert_formerr_or_nothing(out: bytes | None, query: bytes) -> None:
    if out is None:
        return
    assert out[:2] == query[:2]  # the query's ID
    reply = DNSRecord.parse(out)
    assert reply.header.qr == 1 and reply.header.rcode == FORMERR


# ------------------------------------------------------------------ authoritative server


def test_server_answers_bad_question_names_with_formerr():
    servers = _servers()

    @FUZZ
    @given(name=bad_names(), qid=st.integers(0, 0xFFFF), idx=st.integers(0, 4),
           transport=st.sampled_from(["udp", "tcp", "tls"]), edns=st.booleans(),
           qtype=st.sampled_from([QTYPE.SRV, QTYPE.A, QTYPE.AXFR, QTYPE.IXFR]))
    def prop(name, qid, idx, transport, edns, qtype):
        server = servers[idx]
        wire = query_with(name, qid, qtype, edns)
        counts = server.stats.counts
        before = counts["formerr"] + counts["dropped_malformed"]
        out: bytes | list[bytes] | None = None
        if transport == "tcp":  # as the TCP adapter: a transfer first, else handle
            out = server.transfer(wire, SRC, 0.0)
            assert out is None  # not a transfer request it recognises
        out = server.handle(wire, SRC, 0.0, transport)
        assert_formerr_or_nothing(out, wire)
        assert counts["formerr"] + counts["dropped_malformed"] == before + 1
        assert counts["internal_error"] == 0

    prop()
    assert_servers_still_answer(servers)


def test_server_survives_any_label_length_byte():
    servers = _servers()

    @FUZZ
    @given(name=bad_names(("raw",)), qid=st.integers(0, 0xFFFF), idx=st.integers(0, 4),
           transport=st.sampled_from(["udp", "tcp"]))
    def prop(name, qid, idx, transport):
        server = servers[idx]
        wire = query_with(name, qid, QTYPE.SRV, True)
        out = server.transfer(wire, SRC, 0.0) if transport == "tcp" else None
        for data in out or [server.handle(wire, SRC, 0.0, transport)]:
            if data is not None:
                assert data[:2] == wire[:2] and DNSRecord.parse(data).header.qr == 1
        assert server.stats.counts["internal_error"] == 0

    prop()
    assert_servers_still_answer(servers)


# ------------------------------------------------------------------ resolver


def test_resolver_answers_bad_stub_names_with_formerr():
    net = _fresh_network()
    resolver = net.resolver

    @FUZZ
    @given(name=bad_names(), qid=st.integers(0, 0xFFFF), edns=st.booleans(),
           transport=st.sampled_from(["udp", "tcp"]), qtype=st.sampled_from([QTYPE.SRV, 1]))
    def prop(name, qid, edns, transport, qtype):
        wire = query_with(name, qid, qtype, edns)
        before = resolver.stats["malformed"]
        resolver.receive(wire, ("10.1.2.3", 4444), net.now, transport)
        outs = resolver.to_send()
        assert len(outs) <= 1 and all(o.dst == ("10.1.2.3", 4444) for o in outs)  # no walk
        assert_formerr_or_nothing(outs[0].data if outs else None, wire)
        assert resolver.stats["malformed"] == before + 1

    prop()
    assert_discovery_succeeds(net)


def test_resolver_survives_any_label_length_byte_from_stubs():
    net = _fresh_network()
    resolver = net.resolver
    client = ("10.1.2.3", 4444)

    @FUZZ
    @given(name=bad_names(("raw",)), qid=st.integers(0, 0xFFFF))
    def prop(name, qid):
        wire = query_with(name, qid, QTYPE.SRV, True)
        resolver.receive(wire, client, net.now, "udp")
        net.run()  # whatever it started, finished (the memory network answers servers)
        for out in resolver.to_send():
            if out.dst == client:
                assert out.data[:2] == wire[:2] and DNSRecord.parse(out.data).header.qr == 1

    replies: list[bytes] = []
    # net.run() drains the queue: look at what goes to the client as the network takes it
    net.tap = lambda out: out.dst == client and replies.append(out.data)
    prop()
    for data in replies:
        assert DNSRecord.parse(data).header.qr == 1
    assert_discovery_succeeds(net)


def with_record(reply: bytes, name: BadName, where: str) -> bytes:
    """``reply`` with one more additional record carrying ``name`` as its owner or as the
    target of an SRV record (ID and question kept: it comes from the right server)."""
    (ar,) = struct.unpack_from("!H", reply, 10)
    head = reply[:10] + struct.pack("!H", ar + 1) + reply[12:]
    at = len(head)
    if where == "owner":
        return head + name.render(at, 14) + struct.pack("!HHIH", 1, 1, 60, 4) + b"\x0a\0\0\1"
    target = name.render(at + 18, 0)
    return head + b"\xc0\x0c" + struct.pack("!HHIHHHH", 33, 1, 60, 6 + len(target), 0, 0,
                                             443) + target


def _clean_result(seed: int) -> list[tuple]:
    resolver = HIER.resolver(seed=seed)
    query = NS.queries[1]
    resolver.discover(Discovery(query.text, service=query.service, k=1), 0.0)
    _drive(resolver, -1, lambda r: r)
    (result,) = resolver.pop_results()
    return [(e.target, e.address, e.port) for e in result.endpoints]


def test_resolver_drops_upstream_replies_with_bad_names():
    query = NS.queries[1]
    expected = {seed: _clean_result(seed) for seed in range(2)}
    assert all(expected.values())

    @FUZZ
    @given(name=bad_names(ILLEGAL), where=st.sampled_from(["owner", "target"]),
           corrupt_at=st.integers(0, 4), seed=st.integers(0, 1))
    def prop(name, where, corrupt_at, seed):
        resolver: RecursiveResolver = HIER.resolver(seed=seed)
        resolver.discover(Discovery(query.text, service=query.service, k=1), 0.0)
        _drive(resolver, corrupt_at, lambda reply: with_record(reply, name, where))
        (result,) = resolver.pop_results()
        # the bad reply was dropped and counted; the genuine one after it carried the walk
        assert resolver.stats["malformed"] == 1
        assert [(e.target, e.address, e.port) for e in result.endpoints] == expected[seed]

    prop()


# ------------------------------------------------------------------ agent


def test_agent_ignores_resolver_replies_with_bad_names():
    resolver = ("127.0.0.2", 53)

    @FUZZ
    @given(name=bad_names(ILLEGAL), where=st.sampled_from(["owner", "target"]),
           style=st.sampled_from(["option", "qname"]))
    def prop(name, where, style):
        agent = StubAgent(resolver, random.Random(1), style=style)
        agent.ask("t", Discovery(LEAF_TOOL.description, service="mcp", k=1), 0.0)
        (out,) = agent.to_send()
        query = DNSRecord.parse(out.data)
        reply = query.reply()
        reply.add_answer(RR(query.q.qname, QTYPE.SRV, rdata=SRVData(0, 0, 443,
                                                                     LEAF_TOOL.target)))
        agent.receive(with_record(reply.pack(), name, where), resolver, 0.1, "udp")
        assert agent.ignored == 1
        assert agent.to_send() == [] and agent.pop_done() == []

    prop()

