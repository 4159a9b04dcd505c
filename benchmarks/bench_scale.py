"""How the testbed scales with the number of tools, on this machine.

What it measures
    ``growth`` — for each N (10^3 … 10^6 tools; 3·10^6 with ``--huge``), in a fresh
    subprocess, one :func:`sim.run.runner.run_scenario` (``write=False``, simpy engine) of a
    synthetic namespace of branching ``--branching`` whose depth grows with N (about 100
    tools per leaf: depth log10(N) - 2, at least 1; ``--depth`` fixes it) or, with
    ``--catalog FILE``, the first N rows of a catalogue. The run's build functions and its
    engine are wrapped with timers, so the figures are run_scenario's own:

    * ``namespace`` — :func:`sim.build.namespace.build_namespace`;
    * ``hierarchy`` — :func:`sim.build.plan.scenario_hierarchy` (every authoritative server);
    * ``net+jobs+pre`` — everything else before the first query: jobs, the per-run
      precomputation (target ids, candidates …), network, placement and the plan;
    * ``sim`` — the engine's wall time for a short closed-loop replay (``--queries``
      discoveries by ``--agents`` agents, no think time, one cached ToolDNS scheme with
      K = 3), and ``disc/s`` = completed discoveries / that time;
    * ``build RSS`` — ``ru_maxrss`` of the child when the first query starts, ``peak
      RSS`` — at the end of the run, and ``B/tool`` = (build RSS − RSS after imports) / N.

    ``rate`` — the issue's yardstick: simulated discoveries per wall-second on one core
    (one process) for 10^5 tools, branching 10, depth 3, BM25, cold caches (resolver cache
    and the servers' packet cache off), 10^4 closed-loop discoveries, run twice: every
    intent distinct (the pool is the query count, so the simulator's memos of replies,
    parses and query bytes find nothing to reuse), then drawn from 2,000 intents (four in
    five repeat one), side by side, default build first (``--pool N``: that pool only);
    the events the engine
    scheduled per discovery; and the ratio to the *simpy floor* (events/s of a minimal
    simpy model ÷ events per discovery: what the event loop alone would allow). With
    ``--baseline-tree DIR`` the same yardstick also runs on another checkout (a subprocess
    with that tree first on ``sys.path``) and the speed-up is printed; round trips and
    bytes per discovery must agree between the two (wire-exact). ``--compiled`` also runs
    this tree compiled by mypyc (:mod:`sim.compiled`, built into a temporary folder) and
    prints its speed-up; round trips, bytes and events per discovery must be equal.

    ``memory`` — peak RSS against the number of queries (records are streamed to disk as
    discoveries finish, so it should stay flat): for each Q in ``--counts`` (10^4, 10^5,
    10^6), in a fresh subprocess, one written run (``run_scenario`` into a temporary
    folder, simpy) of ``growth``'s scenario at ``--tools`` (10^5) tools: the cached ToolDNS
    scheme, K = 3, Q closed-loop discoveries by 16 agents drawn from ``--pool`` (2,000)
    distinct queries (else every query is new and the caches grow with Q). Prints peak RSS
    (``ru_maxrss``), RSS when the first query starts, wall time (whole run, engine,
    writing) and the peak against the smallest Q's; ``--timeout`` stops a run (reported).
    ``--poisson R`` replays an open loop (Poisson arrivals at R per second) instead of the
    closed loop; ``--cold`` runs ``rate``'s scenario instead (caches off: every discovery walks the
    whole tree), e.g. the issue's 10^6 tools × 10^6 queries on cold caches.

Run
    python3 benchmarks/bench_scale.py rate                      # ~2 min: distinct, repeated
    git worktree add /tmp/base ef1f376 && \
      python3 benchmarks/bench_scale.py rate --baseline-tree /tmp/base   # before issue 12
    python3 benchmarks/bench_scale.py growth                    # N = 10^3 … 10^6, ~3 min
    python3 benchmarks/bench_scale.py growth --huge             # also 3·10^6
    python3 benchmarks/bench_scale.py growth --sizes 1000 100000 --depth 3
    python3 benchmarks/bench_scale.py growth --catalog FILE --sizes 25000 1000000
    python3 benchmarks/bench_scale.py memory                    # 10^5 tools, Q = 10^4 … 10^6
    python3 benchmarks/bench_scale.py memory --tools 1000000 --counts 1000000 --timeout 900
    python3 benchmarks/bench_scale.py memory --cold --tools 1000000 --counts 10000 1000000
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def _depth(n: int, args: argparse.Namespace) -> int:
    if args.depth:
        return args.depth
    return max(1, round(math.log10(n)) - 2)


def _scenario(n: int, args: argparse.Namespace) -> Any:
    from sim.scenario import Scenario

    if args.catalog:
        namespace = {"source": "catalog", "catalog": args.catalog, "limit": n}
    else:
        namespace = {"tools": n, "branching": args.branching, "depth": _depth(n, args),
                     "orgs": 2}
    return Scenario.model_validate({
        "name": "bench-scale", "seed": 1, "namespace": {**namespace, "replicas": 1},
        "network": {"topology": "star", "nodes": 16, "resolvers": 2, "agents": args.agents,
                    "link": {"delay": {"dist": "constant", "mean": 0.002}},
                    "processing": {"model": "fixed"}},
        "schemes": [{"name": "tooldns", "k": 3}],
        "workload": {"queries": args.queries, "arrival": {"process": "closed", "think": 0.0}},
        "outputs": {"plots": False},
    })


def child(n: int, args: argparse.Namespace) -> dict[str, Any]:
    """One run at ``n`` tools in this (fresh) process; returns its figures."""
    from sim.catalog.engines import EngineInfo
    from sim.run import runner

    base = _rss_mib()
    sc = _scenario(n, args)
    spans: dict[str, float] = {}
    marks: dict[str, float] = {}

    built: dict[str, Any] = {}

    def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*a: Any, **kw: Any) -> Any:
            t = time.perf_counter()
            marks.setdefault(f"{name}_start", t)
            marks.setdefault(f"{name}_rss", _rss_mib())
            try:
                built[name] = out = fn(*a, **kw)
                return out
            finally:
                spans[name] = spans.get(name, 0.0) + time.perf_counter() - t

        return wrapper

    load = EngineInfo.load
    runner.build_namespace = timed("namespace", runner.build_namespace)  # type: ignore
    runner.scenario_hierarchy = timed("hierarchy", runner.scenario_hierarchy)  # type: ignore
    EngineInfo.load = lambda self: timed("sim", load(self))  # type: ignore
    t0 = time.perf_counter()
    result = runner.run_scenario(sc, engine="simpy", write=False)
    total = time.perf_counter() - t0
    peak = _rss_mib()
    before_sim = marks["sim_start"] - t0
    replay = result.summary["replay"]["tooldns"]
    return {
        "n": n, "depth": _depth(n, args) if not args.catalog else 0,
        "tools": len(built["namespace"].tools), "servers": len(built["hierarchy"].servers),
        "namespace_s": spans["namespace"], "hierarchy_s": spans["hierarchy"],
        "rest_s": before_sim - spans["namespace"] - spans["hierarchy"],
        "build_s": before_sim, "sim_s": spans["sim"], "total_s": total,
        "completed": replay["completed"], "rate": replay["completed"] / spans["sim"],
        "success": float(result.records["success"].mean()),
        "base_mib": base, "build_mib": marks["sim_rss"], "peak_mib": peak,
        "bytes_per_tool": (marks["sim_rss"] - base) * 2**20 / n,
    }


def _machine() -> str:
    load = os.getloadavg()
    return (f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
            f"{platform.python_version()}, {platform.system()} {platform.release()}; "
            f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


def _child_row(cmd: list[str], label: str, timeout: float) -> dict[str, Any] | None:
    """Run one measurement in a fresh process; its JSON row, or None (said why)."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=timeout)
    except subprocess.TimeoutExpired:
        print(f"  {label}: stopped after {timeout:.0f} s (--timeout)", flush=True)
        return None
    if proc.returncode != 0:
        print(f"  {label}: failed ({proc.returncode})\n{proc.stderr[-2000:]}")
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def growth(args: argparse.Namespace) -> int:
    """Build cost, memory and a short simulation as the namespace grows (fresh process
    per size)."""
    if args.child:
        print(json.dumps(child(args.child, args)))
        return 0
    sizes = args.sizes or [1_000, 10_000, 100_000, 1_000_000] + ([3_000_000] if args.huge
                                                                   else [])
    print(_machine())
    source = f"catalogue {args.catalog}" if args.catalog else (
        f"synthetic, branching {args.branching}, depth "
        + (str(args.depth) if args.depth else "log10(N) - 2"))
    print(f"namespace: {source}; workload: {args.queries} closed-loop discoveries by "
          f"{args.agents} agents, one cached ToolDNS scheme (K = 3), simpy\n")
    rows = []
    for n in sizes:
        cmd = [sys.executable, __file__, "growth", "--child", str(n), "--queries",
               str(args.queries), "--agents", str(args.agents), "--branching",
               str(args.branching), "--depth", str(args.depth)]
        if args.catalog:
            cmd += ["--catalog", args.catalog]
        t = time.perf_counter()
        row = _child_row(cmd, f"N={n:,}", args.timeout)
        if row is None:
            continue
        rows.append(row)
        print(f"  N={n:,}: {time.perf_counter() - t:.1f} s wall, build {row['build_s']:.1f} s, "
              f"peak {row['peak_mib']:.0f} MiB; load {os.getloadavg()[0]:.2f}", flush=True)
    print("\n| N tools | depth | servers | namespace s | hierarchy s | net+jobs+pre s | "
          "build s | sim s | disc/s | build RSS MiB | peak RSS MiB | B/tool |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['tools']:,} | {r['depth'] or '-'} | {r['servers']:,} | "
              f"{r['namespace_s']:.2f} | {r['hierarchy_s']:.2f} | {r['rest_s']:.2f} | "
              f"{r['build_s']:.2f} | "
              f"{r['sim_s']:.2f} | {r['rate']:.0f} | {r['build_mib']:.0f} | "
              f"{r['peak_mib']:.0f} | "
              f"{r['bytes_per_tool']:.0f} |")
    if rows:
        print(f"\nRSS after imports: {rows[0]['base_mib']:.0f} MiB; "
              f"{_machine().split('; ')[-1]}")
    return 0


