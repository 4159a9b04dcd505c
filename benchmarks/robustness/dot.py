"""A DNS-over-TLS listener held by silent TCP connections, then by TLS connections stopped
in the middle of a message: are fresh DoT clients still answered, how fast, and what the
server counted. ``--before TREE``: the same against an earlier checkout's listener."""

from __future__ import annotations

import argparse
import json
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.robustness.serving import ROOT, Child, DnsServer
from benchmarks.robustness.table import table

HELP = "held DoT connections (silent, mid-message); are fresh DoT clients answered"
USES_DNS = True
DOT_HOST = "dot.tools.test"  # sim.build.hierarchy.DOT_HOST (this module imports no sim)
MID_MESSAGE = b"\x00\x40"  # a length prefix announcing 64 bytes that never come


def add_options(p: argparse.ArgumentParser) -> None:
    """This probe's own options."""
    p.add_argument("--held", type=int, default=320,
                   help="connections held per attack (more than a listener's default bound, "
                   "256)")
    p.add_argument("--clients", type=int, default=20,
                   help="fresh DoT clients per phase, one after another")
    p.add_argument("--client-timeout", type=float, default=3.0,
                   help="seconds a fresh client waits for its answer")


def run(args: argparse.Namespace) -> dict:
    """Each side: fresh clients with nothing held (control), while ``--held`` silent TCP
    connections wait at the TLD server's DoT port, then while ``--held`` TLS connections
    sit mid-message there; the server's TLS and TCP counters after."""
    sides = [_side(args, None)]
    if args.before:
        sides.append(_side(args, args.before))
    return {"kind": "dot", "held": args.held, "clients": args.clients, "sides": sides}


def _side(args: argparse.Namespace, tree: Path | None) -> dict:
    label = "this tree" if tree is None else f"before ({tree})"
    try:
        srv: DnsServer | _OldListener = (DnsServer(args, dot=True) if tree is None
                                         else _OldListener(args, tree))
    except SystemExit as exc:  # the tree cannot serve DNS over TLS: say why
        return {"tree": label, "phases": [], "counters": {}, "note": str(exc)}
    try:
        dot = srv.manifest["dot"]
        ctx = ssl.create_default_context(cadata=dot["ca_pem"])
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        tld = next(m["address"] for m in srv.manifest["servers"] if m["zone"] == "tools.")
        target = (tld, dot["port"])
        phases = [_phase("control: nothing held", target, ctx, args, None)]
        held = _silent(target, args.held)
        time.sleep(1.2)  # connections past the listen backlog got in (SYN-ACK resent at 1 s)
        phases.append(_phase(f"{args.held} silent TCP held", target, ctx, args,
                             lambda: _silent(target, 1, pause=False)))
        _close(held)
        held, opened = _mid_message(target, ctx, args.held)
        time.sleep(1.0)  # the server has read their prefixes; they stall from here
        row = _phase(f"{args.held} TLS mid-message held", target, ctx, args,
                     lambda: _mid_message(target, ctx, 1)[0])
        phases.append({**row, "attack_handshakes": opened})
        _close(held)
        c = srv.counters()
        counters = {k: v for k, v in c["servers"].items() if k.startswith(("tls_", "tcp_"))}
        return {"tree": label, "phases": phases, "counters": counters,
                "alive": srv.alive(), "note": getattr(srv, "note", "")}
    finally:
        srv.close()


def _silent(target: tuple[str, int], n: int, pause: bool = True) -> list[socket.socket]:
    """``n`` TCP connections that never send a ClientHello."""
    held = []
    for i in range(n):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(target)
        held.append(s)
        if i % 32 == 31:  # within the listen backlog (asyncio's is 100): no SYN dropped
            time.sleep(0.02)
    if pause:
        time.sleep(0.3)
    return held


def _mid_message(target: tuple[str, int], ctx: ssl.SSLContext, n: int
                 ) -> tuple[list[socket.socket], int]:
    """``n`` TLS connections that each send a length prefix and stop: (them, how many
    completed their handshake; the server may close one at once, past its bound)."""
    held: list[socket.socket] = []
    opened = 0
    for _ in range(n):
        try:
            s = ctx.wrap_socket(socket.create_connection(target, timeout=3.0),
                                server_hostname=DOT_HOST)
            s.sendall(MID_MESSAGE)
            held.append(s)
            opened += 1
        except OSError:
            continue
    return held, opened


def _close(held: list[socket.socket]) -> None:
    for s in held:
        s.close()


