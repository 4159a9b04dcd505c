"""Live engine: the same node objects behind real UDP/TCP sockets on 127.0.0.0/8 (asyncio).

* :class:`ServerEndpoint` — one authoritative server on ``(address, port)``: UDP datagrams
  and TCP with the two-byte length prefix of RFC 1035 §4.2.2, connections bounded by
  :class:`TcpLimits` (per listener and per process; idle, slow-message, lifetime and write
  deadlines, RFC 7766 §6.2); over TCP a zone transfer (AXFR) is answered with every message
  ``AuthoritativeServer.transfer`` returns, anything else by ``handle``.
* :class:`NodeEndpoint` — a recursive resolver or an agent: upstream queries from
  :class:`UpstreamSockets` (a random source port per query, answers accepted only on the
  query's socket from the queried server with its ID: RFC 5452) and short TCP connections
  after TC; a resolver also serves stub clients on its listening address over UDP and TCP,
  where only queries are accepted. Query IDs come from the OS's randomness.
* :class:`LiveHierarchy` — every server of a :class:`sim.build.hierarchy.Hierarchy` plus a
  resolver, started together (``tooldns serve``).
* DNS over TLS (RFC 7858) between resolvers and servers: a server given a TLS context also
  listens on :func:`dot_port` (TLS 1.3, the run CA's certificate for
  :data:`sim.build.hierarchy.DOT_HOST`; handshake failures and malformed input counted,
  handshakes in progress bounded, connections bounded by :class:`TcpLimits`), and a
  resolver's :class:`DotUpstream` keeps one persistent connection per server (RFC 7766
  reuse; bounded table, least recently used closed first; closed when idle) for the
  Outgoing messages the node marks "tls".

The node code never sees a socket or a clock: the adapters pass ``loop.time()`` in.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import random
import resource
import socket
import ssl
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from nodes.agent.stub import StubAgent
from nodes.authoritative.server import AuthoritativeServer, networks
from nodes.dns.cache import DEFAULT_MAX_BYTES
from nodes.dns.zone import Address
from nodes.resolver.core import (
    Discovery,
    DiscoveryResult,
    Outgoing,
    RecursiveResolver,
    ResolverConfig,
)
from sim.accounting import IPV4, TCP, TCP_TS, UDP, dot_port
from sim.build.hierarchy import DOT_HOST, Hierarchy

DEFAULT_PORT = 15353
DEFAULT_RESOLVER_ADDRESS = "127.0.53.1"
TCP_IDLE_TIMEOUT = 10.0
SYN_RTO = 1.0  # a lost SYN is retransmitted after the initial RTO (RFC 6298 §2.1)


def raise_fd_limit() -> None:
    """Each server holds two sockets; lift the soft descriptor limit to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


Shaper = Callable[[str, str, int], "float | None"]
"""(source IP, destination IP, IP packet size) → emulated one-way delay, or None to drop."""


SPIN = 0.002  # the last 2 ms of an emulated delay are spun, not slept (see call_precisely)


