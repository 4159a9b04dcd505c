"""The deployable design against the aware resolver: the intent in the QNAME, through a
resolver that behaves as stock recursors do (mode ``qname``), on ``scenarios/deployable.yaml``.

Prints, per scheme and phase (cold cache, then two warm phases of the same Zipf workload):
sequential round trips resolver↔servers, exchanges (upstream queries), bytes and packets per
query at the IP layer (agent↔resolver included), median latency, the share of discoveries
a cache helped, and hit@K; then ratios against ``tooldns`` (the aware resolver, the baseline).
Two alternatives of the design are compared: each CNAME carrying the next zone's delegation
beside it (the default), and bare CNAMEs (``namespace.cname_referral: false``), which cost
the resolver one more exchange per level while it does not yet know a zone's servers.

    python benchmarks/bench_deployable.py                # simpy, both alternatives
    python benchmarks/bench_deployable.py --queries 300  # per phase
    python benchmarks/bench_deployable.py --live         # also on real sockets (live engine)
    python benchmarks/bench_deployable.py --catalog      # the real catalogue (dense; ~7 min)

``--catalog`` runs ``scenarios/retrieval-network.yaml`` (the shared catalogue on the MiniLM
centroid tree) with two schemes, the aware walk and the qname walk at K = 10, and splits
hit@K by whether the intent lost words to the name's 120-character limit.

Real recursors (Unbound, BIND, Knot Resolver, PowerDNS Recursor) on the same design:
``benchmarks/bench_recursors.py``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from nodes.dns.wire import QNAME_INTENT_MAX, intent_labels, intent_words  # noqa: E402
from sim.loading import load_scenario  # noqa: E402
from sim.run.runner import run_scenario  # noqa: E402

COLUMNS = ["RTTs", "exchanges", "bytes", "packets", "median ms", "cache-helped", "hit@K"]


def per_phase(records: pd.DataFrame) -> pd.DataFrame:
    """One row per (scheme, phase) with the figures of :data:`COLUMNS`."""
    g = records.groupby(["scheme", "phase"], sort=False)
    return pd.DataFrame({
        "RTTs": g["round_trips"].mean(),
        "exchanges": g["exchanges"].mean(),
        "bytes": (g["bytes_up"].mean() + g["bytes_down"].mean()),
        "packets": (g["packets_up"].mean() + g["packets_down"].mean()),
        "median ms": g["latency_ms"].median(),
        "cache-helped": g["cache_hits"].apply(lambda s: (s > 0).mean()),
        "hit@K": g["hit_at_k"].mean(),
    })


def ratios(table: pd.DataFrame, base: str = "tooldns") -> pd.DataFrame:
    """Each scheme's figures divided by the baseline's, phase by phase."""
    out = []
    for (scheme, phase), row in table.iterrows():
        ref = table.loc[(base, phase)]
        out.append({"scheme": scheme, "phase": phase,
                    **{c: (row[c] / ref[c] if ref[c] else float("nan"))
                       for c in ("exchanges", "bytes", "packets", "median ms")}})
    return pd.DataFrame(out).set_index(["scheme", "phase"])


def truncated(intent: str) -> bool:
    """Whether the name lost words of this intent (``QNAME_INTENT_MAX``)."""
    return len(".".join(intent_labels(intent))) < len("-".join(intent_words(intent)))


def catalog(queries: int) -> None:
    sc = load_scenario(ROOT / "scenarios" / "retrieval-network.yaml").with_overrides({
        "schemes": [{"name": "tooldns", "k": 10},
                    {"name": "tooldns-qname", "k": 10, "mode": "qname"}],
        "workload.queries": queries, "outputs.plots": False})
    result = run_scenario(sc, engine="simpy", write=False)
    df = result.records
    g = df.groupby("scheme", sort=False)
    tools = result.summary.get("namespace_stats", {}).get("tools", "?")
    print(f"\ncatalogue ({tools} tools, dense centroid tree, "
          f"{queries} queries, K = 10):")
    print(pd.DataFrame({"hit@1": g["hit_at_1"].mean(), "hit@K": g["hit_at_k"].mean(),
                        "RTTs": g["round_trips"].mean(), "bytes up": g["bytes_up"].mean(),
                        "bytes down": g["bytes_down"].mean(),
                        "packets": (g["packets_up"].mean() + g["packets_down"].mean()),
                        }).to_string())
    cut = df["intent"].map(truncated)
    print(f"\nintents over {QNAME_INTENT_MAX} characters of words (cut in the name): "
          f"{int(cut[df.scheme == 'tooldns'].sum())} of {queries}")
    print(df.assign(cut=cut).groupby(["cut", "scheme"], sort=False)["hit_at_k"].mean()
          .unstack().to_string())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=600, help="queries per phase")
    ap.add_argument("--live", action="store_true", help="also run on the live engine")
    ap.add_argument("--catalog", action="store_true", help="only the catalogue comparison "
                    "(needs ../shared/data/tools)")
    args = ap.parse_args()
    if args.catalog:
        catalog(min(args.queries, 200))
        return
    sc = load_scenario(ROOT / "scenarios" / "deployable.yaml").with_overrides(
        {"workload.queries": args.queries})
    pd.set_option("display.width", 200)
    pd.set_option("display.precision", 2)
    runs = {"CNAME + delegation (default)": sc,
            "bare CNAME": sc.with_overrides({"namespace.cname_referral": False})}
    if args.live:
        runs["CNAME + delegation, live engine"] = sc.with_overrides(
            {"workload.queries": min(args.queries, 200), "outputs.plots": False})
    for title, scenario in runs.items():
        engine = "live" if "live" in title else "simpy"
        result = run_scenario(scenario, engine=engine, write=False)
        table = per_phase(result.records)
        print(f"\n{title} ({engine}, {scenario.workload.queries} queries per phase, "
              f"{scenario.workload.phases} phases):")
        print(table.to_string())
        print("\nratio to the aware resolver (tooldns), same phase:")
        print(ratios(table.drop(index="unmodified-resolver", level=0)).to_string())


if __name__ == "__main__":
    main()
