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
    :meth:`on_timer`, and reports write deadlines and resets through :meth:`lost`.
    ``stats`` counts connections and every rejection or drop (keys appear when they first
    happen): ``malformed`` (400), ``headers_too_large`` (431), ``body_too_large`` (413),
    ``request_timeout`` (408), ``idle_timeout``, ``aborted``, ``handler_error`` (500),
    ``over_capacity`` (refused at the cap), ``write_timeout`` and ``reset``.
    """

    def __init__(self, app: App, name: str = "registry", limits: Limits | None = None,
                 max_connections: int = 1024) -> None:
        self.app = app
        self.name = name
        self.limits = limits or Limits()
        self.max_connections = max_connections
        self._conns: dict[object, ServerConnection] = {}
        self.stats: Counter[str] = Counter()

    @property
    def open_connections(self) -> int:
        return len(self._conns)

    def accept(self, conn: object, now: float) -> bool:
        """A new TCP connection: False (and counted) when the server is at its cap."""
        if len(self._conns) >= self.max_connections:
            self.stats["over_capacity"] += 1
            return False
        self._conns[conn] = ServerConnection(self.app, self.limits, now)
        self.stats["connections"] += 1
        return True

    def refusal(self) -> bytes:
        """What a connection refused at the cap is told before it is closed."""
        return error_bytes(503, "too many connections", [("Retry-After", "1")])

    def receive(self, conn: object, data: bytes, now: float) -> tuple[bytes, bool]:
        """Bytes from a connection (``b""`` at EOF) → (bytes to write, close afterwards)."""
        sc = self._conns.get(conn)
        if sc is None:  # engines without accept(): the first bytes open the connection
            sc = self._conns[conn] = ServerConnection(self.app, self.limits, now)
            self.stats["connections"] += 1
        out = sc.receive(data, now)
        self.stats["malformed"] += 0  # a column of nodes.csv from the first bytes on, as ever
        return out, self._settle(conn, sc)

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
        if reason is not None:
            self.stats[reason] += 1

    def _settle(self, conn: object, sc: ServerConnection) -> bool:
        """Move the connection's new counters into ``stats``; forget it once closed."""
        self.stats.update(sc.counts)
        sc.counts.clear()
        if sc.closed:
            self._conns.pop(conn, None)
        return sc.closed