def call_precisely(delay: float, fn: Callable[..., object], *args: object) -> None:
    """Call ``fn(*args)`` after ``delay`` seconds, to within a few tens of microseconds.

    asyncio's selector rounds its timeout up to whole milliseconds, which would add up to
    1 ms to every emulated hop; so the loop sleeps until ``SPIN`` before the deadline and
    then re-checks on every iteration (other callbacks keep running meanwhile).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + delay

    def check() -> None:
        left = deadline - loop.time()
        if left <= 0:
            fn(*args)
        elif left > SPIN:
            loop.call_later(left - SPIN, check)
        else:
            loop.call_soon(check)

    check()


async def sleep_precisely(delay: float) -> None:
    fut = asyncio.get_running_loop().create_future()
    call_precisely(delay, lambda: fut.done() or fut.set_result(None))
    await fut


TLS_RECORD = 22  # TLS 1.3 record header (5) + inner content type (1) + AEAD tag (16)


def _ip_size(transport: str, payload: int) -> int:
    if transport == "tls":  # one TLS record around the length prefix and the message
        return IPV4 + TCP_TS + 2 + TLS_RECORD + payload
    return IPV4 + (UDP if transport == "udp" else TCP + 2) + payload


@dataclass(frozen=True)
class TcpLimits:
    """Bounds on DNS-over-TCP connections a listener accepts (RFC 7766 §6.2)."""

    per_listener: int = 256  # open connections per server (BIND's tcp-clients is 150)
    per_process: int = 0  # open connections over all listeners; 0: half the fd limit
    idle: float = TCP_IDLE_TIMEOUT  # no new message for this long: closed (§6.2.3)
    message: float = TCP_IDLE_TIMEOUT  # a message must arrive whole this soon once begun
    lifetime: float = 120.0  # a connection is closed this long after it opened
    write: float = TCP_IDLE_TIMEOUT  # a reply must be taken by the peer this soon
    write_buffer: int = 16 * 1024  # replies held for a slow reader before writes wait

    def process_limit(self) -> int:
        if self.per_process:
            return self.per_process
        return max(64, resource.getrlimit(resource.RLIMIT_NOFILE)[0] // 2)


@dataclass(eq=False)
class _Conn:
    writer: asyncio.StreamWriter
    listener: set
    last: float  # loop time of the last complete message or reply
    busy: bool = False  # a message is being read or answered


_PROCESS_CONNS: set[_Conn] = set()  # every DNS-over-TCP connection this process holds


def _admit(conn: _Conn, limits: TcpLimits, count: Callable[[str], None]) -> bool:
    """Make room for a new connection: at a limit, the connection idle longest (this
    listener's, or the process's) is closed, as RFC 7766 §6.2.3 allows under pressure; if
    every one is busy, the new one is refused. Counted either way."""
    for pool, limit, key in ((conn.listener, limits.per_listener, "tcp_listener_full"),
                             (_PROCESS_CONNS, limits.process_limit(), "tcp_process_full")):
        if len(pool) < limit:
            continue
        idle = [c for c in pool if not c.busy]
        if not idle:
            count(key + "_refused")
            return False
        oldest = min(idle, key=lambda c: c.last)
        _drop(oldest)
        count(key + "_evicted_idle")
    conn.listener.add(conn)
    _PROCESS_CONNS.add(conn)
    return True


def _drop(conn: _Conn) -> None:
    conn.listener.discard(conn)
    _PROCESS_CONNS.discard(conn)
    transport = conn.writer.transport
    if transport is not None and not transport.is_closing():
        transport.abort()


async def _serve_tcp_stream(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    handle: Callable[[bytes, Address], bytes | list[bytes] | None],
    delay: Callable[[Address, int], float | None] | None = None,
    limits: TcpLimits | None = None,
    listener: set | None = None,
    count: Callable[[str], None] = lambda key: None,
    transport: str = "tcp",
) -> None:
    """Length-prefixed DNS over one TCP connection until EOF, error, or a deadline: idle
    between messages, a message arriving too slowly, the connection's lifetime, or a peer
    that does not read its replies. Each ending other than EOF is counted. ``handle``
    returns the reply, None, or a list of messages (a zone transfer), written in order,
    each within the write deadline. ``transport`` "tls": the stream is a TLS connection
    (sizes for the emulated delays), whose replies are pipelined (RFC 7766 §6.2.1.1: the
    next query is read while a reply waits out its emulated delay)."""
    limits = limits or TcpLimits()
    loop = asyncio.get_running_loop()
    opened = loop.time()
    conn = _Conn(writer, listener if listener is not None else set(), opened)
    if not _admit(conn, limits, count):
        writer.transport.abort()
        return
    writer.transport.set_write_buffer_limits(high=limits.write_buffer)
    peer = writer.get_extra_info("peername")[:2]
    why = ""
    try:
        while True:
            left = opened + limits.lifetime - loop.time()
            if left <= 0:
                why = "tcp_lifetime_closed"
                break
            try:
                async with asyncio.timeout(min(limits.idle, left)):  # no task per read
                    head = await reader.readexactly(2)
            except TimeoutError:
                why = "tcp_idle_closed" if limits.idle <= left else "tcp_lifetime_closed"
                break
            conn.busy = True
            try:
                async with asyncio.timeout(limits.message):
                    data = await reader.readexactly(int.from_bytes(head, "big"))
            except TimeoutError:
                why = "tcp_slow_message_closed"
                break
            reply = handle(data, peer)
            lost = False
            for out in (() if reply is None else (reply,) if reply.__class__ is bytes
                        else reply):
                d = delay(peer, _ip_size(transport, len(out))) if delay is not None else 0.0
                if d is None:  # emulated loss of a TCP segment: modelled as a dead connection
                    lost = True
                    break
                if transport == "tls" and d:  # pipelined: written once its delay is over
                    call_precisely(d, _write_open, writer, len(out).to_bytes(2, "big") + out)
                    continue
                if d:
                    await sleep_precisely(d)
                writer.write(len(out).to_bytes(2, "big") + out)
                try:
                    async with asyncio.timeout(limits.write):
                        await writer.drain()
                except TimeoutError:
                    why = "tcp_write_timeout_closed"
                    break
            if lost or why:
                break
            conn.busy, conn.last = False, loop.time()
    except (asyncio.IncompleteReadError, ConnectionError, OSError):
        pass
    finally:
        if why:
            count(why)
        conn.listener.discard(conn)
        _PROCESS_CONNS.discard(conn)
        if why:
            writer.transport.abort()
        else:
            writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


def _write_open(writer: asyncio.StreamWriter, data: bytes) -> None:
    if not writer.is_closing():
        writer.write(data)


@contextlib.contextmanager
def _naming(address: Address, proto: str) -> Iterator[None]:
    """A bind failure says which address and port (asyncio's UDP errors do not)."""
    try:
        yield
    except OSError as exc:
        raise OSError(exc.errno, f"cannot listen on {address[0]}:{address[1]}/{proto}: "
                      f"{exc.strerror or exc}") from exc


class _Datagrams(asyncio.DatagramProtocol):
    def __init__(self, on_datagram: Callable[[bytes, Address], None]) -> None:
        self.on_datagram = on_datagram
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: tuple) -> None:
        self.on_datagram(data, addr[:2])

    def error_received(self, exc: Exception) -> None:  # ICMP errors etc.: nothing to do
        pass