def _rate_scenario(tools: int, queries: int, packet_cache: bool, pool: int = 2000) -> dict:
    """The issue's yardstick: BM25, depth 3, cold caches (resolver and servers' packet
    cache off), closed loop with no think time, 1 ms links."""
    caches = {} if packet_cache else {"caches": {"packet_cache": False}}
    return {
        "name": "bench-rate", "seed": 3,
        "namespace": {"tools": tools, "branching": 10, "depth": 3, "orgs": 0, "replicas": 1},
        "network": {"topology": "star", "nodes": 8, "resolvers": 1, "agents": 16,
                    "link": {"delay": {"dist": "constant", "mean": 0.001}}},
        "schemes": [{"name": "cold", "k": 3, "cache": False}],
        "workload": {"queries": queries, "pool": pool,
                     "arrival": {"process": "closed", "think": 0.0}},
        "outputs": {"plots": False}, **caches}


def _rate_child(tree: str, tools: int, queries: int, pool: int) -> None:
    """In a child process: one run of the yardstick with the code in ``tree``; prints JSON."""
    sys.path.insert(0, tree)
    import importlib

    import simpy

    from sim.scenario import Scenario

    try:  # the run loop's module: sim/run/runner.py since the layout of issue 23
        run_scenario = importlib.import_module("sim.run.runner").run_scenario
    except ModuleNotFoundError:  # older trees: sim/runner.py
        run_scenario = importlib.import_module("sim.runner").run_scenario
    data = _rate_scenario(tools, queries, packet_cache=True, pool=pool)
    try:  # older trees have no packet-cache switch: they run with it on
        sc = Scenario.model_validate(_rate_scenario(tools, queries, packet_cache=False,
                                                    pool=pool))
        cold = True
    except Exception:
        sc, cold = Scenario.model_validate(data), False
    scheduled = [0]
    real = simpy.Environment.schedule

    def counting(self, event, priority=1, delay=0):  # type: ignore[no-untyped-def]
        scheduled[0] += 1
        return real(self, event, priority, delay)

    simpy.Environment.schedule = counting  # type: ignore[method-assign]
    t = time.perf_counter()
    result = run_scenario(sc, write=False)
    total = time.perf_counter() - t
    sim = result.summary["wall_s"]["cold"]
    print(json.dumps({"sim_s": sim, "total_s": total, "events": scheduled[0],
                      "packet_cache_off": cold,
                      "rtt": float(result.records.round_trips.mean()),
                      "bytes": float((result.records.bytes_up
                                      + result.records.bytes_down).mean())}))


