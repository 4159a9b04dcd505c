"""Packet capture of a live run, and per-query attribution of what crossed loopback.

:class:`Capture` records with ``tcpdump`` (a BPF filter in the kernel, written straight to
a pcap file; it keeps up where scapy's Python sniffer drops packets) and falls back to
scapy's ``AsyncSniffer`` when tcpdump is not installed. The pcap is then read with
scapy and each IPv4 packet is attributed to a query:

* DNS over UDP: by (client address, server address, DNS ID, question name) — the resolver
  and the agents record the ID of every query they send;
* DNS over TCP: by the DNS message in the flow's first data segment;
* HTTP (registries): by flow (the agent's address and port → its connection) and time:
  a packet belongs to the discovery whose request on that connection went out last
  before it (packets before the first request — the handshake — to the opener).

"Up" is toward the server side (the packet's destination port is a service port).
"""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from dnslib import DNSRecord

from nodes.registry.client import RegistryAgent, RegistryResult
from sim.accounting import WireCost
from sim.build.runplan import RING_KIB, RunPlan
from sim.engines.base import EngineOutput
from sim.run.records import stub_walks
from sim.schemes import SchemeSpec

LINKTYPE_RAW = 101  # pcap link type of packets that begin with their IP header
_DROPPED = re.compile(rb"(\d+) packets? dropped by kernel")

#: one scheme's run as a capture sees it: scheme, plan, output, wall-clock start and end
Window = tuple[SchemeSpec, RunPlan, EngineOutput, float, float]


@dataclass(frozen=True, slots=True)
class Packet:
    ts: float  # capture time (wall clock, seconds)
    src: str
    dst: str
    sport: int
    dport: int
    proto: str  # "udp" | "tcp"
    size: int  # IP total length
    payload: bytes  # first bytes of the transport payload
    flags: str = ""  # TCP flags (scapy notation)


class Capture:
    """Record loopback traffic matching ``bpf`` into ``path`` until :meth:`stop`."""

    def __init__(self, path: str | Path, bpf: str, iface: str = "lo", snaplen: int = 1024):
        self.path, self.bpf, self.iface, self.snaplen = Path(path), bpf, iface, snaplen
        self.tool = "tcpdump" if shutil.which("tcpdump") else "scapy"
        self._proc: subprocess.Popen | None = None
        self._sniffer: Any = None  # scapy's AsyncSniffer (fallback)
        #: packets the kernel dropped before tcpdump read them, as tcpdump reports on exit
        #: (None: not known, with scapy or before :meth:`stop`)
        self.dropped: int | None = None

    def start(self) -> Capture:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.tool == "tcpdump":
            self._proc = subprocess.Popen(
                ["tcpdump", "-i", self.iface, "--immediate-mode", "-U", "-n", "-s",
                 str(self.snaplen), "-B", str(RING_KIB), "-w", str(self.path), self.bpf],
                stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
            assert self._proc.stderr is not None
            line = self._proc.stderr.readline().decode(errors="replace")  # "listening on lo…"
            if "listening" not in line:
                self._proc.kill()
                raise RuntimeError(f"tcpdump did not start: {line.strip()}")
        else:
            from scapy.sendrecv import AsyncSniffer

            self._sniffer = AsyncSniffer(iface=self.iface, filter=self.bpf, store=True)
            self._sniffer.start()
            time.sleep(0.5)  # the sniffer thread opens its socket
        return self

    def stop(self) -> Path:
        time.sleep(0.2)  # the last packets of the run reach the capture buffer
        if self._proc is not None:
            self._proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=10)
            if self._proc.returncode is not None and self._proc.stderr is not None:
                found = _DROPPED.search(self._proc.stderr.read())  # its statistics on exit
                self.dropped = int(found.group(1)) if found else None
            self._proc = None
        elif self._sniffer is not None:
            from scapy.utils import wrpcap

            packets = self._sniffer.stop()
            wrpcap(str(self.path), packets)
            self._sniffer = None
        return self.path


def read_packets(path: str | Path) -> list[Packet]:
    """IPv4 UDP/TCP packets of a pcap file, in capture order."""
    from scapy.layers.inet import IP, TCP, UDP
    from scapy.utils import PcapReader

    out = []
    with PcapReader(str(path)) as reader:
        for pkt in reader:
            if IP not in pkt:
                continue
            ip = pkt[IP]
            if UDP in ip:
                l4, proto, flags = ip[UDP], "udp", ""
            elif TCP in ip:
                l4, proto, flags = ip[TCP], "tcp", str(ip[TCP].flags)
            else:
                continue
            out.append(Packet(float(pkt.time), ip.src, ip.dst, int(l4.sport), int(l4.dport),
                              proto, int(ip.len), bytes(l4.payload), flags))
    return out