def _sendto(sock: asyncio.DatagramTransport | None, data: bytes, dst: Address, src_ip: str,
            shaper: Shaper | None) -> bool:
    """Send now, later (emulated delay) or never (emulated loss); False if dropped."""
    if sock is None:
        return False
    if shaper is None:
        sock.sendto(data, dst)
        return True
    delay = shaper(src_ip, dst[0], _ip_size("udp", len(data)))
    if delay is None:
        return False
    if delay <= 0:
        sock.sendto(data, dst)
    else:
        call_precisely(delay, sock.sendto, data, dst)
    return True


@dataclass
class ServerEndpoint:
    """One authoritative server bound to UDP and TCP on the same address and port."""

    server: AuthoritativeServer
    address: Address
    shaper: Shaper | None = None
    origin: float = 0.0  # node time = loop time - origin
    tcp_limits: TcpLimits = field(default_factory=TcpLimits)
    udp: asyncio.DatagramTransport | None = None
    tcp: asyncio.base_events.Server | None = None
    _conns: set = field(default_factory=set)
    # DNS over TLS: the server context, its port, the bounds of its connections
    tls: ssl.SSLContext | None = None
    tls_port: int = 0
    tls_limits: TcpLimits = field(default_factory=lambda: DOT_LIMITS)
    tls_server: asyncio.base_events.Server | None = None
    _tls_conns: set = field(default_factory=set)
    _handshaking: int = 0

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        ip = self.address[0]

        def on_datagram(data: bytes, src: Address) -> None:
            reply = self.server.handle(data, src, loop.time() - self.origin, "udp")
            if reply is not None:
                _sendto(self.udp, reply, src, ip, self.shaper)

        with _naming(self.address, "udp"):
            self.udp, _ = await loop.create_datagram_endpoint(
                lambda: _Datagrams(on_datagram), local_addr=self.address)

        def delay(peer: Address, size: int) -> float | None:
            return self.shaper(ip, peer[0], size) if self.shaper else 0.0

        def count(key: str) -> None:
            self.server.stats.counts[key] += 1

        def on_message(data: bytes, peer: Address) -> bytes | list[bytes] | None:
            now = loop.time() - self.origin
            server = self.server
            return server.transfer(data, peer, now) or server.handle(data, peer, now, "tcp")

        async def on_stream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await _serve_tcp_stream(reader, writer, on_message, delay, self.tcp_limits,
                                    self._conns, count)

        self.tcp = await asyncio.start_server(on_stream, *self.address, reuse_address=True)
        if self.tls is not None:
            await self._start_tls(delay, count)

    async def _start_tls(self, delay: Callable[[Address, int], float | None],
                         count: Callable[[str], None]) -> None:
        """Listen for DNS over TLS: plain TCP accepted, then the TLS handshake here (so a
        failed one is counted), at most ``tls_limits.per_listener`` at once."""
        loop = asyncio.get_running_loop()
        ctx, limits = self.tls, self.tls_limits

        def on_message(data: bytes, peer: Address) -> bytes | None:
            return self.server.handle(data, peer, loop.time() - self.origin, "tls")

        async def on_stream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            if self._handshaking >= limits.per_listener:
                count("tls_handshakes_full_refused")
                writer.transport.abort()
                return
            self._handshaking += 1
            try:
                async with asyncio.timeout(limits.message):
                    await writer.start_tls(ctx)  # type: ignore[arg-type]
            except (TimeoutError, ssl.SSLError, ConnectionError, OSError):
                count("tls_handshake_failed")
                writer.transport.abort()
                return
            finally:
                self._handshaking -= 1
            count("tls_connections")
            # persistent: open when the run ends, so cancelled then (nothing to report)
            with contextlib.suppress(asyncio.CancelledError):
                await _serve_tcp_stream(reader, writer, on_message, delay, limits,
                                        self._tls_conns, count, transport="tls")

        with _naming((self.address[0], self.tls_port), "tcp"):
            self.tls_server = await asyncio.start_server(
                on_stream, self.address[0], self.tls_port, reuse_address=True)

    def close(self) -> None:
        if self.udp is not None:
            self.udp.close()
        if self.tcp is not None:
            self.tcp.close()
        if self.tls_server is not None:
            self.tls_server.close()
        for conn in [*self._conns, *self._tls_conns]:
            _drop(conn)