def simpy_floor(seconds: float = 2.0) -> float:
    """Events per second of a minimal simpy request/response model (two processes that
    answer each other through timeouts): what the event loop alone can do."""
    import simpy

    env = simpy.Environment()
    count = [0]

    def ping(env: simpy.Environment):  # type: ignore[no-untyped-def]
        while True:
            yield env.timeout(0.001)
            count[0] += 1

    for _ in range(16):
        env.process(ping(env))
    t = time.perf_counter()
    until = 0.0
    while time.perf_counter() - t < seconds:
        until += 1.0
        env.run(until=until)
    return count[0] / (time.perf_counter() - t)


def rate(args: argparse.Namespace) -> int:
    """Discoveries per wall-second per core on the yardstick, against the simpy floor and,
    with ``--baseline-tree``, against another checkout of the project."""
    if args.child:
        _rate_child(args.child, args.tools, args.queries, args.pool)
        return 0
    print(_machine())
    trees = [("this tree", str(ROOT))]
    if args.baseline_tree:
        trees.append(("baseline", str(Path(args.baseline_tree).resolve())))
    scratch = None
    if args.compiled:  # this tree's hot modules compiled by mypyc, in a copy (sim.compiled)
        from sim.compiled import build

        scratch = tempfile.TemporaryDirectory(prefix="rate-compiled-")
        made = build(Path(scratch.name) / "code")
        print(f"compiled {len(made['modules'])} modules with mypyc in {made['built_s']} s")
        trees.append(("compiled", str(Path(scratch.name) / "code")))
    floor = simpy_floor()
    print(f"simpy floor: {floor:,.0f} events/s (minimal timeout ping-pong, 16 processes)")
    pools = [args.pool] if args.pool else [args.queries, 2000]
    print(f"yardstick: {args.tools:,} tools, branching 10, depth 3, BM25, resolver cache "
          f"and servers' packet cache off, {args.queries:,} closed-loop discoveries by 16 "
          f"agents, drawn from " + " and from ".join(f"{p:,}" for p in pools)
          + " intents\n")
    rows: dict[tuple[str, int], dict] = {}
    for pool in pools:  # distinct intents first (the memo cannot help), then repeated
        for label, tree in trees:  # the default build first
            out = subprocess.run([sys.executable, __file__, "rate", "--child", tree,
                                  "--tools", str(args.tools), "--queries", str(args.queries),
                                  "--pool", str(pool)],
                                 capture_output=True, text=True, check=True, cwd=tree)
            rows[(label, pool)] = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"{'intents':22s} {'code':12s} {'sim s':>8s} {'disc/s/core':>12s} "
          f"{'events/disc':>12s} {'of floor':>9s} {'RTT/disc':>9s} {'bytes/disc':>11s}")
    for (label, pool), r in rows.items():
        rate_ = args.queries / r["sim_s"]
        per = r["events"] / args.queries
        kind = ("distinct" if pool >= args.queries
                else f"repeated ({pool:,} pool)")
        print(f"{kind:22s} {label:12s} {r['sim_s']:8.2f} {rate_:12,.0f} {per:12.1f} "
              f"{rate_ / (floor / per):9.1%} {r['rtt']:9.2f} {r['bytes']:11.1f}"
              + ("" if r["packet_cache_off"] else "  (packet cache on: no switch)"))
    for pool in pools:
        if ("baseline", pool) in rows:
            a, b = rows[("this tree", pool)], rows[("baseline", pool)]
            print(f"\nspeed-up against the baseline tree, pool {pool:,}: "
                  f"{b['sim_s'] / a['sim_s']:.2f}x (same machine, one run each)")
        if ("compiled", pool) in rows:
            a, c = rows[("this tree", pool)], rows[("compiled", pool)]
            same = (a["rtt"], a["bytes"], a["events"]) == (c["rtt"], c["bytes"], c["events"])
            print(f"compiled against this tree, pool {pool:,}: {a['sim_s'] / c['sim_s']:.2f}x;"
                  f" round trips, bytes and events per discovery "
                  f"{'equal' if same else 'DIFFERENT'}")
    if scratch is not None:
        scratch.cleanup()
    return 0


