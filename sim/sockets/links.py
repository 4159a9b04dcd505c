"""The emulated link as the socket adapters see it: the shaper and each packet's IP size.

The machine has no netem qdisc, so each adapter asks a :data:`Shaper` for a packet's
one-way delay (or its loss) before it sends; sizes are those the simulation charges.
"""

from __future__ import annotations

from collections.abc import Callable

from sim.accounting import IPV4, TCP, TCP_TS, UDP

SYN_RTO = 1.0  # a lost SYN is retransmitted after the initial RTO (RFC 6298 §2.1)
TLS_RECORD = 22  # TLS 1.3 record header (5) + inner content type (1) + AEAD tag (16)

Shaper = Callable[[str, str, int], "float | None"]
"""(source IP, destination IP, IP packet size) → emulated one-way delay, or None to drop."""


def ip_size(transport: str, payload: int) -> int:
    """The IP packet size of one DNS message of ``payload`` bytes over ``transport``."""
    if transport == "tls":  # one TLS record around the length prefix and the message
        return IPV4 + TCP_TS + 2 + TLS_RECORD + payload
    return IPV4 + (UDP if transport == "udp" else TCP + 2) + payload
