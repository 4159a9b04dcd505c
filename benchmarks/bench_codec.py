"""Per-message CPU cost of the ToolDNS codec and of AuthoritativeServer.handle (no sockets).

What it measures
    Microseconds per operation, in one process, for:

    * the intent option codec: ``Intent.encode`` / ``Intent.decode``, and building+packing a
      query that carries the option with dnslib (what the resolver and agents still do);
    * parsing a query on the server: the struct fast path ``nodes.dns.codec.parse_query`` (plain
      A and semantic query) against dnslib (``DNSRecord.parse`` + ``get_intent``) and the
      server's dnslib fallback ``view_from_dnslib``;
    * ``AuthoritativeServer.handle`` (wire in, wire out) with ``packet_cache=0``, so every
      call parses, answers and encodes: a semantic query at a non-leaf zone (referral to the
      top-K children: an intermediate zone and the TLD), a semantic query at a leaf (top-K
      SRV + A; one fixed intent, and a pool of distinct intents cycled), a plain A query for
      a tool target, and a plain fully expanded SRV query (whole RRset, truncated at 512
      bytes); plus one row with the default server answering from its packet cache;
    * the semantic leaf again with the name memos off (``nodes.dns.codec.NAME_MEMO_SIZE`` and
      ``AuthoritativeServer.NAME_MEMO`` set to 0): every query name is decoded and split
      afresh, as for a name never seen before;
    * pieces of the semantic leaf path: ``tokenize``, the numpy scoring API of the leaf's
      tool index (``_BM25Index.scores`` and ``top_k``, what the resolver's query mock uses),
      the server's ranking (``_BM25Index.rank``), ``_answer`` (everything between parse and
      encode) and ``_fit`` (encoding with OPT and size limit);
    * a breakdown of handle() into parse / ``_answer`` / ``_fit`` / rest for the semantic
      leaf, the semantic intermediate zone and the plain A query, each stage timed inline
      while the three run in sequence (stages timed alone run faster than in context).

    Baseline: dnslib building+packing and parsing a plain A query without any EDNS option
    (one client encode plus one server decode). Every row is printed with its ratio to that
    baseline, and the baseline's pack and parse halves are listed too.

How
    ``timeit.Timer.autorange`` picks an iteration count that runs at least ``--min-time``
    seconds; the timing is repeated ``--repeat`` times and the minimum is reported (the
    least disturbed run; on a shared machine the median is printed as well). The namespace
    is ``topologies.synthetic.synthetic`` (default 2000 tools, branching 6, depth 2) built
    into a hierarchy with ``sim.build.hierarchy.build_hierarchy``; the servers under test are
    fresh ``AuthoritativeServer`` objects over the same zone data, with ``packet_cache=0``
    (the cached row uses the server's default), and their lazy score indexes are warmed
    before timing.

    ``--profile N`` runs cProfile over each uncached handle() case instead and prints the N
    hottest functions by own time and by cumulative time.

Example::

    python benchmarks/bench_codec.py
    python benchmarks/bench_codec.py --repeat 7 --min-time 0.3 -k 0
    python benchmarks/bench_codec.py --profile 15
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import io
import itertools
import math
import platform
import pstats
import statistics
import sys
import time
import timeit
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

# Allow `python benchmarks/bench_codec.py` from a checkout without installation.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dnslib import QTYPE, DNSRecord

from nodes.authoritative.server import AuthoritativeServer
from nodes.dns import codec
from nodes.dns.codec import parse_query, view_from_dnslib
from nodes.dns.wire import (
    Intent,
    cursor_name,
    expanded_name,
    get_intent,
    opt_record,
)
from nodes.scoring import tokenize, top_k
from sim.build.hierarchy import Hierarchy, build_hierarchy
from topologies.namespace import TLD
from topologies.synthetic import synthetic

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


def _server_for(h: Hierarchy, zone: str, packet_cache: int | None = 0) -> AuthoritativeServer:
    """A fresh server for ``zone`` with the hierarchy's settings; ``None`` = default cache."""
    address = next(a for a, z in sorted(h.zone_of.items()) if z == zone)
    template = h.servers[address]
    extra = {} if packet_cache is None else {"packet_cache": packet_cache}
    return AuthoritativeServer(
        [template._zones[z].data for z in template.zones], scorer=template.scorer,
        option_code=template.option_code, max_udp_size=template.max_udp_size,
        name=template.name, reply_memo=None, **extra)  # every reply computed


def _name_info(server: AuthoritativeServer, view: codec.QueryView) -> object:
    """What handle() passes from its name memo to _answer and _fit."""
    return server._name_info.get(view.qname) or server._learn_name(view.qname)


