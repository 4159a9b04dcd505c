"""Zone export and AXFR checked against real DNS software (nothing mocked).

* Without sockets: the master-file writer (TXT escaping, 255-byte strings, invalid names),
  ``AuthoritativeServer.transfer`` (split into messages, ACL, NOTAUTH, IXFR, UDP NOTIMP)
  and ``sim.interop.export`` (files, configuration fragments, the subcommand).
* Zone checkers: every exported zone of a synthetic hierarchy (and of a slice of the real
  catalogue when ``../shared/data/tools`` is there) passes ``named-checkzone``,
  ``nsd-checkzone`` and ``kzonecheck``; the fragments pass ``named-checkconf -z``,
  ``nsd-checkconf`` and ``knotc conf-check``.
* Live: a ToolDNS hierarchy on real sockets (``sim.sockets.hierarchy.LiveHierarchy``); NSD and Knot
  load the exported files (one instance per tree level, so a parent refers to its
  children as a ToolDNS server does) and give the same answers to standard questions;
  ``dig``, ``kdig``, ``drill`` and dnspython transfer zones by AXFR (one zone needs two
  messages); NSD and Knot as secondaries pull a zone from ToolDNS and answer the same.

The DNS programs come from Debian packages (``.ci/setup``); without them these tests skip,
except in CI (``CI`` set), where a missing program is a failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.query
import dns.rcode
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rrset
import dns.zone
import pytest

from nodes.authoritative.server import AuthoritativeServer
from nodes.authoritative.transfer import networks
from nodes.authoritative.zonefile import (
    ZoneFileError,
    check_zone,
    master_file,
    name_problem,
    oversized,
    txt_text,
    walk_records,
)
from nodes.authoritative.zonestate import zone_records
from nodes.dns.wire import PROTOCOLS, SERVICES
from nodes.dns.zone import Delegation, ServerRef, ToolRecord, ZoneData
from sim.build.hierarchy import build_hierarchy
from sim.interop.export import export_zones, knot_conf, nsd_conf, zone_file_name
from topologies.catalog import from_catalog
from topologies.synthetic import synthetic

CI = bool(os.environ.get("CI"))
CATALOG = Path(__file__).resolve().parents[4] / "shared" / "data" / "tools" / "catalog.jsonl"
# four tree levels; each of the four leaves holds 600 tools (an AXFR of two messages)
NS_ARGS = dict(n_tools=2400, branching=2, depth=2, seed=5, n_orgs=1)
FIRST = "127.77.0.1"  # ToolDNS servers: 127.77.0.x (addresses no other test uses)
NSD_NET, KNOT_NET = "127.78", "127.79"  # an NSD / Knot instance per level: 127.78.<level>.1
PACKAGES = ("nsd, knot, knot-dnsutils, knot-dnssecutils, bind9-utils, ldnsutils")


def tool(name: str) -> str | None:
    """A program's path (root's sbin directories too, where nsd and knotd live)."""
    found = shutil.which(name)
    if found:
        return found
    for folder in ("/usr/sbin", "/usr/local/sbin", "/sbin"):
        if os.access(f"{folder}/{name}", os.X_OK):
            return f"{folder}/{name}"
    return None


def needs(*names: str) -> pytest.MarkDecorator:
    missing = [n for n in names if tool(n) is None]
    return pytest.mark.skipif(
        bool(missing) and not CI,
        reason=f"{', '.join(missing)} not installed (bash .ci/setup installs {PACKAGES}); "
               f"CI installs them")


def run(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess:
    path = tool(argv[0])
    assert path is not None, f"{argv[0]} is not installed (bash .ci/setup)"
    return subprocess.run([path, *argv[1:]], capture_output=True, text=True, timeout=timeout)


# ---------------------------------------------------------------------- zones at hand


def _zone(name: str = "weather.tools.", tools: tuple[ToolRecord, ...] = (),
          children: tuple[Delegation, ...] = (), summary: str = "weather") -> ZoneData:
    return ZoneData(name=name, servers=(ServerRef(f"ns1.{name}", "127.9.0.1"),),
                    summary=summary, tools=tools, children=children)


def _tool(i: int, description: str = "a tool", target: str | None = None,
          zone: str = "weather.tools.") -> ToolRecord:
    return ToolRecord(f"t{i}", f"tool{i}", description, "mcp",
                      target or f"tool{i}.{zone}", f"127.64.0.{i % 250 + 1}", 443)


def _query(name: str, rdtype: str | int, **kw: object) -> dns.message.Message:
    return dns.message.make_query(name, rdtype, **kw)  # type: ignore[arg-type]


def _parse(wire: bytes) -> dns.message.Message:
    return dns.message.from_wire(wire, one_rr_per_rrset=True)


def _records_of(text: str, origin: str) -> dns.zone.Zone:
    return dns.zone.from_text(text, origin=origin, relativize=False, check_origin=True)


# ---------------------------------------------------------------------- the writer


def test_txt_escaping() -> None:
    assert txt_text([b'say "hi"']) == r'"say \"hi\""'
    assert txt_text([b"a\\b"]) == r'"a\\b"'
    assert txt_text(["é".encode()]) == r'"\195\169"'
    assert txt_text([b"\x00\x09\x7f;()$@"]) == r'"\000\009\127;()$@"'
    assert txt_text([b"", b"x"]) == '"" "x"'
    with pytest.raises(ValueError, match="255"):
        txt_text([b"x" * 256])
    # what a real parser makes of it: the same bytes
    for strings in ([b'q"uo\\te'], ["naïve — ünïcode ☃".encode()], [bytes(range(256))[:255]]):
        rd = dns.rdata.from_text(dns.rdataclass.IN, dns.rdatatype.TXT, txt_text(strings))
        assert list(rd.strings) == strings  # type: ignore[attr-defined]


def test_master_file_splits_long_text_and_escapes() -> None:
    description = 'quote " backslash \\ ' + "ü" * 300  # 620 bytes: 255 + 255 + 110
    zone = _zone(tools=(_tool(1, description),))
    text = master_file(zone)
    line = next(x for x in text.splitlines() if "\tTXT\t" in x and x.startswith("tool1"))
    assert line.count('" "') == 2  # three character-strings
    assert r"\"" in line and r"\\" in line and r"\195\188" in line
    parsed = _records_of(text, zone.name)
    rdata = parsed.find_rdataset("tool1.weather.tools.", "TXT")[0]
    assert [len(s) for s in rdata.strings] == [255, 255, 110]
    assert b"".join(rdata.strings).decode() == description


def test_master_file_has_the_zone_records_and_header() -> None:
    child = Delegation("sub.weather.tools.", (ServerRef("ns1.sub.weather.tools.", "127.9.0.2"),
                                              ServerRef("ns.elsewhere.example.", "127.9.0.3")),
                       "sub", frozenset({"mcp"}))
    zone = _zone(tools=(_tool(1), _tool(2)), children=(child,))
    text = master_file(zone, "unit test")
    head = [line for line in text.splitlines() if line.startswith(";")]
    assert "; Zone weather.tools. exported from ToolDNS (unit test)" in head[0]
    assert any("intent" in line for line in head) and any("Unsigned" in line for line in head)
    assert "$ORIGIN weather.tools." in text and "$TTL 3600" in text
    parsed = _records_of(text, zone.name)
    got = {(str(name), dns.rdatatype.to_text(rds.rdtype), rds.ttl, rd.to_text())
           for name, node in parsed.nodes.items() for rds in node for rd in rds}
    expected = {
        ("weather.tools.", "SOA", 3600,
         "ns1.weather.tools. hostmaster.weather.tools. 1 3600 600 604800 60"),
        ("weather.tools.", "NS", 86400, "ns1.weather.tools."),
        ("weather.tools.", "TXT", 86400, '"summary=weather"'),
        ("ns1.weather.tools.", "A", 86400, "127.9.0.1"),
        ("sub.weather.tools.", "NS", 86400, "ns1.sub.weather.tools."),
        ("sub.weather.tools.", "NS", 86400, "ns.elsewhere.example."),
        ("ns1.sub.weather.tools.", "A", 86400, "127.9.0.2"),  # glue; none out of zone
        ("_mcp._tcp.weather.tools.", "SRV", 300, "0 0 443 tool1.weather.tools."),
        ("_mcp._tcp.weather.tools.", "SRV", 300, "0 0 443 tool2.weather.tools."),
        ("tool1.weather.tools.", "A", 300, "127.64.0.2"),
        ("tool2.weather.tools.", "A", 300, "127.64.0.3"),
        ("tool1.weather.tools.", "TXT", 300, '"a tool"'),
        ("tool2.weather.tools.", "TXT", 300, '"a tool"'),
    }
    expected |= {(f"*._{s}._{p}.weather.tools.", "TYPE65280", 86400, "\\# 0 ")
                 for s in SERVICES for p in PROTOCOLS}  # zonefile.walk_records
    assert got == expected
    # the records a server loaded with the zone would transfer, in the same order
    server = AuthoritativeServer([zone])
    assert server.zone_records(zone.name) == zone_records(zone)


@pytest.mark.parametrize("bad, problem", [
    ("x" * 64 + ".weather.tools.", "label of 64 bytes"),
    (".".join(["abcdefghi"] * 26) + ".weather.tools.", "bytes in wire form (at most 255)"),
    ("a..weather.tools.", "empty label"),
    ("wétter.weather.tools.", "not ASCII"),
    ("*.weather.tools.", "a '*' label"),
])
def test_invalid_names_fail_naming_zone_and_record(bad: str, problem: str) -> None:
    assert name_problem(bad) is not None
    zone = _zone(tools=(_tool(7, target=bad),))
    with pytest.raises(ZoneFileError) as err:
        master_file(zone)
    message = str(err.value)
    assert message.startswith("zone weather.tools.: tool t7: SRV record _mcp._tcp.weather.tools.")
    assert problem in message and "target" in message
    bad_server = ZoneData("weather.tools.", (ServerRef(bad, "127.9.0.1"),))
    with pytest.raises(ZoneFileError, match=f"NS record weather.tools. NS .*{re.escape(problem)}"):
        check_zone(bad_server)


def test_invalid_address_and_valid_names() -> None:
    zone = _zone(tools=(ToolRecord("t1", "n", "d", "mcp", "x.weather.tools.", "999.1.1.1", 1),))
    with pytest.raises(ZoneFileError, match=r"tool t1: A record x.weather.tools.: '999.1.1.1'"):
        master_file(zone)
    for good in (".", "tools.", "_mcp._tcp.a-b.tools.", "x" * 63 + ".tools."):
        assert name_problem(good) is None


def test_export_writes_nothing_for_an_invalid_zone(tmp_path: Path) -> None:
    ns = synthetic(n_tools=20, branching=2, depth=1, seed=1, n_orgs=0)
    hierarchy = build_hierarchy(ns)
    server = next(iter(s for a, s in hierarchy.servers.items()
                       if hierarchy.zone_of[a] != "." and s.zone_data(
                           hierarchy.zone_of[a]).tools))
    zone = server.zones[0]
    data = server.zone_data(zone)
    server.add_zone(ZoneData(**{**data.__dict__, "tools": (*data.tools, ToolRecord(
        "bad", "bad", "bad", "mcp", "y" * 70 + "." + zone, "127.0.0.9", 1))}))
    out = tmp_path / "zones"
    with pytest.raises(ZoneFileError, match=f"zone {re.escape(zone)}: tool bad"):
        export_zones(hierarchy, out)
    assert not out.exists()


def _many(n: int) -> ZoneData:
    return _zone(tools=tuple(_tool(i, "t", target=f"tool-number-{i:05d}.weather.tools.")
                             for i in range(n)))


@needs("named-checkzone", "nsd-checkzone", "kzonecheck")
@pytest.mark.parametrize("n, bind_loads", [(1400, True), (1700, False)])
def test_rrset_larger_than_a_message_is_flagged(tmp_path: Path, n: int, bind_loads: bool
                                                ) -> None:
    zone = _many(n)
    [warning] = oversized(zone_records(zone))
    assert (warning.owner, warning.count, warning.bind_refuses) == (
        "_mcp._tcp.weather.tools.", n, not bind_loads)
    text = master_file(zone)
    assert "; WARNING: the SRV RRset at _mcp._tcp.weather.tools." in text
    assert ("BIND refuses" in text) is not bind_loads
    path = tmp_path / "weather.tools.zone"
    path.write_text(text)
    bind = run("named-checkzone", "-i", "local", "weather.tools.", str(path))
    assert (bind.returncode == 0) is bind_loads, bind.stdout
    if not bind_loads:
        assert "ran out of space" in bind.stdout
    assert run("nsd-checkzone", "weather.tools.", str(path)).returncode == 0
    assert run("kzonecheck", "-o", "weather.tools.", str(path)).returncode == 0
    # ToolDNS itself answers that question truncated, even over TCP
    reply = _parse(AuthoritativeServer([zone]).handle(
        _query("_mcp._tcp.weather.tools.", "SRV").to_wire(), ("127.0.0.1", 1), 0.0, "tcp"))
    assert reply.flags & dns.flags.TC and 0 < len(reply.answer) < n
    # ... and transfers it whole, over several messages
    messages = AuthoritativeServer([zone], transfer_acl=["127.0.0.1"]).transfer(
        _query(zone.name, "AXFR").to_wire(), ("127.0.0.1", 1), 0.0)
    assert messages is not None and len(messages) >= 2
    assert sum(len(_parse(m).answer) for m in messages) == len(zone_records(zone)) + len(
        walk_records(zone)) + 1
    assert not oversized(zone_records(_many(1200)))


def test_export_warns_about_oversized_rrsets(tmp_path: Path) -> None:
    ns = synthetic(n_tools=20, branching=2, depth=1, seed=1, n_orgs=0)
    hierarchy = build_hierarchy(ns)
    address = next(a for a, z in hierarchy.zone_of.items() if z == "tools.")
    big = _many(2500)
    hierarchy.servers[address].add_zone(ZoneData(**{**big.__dict__, "name": "tools.",
                                                     "tools": tuple(
        ToolRecord(t.tool_id, t.name, t.description, t.service,
                   t.target.replace("weather.tools.", "tools."), t.address, t.port)
        for t in big.tools)}))
    result = export_zones(hierarchy, tmp_path / "out")
    assert len(result.warnings) == 1
    assert result.warnings[0].startswith("zone tools.: the SRV RRset at _mcp._tcp.tools.")
    named = (tmp_path / "out" / "named.conf").read_text()
    assert "BIND will not load tools.: an RRset there" in named.replace("\n// ", " ")


# ---------------------------------------------------------------------- transfers (API)


def _big_leaf(n: int = 900) -> ZoneData:
    tools = tuple(_tool(i, f"tool number {i} " + "with a fairly long description " * 2)
                  for i in range(n))
    return _zone(tools=tools)


def test_axfr_split_over_messages() -> None:
    zone = _big_leaf()
    server = AuthoritativeServer([zone], transfer_acl=["127.0.0.1"])
    query = _query(zone.name, "AXFR", use_edns=0)
    messages = server.transfer(query.to_wire(), ("127.0.0.1", 4000), 0.0)
    assert messages is not None and len(messages) >= 2
    records = []
    for wire in messages:
        assert len(wire) <= 65535
        msg = _parse(wire)
        assert msg.id == query.id and msg.question == query.question
        assert msg.rcode() == dns.rcode.NOERROR and msg.flags & dns.flags.AA
        assert msg.edns == 0  # OPT in every message, as asked
        records += [rrset for rrset in msg.answer]
    assert records[0].rdtype == records[-1].rdtype == dns.rdatatype.SOA
    assert not any(r.rdtype == dns.rdatatype.SOA for r in records[1:-1])
    assert len(records) == len(zone_records(zone)) + len(walk_records(zone)) + 1
    assert server.stats["axfr"] == 1 and server.stats["xfr_messages"] == len(messages)
    # dnspython reads the messages back into the zone the master file describes
    xfr = dns.zone.from_xfr((dns.message.from_wire(w, xfr=True) for w in messages),
                            relativize=False)
    assert xfr == _records_of(master_file(zone), zone.name)


def test_transfer_acl_and_refusals() -> None:
    ns = synthetic(n_tools=20, branching=2, depth=1, seed=1, n_orgs=0)
    hierarchy = build_hierarchy(ns, first_address="10.77.0.1")  # not loopback
    server = next(s for a, s in hierarchy.servers.items() if hierarchy.zone_of[a] == "tools.")
    wire = _query("tools.", "AXFR").to_wire()

    def rcode(src: str, data: bytes = wire) -> int:
        out = server.transfer(data, (src, 5353), 0.0)
        assert out is not None and len(out) >= 1
        return _parse(out[0]).rcode()

    assert rcode("127.0.0.1") == dns.rcode.REFUSED  # nobody by default, as NSD and Knot
    assert rcode("10.77.0.3") == dns.rcode.REFUSED  # not even the hierarchy's servers
    assert rcode("10.77.9.9") == dns.rcode.REFUSED
    assert rcode("192.0.2.1") == dns.rcode.REFUSED
    assert server.stats["xfr_refused_acl"] == 4
    server.transfer_acl, server.transfer_peers = networks(["192.0.2.0/24"]), frozenset()
    assert rcode("192.0.2.1") == dns.rcode.NOERROR
    assert rcode("127.0.0.1") == dns.rcode.REFUSED
    server.transfer_acl = networks(["127.0.0.0/8"])
    # not a zone apex of this server: NOTAUTH (RFC 5936 §2.2.1)
    for name in ("weather.tools.", "ns1.tools.", "example."):
        assert rcode("127.0.0.1", _query(name, "AXFR").to_wire()) == dns.rcode.NOTAUTH
    assert server.stats["xfr_notauth"] == 3
    # not a transfer: None, for handle() to answer
    assert server.transfer(_query("tools.", "SOA").to_wire(), ("127.0.0.1", 1), 0) is None


def test_axfr_over_udp_is_notimp_and_counted() -> None:
    server = AuthoritativeServer([_zone(tools=(_tool(1),))])
    for rdtype in ("AXFR", "IXFR"):
        query = _query("weather.tools.", rdtype)
        reply = _parse(server.handle(query.to_wire(), ("127.0.0.1", 53), 0.0, "udp"))
        assert reply.rcode() == dns.rcode.NOTIMP and not reply.answer
    assert server.stats["xfr_notimp"] == 2
    # ordinary questions are not affected
    reply = _parse(server.handle(_query("weather.tools.", "SOA").to_wire(), ("127.0.0.1", 53),
                                 0.0, "udp"))
    assert reply.rcode() == dns.rcode.NOERROR and reply.answer


def _ixfr(zone: str, serial: int) -> dns.message.Message:
    query = dns.message.make_query(zone, "IXFR")
    soa = dns.rrset.from_text(zone, 0, "IN", "SOA", f". . {serial} 0 0 0 0")
    query.authority.append(soa)
    return query


def test_ixfr_full_fallback_or_current_soa() -> None:
    zone = _zone(tools=(_tool(1), _tool(2)))
    server = AuthoritativeServer([zone], transfer_acl=["127.0.0.1"])
    old = server.transfer(_ixfr(zone.name, 0).to_wire(), ("127.0.0.1", 1), 0.0)
    assert old is not None
    records = [r for w in old for r in _parse(w).answer]
    # AXFR-style (RFC 1995 §4)
    assert len(records) == len(zone_records(zone)) + len(walk_records(zone)) + 1
    for serial in (zone.serial, zone.serial + 5):  # current, or "newer": SOA alone
        out = server.transfer(_ixfr(zone.name, serial).to_wire(), ("127.0.0.1", 1), 0.0)
        assert out is not None and len(out) == 1
        answer = _parse(out[0]).answer
        assert len(answer) == 1 and answer[0].rdtype == dns.rdatatype.SOA
    no_soa = dns.message.make_query(zone.name, "IXFR")
    out = server.transfer(no_soa.to_wire(), ("127.0.0.1", 1), 0.0)
    assert out is not None and _parse(out[0]).rcode() == dns.rcode.FORMERR
    assert server.stats["ixfr_full"] == 1 and server.stats["ixfr_current"] == 2


# ---------------------------------------------------------------------- export, CLI


def test_export_files_and_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from sim.cli import export_zones
    from sim.cli import main as cli

    args = cli.build_parser().parse_args(["export-zones", str(tmp_path / "out"), "--tools", "40",
                              "--branching", "2", "--depth", "1", "--seed", "2", "--orgs", "0",
                              "--replicas", "2"])
    assert export_zones.run(args) == 0
    line = capsys.readouterr().out.strip()
    hierarchy = build_hierarchy(synthetic(n_tools=40, branching=2, depth=1, seed=2, n_orgs=0),
                                replicas=2)
    zones = sorted(set(hierarchy.zone_of.values()))
    first = {z: a for a, z in reversed(list(hierarchy.zone_of.items()))}
    records = sum(len(hierarchy.servers[first[z]].zone_records(z)) + len(walk_records(
        hierarchy.servers[first[z]].zone_data(z))) for z in zones)
    assert line == (f"wrote {len(zones) + 3} files to {tmp_path / 'out'}/: {len(zones)} zones, "
                    f"{records} records; nsd.conf, knot.conf, named.conf load them")
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == sorted([*map(zone_file_name, zones), "knot.conf", "named.conf", "nsd.conf"])
    assert "root.zone" in names
    tools = (tmp_path / "out" / "tools.zone").read_text()
    assert tools.count("\tNS\tns") >= 2 * 3  # two replicas: apex and both children
    for conf in ("nsd.conf", "knot.conf"):
        text = (tmp_path / "out" / conf).read_text()
        assert text.startswith("# ") and "export-zones" in text.splitlines()[0]
        assert str((tmp_path / "out" / "root.zone").resolve()) in text
    assert (tmp_path / "out" / "named.conf").read_text().startswith("// ")


# ---------------------------------------------------------------------- zone checkers


@pytest.fixture(scope="module")
def hierarchy():  # type: ignore[no-untyped-def]
    return build_hierarchy(synthetic(**NS_ARGS), first_address=FIRST)


@pytest.fixture(scope="module")
def exported(hierarchy, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("export") / "zones"
    export_zones(hierarchy, out, source="tests/nodes/authoritative/test_zones.py")
    return out


def _check_zone_files(folder: Path, signed: bool = False) -> int:
    """Every zone file in ``folder`` through BIND's, NSD's and Knot's checkers."""
    files = sorted(folder.glob("*.zone"))
    assert files
    for path in files:
        origin = "." if path.name == "root.zone" else path.name[: -len(".zone")] + "."
        # -i local: BIND would otherwise look the delegations' servers up in the system
        # resolver (named-checkzone's full integrity check); the glue is in the file
        out = run("named-checkzone", "-i", "local", "-k", "fail", "-n", "fail", "-M", "fail",
                  "-S", "fail", "-r", "fail", origin, str(path))
        assert out.returncode == 0 and out.stdout.strip().splitlines()[-2:] == [
            f"zone {origin.rstrip('.') or '.'}/IN: loaded serial 1"
            + (" (DNSSEC signed)" if signed else ""), "OK"], \
            f"{path.name}: {out.stdout}{out.stderr}"
        assert "warning" not in out.stdout.lower(), out.stdout
        out = run("nsd-checkzone", origin, str(path))
        assert out.returncode == 0 and "is ok" in out.stdout, f"{path.name}: {out}"
        out = run("kzonecheck", "-o", origin, str(path))
        assert out.returncode == 0 and not out.stdout.strip() and not out.stderr.strip(), \
            f"{path.name}: {out}"
    return len(files)


