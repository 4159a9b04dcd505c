"""Live UDP throughput of one ToolDNS leaf server against a plain asyncio UDP echo server.

What it measures
    Replies per second that (a) a ToolDNS leaf authoritative server, run exactly as the live
    engine runs it (:class:`sim.live.ServerEndpoint`, asyncio, UDP), and (b) a minimal asyncio
    ``DatagramProtocol`` that sends every datagram straight back can sustain, driven by the
    same load generator with the same query bytes. The ratio leaf/echo at the same window is
    the figure of merit: it says how much of the cost of a plain Python asyncio UDP server the
    ToolDNS message handling adds (goal: ratio >= 0.5).

How
    * Build a synthetic namespace (``topologies.namespace.synthetic``) and its hierarchy
      (``sim.hierarchy.build_hierarchy``); pick the leaf zone with the most generated queries.
    * Start the leaf server and the echo server, each in its own process (multiprocessing,
      ``spawn``), on 127.0.0.0/8; each reports its UDP port back over a pipe and stops on an
      event or after a hard lifetime, whichever comes first.
    * The load generator (this process) sends from a UDP socket on 127.0.0.1, keeps
      ``window`` queries outstanding (a reply releases the next query; a 0.2 s silence
      counts as loss and refills the window) for ``--duration`` seconds after a short
      warm-up, and counts replies received.
    * Query kinds against the leaf (and the very same bytes against the echo server):
        - ``semantic``: cursor name ``_mcp._tcp._<leaf>`` SRV with the ToolDNS EDNS0 intent
          option (K=3), intent texts taken from the namespace's queries for that leaf;
        - ``plain-a``: A query for a tool target of the leaf, no EDNS;
        - ``plain-srv`` (optional): fully expanded ``_mcp._tcp.<leaf>`` SRV without the
          option — the whole RRset does not fit 512 bytes, so the answer is TC.
    * Before measuring, every distinct query is sent once and its reply checked (NOERROR,
      expected answer count; byte-identical for the echo server).
    * Besides wall-clock queries/s, the CPU time of the server process (Linux
      ``/proc/<pid>/stat``) and of the load generator are sampled around each measurement:
      "server CPU µs/query" and the "CPU-cost ratio" (echo µs / leaf µs) are much less
      sensitive to a noisy shared machine than queries/s, and "load-gen CPU" near 100 %
      would say the generator, not the server, was the bottleneck.
    * ``--what-if-cache`` adds a third server: the same leaf behind a packet cache defined
      in this file (not ToolDNS code), to show what caching answers would buy.

Everything stays on loopback and every loop is bounded in time.

Example::

    python benchmarks/bench_server_qps.py                       # windows 1 and 32, 3 s each
    python benchmarks/bench_server_qps.py --window 8 --duration 5 --kinds semantic
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import platform
import random
import socket
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event as EventType
from pathlib import Path

# Allow `python benchmarks/bench_server_qps.py` from a checkout without installation.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dnslib import QTYPE, RCODE, DNSRecord

from nodes.authoritative import AuthoritativeServer
from nodes.wire import Intent, cursor_name, expanded_name, opt_record
from sim.hierarchy import build_hierarchy
from topologies.namespace import Namespace, synthetic

#: Reference anchors (plain Python asyncio UDP echo on 2 vCPU), requests/s by window.
REFERENCE_ECHO_QPS = {1: 12_000, 32: 29_000}
KINDS = ("semantic", "plain-a", "plain-srv")
DEFAULT_KINDS = ("semantic", "plain-a")
RECV_TIMEOUT = 0.2  # seconds of silence after which outstanding queries count as lost
STOP_POLL = 0.05  # how often a server process checks its stop event


# ------------------------------------------------------------------------ server processes


class _Echo(asyncio.DatagramProtocol):
    """Sends every datagram back to where it came from."""

    def __init__(self) -> None:
        self.transport: asyncio.DatagramTransport | None = None
        self.count = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: tuple) -> None:
        self.count += 1
        if self.transport is not None:
            self.transport.sendto(data, addr)

    def error_received(self, exc: Exception) -> None:
        pass


async def _wait_stop(stop: EventType, lifetime: float) -> None:
    """Return when ``stop`` is set or ``lifetime`` seconds have passed."""
    deadline = time.monotonic() + lifetime
    while not stop.is_set() and time.monotonic() < deadline:
        await asyncio.sleep(STOP_POLL)


async def _run_echo(host: str, conn: Connection, stop: EventType, lifetime: float) -> None:
    loop = asyncio.get_running_loop()
    transport, proto = await loop.create_datagram_endpoint(_Echo, local_addr=(host, 0))
    try:
        conn.send(("ready", transport.get_extra_info("sockname")[1]))
        await _wait_stop(stop, lifetime)
        conn.send(("stats", {"rx_udp": proto.count}))
    finally:
        transport.close()


def echo_main(host: str, conn: Connection, stop: EventType, lifetime: float) -> None:
    """Process entry point of the echo server."""
    asyncio.run(_run_echo(host, conn, stop, lifetime))


class PacketCacheServer:
    """What-if only (``--what-if-cache``): a bounded packet cache in front of the server.

    The reply is a function of the query bytes after the ID (and the transport) as long as
    the zone data does not change, so a hit costs a dict lookup plus splicing the ID in.
    Not part of ToolDNS; it shows how far a cache in ``nodes/`` could lift the ratio.
    """

    def __init__(self, server: AuthoritativeServer, size: int = 4096) -> None:
        self.server = server
        self.size = size
        self.cache: dict[tuple[str, bytes], bytes] = {}
        self.stats = server.stats

    def handle(
        self, wire: bytes, src: tuple[str, int], now: float, transport: str = "udp"
    ) -> bytes | None:
        key = (transport, bytes(wire[2:]))
        hit = self.cache.get(key)
        if hit is not None:
            self.stats.counts["cache_hit"] += 1
            return wire[:2] + hit
        reply = self.server.handle(wire, src, now, transport)
        if reply is not None and len(self.cache) < self.size:
            self.cache[key] = bytes(reply[2:])
        return reply


async def _run_leaf(
    server: AuthoritativeServer, host: str, port: int, conn: Connection, stop: EventType,
    lifetime: float,
) -> None:
    from sim.live import ServerEndpoint  # imported in the child: the parent does not need it

    endpoint = ServerEndpoint(server, (host, port))
    await endpoint.start()
    try:
        assert endpoint.udp is not None
        conn.send(("ready", endpoint.udp.get_extra_info("sockname")[1]))
        await _wait_stop(stop, lifetime)
        conn.send(("stats", dict(server.stats.counts)))
    finally:
        endpoint.close()


def leaf_main(
    server: AuthoritativeServer, cached: bool, host: str, port: int, conn: Connection,
    stop: EventType, lifetime: float,
) -> None:
    """Process entry point of the ToolDNS leaf server (optionally behind a packet cache)."""
    node = PacketCacheServer(server) if cached else server
    asyncio.run(_run_leaf(node, host, port, conn, stop, lifetime))  # type: ignore[arg-type]


@dataclass
class ServerProcess:
    """A server running in a child process, reachable at ``address``."""

    label: str
    proc: mp.process.BaseProcess
    conn: Connection
    stop: EventType
    address: tuple[str, int]

    def shutdown(self) -> dict[str, int]:
        """Stop the child, return the counters it reports (empty if it did not)."""
        self.stop.set()
        stats: dict[str, int] = {}
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline and self.conn.poll(0.1):
            kind, payload = self.conn.recv()
            if kind == "stats":
                stats = payload
                break
        self.proc.join(timeout=5.0)
        if self.proc.is_alive():
            self.proc.terminate()  # this very child, by its handle
            self.proc.join(timeout=2.0)
        return stats


def start_server(
    ctx: mp.context.BaseContext, label: str, target: object, args: tuple, host: str,
    lifetime: float,
) -> ServerProcess:
    """Spawn ``target(*args, host, [port,] conn, stop, lifetime)`` and wait until it is ready."""
    parent_conn, child_conn = ctx.Pipe()
    stop = ctx.Event()
    proc = ctx.Process(target=target, args=(*args, child_conn, stop, lifetime), name=label,
                       daemon=True)
    proc.start()
    if not parent_conn.poll(60.0):
        proc.terminate()
        raise RuntimeError(f"{label} server did not start within 60 s")
    kind, port = parent_conn.recv()
    if kind != "ready":
        raise RuntimeError(f"{label} server: unexpected message {kind!r}")
    return ServerProcess(label, proc, parent_conn, stop, (host, port))


# ------------------------------------------------------------------------ queries


@dataclass
class Workload:
    """The leaf under test and the query bytes of every kind."""

    namespace: Namespace
    leaf_address: str
    leaf_zone: str
    server: AuthoritativeServer
    queries: dict[str, list[bytes]]
    expected_answers: dict[str, int]


def build_workload(
    n_tools: int, branching: int, depth: int, seed: int, k: int, n_distinct: int
) -> Workload:
    ns = synthetic(n_tools=n_tools, branching=branching, depth=depth, seed=seed)
    hierarchy = build_hierarchy(ns)
    texts_of: dict[str, list[str]] = {}
    for q in ns.queries:
        zone = ns.tools[q.truth[0]].zone
        texts_of.setdefault(zone, []).append(q.text)
    leaves = [(addr, zone) for addr, zone in sorted(hierarchy.zone_of.items())
              if ns.zones[zone].tools]
    if not leaves:
        raise SystemExit("the namespace has no leaf zone with tools")
    address, zone = max(leaves, key=lambda az: len(texts_of.get(az[1], [])))
    rng = random.Random(seed)
    texts = texts_of.get(zone) or [ns.tools[ns.zones[zone].tools[0]].description]
    texts = texts[:n_distinct]
    queries: dict[str, list[bytes]] = {}

    semantic = []
    for text in texts:
        msg = DNSRecord.question(cursor_name("mcp", zone), "SRV")
        msg.header.id = rng.randrange(1 << 16)
        msg.add_ar(opt_record(Intent(text, k)))
        semantic.append(msg.pack())
    queries["semantic"] = semantic

    plain_a = []
    for tid in ns.zones[zone].tools[:n_distinct]:
        msg = DNSRecord.question(ns.tools[tid].target, "A")
        msg.header.id = rng.randrange(1 << 16)
        plain_a.append(msg.pack())
    queries["plain-a"] = plain_a

    srv = DNSRecord.question(expanded_name("mcp", zone), "SRV")
    srv.header.id = rng.randrange(1 << 16)
    queries["plain-srv"] = [srv.pack()]

    n_mcp = sum(ns.tools[t].service == "mcp" for t in ns.zones[zone].tools)
    expected = {"semantic": min(k, n_mcp) if k else n_mcp, "plain-a": 1, "plain-srv": -1}
    return Workload(ns, address, zone, hierarchy.servers[address], queries, expected)


def check_replies(
    target: tuple[str, int], queries: Sequence[bytes], echo: bool, expected_answers: int
) -> int:
    """Send each query once, validate its reply; return the largest reply size."""
    largest = 0
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.connect(target)
        sock.settimeout(2.0)
        for wire in queries:
            sock.send(wire)
            reply = sock.recv(65535)
            largest = max(largest, len(reply))
            if echo:
                if reply != wire:
                    raise RuntimeError("echo server returned different bytes")
                continue
            msg = DNSRecord.parse(reply)
            bad_id = msg.header.id != DNSRecord.parse(wire).header.id
            if bad_id or msg.header.rcode != RCODE.NOERROR:
                raise RuntimeError(f"bad reply from the leaf:\n{msg}")
            if expected_answers >= 0 and (msg.header.tc or len(msg.rr) != expected_answers):
                raise RuntimeError(f"expected {expected_answers} answers, got:\n{msg}")
            if expected_answers < 0 and not msg.header.tc:
                raise RuntimeError(f"expected a truncated answer, got:\n{msg}")
            if msg.rr and msg.rr[0].rtype not in (QTYPE.SRV, QTYPE.A):
                raise RuntimeError(f"unexpected answer type:\n{msg}")
    return largest


# ------------------------------------------------------------------------ load generator


@dataclass
class Measurement:
    replies: int
    elapsed: float
    timeouts: int
    gen_cpu: float  # CPU seconds the load generator (this process) used
    server_cpu: float | None  # CPU seconds the server process used (None: unknown)

    @property
    def qps(self) -> float:
        return self.replies / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def server_us_per_query(self) -> float | None:
        if self.server_cpu is None or not self.replies:
            return None
        return self.server_cpu / self.replies * 1e6


def process_cpu_seconds(pid: int) -> float | None:
    """User+system CPU seconds of ``pid`` from /proc (Linux); None where unavailable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def drive(
    target: tuple[str, int], queries: Sequence[bytes], window: int, duration: float,
    server_pid: int | None = None,
) -> Measurement:
    """Closed-loop load: ``window`` queries outstanding for ``duration`` s; count replies."""
    n = len(queries)
    cpu0 = time.process_time()
    srv0 = process_cpu_seconds(server_pid) if server_pid else None
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.connect(target)
        sock.settimeout(RECV_TIMEOUT)
        send, recv_into = sock.send, sock.recv_into
        buf = bytearray(65535)
        clock = time.perf_counter
        i = replies = timeouts = 0
        start = clock()
        deadline = start + duration
        for _ in range(window):
            send(queries[i % n])
            i += 1
        now = start
        while now < deadline:
            try:
                recv_into(buf)
            except TimeoutError:  # assume everything outstanding was lost: refill the window
                timeouts += 1
                for _ in range(window):
                    send(queries[i % n])
                    i += 1
                now = clock()
                continue
            replies += 1
            send(queries[i % n])
            i += 1
            now = clock()
    srv1 = process_cpu_seconds(server_pid) if server_pid else None
    server_cpu = srv1 - srv0 if srv0 is not None and srv1 is not None else None
    return Measurement(replies, now - start, timeouts, time.process_time() - cpu0, server_cpu)


