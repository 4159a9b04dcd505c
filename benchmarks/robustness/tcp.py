"""Held TCP connections to the servers and the resolver, left silent; meanwhile other
clients' queries over UDP and TCP: how many are answered, how fast; the servers' TCP
counters (every one, zeros included: none counts until a bound or a deadline is reached)
and the connections open at the end."""

from __future__ import annotations

import argparse
import json
import socket
import time

from benchmarks.robustness.serving import DnsServer, ask, stub_query
from benchmarks.robustness.table import table

#: what sim.sockets.tcp counts (listener or process full: the connection evicted or the new
#: one refused; a deadline that closed one)
TCP_COUNTERS = (*(f"tcp_{bound}_full_{what}" for bound in ("listener", "process")
                  for what in ("evicted_idle", "evicted_stalled", "refused")),
                "tcp_idle_closed", "tcp_slow_message_closed", "tcp_lifetime_closed",
                "tcp_write_timeout_closed")


def run(args: argparse.Namespace) -> dict:
    """``--held`` TCP connections opened to the servers and the resolver and left silent;
    meanwhile other clients' queries over UDP and TCP: how many are answered, how fast."""
    srv = DnsServer(args)
    held: list[socket.socket] = []
    try:
        targets = [(m["address"], srv.port) for m in srv.manifest["servers"]]
        targets.append(srv.resolver)
        t0 = time.perf_counter()
        failed = 0
        for i in range(args.held):
            s = socket.socket()
            s.setblocking(False)
            try:
                s.connect_ex(targets[i % len(targets)])
                held.append(s)
            except OSError:
                failed += 1
                s.close()
        time.sleep(2.0)  # let the servers accept (and shed) them
        opened = time.perf_counter() - t0
        tld = srv.server("tools.")
        from dnslib import QTYPE, DNSHeader, DNSQuestion, DNSRecord

        q = DNSRecord(DNSHeader(id=9))
        q.add_question(DNSQuestion("tools.", QTYPE.NS))
        rows = []
        for name, addr, wire, tcp in (
                ("UDP to the TLD server", tld, q.pack(), False),
                ("TCP to the TLD server", tld, q.pack(), True),
                ("UDP discovery via the resolver", srv.resolver, None, False),
                ("TCP discovery via the resolver", srv.resolver, None, True)):
            ok, times = 0, []
            for j in range(args.probes):
                w = wire or stub_query(f"weather forecast {name} {j}", qid=j + 1)
                start = time.perf_counter()
                if ask(addr, w, 5.0, tcp) is not None:
                    ok += 1
                    times.append(time.perf_counter() - start)
            times.sort()
            rows.append({"probe": name, "answered": f"{ok}/{args.probes}",
                         "median_ms": round(1000 * times[len(times) // 2], 1) if times
                         else None})
        c = srv.counters()
        both = [c["servers"], c["adapter"]]  # the servers', the resolver's listener
        tcp_counts = {k: sum(d.get(k, 0) for d in both)
                      for k in sorted({*TCP_COUNTERS, *(k for d in both for k in d
                                                        if k.startswith("tcp_"))})}
        return {"kind": "tcp", "held": args.held, "connect_failed": failed,
                "open_seconds": round(opened, 1), "alive": srv.alive(), "probes": rows,
                "server_tcp_counters": tcp_counts, "tcp_open": c.get("tcp_open"),
                "listeners": len(targets), "per_listener": args.tcp_per_server}
    finally:
        for s in held:
            s.close()
        srv.close()


HELP = 'held TCP connections; are other clients answered'
USES_DNS = True


def add_options(p: argparse.ArgumentParser) -> None:
    """This probe's own options."""
    p.add_argument("--held", type=int, default=10_000)
    p.add_argument("--probes", type=int, default=20)


def show(result: dict) -> None:
    """Print the figures."""
    print(result["machine"])
    print(f"{result['held']} connections held open and silent "
          f"({result['connect_failed']} failed to connect), opened in "
          f"{result['open_seconds']} s; server process alive: {result['alive']}")
    table(result["probes"])
    print(f"{result['listeners']} listeners, each keeping {result['per_listener']} "
          f"connections; open at the end: {json.dumps(result.get('tcp_open'))}")
    print("server TCP counters:", json.dumps(result["server_tcp_counters"], sort_keys=True))
