"""DNSSEC (nodes.dns.dnssec): signed replies only on DO, deterministic keys, a validating walk,
and a forged referral rejected."""

from __future__ import annotations

import importlib
from pathlib import Path

import dns._features
import dns.dnssec
import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdatatype
import dns.rrset
import pytest
from dnslib import DNSRecord

from nodes.authoritative.server import AuthoritativeServer
from nodes.dns.dnssec import (
    VALIDATION_TIME,
    BogusError,
    ZoneSigner,
    check_answer,
    check_dnskey,
    dnskey_of,
    ds_of,
    trust_anchor,
    zone_key,
)
from nodes.dns.wire import Intent, cursor_name, opt_record
from nodes.resolver.config import ResolverConfig
from nodes.resolver.types import Discovery
from sim.build.hierarchy import build_hierarchy
from sim.build.trust import sign_hierarchy
from sim.engines.memory import MemoryNetwork
from sim.run.runner import run_scenario
from sim.scenario import Scenario
from tests.factories import tiny_namespace

SRC = ("127.0.0.9", 5353)


def _query(name: str, qtype: str, intent: Intent | None, do: bool) -> bytes:
    q = DNSRecord.question(name, qtype)
    opt = opt_record(intent)
    if do:
        opt.ttl |= 0x8000
    q.add_ar(opt)
    return q.pack()


def test_unsigned_queries_get_the_same_bytes_and_do_queries_get_signatures() -> None:
    ns = tiny_namespace()
    plain, signed = build_hierarchy(ns), build_hierarchy(ns)
    sign_hierarchy(signed, 7)
    tld = next(a for a, z in plain.zone_of.items() if z == "tools.")
    q = _query(cursor_name("mcp", "tools."), "SRV", Intent("weather", 2), do=False)
    assert signed.servers[tld].handle(q, SRC, 0) == plain.servers[tld].handle(q, SRC, 0)
    qdo = _query(cursor_name("mcp", "tools."), "SRV", Intent("weather", 2), do=True)
    reply = signed.servers[tld].handle(qdo, SRC, 0)
    again = build_hierarchy(ns)
    sign_hierarchy(again, 7)
    assert again.servers[tld].handle(qdo, SRC, 0) == reply  # deterministic keys, signatures
    msg = dns.message.from_wire(reply)
    types = sorted({r.rdtype.name for r in msg.authority})
    assert types == ["DS", "NS", "RRSIG"] and msg.ednsflags & 0x8000
    keys_reply = signed.servers[tld].handle(_query("tools.", "DNSKEY", None, True), SRC, 0)
    keys = check_dnskey(keys_reply, "tools.", [ds_of("tools.", "7")])
    children = check_answer(reply, "tools.", keys)
    assert set(children) == {r.name.to_text() for r in msg.authority if r.rdtype.name == "NS"}
    with pytest.raises(BogusError, match="does not match"):
        check_dnskey(keys_reply, "tools.", [ds_of("tools.", "8")])
    forged = ZoneSigner("8", ["tools."]).sign_reply(plain.servers[tld].handle(qdo, SRC, 0), 1232)
    with pytest.raises(BogusError, match="DS"):
        check_answer(forged, "tools.", keys)


def test_validating_walk_adds_key_fetches_and_bytes() -> None:
    ns = tiny_namespace()
    h = build_hierarchy(ns)
    anchor = sign_hierarchy(h, 7)
    q = ns.queries[0]
    got = {}
    for on in (False, True):
        config = ResolverConfig(dnssec=on, trust_anchor=anchor)
        net = MemoryNetwork(h, h.resolver(seed=3, config=config))
        net.resolver.discover(Discovery(q.text, service=q.service, k=2), 0)
        (got[on],) = net.run()
    assert got[True].endpoints == got[False].endpoints and got[True].bogus == 0
    keys = [s for s in got[True].steps if s.qtype == "DNSKEY"]
    assert [s.qname for s in keys][:2] == [".", "tools."] and len(keys) == 4
    assert got[True].bytes_in > 2 * got[False].bytes_in
    assert got[True].rounds == got[False].rounds + 4