def _dns_key(payload: bytes) -> tuple[int, str] | None:
    try:
        msg = DNSRecord.parse(payload)
    except Exception:  # truncated by the snap length or not DNS: unattributable
        return None
    if not msg.questions:
        return msg.header.id, ""
    return msg.header.id, str(msg.q.qname).lower()


DnsKey = tuple[str, str, int, str]  # client address, server address, DNS ID, qname


def _at(sends: list[tuple[float, int]], t: float) -> int:
    """The job of the last send at or before ``t`` (the first one if none was yet)."""
    job = sends[0][1]
    for when, j in sends:
        if when <= t:
            job = j
    return job


def attribute(packets: Iterable[Packet], ports: set[int],
              dns_keys: dict[DnsKey, list[tuple[float, int]]],
              http_flows: dict[tuple[str, int], list[tuple[float, int]]],
              clock_offset: float = 0.0, until: float | None = None,
              ) -> tuple[dict[int, WireCost], list[Packet]]:
    """Per-job wire cost from captured packets, and the packets nobody could claim.

    ``dns_keys`` maps a DNS exchange's key to the (node time sent, job) of every query
    with that key (IDs are 16 bits: two queries can share one, then time decides);
    ``http_flows`` maps an agent's (address, port) to the (node time of each request
    sent, job) on that connection.
    Packets later than ``until`` (node time; e.g. teardown after the run) are left over.
    """
    costs: dict[int, WireCost] = {}
    left: list[Packet] = []
    packets = list(packets)
    tcp_dns: dict[tuple[str, int, str, int], int] = {}
    for p in packets:  # DNS over TCP: a flow's first message names its exchange
        if p.proto != "tcp" or len(p.payload) <= 2:
            continue
        up = p.dport in ports
        client, cport, server, sport = (p.src, p.sport, p.dst, p.dport) if up else (
            p.dst, p.dport, p.src, p.sport)
        key = _dns_key(p.payload[2:])
        if (client, cport) not in http_flows and key is not None and (
                client, server, *key) in dns_keys:
            tcp_dns.setdefault((client, cport, server, sport),
                               _at(dns_keys[(client, server, *key)], p.ts - clock_offset))

    def add(job: int, p: Packet, up: bool) -> None:
        c = WireCost(p.size, 1, 0, 0) if up else WireCost(0, 0, p.size, 1)
        costs[job] = costs.get(job, WireCost()) + c

    for p in packets:
        up = p.dport in ports
        client, cport, server = (p.src, p.sport, p.dst) if up else (p.dst, p.dport, p.src)
        node_time = p.ts - clock_offset
        if until is not None and node_time > until:
            left.append(p)
            continue
        job: int | None = None
        if p.proto == "udp":
            key = _dns_key(p.payload)
            sends = dns_keys.get((client, server, *key)) if key is not None else None
            if sends:
                job = _at(sends, node_time)
        elif (client, cport) in http_flows:
            job = _at(http_flows[(client, cport)], node_time)
        else:
            job = tcp_dns.get((client, cport, server, p.dport if up else p.sport))
        if job is None:
            left.append(p)
        else:
            add(job, p, up)
    return costs, left


