"""What a server saw of a peer outside the project's node code (a stock recursor,
``schemes[].resolver``): one :class:`WireExchange` per query it received and what it
answered, timed in node time. :mod:`sim.engines.stock` attributes them to discoveries."""

from __future__ import annotations

from dataclasses import dataclass

from nodes.dns.zone import Address


@dataclass(slots=True)
class WireExchange:
    """One query from ``client`` to ``server`` and its reply, as the server's socket saw
    them. ``sent``: node time the query reached the socket (the peer sends unshaped, so
    its send time); ``hold``: the one-way delay its link gave it (None: lost on the link);
    ``answered``: node time the reply left the server's node; ``back``: the reply's
    one-way delay (None: lost, or no reply)."""

    server: str
    client: Address
    transport: str
    sent: float
    query: bytes
    hold: float | None
    reply: int = 0  # the reply's DNS message size (0: none)
    rcode: int = -1  # the reply's RCODE (-1: none)
    tc: bool = False
    answered: float | None = None
    back: float | None = None

    @property
    def rtt(self) -> float | None:
        """The round trip as the peer saw it, None when it got no reply."""
        if self.answered is None or self.back is None or self.hold is None:
            return None
        return self.answered + self.back - self.sent
