"""The paper's Table 2 (seed 000 §5): per-query network overhead of ToolDNS vs HTTP registries.

Runs ``scenarios/paper-table2.yaml`` on the simulation engine and, when run as root with
tcpdump installed, on the live engine with packet capture; prints our table beside the
paper's, with ratios against ToolDNS (the baseline named by the paper's comparison).

    python benchmarks/bench_table2.py                 # simpy + live/capture (root)
    python benchmarks/bench_table2.py --queries 200   # more queries per scheme
    python benchmarks/bench_table2.py --no-live       # simulation only

KB = 1000 bytes; "request" = packets/bytes toward the server side (agent → resolver →
servers, or agent → registry), "response" = the other direction, IP layer, per query.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim.runner import run_scenario  # noqa: E402
from sim.scenario import load_scenario  # noqa: E402

PAPER = {  # request KB, request packets, response KB, response packets, delay ms
    "AgentDNS (HTTP)": (1.16, 10.77, 1.79, 9.87, 2035.51),
    "ANS (HTTP)": (1.09, 10.77, 1.41, 9.87, 2042.68),
    "ToolDNS (UDP)": (0.65, 2.98, 0.33, 2.98, 5.62),
}


def table(records: pd.DataFrame, prefix: str = "") -> pd.DataFrame:
    g = records.groupby("scheme", sort=False)
    out = pd.DataFrame({
        "req KB": g[f"{prefix}bytes_up"].mean() / 1000,
        "req pkts": g[f"{prefix}packets_up"].mean(),
        "resp KB": g[f"{prefix}bytes_down"].mean() / 1000,
        "resp pkts": g[f"{prefix}packets_down"].mean(),
        "delay ms": g["latency_ms"].mean(),
        "RTTs": g["round_trips"].mean(),
        "hit@K": g["hit_at_k"].mean(),
    })
    base = out.loc["tooldns"]
    out["bytes ×ToolDNS"] = (out["req KB"] + out["resp KB"]) / (base["req KB"] + base["resp KB"])
    out["pkts ×ToolDNS"] = (out["req pkts"] + out["resp pkts"]) / (
        base["req pkts"] + base["resp pkts"])
    out["delay ×ToolDNS"] = out["delay ms"] / base["delay ms"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--no-live", action="store_true")
    args = ap.parse_args()
    sc = load_scenario(ROOT / "scenarios" / "paper-table2.yaml").with_overrides(
        {"workload.queries": args.queries, "workload.pool": args.queries})
    pd.set_option("display.width", 200)
    pd.set_option("display.precision", 3)
    print("paper (seed 000, Table 2):")
    print(pd.DataFrame(PAPER, index=["req KB", "req pkts", "resp KB", "resp pkts",
                                     "delay ms"]).T.to_string())
    sim = run_scenario(sc, engine="simpy", write=False)
    print(f"\nsimpy ({args.queries} queries per scheme, accounting = TCP/TLS model):")
    print(table(sim.records).to_string())
    if args.no_live:
        return
    if os.geteuid() != 0 or shutil.which("tcpdump") is None:
        print("\nlive + capture skipped: needs root and tcpdump")
        return
    live = run_scenario(sc, engine="live", out_dir=ROOT / "results" / "bench-table2",
                        capture=True)
    print(f"\nlive, from the packet capture ({live.summary['capture']['tool']}):")
    print(table(live.records, prefix="cap_").to_string())
    print("\ncapture vs accounting, per scheme:")
    print(pd.DataFrame(live.summary["capture"]["schemes"]).T[[
        "queries", "queries_exact", "bytes_diff_pct", "packets_diff_pct",
        "unattributed_packets"]].to_string())
    cap = table(live.records, prefix="cap_")
    model = table(sim.records)
    ratio = (model[["req KB", "req pkts", "resp KB", "resp pkts"]]
             / cap[["req KB", "req pkts", "resp KB", "resp pkts"]])
    print("\nsimpy model / captured live (1.000 = equal):")
    print(ratio.to_string())


if __name__ == "__main__":
    main()
