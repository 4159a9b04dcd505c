"""Registries on real sockets, and packet capture checked against the accounting.

* a real HTTP client (Python's ``http.client``, over TLS 1.3 with the run's CA) talks to a
  live registry;
* ``paper-table2`` (trimmed) runs live with ``--capture``: ToolDNS over UDP must match the
  engine's accounting byte for byte and packet for packet, per query; the TCP schemes
  within a stated bound; the simpy model within 5 % of what was captured; the pcap opens
  with scapy and with tshark.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from nodes.scoring import make_scorer
from sim.build.registries import REGISTRY_HOST, build_registry
from sim.loading import load_scenario
from sim.run.runner import run_scenario
from topologies.synthetic import synthetic

ROOT = Path(__file__).resolve().parents[3]
CI = os.environ.get("CI") == "true"
needs_root = pytest.mark.skipif(os.geteuid() != 0 and not CI,
                                reason="packet capture on lo needs root")


@pytest.mark.live
@pytest.mark.interop
def test_stdlib_https_client_talks_to_live_registry(tmp_path: Path) -> None:
    from sim.sockets.registry import start_registry

    ns = synthetic(n_tools=200, branching=3, depth=2, seed=2, n_orgs=1, n_queries=10)
    setup = build_registry("ans-v0", ns, make_scorer("bm25"), seed=4, port=18443)
    ca = tmp_path / "ca.pem"
    ca.write_text(setup.ca.cert_pem)

    def client() -> tuple[int, dict, str]:
        ctx = setup.client_context()
        conn = http.client.HTTPSConnection(setup.address, setup.port, context=ctx, timeout=5)
        conn.sock = None
        conn._tunnel_host = None  # plain connection; SNI / name check on REGISTRY_HOST:
        conn.host = setup.address
        ctx.check_hostname = True
        raw = ctx.wrap_socket(__import__("socket").create_connection(
            (setup.address, setup.port), timeout=5), server_hostname=REGISTRY_HOST)
        conn.sock = raw
        conn.request("GET", "/v1/capabilities?protocol=mcp")
        resp = conn.getresponse()
        body = json.loads(resp.read())
        version = raw.version()
        conn.close()
        return resp.status, body, version

    async def main() -> tuple[int, dict, str]:
        loop = asyncio.get_running_loop()
        server = await start_registry(setup, tls=True, now=lambda: 0.0)
        try:
            return await loop.run_in_executor(None, client)
        finally:
            server.close()

    status, body, version = asyncio.run(main())
    assert status == 200 and body["capabilities"] and version == "TLSv1.3"


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory):
    if shutil.which("tcpdump") is None and not CI:
        pytest.skip("tcpdump is not installed (bash .ci/setup installs it)")
    sc = load_scenario(ROOT / "scenarios" / "paper-table2.yaml")
    sc = sc.with_overrides({"workload.queries": 12, "workload.pool": 12})
    keep = {"tooldns", "agentdns-cold", "agentdns-keepalive", "agentdns-tls", "ans-cold",
            "ans-tls"}
    sc = sc.model_copy(update={"schemes": tuple(s for s in sc.schemes if s.name in keep)})
    for _ in range(2):  # a capture that lost packets (tcpdump says so) decides nothing: again
        out = tmp_path_factory.mktemp("capture")
        live = run_scenario(sc, engine="live", out_dir=out, capture=True)
        if not live.summary["capture"]["dropped_by_kernel"]:
            break
    sim = run_scenario(sc, engine="simpy", write=False)
    return live, sim, out


@needs_root
@pytest.mark.live
def test_capture_reports_what_the_kernel_dropped(tmp_path: Path) -> None:
    """tcpdump's own statistics on exit reach the report: none dropped on a light load,
    every packet in the file."""
    import socket

    from sim.run.capture import Capture, read_packets

    if shutil.which("tcpdump") is None and not CI:
        pytest.skip("tcpdump is not installed (bash .ci/setup installs it)")
    sniffer = Capture(tmp_path / "lo.pcap", "udp and dst port 19999").start()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for i in range(20):
            sock.sendto(b"x" * i, ("127.0.0.1", 19999))
    packets = read_packets(sniffer.stop())
    assert sniffer.dropped == 0
    assert [p.size for p in packets] == [28 + i for i in range(20)]


@needs_root
@pytest.mark.live
def test_udp_capture_equals_accounting_exactly(captured) -> None:
    live, _, _ = captured
    report = live.summary["capture"]["schemes"]["tooldns"]
    dropped = live.summary["capture"]["dropped_by_kernel"]
    assert report["queries_exact"] == report["queries"] == 12, (report, dropped)
    assert report["captured_bytes"] == report["accounted_bytes"]
    assert report["captured_packets"] == report["accounted_packets"]
    rows = live.records[live.records.scheme == "tooldns"]
    assert (rows.cap_bytes_up == rows.bytes_up).all()
    assert (rows.cap_packets_down == rows.packets_down).all()


@needs_root
@pytest.mark.live
def test_tcp_capture_matches_the_model_within_bounds(captured) -> None:
    live, _, _ = captured
    for scheme, r in live.summary["capture"]["schemes"].items():
        # application bytes are exact; only pure ACKs can differ (Linux delayed-ACK timing):
        # at most one per message received, each way
        rows = live.records[live.records.scheme == scheme]
        flights = int(rows.exchanges.sum()) + (2 * len(rows) if "tls" in scheme else 0)
        assert abs(r["captured_packets"] - r["accounted_packets"]) <= 2 * flights, (scheme, r)
        assert abs(r["captured_bytes"] - r["accounted_bytes"]) <= 52 * max(
            1, abs(r["captured_packets"] - r["accounted_packets"])), (scheme, r)
        assert r["unattributed_packets"] <= 6, (scheme, r)  # keep-alive FINs after the run
    cold = live.summary["capture"]["schemes"]["agentdns-cold"]
    assert cold["captured_bytes"] - cold["accounted_bytes"] in range(-52 * 12, 52 * 12 + 1)


@needs_root
@pytest.mark.live
def test_simpy_model_against_capture(captured) -> None:
    """The simulation's bytes and packets per query equal the live engine's accounting,
    and that accounting differs from the capture only by pure ACKs (52-byte packets whose
    timing Linux decides), at most one per message received; ToolDNS within 5 % (exact)."""
    live, sim, _ = captured
    cols = ["bytes_up", "bytes_down", "packets_up", "packets_down"]
    for scheme, g in live.records.groupby("scheme"):
        s = sim.records[sim.records.scheme == scheme]
        # same messages on both engines; only time stamps inside answers (OCSP
        # thisUpdate) can change a few bytes
        assert g[cols[2:]].mean().tolist() == s[cols[2:]].mean().tolist(), scheme
        for col in cols[:2]:
            assert abs(g[col].mean() - s[col].mean()) <= 0.005 * s[col].mean(), (scheme, col)
        for way in ("up", "down"):
            d_bytes = g[f"cap_bytes_{way}"].sum() - g[f"bytes_{way}"].sum()
            d_packets = g[f"cap_packets_{way}"].sum() - g[f"packets_{way}"].sum()
            assert d_bytes == 52 * d_packets, (scheme, way, d_bytes, d_packets)
            flights = g.exchanges.sum() + (2 * len(g) if "tls" in scheme else 0)
            assert abs(d_packets) <= flights, (scheme, way, d_packets, flights)
        if scheme == "tooldns":
            for col in cols:
                model, real = s[col].mean(), g[f"cap_{col}"].mean()
                assert abs(model - real) <= 0.05 * real, (col, model, real)


@needs_root
@pytest.mark.live
@pytest.mark.interop
def test_pcap_opens_with_scapy_and_tshark(captured) -> None:
    from scapy.utils import rdpcap

    live, _, out = captured
    pcap = out / "capture.pcap"
    packets = rdpcap(str(pcap))
    assert len(packets) == live.summary["capture"]["packets"] > 0
    if shutil.which("tshark") is None:
        if CI:
            pytest.fail("tshark should be installed by .ci/setup")
        pytest.skip("tshark is not installed")
    res = subprocess.run(["tshark", "-r", str(pcap), "-T", "fields", "-e", "frame.number"],
                         capture_output=True, text=True, timeout=60, check=True)
    assert len(res.stdout.split()) == len(packets)


def test_registry_schemes_are_deterministic_on_simpy() -> None:
    sc = load_scenario(ROOT / "scenarios" / "paper-table2.yaml").with_overrides(
        {"workload.queries": 6, "workload.pool": 6})
    a = run_scenario(sc, write=False).records
    b = run_scenario(sc, write=False).records
    assert a.equals(b)
    assert set(a.scheme) >= {"agentdns-tls", "ans-keepalive"}
    assert (a[a.scheme.str.startswith("ans")].success).all()
