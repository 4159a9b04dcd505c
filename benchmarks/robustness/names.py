"""Name-level mutations at a served hierarchy: queries whose question name has a label
length byte of 0–255 (64–191: reserved and extended label types), more than 255 bytes, or
a compression pointer that loops, points forward, past the end or into the header; sent
over UDP to the servers and the resolver, and over TCP as zone transfer (AXFR) requests to
the servers. Replies by rcode, bytes the serving process wrote to its stderr (tracebacks),
its counters, and whether it still answers; with ``--before TREE`` the same packets at
an earlier checkout too, printed side by side."""

from __future__ import annotations

import argparse
import random
import socket
import struct
import tempfile
import time
from collections import Counter
from pathlib import Path

from benchmarks.robustness.serving import DnsServer, ask, stub_query
from benchmarks.robustness.table import table

KINDS = ("long_label", "long_name", "loop", "forward", "past_end", "header", "any_length")
RCODES = {0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED",
          9: "NOTAUTH"}
_SAFE = b"abcdefghijklmnopqrstuvwxyz0123456789-_"
_OPT = b"\x00" + struct.pack("!HHIH", 41, 1232, 0, 0)


def bad_name(rng: random.Random, kind: str, tail: int) -> bytes:
    """A question name of ``kind`` at offset 12, with ``tail`` bytes after it."""
    prefix = b"".join(bytes([n]) + bytes(rng.choices(_SAFE, k=n))
                      for n in [rng.randint(1, 20) for _ in range(rng.randint(0, 2))])
    at = 12 + len(prefix)  # where the trick starts
    if kind == "long_label":  # a length byte of 64-191 and that many bytes
        n = rng.randint(64, 191)
        return prefix + bytes([n]) + b"a" * n + b"\x00"
    if kind == "any_length":  # any length byte: a label of 0-63, an odd type, a pointer
        n = rng.randrange(256)
        return prefix + bytes([n]) + bytes(rng.choices(_SAFE, k=min(n, 63))) + b"\x00"
    if kind == "long_name":  # legal labels, over 255 bytes in all
        return prefix + (bytes([63]) + b"b" * 63) * 4 + b"\x05tools\x00"
    if kind == "loop":  # to the name's start or to the pointer itself
        target = rng.choice([12, at])
    elif kind == "forward":
        target = at + 2 + rng.randrange(tail)
    elif kind == "past_end":
        target = at + 2 + tail + rng.randrange(1, 1000)
    else:  # "header"
        target = rng.randrange(12)
    return prefix + (0xC000 | target).to_bytes(2, "big")


def bad_query(rng: random.Random, qid: int, qtype: int = 33) -> bytes:
    """A query (RD set, EDNS half the time) with a name of a random kind."""
    edns = rng.random() < 0.5
    tail = 4 + (len(_OPT) if edns else 0)
    name = bad_name(rng, rng.choice(KINDS), tail)
    return (struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, int(edns)) + name
            + struct.pack("!HH", qtype, 1) + (_OPT if edns else b""))


def _drain(sock: socket.socket, rcodes: Counter[str]) -> None:
    while True:
        try:
            data = sock.recv(65535)
        except BlockingIOError:
            return
        rcodes[RCODES.get(data[3] & 0xF, str(data[3] & 0xF)) if len(data) >= 4 else "short"] += 1


def _axfr(addr: tuple[str, int], wire: bytes, rcodes: Counter[str]) -> None:
    """One AXFR request over its own TCP connection: the first answer's rcode, or none."""
    try:
        with socket.create_connection(addr, timeout=2.0) as s:
            s.sendall(len(wire).to_bytes(2, "big") + wire)
            head = s.recv(2, socket.MSG_WAITALL)
            data = s.recv(int.from_bytes(head, "big"), socket.MSG_WAITALL) if len(head) == 2 \
                else b""
    except OSError:
        data = b""
    rcodes[RCODES.get(data[3] & 0xF, "?") if len(data) >= 4 else "none"] += 1


