"""One authoritative server on real sockets: UDP, TCP and (optionally) DNS over TLS.

UDP datagrams and TCP with the two-byte length prefix of RFC 1035 §4.2.2, connections
bounded by :class:`sim.sockets.tcp.TcpLimits`; over TCP a zone transfer (AXFR) is answered
with every message ``AuthoritativeServer.transfer`` returns, anything else by ``handle``.
Given a TLS context the server also listens on ``tls_port`` (:func:`sim.accounting.dot_port`
in a run: TLS 1.3, the run CA's certificate for :data:`sim.build.hierarchy.DOT_HOST`).
A DoT connection holds no TLS state until its first bytes come, handshakes are bounded in
time, number (per process and per client address) and, when asked, rate
(:class:`sim.sockets.tls.TlsListener`), established connections as over TCP and by the
process's TLS memory budget (:data:`DOT_LIMITS`); malformed input is counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from nodes.authoritative.server import AuthoritativeServer
from nodes.dns.zone import Address
from sim.sockets.links import Shaper, ip_size
from sim.sockets.tcp import LISTEN_BACKLOG, TcpLimits, drop, serve_tcp_stream
from sim.sockets.timing import call_precisely
from sim.sockets.tls import TlsListener
from sim.sockets.udp import Datagrams, naming, send_datagram
from sim.sockets.wirelog import WireExchange

#: bounds on the servers' DNS-over-TLS connections: persistent by design (RFC 7858 §3.4),
#: so idle for longer than the resolvers' own idle timeout before the server closes them
#: (the least active go first when the listener is full); handshakes within 2 s
DOT_LIMITS = TcpLimits(idle=60.0, lifetime=3600.0, handshake=2.0)


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
    tls_listener: TlsListener | None = None
    _tls_conns: set = field(default_factory=set)
    # peers outside the node code (stock recursors, sim.engines.stock): they send unshaped,
    # so their packets get their link's delay (or loss) here, where they arrive, and every
    # exchange is told to ``on_exchange``
    external: frozenset[str] = frozenset()
    on_exchange: Callable[[WireExchange], None] | None = None
    _tcp_open: dict[Address, WireExchange] = field(default_factory=dict)  # reply not sent

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        ip = self.address[0]
        external = self.external

        def on_datagram(data: bytes, src: Address) -> None:
            if src[0] in external:
                self._from_external(data, src)
                return
            reply = self.server.handle(data, src, loop.time() - self.origin, "udp")
            if reply is not None:
                send_datagram(self.udp, reply, src, ip, self.shaper)

        with naming(self.address, "udp"):
            self.udp, _ = await loop.create_datagram_endpoint(
                lambda: Datagrams(on_datagram), local_addr=self.address)

        def delay(peer: Address, size: int) -> float | None:
            d = self.shaper(ip, peer[0], size) if self.shaper else 0.0
            ex = self._tcp_open.pop(peer, None) if peer[0] in external else None
            if ex is not None:  # a recursor's query: its own delay added here
                ex.back = d
                if d is not None:
                    d += ex.hold or 0.0
            return d

        def count(key: str) -> None:
            self.server.stats.counts[key] += 1

        def on_message(data: bytes, peer: Address) -> bytes | Iterable[bytes] | None:
            now = loop.time() - self.origin
            server = self.server
            if (xfr := server.transfer(data, peer, now)) is not None:  # held while written
                return server.transfers.sending(xfr, peer[0])
            reply = server.handle(data, peer, now, "tcp")
            if peer[0] in external:
                self._tcp_exchange(data, peer, now, reply)
            return reply

        async def on_stream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await serve_tcp_stream(reader, writer, on_message, delay, self.tcp_limits,
                                    self._conns, count)

        with naming(self.address, "tcp"):
            self.tcp = await asyncio.start_server(on_stream, *self.address,
                                                  reuse_address=True, backlog=LISTEN_BACKLOG)
        if self.tls is not None:
            await self._start_tls(self.tls, delay, count)

    async def _start_tls(self, ctx: ssl.SSLContext,
                         delay: Callable[[Address, int], float | None],
                         count: Callable[[str], None]) -> None:
        """Listen for DNS over TLS on ``tls_port`` (:class:`sim.sockets.tls.TlsListener`)."""
        loop = asyncio.get_running_loop()
        limits = self.tls_limits

        def on_message(data: bytes, peer: Address) -> bytes | None:
            return self.server.handle(data, peer, loop.time() - self.origin, "tls")

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            # persistent: open when the run ends, so cancelled then (nothing to report)
            with contextlib.suppress(asyncio.CancelledError):
                await serve_tcp_stream(reader, writer, on_message, delay, limits,
                                        self._tls_conns, count, transport="tls")

        self.tls_listener = TlsListener(ctx, limits, serve, count)
        await self.tls_listener.start((self.address[0], self.tls_port))

    def _from_external(self, data: bytes, src: Address) -> None:
        """A stock recursor's datagram: held for its link's one-way delay (dropped when the
        link loses it), then answered as any other; the exchange is logged."""
        loop = asyncio.get_running_loop()
        ip = self.address[0]
        ex = WireExchange(ip, src, "udp", loop.time() - self.origin, data,
                          self.shaper(src[0], ip, ip_size("udp", len(data)))
                          if self.shaper else 0.0)
        if self.on_exchange is not None:
            self.on_exchange(ex)
        if ex.hold is None:
            return

        def handle() -> None:
            now = loop.time() - self.origin
            reply = self.server.handle(data, src, now, "udp")
            if reply is None or self.udp is None:
                return
            self._replied(ex, reply, now)
            ex.back = (self.shaper(ip, src[0], ip_size("udp", len(reply)))
                       if self.shaper else 0.0)
            if ex.back is None:
                return
            if ex.back > 0:
                call_precisely(ex.back, self.udp.sendto, reply, src)
            else:
                self.udp.sendto(reply, src)

        if ex.hold > 0:
            call_precisely(ex.hold, handle)
        else:
            handle()

    def _tcp_exchange(self, data: bytes, peer: Address, now: float,
                      reply: bytes | None) -> None:
        """A stock recursor's query over TCP: logged; its one-way delay is added to the
        reply's (the stream is read as it arrives; a lost segment is not modelled)."""
        ip = self.address[0]
        hold = self.shaper(peer[0], ip, ip_size("tcp", len(data))) if self.shaper else 0.0
        ex = WireExchange(ip, peer, "tcp", now, data, hold or 0.0)
        if reply is not None:  # its delay is drawn when serve_tcp_stream writes it
            self._replied(ex, reply, now)
            self._tcp_open[peer] = ex
        if self.on_exchange is not None:
            self.on_exchange(ex)

    @staticmethod
    def _replied(ex: WireExchange, reply: bytes, now: float) -> None:
        ex.reply, ex.answered = len(reply), now
        if len(reply) >= 4:
            ex.rcode, ex.tc = reply[3] & 0x0F, bool(reply[2] & 0x02)

    def close(self) -> None:
        if self.udp is not None:
            self.udp.close()
        if self.tcp is not None:
            self.tcp.close()
        if self.tls_listener is not None:
            self.tls_listener.close()
        for conn in [*self._conns, *self._tls_conns]:
            drop(conn)