class _NoCodecMemo:
    """``fn``, measured with parse_query's name memo off (a context manager around timing)."""

    def __init__(self, fn: Callable[[], object]) -> None:
        self.fn = fn
        self.saved: tuple[int, dict[bytes, str]] | None = None

    def __call__(self) -> object:
        return self.fn()

    def __enter__(self) -> _NoCodecMemo:
        self.saved = codec.NAME_MEMO_SIZE, codec._NAME_MEMO.copy()
        codec.NAME_MEMO_SIZE = 0
        codec._NAME_MEMO.clear()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.saved is not None
        codec.NAME_MEMO_SIZE = self.saved[0]
        codec._NAME_MEMO.update(self.saved[1])


def _semantic_query(zone: str, text: str, k: int, service: str = "mcp") -> bytes:
    msg = DNSRecord.question(cursor_name(service, zone), "SRV")
    msg.add_ar(opt_record(Intent(text, k)))
    return bytes(msg.pack())


def _check(server: AuthoritativeServer, wire: bytes, what: str, expect: Callable[[DNSRecord],
           bool]) -> None:
    if parse_query(wire) is None:
        raise SystemExit(f"{what}: the query does not take the struct fast path")
    reply = server.handle(wire, SRC, 0.0, "udp")
    if reply is None or not expect(DNSRecord.parse(reply)):
        raise SystemExit(f"unexpected reply for {what}:\n{reply and DNSRecord.parse(reply)}")


@dataclass
class Setup:
    cases: list[tuple[str, Callable[[], object], str]]
    breakdowns: list[tuple[str, AuthoritativeServer, bytes]]


