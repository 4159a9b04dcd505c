"""Per-message CPU cost of the ToolDNS codec and of AuthoritativeServer.handle (no sockets).

What it measures
    Microseconds per operation, in one process, for:

    * the intent option codec: ``Intent.encode`` / ``Intent.decode``;
    * building and packing a query that carries the option (dnslib), and parsing it back
      (``DNSRecord.parse`` + ``get_intent``);
    * ``AuthoritativeServer.handle`` (wire in, wire out) for a semantic query at a non-leaf
      zone (referral to the top-K children: an intermediate zone and the TLD), a semantic
      query at a leaf (top-K SRV + A), a plain A query for a tool target, and a plain
      fully expanded SRV query (whole RRset, truncated at 512 bytes);
    * pieces of the semantic leaf path, to see where handle() spends its time: BM25
      scoring of the leaf's tool index, ``top_k``, and packing the finished reply;
    * a what-if: the cost of a packet-cache hit (dict lookup on the query bytes after the
      ID, ID spliced into the cached reply), i.e. what a cached answer would cost.

    Baseline: dnslib building+packing and parsing a plain A query without any EDNS option
    (one client encode plus one server decode). Every row is printed with its ratio to that
    baseline, and the baseline's pack and parse halves are listed too.

How
    ``timeit.Timer.autorange`` picks an iteration count that runs at least ``--min-time``
    seconds; the timing is repeated ``--repeat`` times and the minimum is reported (the
    least disturbed run; on a shared machine the median is printed as well). The namespace
    is ``topologies.namespace.synthetic`` (default 2000 tools, branching 6, depth 2) built
    into a hierarchy with ``sim.hierarchy.build_hierarchy``; servers' lazy score indexes are
    warmed before timing.

    ``--profile N`` runs cProfile over each handle() case instead and prints the N hottest
    functions by own time and by cumulative time.

Example::

    python benchmarks/bench_codec.py
    python benchmarks/bench_codec.py --repeat 7 --min-time 0.3 -k 0
    python benchmarks/bench_codec.py --profile 15
"""

from __future__ import annotations

import argparse
import cProfile
import io
import math
import platform
import pstats
import statistics
import sys
import timeit
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

# Allow `python benchmarks/bench_codec.py` from a checkout without installation.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dnslib import QTYPE, DNSRecord

from nodes.authoritative import AuthoritativeServer
from nodes.scoring import top_k
from nodes.wire import (
    Intent,
    cursor_name,
    expanded_name,
    get_intent,
    opt_record,
)
from sim.hierarchy import Hierarchy, build_hierarchy
from topologies.namespace import TLD, synthetic

SRC = ("127.0.0.1", 5353)


@dataclass
class Result:
    label: str
    best_us: float
    median_us: float
    loops: int
    note: str = ""


def measure(fn: Callable[[], object], repeat: int, min_time: float) -> tuple[float, float, int]:
    """(best µs/op, median µs/op, loops per repeat) for ``fn``."""
    timer = timeit.Timer(fn)
    loops, taken = timer.autorange()  # >= 0.2 s worth of loops
    if taken < min_time:
        loops = math.ceil(loops * min_time / max(taken, 1e-9))
    times = [t / loops * 1e6 for t in timer.repeat(repeat=repeat, number=loops)]
    return min(times), statistics.median(times), loops


def _server_for(h: Hierarchy, zone: str) -> AuthoritativeServer:
    address = next(a for a, z in sorted(h.zone_of.items()) if z == zone)
    return h.servers[address]


def _semantic_query(zone: str, text: str, k: int, service: str = "mcp") -> bytes:
    msg = DNSRecord.question(cursor_name(service, zone), "SRV")
    msg.add_ar(opt_record(Intent(text, k)))
    return bytes(msg.pack())


def _check(server: AuthoritativeServer, wire: bytes, what: str, expect: Callable[[DNSRecord],
           bool]) -> None:
    reply = server.handle(wire, SRC, 0.0, "udp")
    if reply is None or not expect(DNSRecord.parse(reply)):
        raise SystemExit(f"unexpected reply for {what}:\n{reply and DNSRecord.parse(reply)}")


