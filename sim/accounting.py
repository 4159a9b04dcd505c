"""Bytes and packets on the wire for each DNS exchange, from the real message sizes.

Every engine uses these functions, so their figures agree by construction; what differs
between engines is only *which* messages were exchanged. UDP is exact (IPv4 20 bytes +
UDP 8 bytes, no options). TCP is a model of one short connection per exchange — the
three-way handshake, one data segment each way carrying the 2-byte length prefix, and a
FIN/ACK teardown — with 20-byte TCP headers (no options); the capture-verified accounting
of the baselines issue refines it.
"""

from __future__ import annotations

from dataclasses import dataclass

IPV4 = 20
UDP = 8
TCP = 20


@dataclass(frozen=True, slots=True)
class WireCost:
    bytes_up: int = 0
    packets_up: int = 0
    bytes_down: int = 0
    packets_down: int = 0

    def __add__(self, other: WireCost) -> WireCost:
        return WireCost(self.bytes_up + other.bytes_up, self.packets_up + other.packets_up,
                        self.bytes_down + other.bytes_down, self.packets_down + other.packets_down)


def datagram_size(payload: int) -> int:
    """IP packet size of one UDP datagram carrying ``payload`` bytes."""
    return IPV4 + UDP + payload


def exchange_cost(transport: str, query_len: int, reply_len: int) -> WireCost:
    """IP-layer cost of one DNS exchange (``reply_len`` 0: no reply arrived)."""
    if transport == "udp":
        down = (datagram_size(reply_len), 1) if reply_len else (0, 0)
        return WireCost(datagram_size(query_len), 1, *down)
    bare = IPV4 + TCP
    # client: SYN, ACK, query segment, FIN, final ACK; server: SYN-ACK, reply, FIN
    up_packets, down_packets = 5, 3 if reply_len else 1
    up = 4 * bare + bare + 2 + query_len
    down = bare + ((bare + 2 + reply_len) + bare if reply_len else 0)
    return WireCost(up, up_packets, down, down_packets)


def steps_cost(steps) -> WireCost:  # steps: Iterable[nodes.resolver.Step]
    total = WireCost()
    for s in steps:
        total = total + exchange_cost(s.transport, s.bytes_out, s.bytes_in)
    return total


# ------------------------------------------------------------------ HTTP over TCP (and TLS)

TCP_SYN = 40  # TCP header of a Linux SYN / SYN-ACK: MSS, SACK-permitted, timestamps, WS
TCP_TS = 32  # TCP header with the timestamp option (every later Linux segment)
LOOPBACK_MTU = 65536


@dataclass(frozen=True, slots=True)
class TcpModel:
    """Packets of one TCP connection as Linux sends them (checked against capture).

    * handshake: SYN, SYN-ACK, ACK (client closes: FIN, FIN, ACK);
    * a message of n bytes: ceil(n / MSS) segments of 52 + payload bytes;
    * ACKs: the server acknowledges the first data flight of a connection at once
      (Linux "quickack" at connection start) and later ones ride on its response; the
      client acknowledges every flight it receives with a pure ACK (it either closes or
      stays idle longer than the 40 ms delayed-ACK timer).
    """

    mtu: int = LOOPBACK_MTU

    @property
    def mss(self) -> int:
        return self.mtu - IPV4 - TCP_TS

    def segments(self, payload: int) -> tuple[int, int]:
        """(packets, IP bytes) of one message of ``payload`` bytes."""
        if payload <= 0:
            return 0, 0
        n = -(-payload // self.mss)
        return n, payload + n * (IPV4 + TCP_TS)


def http_cost(steps, opened: int, closed: int, tls, model: TcpModel,
              first_flights: int = 0) -> WireCost:
    """IP-layer cost of a registry discovery.

    ``steps`` are its HTTP exchanges (``bytes_out``/``bytes_in`` application bytes; a step
    without a response carries ``bytes_in`` 0), ``opened``/``closed`` the connections it
    opened and closed, ``tls`` a :class:`sim.registries.TlsSizes` or None, and
    ``first_flights`` how many of the steps are the first request on a new connection.
    """
    bare = IPV4 + TCP_TS
    up = down = pu = pd = 0
    # handshakes: SYN, SYN-ACK, ACK
    pu += 2 * opened
    pd += opened
    up += opened * (IPV4 + TCP_SYN + bare)
    down += opened * (IPV4 + TCP_SYN)
    if tls is not None and opened:
        for size, toward_server in ((tls.client_hello, True), (tls.server_flight, False),
                                    (tls.client_finished, True), (tls.tickets, False)):
            n, b = model.segments(size)
            if toward_server:
                pu, up = pu + n * opened, up + b * opened
            else:
                pd, down = pd + n * opened, down + b * opened
        # ACKs: the server acks ClientHello at once (quickack); the client acks the server
        # flight and the tickets
        pd, down = pd + opened, down + opened * bare
        pu, up = pu + 2 * opened, up + 2 * opened * bare
    for s in steps:
        req = tls.records(s.bytes_out) if tls is not None else s.bytes_out
        n, b = model.segments(req)
        pu, up = pu + n, up + b
        if s.bytes_in:
            resp = tls.records(s.bytes_in) if tls is not None else s.bytes_in
            n, b = model.segments(resp)
            pd, down = pd + n, down + b
            pu, up = pu + 1, up + bare  # the client's ACK of the response
    # the server's immediate ACK of the first request on a fresh connection (quickack)
    pd, down = pd + first_flights, down + first_flights * bare
    # teardown (the client closes): FIN →, ← FIN, ACK →
    pu, up = pu + 2 * closed, up + 2 * closed * bare
    pd, down = pd + closed, down + closed * bare
    return WireCost(up, pu, down, pd)
