"""Hostile HTTP against the two live registries (AgentDNS and ANS) served in a separate
process exactly as the live engine serves them; see bench_robustness.py for the cases."""

from __future__ import annotations

import argparse
import errno
import json
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.robustness.serving import ROOT, SCRIPT
from benchmarks.robustness.table import machine, table
from nodes.registry.client import ans_registration
from nodes.registry.http import ClientConnection
from nodes.registry.pki import canonical, issue, make_ca

SEARCH = "/api/v1/discovery/search"
HOST = "registry.test"
FAULT_PATH = "/__bench_fault"


def serve_http(args: argparse.Namespace) -> int:
    """The server process: both registries on loopback until stdin closes, then their
    counters as one JSON line on stdout."""
    import asyncio
    import secrets

    from nodes.registry.http import Limits
    from nodes.scoring import make_scorer
    from sim.build.registries import build_registry
    from sim.sockets.registry import start_registry
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


def run(args: argparse.Namespace) -> dict:
    """This tree's registries; with ``--before TREE`` that tree's first (``before``)."""
    before = _run_side(args, args.before) if args.before else None
    result = _run_side(args, None)
    if before is not None:
        result["before"] = before
    return result


def _run_side(args: argparse.Namespace, tree: Path | None) -> dict:
    root = Path(tree or ROOT).resolve()
    cmd = [sys.executable, str(root / SCRIPT), "_http-server",
           "--address", args.address, "--seed", str(args.seed), "--tools", str(args.tools),
           "--deadline", str(args.deadline), "--idle", str(args.idle),
           "--write-timeout", str(args.write_timeout), "--max-body", str(args.max_body),
           "--max-header", str(args.max_header),
           "--max-connections", str(args.max_connections), "--org-token", args.org_token,
           "--inject-fault"]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            cwd=root)
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
    load: list[dict] = []  # other clients' latency while an attack runs (issue 45)

    def case(name: str, expected: str, run: Callable[[], tuple[str, float]],
             note: str = "", group: str = "hostile") -> None:
        if args.only != "all" and group != args.only:
            return
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

    # issue 45: framing that may smuggle a request, bodies in 1-byte chunks, pipelining
    def smuggling() -> tuple[str, float]:
        with _connect(adns, 30.0) as sock:
            start = time.perf_counter()
            sock.sendall(_smuggled(token))
            return _read_all(sock, 3.0, start)

    case("Content-Length + Transfer-Encoding, a GET behind", "400, close", smuggling,
         "RFC 9112 §6.3; 'open': the server kept the connection", group="issue45")
    chunks = _chunked_head(token) + b"1\r\nx\r\n" * (args.max_body + 1) + b"0\r\n\r\n"
    case(f"body of {args.max_body + 1} 1-byte chunks", "413",
         lambda: _one(adns, [chunks], wait=60.0),
         "time from the last byte sent to the answer", group="issue45")
    if args.only in ("all", "issue45"):
        load.append(_under(f"{args.chunk_floods} bodies of 1-byte chunks at once", adns,
                           ok_search, args, lambda _: _one(adns, [chunks], wait=60.0),
                           args.chunk_floods))
        load.append(_under(f"{args.pipelined} searches pipelined on {args.pipelining} "
                           f"connections, never read", adns, ok_search, args,
                           lambda stop: _pipeline(adns, ok_search, args, stop),
                           args.pipelining))

    proc.stdin.close()
    out = proc.stdout.read()
    proc.wait(timeout=30)
    stats = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
    return {"kind": "http", "machine": machine(), "tree": str(tree or "this tree"),
            "server_start_s": round(start_s, 2), "load": load,
            "settings": {"deadline_s": args.deadline, "idle_s": args.idle,
                         "write_timeout_s": args.write_timeout, "max_body": args.max_body,
                         "max_header": args.max_header,
                         "max_connections": args.max_connections},
            "rows": rows, "stats": stats, "server_exit": proc.returncode}


