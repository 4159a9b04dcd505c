"""UDP for the adapters: the datagram protocol, shaped sends, and bind errors that say where
(a port in use: :class:`PortInUse`, also found before anything listens: :func:`check_ports`)."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import socket
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol, cast

from nodes.dns.zone import Address
from sim.sockets.links import Shaper, ip_size
from sim.sockets.timing import call_precisely


class PortInUse(OSError):
    """A port a node would listen on is taken (EADDRINUSE); the message names address, port
    and protocol."""


@contextlib.contextmanager
def naming(address: Address, proto: str) -> Iterator[None]:
    """A bind failure says which address and port (asyncio's UDP errors do not); a port in
    use is a :class:`PortInUse`."""
    try:
        yield
    except OSError as exc:
        busy = exc.errno == errno.EADDRINUSE
        reason = "address already in use" if busy else exc.strerror or exc
        raise (PortInUse if busy else OSError)(
            exc.errno, f"cannot listen on {address[0]}:{address[1]}/{proto}: {reason}") from exc


def check_ports(addresses: Iterable[str], port: int) -> None:
    """Raise :class:`PortInUse` for the first of ``addresses`` whose UDP or TCP ``port`` is
    taken, by binding each for a moment as the nodes will (TCP with SO_REUSEADDR): before
    anything listens. Addresses this machine cannot bind are left to the nodes' own binds."""
    for ip in addresses:
        for kind, proto in ((socket.SOCK_DGRAM, "udp"), (socket.SOCK_STREAM, "tcp")):
            with socket.socket(socket.AF_INET, kind) as probe:
                if kind == socket.SOCK_STREAM:
                    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    with naming((ip, port), proto):
                        probe.bind((ip, port))
                except PortInUse:
                    raise
                except OSError:  # not this machine's address, a privileged port, ...
                    continue


class Datagrams(asyncio.DatagramProtocol):
    """Hands each datagram and its source (address, port) to ``on_datagram``."""

    def __init__(self, on_datagram: Callable[[bytes, Address], None]) -> None:
        self.on_datagram = on_datagram
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a datagram endpoint's (CPython's selector-loop transport implements the datagram
        # methods without subclassing asyncio.DatagramTransport: no isinstance check)
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple) -> None:
        self.on_datagram(data, addr[:2])

    def error_received(self, exc: Exception) -> None:  # ICMP errors etc.: nothing to do
        pass


class DatagramSender(Protocol):
    """What sends a datagram: an asyncio transport or an upstream socket."""

    def sendto(self, data: bytes, addr: Address, /) -> None: ...


def send_datagram(sock: DatagramSender | None, data: bytes, dst: Address, src_ip: str,
                  shaper: Shaper | None) -> bool:
    """Send now, later (emulated delay) or never (emulated loss); False if dropped."""
    if sock is None:
        return False
    if shaper is None:
        sock.sendto(data, dst)
        return True
    delay = shaper(src_ip, dst[0], ip_size("udp", len(data)))
    if delay is None:
        return False
    if delay <= 0:
        sock.sendto(data, dst)
    else:
        call_precisely(delay, sock.sendto, data, dst)
    return True