@needs("named-checkzone", "nsd-checkzone", "kzonecheck")
def test_checkers_accept_exported_zones(exported: Path, hierarchy) -> None:
    assert _check_zone_files(exported) == len(set(hierarchy.zone_of.values()))


@needs("named-checkconf", "nsd-checkconf", "knotc")
def test_config_fragments_are_valid(exported: Path, hierarchy) -> None:
    zones = set(hierarchy.zone_of.values())
    out = run("named-checkconf", "-z", str(exported / "named.conf"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("loaded serial 1") == len(zones)
    out = run("nsd-checkconf", str(exported / "nsd.conf"))
    assert out.returncode == 0, out.stdout + out.stderr
    out = run("knotc", "-c", str(exported / "knot.conf"), "conf-check")
    assert out.returncode == 0 and "valid" in out.stdout, out.stdout + out.stderr


@needs("named-checkzone", "nsd-checkzone", "kzonecheck")
def test_checkers_accept_catalogue_zones(tmp_path: Path) -> None:
    if not CATALOG.exists():
        pytest.skip(f"no catalogue at {CATALOG} (shared data); synthetic zones are checked")
    ns = from_catalog(CATALOG, limit=400)
    hierarchy = build_hierarchy(ns)
    result = export_zones(hierarchy, tmp_path / "catalog", source="catalogue slice")
    assert _check_zone_files(tmp_path / "catalog") == len(result.zones)
    # descriptions with quotes, backslashes and non-ASCII text survive as bytes
    for address, server in hierarchy.servers.items():
        zone = hierarchy.zone_of[address]
        text = (tmp_path / "catalog" / zone_file_name(zone)).read_text(encoding="ascii")
        parsed = _records_of(text, zone)
        for tool in server.zone_data(zone).tools:
            rdata = parsed.find_rdataset(tool.target, "TXT")[0]
            assert b"".join(rdata.strings) == tool.description.encode()


# ---------------------------------------------------------------------- signed zones


SIGNED_ARGS = dict(n_tools=60, branching=2, depth=2, seed=4, n_orgs=1)


def _signed_hierarchy():  # type: ignore[no-untyped-def]
    from sim.build.trust import sign_hierarchy

    hierarchy = build_hierarchy(synthetic(**SIGNED_ARGS))  # the addresses serve gives
    anchor = sign_hierarchy(hierarchy, "4")
    return hierarchy, anchor


def _origin_of(path: Path) -> str:
    return "." if path.name == "root.zone" else path.name[: -len(".zone")] + "."


def _dnssec_checks(path: Path, origin: str) -> None:
    """BIND's dnssec-verify (-z: the one key signs the zone and its DNSKEY set, a combined
    signing key) and Knot's kzonecheck with its DNSSEC checks accept the zone file."""
    out = run("dnssec-verify", "-z", "-o", origin, str(path))
    assert out.returncode == 0 and "Zone fully signed" in out.stderr + out.stdout, \
        f"{path.name}: {out.stdout}{out.stderr}"
    out = run("kzonecheck", "-d", "on", "-o", origin, str(path))
    assert out.returncode == 0 and not (out.stdout + out.stderr).strip(), f"{path.name}: {out}"


def _types_in(zone: dns.zone.Zone) -> set[str]:
    return {dns.rdatatype.to_text(rds.rdtype) for _, node in zone.items() for rds in node}


@needs("dnssec-verify", "kzonecheck")
def test_signed_axfr_carries_dnssec_and_verifies(tmp_path: Path) -> None:
    """An AXFR from a signed server carries its DNSKEY, RRSIGs, NSEC chain and the
    children's DS; BIND's and Knot's DNSSEC checkers accept every zone so transferred."""
    hierarchy, _ = _signed_hierarchy()
    for address, zone in sorted(hierarchy.zone_of.items()):
        server = hierarchy.servers[address]
        children = [c.zone for c in server.zone_data(zone).children]
        server.transfer_acl = networks(["127.0.0.1"])
        query = _query(zone, "AXFR")
        messages = server.transfer(query.to_wire(), ("127.0.0.1", 4000), 0.0)
        assert messages is not None
        xfr = dns.zone.from_xfr((dns.message.from_wire(w, xfr=True) for w in messages),
                                relativize=False)
        assert {"DNSKEY", "RRSIG", "NSEC", "SOA", "NS"} <= _types_in(xfr), zone
        assert children or zone.count(".") > 1
        for child in children:
            assert xfr.get_rdataset(child, "DS") is not None, (zone, child)
        path = tmp_path / zone_file_name(zone)
        xfr.to_file(str(path), relativize=False)
        _dnssec_checks(path, zone)


@needs("dnssec-verify", "kzonecheck", "named-checkzone", "nsd-checkzone")
def test_export_sign_verifies_and_parents_hold_the_childrens_ds(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``tooldns export-zones --sign``: every file passes dnssec-verify and kzonecheck (and
    the plain checkers), each parent holds the DS of each child's DNSKEY, the root's DS is
    the trust anchor printed, and each file holds what the signed server transfers."""
    import dns.dnssec

    from sim.cli import export_zones
    from sim.cli import main as cli

    out = tmp_path / "signed"
    argv = ["export-zones", str(out), "--tools", "60", "--branching", "2", "--depth", "2",
            "--seed", "4", "--orgs", "1", "--sign"]
    assert export_zones.run(cli.build_parser().parse_args(argv)) == 0
    printed = capsys.readouterr().out
    hierarchy, anchor = _signed_hierarchy()
    assert "signed zones" in printed and f"trust anchor: . DS {anchor}" in printed
    files = sorted(out.glob("*.zone"))
    assert len(files) == len(set(hierarchy.zone_of.values()))
    assert _check_zone_files(out, signed=True) == len(files)
    zones = {_origin_of(p): _records_of(p.read_text(), _origin_of(p)) for p in files}
    for path in files:
        _dnssec_checks(path, _origin_of(path))
    for zone, parsed in zones.items():
        keys = parsed.get_rdataset(zone, "DNSKEY")
        assert keys is not None and len(keys) == 1
        ds = dns.dnssec.make_ds(zone, keys[0], "SHA256")
        if zone == ".":
            assert ds.to_text() == anchor
            continue
        parent = max((z for z in zones if zone.endswith("." + z) or z == "."),
                     key=lambda z: z.count(".") if z != "." else 0)
        held = zones[parent].get_rdataset(zone, "DS")
        assert held is not None and list(held) == [ds], (parent, zone)
    first = {z: a for a, z in reversed(list(hierarchy.zone_of.items()))}
    for zone, parsed in zones.items():  # the file is what an AXFR from ToolDNS carries
        server = hierarchy.servers[first[zone]]
        server.transfer_acl = networks(["127.0.0.1"])
        messages = server.transfer(_query(zone, "AXFR").to_wire(), ("127.0.0.1", 1), 0.0)
        assert messages is not None
        assert dns.zone.from_xfr((dns.message.from_wire(w, xfr=True) for w in messages),
                                 relativize=False) == parsed, zone


def test_primary_serves_the_walk_records_its_copies_hold() -> None:
    """The TYPE65280 wildcard records of the export and the AXFR: a copy expands them below
    ``_svc._proto.<zone>``; the primary answers the same record there (and at the
    wildcard's own name), so primary and copies serve the same records."""
    ns = synthetic(n_tools=20, branching=2, depth=1, seed=1, n_orgs=0)
    hierarchy = build_hierarchy(ns)
    for address, zone in hierarchy.zone_of.items():
        server = hierarchy.servers[address]
        copy = _records_of(master_file(server.zone_data(zone), records=server.zone_records(
            zone)), zone)
        suffix = "" if zone == "." else zone
        for service in SERVICES:
            for proto in PROTOCOLS:
                wild = f"*._{service}._{proto}.{suffix}"
                held = copy.get_rdataset(wild, 65280)
                assert held is not None, wild
                for name in (wild, f"x._{service}._{proto}.{suffix}",
                             f"a.b._{service}._{proto}.{suffix}"):
                    for qtype in (65280, "ANY"):
                        reply = _parse(server.handle(_query(name, qtype).to_wire(),
                                                     ("127.0.0.1", 1), 0))
                        assert reply.rcode() == 0 and reply.flags & dns.flags.AA, name
                        (rrset,) = reply.answer
                        assert rrset.name == dns.name.from_text(name)
                        assert rrset.rdtype == 65280 and rrset.ttl == held.ttl
                        assert list(rrset) == list(held), name
                    nodata = _parse(server.handle(_query(name, "A").to_wire(),
                                                  ("127.0.0.1", 1), 0))
                    assert nodata.rcode() == 0 and not nodata.answer
        # the apex, the names above the wildcard and its parent hold no such record
        for name in (zone, f"_tcp.{suffix}", f"_mcp._tcp.{suffix}"):
            reply = _parse(server.handle(_query(name, 65280).to_wire(), ("127.0.0.1", 1), 0))
            assert reply.rcode() == 0 and not reply.answer, name


# ---------------------------------------------------------------------- live servers


def _free_port(ips: list[str]) -> int:
    rng = random.Random(os.getpid())
    for _ in range(200):
        port = rng.randrange(20_000, 60_000)
        socks = []
        try:
            for ip in ips:
                for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
                    sock = socket.socket(socket.AF_INET, kind)
                    socks.append(sock)
                    sock.bind((ip, port))
            return port
        except OSError:
            continue
        finally:
            for sock in socks:
                sock.close()
    raise RuntimeError("no free port")


class Daemon:
    """A DNS server process of ours, in its own process group (ended at fixture end)."""

    def __init__(self, argv: list[str], log: Path) -> None:
        path = tool(argv[0])
        assert path is not None, f"{argv[0]} is not installed (bash .ci/setup)"
        self.log = log
        with log.open("w") as fh:
            self.proc = subprocess.Popen([path, *argv[1:]], stdout=fh, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        # NSD's server and xfrd children share the group; none may outlive the test
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)


def _ask(address: str, port: int, name: str, rdtype: str | int, tcp: bool = True,
         timeout: float = 5.0) -> dns.message.Message:
    query = dns.message.make_query(name, rdtype, use_edns=0, payload=1232)
    query.flags &= ~dns.flags.RD
    send = dns.query.tcp if tcp else dns.query.udp
    return send(query, address, port=port, timeout=timeout)


def _wait_for(address: str, port: int, zone: str, daemon: Daemon, what: str,
              deadline: float = 30.0) -> None:
    """Until the server answers the zone's SOA authoritatively."""
    end = time.monotonic() + deadline
    while True:
        if daemon.proc.poll() is not None:
            pytest.fail(f"{what} exited ({daemon.proc.returncode}):\n{daemon.log.read_text()}")
        with contextlib.suppress(Exception):
            reply = _ask(address, port, zone, "SOA", tcp=False, timeout=0.5)
            if reply.rcode() == dns.rcode.NOERROR and reply.answer:
                return
        if time.monotonic() > end:
            pytest.fail(f"{what} did not serve {zone}:\n{daemon.log.read_text()}")
        time.sleep(0.1)


@pytest.fixture(scope="module")
def live(hierarchy) -> Iterator[tuple[object, int]]:
    """The synthetic hierarchy on real sockets (127.77.0.x), in a thread of this process."""
    from sim.sockets.hierarchy import LiveHierarchy

    port = _free_port([FIRST, "127.77.255.1"])
    served = LiveHierarchy(hierarchy, port=port, resolver_address="127.77.255.1",
                           allow_transfer=["127.0.0.1", f"{NSD_NET}.200.1", f"{KNOT_NET}.200.1"])
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    failed: list[BaseException] = []

    def main() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(served.start())
        except BaseException as exc:  # reported to the test below
            failed.append(exc)
            ready.set()
            return
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=main, name="tooldns-live", daemon=True)
    thread.start()
    assert ready.wait(60), "the live hierarchy did not start"
    if failed:
        raise failed[0]
    try:
        yield served, port
    finally:
        loop.call_soon_threadsafe(served.close)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        if not thread.is_alive():
            loop.close()


def _levels(zones: list[str]) -> dict[int, list[str]]:
    """Zones by depth: zones of one depth never contain one another, so one server can
    hold them all and still refer to the next level as ToolDNS's own servers do."""
    out: dict[int, list[str]] = {}
    for zone in zones:
        out.setdefault(len(dns.name.from_text(zone)), []).append(zone)
    return dict(sorted(out.items()))


def _nsd_config(folder: Path, address: str, port: int, zones: str) -> Path:
    conf = folder / "nsd-main.conf"
    (folder / "zones.conf").write_text(zones)
    conf.write_text(f"""server:
  ip-address: {address}@{port}
  port: {port}
  username: ""
  chroot: ""
  zonesdir: "{folder}"
  pidfile: "{folder}/nsd.pid"
  database: ""
  zonelistfile: "{folder}/zone.list"
  xfrdfile: "{folder}/xfrd.state"
  xfrdir: "{folder}"
  logfile: "{folder}/nsd.log"
  server-count: 1
  do-ip6: no
  verbosity: 1
remote-control:
  control-enable: no
include: "{folder}/zones.conf"
""")
    return conf


def _knot_config(folder: Path, address: str, port: int, zones: str, extra: str = "") -> Path:
    conf = folder / "knot-main.conf"
    (folder / "zones.conf").write_text(zones)
    conf.write_text(f"""server:
  listen: {address}@{port}
  rundir: "{folder}"
  pidfile: "{folder}/knot.pid"
  udp-workers: 1
  tcp-workers: 1
  background-workers: 1
database:
  storage: "{folder}"
log:
  - target: "{folder}/knot.log"
    any: info
{extra}template:
  - id: default
    storage: "{folder}"
    semantic-checks: on
include: "{folder}/zones.conf"
""")
    return conf


@pytest.fixture(scope="module")
def primaries(hierarchy, exported: Path, tmp_path_factory: pytest.TempPathFactory):
    """NSD and Knot serving the exported files: per level, one NSD on 127.78.<level>.1
    and one Knot on 127.79.<level>.1 (the level's zones as primaries). Yields
    {"nsd"|"knot": {zone: address}} and the port."""
    zones = list(dict.fromkeys(hierarchy.zone_of.values()))
    levels = _levels(zones)
    port = _free_port([f"{NSD_NET}.0.1", f"{KNOT_NET}.0.1"])
    daemons: list[tuple[Daemon, str, str, str]] = []
    where: dict[str, dict[str, str]] = {"nsd": {}, "knot": {}}
    try:
        for level, level_zones in levels.items():
            for kind, net in (("nsd", NSD_NET), ("knot", KNOT_NET)):
                folder = tmp_path_factory.mktemp(f"{kind}{level}")
                address = f"{net}.{level}.1"
                if kind == "nsd":
                    conf = _nsd_config(folder, address, port, nsd_conf(level_zones, exported))
                    daemon = Daemon(["nsd", "-d", "-c", str(conf)], folder / "stdout.log")
                else:
                    conf = _knot_config(folder, address, port, knot_conf(level_zones,
                                                                          exported))
                    daemon = Daemon(["knotd", "-c", str(conf)], folder / "stdout.log")
                daemons.append((daemon, address, level_zones[0], kind))
                for zone in level_zones:
                    where[kind][zone] = address
        for daemon, address, zone, kind in daemons:
            _wait_for(address, port, zone, daemon, kind)
        yield where, port
    finally:
        for daemon, *_ in daemons:
            daemon.stop()


def _sub(label: str, zone: str) -> str:
    return f"{label}.{zone}" if zone != "." else f"{label}."


def _questions(hierarchy, zone: str) -> list[tuple[str, str]]:
    """Standard questions about one zone: apex, its servers, names that do not exist,
    delegations (referrals), and at leaves SRV sets, tools' A/TXT and empty non-terminals."""
    server = next(s for a, s in hierarchy.servers.items() if hierarchy.zone_of[a] == zone)
    data = server.zone_data(zone)
    qs = [(zone, t) for t in ("SOA", "NS", "TXT", "A", "SRV")]
    qs += [(ref.host, "A") for ref in data.servers] + [(ref.host, "TXT") for ref in data.servers]
    qs += [(_sub("no-such-name", zone), "A"), (_sub("x.no-such-name", zone), "SRV")]
    for child in data.children[:3]:
        host = child.servers[0].host
        qs += [(child.zone, "NS"), (child.zone, "SOA"), (host, "A"),
               (_sub("deep.name", child.zone), "TXT"),
               (_sub("_mcp._tcp", child.zone), "SRV")]
    services = sorted({t.service for t in data.tools})
    for service in services:
        qs.append((_sub(f"_{service}._tcp", zone), "SRV"))
    if data.tools:
        qs += [(_sub("_tcp", zone), "SRV"), (_sub("_nope._tcp", zone), "SRV"),
               (_sub("_mcp._udp", zone), "SRV"), (_sub(f"_{services[0]}._tcp", zone), "TXT")]
        for t in data.tools[:: max(1, len(data.tools) // 5)]:
            qs += [(t.target, "A"), (t.target, "TXT"), (t.target, "SRV"),
                   (_sub("below", t.target), "A")]
    return qs


def _intent_tree(name: str, zone: str) -> bool:
    """Whether ``name`` lies in ``_tcp.<zone>``/``_udp.<zone>`` as ``_svc._proto`` names do:
    the subtree where ToolDNS answers intents carried in the name."""
    labels = name[: len(name) - len(zone)].rstrip(".").split(".") if zone != "." else []
    return bool(labels) and labels[-1] in ("_tcp", "_udp") and (
        len(labels) == 1 or labels[-2].startswith("_"))


def _comparable(theirs: tuple, ours: tuple, name: str, zone: str) -> tuple:
    """A static server's reply shape, read as ToolDNS's where they differ by design: in the
    intent tree a name the file does not hold is an empty non-terminal above intents
    carried in the name (computed online): NODATA from ToolDNS, NXDOMAIN from the file."""
    if _intent_tree(name, zone) and theirs[0] == "NXDOMAIN":
        assert ours[0] == "NOERROR", (name, ours)
        return ("NOERROR", *theirs[1:])
    return theirs


def _shape(msg: dns.message.Message) -> tuple:
    """rcode, AA and each section's RRsets (owner, type, TTL, sorted RDATA), unordered."""
    def section(rrsets: list) -> list:
        return sorted((r.name.to_text().lower(), dns.rdatatype.to_text(r.rdtype), r.ttl,
                       tuple(sorted(rd.to_text() for rd in r))) for r in rrsets)
    return (dns.rcode.to_text(msg.rcode()), bool(msg.flags & dns.flags.AA),
            section(msg.answer), section(msg.authority), section(msg.additional))


def _without_nsd_extras(msg: dns.message.Message, zone: str) -> dns.message.Message:
    """NSD 4 adds the zone's own NS RRset to the authority section of every positive
    answer, and its servers' addresses to the additional section (RFC 2181 allows it;
    ``minimal-responses`` only trims replies that would not fit). ToolDNS and Knot send
    neither, so they are taken out before comparing."""
    apex = dns.name.from_text(zone)
    if not msg.answer or not msg.flags & dns.flags.AA:
        return msg
    extra = [r for r in msg.authority if r.rdtype == dns.rdatatype.NS and r.name == apex]
    if not extra:
        return msg
    wanted = {getattr(rd, "target", None) for r in msg.answer for rd in r}
    hosts = {rd.target for r in extra for rd in r} - wanted
    msg.authority = [r for r in msg.authority if r not in extra]
    msg.additional = [r for r in msg.additional if r.name not in hosts]
    return msg


@needs("nsd", "knotd")
@pytest.mark.live
@pytest.mark.interop
def test_nsd_and_knot_loaded_with_exports_answer_like_tooldns(hierarchy, live, primaries
                                                              ) -> None:
    _served, port = live
    where, their_port = primaries
    address_of = {zone: a for a, zone in reversed(list(hierarchy.zone_of.items()))}
    asked = 0
    mismatches = []
    for zone in where["nsd"]:
        for name, rdtype in _questions(hierarchy, zone):
            ours = _shape(_ask(address_of[zone], port, name, rdtype))
            for kind in ("knot", "nsd"):
                reply = _ask(where[kind][zone], their_port, name, rdtype)
                theirs = _comparable(_shape(_without_nsd_extras(reply, zone)
                                            if kind == "nsd" else reply), ours, name, zone)
                if theirs != ours:
                    mismatches.append(f"{kind} {zone} {name} {rdtype}:\n  tooldns {ours}\n"
                                      f"  {kind:7} {theirs}")
            asked += 1
    assert not mismatches, f"{len(mismatches)} of {asked * 2} answers differ:\n" + "\n".join(
        mismatches[:10])
    assert asked > 150


def _big_zone(hierarchy) -> tuple[str, str]:
    """(zone, ToolDNS address) of the zone with the most records."""
    address = max(hierarchy.servers, key=lambda a: len(
        hierarchy.servers[a].zone_data(hierarchy.zone_of[a]).tools))
    return hierarchy.zone_of[address], address


def _file_zone(exported: Path, zone: str) -> dns.zone.Zone:
    return _records_of((exported / zone_file_name(zone)).read_text(), zone)


@pytest.mark.live
@pytest.mark.interop
def test_dnspython_axfr_matches_zone_files(hierarchy, live, exported: Path) -> None:
    _served, port = live
    done = set()
    for address, zone in hierarchy.zone_of.items():
        if zone in done:
            continue
        done.add(zone)
        got = dns.zone.from_xfr(dns.query.xfr(address, zone, port=port, timeout=10,
                                              relativize=False), relativize=False)
        assert got == _file_zone(exported, zone), zone
    # an IXFR from serial 0 gets the whole zone, AXFR-style (RFC 1995 §4)
    zone, address = _big_zone(hierarchy)
    got = dns.zone.from_xfr(dns.query.xfr(address, zone, port=port, rdtype=dns.rdatatype.IXFR,
                                          serial=0, relativize=False), relativize=False)
    assert got == _file_zone(exported, zone)


def _xfr_text(lines: str) -> list[str]:
    return [x for x in lines.splitlines() if x.strip() and not x.startswith(";")]


@needs("dig", "kdig", "drill")
@pytest.mark.live
@pytest.mark.interop
def test_dig_kdig_drill_axfr_multi_message(hierarchy, live, exported: Path) -> None:
    _served, port = live
    zone, address = _big_zone(hierarchy)
    expected = _file_zone(exported, zone)
    n_records = len(hierarchy.servers[address].zone_records(zone)) + len(walk_records(
        hierarchy.servers[address].zone_data(zone))) + 1  # SOA twice
    wire = hierarchy.servers[address].transfer(_query(zone, "AXFR").to_wire(),
                                               ("127.0.0.1", 1), 0.0)
    assert wire is not None and len(wire) >= 2  # big enough to need several messages

    out = run("dig", f"@{address}", "-p", str(port), zone, "AXFR", "+time=5", "+tries=1")
    assert out.returncode == 0, out.stdout + out.stderr
    m = re.search(r";; XFR size: (\d+) records \(messages (\d+), bytes (\d+)\)", out.stdout)
    assert m, out.stdout[-2000:]
    assert int(m.group(1)) == n_records and int(m.group(2)) == len(wire) >= 2
    records = _xfr_text(out.stdout)
    assert records[0].split()[3] == records[-1].split()[3] == "SOA"
    assert _records_of("\n".join(records), zone) == expected

    out = run("kdig", f"@{address}", "-p", str(port), zone, "AXFR", "+time=5", "+retry=0")
    assert out.returncode == 0, out.stdout + out.stderr
    m = re.search(r";; Received (\d+) B\s+\((\d+) messages, (\d+) records\)", out.stdout)
    assert m, out.stdout[-2000:]
    assert int(m.group(2)) == len(wire) and int(m.group(3)) == n_records
    assert _records_of("\n".join(_xfr_text(out.stdout)), zone) == expected

    out = run("drill", "-p", str(port), zone, f"@{address}", "AXFR")
    assert out.returncode == 0, out.stdout + out.stderr
    records = _xfr_text(out.stdout)
    assert len(records) == n_records
    assert _records_of("\n".join(records), zone) == expected


@pytest.mark.live
@pytest.mark.interop
def test_live_axfr_over_udp_and_from_outside_the_acl(hierarchy, live) -> None:
    _served, port = live
    zone, address = _big_zone(hierarchy)
    server = hierarchy.servers[address]
    before = server.stats["xfr_notimp"]
    reply = dns.query.udp(_query(zone, "AXFR"), address, port=port, timeout=5)
    assert reply.rcode() == dns.rcode.NOTIMP and not reply.answer
    assert server.stats["xfr_notimp"] == before + 1
    # a TCP transfer from an address outside the ACL: REFUSED, counted
    acl, peers = server.transfer_acl, server.transfer_peers
    server.transfer_acl, server.transfer_peers = networks(["127.0.0.2/32"]), frozenset()
    try:
        refused = server.stats["xfr_refused_acl"]
        reply = dns.query.tcp(_query(zone, "AXFR"), address, port=port, timeout=5,
                              source="127.0.0.1")
        assert reply.rcode() == dns.rcode.REFUSED and not reply.answer
        assert server.stats["xfr_refused_acl"] == refused + 1
        with pytest.raises(dns.exception.DNSException):  # an XFR client fails on REFUSED
            dns.zone.from_xfr(dns.query.xfr(address, zone, port=port, timeout=5))
    finally:
        server.transfer_acl, server.transfer_peers = acl, peers
    # ordinary questions over TCP on the same listener still get one reply
    reply = _ask(address, port, zone, "SOA")
    assert reply.rcode() == dns.rcode.NOERROR and len(reply.answer) == 1


@pytest.mark.live
def test_live_hierarchy_allow_transfer_replaces_the_acl() -> None:
    from sim.cli.serve import transfer_network
    from sim.sockets.hierarchy import LiveHierarchy

    hierarchy = build_hierarchy(synthetic(n_tools=20, branching=2, depth=1, seed=1, n_orgs=0),
                                first_address="127.76.0.1")
    address = next(a for a, z in hierarchy.zone_of.items() if z == "tools.")
    port = _free_port([address, "127.76.255.1"])
    acl = [transfer_network("127.0.0.2")]
    served = LiveHierarchy(hierarchy, port=port, resolver_address="127.76.255.1",
                           allow_transfer=acl)

    def axfr(source: str) -> dns.message.Message:
        return dns.query.tcp(_query("tools.", "AXFR"), address, port=port, timeout=5,
                             source=source)

    async def main() -> tuple[dns.message.Message, dns.message.Message]:
        await served.start()
        try:
            return (await asyncio.to_thread(axfr, "127.0.0.1"),
                    await asyncio.to_thread(axfr, "127.0.0.2"))
        finally:
            served.close()
            await asyncio.sleep(0.05)

    refused, allowed = asyncio.run(main())
    assert refused.rcode() == dns.rcode.REFUSED and not refused.answer
    assert allowed.rcode() == dns.rcode.NOERROR and allowed.answer[0].rdtype == dns.rdatatype.SOA
    assert hierarchy.servers[address].stats["xfr_refused_acl"] == 1
    import argparse

    with pytest.raises(argparse.ArgumentTypeError, match="not a network"):
        transfer_network("10.0.0.0/33")
    assert transfer_network("10.1.2.3/8") == "10.0.0.0/8"


@pytest.mark.parametrize("kind", ["knot", "nsd"])
@needs("nsd", "knotd")
@pytest.mark.live
@pytest.mark.interop
def test_secondary_pulls_zone_by_axfr_and_answers_alike(
        kind: str, hierarchy, live, exported: Path, tmp_path: Path) -> None:
    _served, port = live
    zone, address = _big_zone(hierarchy)  # a transfer of several messages
    stats = hierarchy.servers[address].stats
    before = stats["axfr"] + stats["ixfr_full"]
    mine = f"{NSD_NET if kind == 'nsd' else KNOT_NET}.200.1"
    their_port = _free_port([mine])
    if kind == "nsd":
        zones = (f'zone:\n  name: "{zone}"\n  zonefile: "{tmp_path}/secondary.zone"\n'
                 f"  request-xfr: {address}@{port} NOKEY\n"
                 f"  provide-xfr: 127.0.0.0/8 NOKEY\n")
        conf = _nsd_config(tmp_path, mine, their_port, zones)
        daemon = Daemon(["nsd", "-d", "-c", str(conf)], tmp_path / "stdout.log")
    else:
        extra = (f"remote:\n  - id: tooldns\n    address: {address}@{port}\n"
                 "acl:\n  - id: local\n    address: 127.0.0.0/8\n    action: transfer\n")
        zones = (f'zone:\n  - domain: "{zone}"\n    master: tooldns\n    acl: local\n'
                 f'    file: "{tmp_path}/secondary.zone"\n    zonefile-sync: -1\n'
                 "    journal-content: none\n")
        conf = _knot_config(tmp_path, mine, their_port, zones, extra)
        daemon = Daemon(["knotd", "-c", str(conf)], tmp_path / "stdout.log")
    try:
        _wait_for(mine, their_port, zone, daemon, f"{kind} secondary")
        assert stats["axfr"] + stats["ixfr_full"] > before  # it came from ToolDNS
        # the whole zone, as the secondary now holds it (transferred on from it)
        got = dns.zone.from_xfr(dns.query.xfr(mine, zone, port=their_port, timeout=10,
                                              relativize=False), relativize=False)
        assert got == _file_zone(exported, zone)
        mismatches = []
        for name, rdtype in _questions(hierarchy, zone):
            ours = _shape(_ask(address, port, name, rdtype))
            reply = _ask(mine, their_port, name, rdtype)
            theirs = _comparable(_shape(_without_nsd_extras(reply, zone) if kind == "nsd"
                                        else reply), ours, name, zone)
            if theirs != ours:
                mismatches.append(f"{name} {rdtype}:\n  tooldns {ours}\n  {kind} {theirs}")
        assert not mismatches, "\n".join(mismatches[:10])
    finally:
        daemon.stop()