class UpstreamSockets:
    """UDP sockets for a node's upstream queries, as RFC 5452 asks of a resolver.

    Each query leaves from a socket bound to a port drawn from the OS's randomness
    (1024-65535, §10), a new socket per query until ``size`` are open (then queries share
    a random open one, as Unbound's ``outgoing-range``). A socket hands on only answers it
    expects: from the server a query on it went to, with that query's ID (§9.1); anything
    else is dropped and counted. A socket is closed once nothing is outstanding on it.
    """

    def __init__(self, ip: str, deliver: Callable[[bytes, Address], None],
                 still_pending: Callable[[int], bool],
                 count: Callable[[str], None], size: int = 1024,
                 avoid: frozenset[int] = frozenset(), rand: random.Random | None = None
                 ) -> None:
        self.ip, self.deliver, self.count, self.size = ip, deliver, count, size
        self.still_pending = still_pending  # the node's view: is a query ID outstanding
        self.avoid = avoid  # service ports: a capture tells queries from answers by them
        self.rand = rand or random.SystemRandom()
        self._open: dict[int, _Upstream] = {}  # fd -> socket and what it expects
        self._by_query: dict[tuple[int, Address], _Upstream] = {}

    def __len__(self) -> int:
        return len(self._open)

    @property
    def ports(self) -> list[int]:
        return [u.port for u in self._open.values()]

    def send(self, data: bytes, dst: Address, shaper: Shaper | None) -> bool:
        key = (int.from_bytes(data[:2], "big"), dst)
        up = self._by_query.get(key)
        if up is None:
            up = self._new() if len(self._open) < self.size else None
            if up is None:
                up = self.rand.choice(list(self._open.values()))
                self.count("upstream_port_shared")
            up.expected.add(key)
            self._by_query[key] = up
        return _sendto(up, data, dst, self.ip, shaper)

    def forget(self) -> None:
        """Stop expecting answers to queries the node no longer waits for (timed out)."""
        for key in [k for k in self._by_query if not self.still_pending(k[0])]:
            self._settled(key)

    def _settled(self, key: tuple[int, Address]) -> None:
        up = self._by_query.pop(key)
        up.expected.discard(key)
        if not up.expected:
            self._close(up)

    def close(self) -> None:
        for up in list(self._open.values()):
            self._close(up)
        self._by_query.clear()

    def _new(self) -> _Upstream | None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.setblocking(False)
        for _ in range(16):  # a port taken by another socket: draw again
            port = self.rand.randint(1024, 65535)
            if port in self.avoid:
                continue
            try:
                sock.bind((self.ip, port))
                break
            except OSError:
                continue
        else:
            sock.close()
            self.count("upstream_bind_failed")
            return None
        up = _Upstream(sock, sock.getsockname()[1])
        self._open[sock.fileno()] = up
        asyncio.get_running_loop().add_reader(sock.fileno(), self._readable, up)
        return up

    def _close(self, up: _Upstream) -> None:
        if self._open.pop(up.sock.fileno(), None) is not None:
            asyncio.get_running_loop().remove_reader(up.sock.fileno())
        up.sock.close()

    def _readable(self, up: _Upstream) -> None:
        for _ in range(64):  # what has arrived, then back to the loop
            try:
                data, src = up.sock.recvfrom(65535)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # ICMP errors reported on the socket
                continue
            src = src[:2]
            if len(data) < 12 or not data[2] & 0x80:
                self.count("upstream_not_response")
            elif (key := (int.from_bytes(data[:2], "big"), src)) not in up.expected:
                self.count("upstream_unexpected_answer")  # wrong ID or server: dropped
            else:
                self.deliver(data, src)
                if key in self._by_query and not self.still_pending(key[0]):
                    self._settled(key)
                if up.sock.fileno() < 0:  # closed: nothing left to read on it
                    return


