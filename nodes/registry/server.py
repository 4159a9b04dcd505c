"""A registry host, sans-IO: the HTTP/1.1 connections (:mod:`nodes.registry.http`) of one
registry application (:class:`nodes.registry.agentdns.AgentDNSRegistry`,
:class:`nodes.registry.ans.ANSRegistry`); engines feed it bytes per connection.
"""

from __future__ import annotations

from collections import Counter

from nodes.registry.http import App, Limits, ServerConnection, error_bytes


class RegistryServer:
    """One registry host: its application plus one HTTP/1.1 state machine per connection.

    Engines feed bytes per connection (:meth:`receive`; the connection's state lives
    across calls). A live engine also calls :meth:`accept` when a TCP connection arrives
    (refused beyond ``max_connections``), sleeps until :meth:`deadline` and then calls
    :meth:`on_timer`, and reports write deadlines and resets through :meth:`lost`. Pipelined
    requests are answered a few per call (``most``); while :meth:`backlog` is not 0 the
    engine calls :meth:`resume` rather than reading more. Requests received and not yet
    answered are bounded per client address (``max_client_backlog`` bytes over its
    connections, given ``client`` at :meth:`accept`): the connection that passes the bound
    gets a 503 after its answers and is closed.
    ``stats`` counts connections and every rejection or drop (keys appear when they first
    happen): ``malformed`` (400), ``headers_too_large`` (431), ``body_too_large`` (413),
    ``request_timeout`` (408), ``idle_timeout``, ``aborted``, ``handler_error`` (500),
    ``ambiguous_framing`` (400), ``too_many_chunks`` (413), ``pipeline_overflow`` (503),
    ``over_capacity`` (refused at the cap), ``write_timeout`` and ``reset``.
    """

    def __init__(self, app: App, name: str = "registry", limits: Limits | None = None,
                 max_connections: int = 1024, max_client_backlog: int = 256 * 1024) -> None:
        self.app = app
        self.name = name
        self.limits = limits or Limits()
        self.max_connections = max_connections
        self.max_client_backlog = max_client_backlog
        self._conns: dict[object, ServerConnection] = {}
        self._client_of: dict[object, str] = {}  # connection -> client address (accept)
        self._by_client: dict[str, set[object]] = {}
        self.stats: Counter[str] = Counter()

    def instance(self) -> RegistryServer:
        """This server for one run: its application's instance (:meth:`Routes.instance`),
        no connection, counters at zero."""
        make = getattr(self.app, "instance", None)
        if make is None:
            raise TypeError(f"{self.name}: its application has no instance() (a Routes)")
        return RegistryServer(make(), self.name, self.limits, self.max_connections,
                              self.max_client_backlog)

    @property
    def open_connections(self) -> int:
        return len(self._conns)

    def accept(self, conn: object, now: float, client: str | None = None) -> bool:
        """A new TCP connection (from ``client``'s address, when known): False (and
        counted) when the server is at its cap."""
        if len(self._conns) >= self.max_connections:
            self.stats["over_capacity"] += 1
            return False
        self._conns[conn] = ServerConnection(self.app, self.limits, now)
        if client is not None:
            self._client_of[conn] = client
            self._by_client.setdefault(client, set()).add(conn)
        self.stats["connections"] += 1
        return True

    def refusal(self) -> bytes:
        """What a connection refused at the cap is told before it is closed."""
        return error_bytes(503, "too many connections", [("Retry-After", "1")])

    def receive(self, conn: object, data: bytes, now: float, most: int | None = None
                ) -> tuple[bytes, bool]:
        """Bytes from a connection (``b""`` at EOF) → (bytes to write, close afterwards):
        the answers to at most ``most`` requests (default ``limits.max_pipelined``)."""
        sc = self._conns.get(conn)
        if sc is None:  # engines without accept(): the first bytes open the connection
            sc = self._conns[conn] = ServerConnection(self.app, self.limits, now)
            self.stats["connections"] += 1
        out = sc.receive(data, now, most) + self._bound(conn, sc)
        self.stats["malformed"] += 0  # a column of nodes.csv from the first bytes on, as ever
        return out, self._settle(conn, sc)

    def backlog(self, conn: object) -> int:
        """Bytes of pipelined requests the connection holds for :meth:`resume` (0: none)."""
        sc = self._conns.get(conn)
        return 0 if sc is None else sc.backlog

    def resume(self, conn: object, now: float, most: int | None = None
               ) -> tuple[bytes, bool]:
        """Answer the connection's next pipelined requests: as :meth:`receive`."""
        sc = self._conns.get(conn)
        if sc is None:
            return b"", True
        out = sc.resume(now, most) + self._bound(conn, sc)
        return out, self._settle(conn, sc)

    def _bound(self, conn: object, sc: ServerConnection) -> bytes:
        """The 503 that closes a connection whose client holds more unanswered pipelined
        bytes than ``max_client_backlog`` (over its connections), else nothing."""
        client = self._client_of.get(conn)
        if client is None or not sc.backlog or sc.closed:
            return b""
        held = sum(self._conns[c].backlog for c in self._by_client.get(client, ())
                   if c in self._conns)
        return sc.overflow() if held > self.max_client_backlog else b""

    def deadline(self, conn: object) -> float | None:
        """Node time of the connection's next deadline (None: none, or unknown)."""
        sc = self._conns.get(conn)
        return None if sc is None else sc.deadline()

    def on_timer(self, conn: object, now: float) -> tuple[bytes, bool]:
        """The deadline passed: (bytes to write, close afterwards) as :meth:`receive`."""
        sc = self._conns.get(conn)
        if sc is None:
            return b"", True
        out = sc.on_timer(now)
        return out, self._settle(conn, sc)

    def lost(self, conn: object, reason: str | None = None) -> None:
        """The engine gave the connection up (``reason`` is counted, e.g. write_timeout)."""
        sc = self._conns.pop(conn, None)
        if sc is not None:
            self._settle(conn, sc)
        self._forget(conn)
        if reason is not None:
            self.stats[reason] += 1

    def _settle(self, conn: object, sc: ServerConnection) -> bool:
        """Move the connection's new counters into ``stats``; forget it once closed."""
        self.stats.update(sc.counts)
        sc.counts.clear()
        if sc.closed:
            self._conns.pop(conn, None)
            self._forget(conn)
        return sc.closed

    def _forget(self, conn: object) -> None:
        client = self._client_of.pop(conn, None)
        if client is not None:
            mine = self._by_client.get(client)
            if mine is not None:
                mine.discard(conn)
                if not mine:
                    del self._by_client[client]
