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
