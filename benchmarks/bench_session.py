"""The agent session layer of seed 003 (nodes.agent.session): token cost and DNS load.

(a) ``table1`` — seed 003's Table 1 on the shared catalogue (``../shared/data/tools``;
    synthetic tools when it is missing): tool-related tokens in context for libraries of
    10, 25, 50, 100 and 200 tools. Static binding puts every tool's schema in context;
    dynamic binding the ``search_tools`` meta-tool, three always-include core tools and
    the session's bound tools (capacity 8, three tools per search, TTL 600 s), averaged
    over the turns of seeded sessions (20 turns, Zipf-popular intents drawn from the
    library's own descriptions, BM25 search over the library). Token cost per tool is the
    paper's Eq. 3: characters of name, description and schema (the catalogue's ``extra``
    object, its nearest thing to a parameter schema) over 4. The paper's figures are
    printed beside ours.
(b) ``load`` — DNS load of ``scenarios/session-zipf.yaml`` (simpy) with the session off
    and on, for several capacities and TTLs, with and without a resolver cache: stub
    queries reaching the resolvers (agents' packets in nodes.csv), queries reaching the
    servers (servers' rx_packets), bytes per query, median latency, the session hit rate;
    ratios against the session-off scheme of the same resolver.
(c) ``scopes`` — RBAC through every binding path: a role scoping the session to one
    first-level zone (the second most reached by unscoped answers), with and without the
    registry fallback (``min_tools: 3``); tools bound, and how many lie outside the scope
    (must be 0: the context binds nothing outside its scopes, whatever path offers it).

Run
    python3 benchmarks/bench_session.py            # both, markdown on stdout
    python3 benchmarks/bench_session.py table1
    python3 benchmarks/bench_session.py load
    python3 benchmarks/bench_session.py scopes
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from nodes.agent.context import META_TOOL_TOKENS, ToolInfo, static_tokens, tool_tokens  # noqa: E402
from nodes.agent.session import Session, SessionConfig, intent_key  # noqa: E402
from nodes.resolver.types import Discovery  # noqa: E402
from nodes.scoring import BM25Scorer, top_k  # noqa: E402
from sim.loading import load_scenario  # noqa: E402
from sim.run.runner import run_scenario  # noqa: E402

CATALOG = ROOT.parent / "shared" / "data" / "tools" / "catalog.jsonl"
SIZES = (10, 25, 50, 100, 200)
#: seed 003, Table 1: library size -> (static, dynamic, reduction %)
PAPER = {10: (4200, 1800, 57), 25: (10500, 2100, 80), 50: (21000, 2400, 89),
         100: (42000, 2800, 93), 200: (84000, 3200, 96)}
CORE, CAPACITY, PER_SEARCH, TURNS, SESSIONS = 3, 8, 3, 20, 10


def catalogue_tools() -> tuple[list[tuple[str, str, object]], str]:
    """(name, description, schema) of every catalogue tool, or synthetic ones."""
    if CATALOG.exists():
        rows = [json.loads(line) for line in CATALOG.open(encoding="utf-8") if line.strip()]
        return [(r["name"], r["description"], r.get("extra")) for r in rows], str(CATALOG)
    from topologies.synthetic import synthetic

    ns = synthetic(n_tools=2000, branching=8, depth=2, seed=0)
    return [(t.name, t.description, None) for t in ns.tools.values()], "synthetic(2000)"


def session_tokens(library: list[ToolInfo], texts: list[str], rng: random.Random
                   ) -> tuple[float, float]:
    """Mean tool tokens and tools in context per turn over one session on ``library``."""
    core, rest = library[:CORE], library[CORE:]
    index = BM25Scorer().index([t.id for t in rest], texts[CORE:])
    session = Session(SessionConfig(capacity=CAPACITY, ttl=600.0, guard_window=0), core)
    weights = [1 / (i + 1) for i in range(len(rest))]  # Zipf (s = 1) over the tools
    popular = rng.sample(range(len(rest)), len(rest))
    per_turn, bound = [], []
    for turn in range(TURNS):
        want = popular[rng.choices(range(len(rest)), weights)[0]]
        words = texts[CORE + want].split()
        intent = " ".join(words[:8]) or rest[want].name
        key = intent_key(Discovery(intent, k=PER_SEARCH))
        now = turn * 30.0  # a turn every 30 s
        if session.lookup(key, now) is None:
            found = [rest[i] for i in top_k(index.scores(intent), PER_SEARCH)]
            session.bind(key, found, now)
        per_turn.append(session.context.tokens())
        bound.append(session.context.tools_in_context())
    return float(np.mean(per_turn)), float(np.mean(bound))


def table1(seed: int = 0) -> str:
    tools, source = catalogue_tools()
    rng = random.Random(seed)
    rows = ["| library | static (ours) | dynamic (ours) | reduction (ours) | tools in context "
            "(ours, incl. meta-tool) | static (paper) | dynamic (paper) | reduction (paper) |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    per_tool = []
    for n in SIZES:
        statics, dynamics, counts = [], [], []
        for s in range(SESSIONS):
            pick = random.Random(f"{seed}/{n}/{s}").sample(range(len(tools)), n)
            library = [ToolInfo(f"t{i}", f"t{i}.tools.", tools[i][0], "tools.", "", "mcp",
                                tool_tokens(*tools[i])) for i in pick]
            texts = [f"{tools[i][0]} {tools[i][1]}" for i in pick]
            statics.append(static_tokens(library))
            tokens, count = session_tokens(library, texts, rng)
            dynamics.append(tokens)
            counts.append(count)
            per_tool.extend(t.tokens for t in library)
        st, dy = float(np.mean(statics)), float(np.mean(dynamics))
        ps, pd_, pr = PAPER[n]
        rows.append(f"| {n} tools | {st:,.0f} | {dy:,.0f} | {100 * (1 - dy / st):.0f}% | "
                    f"{np.mean(counts):.1f} | {ps:,} | {pd_:,} | {pr}% |")
    head = (f"Tools from {source}; {SESSIONS} seeded libraries per size, {TURNS} turns each; "
            f"meta-tool {META_TOOL_TOKENS} tokens; {CORE} always-include core tools; "
            f"capacity {CAPACITY}, {PER_SEARCH} tools per search. Mean tokens per tool "
            f"(Eq. 3): ours {np.mean(per_tool):.0f}, the paper's {4200 // 10}.")
    return head + "\n\n" + "\n".join(rows)


VARIANTS = [("capacity 4", {"capacity": 4}), ("capacity 8", {"capacity": 8}),
            ("capacity 16", {"capacity": 16}), ("capacity 64", {"capacity": 64}),
            ("capacity 64, TTL 10 s", {"capacity": 64, "ttl": 10.0}),
            ("capacity 64, TTL 2 s", {"capacity": 64, "ttl": 2.0})]


def load() -> str:
    base = load_scenario(ROOT / "scenarios" / "session-zipf.yaml")
    rows = {"on": [], "off": []}
    offs: dict[str, tuple[int, int, float]] = {}
    first = True
    for label, over in VARIANTS:
        sc = base.with_overrides({f"agents.session.{k}": v for k, v in over.items()})
        res = run_scenario(sc, write=False)
        df, nodes = res.records, res.load
        for scheme, g in df.groupby("scheme", sort=False):
            on = bool(g.session.any())
            if not on and not first:
                continue  # the session-off schemes do not depend on the session's settings
            n = nodes[nodes.scheme == scheme]
            stub = int(n[n.role == "agent"].tx_packets.sum())
            server = int(n[n.role == "server"].rx_packets.sum())
            per_q = float((g.bytes_up + g.bytes_down).mean())
            cache = "off" if "nocache" in scheme else "on"
            if not on:
                offs[cache] = (stub, server, per_q)
            o = offs[cache]
            rows[cache].append(
                f"| {cache} | {label if on else 'off'} | {g.session_hit.mean():.1%} | {stub} | "
                f"{stub / o[0]:.2f} | {server} | {server / o[1]:.2f} | {per_q:.0f} | "
                f"{per_q / o[2]:.2f} | {g[g.success].latency_ms.median():.2f} | "
                f"{g[g.success].latency_ms.mean():.2f} | {int(g.evictions_ttl.sum())} | "
                f"{int(g.evictions_lru.sum())} | {int(g.guard_trips.sum())} | "
                f"{int(g.redundant_search.sum())} |")
        first = False
    wl = base.workload
    head = (f"scenarios/session-zipf.yaml on simpy: {base.namespace.tools} synthetic tools, "
            f"{wl.queries} queries from a pool of {wl.pool} (Zipf s = {wl.zipf_s}), "
            f"{base.network.agents} agents (one session each), K = 3. Ratios against the "
            f"session-off scheme with the same resolver cache.")
    table = ["| resolver cache | session | hit rate | stub queries | ratio | server queries "
             "| ratio | bytes/query | ratio | median ms | mean ms | TTL evictions "
             "| LRU evictions | guard trips | redundant searches |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
             *rows["on"], *rows["off"]]
    return head + "\n\n" + "\n".join(table)


def scopes() -> str:
    from collections import Counter

    from sim.build.namespace import build_namespace
    from sim.scenario import Scenario

    def scenario(**session: object) -> Scenario:
        return Scenario.model_validate({
            "name": "scopes", "seed": 4,
            "namespace": {"source": "synthetic", "tools": 2000, "branching": 4, "depth": 2,
                          "orgs": 3},
            "network": {"topology": "star", "nodes": 4, "link": {"delay": {"mean": 0.002}},
                        "resolvers": 1, "agents": 4},
            "schemes": [{"name": "on", "k": 3}],
            "workload": {"queries": 200, "pool": 40, "popularity": "zipf",
                         "arrival": {"process": "poisson", "rate": 20}},
            "agents": {"session": {"schemes": ["on"], **session}},
            "outputs": {"plots": False}})

    def bound(**session: object) -> list[str]:
        df = run_scenario(scenario(**session), write=False).records
        return [t for ids in df.returned for t in ids.split()]

    ns = build_namespace(scenario())
    top = Counter(".".join(ns.tools[t].zone.split(".")[-3:])
                  for t in bound(min_tools=3, fallback="registry"))
    role = top.most_common(2)[-1][0]
    rows = []
    for label, over in (("DNS walk only", {}),
                        ("registry fallback, min_tools 3", {"min_tools": 3,
                                                            "fallback": "registry"})):
        ids = bound(scopes={"roles": [role]}, **over)
        outside = sum(1 for t in ids if not (ns.tools[t].zone == role
                                             or ns.tools[t].zone.endswith("." + role)))
        rows.append(f"| {label} | {len(ids)} | {outside} |")
    return (f"2,000 synthetic tools (branching 4, depth 2), 200 queries from a pool of 40, "
            f"K = 3, the session scoped to role {role}\n\n| binding paths | tools bound | "
            f"outside the scope |\n|---|---:|---:|\n" + "\n".join(rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", nargs="?", choices=("table1", "load", "scopes", "all"),
                        default="all")
    args = parser.parse_args()
    print(f"<!-- {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.node()}, "
          f"{platform.processor() or platform.machine()}, Python {platform.python_version()} -->")
    if args.what in ("table1", "all"):
        print("### (a) Seed 003 Table 1: static vs dynamic tool tokens\n")
        print(table1() + "\n")
    if args.what in ("load", "all"):
        print("### (b) DNS load with the session cache off and on\n")
        print(load() + "\n")
    if args.what in ("scopes", "all"):
        print("### (c) RBAC scopes through every binding path\n")
        print(scopes())


if __name__ == "__main__":
    main()
