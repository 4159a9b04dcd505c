"""Ray engine: the plan's nodes hosted in Ray actors, many zones per actor, real sockets.

Each actor is an async Ray actor wrapping a :class:`sim.engines.nodehost.NodeHost`: its servers,
resolvers or agents listen on their own 127.x addresses with the live engine's adapters,
in the actor's event loop, and emulate link delay and loss in user space exactly as the
live engine does. Placement of servers (``engine_options.ray.placement``):

* ``level`` — one actor per level of the tree (root, TLD, intermediate, leaf);
* ``org`` — one actor per organisation (public zones together);
* ``count`` — zones packed ``zones_per_actor`` to an actor, in zone order;

resolvers share one actor, the replicas of an HTTP registry another, and agents are spread
over ``agent_actors`` actors. Every actor serves its part with
:class:`sim.engines.nodehost.NodeHost`, so everything the live engine runs (registries, DNS
over TLS, fault schedules, churn, sessions, the dense scorer with shipped vectors) runs
here; a capture (``--capture``) records the actors' loopback traffic as on live. The driver
calls the phases on every actor in order (start, shared time origin, warming, replay,
finish) and merges the pieces into one :class:`sim.engines.base.EngineOutput`, so the runner
writes the same records as for every other engine.

Ray is imported only when this engine runs. ``ray.init()`` starts a local instance unless
Ray is already initialised or ``address`` (or ``RAY_ADDRESS``) names a cluster; since the
nodes talk over 127.x addresses, one run's actors are all placed on one machine (the
driver's node by default); clusters pay off for sweeps (:mod:`sim.run.sweep`), where each
point is a task.
"""

from __future__ import annotations

import gc
import os
import time
from typing import Any

from sim.build.faults import registry_address
from sim.build.runplan import RunPlan, StubSink
from sim.engines.base import EngineOutput, merge_outputs
from sim.engines.nodehost import HostPart, NodeHost, quiet_process, split_plan
from sim.engines.vectors import ship_intent_vectors
from sim.scenario import RaySpec

START_MARGIN = 0.05  # seconds between the driver's start call and job time zero


def ensure_ray(address: str | None = None, num_cpus: int | None = None) -> Any:
    """Import Ray and initialise it once: a local instance unless an address is given (or
    ``RAY_ADDRESS``). A local instance listens on 127.0.0.1 only (GCS, raylet, workers,
    agents; no dashboard), or is refused, and Ray >= 2.59 starts it with an auth token."""
    import ipaddress

    import ray

    if ray.is_initialized():
        return ray
    address = address or os.environ.get("RAY_ADDRESS") or None
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                              "logging_level": "warning"}
    if address is not None:
        ray.init(address=address, **kwargs)
        return ray
    local = "127.0.0.1"
    kwargs |= {"num_cpus": num_cpus or os.cpu_count() or 1, "_node_ip_address": local,
               "dashboard_host": local}
    # Ray swaps 127.0.0.1 for the machine's routable address, and its gRPC servers then
    # listen on every interface, unless "clusters" are off (ray_constants.ENABLE_RAY_CLUSTER,
    # read from this variable at import): off while the local instance starts, whose
    # processes inherit the variable
    from ray._private import ray_constants

    variable = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
    saved_env = os.environ.get(variable)
    saved = getattr(ray_constants, "ENABLE_RAY_CLUSTER", True)
    os.environ[variable] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        ray.init(**kwargs)
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved
        if saved_env is None:
            os.environ.pop(variable, None)
        else:
            os.environ[variable] = saved_env
    node = ray.util.get_node_ip_address()
    if not ipaddress.ip_address(node).is_loopback:
        ray.shutdown()
        raise RuntimeError(f"Ray {ray.__version__} started its local instance on {node}, "
                           f"not on {local} only (it would listen on every interface); "
                           f"give a cluster's address instead (RAY_ADDRESS)")
    return ray


def group_nodes(plan: RunPlan, spec: RaySpec) -> list[tuple[str, list[str]]]:
    """(actor name, node addresses) per actor, following the placement option; an
    HTTP-registry scheme has the registry's replicas on one actor and its agents."""
    if plan.registry is not None:
        out = [("registry", [registry_address(i) for i in range(plan.registry_replicas)])]
    else:
        out = _server_groups(plan, spec)
        if plan.resolvers:
            out.append(("resolvers", list(plan.resolvers)))
    n = max(1, min(spec.agent_actors, len(plan.agent_order)))
    for i in range(n):
        ips = plan.agent_order[i::n]
        if ips:
            out.append((f"agents-{i}", ips))
    return out


