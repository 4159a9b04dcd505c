"""Live UDP throughput of one ToolDNS leaf server against a plain asyncio UDP echo server.

What it measures
    Replies per second that (a) a ToolDNS leaf authoritative server, run exactly as the live
    engine runs it (:class:`sim.sockets.server.ServerEndpoint`, asyncio, UDP), and (b) a
    minimal asyncio
    ``DatagramProtocol`` that sends every datagram straight back can sustain, driven by the
    same load generator with the same query bytes. The ratio leaf/echo at the same window is
    the figure of merit: it says how much of the cost of a plain Python asyncio UDP server the
    ToolDNS message handling adds (goal: ratio >= 0.5).

    The leaf is measured in two configurations, each its own server process:

    * ``leaf (no packet cache)`` — ``AuthoritativeServer(..., packet_cache=0)``: every query
      goes through parsing, scoring and encoding;
    * ``leaf (packet cache)`` — the default server, whose bounded packet cache (keyed on the
      query bytes after the ID) answers repeated queries.

How
    * Build a synthetic namespace (``topologies.synthetic.synthetic``) and its hierarchy
      (``sim.build.hierarchy.build_hierarchy``); pick the leaf zone with the most generated queries
      and serve its zone data from two fresh servers (packet cache off / default).
    * Start the echo server and the leaf servers, each in its own process (multiprocessing,
      ``spawn``), on 127.0.0.0/8; each reports its UDP port back over a pipe, answers counter
      requests on it, and stops on an event or after a hard lifetime, whichever comes first.
    * The load generator (this process) sends from a UDP socket on 127.0.0.1, keeps
      ``window`` queries outstanding (a reply releases the next query; a 0.2 s silence
      counts as loss and refills the window) for ``--duration`` seconds after a short
      warm-up, and counts replies received. It walks each query pool with one cursor per
      server and kind that carries over from check to warm-up to measurement, so a pool
      larger than the packet cache is never replayed from its start.
    * Query kinds against the leaf (and the very same bytes against the echo server):
        - ``semantic-unique``: cursor name ``_mcp._tcp._<leaf>`` SRV with the ToolDNS EDNS0
          intent option (K=3); every query carries a distinct intent — the leaf's intent
          texts with a counter word appended (``… u17``; the word is not in the leaf's
          vocabulary, so it does not change the scores) — in a pool of ``--unique-pool``
          (default 20,000) pre-packed queries, cycled. The pool is larger than the packet
          cache (4096 entries, first in first out), so even the cached leaf misses: the
          packet-cache hits reported for this kind should be ~0;
        - ``semantic``: the same shape with ``--distinct`` (default 8) intents, round-robin:
          the cached leaf answers almost every query from its cache;
        - ``plain-a``: A query for a tool target of the leaf, no EDNS, ``--distinct`` names;
        - ``plain-srv`` (optional): fully expanded ``_mcp._tcp.<leaf>`` SRV without the
          option — the whole RRset does not fit 512 bytes, so the answer is TC.
    * Before measuring, the first queries of every pool (up to 8) are sent once and their
      replies checked (NOERROR, expected answer count; byte-identical for the echo server).
    * Besides wall-clock queries/s, the CPU time of the server process (Linux
      ``/proc/<pid>/stat``) and of the load generator are sampled around each measurement:
      "server CPU µs/query" and the "CPU-cost ratio" (echo µs / leaf µs) are much less
      sensitive to a noisy shared machine than queries/s, and "load-gen CPU" near 100 %
      would say the generator, not the server, was the bottleneck. The leaf's counters are
      read before and after each measurement: "pcache hits" is the number of packet-cache
      hits among the queries the leaf received in that measurement.

Everything stays on loopback and every loop is bounded in time.

Example::

    python benchmarks/bench_server_qps.py                 # windows 1 and 32, 2 s each, ~50 s
    python benchmarks/bench_server_qps.py --window 8 --duration 5 --kinds semantic-unique
    python benchmarks/bench_server_qps.py --leaves no-cache --kinds plain-srv plain-a
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event as EventType
from pathlib import Path

# Allow `python benchmarks/bench_server_qps.py` from a checkout without installation.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dnslib import QTYPE, RCODE, DNSRecord

from nodes.authoritative.server import AuthoritativeServer
from nodes.dns.wire import Intent, cursor_name, expanded_name, opt_record
from sim.build.hierarchy import build_hierarchy
from topologies.namespace import Namespace
from topologies.synthetic import synthetic

#: Reference anchors (plain Python asyncio UDP echo on 2 vCPU), requests/s by window.
REFERENCE_ECHO_QPS = {1: 12_000, 32: 29_000}
KINDS = ("semantic-unique", "semantic", "plain-a", "plain-srv")
DEFAULT_KINDS = ("semantic-unique", "semantic", "plain-a")
#: Leaf configurations: command-line name -> (table label, packet_cache argument or None
#: for the server's default).
LEAVES: dict[str, tuple[str, int | None]] = {
    "no-cache": ("leaf (no packet cache)", 0),
    "cache": ("leaf (packet cache)", None),
}
GOAL = 0.5  # leaf/echo queries/s at the same window
CHECKED = 8  # queries per pool whose replies are validated before measuring
RECV_TIMEOUT = 0.2  # seconds of silence after which outstanding queries count as lost
STOP_POLL = 0.02  # how often a server process checks its stop event and its pipe


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


async def _serve_pipe(
    conn: Connection, stop: EventType, lifetime: float, counters: Callable[[], dict[str, int]]
) -> None:
    """Answer "stats" requests until ``stop`` is set or ``lifetime`` s have passed."""
    deadline = time.monotonic() + lifetime
    while not stop.is_set() and time.monotonic() < deadline:
        while conn.poll(0):
            if conn.recv() == "stats":
                conn.send(("stats", counters()))
        await asyncio.sleep(STOP_POLL)
    conn.send(("final", counters()))


async def _run_echo(host: str, conn: Connection, stop: EventType, lifetime: float) -> None:
    loop = asyncio.get_running_loop()
    transport, proto = await loop.create_datagram_endpoint(_Echo, local_addr=(host, 0))
    try:
        conn.send(("ready", transport.get_extra_info("sockname")[1]))
        await _serve_pipe(conn, stop, lifetime, lambda: {"rx_udp": proto.count})
    finally:
        transport.close()


def echo_main(host: str, conn: Connection, stop: EventType, lifetime: float) -> None:
    """Process entry point of the echo server."""
    asyncio.run(_run_echo(host, conn, stop, lifetime))


async def _run_leaf(
    server: AuthoritativeServer, host: str, port: int, conn: Connection, stop: EventType,
    lifetime: float,
) -> None:
    from sim.sockets.server import ServerEndpoint  # in the child: the parent does not need it

    endpoint = ServerEndpoint(server, (host, port))
    await endpoint.start()
    try:
        assert endpoint.udp is not None
        conn.send(("ready", endpoint.udp.get_extra_info("sockname")[1]))
        await _serve_pipe(conn, stop, lifetime, lambda: dict(server.stats.counts))
    finally:
        endpoint.close()


def leaf_main(
    server: AuthoritativeServer, host: str, port: int, conn: Connection, stop: EventType,
    lifetime: float,
) -> None:
    """Process entry point of the ToolDNS leaf server."""
    asyncio.run(_run_leaf(server, host, port, conn, stop, lifetime))


@dataclass
class ServerProcess:
    """A server running in a child process, reachable at ``address``."""

    label: str
    proc: mp.process.BaseProcess
    conn: Connection
    stop: EventType
    address: tuple[str, int]
    echo: bool = False

    def counters(self) -> dict[str, int]:
        """The child's counters right now (empty if it does not answer within 5 s)."""
        self.conn.send("stats")
        if self.conn.poll(5.0):
            kind, payload = self.conn.recv()
            if kind == "stats":
                return payload
        return {}

    def shutdown(self) -> dict[str, int]:
        """Stop the child, return the counters it reports (empty if it did not)."""
        self.stop.set()
        stats: dict[str, int] = {}
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline and self.conn.poll(0.5):
            kind, payload = self.conn.recv()
            if kind == "final":
                stats = payload
                break
        self.proc.join(timeout=5.0)
        if self.proc.is_alive():
            self.proc.terminate()  # this very child, by its handle
            self.proc.join(timeout=2.0)
        return stats


