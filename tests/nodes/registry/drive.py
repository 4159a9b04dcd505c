"""Moving bytes between one registry agent and one registry in process (no engine)."""

from __future__ import annotations

from collections.abc import Callable

from nodes.registry.client import RegistryAgent, RegistryResult
from nodes.registry.server import RegistryServer


def drive(agent: RegistryAgent, server: RegistryServer, now: float = 0.0,
          tamper: Callable[[bytes], bytes] | None = None) -> list[RegistryResult]:
    """Move bytes between ``agent`` and ``server`` until the agent is done (``tamper``
    rewrites each reply on its way back)."""
    done: list[RegistryResult] = []
    for _ in range(50):
        acts = agent.to_send()
        if not acts:
            break
        for act in acts:
            if act.kind == "open":
                agent.connected(act.conn, now)
            elif act.kind == "send":
                reply, _ = server.receive(act.conn, act.data, now)
                agent.receive(act.conn, tamper(reply) if tamper else reply, now)
            else:
                server.receive(act.conn, b"", now)
        done += agent.pop_done()
    return done + agent.pop_done()
