"""In-memory engine: nodes wired through a dictionary of addresses, in virtual time.

No sockets and no wall clock. Used by the protocol-core tests and by ``tooldns`` when
a quick check is wanted. Each message takes ``delay`` seconds one way; addresses in
``dead`` swallow everything (a crashed replica); ``tap`` sees every message the resolver
sends.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from nodes.dns.zone import Address
from nodes.resolver.core import RecursiveResolver
from nodes.resolver.types import DiscoveryResult, Outgoing
from sim.build.hierarchy import Hierarchy


@dataclass
class MemoryNetwork:
    hierarchy: Hierarchy
    resolver: RecursiveResolver
    delay: float = 0.010
    dns_port: int = 53
    dead: set[str] = field(default_factory=set)
    now: float = 0.0
    delivered: int = 0
    _events: list = field(default_factory=list)
    _seq: itertools.count = field(default_factory=itertools.count)

    resolver_address: Address = ("127.0.53.1", 40000)
    #: called with every message the resolver sends, as the network takes it (what went to
    #: a stub client, which the network does not carry, is seen only here)
    tap: Callable[[Outgoing], object] | None = None

    def _flush(self) -> None:
        tap = self.tap
        for out in self.resolver.to_send():
            if tap is not None:
                tap(out)
            heapq.heappush(self._events, (self.now + self.delay, next(self._seq), "srv", out))

    def run(self, until: float | None = None) -> list[DiscoveryResult]:
        """Deliver messages and fire timers until nothing is left (or ``until``)."""
        self._flush()
        while True:
            timer = self.resolver.next_timer()
            nxt = self._events[0][0] if self._events else None
            if nxt is None and timer is None:
                break
            t = min(x for x in (nxt, timer) if x is not None)
            if until is not None and t > until:
                break
            self.now = t
            if nxt is not None and nxt <= t:
                _, _, kind, item = heapq.heappop(self._events)
                if kind == "srv":
                    ip, _port = item.dst
                    server = self.hierarchy.servers.get(ip)
                    if server is None or ip in self.dead:
                        continue
                    reply = server.handle(item.data, self.resolver_address, t, item.transport)
                    if reply is not None:
                        heapq.heappush(self._events, (t + self.delay, next(self._seq), "res",
                                                      (reply, (ip, self.dns_port), item.transport)))
                else:
                    data, src, transport = item
                    self.delivered += 1
                    self.resolver.receive(data, src, t, transport)
            else:
                self.resolver.on_timer(t)
            self._flush()
        return self.resolver.pop_results()
