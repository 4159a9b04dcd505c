"""Retrieval benchmark: every discovery method on the shared catalogue, search space vs N.

    python3 benchmarks/bench_retrieval.py [--sample 1000] [--out results/bench-retrieval]

Writes into ``--out``:

* ``methods-<tree>/`` — ``tooldns eval`` outputs (table.md, summary.csv, by_category.csv,
  per_query.csv, figures) for the catalogue's own categories and for a clustered
  taxonomy (branching 16, depth 2), on a seeded sample of the queries;
* ``beams.csv`` / ``beams.png`` — recall@10 and C(q) of the ToolDNS walk for beam widths;
* ``search_space.csv`` / ``search_space.png`` — mean C(q) of the top-1 walk against N
  (10³–3×10⁵ synthetic tools walked, depth 1–4, branching ⌈N^(1/(d+1))⌉; 10⁶ from the
  balanced-tree count d·b + s·N/bᵈ, which the walks match to within 4 %, because the
  synthetic word generator runs out of distinct words near 6×10⁵ tools; s = 0.30 is the
  expected share of a leaf offering the query's service — servers score only those — for
  the generator's 40/10/30/20 % service mix), plus the 2-level reduction on 3×10⁴
  synthetic tools and on the real catalogue (paper: 95.26 %);
* a routing diagnostic: recall@10 of the leaf ranking if the walk always reached the
  ground truth's leaf, and how often the first step picks the right top-level zone;
* ``variants/<tree>/`` — routing variants on the clustered tree (TF-IDF- or
  dense-clustered; zones scored by summary, summary with central tools' descriptions,
  N representative tools by MaxSim, or per-service centroids), each walked top-1, with
  the resolver's beam (round-robin or score-ordered merge), A2X get_important and a
  level-wise global beam;
  ``variants.csv`` has recall@10 and C(q) % of the pool for all;
* ``grail/`` — GRAIL as published (seed 002) against flat dense and BM25, with the
  paper's ablations, an α sweep and its sparse-only baseline (SLM-Sort: the tag candidates
  in random order; ``grail:sparse-count`` ranks them by tags matched), on the held-out
  40 % test split (pseudo-documents
  from the 60 % training split only; ``scenarios/eval/grail.yaml``); ``--only-grail``
  runs just this;
* ``bench.json`` — everything above in one file.

Without ``../shared/data/tools`` only the synthetic parts run. Sentence embeddings are
cached in ``results/.cache`` (the first run embeds the catalogue: minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import time
from pathlib import Path

import pandas as pd

from analysis.files import atomic_write
from analysis.plots.retrieval import recall_vs_examined, search_space
from nodes.scoring import make_scorer
from sim.evalspec import EvalScenario
from sim.retrieval.dataset import load_dataset, sample_queries
from sim.retrieval.hierarchy import InProcessHierarchy
from sim.retrieval.run import build_namespace, run_eval
from topologies.encoders import disk_cached_encoder
from topologies.namespace import TLD
from topologies.synthetic import synthetic

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data" / "tools" / "catalog.jsonl"
PAPER_2LEVEL = 0.9526
SERVICE_SHARE = 0.4**2 + 0.1**2 + 0.3**2 + 0.2**2  # synthetic(): P(two tools share a service)


def search_space_sweep(ns_sizes: list[int], depths: list[int], queries: int = 50
                       ) -> pd.DataFrame:
    rows = []
    for n in ns_sizes:
        for d in depths:
            b = max(2, math.ceil(n ** (1 / (d + 1))))
            t0 = time.perf_counter()
            ns = synthetic(n_tools=n, branching=b, depth=d, seed=0, n_queries=queries)
            hier = InProcessHierarchy(ns, make_scorer("bm25"))
            walks = [hier.walk(q.text, q.service, 10) for q in ns.queries]
            pool = {s: sum(t.service == s for t in ns.tools.values()) for s in
                    {q.service for q in ns.queries}}
            hits = sum(q.truth[0] in w.tools for q, w in zip(ns.queries, walks, strict=True))
            rows.append({
                "n_tools": n, "depth": d, "branching": b,
                "examined": sum(w.examined for w in walks) / len(walks),
                "tools_examined": sum(w.tools_examined for w in walks) / len(walks),
                "reduction_vs_all": 1 - sum(w.examined for w in walks) / len(walks) / n,
                "reduction_vs_service": 1 - sum(w.examined / pool[q.service] for q, w in
                                                zip(ns.queries, walks, strict=True)) / len(walks),
                "hit10_tool": hits / len(walks), "seconds": time.perf_counter() - t0})
            print(f"search space N={n} d={d} b={b}: C(q)={rows[-1]['examined']:.0f}", flush=True)
    return pd.DataFrame(rows)


def catalogue_reduction(spec: EvalScenario, sample: int) -> dict:
    """Top-1 walks over the real catalogue's 2-level categories: C(q) vs N."""
    rows, queries = load_dataset(spec)
    ns, balance = build_namespace(spec, rows, queries)
    hier = InProcessHierarchy(ns, make_scorer("bm25"))
    qs = sample_queries(ns.queries, sample, spec.seed)
    walks = [hier.walk(q.text, q.service, 10) for q in qs]
    ex = sum(w.examined for w in walks) / len(walks)
    one = []  # 1 level: the top-level zone's tools (all its leaves) + the TLD's children
    for q, w in zip(qs, walks, strict=True):
        top = ns.path(w.leaves[0])[1] if w.leaves else None
        below = [t for z in ns.zones if top and (z == top or z.endswith(f".{top}"))
                 for t in ns.zones[z].tools]
        one.append(len(hier.children("tools.", q.service)[2]) + sum(
            ns.tools[t].service == q.service for t in below))
    return {"tree": spec.taxonomy.kind, "tools": len(rows), "queries": len(qs),
            "examined_2level": ex, "reduction_2level": 1 - ex / len(rows),
            "examined_1level": sum(one) / len(one), "reduction_1level": 1 - sum(one) / len(one)
            / len(rows), "balance": balance}


