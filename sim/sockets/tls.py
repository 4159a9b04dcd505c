"""DNS over TLS on the serving side (RFC 7858): listeners whose connections cost little
until their peers do the work, with handshakes bounded in time, number and rate.

A connection is accepted here, not by asyncio's server, and waits as a bare socket until
its first bytes are readable (a TLS handshake record, 0x16; anything else is dropped); only
then does its TLS state exist, with a 16 KiB read buffer (:class:`SmallTls`; asyncio's own
holds 256 KiB per connection from the moment its handshake starts). Bounds, each counted
when reached:

* connections accepted and not yet through their handshake, per listener
  (``TcpLimits.per_listener``): a new one cuts off the oldest (``tls_handshake_evicted``),
  so silent connections cannot lock new clients out; those waiting for their first bytes,
  per process (``process_limit()``: ``tls_waiting_evicted``);
* handshakes in progress per process (``handshakes``) and per client address
  (``handshakes_per_client``): at a bound the oldest is cut off if it has stalled for
  ``stall`` seconds (``tls_handshake_process_evicted``, ``tls_handshake_client_evicted``),
  else the new one queues until there is room (``tls_handshake_queued``), so a burst of
  real clients is delayed, not cut;
* new handshakes a second per client address (``handshake_rate``) and per process
  (``process_handshake_rate``), token buckets with a burst of as many: beyond them the
  connection is closed before any TLS work (``tls_handshake_rate_refused``,
  ``tls_handshake_process_rate_refused``; as dnsdist's setMaxTLSNewSessionRatePerClient).
  Off by default (a run's resolvers open their connections in bursts); ``tooldns serve``
  sets them, its own resolver's address exempt (``rate_exempt``:
  :func:`sim.sockets.hierarchy.serving_limits`);
* a connection's time from accept to the end of its handshake (``handshake``:
  ``tls_handshake_timeout``).

Established connections are the caller's (:func:`sim.sockets.tcp.serve_tcp_stream`, where
the process's TLS connections share a memory budget, ``TcpLimits.tls_memory``).
"""

from __future__ import annotations

import asyncio
import errno
import itertools
import math
import socket
import ssl
import weakref
from asyncio import sslproto
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

from nodes.dns.zone import Address
from sim.sockets.tcp import LISTEN_BACKLOG, TcpLimits
from sim.sockets.udp import naming

Stream = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]

TLS_READ_BUFFER = 16 * 1024  # bytes read from the socket at once (a TLS record is <= 16 KiB)
HANDSHAKE_RECORD = b"\x16"  # the first byte of a TLS handshake record (a ClientHello)
ACCEPT_RETRY = 1.0  # seconds accepting pauses when the process is out of descriptors
MAX_BUCKETS = 65_536  # client addresses whose handshake rate is remembered (LRU)
QUEUE_SCAN = 256  # queued handshakes looked at per start (others wait for the next)


class SmallTls(sslproto.SSLProtocol):
    """asyncio's TLS protocol with a 16 KiB read buffer instead of 256 KiB: a DNS message is
    at most 64 KiB, read in a few records, while the default costs every connection a
    quarter of a MiB for as long as it lives."""

    max_size = TLS_READ_BUFFER


@dataclass(eq=False)
class _Pending:
    """An accepted connection before the end of its handshake."""

    sock: socket.socket
    client: str  # the peer's address (bounds per client)
    listener: TlsListener
    stage: Literal["waiting", "queued", "handshake", "ended"] = "waiting"
    timer: asyncio.TimerHandle | None = None  # its deadline, from the accept
    began: float = 0.0  # loop time its handshake began
    transport: asyncio.Transport | None = None
    task: asyncio.Task | None = None


class _Buckets:
    """Token buckets by key (a client address): ``rate`` a second, as many at once."""

    def __init__(self) -> None:
        self.tokens: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def take(self, key: str, rate: float, now: float) -> bool:
        """Spend one of ``key``'s tokens: False when there is none (``rate`` 0: no bound)."""
        if rate <= 0:
            return True
        burst = max(1.0, rate)
        tokens, then = self.tokens.pop(key, (burst, now))
        tokens = min(burst, tokens + (now - then) * rate)
        if len(self.tokens) >= MAX_BUCKETS:
            self.tokens.popitem(last=False)
        self.tokens[key] = (tokens - 1 if tokens >= 1 else tokens, now)
        return tokens >= 1


