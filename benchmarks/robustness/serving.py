"""The served DNS hierarchy the DNS probes attack, in a child process, and the client
helpers they share: a stub query with the intent option, one query and its answer, RSS."""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = "benchmarks/bench_robustness.py"  # its hidden ``serve-dns`` command runs serve_dns


def add_dns_options(dns: argparse.ArgumentParser) -> None:
    """The served hierarchy's options, shared by every DNS probe."""
    dns.add_argument("--port", type=int, default=25353)
    dns.add_argument("--tools", type=int, default=2000)
    dns.add_argument("--seed", type=int, default=5)
    dns.add_argument("--resolver", default="127.0.53.1", help="the resolver's address")
    dns.add_argument("--cache-bytes", type=int, default=32 * 2**20,
                     help="the resolver's cache bound, bytes (estimated)")
    dns.add_argument("--tcp-per-server", type=int, default=256,
                     help="TCP connections each server (and the resolver) keeps")
    dns.add_argument("--rogue", default="127.66.6.6", help="the forged name server's address")
    dns.add_argument("--server-cache-bytes", type=int, default=16 * 2**20,
                     help="each server's packet cache, bytes (0: none)")
    dns.add_argument("--dot", action="store_true",
                     help="the servers and the resolver also serve DNS over TLS (port "
                     "--port + 800), with a CA made at start (its certificate in the manifest)")
    dns.add_argument("--allow-transfer", metavar="ADDR",
                     help="the servers allow zone transfers (AXFR) from this address")
    dns.add_argument("--before", type=Path, metavar="TREE",
                     help="also serve from TREE (a checkout of an earlier commit, e.g. "
                     "`git worktree add /tmp/before <commit>`) and print its figures beside "
                     "this tree's, where the probe supports it")


def serve_dns(args: argparse.Namespace) -> int:
    """The DNS server process: a served hierarchy and resolver (``tooldns serve``'s
    :class:`sim.sockets.hierarchy.LiveHierarchy`) with the given bounds. Prints ``READY`` and the
    manifest; on each line read from stdin prints its counters and RSS as one JSON line;
    stops when stdin closes."""
    import asyncio

    from sim.build.hierarchy import build_hierarchy, dot_setup
    from sim.sockets.hierarchy import LiveHierarchy
    from sim.sockets.tcp import TcpLimits
    from topologies.synthetic import synthetic

    ns = synthetic(n_tools=args.tools, branching=4, depth=2, seed=args.seed, n_orgs=1,
                   n_queries=5)
    packets = args.server_cache_bytes  # 0: the servers keep no packet cache
    hierarchy = build_hierarchy(ns, packet_cache=4096 if packets else 0,
                                packet_cache_bytes=packets or 4096)
    live = LiveHierarchy(hierarchy, port=args.port,
                         resolver_address=args.resolver, cache_max_bytes=args.cache_bytes,
                         tcp_limits=TcpLimits(per_listener=args.tcp_per_server),
                         dot=dot_setup(args.seed) if getattr(args, "dot", False) else None,
                         allow_transfer=[args.allow_transfer] if args.allow_transfer else None)

    def counters() -> dict:
        ep = live.resolver
        servers: dict[str, int] = {}
        for e in live.endpoints:
            for k, v in e.server.stats.counts.items():
                servers[k] = servers.get(k, 0) + v
        node = ep.resolver
        store = node.caches.store
        cached = [e.value for (table, _), e in store._items.items() if table == "servers"]
        return {"rss": rss(os.getpid()), "store_bytes": store.bytes,
                "poisoned": int(any(args.rogue in repr(v) for v in cached)),
                "store_entries": len(store), "evictions": store.evictions,
                "kept_results": len(ep.results), "adapter": dict(ep.stats),
                "resolver": dict(node.stats), "servers": servers,
                "upstream_open": len(ep._upstream),
                "tcp_open": {"servers": sum(len(e._conns) for e in live.endpoints),
                             "resolver": len(ep._conns),
                             "busiest server": max(len(e._conns) for e in live.endpoints),
                             "tls": sum(len(e._tls_conns) for e in live.endpoints)}}

    async def main() -> None:
        loop = asyncio.get_running_loop()
        await live.start()
        manifest = live.manifest()
        if live.dot is not None:  # the clients verify the servers' certificate with it
            manifest["dot"]["ca_pem"] = live.dot.ca.cert_pem
        print("READY " + json.dumps(manifest), flush=True)
        reader = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        while await reader.readline():
            print(json.dumps(counters()), flush=True)
        live.close()
        await asyncio.sleep(0.1)  # aborted connections' handlers end before the loop does

    asyncio.run(main())
    return 0


