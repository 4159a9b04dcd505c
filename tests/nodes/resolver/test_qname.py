"""The intent carried in the query name (the deployable design for stock recursors): the
name codec, the servers' CNAME chain and empty non-terminals, the resolver's ``qname``
mode against the aware walk, and the agent's ``qname`` style. No sockets."""

from __future__ import annotations

import random

import dns.flags
import dns.message
import dns.name
import dns.rdatatype
import pytest
from dnslib import QTYPE, RCODE, DNSRecord

from nodes.agent.stub import StubAgent
from nodes.dns.dnssec import ZoneSigner, verify_rrset
from nodes.dns.wire import (
    QNAME_INTENT_MAX,
    intent_labels,
    intent_qname,
    is_subdomain,
    parse_intent_labels,
    parse_intent_qname,
    retarget,
)
from nodes.resolver.config import ResolverConfig
from nodes.resolver.types import Discovery
from sim.build.hierarchy import build_hierarchy
from sim.build.trust import sign_hierarchy
from sim.engines.memory import MemoryNetwork
from sim.errors import ScenarioError
from sim.loading import load_scenario
from topologies.synthetic import synthetic

SRC = ("127.0.0.9", 5353)
AGENT = ("127.0.0.7", 40000)


@pytest.fixture(scope="module")
def ns():
    return synthetic(n_tools=540, branching=3, depth=3, seed=5, n_queries=40)


@pytest.fixture(scope="module")
def hierarchy(ns):
    return build_hierarchy(ns, scorer="bm25")


def ask(h, zone: str, name: str, qtype: str = "SRV", dnssec: bool = False) -> DNSRecord:
    address = next(a for a, z in sorted(h.zone_of.items()) if z == zone)
    query = DNSRecord.question(name, qtype)
    if dnssec:
        wire = dns.message.make_query(name, qtype, want_dnssec=True).to_wire()
    else:
        wire = query.pack()
    return DNSRecord.parse(h.servers[address].handle(wire, SRC, 0.0))


# ------------------------------------------------------------------ the name codec


def test_names_round_trip_and_stay_in_limits():
    name = intent_qname("Find the Weather forecast, for a city!", 3, "a2a", "weather.tools.")
    assert name == "k3.find-the-weather-forecast-for-a-city._a2a._tcp.weather.tools."
    parsed = parse_intent_qname(name, "weather.tools.")
    assert parsed is not None and (parsed.k, parsed.service, parsed.proto) == (3, "a2a", "tcp")
    assert parsed.text == "find the weather forecast for a city"
    assert retarget(parsed, "x.weather.tools.") == name.replace("weather.tools.",
                                                                 "x.weather.tools.")
    long = " ".join(f"word{i}" for i in range(100)) + " " + "z" * 80
    labels = intent_labels(long)
    assert all(1 <= len(label) <= 63 for label in labels)
    assert len(".".join(labels)) <= QNAME_INTENT_MAX and len(labels) == 2
    assert intent_labels("z" * 80) == ["z" * 63]  # one over-long word is cut
    with pytest.raises(ValueError, match="no letters or digits"):
        intent_qname("?! …", 1)
    with pytest.raises(ValueError, match="K must be"):
        intent_qname("weather", 256)


def test_no_proper_suffix_of_an_intent_name_is_a_query():
    """What a QNAME-minimising resolver asks on the way down must not be an intent."""
    labels = intent_qname("a b c " + "d" * 60, 2).split(".")[:-2]  # below tools.
    assert parse_intent_labels(labels) is not None
    for i in range(1, len(labels)):
        assert parse_intent_labels(labels[i:]) is None, labels[i:]
    for bad in (["k", "w", "_mcp", "_tcp"], ["kx", "w", "_mcp", "_tcp"],
                ["k3", "_w", "_mcp", "_tcp"], ["k3", "w", "mcp", "_tcp"],
                ["k256", "w", "_mcp", "_tcp"]):
        assert parse_intent_labels(bad) is None, bad


