"""The organisations' zones within DNS's limits: an organisation with more agents than one
answer carries publishes DNS-AID's index and DNS-SD's browse set up to that size, and a
server answers both over TCP (dnspython parses the answers)."""

from __future__ import annotations

import dns.flags
import dns.message
import dns.rdatatype

from nodes.authoritative.server import AuthoritativeServer
from nodes.dns.wire import MAX_MESSAGE_SIZE
from nodes.dns.zone import ServerRef, Ttls, ZoneData
from topologies.orgzones import (
    ANSWER_BYTES,
    INDEX_TEXT,
    Publication,
    dnsaid_index,
    dnsaid_index_records,
    dnssd_browse,
    org_records,
)

DOMAIN = "big.example."


def _pubs(n: int) -> list[Publication]:
    return [Publication(f"t{i:05d}", "big", DOMAIN, f"agent-number-{i:05d}", "mcp",
                        f"127.64.{i // 250}.{i % 250 + 1}", 8443, f"agent {i}")
            for i in range(n)]


def test_a_small_index_is_one_record_listing_everyone() -> None:
    (rec,) = dnsaid_index_records(DOMAIN, ["a:mcp", "b:a2a"], 300)
    assert rec.owner == dnsaid_index(DOMAIN) and b"agents=a:mcp,b:a2a" in rec.rdata[0]


def test_a_large_index_stops_at_one_answer() -> None:
    entries = [f"agent-number-{i:05d}:mcp" for i in range(5000)]
    recs = dnsaid_index_records(DOMAIN, entries, 300)
    texts = [b"".join(dns_strings(r.rdata[0])).decode() for r in recs]
    assert all(len(t) <= INDEX_TEXT for t in texts)
    listed = [e for t in texts for e in t.removeprefix("agents=").split(",")]
    assert listed == entries[:len(listed)] and 1000 < len(listed) < len(entries)
    assert sum(12 + len(r.rdata[0]) for r in recs) <= ANSWER_BYTES


def dns_strings(rdata: bytes) -> list[bytes]:
    out, i = [], 0
    while i < len(rdata):
        out.append(rdata[i + 1:i + 1 + rdata[i]])
        i += 1 + rdata[i]
    return out


def test_a_server_answers_the_large_sets_over_tcp() -> None:
    ttls = Ttls()
    records = org_records(DOMAIN, _pubs(4000), ttls, aaaa=False)
    browse = [r for r in records if r.owner == dnssd_browse(DOMAIN, "mcp")]
    assert 1000 < len(browse) < 4000  # the browse set stops at one answer too
    zone = ZoneData(name=DOMAIN, servers=(ServerRef(f"ns1.{DOMAIN}", "127.9.0.9"),),
                    ttls=ttls, records=records)
    server = AuthoritativeServer([zone])
    for name, rtype in ((dnsaid_index(DOMAIN), "TXT"), (dnssd_browse(DOMAIN, "mcp"), "PTR")):
        query = dns.message.make_query(name, rtype)
        reply = server.handle(query.to_wire(), ("127.0.0.1", 5300), 0.0, transport="tcp")
        assert reply is not None and len(reply) <= MAX_MESSAGE_SIZE
        msg = dns.message.from_wire(reply)
        assert not msg.flags & dns.flags.TC and msg.rcode() == 0
        (rrset,) = msg.answer
        assert rrset.rdtype == dns.rdatatype.from_text(rtype) and len(rrset) > 1


def test_every_organisation_zone_is_signed_on_its_hosting_server() -> None:
    """A hosting server holds many organisations' zones; signing the hierarchy signs each of
    them (not only the one ``zone_of`` names), so a validating resolver finds every
    organisation's records secure. Before the fix, DNS-AID in a signed, validating run of
    resolver-models.yaml succeeded for 26.7 % of discoveries (the rest bogus: "no
    validated DNSKEY for <org>.example.")."""
    from nodes.dns.message import TYPE_TXT
    from nodes.resolver.config import ResolverConfig
    from sim.build.hierarchy import build_hierarchy
    from sim.build.trust import sign_hierarchy
    from sim.engines.memory import MemoryNetwork
    from topologies.orgzones import by_domain, dnsaid_index, publications
    from topologies.synthetic import synthetic

    ns = synthetic(n_tools=240, branching=3, depth=2, seed=3, n_orgs=12, n_queries=0)
    h = build_hierarchy(ns, org_zones=True)
    anchor = sign_hierarchy(h, 3)
    hosting = [s for s in h.servers.values() if len(s.zones) > 1]
    assert hosting and all(set(s.signer.zones) == set(s.zones) for s in hosting)
    domains = list(by_domain(publications(ns)))
    assert len(domains) > len(hosting)  # some server holds several organisations' zones
    config = ResolverConfig(mode="qname", dnssec=True, trust_anchor=anchor)
    net = MemoryNetwork(h, h.resolver(seed=1, config=config))
    answers: list = []
    net.tap = lambda out: out.reply and answers.append(dns.message.from_wire(out.data))
    for n, domain in enumerate(domains):
        query = dns.message.make_query(dnsaid_index(domain), TYPE_TXT, want_dnssec=True)
        query.id = n
        net.resolver.receive(query.to_wire(), ("127.0.0.7", 40000), net.now)
        net.run()
    assert len(answers) == len(domains)
    assert all(a.rcode() == 0 and a.answer and a.flags & dns.flags.AD for a in answers), [
        (str(a.question[0].name), a.rcode()) for a in answers if not a.flags & dns.flags.AD]