def _server_groups(plan: RunPlan, spec: RaySpec) -> list[tuple[str, list[str]]]:
    """(actor name, server addresses) per actor of a DNS scheme."""
    manifest = {m["address"]: m for m in plan.hierarchy.manifest}
    groups: dict[str, list[str]] = {}
    if spec.placement == "count":
        by_zone: dict[str, list[str]] = {}
        for ip in plan.hierarchy.servers:
            by_zone.setdefault(plan.hierarchy.zone_of[ip], []).append(ip)
        for i, ips in enumerate(by_zone.values()):
            groups.setdefault(f"zones-{i // spec.zones_per_actor}", []).extend(ips)
    else:
        for ip in plan.hierarchy.servers:
            m = manifest[ip]
            key = m["role"] if spec.placement == "level" else (m["org"] or "public")
            groups.setdefault(f"{spec.placement}-{key}", []).append(ip)
    return list(groups.items())


_CLASS: Any = None
_POOL: dict[str, list[Any]] = {}  # Ray session -> idle actors kept for the next run


def _session(ray: Any) -> str:
    """This Ray connection: job ids restart at every ``ray.init``; node ids do not repeat."""
    ctx = ray.get_runtime_context()
    return f"{ctx.get_node_id()}/{ctx.get_job_id()}"


def _actor_class(ray: Any) -> Any:
    global _CLASS
    if _CLASS is not None:
        return _CLASS

    @ray.remote(num_cpus=0, max_concurrency=64)
    class RayNodeHost:
        """An async actor serving one :class:`NodeHost` at a time in its event loop.

        Actors outlive a run: starting a process and importing the node code costs seconds,
        so the next scheme's parts are loaded into the same actors.
        """

        def __init__(self) -> None:
            self.host: NodeHost | None = None

        async def load(self, part: HostPart) -> None:
            self.host = NodeHost(part)
            quiet_process()

        async def start(self) -> int:
            assert self.host is not None
            return await self.host.start()

        async def set_origin(self, wall: float) -> None:
            assert self.host is not None
            await self.host.set_origin(wall)

        async def warm(self) -> float:
            assert self.host is not None
            return await self.host.warm()

        async def replay(self, t0_wall: float) -> int:
            assert self.host is not None
            return await self.host.replay(t0_wall)

        async def hang_up(self) -> None:
            assert self.host is not None
            await self.host.hang_up()

        async def finish(self) -> EngineOutput:
            assert self.host is not None
            host, self.host = self.host, None
            gc.enable()
            return await host.finish()

    _CLASS = RayNodeHost
    return _CLASS


def actors_for(ray: Any, n: int) -> list[Any]:
    """``n`` actors pinned to the driver's machine (nodes reach each other on 127.x
    addresses), reused from earlier runs of this Ray session where possible."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    pool = _POOL.setdefault(_session(ray), [])
    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
    actor = _actor_class(ray)
    while len(pool) < n:
        pool.append(actor.options(scheduling_strategy=here).remote())
    return pool[:n]


def run_ray(plan: RunPlan, sink: StubSink | None = None) -> EngineOutput:
    """Run one scheme of ``plan`` in Ray actors (the catalogue's entry point); the pieces are
    folded as they come back, every discovery told to ``sink``."""
    options = plan.engine_options or {}
    spec = options.get("ray")
    spec = spec if isinstance(spec, RaySpec) else RaySpec.model_validate(spec or {})
    ray = ensure_ray(spec.address)
    ship_intent_vectors(plan)  # dense: the hosts look vectors up, none loads the model
    parts = split_plan(plan, group_nodes(plan, spec))
    actors = actors_for(ray, len(parts))
    try:
        ray.get([a.load.remote(p) for a, p in zip(actors, parts, strict=True)])
        ray.get([a.start.remote() for a in actors])
        origin = time.time()
        ray.get([a.set_origin.remote(origin) for a in actors])
        ray.get([a.warm.remote() for a in actors])
        ray.get([a.replay.remote(time.time() + START_MARGIN) for a in actors])
        ray.get([a.hang_up.remote() for a in actors])
        pieces = ray.get([a.finish.remote() for a in actors])
    except BaseException:  # an actor in an unknown state is not reused
        for a in actors:
            ray.kill(a)
        _POOL.pop(_session(ray), None)
        raise
    out = merge_outputs(pieces, sink, origin)
    out.link_emulation = "user-space"
    return out
