"""Server selection (Unbound's infra cache): the smoothed RTT of every server asked, the
order a zone's replicas are tried in (lowest SRTT first, or random), and the servers whose
DNS over TLS failed (asked in clear text for a while, when the configuration allows)."""

from __future__ import annotations

import random

from mypy_extensions import mypyc_attr

from nodes.dns.zone import Address
from nodes.resolver.config import ResolverConfig

SRTT_MAX = 65_536  # servers whose smoothed RTT is remembered
TLS_DOWN_MAX = 4096  # servers whose failed DNS over TLS is remembered
TLS_HOLDDOWN = 60.0  # seconds such a server is asked over the fallback transport


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Infra:
    """Smoothed RTTs (bounded: the server learned first is forgotten first)."""

    def __init__(self, config: ResolverConfig, rng: random.Random) -> None:
        self.config = config
        self.rng = rng
        self.srtt: dict[Address, float] = {}
        self.tls_down: dict[Address, float] = {}  # server -> until when TLS is not tried

    def order(self, servers: tuple[Address, ...]) -> list[Address]:
        """Replicas in the order they will be tried (lowest SRTT first, or random)."""
        srtt = self.srtt
        if self.config.selection == "random":
            order = list(servers)
            self.rng.shuffle(order)
        elif len(servers) == 1:  # as sorted() below: one key, so one draw
            self.rng.random()
            order = list(servers)
        else:
            rand = self.rng.random
            order = sorted(servers, key=lambda s: (srtt.get(s, 0.0), rand()))
        decay = self.config.srtt_decay
        if decay != 1.0:
            for other in order[1:]:
                if other in srtt:
                    srtt[other] *= decay
        return order

    def measured(self, server: Address, rtt: float) -> None:
        """A response came back after ``rtt`` seconds."""
        srtt = self.srtt
        old = srtt.get(server)
        if old is None:
            self.set(server, rtt)
        else:  # known: set() would only overwrite it
            a = self.config.srtt_alpha
            srtt[server] = (1 - a) * old + a * rtt

    def timed_out(self, server: Address) -> None:
        """No response within the timeout: the server's SRTT doubles (at least the timeout)."""
        timeout = self.config.timeout
        self.set(server, max(self.srtt.get(server, timeout) * 2, timeout))

    def set(self, server: Address, value: float) -> None:
        srtt = self.srtt
        if server not in srtt and len(srtt) >= SRTT_MAX:
            del srtt[next(iter(srtt))]  # forget the server learned first
        srtt[server] = value

    def tls_failed(self, server: Address, now: float) -> None:
        """A DNS-over-TLS connection to ``server`` could not be opened at ``now``."""
        down = self.tls_down
        down.pop(server, None)
        if len(down) >= TLS_DOWN_MAX:
            del down[next(iter(down))]  # the oldest failure is forgotten first
        down[server] = now + TLS_HOLDDOWN

    def without_tls(self, server: Address, now: float) -> bool:
        """Whether ``server`` is in its hold-down after a failed DNS-over-TLS connection."""
        until = self.tls_down.get(server)
        if until is None:
            return False
        if until <= now:
            del self.tls_down[server]
            return False
        return True
