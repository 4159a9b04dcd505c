"""The run's result is a value: on every engine, a plan reads the same after its run (every
object reachable from it compared field by field, pure memos aside), and the records made
from the engine's output alone — a fresh build of the plan, the output passed through
pickle as from another process — equal the runner's.

The memos set aside are functions of the plan's data kept to save work, each checked
elsewhere to change no byte of a result (``benchmarks/golden.py``): a zone's lookup tables
and score indexes built on first use (compared by the zone data they are built from), the
encoded-reply memo, the path model's routes, the requests made per distinct intent, and
networkx's views of the network graph.
"""

from __future__ import annotations

import collections.abc
import enum
import pickle
import random
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pandas as pd
import pytest

from nodes.authoritative.memo import ReplyMemo
from nodes.authoritative.zonestate import ZoneState
from sim.build.namespace import build_namespace
from sim.build.plan import make_plan
from sim.build.runplan import Requests, RunPlan
from sim.build.workload import build_jobs
from sim.catalog.engines import engine_info
from sim.engines.base import EngineOutput
from sim.run.recorder import Recorder
from sim.run.records import Lookups, load_records
from sim.run.spool import RecordSpool
from sim.run.summary import Tally
from sim.scenario import Scenario
from tests.sim.engines.cases import small
from topologies.paths import PathModel

#: class -> how it is compared: a function of the object (its canonical value), or the
#: names of attributes that are memos (left out)
MEMOS: dict[type, Callable[[Any], Any] | tuple[str, ...]] = {
    ZoneState: lambda z: z.data,  # lookup tables, indexes, lazily encoded records
    ReplyMemo: lambda m: "reply memo",  # encoded replies by query bytes and generation
    PathModel: ("_trees", "_routes", "_node_routes"),  # shortest paths, found on first use
    Requests: ("_made",),  # one request per distinct intent, made on first use
    # a graph by its nodes and edges with their data (networkx caches its views)
    nx.Graph: lambda g: (sorted(g.nodes(data=True), key=repr),
                         sorted(g.edges(data=True), key=repr)),
}


def snapshot(obj: Any, path: str = "plan", out: dict | None = None,
             seen: dict | None = None) -> dict[str, Any]:
    """Every value reachable from ``obj``, by the path that reaches it first."""
    out = {} if out is None else out
    seen = {} if seen is None else seen
    if isinstance(obj, str | bytes | int | float | bool | complex | enum.Enum | type(None)):
        out[path] = repr(obj)
        return out
    if isinstance(obj, types.FunctionType | types.BuiltinFunctionType | types.MethodType
                  | type | types.ModuleType):
        out[path] = getattr(obj, "__qualname__", repr(type(obj)))
        return out
    if id(obj) in seen:
        out[path] = f"<the object at {seen[id(obj)]}>"
        return out
    seen[id(obj)] = path
    canonical = next((how for cls, how in MEMOS.items() if isinstance(obj, cls)), None)
    if callable(canonical):
        return snapshot(canonical(obj), path + "~", out, seen)
    if isinstance(obj, np.ndarray):
        out[path] = (obj.shape, obj.dtype.str, obj.tobytes())
    elif isinstance(obj, np.random.Generator):
        out[path] = repr(obj.bit_generator.state)
    elif isinstance(obj, random.Random):
        out[path] = obj.getstate()
    elif (isinstance(obj, collections.abc.Mapping) and not hasattr(obj, "__dict__")) \
            or isinstance(obj, dict):
        out[path] = f"{type(obj).__name__} of {len(obj)}"
        for k, v in list(obj.items()):
            snapshot(v, f"{path}[{k!r}]", out, seen)
    elif isinstance(obj, list | tuple):
        out[path] = f"{type(obj).__name__} of {len(obj)}"
        for i, v in enumerate(obj):
            snapshot(v, f"{path}[{i}]", out, seen)
    elif isinstance(obj, set | frozenset):
        out[path] = sorted(map(repr, obj))
    else:
        out[path] = type(obj).__qualname__
        attrs = dict(vars(obj)) if hasattr(obj, "__dict__") else {}
        for cls in type(obj).__mro__:
            for name in getattr(cls, "__slots__", ()):
                if hasattr(obj, name):
                    attrs[name] = getattr(obj, name)
        skip = canonical if isinstance(canonical, tuple) else ()
        for name, value in attrs.items():
            if name not in skip:
                snapshot(value, f"{path}.{name}", out, seen)
    return out


def _scenario() -> Scenario:
    """engines-small with a registry scheme and a lossy fault beside the DNS schemes (the
    servers, the registry and the fault schedule all count something during a run)."""
    sc = small(**{"workload.queries": 8})
    return Scenario.model_validate({
        **sc.model_dump(mode="json"),
        "schemes": [{"name": "tooldns", "k": 3, "timeout": 5.0},
                    {"name": "agentdns", "kind": "agentdns", "keepalive": True}],
        "faults": {"events": [{"kind": "lossy", "target": "replica:1", "loss": 0.2}]},
        "network": {**sc.network.model_dump(mode="json"), "processing": {"model": "fixed"}},
        # a packet lost to the lossy replica costs the resolver one 5 s attempt; the agent
        # waits longer than the resolver's four attempts, so a loss retried upstream is
        # never also a stub timeout racing it (a CI run on a loaded machine lost a query so)
        "agents": {"timeout": 30.0},
    })


