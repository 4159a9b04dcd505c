"""Property tests: peer input never crashes a node, and nodes keep working afterwards.

A nonzero ``internal_error`` count on a server means a bug of ours (an exception inside the
answering code turned into SERVFAIL), so it is asserted to stay zero. Name-level mutations
(label lengths 0–255, names over 255 bytes, pointer tricks) are in
:mod:`tests.nodes.test_fuzz_names`.
"""

from __future__ import annotations

import os
import struct
from collections import Counter

import pytest
from dnslib import (
    EDNS0,
    QTYPE,
    RCODE,
    RR,
    SRV,
    TXT,
    A,
    DNSHeader,
    DNSLabel,
    DNSQuestion,
    DNSRecord,
    EDNSOption,
)
from dnslib import NS as NSRecord
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodes.authoritative.server import AuthoritativeServer
from nodes.dns.wire import (
    DEFAULT_OPTION_CODE,
    Intent,
    cursor_name,
    expanded_name,
    is_subdomain,
    normalise,
)
from nodes.resolver.types import Discovery
from sim.build.hierarchy import build_hierarchy
from sim.engines.memory import MemoryNetwork
from topologies.addresses import assign_servers
from topologies.synthetic import synthetic

SRC = ("127.0.0.9", 5555)
# FUZZ_EXAMPLES=5000 python -m pytest tests/nodes/test_fuzz.py  for a longer run
FUZZ = settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", "400")), deadline=None,
                derandomize=True, suppress_health_check=[HealthCheck.too_slow])

NS = synthetic(n_tools=80, branching=3, depth=2, seed=21, n_orgs=1, n_queries=20)
HIER = build_hierarchy(NS, replicas=1, scorer="bm25")
LEAF = next(z for z in NS.leaves() if NS.zones[z].tools and not NS.zones[z].org)
LEAF_TOOL = NS.tools[NS.zones[LEAF].tools[0]]
BRANCH = NS.parent_of(LEAF)


def _server_for(zone: str) -> AuthoritativeServer:
    return next(s for a, s in HIER.servers.items() if HIER.zone_of[a] == zone)


def _servers() -> list[AuthoritativeServer]:
    """Root, tools., a branch and a leaf as deployed, plus one server holding every zone."""
    every = AuthoritativeServer(NS.zone_data(assign_servers(NS)), name="all")
    return [_server_for(z) for z in (".", "tools.", BRANCH, LEAF)] + [every]


def make_query(qname: str, qtype: int = QTYPE.SRV, intent: Intent | None = None,
               edns: bool = True, qid: int = 0x2A2A) -> bytes:
    q = DNSRecord(DNSHeader(id=qid, rd=0))
    q.add_question(DNSQuestion(qname, qtype))
    if edns:
        opts = [EDNSOption(DEFAULT_OPTION_CODE, intent.encode())] if intent else []
        q.add_ar(EDNS0(udp_len=1232, opts=opts))
    return q.pack()


SEEDS = [
    make_query("_mcp._tcp._tools.", intent=Intent("weather history", 2)),
    make_query(cursor_name(LEAF_TOOL.service, BRANCH), intent=Intent(LEAF_TOOL.description, 1)),
    make_query(cursor_name(LEAF_TOOL.service, BRANCH), intent=Intent("", 0)),
    make_query(cursor_name(LEAF_TOOL.service, LEAF), intent=Intent(LEAF_TOOL.description, 0)),
    make_query(expanded_name(LEAF_TOOL.service, LEAF)),
    make_query(expanded_name(LEAF_TOOL.service, LEAF), edns=False),
    make_query(LEAF_TOOL.target, QTYPE.A),
    make_query(LEAF, QTYPE.SOA, edns=False),
    make_query("tools.", QTYPE.NS),
]


def check_answer(server: AuthoritativeServer, data: bytes, transport: str = "udp") -> None:
    out = server.handle(data, SRC, now=0.0, transport=transport)
    assert server.stats.counts["internal_error"] == 0, data
    if out is None:
        return
    reply = DNSRecord.parse(out)  # whatever goes out must be a DNS message
    assert reply.header.qr == 1
    assert out[:2] == data[:2]  # the query ID is echoed
    if transport == "udp":
        assert len(out) <= server.max_udp_size