class Forger:
    """An on-path attacker at the TLD's address: DNSKEY and other queries reach the real
    server, but the cursor query gets a referral to the attacker's own zone (with a DS
    signed by the attacker's key, the best it can do without the TLD's key)."""

    def __init__(self, real: AuthoritativeServer, fake: AuthoritativeServer) -> None:
        self.real, self.fake = real, fake

    def handle(self, wire: bytes, src, now: float, transport: str = "udp"):
        msg = DNSRecord.parse(wire)
        server = self.fake if msg.q.qtype == 33 else self.real
        return server.handle(wire, src, now, transport)


def test_forged_referral_is_rejected_only_when_validating() -> None:
    ns = tiny_namespace()
    h = build_hierarchy(ns)
    anchor = sign_hierarchy(h, 7)
    tld = next(a for a, z in h.zone_of.items() if z == "tools.")
    # the attacker's copy of the namespace, served from addresses it controls
    evil_ns = tiny_namespace()
    for tool in evil_ns.tools.values():
        tool.address = "127.66.6.6"
    evil = build_hierarchy(evil_ns, first_address="127.9.0.1")
    sign_hierarchy(evil, "attacker")
    evil_tld = next(a for a, z in evil.zone_of.items() if z == "tools.")
    h.servers[tld] = Forger(h.servers[tld], evil.servers[evil_tld])  # type: ignore[assignment]
    for address, server in evil.servers.items():
        if address != evil_tld:
            h.servers[address] = server
    q = ns.queries[0]
    got = {}
    for on in (False, True):
        config = ResolverConfig(dnssec=on, trust_anchor=anchor, max_attempts=1)
        net = MemoryNetwork(h, h.resolver(seed=3, config=config))
        net.resolver.discover(Discovery(q.text, service=q.service, k=2), 0)
        (got[on],) = net.run()
        got[on, "stats"] = net.resolver.stats
    assert got[False].endpoints and all(e.address == "127.66.6.6" for e in got[False].endpoints)
    assert not got[True].endpoints and got[True].bogus >= 1
    assert "dnssec: bogus" in got[True].error and "DS" in got[True].error
    assert got[True, "stats"]["dnssec_bogus"] >= 1


def test_scenario_reports_the_cost_of_validation(tmp_path: Path) -> None:
    sc = Scenario.model_validate({
        "name": "sec", "seed": 3,
        "namespace": {"tools": 200, "branching": 3, "depth": 2, "orgs": 1, "dnssec": True},
        "network": {"topology": "star", "nodes": 4, "agents": 1,
                    "link": {"delay": {"dist": "constant", "mean": 0.005}}},
        "schemes": [{"name": "plain", "k": 3}, {"name": "validating", "k": 3, "dnssec": True}],
        "workload": {"queries": 30, "pool": 30, "arrival": {"process": "poisson", "rate": 20}},
        "outputs": {"plots": False}})
    df = run_scenario(sc, out_dir=tmp_path).records
    plain, valid = df[df.scheme == "plain"], df[df.scheme == "validating"]
    assert plain.success.all() and valid.success.all()
    assert list(plain.returned) == list(valid.returned)
    assert valid.bytes_down.sum() > 1.5 * plain.bytes_down.sum()
    assert valid.round_trips.sum() > plain.round_trips.sum()
    with pytest.raises(ValueError, match=r"namespace\.dnssec"):
        sc.with_overrides({"namespace.dnssec": False})


def test_anchor_is_the_root_ds() -> None:
    assert trust_anchor("7") == ds_of(".", "7").to_text()
    assert trust_anchor("7") != trust_anchor("8")


# ------------------------------------------- denial of existence, DNSKEY and DS (issue 45)


def _signed_tree():  # type: ignore[no-untyped-def]
    ns = tiny_namespace()
    h = build_hierarchy(ns)
    sign_hierarchy(h, 7)
    by_zone = {z: a for a, z in sorted(h.zone_of.items())}
    return ns, h, by_zone


def _ask(h, address: str, name: str, qtype: str, do: bool = True) -> dns.message.Message:
    wire = dns.message.make_query(name, qtype, want_dnssec=do).to_wire()
    return dns.message.from_wire(h.servers[address].handle(wire, SRC, 0))


def _keyring(zone: str) -> dict:
    origin = dns.name.from_text(zone)
    keys = dns.rrset.from_rdata(origin, 86_400, dnskey_of(zone_key("7", zone)))
    return {origin: keys}


