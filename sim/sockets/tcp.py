"""DNS over TCP on the serving side: connection bounds, admission, and one connection's loop.

Connections are bounded per listener and per process (:class:`TcpLimits`, RFC 7766
§6.2), and DNS-over-TLS ones also by the process's TLS memory budget (``tls_memory``,
as Unbound's ``stream-wait-size`` bounds what its streams hold). At a bound the
connection that made least progress is closed to admit the new one (as Knot, Unbound and
dnsdist shed load): progress is a message read whole or a reply taken
by the peer, so a connection idle between messages, or stuck in the middle of one for
longer than ``stall``, can go; only connections whose current message or reply is moving
are kept, and when every one is, the new connection is refused. Either way it is counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from nodes.dns.zone import Address
from sim.sockets.links import ip_size
from sim.sockets.timing import call_precisely, sleep_precisely

TCP_IDLE_TIMEOUT = 10.0
READ_CHUNK = 65_536  # bytes read at once: at most one whole message beside a partial one
# connections the kernel queues before they are accepted (asyncio's default, 100, drops the
# SYNs of new clients while a flood of connections waits to be accepted and shed)
LISTEN_BACKLOG = 1024
#: what one established DNS-over-TLS connection holds, rounded up: the serving process's
#: RSS grew by 43 KiB a connection with 2,000 idle ones open (the TLS state, a 16 KiB read
#: buffer: sim.sockets.tls.SmallTls, the stream and its task; 283 KiB with asyncio's own)
TLS_CONNECTION_BYTES = 64 * 1024


def raise_fd_limit() -> None:
    """Each server holds two sockets; lift the soft descriptor limit to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


