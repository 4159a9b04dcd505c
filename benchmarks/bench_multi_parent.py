"""Multi-parent placement (``taxonomy.multi_parent``; A2X's cross-domain assignment, seed
001) evaluated: the same clustered dense tree with copies off and at several ratios.

    python3 benchmarks/bench_multi_parent.py [--ratios 0,0.95,0.9,0.8] [--sample 1000]
        [--check 200] [--out results/bench-multi-parent]

``scenarios/eval/multi-parent.yaml`` (16 × 2 tree clustered with MiniLM, per-service
centroids, 1,000 queries of the held-out 40 % test split of ``../shared/data/tools``) is
run once per ratio (``tooldns eval`` outputs in ``mp-<ratio>/``). A tool whose second-best
top-level cluster is at least ``ratio`` × as similar as its best is also placed there, as
``id~2``. Prints, per ratio and method, recall@10, hit@1, C(q) and its share of the pool,
and the tree's placements; then checks on ``--check`` queries that copies count once: no
returned list holds a copy id or a tool twice, the pool and N count catalogue tools, and
how many of the tools a walk scores are second placements of a tool it already scored
(those are scored twice by the servers, so they stay in C(q)). Writes ``multi_parent.csv``
and ``copies.csv`` under ``--out``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from analysis.files import atomic_write  # noqa: E402
from sim.evalspec import EvalScenario, load_eval  # noqa: E402
from sim.retrieval.dataset import category_map, load_split, sample_queries  # noqa: E402
from sim.retrieval.evaluator import EvalConfig, Evaluator  # noqa: E402
from sim.retrieval.run import build_namespace, run_eval  # noqa: E402
from topologies.datasets import canonical_id  # noqa: E402
from topologies.encoders import disk_cached_encoder  # noqa: E402
from topologies.learned import without_held_out  # noqa: E402

EVAL = ROOT / "scenarios" / "eval" / "multi-parent.yaml"
WALKS = ("tooldns:dense", "tooldns:dense:8", "tooldns:dense:8:global", "a2x:dense:get_one",
         "a2x:dense:get_important", "a2x:dense:get_all")


def _csv(frame: pd.DataFrame):
    def write(tmp: str) -> None:
        frame.to_csv(tmp, index=False)
    return write


def spec_for(ratio: float, sample: int, out: Path) -> EvalScenario:
    spec = load_eval(EVAL)
    return spec.model_copy(update={
        "taxonomy": spec.taxonomy.model_copy(update={"multi_parent": ratio}),
        "dataset": spec.dataset.model_copy(update={"sample": sample}),
        "plots": False, "out": str(out), "cache_dir": str(ROOT / "results" / ".cache")})


def copies_check(spec: EvalScenario, n: int) -> list[dict]:
    """Copies counted once: returned lists, pool, N; copies scored twice within a walk."""
    rows, train, queries = load_split(spec)
    train = without_held_out(train, queries)
    enc = disk_cached_encoder(spec.cache_dir)
    ns, _ = build_namespace(spec, rows, queries, enc, train)
    qs = sample_queries(ns.queries, n, spec.seed)
    ev = Evaluator(ns, category_map(rows), EvalConfig(methods=WALKS, k=spec.k,
                                                      cache_dir=spec.cache_dir), enc, train)
    assert ev.n_tools == len(rows), (ev.n_tools, len(rows))  # N counts catalogue tools
    out = []
    for method in WALKS:
        run = ev.runner(method)
        twice = scored = 0
        for q in qs:
            r = run(q, spec.k)
            assert all("~" not in t for t in r.tools) and len(set(r.tools)) == len(r.tools)
            ids = [t for z in r.leaves for t in ns.zones[z].tools
                   if ns.tools[t].service == q.service]
            scored += len(ids)
            twice += len(ids) - len({canonical_id(t) for t in ids})
        out.append({"ratio": spec.taxonomy.multi_parent, "method": method, "queries": len(qs),
                    "leaf_tools_scored": scored / len(qs),
                    "copies_of_a_tool_already_scored": twice / len(qs),
                    "copies_pct_of_leaf_tools": 100 * twice / scored if scored else 0.0})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ratios", default="0,0.95,0.9,0.8")
    ap.add_argument("--sample", type=int, default=1000, help="test queries evaluated")
    ap.add_argument("--check", type=int, default=200, help="queries of the copies check")
    ap.add_argument("--out", default=str(ROOT / "results" / "bench-multi-parent"))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows, checks = [], []
    for ratio in (float(x) for x in args.ratios.split(",")):
        spec = spec_for(ratio, args.sample, out / f"mp-{ratio:g}")
        t0 = time.perf_counter()
        result = run_eval(spec, out / f"mp-{ratio:g}")
        balance = result.get("balance", {}) if isinstance(result, dict) else {}
        print(f"multi_parent {ratio:g}: {time.perf_counter() - t0:.0f} s")
        pq = pd.read_csv(out / f"mp-{ratio:g}" / "per_query.csv", keep_default_na=False)
        assert not pq.returned.str.contains("~").any()  # copies count once (canonical ids)
        for method, g in pq.groupby("method", sort=False):
            rows.append({"ratio": ratio, "method": method, "queries": len(g),
                         "recall10": g.recall_k.mean(), "hit1": g.hit1_tool.mean(),
                         "hit10": g.hitk_tool.mean(), "cq": g.examined.mean(),
                         "pool_pct": 100 * g.examined_frac.mean(),
                         "tools": balance.get("tools"), "placements": balance.get("placements")})
        if args.check:
            checks += copies_check(spec, args.check)
    df = pd.DataFrame(rows)
    print("| multi_parent | placements / tools | method | recall@10 | hit@1 | C(q) | "
          "% of pool |")
    print("|---:|---|---|---:|---:|---:|---:|")
    for r in df.itertuples():
        print(f"| {r.ratio:g} | {r.placements} / {r.tools} | {r.method} | "
              f"{100 * r.recall10:.1f} | {100 * r.hit1:.1f} | {r.cq:.0f} | {r.pool_pct:.2f} |")
    atomic_write(out / "multi_parent.csv", _csv(df))
    if checks:
        cf = pd.DataFrame(checks)
        print(cf.to_string(index=False))
        atomic_write(out / "copies.csv", _csv(cf))


if __name__ == "__main__":
    main()