def run(args: argparse.Namespace) -> list[Result]:
    ns = synthetic(n_tools=args.tools, branching=args.branching, depth=args.depth,
                   seed=args.seed)
    h = build_hierarchy(ns)
    texts_of: dict[str, list[str]] = {}
    for q in ns.queries:
        texts_of.setdefault(ns.tools[q.truth[0]].zone, []).append(q.text)
    leaf = max((z for z in ns.leaves() if ns.zones[z].tools),
               key=lambda z: (len(texts_of.get(z, [])), z))
    text = texts_of[leaf][0] if leaf in texts_of else ns.tools[ns.zones[leaf].tools[0]].name
    middle = ns.parent_of(leaf)
    k = args.k
    intent = Intent(text, k)
    option_data = intent.encode()
    tool = ns.tools[ns.zones[leaf].tools[0]]

    leaf_srv = _server_for(h, leaf)
    mid_srv = _server_for(h, middle)
    tld_srv = _server_for(h, TLD)

    plain_a = bytes(DNSRecord.question(tool.target, "A").pack())
    sem_leaf = _semantic_query(leaf, text, k)
    sem_mid = _semantic_query(middle, text, k)
    sem_tld = _semantic_query(TLD, text, k)
    plain_srv = bytes(DNSRecord.question(expanded_name("mcp", leaf), "SRV").pack())

    # Validate and warm the lazily built indexes.
    is_referral = lambda m: m.header.rcode == 0 and bool(m.auth) and not m.rr  # noqa: E731
    _check(leaf_srv, sem_leaf, "semantic leaf",
           lambda m: m.header.rcode == 0 and m.rr and m.rr[0].rtype == QTYPE.SRV)
    _check(mid_srv, sem_mid, "semantic intermediate", is_referral)
    _check(tld_srv, sem_tld, "semantic TLD", is_referral)
    _check(leaf_srv, plain_a, "plain A", lambda m: m.header.rcode == 0 and len(m.rr) == 1)
    _check(leaf_srv, plain_srv, "plain SRV", lambda m: m.header.rcode == 0)

    # Pieces of the semantic leaf path.
    state = leaf_srv._zones[leaf]
    tools, index = state.tool_index["mcp/tcp"]
    scores = index.scores(text)
    reply_msg = DNSRecord.parse(leaf_srv.handle(sem_leaf, SRC, 0.0, "udp") or b"")
    parsed_sem = DNSRecord.parse(sem_leaf)

    # What-if: packet cache keyed by the query bytes after the ID.
    cache = {sem_leaf[2:]: bytes(leaf_srv.handle(sem_leaf, SRC, 0.0, "udp") or b"")}

    def cache_hit() -> bytes:
        hit = cache[sem_leaf[2:]]
        return sem_leaf[:2] + hit[2:]

    n_children = len(ns.zones[middle].children)
    n_tld = len(ns.zones[TLD].children)
    cases: list[tuple[str, Callable[[], object], str]] = [
        ("baseline: pack+parse plain A", lambda: DNSRecord.parse(
            DNSRecord.question(tool.target, "A").pack()), "1 client encode + 1 decode"),
        ("  pack plain A (build+pack)", lambda: DNSRecord.question(tool.target, "A").pack(), ""),
        ("  parse plain A", lambda: DNSRecord.parse(plain_a), f"{len(plain_a)} B"),
        ("Intent.encode", intent.encode, f"{len(option_data)} B option data"),
        ("Intent.decode", lambda: Intent.decode(option_data), ""),
        ("pack query with option (build+pack)", lambda: _semantic_query(leaf, text, k),
         f"{len(sem_leaf)} B"),
        ("parse query with option + get_intent",
         lambda: get_intent(DNSRecord.parse(sem_leaf)), ""),
        ("handle: semantic non-leaf (intermediate)",
         lambda: mid_srv.handle(sem_mid, SRC, 0.0, "udp"), f"{n_children} children, K={k}"),
        ("handle: semantic non-leaf (TLD)",
         lambda: tld_srv.handle(sem_tld, SRC, 0.0, "udp"), f"{n_tld} children, K={k}"),
        ("handle: semantic leaf",
         lambda: leaf_srv.handle(sem_leaf, SRC, 0.0, "udp"), f"{len(tools)} mcp tools, K={k}"),
        ("handle: plain A", lambda: leaf_srv.handle(plain_a, SRC, 0.0, "udp"), "tool target"),
        ("handle: plain SRV (expanded, TC)",
         lambda: leaf_srv.handle(plain_srv, SRC, 0.0, "udp"), "whole RRset, truncated"),
        ("  piece: parse semantic query", lambda: DNSRecord.parse(sem_leaf), ""),
        ("  piece: BM25 scores (leaf tool index)", lambda: index.scores(text), ""),
        ("  piece: top_k", lambda: top_k(scores, k), f"over {len(scores)} scores"),
        ("  piece: pack semantic leaf reply", reply_msg.pack, f"{len(reply_msg.pack())} B"),
        ("  piece: _answer (no parse, no pack)", lambda: leaf_srv._answer(parsed_sem), ""),
        ("what-if: packet-cache hit", cache_hit, "dict get + ID splice"),
    ]
    if args.profile:
        for label, fn, _ in cases:
            if label.startswith("handle:"):
                profile(label, fn, args.profile, args.profile_calls)
        return []
    results = []
    for label, fn, note in cases:
        best, median, loops = measure(fn, args.repeat, args.min_time)
        results.append(Result(label, best, median, loops, note))
        if args.verbose:
            print(f"  {label:45s} {best:9.2f} µs", file=sys.stderr, flush=True)
    return results