@dataclass(frozen=True)
class TcpLimits:
    """Bounds on DNS-over-TCP connections a listener accepts (RFC 7766 §6.2)."""

    per_listener: int = 256  # open connections per server (BIND's tcp-clients is 150)
    per_process: int = 0  # open connections over all listeners; 0: half the fd limit
    idle: float = TCP_IDLE_TIMEOUT  # no new message for this long: closed (§6.2.3)
    # a message must arrive whole this soon once its first byte came (Knot's tcp-io-timeout
    # is 0.5 s, dnsdist's receive timeout 2 s)
    message: float = 2.0
    # a connection whose message or reply has not moved for this long counts as idle when
    # room is needed (evicted before the new connection is refused)
    stall: float = 0.5
    handshake: float = 2.0  # TLS listeners: a handshake must finish this soon
    # TLS handshakes in progress in the process (all listeners), and from one client
    # address (0: no bound); beyond them new ones queue, or cut off one stalled for `stall`
    handshakes: int = 64
    handshakes_per_client: int = 16
    # new TLS handshakes a second from one client address, and in the process (0: no
    # bound; a run's resolvers open their connections in bursts: tooldns serve sets them)
    handshake_rate: float = 0.0
    process_handshake_rate: float = 0.0
    rate_exempt: frozenset[str] = frozenset()  # addresses neither rate bounds (our own)
    # bytes the process's established TLS connections may hold (TLS_CONNECTION_BYTES each)
    tls_memory: int = 256 * 2**20
    lifetime: float = 120.0  # a connection is closed this long after it opened
    write: float = TCP_IDLE_TIMEOUT  # a reply must be taken by the peer this soon
    write_buffer: int = 16 * 1024  # replies held for a slow reader before writes wait

    def process_limit(self) -> int:
        if self.per_process:
            return self.per_process
        return max(64, resource.getrlimit(resource.RLIMIT_NOFILE)[0] // 2)

    def tls_limit(self) -> int:
        """Established DNS-over-TLS connections the process keeps (its memory budget)."""
        return max(16, self.tls_memory // TLS_CONNECTION_BYTES)


@dataclass(eq=False)
class TcpConnection:
    writer: asyncio.StreamWriter
    listener: set
    last: float  # loop time of its last progress: opened, a message read whole, a reply taken
    busy: bool = False  # a message is being read or answered


_PROCESS_CONNS: set[TcpConnection] = set()  # every DNS-over-TCP connection this process holds
_PROCESS_TLS: set[TcpConnection] = set()  # ... of which over TLS


def admit(conn: TcpConnection, limits: TcpLimits, count: Callable[[str], None],
          now: float, tls: bool = False) -> bool:
    """Make room for a new connection: at a limit (this listener's, the process's, and
    with ``tls`` the process's TLS budget) the connection that made least progress is
    closed, as RFC 7766 §6.2.3 allows under pressure: idle ones and ones stalled for
    ``limits.stall`` mid-message or mid-reply; if every one is moving, the new one is
    refused. Counted either way."""
    stalled = now - limits.stall
    pools = [(conn.listener, limits.per_listener, "tcp_listener_full"),
             (_PROCESS_CONNS, limits.process_limit(), "tcp_process_full")]
    if tls:
        pools.append((_PROCESS_TLS, limits.tls_limit(), "tls_memory_full"))
    for pool, limit, key in pools:
        if len(pool) < limit:
            continue
        victim = min((c for c in pool if not c.busy or c.last <= stalled),
                     key=lambda c: c.last, default=None)
        if victim is None:
            count(key + "_refused")
            return False
        count(key + ("_evicted_stalled" if victim.busy else "_evicted_idle"))
        drop(victim)
    conn.listener.add(conn)
    _PROCESS_CONNS.add(conn)
    if tls:
        _PROCESS_TLS.add(conn)
    return True


def drop(conn: TcpConnection) -> None:
    conn.listener.discard(conn)
    _PROCESS_CONNS.discard(conn)
    _PROCESS_TLS.discard(conn)
    transport = conn.writer.transport
    if transport is not None and not transport.is_closing():
        transport.abort()


Handler = Callable[[bytes, Address], "bytes | Iterable[bytes] | None"]
Delay = Callable[[Address, int], "float | None"]


async def serve_tcp_stream(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    handle: Handler,
    delay: Delay | None = None,
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
    conn = TcpConnection(writer, listener if listener is not None else set(), opened)
    tls = writer.get_extra_info("ssl_object") is not None
    if not admit(conn, limits, count, opened, tls):
        writer.transport.abort()
        return
    writer.transport.set_write_buffer_limits(high=limits.write_buffer)
    peer = writer.get_extra_info("peername")[:2]
    why = ""
    try:
        why = await _messages(reader, writer, conn, handle, delay, limits, peer, transport)
    except (asyncio.IncompleteReadError, ConnectionError, OSError):
        pass
    finally:
        if why:
            count(why)
        conn.listener.discard(conn)
        _PROCESS_CONNS.discard(conn)
        _PROCESS_TLS.discard(conn)
        if why:
            writer.transport.abort()
        else:
            writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


async def _messages(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    conn: TcpConnection, handle: Handler, delay: Delay | None,
                    limits: TcpLimits, peer: Address, transport: str) -> str:
    """Read and answer messages until EOF ("") or a deadline (its counter's name)."""
    loop = asyncio.get_running_loop()
    end = conn.last + limits.lifetime
    buf = bytearray()
    begun = 0.0  # when the first byte of the message being read came
    while True:
        now = loop.time()
        if buf:  # in the middle of a message
            wait, ending = begun + limits.message - now, "tcp_slow_message_closed"
        else:
            wait, ending = limits.idle, "tcp_idle_closed"
        if end - now < wait:
            wait, ending = end - now, "tcp_lifetime_closed"
        if wait <= 0:
            return ending
        try:
            async with asyncio.timeout(wait):  # no task per read
                chunk = await reader.read(READ_CHUNK)
        except TimeoutError:
            return ending
        if not chunk:
            return ""
        if not buf:
            begun = loop.time()
        buf += chunk
        conn.busy = True
        while len(buf) >= 2 and len(buf) >= 2 + (size := int.from_bytes(buf[:2], "big")):
            data = bytes(buf[2:2 + size])
            del buf[:2 + size]
            conn.last = loop.time()
            reply = handle(data, peer)
            replies = () if reply is None else (reply,) if isinstance(reply, bytes) else reply
            ended = await _write_replies(writer, conn, peer, replies, delay, limits, transport)
            if ended is not None:  # "": a lost segment ends the connection, uncounted
                return ended
            begun = loop.time()  # a message already begun counts from here
        conn.busy = bool(buf)


async def _write_replies(writer: asyncio.StreamWriter, conn: TcpConnection, peer: Address,
                         replies: Iterable[bytes], delay: Delay | None,
                         limits: TcpLimits, transport: str) -> str | None:
    """Write each reply after its emulated delay; None when all went, "" when one was lost
    (modelled as a dead connection), else the counter of the deadline that ended it. Each
    reply the peer takes is progress."""
    loop = asyncio.get_running_loop()
    for out in replies:
        d = delay(peer, ip_size(transport, len(out))) if delay is not None else 0.0
        if d is None:  # emulated loss of a TCP segment: modelled as a dead connection
            return ""
        if transport == "tls" and d:  # pipelined: written once its delay is over
            call_precisely(d, write_open, writer, len(out).to_bytes(2, "big") + out)
            continue
        if d:
            await sleep_precisely(d)
        writer.write(len(out).to_bytes(2, "big") + out)
        try:
            async with asyncio.timeout(limits.write):
                await writer.drain()
        except TimeoutError:
            return "tcp_write_timeout_closed"
        conn.last = loop.time()
    return None


def write_open(writer: asyncio.StreamWriter, data: bytes) -> None:
    """Write ``data`` unless the connection is closing by now."""
    if not writer.is_closing():
        writer.write(data)