def assert_servers_still_answer(servers: list[AuthoritativeServer]) -> None:
    root, tld, branch, leaf, every = servers
    wire = make_query("_mcp._tcp._tools.", intent=Intent("anything", 1))
    reply = DNSRecord.parse(root.handle(wire, SRC, 0.0))
    assert [normalise(rr.rname) for rr in reply.auth] == ["tools."]
    wire = make_query(cursor_name(LEAF_TOOL.service, LEAF),
                      intent=Intent(f"{LEAF_TOOL.name} {LEAF_TOOL.description}", 1))
    for server in (leaf, every):
        reply = DNSRecord.parse(server.handle(wire, SRC, 0.0))
        assert reply.header.aa == 1
        assert [str(rr.rdata.target) for rr in reply.rr] == [LEAF_TOOL.target]
    reply = DNSRecord.parse(tld.handle(make_query(LEAF_TOOL.target, QTYPE.A), SRC, 0.0))
    assert reply.header.aa == 0
    assert [normalise(rr.rname) for rr in reply.auth] == [NS.path(LEAF)[1]]  # referral
    reply = DNSRecord.parse(branch.handle(make_query("nope." + BRANCH, QTYPE.A), SRC, 0.0))
    assert reply.header.rcode == RCODE.NXDOMAIN
    for server in servers:
        assert server.stats.counts["internal_error"] == 0


# ------------------------------------------------------------------ mutation strategy

mutations = st.lists(
    st.tuples(st.sampled_from(["flip", "insert", "delete", "set"]),
              st.floats(0, 1, exclude_max=True), st.integers(0, 255)),
    min_size=1, max_size=6,
)


def mutate(data: bytes, ops) -> bytes:
    buf = bytearray(data)
    for op, where, value in ops:
        i = int(where * (len(buf) + 1))
        if op == "insert":
            buf.insert(min(i, len(buf)), value)
        elif not buf:
            continue
        elif op == "flip":
            buf[min(i, len(buf) - 1)] ^= 1 << (value % 8)
        elif op == "set":
            buf[min(i, len(buf) - 1)] = value
        else:
            del buf[min(i, len(buf) - 1)]
    return bytes(buf)


def usually(draw, normal, odd):
    """Mostly ``normal``, sometimes something drawn from ``odd``.

    The odd choice sits in the middle of the range: Hypothesis favours the bounds.
    """
    return draw(odd) if draw(st.integers(0, 9)) == 4 else normal


# names built from labels that stress presentation-format conversions
label = st.one_of(
    st.binary(min_size=1, max_size=63),
    st.text("abcxyz0189-_.\\ @$();\"", min_size=1, max_size=63).map(str.encode),
    st.sampled_from([b"_mcp", b"_tcp", b"_tools", b"tools", b"_", b".", b"\\", b"a.b",
                     b"\\046", b" ", b"@", b"\xff", LEAF.split(".")[0].encode(),
                     b"_" + BRANCH.split(".")[0].encode()]),
)
ZONES = ["tools.", BRANCH, LEAF, *sorted(NS.zones)[:4]]  # mostly zones the servers serve


@st.composite
def qnames(draw) -> bytes:
    """``_svc._proto[._]zone`` at a zone of the namespace, a name near it, or junk labels."""
    kind = draw(st.integers(0, 4))
    if kind == 2:
        labels = draw(st.lists(label, max_size=5)) + [
            x.encode() for x in draw(st.sampled_from(ZONES)).rstrip(".").split(".")]
    else:
        service = usually(draw, b"_mcp", st.sampled_from([b"_rest", b"_a2a", b"_skill", b"mcp",
                                                          b"_"]))
        proto = usually(draw, b"_tcp", st.sampled_from([b"_udp", b"tcp", b"_"]))
        zone = [x.encode() for x in draw(st.sampled_from(ZONES)).rstrip(".").split(".")]
        if kind != 3:  # cursor
            zone[0] = b"_" + zone[0]
        labels = [service, proto, *zone]
        if kind == 3 and draw(st.booleans()):
            labels = [draw(label), *labels[2:]]
    return b"".join(bytes([len(x)]) + x for x in labels) + b"\x00"