def routing_diagnostic(spec: EvalScenario, sample: int) -> dict:
    """Where the walk loses: leaf ranking with perfect routing vs level-1 routing accuracy."""
    rows, queries = load_dataset(spec)
    ns, _ = build_namespace(spec, rows, queries)
    qs = sample_queries(ns.queries, sample, spec.seed)
    out = {}
    for name in ("bm25", "dense"):
        scorer = (make_scorer(name, encoder=disk_cached_encoder(spec.cache_dir))
                  if name == "dense" else make_scorer(name))
        hier = InProcessHierarchy(ns, scorer)
        recall = routed = top8 = 0.0
        for q in qs:
            leaf = ns.tools[q.truth[0]].zone
            rank, ids, _, _ = hier.leaf(leaf, q.service)
            got = {ids[i] for i in rank(q.text, 10)}
            recall += len(set(q.truth) & got) / len(q.truth)
            r, kids, eligible, _ = hier.children(TLD, q.service)
            order = [kids[i] for i in r(q.text, 0, eligible)]
            routed += order[0] == ns.path(leaf)[1]
            top8 += ns.path(leaf)[1] in order[:8]
        out[name] = {"oracle_leaf_recall10": recall / len(qs),
                     "level1_routing_correct": routed / len(qs),
                     "level1_truth_in_top8": top8 / len(qs)}
        print(f"routing diagnostic {name}: {out[name]}", flush=True)
    return out


VARIANT_TREES: dict[str, dict] = {  # taxonomy overrides of the clustered b=16 d=2 tree
    "tfidf-summary": {}, "tfidf-reps8": {"representatives": 8},
    "dense-summary": {"vectors": "dense"},
    "dense-reps1": {"vectors": "dense", "representatives": 1},
    "dense-reps8": {"vectors": "dense", "representatives": 8},
    "dense-examples3": {"vectors": "dense", "summary_examples": 3},
    "dense-centroids": {"vectors": "dense", "centroids": True}}
