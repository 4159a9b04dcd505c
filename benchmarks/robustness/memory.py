"""Distinct intents through the served resolver: the serving process's RSS growth against
the resolver's cache bound."""

from __future__ import annotations

import argparse
import socket
import time

from benchmarks.robustness.serving import DnsServer, stub_query
from benchmarks.robustness.table import table


def _flood(addr: tuple[str, int], intents: list[str], window: int, timeout: float = 10.0
           ) -> tuple[int, float]:
    """Ask the resolver one stub query per intent, ``window`` at a time over UDP; returns
    (answered, seconds)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.settimeout(0.05)
    outstanding: dict[int, float] = {}
    answered, i, t0 = 0, 0, time.perf_counter()
    next_id = 1
    while i < len(intents) or outstanding:
        while i < len(intents) and len(outstanding) < window:
            qid = next_id
            next_id = next_id % 65535 + 1
            sock.sendto(stub_query(intents[i], qid=qid), addr)
            outstanding[qid] = time.perf_counter()
            i += 1
        try:
            data, _ = sock.recvfrom(65535)
            if outstanding.pop(int.from_bytes(data[:2], "big"), None) is not None:
                answered += 1
        except TimeoutError:
            now = time.perf_counter()
            for qid in [q for q, t in outstanding.items() if now - t > timeout]:
                del outstanding[qid]
    sock.close()
    return answered, time.perf_counter() - t0


def run(args: argparse.Namespace) -> dict:
    """``--intents`` distinct intents through the resolver with its cache bounded at
    ``--cache-bytes``: the serving process's RSS growth after a warm-up, against the bound."""
    words = ["weather", "forecast", "maps", "route", "tax", "invoice", "email", "calendar",
             "stock", "price", "image", "resize", "translate", "search", "music", "news"]
    import random

    rng = random.Random(args.seed)

    def intents(n: int, start: int) -> list[str]:
        return [" ".join(rng.sample(words, 3)) + f" case {start + j}" for j in range(n)]

    rows = []
    for bound in args.bounds:
        # the servers share the resolver's process here: without packet caches of their own,
        # what grows is the resolver (and the process's fixed-size parse memos)
        srv = DnsServer(args, cache_bytes=bound, server_cache_bytes=0)
        try:
            _flood(srv.resolver, intents(args.warmup, 0), args.window)
            before = srv.counters()
            samples = []
            done = 0
            answered, seconds = 0, 0.0
            step = max(1, args.intents // 5)
            while done < args.intents:
                n = min(step, args.intents - done)
                a, s = _flood(srv.resolver, intents(n, args.warmup + done), args.window)
                answered, seconds, done = answered + a, seconds + s, done + n
                c = srv.counters()
                samples.append((done, c["rss"] - before["rss"], c["store_bytes"]))
            after = srv.counters()
            rows.append({
                "cache_bound_mib": round(bound / 2**20, 1),
                "intents": args.intents, "answered": answered,
                "per_second": round(args.intents / seconds),
                "rss_before_mib": round(before["rss"] / 2**20, 1),
                "rss_growth_mib": round((after["rss"] - before["rss"]) / 2**20, 1),
                "rss_growth_per_intent_bytes": round((after["rss"] - before["rss"])
                                                     / args.intents),
                "store_mib": round(after["store_bytes"] / 2**20, 1),
                "store_entries": after["store_entries"], "evictions": after["evictions"],
                "kept_results": after["kept_results"],
                "growth_by_fifth_mib": [round(g / 2**20, 1) for _, g, _ in samples],
            })
        finally:
            srv.close()
    return {"kind": "memory", "rows": rows}


HELP = 'distinct intents through the resolver: RSS against the bound'
USES_DNS = True


def add_options(p: argparse.ArgumentParser) -> None:
    """This probe's own options."""
    p.add_argument("--intents", type=int, default=100_000)
    p.add_argument("--warmup", type=int, default=2000)
    p.add_argument("--window", type=int, default=64, help="stub queries in flight")
    p.add_argument("--bounds", type=int, nargs="+", default=[16 * 2**20],
                   help="cache bounds to run, bytes")


def show(result: dict) -> None:
    """Print the figures."""
    print(result["machine"])
    table(result["rows"])
