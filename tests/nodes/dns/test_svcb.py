"""SVCB for dnslib (nodes.dns.svcb) against dnspython's parser, on the discovery drafts'
own example records: what dnspython writes dnslib reads to the same fields and writes back
to the same bytes."""

from __future__ import annotations

import dns.message
import dns.rdtypes.svcbbase
import dns.rrset
import pytest
from dnslib import DNSRecord

from nodes.dns import svcb

#: example records as the drafts (and the implementations they name) print them
EXAMPLES = [
    # DN-ANR -01 §SVCB
    ("_agent.translator.example.com.", "SVCB", '1 agent-v3.example.com. alpn=h2 port=443 '
     'ipv4hint=203.0.113.50 ipv6hint=2001:db8::50 key65480="v3" key65481="a2a,anp"'),
    # DNS-AID -01's form and dns-aid-core's -02 form
    ("_network._mcp._agents.example.com.", "SVCB", '1 mcp.example.com. alpn="mcp" port=443'),
    ("booking.example.com.", "SVCB", '1 booking.example.com. mandatory=alpn,port alpn="h2" '
     'port=443 key65400="https://booking.example.com/cap.json" key65402="mcp" '
     'key65409="agent-card.json"'),
    # ANS v2's HTTPS record and the ans-registry's SVCB profile
    ("support.example.com.", "HTTPS", "1 . alpn=h2"),
    ("agent.example.com.", "SVCB", "1 . alpn=a2a port=443 "
     "key65400=https://agent.example.com/.well-known/agent-card.json key65402=a2a"),
]


@pytest.mark.parametrize(("owner", "rtype", "rdata"), EXAMPLES)
def test_dnspython_wire_reads_in_dnslib_and_back(owner: str, rtype: str, rdata: str) -> None:
    rrset = dns.rrset.from_text(owner, 300, "IN", rtype, rdata)
    msg = dns.message.make_response(dns.message.make_query(owner, rtype))
    msg.answer.append(rrset)
    wire = msg.to_wire()
    parsed = DNSRecord.parse(wire)
    (rr,) = parsed.rr
    assert isinstance(rr.rdata, svcb.SVCB if rtype == "SVCB" else svcb._dns.HTTPS)
    assert bytes(parsed.pack()) == wire  # dnslib writes what it read
    (theirs,) = dns.message.from_wire(bytes(parsed.pack())).answer[0]
    ours = svcb.params(rr)
    if 3 in theirs.params:
        assert ours["port"] == str(theirs.params[3].port)
    assert str(theirs.target) == str(rr.rdata).split(" ")[1]
    for key, _value in theirs.params.items():  # every SvcParam comes through by name
        name = dns.rdtypes.svcbbase.key_to_text(key)
        assert name in ours, (name, ours)


def test_private_keys_and_target() -> None:
    (rr,) = DNSRecord.parse(_wire(*EXAMPLES[0])).rr
    params = svcb.params(rr)
    assert params["key65480"] == "v3" and params["key65481"] == "a2a,anp"
    assert params["alpn"] == "h2" and params["port"] == "443"
    assert svcb.target(rr, "_agent.translator.example.com.") == "agent-v3.example.com."
    (rr,) = DNSRecord.parse(_wire(*EXAMPLES[3])).rr
    assert svcb.target(rr, "support.example.com.") == "support.example.com."  # "." = owner


def _wire(owner: str, rtype: str, rdata: str) -> bytes:
    msg = dns.message.make_response(dns.message.make_query(owner, rtype))
    msg.answer.append(dns.rrset.from_text(owner, 300, "IN", rtype, rdata))
    return msg.to_wire()
