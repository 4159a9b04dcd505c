"""Robustness of the testbed's servers under hostile input, measured on loopback.

Subcommands (each ``cmd_<name>(args) -> dict`` returns its figures; ``main`` prints them
as a table and, with ``--json``, writes them):

``http``
    Starts the two HTTP registries (AgentDNS at ``--address``, ANS at the next address) in
    a **separate process**, exactly as the live engine serves them (``sim.engines.live.
    start_registry``, real TCP on 127.0.0.0/8, a token secret from ``secrets``), then fires
    malformed and hostile requests at them from this process over blocking sockets: a
    request split across reads (two pieces, and byte by byte), slowloris (one header byte
    every 0.2 s) with a well-formed request served meanwhile, bodies over the limit
    (``Content-Length`` and chunked), oversized headers, ``"limit": 1e400``, JSON nested
    10^5 deep, a never-issued bearer token, a rogue registration with a search token,
    ANS registrations unsigned / signed by a foreign CA / signed properly, an EOF in the
    middle of a request, an idle keep-alive connection, connections over the cap, a
    client that never reads its answers (write deadline) and a handler exception
    (injected by the server process's ``--inject-fault`` wrapper on one path only, so the
    500 path is reachable; the registries themselves have no known input that raises).

    Per case: the status expected and the one received (``close`` = the server closed
    without answering, ``reset`` = RST, ``timeout`` = nothing within the client's wait),
    the time from just before the case's last byte was sent (from its first byte for
    slowloris, from the previous answer for the idle connection, from the connect for
    the capped one) to the answer or close, whether the server process is still alive,
    and the status of a fresh well-formed request sent right after the case
    (``health``). The server process's
    counters (``RegistryServer.stats`` and the applications' ``stats``) are printed at
    the end. Every figure is measured in this run; nothing is assumed.

``fuzz`` / ``spoof`` / ``memory`` / ``tcp`` (DNS)
    Each serves a synthetic hierarchy and its resolver
    (``sim.sockets.hierarchy.LiveHierarchy``, what ``tooldns serve`` runs) in a **separate
    process** (``serve-dns``) and attacks it from this one over loopback:

    * ``fuzz`` — ``--packets`` mutated queries (bit flips, truncations, splices, random
      bytes) at servers and resolver; crashes, counters, and whether it answers after;
    * ``spoof`` — forged answers (raw sockets, root): every ID at the listening port, every
      wrong ID at a pending query's own port from the server's address, the right ID from
      another address, another question; the control (everything right) must be accepted;
      then the blind attack after restarts that poisoned the old resolver;
    * ``memory`` — ``--intents`` distinct intents: the serving process's RSS growth after
      a warm-up against the resolver's cache bound (``--bounds``);
    * ``tcp`` — ``--held`` silent TCP connections, then other clients' UDP and TCP
      queries: answered and how fast, and the servers' TCP counters.

Run
    python3 benchmarks/bench_robustness.py http
    sudo python3 benchmarks/bench_robustness.py spoof
    python3 benchmarks/bench_robustness.py fuzz --packets 100000
    python3 benchmarks/bench_robustness.py memory --intents 100000 --bounds 16777216 67108864
    python3 benchmarks/bench_robustness.py tcp --held 10000
    python3 benchmarks/bench_robustness.py http --deadline 1 --json /tmp/http.json
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import platform
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from nodes.registry.client import ans_registration  # noqa: E402
from nodes.registry.http import ClientConnection  # noqa: E402
from nodes.registry.pki import canonical, issue, make_ca  # noqa: E402

SEARCH = "/api/v1/discovery/search"
HOST = "registry.test"
FAULT_PATH = "/__bench_fault"


# ------------------------------------------------------------------------ http: server


def serve_http(args: argparse.Namespace) -> int:
    """The server process: both registries on loopback until stdin closes, then their
    counters as one JSON line on stdout."""
    import asyncio
    import secrets

    from nodes.registry.http import Limits
    from nodes.scoring import make_scorer
    from sim.build.registries import build_registry
    from sim.engines.live import start_registry
    from topologies.synthetic import synthetic

    ns = synthetic(n_tools=args.tools, branching=4, depth=2, seed=args.seed, n_orgs=1,
                   n_queries=5)
    limits = Limits(max_header=args.max_header, max_body=args.max_body,
                    request_timeout=args.deadline, idle_timeout=args.idle)
    a, b = args.address.rsplit(".", 1)
    ans_address = f"{a}.{int(b) + 1}"
    setups = {
        "agentdns": build_registry("agentdns", ns, make_scorer("bm25"), args.seed,
                                   address=args.address, port=0, limits=limits,
                                   max_connections=args.max_connections,
                                   secret=secrets.token_bytes(32),
                                   tokens={args.org_token: "org:bench"}),
        "ans": build_registry("ans", ns, make_scorer("bm25"), args.seed, address=ans_address,
                              port=0, limits=limits, max_connections=args.max_connections),
    }
    apps = {k: s.server.app for k, s in setups.items()}
    if args.inject_fault:  # one path raises inside the handler; everything else is as is
        app = apps["agentdns"]

        def faulty(req, now):  # type: ignore[no-untyped-def]
            if req.target == FAULT_PATH:
                raise RuntimeError("fault injected by bench_robustness")
            return app(req, now)

        setups["agentdns"].server.app = faulty

    async def main() -> dict:
        loop = asyncio.get_running_loop()
        origin = loop.time()
        conns: set = set()
        servers = {k: await start_registry(s, tls=False, now=lambda: loop.time() - origin,
                                           write_timeout=args.write_timeout, conns=conns)
                   for k, s in setups.items()}
        ports = {k: srv.sockets[0].getsockname()[1] for k, srv in servers.items()}
        print("READY " + json.dumps({"agentdns": [args.address, ports["agentdns"]],
                                     "ans": [ans_address, ports["ans"]],
                                     "token": setups["agentdns"].token}), flush=True)
        await loop.run_in_executor(None, sys.stdin.read)  # until the bench closes stdin
        for srv in servers.values():
            srv.close()
        for writer in list(conns):  # let the handlers end before the loop does
            writer.transport.abort()
        await asyncio.sleep(0.1)
        return {k: {"server": dict(s.server.stats), "app": dict(apps[k].stats)}
                for k, s in setups.items()}

    print(json.dumps(asyncio.run(main())), flush=True)
    return 0


# ------------------------------------------------------------------------ http: client


def _connect(addr: tuple[str, int], timeout: float) -> socket.socket:
    sock = socket.create_connection(addr, timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _status_of(data: bytes) -> int | None:
    if data.startswith(b"HTTP/1."):
        try:
            return int(data.split(b" ", 2)[1])
        except (IndexError, ValueError):
            return None
    return None


def _read_answer(sock: socket.socket, wait: float, start: float | None = None,
                 ) -> tuple[str, float, bytes]:
    """Wait for the first bytes of an answer (or a close): (what, seconds since ``start``
    (default: now), bytes)."""
    start = time.perf_counter() if start is None else start
    sock.settimeout(wait)
    try:
        data = sock.recv(65536)
    except TimeoutError:
        return "timeout", time.perf_counter() - start, b""
    except ConnectionResetError:
        return "reset", time.perf_counter() - start, b""
    took = time.perf_counter() - start
    if not data:
        return "close", took, b""
    while b"\r\n\r\n" not in data:
        more = sock.recv(65536)
        if not more:
            break
        data += more
    status = _status_of(data)
    return (str(status) if status is not None else "junk"), took, data


def _request(method: str, target: str, body: bytes = b"", token: str | None = None,
             extra: list[tuple[str, str]] | None = None) -> bytes:
    headers = [("Authorization", f"Bearer {token}")] if token else []
    headers += extra or []
    if body:
        headers.append(("Content-Type", "application/json"))
    return ClientConnection(HOST).request(method, target, headers, body)


def _send_pieces(sock: socket.socket, pieces: list[bytes], pause: float) -> float:
    """Send ``pieces`` ``pause`` s apart; the time just before the last one left."""
    last = time.perf_counter()
    for i, piece in enumerate(pieces):
        last = time.perf_counter()
        try:
            sock.sendall(piece)
        except (BrokenPipeError, ConnectionResetError):
            break  # the server answered and closed before taking everything
        if pause and i < len(pieces) - 1:
            time.sleep(pause)
    return last


def _one(addr, pieces: list[bytes], pause: float = 0.0, wait: float = 30.0,
         ) -> tuple[str, float]:
    """One connection: send ``pieces``, read the answer. Time from just before the last
    piece was sent (so a client descheduled after sending cannot shrink it)."""
    with _connect(addr, wait) as sock:
        last = _send_pieces(sock, pieces, pause)
        what, took, _ = _read_answer(sock, wait, start=last)
        return what, took


def cmd_http(args: argparse.Namespace) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "_http-server",
           "--address", args.address, "--seed", str(args.seed), "--tools", str(args.tools),
           "--deadline", str(args.deadline), "--idle", str(args.idle),
           "--write-timeout", str(args.write_timeout), "--max-body", str(args.max_body),
           "--max-header", str(args.max_header),
           "--max-connections", str(args.max_connections), "--org-token", args.org_token,
           "--inject-fault"]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            cwd=ROOT)
    assert proc.stdout is not None and proc.stdin is not None
    line = proc.stdout.readline()
    if not line.startswith("READY "):
        proc.kill()
        raise SystemExit(f"the registry process did not start: {line!r}")
    ready = json.loads(line[6:])
    start_s = time.perf_counter() - started
    adns, ans = tuple(ready["agentdns"]), tuple(ready["ans"])
    token = ready["token"]
    ok_search = _request("POST", SEARCH, canonical({"query": "weather forecast", "limit": 3}),
                         token)

    def health() -> str:
        try:
            return _one(adns, [ok_search], wait=30.0)[0]
        except OSError as exc:
            return type(exc).__name__

    rows: list[dict] = []

    def case(name: str, expected: str, run: Callable[[], tuple[str, float]],
             note: str = "") -> None:
        try:
            got, took = run()
        except OSError as exc:
            got, took = type(exc).__name__, float("nan")
        rows.append({"case": name, "expected": expected, "got": got,
                     "ms": round(took * 1000, 2), "process_up": proc.poll() is None,
                     "health": health(), "note": note})

    ca = make_ca(args.seed)
    provider = issue(ca, args.seed, "zyxcorp")
    fields = {"agentID": "quasar-scope", "agentCapability": "astro--science",
              "protocol": "mcp", "provider": "zyxcorp", "description": "quasar redshifts",
              "address": "127.64.9.9", "port": 8443}
    big_head = (b"GET /v1/capabilities HTTP/1.1\r\nHost: r\r\nX-Pad: "
                + b"p" * (4 * args.max_header) + b"\r\n\r\n")
    deep = b"[" * 100_000 + b"]" * 100_000

    case("baseline search", "200", lambda: _one(adns, [ok_search]))
    case("split in two reads (0.2 s apart)", "200",
         lambda: _one(adns, [ok_search[:20], ok_search[20:]], pause=0.2))
    case("split byte by byte (1 ms apart)", "200",
         lambda: _one(adns, [ok_search[i:i + 1] for i in range(len(ok_search))], pause=0.001))

    def slowloris() -> tuple[str, float]:
        result: dict[str, tuple[str, float]] = {}
        stop = threading.Event()
        sock = _connect(adns, 60.0)
        first = time.perf_counter()
        sock.sendall(b"POST /api/v1/discovery/search HTTP/1.1\r\nHost: r\r\n")

        def drip() -> None:
            try:
                while not stop.is_set():
                    sock.sendall(b"X")
                    time.sleep(0.2)
            except OSError:
                pass

        def reader() -> None:
            what, _, _ = _read_answer(sock, args.deadline + 30.0)
            result["slow"] = (what, time.perf_counter() - first)
            stop.set()

        threads = [threading.Thread(target=drip), threading.Thread(target=reader)]
        for t in threads:
            t.start()
        time.sleep(min(0.5, args.deadline / 3))
        result["other"] = _one(adns, [ok_search])
        for t in threads:
            t.join()
        sock.close()
        rows.append({"case": "  well-formed request during slowloris", "expected": "200",
                     "got": result["other"][0], "ms": round(result["other"][1] * 1000, 2),
                     "process_up": proc.poll() is None, "health": "-", "note": ""})
        return result["slow"]

    case("slowloris (1 header byte / 0.2 s)", "408 or close", slowloris,
         f"deadline {args.deadline:g} s, timed from the first byte")
    case("body over the limit (Content-Length, no body sent)", "413",
         lambda: _one(adns, [b"POST " + SEARCH.encode() + b" HTTP/1.1\r\nHost: r\r\n"
                             b"Authorization: Bearer " + token.encode() +
                             b"\r\nContent-Length: 10000000\r\n\r\n"]))

    def chunked() -> tuple[str, float]:
        head = (b"POST " + SEARCH.encode() + b" HTTP/1.1\r\nHost: r\r\nAuthorization: Bearer "
                + token.encode() + b"\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"4000\r\n" + b"x" * 0x4000 + b"\r\n"
        n = args.max_body // 0x4000 + 1
        return _one(adns, [head + chunk * n])

    case("chunked body over the limit", "413", chunked)
    case(f"header block {4 * args.max_header // 1024} KiB (in one send)", "431",
         lambda: _one(ans, [big_head]))
    case("header block trickled past the limit", "431",
         lambda: _one(ans, [big_head[i:i + 8192] for i in range(0, len(big_head), 8192)],
                      pause=0.01))
    case('"limit": 1e400', "400", lambda: _one(adns, [_request(
        "POST", SEARCH, b'{"query":"x","limit":1e400}', token)]))
    case("JSON nested 10^5 deep (200 kB body)", "400" if len(deep) <= args.max_body else "413",
         lambda: _one(adns, [_request("POST", SEARCH, deep, token)]),
         "" if len(deep) <= args.max_body else "over --max-body: refused before parsing")
    case("garbage request line", "400", lambda: _one(adns, [b"\x00\x01GARBAGE\r\n\r\n"]))
    case("never-issued token (right shape)", "401", lambda: _one(adns, [_request(
        "POST", SEARCH, canonical({"query": "x", "limit": 1}), "agent_" + "T" * 43)]))
    case("rogue registration with a search token", "403", lambda: _one(adns, [_request(
        "POST", "/api/v1/services/?organization_id=1", canonical({
            "name": "Weather Pro", "category": "weather", "description": "weather forecast",
            "endpoint_url": "https://203.0.113.9/"}), token)]))
    case("ANS registration, unsigned", "401", lambda: _one(ans, [_request(
        "POST", "/v1/agents", canonical({**fields, "timestamp": 0.0}))]))
    stranger = issue(make_ca(args.seed + 1), args.seed + 1, "zyxcorp")
    case("ANS registration, foreign CA", "401", lambda: _one(ans, [_request(
        "POST", "/v1/agents", ans_registration(stranger, fields, 0.0))]))
    now = time.perf_counter() - started  # server node time starts at its own start-up
    case("ANS registration, signed by the provider", "201", lambda: _one(ans, [_request(
        "POST", "/v1/agents", ans_registration(provider, fields, now))]),
        "timestamp = time since the server started (±300 s window)")

    def fault() -> tuple[str, float]:
        with _connect(adns, 30.0) as sock:
            start = time.perf_counter()
            sock.sendall(_request("GET", FAULT_PATH, token=token))
            what, took, _ = _read_answer(sock, 30.0, start)
            sock.sendall(ok_search)  # the same connection, next request
            again, _, _ = _read_answer(sock, 30.0)
            return f"{what}, then {again}", took

    case("handler exception (injected)", "500, then 200", fault, "same connection reused")

    def eof_mid_request() -> tuple[str, float]:
        with _connect(adns, 30.0) as sock:
            sock.sendall(ok_search[:-5])
            start = time.perf_counter()
            sock.shutdown(socket.SHUT_WR)
            what, took, _ = _read_answer(sock, 30.0, start)
            return what, took

    case("EOF in the middle of a request", "close", eof_mid_request)

    def idle() -> tuple[str, float]:
        with _connect(adns, 30.0) as sock:
            sock.sendall(ok_search)
            _read_answer(sock, 30.0)
            answered = time.perf_counter()  # the idle time starts about here
            time.sleep(0.05)  # rest of the body, if any, has arrived
            sock.settimeout(0.01)
            try:
                while sock.recv(65536):
                    pass
            except TimeoutError:
                pass
            what, took, _ = _read_answer(sock, args.idle + 30.0, answered)
            return what, took

    case("idle keep-alive connection", "close", idle, f"idle timeout {args.idle:g} s")

    def over_cap() -> tuple[str, float]:
        held = [_connect(adns, 30.0) for _ in range(args.max_connections)]
        try:
            time.sleep(0.2)
            start = time.perf_counter()
            with _connect(adns, 30.0) as sock:
                what, took, _ = _read_answer(sock, 30.0, start)
                return what, took
        finally:
            for s in held:
                s.close()

    case(f"connection {args.max_connections + 1} (cap {args.max_connections})", "503",
         over_cap)

    def non_reader() -> tuple[str, float]:
        sock = _connect(adns, 30.0)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        many = _request("POST", SEARCH, canonical({"query": "weather", "limit": 100}), token)
        sent_until = time.perf_counter()
        try:
            sock.settimeout(args.write_timeout + 20.0)
            for _ in range(2000):  # pipelined, never read: the server's writes back up
                sock.sendall(many)
                sent_until = time.perf_counter()
        except OSError:
            pass
        # never read; watch for the server's reset (it aborts after the write deadline)
        # through the socket's pending error, which does not consume the queued answers
        end = time.perf_counter() + args.write_timeout + 30.0
        got = "timeout"
        while time.perf_counter() < end:
            err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                got = "reset" if err == errno.ECONNRESET else errno.errorcode.get(err, str(err))
                break
            time.sleep(0.02)
        took = time.perf_counter() - sent_until
        sock.close()
        return got, took

    case("client never reads (write deadline)", "reset", non_reader,
         f"write timeout {args.write_timeout:g} s; time from the last byte it could send")

    proc.stdin.close()
    out = proc.stdout.read()
    proc.wait(timeout=30)
    stats = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
    return {"kind": "http", "machine": f"{platform.node()} {platform.machine()} "
            f"{os.cpu_count()} CPUs, Python {platform.python_version()}",
            "server_start_s": round(start_s, 2),
            "settings": {"deadline_s": args.deadline, "idle_s": args.idle,
                         "write_timeout_s": args.write_timeout, "max_body": args.max_body,
                         "max_header": args.max_header,
                         "max_connections": args.max_connections},
            "rows": rows, "stats": stats, "server_exit": proc.returncode}


# ------------------------------------------------------------------------ dns: server


def serve_dns(args: argparse.Namespace) -> int:
    """The DNS server process: a served hierarchy and resolver (``tooldns serve``'s
    :class:`sim.sockets.hierarchy.LiveHierarchy`) with the given bounds. Prints ``READY`` and the
    manifest; on each line read from stdin prints its counters and RSS as one JSON line;
    stops when stdin closes."""
    import asyncio

    from sim.build.hierarchy import build_hierarchy
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
                         tcp_limits=TcpLimits(per_listener=args.tcp_per_server))

    def counters() -> dict:
        ep = live.resolver
        servers: dict[str, int] = {}
        for e in live.endpoints:
            for k, v in e.server.stats.counts.items():
                servers[k] = servers.get(k, 0) + v
        node = ep.resolver
        store = node.caches.store
        cached = [e.value for (table, _), e in store._items.items() if table == "servers"]
        return {"rss": _rss(os.getpid()), "store_bytes": store.bytes,
                "poisoned": int(any(args.rogue in repr(v) for v in cached)),
                "store_entries": len(store), "evictions": store.evictions,
                "kept_results": len(ep.results), "adapter": dict(ep.stats),
                "resolver": dict(node.stats), "servers": servers,
                "upstream_open": len(ep._upstream)}

    async def main() -> None:
        loop = asyncio.get_running_loop()
        await live.start()
        print("READY " + json.dumps(live.manifest()), flush=True)
        reader = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        while await reader.readline():
            print(json.dumps(counters()), flush=True)
        live.close()
        await asyncio.sleep(0.1)  # aborted connections' handlers end before the loop does

    asyncio.run(main())
    return 0


def _rss(pid: int) -> int:
    """Resident set size of a process, bytes (/proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


class DnsServer:
    """``serve-dns`` in a child process: its manifest, counters on demand, alive or not."""

    def __init__(self, args: argparse.Namespace, cache_bytes: int | None = None,
                 server_cache_bytes: int | None = None) -> None:
        cmd = [sys.executable, __file__, "serve-dns", "--port", str(args.port),
               "--tools", str(args.tools), "--seed", str(args.seed),
               "--resolver", args.resolver,
               "--cache-bytes", str(cache_bytes or args.cache_bytes), "--rogue", args.rogue,
               "--tcp-per-server", str(args.tcp_per_server),
               "--server-cache-bytes", str(args.server_cache_bytes if server_cache_bytes is None
                                           else server_cache_bytes)]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("READY "):
            raise SystemExit(f"serve-dns did not start: {line!r}")
        self.manifest = json.loads(line[6:])
        self.port = self.manifest["port"]
        self.resolver = (self.manifest["resolver"]["address"], self.port)

    def server(self, zone: str) -> tuple[str, int]:
        return next((m["address"], self.port) for m in self.manifest["servers"]
                    if m["zone"] == zone)

    def counters(self) -> dict:
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def _stub_query(intent: str, k: int = 2, qid: int = 1, zone: str = "tools.") -> bytes:
    from dnslib import QTYPE, DNSHeader, DNSQuestion, DNSRecord

    from nodes.dns.wire import DEFAULT_OPTION_CODE, Intent, cursor_name, opt_record

    q = DNSRecord(DNSHeader(id=qid, rd=1))
    q.add_question(DNSQuestion(cursor_name("mcp", zone), QTYPE.SRV))
    q.add_ar(opt_record(Intent(intent, k=k), DEFAULT_OPTION_CODE))
    return q.pack()


def _ask(addr: tuple[str, int], wire: bytes, timeout: float = 5.0, tcp: bool = False
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


# ------------------------------------------------------------------------ dns: fuzz


def cmd_fuzz(args: argparse.Namespace) -> dict:
    """``--packets`` mutated queries (bit flips, truncation, splices, random bytes) at the
    servers and the resolver of a served hierarchy; then whether it still answers."""
    import random

    rng = random.Random(args.seed)
    srv = DnsServer(args)
    try:
        targets = [(m["address"], srv.port) for m in srv.manifest["servers"][:8]]
        targets.append(srv.resolver)
        seeds = [_stub_query(f"weather forecast {i}", qid=i + 1) for i in range(20)]
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
        answered = _ask(srv.resolver, _stub_query("weather forecast", qid=4242), 10.0)
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


# ------------------------------------------------------------------------ dns: spoofing


def _raw_udp(sock: socket.socket, src: tuple[str, int], dst: tuple[str, int],
             payload: bytes) -> None:
    """One UDP datagram with a forged source address, through a raw socket (root)."""
    udp = struct.pack("!HHHH", src[1], dst[1], 8 + len(payload), 0) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, socket.IPPROTO_UDP, 0,
                     socket.inet_aton(src[0]), socket.inet_aton(dst[0]))
    sock.sendto(ip + udp, (dst[0], 0))


def _forged_referral(qid: int, qname: str, rogue: str) -> bytes:
    """A referral for ``tools.`` to a name server at ``rogue``, as an attacker forges it."""
    from dnslib import NS, QTYPE, RR, A, DNSHeader, DNSQuestion, DNSRecord

    m = DNSRecord(DNSHeader(id=qid, qr=1, aa=1))
    m.add_question(DNSQuestion(qname, QTYPE.SRV))
    m.add_auth(RR("tools.", QTYPE.NS, rdata=NS("ns.evil.tools."), ttl=86_400))
    m.add_ar(RR("ns.evil.tools.", QTYPE.A, rdata=A(rogue), ttl=86_400))
    return m.pack()


def cmd_spoof(args: argparse.Namespace) -> dict:
    """Forged answers against the live resolver; accepted forgeries are counted.

    1. Targeted (one query held pending at a root that never answers; raw sockets forge
       the root's own address): every ID at the resolver's listening port; every wrong ID
       at the query's own source port; the right ID from another address; the right ID,
       port and address with another question; then the control, everything right.
    2. Blind after restart (the original attack): ``--restarts`` fresh resolvers, each
       sprayed right after start with referrals for the IDs the old fixed seed produced,
       at the listening port and ``--ports`` guessed ports, while a stub asks; a walk is
       poisoned if the rogue address reaches the resolver's cache.
    """
    import asyncio
    import random

    if os.geteuid() != 0:
        return {"kind": "spoof",
                "skipped": "forging source addresses needs a raw socket (run as root)"}
    raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    rows: list[dict] = []

    async def targeted() -> None:
        from nodes.resolver.config import ResolverConfig
        from nodes.resolver.core import RecursiveResolver
        from nodes.resolver.types import Discovery
        from sim.sockets.node import NodeEndpoint

        root = ("127.0.9.9", args.port)  # nothing listens there: the query stays pending
        me = "127.0.53.9"
        config = ResolverConfig(dns_port=args.port, timeout=600.0, max_attempts=1)
        resolver = RecursiveResolver([root[0]], random.Random(0), config)
        ep = NodeEndpoint(resolver, (me, args.port), source_ip=me)
        await ep.start()
        task = asyncio.get_running_loop().create_task(ep.discover(Discovery("weather")))
        await asyncio.sleep(0.2)
        ((qid, pending),) = resolver._pending.items()
        (port,) = ep._upstream.ports
        qname = pending.task.asks[0].qname

        async def spray(name: str, packets: list[tuple[tuple, tuple, bytes]]) -> None:
            before = resolver.is_pending(qid)
            t0 = time.perf_counter()
            for i, (src, dst, data) in enumerate(packets, 1):
                _raw_udp(raw, src, dst, data)
                if i % 32 == 0:
                    await asyncio.sleep(0.002)  # the resolver reads as a real one would
            await asyncio.sleep(0.5)
            accepted = int(before and not resolver.is_pending(qid))
            rows.append({"case": name, "forged": len(packets), "accepted": accepted,
                         "seconds": round(time.perf_counter() - t0, 1),
                         "counters": {k: v for k, v in {**ep.stats, **resolver.stats}.items()
                                      if k in ("response_on_listen",
                                               "upstream_unexpected_answer",
                                               "mismatched_question")}})

        ids = range(1, 65536)
        await spray("every ID at the listening port",
                    [(root, (me, args.port), _forged_referral(i, qname, args.rogue))
                     for i in ids])
        await spray("every wrong ID at the query's port",
                    [(root, (me, port), _forged_referral(i, qname, args.rogue))
                     for i in ids if i != qid])
        await spray("right ID and port, other source",
                    [(("127.0.9.8", args.port), (me, port),
                      _forged_referral(qid, qname, args.rogue))])
        await spray("right ID, port, source; other question",
                    [(root, (me, port), _forged_referral(qid, "_mcp._tcp._evil.tools.",
                                                         args.rogue))])
        await spray("control: everything right (an on-path attacker)",
                    [(root, (me, port), _forged_referral(qid, qname, args.rogue))])
        task.cancel()
        ep.close()

    asyncio.run(targeted())
    old = random.Random(0)  # the IDs the resolver used to send after every restart
    old_ids = [old.randrange(1, 65536) for _ in range(args.ids)]
    rng = random.Random(args.seed)
    poisoned, answered = 0, 0
    sent = 0
    for _ in range(args.restarts):
        srv = DnsServer(args)
        try:
            me = srv.resolver
            root = (srv.manifest["root_hints"][0], srv.port)
            ports = [me[1], *(rng.randint(1024, 65535) for _ in range(args.ports))]
            stub = threading.Thread(target=_ask, args=(me, _stub_query("weather"), 10.0))
            stub.start()
            for qid in old_ids:
                for p in ports:
                    _raw_udp(raw, root, (me[0], p),
                             _forged_referral(qid, "_mcp._tcp._tools.", args.rogue))
                    sent += 1
            stub.join()
            answered += 1
            poisoned += srv.counters()["poisoned"]
        finally:
            srv.close()
    rows.append({"case": f"blind after restart ({args.restarts} restarts, {args.ids} old-seed "
                         f"IDs x {args.ports + 1} ports)", "forged": sent,
                 "accepted": poisoned, "seconds": None, "counters": {}})
    raw.close()
    control = rows[-2]  # the on-path forgery: accepted, which shows the checks are live
    return {"kind": "spoof", "cases": rows, "control_accepted": control["accepted"],
            "accepted_total": sum(r["accepted"] for r in rows if r is not control)}


# ------------------------------------------------------------------------ dns: memory


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
            sock.sendto(_stub_query(intents[i], qid=qid), addr)
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


def cmd_memory(args: argparse.Namespace) -> dict:
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


# ------------------------------------------------------------------------ dns: tcp


def cmd_tcp(args: argparse.Namespace) -> dict:
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
                w = wire or _stub_query(f"weather forecast {name} {j}", qid=j + 1)
                start = time.perf_counter()
                if _ask(addr, w, 5.0, tcp) is not None:
                    ok += 1
                    times.append(time.perf_counter() - start)
            times.sort()
            rows.append({"probe": name, "answered": f"{ok}/{args.probes}",
                         "median_ms": round(1000 * times[len(times) // 2], 1) if times
                         else None})
        c = srv.counters()
        tcp_counts = {k: v for k, v in {**c["servers"], **c["adapter"]}.items()
                      if k.startswith("tcp_")}
        return {"kind": "tcp", "held": args.held, "connect_failed": failed,
                "open_seconds": round(opened, 1), "alive": srv.alive(), "probes": rows,
                "server_tcp_counters": tcp_counts}
    finally:
        for s in held:
            s.close()
        srv.close()


# ------------------------------------------------------------------------ output


def _ok(row: dict) -> str:
    expected = [e.strip() for e in row["expected"].replace(" or ", ",").split(",")]
    if row["expected"] == "500, then 200":
        return "yes" if row["got"] == "500, then 200" else "NO"
    return "yes" if row["got"] in expected else "NO"


def _rows(rows: list[dict]) -> None:
    """A Markdown table of dicts (same keys)."""
    if not rows:
        return
    head = list(rows[0])
    table = [[json.dumps(r[h]) if isinstance(r[h], dict | list) else str(r[h]) for h in head]
             for r in rows]
    widths = [max(len(x) for x in col) for col in zip(head, *table, strict=True)]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in table:
        print("| " + " | ".join(x.ljust(w) for x, w in zip(row, widths, strict=True)) + " |")


def print_table(result: dict) -> None:
    print(result["machine"])
    if result["kind"] == "fuzz":
        _rows([{k: v for k, v in result.items() if k not in ("kind", "machine")}])
    elif result["kind"] == "spoof":
        if "skipped" in result:
            print("skipped:", result["skipped"])
            return
        _rows(result["cases"])
        print(f"forgeries accepted: {result['accepted_total']} (control, an on-path attacker "
              f"with everything right: {result['control_accepted']})")
    elif result["kind"] == "memory":
        _rows(result["rows"])
    elif result["kind"] == "tcp":
        print(f"{result['held']} connections held open and silent "
              f"({result['connect_failed']} failed to connect), opened in "
              f"{result['open_seconds']} s; server process alive: {result['alive']}")
        _rows(result["probes"])
        print("server TCP counters:", json.dumps(result["server_tcp_counters"], sort_keys=True))
    if result["kind"] == "http":
        s = result["settings"]
        print(f"registry process started in {result['server_start_s']} s; request deadline "
              f"{s['deadline_s']} s, idle {s['idle_s']} s, write {s['write_timeout_s']} s, "
              f"body ≤ {s['max_body']} B, head ≤ {s['max_header']} B, "
              f"≤ {s['max_connections']} connections")
        head = ["case", "expected", "got", "match", "ms to answer", "process up", "health"]
        table = [[r["case"], r["expected"], r["got"], _ok(r), f"{r['ms']:.2f}",
                  "yes" if r["process_up"] else "NO", r["health"]] for r in result["rows"]]
        widths = [max(len(str(x)) for x in col) for col in zip(head, *table, strict=True)]
        line = "| " + " | ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)) + " |"
        print(line)
        print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
        for row in table:
            print("| " + " | ".join(str(x).ljust(w)
                                     for x, w in zip(row, widths, strict=True)) + " |")
        for r in result["rows"]:
            if r["note"]:
                print(f"  {r['case'].strip()}: {r['note']}")
        for name, st in result["stats"].items():
            print(f"{name} counters: server {json.dumps(st['server'], sort_keys=True)}; "
                  f"application {json.dumps(st['app'], sort_keys=True)}")
        print(f"server process exit status after stdin closed: {result['server_exit']}")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    common = argparse.ArgumentParser(add_help=False)  # options of every subcommand
    common.add_argument("--json", help="also write the figures to this JSON file")
    sub = p.add_subparsers(dest="command", required=True)
    h = sub.add_parser("http", parents=[common],
                       help="malformed and hostile HTTP against live registries")
    for q in (h, sub.add_parser("_http-server", help=argparse.SUPPRESS)):
        q.add_argument("--address", default="127.0.82.1",
                       help="AgentDNS address (ANS serves at the next one)")
        q.add_argument("--seed", type=int, default=5)
        q.add_argument("--tools", type=int, default=500)
        q.add_argument("--deadline", type=float, default=2.0,
                       help="request deadline, s (slowloris)")
        q.add_argument("--idle", type=float, default=3.0, help="idle keep-alive timeout, s")
        q.add_argument("--write-timeout", type=float, default=2.0, help="write deadline, s")
        q.add_argument("--max-body", type=int, default=256 * 1024,
                       help="body limit, bytes (the library default is 64 KiB; 256 KiB lets "
                       "the 10^5-deep JSON reach the parser)")
        q.add_argument("--max-header", type=int, default=16 * 1024, help="head limit, bytes")
        q.add_argument("--max-connections", type=int, default=64)
        q.add_argument("--org-token", default="agent_" + "B" * 43,
                       help="an organisation token the server is configured with")
    sub.choices["_http-server"].add_argument("--inject-fault", action="store_true")
    dns = argparse.ArgumentParser(add_help=False)  # the served hierarchy of the DNS commands
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
    sub.add_parser("serve-dns", parents=[dns], help=argparse.SUPPRESS)
    f = sub.add_parser("fuzz", parents=[common, dns],
                       help="mutated UDP queries at the servers and the resolver")
    f.add_argument("--packets", type=int, default=100_000)
    sp = sub.add_parser("spoof", parents=[common, dns],
                        help="forged answers at the resolver (raw sockets: root)")
    sp.add_argument("--restarts", type=int, default=5)
    sp.add_argument("--ids", type=int, default=50, help="old-seed IDs sprayed per restart")
    sp.add_argument("--ports", type=int, default=20, help="guessed ports per restart")
    m = sub.add_parser("memory", parents=[common, dns],
                       help="distinct intents through the resolver: RSS against the bound")
    m.add_argument("--intents", type=int, default=100_000)
    m.add_argument("--warmup", type=int, default=2000)
    m.add_argument("--window", type=int, default=64, help="stub queries in flight")
    m.add_argument("--bounds", type=int, nargs="+", default=[16 * 2**20],
                   help="cache bounds to run, bytes")
    t = sub.add_parser("tcp", parents=[common, dns],
                       help="held TCP connections; are other clients answered")
    t.add_argument("--held", type=int, default=10_000)
    t.add_argument("--probes", type=int, default=20)
    return p


COMMANDS: dict[str, Callable[[argparse.Namespace], dict]] = {
    "http": cmd_http, "fuzz": cmd_fuzz, "spoof": cmd_spoof, "memory": cmd_memory,
    "tcp": cmd_tcp}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "_http-server":
        return serve_http(args)
    if args.command == "serve-dns":
        return serve_dns(args)
    result = COMMANDS[args.command](args)
    result.setdefault("machine", f"{platform.node()} {platform.machine()} {os.cpu_count()} "
                      f"CPUs, Python {platform.python_version()}")
    print_table(result)
    if getattr(args, "json", None):
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