# ------------------------------------------------------------------ servers


def test_servers_answer_one_cname_per_level_down_to_the_leaf_srv(ns, hierarchy):
    query = ns.queries[0]
    name = intent_qname(query.text, 3, query.service)
    zone, chain = "tools.", []
    for _ in range(8):
        reply = ask(hierarchy, zone, name)
        assert reply.header.rcode == RCODE.NOERROR and reply.header.aa
        cnames = [rr for rr in reply.rr if rr.rtype == QTYPE.CNAME]
        if not cnames:
            break
        target = str(cnames[0].rdata.label)
        child = str(reply.auth[0].rname)
        # the next name is below the child the referral beside it names, with glue
        assert is_subdomain(target, child) and child.endswith("." + zone)
        assert {str(rr.rname) for rr in reply.ar} <= {str(rr.rdata.label) for rr in reply.auth}
        chain.append(target)
        name, zone = target, child
    assert len(chain) == 3  # tools. → depth 3: three CNAMEs, then the leaf
    srv = [rr for rr in reply.rr if rr.rtype == QTYPE.SRV]
    assert 1 <= len(srv) <= 3 and all(str(rr.rname) == name for rr in srv)
    assert {str(rr.rname) for rr in reply.ar} == {str(rr.rdata.target) for rr in srv}


def test_names_above_an_intent_are_empty_non_terminals(hierarchy):
    for name in ("_tcp.tools.", "_mcp._tcp.tools.", "find-x._mcp._tcp.tools.",
                 "k3._mcp._tcp.tools."):
        reply = ask(hierarchy, "tools.", name, "A")
        assert (reply.header.rcode, len(reply.rr)) == (RCODE.NOERROR, 0), name
        assert reply.auth[0].rtype == QTYPE.SOA
    for name in ("x._tcp.tools.", "_x.tools.", "k3.find._mcp._tls.tools."):
        assert ask(hierarchy, "tools.", name, "A").header.rcode == RCODE.NXDOMAIN, name
    # a cursor name without the option is still what it was: no such name
    assert ask(hierarchy, ".", "_mcp._tcp._tools.").header.rcode == RCODE.NXDOMAIN


def test_signed_cname_answers_parse_with_dnspython(ns):
    h = build_hierarchy(ns, scorer="bm25")
    sign_hierarchy(h, 3)
    address = next(a for a, z in sorted(h.zone_of.items()) if z == "tools.")
    wire = dns.message.make_query(intent_qname(ns.queries[1].text, 2, ns.queries[1].service),
                                  "SRV", want_dnssec=True).to_wire()
    msg = dns.message.from_wire(h.servers[address].handle(wire, SRC, 0.0))
    types = {(rrset.rdtype, rrset.covers) for rrset in msg.answer}
    assert (dns.rdatatype.CNAME, dns.rdatatype.NONE) in types
    assert (dns.rdatatype.RRSIG, dns.rdatatype.CNAME) in types
    assert any(rrset.rdtype == dns.rdatatype.DS for rrset in msg.authority)


# ------------------------------------------------------------------ resolver and agent


def run_mode(ns, hierarchy, mode: str, k: int = 3):
    net = MemoryNetwork(hierarchy, hierarchy.resolver(seed=1, config=ResolverConfig(mode=mode)))
    results = []
    for query in ns.queries[:20]:
        net.resolver.discover(Discovery(query.text, service=query.service, k=k), net.now)
        (result,) = net.run()
        results.append(result)
    return net, results


def test_qname_mode_finds_what_the_aware_walk_finds(ns, hierarchy):
    hierarchy.reset()
    _, aware = run_mode(ns, hierarchy, "aware")
    hierarchy.reset()
    _, named = run_mode(ns, hierarchy, "qname")
    assert all(r.endpoints for r in named)
    assert ([[(e.target, e.address, e.port) for e in r.endpoints] for r in aware]
            == [[(e.target, e.address, e.port) for e in r.endpoints] for r in named])
    # the same critical path: one exchange per level once the upper zones are known
    assert sum(r.rounds for r in named) == sum(r.rounds for r in aware)


