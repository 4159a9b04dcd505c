"""Interop on the live engine: `dig` and dnspython (software nobody here wrote) against
`tooldns serve`, plus the `tooldns query` command. Real UDP/TCP sockets on 127.0.0.0/8.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys

import dns.edns
import dns.message
import dns.query
import dns.rdatatype
import pytest

from nodes.dns.wire import (
    DEFAULT_OPTION_CODE,
    SCORES_OPTION_CODE,
    Intent,
    decode_scores,
    intent_qname,
)
from tests.sim.sockets.serving import tooldns_serve
from topologies.synthetic import synthetic

pytestmark = [pytest.mark.live, pytest.mark.interop]

NS_ARGS = dict(n_tools=400, branching=3, depth=2, seed=7, n_orgs=1)
CLI_ARGS = ["--tools", "400", "--branching", "3", "--depth", "2", "--seed", "7", "--orgs", "1"]
PORT = 20000 + os.getpid() % 20000
DIG = shutil.which("dig")
needs_dig = pytest.mark.skipif(
    DIG is None and not os.environ.get("CI"),
    reason="dig not installed (apt-get install bind9-dnsutils); CI installs it",
)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    """`tooldns serve` in a subprocess; yields (manifest dict, namespace, manifest path)."""
    manifest = tmp_path_factory.mktemp("serve") / "manifest.json"
    with tooldns_serve([*CLI_ARGS, "--port", str(PORT), "--duration", "300"],
                       manifest) as served_manifest:
        yield served_manifest, synthetic(**NS_ARGS), manifest


def _server(manifest: dict, zone: str) -> str:
    return next(m["address"] for m in manifest["servers"] if m["zone"] == zone)


def _leaf_with(ns, service: str) -> tuple[str, list]:
    for zone in sorted(ns.leaves()):
        tools = [ns.tools[t] for t in ns.zones[zone].tools if ns.tools[t].service == service]
        if len(tools) >= 3 and ns.zones[zone].org is None:
            return zone, tools
    raise AssertionError("no suitable leaf")


def dig(*args: str) -> str:
    assert DIG is not None
    out = subprocess.run([DIG, "-p", str(PORT), "+time=2", "+tries=1", *args],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def _section(text: str, name: str) -> list[str]:
    m = re.search(rf";; {name} SECTION:\n(.*?)(?:\n\n|\Z)", text, re.S)
    return [line for line in m.group(1).splitlines() if line.strip()] if m else []


@needs_dig
def test_dig_fully_expanded_srv_without_option(served) -> None:
    manifest, ns, _ = served
    zone, tools = _leaf_with(ns, "mcp")
    out = dig(f"@{_server(manifest, zone)}", f"_mcp._tcp.{zone}", "SRV", "+norec")
    assert "status: NOERROR" in out
    assert re.search(r"flags: qr aa", out)
    answers = _section(out, "ANSWER")
    assert len(answers) == len(tools)
    assert {a.split()[-1] for a in answers} == {t.target for t in tools}


def dig_tld_cursor(served, k: int, *extra: str) -> tuple:
    """dig the TLD's cursor with a public query's intent and K; returns (ns, query, output)."""
    manifest, ns, _ = served
    query = next(q for q in ns.queries if ns.zones[ns.tools[q.truth[0]].zone].org is None)
    hexdata = Intent(query.text, k=k).encode().hex()
    out = dig(f"@{_server(manifest, 'tools.')}", "_mcp._tcp._tools.", "SRV", "+norec",
              f"+ednsopt={DEFAULT_OPTION_CODE}:{hexdata}", *extra)
    return ns, query, out


@needs_dig
def test_dig_cursor_with_intent_option_gets_referral(served) -> None:
    ns, query, out = dig_tld_cursor(served, 2)
    assert "status: NOERROR" in out
    assert not _section(out, "ANSWER")
    ns_records = [line.split() for line in _section(out, "AUTHORITY")]
    assert {r[3] for r in ns_records} == {"NS"}
    assert len({r[0] for r in ns_records}) == 2  # K = 2 children
    glue = _section(out, "ADDITIONAL")
    assert all(" A " in line.replace("\t", " ") for line in glue)
    # the true branch comes first (synthetic queries carry the branch's own words)
    truth_path = ns.path(ns.tools[query.truth[0]].zone)
    assert ns_records[0][0] == truth_path[1]


@needs_dig
def test_dig_asks_for_scores_and_gets_one_per_child(served) -> None:
    # dig sends the empty scores option as any client would (NSID-style request)
    _, _, out = dig_tld_cursor(served, 3, f"+ednsopt={SCORES_OPTION_CODE}")
    children = list(dict.fromkeys(line.split()[0] for line in _section(out, "AUTHORITY")))
    m = re.search(rf"; OPT={SCORES_OPTION_CODE}: ([0-9a-f ]+)", out, re.I)
    assert m, out
    scores = decode_scores(bytes.fromhex(m.group(1).replace(" ", "")))
    assert len(scores) == len(children) == 3
    assert scores == sorted(scores, reverse=True)


@needs_dig
def test_dig_truncation_then_tcp(served) -> None:
    manifest, _ns, _ = served
    hexdata = Intent("", k=0).encode().hex()
    tld = _server(manifest, "tools.")
    udp = dig(f"@{tld}", "_mcp._tcp._tools.", "SRV", "+norec", "+bufsize=512", "+ignore",
              f"+ednsopt={DEFAULT_OPTION_CODE}:{hexdata}")
    assert re.search(r"flags: qr tc", udp)
    tcp = dig(f"@{tld}", "_mcp._tcp._tools.", "SRV", "+norec", "+tcp",
              f"+ednsopt={DEFAULT_OPTION_CODE}:{hexdata}")
    assert "tc" not in re.search(r"flags: ([a-z ]+);", tcp).group(1).split()
    assert len(_section(tcp, "AUTHORITY")) >= 3


@needs_dig
def test_dig_through_resolver(served) -> None:
    manifest, ns, _ = served
    query = next(q for q in ns.queries if q.service == "mcp")
    hexdata = Intent(query.text, k=3).encode().hex()
    out = dig(f"@{manifest['resolver']['address']}", "_mcp._tcp._tools.", "SRV",
              f"+ednsopt={DEFAULT_OPTION_CODE}:{hexdata}")
    assert re.search(r"flags: qr rd ra", out)
    answers = _section(out, "ANSWER")
    assert 1 <= len(answers) <= 3
    assert ns.tools[query.truth[0]].target in {a.split()[-1] for a in answers}


@needs_dig
def test_dig_intent_in_the_name_follows_the_cname_chain(served) -> None:
    """The deployable form: no option, the intent in the QNAME. The served resolver follows
    the servers' CNAMEs as any resolver would; dig +trace-like checks on each hop."""
    manifest, ns, _ = served
    query = next(q for q in ns.queries if q.service == "mcp")
    name = intent_qname(query.text, 3)
    out = dig(f"@{manifest['resolver']['address']}", name, "SRV")
    answers = _section(out, "ANSWER")
    cnames = [a.split() for a in answers if a.split()[3] == "CNAME"]
    assert cnames and cnames[0][0] == name and len(cnames) == NS_ARGS["depth"]
    for (_, _, _, _, target), nxt in zip(cnames, [*cnames[1:], None], strict=True):
        assert nxt is None or nxt[0] == target  # each CNAME leads to the next owner
    srv = [a.split() for a in answers if a.split()[3] == "SRV"]
    assert 1 <= len(srv) <= 3 and {a[0] for a in srv} == {cnames[-1][-1]}
    assert ns.tools[query.truth[0]].target in {a[-1] for a in srv}
    # each hop alone, asked of the zone's own server without recursion: AA and a CNAME
    zone = "tools."
    hop = dig(f"@{_server(manifest, zone)}", name, "SRV", "+norec")
    assert re.search(r"flags: qr aa", hop)
    assert [a.split()[3] for a in _section(hop, "ANSWER")] == ["CNAME"]


