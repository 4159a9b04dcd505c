"""Live engine for scenarios: every node behind real sockets on 127.0.0.0/8, in real time.

The same node objects as the simulation run in one asyncio loop: authoritative servers on
their own addresses, resolvers serving stub clients, agents sending real stub queries —
or, for an HTTP-registry scheme, the registry replicas serving HTTP/1.1 (TLS 1.3) and the
agents' HTTP clients. The whole plan is one :class:`sim.engines.nodehost.HostPart` served by
a :class:`sim.engines.nodehost.NodeHost` in this process, the same core the Ray and Mininet
engines run in each of their processes, so every feature (DNS over TLS, fault schedules,
churn, sessions, registries) is served by the same code on the three real-time engines.

This machine has no netem qdisc, so link delay and loss are emulated in user space: each
adapter holds a packet back for the one-way delay the scenario's path model draws (and
drops it when the model says lost) — the same model the simulation engine uses. Node
time is loop time minus the run's origin, so records line up with the simulation's.
"""

from __future__ import annotations

import asyncio
import time

from sim.build.runplan import RunPlan, StubSink
from sim.engines.base import EngineOutput
from sim.engines.nodehost import NodeHost, whole_plan


def run_live(plan: RunPlan, sink: StubSink | None = None) -> EngineOutput:
    """Run one scheme of ``plan`` on loopback sockets (the catalogue's entry point), every
    discovery told to ``sink`` as it ends. The servers compute every reply (no reply memo,
    :meth:`NodeHost.start`): in wall-clock time their work is part of what is measured."""
    if plan.stock is not None:  # records at the end: walks come from the servers' logs
        sink = None
    out = asyncio.run(_run(plan, sink))
    out.link_emulation = "user-space"
    if plan.stock is not None:
        from sim.engines.stock import attribute

        attribute(out, plan.agent_order, plan.resolvers)
    return out


async def _run(plan: RunPlan, sink: StubSink | None) -> EngineOutput:
    host = NodeHost(whole_plan(plan), sink=sink)
    try:
        await host.start()
        origin = time.time()  # time zero once everything listens
        await host.set_origin(origin)
        host.out.clock_offset = origin
        await host.warm()
        await host.replay(time.time())
    finally:
        await host.finish()
    return host.out