def _dnspython_validate():  # type: ignore[no-untyped-def]
    """``dns.dnssec.validate``. dnspython 2.9 enables it only beside cryptography 50 or
    later, by version number; the project's cryptography (48) has every primitive it uses,
    so the gate is opened with dnspython's own switch for this (``dns._features.force``)
    and the module imported again to bind it."""
    if not dns._features.have("dnssec"):
        dns._features.force("dnssec", True)
        importlib.reload(dns.dnssec)
    return dns.dnssec.validate


def _validated(msg: dns.message.Message, section: list, zone: str) -> None:
    """Every RRset of ``section`` carries an RRSIG that dnspython validates with the zone's
    key (dns.dnssec.validate, at a time inside the signatures' validity)."""
    validate = _dnspython_validate()
    for rrset in section:
        if rrset.rdtype == dns.rdatatype.RRSIG:
            continue
        sigs = msg.find_rrset(section, rrset.name, rrset.rdclass, dns.rdatatype.RRSIG,
                              rrset.rdtype)
        validate(rrset, sigs, _keyring(zone), now=VALIDATION_TIME)


def _covers(nsec: dns.rrset.RRset, name: dns.name.Name) -> bool:
    return nsec.name < name < nsec[0].next


def _zone_names(h, address: str, zone: str) -> set[dns.name.Name]:
    """Every name the zone holds (owners of its transfer and their ancestors in the zone)."""
    origin = dns.name.from_text(zone)
    names = set()
    for rec in h.servers[address].zone_records(zone):
        name = dns.name.from_text(rec.owner)
        while name.is_subdomain(origin):
            names.add(name)
            if name == origin:
                break
            name = name.parent()
    return names


@pytest.mark.parametrize(("zone", "name", "encloser"), [
    ("tools.", "no-such-zone.tools.", "tools."),
    ("tools.", "x._tcp.tools.", "_tcp.tools."),  # below an empty non-terminal
    (".", "no-such-tld.", "."),
    ("leaf", "a.b.no-such-tool.{leaf}", "{leaf}"),  # the next closer name is higher up
])
def test_nxdomain_carries_a_validating_nsec_proof(zone: str, name: str, encloser: str) -> None:
    """NXDOMAIN keeps its RCODE and proves it: one NSEC covering the name, one covering the
    wildcard at the closest encloser (RFC 4470 minimally covering records), each validated
    by dnspython with the zone's key; neither denies a name the zone holds."""
    ns, h, by_zone = _signed_tree()
    if zone == "leaf":
        zone = sorted(ns.leaves())[0]
        name, encloser = name.format(leaf=zone), encloser.format(leaf=zone)
    msg = _ask(h, by_zone[zone], name, "A")
    assert msg.rcode() == dns.rcode.NXDOMAIN and msg.flags & dns.flags.AA
    _validated(msg, msg.authority, zone)
    nsecs = [r for r in msg.authority if r.rdtype == dns.rdatatype.NSEC]
    assert 1 <= len(nsecs) <= 2
    qname, ce = dns.name.from_text(name), dns.name.from_text(encloser)
    wildcard = dns.name.Name([b"*", *ce.labels])
    assert any(_covers(n, qname) for n in nsecs)
    assert any(_covers(n, wildcard) for n in nsecs)
    for nsec in nsecs:  # validators read the closest encloser from owner and next name
        for end in (nsec.name, nsec[0].next):
            assert end.fullcompare(qname)[2] == len(ce)
        assert not nsec[0].next.is_subdomain(qname)  # not a claim that qname has children
    for held in _zone_names(h, by_zone[zone], zone):
        assert not any(_covers(n, held) for n in nsecs), held
    # dnslib (our resolver's fallback parser) reads the NSEC owners too: ASCII labels
    wire = dns.message.make_query(name, "A", want_dnssec=True).to_wire()
    parsed = DNSRecord.parse(h.servers[by_zone[zone]].handle(wire, SRC, 0))
    assert sum(rr.rtype == 47 for rr in parsed.auth) == len(nsecs)
    plain = _ask(h, by_zone[zone], name, "A", do=False)  # unsigned: no proof, as before
    assert plain.rcode() == dns.rcode.NXDOMAIN and len(plain.authority) == 1