@dataclass
class _Shared:
    """What the DoT listeners of one event loop (a process) share, oldest first (dicts as
    ordered sets): connections waiting for their first bytes, queued for a handshake (all
    and per client address), handshakes in progress (all and per client address), the
    handshake allowances, and the next start of queued handshakes, if scheduled."""

    waiting: dict[_Pending, None] = field(default_factory=dict)
    queued: dict[_Pending, None] = field(default_factory=dict)
    queued_by_client: dict[str, dict[_Pending, None]] = field(default_factory=dict)
    handshakes: dict[_Pending, None] = field(default_factory=dict)
    by_client: dict[str, dict[_Pending, None]] = field(default_factory=dict)
    clients: _Buckets = field(default_factory=_Buckets)
    total: _Buckets = field(default_factory=_Buckets)
    start: asyncio.TimerHandle | None = None

    def forget(self, pending: _Pending) -> None:
        for pool in (self.waiting, self.queued, self.handshakes):
            pool.pop(pending, None)
        for by in (self.queued_by_client, self.by_client):
            mine = by.get(pending.client)
            if mine is not None:
                mine.pop(pending, None)
                if not mine:
                    del by[pending.client]


_SHARED: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Shared] = \
    weakref.WeakKeyDictionary()


def _add(by: dict[str, dict[_Pending, None]], pending: _Pending) -> None:
    by.setdefault(pending.client, {})[pending] = None


def _room(pool: dict[_Pending, None] | None, bound: int, key: str,
          listener: TlsListener, now: float) -> bool:
    """Room for one more handshake in ``pool`` under ``bound`` (0: none), cutting off its
    oldest when that one has stalled for the listener's ``stall`` seconds."""
    if not pool or bound <= 0 or len(pool) < bound:
        return True
    oldest = next(iter(pool))
    if now - oldest.began < listener.limits.stall:
        return False
    listener._end(oldest, key)
    return len(pool) < bound