def test_dnspython_resolves_the_intent_in_the_name(served) -> None:
    manifest, ns, path = served
    query = next(q for q in ns.queries if q.service == "a2a")
    msg = dns.message.make_query(intent_qname(query.text, 2, "a2a"), dns.rdatatype.SRV)
    reply = dns.query.udp(msg, manifest["resolver"]["address"], port=PORT, timeout=5)
    chain = [rrset for rrset in reply.answer if rrset.rdtype == dns.rdatatype.CNAME]
    srv = [rrset for rrset in reply.answer if rrset.rdtype == dns.rdatatype.SRV]
    assert len(chain) == NS_ARGS["depth"] and srv and len(srv[0]) <= 2
    assert ns.tools[query.truth[0]].target in {r.target.to_text() for r in srv[0]}
    out = subprocess.run(
        [sys.executable, "-m", "sim.cli", "query", query.text, "--service", "a2a", "-k", "2",
         "--mode", "qname", "--manifest", str(path)], capture_output=True, text=True,
        timeout=60, env={**os.environ, "COLUMNS": "200"})
    assert out.returncode == 0, out.stdout + out.stderr
    assert intent_qname(query.text, 2, "a2a") in out.stdout
    assert ns.tools[query.truth[0]].target in out.stdout


def _dnspython_query(ns, manifest, tcp: bool) -> dns.message.Message:
    query = next(q for q in ns.queries if q.service == "mcp")
    msg = dns.message.make_query("_mcp._tcp._tools.", dns.rdatatype.SRV, use_edns=0, options=[
        dns.edns.GenericOption(DEFAULT_OPTION_CODE, Intent(query.text, k=2).encode())])
    send = dns.query.tcp if tcp else dns.query.udp
    return send(msg, manifest["resolver"]["address"], port=PORT, timeout=5), query


