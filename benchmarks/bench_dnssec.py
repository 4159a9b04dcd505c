"""What DNSSEC validation costs a ToolDNS discovery, and that it stops a forged referral.

1. A scenario (signed zones) replayed by a plain and a validating resolver on the
   simulation engine (and, with ``--live``, on real sockets): bytes, packets, round
   trips and latency per query, cold (first query of each intent) and overall.
2. CPU: an authoritative reply signed vs unsigned (packet cache off), and a resolver's
   validation of one answer, in microseconds on this machine.
3. A forged referral (an on-path attacker at the TLD's address answering the cursor query
   with a referral to its own servers, DS signed with its own key): attacker endpoints
   returned with validation off and on.

    python3 benchmarks/bench_dnssec.py [--queries 300] [--live]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from dnslib import DNSRecord

from nodes.dns.dnssec import ZoneSigner, check_answer, check_dnskey, ds_of
from nodes.dns.wire import Intent, cursor_name, opt_record
from nodes.resolver.config import ResolverConfig
from nodes.resolver.types import Discovery
from sim.build.hierarchy import build_hierarchy
from sim.build.trust import sign_hierarchy
from sim.engines.memory import MemoryNetwork
from sim.run.runner import run_scenario
from sim.scenario import Scenario
from topologies.synthetic import synthetic


def scenario(queries: int) -> Scenario:
    return Scenario.model_validate({
        "name": "bench-dnssec", "seed": 11,
        "namespace": {"tools": 1000, "branching": 5, "depth": 2, "orgs": 2, "dnssec": True},
        "network": {"topology": "star", "nodes": 6, "agents": 2,
                    "link": {"delay": {"dist": "constant", "mean": 0.005}},
                    "processing": {"model": "calibrated"}},
        "schemes": [{"name": "plain", "k": 3}, {"name": "validating", "k": 3, "dnssec": True}],
        "workload": {"queries": queries, "pool": max(10, queries // 3), "popularity": "zipf",
                     "arrival": {"process": "poisson", "rate": 20}},
        "outputs": {"plots": False}})


def per_query(df, engine: str) -> list[dict]:
    rows = []
    for scheme, g in df.groupby("scheme", sort=False):
        cold = g.drop_duplicates("intent")
        rows.append({
            "engine": engine, "scheme": scheme, "queries": len(g),
            "success": round(float(g.success.mean()), 4),
            "bytes_per_query": round(float((g.bytes_up + g.bytes_down).mean()), 1),
            "packets_per_query": round(float((g.packets_up + g.packets_down).mean()), 2),
            "round_trips": round(float(g.round_trips.mean()), 3),
            "median_ms": round(float(g.latency_ms.median()), 3),
            "cold_bytes": round(float((cold.bytes_up + cold.bytes_down).mean()), 1),
            "cold_round_trips": round(float(cold.round_trips.mean()), 3),
            "cold_median_ms": round(float(cold.latency_ms.median()), 3),
        })
    return rows


def cpu(repeat: int = 2000) -> dict:
    ns = synthetic(n_tools=1000, branching=5, depth=2, seed=11, n_queries=20)
    h = build_hierarchy(ns)
    leaf = next(z for z, n in ns.zones.items() if not n.children and z != ".")
    ip = next(a for a, z in h.zone_of.items() if z == leaf)
    server = h.servers[ip]
    server.packet_cache_size = 0
    out = {}
    for label, do in (("unsigned", False), ("signed", True)):
        server.signer = ZoneSigner("11", [leaf]) if do else None
        q = DNSRecord.question(cursor_name("mcp", leaf), "SRV")
        opt = opt_record(Intent(ns.queries[0].text, 3))
        if do:
            opt.ttl |= 0x8000
        q.add_ar(opt)
        wire = q.pack()
        t = time.perf_counter()
        for _ in range(repeat):
            reply = server.handle(wire, ("127.0.0.1", 5), 0.0)
        out[f"server_{label}_us"] = round((time.perf_counter() - t) / repeat * 1e6, 1)
        out[f"reply_{label}_bytes"] = len(reply)  # type: ignore[possibly-undefined]
    kq = DNSRecord.question(leaf, "DNSKEY")
    opt = opt_record(None)
    opt.ttl |= 0x8000
    kq.add_ar(opt)
    keys_wire = server.handle(kq.pack(), ("127.0.0.1", 5), 0.0)
    ds = [ds_of(leaf, "11")]
    t = time.perf_counter()
    for _ in range(repeat // 4):
        keys = check_dnskey(keys_wire, leaf, ds)
    out["validate_dnskey_us"] = round((time.perf_counter() - t) / (repeat // 4) * 1e6, 1)
    t = time.perf_counter()
    for _ in range(repeat // 4):
        check_answer(reply, leaf, keys)  # type: ignore[possibly-undefined]
    out["validate_answer_us"] = round((time.perf_counter() - t) / (repeat // 4) * 1e6, 1)
    return out


def forged(n: int = 20) -> dict:
    from test_dnssec import Forger

    ns = synthetic(n_tools=300, branching=3, depth=2, seed=2, n_queries=n)
    h = build_hierarchy(ns)
    anchor = sign_hierarchy(h, 7)
    tld = next(a for a, z in h.zone_of.items() if z == "tools.")
    evil_ns = synthetic(n_tools=300, branching=3, depth=2, seed=2, n_queries=n)
    for tool in evil_ns.tools.values():
        tool.address = "127.66.6.6"
    evil = build_hierarchy(evil_ns, first_address="127.9.0.1")
    sign_hierarchy(evil, "attacker")
    evil_tld = next(a for a, z in evil.zone_of.items() if z == "tools.")
    h.servers[tld] = Forger(h.servers[tld], evil.servers[evil_tld])  # type: ignore[assignment]
    h.servers.update({a: s for a, s in evil.servers.items() if a != evil_tld})
    out = {}
    for on in (False, True):
        config = ResolverConfig(dnssec=on, trust_anchor=anchor, max_attempts=1)
        net = MemoryNetwork(h, h.resolver(seed=3, config=config))
        attacker = answered = bogus = 0
        for q in ns.queries[:n]:
            net.resolver.discover(Discovery(q.text, service=q.service, k=3), net.now)
            (r,) = net.run()
            answered += bool(r.endpoints)
            attacker += sum(e.address == "127.66.6.6" for e in r.endpoints)
            bogus += r.bogus
            net.now += 1.0
        out["validating" if on else "plain"] = {"queries": n, "answered": answered,
                                                "attacker_endpoints": attacker,
                                                "bogus_answers": bogus}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--live", action="store_true", help="also replay on real sockets")
    ap.add_argument("--port", type=int, default=15481)
    args = ap.parse_args()
    sc = scenario(args.queries)
    rows = per_query(run_scenario(sc, write=False).records, "simpy")
    if args.live:
        rows += per_query(run_scenario(sc, engine="live", write=False,
                                       live_port=args.port).records, "live")
    result = {"machine": f"{platform.machine()} {platform.processor() or ''} "
                         f"python {platform.python_version()}".strip(),
              "scenario": rows, "cpu": cpu(), "forged_referral": forged()}
    print(json.dumps(result, indent=2))
    print("\n| engine | scheme | bytes/q | packets/q | round trips | median ms | cold bytes "
          "| cold round trips | cold median ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['engine']} | {r['scheme']} | {r['bytes_per_query']} | "
              f"{r['packets_per_query']} | {r['round_trips']} | {r['median_ms']} | "
              f"{r['cold_bytes']} | {r['cold_round_trips']} | {r['cold_median_ms']} |")
    print(f"\nmedian of rows: {statistics.median(r['median_ms'] for r in rows):.3f} ms")


if __name__ == "__main__":
    main()
