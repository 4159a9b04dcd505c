"""One simpy run sharded over Ray workers (``engine_options.shards``) against one process.

What it measures
    * **Ship or rebuild** (``ship``). What each worker used to do (build namespace, jobs
      and servers from the scenario) against what it does now (the driver's build pickled
      once, loaded by each worker): seconds in this process, at ``--tools`` tools.
    * **Throughput against workers** (``scale``). Discoveries per second of the engine on
      one large plan (a ``--tools``-tool depth-3 synthetic namespace, ``--queries``
      Poisson queries from 64 agents on 8 resolvers, resolver caches off): ``run_simpy``
      in this process (1 worker), then 2 and 3 Ray workers, on one Ray node (2 CPUs) and
      on a 3-node Ray cluster started on this machine (``ray.cluster_utils.Cluster``, one
      CPU each). The serial tail is timed apart: the driver's build (namespace, jobs,
      servers, plan), starting the actors, shipping (pickling the build, ``ray.put``, the
      workers loading it) and merging (loading and feeding each piece; what is left after
      the last piece arrives). CPU seconds of the slowest shard give a CPU-bound figure
      that a busy machine disturbs less.
    * **Without server load** (``noload``): a small-rate Poisson run, lognormal link
      delays: per-query columns that should be exact (round trips, exchanges, bytes and
      packets, servers contacted, returned tools, cache hits) and latency median/p95.
    * **Agents split** (``agent``): the same on one resolver with ``shard_by: agent``:
      each shard's copy of the resolver has its own caches, so cache hits differ.
    * **With loss** (``loss``): the same with 1 % packet loss: a lost packet's timeout and
      retry happen in one shard's stream and not the other's, so those walks differ.
    * **With server load** (``load``): closed loop, 64 agents with no think time, resolver
      caches off and 4 ms per server message, so the root and ``tools.`` servers queue;
      each shard's servers see only its own queries, so latency differs: median/p95 both
      ways.

    The machine's load average is printed before each measurement (a shared machine: read
    the figures as ratios within one run).

Run
    python3 benchmarks/bench_shards.py                       # 20,000 tools, 8,000 queries
    python3 benchmarks/bench_shards.py --parts ship,scale --queries 4000   # quicker
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import platform
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sim.build.namespace import build_namespace
from sim.build.plan import make_plan, scenario_hierarchy
from sim.build.workload import build_jobs
from sim.engines import shardpool, shards
from sim.engines.ray import ensure_ray
from sim.engines.simpy import run_simpy
from sim.scenario import Scenario
from topologies.gcpause import gc_paused

EXACT = ("returned", "round_trips", "exchanges", "bytes_up", "bytes_down", "packets_up",
         "packets_down", "servers_contacted", "tools_examined", "cache_hits")
STORE = 200 * 1024 * 1024  # object store per node of the local cluster


def scenario(name: str, tools: int, queries: int, workers: int, *, closed: bool = False,
             rate: float = 200.0, server: float = 50e-6, cache: bool = False,
             depth: int = 3, branching: int = 8, loss: float = 0.0, resolvers: int = 8,
             by: str = "resolver") -> Scenario:
    arrival = ({"process": "closed", "think": 0.0} if closed
               else {"process": "poisson", "rate": rate})
    return Scenario.model_validate({
        "name": name, "seed": 3,
        "namespace": {"tools": tools, "branching": branching, "depth": depth, "orgs": 2,
                      "replicas": 1},
        "network": {"topology": "star", "nodes": 8, "resolvers": resolvers, "agents": 64,
                    "link": {"delay": {"dist": "lognormal", "mean": 0.01, "std": 0.004},
                             "loss": loss},
                    "processing": {"model": "fixed", "server": server}},
        "schemes": [{"name": "s", "k": 3, "cache": cache}],
        "workload": {"queries": queries, "arrival": arrival},
        "engine_options": {"shards": {"workers": workers, "shard_by": by}},
        "outputs": {"plots": False},
    })


def load() -> str:
    return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def ship(args: argparse.Namespace) -> None:
    """Each worker's old rebuild against pickling the driver's build once and loading it."""
    sc = scenario("shards-ship", args.tools, args.queries, 2)
    print(f"\n== ship or rebuild: {args.tools} tools, {args.queries} queries ({load()})")
    for _ in range(2):  # the second round is the one printed (imports, caches warm)
        gc.collect()
        t = time.perf_counter()
        with gc_paused():
            ns = build_namespace(sc)
            jobs = build_jobs(sc, ns, sc.network.agents)
            hierarchy = scenario_hierarchy(sc, ns)
        rebuild = time.perf_counter() - t
        plan, _ = make_plan(sc, sc.schemes[0], ns, jobs, hierarchy=hierarchy)
        t = time.perf_counter()
        data = shards.pack(shards.shared_build(sc, plan))
        packed = time.perf_counter() - t
        t = time.perf_counter()
        shards.ShardState(shards.unpack(data))
        loaded = time.perf_counter() - t
    print(f"    rebuild in every worker (namespace, jobs, servers): {rebuild:.2f} s")
    print(f"    ship: pickle once in the driver {packed:.2f} s ({len(data) / 1e6:.1f} MB), "
          f"load in every worker {loaded:.2f} s")
    print(f"    per worker: load / rebuild = {loaded / rebuild:.2f}; serial cost of shipping "
          f"(pickle + one load) / rebuild = {(packed + loaded) / rebuild:.2f}")


@contextmanager
def ray_nodes(nodes: int) -> Iterator[Any]:
    """Ray on one node with this machine's CPUs, or a local cluster of ``nodes`` nodes of
    one CPU each; shut down after."""
    import ray

    cluster = None
    if nodes == 1:
        ensure_ray(num_cpus=os.cpu_count())
    else:
        from ray.cluster_utils import Cluster

        cluster = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 1, "object_store_memory": STORE, "include_dashboard": False})
        for _ in range(nodes - 1):
            cluster.add_node(num_cpus=1, object_store_memory=STORE)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False, logging_level=logging.WARNING)
    try:
        yield ray
    finally:
        ray.shutdown()
        if cluster is not None:
            cluster.shutdown()


def sharded_times(ray: Any, sc: Scenario, plan: Any) -> dict[str, float]:
    """One scheme's sharded run on fresh actors, step by step as
    :func:`sim.engines.shardpool.run_sharded` does it, with each step timed."""
    out: dict[str, float] = {}
    workers = sc.engine_options.shards.workers
    shardpool.drop(ray)
    t = time.perf_counter()
    actors = shardpool.shard_actors(ray, workers)
    ray.get([a.holds.remote("") for a in actors])  # started, node code imported
    out["start_s"] = time.perf_counter() - t
    t = time.perf_counter()
    data = shards.pack(shards.shared_build(sc, plan))
    out["pack_s"] = time.perf_counter() - t
    t = time.perf_counter()
    ref = ray.put(data)
    loads = ray.get([a.load.remote(shardpool.scenario_key(sc), ref) for a in actors])
    out["ship_s"] = time.perf_counter() - t  # ray.put and every worker loading it
    out["load_max_s"] = max(loads)
    del ref, data
    gc.collect()
    t = time.perf_counter()
    pending = shardpool.launch(actors, plan)
    merge = shards.ShardMerge(workers)
    merging, pieces = 0.0, []
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        got = time.perf_counter()
        piece = shards.unpack(ray.get(done[0]))
        pieces.append((piece.wall_s, piece.cpu_s, piece.node))
        merge.add(piece)
        del piece
        merging += time.perf_counter() - got
    merge.result()
    end = time.perf_counter()
    out["run_s"] = end - t
    out["merge_s"] = merging
    out["tail_s"] = end - got  # after the last piece arrived: loading and feeding it
    out["max_shard_wall_s"] = max(w for w, _, _ in pieces)
    out["max_shard_cpu_s"] = max(c for _, c, _ in pieces)
    out["sum_shard_cpu_s"] = sum(c for _, c, _ in pieces)
    out["nodes"] = len({n for _, _, n in pieces})
    return out


def scale(args: argparse.Namespace) -> None:
    """Throughput against workers (1: this process), one Ray node and a 3-node cluster."""
    n = args.queries
    print(f"\n== throughput against workers: {args.tools} tools, depth 3, {n} Poisson "
          f"queries, 8 resolvers, caches off ({load()})")
    sc = scenario("shards-speed", args.tools, n, 1)
    t = time.perf_counter()
    ns = build_namespace(sc)
    jobs = build_jobs(sc, ns, sc.network.agents)
    hierarchy = scenario_hierarchy(sc, ns)
    plan, _ = make_plan(sc, sc.schemes[0], ns, jobs, hierarchy=hierarchy)
    build = time.perf_counter() - t
    print(f"  driver's build (namespace, jobs, servers, plan): {build:.2f} s (serial, any "
          f"worker count)")
    t, cpu = time.perf_counter(), time.process_time()
    run_simpy(plan)
    one_wall, one_cpu = time.perf_counter() - t, time.process_time() - cpu
    print(f"  1 worker (this process): {one_wall:.1f} s wall, {n / one_wall:.0f} discoveries/s"
          f", {one_cpu:.1f} s CPU")
    gc.collect()
    for nodes in (1, 3):
        label = "one Ray node, 2 CPUs" if nodes == 1 else "3-node local cluster, 1 CPU each"
        with ray_nodes(nodes) as ray:
            for workers in (2, 3):
                scw = sc.with_overrides({"engine_options.shards.workers": workers})
                plan, _ = make_plan(scw, scw.schemes[0], ns, jobs, hierarchy=hierarchy)
                e = sharded_times(ray, scw, plan)
                cpu_bound = one_cpu / (e["max_shard_cpu_s"] + e["merge_s"])
                print(f"  {workers} workers, {label} ({e['nodes']:.0f} nodes used; "
                      f"{load()}):\n"
                      f"    run {e['run_s']:.1f} s wall: {n / e['run_s']:.0f} discoveries/s "
                      f"({one_wall / e['run_s']:.2f}x); slowest shard {e['max_shard_wall_s']:.1f}"
                      f" s wall / {e['max_shard_cpu_s']:.1f} s CPU (all shards "
                      f"{e['sum_shard_cpu_s']:.1f} s CPU); CPU-bound {cpu_bound:.2f}x\n"
                      f"    serial tail: actors started {e['start_s']:.1f} s (once per "
                      f"session), pickling the build {e['pack_s']:.2f} s, put + workers "
                      f"loading {e['ship_s']:.2f} s (slowest load {e['load_max_s']:.2f} s), "
                      f"merging {e['merge_s']:.2f} s in all, {e['tail_s']:.2f} s after the "
                      f"last piece")
                gc.collect()


def timed(sc: Scenario) -> tuple[pd.DataFrame, float, float]:
    """(records, engine seconds, whole run_scenario seconds)."""
    from sim.run.runner import run_scenario

    t = time.perf_counter()
    result = run_scenario(sc, write=False)
    return result.records, result.summary["wall_s"]["s"], time.perf_counter() - t


def compare(one: pd.DataFrame, many: pd.DataFrame) -> dict[str, str]:
    a = one.sort_values("job").reset_index(drop=True)
    b = many.sort_values("job").reset_index(drop=True)
    out = {c: f"{(a[c] == b[c]).mean():.4f}" for c in EXACT}
    out["cache hits one/shards"] = f"{a.cache_hits.sum()} / {b.cache_hits.sum()}"
    for label, df in (("one", a), ("shards", b)):
        ok = df[df.success].latency_ms
        out[f"{label} median/p95 ms"] = f"{ok.median():.3f} / {ok.quantile(0.95):.3f}"
    ma, mb = a[a.success].latency_ms.median(), b[b.success].latency_ms.median()
    pa, pb = a[a.success].latency_ms.quantile(0.95), b[b.success].latency_ms.quantile(0.95)
    out["median diff"] = f"{100 * (mb - ma) / ma:+.2f} %"
    out["p95 diff"] = f"{100 * (pb - pa) / pa:+.2f} %"
    out["success one/shards"] = f"{a.success.mean():.4f} / {b.success.mean():.4f}"
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tools", type=int, default=20000)
    ap.add_argument("--queries", type=int, default=8000)
    ap.add_argument("--workers", type=int, default=2, help="for noload, agent, loss, load")
    ap.add_argument("--parts", default="ship,scale,noload,agent,loss,load",
                    help="which measurements, comma-separated "
                         "(ship, scale, noload, agent, loss, load)")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}; {load()}")
    if "ship" in parts:
        ship(args)
    if "scale" in parts:
        scale(args)
    small: dict[str, Any] = {"depth": 2, "branching": 6}
    cases: list[tuple[str, Scenario]] = [
        ("noload: 2,000 tools, 4,000 Poisson queries at 20/s, caches on",
         scenario("shards-noload", 2000, 4000, args.workers, rate=20.0, cache=True, **small)),
        ("agent: the same on one resolver, agents split (shard_by: agent)",
         scenario("shards-agent", 2000, 4000, args.workers, rate=20.0, cache=True,
                  resolvers=1, by="agent", **small)),
        ("loss: the same as noload with 1 % packet loss (timeouts and retries)",
         scenario("shards-loss", 2000, 4000, args.workers, rate=20.0, cache=True,
                  loss=0.01, **small)),
        ("load: 2,000 tools, 4,000 queries, closed loop (64 agents, no think), "
         "caches off, 4 ms per server message",
         scenario("shards-load", 2000, 4000, args.workers, closed=True, server=4e-3,
                  **small))]
    cases = [c for c in cases if c[0].split(":")[0] in parts]
    if cases:
        ensure_ray(num_cpus=os.cpu_count())
    for label, sc in cases:
        print(f"\n== {label}; {load()}")
        many = timed(sc)[0]
        one = timed(sc.with_overrides({"engine_options.shards.workers": 1}))[0]
        for k, v in compare(one, many).items():
            print(f"    {k}: {v}")


if __name__ == "__main__":
    main()
