"""DNSSEC (nodes.dns.dnssec): signed replies only on DO, deterministic keys, a validating walk,
and a forged referral rejected."""

from __future__ import annotations

from pathlib import Path

import dns.message
import pytest
from dnslib import DNSRecord

from nodes.authoritative.server import AuthoritativeServer
from nodes.dns.dnssec import BogusError, ZoneSigner, check_answer, check_dnskey, ds_of, trust_anchor
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
