"""A node's upstream UDP sockets: random source ports, answers matched to their query (RFC 5452)."""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
from collections.abc import Callable
from dataclasses import dataclass, field

from nodes.dns.zone import Address
from sim.sockets.links import Shaper
from sim.sockets.udp import send_datagram


class UpstreamSockets:
    """UDP sockets for a node's upstream queries, as RFC 5452 asks of a resolver.

    Each query leaves from a socket bound to a port drawn from the OS's randomness
    (1024-65535, §10), a new socket per query until ``size`` are open (then queries share
    a random open one, as Unbound's ``outgoing-range``). A socket hands on only answers it
    expects: from the server a query on it went to, with that query's ID (§9.1); anything
    else is dropped and counted. A socket is closed once nothing is outstanding on it.
    """

    def __init__(self, ip: str, deliver: Callable[[bytes, Address], None],
                 still_pending: Callable[[int], bool],
                 count: Callable[[str], None], size: int = 1024,
                 avoid: frozenset[int] = frozenset(), rand: random.Random | None = None
                 ) -> None:
        self.ip, self.deliver, self.count, self.size = ip, deliver, count, size
        self.still_pending = still_pending  # the node's view: is a query ID outstanding
        self.avoid = avoid  # service ports: a capture tells queries from answers by them
        self.rand = rand or random.SystemRandom()
        self._open: dict[int, UpstreamSocket] = {}  # fd -> socket and what it expects
        self._by_query: dict[tuple[int, Address], UpstreamSocket] = {}

    def __len__(self) -> int:
        return len(self._open)

    @property
    def ports(self) -> list[int]:
        return [u.port for u in self._open.values()]

    def send(self, data: bytes, dst: Address, shaper: Shaper | None) -> bool:
        key = (int.from_bytes(data[:2], "big"), dst)
        up = self._by_query.get(key)
        if up is None:
            up = self._new() if len(self._open) < self.size else None
            if up is None:
                up = self.rand.choice(list(self._open.values()))
                self.count("upstream_port_shared")
            up.expected.add(key)
            self._by_query[key] = up
        return send_datagram(up, data, dst, self.ip, shaper)

    def forget(self) -> None:
        """Stop expecting answers to queries the node no longer waits for (timed out)."""
        for key in [k for k in self._by_query if not self.still_pending(k[0])]:
            self._settled(key)

    def _settled(self, key: tuple[int, Address]) -> None:
        up = self._by_query.pop(key)
        up.expected.discard(key)
        if not up.expected:
            self._close(up)

    def close(self) -> None:
        for up in list(self._open.values()):
            self._close(up)
        self._by_query.clear()

    def _new(self) -> UpstreamSocket | None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.setblocking(False)
        for _ in range(16):  # a port taken by another socket: draw again
            port = self.rand.randint(1024, 65535)
            if port in self.avoid:
                continue
            try:
                sock.bind((self.ip, port))
                break
            except OSError:
                continue
        else:
            sock.close()
            self.count("upstream_bind_failed")
            return None
        up = UpstreamSocket(sock, sock.getsockname()[1])
        self._open[sock.fileno()] = up
        asyncio.get_running_loop().add_reader(sock.fileno(), self._readable, up)
        return up

    def _close(self, up: UpstreamSocket) -> None:
        if self._open.pop(up.sock.fileno(), None) is not None:
            asyncio.get_running_loop().remove_reader(up.sock.fileno())
        up.sock.close()

    def _readable(self, up: UpstreamSocket) -> None:
        for _ in range(64):  # what has arrived, then back to the loop
            try:
                data, src = up.sock.recvfrom(65535)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # ICMP errors reported on the socket
                continue
            src = src[:2]
            if len(data) < 12 or not data[2] & 0x80:
                self.count("upstream_not_response")
            elif (key := (int.from_bytes(data[:2], "big"), src)) not in up.expected:
                self.count("upstream_unexpected_answer")  # wrong ID or server: dropped
            else:
                self.deliver(data, src)
                if key in self._by_query and not self.still_pending(key[0]):
                    self._settled(key)
                if up.sock.fileno() < 0:  # closed: nothing left to read on it
                    return


@dataclass(eq=False)
class UpstreamSocket:
    sock: socket.socket
    port: int
    expected: set[tuple[int, Address]] = field(default_factory=set)

    def sendto(self, data: bytes, dst: Address) -> None:
        with contextlib.suppress(OSError):  # closed since (a late emulated send), buffer full
            self.sock.sendto(data, dst)

