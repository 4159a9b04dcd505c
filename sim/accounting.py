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