def _phase(name: str, target: tuple[str, int], ctx: ssl.SSLContext,
           args: argparse.Namespace, more: Callable[[], list[socket.socket]] | None) -> dict:
    """``args.clients`` fresh DoT clients, one after another: answered, how fast, and how
    the others failed; meanwhile ``more`` (if any) opens another attacking connection every
    10 ms, as an attacker keeping the listener full would (they count as ``attack_added``)."""
    times: list[float] = []
    failed: dict[str, int] = {}
    added: list[socket.socket] = []
    stop = threading.Event()

    def flood() -> None:
        while more is not None and not stop.wait(0.01):
            added.extend(more())

    thread = threading.Thread(target=flood, daemon=True)
    began = time.perf_counter()
    thread.start()
    try:
        _clients(target, ctx, args, times, failed)
    finally:
        stop.set()
        thread.join()
        _close(added)
    times.sort()
    return {"phase": name, "attack_added": len(added),
            "answered": f"{len(times)}/{args.clients}",
            "median_ms": round(1000 * times[len(times) // 2], 1) if times else None,
            "max_ms": round(1000 * times[-1], 1) if times else None,
            "failed": failed, "seconds": round(time.perf_counter() - began, 1),
            "attack_handshakes": None}


def _clients(target: tuple[str, int], ctx: ssl.SSLContext, args: argparse.Namespace,
             times: list[float], failed: dict[str, int]) -> None:
    """The fresh clients: each one's time to its answer, or how it failed."""
    from dnslib import QTYPE, DNSHeader, DNSQuestion, DNSRecord

    for j in range(args.clients):
        q = DNSRecord(DNSHeader(id=j + 1))
        q.add_question(DNSQuestion("tools.", QTYPE.NS))
        wire = q.pack()
        start = time.perf_counter()
        why = _exchange(target, ctx, wire, args.client_timeout)
        if why:
            failed[why] = failed.get(why, 0) + 1
        else:
            times.append(time.perf_counter() - start)


def _exchange(target: tuple[str, int], ctx: ssl.SSLContext, wire: bytes,
              timeout: float) -> str:
    """One query on a new DoT connection: "" when answered, else how it failed."""
    try:
        with socket.create_connection(target, timeout=timeout) as raw, \
                ctx.wrap_socket(raw, server_hostname=DOT_HOST) as s:
            s.sendall(len(wire).to_bytes(2, "big") + wire)
            head = s.recv(2)
            if len(head) < 2:
                return "closed"
            size, data = int.from_bytes(head, "big"), b""
            while len(data) < size:
                more = s.recv(size - len(data))
                if not more:
                    return "closed"
                data += more
            return "" if data[:2] == wire[:2] else "wrong answer"
    except TimeoutError:
        return "timeout"
    except ConnectionResetError:
        return "reset"
    except ssl.SSLError:
        return "handshake failed"
    except OSError as exc:
        return type(exc).__name__


class _OldListener(Child):
    """The TLD server's DoT listener as an earlier tree serves it, where ``serve-dns`` has
    no ``--dot``: that tree's own ``ServerEndpoint`` with TLS (what its live engine runs), in
    a child process speaking ``serve-dns``'s protocol (:func:`listen`)."""

    note = ("served by the tree's ServerEndpoint (its live engine's TLS listener, default "
            "bounds): its serve-dns has no --dot")

    def __init__(self, args: argparse.Namespace, tree: Path) -> None:
        tree = Path(tree).resolve()
        code = (f"import sys; sys.path[:0] = [{str(tree)!r}]; sys.path.append({str(ROOT)!r})"
                f"\nfrom benchmarks.robustness.dot import listen"
                f"\nlisten({args.port}, {args.tools}, {args.seed})")
        self.proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, cwd=tree)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("READY "):
            self.proc.kill()
            raise SystemExit(f"{tree} cannot serve DNS over TLS: {line.strip()!r}")
        self.manifest = json.loads(line[6:])


def listen(port: int, tools: int, seed: int) -> None:
    """Child process (any tree with ``ServerEndpoint(tls=...)``): the hierarchy
    ``serve-dns`` builds, its TLD server alone on UDP, TCP and DoT at ``dot_port(port)``;
    ``READY`` + manifest, then its counters per line read, until stdin closes."""
    import asyncio

    from sim.accounting import dot_port
    from sim.build.hierarchy import build_hierarchy, dot_setup
    from sim.sockets.server import ServerEndpoint
    from topologies.synthetic import synthetic

    hierarchy = build_hierarchy(synthetic(n_tools=tools, branching=4, depth=2, seed=seed,
                                          n_orgs=1, n_queries=5))
    address = next(a for a, z in hierarchy.zone_of.items() if z == "tools.")
    server, dot = hierarchy.servers[address], dot_setup(seed)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        ep = ServerEndpoint(server, (address, port), tls=dot.server_context(),
                            tls_port=dot_port(port))
        await ep.start()
        manifest = {"port": port, "servers": [{"zone": "tools.", "address": address}],
                    "dot": {"port": dot_port(port), "ca_pem": dot.ca.cert_pem}}
        print("READY " + json.dumps(manifest), flush=True)
        reader = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        while await reader.readline():
            print(json.dumps({"servers": dict(server.stats.counts)}), flush=True)
        ep.close()
        await asyncio.sleep(0.1)

    asyncio.run(main())


def show(result: dict) -> None:
    """Print the figures."""
    print(result["machine"])
    print(f"fresh DoT clients ({result['clients']} per phase, one after another) at the TLD "
          f"server's DoT port while {result['held']} connections are held")
    rows = [{"tree": side["tree"], **row} for side in result["sides"]
            for row in side["phases"]]
    table(rows)
    for side in result["sides"]:
        if side.get("note"):
            print(f"{side['tree']}: {side['note']}")
        print(f"{side['tree']}: server TLS/TCP counters:",
              json.dumps(side["counters"], sort_keys=True))
