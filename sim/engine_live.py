"""Live engine for scenarios: every node behind real sockets on 127.0.0.0/8, in real time.

The same node objects as the simulation run in one asyncio loop: authoritative servers on
their own addresses, resolvers serving stub clients, agents sending real stub queries.
This machine has no netem qdisc, so link delay and loss are emulated in user space: each
adapter holds a packet back for the one-way delay the scenario's path model draws (and
drops it when the model says lost) — the same model the simulation engine uses. Node
time is loop time minus the run's origin, so records line up with the simulation's.
"""

from __future__ import annotations

import asyncio

import numpy as np

from nodes.agent import StubResult
from sim.engines import EngineOutput, RunPlan
from sim.live import NodeEndpoint, ServerEndpoint, call_precisely, raise_fd_limit
from sim.workload import Job

DRAIN_TIMEOUT = 30.0  # seconds to wait for stragglers after the last scheduled query


def run_live(plan: RunPlan) -> EngineOutput:
    return asyncio.run(_run(plan))


async def _run(plan: RunPlan) -> EngineOutput:
    loop = asyncio.get_running_loop()
    raise_fd_limit()
    out = EngineOutput()
    rng = np.random.default_rng([plan.seed, 1])

    def shaper(src: str, dst: str, size: int) -> float | None:
        out.count(src, "tx_packets")
        out.count(src, "tx_bytes", size)
        delay = plan.path.one_way(plan.role_of[src], plan.role_of[dst], size, rng)
        if delay is None:
            out.lost += 1
        else:
            out.count(dst, "rx_packets")
            out.count(dst, "rx_bytes", size)
        return delay

    origin = loop.time()
    servers = [ServerEndpoint(s, (ip, plan.dns_port), shaper, origin)
               for ip, s in plan.hierarchy.servers.items()]
    resolvers = {ip: NodeEndpoint(node, (ip, plan.dns_port), ip, origin, shaper,
                                  on_done=out.add_walks)
                 for ip, node in plan.resolvers.items()}
    finished: dict[int, asyncio.Future] = {}

    def on_stub(done: list[StubResult]) -> None:
        for stub in done:
            out.stubs.append((stub.tag, stub))  # type: ignore[arg-type]
            fut = finished.get(stub.tag.index)  # type: ignore[attr-defined]
            if fut is not None and not fut.done():
                fut.set_result(None)

    agents = {ip: NodeEndpoint(node, None, ip, origin, shaper, on_done=on_stub)
              for ip, node in plan.agents.items()}
    endpoints = [*servers, *resolvers.values(), *agents.values()]
    try:
        for endpoint in endpoints:
            await endpoint.start()
        origin = loop.time()  # time zero once everything listens
        for endpoint in endpoints:
            endpoint.origin = origin
        if plan.warm_services:
            await asyncio.gather(*(ep.warm(service) for ep in resolvers.values()
                                   for service in plan.warm_services))
            out.warm_time = loop.time() - origin
        t0 = loop.time() - origin
        for job in plan.jobs:
            finished[job.index] = loop.create_future()

        def ask(job: Job) -> None:
            ip = plan.agent_order[job.agent]
            endpoint = agents[ip]
            now = endpoint.now()
            if job.at is not None:
                out.schedule_error.append(now - (t0 + job.at))
            plan.agents[ip].ask(job, plan.requests[job.index], now)
            endpoint.pump()

        if plan.closed_loop:
            async def agent_loop(jobs: list[Job]) -> None:
                for job in jobs:
                    ask(job)
                    await finished[job.index]
                    if job.think:
                        await asyncio.sleep(job.think)

            await asyncio.gather(*(agent_loop([j for j in plan.jobs if j.agent == a])
                                   for a in range(len(plan.agent_order))))
        else:
            for job in plan.jobs:
                call_precisely(origin + t0 + job.at - loop.time(), ask, job)
            last = max((j.at for j in plan.jobs), default=0.0)
            await asyncio.wait(list(finished.values()), timeout=last + DRAIN_TIMEOUT)
        out.end_time = loop.time() - origin
        for ip in resolvers:  # walks that finished after their stub answer went out
            out.add_walks(plan.resolvers[ip].pop_results())
    finally:
        for endpoint in endpoints:
            endpoint.close()
        await asyncio.sleep(0)
    return out
