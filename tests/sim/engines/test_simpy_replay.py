"""The simpy engine's replay: an open loop's job timers pushed one at a time fire in exactly
the order simpy gives timeouts all scheduled at the start (ties with other events included)."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import simpy

from sim.build.workload import Job
from sim.engines.simpy import replay
from topologies.namespace import Query

Q = Query(id="q", text="t", service="mcp", truth=())


def _jobs(shuffled: bool = False) -> list[Job]:
    # equal times, times equal to other events' (each ask schedules timers of 0, 0.5 and
    # 1.0), and a start offset t0 that makes the sums round; shuffled: not in time order
    # (as churn's probes, appended after the workload)
    ats = [0.0, 0.0, 0.1, 0.5, 0.5, 0.5, 1.0, 1.5, 1.5, 2.0, 2.0 + 1e-12, 3.3, 3.3, 7.0]
    if shuffled:
        ats = [1.5, 0.5, 7.0, 0.0, 3.3, 0.5, 2.0, 0.1, 1.5, 0.0, 3.3, 1.0, 0.5, 2.0 + 1e-12]
    return [Job(index=i, phase=0, agent=i % 3, query=Q, at=at) for i, at in enumerate(ats)]


def _trace(schedule_all: bool, t0: float, shuffled: bool) -> list[tuple[float, str]]:
    env = simpy.Environment()
    seen: list[tuple[float, str]] = []
    env.timeout(0.3).callbacks.append(lambda _e: seen.append((env.now, "before")))
    env.run(until=0.2)  # replay starts at a time other than 0

    def ask(job: Job) -> None:
        seen.append((env.now, f"job{job.index}"))
        for d in (0.0, 0.5, 1.0):
            env.timeout(d).callbacks.append(
                lambda _e, j=job.index, d=d: seen.append((env.now, f"after{j}+{d}")))
        env.process(_proc(env, seen, job.index))

    plan = SimpleNamespace(closed_loop=False, jobs=_jobs(shuffled), agent_order=["a", "b", "c"])
    if schedule_all:  # the reference: every job's timeout scheduled at once
        for job in plan.jobs:
            env.timeout(t0 + job.at - env.now).callbacks.append(lambda _e, j=job: ask(j))
    else:
        replay(env, plan, ask, {}, t0)  # type: ignore[arg-type]
    env.timeout(0.8).callbacks.append(lambda _e: seen.append((env.now, "scheduled after")))
    env.run()
    return seen


def _proc(env: simpy.Environment, seen: list, i: int):  # type: ignore[no-untyped-def]
    seen.append((env.now, f"proc{i}"))  # a process started by an ask: urgent initialisation
    yield env.timeout(0.2)
    seen.append((env.now, f"proc{i} done"))


def test_open_loop_fires_in_the_order_of_timeouts_scheduled_at_once() -> None:
    for t0, shuffled in itertools.product((0.2, 0.7, 1 / 3), (False, True)):
        reference, pushed = _trace(True, t0, shuffled), _trace(False, t0, shuffled)
        assert len(reference) == len(_jobs()) * 6 + 2
        assert pushed == reference


def test_workload_jobs_are_fed_in_their_order() -> None:
    """:class:`sim.build.workload.Jobs` (in time order by construction) fire as simpy's
    timeouts would, phases and a start offset included."""
    from sim.build.namespace import build_namespace
    from sim.build.workload import build_jobs
    from sim.scenario import Scenario

    sc = Scenario.model_validate({
        "name": "feed", "seed": 2, "namespace": {"tools": 200, "branching": 3, "depth": 2},
        "workload": {"queries": 300, "phases": 3, "gap": 0.25,
                     "arrival": {"process": "poisson", "rate": 500.0}}})
    jobs = build_jobs(sc, build_namespace(sc), 4)
    fired: dict[bool, list[tuple[float, int]]] = {}
    for schedule_all in (True, False):
        env = simpy.Environment()
        env.run(until=0.05)
        seen = fired[schedule_all] = []

        def ask(job: Job, env: simpy.Environment = env, seen: list = seen) -> None:
            seen.append((env.now, job.index))
            env.timeout(0.001)  # other events between the jobs

        if schedule_all:
            for job in jobs:
                env.timeout(0.05 + job.at - env.now).callbacks.append(
                    lambda _e, j=job, ask=ask: ask(j))
        else:
            replay(env, SimpleNamespace(closed_loop=False, jobs=jobs,  # type: ignore[arg-type]
                                        agent_order=list("abcd")), ask, {}, 0.05)
        env.run()
    assert len(fired[True]) == 900 and fired[False] == fired[True]


def test_open_loop_holds_one_job_timer_at_a_time() -> None:
    env = simpy.Environment()
    held: list[int] = []

    def ask(job: Job) -> None:
        held.append(len(env._queue))

    jobs = [Job(index=i, phase=0, agent=0, query=Q, at=float(i)) for i in range(500)]
    replay(env, SimpleNamespace(closed_loop=False, jobs=jobs, agent_order=["a"]),  # type: ignore[arg-type]
           ask, {}, 0.0)
    assert len(env._queue) == 1
    env.run()
    assert len(held) == 500 and max(held) == 1  # the next job's timer only
