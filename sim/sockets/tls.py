"""DNS over TLS on the serving side (RFC 7858): a listener whose handshakes are bounded.

TCP is accepted by asyncio and the TLS handshake is run here, so that each one is bounded
in time (``TcpLimits.handshake``) and in number: at most ``TcpLimits.per_listener`` at once,
and a new connection cuts off the oldest handshake (the one that made least progress)
rather than being refused, so silent connections cannot lock new clients out. What follows
the handshake is the caller's (:func:`sim.sockets.tcp.serve_tcp_stream` with its bounds).
Failed, timed-out and cut-off handshakes are counted.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from nodes.dns.zone import Address
from sim.sockets.tcp import LISTEN_BACKLOG, TcpLimits
from sim.sockets.udp import naming

Stream = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@dataclass(eq=False)
class _Handshake:
    """A TLS handshake in progress: its deadline, moved to now to cut it off."""

    deadline: asyncio.Timeout | None = None
    evicted: bool = False


class TlsListener:
    """Accepts DNS-over-TLS connections on one address and port; ``serve`` gets each
    connection once its handshake is done (counted as ``tls_connections``)."""

    def __init__(self, ctx: ssl.SSLContext, limits: TcpLimits, serve: Stream,
                 count: Callable[[str], None]) -> None:
        self.ctx, self.limits, self.serve, self.count = ctx, limits, serve, count
        self.server: asyncio.base_events.Server | None = None
        # handshakes in progress, oldest first (a dict as an ordered set)
        self._handshakes: dict[_Handshake, None] = {}

    async def start(self, address: Address) -> None:
        with naming(address, "tcp"):
            self.server = await asyncio.start_server(self._on_stream, *address,
                                                     reuse_address=True,
                                                     backlog=LISTEN_BACKLOG)

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
        for pending in list(self._handshakes):
            self._cut(pending)

    async def _on_stream(self, reader: asyncio.StreamReader,
                         writer: asyncio.StreamWriter) -> None:
        if await self._handshake(writer):
            self.count("tls_connections")
            await self.serve(reader, writer)

    def _cut(self, pending: _Handshake) -> None:
        """End a handshake in progress now (its task sees its deadline pass)."""
        self._handshakes.pop(pending, None)
        pending.evicted = True
        if pending.deadline is not None:
            pending.deadline.reschedule(asyncio.get_running_loop().time())

    async def _handshake(self, writer: asyncio.StreamWriter) -> bool:
        """The server side of one TLS handshake; False (counted, connection aborted) when
        it failed, timed out or was cut off for a newer one."""
        pending = self._handshakes
        if len(pending) >= self.limits.per_listener:  # the oldest made least progress
            self._cut(next(iter(pending)))
            self.count("tls_handshake_evicted")
        mine = _Handshake()
        pending[mine] = None
        try:
            async with asyncio.timeout(self.limits.handshake) as deadline:
                mine.deadline = deadline
                await writer.start_tls(self.ctx)
        except TimeoutError:
            if not mine.evicted:
                self.count("tls_handshake_timeout")
            writer.transport.abort()
            return False
        except (ssl.SSLError, ConnectionError, OSError):
            self.count("tls_handshake_failed")
            writer.transport.abort()
            return False
        finally:
            pending.pop(mine, None)
        return True
