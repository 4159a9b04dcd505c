"""The beam a client asks for travels in the intent option (version 1) and changes the
resolver's walk: a session's ``wider_beam`` reaches the wire, the resolver walks as wide
(up to its ``max_client_beam``), servers read either version, and a malformed version 1
gets FORMERR. No sockets."""

from __future__ import annotations

import random

import pytest
from dnslib import EDNS0, QTYPE, DNSRecord, EDNSOption

from nodes.agent.stub import StubAgent
from nodes.dns.wire import (
    DEFAULT_OPTION_CODE,
    INTENT_VERSION,
    INTENT_VERSION_BEAM,
    Intent,
    IntentError,
    cursor_name,
)
from nodes.resolver.config import ResolverConfig
from nodes.resolver.types import Discovery, DiscoveryResult
from sim.build.hierarchy import build_hierarchy
from sim.engines.memory import MemoryNetwork
from topologies.synthetic import synthetic

RESOLVER = ("127.0.53.1", 53)
AGENT = ("127.0.0.7", 40000)


def test_version_1_carries_the_beam_and_version_0_is_unchanged() -> None:
    plain = Intent("weather in paris", k=3)
    assert plain.version == INTENT_VERSION and plain.beam is None
    assert plain.encode() == b"\x00\x00\x10\x03weather in paris"  # what every run sent so far
    wide = Intent("weather in paris", k=3, beam=4)
    assert wide.version == INTENT_VERSION_BEAM
    assert wide.encode() == b"\x01\x00\x10\x03\x04weather in paris"
    assert Intent.decode(wide.encode()) == wide and Intent.decode(plain.encode()) == plain
    for bad in (b"\x01\x00\x10\x03\x00weather in paris",  # beam 0
                b"\x01\x00\x10\x03",  # no beam byte
                b"\x02\x00\x10\x03weather in paris"):  # unknown version
        with pytest.raises(IntentError):
            Intent.decode(bad)
    with pytest.raises(IntentError):
        Intent("x", beam=256)


def _client_walk(beam: int | None, max_client_beam: int = 16) -> tuple[DiscoveryResult, dict]:
    """One stub query (beam ``beam``) answered by a resolver configured with beam 1."""
    ns = synthetic(n_tools=240, branching=3, depth=2, seed=4, n_queries=10)
    h = build_hierarchy(ns, scorer="bm25")
    resolver = h.resolver(seed=1, config=ResolverConfig(max_client_beam=max_client_beam))
    net = MemoryNetwork(h, resolver)
    query = next(q for q in ns.queries if q.service == "mcp")
    agent = StubAgent(RESOLVER, random.Random(3))
    agent.ask("t", Discovery(query.text, service="mcp", k=6, beam=beam), 0.0)
    for out in agent.to_send():
        resolver.receive(out.data, AGENT, net.now)
    (walk,) = net.run()
    return walk, dict(resolver.stats)


def test_the_clients_beam_changes_the_walk() -> None:
    narrow, _ = _client_walk(None)
    wide, _ = _client_walk(3)
    assert narrow.request.beam is None and wide.request.beam == 3
    assert len(narrow.leaves) == 1 and len(wide.leaves) == 3  # the resolver walked 3 wide
    assert len(wide.steps) > len(narrow.steps)
    capped, stats = _client_walk(200, max_client_beam=2)
    assert capped.request.beam == 2 and len(capped.leaves) == 2
    assert stats["client_beam_capped"] == 1


def test_servers_read_both_versions_and_refuse_a_bad_one() -> None:
    ns = synthetic(n_tools=60, branching=3, depth=1, seed=1, n_queries=4)
    h = build_hierarchy(ns, scorer="bm25")
    server = h.servers[h.root_hints[0]]
    leaf = next(z for z in ns.zones if z != "." and z != "tools.")

    def ask(data: bytes) -> DNSRecord:
        q = DNSRecord.question(cursor_name("mcp", "tools."), "SRV")
        q.add_ar(EDNS0(udp_len=1232, opts=[EDNSOption(DEFAULT_OPTION_CODE, data)]))
        out = server.handle(q.pack(), AGENT, 0.0)
        assert out is not None
        return DNSRecord.parse(out)

    v0 = ask(Intent("anything", k=2).encode())
    v1 = ask(Intent("anything", k=2, beam=5).encode())
    assert v0.header.rcode == v1.header.rcode == 0
    assert [str(r.rname) for r in v0.auth] == [str(r.rname) for r in v1.auth]
    assert v0.auth and all(r.rtype == QTYPE.NS for r in v0.auth) and leaf
    bad = ask(b"\x01\x00\x08\x02\x00anything")  # beam 0
    assert bad.header.rcode == 1  # FORMERR
    assert server.stats.counts["formerr_intent"] == 1