VARIANT_METHODS = (
    "flat:dense", "tooldns:dense", "tooldns:dense:8", "tooldns:dense:8:score",
    "a2x:dense:get_important", "tooldns:dense:6:global", "tooldns:dense:7:global",
    "tooldns:dense:8:global")


def routing_variants(base: dict, tree: dict, out: Path) -> pd.DataFrame:
    """Recall@10 vs C(q) for every routing variant (see the module docstring)."""
    frames = []
    for name, overrides in VARIANT_TREES.items():
        spec = EvalScenario.model_validate({
            **base, "name": f"variant-{name}", "methods": VARIANT_METHODS, "plots": False,
            "taxonomy": {**tree, **overrides}})
        res = run_eval(spec, out / "variants" / name,
                       progress=lambda m, n=name: print(f"[{n}] {m}", flush=True))
        summary = res["summary"][["method", "recall_k", "examined", "examined_frac"]].copy()
        summary.insert(0, "tree", name)
        frames.append(summary)
    table = pd.concat(frames, ignore_index=True)
    atomic_write(out / "variants.csv", lambda tmp: table.to_csv(tmp, index=False))
    return table


GRAIL_METHODS = (
    "flat:dense", "flat:bm25", "grail", "grail:no-maxsim", "grail:no-tags", "grail:no-pseudo",
    "grail:no-synonyms", "grail:intersect", "grail-intersect",
    "grail:alpha=0", "grail:alpha=0.25", "grail:alpha=0.75", "grail:alpha=1",
    "grail:sparse-only", "grail:sparse-count")


