"""The Ray actors of a sharded simpy run (:mod:`sim.engines.shards`): one per shard, kept
for the next scheme and run within a Ray session.

:func:`start` creates them early (``tooldns run``: the workers import the node code while
the driver builds); :func:`prepare` ships them the driver's build, once per scenario,
through Ray's object store; :func:`launch` runs one scheme's shards, and :func:`run_sharded`
(the runner's entry point) merges their pieces as they arrive (:func:`collect`).
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from sim.build.runplan import RunPlan, StubSink
from sim.engines.base import EngineOutput
from sim.engines.shards import (
    ShardMerge,
    ShardState,
    check_shardable,
    pack,
    plan_times,
    shared_build,
    unpack,
)
from sim.scenario import Scenario

_CLASS: Any = None
_POOL: dict[str, tuple[float, list[Any]]] = {}  # Ray session -> (CPUs per actor, actors)


def _actor_class(ray: Any) -> Any:
    global _CLASS
    if _CLASS is None:
        @ray.remote
        class ShardWorker:
            """Holds one scenario's :class:`ShardState` (kept for the next scheme or run)."""

            def __init__(self) -> None:
                # imported now, while the driver builds
                import sim.build.plan
                import sim.engines.simpy  # noqa: F401

                self.key = ""
                self.state: ShardState | None = None

            def holds(self, key: str) -> bool:
                return key == self.key and self.state is not None

            def load(self, key: str, data: bytes) -> float:
                """Take the driver's shipped build (``data``, from the object store); the
                seconds it took to load."""
                t = time.perf_counter()
                self.state, self.key = None, ""  # free the last scenario first
                self.state, self.key = ShardState(unpack(data)), key
                return time.perf_counter() - t

            def run(self, scheme: str, shard: int, workers: int,
                    times: dict[str, float], dns_port: int) -> bytes:
                assert self.state is not None
                piece = self.state.run(scheme, shard, workers, times, dns_port)
                piece.node = ray.get_runtime_context().get_node_id()
                return pack(piece)

        _CLASS = ShardWorker
    return _CLASS


def _session(ray: Any) -> str:
    ctx = ray.get_runtime_context()
    return f"{ctx.get_node_id()}/{ctx.get_job_id()}"


def shard_actors(ray: Any, workers: int) -> list[Any]:
    """``workers`` actors spread over the cluster's machines, one CPU each (a share of the
    CPUs when the cluster has fewer than ``workers``), reused within a Ray session."""
    session = _session(ray)
    cpus = min(1.0, float(ray.cluster_resources().get("CPU", 1.0)) / workers)
    have_cpus, pool = _POOL.get(session, (cpus, []))
    if have_cpus != cpus:  # other sizes hold the CPUs these need: start afresh
        for actor in pool:
            ray.kill(actor)
        pool = []
    cls = _actor_class(ray)
    while len(pool) < workers:
        pool.append(cls.options(num_cpus=cpus, scheduling_strategy="SPREAD").remote())
    _POOL[session] = (cpus, pool)
    return pool[:workers]


def start(sc: Scenario) -> None:
    """Start Ray and the shard actors now, without waiting: called before the driver
    builds (``tooldns run``), the workers start and import meanwhile."""
    from sim.engines.ray import ensure_ray

    spec = sc.engine_options.shards
    if spec.workers > 1:
        shard_actors(ensure_ray(spec.address), spec.workers)


def scenario_key(sc: Scenario) -> str:
    """What names a shipped build: the scenario's content."""
    data = json.dumps(sc.model_dump(mode="json"), sort_keys=True)
    return hashlib.sha256(data.encode()).hexdigest()


def prepare(sc: Scenario, plan: RunPlan) -> tuple[Any, list[Any]]:
    """(Ray, the shard actors), every actor holding the driver's build of this scenario:
    pickled and put into the object store once, only if some actor lacks it."""
    from sim.engines.ray import ensure_ray

    spec = sc.engine_options.shards
    ray = ensure_ray(spec.address)
    actors = shard_actors(ray, spec.workers)
    key = scenario_key(sc)
    try:
        missing = [a for a, held in zip(actors, ray.get([a.holds.remote(key) for a in actors]),
                                        strict=True) if not held]
        if missing:
            ref = ray.put(pack(shared_build(sc, plan)))
            ray.get([a.load.remote(key, ref) for a in missing])
            del ref
    except BaseException:
        drop(ray)
        raise
    return ray, actors


def launch(actors: list[Any], plan: RunPlan) -> list[Any]:
    """Start one scheme's shards (one per actor); the references of their packed pieces."""
    times = plan_times(plan)
    return [a.run.remote(plan.scheme, i, len(actors), times, plan.dns_port)
            for i, a in enumerate(actors)]


def drop(ray: Any) -> None:
    """Kill this session's actors (one in an unknown state is not reused)."""
    _, pool = _POOL.pop(_session(ray), (0.0, []))
    for actor in pool:
        ray.kill(actor)


def run_sharded(sc: Scenario, engine: str, plan: RunPlan, sink: StubSink | None = None
                ) -> EngineOutput:
    """Run ``plan`` (the driver's whole plan of one scheme) as ``shards.workers`` shards on
    Ray actors; the merged output, every discovery told to ``sink`` as it is folded in."""
    check_shardable(sc, engine, len(plan.resolvers))
    ray, actors = prepare(sc, plan)
    try:
        refs = launch(actors, plan)
        return collect(ray, refs, ShardMerge(len(actors), sink))
    except BaseException:  # an actor in an unknown state is not reused
        drop(ray)
        raise


def collect(ray: Any, refs: list[Any], merge: ShardMerge) -> EngineOutput:
    """Wait for the shards' pieces (``refs``), each loaded and merged as soon as it is
    there, while the other shards still run."""
    pending = list(refs)
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        merge.add(unpack(ray.get(done[0])))
    return merge.result()