# ------------------------------------------------------------------------ main


@dataclass
class Row:
    server: str
    kind: str
    window: int
    qps: float
    runs: list[float]
    query_bytes: int
    reply_bytes: int
    timeouts: int
    server_us: float | None  # server CPU µs per reply (median over runs)
    server_load: float | None  # server CPU seconds per wall second
    gen_load: float  # load generator CPU seconds per wall second
    ratio: float | None = None  # queries/s relative to the echo server at the same window
    cpu_ratio: float | None = None  # echo CPU µs/query divided by this server's


def machine_line() -> str:
    return (f"python {platform.python_version()} · {platform.system()} {platform.release()} · "
            f"{os.cpu_count()} CPUs · load avg {os.getloadavg()[0]:.2f}")


def format_table(rows: Sequence[Row]) -> str:
    head = ("| server | query kind | window | queries/s | ratio vs echo | vs reference echo "
            "| server CPU µs/query | CPU-cost ratio | server CPU | load-gen CPU | query B "
            "| reply B | timeouts |")
    lines = [head, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        ratio = f"{r.ratio:.2f}" if r.ratio is not None else "1.00"
        cpu_ratio = (f"{r.cpu_ratio:.2f}" if r.cpu_ratio is not None
                     else "1.00" if r.server == "echo" else "–")
        ref = REFERENCE_ECHO_QPS.get(r.window)
        vs_ref = f"{r.qps / ref:.2f}" if ref else "–"
        qps = " / ".join(f"{x:,.0f}" for x in r.runs) if len(r.runs) > 1 else f"{r.qps:,.0f}"
        if len(r.runs) > 1:
            qps = f"{r.qps:,.0f} ({qps})"
        us = f"{r.server_us:.1f}" if r.server_us is not None else "–"
        load = f"{r.server_load:.0%}" if r.server_load is not None else "–"
        lines.append(f"| {r.server} | {r.kind} | {r.window} | {qps} | {ratio} | {vs_ref} "
                     f"| {us} | {cpu_ratio} | {load} | {r.gen_load:.0%} | {r.query_bytes} "
                     f"| {r.reply_bytes} | {r.timeouts} |")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Queries/s of a live ToolDNS leaf server vs a plain asyncio UDP echo "
                    "server, same load generator, same query bytes.")
    p.add_argument("--duration", type=float, default=3.0,
                   help="seconds per measurement (default 3)")
    p.add_argument("--warmup", type=float, default=0.3,
                   help="unmeasured seconds of load before each measurement (default 0.3)")
    p.add_argument("--window", type=int, nargs="+", default=[1, 32],
                   help="outstanding queries; several values allowed (default: 1 32)")
    p.add_argument("--kinds", nargs="+", choices=KINDS, default=list(DEFAULT_KINDS),
                   help="query kinds (default: semantic plain-a)")
    p.add_argument("--repeat", type=int, default=1,
                   help="measurements per cell; the median is reported (default 1)")
    p.add_argument("--tools", type=int, default=2000, help="synthetic tools (default 2000)")
    p.add_argument("--branching", type=int, default=6, help="synthetic branching (default 6)")
    p.add_argument("--depth", type=int, default=2, help="synthetic depth (default 2)")
    p.add_argument("--seed", type=int, default=0, help="namespace seed (default 0)")
    p.add_argument("-k", type=int, default=3, help="K of the intent option (default 3)")
    p.add_argument("--distinct", type=int, default=8,
                   help="distinct queries per kind, sent round-robin (default 8)")
    p.add_argument("--port", type=int, default=0,
                   help="leaf server port (default 0: any free port)")
    p.add_argument("--echo-host", default="127.0.0.1", help="echo server address")
    p.add_argument("--what-if-cache", action="store_true",
                   help="also measure the leaf behind a packet cache (benchmark-only "
                        "what-if, not ToolDNS code; a third server process)")
    args = p.parse_args(argv)
    if args.duration <= 0 or args.duration > 120 or args.warmup < 0 or args.warmup > 30:
        p.error("--duration must be in (0, 120] and --warmup in [0, 30]")
    if any(w < 1 or w > 4096 for w in args.window) or not 1 <= args.repeat <= 20:
        p.error("--window must be in [1, 4096] and --repeat in [1, 20]")
    if not 0 <= args.k <= 255 or args.distinct < 1:
        p.error("-k must be in [0, 255] and --distinct positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    t0 = time.perf_counter()
    work = build_workload(args.tools, args.branching, args.depth, args.seed, args.k,
                          args.distinct)
    kinds: list[str] = list(dict.fromkeys(args.kinds))
    windows: list[int] = list(dict.fromkeys(args.window))
    n_meas = (3 if args.what_if_cache else 2) * len(kinds) * len(windows) * args.repeat
    lifetime = n_meas * (args.duration + args.warmup + 2 * RECV_TIMEOUT + 1.0) + 60.0
    print(f"# {machine_line()}")
    print(f"# namespace {work.namespace.origin}: {work.namespace.stats()['tools']} tools, "
          f"{len(work.namespace.leaves())} leaves; leaf under test {work.leaf_zone} "
          f"({len(work.server._zones[work.leaf_zone].data.tools)} tools) at "
          f"{work.leaf_address}")
    print(f"# {n_meas} measurements x ({args.duration:g} s + {args.warmup:g} s warm-up)")

    ctx = mp.get_context("spawn")
    procs: list[ServerProcess] = []
    try:
        echo = start_server(ctx, "echo", echo_main, (args.echo_host,), args.echo_host, lifetime)
        procs.append(echo)
        leaf = start_server(ctx, "leaf", leaf_main,
                            (work.server, False, work.leaf_address, args.port),
                            work.leaf_address, lifetime)
        procs.append(leaf)
        targets = [echo, leaf]
        if args.what_if_cache:
            cached = start_server(ctx, "leaf+pcache", leaf_main,
                                  (work.server, True, work.leaf_address, 0),
                                  work.leaf_address, lifetime)
            procs.append(cached)
            targets.append(cached)
        print(f"# echo at {echo.address[0]}:{echo.address[1]}, leaf at "
              f"{leaf.address[0]}:{leaf.address[1]} (setup {time.perf_counter() - t0:.1f} s)")
        reply_bytes: dict[tuple[str, str], int] = {}
        for kind in kinds:
            qs = work.queries[kind]
            for srv in targets:
                reply_bytes[srv.label, kind] = check_replies(
                    srv.address, qs, srv is echo, work.expected_answers[kind])
        rows: list[Row] = []
        for kind in kinds:
            qs = work.queries[kind]
            for window in windows:
                runs: dict[str, list[Measurement]] = {srv.label: [] for srv in targets}
                for _ in range(args.repeat):
                    for srv in targets:  # interleaved, so drift hits all alike
                        if args.warmup > 0:
                            drive(srv.address, qs, window, args.warmup)
                        runs[srv.label].append(drive(srv.address, qs, window, args.duration,
                                                     srv.proc.pid))
                cell = {}
                for label, ms in runs.items():
                    qps = statistics.median(m.qps for m in ms)
                    us = [u for m in ms if (u := m.server_us_per_query) is not None]
                    loads = [m.server_cpu / m.elapsed for m in ms if m.server_cpu is not None]
                    cell[label] = Row(label, kind, window, qps, [m.qps for m in ms],
                                      max(map(len, qs)), reply_bytes[label, kind],
                                      sum(m.timeouts for m in ms),
                                      statistics.median(us) if us else None,
                                      statistics.median(loads) if loads else None,
                                      statistics.median(m.gen_cpu / m.elapsed for m in ms))
                    print(f"  {label:11s} {kind:9s} window {window:4d}: {qps:10,.0f} q/s",
                          flush=True)
                echo_us = cell["echo"].server_us
                for label, row in cell.items():
                    if label != "echo":
                        row.ratio = row.qps / cell["echo"].qps
                        if echo_us is not None and row.server_us:
                            row.cpu_ratio = echo_us / row.server_us
                rows += list(cell.values())
    finally:
        stats = {p.label: p.shutdown() for p in procs}
    print()
    print(format_table(rows))
    print()
    leaf_stats = stats.get("leaf", {})
    print("# leaf server counters: " + ", ".join(f"{k}={v}" for k, v in sorted(
        leaf_stats.items()) if k != "tx_bytes"))
    print(f"# echo server datagrams: {stats.get('echo', {}).get('rx_udp', 0)}")
    print("# reference anchors (asyncio echo, 2 vCPU): "
          + ", ".join(f"window {w}: {q:,} q/s" for w, q in REFERENCE_ECHO_QPS.items()))
    if "leaf+pcache" in stats:
        print("# leaf+pcache counters (what-if): " + ", ".join(
            f"{k}={v}" for k, v in sorted(stats["leaf+pcache"].items()) if k != "tx_bytes"))
    worst = min(r.ratio for r in rows if r.server == "leaf" and r.ratio is not None)
    print(f"# worst leaf/echo ratio {worst:.2f} (goal >= 0.5); "
          f"total {time.perf_counter() - t0:.1f} s")
    if leaf_stats.get("internal_error"):
        print("# WARNING: the leaf server answered SERVFAIL on internal errors")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