def setup(args: argparse.Namespace) -> Setup:
    ns = synthetic(n_tools=args.tools, branching=args.branching, depth=args.depth,
                   seed=args.seed)
    h = build_hierarchy(ns)
    texts_of: dict[str, list[str]] = {}
    for q in ns.queries:
        texts_of.setdefault(ns.tools[q.truth[0]].zone, []).append(q.text)
    leaf = max((z for z in ns.leaves() if ns.zones[z].tools),
               key=lambda z: (len(texts_of.get(z, [])), z))
    texts = texts_of.get(leaf) or [ns.tools[ns.zones[leaf].tools[0]].name]
    text = texts[0]
    middle = ns.parent_of(leaf)
    k = args.k
    intent = Intent(text, k)
    option_data = intent.encode()
    tool = ns.tools[ns.zones[leaf].tools[0]]

    leaf_srv = _server_for(h, leaf)
    mid_srv = _server_for(h, middle)
    tld_srv = _server_for(h, TLD)
    cached_srv = _server_for(h, leaf, None)

    plain_a = bytes(DNSRecord.question(tool.target, "A").pack())
    sem_leaf = _semantic_query(leaf, text, k)
    sem_mid = _semantic_query(middle, text, k)
    sem_tld = _semantic_query(TLD, text, k)
    plain_srv = bytes(DNSRecord.question(expanded_name("mcp", leaf), "SRV").pack())
    # Distinct intents (a counter word outside the vocabulary appended), cycled.
    pool = [_semantic_query(leaf, f"{texts[i % len(texts)]} u{i}", k)
            for i in range(args.pool)]
    next_query = itertools.cycle(pool).__next__

    # Validate and warm the lazily built indexes.
    is_referral = lambda m: m.header.rcode == 0 and bool(m.auth) and not m.rr  # noqa: E731
    is_srv = lambda m: m.header.rcode == 0 and m.rr and m.rr[0].rtype == QTYPE.SRV  # noqa: E731
    _check(leaf_srv, sem_leaf, "semantic leaf", is_srv)
    _check(leaf_srv, pool[0], "semantic leaf (pool)", is_srv)
    _check(cached_srv, sem_leaf, "semantic leaf (cached)", is_srv)
    _check(mid_srv, sem_mid, "semantic intermediate", is_referral)
    _check(tld_srv, sem_tld, "semantic TLD", is_referral)
    _check(leaf_srv, plain_a, "plain A", lambda m: m.header.rcode == 0 and len(m.rr) == 1)
    _check(leaf_srv, plain_srv, "plain SRV", lambda m: m.header.rcode == 0 and m.header.tc)
    hits0 = cached_srv.stats.counts["packet_cache_hit"]
    cached_srv.handle(sem_leaf, SRC, 0.0, "udp")
    if cached_srv.stats.counts["packet_cache_hit"] != hits0 + 1:
        raise SystemExit("the default server did not answer from its packet cache")
    if leaf_srv.stats.counts["packet_cache_hit"]:
        raise SystemExit("packet_cache=0 server reported cache hits")

    # Pieces of the semantic leaf path.
    tools = leaf_srv._zones[leaf].tools[("mcp", "tcp")]
    index = tools.index
    scores = index.scores(text)
    view = parse_query(sem_leaf)
    assert view is not None
    info = _name_info(leaf_srv, view)
    _, reply = leaf_srv._answer(view, info)
    reply_len = len(leaf_srv._fit(view, reply, "udp", info))
    nomemo_srv = _server_for(h, leaf)
    nomemo_srv.NAME_MEMO = 0  # type: ignore[misc]
    _check(nomemo_srv, sem_leaf, "semantic leaf (no memo)", is_srv)

    n_children = len(ns.zones[middle].children)
    n_tld = len(ns.zones[TLD].children)
    uncached = "packet_cache=0"
    cases: list[tuple[str, Callable[[], object], str]] = [
        ("baseline: dnslib pack+parse plain A", lambda: DNSRecord.parse(
            DNSRecord.question(tool.target, "A").pack()), "1 client encode + 1 decode"),
        ("  dnslib pack plain A (build+pack)",
         lambda: DNSRecord.question(tool.target, "A").pack(), ""),
        ("  dnslib parse plain A", lambda: DNSRecord.parse(plain_a), f"{len(plain_a)} B"),
        ("Intent.encode", intent.encode, f"{len(option_data)} B option data"),
        ("Intent.decode", lambda: Intent.decode(option_data), ""),
        ("dnslib pack query with option (build+pack)", lambda: _semantic_query(leaf, text, k),
         f"{len(sem_leaf)} B; client side (resolver, agent)"),
        ("parse_query: plain A (struct)", lambda: parse_query(plain_a), "server fast path"),
        ("parse_query: semantic query (struct)", lambda: parse_query(sem_leaf),
         "server fast path"),
        ("dnslib parse semantic query + get_intent",
         lambda: get_intent(DNSRecord.parse(sem_leaf)), "for comparison"),
        ("view_from_dnslib: semantic query", lambda: view_from_dnslib(sem_leaf),
         "server fallback path"),
        ("handle: semantic non-leaf (intermediate)",
         lambda: mid_srv.handle(sem_mid, SRC, 0.0, "udp"),
         f"{uncached}; {n_children} children, K={k}"),
        ("handle: semantic non-leaf (TLD)",
         lambda: tld_srv.handle(sem_tld, SRC, 0.0, "udp"),
         f"{uncached}; {n_tld} children, K={k}"),
        ("handle: semantic leaf",
         lambda: leaf_srv.handle(sem_leaf, SRC, 0.0, "udp"),
         f"{uncached}; {len(tools.tools)} mcp tools, K={k}, {reply_len} B reply"),
        ("handle: semantic leaf, distinct intents",
         lambda: leaf_srv.handle(next_query(), SRC, 0.0, "udp"),
         f"{uncached}; pool of {len(pool):,} cycled"),
        ("handle: plain A", lambda: leaf_srv.handle(plain_a, SRC, 0.0, "udp"),
         f"{uncached}; tool target"),
        ("handle: plain SRV (expanded, TC)",
         lambda: leaf_srv.handle(plain_srv, SRC, 0.0, "udp"),
         f"{uncached}; whole RRset, truncated"),
        ("handle: semantic leaf, name memos off",
         _NoCodecMemo(lambda: nomemo_srv.handle(sem_leaf, SRC, 0.0, "udp")),
         f"{uncached}; every name decoded afresh"),
        ("handle: semantic leaf, packet-cache hit",
         lambda: cached_srv.handle(sem_leaf, SRC, 0.0, "udp"), "default packet_cache=4096"),
        ("  piece: tokenize intent", lambda: tokenize(text), f"{len(tokenize(text))} tokens"),
        ("  piece: BM25 scores (numpy API)", lambda: index.scores(text),
         "_BM25Index.scores (resolver query mock)"),
        ("  piece: top_k (numpy API)", lambda: top_k(scores, k), f"over {len(scores)} scores"),
        ("  piece: rank (server: score + top-K)", lambda: index.rank(text, k),
         f"pure Python, {len(scores)} tools"),
        ("  piece: _answer (no parse, no encode)", lambda: leaf_srv._answer(view, info),
         "decode, names, rank, _Reply"),
        ("  piece: _fit (encode + OPT)",
         lambda: leaf_srv._fit(view, reply, "udp", info), f"{reply_len} B"),
    ]
    breakdowns = [("semantic leaf", leaf_srv, sem_leaf),
                  ("semantic intermediate", mid_srv, sem_mid),
                  ("plain A", leaf_srv, plain_a)]
    return Setup(cases, breakdowns)


