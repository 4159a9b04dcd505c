"""Mutated UDP queries (bit flips, truncations, splices, random bytes) at the servers and the
resolver of a served hierarchy; crashes, counters, and whether it answers after."""

from __future__ import annotations

import argparse
import socket
import time

from benchmarks.robustness.serving import DnsServer, ask, stub_query
from benchmarks.robustness.table import table


def run(args: argparse.Namespace) -> dict:
    """``--packets`` mutated queries (bit flips, truncation, splices, random bytes) at the
    servers and the resolver of a served hierarchy; then whether it still answers."""
    import random

    rng = random.Random(args.seed)
    srv = DnsServer(args)
    try:
        targets = [(m["address"], srv.port) for m in srv.manifest["servers"][:8]]
        targets.append(srv.resolver)
        seeds = [stub_query(f"weather forecast {i}", qid=i + 1) for i in range(20)]
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.setblocking(False)
        replies, t0 = 0, time.perf_counter()
        for i in range(args.packets):
            data = bytearray(rng.choice(seeds))
            how = rng.randrange(4)
            if how == 0:
                for _ in range(rng.randint(1, 8)):
                    data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
            elif how == 1:
                data = data[:rng.randrange(len(data))]
            elif how == 2:
                other = rng.choice(seeds)
                cut = rng.randrange(len(data))
                data = data[:cut] + other[rng.randrange(len(other)):]
            else:
                data = bytearray(rng.randbytes(rng.randint(0, 600)))
            sock.sendto(bytes(data), rng.choice(targets))
            if i % 64 == 63:  # keep within the receive buffers; read what came back
                time.sleep(0.002)
                while True:
                    try:
                        sock.recv(65535)
                        replies += 1
                    except BlockingIOError:
                        break
        elapsed = time.perf_counter() - t0
        time.sleep(1.0)
        answered = ask(srv.resolver, stub_query("weather forecast", qid=4242), 10.0)
        counters = srv.counters()
        return {"kind": "fuzz", "packets": args.packets, "seconds": round(elapsed, 1),
                "replies": replies,
                "alive": srv.alive(), "answers_after": answered is not None,
                "server_formerr": counters["servers"].get("formerr", 0),
                "server_malformed": sum(v for k, v in counters["servers"].items()
                                        if "malformed" in k or "formerr" in k),
                "resolver_malformed": counters["resolver"].get("malformed", 0),
                "internal_errors": counters["servers"].get("internal_error", 0),
                "crashes": 0 if srv.alive() else 1}
    finally:
        srv.close()


HELP = 'mutated UDP queries at the servers and the resolver'
USES_DNS = True


def add_options(p: argparse.ArgumentParser) -> None:
    """This probe's own options."""
    p.add_argument("--packets", type=int, default=100_000)


def show(result: dict) -> None:
    """Print the figures."""
    print(result["machine"])
    table([{k: v for k, v in result.items() if k not in ("kind", "machine")}])