def grail_comparison(base: dict, tree: dict, out: Path) -> dict:
    """GRAIL and its ablations vs flat retrieval on the test split (module docstring)."""
    spec = EvalScenario.model_validate({
        **base, "name": "grail", "methods": GRAIL_METHODS, "plots": False, "taxonomy": tree,
        "dataset": {**base["dataset"], "test_fraction": 0.4}})
    t0 = time.perf_counter()
    res = run_eval(spec, out / "grail", progress=lambda m: print(f"[grail] {m}", flush=True))
    return {"seconds": time.perf_counter() - t0,
            "summary": json.loads(res["summary"].to_json(orient="records"))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sample", type=int, default=1000, help="queries per method")
    ap.add_argument("--out", default=str(ROOT / "results" / "bench-retrieval"))
    ap.add_argument("--max-n", type=int, default=1_000_000)
    ap.add_argument("--skip-methods", action="store_true")
    ap.add_argument("--only-variants", action="store_true",
                    help="run the routing variants only (variants.csv)")
    ap.add_argument("--only-grail", action="store_true",
                    help="run the GRAIL comparison only (grail/)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report: dict = {"machine": {"cpu_count": __import__("os").cpu_count(),
                                "platform": platform.platform(),
                                "python": platform.python_version()}}
    cache = str(ROOT / "results" / ".cache")
    base = {"seed": 0, "k": 10, "cache_dir": cache,
            "dataset": {"source": "catalog", "catalog": str(SHARED), "sample": args.sample}}
    trees = {
        "categories": {"kind": "categories"},
        "cluster-b16-d2": {"kind": "cluster", "branching": 16, "depth": 2,
                           "leaf_size": 40, "summary_terms": 24},
    }
    if SHARED.exists() and args.only_variants:
        routing_variants(base, trees["cluster-b16-d2"], out)
        return
    if SHARED.exists() and args.only_grail:
        report["grail"] = grail_comparison(base, trees["cluster-b16-d2"], out)
        atomic_write(out / "grail" / "bench.json", lambda tmp: Path(tmp).write_text(
            json.dumps(report, indent=2, default=float), encoding="utf-8"))
        return
    if SHARED.exists() and args.skip_methods:  # keep the method results of an earlier run
        for name in ("methods-categories", "methods-cluster-b16-d2", "beams"):
            if (out / name / "summary.json").exists():
                report[name] = json.loads((out / name / "summary.json").read_text())
    if SHARED.exists() and not args.skip_methods:
        for tree, tx in trees.items():
            spec = EvalScenario.model_validate({**base, "name": f"methods-{tree}",
                                                "taxonomy": tx})
            t0 = time.perf_counter()
            res = run_eval(spec, out / f"methods-{tree}",
                           progress=lambda m, t=tree: print(f"[{t}] {m}", flush=True))
            report[f"methods-{tree}"] = {
                "seconds": time.perf_counter() - t0, "balance": res["balance"],
                "summary": json.loads(res["summary"].to_json(orient="records"))}
        beam_methods = [f"tooldns:{s}:{b}" for s in ("bm25", "dense") for b in (1, 2, 3, 5, 8)]
        beam_methods += ["flat:bm25", "flat:dense"]
        spec = EvalScenario.model_validate({**base, "name": "beams", "methods": beam_methods,
                                            "taxonomy": trees["cluster-b16-d2"],
                                            "plots": False})
        res = run_eval(spec, out / "beams", progress=lambda m: print(f"[beams] {m}", flush=True))
        per_query = pd.read_csv(out / "beams" / "per_query.csv")
        recall_vs_examined(per_query, out / "beams.png")
        report["beams"] = json.loads(res["summary"].to_json(orient="records"))
        variants = routing_variants(base, trees["cluster-b16-d2"], out)
        report["variants"] = json.loads(variants.to_json(orient="records"))
        report["grail"] = grail_comparison(base, trees["cluster-b16-d2"], out)
    if SHARED.exists():
        for kind in ("categories", "cluster-b16-d2"):
            spec = EvalScenario.model_validate({**base, "name": "reduction",
                                                "taxonomy": trees[kind]})
            report[f"reduction-{kind}"] = red = catalogue_reduction(spec, args.sample)
            print(kind, red["reduction_1level"], red["reduction_2level"], flush=True)
        spec = EvalScenario.model_validate({**base, "name": "routing",
                                            "taxonomy": trees["cluster-b16-d2"]})
        report["routing-cluster-b16-d2"] = routing_diagnostic(spec, args.sample)
    sizes = [n for n in (1_000, 3_000, 10_000, 30_000, 100_000, 300_000) if n <= args.max_n]
    sweep = search_space_sweep(sizes, [1, 2, 3, 4])
    sweep["measured"] = True
    sweep["formula"] = [d * b + SERVICE_SHARE * n / b**d for n, d, b in
                        zip(sweep.n_tools, sweep.depth, sweep.branching, strict=True)]
    if args.max_n >= 1_000_000:
        extra = []
        for d in (1, 2, 3, 4):
            n = 1_000_000
            b = max(2, math.ceil(n ** (1 / (d + 1))))
            c = d * b + SERVICE_SHARE * n / b**d
            extra.append({"n_tools": n, "depth": d, "branching": b, "examined": c,
                          "formula": c, "measured": False, "reduction_vs_all": 1 - c / n})
        sweep = pd.concat([sweep, pd.DataFrame(extra)], ignore_index=True)
    atomic_write(out / "search_space.csv", lambda tmp: sweep.to_csv(tmp, index=False))
    search_space(sweep, out / "search_space.png")
    report["search_space"] = json.loads(sweep.to_json(orient="records"))
    # the paper's setting: two levels, top-1 per level, ~14 top categories, 3×10⁴ tools
    paper = search_space_sweep([30_000], [2], queries=200).iloc[0].to_dict()
    ns14 = synthetic(n_tools=30_000, branching=14, depth=2, seed=0, n_queries=200)
    hier = InProcessHierarchy(ns14, make_scorer("bm25"))
    walks = [hier.walk(q.text, q.service, 10) for q in ns14.queries]
    ex14 = sum(w.examined for w in walks) / len(walks)
    report["paper_setting"] = {"balanced_optimum": paper, "b14_d2": {
        "n_tools": 30_000, "examined": ex14, "reduction_vs_all": 1 - ex14 / 30_000},
        "paper_reduction": PAPER_2LEVEL}
    atomic_write(out / "bench.json", lambda tmp: Path(tmp).write_text(
        json.dumps(report, indent=2, default=float), encoding="utf-8"))
    print(json.dumps(report["paper_setting"], indent=2, default=float))


if __name__ == "__main__":
    main()
