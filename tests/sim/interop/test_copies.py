"""Copies of ToolDNS zones answer like ToolDNS on every name a walk touches.

A ToolDNS hierarchy on real sockets, NSD and Knot loaded with its exported zone files
(``tooldns export-zones``), and a Knot secondary filled from the ToolDNS servers by AXFR
are asked the names a discovery walk touches in every zone: ``_tcp.<zone>``,
``_svc._proto.<zone>`` for every service, and the partly unfolded intent names below them
that a QNAME-minimising resolver asks on its way down (RFC 9156), with the types
minimising resolvers and agents ask (A, NS, SRV, TXT, AAAA). Rcode and answer must be
ToolDNS's: an NXDOMAIN from a copy where ToolDNS has an empty non-terminal would, cached
as RFC 8020 allows, deny every intent name below it. (The intent names themselves are
answered per query by ToolDNS and cannot be copied; they are not compared.) The
organisations' zones under ``example.`` (the DNS-native drafts' records) are exported,
transferred and compared too, on every question of the drafts' clients.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import dns.message
import dns.rcode
import dns.rdatatype
import pytest

from nodes.dns.wire import PROTOCOLS, SERVICES, intent_qname
from sim.build.hierarchy import Hierarchy, build_hierarchy
from sim.interop.export import export_zones, knot_conf, nsd_conf
from sim.interop.probe import draft_questions
from tests.nodes.authoritative.test_zones import (
    Daemon,
    _ask,
    _free_port,
    _knot_config,
    _nsd_config,
    _wait_for,
    needs,
)
from topologies.orgzones import publications
from topologies.synthetic import synthetic

FIRST = "127.81.0.1"  # ToolDNS servers (addresses no other test uses)
NSD, KNOT, SECONDARY = "127.82.0.1", "127.83.0.1", "127.84.0.1"
RESOLVER = "127.81.255.1"
INTENTS = ("weather forecast for a city",
           "convert a currency amount into another currency using the daily reference rates "
           "of the central bank")  # two labels: one more partly unfolded name
TYPES = ("A", "NS", "SRV", "TXT", "AAAA")


def _walk_names(zone: str) -> list[str]:
    """The names a walk touches in ``zone`` above intent names: ``_proto.<zone>``,
    ``_svc._proto.<zone>`` and each partly unfolded intent name."""
    suffix = "" if zone == "." else zone
    names = [f"_{proto}.{suffix}" for proto in PROTOCOLS]
    for service in SERVICES:
        for proto in PROTOCOLS:
            base = f"_{service}._{proto}.{suffix}"
            names.append(base)
            for intent in INTENTS:
                labels = intent_qname(intent, 3, service, zone, proto)[: -len(base) - 1]
                parts = labels.split(".")  # k3, word labels…
                names += [".".join(parts[i:]) + "." + base for i in range(1, len(parts))]
    return names


def _answer(reply: dns.message.Message) -> tuple:
    """Rcode and answer section (owner, type, sorted RDATA), unordered."""
    rrsets = sorted((r.name.to_text().lower(), dns.rdatatype.to_text(r.rdtype),
                     tuple(sorted(rd.to_text() for rd in r))) for r in reply.answer)
    return dns.rcode.to_text(reply.rcode()), rrsets


@pytest.fixture(scope="module")
def hierarchy() -> Hierarchy:
    # some leaves lack a service: _svc._tcp.<leaf> without records of it
    ns = synthetic(n_tools=60, branching=2, depth=2, seed=3, n_orgs=0)
    return build_hierarchy(ns, first_address=FIRST, allow_transfer=[SECONDARY],
                           org_zones=True)


@pytest.fixture(scope="module")
def tooldns(hierarchy: Hierarchy) -> Iterator[int]:
    from sim.sockets.hierarchy import LiveHierarchy

    port = _free_port([FIRST, RESOLVER])
    served = LiveHierarchy(hierarchy, port=port, resolver_address=RESOLVER)
    loop = asyncio.new_event_loop()
    ready = threading.Event()

    def main() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(served.start())
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=main, name="tooldns-copies", daemon=True)
    thread.start()
    assert ready.wait(60), "the live hierarchy did not start"
    try:
        yield port
    finally:
        loop.call_soon_threadsafe(served.close)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


@pytest.fixture(scope="module")
def copies(hierarchy: Hierarchy, tooldns: int, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[dict[str, str], int]]:
    """NSD and Knot with the exported files, a Knot secondary by AXFR, each holding every
    zone (the walk's names never lie below a zone cut): {kind: address} and their port."""
    primary = hierarchy.zone_servers()  # the organisations' zones too
    zones = list(primary)
    exported = tmp_path_factory.mktemp("copies") / "zones"
    export_zones(hierarchy, exported, source="tests/sim/interop/test_copies.py")
    port = _free_port([NSD, KNOT, SECONDARY])
    daemons: list[tuple[Daemon, str, str]] = []
    try:
        folder = tmp_path_factory.mktemp("nsd")
        conf = _nsd_config(folder, NSD, port, nsd_conf(zones, exported))
        daemons.append((Daemon(["nsd", "-d", "-c", str(conf)], folder / "out.log"), NSD, "nsd"))
        folder = tmp_path_factory.mktemp("knot")
        conf = _knot_config(folder, KNOT, port, knot_conf(zones, exported))
        daemons.append((Daemon(["knotd", "-c", str(conf)], folder / "out.log"), KNOT, "knot"))
        folder = tmp_path_factory.mktemp("secondary")
        remotes = "remote:\n" + "".join(
            f"  - id: p{i}\n    address: {primary[z]}@{tooldns}\n    via: {SECONDARY}\n"
            for i, z in enumerate(zones))
        entries = "zone:\n" + "".join(
            f'  - domain: "{z}"\n    master: p{i}\n    file: "{folder}/{i}.zone"\n'
            "    zonefile-sync: -1\n    journal-content: none\n" for i, z in enumerate(zones))
        conf = _knot_config(folder, SECONDARY, port, entries, remotes)
        daemons.append((Daemon(["knotd", "-c", str(conf)], folder / "out.log"), SECONDARY,
                        "knot secondary"))
        for daemon, address, kind in daemons:
            for zone in zones:
                _wait_for(address, port, zone, daemon, kind)
        yield {kind: address for _, address, kind in daemons}, port
    finally:
        for daemon, *_ in daemons:
            daemon.stop()


@needs("nsd", "knotd")
@pytest.mark.live
@pytest.mark.interop
def test_copies_answer_the_walk_like_tooldns(hierarchy: Hierarchy, tooldns: int,
                                             copies: tuple[dict[str, str], int]) -> None:
    where = copies[0]
    primary = hierarchy.zone_servers()
    transferred = sum(s.stats["axfr"] + s.stats["ixfr_full"] for s in hierarchy.servers.values())
    assert transferred >= len(primary)  # the secondary's zones came from ToolDNS
    mismatches, asked, rcodes = [], 0, set()
    for zone, address in primary.items():
        if zone.endswith("example."):  # no walk there (test_copies_answer_the_drafts)
            continue
        for name in _walk_names(zone):
            for rdtype in TYPES:
                ours = _answer(_ask(address, tooldns, name, rdtype))
                rcodes.add(ours[0])
                mismatches += _differing(copies, name, rdtype, ours)
                asked += 1
    _no_mismatch(mismatches, asked * len(where))
    assert rcodes == {"NOERROR"} and asked > 1000  # every walked name exists, on ToolDNS too


def _differing(copies: tuple[dict[str, str], int], name: str, rdtype: str | int,
               ours: tuple) -> list[str]:
    """How each copy's answer to ``name``/``rdtype`` differs from ToolDNS's (``ours``)."""
    where, port = copies
    out = []
    for kind, address in where.items():
        theirs = _answer(_ask(address, port, name, rdtype))
        if theirs != ours:
            out.append(f"{kind}: {name} {rdtype}: tooldns {ours}, {theirs}")
    return out


def _no_mismatch(mismatches: list[str], asked: int) -> None:
    assert not mismatches, f"{len(mismatches)} of {asked} differ:\n" + "\n".join(
        mismatches[:12])


def test_walk_names_cover_ents_and_unfolded_intents() -> None:
    names = _walk_names("tools.")
    assert "_tcp.tools." in names and "_a2a._udp.tools." in names
    assert "weather-forecast-for-a-city._mcp._tcp.tools." in names
    deep = [n for n in names if n.endswith("._skill._tcp.tools.") and n.count(".") == 5]
    assert len(deep) == 1  # the long intent: two word labels, so two unfolded names
    assert not any(n.startswith("k3.") for n in names)  # intent names: not comparable


@needs("nsd", "knotd")
@pytest.mark.live
@pytest.mark.interop
def test_copies_answer_the_drafts_like_tooldns(hierarchy: Hierarchy, tooldns: int,
                                              copies: tuple[dict[str, str], int]) -> None:
    """Every DNS-native draft's question about every tool (SVCB, HTTPS, TLSA, TXT, PTR,
    SRV, A) and each organisation's NS, the same on every copy."""
    primary = hierarchy.zone_servers()
    mismatches: list[str] = []
    asked = 0
    for p in publications(hierarchy.namespace).values():
        questions = [(q, t) for _, q, t in draft_questions(p.host, p.domain, p.service,
                                                           p.dnssd_instance, p.port)]
        for name, rdtype in [*questions, (p.host, "A"), (p.domain, "NS")]:
            ours = _answer(_ask(primary[p.domain], tooldns, name, rdtype))
            if name.startswith("_agent._skill."):  # AID has no token for skills
                assert ours[0] == "NXDOMAIN", name
            else:
                assert ours[0] == "NOERROR" and ours[1], (name, rdtype, ours)
            mismatches += _differing(copies, name, rdtype, ours)
            asked += 1
    _no_mismatch(mismatches, asked * len(copies[0]))
    assert asked >= 14 * len(hierarchy.namespace.tools)


@needs("nsd", "knotd")
@pytest.mark.live
@pytest.mark.interop
def test_copies_hold_the_walk_records(hierarchy: Hierarchy, tooldns: int,
                                      copies: tuple[dict[str, str], int]) -> None:
    where, port = copies
    reply = _ask(where["knot secondary"], port, "*._mcp._tcp.tools.", 65280)
    assert reply.rcode() == dns.rcode.NOERROR and len(reply.answer) == 1
    # ToolDNS serves the records its copies expand from that wildcard, at the same names
    tld = next(a for a, z in hierarchy.zone_of.items() if z == "tools.")
    for name in ("*._mcp._tcp.tools.", "weather._mcp._tcp.tools.", "a.b._rest._udp.tools."):
        ours = _answer(_ask(tld, tooldns, name, 65280))
        assert ours[0] == "NOERROR" and ours[1], name
        for address in where.values():
            assert _answer(_ask(address, port, name, 65280)) == ours, name
    # a name outside the walk still does not exist, on ToolDNS and on the copies
    assert _ask(tld, tooldns, "x._tcp.tools.", "A").rcode() == dns.rcode.NXDOMAIN
    for address in where.values():
        assert _ask(address, port, "x._tcp.tools.", "A").rcode() == dns.rcode.NXDOMAIN
