"""A2X's progressive search (seed 001) in the evaluator and over the wire: the resolver's
``search: a2x-…`` policies on the real catalogue, against the evaluator's descent query by
query.

    python3 benchmarks/bench_a2x.py [--parts eval,wire] [--queries 100] [--out results/bench-a2x]

``eval``: the tree and 1,000-query sample of ``scenarios/eval/tools-centroids.yaml`` with
flat dense, context injection (cost only), the top-1 walk, the global beam of 8 and the
three A2X modes: recall@10, hit@1, hit@10, precision of the top 10 (``disc_acc``), C(q),
its share of the pool, tokens and the zones asked for a ranking per query (A2X's "LLM
calls": the root, every inner zone descended into and every leaf reached). Writes
``eval.csv`` and the ``tooldns eval`` outputs (``eval/``).

``wire``: ``scenarios/retrieval-network.yaml`` (the clustered dense 16 × 2 tree of the catalogue,
parents routing by per-service centroids, MiniLM on every server) with its schemes replaced
by the top-1 walk, a global beam of 8 and the three A2X policies (K = 10), fixed processing
times (the answers and bytes do not depend on them), ``--queries`` discoveries per scheme.
The evaluator (``a2x:dense:POLICY``, ``tooldns:dense``, ``tooldns:dense:8:global``) then
walks the very tree the servers served, for the same intents, and the script prints per
scheme: queries whose returned tools are identical over the wire and in the evaluator,
hit@1 and recall@10 over the wire, C(q) (tools examined), exchanges, bytes each way and the
median latency. Writes ``a2x.csv`` and the run (``run/``) under ``--out``.
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
from sim.build.namespace import build_namespace  # noqa: E402
from sim.evalspec import load_eval  # noqa: E402
from sim.loading import load_scenario  # noqa: E402
from sim.retrieval.dataset import category_map, load_split, sample_queries  # noqa: E402
from sim.retrieval.evaluator import EvalConfig, Evaluator  # noqa: E402
from sim.retrieval.run import build_namespace as eval_namespace  # noqa: E402
from sim.retrieval.run import write_outputs  # noqa: E402
from sim.run.runner import run_scenario  # noqa: E402
from topologies.encoders import disk_cached_encoder  # noqa: E402
from topologies.namespace import TLD  # noqa: E402

SCENARIO = ROOT / "scenarios" / "retrieval-network.yaml"
EVAL = ROOT / "scenarios" / "eval" / "tools-centroids.yaml"
EVAL_METHODS = ("flat:dense", "context", "tooldns:dense", "tooldns:dense:8:global",
                "a2x:dense:get_one", "a2x:dense:get_important", "a2x:dense:get_all")
SCHEMES = [{"name": "top1", "k": 10}, {"name": "global8", "k": 10, "beam": 8, "search": "global"},
           *({"name": f"a2x-{p}", "k": 10, "search": f"a2x-{p}"}
             for p in ("get_one", "get_important", "get_all"))]
METHOD = {"top1": "tooldns:dense", "global8": "tooldns:dense:8:global",
          **{f"a2x-{p}": f"a2x:dense:{p}" for p in ("get_one", "get_important", "get_all")}}


def recall_at(truth: str, returned: str, k: int = 10) -> float:
    want = set(truth.split())
    got = {t.split("~", 1)[0] for t in str(returned).split()[:k]}
    return len(want & got) / len(want) if want else float("nan")


def _csv(frame: pd.DataFrame):
    def write(tmp: str) -> None:
        frame.to_csv(tmp, index=False)
    return write


def part_eval(out: Path, cache: str) -> pd.DataFrame:
    spec = load_eval(EVAL).model_copy(update={"cache_dir": cache, "methods": EVAL_METHODS})
    t0 = time.perf_counter()
    rows, train, queries = load_split(spec)
    enc = disk_cached_encoder(cache)
    ns, balance = eval_namespace(spec, rows, queries, enc, train)
    print(f"tree: {time.perf_counter() - t0:.0f} s, {balance['leaves']:.0f} leaves, "
          f"branching ≤ {balance['branching_max']:.0f}, leaves of {balance['leaf_min']:.0f}–"
          f"{balance['leaf_max']:.0f} tools")
    qs = sample_queries(ns.queries, spec.dataset.sample, spec.seed)
    ev = Evaluator(ns, category_map(rows), EvalConfig(methods=EVAL_METHODS, k=spec.k,
                                                      cache_dir=cache), enc, train)
    pq = ev.run(qs)
    write_outputs(out / "eval", pq, spec.k, {"name": "bench-a2x-eval", "balance": balance},
                  plots=False)
    zones = {}
    for method in EVAL_METHODS[2:]:  # semantic servers asked per query
        run = ev.runner(method)
        asked = []
        for q in qs:
            leaves = run(q, spec.k).leaves
            inner = {z.split(".", 1)[1] for z in leaves} - {TLD}
            asked.append(1 + len(inner) + len(leaves))
        zones[method] = sum(asked) / len(asked)
    g = pq.groupby("method", sort=False)
    df = pd.DataFrame({"recall10": g.recall_k.mean(), "hit1": g.hit1_tool.mean(),
                       "hit10": g.hitk_tool.mean(), "hit10_cat": g.hitk_cat.mean(),
                       "disc_acc": g.disc_acc.mean(), "cq": g.examined.mean(),
                       "pool_pct": 100 * g.examined_frac.mean(), "tokens": g.tokens.mean(),
                       "zones_asked": pd.Series(zones)}).rename_axis("method").reset_index()
    print(df.round(3).to_string(index=False))
    return df


def part_wire(out: Path, cache: str, queries: int) -> pd.DataFrame:
    sc = load_scenario(SCENARIO).with_overrides({
        "schemes": SCHEMES, "workload.queries": queries, "outputs.plots": False,
        "network.processing.model": "fixed", "namespace.cache_dir": cache})
    t0 = time.perf_counter()
    rec = run_scenario(sc, out_dir=out / "run").records
    print(f"run: {time.perf_counter() - t0:.0f} s")
    ns = build_namespace(sc)  # the tree the servers served
    ev = Evaluator(ns, {}, EvalConfig(methods=tuple(METHOD.values()), k=10, cache_dir=cache))
    by_text = {(q.text, q.service): q for q in ns.queries}
    rows = []
    for name, method in METHOD.items():
        run = ev.runner(method)
        g = rec[rec.scheme == name]
        mine = [" ".join(run(by_text[(r.intent, r.service)], 10).tools) for r in g.itertuples()]
        same = (g.returned.astype(str).to_numpy() == pd.Series(mine).to_numpy())
        rows.append({"scheme": name, "method": method, "queries": len(g),
                     "identical": int(same.sum()), "hit1": g.hit_at_1.mean(),
                     "recall10": g.apply(lambda r: recall_at(r.truth, r.returned),
                                         axis=1).mean(),
                     "cq": g.tools_examined.mean(), "exchanges": g.exchanges.mean(),
                     "bytes_up": g.bytes_up.mean(), "bytes_down": g.bytes_down.mean(),
                     "latency_ms_median": g.latency_ms.median()})
    df = pd.DataFrame(rows)
    print("| scheme | evaluator method | identical / queries | hit@1 | recall@10 | C(q) | "
          "exchanges | bytes up | bytes down | median ms |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in df.itertuples():
        print(f"| {r.scheme} | {r.method} | {r.identical} / {r.queries} | "
              f"{100 * r.hit1:.1f} | {100 * r.recall10:.1f} | {r.cq:.0f} | "
              f"{r.exchanges:.1f} | {r.bytes_up:.0f} | {r.bytes_down:.0f} | "
              f"{r.latency_ms_median:.0f} |")
    return df


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--parts", default="eval,wire")
    ap.add_argument("--queries", type=int, default=100, help="discoveries per scheme (wire)")
    ap.add_argument("--out", default=str(ROOT / "results" / "bench-a2x"))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cache = str(ROOT / "results" / ".cache")
    parts = set(args.parts.split(","))
    if "eval" in parts:
        atomic_write(out / "eval.csv", _csv(part_eval(out, cache)))
    if "wire" in parts:
        atomic_write(out / "a2x.csv", _csv(part_wire(out, cache, args.queries)))


if __name__ == "__main__":
    main()
