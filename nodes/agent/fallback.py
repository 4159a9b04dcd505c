"""The session's registry fallback (the marketplace, §10): one AgentDNS search over HTTP/1.1
between the real client and server objects in process, its cost MODELLED (no engine).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from nodes.agent.context import ToolInfo
from nodes.registry.client import RegistryAgent, RegistryResult
from nodes.registry.server import RegistryServer
from nodes.resolver.types import Discovery


@dataclass
class FallbackOutcome:
    """A registry fallback: tools found and the exchange's MODELLED cost."""

    tools: list[ToolInfo]
    delay: float
    bytes_up: int
    bytes_down: int
    packets: int
    error: str | None = None


class RegistryFallback:
    """The marketplace fallback: one AgentDNS search, real HTTP/1.1 bytes between the real
    client and server objects in process (no engine). Its delay is MODELLED: ``rtt`` (the
    path model's round trip agent ↔ registry) per round trip the client counts, plus
    ``server_time`` per request; its wire cost comes from ``cost(result)`` (the caller's
    TCP model, e.g. :func:`sim.accounting.http_cost`) → (bytes up, bytes down, packets).
    ``tool_of(url)`` maps a registry answer back to the tool it names."""

    def __init__(self, client: RegistryAgent, server: RegistryServer, rtt: float,
                 server_time: float, cost: Callable[[RegistryResult], tuple[int, int, int]],
                 tool_of: Callable[[str], ToolInfo | None], peer: str = "agent") -> None:
        self.client, self.server = client, server
        self.rtt, self.server_time = rtt, server_time
        self.cost, self.tool_of, self.peer = cost, tool_of, peer
        self.calls = 0

    def instance(self) -> RegistryFallback:
        """This fallback for one run: its client and registry as they were built."""
        return RegistryFallback(self.client.instance(), self.server.instance(), self.rtt,
                                self.server_time, self.cost, self.tool_of, self.peer)

    def search(self, request: Discovery, now: float) -> FallbackOutcome:
        self.calls += 1
        client, t = self.client, now
        result = client.ask(("fallback", self.calls), request, t)
        done: list[RegistryResult] = []
        for _ in range(64):  # a discovery is a handful of exchanges; never loop forever
            done.extend(client.pop_done())
            actions = client.to_send()
            if not actions:
                break
            for act in actions:
                conn = (self.peer, act.conn)
                if act.kind == "open":  # SYN, SYN-ACK: one round trip
                    t += self.rtt
                    client.connected(act.conn, t)
                elif act.kind == "send":
                    reply, _close = self.server.receive(conn, act.data, t)
                    t += self.rtt + self.server_time
                    if reply:
                        client.receive(act.conn, reply, t)
                else:  # close: the server sees EOF
                    self.server.receive(conn, b"", t)
        done.extend(client.pop_done())
        if all(r is not result for r in done) and result.error is None:
            result.error = "registry exchange did not finish"
        tools = [tool for e in result.endpoints if (tool := self.tool_of(e.target)) is not None]
        up, down, packets = self.cost(result)
        return FallbackOutcome(tools, t - now, up, down, packets, result.error)