def start_server(
    ctx: mp.context.BaseContext, label: str, target: object, args: tuple, host: str,
    lifetime: float, echo: bool = False,
) -> ServerProcess:
    """Spawn ``target(*args, conn, stop, lifetime)`` and wait until it is ready."""
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
    return ServerProcess(label, proc, parent_conn, stop, (host, port), echo)


# ------------------------------------------------------------------------ queries


@dataclass
class Workload:
    """The leaf under test and the query bytes of every kind."""

    namespace: Namespace
    leaf_address: str
    leaf_zone: str
    server: AuthoritativeServer  # as built by the hierarchy (default packet cache)
    queries: dict[str, list[bytes]]
    expected_answers: dict[str, int]


def leaf_server(template: AuthoritativeServer, packet_cache: int | None) -> AuthoritativeServer:
    """A fresh server with ``template``'s zones and settings; ``None`` = default cache."""
    extra = {} if packet_cache is None else {"packet_cache": packet_cache}
    return AuthoritativeServer(
        [template._zones[z].data for z in template.zones], scorer=template.scorer,
        option_code=template.option_code, max_udp_size=template.max_udp_size,
        name=template.name, reply_memo=None, **extra)  # every reply computed


def _semantic_query(zone: str, text: str, k: int, qid: int) -> bytes:
    msg = DNSRecord.question(cursor_name("mcp", zone), "SRV")
    msg.header.id = qid
    msg.add_ar(opt_record(Intent(text, k)))
    return bytes(msg.pack())