def test_qname_mode_caches_like_a_stock_recursor(ns, hierarchy):
    hierarchy.reset()
    net, first = run_mode(ns, hierarchy, "qname")
    query = ns.queries[0]
    net.resolver.discover(Discovery(query.text, service=query.service, k=3), net.now)
    (again,) = net.run()
    assert again.exchanges == 0 and again.cache["answer_hit"] == 1
    assert again.cache["cname_hit"] == 3
    assert [e.target for e in again.endpoints] == [e.target for e in first[0].endpoints]
    # another K is another name: asked again, but every zone's servers are known
    net.resolver.discover(Discovery(query.text, service=query.service, k=1), net.now)
    (other,) = net.run()
    assert other.exchanges == 4 and {s.qtype for s in other.steps} == {"SRV"}
    assert other.endpoints[0].target == first[0].endpoints[0].target


def test_agent_puts_the_intent_in_the_name_and_asks_for_addresses(ns, hierarchy):
    """A stub of a ``qname``-mode (stock-like) resolver: no option, a CNAME chain relayed
    without the targets' addresses, then one round of A queries."""
    hierarchy.reset()
    resolver = hierarchy.resolver(seed=1, config=ResolverConfig(mode="qname"))
    net = MemoryNetwork(hierarchy, resolver)
    to_client: list = []  # the memory network carries resolver↔servers only: keep replies
    net.tap = lambda out: out.reply and to_client.append(out)
    agent = StubAgent(("127.0.53.1", 53), random.Random(2), style="qname")
    query = ns.queries[3]
    stub = agent.ask("t", Discovery(query.text, service=query.service, k=2), 0.0)
    rounds = 0
    while not agent.pop_done():
        sent = agent.to_send()
        assert sent and rounds < 3
        rounds += 1
        for out in sent:
            assert b"\xff\x98" not in out.data  # no intent option (code 65432)
            resolver.receive(out.data, AGENT, net.now)
        net.run()
        for out in to_client:
            agent.receive(out.data, ("127.0.53.1", 53), net.now)
        to_client.clear()
    assert rounds == 2 and stub.error is None, stub.error  # SRV, then the targets' A
    assert stub.steps[0].qname == intent_qname(query.text, 2, query.service)
    assert [s.qtype for s in stub.steps] == ["SRV"] + ["A"] * (len(stub.steps) - 1)
    assert stub.endpoints and len(stub.a_ids) == len({e.target for e in stub.endpoints})
    assert all(e.address for e in stub.endpoints)
    truth = {(t.target, t.address) for t in ns.tools.values()}
    assert {(e.target, e.address) for e in stub.endpoints} <= truth


# ------------------------------------------------------------------ DNSSEC


def test_signed_nodata_at_an_empty_non_terminal_carries_an_nsec_proof(ns):
    """What PowerDNS Recursor needs to accept ``_tcp.tools. DS`` (no NSEC chain here)."""
    h = build_hierarchy(ns, scorer="bm25")
    sign_hierarchy(h, 4)
    address = next(a for a, z in sorted(h.zone_of.items()) if z == "tools.")
    signer = h.servers[address].signer
    for name, qtype, types in (("_tcp.tools.", "DS", {"RRSIG", "NSEC"}),
                               ("_mcp._tcp.tools.", "A", {"RRSIG", "NSEC"}),
                               ("tools.", "SRV", {"SOA", "NS", "TXT", "DNSKEY", "RRSIG",
                                                  "NSEC"})):
        wire = dns.message.make_query(name, qtype, want_dnssec=True).to_wire()
        msg = dns.message.from_wire(h.servers[address].handle(wire, SRC, 0.0))
        assert msg.rcode() == 0 and not msg.answer
        (nsec,) = [r for r in msg.authority if r.rdtype == dns.rdatatype.NSEC]
        assert nsec.name.to_text() == name
        assert nsec[0].next.to_text() == "\\000." + name  # covers no other name
        listed = {dns.rdatatype.to_text(t) for w, bits in nsec[0].windows
                  for t in _bitmap(w, bits)}
        assert listed == types and qtype not in listed
        sigs = next(r for r in msg.authority if r.rdtype == dns.rdatatype.RRSIG
                    and r.covers == dns.rdatatype.NSEC)
        verify_rrset(nsec, sigs, dns.name.from_text("tools."), [signer.dnskeys["tools."]])
    # unsigned replies never get a proof
    plain = ask(h, "tools.", "_tcp.tools.", "A")
    assert not [rr for rr in plain.auth if rr.rtype == QTYPE.NSEC]


