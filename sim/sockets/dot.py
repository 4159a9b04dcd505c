"""A resolver's DNS-over-TLS connections to the authoritative servers (RFC 7858), on sockets.

The connection table (which connection a query takes, which are closed and when) is
:class:`sim.sockets.dotpool.DotPool`, shared with the simulation engine; this module opens,
writes, reads and closes the real TLS 1.3 connections it decides on, and tells the node
(``lost``) when a server could not be reached or closed a connection, so that the queries
waiting on it are retried at once rather than after their timeout.
"""

from __future__ import annotations

import asyncio
import itertools
import ssl
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from nodes.dns.zone import Address
from nodes.resolver.types import Outgoing
from sim.accounting import IPV4, TCP, TCP_TS, dot_port
from sim.build.hierarchy import DOT_HOST
from sim.sockets.dotpool import Closing, DotConnection, DotPool
from sim.sockets.links import SYN_RTO, Shaper, ip_size
from sim.sockets.timing import call_precisely, sleep_precisely

_COUNTERS: dict[Closing, str] = {"idle": "dot_closed", "evicted": "dot_evicted"}
CONNECT_TIMEOUT = 3.0  # seconds for the TCP and TLS handshakes (after the emulated delays)
Lost = Callable[[Address, bool], None]  # (server, refused: the connection never opened)


@dataclass(eq=False)
class _DotConn(DotConnection[Address]):
    writer: asyncio.StreamWriter | None = None
    waiting: list[bytes] = field(default_factory=list)  # frames queued during the handshake
    timer: asyncio.TimerHandle | None = None
    task: asyncio.Task | None = None
    closed: bool = False


class DotUpstream:
    """A resolver's DNS-over-TLS connections to the authoritative servers (RFC 7858).

    One persistent TLS 1.3 connection per server (port :func:`dot_port` of the server's
    DNS port), as :class:`DotPool` decides: reused (RFC 7766 §6.2.1), at most
    ``max_connections`` (the least recently used is closed to open another), each closed
    after ``idle`` seconds without a query or reply (close_notify, then FIN). The emulated
    link delays of the TCP handshake and the TLS round trip are waited before the real
    handshake; each message waits its own. Replies are handed to the node as transport
    "tls" from the server's DNS address; the node checks IDs and questions. Each exchange
    is marked on its Step (connection number, whether it opened it) for the accounting.
    A connection that cannot be opened within :data:`CONNECT_TIMEOUT`, or that the server
    closes, is reported to ``lost`` (the server's DNS address; True when it never opened).
    """

    def __init__(self, ip: str, ctx: ssl.SSLContext, deliver: Callable[[bytes, Address], None],
                 count: Callable[[str], None], shaper: Shaper | None = None,
                 idle: float = 10.0, max_connections: int = 64,
                 numbers: Iterator[int] | None = None, sizes: object | None = None,
                 flows: dict[tuple[str, int], int] | None = None,
                 lost: Lost | None = None, tls_port: int = 0) -> None:
        self.ip, self.ctx, self.deliver, self.count, self.shaper = ip, ctx, deliver, count, shaper
        # the servers' DNS-over-TLS port (0: dot_port of the DNS port they are asked at)
        self.tls_port = tls_port
        self.lost = lost
        # connection numbers are shared by an engine's resolvers
        self.pool: DotPool[Address, _DotConn] = DotPool(
            idle, max_connections, numbers or itertools.count(1), _DotConn)
        self.sizes = sizes  # sim.accounting.TlsSizes: the flights' sizes for the delays
        # (own address, local port) -> connection number: lets a capture attribute the
        # encrypted packets of each connection (sim.run.capture, as registry flows)
        self.flows = flows if flows is not None else {}

    def __len__(self) -> int:
        return len(self.pool)

    def send(self, out: Outgoing) -> None:
        loop = asyncio.get_running_loop()
        conn, opened, closed = self.pool.use(out.dst, loop.time())
        for old, why in closed:
            self._close(old, _COUNTERS[why])
        if opened:
            self.count("dot_opened")
            conn.task = loop.create_task(self._run(conn))
        if out.step is not None:
            out.step.conn, out.step.opened = conn.number, opened
        self._arm(conn)
        frame = len(out.data).to_bytes(2, "big") + out.data
        if conn.writer is None:
            conn.waiting.append(frame)
            return
        self._write(conn, frame)

    def _write(self, conn: _DotConn, frame: bytes) -> None:
        delay = (self.shaper(self.ip, conn.dst[0], ip_size("tls", len(frame) - 2))
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

    def _arm(self, conn: _DotConn) -> None:
        """The idle timer of ``conn`` (traffic since only moves its deadline)."""
        if conn.timer is None:
            conn.timer = asyncio.get_running_loop().call_later(
                self.pool.idle, self._check_idle, conn)

    def _check_idle(self, conn: _DotConn) -> None:
        conn.timer = None
        loop = asyncio.get_running_loop()
        left = self.pool.idle_deadline(conn) - loop.time()
        if conn.closed:
            return
        if left > 0:
            conn.timer = loop.call_later(left, self._check_idle, conn)
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
        ip, port = conn.dst[0], self.tls_port or dot_port(conn.dst[1])
        try:
            await self._handshake_delay(ip)
            reader, writer = await asyncio.wait_for(asyncio.open_connection(
                ip, port, ssl=self.ctx, server_hostname=DOT_HOST,
                local_addr=(self.ip, 0)), CONNECT_TIMEOUT)
        except (OSError, TimeoutError, ssl.SSLError):
            self.count("dot_connect_failed")
            self._forget(conn)
            if self.lost is not None:
                self.lost(conn.dst, True)
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
                conn.last = asyncio.get_running_loop().time()
                self._arm(conn)
                self.deliver(data, conn.dst)
        except (asyncio.IncompleteReadError, ConnectionError, OSError, ssl.SSLError):
            if not conn.closed:
                self.count("dot_closed_by_server")
                self._forget(conn)  # first: the retries open a new connection
                if self.lost is not None:
                    self.lost(conn.dst, False)
        finally:
            self._forget(conn)

    def _forget(self, conn: _DotConn) -> None:
        conn.closed = True
        self.pool.remove(conn)
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
        for conn in self.pool.connections():
            self._close(conn, "dot_closed")