def _one(args: argparse.Namespace, tree: Path | None) -> dict:
    """The packets at one served hierarchy (this tree, or ``tree``)."""
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        err = Path(tmp) / "stderr"
        srv = DnsServer(args, tree=tree, stderr=err)
        try:
            servers = [(m["address"], srv.port) for m in srv.manifest["servers"][:8]]
            to_servers = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            to_resolver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            for sock in (to_servers, to_resolver):
                sock.setblocking(False)
            server_rcodes: Counter[str] = Counter()
            resolver_rcodes: Counter[str] = Counter()
            sent: Counter[str] = Counter()
            t0 = time.perf_counter()
            for i in range(args.packets):
                wire = bad_query(rng, i % 65535 + 1)
                if i % 2:
                    to_resolver.sendto(wire, srv.resolver)
                    sent["resolver"] += 1
                else:
                    to_servers.sendto(wire, rng.choice(servers))
                    sent["servers"] += 1
                if i % 32 == 31:  # paced at --rate; read what came back meanwhile
                    while time.perf_counter() < t0 + (i + 1) / args.rate:
                        time.sleep(0.001)
                        _drain(to_servers, server_rcodes)
                        _drain(to_resolver, resolver_rcodes)
            udp_seconds = time.perf_counter() - t0
            settle = time.perf_counter() + 2.0  # late replies
            while time.perf_counter() < settle:
                time.sleep(0.01)
                _drain(to_servers, server_rcodes)
                _drain(to_resolver, resolver_rcodes)
            axfr_rcodes: Counter[str] = Counter()
            t1 = time.perf_counter()
            for i in range(args.axfr):
                _axfr(rng.choice(servers), bad_query(rng, i + 1, qtype=252), axfr_rcodes)
            axfr_seconds = time.perf_counter() - t1
            answered = ask(srv.resolver, stub_query("weather forecast", qid=4242), 10.0)
            counters = srv.counters()
        finally:
            alive = srv.alive()
            srv.close()
        stderr_bytes = err.stat().st_size
    s, r = counters["servers"], counters["resolver"]
    return {"packets": args.packets, "to_servers": sent["servers"],
            "to_resolver": sent["resolver"], "udp_seconds": round(udp_seconds, 1),
            "axfr_seconds": round(axfr_seconds, 1),
            "server_replies": dict(server_rcodes),
            "server_no_reply": sent["servers"] - sum(server_rcodes.values()),
            "resolver_replies": dict(resolver_rcodes),
            "resolver_no_reply": sent["resolver"] - sum(resolver_rcodes.values()),
            "axfr_replies": dict(axfr_rcodes),
            "server_formerr": s.get("formerr", 0),
            "server_dropped_malformed": s.get("dropped_malformed", 0),
            "server_internal_error": s.get("internal_error", 0),
            "resolver_malformed": r.get("malformed", 0),
            "adapter_node_error": counters["adapter"].get("node_error", 0),
            "stderr_bytes": stderr_bytes, "alive": alive,
            "answers_after": answered is not None}


def run(args: argparse.Namespace) -> dict:
    """``--packets`` name-mutation queries over UDP (half at the servers, half at the
    resolver) and ``--axfr`` over TCP, at this tree (and at ``--before``)."""
    result: dict[str, object] = {"kind": "names"}
    if args.before is not None:
        result["before"] = _one(args, args.before)
    result["after"] = _one(args, None)
    return result


HELP = "over-long labels and names, pointer loops: replies by rcode, stderr bytes"
USES_DNS = True


def add_options(p: argparse.ArgumentParser) -> None:
    """This probe's own options."""
    p.add_argument("--packets", type=int, default=10_000)
    p.add_argument("--rate", type=float, default=2000, help="UDP packets per second")
    p.add_argument("--axfr", type=int, default=50,
                   help="AXFR requests with such names, one TCP connection each")


def show(result: dict) -> None:
    """Print the figures: one row per figure, a column per tree."""
    print(result["machine"])
    trees = [t for t in ("before", "after") if t in result]
    rows = [{"figure": key, **{t: result[t][key] for t in trees}}
            for key in result[trees[-1]]]
    table(rows)
