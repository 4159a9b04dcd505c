"""AAAA records beside A, and DNS over TLS (RFC 7858) between the resolver and the
authoritative servers: records and sections (transport-free), the accounting of a DoT
exchange, a simpy run and a live run over real TLS sockets against UDP, hostile input on
the TLS port, and `dig AAAA` against live servers and the resolver.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import shutil
import ssl

import dns.message
import dns.rdatatype
import pytest
from dnslib import QTYPE, DNSRecord

from nodes.dns.codec import AAAA
from nodes.dns.wire import DEFAULT_OPTION_CODE, Intent, cursor_name, opt_record
from nodes.dns.zone import aaaa_address
from nodes.resolver.types import Step
from sim.accounting import (
    IPV4,
    TCP_SYN,
    TCP_TS,
    DotModel,
    dot_acks,
    dot_exchange_cost,
    dot_port,
    steps_cost,
)
from sim.build.hierarchy import build_hierarchy, dot_setup
from sim.build.trust import sign_hierarchy
from sim.loading import load_scenario
from sim.run.runner import run_scenario
from sim.sockets.hierarchy import LiveHierarchy
from sim.sockets.server import ServerEndpoint
from topologies.synthetic import synthetic

NS_ARGS = dict(n_tools=120, branching=2, depth=2, seed=3, n_orgs=0)
PORT = 24000 + os.getpid() % 20000
DIG = shutil.which("dig")
SCENARIO = "scenarios/dot-cost.yaml"


@pytest.fixture(scope="module")
def ns():
    return synthetic(**NS_ARGS)


def _leaf(hierarchy):
    ns = hierarchy.namespace
    zone = next(z for z in sorted(ns.leaves())
                if sum(ns.tools[t].service == "mcp" for t in ns.zones[z].tools) >= 3)
    address = next(a for a, z in hierarchy.zone_of.items() if z == zone)
    tools = [ns.tools[t] for t in ns.zones[zone].tools if ns.tools[t].service == "mcp"]
    return zone, hierarchy.servers[address], tools


def _ask(server, qname: str, qtype: str, intent: Intent | None = None, size: int = 1232,
         do: bool = False) -> DNSRecord:
    q = DNSRecord.question(qname, qtype)
    q.header.rd = 0
    opt = opt_record(intent, DEFAULT_OPTION_CODE, size)
    if do:
        opt.edns_do = 1
    q.add_ar(opt)
    return DNSRecord.parse(server.handle(q.pack(), ("127.0.0.1", 5353), 0.0, "udp"))


# ------------------------------------------------------------------ AAAA, transport-free


def test_aaaa_beside_a_in_leaf_answers_and_for_standard_questions(ns) -> None:
    assert str(aaaa_address("127.2.0.5")) == "fd74:6f6f:6c73::7f02:5"
    zone, server, tools = _leaf(build_hierarchy(ns, aaaa=True))
    reply = _ask(server, cursor_name("mcp", zone), "SRV", Intent(tools[0].description, k=3))
    targets = [str(rr.rdata.target) for rr in reply.rr if rr.rtype == QTYPE.SRV]
    assert len(targets) == 3
    extra = [(QTYPE[rr.rtype], str(rr.rname), str(rr.rdata)) for rr in reply.ar
             if rr.rtype in (QTYPE.A, AAAA)]
    assert [t for t, _, _ in extra] == ["A"] * 3 + ["AAAA"] * 3  # every A first
    a = {name: addr for t, name, addr in extra if t == "A"}
    for t, name, addr in extra:
        if t == "AAAA":
            assert ipaddress.IPv6Address(addr) == aaaa_address(a[name])
    # a standard AAAA question for a target; NODATA and NXDOMAIN where they belong
    target = tools[0].target
    got = _ask(server, target, "AAAA")
    assert got.header.rcode == 0 and got.header.aa
    assert [str(rr.rdata) for rr in got.rr] == [str(aaaa_address(tools[0].address))]
    nodata = _ask(server, zone, "AAAA")
    assert nodata.header.rcode == 0 and not nodata.rr and QTYPE[nodata.auth[0].rtype] == "SOA"
    assert _ask(server, "nope." + zone, "AAAA").header.rcode == 3
    # a plain SRV question: every A, then every AAAA, as far as they fit (optional data:
    # the whole RRset, no TC); over TCP all of them
    plain = _ask(server, f"_mcp._tcp.{zone}", "SRV")
    types = [QTYPE[rr.rtype] for rr in plain.ar if rr.rtype in (QTYPE.A, AAAA)]
    assert not plain.header.tc and len(plain.rr) == len(tools)
    assert types == sorted(types) and types.count("A") >= types.count("AAAA")
    q = DNSRecord.question(f"_mcp._tcp.{zone}", "SRV")
    full = DNSRecord.parse(server.handle(q.pack(), ("127.0.0.1", 1), 0.0, "tcp"))
    types = [QTYPE[rr.rtype] for rr in full.ar]
    assert types == ["A"] * len(tools) + ["AAAA"] * len(tools)


def test_aaaa_off_by_default_keeps_the_old_bytes(ns) -> None:
    zone, off, tools = _leaf(build_hierarchy(ns))
    _, on, _ = _leaf(build_hierarchy(ns, aaaa=True))
    q = DNSRecord.question(tools[0].target, "AAAA")
    assert DNSRecord.parse(off.handle(q.pack(), ("127.0.0.1", 1), 0.0)).rr == []  # NODATA
    intent = Intent(tools[0].description, k=3)
    a = _ask(off, cursor_name("mcp", zone), "SRV", intent)
    b = _ask(on, cursor_name("mcp", zone), "SRV", intent)
    assert not any(rr.rtype == AAAA for rr in a.ar)
    assert a.rr == b.rr and [r for r in b.ar if r.rtype != AAAA] == a.ar


def test_signed_zone_covers_aaaa(ns) -> None:
    hierarchy = build_hierarchy(ns, aaaa=True)
    sign_hierarchy(hierarchy, 1)
    _, server, tools = _leaf(hierarchy)
    q = dns.message.make_query(tools[0].target, "AAAA", want_dnssec=True)
    reply = dns.message.from_wire(server.handle(q.to_wire(), ("127.0.0.1", 1), 0.0))
    covered = {rrset.covers for rrset in reply.answer if rrset.rdtype == dns.rdatatype.RRSIG}
    assert dns.rdatatype.AAAA in covered


# ------------------------------------------------------------------ DoT accounting


def test_dot_exchange_pays_the_handshake_once_per_connection() -> None:
    tls = dot_setup(0).sizes
    model = DotModel(tls)

    def step(sent: float, opened: bool, conn: int = 1) -> Step:
        return Step("q.", "SRV", ("127.1.0.1", 53), "tls", sent, 0.02, 60, 200, "NOERROR",
                    True, conn=conn, opened=opened)

    first, again = dot_exchange_cost(step(0.0, True), model), dot_exchange_cost(
        step(1.0, False), model)
    bare = IPV4 + TCP_TS
    records_up, records_down = bare + tls.records(62), bare + tls.records(202)
    assert again.bytes_up == records_up + bare and again.packets_up == 2  # query + ACK
    assert again.bytes_down == records_down and again.packets_down == 1
    handshake_up = (IPV4 + TCP_SYN + bare + tls.client_hello + tls.client_finished + 3 * bare)
    handshake_down = IPV4 + TCP_SYN + bare + tls.server_flight + tls.tickets + 2 * bare
    assert first.bytes_up - again.bytes_up == handshake_up
    assert first.bytes_down - again.bytes_down == handshake_down
    assert (first.packets_up, first.packets_down) == (7, 5)
    # ACKs as captured on Linux: a reply followed within 40 ms by the next query on the
    # connection is acknowledged by it, else by a pure ACK from the delayed-ACK timer
    steps = [step(0.0, True), step(0.025, False), step(0.05, False), step(5.0, False)]
    acks, server = dot_acks(steps)
    assert [acks[id(s)] for s in steps] == [0, 0, 1, 1] and not server
    with_acks = steps_cost(steps, DotModel(tls, acks=acks))
    assert with_acks.packets_up == sum(dot_exchange_cost(s, model).packets_up
                                       for s in steps) - 2
    # queries pipelined before the previous answer came: the server ACKs the burst once
    burst = [step(0.0, True), step(0.001, False), step(0.002, False), step(5.0, False)]
    acks, server = dot_acks(burst)
    assert server == {id(burst[1]): 1}
    cost = steps_cost(burst, DotModel(tls, acks=acks, server_acks=server))
    assert cost.packets_down == sum(dot_exchange_cost(s, model).packets_down
                                    for s in burst) + 1


# ------------------------------------------------------------------ engines


def _scenario(**overrides):
    sc = load_scenario(SCENARIO)
    return sc.with_overrides({"workload.queries": 6, **overrides})


def _by(df, scheme: str):
    return df[df.scheme == scheme].reset_index(drop=True)


def test_simpy_tls_costs_more_cold_and_answers_the_same() -> None:
    df = run_scenario(_scenario(), write=False).records
    udp, tls = _by(df, "udp"), _by(df, "tls")
    assert list(udp.returned) == list(tls.returned) and udp.success.all()
    cold_u, cold_t = udp[udp.phase == 0], tls[tls.phase == 0]
    for col in ("bytes_up", "bytes_down", "packets_up", "latency_ms"):
        assert cold_t[col].sum() > cold_u[col].sum(), col
    # connections already open: a walk costs TLS records, not handshakes
    nu, nt = _by(df, "udp-nocache"), _by(df, "tls-nocache")
    warm_u, warm_t = nu[nu.phase == 1], nt[nt.phase == 1]
    assert (warm_t.latency_ms.values == warm_u.latency_ms.values).all()
    assert (warm_t.bytes_up > warm_u.bytes_up).all()
    assert (nt[nt.phase == 0].latency_ms.sum() > warm_t.latency_ms.sum())
    # mode qname agents got AAAA for every target, and the same tools over TLS
    assert list(_by(df, "qname-udp").returned) == list(_by(df, "qname-tls").returned)


def test_connection_table_is_bounded() -> None:
    sc = _scenario(**{"schemes.tls.upstream_connections": 1, "workload.queries": 4})
    sc = sc.model_copy(update={"schemes": tuple(s for s in sc.schemes
                                                if s.name in ("tls", "udp"))})
    result = run_scenario(sc, write=False)
    tls = result.summary["replay"]["tls"]
    df = result.records
    assert list(_by(df, "tls").returned) == list(_by(df, "udp").returned)
    # one connection at a time: every change of server closes one and opens another
    assert tls["dot_opened"] == tls["dot_closed"] > 4


def test_live_dot_over_real_tls_sockets_matches_udp_and_simpy() -> None:
    sc = _scenario(**{"workload.queries": 4})
    sc = sc.model_copy(update={"schemes": tuple(s for s in sc.schemes
                                                if s.name in ("udp", "tls"))})
    live = run_scenario(sc, engine="live", write=False, live_port=PORT).records
    sim = run_scenario(sc, write=False).records
    assert list(_by(live, "udp").returned) == list(_by(live, "tls").returned)
    assert _by(live, "tls").success.all()
    for col in ("bytes_up", "bytes_down", "packets_up", "packets_down", "returned"):
        assert list(live[col]) == list(sim[col]), col


def test_tls_port_survives_garbage_and_bad_dns() -> None:
    hierarchy = build_hierarchy(synthetic(**NS_ARGS))
    dot = dot_setup(0)
    address = hierarchy.root_hints[0]
    server = hierarchy.servers[address]

    async def main() -> tuple[bytes, bytes]:
        endpoint = ServerEndpoint(server, (address, PORT + 1), tls=dot.server_context(),
                                  tls_port=dot_port(PORT + 1))
        await endpoint.start()
        try:
            port = dot_port(PORT + 1)
            _, w = await asyncio.open_connection(address, port)  # not TLS at all
            w.write(b"\x16\x03\x01garbage" * 50)
            await w.drain()
            w.close()
            ctx = dot.client_context()
            r, w = await asyncio.open_connection(address, port, ssl=ctx,
                                                 server_hostname="dot.tools.test")
            w.write(b"\x00\x05hello")  # not DNS: FORMERR or dropped, counted
            q = DNSRecord.question("tools.", "SOA").pack()
            w.write(len(q).to_bytes(2, "big") + q)
            await w.drain()
            head = await asyncio.wait_for(r.readexactly(2), 5)
            reply = await r.readexactly(int.from_bytes(head, "big"))
            w.close()
            # a client that does not trust the run's CA fails the handshake
            with pytest.raises(ssl.SSLError):
                await asyncio.open_connection(address, port, ssl=ssl.create_default_context(),
                                              server_hostname="dot.tools.test")
            await asyncio.sleep(0.1)
            return reply, q
        finally:
            endpoint.close()

    reply, q = asyncio.run(main())
    counts = server.stats.counts
    assert counts["tls_handshake_failed"] >= 2 and counts["tls_connections"] == 1
    assert counts["rx_tls"] == 2 and counts["dropped_malformed"] == 1  # the 5-byte message
    msg = DNSRecord.parse(reply)
    assert msg.header.id == DNSRecord.parse(q).header.id and msg.header.rcode == 0


# ------------------------------------------------------------------ dig AAAA interop


needs_dig = pytest.mark.skipif(DIG is None and not os.environ.get("CI"),
                               reason="dig not installed (bind9-dnsutils); CI installs it")


@needs_dig
def test_dig_aaaa_against_servers_and_through_the_resolver() -> None:
    hierarchy = build_hierarchy(synthetic(**NS_ARGS), aaaa=True)
    zone, _, tools = _leaf(hierarchy)
    leaf = next(a for a, z in hierarchy.zone_of.items() if z == zone)
    port = PORT + 2

    async def dig(*args: str) -> str:
        proc = await asyncio.create_subprocess_exec(
            DIG, "-p", str(port), "+time=2", "+tries=1", *args,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        out, _ = await proc.communicate()
        return out.decode()

    async def main() -> list[str]:
        live = LiveHierarchy(hierarchy, port=port, resolver_address="127.0.53.9")
        await live.start()
        try:
            return [await dig(f"@{leaf}", tools[0].target, "AAAA", "+norec"),
                    await dig("@127.0.53.9", tools[1].target, "AAAA"),
                    await dig("@127.0.53.9", zone, "AAAA"),
                    await dig(f"@{leaf}", f"_mcp._tcp.{zone}", "SRV", "+norec", "+tcp")]
        finally:
            live.close()

    direct, via, nodata, srv = asyncio.run(main())
    assert "status: NOERROR" in direct and "flags: qr aa" in direct
    assert str(aaaa_address(tools[0].address)) in direct
    assert "status: NOERROR" in via and str(aaaa_address(tools[1].address)) in via
    assert "status: NOERROR" in nodata and "ANSWER: 0" in nodata
    assert "\tAAAA\t" in srv and "\tA\t" in srv  # the additional section carries both


@needs_dig
def test_tooldns_serve_aaaa_answers_dig(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`tooldns serve --aaaa`: the command-line hierarchy serves AAAA beside A."""
    import json
    import subprocess
    import sys
    import time

    port = PORT + 3
    manifest = tmp_path / "m.json"
    proc = subprocess.Popen([sys.executable, "-m", "sim.cli", "serve", "--tools", "60",
                             "--branching", "2", "--depth", "2", "--seed", "3", "--orgs", "0",
                             "--aaaa", "--port", str(port), "--resolver", "127.0.53.8",
                             "--manifest", str(manifest), "--duration", "60"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not manifest.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
            time.sleep(0.1)
        assert json.loads(manifest.read_text())["port"] == port
        tool = next(iter(synthetic(n_tools=60, branching=2, depth=2, seed=3,
                                   n_orgs=0).tools.values()))
        out = subprocess.run([DIG, "-p", str(port), "+time=2", "+tries=1", "@127.0.53.8",
                              tool.target, "AAAA"], capture_output=True, text=True,
                             timeout=30).stdout
        assert "status: NOERROR" in out and str(aaaa_address(tool.address)) in out
    finally:
        proc.terminate()
        proc.wait(timeout=10)