def test_dnskey_and_ds_are_answered_with_and_without_do() -> None:
    """The apex answers DNSKEY, the parent answers DS for its child authoritatively (not a
    referral), whether or not the query set DO; with DO the RRsets are signed."""
    ns, h, by_zone = _signed_tree()
    child = next(z for z in sorted(ns.zones) if z.count(".") == 2)  # a child of tools.
    for do in (False, True):
        keys = _ask(h, by_zone["tools."], "tools.", "DNSKEY", do=do)
        assert keys.flags & dns.flags.AA and keys.rcode() == 0
        (rrset, *sigs) = keys.answer
        assert rrset.rdtype == dns.rdatatype.DNSKEY
        assert rrset[0] == dnskey_of(zone_key("7", "tools."))
        ds = _ask(h, by_zone["tools."], child, "DS", do=do)
        assert ds.flags & dns.flags.AA and ds.rcode() == 0 and not ds.authority
        (rrset, *sigs) = ds.answer
        assert rrset.rdtype == dns.rdatatype.DS and rrset[0] == ds_of(child, "7")
        assert bool(sigs) == do
        if do:
            _validated(ds, ds.answer, "tools.")
            _validated(keys, keys.answer, "tools.")
    # the child's own server has no DS: NODATA from its apex, whose NSEC lists DNSKEY
    nodata = _ask(h, by_zone[child], child, "DS")
    assert nodata.rcode() == 0 and not nodata.answer


def test_apex_nsec_lists_dnskey() -> None:
    _, h, by_zone = _signed_tree()
    msg = _ask(h, by_zone["tools."], "tools.", "SRV")
    (nsec,) = [r for r in msg.authority if r.rdtype == dns.rdatatype.NSEC]
    assert nsec.name == dns.name.from_text("tools.")
    types = {dns.rdatatype.to_text(t) for t in _types(nsec[0])}
    assert {"SOA", "NS", "DNSKEY", "RRSIG", "NSEC"} <= types and "SRV" not in types
    _validated(msg, msg.authority, "tools.")


def _types(nsec) -> list[int]:  # type: ignore[no-untyped-def]
    return [w * 256 + i * 8 + j for w, bits in nsec.windows for i, byte in enumerate(bits)
            for j in range(8) if byte & (0x80 >> j)]


def test_walk_records_are_served_signed_by_the_primary() -> None:
    """The TYPE65280 records copies expand from ``*._svc._proto.<zone>`` are answered by
    the primary too, at the wildcard's name and below it; NODATA there lists the type."""
    _, h, by_zone = _signed_tree()
    for name in ("*._mcp._tcp.tools.", "weather._mcp._tcp.tools.", "a.b._a2a._udp.tools."):
        msg = _ask(h, by_zone["tools."], name, "TYPE65280")
        assert msg.rcode() == 0 and next(r.rdtype for r in msg.answer) == 65280, name
        _validated(msg, msg.answer, "tools.")
        nodata = _ask(h, by_zone["tools."], name, "A")
        (nsec,) = [r for r in nodata.authority if r.rdtype == dns.rdatatype.NSEC]
        assert 65280 in _types(nsec[0])


def test_malformed_and_odd_names_never_crash_a_signed_server() -> None:
    """Names whose neighbours cannot be bracketed (63-octet labels, zero octets, 255-octet
    names) still get an answer: a compact NOERROR proof (RFC 9824) or the NXDOMAIN one."""
    _, h, by_zone = _signed_tree()
    server = h.servers[by_zone["tools."]]
    long_label = "a" * 63
    names = [f"{long_label}.tools.", "a\\000.tools.", "\\000.tools.",
             ".".join(["b" * 60] * 4) + ".tools."]
    for text in names:
        name = dns.name.from_text(text)
        if len(name.to_wire()) > 255:
            continue
        msg = _ask(h, by_zone["tools."], text, "A")
        assert msg.rcode() in (dns.rcode.NXDOMAIN, dns.rcode.NOERROR), text
        _validated(msg, msg.authority, "tools.")
        nsecs = [r for r in msg.authority if r.rdtype == dns.rdatatype.NSEC]
        assert nsecs, text
        if msg.rcode() == dns.rcode.NOERROR:  # compact: the name "exists", no types
            (nsec,) = nsecs
            assert nsec.name == name and set(_types(nsec[0])) == {46, 47, 128}
    for junk in (b"\x00" * 12, b"\x12\x34\x01\x00\x00\x01" + b"\x00" * 6 + b"\x3f", b""):
        server.handle(junk, SRC, 0)
    assert server.stats["internal_error"] == 0