def compare_capture(df: pd.DataFrame, pcap: Path, windows: list[Window], tool: str,
                    ports: set[int], dropped: int | None = None) -> tuple[pd.DataFrame, dict]:
    """Attribute captured packets to queries; add ``cap_*`` columns; compare per scheme.
    ``dropped``: packets the capture tool says the kernel dropped (a capture that lost
    packets cannot show the accounting exact; the report says how many)."""
    packets = read_packets(pcap)
    cols: dict[str, list[pd.Series]] = {c: [] for c in (
        "cap_bytes_up", "cap_bytes_down", "cap_packets_up",
                            "cap_packets_down")}
    report: dict = {"pcap": pcap.name, "tool": tool, "packets": len(packets),
                    "dropped_by_kernel": dropped, "schemes": {}}
    for scheme, plan, output, start, end in windows:
        mine = [p for p in packets if start <= p.ts <= end]
        dns_keys: dict = {}
        flows: dict[tuple[str, int], list[tuple[float, int]]] = {}
        conn_flow = {(ip, conn): (ip, port) for (ip, port), conn in output.flows.items()}
        for job, res in output.stubs:
            agent_ip = plan.agent_order[job.agent]
            if isinstance(res, RegistryResult):  # a registry scheme's
                for ex in res.steps:
                    flow = conn_flow.get((agent_ip, ex.conn))
                    if flow is not None:
                        flows.setdefault(flow, []).append((ex.sent, job.index))
                continue
            for st in res.steps:
                dns_keys.setdefault((agent_ip, st.server[0], st.qid, st.qname), []).append(
                    (st.sent, job.index))
            agent = plan.agents[agent_ip]
            assert not isinstance(agent, RegistryAgent)  # a DNS scheme's
            resolver_ip = agent.resolver[0]  # walks leave from there
            for walk in stub_walks(output, agent_ip, res):
                for st in walk.steps:
                    if st.transport == "tls":  # DNS over TLS: by connection, as HTTP flows
                        flow = conn_flow.get((resolver_ip, st.conn))
                        if flow is not None:
                            flows.setdefault(flow, []).append((st.sent, job.index))
                        continue
                    dns_keys.setdefault((resolver_ip, st.server[0], st.qid, st.qname),
                                        []).append((st.sent, job.index))
        for sends in (*flows.values(), *dns_keys.values()):
            sends.sort()
        costs, left = attribute(mine, ports, dns_keys, flows, output.clock_offset,
                                until=output.end_time)
        rows = df.scheme == scheme.name
        acct = df[rows]
        cap = [costs.get(j, WireCost()) for j in acct.job]
        for name, attr in (("cap_bytes_up", "bytes_up"), ("cap_bytes_down", "bytes_down"),
                           ("cap_packets_up", "packets_up"),
                           ("cap_packets_down", "packets_down")):
            cols[name].append(pd.Series([getattr(c, attr) for c in cap], index=acct.index))
        accounted = zip(acct.bytes_up.tolist(), acct.packets_up.tolist(),
                        acct.bytes_down.tolist(), acct.packets_down.tolist(), strict=True)
        exact = sum(c == WireCost(*r) for c, r in zip(cap, accounted, strict=True))
        acc_b = int((acct.bytes_up + acct.bytes_down).sum())
        acc_p = int((acct.packets_up + acct.packets_down).sum())
        cap_b = sum(c.bytes_up + c.bytes_down for c in cap)
        cap_p = sum(c.packets_up + c.packets_down for c in cap)
        report["schemes"][scheme.name] = {
            "queries": len(acct), "queries_exact": exact,
            "accounted_bytes": acc_b, "captured_bytes": cap_b,
            "accounted_packets": acc_p, "captured_packets": cap_p,
            "bytes_diff_pct": round(100 * (cap_b - acc_b) / acc_b, 3) if acc_b else None,
            "packets_diff_pct": round(100 * (cap_p - acc_p) / acc_p, 3) if acc_p else None,
            "unattributed_packets": len(left),
            "unattributed_bytes": sum(p.size for p in left),
        }
    df = df.copy()
    for name, parts in cols.items():
        df[name] = pd.concat(parts) if parts else 0
    return df, report


def merge_pcaps(base: Path, extra: list[str]) -> Path:
    """Fold pcaps an engine recorded itself (Mininet: one per host namespace, ``tcpdump -i
    any``) into the run's capture ``base``, in time order, as raw IPv4 packets (the files'
    link layers differ: loopback Ethernet, Linux cooked capture); the engine's files are
    removed. ``base`` is left untouched when there is nothing to fold in."""
    files = [Path(p) for p in extra if Path(p).exists()]
    if not files:
        return base
    from scapy.layers.inet import IP
    from scapy.utils import PcapReader, PcapWriter

    packets = []
    for path in [base, *files] if base.exists() else files:
        with PcapReader(str(path)) as reader:
            for pkt in reader:
                if IP in pkt:
                    ip = pkt[IP]
                    ip.time = pkt.time
                    packets.append(ip)
    packets.sort(key=lambda p: float(p.time))
    tmp = base.with_name(base.name + ".merging")
    writer = PcapWriter(str(tmp), linktype=LINKTYPE_RAW, sync=False)
    try:
        for ip in packets:
            writer.write(ip)
    finally:
        writer.close()
    tmp.replace(base)
    for path in files:
        path.unlink()
    for folder in sorted({p.parent for p in files}):  # the engine's folders, if now empty
        with contextlib.suppress(OSError):
            folder.rmdir()
        with contextlib.suppress(OSError):
            folder.parent.rmdir()
    return base
