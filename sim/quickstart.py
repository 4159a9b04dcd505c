"""Quickstart: replay queries through resolver variants on the in-memory engine, compare.

Variants (all against the same hierarchy, the same queries, fixed one-way link delay):
  * ``cold``       — a fresh resolver per query (Algorithm 1 from the root every time);
  * ``warm``       — one resolver for the whole run (NS/SRV/referral caches fill up);
  * ``k0-warmed``  — one resolver warmed with K = 0 first, then query mock;
  * ``beam2``      — cold, exploring two branches per level;
  * ``strip``      — an unmodified resolver that drops the intent option.

Writes ``results.csv`` (one row per query and variant) and ``summary.json`` atomically.
Bytes are DNS message bytes (no IP/UDP headers; the simulation engine adds those).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
from dataclasses import replace
from pathlib import Path

import pandas as pd
from rich.console import Console
from rich.table import Table

from nodes.resolver import Discovery, RecursiveResolver, ResolverConfig
from sim.hierarchy import build_hierarchy
from sim.memory import MemoryNetwork
from topologies.namespace import Query, from_catalog, synthetic

VARIANTS: dict[str, dict] = {
    "cold": {"fresh": True, "config": ResolverConfig()},
    "warm": {"fresh": False, "config": ResolverConfig()},
    "k0-warmed": {"fresh": False, "warm": True, "config": ResolverConfig()},
    "beam2": {"fresh": True, "config": ResolverConfig(beam=2)},
    "strip": {"fresh": True, "config": ResolverConfig(mode="strip")},
}


def atomic_write(path: Path, text: str) -> None:
    """Write via a temporary file in the same directory and rename over the target."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def run_quickstart(args: argparse.Namespace, console: Console) -> pd.DataFrame:
    if args.catalog:
        queries = args.queries or str(Path(args.catalog).parent / "queries.jsonl")
        ns = from_catalog(args.catalog, queries if Path(queries).exists() else None,
                          limit=args.limit)
        rng = random.Random(args.seed)
        picked = rng.sample(ns.queries, min(args.n, len(ns.queries)))
    else:
        ns = synthetic(n_tools=args.tools, branching=args.branching, depth=args.depth,
                       seed=args.seed, n_orgs=args.orgs, n_queries=args.n)
        picked = ns.queries[: args.n]
    hierarchy = build_hierarchy(ns, replicas=args.replicas, scorer=args.scorer)
    console.print(f"namespace {ns.origin}: {ns.stats()}")
    rows = []
    for variant, spec in VARIANTS.items():
        config: ResolverConfig = spec["config"]
        shared: RecursiveResolver | None = None
        net: MemoryNetwork | None = None
        for i, query in enumerate(picked):
            if shared is None or spec["fresh"]:
                shared = hierarchy.resolver(seed=args.seed * 1000 + i, config=replace(config))
                net = MemoryNetwork(hierarchy, shared, delay=args.delay,
                                    now=net.now if net else 0.0)
                if spec.get("warm"):
                    for service in sorted({q.service for q in picked}):
                        shared.warm(service, net.now)
                    net.run()
            assert net is not None
            shared.discover(Discovery(query.text, service=query.service, k=args.k), net.now)
            (result,) = net.run()
            rows.append(_row(variant, query, result, ns, args.k))
            net.now += 1.0  # queries one second apart in virtual time
    df = pd.DataFrame(rows)
    out = Path(args.out)
    atomic_write(out / "results.csv", df.to_csv(index=False))
    summary = _summary(df)
    atomic_write(out / "summary.json", json.dumps(
        {"namespace": ns.origin, "stats": ns.stats(), "k": args.k, "delay_s": args.delay,
         "scorer": args.scorer, "variants": summary}, indent=2) + "\n")
    _print(summary, console, args)
    console.print(f"results written to {out}/results.csv and {out}/summary.json")
    return df


def _row(variant: str, query: Query, result, ns, k: int) -> dict:
    found = [e.target for e in result.endpoints]
    truth_targets = {ns.tools[t].target for t in query.truth}
    return {
        "variant": variant,
        "query_id": query.id,
        "intent": query.text,
        "service": query.service,
        "truth": " ".join(query.truth),
        "returned": " ".join(found),
        "hit_at_1": bool(found and found[0] in truth_targets),
        "hit_at_k": bool(truth_targets & set(found[:k])),
        "success": bool(found),
        "rounds": result.rounds,
        "exchanges": result.exchanges,
        "latency_ms": round(result.latency * 1000, 3),
        "dns_bytes_out": result.bytes_out,
        "dns_bytes_in": result.bytes_in,
        "timeouts": sum(s.outcome == "timeout" for s in result.steps),
        "cache_hits": sum(result.cache.values()),
        "error": result.error or "",
    }


def _summary(df: pd.DataFrame) -> dict:
    out = {}
    for variant, g in df.groupby("variant", sort=False):
        out[variant] = {
            "queries": len(g),
            "success": round(float(g.success.mean()), 4),
            "hit_at_1": round(float(g.hit_at_1.mean()), 4),
            "hit_at_k": round(float(g.hit_at_k.mean()), 4),
            "mean_rounds": round(float(g.rounds.mean()), 3),
            "median_latency_ms": round(float(g.latency_ms.median()), 3),
            "mean_bytes_out": round(float(g.dns_bytes_out.mean()), 1),
            "mean_bytes_in": round(float(g.dns_bytes_in.mean()), 1),
        }
    return out


def _print(summary: dict, console: Console, args: argparse.Namespace) -> None:
    table = Table(title=f"ToolDNS resolver variants (in-memory engine, one-way delay "
                        f"{args.delay * 1000:g} ms, K={args.k})")
    cols = ["variant", "queries", "success", "hit_at_1", "hit_at_k", "mean_rounds",
            "median_latency_ms", "mean_bytes_out", "mean_bytes_in"]
    for c in cols:
        table.add_column(c, justify="left" if c == "variant" else "right")
    for variant, s in summary.items():
        table.add_row(variant, *(str(s[c]) for c in cols[1:]))
    console.print(table)