def _memory_child(args: argparse.Namespace) -> dict[str, Any]:
    """One written run of ``growth``'s scenario with ``args.queries`` queries; figures."""
    import tempfile

    from sim.catalog.engines import EngineInfo
    from sim.run import runner

    marks: dict[str, float] = {}
    load = EngineInfo.load

    def engine(self: EngineInfo) -> Callable[..., Any]:
        execute = load(self)

        def timed(plan: Any) -> Any:
            marks.setdefault("sim_rss", _rss_mib())
            t = time.perf_counter()
            try:
                return execute(plan)
            finally:
                marks["sim_end"] = time.perf_counter()
                marks["sim_s"] = marks.get("sim_s", 0.0) + marks["sim_end"] - t

        return timed

    EngineInfo.load = engine  # type: ignore[method-assign]
    if args.cold:
        from sim.scenario import Scenario

        sc = Scenario.model_validate(_rate_scenario(args.tools, args.queries, False, args.pool))
    else:
        sc = _scenario(args.tools, args).with_overrides({"workload.pool": args.pool})
    if args.poisson:
        sc = sc.with_overrides({"workload.arrival": {"process": "poisson",
                                                     "rate": args.poisson}})
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        t0 = time.perf_counter()
        result = runner.run_scenario(sc, engine="simpy", out_dir=Path(tmp) / "run")
        total = time.perf_counter() - t0
        size = (Path(tmp) / "run" / "results.csv").stat().st_size
    name = sc.schemes[0].name
    scheme = result.summary["schemes"][name]
    return {"queries": args.queries, "tools": args.tools, "total_s": total,
            "sim_s": marks["sim_s"], "after_s": t0 + total - marks["sim_end"],
            "sim_mib": marks["sim_rss"], "peak_mib": _rss_mib(),
            "completed": result.summary["replay"][name]["completed"],
            "success": scheme["success"], "csv_mib": size / 2**20}


