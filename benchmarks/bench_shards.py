"""One simpy run sharded over Ray workers (``engine_options.shards``) against one process.

What it measures
    * **Speed-up** (``speed``). Discoveries per second of the engine alone on one large
      plan (a ``--tools``-tool depth-3 synthetic namespace, ``--queries`` Poisson
      queries from 64 agents on 8 resolvers, resolver caches off): ``run_simpy`` in this
      process against ``--workers`` shards (the actors' runs, shipping the pieces back,
      loading and merging them; each worker's one-time build of namespace and servers
      is timed apart). Also CPU seconds (one process; slowest shard), from which a
      CPU-bound speed-up that a busy machine disturbs less, and the whole
      ``run_scenario`` both ways (namespace, plans, engine, records).
    * **Without server load** (``noload``): a small-rate Poisson run, lognormal link
      delays: per-query columns that should be exact (round trips, exchanges, bytes and
      packets, servers contacted, returned tools, cache hits) and latency median/p95.
    * **With loss** (``loss``): the same with 1 % packet loss: a lost packet's timeout and
      retry happen in one shard's stream and not the other's, so those walks differ.
    * **With server load** (``load``): closed loop, 64 agents with no think time, resolver
      caches off and 4 ms per server message, so the root and ``tools.`` servers queue;
      each shard's servers see only its own queries, so latency differs: median/p95 both
      ways.

    The machine's load average is printed before each measurement (a shared machine: read
    the figures as ratios within one run).

Run
    python3 benchmarks/bench_shards.py                       # 20,000 tools and queries (~5 min)
    python3 benchmarks/bench_shards.py --queries 4000        # quicker
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import sys
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sim.build.namespace import build_namespace
from sim.build.plan import make_plan
from sim.build.workload import build_jobs
from sim.engines import shards
from sim.engines.ray import ensure_ray
from sim.engines.simpy import run_simpy
from sim.run.runner import run_scenario
from sim.scenario import Scenario

EXACT = ("returned", "round_trips", "exchanges", "bytes_up", "bytes_down", "packets_up",
         "packets_down", "servers_contacted", "tools_examined", "cache_hits")


def scenario(name: str, tools: int, queries: int, workers: int, *, closed: bool = False,
             rate: float = 200.0, server: float = 50e-6, cache: bool = False,
             depth: int = 3, branching: int = 8, loss: float = 0.0) -> Scenario:
    arrival = ({"process": "closed", "think": 0.0} if closed
               else {"process": "poisson", "rate": rate})
    return Scenario.model_validate({
        "name": name, "seed": 3,
        "namespace": {"tools": tools, "branching": branching, "depth": depth, "orgs": 2,
                      "replicas": 1},
        "network": {"topology": "star", "nodes": 8, "resolvers": 8, "agents": 64,
                    "link": {"delay": {"dist": "lognormal", "mean": 0.01, "std": 0.004},
                             "loss": loss},
                    "processing": {"model": "fixed", "server": server}},
        "schemes": [{"name": "s", "k": 3, "cache": cache}],
        "workload": {"queries": queries, "arrival": arrival},
        "engine_options": {"shards": {"workers": workers}},
        "outputs": {"plots": False},
    })


def load() -> str:
    return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def engine_times(sc: Scenario) -> dict[str, float]:
    """The engine alone, both ways, on the same plan: one process (``run_simpy`` here) and
    the shards (the actors' runs, shipping the pieces back, loading and merging them); CPU
    and wall seconds. One process first, its output dropped before the shards run, so
    neither side's garbage collector walks the other's objects."""
    import ray

    ns = build_namespace(sc)
    jobs = build_jobs(sc, ns, sc.network.agents)
    out: dict[str, float] = {}
    plan, _ = make_plan(sc, sc.schemes[0], ns, jobs)
    t, cpu = time.perf_counter(), time.process_time()
    result = run_simpy(plan)
    out["one_wall_s"] = time.perf_counter() - t
    out["one_cpu_s"] = time.process_time() - cpu
    del result
    gc.collect()
    plan, _ = make_plan(sc, sc.schemes[0], ns, jobs)
    t = time.perf_counter()
    actors = shards.prepare(sc, plan)  # each worker builds namespace, jobs and servers
    out["prepare_s"] = time.perf_counter() - t
    times = {name: getattr(plan, name) for name in shards.TIMES}
    t = time.perf_counter()
    pending = [a.run.remote(plan.scheme, i, len(actors), times, plan.dns_port)
               for i, a in enumerate(actors)]
    pieces = []
    while pending:  # as sim.engines.shards.run_sharded does
        done, pending = ray.wait(pending, num_returns=1)
        got = time.perf_counter()
        pieces.append(shards.unpack(ray.get(done[0])))
    shards.merge_shards(plan, pieces)
    out["shards_wall_s"] = time.perf_counter() - t
    out["merge_s"] = time.perf_counter() - got  # loading the last piece, merging all
    out["max_shard_wall_s"] = max(p.wall_s for p in pieces)
    out["max_shard_cpu_s"] = max(p.cpu_s for p in pieces)
    out["sum_shard_cpu_s"] = sum(p.cpu_s for p in pieces)
    out["ship_s"] = got - t - out["max_shard_wall_s"]  # results back to the driver (about)
    return out


def timed(sc: Scenario) -> tuple[pd.DataFrame, float, float]:
    """(records, engine seconds, whole run_scenario seconds)."""
    t = time.perf_counter()
    result = run_scenario(sc, write=False)
    return result.records, result.summary["wall_s"]["s"], time.perf_counter() - t


def compare(one: pd.DataFrame, many: pd.DataFrame) -> dict[str, str]:
    a = one.sort_values("job").reset_index(drop=True)
    b = many.sort_values("job").reset_index(drop=True)
    out = {c: f"{(a[c] == b[c]).mean():.4f}" for c in EXACT}
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
    ap.add_argument("--queries", type=int, default=20000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--parts", default="speed,noload,loss,load",
                    help="which measurements, comma-separated (speed, noload, loss, load)")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}; {load()}")
    ensure_ray(num_cpus=os.cpu_count())

    if "speed" in parts:
        speed(args)
    for label, sc in (
            ("noload: 2,000 tools, 4,000 Poisson queries at 20/s, caches on",
             scenario("shards-noload", 2000, 4000, args.workers, rate=20.0, cache=True,
                      depth=2, branching=6)),
            ("loss: the same with 1 % packet loss (timeouts and retries)",
             scenario("shards-loss", 2000, 4000, args.workers, rate=20.0, cache=True,
                      depth=2, branching=6, loss=0.01)),
            ("load: 2,000 tools, 4,000 queries, closed loop (64 agents, no think), "
             "caches off, 4 ms per server message",
             scenario("shards-load", 2000, 4000, args.workers, closed=True, server=4e-3,
                      depth=2, branching=6))):
        if label.split(":")[0] not in parts:
            continue
        print(f"\n== {label}; {load()}")
        many = timed(sc)[0]
        one = timed(sc.with_overrides({"engine_options.shards.workers": 1}))[0]
        for k, v in compare(one, many).items():
            print(f"    {k}: {v}")


def speed(args: argparse.Namespace) -> None:
    print(f"\n== speed-up: {args.tools} tools, depth 3, {args.queries} Poisson queries, "
          f"resolver caches off, {args.workers} workers")
    big = scenario("shards-speed", args.tools, args.queries, args.workers)
    e = engine_times(big)
    n = args.queries
    print(f"  engine only ({load()}):")
    print(f"    workers built the run (once per scenario): {e['prepare_s']:.1f} s")
    print(f"    one process: {e['one_wall_s']:.1f} s wall ({n / e['one_wall_s']:.0f} "
          f"discoveries/s), {e['one_cpu_s']:.1f} s CPU")
    print(f"    {args.workers} shards: {e['shards_wall_s']:.1f} s wall "
          f"({n / e['shards_wall_s']:.0f} discoveries/s): slowest shard "
          f"{e['max_shard_wall_s']:.1f} s wall / {e['max_shard_cpu_s']:.1f} s CPU, shipping "
          f"back ~{e['ship_s']:.1f} s, merging {e['merge_s']:.2f} s; CPU of all shards "
          f"{e['sum_shard_cpu_s']:.1f} s")
    print(f"    speed-up: wall {e['one_wall_s'] / e['shards_wall_s']:.2f}x; CPU-bound "
          f"(one-process CPU / (slowest shard CPU + shipping + merging)) "
          f"{e['one_cpu_s'] / (e['max_shard_cpu_s'] + e['ship_s'] + e['merge_s']):.2f}x")
    gc.collect()
    one, t_one, w_one = timed(big.with_overrides({"engine_options.shards.workers": 1}))
    gc.collect()
    many, t_many, w_many = timed(big)
    print(f"  whole run_scenario ({load()}): one process {w_one:.1f} s (engine {t_one:.1f} s),"
          f" {args.workers} shards {w_many:.1f} s (engine {t_many:.1f} s): "
          f"{w_one / w_many:.2f}x")
    for k, v in compare(one, many).items():
        print(f"    {k}: {v}")


if __name__ == "__main__":
    main()
