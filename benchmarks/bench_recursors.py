"""ToolDNS through the resolvers people run: the compatibility matrix of ``sim.interop.recursors``
(Unbound, BIND, Knot Resolver, PowerDNS Recursor, dnsdist in front of a served hierarchy,
each in a fresh network namespace on port 53), plain and DNSSEC, and what each probe cost
upstream against our ToolDNS-aware resolver on the same probes.

Costs are what reached the hierarchy's servers (for dnsdist: what its backend, our aware
resolver, sent them): queries and IP bytes both ways, from a packet capture. "cold" is a
freshly started resolver and the first intent, "warm" a second intent of the same service,
"repeat" the first intent again. A stock recursor's discovery is the qname walk (the intent
in the name); ours is the cursor walk (the intent in an EDNS option), so the ratio column
compares those two. "Rank order": ten intents walked with K = 5 through each resolver; how
often the SRV RRset arrived in the leaf's order, and how often the order read from SRV
priority (the rank, as the agent reads it) was the leaf's. Must run as root.

    sudo python3 benchmarks/bench_recursors.py
    sudo python3 benchmarks/bench_recursors.py --resolver unbound --json out.json
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analysis.files import atomic_write
from sim.interop import matrix, resolvers, tables

WALK = (("cold", "qname cold", "cursor cold"), ("warm", "qname warm", "cursor warm"),
        ("repeat", "qname repeat", "cursor repeat"))


def _fmt(cost: dict | None) -> str:
    if not cost:
        return "–"
    return f"{cost.get('queries', 0)} / {cost.get('bytes', 0)}"


def _ratio(cost: dict | None, base: dict | None, key: str) -> str:
    if not cost or not base or not base.get(key):
        return "–"
    return f"{cost.get(key, 0) / base[key]:.2f}"


def _with_addresses(probes: dict, cold: dict | None, cost: dict | None) -> dict | None:
    """A cold qname walk's cost plus the follow-up A queries the agent needs (targets whose
    A record did not come with the answer), so it compares with our cursor walk, which
    resolves the targets itself."""
    if not cold or not cost:
        return None
    answer = cold["answer"]
    extra = answer.get("additional_a") or {}
    total = {"queries": cost.get("queries", 0), "bytes": cost.get("bytes", 0)}
    for n, target in enumerate(answer.get("srv", [])):
        if target in extra:
            continue
        follow = probes.get(f"qname follow-up A {n}")
        if not follow:  # not probed in this variant
            return None
        c = follow.get("servers_cost") or follow.get("cost") or {}
        total["queries"] += c.get("queries", 0)
        total["bytes"] += c.get("bytes", 0)
    return total


def discovery_table(result: dict, variant: str) -> str:
    """One row per resolver and mode: queries / bytes cold, warm, repeat, and the ratios
    against our aware resolver's cursor walk; "cold + A" adds the follow-up A queries an
    agent of a stock recursor sends (our cursor walk resolves the targets itself)."""
    aware = result["aware"].get(variant, {})
    lines = ["| resolver | discovery | cold q / B | cold + A q / B | × q | × B | warm q / B | "
             "repeat q / B | × q warm | × B warm | found (cold) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    base = {label: (aware.get(ours) or {}).get("cost") for label, _, ours in WALK}
    cold = aware.get("cursor cold")
    if cold:
        lines.append(f"| aware (ours) | cursor walk | {_fmt(base['cold'])} | "
                     f"{_fmt(base['cold'])} | 1.00 | 1.00 | {_fmt(base['warm'])} | "
                     f"{_fmt(base['repeat'])} | 1.00 | 1.00 | "
                     f"{len(cold['answer'].get('srv', []))} SRV |")
    for name, res in result["resolvers"].items():
        probes = res.get("variants", {}).get(variant, {}).get("probes", {})
        for mode, index in (("qname walk", 1), ("cursor walk", 2)):
            got = {w[0]: probes.get(w[index]) for w in WALK}
            if not any(got.values()):
                continue
            costs = {k: (p.get("servers_cost") or p.get("cost")) if p else None
                     for k, p in got.items()}
            first = got["cold"]
            found = "–"
            if first:
                a = first["answer"]
                found = (f"{len(a.get('srv', []))} SRV" if a.get("srv")
                         else a.get("rcode") or a.get("error", "?"))
                if a.get("ad"):
                    found += " AD"
            full = (_with_addresses(probes, first, costs["cold"]) if mode == "qname walk"
                    else costs["cold"])
            lines.append(
                f"| {name} | {mode} | {_fmt(costs['cold'])} | {_fmt(full)} | "
                f"{_ratio(full, base['cold'], 'queries')} | "
                f"{_ratio(full, base['cold'], 'bytes')} | {_fmt(costs['warm'])} | "
                f"{_fmt(costs['repeat'])} | "
                f"{_ratio(costs['warm'], base['warm'], 'queries')} | "
                f"{_ratio(costs['warm'], base['warm'], 'bytes')} | {found} |")
    return "\n".join(lines)


def plain_table(result: dict, variant: str) -> str:
    """A and expanded SRV: queries / bytes per resolver against ours."""
    aware = result["aware"].get(variant, {})
    lines = ["| resolver | A q / B | × B | expanded SRV q / B | × B | minimised |",
             "|---|---:|---:|---:|---:|---|"]
    a0, s0 = (aware.get("A") or {}).get("cost"), (aware.get("expanded SRV") or {}).get("cost")
    lines.append(f"| aware (ours) | {_fmt(a0)} | 1.00 | {_fmt(s0)} | 1.00 | no |")
    for name, res in result["resolvers"].items():
        probes = res.get("variants", {}).get(variant, {}).get("probes", {})
        a, s = probes.get("A"), probes.get("expanded SRV")
        if not a and not s:
            continue
        ca = (a.get("servers_cost") or a.get("cost")) if a else None
        cs = (s.get("servers_cost") or s.get("cost")) if s else None
        mini = "yes" if any(p and p.get("minimised") for p in (a, s)) else "no"
        lines.append(f"| {name} | {_fmt(ca)} | {_ratio(ca, a0, 'bytes')} | {_fmt(cs)} | "
                     f"{_ratio(cs, s0, 'bytes')} | {mini} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--resolver", action="append", choices=resolvers.RESOLVERS)
    ap.add_argument("--json", help="also write the full results here")
    ap.add_argument("--catalog", help="catalogue JSONL instead of the synthetic namespace")
    ap.add_argument("--limit", type=int, default=200)
    args = ap.parse_args()
    t = time.perf_counter()
    try:
        result = matrix.run_matrix(args.resolver or resolvers.RESOLVERS,
                                      resolvers.VARIANTS, catalog=args.catalog,
                                      limit=args.limit)
    except matrix.RecursorError as exc:
        print(f"bench_recursors: {exc}", file=sys.stderr)
        return 1
    seconds = time.perf_counter() - t
    meta = result["meta"]
    versions = ", ".join(v for v in meta.get("versions", {}).values() if v)
    print(f"# ToolDNS through stock resolvers ({platform.node()}, {seconds:.1f} s)\n")
    print(f"namespace {meta['namespace']}: {meta['tools']} tools, {meta['servers']} servers; "
          f"intents {meta['intents']} (K = {meta['k']}, service {meta['service']}); "
          f"capture: {meta['capture']}")
    print(f"resolvers: {versions}\n")
    print("## Compatibility matrix\n")
    print(tables.matrix_markdown(result))
    print()
    print(tables.details_markdown(result))
    for variant in resolvers.VARIANTS:
        print(f"\n## Intent discovery cost upstream ({variant}): queries / IP bytes\n")
        print(discovery_table(result, variant))
        print(f"\n## Plain names ({variant}): queries / IP bytes\n")
        print(plain_table(result, variant))
    print("\n## Rank order through each resolver (plain)\n")
    print(tables.rank_markdown(result))
    quirks = tables.quirks_markdown(result)
    if quirks:
        print("\n## What the resolvers logged\n")
        print(quirks)
    if args.json:
        text = json.dumps(result, indent=1) + "\n"
        atomic_write(Path(args.json), lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
