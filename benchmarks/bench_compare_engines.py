"""ToolDNS against the HTTP registries on every engine (issue 29): the same exchanges, the
same outage, the same capture.

What it runs
    ``scenarios/engines-compare.yaml`` (two ToolDNS schemes, AgentDNS over TLS, ANS with
    keep-alive; one closed-loop agent, 5 ms links, no loss) on simpy, live, ray and — as
    root — mininet, and prints per scheme the summed round trips, bytes and packets and
    whether they equal the simulation's. Then the same scenario under a fault schedule
    (``--faults``: open-loop Poisson arrivals; replica 0 of every zone and the registry down
    from 0.5 s to 2.0 s of workload time) and per scheme the success rate on each engine.
    With ``--capture`` the mininet run (else live) is also captured and the capture's
    comparison with the accounting printed: UDP must match exactly, TCP within pure ACKs.

Run
    python3 benchmarks/bench_compare_engines.py                     # as root for mininet
    python3 benchmarks/bench_compare_engines.py --engines simpy live ray --faults --capture
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sim.loading import load_scenario
from sim.run.runner import run_scenario
from sim.scenario import Scenario

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "engines-compare.yaml"
COLUMNS = ["round_trips", "bytes_up", "bytes_down", "packets_up", "packets_down"]
#: the outage of the acceptance test: one replica of every zone and the registry down
FAULTS = {"workload.queries": 30, "workload.arrival": {"process": "poisson", "rate": 10.0},
          "faults": {"events": [{"kind": "down", "target": "replica:0", "at": 0.5,
                                 "duration": 1.5},
                                {"kind": "down", "target": "registry", "at": 0.5,
                                 "duration": 1.5}], "bin": 1.0}}
PURE_ACK = 52  # IP bytes of a pure ACK with TCP timestamps (20 + 32)


def faulted(sc: Scenario) -> Scenario:
    return sc.with_overrides(FAULTS)


def sums(sc: Scenario, engine: str, capture: bool = False) -> tuple[dict, float, dict]:
    """Per scheme: the summed columns and the success rate; the wall seconds; the capture
    block of the summary (empty without ``capture``)."""
    t = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        result = run_scenario(sc, engine, out_dir=tmp, capture=capture, write=capture)
    wall = time.perf_counter() - t
    df = result.records
    by = {str(s): {**{c: int(g[c].sum()) for c in COLUMNS},
                   "success": round(float(g.success.mean()), 3)}
          for s, g in df.groupby("scheme", sort=False)}
    return by, wall, result.summary.get("capture", {})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engines", nargs="+", default=["simpy", "live", "ray", "mininet"])
    ap.add_argument("--faults", action="store_true", help="also the outage variant")
    ap.add_argument("--capture", action="store_true", help="also a captured run")
    args = ap.parse_args()
    engines = [e for e in args.engines if e != "mininet" or os.geteuid() == 0]
    print(f"# {platform.node()}: {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"load average {os.getloadavg()[0]:.1f}")
    sc = load_scenario(SCENARIO)
    ref: dict = {}
    print("\n| engine | scheme | " + " | ".join(COLUMNS) + " | = simpy | wall s |")
    print("|---|---|" + "---:|" * len(COLUMNS) + "---|---:|")
    for engine in ["simpy", *[e for e in engines if e != "simpy"]]:
        by, wall, _ = sums(sc, engine)
        ref = ref or by
        for scheme, row in by.items():
            same = all(row[c] == ref[scheme][c] for c in COLUMNS)
            print(f"| {engine} | {scheme} | " + " | ".join(str(row[c]) for c in COLUMNS)
                  + f" | {'yes' if same else 'NO'} | {wall:.1f} |")
    if args.faults:
        print("\n| engine | " + " | ".join(s.name for s in sc.schemes) + " | wall s |")
        print("|---|" + "---:|" * (len(sc.schemes) + 1))
        for engine in ["simpy", *[e for e in engines if e != "simpy"]]:
            by, wall, _ = sums(faulted(sc), engine)
            print(f"| {engine} | " + " | ".join(f"{by[s.name]['success']:.3f}"
                                                for s in sc.schemes) + f" | {wall:.1f} |")
    if args.capture:
        engine = "mininet" if "mininet" in engines else "live"
        _, wall, cap = sums(sc, engine, capture=True)
        print(f"\ncapture on {engine} ({cap.get('packets')} packets, {wall:.1f} s)")
        print("| scheme | queries exact | Δ bytes | Δ packets | Δ = pure ACKs |")
        print("|---|---:|---:|---:|---|")
        for scheme, c in cap.get("schemes", {}).items():
            db = c["captured_bytes"] - c["accounted_bytes"]
            dp = c["captured_packets"] - c["accounted_packets"]
            print(f"| {scheme} | {c['queries_exact']}/{c['queries']} | {db:+d} | {dp:+d} | "
                  f"{'yes' if db == PURE_ACK * dp else 'no'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
