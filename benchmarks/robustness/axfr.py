"""Parallel zone transfers (AXFR) against a served hierarchy, and meanwhile the UDP latency
of another client of the same server: how many transfers go through, how many are REFUSED,
how slow the other client gets. The transfer clients run in a child process (threads), so
that they do not slow this process's latency measurements. ``--before TREE``: the same
against an earlier checkout."""

from __future__ import annotations

import argparse
import json
import multiprocessing
import socket
import struct
import threading
import time
from pathlib import Path

from benchmarks.robustness.serving import DnsServer, ask
from benchmarks.robustness.table import table


def _axfr_query(zone: str, qid: int) -> bytes:
    from dnslib import QTYPE, DNSHeader, DNSQuestion, DNSRecord

    q = DNSRecord(DNSHeader(id=qid))
    q.add_question(DNSQuestion(zone, QTYPE.AXFR))
    return q.pack()


def _read(s: socket.socket) -> bytes | None:
    head = s.recv(2, socket.MSG_WAITALL)
    if len(head) < 2:
        return None
    return s.recv(int.from_bytes(head, "big"), socket.MSG_WAITALL)


def transfer(addr: tuple[str, int], zone: str, source: str, qid: int, expect: int,
             timeout: float = 10.0) -> str:
    """One AXFR over a fresh connection from ``source``, read until ``expect`` records
    (the zone's, both SOAs counted): "ok", "refused" (any rcode but NOERROR) or "failed"
    (closed, reset or timed out first)."""
    wire = _axfr_query(zone, qid)
    try:
        with socket.create_connection(addr, timeout=timeout, source_address=(source, 0)) as s:
            s.sendall(len(wire).to_bytes(2, "big") + wire)
            records = 0
            while records < expect:
                msg = _read(s)
                if msg is None or len(msg) < 12:
                    return "failed"
                if msg[3] & 0x0F:
                    return "refused"
                records += struct.unpack("!H", msg[6:8])[0]
            return "ok"
    except OSError:
        return "failed"


def _records(addr: tuple[str, int], zone: str, source: str) -> int:
    """The records one AXFR of ``zone`` carries (SOA twice), by dnspython."""
    import dns.query

    messages = dns.query.xfr(addr[0], zone, port=addr[1], timeout=10, source=source)
    return sum(len(rrset) for m in messages for rrset in m.answer)


def _clients(addr: tuple[str, int], zone: str, source: str, expect: int, n: int,
             seconds: float, out: multiprocessing.Queue) -> None:
    """The child process: ``n`` threads transferring until ``seconds`` have passed."""
    counts = {"ok": 0, "refused": 0, "failed": 0}
    lock = threading.Lock()
    end = time.monotonic() + seconds

    def client(k: int) -> None:
        i = 0
        while time.monotonic() < end:
            kind = transfer(addr, zone, source, (k * 1000 + i) % 65535 + 1, expect)
            i += 1
            with lock:
                counts[kind] += 1

    threads = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 30)
    out.put(counts)


def _latency(addr: tuple[str, int], zone: str, n: int, stop: threading.Event | None = None
             ) -> list[float]:
    """UDP round trips (seconds) of ``n`` SOA queries to ``addr`` from 127.0.0.1."""
    from dnslib import QTYPE, DNSHeader, DNSQuestion, DNSRecord

    times = []
    for i in range(n):
        q = DNSRecord(DNSHeader(id=i + 1))
        q.add_question(DNSQuestion(zone, QTYPE.SOA))
        start = time.perf_counter()
        if ask(addr, q.pack(), 2.0) is not None:
            times.append(time.perf_counter() - start)
        if stop is not None and stop.is_set():
            break
        time.sleep(0.01)
    return sorted(times)


def _ms(times: list[float], at: float) -> float | None:
    return round(1000 * times[min(len(times) - 1, int(at * len(times)))], 2) if times else None


def _side(args: argparse.Namespace, tree: Path | None) -> dict:
    """One served hierarchy (this tree, or ``tree``) under the parallel transfers."""
    srv = DnsServer(args, tree=tree, allow_transfer=None if tree else args.source)
    try:
        leaves = [m for m in srv.manifest["servers"] if m["role"] == "leaf"]
        target = leaves[0] if leaves else srv.manifest["servers"][-1]
        addr, zone = (target["address"], srv.port), target["zone"]
        expect = _records(addr, zone, args.source)
        calm = _latency(addr, zone, args.probes)
        ctx = multiprocessing.get_context("fork")
        queue: multiprocessing.Queue = ctx.Queue()
        child = ctx.Process(target=_clients, args=(addr, zone, args.source, expect,
                                                   args.clients, args.seconds, queue))
        child.start()
        stop = threading.Event()
        timer = threading.Timer(args.seconds, stop.set)
        timer.start()
        busy = _latency(addr, zone, 10**9, stop)  # until the transfers end
        counts = queue.get(timeout=args.seconds + 60)
        child.join(30)
        timer.cancel()
        servers = srv.counters()["servers"]
        xfr = {k: v for k, v in servers.items() if k.startswith(("xfr_", "axfr"))}
        return {"tree": "this tree" if tree is None else f"before ({tree})", "zone": zone,
                "transfers": counts, "calm_median_ms": _ms(calm, 0.5),
                "busy_median_ms": _ms(busy, 0.5), "busy_p90_ms": _ms(busy, 0.9),
                "busy_max_ms": _ms(busy, 1.0), "busy_answered": len(busy),
                "records": expect,
                "alive": srv.alive(), "server_counters": xfr}
    finally:
        srv.close()


def run(args: argparse.Namespace) -> dict:
    """``--clients`` threads (in a child process), each transferring one leaf zone by AXFR
    over and over from ``--source`` for ``--seconds``, while another client (127.0.0.1)
    asks the same server SOA questions over UDP, one every 10 ms; ``--probes`` such
    questions before the transfers start are the calm baseline."""
    sides = [_side(args, None)]
    if args.before:
        sides.append(_side(args, args.before))
    return {"kind": "axfr", "clients": args.clients, "seconds": args.seconds,
            "source": args.source, "sides": sides}


HELP = "parallel AXFR clients; the UDP latency of another client meanwhile"
USES_DNS = True


def add_options(p: argparse.ArgumentParser) -> None:
    """This probe's own options."""
    p.add_argument("--clients", type=int, default=50, help="parallel AXFR clients")
    p.add_argument("--seconds", type=float, default=10.0, help="how long they transfer")
    p.add_argument("--probes", type=int, default=200,
                   help="UDP questions of the other client before the transfers (then one "
                   "every 10 ms while they last)")
    p.add_argument("--source", default="127.0.0.2",
                   help="the transfer clients' address (allowed to transfer in this tree)")


def show(result: dict) -> None:
    """Print the figures."""
    print(result["machine"])
    print(f"{result['clients']} AXFR clients from {result['source']} for "
          f"{result['seconds']} s; another client's UDP SOA questions to the same server")
    rows = [{"tree": s["tree"], "zone": s["zone"], "transfers ok": s["transfers"]["ok"],
             "refused": s["transfers"]["refused"], "failed": s["transfers"]["failed"],
             "calm median ms": s["calm_median_ms"], "busy median ms": s["busy_median_ms"],
             "busy p90 ms": s["busy_p90_ms"], "busy max ms": s["busy_max_ms"],
             "busy answered": s["busy_answered"], "alive": s["alive"]}
            for s in result["sides"]]
    table(rows)
    for s in result["sides"]:
        print(f"{s['tree']}: server counters", json.dumps(s["server_counters"], sort_keys=True))