def _plans(sc: Scenario, dns_port: int) -> list[RunPlan]:
    ns = build_namespace(sc)
    jobs = build_jobs(sc, ns, sc.network.agents)
    return [make_plan(sc, s, ns, jobs, dns_port=dns_port)[0] for s in sc.schemes]


def _records(sc: Scenario, engine: str, plan: RunPlan, output: EngineOutput,
             folder: Path) -> tuple[pd.DataFrame, list[dict]]:
    """The rows the runner makes of ``output``: per discovery, and per node."""
    from sim.build.network import build_network

    ns = plan.hierarchy.namespace
    spool = RecordSpool(folder)
    scheme = next(s for s in sc.schemes if s.name == plan.scheme)
    recorder = Recorder(sc, engine, scheme, plan, Lookups.of(sc, ns), spool, Tally(),
                        stream=False)
    recorder.drain(output)
    network = build_network(sc, plan.hierarchy)
    return (spool.frame().drop(columns=["latency_ms", "sent_s"]),
            load_records(sc, engine, scheme, plan, output, network))


#: every engine, with its markers and the fixtures it needs (as tests/sim/engines/test_matrix)
ENGINES = [
    pytest.param("simpy", [], id="simpy"),
    pytest.param("live", [], id="live", marks=pytest.mark.live),
    pytest.param("mininet", ["mininet_ok"], id="mininet",
                 marks=[pytest.mark.live, pytest.mark.mininet]),
    pytest.param("ray", ["ray_session"], id="ray", marks=[pytest.mark.live, pytest.mark.ray]),
    pytest.param("sharded", ["ray_session"], id="sharded-simpy", marks=pytest.mark.ray),
]


def _run(engine: str, sc: Scenario, plan: RunPlan) -> EngineOutput:
    if engine == "sharded":
        from sim.engines.shardpool import run_sharded

        sharded = sc.with_overrides({"engine_options.shards.workers": 2,
                                     "engine_options.shards.shard_by": "agent",
                                     "network.agents": 2})
        return run_sharded(sharded, "simpy", plan)
    run: Callable[..., EngineOutput] = engine_info(engine).load()
    return run(plan, None)


@pytest.mark.parametrize(("engine", "fixtures"), ENGINES)
def test_plan_unchanged_and_records_from_the_output(engine: str, fixtures: list[str],
                                                   tmp_path: Path,
                                                   request: pytest.FixtureRequest) -> None:
    for fixture in fixtures:
        request.getfixturevalue(fixture)
    sc = _scenario()
    if engine == "sharded":
        sc = sc.with_overrides({"network.agents": 2})
    port = 15353 if engine in ("live", "ray") else 53
    for plan, fresh in zip(_plans(sc, port), _plans(sc, port), strict=True):
        if engine == "sharded" and plan.registry is not None:
            continue  # the sharded cell of registries runs in test_matrix.py
        before = snapshot(plan)
        output = _run(engine, sc, plan)
        after = snapshot(plan)
        changed = sorted(k for k in before.keys() | after.keys()
                         if before.get(k) != after.get(k))
        assert not changed, f"{engine}/{plan.scheme}: the run changed its plan at {changed[:5]}"
        assert output.completed() == len(plan.jobs)
        assert output.servers or output.registry  # what the nodes counted is in the output
        assert output.faults is not None and output.faults.origin != float("inf")
        # records from the output alone: from a fresh build of the plan, and from the
        # output as another process would send it, the same rows
        copy = pickle.loads(pickle.dumps(output))
        rows, nodes = _records(sc, engine, plan, output, tmp_path / f"{plan.scheme}-a")
        rows2, nodes2 = _records(sc, engine, fresh, copy, tmp_path / f"{plan.scheme}-b")
        pd.testing.assert_frame_equal(rows, rows2)
        assert nodes == nodes2
        assert rows.success.all(), rows[~rows.success]
        served = [n for n in nodes if n.get("role") in ("registry",) or n.get("zone")]
        assert served and all(n.get("rx_packets", 0) >= 0 for n in served)


def test_a_plan_runs_the_same_twice() -> None:
    """A plan is not consumed by its run: the same plan run again gives the same output."""
    from sim.engines.simpy import run_simpy

    sc = _scenario()
    for plan in _plans(sc, 53):
        first, second = run_simpy(plan), run_simpy(plan)
        assert [(j.index, s.endpoints, s.latency) for j, s in first.stubs] == \
               [(j.index, s.endpoints, s.latency) for j, s in second.stubs]
        assert first.load == second.load and first.servers == second.servers
        assert first.registry == second.registry
        assert first.faults == second.faults
