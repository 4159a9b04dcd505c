"""Discoveries per second on the Ray engine against the live engine, on this machine.

What it measures
    Completed discoveries per second of replay time (``completed / end_time`` from the
    run summary: job time zero to the last answer; namespace build and actor start-up
    excluded) for one closed-loop workload: ``--agents`` agents with no think time, each
    asking its share of ``--queries`` discoveries, caching off so that every discovery walks
    root → ``tools.`` → the levels below → A. Links are short (``--delay`` one way), so the
    figure is bounded by the CPU cost of the node code and the sockets, not by the links.

    * ``live`` — every node in one asyncio loop in this process (one core at most);
    * ``ray`` — the nodes in Ray actors (``placement`` × ``agent_actors``), each actor its
      own process and event loop, so servers, resolvers and agents run on different cores.

    Records are checked to agree (round trips and bytes per query) between the engines.

Run
    python3 benchmarks/bench_engines.py                  # defaults below, a few minutes
    python3 benchmarks/bench_engines.py --queries 300    # quicker
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sim.build.namespace import build_namespace
from sim.build.plan import make_plan
from sim.build.workload import build_jobs
from sim.engines.ray import ensure_ray, group_nodes
from sim.run.runner import run_scenario
from sim.scenario import Scenario


def scenario(args: argparse.Namespace, placement: str = "level", agent_actors: int = 1,
             zones_per_actor: int = 16) -> Scenario:
    return Scenario.model_validate({
        "name": "bench-engines", "seed": 11,
        "namespace": {"tools": args.tools, "branching": 6, "depth": 2, "orgs": 2,
                      "replicas": 1},
        "network": {"topology": "star", "nodes": 8, "resolvers": args.resolvers,
                    "agents": args.agents,
                    "link": {"delay": {"dist": "constant", "mean": args.delay}},
                    "processing": {"model": "fixed"}},
        "schemes": [{"name": "nocache", "k": 3, "cache": False}],
        "workload": {"queries": args.queries, "pool": 200,
                     "arrival": {"process": "closed", "think": 0.0}},
        "engine_options": {"ray": {"placement": placement, "agent_actors": agent_actors,
                                   "zones_per_actor": zones_per_actor}},
        "outputs": {"plots": False},
    })


def run(sc: Scenario, engine: str, port: int) -> tuple[float, dict, object]:
    result = run_scenario(sc, engine=engine, write=False, live_port=port)
    replay = result.summary["replay"]["nocache"]
    rate = replay["completed"] / replay["end_time_s"]
    return rate, replay, result.records


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tools", type=int, default=2000)
    p.add_argument("--agents", type=int, default=16)
    p.add_argument("--resolvers", type=int, default=2)
    p.add_argument("--queries", type=int, default=800)
    p.add_argument("--delay", type=float, default=0.001, help="one-way link delay (s)")
    p.add_argument("--repeat", type=int, default=2, help="runs per configuration (best kept)")
    args = p.parse_args()
    port = 21000 + os.getpid() % 20000
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
          f"{platform.python_version()}, {platform.system()} {platform.release()}")
    print(f"workload: {args.queries} discoveries, {args.agents} closed-loop agents, "
          f"{args.resolvers} resolvers, {args.tools} tools, {args.delay * 1000:g} ms links, "
          f"no caches\n")
    base = scenario(args)
    ns = build_namespace(base)
    plan = make_plan(base, base.schemes[0], ns, build_jobs(base, ns, args.agents))[0]
    print(f"nodes: {len(plan.hierarchy.servers)} servers, {len(plan.resolvers)} resolvers, "
          f"{len(plan.agents)} agents\n")
    ensure_ray()
    configs = [("live", None), ("ray", ("level", 1, 16)), ("ray", ("level", 2, 16)),
               ("ray", ("count", 1, 64)), ("ray", ("count", 2, 8))]
    rows, reference = [], None
    for engine, opts in configs:
        sc = base if opts is None else scenario(args, *opts)
        actors = "-" if opts is None else str(len(group_nodes(plan, sc.engine_options.ray)))
        best, records = 0.0, None
        for _ in range(args.repeat):
            t = time.perf_counter()
            rate, _replay, records = run(sc, engine, port)
            best = max(best, rate)
            print(f"  {engine} {opts}: {rate:.1f} discoveries/s "
                  f"({time.perf_counter() - t:.1f} s wall)", flush=True)
        cols = ["job", "round_trips", "bytes_up", "bytes_down", "success"]
        got = records.sort_values("job")[cols].reset_index(drop=True)  # type: ignore[attr-defined]
        if reference is None:
            reference = got
        agree = "yes" if got.equals(reference) else "NO"
        label = "live (one process)" if opts is None else \
            f"ray placement={opts[0]}" + (f" zones_per_actor={opts[2]}"
                                          if opts[0] == "count" else "") + \
            f" agent_actors={opts[1]}"
        rows.append((label, actors, best, agree))
    live = rows[0][2]
    print("\n| engine | actors | discoveries/s | vs live | records agree with live |")
    print("|---|---:|---:|---:|---|")
    for label, actors, rate, agree in rows:
        print(f"| {label} | {actors} | {rate:.1f} | {rate / live:.2f} | {agree} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
