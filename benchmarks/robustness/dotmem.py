"""DNS over TLS and the serving process's memory and event loop: its RSS before, while and
after ``--silent`` TCP connections per DoT listener sit there without a ClientHello; then
a fresh client's UDP latency while TLS handshakes flood the DoT listeners, from one source
address and from ``--flood-sources`` of them. ``--before TREE``: the same against an
earlier checkout's ``serve-dns --dot``."""

from __future__ import annotations

import argparse
import itertools
import multiprocessing
import multiprocessing.queues
import os
import resource
import socket
import ssl
import threading
import time
from pathlib import Path

from benchmarks.robustness.dot import DOT_HOST
from benchmarks.robustness.serving import DnsServer
from benchmarks.robustness.table import table

HELP = "silent DoT connections: RSS; a handshake flood: other clients' UDP latency"
USES_DNS = True


def add_options(p: argparse.ArgumentParser) -> None:
    """This probe's own options."""
    p.add_argument("--silent", type=int, default=300,
                   help="silent TCP connections per DoT listener (every server, the resolver)")
    p.add_argument("--hold", type=float, default=10.0,
                   help="seconds the silent connections are held (RSS sampled each second)")
    p.add_argument("--flood-rate", type=float, default=200.0,
                   help="TLS handshakes per second the flood attempts (0: no flood)")
    p.add_argument("--flood-seconds", type=float, default=8.0)
    p.add_argument("--flood-threads", type=int, default=8)
    p.add_argument("--flood-sources", type=int, default=64,
                   help="source addresses of the second flood (127.0.201.x)")
    p.add_argument("--udp-gap", type=float, default=0.01,
                   help="seconds between the latency client's UDP queries")