def _bitmap(window: int, bits: bytes) -> list[int]:
    return [window * 256 + i * 8 + j for i, byte in enumerate(bits) for j in range(8)
            if byte & (0x80 >> j)]


def test_qname_mode_validates_the_chain_and_sets_ad(ns):
    h = build_hierarchy(ns, scorer="bm25", packet_cache=0)  # re-signed below: no stale replies
    anchor = sign_hierarchy(h, 5)
    config = ResolverConfig(mode="qname", dnssec=True, trust_anchor=anchor)
    net = MemoryNetwork(h, h.resolver(seed=1, config=config))
    query = ns.queries[4]
    net.resolver.discover(Discovery(query.text, service=query.service, k=2), net.now)
    (result,) = net.run()
    assert result.endpoints and result.bogus == 0 and result.error is None
    assert net.resolver.stats["dnssec_secure"] >= 4  # tools., two levels, the leaf's SRV
    assert {s.qtype for s in result.steps} >= {"DNSKEY", "SRV", "A"}
    # a stub asking with DO gets AD on the (validated) CNAME chain
    replies: list = []
    net.tap = lambda out: out.reply and replies.append(out)
    other = ns.queries[5]
    wire = dns.message.make_query(intent_qname(other.text, 2, other.service), "SRV",
                                  want_dnssec=True).to_wire()
    net.resolver.receive(wire, AGENT, net.now)
    net.run()
    (out,) = replies
    msg = dns.message.from_wire(out.data)
    assert msg.flags & dns.flags.AD and any(r.rdtype == dns.rdatatype.SRV for r in msg.answer)
    # a leaf signing with a key its parent did not publish: bogus, nothing returned
    leaf = result.endpoints[0].zone
    for address, zone in h.zone_of.items():
        if zone == leaf:
            h.servers[address].signer = ZoneSigner("another seed", [zone])
    net = MemoryNetwork(h, h.resolver(seed=1, config=config))
    net.resolver.discover(Discovery(query.text, service=query.service, k=2), net.now)
    (forged,) = net.run()
    assert not forged.endpoints and forged.bogus >= 1


# ------------------------------------------------------------------ scenario files


@pytest.mark.parametrize(("scheme", "problem"), [
    ("{name: q, k: 0, mode: qname}", "k: mode qname needs K ≥ 1"),
    ("{name: q, k: 3, mode: qname, beam: 2}", "beam: does not apply to mode qname"),
    ("{name: q, k: 3, mode: qname, warm: true}", "warm: does not apply to mode qname"),
])
def test_scenario_rejects_what_a_stock_resolver_cannot_do(tmp_path, scheme, problem):
    path = tmp_path / "bad.yaml"
    path.write_text(f"name: x\nschemes:\n  - {scheme}\n", encoding="utf-8")
    with pytest.raises(ScenarioError, match=problem) as info:
        load_scenario(path)
    assert str(path) in str(info.value) and "schemes.0" in str(info.value)
    path.write_text("name: x\nschemes:\n  - {name: q, k: 3, mode: qname, dnssec: true}\n"
                    "namespace: {dnssec: true}\n", encoding="utf-8")
    assert load_scenario(path).schemes[0].mode == "qname"  # validates like a stock resolver
