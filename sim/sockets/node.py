"""A resolver or an agent on real sockets (:class:`NodeEndpoint`).

The node code never sees a socket or a clock: the adapter passes ``loop.time()`` (minus the
run's origin) in, sends what the node wants sent, and re-arms the node's timer.
"""

from __future__ import annotations

import asyncio
import random
import ssl
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from nodes.agent.session import DnsAgent
from nodes.dns.zone import Address
from nodes.resolver.core import RecursiveResolver
from nodes.resolver.types import Discovery, DiscoveryResult, Outgoing, Transport
from sim.accounting import IPV4, TCP
from sim.sockets.dot import DotUpstream
from sim.sockets.links import SYN_RTO, Shaper, ip_size
from sim.sockets.tcp import (
    LISTEN_BACKLOG,
    TCP_IDLE_TIMEOUT,
    TcpLimits,
    drop,
    serve_tcp_stream,
)
from sim.sockets.timing import call_precisely, sleep_precisely
from sim.sockets.tls import TlsListener
from sim.sockets.udp import Datagrams, naming, send_datagram
from sim.sockets.upstream import UpstreamSockets

DEFAULT_PORT = 15353  # a hierarchy served on loopback (tooldns serve); never a source port


@dataclass
class NodeEndpoint:
    """Drives a sans-IO node (a resolver or an agent) over real sockets.

    Queries the node originates leave from :class:`UpstreamSockets` (random source ports,
    answers accepted only on the socket their query left from) and short TCP connections
    after TC; with ``address`` set it also serves stub clients on UDP and TCP there, where
    only queries are accepted, and with ``tls`` DNS over TLS on ``tls_port`` (answered as
    over TCP). Query IDs come from the OS's randomness (``secure_ids``).
    Finished work goes to ``on_done`` (kept in ``results`` only with ``keep_results``).
    """

    node: RecursiveResolver | DnsAgent
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
    tls: ssl.SSLContext | None = None  # DNS over TLS for stub clients on tls_port
    tls_port: int = 0
    _tls_listener: TlsListener | None = None
    # peers outside the node code (a stock recursor, sim.engines.stock): they send
    # unshaped, so their answers get their link's delay here (:meth:`_from_upstream`)
    external: frozenset[str] = frozenset()

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
        if self.dot is not None and self.dot.lost is None:
            self.dot.lost = self._upstream_lost
        self._upstream = UpstreamSockets(self.source_ip, self._from_upstream,
                                         node.is_pending, self.count, self.upstream_sockets,
                                         avoid)
        if self.address is not None:
            with naming(self.address, "udp"):
                self._listen, _ = await loop.create_datagram_endpoint(
                    lambda: Datagrams(self._on_client_datagram), local_addr=self.address)
            with naming(self.address, "tcp"):
                self._tcp_server = await asyncio.start_server(
                    self._on_client_stream, *self.address, reuse_address=True,
                    backlog=LISTEN_BACKLOG)
            if self.tls is not None:
                self._tls_listener = TlsListener(self.tls, self.tcp_limits,
                                                 self._on_client_stream, self.count)
                await self._tls_listener.start((self.address[0], self.tls_port))

    def close(self) -> None:
        if self._upstream is not None:
            self._upstream.close()
        if self.dot is not None:
            self.dot.close()
        if self._listen is not None:
            self._listen.close()
        if self._tcp_server is not None:
            self._tcp_server.close()
        if self._tls_listener is not None:
            self._tls_listener.close()
        for conn in list(self._conns):
            drop(conn)
        if self._timer is not None:
            self._timer.cancel()
        for task in list(self._tasks):
            task.cancel()

    # -- plumbing ------------------------------------------------------------------

    def _receive(self, data: bytes, src: Address, transport: Transport) -> None:
        try:
            self.node.receive(data, src, self.now(), transport)
        except Exception:  # a node bug on a peer's packet: counted, no traceback per packet
            self.count("node_error")
        self.pump()

    def _from_upstream(self, data: bytes, src: Address) -> None:
        """An answer to a query this node sent; a stock recursor's (``external``) is held
        here for its link's one-way delay, or lost, as its own adapter would have done."""
        if src[0] in self.external and self.shaper is not None:
            hold = self.shaper(src[0], self.source_ip, ip_size("udp", len(data)))
            if hold is None:
                return
            if hold > 0:
                call_precisely(hold, self._receive, data, src, "udp")
                return
        self._receive(data, src, "udp")

    def _upstream_lost(self, server: Address, refused: bool) -> None:
        """A DNS-over-TLS connection to ``server`` failed or was closed by it: the resolver
        retries what waited on it now."""
        if isinstance(self.node, RecursiveResolver):
            self.node.upstream_lost(server, "tls", self.now(), refused)
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
                send_datagram(self._listen, out.data, out.dst, src_ip, self.shaper)
            elif self._upstream is not None:
                self._upstream.send(out.data, out.dst, self.shaper)
            return
        if out.reply:
            writer = self._clients.get(out.dst)
            if writer is None or writer.is_closing():
                return
            delay = self.shaper(src_ip, out.dst[0], ip_size("tcp", len(out.data))) \
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
            delay = self.shaper(self.source_ip, out.dst[0], ip_size("tcp", len(out.data))) \
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
            if out.dst[0] in self.external and self.shaper is not None:  # a recursor's
                hold = self.shaper(out.dst[0], self.source_ip, ip_size("tcp", len(data)))
                await sleep_precisely(hold if hold is not None else SYN_RTO)
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
            await serve_tcp_stream(reader, writer, handle, None, self.tcp_limits, self._conns,
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