class TlsListener:
    """Accepts DNS-over-TLS connections on one address and port; ``serve`` gets each
    connection once its handshake is done (counted as ``tls_connections``)."""

    def __init__(self, ctx: ssl.SSLContext, limits: TcpLimits, serve: Stream,
                 count: Callable[[str], None]) -> None:
        self.ctx, self.limits, self.serve, self.count = ctx, limits, serve, count
        self.sock: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.shared = _Shared()  # the loop's, from start()
        # this listener's connections not yet through their handshake, oldest first
        self._pending: dict[_Pending, None] = {}

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        assert self._loop is not None, "the listener has not started"
        return self._loop

    async def start(self, address: Address) -> None:
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        with naming(address, "tcp"):
            self.sock = socket.create_server(address, family=family, backlog=LISTEN_BACKLOG)
        self.sock.setblocking(False)
        self._loop = loop = asyncio.get_running_loop()
        self.shared = _SHARED.setdefault(loop, _Shared())
        loop.add_reader(self.sock.fileno(), self._accept)

    def close(self) -> None:
        if self.sock is not None:
            self.loop.remove_reader(self.sock.fileno())
            self.sock.close()
            self.sock = None
        for pending in list(self._pending):
            self._end(pending)

    # -- accepting and waiting ---------------------------------------------------------

    def _accept(self) -> None:
        """Accept what the backlog holds: each connection waits for its first bytes."""
        loop = self.loop
        for _ in range(LISTEN_BACKLOG):
            if self.sock is None:
                return
            try:
                sock, peer = self.sock.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as exc:
                if exc.errno not in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    self.count("tls_accept_error")  # that connection is gone: the next
                    return
                # out of descriptors or memory: the kernel queues new connections meanwhile
                self.count("tls_accept_paused")
                loop.remove_reader(self.sock.fileno())
                loop.call_later(ACCEPT_RETRY, self._resume)
                return
            sock.setblocking(False)
            self._wait(sock, peer[0])

    def _resume(self) -> None:
        if self.sock is not None:
            self.loop.add_reader(self.sock.fileno(), self._accept)

    def _wait(self, sock: socket.socket, client: str) -> None:
        """A new connection holds its socket only, until its first bytes are readable."""
        limits, shared = self.limits, self.shared
        if self._pending and len(self._pending) >= limits.per_listener:
            self._end(next(iter(self._pending)), "tls_handshake_evicted")  # least progress
        if shared.waiting and len(shared.waiting) >= limits.process_limit():
            self._end(next(iter(shared.waiting)), "tls_waiting_evicted")
        loop = self.loop
        pending = _Pending(sock, client, self)
        self._pending[pending] = None
        shared.waiting[pending] = None
        pending.timer = loop.call_later(limits.handshake, self._end, pending,
                                        "tls_handshake_timeout")
        loop.add_reader(sock.fileno(), self._readable, pending)

    def _readable(self, pending: _Pending) -> None:
        """The first bytes came: a ClientHello queues for its handshake, within the rates."""
        try:
            first = pending.sock.recv(1, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            return  # woken for nothing: still waiting
        except OSError:
            first = b""
        shared = self.shared
        self.loop.remove_reader(pending.sock.fileno())
        shared.waiting.pop(pending, None)
        if first != HANDSHAKE_RECORD:  # EOF, a reset, or not TLS at all
            self._end(pending, "tls_handshake_failed")
            return
        limits, client, now = self.limits, pending.client, self.loop.time()
        if client in limits.rate_exempt:
            pass
        elif not shared.clients.take(client, limits.handshake_rate, now):
            self._end(pending, "tls_handshake_rate_refused")
            return
        elif not shared.total.take("", limits.process_handshake_rate, now):
            self._end(pending, "tls_handshake_process_rate_refused")
            return
        mine = shared.queued_by_client.get(client)
        if mine and 0 < limits.handshakes_per_client <= len(mine):  # it only delays itself
            self._end(next(iter(mine)), "tls_handshake_client_evicted")
        pending.stage = "queued"
        shared.queued[pending] = None
        _add(shared.queued_by_client, pending)
        self._start_queued()
        if pending.stage == "queued":
            self.count("tls_handshake_queued")

    # -- the handshake -------------------------------------------------------------------

    def _start_queued(self) -> None:
        """Begin queued handshakes, oldest first, while the bounds leave room; when the
        oldest handshake holding a bound has not yet stalled, look again once it may have."""
        shared = self.shared
        if shared.start is not None:
            shared.start.cancel()
            shared.start = None
        now = self.loop.time()
        for pending in list(itertools.islice(shared.queued, QUEUE_SCAN)):
            if pending.stage != "queued":
                continue
            listener, limits = pending.listener, pending.listener.limits
            if not _room(shared.handshakes, limits.handshakes,
                         "tls_handshake_process_evicted", listener, now):
                self._schedule(limits.stall)
                return
            if not _room(shared.by_client.get(pending.client), limits.handshakes_per_client,
                         "tls_handshake_client_evicted", listener, now):
                self._schedule(limits.stall)
                continue
            listener._begin(pending, now)

    def _schedule(self, delay: float) -> None:
        """Start queued handshakes in ``delay`` seconds (or sooner, if so scheduled)."""
        shared, loop = self.shared, self.loop
        when = loop.time() + delay
        if shared.start is not None:
            if shared.start.when() <= when:
                return
            shared.start.cancel()
        shared.start = loop.call_at(when, self._start_queued)

    def _begin(self, pending: _Pending, now: float) -> None:
        shared = self.shared
        shared.forget(pending)  # out of the queue
        pending.stage, pending.began = "handshake", now
        shared.handshakes[pending] = None
        _add(shared.by_client, pending)
        pending.task = self.loop.create_task(self._handshake(pending))

    async def _handshake(self, pending: _Pending) -> None:
        """The server side of the handshake, with small buffers; on success the stream goes
        to ``serve`` (:meth:`_established`)."""
        loop = self.loop
        reader = asyncio.StreamReader()
        app = asyncio.StreamReaderProtocol(reader, self._established)
        done = loop.create_future()
        # the listener's own deadline ends it first; asyncio's is only a backstop
        tls = SmallTls(loop, app, self.ctx, done, server_side=True,
                       ssl_handshake_timeout=math.ceil(self.limits.handshake) + 1)
        try:
            pending.transport, _ = await loop.connect_accepted_socket(lambda: tls,
                                                                      pending.sock)
            if pending.stage == "ended":  # cut off while its transport was being made
                pending.transport.abort()
                return
            await done
        except Exception:  # ssl.SSLError, a reset, EOF: a peer's fault, counted
            self._end(pending, "tls_handshake_failed")
            return
        # an abort (cut off, timed out) also ends `done` without an error: already ended
        self._end(pending, None, keep=True)

    async def _established(self, reader: asyncio.StreamReader,
                           writer: asyncio.StreamWriter) -> None:
        self.count("tls_connections")
        await self.serve(reader, writer)

    def _end(self, pending: _Pending, key: str | None = None, keep: bool = False) -> None:
        """Forget a connection (of any listener) before or at the end of its handshake:
        counted here under ``key``, and closed unless ``keep`` (its handshake succeeded).
        A handshake's end makes room for a queued one (started on the loop's next turn)."""
        stage = pending.stage
        if stage == "ended":
            return
        if stage == "waiting":
            self.loop.remove_reader(pending.sock.fileno())
        pending.stage = "ended"
        if pending.timer is not None:
            pending.timer.cancel()
        pending.listener._pending.pop(pending, None)
        self.shared.forget(pending)
        if key is not None:
            self.count(key)
        if stage == "handshake" and self.shared.queued:
            self._schedule(0.0)
        if keep:
            return
        if pending.transport is not None:
            pending.transport.abort()
        elif pending.task is None:
            pending.sock.close()
        # else its transport is being made: the task aborts it once it has it
