"""The paper's Table 2 (seed 000 §5): per-query network overhead of ToolDNS vs HTTP registries.

Runs ``scenarios/paper-table2.yaml`` on the simulation engine and, when run as root with
tcpdump installed, on the live engine with packet capture; prints our table beside the
paper's, with ratios against ToolDNS (the baseline named by the paper's comparison).

    python benchmarks/bench_table2.py                 # simpy + live/capture (root)
    python benchmarks/bench_table2.py --queries 200   # more queries per scheme
    python benchmarks/bench_table2.py --no-live       # simulation only
    python benchmarks/bench_table2.py --catalog       # the paper's scale (below)

``--catalog`` runs ``scenarios/paper-table2-catalog.yaml`` (the 25,897-tool catalogue, K = 1)
on the simulation engine with every query of the 40 % test split asked once (``--part all``:
all 19,148 queries), one query every ``--spacing`` seconds of simulated time, then sweeps
the registries' modelled search time (``network.processing.registry``, ``--search-times``)
over the first ``--sweep-queries`` of them. Both are sweeps (:mod:`sim.run.sweep`) under
``--out``: finished points are kept, so an interrupted run resumes.

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
from rich.console import Console

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from analysis.files import atomic_write  # noqa: E402
from sim.build.namespace import build_namespace  # noqa: E402
from sim.build.workload import query_pool  # noqa: E402
from sim.loading import load_scenario  # noqa: E402
from sim.run.runner import run_scenario  # noqa: E402
from sim.run.sweep import run_sweep, sweep_points  # noqa: E402
from sim.scenario import Scenario  # noqa: E402

PAPER = {  # request KB, request packets, response KB, response packets, delay ms
    "AgentDNS (HTTP)": (1.16, 10.77, 1.79, 9.87, 2035.51),
    "ANS (HTTP)": (1.09, 10.77, 1.41, 9.87, 2042.68),
    "ToolDNS (UDP)": (0.65, 2.98, 0.33, 2.98, 5.62),
}


def table(records: pd.DataFrame, prefix: str = "") -> pd.DataFrame:
    g = records.groupby("scheme", sort=False)
    out = pd.DataFrame({
        "queries": g.size(),
        "req KB": g[f"{prefix}bytes_up"].mean() / 1000,
        "req pkts": g[f"{prefix}packets_up"].mean(),
        "resp KB": g[f"{prefix}bytes_down"].mean() / 1000,
        "resp pkts": g[f"{prefix}packets_down"].mean(),
        "delay ms": g["latency_ms"].mean(),
        "RTTs": g["round_trips"].mean(),
        "hit@1": g["hit_at_1"].mean(),
        "hit@K": g["hit_at_k"].mean(),
    })
    if "tooldns" not in out.index:
        return out
    base = out.loc["tooldns"]
    out["bytes ×ToolDNS"] = (out["req KB"] + out["resp KB"]) / (base["req KB"] + base["resp KB"])
    out["pkts ×ToolDNS"] = (out["req pkts"] + out["resp pkts"]) / (
        base["req pkts"] + base["resp pkts"])
    out["delay ×ToolDNS"] = out["delay ms"] / base["delay ms"]
    return out


CATALOG = ROOT / "scenarios" / "paper-table2-catalog.yaml"
#: schemes run together in one sweep point (one namespace build each): by registry kind
GROUPS = {"tooldns": "tooldns", "agentdns": "agentdns", "ans": "ans"}


def trace_scenario(sc: Scenario, out: Path, part: str, spacing: float,
                   limit: int | None = None) -> tuple[Scenario, int]:
    """``sc`` with every query of its pool (the test split, or all queries with ``part``
    ``all``) asked once, ``spacing`` seconds apart (agents in turn): a trace file in ``out``."""
    if part == "all":
        sc = sc.with_overrides({"workload.split": None})
    ns = build_namespace(sc)
    pool = query_pool(sc, ns)[:limit]
    out.mkdir(parents=True, exist_ok=True)
    trace = out / f"trace-{part}-{len(pool)}-{spacing:g}s.csv"
    atomic_write(trace, lambda p: Path(p).write_text(
        "time,query\n" + "".join(f"{i * spacing:.6f},{q.id}\n" for i, q in enumerate(pool)),
        encoding="utf-8"))
    return sc.with_overrides({"workload.arrival": {"process": "trace", "trace": str(trace)},
                              "workload.queries": len(pool)}), len(pool)


def point_records(folder: Path) -> pd.DataFrame:
    """Every finished point's per-query rows (``results.csv``), with the point's id."""
    frames = []
    for point in sorted((folder / "points").glob("*/")):
        if (point / "summary.json").exists():
            frames.append(pd.read_csv(point / "results.csv").assign(point=point.name))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def catalog(args: argparse.Namespace) -> None:
    """Table 2 on the catalogue (one sweep point per scheme group), then the search sweep."""
    out = Path(args.out)
    base = load_scenario(CATALOG)
    if args.schemes:  # a subset, in the order given (points of other runs are reused)
        by_name = {s.name: s.model_dump(mode="json") for s in base.schemes}
        base = base.with_overrides({"schemes": [by_name[n] for n in args.schemes.split(",")]})
    groups: dict[str, list[dict]] = {}
    for s in base.schemes:  # one sweep point per registry kind, or per scheme
        key = s.name if args.per_scheme else GROUPS[s.kind]
        groups.setdefault(key, []).append(s.model_dump(mode="json"))
    pd.set_option("display.width", 220)
    pd.set_option("display.precision", 3)
    console = Console()
    if not args.sweep_only:
        sc, n = trace_scenario(base, out, args.part, args.spacing, args.limit)
        folder = out / f"table-{args.part}-{n}"
        run_sweep(sc.with_overrides({"sweep": {"grid": {"schemes": list(groups.values())},
                                               "workers": 1}}), folder, workers=1,
                  console=console)
        records = point_records(folder)
        print(f"\nTable 2 on the catalogue ({args.part}: {n} queries, each once, simpy):")
        print(table(records).to_string())
    if not args.search_times:
        return
    times = [float(t) for t in args.search_times.split(",")]
    sc, n = trace_scenario(base, out, args.part, args.sweep_spacing, args.sweep_queries)
    regs = [s for ss in groups.values() for s in ss if s["kind"] != "tooldns"]
    folder = out / f"search-{args.part}-{n}"
    swept = sc.with_overrides({"schemes": regs, "sweep": {
        "grid": {"network.processing.registry": times}, "workers": 1}})
    run_sweep(swept, folder, workers=1, console=console)
    ids = {p.id: p.overrides["network.processing.registry"] for p in sweep_points(swept)}
    records = point_records(folder)
    records["search_s"] = records["point"].map(ids)
    g = records.groupby(["search_s", "scheme"], sort=False)
    summary = pd.DataFrame({"queries": g.size(), "delay ms": g["latency_ms"].mean(),
                            "median ms": g["latency_ms"].median(),
                            "RTTs": g["round_trips"].mean(),
                            "req pkts": g["packets_up"].mean(),
                            "resp pkts": g["packets_down"].mean()})
    print(f"\nregistry search time swept ({n} queries of the {args.part} part, each once):")
    print(summary.to_string())
    atomic_write(folder / "search.csv", lambda p: summary.to_csv(p))
    plot_search(summary, ROOT / "benchmarks" / "figures" / "table2_search_time.png", n)


def plot_search(summary: pd.DataFrame, path: Path, n: int) -> None:
    """Mean delay per query against the registry's search time, the paper's delays marked."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    delay = summary["delay ms"].unstack("scheme")
    for scheme in delay.columns:
        ax.plot(delay.index, delay[scheme], "o-", label=scheme, markersize=3)
    http = [row[4] for name, row in PAPER.items() if "HTTP" in name]
    ax.axhline(sum(http) / len(http), color="grey", linestyle=":", linewidth=0.8)
    ax.annotate("paper: AgentDNS / ANS " + " / ".join(f"{d:,.0f}" for d in http) + " ms",
                (delay.index.min(), http[0]), fontsize=7, va="bottom")
    tooldns = PAPER["ToolDNS (UDP)"][4]
    ax.axhline(tooldns, color="black", linestyle="--", linewidth=0.8)
    ax.annotate(f"paper: ToolDNS {tooldns} ms", (delay.index.min(), tooldns), fontsize=7,
                va="bottom")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("registry search time per search request (s, modelled)")
    ax.set_ylabel("mean delay per query (ms)")
    ax.set_title(f"Table 2 on the catalogue: {n} test queries per point", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    atomic_write(path, lambda p: fig.savefig(p, format="png", dpi=120))
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--no-live", action="store_true")
    ap.add_argument("--catalog", action="store_true",
                    help="the paper's scale: scenarios/paper-table2-catalog.yaml")
    ap.add_argument("--part", choices=("test", "all"), default="test",
                    help="--catalog: the 40%% test split or all 19,148 queries")
    ap.add_argument("--spacing", type=float, default=1.0,
                    help="--catalog: simulated seconds between queries")
    ap.add_argument("--search-times", default="",
                    help="--catalog: registry search times to sweep, comma-separated seconds")
    ap.add_argument("--schemes", default="",
                    help="--catalog: only these schemes of the file (comma-separated)")
    ap.add_argument("--sweep-only", action="store_true",
                    help="--catalog: skip the table, run only the search-time sweep")
    ap.add_argument("--per-scheme", action="store_true",
                    help="--catalog: one sweep point (and namespace build) per scheme")
    ap.add_argument("--limit", type=int, default=None,
                    help="--catalog: only the first N queries of the part (a quick look)")
    ap.add_argument("--sweep-queries", type=int, default=500,
                    help="--catalog: queries (of the part) per search-time point")
    ap.add_argument("--sweep-spacing", type=float, default=10.0,
                    help="--catalog: simulated seconds between queries in the search sweep")
    ap.add_argument("--out", default=str(ROOT / "results" / "bench-table2-catalog"))
    args = ap.parse_args()
    if args.catalog:
        catalog(args)
        return
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