def memory(args: argparse.Namespace) -> int:
    """Peak RSS and time against the number of queries (fresh process per count)."""
    if args.child:
        print(json.dumps(_memory_child(args)))
        return 0
    print(_machine())
    if args.cold:
        print(f"scenario: the rate yardstick's (synthetic, branching 10, depth 3, "
              f"{args.tools:,} tools, BM25, resolver cache and packet cache off, K = 3, 16 "
              f"closed-loop agents, a pool of {args.pool:,} intents), simpy, written to a "
              f"temporary folder\n")
    else:
        print(f"scenario: growth's (synthetic, branching {args.branching}, depth "
              f"{_depth(args.tools, args)}, {args.tools:,} tools, one cached ToolDNS scheme, "
              f"K = 3, {args.agents} closed-loop agents, a pool of {args.pool:,} distinct "
              f"queries so caches stop growing), simpy, written to a temporary folder\n")
    if args.poisson:
        print(f"arrivals: an open loop, Poisson at {args.poisson:g}/s (not the closed loop)\n")
    rows = []
    for q in args.counts:
        cmd = [sys.executable, __file__, "memory", "--child", "1", "--tools", str(args.tools),
               "--queries", str(q), "--agents", str(args.agents), "--branching",
               str(args.branching), "--depth", str(args.depth), "--pool", str(args.pool),
               "--poisson", str(args.poisson), *(["--cold"] if args.cold else [])]
        t = time.perf_counter()
        row = _child_row(cmd, f"Q={q:,}", args.timeout)
        if row is None:
            continue
        rows.append(row)
        print(f"  Q={q:,}: {time.perf_counter() - t:.1f} s wall, peak {row['peak_mib']:.0f} "
              f"MiB; load {os.getloadavg()[0]:.2f}", flush=True)
    print("\n| queries | completed | success | RSS at first query MiB | peak RSS MiB | "
          "peak / smallest | run s | engine s | records+summary s | results.csv MiB |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['queries']:,} | {r['completed']:,} | {r['success']:.3f} | "
              f"{r['sim_mib']:.0f} | {r['peak_mib']:.0f} | "
              f"{r['peak_mib'] / rows[0]['peak_mib']:.3f} | {r['total_s']:.1f} | "
              f"{r['sim_s']:.1f} | {r['after_s']:.1f} | {r['csv_mib']:.1f} |")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="part", required=True)
    g = sub.add_parser("growth", help="build cost, memory and a short run vs N")
    g.add_argument("--sizes", type=int, nargs="+", help="tool counts (default 10^3 … 10^6)")
    g.add_argument("--huge", action="store_true", help="also 3·10^6 tools")
    g.add_argument("--branching", type=int, default=10)
    g.add_argument("--depth", type=int, default=0, help="0: log10(N) - 2, at least 1")
    g.add_argument("--catalog", help="a catalogue JSONL instead of the synthetic namespace")
    g.add_argument("--queries", type=int, default=2000)
    g.add_argument("--agents", type=int, default=16)
    g.add_argument("--timeout", type=float, default=1800.0, help="seconds per size")
    g.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    g.set_defaults(func=growth)
    r = sub.add_parser("rate", help="discoveries/s per core on 10^5 tools vs the simpy floor")
    r.add_argument("--tools", type=int, default=100_000)
    r.add_argument("--queries", type=int, default=10_000)
    r.add_argument("--pool", type=int, default=0, help="distinct intents the queries are "
                   "drawn from (= --queries: none repeats, so no memo of the simulator "
                   "helps); default: both, --queries (distinct) and 2,000 (repeated)")
    r.add_argument("--compiled", action="store_true", help="also run this tree compiled "
                   "by mypyc (`tooldns compile` into a temporary folder, ~1 min)")
    r.add_argument("--baseline-tree", help="another checkout to run the same yardstick with "
                   "(e.g. `git worktree add /tmp/base <commit>`), for a speed-up ratio")
    r.add_argument("--child", help=argparse.SUPPRESS)
    r.set_defaults(func=rate)
    m = sub.add_parser("memory", help="peak RSS vs the number of queries (records streamed)")
    m.add_argument("--tools", type=int, default=100_000)
    m.add_argument("--counts", type=int, nargs="+", default=[10_000, 100_000, 1_000_000],
                   help="numbers of queries, one fresh process each")
    m.add_argument("--queries", type=int, default=0, help=argparse.SUPPRESS)
    m.add_argument("--agents", type=int, default=16)
    m.add_argument("--pool", type=int, default=2000, help="distinct queries drawn from")
    m.add_argument("--branching", type=int, default=10)
    m.add_argument("--depth", type=int, default=0, help="0: log10(N) - 2, at least 1")
    m.add_argument("--timeout", type=float, default=3600.0, help="seconds per count")
    m.add_argument("--poisson", type=float, default=0.0, help="an open loop: Poisson "
                   "arrivals at this rate per second instead of the closed loop")
    m.add_argument("--cold", action="store_true", help="the rate yardstick's scenario "
                   "(BM25, depth 3, resolver cache and packet cache off) instead of growth's")
    m.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    m.set_defaults(func=memory, catalog=None)
    args = p.parse_args()
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
