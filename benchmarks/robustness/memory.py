"""Distinct intents through the served resolver: the serving process's RSS growth against
the resolver's cache bound (``--intents``), or ``tooldns serve`` itself, with its defaults,
under fresh intents for ``--seconds``: RSS sampled over time, and whether it levels off."""

from __future__ import annotations

import argparse
import random
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.robustness.serving import ROOT, DnsServer, rss, stub_query
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


WORDS = ["weather", "forecast", "maps", "route", "tax", "invoice", "email", "calendar",
         "stock", "price", "image", "resize", "translate", "search", "music", "news"]


def _intents(rng: random.Random, n: int, start: int) -> list[str]:
    """``n`` intents never asked before (numbered from ``start``)."""
    return [" ".join(rng.sample(WORDS, 3)) + f" case {start + j}" for j in range(n)]


class _Serve:
    """``tooldns serve`` (with its defaults) from this tree or another, in a child process."""

    def __init__(self, args: argparse.Namespace, tree: Path | None, log: Path) -> None:
        root = Path(tree or ROOT).resolve()
        out = log.open("w")  # its output, read until "ready"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sim.cli", "serve", "--port", str(args.port),
             "--resolver", args.resolver, "--show", "0"],
            stdout=out, stderr=subprocess.STDOUT, text=True, cwd=root)
        out.close()  # the child has its own copy
        deadline = time.monotonic() + 300
        while True:
            text = log.read_text()
            if "ready" in text:
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise SystemExit("tooldns serve did not start: " + text[-2000:])
            time.sleep(0.2)
        self.resolver = (args.resolver, args.port)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def _over_time(args: argparse.Namespace, tree: Path | None) -> dict:
    """Fresh intents at ``tooldns serve``'s resolver for ``--seconds``; RSS samples."""
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        return _sample(args, _Serve(args, tree, Path(tmp) / "serve.log"), rng)


def _sample(args: argparse.Namespace, srv: _Serve, rng: random.Random) -> dict:
    try:
        _flood(srv.resolver, _intents(rng, args.warmup, 0), args.window)
        t0 = time.perf_counter()
        base = rss(srv.proc.pid)
        samples: list[tuple[float, int, float]] = [(0.0, 0, base / 2**20)]
        done = answered = 0
        next_sample = args.sample
        while (elapsed := time.perf_counter() - t0) < args.seconds:
            a, _ = _flood(srv.resolver, _intents(rng, 500, args.warmup + done), args.window)
            done, answered = done + 500, answered + a
            if time.perf_counter() - t0 >= next_sample:
                samples.append((round(time.perf_counter() - t0, 1), done,
                                round(rss(srv.proc.pid) / 2**20, 1)))
                next_sample += args.sample
        alive = srv.proc.poll() is None
    finally:
        srv.close()
    end = samples[-1]
    mid = min(samples, key=lambda s: abs(s[0] - end[0] / 2))  # the sample nearest half-time
    last_half = end[2] - mid[2]
    return {"seconds": round(elapsed), "intents": done, "answered": answered,
            "per_second": round(done / elapsed), "rss_start_mib": round(base / 2**20, 1),
            "rss_end_mib": end[2], "growth_mib": round(end[2] - base / 2**20, 1),
            "last_half_growth_mib": round(last_half, 1),
            "last_half_bytes_per_intent": round(last_half * 2**20 / max(1, end[1] - mid[1])),
            # flat: the second half grew the RSS by under 2 % (allocator noise, a few memos)
            "flat": last_half <= 0.02 * mid[2], "alive": alive,
            "samples_s_intents_mib": samples}


def run(args: argparse.Namespace) -> dict:
    """``--intents`` distinct intents through the resolver with its cache bounded at
    ``--bounds``: the serving process's RSS growth after a warm-up, against the bound; with
    ``--seconds``, ``tooldns serve``'s own defaults under fresh intents for that long."""
    if args.seconds:
        rows = []
        if args.before is not None:
            rows.append({"tree": "before", **_over_time(args, args.before)})
        rows.append({"tree": "after", **_over_time(args, None)})
        return {"kind": "memory", "rows": rows}
    rng = random.Random(args.seed)

    def intents(n: int, start: int) -> list[str]:
        return _intents(rng, n, start)

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
    p.add_argument("--seconds", type=float, default=0,
                   help="run `tooldns serve` (its defaults) under fresh intents this long, "
                   "sampling its RSS (with --before TREE: that tree's serve first)")
    p.add_argument("--sample", type=float, default=10, help="seconds between RSS samples")


def show(result: dict) -> None:
    """Print the figures."""
    print(result["machine"])
    table(result["rows"])