def run(args: argparse.Namespace) -> dict:
    """One side per tree: this one, and ``--before``'s first when given."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:  # the silent connections' sockets live in this process too
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    sides = []
    if args.before:
        sides.append(_side(args, args.before))
    sides.append(_side(args, None))
    return {"kind": "dot-memory", "silent": args.silent, "hold_s": args.hold,
            "flood_rate": args.flood_rate, "sides": sides}


def _side(args: argparse.Namespace, tree: Path | None) -> dict:
    label = "this tree" if tree is None else f"before ({tree})"
    srv = DnsServer(args, dot=True, tree=tree)
    try:
        dot = srv.manifest["dot"]
        ctx = ssl.create_default_context(cadata=dot["ca_pem"])
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        listeners = [(m["address"], dot["port"]) for m in srv.manifest["servers"]]
        listeners.append((srv.resolver[0], dot["port"]))
        tld = srv.server("tools.")
        mib = 2**20
        out: dict = {"tree": label, "listeners": len(listeners)}
        time.sleep(0.5)
        out["rss_start_mib"] = round(srv.counters()["rss"] / mib, 1)
        targets = [t for t in listeners for _ in range(args.silent)]
        held = _silent(targets)
        opened = len(held)
        samples, began = [], time.perf_counter()
        while time.perf_counter() - began < args.hold:
            time.sleep(1.0)
            samples.append(round(srv.counters()["rss"] / mib, 1))
            # a persistent attacker: every connection the server closed is opened again
            gone = [i for i, s in enumerate(held) if not _still_open(s)]
            for i, s in zip(gone, _silent([targets[i] for i in gone]), strict=True):
                held[i].close()
                held[i] = s
            opened += len(gone)
        out["silent_opened"] = opened
        out["silent_open_at_end"] = sum(_still_open(s) for s in held)
        out["rss_held_mib"] = samples[-1] if samples else None
        out["rss_held_peak_mib"] = max(samples, default=None)
        out["rss_samples_mib"] = samples
        for s in held:
            s.close()
        time.sleep(3.0)
        out["rss_after_close_mib"] = round(srv.counters()["rss"] / mib, 1)
        out["control_udp"] = _udp_latency(tld, args.flood_seconds / 2, args.udp_gap)
        if args.flood_rate > 0:
            for name, sources in (("flood_1_source", ["127.0.0.1"]),
                                  (f"flood_{args.flood_sources}_sources",
                                   [f"127.0.201.{i + 1}" for i in range(args.flood_sources)])):
                cpu = _cpu_seconds(srv.proc.pid)
                began = time.perf_counter()
                out[name] = _flood_phase(listeners, ctx, sources, tld, args)
                out[name]["server_cpu_pct"] = round(100 * (_cpu_seconds(srv.proc.pid) - cpu)
                                                    / (time.perf_counter() - began))
        out["rss_end_mib"] = round(srv.counters()["rss"] / mib, 1)
        counts = srv.counters()["servers"]
        out["counters"] = {k: v for k, v in sorted(counts.items()) if k.startswith("tls_")}
        out["alive"] = srv.alive()
        return out
    finally:
        srv.close()


def _cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a process has used, seconds (/proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _silent(targets: list[tuple[str, int]]) -> list[socket.socket]:
    """One TCP connection to each of ``targets`` that never sends a byte (paced so that the
    listen backlogs are not overrun)."""
    held = []
    for i, target in enumerate(targets):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(target)
        held.append(s)
        if i % 64 == 63:
            time.sleep(0.01)
    return held


def _still_open(s: socket.socket) -> bool:
    """The server has not closed (or reset) this connection."""
    try:
        return s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


def _udp_latency(target: tuple[str, int], seconds: float, gap: float) -> dict:
    """One query after another to ``target`` over UDP for ``seconds``: latency figures."""
    from dnslib import QTYPE, DNSHeader, DNSQuestion, DNSRecord

    times, lost = [], 0
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(1.0)
        end = time.perf_counter() + seconds
        for qid in itertools.count(1):
            if time.perf_counter() > end:
                break
            q = DNSRecord(DNSHeader(id=qid % 65536))
            q.add_question(DNSQuestion("tools.", QTYPE.NS))
            wire = q.pack()
            start = time.perf_counter()
            s.sendto(wire, target)
            try:
                while s.recv(65535)[:2] != wire[:2]:
                    pass
                times.append(time.perf_counter() - start)
            except TimeoutError:
                lost += 1
            time.sleep(gap)
    times.sort()

    def ms(q: float) -> float | None:
        return round(1000 * times[min(len(times) - 1, int(q * len(times)))], 2) \
            if times else None

    return {"queries": len(times) + lost, "lost": lost, "median_ms": ms(0.5),
            "p95_ms": ms(0.95), "max_ms": ms(1.0)}


def _flood_phase(listeners: list[tuple[str, int]], ctx: ssl.SSLContext, sources: list[str],
                 tld: tuple[str, int], args: argparse.Namespace) -> dict:
    """TLS handshakes (connect, handshake, close) at ``--flood-rate`` spread over the DoT
    listeners and ``sources``, from a child process (its threads do not hold this one's
    GIL); meanwhile the UDP latency of a fresh client at the TLD, from this process."""
    mp = multiprocessing.get_context("fork")
    results = mp.Queue()
    child = mp.Process(target=_flood, args=(listeners, ctx, sources, args, results))
    child.start()
    time.sleep(0.5)  # the flood is under way
    udp = _udp_latency(tld, args.flood_seconds, args.udp_gap)
    done = results.get(timeout=args.flood_seconds + 60)
    child.join()
    return {"sources": len(sources), **done, "udp": udp}


def _flood(listeners: list[tuple[str, int]], ctx: ssl.SSLContext, sources: list[str],
           args: argparse.Namespace, results: multiprocessing.queues.Queue) -> None:
    """The flooding child: ``--flood-threads`` threads, each at its share of the rate, for
    0.5 s more than the latency client measures; puts its counts in ``results``."""
    stop = threading.Event()
    done = {"ok": 0, "failed": 0}
    lock = threading.Lock()
    slots = itertools.count()
    interval = args.flood_threads / args.flood_rate  # each thread's pace

    def flood() -> None:
        due = time.perf_counter()
        while not stop.is_set():
            i = next(slots)
            target, src = listeners[i % len(listeners)], sources[i % len(sources)]
            ok = False
            try:
                raw = socket.create_connection(target, timeout=2.0, source_address=(src, 0))
                with ctx.wrap_socket(raw, server_hostname=DOT_HOST):
                    ok = True
            except OSError:
                pass
            with lock:
                done["ok" if ok else "failed"] += 1
            due += interval
            time.sleep(max(0.0, due - time.perf_counter()))

    threads = [threading.Thread(target=flood, daemon=True) for _ in range(args.flood_threads)]
    began = time.perf_counter()
    for t in threads:
        t.start()
    time.sleep(args.flood_seconds + 0.5)
    stop.set()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - began
    results.put({"handshakes_ok": done["ok"], "refused_or_failed": done["failed"],
                 "attempted_per_s": round((done["ok"] + done["failed"]) / seconds)})


def show(result: dict) -> None:
    """Print the figures."""
    print(result["machine"])
    print(f"{result['silent']} silent TCP connections per DoT listener held "
          f"{result['hold_s']:g} s (those the server closes opened again each second; "
          f"'silent opened' counts all); then TLS handshake floods at "
          f"{result['flood_rate']:g}/s (connect, handshake, close)")
    table([{"tree": s["tree"], "listeners": s["listeners"],
            "silent opened": s["silent_opened"], "open at end": s["silent_open_at_end"],
            "RSS start MiB": s["rss_start_mib"], "held MiB": s["rss_held_mib"],
            "held peak MiB": s["rss_held_peak_mib"],
            "after close MiB": s["rss_after_close_mib"], "end MiB": s["rss_end_mib"]}
           for s in result["sides"]])
    rows = []
    for s in result["sides"]:
        for phase in ("control_udp", *(k for k in s if k.startswith("flood_"))):
            f = s[phase]
            udp = f.get("udp", f)
            rows.append({"tree": s["tree"], "phase": phase,
                         "handshakes ok": f.get("handshakes_ok", "-"),
                         "refused/failed": f.get("refused_or_failed", "-"),
                         "attempted/s": f.get("attempted_per_s", "-"),
                         "server CPU %": f.get("server_cpu_pct", "-"),
                         "UDP queries": udp["queries"], "lost": udp["lost"],
                         "median ms": udp["median_ms"], "p95 ms": udp["p95_ms"],
                         "max ms": udp["max_ms"]})
    table(rows)
    for s in result["sides"]:
        print(f"{s['tree']}: RSS each second while held (MiB): {s['rss_samples_mib']}")
        print(f"{s['tree']}: TLS counters: {s['counters']}; alive: {s['alive']}")
