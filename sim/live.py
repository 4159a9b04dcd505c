"""Live engine: the same node objects behind real UDP/TCP sockets on 127.0.0.0/8 (asyncio).

* :class:`ServerEndpoint` — one authoritative server on ``(address, port)``: UDP datagrams
  and TCP with the two-byte length prefix of RFC 1035 §4.2.2 (RFC 7766 idle timeout).
* :class:`ResolverEndpoint` — a recursive resolver: upstream queries from its own UDP
  socket (and short TCP connections after TC), stub clients served on its listening
  address over UDP and TCP; timers scheduled with ``loop.call_at``.
* :class:`LiveHierarchy` — every server of a :class:`sim.hierarchy.Hierarchy` plus a
  resolver, started together (``tooldns serve``).

The node code never sees a socket or a clock: the adapters pass ``loop.time()`` in.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import resource
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from nodes.agent import StubAgent
from nodes.authoritative import AuthoritativeServer
from nodes.resolver import (
    Discovery,
    DiscoveryResult,
    Outgoing,
    RecursiveResolver,
    ResolverConfig,
)
from nodes.zone import Address
from sim.accounting import IPV4, TCP, UDP
from sim.hierarchy import Hierarchy

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


def _ip_size(transport: str, payload: int) -> int:
    return IPV4 + (UDP if transport == "udp" else TCP + 2) + payload


async def _serve_tcp_stream(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    handle: Callable[[bytes, Address], bytes | None],
    delay: Callable[[Address, int], float | None] | None = None,
) -> None:
    """Length-prefixed DNS over one TCP connection until EOF, error or idle timeout."""
    peer = writer.get_extra_info("peername")[:2]
    try:
        while True:
            head = await asyncio.wait_for(reader.readexactly(2), TCP_IDLE_TIMEOUT)
            data = await asyncio.wait_for(
                reader.readexactly(int.from_bytes(head, "big")), TCP_IDLE_TIMEOUT)
            reply = handle(data, peer)
            if reply is None:
                continue
            d = delay(peer, _ip_size("tcp", len(reply))) if delay is not None else 0.0
            if d is None:  # emulated loss of a TCP segment: modelled as a dead connection
                break
            if d:
                await sleep_precisely(d)
            writer.write(len(reply).to_bytes(2, "big") + reply)
            await writer.drain()
    except (asyncio.IncompleteReadError, TimeoutError, ConnectionError):
        pass
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


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
    udp: asyncio.DatagramTransport | None = None
    tcp: asyncio.base_events.Server | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        ip = self.address[0]

        def on_datagram(data: bytes, src: Address) -> None:
            reply = self.server.handle(data, src, loop.time() - self.origin, "udp")
            if reply is not None:
                _sendto(self.udp, reply, src, ip, self.shaper)

        self.udp, _ = await loop.create_datagram_endpoint(
            lambda: _Datagrams(on_datagram), local_addr=self.address)

        def delay(peer: Address, size: int) -> float | None:
            return self.shaper(ip, peer[0], size) if self.shaper else 0.0

        async def on_stream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await _serve_tcp_stream(
                reader, writer,
                lambda data, peer: self.server.handle(data, peer, loop.time() - self.origin,
                                                      "tcp"),
                delay)

        self.tcp = await asyncio.start_server(on_stream, *self.address, reuse_address=True)

    def close(self) -> None:
        if self.udp is not None:
            self.udp.close()
        if self.tcp is not None:
            self.tcp.close()


@dataclass
class NodeEndpoint:
    """Drives a sans-IO node (a resolver or an agent) over real sockets.

    Queries the node originates leave from its own UDP socket (and short TCP connections
    after TC); with ``address`` set it also serves stub clients on UDP and TCP there.
    ``collect`` drains the node's finished work (``pop_results`` / ``pop_done``).
    """

    node: RecursiveResolver | StubAgent
    address: Address | None = None
    source_ip: str = "127.0.0.1"
    origin: float = 0.0
    shaper: Shaper | None = None
    on_done: Callable[[list], None] | None = None
    results: list = field(default_factory=list)
    _upstream: asyncio.DatagramTransport | None = None
    _listen: asyncio.DatagramTransport | None = None
    _tcp_server: asyncio.base_events.Server | None = None
    _timer: asyncio.TimerHandle | None = None
    _armed: float | None = None
    _clients: dict[Address, asyncio.StreamWriter] = field(default_factory=dict)
    _waiters: list[asyncio.Future] = field(default_factory=list)
    _tasks: set[asyncio.Task] = field(default_factory=set)

    @property
    def resolver(self) -> RecursiveResolver:
        assert isinstance(self.node, RecursiveResolver)
        return self.node

    def now(self) -> float:
        return asyncio.get_running_loop().time() - self.origin

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._upstream, _ = await loop.create_datagram_endpoint(
            lambda: _Datagrams(lambda d, s: self._receive(d, s, "udp")),
            local_addr=(self.source_ip, 0))
        if self.address is not None:
            self._listen, _ = await loop.create_datagram_endpoint(
                lambda: _Datagrams(lambda d, s: self._receive(d, s, "udp")),
                local_addr=self.address)
            self._tcp_server = await asyncio.start_server(
                self._on_client_stream, *self.address, reuse_address=True)

    def close(self) -> None:
        for t in (self._upstream, self._listen):
            if t is not None:
                t.close()
        if self._tcp_server is not None:
            self._tcp_server.close()
        if self._timer is not None:
            self._timer.cancel()
        for task in list(self._tasks):
            task.cancel()

    # -- plumbing ------------------------------------------------------------------

    def _receive(self, data: bytes, src: Address, transport: str) -> None:
        self.node.receive(data, src, self.now(), transport)  # type: ignore[arg-type]
        self.pump()

    def _on_timer(self) -> None:
        self._timer, self._armed = None, None
        self.node.on_timer(self.now())
        self.pump()

    def pump(self) -> None:
        """Send what the node wants sent, collect finished work, re-arm the timer."""
        loop = asyncio.get_running_loop()
        for out in self.node.to_send():
            self._transmit(out)
        node = self.node
        done = node.pop_results() if isinstance(node, RecursiveResolver) else node.pop_done()
        if done:
            self.results.extend(done)
            if self.on_done is not None:
                self.on_done(done)
            for fut in self._waiters:
                if not fut.done():
                    fut.set_result(None)
            self._waiters.clear()
        when = self.node.next_timer()
        if when != self._armed:
            if self._timer is not None:
                self._timer.cancel()
            self._timer, self._armed = None, when
            if when is not None:
                self._timer = loop.call_at(self.origin + when, self._on_timer)

    def _transmit(self, out: Outgoing) -> None:
        src_ip = self.address[0] if out.reply and self.address else self.source_ip
        if out.transport == "udp":
            _sendto(self._listen if out.reply else self._upstream, out.data, out.dst, src_ip,
                    self.shaper)
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
        """One query over a fresh TCP connection (after a truncated UDP answer)."""
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
            await writer.drain()
            head = await asyncio.wait_for(reader.readexactly(2), TCP_IDLE_TIMEOUT)
            data = await asyncio.wait_for(reader.readexactly(int.from_bytes(head, "big")),
                                          TCP_IDLE_TIMEOUT)
            self._receive(data, out.dst, "tcp")
        except (asyncio.IncompleteReadError, TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()

    async def _on_client_stream(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        peer = writer.get_extra_info("peername")[:2]
        self._clients[peer] = writer

        def handle(data: bytes, src: Address) -> None:
            self._receive(data, src, "tcp")
            return None  # replies are written by _transmit when the walk completes

        try:
            await _serve_tcp_stream(reader, writer, handle)
        finally:
            self._clients.pop(peer, None)

    # -- API -------------------------------------------------------------------------

    async def discover(self, request: Discovery) -> DiscoveryResult:
        """Run one discovery to completion and return its result."""
        return await self._run(lambda now: self.resolver.discover(request, now))

    async def warm(self, service: str) -> DiscoveryResult:
        return await self._run(lambda now: self.resolver.warm(service, now))

    async def _run(self, start: Callable[[float], None]) -> DiscoveryResult:
        loop = asyncio.get_running_loop()
        before = len(self.results)
        start(self.now())
        self.pump()
        while len(self.results) == before:
            fut = loop.create_future()
            self._waiters.append(fut)
            await fut
        return self.results[before]


ResolverEndpoint = NodeEndpoint  # the name the CLI and older tests use


@dataclass
class LiveHierarchy:
    """All servers of a hierarchy on one port, plus a resolver serving stub clients."""

    hierarchy: Hierarchy
    port: int = DEFAULT_PORT
    resolver_address: str = DEFAULT_RESOLVER_ADDRESS
    resolver_seed: int = 0
    endpoints: list[ServerEndpoint] = field(default_factory=list)
    resolver: NodeEndpoint | None = None

    async def start(self) -> None:
        raise_fd_limit()
        for address, server in self.hierarchy.servers.items():
            endpoint = ServerEndpoint(server, (address, self.port))
            await endpoint.start()
            self.endpoints.append(endpoint)
        config = ResolverConfig(dns_port=self.port)
        node = self.hierarchy.resolver(seed=self.resolver_seed, config=config)
        self.resolver = NodeEndpoint(node, (self.resolver_address, self.port),
                                     source_ip=self.resolver_address)
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