def run(args: argparse.Namespace) -> tuple[list[Result], list[str]]:
    s = setup(args)
    if args.profile:
        for label, fn, note in s.cases:
            if label.startswith("handle:") and "packet_cache=0" in note:
                with fn if isinstance(fn, _NoCodecMemo) else contextlib.nullcontext():
                    profile(label, fn, args.profile, args.profile_calls)
        return [], []
    results = []
    for label, fn, note in s.cases:
        with fn if isinstance(fn, _NoCodecMemo) else contextlib.nullcontext():
            best, median, loops = measure(fn, args.repeat, args.min_time)
        results.append(Result(label, best, median, loops, note))
        if args.verbose:
            print(f"  {label:45s} {best:9.2f} µs", file=sys.stderr, flush=True)
    return results, breakdown_table(s.breakdowns, args.breakdown_calls)


def breakdown_table(
    cases: Sequence[tuple[str, AuthoritativeServer, bytes]], calls: int
) -> list[str]:
    """handle() split into parse_query / _answer / _fit, each timed inline, in sequence.

    Timed alone in a tight loop (the "piece" rows) the stages run faster than inside
    handle(): caches and branch predictors then hold only that stage. Here every stage is
    timed with ``perf_counter`` around it while the three run back to back, as in handle(),
    and the median over ``calls`` iterations is reported; handle() itself is timed the same
    way. "rest" is handle() minus the three stages (counters, ``bytes(wire)``). The parse
    stage includes the server's name-memo lookup (``_name_info``), as in handle().
    """
    lines = ["| handle() case (packet_cache=0) | handle µs | parse_query + name memo µs "
             "| _answer µs | _fit µs | rest µs |", "|---|---:|---:|---:|---:|---:|"]
    clock = time.perf_counter
    t0 = clock()
    for _ in range(calls):
        clock()
    overhead = (clock() - t0) / calls
    for label, server, wire in cases:
        parse_t, answer_t, fit_t, handle_t = [], [], [], []
        gc_was_enabled = gc.isenabled()
        gc.disable()  # as timeit does for the other rows
        try:
            for _ in range(calls):
                t0 = clock()
                view = parse_query(wire)
                info = _name_info(server, view)  # type: ignore[arg-type]
                t1 = clock()
                _, reply = server._answer(view, info)  # type: ignore[arg-type]
                t2 = clock()
                server._fit(view, reply, "udp", info)  # type: ignore[arg-type]
                t3 = clock()
                parse_t.append(t1 - t0)
                answer_t.append(t2 - t1)
                fit_t.append(t3 - t2)
            for _ in range(calls):
                t0 = clock()
                server.handle(wire, SRC, 0.0, "udp")
                handle_t.append(clock() - t0)
        finally:
            if gc_was_enabled:
                gc.enable()
        parts = [(statistics.median(ts) - overhead) * 1e6
                 for ts in (handle_t, parse_t, answer_t, fit_t)]
        total, rest = parts[0], parts[0] - sum(parts[1:])
        cells = " | ".join(f"{p:.1f} ({p / total:.0%})" for p in parts[1:])
        lines.append(f"| {label} | {total:.1f} | {cells} | {rest:.1f} ({rest / total:.0%}) |")
    return lines


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
    p.add_argument("--pool", type=int, default=5000,
                   help="distinct intents for the 'distinct intents' handle() row (default 5000)")
    p.add_argument("--breakdown-calls", type=int, default=20_000,
                   help="iterations of the inline handle() breakdown (default 20000)")
    p.add_argument("-v", "--verbose", action="store_true", help="progress on stderr")
    p.add_argument("--profile", type=int, metavar="N", default=0,
                   help="instead of timing, cProfile every uncached handle() case and print its "
                        "top N functions by own and by cumulative time")
    p.add_argument("--profile-calls", type=int, default=5000,
                   help="handle() calls per profiled case (default 5000)")
    args = p.parse_args(argv)
    if not 1 <= args.repeat <= 50 or not 0 < args.min_time <= 5:
        p.error("--repeat must be in [1, 50] and --min-time in (0, 5]")
    if not 0 <= args.k <= 255:
        p.error("-k must be in [0, 255]")
    if not 1 <= args.pool <= 1_000_000 or args.profile_calls < 1 or args.breakdown_calls < 1:
        p.error("--pool must be in [1, 1000000], --profile-calls and --breakdown-calls "
                "positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    print(f"# python {platform.python_version()} · {platform.system()} {platform.release()} · "
          f"synthetic(n={args.tools}, b={args.branching}, d={args.depth}, seed={args.seed})"
          f" · K={args.k} · best of {args.repeat} × ≥{args.min_time:g} s")
    results, breakdown = run(args)
    if results:
        print(format_table(results))
        print()
        print("\n".join(breakdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