def profile(label: str, fn: Callable[[], object], top: int, calls: int) -> None:
    """cProfile ``calls`` invocations of ``fn``; print the top functions by own and total time."""
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out).strip_dirs()
    print(f"\n## {label} — cProfile, {calls} calls (profiler overhead inflates absolute times)")
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    print("\n".join(line for line in out.getvalue().splitlines()
                    if line.strip() and not line.lstrip().startswith(("Ordered by", "List red"))))


def format_table(results: Sequence[Result]) -> str:
    base = results[0].best_us
    lines = ["| operation | µs/op (best) | µs/op (median) | ratio vs baseline | ops/s (best) "
             "| note |", "|---|---:|---:|---:|---:|---|"]
    for r in results:
        label = "↳ " + r.label.strip() if r.label.startswith("  ") else r.label
        lines.append(f"| {label} | {r.best_us:.2f} | {r.median_us:.2f} | {r.best_us / base:.2f} "
                     f"| {1e6 / r.best_us:,.0f} | {r.note} |")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="µs per operation of the ToolDNS codec and AuthoritativeServer.handle, "
                    "with dnslib pack+parse of a plain A query as the baseline.")
    p.add_argument("--repeat", type=int, default=5, help="timing repeats (default 5)")
    p.add_argument("--min-time", type=float, default=0.2,
                   help="minimum seconds per repeat (default 0.2)")
    p.add_argument("--tools", type=int, default=2000, help="synthetic tools (default 2000)")
    p.add_argument("--branching", type=int, default=6, help="synthetic branching (default 6)")
    p.add_argument("--depth", type=int, default=2, help="synthetic depth (default 2)")
    p.add_argument("--seed", type=int, default=0, help="namespace seed (default 0)")
    p.add_argument("-k", type=int, default=3, help="K of the intent option (default 3)")
    p.add_argument("-v", "--verbose", action="store_true", help="progress on stderr")
    p.add_argument("--profile", type=int, metavar="N", default=0,
                   help="instead of timing, cProfile every handle() case and print its top N "
                        "functions by own and by cumulative time")
    p.add_argument("--profile-calls", type=int, default=2000,
                   help="handle() calls per profiled case (default 2000)")
    args = p.parse_args(argv)
    if not 1 <= args.repeat <= 50 or not 0 < args.min_time <= 5:
        p.error("--repeat must be in [1, 50] and --min-time in (0, 5]")
    if not 0 <= args.k <= 255:
        p.error("-k must be in [0, 255]")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    print(f"# python {platform.python_version()} · {platform.system()} {platform.release()} · "
          f"synthetic(n={args.tools}, b={args.branching}, d={args.depth}, seed={args.seed})"
          f" · K={args.k} · best of {args.repeat} × ≥{args.min_time:g} s")
    results = run(args)
    if results:
        print(format_table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
