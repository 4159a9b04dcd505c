"""Tool churn: how long an added, moved or removed tool takes to show, ToolDNS vs registries.

What it measures
    ``scenarios/churn.yaml`` (200 synthetic tools, Poisson workload of 400 queries at 5/s;
    at 20 s two tools are added, two moved to a new address and port and two removed at
    leaf zones; one agent probes each changed tool's intent every second from 5 s before
    the change) run with the zones' SRV and A TTLs (``caches.srv_ttl`` = ``a_ttl``) swept
    over ``--ttls`` (default 0, 30, 300 s; the probes go on until TTL + 30 s). For each
    scheme (ToolDNS; AgentDNS with resolve; ANS): median and max *visibility time* (first
    probe after the change showing it, minus the change time; probes run 1 ms after the
    change grid, so an immediate change reads 0.001 s), stale answers (probes and workload
    answers sent after the change still showing the old state) and the cache that served
    them (``resolver_answer``: the resolver's cached leaf answer, ``resolver_a``: a cached
    A record; the servers' packet caches are flushed by the reload and never do). Ratios
    are against AgentDNS (the HTTP registry baseline).

    Expected: ToolDNS visibility ≤ the TTL minus the age of the cached answer at the change
    (5 s here), and stale answers ≈ that many probes; registries see every change at once
    (their clients cache no tool data; ANS caches the capability list only).

    ``--live`` runs the same file on the live engine (real sockets on loopback, in real
    time: ~80 s per scheme) at ``--live-ttls`` (default 30).

Run
    python3 benchmarks/bench_churn.py                  # simpy, TTL 0/30/300: ~1 min
    python3 benchmarks/bench_churn.py --live           # also live at TTL 30: ~4 min more
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim.loading import load_scenario  # noqa: E402
from sim.run.runner import run_scenario  # noqa: E402
from sim.scenario import Scenario  # noqa: E402


def _variant(sc: Scenario, ttl: int) -> Scenario:
    churn = sc.workload.churn
    assert churn is not None
    return sc.with_overrides({"caches.srv_ttl": ttl, "caches.a_ttl": ttl,
                              "workload.churn.probes.duration":
                                  max(churn.probes.duration, ttl + 30.0)})


def _fmt(x: float | None) -> str:
    return "never" if x is None else f"{x:.3f}"


def run(sc: Scenario, engine: str, ttls: list[int], port: int) -> list[str]:
    lines = []
    for ttl in ttls:
        t = time.perf_counter()
        res = run_scenario(_variant(sc, ttl), engine=engine, write=False, live_port=port)
        wall = time.perf_counter() - t
        block = res.summary["churn"]["schemes"]
        base = block.get("agentdns")
        lines.append(f"\n{engine}, srv_ttl = a_ttl = {ttl} s ({wall:.1f} s wall)")
        lines.append(f"{'scheme':10s} {'changes':>7s} {'visible':>7s} {'median s':>9s} "
                     f"{'max s':>9s} {'stale':>6s} {'(probes':>7s} {'workload)':>9s}  "
                     f"stale served from")
        for name, s in block.items():
            lines.append(f"{name:10s} {s['changes']:7d} {s['visible']:7d} "
                         f"{_fmt(s['median_visible_s']):>9s} {_fmt(s['max_visible_s']):>9s} "
                         f"{s['stale_answers']:6d} {s['stale_probe_answers']:7d} "
                         f"{s['stale_workload_answers']:9d}  {s['stale_sources'] or '-'}")
        if base is not None and "tooldns" in block:
            td = block["tooldns"]
            if td["max_visible_s"] is not None and base["max_visible_s"] is not None:
                share = f" = {td['max_visible_s'] / ttl:.2f} x srv_ttl" if ttl else ""
                lines.append(f"tooldns vs agentdns: max visibility "
                             f"{td['max_visible_s']:.3f} s{share} vs "
                             f"{base['max_visible_s']:.3f} s (first probe), stale answers "
                             f"{td['stale_answers']} vs {base['stale_answers']}")
        print("\n".join(lines[-(len(block) + 3):]), flush=True)
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scenario", default=str(ROOT / "scenarios" / "churn.yaml"))
    ap.add_argument("--ttls", default="0,30,300", help="srv_ttl (= a_ttl) values, seconds")
    ap.add_argument("--live", action="store_true", help="also run on the live engine")
    ap.add_argument("--live-ttls", default="30")
    ap.add_argument("--port", type=int, default=30000 + os.getpid() % 20000,
                    help="live: the DNS port")
    ap.add_argument("--out", default="", help="also write the printed lines to this file")
    args = ap.parse_args()
    sc = load_scenario(args.scenario)
    print(f"{sc.name}: {platform.node()} ({os.cpu_count()} CPUs, load "
          f"{os.getloadavg()[0]:.1f}), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    lines = run(sc, "simpy", [int(x) for x in args.ttls.split(",")], args.port)
    if args.live:
        lines += run(sc, "live", [int(x) for x in args.live_ttls.split(",")], args.port)
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