@pytest.mark.parametrize("tcp", [False, True], ids=["udp", "tcp"])
def test_dnspython_client_gets_srv_from_resolver(served, tcp: bool) -> None:
    manifest, ns, _ = served
    reply, query = _dnspython_query(ns, manifest, tcp)
    srv = [rrset for rrset in reply.answer if rrset.rdtype == dns.rdatatype.SRV]
    assert srv and len(srv[0]) == 2
    targets = {r.target.to_text() for r in srv[0]}
    assert ns.tools[query.truth[0]].target in targets
    addresses = {rr.name.to_text(): rr[0].address for rr in reply.additional}
    for target in targets:
        tool = next(t for t in ns.tools.values() if t.target == target)
        assert addresses[target] == tool.address


@pytest.mark.parametrize("search", [[], ["--beam", "2", "--search", "global"]])
def test_tooldns_query_command_prints_walk(served, search: list[str]) -> None:
    _manifest, ns, path = served
    query = next(q for q in ns.queries if q.service == "rest")
    out = subprocess.run(
        [sys.executable, "-m", "sim.cli", "query", query.text, "--service", "rest", "-k", "3",
         "--manifest", str(path), *search], capture_output=True, text=True, timeout=60,
        env={**os.environ, "COLUMNS": "200"})
    assert out.returncode == 0, out.stdout + out.stderr
    assert "_rest._tcp._tools." in out.stdout
    assert ns.tools[query.truth[0]].target in out.stdout


def test_live_server_survives_garbage(served) -> None:
    manifest, _ns, _ = served
    tld = (_server(manifest, "tools."), PORT)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(2)
        for junk in (b"", b"\x00", b"\xff" * 11, os.urandom(12), os.urandom(300)):
            sock.sendto(junk, tld)
        msg = dns.message.make_query("tools.", dns.rdatatype.SOA)
        reply = dns.query.udp(msg, tld[0], port=PORT, timeout=5)
    assert reply.answer and reply.answer[0].rdtype == dns.rdatatype.SOA