@st.composite
def dns_messages(draw) -> bytes:
    """Queries that are mostly well-formed ToolDNS queries, with each field sometimes odd."""
    qid = draw(st.integers(0, 0xFFFF))
    flags = usually(draw, 0, st.integers(0, 0xFFFF))
    qtype = usually(draw, QTYPE.SRV, st.sampled_from([1, 2, 6, 16, 28, 41, 255, 0, 65535]))
    qclass = usually(draw, 1, st.sampled_from([3, 254, 255, 0]))
    counts = usually(draw, (1, 0, 0, 0), st.tuples(*[st.integers(0, 3)] * 4))
    opt = b""
    if usually(draw, True, st.just(False)):
        text = draw(st.text(max_size=80))
        k = usually(draw, draw(st.integers(0, 4)), st.integers(0, 255))
        data = usually(draw, Intent(text, k).encode(), st.binary(max_size=20))
        code = usually(draw, DEFAULT_OPTION_CODE, st.sampled_from([10, 65001]))
        options = usually(draw, struct.pack("!HH", code, len(data)) + data,
                          st.sampled_from([b"", b"\x00", b"\xff\x98\x00\x09\x00"]))
        ttl = usually(draw, 0, st.sampled_from([0x8000, 1 << 16, 0xFF << 24, 0xFFFFFFFF]))
        size = usually(draw, 1232, st.sampled_from([0, 100, 512, 4096, 65535]))
        opt = b"\x00" + struct.pack("!HHIH", 41, size, ttl, len(options)) + options
    qd, an, ns, ar = counts
    header = struct.pack("!HHHHHH", qid, flags, qd, an, ns, ar + int(bool(opt)))
    return header + draw(qnames()) + struct.pack("!HH", qtype, qclass) + opt


# ------------------------------------------------------------------ authoritative server


def test_authoritative_random_bytes():
    servers = _servers()

    @FUZZ
    @given(data=st.binary(max_size=600), idx=st.integers(0, 4),
           transport=st.sampled_from(["udp", "tcp"]))
    def prop(data, idx, transport):
        check_answer(servers[idx], data, transport)

    prop()
    assert_servers_still_answer(servers)


def test_authoritative_every_truncation_of_valid_queries():
    servers = _servers()
    for seed in SEEDS:
        for n in range(len(seed) + 1):
            for server in servers:
                check_answer(server, seed[:n])
    assert_servers_still_answer(servers)


def test_authoritative_mutated_valid_queries():
    servers = _servers()

    @FUZZ
    @given(seed=st.sampled_from(SEEDS), ops=mutations, idx=st.integers(0, 4),
           transport=st.sampled_from(["udp", "tcp"]))
    def prop(seed, ops, idx, transport):
        check_answer(servers[idx], mutate(seed, ops), transport)

    prop()
    assert_servers_still_answer(servers)


def test_authoritative_generated_messages():
    servers = _servers()

    @FUZZ
    @given(data=dns_messages(), transport=st.sampled_from(["udp", "tcp"]))
    def prop(data, transport):
        for server in servers:
            check_answer(server, data, transport)

    prop()
    assert sum(s.stats.counts["semantic"] for s in servers) > 50  # the generator reaches them
    assert_servers_still_answer(servers)


# ------------------------------------------------------------------ resolver

sources = st.tuples(
    st.builds(lambda a, b, c: f"10.{a}.{b}.{c}", st.integers(0, 255), st.integers(0, 255),
              st.integers(0, 255)),
    st.integers(0, 65535),
)


def _fresh_network(seed: int = 3) -> MemoryNetwork:
    return MemoryNetwork(HIER, HIER.resolver(seed=seed))


def assert_discovery_succeeds(net: MemoryNetwork) -> None:
    net.run()  # let whatever the fuzzing started finish first
    net.now += 1000  # and let every cache entry it may have made expire
    query = NS.queries[0]
    truth = NS.tools[query.truth[0]]
    net.resolver.discover(Discovery(f"{truth.name} {truth.description}", service=truth.service,
                                    k=1), net.now)
    (result,) = net.run()
    assert [(e.target, e.address, e.port) for e in result.endpoints] == [
        (truth.target, truth.address, truth.port)]


def test_resolver_random_bytes_from_random_sources():
    net = _fresh_network()
    resolver = net.resolver

    @FUZZ
    @given(data=st.binary(max_size=600), src=sources, transport=st.sampled_from(["udp", "tcp"]))
    def prop(data, src, transport):
        resolver.receive(data, src, net.now, transport)
        for out in resolver.to_send():
            if out.dst == src:  # anything sent back to the peer is a parseable response
                assert DNSRecord.parse(out.data).header.qr == 1

    prop()
    assert resolver.stats["malformed"] > 0
    assert_discovery_succeeds(net)


def test_resolver_mutated_stub_queries():
    net = _fresh_network()
    resolver = net.resolver
    stub = [make_query("_mcp._tcp._tools.", intent=Intent("weather history", 2)),
            make_query(cursor_name(LEAF_TOOL.service, BRANCH), intent=Intent("x", 0)),
            make_query(LEAF_TOOL.target, QTYPE.A)]
    replies: list[bytes] = []

    @FUZZ
    @given(seed=st.sampled_from(stub), ops=mutations, src=sources)
    def prop(seed, ops, src):
        resolver.receive(mutate(seed, ops), src, net.now, "udp")
        net.run()  # the memory network drops traffic to non-server addresses
        replies.extend(o.data for o in resolver.to_send())

    net.tap = lambda out: out.dst[0] not in HIER.servers and replies.append(out.data)
    prop()
    assert replies
    for data in replies:
        assert DNSRecord.parse(data).header.qr == 1
    assert resolver.stats["client_queries"] > 0
    assert_discovery_succeeds(net)