def build_workload(
    n_tools: int, branching: int, depth: int, seed: int, k: int, n_distinct: int,
    n_unique: int,
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
    all_texts = texts_of.get(zone) or [ns.tools[ns.zones[zone].tools[0]].description]
    queries: dict[str, list[bytes]] = {}

    queries["semantic-unique"] = [
        _semantic_query(zone, f"{all_texts[i % len(all_texts)]} u{i}", k,
                        rng.randrange(1 << 16))
        for i in range(n_unique)]
    queries["semantic"] = [_semantic_query(zone, text, k, rng.randrange(1 << 16))
                           for text in all_texts[:n_distinct]]

    plain_a = []
    for tid in ns.zones[zone].tools[:n_distinct]:
        msg = DNSRecord.question(ns.tools[tid].target, "A")
        msg.header.id = rng.randrange(1 << 16)
        plain_a.append(bytes(msg.pack()))
    queries["plain-a"] = plain_a

    srv = DNSRecord.question(expanded_name("mcp", zone), "SRV")
    srv.header.id = rng.randrange(1 << 16)
    queries["plain-srv"] = [bytes(srv.pack())]

    n_mcp = sum(ns.tools[t].service == "mcp" for t in ns.zones[zone].tools)
    n_sem = min(k, n_mcp) if k else n_mcp
    expected = {"semantic-unique": n_sem, "semantic": n_sem, "plain-a": 1, "plain-srv": -1}
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
    sent: int
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
    server_pid: int | None = None, start_at: int = 0,
) -> Measurement:
    """Closed-loop load: ``window`` queries outstanding for ``duration`` s; count replies.

    Queries are taken round-robin from ``queries`` starting at index ``start_at``.
    """
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
        i = start_at
        replies = timeouts = 0
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
    return Measurement(replies, i - start_at, now - start, timeouts,
                       time.process_time() - cpu0, server_cpu)


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
    hits: int | None = None  # packet-cache hits during the measurements (leaf only)
    received: int | None = None  # queries the leaf counted during the measurements
    ratio: float | None = None  # queries/s relative to the echo server at the same window
    cpu_ratio: float | None = None  # echo CPU µs/query divided by this server's


