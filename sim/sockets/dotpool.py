"""One resolver's DNS-over-TLS connection table, transport-free (RFC 7858, RFC 7766 §6.2.1).

One persistent connection per server, opened on the first query to it and reused;
at most ``max_connections`` (opening another closes the least recently used); a
connection with no query or reply for more than ``idle`` seconds is closed. Replies refresh
a connection's idle clock but not its place in the LRU order. The simulation engine checks
idleness when a connection is next used; the live adapter (:mod:`sim.sockets.dot`) also
arms a timer at :meth:`DotPool.idle_deadline`. Connections are numbered from an iterator
shared by an engine's resolvers, so numbers are unique over a run.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

Closing = Literal["idle", "evicted"]  # why a connection was closed to make room or time out


K = TypeVar("K", bound=Hashable)  # a server: its address (and port)


@dataclass(eq=False)
class DotConnection(Generic[K]):
    """A connection's place in the table: its server, number and last traffic time."""

    dst: K
    number: int
    last: float = 0.0  # time of the last query or reply


C = TypeVar("C", bound="DotConnection[Any]")


class DotPool(Generic[K, C]):
    """Connections keyed by server, least recently used first; ``new(dst, number)`` makes
    one (a transport's subclass of :class:`DotConnection`)."""

    def __init__(self, idle: float, max_connections: int, numbers: Iterator[int],
                 new: Callable[[K, int], C]) -> None:
        self.idle, self.max_connections = idle, max_connections
        self.numbers, self.new = numbers, new
        self._conns: OrderedDict[K, C] = OrderedDict()

    def __len__(self) -> int:
        return len(self._conns)

    def connections(self) -> list[C]:
        return list(self._conns.values())

    def get(self, dst: K) -> C | None:
        return self._conns.get(dst)

    def expired(self, conn: C, now: float) -> bool:
        return now - conn.last > self.idle

    def idle_deadline(self, conn: C) -> float:
        return conn.last + self.idle

    def use(self, dst: K, now: float,
            expire: bool = True) -> tuple[C, bool, list[tuple[C, Closing]]]:
        """The connection a query to ``dst`` goes out on at ``now``: (connection, whether it
        is opened now, the connections closed first and why). With ``expire`` an idle one
        is closed here (the simulation has no timers for it)."""
        table = self._conns
        closed: list[tuple[C, Closing]] = []
        conn = table.get(dst)
        if conn is not None and expire and now - conn.last > self.idle:
            del table[dst]
            closed.append((conn, "idle"))
            conn = None
        if conn is not None:
            table.move_to_end(dst)
            conn.last = now
            return conn, False, closed
        while len(table) >= self.max_connections:
            closed.append((table.popitem(last=False)[1], "evicted"))
        conn = table[dst] = self.new(dst, next(self.numbers))
        conn.last = now
        return conn, True, closed

    def touch(self, dst: K, now: float) -> None:
        """A reply on ``dst``'s connection (if still open) at ``now``."""
        conn = self._conns.get(dst)
        if conn is not None:
            conn.last = now

    def remove(self, conn: C) -> None:
        """``conn`` is gone (closed, failed, or closed by the server)."""
        if self._conns.get(conn.dst) is conn:
            del self._conns[conn.dst]
