"""The cost of DNS over TLS (RFC 7858) between the resolver and the authoritative servers,
against UDP, on ``scenarios/dot-cost.yaml`` (AAAA records on; the ToolDNS seed paper
§4.2 leaves the intent in clear on this path).

Prints, per scheme and phase (phase 0: cold caches and no connections; phase 1: the same
queries with caches and connections warm), bytes, packets and latency per query (IP layer,
agent↔resolver included), the DNS-over-TLS connections opened, then each TLS scheme's
figures divided by its UDP twin's (``tls``/``udp``, ``tls-nocache``/``udp-nocache`` — no
resolver cache, so every query walks from the root — and ``qname-tls``/``qname-udp``).

    python benchmarks/bench_dot.py                 # simpy
    python benchmarks/bench_dot.py --queries 100   # per phase
    python benchmarks/bench_dot.py --live          # also live (real TLS sockets), with a
                                                   # packet capture when run as root

Costs on simpy are the model of :func:`sim.accounting.dot_exchange_cost` (TLS sizes from a
real in-memory handshake with the run's certificate; TCP segments and ACKs modelled); the
live run carries real TLS 1.3 and, as root, compares the model with what tcpdump saw.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim.loading import load_scenario  # noqa: E402
from sim.run.runner import run_scenario  # noqa: E402

PAIRS = {"tls": "udp", "tls-nocache": "udp-nocache", "qname-tls": "qname-udp"}


def per_phase(records: pd.DataFrame) -> pd.DataFrame:
    """Per (scheme, phase): mean bytes, packets, latency per query, and the median."""
    g = records.groupby(["scheme", "phase"], sort=False)
    return pd.DataFrame({
        "bytes up": g["bytes_up"].mean(), "bytes down": g["bytes_down"].mean(),
        "packets": g["packets_up"].mean() + g["packets_down"].mean(),
        "mean ms": g["latency_ms"].mean(), "median ms": g["latency_ms"].median(),
        "success": g["success"].mean(),
    })


def ratios(table: pd.DataFrame) -> pd.DataFrame:
    """Each TLS scheme's figures over its UDP twin's, phase by phase."""
    rows = []
    for (scheme, phase), row in table.iterrows():
        base = PAIRS.get(scheme)
        if base is None or (base, phase) not in table.index:
            continue
        b = table.loc[(base, phase)]
        rows.append({"scheme": f"{scheme} / {base}", "phase": phase,
                     "bytes": (row["bytes up"] + row["bytes down"])
                     / (b["bytes up"] + b["bytes down"]),
                     "packets": row["packets"] / b["packets"],
                     "mean latency": row["mean ms"] / b["mean ms"]})
    return pd.DataFrame(rows).set_index(["scheme", "phase"])


def show(title: str, result) -> None:
    table = per_phase(result.records)
    print(f"\n== {title}: per query, by phase (0 cold, 1 warm)")
    print(table.round(2).to_string())
    print("\nratios against UDP:")
    print(ratios(table).round(3).to_string())
    replay = result.summary["replay"]
    opened = {s: r.get("dot_opened") for s, r in replay.items() if "dot_opened" in r}
    print(f"\nTLS connections opened per scheme: {opened}")
    capture = result.summary.get("capture")
    if capture:
        print("\ncapture vs accounting (sim.accounting model, live run):")
        cols = ["queries", "queries_exact", "accounted_bytes", "captured_bytes",
                "bytes_diff_pct", "accounted_packets", "captured_packets",
                "packets_diff_pct", "unattributed_packets"]
        print(pd.DataFrame(capture["schemes"]).T[cols].to_string())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=20, help="queries per phase")
    parser.add_argument("--live", action="store_true", help="also on the live engine")
    parser.add_argument("--port", type=int, default=15353, help="live: DNS port")
    args = parser.parse_args()
    sc = load_scenario(ROOT / "scenarios" / "dot-cost.yaml").with_overrides(
        {"workload.queries": args.queries})
    show("simpy", run_scenario(sc, write=False))
    if args.live:
        capture = os.geteuid() == 0
        with tempfile.TemporaryDirectory() as tmp:
            result = run_scenario(sc, engine="live", out_dir=tmp, write=capture,
                                  live_port=args.port, capture=capture)
            show("live" + (" (captured)" if capture else " (no capture: not root)"), result)


if __name__ == "__main__":
    main()
