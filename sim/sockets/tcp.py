"""DNS over TCP on the serving side: connection bounds, admission, and one connection's loop.

Connections are bounded per listener and per process (:class:`TcpLimits`, RFC 7766
§6.2); at a bound the connection idle longest is closed, or the new one refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from nodes.dns.zone import Address
from sim.sockets.links import ip_size
from sim.sockets.timing import call_precisely, sleep_precisely

TCP_IDLE_TIMEOUT = 10.0


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
    message: float = TCP_IDLE_TIMEOUT  # a message must arrive whole this soon once begun
    lifetime: float = 120.0  # a connection is closed this long after it opened
    write: float = TCP_IDLE_TIMEOUT  # a reply must be taken by the peer this soon
    write_buffer: int = 16 * 1024  # replies held for a slow reader before writes wait

    def process_limit(self) -> int:
        if self.per_process:
            return self.per_process
        return max(64, resource.getrlimit(resource.RLIMIT_NOFILE)[0] // 2)


@dataclass(eq=False)
class TcpConnection:
    writer: asyncio.StreamWriter
    listener: set
    last: float  # loop time of the last complete message or reply
    busy: bool = False  # a message is being read or answered


_PROCESS_CONNS: set[TcpConnection] = set()  # every DNS-over-TCP connection this process holds


def admit(conn: TcpConnection, limits: TcpLimits, count: Callable[[str], None]) -> bool:
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
        drop(oldest)
        count(key + "_evicted_idle")
    conn.listener.add(conn)
    _PROCESS_CONNS.add(conn)
    return True


def drop(conn: TcpConnection) -> None:
    conn.listener.discard(conn)
    _PROCESS_CONNS.discard(conn)
    transport = conn.writer.transport
    if transport is not None and not transport.is_closing():
        transport.abort()


async def serve_tcp_stream(
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
    conn = TcpConnection(writer, listener if listener is not None else set(), opened)
    if not admit(conn, limits, count):
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
            replies = () if reply is None else (reply,) if isinstance(reply, bytes) else reply
            ended = await _write_replies(writer, peer, replies, delay, limits, transport)
            if ended is not None:  # "": a lost segment ends the connection, uncounted
                why = ended
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


async def _write_replies(writer: asyncio.StreamWriter, peer: Address,
                         replies: Sequence[bytes],
                         delay: Callable[[Address, int], float | None] | None,
                         limits: TcpLimits, transport: str) -> str | None:
    """Write each reply after its emulated delay; None when all went, "" when one was lost
    (modelled as a dead connection), else the counter of the deadline that ended it."""
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
    return None


def write_open(writer: asyncio.StreamWriter, data: bytes) -> None:
    """Write ``data`` unless the connection is closing by now."""
    if not writer.is_closing():
        writer.write(data)