def rss(pid: int) -> int:
    """Resident set size of a process, bytes (/proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


class Child:
    """A serving child process speaking ``serve-dns``'s protocol: a ``READY`` line, then one
    JSON line of counters per line written to its stdin; it stops when stdin closes."""

    proc: subprocess.Popen

    def counters(self) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


class DnsServer(Child):
    """``serve-dns`` in a child process: its manifest, counters on demand, alive or not."""

    def __init__(self, args: argparse.Namespace, cache_bytes: int | None = None,
                 server_cache_bytes: int | None = None, tree: Path | None = None,
                 dot: bool = False, stderr: Path | None = None,
                 allow_transfer: str | None = None) -> None:
        """``tree``: serve from another checkout (its own ``serve-dns``), for before/after;
        ``dot``: DNS over TLS too (``serve-dns --dot``); ``stderr``: a file the child's
        stderr goes to (else it inherits this process's); ``allow_transfer``: an address
        the servers allow zone transfers from (``serve-dns --allow-transfer``)."""
        root = Path(tree or ROOT).resolve()
        cmd = [sys.executable, str(root / SCRIPT), "serve-dns", "--port", str(args.port),
               "--tools", str(args.tools), "--seed", str(args.seed),
               "--resolver", args.resolver,
               "--cache-bytes", str(cache_bytes or args.cache_bytes), "--rogue", args.rogue,
               "--tcp-per-server", str(args.tcp_per_server),
               "--server-cache-bytes", str(args.server_cache_bytes if server_cache_bytes is None
                                           else server_cache_bytes)] + (["--dot"] if dot else [])
        cmd += ["--allow-transfer", allow_transfer] if allow_transfer else []
        err = None if stderr is None else stderr.open("wb")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, cwd=root, stderr=err)
        if err is not None:
            err.close()  # the child has its own copy
        line = self.proc.stdout.readline()
        if not line.startswith("READY "):
            raise SystemExit(f"serve-dns did not start: {line!r}")
        self.manifest = json.loads(line[6:])
        self.port = self.manifest["port"]
        self.resolver = (self.manifest["resolver"]["address"], self.port)

    def server(self, zone: str) -> tuple[str, int]:
        return next((m["address"], self.port) for m in self.manifest["servers"]
                    if m["zone"] == zone)



def stub_query(intent: str, k: int = 2, qid: int = 1, zone: str = "tools.") -> bytes:
    from dnslib import QTYPE, DNSHeader, DNSQuestion, DNSRecord

    from nodes.dns.wire import DEFAULT_OPTION_CODE, Intent, cursor_name, opt_record

    q = DNSRecord(DNSHeader(id=qid, rd=1))
    q.add_question(DNSQuestion(cursor_name("mcp", zone), QTYPE.SRV))
    q.add_ar(opt_record(Intent(intent, k=k), DEFAULT_OPTION_CODE))
    return q.pack()


def ask(addr: tuple[str, int], wire: bytes, timeout: float = 5.0, tcp: bool = False
         ) -> bytes | None:
    """One query, one answer (None on timeout or a closed connection)."""
    try:
        if tcp:
            with socket.create_connection(addr, timeout=timeout) as s:
                s.sendall(len(wire).to_bytes(2, "big") + wire)
                head = s.recv(2, socket.MSG_WAITALL)
                if len(head) < 2:
                    return None
                return s.recv(int.from_bytes(head, "big"), socket.MSG_WAITALL)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.settimeout(timeout)
            s.sendto(wire, addr)
            while True:
                data, _ = s.recvfrom(65535)
                if data[:2] == wire[:2]:
                    return data
    except OSError:
        return None