def _smuggled(token: str) -> bytes:
    """A search framed both ways: as chunked, an empty body then a second request (a GET
    without a token: 401 if it is served); by Content-Length, one request."""
    return (b"POST " + SEARCH.encode() + b" HTTP/1.1\r\nHost: r\r\nAuthorization: Bearer "
            + token.encode() + b"\r\nContent-Length: 48\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"0\r\n\r\nGET /api/v1/smuggled HTTP/1.1\r\nHost: r\r\n\r\n")


def _chunked_head(token: str) -> bytes:
    return (b"POST " + SEARCH.encode() + b" HTTP/1.1\r\nHost: r\r\nAuthorization: Bearer "
            + token.encode() + b"\r\nTransfer-Encoding: chunked\r\n\r\n")


def _read_all(sock: socket.socket, quiet: float, start: float) -> tuple[str, float]:
    """Every answer on the connection until the server closes it (``close``) or stays
    quiet for ``quiet`` s (``open``): their statuses, and the time to the last event."""
    data, end, last = b"", "open", start
    sock.settimeout(quiet)
    try:
        while more := sock.recv(65536):
            data, last = data + more, time.perf_counter()
        end, last = "close", time.perf_counter()
    except TimeoutError:
        pass
    except ConnectionResetError:
        end, last = "reset", time.perf_counter()
    statuses = [m.decode() for m in re.findall(rb"HTTP/1\.[01] (\d{3}) ", data)]
    return ", ".join([*statuses, end]), last - start


def _pipeline(addr: tuple[str, int], request: bytes, args: argparse.Namespace,
              stop: threading.Event) -> tuple[str, float]:
    """``--pipelined`` / ``--pipelining`` searches sent on one connection, never read;
    held until the server resets it ("reset") or the others are done ("held")."""
    with _connect(addr, 30.0) as sock:
        start = time.perf_counter()
        try:
            sock.sendall(request * (args.pipelined // args.pipelining))
        except OSError:
            return "reset", time.perf_counter() - start
        while not stop.wait(0.05):
            if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                return "reset", time.perf_counter() - start
        return "held", time.perf_counter() - start


def _under(name: str, addr: tuple[str, int], request: bytes, args: argparse.Namespace,
           attack: Callable[[threading.Event], tuple[str, float]], n: int) -> dict:
    """``--others`` clients, each sending searches one after another (a new connection
    each) for ``--load-seconds`` while ``n`` attacks run (told when the others are done):
    the others' answer times, and how the attacks ended."""
    results: list[tuple[str, float]] = []
    times: dict[int, list[float]] = {i: [] for i in range(args.others)}
    failed = [0]
    stop = threading.Event()

    def attacker() -> None:
        try:
            results.append(attack(stop))
        except OSError as exc:
            results.append((type(exc).__name__, float("nan")))

    def other(i: int) -> None:
        while not stop.is_set():
            try:
                what, took = _one(addr, [request], wait=30.0)
            except OSError:
                what, took = "error", float("nan")
            if what == "200":
                times[i].append(took)
            else:
                failed[0] += 1

    attackers = [threading.Thread(target=attacker, daemon=True) for _ in range(n)]
    others = [threading.Thread(target=other, args=(i,), daemon=True)
              for i in range(args.others)]
    for t in attackers:
        t.start()
    time.sleep(0.2)  # the attacks are under way
    for t in others:
        t.start()
    time.sleep(args.load_seconds)
    stop.set()
    for t in others:
        t.join()
    every = sorted(t for ts in times.values() for t in ts)
    worst = [max(ts, default=0.0) for ts in times.values()]
    for t in attackers:
        t.join(timeout=60)
    return {"attack": name, "others": args.others, "answered": len(every),
            "failed": failed[0],
            "median_ms": round(1000 * every[len(every) // 2], 1) if every else None,
            "max_ms": round(1000 * every[-1], 1) if every else None,
            "others_past_3s": sum(w > 3.0 for w in worst),
            "attacks_ended": sorted({what for what, _ in results})}


def _ok(row: dict) -> str:
    expected = [e.strip() for e in row["expected"].replace(" or ", ",").split(",")]
    if row["expected"] in ("500, then 200", "400, close"):  # a sequence, not choices
        return "yes" if row["got"] == row["expected"] else "NO"
    return "yes" if row["got"] in expected else "NO"


HELP = 'malformed and hostile HTTP against live registries'
USES_DNS = False


def add_options(p: argparse.ArgumentParser) -> None:
    """This probe's own options."""
    p.add_argument("--address", default="127.0.82.1",
                   help="AgentDNS address (ANS serves at the next one)")
    p.add_argument("--seed", type=int, default=5)
    p.add_argument("--tools", type=int, default=500)
    p.add_argument("--deadline", type=float, default=2.0,
                   help="request deadline, s (slowloris)")
    p.add_argument("--idle", type=float, default=3.0, help="idle keep-alive timeout, s")
    p.add_argument("--write-timeout", type=float, default=2.0, help="write deadline, s")
    p.add_argument("--max-body", type=int, default=256 * 1024,
                   help="body limit, bytes (the library default is 64 KiB; 256 KiB lets "
                   "the 10^5-deep JSON reach the parser)")
    p.add_argument("--max-header", type=int, default=16 * 1024, help="head limit, bytes")
    p.add_argument("--max-connections", type=int, default=64)
    p.add_argument("--org-token", default="agent_" + "B" * 43,
                   help="an organisation token the server is configured with")
    p.add_argument("--only", choices=["all", "hostile", "issue45"], default="all",
                   help="the cases to run: all, the hostile requests, or issue 45's "
                   "(smuggling, chunk floods, pipelining)")
    p.add_argument("--before", type=Path, metavar="TREE",
                   help="also serve from TREE (an earlier checkout) and print its figures")
    p.add_argument("--others", type=int, default=6,
                   help="clients searching one after another while an attack runs")
    p.add_argument("--load-seconds", type=float, default=6.0,
                   help="how long they search")
    p.add_argument("--chunk-floods", type=int, default=4,
                   help="bodies of 1-byte chunks sent at once")
    p.add_argument("--pipelined", type=int, default=10_000,
                   help="searches pipelined, never read")
    p.add_argument("--pipelining", type=int, default=20,
                   help="connections they are pipelined on")


def show(result: dict) -> None:
    """Print the figures (an earlier tree's first, with ``--before``)."""
    if "before" in result:
        print(f"== before: {result['before']['tree']}")
        _show(result["before"])
        print("== this tree")
    _show(result)


def _show(result: dict) -> None:
    print(result["machine"])
    s = result["settings"]
    print(f"registry process started in {result['server_start_s']} s; request deadline "
          f"{s['deadline_s']} s, idle {s['idle_s']} s, write {s['write_timeout_s']} s, "
          f"body ≤ {s['max_body']} B, head ≤ {s['max_header']} B, "
          f"≤ {s['max_connections']} connections")
    head = ["case", "expected", "got", "match", "ms to answer", "process up", "health"]
    cells = [[r["case"], r["expected"], r["got"], _ok(r), f"{r['ms']:.2f}",
              "yes" if r["process_up"] else "NO", r["health"]] for r in result["rows"]]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *cells, strict=True)]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)) + " |"
    print(line)
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in cells:
        print("| " + " | ".join(str(x).ljust(w)
                                 for x, w in zip(row, widths, strict=True)) + " |")
    for r in result["rows"]:
        if r["note"]:
            print(f"  {r['case'].strip()}: {r['note']}")
    if result.get("load"):
        print("other clients' searches while an attack runs:")
        table(result["load"])
    for name, st in result["stats"].items():
        print(f"{name} counters: server {json.dumps(st['server'], sort_keys=True)}; "
              f"application {json.dumps(st['app'], sort_keys=True)}")
    print(f"server process exit status after stdin closed: {result['server_exit']}")