@dataclass(eq=False)
class _Upstream:
    sock: socket.socket
    port: int
    expected: set[tuple[int, Address]] = field(default_factory=set)

    def sendto(self, data: bytes, dst: Address) -> None:
        with contextlib.suppress(OSError):  # closed since (a late emulated send), buffer full
            self.sock.sendto(data, dst)


@dataclass
class NodeEndpoint:
    """Drives a sans-IO node (a resolver or an agent) over real sockets.

    Queries the node originates leave from :class:`UpstreamSockets` (random source ports,
    answers accepted only on the socket their query left from) and short TCP connections
    after TC; with ``address`` set it also serves stub clients on UDP and TCP there, where
    only queries are accepted. Query IDs come from the OS's randomness (``secure_ids``).
    Finished work goes to ``on_done`` (kept in ``results`` only with ``keep_results``).
    """

    node: RecursiveResolver | StubAgent
    address: Address | None = None
    source_ip: str = "127.0.0.1"
    origin: float = 0.0
    shaper: Shaper | None = None
    on_done: Callable[[list], None] | None = None
    keep_results: bool = False
    secure_ids: bool = True
    upstream_sockets: int = 1024
    tcp_limits: TcpLimits = field(default_factory=TcpLimits)
    results: list = field(default_factory=list)
    stats: Counter[str] = field(default_factory=Counter)  # what the adapter dropped
    _upstream: UpstreamSockets | None = None
    _listen: asyncio.DatagramTransport | None = None
    _tcp_server: asyncio.base_events.Server | None = None
    _timer: asyncio.TimerHandle | None = None
    _armed: float | None = None
    _clients: dict[Address, asyncio.StreamWriter] = field(default_factory=dict)
    _conns: set = field(default_factory=set)
    _waiters: dict[int, asyncio.Future] = field(default_factory=dict)
    _tasks: set[asyncio.Task] = field(default_factory=set)
    dot: DotUpstream | None = None  # DNS over TLS to the servers (Outgoing "tls")

    @property
    def resolver(self) -> RecursiveResolver:
        assert isinstance(self.node, RecursiveResolver)
        return self.node

    def now(self) -> float:
        return asyncio.get_running_loop().time() - self.origin

    def count(self, key: str) -> None:
        self.stats[key] += 1

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        if self.secure_ids:
            self.node.id_source = random.SystemRandom()
        node = self.node
        peer_port = (node.config.dns_port if isinstance(node, RecursiveResolver)
                     else node.resolver[1])
        avoid = frozenset({53, DEFAULT_PORT, peer_port, *(self.address or ())[1:]})
        self._upstream = UpstreamSockets(self.source_ip,
                                         lambda d, s: self._receive(d, s, "udp"),
                                         node.is_pending, self.count, self.upstream_sockets,
                                         avoid)
        if self.address is not None:
            with _naming(self.address, "udp"):
                self._listen, _ = await loop.create_datagram_endpoint(
                    lambda: _Datagrams(self._on_client_datagram), local_addr=self.address)
            self._tcp_server = await asyncio.start_server(
                self._on_client_stream, *self.address, reuse_address=True)

    def close(self) -> None:
        if self._upstream is not None:
            self._upstream.close()
        if self.dot is not None:
            self.dot.close()
        if self._listen is not None:
            self._listen.close()
        if self._tcp_server is not None:
            self._tcp_server.close()
        for conn in list(self._conns):
            _drop(conn)
        if self._timer is not None:
            self._timer.cancel()
        for task in list(self._tasks):
            task.cancel()

    # -- plumbing ------------------------------------------------------------------

    def _receive(self, data: bytes, src: Address, transport: str) -> None:
        self.node.receive(data, src, self.now(), transport)  # type: ignore[arg-type]
        self.pump()

    def _on_client_datagram(self, data: bytes, src: Address) -> None:
        if len(data) > 2 and data[2] & 0x80:  # an answer sent to the service address
            self.count("response_on_listen")
            return
        self._receive(data, src, "udp")

    def _on_timer(self) -> None:
        self._timer, self._armed = None, None
        self.node.on_timer(self.now())
        self.pump()
        if self._upstream is not None:  # timed-out queries: their sockets may close
            self._upstream.forget()

    def pump(self) -> None:
        """Send what the node wants sent, collect finished work, re-arm the timer."""
        loop = asyncio.get_running_loop()
        for out in self.node.to_send():
            self._transmit(out)
        node = self.node
        done = node.pop_results() if isinstance(node, RecursiveResolver) else node.pop_done()
        if done:
            if self.keep_results:
                self.results.extend(done)
            if self.on_done is not None:
                self.on_done(done)
            for item in done:
                fut = self._waiters.pop(id(item), None)
                if fut is not None and not fut.done():
                    fut.set_result(item)
        when = self.node.next_timer()
        if when != self._armed:
            if self._timer is not None:
                self._timer.cancel()
            self._timer, self._armed = None, when
            if when is not None:
                self._timer = loop.call_at(self.origin + when, self._on_timer)

    def _transmit(self, out: Outgoing) -> None:
        src_ip = self.address[0] if out.reply and self.address else self.source_ip
        if out.transport == "tls":
            if self.dot is not None and not out.reply:
                self.dot.send(out)
            return
        if out.transport == "udp":
            if out.reply:
                _sendto(self._listen, out.data, out.dst, src_ip, self.shaper)
            elif self._upstream is not None:
                self._upstream.send(out.data, out.dst, self.shaper)
            return
        if out.reply:
            writer = self._clients.get(out.dst)
            if writer is None or writer.is_closing():
                return
            delay = self.shaper(src_ip, out.dst[0], _ip_size("tcp", len(out.data))) \
                if self.shaper else 0.0
            if delay is None:
                return
            frame = len(out.data).to_bytes(2, "big") + out.data
            if delay:
                call_precisely(delay, writer.write, frame)
            else:
                writer.write(frame)
            return
        task = asyncio.get_running_loop().create_task(self._tcp_exchange(out))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _tcp_exchange(self, out: Outgoing) -> None:
        """One query over a fresh TCP connection (after a truncated UDP answer); only an
        answer with the query's ID, on that connection, is handed on."""
        if self.shaper is not None:  # emulate SYN and SYN-ACK before the query can go
            wait = 0.0
            for a, b in ((self.source_ip, out.dst[0]), (out.dst[0], self.source_ip)):
                d = self.shaper(a, b, IPV4 + TCP)
                wait += d if d is not None else SYN_RTO
            await sleep_precisely(wait)
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(*out.dst, local_addr=(self.source_ip, 0)),
                TCP_IDLE_TIMEOUT)
        except (OSError, TimeoutError):
            return  # the node's own timer covers the loss
        try:
            delay = self.shaper(self.source_ip, out.dst[0], _ip_size("tcp", len(out.data))) \
                if self.shaper else 0.0
            if delay is None:
                return
            if delay:
                await sleep_precisely(delay)
            writer.write(len(out.data).to_bytes(2, "big") + out.data)
            await asyncio.wait_for(writer.drain(), TCP_IDLE_TIMEOUT)
            head = await asyncio.wait_for(reader.readexactly(2), TCP_IDLE_TIMEOUT)
            data = await asyncio.wait_for(reader.readexactly(int.from_bytes(head, "big")),
                                          TCP_IDLE_TIMEOUT)
            if data[:2] != out.data[:2] or len(data) < 12 or not data[2] & 0x80:
                self.count("upstream_unexpected_answer")
                return
            self._receive(data, out.dst, "tcp")
        except (asyncio.IncompleteReadError, TimeoutError, ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def _on_client_stream(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        peer = writer.get_extra_info("peername")[:2]
        self._clients[peer] = writer

        def handle(data: bytes, src: Address) -> None:
            if len(data) > 2 and data[2] & 0x80:
                self.count("response_on_listen")
            else:
                self._receive(data, src, "tcp")
            return None  # replies are written by _transmit when the walk completes

        try:
            await _serve_tcp_stream(reader, writer, handle, None, self.tcp_limits, self._conns,
                                    self.count)
        finally:
            self._clients.pop(peer, None)

    # -- API -------------------------------------------------------------------------

    async def discover(self, request: Discovery) -> DiscoveryResult:
        """Run one discovery to completion and return its result."""
        return await self._run(lambda now: self.resolver.discover(request, now))

    async def warm(self, service: str) -> DiscoveryResult:
        return await self._run(lambda now: self.resolver.warm(service, now))

    async def _run(self, start: Callable[[float], DiscoveryResult]) -> DiscoveryResult:
        fut = asyncio.get_running_loop().create_future()
        result = start(self.now())
        self._waiters[id(result)] = fut
        self.pump()
        return await fut


ResolverEndpoint = NodeEndpoint  # the name the CLI and older tests use


@dataclass
class LiveHierarchy:
    """All servers of a hierarchy on one port, plus a resolver serving stub clients."""

    hierarchy: Hierarchy
    port: int = DEFAULT_PORT
    resolver_address: str = DEFAULT_RESOLVER_ADDRESS
    resolver_seed: int = 0  # replica tie-breaks only: IDs and ports come from the OS
    cache_max_bytes: int = DEFAULT_MAX_BYTES  # the resolver's cache bound (estimated bytes)
    max_clients: int = 10_000  # stub queries the resolver works on at once
    tcp_limits: TcpLimits = field(default_factory=TcpLimits)
    # who may transfer zones (AXFR): networks or addresses, replacing the default
    # (loopback and the hierarchy's own servers; see sim.build.hierarchy.build_hierarchy)
    allow_transfer: Sequence[str] | None = None
    endpoints: list[ServerEndpoint] = field(default_factory=list)
    resolver: NodeEndpoint | None = None

    async def start(self) -> None:
        raise_fd_limit()
        if self.allow_transfer is not None:
            acl = networks(self.allow_transfer)  # a bad network fails here, before binding
            for server in self.hierarchy.servers.values():
                server.transfer_acl, server.transfer_peers = acl, frozenset()
        for address, server in self.hierarchy.servers.items():
            endpoint = ServerEndpoint(server, (address, self.port), tcp_limits=self.tcp_limits)
            await endpoint.start()
            self.endpoints.append(endpoint)
        config = ResolverConfig(dns_port=self.port, cache_max_bytes=self.cache_max_bytes,
                                max_clients=self.max_clients)
        node = self.hierarchy.resolver(seed=self.resolver_seed, config=config)
        self.resolver = NodeEndpoint(node, (self.resolver_address, self.port),
                                     source_ip=self.resolver_address,
                                     tcp_limits=self.tcp_limits)
        await self.resolver.start()

    def close(self) -> None:
        for endpoint in self.endpoints:
            endpoint.close()
        if self.resolver is not None:
            self.resolver.close()

    def manifest(self) -> dict:
        servers = [{**m, "port": self.port} for m in self.hierarchy.manifest]
        return {
            "port": self.port,
            "option_code": self.hierarchy.option_code,
            "root_hints": self.hierarchy.root_hints,
            "resolver": {"role": "resolver", "address": self.resolver_address,
                         "port": self.port},
            "servers": servers,
            "namespace": self.hierarchy.namespace.origin,
        }

    def write_manifest(self, path: str | Path) -> None:
        """Write the manifest atomically (temp file + rename)."""
        path = Path(path)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(self.manifest(), indent=2) + "\n", encoding="utf-8")
        tmp.replace(path)


#: bounds on the servers' DNS-over-TLS connections: persistent by design (RFC 7858 §3.4),
#: so idle for longer than the resolvers' own idle timeout before the server closes them
DOT_LIMITS = TcpLimits(idle=60.0, message=TCP_IDLE_TIMEOUT, lifetime=3600.0)


@dataclass(eq=False)
class _DotConn:
    dst: Address
    number: int
    writer: asyncio.StreamWriter | None = None
    waiting: list[bytes] = field(default_factory=list)  # frames queued during the handshake
    last: float = 0.0  # loop time of the last query or reply
    timer: asyncio.TimerHandle | None = None
    task: asyncio.Task | None = None
    closed: bool = False


class DotUpstream:
    """A resolver's DNS-over-TLS connections to the authoritative servers (RFC 7858).

    One persistent TLS 1.3 connection per server (port :func:`dot_port` of the server's
    DNS port), opened on the first query to it and reused (RFC 7766 §6.2.1); at most
    ``max_connections`` (the least recently used is closed to open another), each closed
    after ``idle`` seconds without a query or reply (close_notify, then FIN). The emulated
    link delays of the TCP handshake and the TLS round trip are waited before the real
    handshake; each message waits its own. Replies are handed to the node as transport
    "tls" from the server's DNS address; the node checks IDs and questions. Each exchange
    is marked on its Step (connection number, whether it opened it) for the accounting.
    """

    def __init__(self, ip: str, ctx: ssl.SSLContext, deliver: Callable[[bytes, Address], None],
                 count: Callable[[str], None], shaper: Shaper | None = None,
                 idle: float = 10.0, max_connections: int = 64,
                 numbers: Iterator[int] | None = None, sizes: object | None = None,
                 flows: dict[tuple[str, int], int] | None = None) -> None:
        self.ip, self.ctx, self.deliver, self.count, self.shaper = ip, ctx, deliver, count, shaper
        self.idle, self.max_connections = idle, max_connections
        self.numbers = numbers or itertools.count(1)  # shared by an engine's resolvers
        self.sizes = sizes  # sim.build.registries.TlsSizes: the flights' sizes for the delays
        self._conns: OrderedDict[Address, _DotConn] = OrderedDict()
        # (own address, local port) -> connection number: lets a capture attribute the
        # encrypted packets of each connection (sim.run.capture, as registry flows)
        self.flows = flows if flows is not None else {}

    def __len__(self) -> int:
        return len(self._conns)

    def send(self, out: Outgoing) -> None:
        loop = asyncio.get_running_loop()
        conn = self._conns.get(out.dst)
        opened = conn is None
        if conn is None:
            while len(self._conns) >= self.max_connections:
                self._close(next(iter(self._conns.values())), "dot_evicted")
            conn = _DotConn(out.dst, next(self.numbers))
            self._conns[out.dst] = conn
            self.count("dot_opened")
            conn.task = loop.create_task(self._run(conn))
        else:
            self._conns.move_to_end(out.dst)
        if out.step is not None:
            out.step.conn, out.step.opened = conn.number, opened
        self._touch(conn)
        frame = len(out.data).to_bytes(2, "big") + out.data
        if conn.writer is None:
            conn.waiting.append(frame)
            return
        self._write(conn, frame)

    def _write(self, conn: _DotConn, frame: bytes) -> None:
        delay = (self.shaper(self.ip, conn.dst[0], _ip_size("tls", len(frame) - 2))
                 if self.shaper else 0.0)
        if delay is None:  # emulated loss: the node's timer retries
            return
        if delay:
            call_precisely(delay, self._write_now, conn, frame)
        else:
            self._write_now(conn, frame)

    def _write_now(self, conn: _DotConn, frame: bytes) -> None:
        if conn.writer is not None and not conn.closed and not conn.writer.is_closing():
            conn.writer.write(frame)

    def _touch(self, conn: _DotConn) -> None:
        loop = asyncio.get_running_loop()
        conn.last = loop.time()
        if conn.timer is None:
            conn.timer = loop.call_later(self.idle, self._check_idle, conn)

    def _check_idle(self, conn: _DotConn) -> None:
        conn.timer = None
        left = conn.last + self.idle - asyncio.get_running_loop().time()
        if conn.closed:
            return
        if left > 0:
            conn.timer = asyncio.get_running_loop().call_later(left, self._check_idle, conn)
        else:
            self._close(conn, "dot_closed")

    async def _handshake_delay(self, dst: str) -> None:
        """The emulated link delays of SYN, SYN-ACK, ClientHello and the server flight."""
        if self.shaper is None:
            return
        hello = getattr(self.sizes, "client_hello", 0)
        flight = getattr(self.sizes, "server_flight", 0)
        wait = 0.0
        for a, b, size in ((self.ip, dst, IPV4 + TCP), (dst, self.ip, IPV4 + TCP),
                           (self.ip, dst, IPV4 + TCP_TS + hello),
                           (dst, self.ip, IPV4 + TCP_TS + flight)):
            d = self.shaper(a, b, size)
            wait += d if d is not None else SYN_RTO
        await sleep_precisely(wait)

    async def _run(self, conn: _DotConn) -> None:
        """Open the connection, send what waited, then read replies until it ends."""
        ip, port = conn.dst[0], dot_port(conn.dst[1])
        try:
            await self._handshake_delay(ip)
            reader, writer = await asyncio.wait_for(asyncio.open_connection(
                ip, port, ssl=self.ctx, server_hostname=DOT_HOST,
                local_addr=(self.ip, 0)), TCP_IDLE_TIMEOUT)
        except (OSError, TimeoutError, ssl.SSLError):
            self.count("dot_connect_failed")
            self._forget(conn)
            return
        if conn.closed:  # evicted while connecting
            writer.close()
            return
        conn.writer = writer
        sockname = writer.get_extra_info("sockname")
        if sockname:
            self.flows[(self.ip, sockname[1])] = conn.number
        for frame in conn.waiting:
            self._write(conn, frame)
        conn.waiting.clear()
        try:
            while True:
                head = await reader.readexactly(2)
                data = await reader.readexactly(int.from_bytes(head, "big"))
                if len(data) < 12 or not data[2] & 0x80:
                    self.count("upstream_not_response")
                    continue
                self._touch(conn)
                self.deliver(data, conn.dst)
        except (asyncio.IncompleteReadError, ConnectionError, OSError, ssl.SSLError):
            if not conn.closed:
                self.count("dot_closed_by_server")
        finally:
            self._forget(conn)

    def _forget(self, conn: _DotConn) -> None:
        conn.closed = True
        if self._conns.get(conn.dst) is conn:
            del self._conns[conn.dst]
        if conn.timer is not None:
            conn.timer.cancel()
            conn.timer = None

    def _close(self, conn: _DotConn, why: str) -> None:
        self.count(why)
        self._forget(conn)
        if conn.writer is not None and not conn.writer.is_closing():
            conn.writer.close()  # TLS close_notify, then FIN
        elif conn.writer is None and conn.task is not None:
            conn.task.cancel()

    def close(self) -> None:
        for conn in list(self._conns.values()):
            self._close(conn, "dot_closed")