def _drive(resolver, corrupt_at: int, corrupt) -> list[DNSRecord]:
    """Run the resolver by hand until it is idle, putting a corrupted copy of the
    ``corrupt_at``-th response before the genuine one; returns what stub clients got."""
    now, n = 0.0, 0
    to_clients: list[DNSRecord] = []
    for _ in range(500):
        outs = resolver.to_send()
        if not outs:
            timer = resolver.next_timer()
            if timer is None:
                return to_clients
            now = timer
            resolver.on_timer(now)
            continue
        for out in outs:
            server = HIER.servers.get(out.dst[0])
            if out.reply:
                to_clients.append(DNSRecord.parse(out.data))
                continue
            if server is None:  # edited glue can point anywhere: nobody answers there
                continue
            reply = server.handle(out.data, ("127.0.53.1", 40000), now, out.transport)
            if reply is None:
                continue
            now += 0.001
            if n == corrupt_at:  # (maybe too late for) the genuine one
                resolver.receive(corrupt(reply), out.dst, now, out.transport)
            resolver.receive(reply, out.dst, now, out.transport)
            n += 1
    raise AssertionError("the resolver did not settle")


def test_resolver_mutated_responses_from_the_right_server():
    query = NS.queries[1]

    @FUZZ
    @given(corrupt_at=st.integers(0, 6), ops=mutations, keep_id=st.booleans(),
           seed=st.integers(0, 3), k=st.sampled_from([0, 1, 3]), beam=st.integers(1, 2))
    def prop(corrupt_at, ops, keep_id, seed, k, beam):
        resolver = HIER.resolver(seed=seed)

        def corrupt(reply: bytes) -> bytes:
            bad = mutate(reply, ops)
            return reply[:2] + bad[2:] if keep_id else bad

        request = Discovery(query.text, service=query.service, k=k, beam=beam)
        resolver.discover(request, 0.0)
        _drive(resolver, corrupt_at, corrupt)
        # every discovery ends with a result (a garbled response that lost its QR bit is a
        # client query in its own right, with a result of its own)
        (result,) = [r for r in resolver.pop_results() if r.request == request]
        assert result.finished >= result.started
        assert all(e.address for e in result.endpoints)
        assert k == 0 or len(result.endpoints) <= k

    prop()


# structural edits of a genuine response: the result still parses and still matches the
# question, so the resolver accepts it and has to cope with what it says
NAMES = [".", "tools.", BRANCH, LEAF, LEAF_TOOL.target, "evil.example.", "ns1." + LEAF,
         "_mcp._tcp._tools.", "x." + LEAF, "\\@.weird\\032name."]
ADDRESSES = ["10.66.6.6", "0.0.0.0", "255.255.255.255", *sorted(HIER.servers)[:3]]
edits = st.lists(
    st.tuples(st.sampled_from(["drop", "dup", "move", "rename", "ttl", "rdata", "add_ns",
                               "add_srv", "add_txt", "rcode", "flags"]),
              st.integers(0, 2), st.integers(0, 50), st.integers(0, 2**16 - 1)),
    min_size=1, max_size=6,
)


