"""The paper's Fig. 8 on the real catalogue: C(q) of a top-1 ToolDNS walk against N.

Seeded subsamples of ``../shared/data/tools`` (1k, 2k, 5k, 10k tools and all 25,897 by
default) are each organised as a tree (the catalogue's own categories, and a clustered
16 x 2 taxonomy from TF-IDF/LSA vectors, as ``scenarios/paper-table2-catalog.yaml``) and
walked in process by BM25 servers (the same ranking code as the DNS servers), top-1 per
level, for a seeded sample of the queries whose ground truth lies in the subsample.

    python3 benchmarks/bench_fig8.py                     # ~3 min on 2 cores
    python3 benchmarks/bench_fig8.py --sizes 1000,25897 --queries 200

C(q) = items scored per query (child summaries + the leaf's tools of the query's
service); flat retrieval scores all N (ToolLLM) or the query's service pool. The
log-log slope of C(q) against N says how it grows (1 = linear, 0 = constant). Writes
``fig8.csv`` and ``fig8.json`` to ``--out`` and ``benchmarks/figures/fig8_catalog.png``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from analysis.files import atomic_write  # noqa: E402
from nodes.scoring import make_scorer  # noqa: E402
from sim.evalspec import TaxonomySpec  # noqa: E402
from sim.retrieval.dataset import sample_queries  # noqa: E402
from sim.retrieval.hierarchy import InProcessHierarchy  # noqa: E402
from topologies.datasets import load_catalog, load_queries  # noqa: E402
from topologies.taxonomy_namespace import taxonomy_namespace  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "tools"
PAPER = {25_300: (4888.10, 1197.12)}  # N: (1-level, 2-level) tools examined, seed 000 §5.3
TREES = {
    "categories": TaxonomySpec(kind="categories"),
    "cluster16x2": TaxonomySpec(kind="cluster", branching=16, depth=2, leaf_size=40,
                                vectors="tfidf"),
}


def measure(rows: list[dict], qrows: list[dict], tree: str, n_queries: int, seed: int
            ) -> dict:
    """Top-1 walks over ``rows`` organised as ``tree``: mean C(q), pool and hit@10."""
    t0 = time.perf_counter()
    ns = taxonomy_namespace(TREES[tree], rows, qrows, seed, f"fig8:{tree}")
    hier = InProcessHierarchy(ns, make_scorer("bm25"))
    qs = sample_queries(ns.queries, n_queries, seed)
    walks = [hier.walk(q.text, q.service, 10) for q in qs]
    pool: dict[str, int] = {}
    for t in ns.tools.values():
        pool[t.service] = pool.get(t.service, 0) + 1
    examined = np.array([w.examined for w in walks], dtype=float)
    depth = max(z.count(".") for z in ns.zones) - 1  # "b.a.tools." is at depth 2
    return {"tree": tree, "n_tools": len(rows), "zones": len(ns.zones), "depth": depth,
            "queries": len(qs), "examined": float(examined.mean()),
            "examined_p95": float(np.percentile(examined, 95)),
            "tools_examined": float(np.mean([w.tools_examined for w in walks])),
            "service_pool": float(np.mean([pool[q.service] for q in qs])),
            "reduction_vs_all": float(1 - examined.mean() / len(rows)),
            "hit10_tool": float(np.mean([q.truth[0] in w.tools for q, w in
                                         zip(qs, walks, strict=True)])),
            "seconds": round(time.perf_counter() - t0, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,2000,5000,10000,25897")
    ap.add_argument("--queries", type=int, default=300, help="queries walked per point")
    ap.add_argument("--trees", default=",".join(TREES))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(ROOT / "results" / "bench-fig8"))
    args = ap.parse_args()
    catalog = DATA / "catalog.jsonl"
    if not catalog.exists():
        sys.exit(f"needs the catalogue at {catalog}")
    every = load_catalog(str(catalog))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows_out = []
    for n in (int(x) for x in args.sizes.split(",")):
        rows = (every if n >= len(every) else
                sorted(random.Random(f"fig8-{args.seed}-{n}").sample(every, n),
                       key=lambda r: r["id"]))
        qrows = load_queries(str(DATA / "queries.jsonl"), [r["id"] for r in rows])
        for tree in args.trees.split(","):
            r = measure(rows, qrows, tree, args.queries, args.seed)
            rows_out.append(r)
            print(f"N={r['n_tools']:>6} {tree:12s} depth {r['depth']} zones {r['zones']:>5} "
                  f"C(q)={r['examined']:8.1f} (pool {r['service_pool']:8.1f}, "
                  f"-{100 * r['reduction_vs_all']:.2f} % vs N) hit@10 {r['hit10_tool']:.3f} "
                  f"[{r['seconds']} s]", flush=True)
    df = pd.DataFrame(rows_out)
    slopes = {}
    for tree, g in df.groupby("tree"):
        if len(g) > 1:
            slopes[tree] = float(np.polyfit(np.log(g.n_tools), np.log(g.examined), 1)[0])
    print("log-log slope of C(q) against N:", {k: round(v, 3) for k, v in slopes.items()})
    atomic_write(out / "fig8.csv", lambda p: df.to_csv(p, index=False))
    atomic_write(out / "fig8.json", lambda p: Path(p).write_text(json.dumps(
        {"points": rows_out, "loglog_slope": slopes, "paper": PAPER}, indent=2) + "\n",
        encoding="utf-8"))
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    ns_ = sorted(df.n_tools.unique())
    ax.plot(ns_, ns_, "k--", label="flat (ToolLLM): N")
    for tree, g in df.groupby("tree"):
        ax.plot(g.n_tools, g.examined, "o-", label=f"ToolDNS top-1, {tree}")
        ax.plot(g.n_tools, g.service_pool, ":", label=f"flat, service pool ({tree})")
    for n, (one, two) in PAPER.items():
        ax.plot([n], [two], "r*", markersize=10, label="paper, 2 levels (1,197)")
        ax.plot([n], [one], "rx", label="paper, 1 level (4,888)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("tools N (catalogue subsample)")
    ax.set_ylabel("C(q): items scored per query")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig_path = ROOT / "benchmarks" / "figures" / "fig8_catalog.png"
    atomic_write(fig_path, lambda p: fig.savefig(p, format="png", dpi=120))
    print(f"wrote {out / 'fig8.csv'} and {fig_path}")


if __name__ == "__main__":
    main()