def machine_line() -> str:
    return (f"python {platform.python_version()} · {platform.system()} {platform.release()} · "
            f"{os.cpu_count()} CPUs · load avg {os.getloadavg()[0]:.2f}")


def format_table(rows: Sequence[Row]) -> str:
    head = ("| server | query kind | window | queries/s | ratio vs echo | vs reference echo "
            "| server CPU µs/query | CPU-cost ratio | server CPU | load-gen CPU | query B "
            "| reply B | pcache hits / queries | timeouts |")
    lines = [head, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        ratio = f"**{r.ratio:.2f}**" if r.ratio is not None else "1.00"
        cpu_ratio = (f"{r.cpu_ratio:.2f}" if r.cpu_ratio is not None
                     else "1.00" if r.server == "echo" else "–")
        ref = REFERENCE_ECHO_QPS.get(r.window)
        vs_ref = f"{r.qps / ref:.2f}" if ref else "–"
        qps = " / ".join(f"{x:,.0f}" for x in r.runs) if len(r.runs) > 1 else f"{r.qps:,.0f}"
        if len(r.runs) > 1:
            qps = f"{r.qps:,.0f} ({qps})"
        us = f"{r.server_us:.1f}" if r.server_us is not None else "–"
        load = f"{r.server_load:.0%}" if r.server_load is not None else "–"
        hits = (f"{r.hits:,} / {r.received:,}" if r.hits is not None and r.received is not None
                else "–")
        lines.append(f"| {r.server} | {r.kind} | {r.window} | {qps} | {ratio} | {vs_ref} "
                     f"| {us} | {cpu_ratio} | {load} | {r.gen_load:.0%} | {r.query_bytes} "
                     f"| {r.reply_bytes} | {hits} | {r.timeouts} |")
    return "\n".join(lines)


def goal_summary(rows: Sequence[Row]) -> list[str]:
    """One line per (leaf configuration, kind): its ratios and whether it meets the goal."""
    cells: dict[tuple[str, str], list[Row]] = {}
    for r in rows:
        if r.ratio is not None:
            cells.setdefault((r.server, r.kind), []).append(r)
    lines = [f"# goal: leaf/echo queries/s >= {GOAL} at the same window"]
    meets: dict[str, list[str]] = {}
    misses: dict[str, list[str]] = {}
    for (server, kind), rs in cells.items():
        ratios = ", ".join(f"window {r.window}: {r.ratio:.2f}" for r in rs)
        ok = [r.ratio is not None and r.ratio >= GOAL for r in rs]
        verdict = ("MEETS the goal" if all(ok) else "does NOT meet the goal" if not any(ok)
                   else "meets the goal only at some windows")
        lines.append(f"#   {server:22s} {kind:15s} {ratios:34s} -> {verdict}")
        (meets if all(ok) else misses).setdefault(server, []).append(kind)
    for server in dict.fromkeys(r.server for r in rows if r.ratio is not None):
        good, bad = meets.get(server, []), misses.get(server, [])
        lines.append(f"# {server}: reaches ratio >= {GOAL} on "
                     f"{', '.join(good) if good else 'nothing'}; below on "
                     f"{', '.join(bad) if bad else 'nothing'}")
    return lines


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Queries/s of a live ToolDNS leaf server (packet cache off, and on) vs "
                    "a plain asyncio UDP echo server, same load generator, same query bytes.")
    p.add_argument("--duration", type=float, default=2.0,
                   help="seconds per measurement (default 2)")
    p.add_argument("--warmup", type=float, default=0.3,
                   help="unmeasured seconds of load before each measurement (default 0.3)")
    p.add_argument("--window", type=int, nargs="+", default=[1, 32],
                   help="outstanding queries; several values allowed (default: 1 32)")
    p.add_argument("--kinds", nargs="+", choices=KINDS, default=list(DEFAULT_KINDS),
                   help="query kinds (default: " + " ".join(DEFAULT_KINDS) + ")")
    p.add_argument("--leaves", nargs="+", choices=list(LEAVES), default=list(LEAVES),
                   help="leaf configurations: no-cache = packet_cache=0, cache = the "
                        "server's default packet cache (default: both)")
    p.add_argument("--repeat", type=int, default=1,
                   help="measurements per cell; the median is reported (default 1)")
    p.add_argument("--tools", type=int, default=2000, help="synthetic tools (default 2000)")
    p.add_argument("--branching", type=int, default=6, help="synthetic branching (default 6)")
    p.add_argument("--depth", type=int, default=2, help="synthetic depth (default 2)")
    p.add_argument("--seed", type=int, default=0, help="namespace seed (default 0)")
    p.add_argument("-k", type=int, default=3, help="K of the intent option (default 3)")
    p.add_argument("--distinct", type=int, default=8,
                   help="distinct queries of kinds semantic and plain-a, sent round-robin "
                        "(default 8)")
    p.add_argument("--unique-pool", type=int, default=20_000,
                   help="distinct pre-packed queries of kind semantic-unique, cycled; keep it "
                        "well above the packet cache size (default 20000)")
    p.add_argument("--port", type=int, default=0,
                   help="port of the first leaf server (default 0: any free port; "
                        "the second leaf always takes a free port)")
    p.add_argument("--echo-host", default="127.0.0.1", help="echo server address")
    args = p.parse_args(argv)
    if args.duration <= 0 or args.duration > 120 or args.warmup < 0 or args.warmup > 30:
        p.error("--duration must be in (0, 120] and --warmup in [0, 30]")
    if any(w < 1 or w > 4096 for w in args.window) or not 1 <= args.repeat <= 20:
        p.error("--window must be in [1, 4096] and --repeat in [1, 20]")
    if not 0 <= args.k <= 255 or args.distinct < 1:
        p.error("-k must be in [0, 255] and --distinct positive")
    if not 1 <= args.unique_pool <= 1_000_000:
        p.error("--unique-pool must be in [1, 1000000]")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    t0 = time.perf_counter()
    kinds: list[str] = list(dict.fromkeys(args.kinds))
    windows: list[int] = list(dict.fromkeys(args.window))
    leaf_names: list[str] = list(dict.fromkeys(args.leaves))
    work = build_workload(args.tools, args.branching, args.depth, args.seed, args.k,
                          args.distinct, args.unique_pool if "semantic-unique" in kinds else 0)
    n_meas = (1 + len(leaf_names)) * len(kinds) * len(windows) * args.repeat
    lifetime = n_meas * (args.duration + args.warmup + 2 * RECV_TIMEOUT + 1.0) + 60.0
    print(f"# {machine_line()}")
    print(f"# namespace {work.namespace.origin}: {work.namespace.stats()['tools']} tools, "
          f"{len(work.namespace.leaves())} leaves; leaf under test {work.leaf_zone} "
          f"({len(work.server._zones[work.leaf_zone].data.tools)} tools) at "
          f"{work.leaf_address}; packet cache of the cached leaf: "
          f"{work.server.packet_cache_size} entries")
    pools = ", ".join(f"{k} {len(work.queries[k]):,}" for k in kinds)
    print(f"# distinct queries per kind: {pools}")
    print(f"# {n_meas} measurements x ({args.duration:g} s + {args.warmup:g} s warm-up)")
    if "semantic-unique" in kinds and args.unique_pool <= work.server.packet_cache_size:
        print("# WARNING: --unique-pool is not larger than the packet cache: the cached leaf "
              "will hit on semantic-unique")

    ctx = mp.get_context("spawn")
    procs: list[ServerProcess] = []
    rows: list[Row] = []
    try:
        echo = start_server(ctx, "echo", echo_main, (args.echo_host,), args.echo_host,
                            lifetime, echo=True)
        procs.append(echo)
        for i, name in enumerate(leaf_names):
            label, cache = LEAVES[name]
            port = args.port if i == 0 else 0
            procs.append(start_server(ctx, label, leaf_main,
                                      (leaf_server(work.server, cache), work.leaf_address, port),
                                      work.leaf_address, lifetime))
        print("# " + ", ".join(f"{p.label} at {p.address[0]}:{p.address[1]}" for p in procs)
              + f" (setup {time.perf_counter() - t0:.1f} s)")
        reply_bytes: dict[tuple[str, str], int] = {}
        cursor: dict[tuple[str, str], int] = {}
        for kind in kinds:
            qs = work.queries[kind]
            for srv in procs:
                reply_bytes[srv.label, kind] = check_replies(
                    srv.address, qs[:CHECKED], srv.echo, work.expected_answers[kind])
                cursor[srv.label, kind] = min(CHECKED, len(qs)) % len(qs)
        for kind in kinds:
            qs = work.queries[kind]
            for window in windows:
                runs: dict[str, list[Measurement]] = {srv.label: [] for srv in procs}
                hits: dict[str, int] = dict.fromkeys(runs, 0)
                received: dict[str, int] = dict.fromkeys(runs, 0)
                for _ in range(args.repeat):
                    for srv in procs:  # interleaved, so drift hits all alike
                        key = srv.label, kind
                        if args.warmup > 0:
                            m = drive(srv.address, qs, window, args.warmup,
                                      start_at=cursor[key])
                            cursor[key] = (cursor[key] + m.sent) % len(qs)
                        before = {} if srv.echo else srv.counters()
                        m = drive(srv.address, qs, window, args.duration, srv.proc.pid,
                                  start_at=cursor[key])
                        cursor[key] = (cursor[key] + m.sent) % len(qs)
                        runs[srv.label].append(m)
                        if not srv.echo:
                            after = srv.counters()
                            hits[srv.label] += (after.get("packet_cache_hit", 0)
                                                - before.get("packet_cache_hit", 0))
                            received[srv.label] += (after.get("rx_udp", 0)
                                                    - before.get("rx_udp", 0))
                cell = {}
                for srv in procs:
                    label, ms = srv.label, runs[srv.label]
                    qps = statistics.median(m.qps for m in ms)
                    us = [u for m in ms if (u := m.server_us_per_query) is not None]
                    loads = [m.server_cpu / m.elapsed for m in ms if m.server_cpu is not None]
                    cell[label] = Row(label, kind, window, qps, [m.qps for m in ms],
                                      max(map(len, qs)), reply_bytes[label, kind],
                                      sum(m.timeouts for m in ms),
                                      statistics.median(us) if us else None,
                                      statistics.median(loads) if loads else None,
                                      statistics.median(m.gen_cpu / m.elapsed for m in ms),
                                      None if srv.echo else hits[label],
                                      None if srv.echo else received[label])
                    extra = "" if srv.echo else f"  (pcache hits {hits[label]:,})"
                    print(f"  {label:22s} {kind:15s} window {window:4d}: {qps:10,.0f} q/s"
                          f"{extra}", flush=True)
                echo_row = cell[echo.label]
                for label, row in cell.items():
                    if label != echo.label:
                        row.ratio = row.qps / echo_row.qps if echo_row.qps else None
                        if echo_row.server_us is not None and row.server_us:
                            row.cpu_ratio = echo_row.server_us / row.server_us
                rows += list(cell.values())
    finally:
        stats = {p.label: p.shutdown() for p in procs}
    print()
    print(format_table(rows))
    print()
    failed = False
    for name in leaf_names:
        label = LEAVES[name][0]
        counts = stats.get(label, {})
        print(f"# {label} counters at the end: " + ", ".join(
            f"{k}={v}" for k, v in sorted(counts.items()) if k != "tx_bytes"))
        failed |= bool(counts.get("internal_error"))
    print(f"# echo server datagrams: {stats.get('echo', {}).get('rx_udp', 0)}")
    print("# reference anchors (asyncio echo, 2 vCPU): "
          + ", ".join(f"window {w}: {q:,} q/s" for w, q in REFERENCE_ECHO_QPS.items()))
    for line in goal_summary(rows):
        print(line)
    print(f"# total {time.perf_counter() - t0:.1f} s")
    if failed:
        print("# WARNING: a leaf server answered SERVFAIL on internal errors")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