def edit(reply: bytes, ops) -> bytes:
    msg = DNSRecord.parse(reply)
    for op, sec, pos, value in ops:
        sections = [msg.rr, msg.auth, [rr for rr in msg.ar if rr.rtype != QTYPE.OPT]]
        rrs = sections[sec]
        name = NAMES[value % len(NAMES)]
        if op == "rcode":
            msg.header.rcode = value % 16
        elif op == "flags":
            msg.header.tc, msg.header.aa = value & 1, (value >> 1) & 1
        elif op == "add_ns":
            msg.add_auth(RR(name, QTYPE.NS, ttl=value, rdata=NSRecord(NAMES[pos % len(NAMES)])))
            msg.add_ar(RR(NAMES[pos % len(NAMES)], QTYPE.A, ttl=value,
                          rdata=A(ADDRESSES[value % len(ADDRESSES)])))
        elif op == "add_srv":
            msg.add_answer(RR(msg.q.qname, QTYPE.SRV, ttl=value % 600,
                              rdata=SRV(0, 0, value % 7, name)))
        elif op == "add_txt":
            msg.add_ar(RR(name, QTYPE.TXT, ttl=value,
                          rdata=TXT([b"summary=", bytes([pos, value % 256]), b"kind=leaf",
                                     b"services=" + NAMES[pos % len(NAMES)].encode()])))
        elif not rrs:
            continue
        else:
            rr = rrs[pos % len(rrs)]
            if op == "drop":
                for section in (msg.rr, msg.auth, msg.ar):
                    if rr in section:
                        section.remove(rr)
                        break
            elif op == "dup":
                sections[sec].append(rr)
                (msg.rr, msg.auth, msg.ar)[sec].append(rr)
            elif op == "move":
                for section in (msg.rr, msg.auth, msg.ar):
                    if rr in section:
                        section.remove(rr)
                        break
                (msg.rr, msg.auth, msg.ar)[(sec + 1) % 3].append(rr)
            elif op == "rename":
                rr.rname = DNSLabel(name)
            elif op == "ttl":
                rr.ttl = value * 65537
            elif rr.rtype == QTYPE.A:
                rr.rdata = A(ADDRESSES[value % len(ADDRESSES)])
            elif rr.rtype == QTYPE.NS:
                rr.rdata = NSRecord(name)
            elif rr.rtype == QTYPE.SRV:
                rr.rdata = SRV(value % 3, value % 5, value % 2**16, name)
            elif rr.rtype == QTYPE.TXT:
                rr.rdata = TXT([bytes([value % 256]) * (pos % 5), b"summary=" + name.encode()])
    return msg.pack()


def test_resolver_edited_responses_from_the_right_server():
    query = NS.queries[3]
    stats: Counter[str] = Counter()
    client = ("10.7.7.7", 7777)

    @FUZZ
    @given(corrupt_at=st.integers(0, 6), ops=edits, seed=st.integers(0, 3),
           k=st.sampled_from([0, 1, 3]), beam=st.integers(1, 2),
           how=st.sampled_from(["discover", "warm", "stub", "stub-literal"]))
    def prop(corrupt_at, ops, seed, k, beam, how):
        resolver = HIER.resolver(seed=seed)
        corrupt = lambda reply: edit(reply, ops)  # noqa: E731
        if how == "warm":  # K = 0 warming over edited responses, then a walk over that tree
            resolver.warm(query.service, 0.0)
            assert _drive(resolver, corrupt_at, corrupt) == []
            assert len(resolver.pop_results()) == 1
            corrupt_at = -1
        if how.startswith("stub"):
            intent = Intent(query.text, k) if how == "stub" else None
            resolver.receive(make_query(cursor_name(query.service, "tools."), intent=intent),
                             client, 0.0, "udp")
        else:
            resolver.discover(Discovery(query.text, service=query.service, k=k, beam=beam), 0.0)
        replies = _drive(resolver, corrupt_at, corrupt)
        (result,) = resolver.pop_results()  # every walk ends with a result
        assert all(e.address for e in result.endpoints)
        assert k == 0 or len(result.endpoints) <= k
        assert all(is_subdomain(e.target, "tools.") for e in result.endpoints)
        if how.startswith("stub"):
            (reply,) = replies  # exactly one answer per stub query
            assert reply.header.id == 0x2A2A and reply.header.ra == 1
        stats.update(resolver.stats)

    prop()
    assert stats["unexpected_response"] > 100  # edited responses were taken for real ones


@pytest.mark.parametrize("index", [0, 2])
def test_resolver_every_truncation_of_a_genuine_response(index):
    query = NS.queries[2]
    truth = NS.tools[query.truth[0]]
    request = Discovery(f"{truth.name} {truth.description}", service=truth.service, k=1)
    resolver = HIER.resolver(seed=9)
    resolver.discover(request, 0.0)
    genuine: list[tuple] = []
    n = 0
    while n <= index:
        (out,) = resolver.to_send()
        reply = HIER.servers[out.dst[0]].handle(out.data, ("127.0.53.1", 40000), 0.0, "udp")
        genuine.append((reply, out.dst))
        if n == index:
            for cut in range(len(reply)):
                resolver.receive(reply[:cut], out.dst, 0.001, "udp")
                assert resolver.to_send() == []  # nothing, not even a FORMERR to a server
        resolver.receive(reply, out.dst, 0.002, "udp")
        n += 1
    net = MemoryNetwork(HIER, resolver, now=0.002)
    (result,) = net.run()
    assert [e.target for e in result.endpoints] == [truth.target]
