"""``tooldns eval``: discovery methods compared on retrieval quality, from an evaluation file
(scenarios/eval/*.yaml) or from ``--catalog``/``--queries`` and options."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sim.cli.common import (
    add_format_arg,
    check_out,
    consoles,
    error,
    progress,
    query_progress,
    say,
    stderr,
)

HELP = ("compare discovery methods on retrieval quality "
        "(a scenarios/eval/*.yaml file, or --catalog/--queries)")
DESCRIPTION = HELP


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", nargs="?", help="evaluation file (docs/eval-reference.md)")
    p.add_argument("--catalog", help="catalogue JSONL (format of shared/data/tools)")
    p.add_argument("--queries", help="queries JSONL (default: beside the catalogue)")
    p.add_argument("--methods", help="comma-separated: flat:S, context, "
                   "tooldns:S[:B[:score|global]], a2x:S:get_one|get_important|get_all, "
                   "grail[:no-maxsim|no-tags|no-pseudo|no-synonyms|intersect|alpha=X|"
                   "pseudo=N…], grail-intersect (S: bm25 tfidf dense maxsim llm llm-router); "
                   "GRAIL's pseudo-documents need --test-fraction (docs/grail.md)")
    p.add_argument("--out", help="output directory (default results/<name>)")
    p.add_argument("-k", "--k", type=int, default=10, help="K of hit@K and recall@K")
    p.add_argument("--sample", type=int, help="evaluate a seeded sample of this many queries")
    p.add_argument("--test-fraction", type=float, help="stratified test split, e.g. 0.4")
    p.add_argument("--taxonomy", choices=["categories", "cluster"], default="categories")
    p.add_argument("--branching", type=int, default=16, help="cluster: branching factor")
    p.add_argument("--depth", type=int, default=2, help="cluster: depth")
    p.add_argument("--leaf-size", type=int, default=40, help="cluster: A2X leaf cap")
    p.add_argument("--representatives", type=int, default=0,
                   help="route by each zone's N representative tools (MaxSim) instead of "
                   "its summary; each one scored counts as an item examined")
    p.add_argument("--vectors", choices=["tfidf", "dense"], default="tfidf",
                   help="cluster: the vectors the tree is clustered with")
    p.add_argument("--centroids", action="store_true",
                   help="route by each child's mean tool embedding for the query's service "
                   "(dense scorer; the servers do the same with Delegation.centroids)")
    p.add_argument("--seed", type=int, default=0, help="sampling, split and clustering")
    p.add_argument("--llm-url", help="OpenAI-compatible endpoint (base URL, e.g. "
                   "http://127.0.0.1:8080/v1) for the llm scorers and context; the API key, "
                   "if any, from $TOOLDNS_LLM_KEY (docs/llm.md)")
    p.add_argument("--llm-model", default="default")
    p.add_argument("--cache-dir", help="keep sentence embeddings on disk here")
    add_format_arg(p, "the method table")


def run(args: argparse.Namespace) -> int:
    from nodes.llmreply import LLMError
    from sim.evalspec import DEFAULT_METHODS, EvalScenario, load_eval, preflight
    from sim.retrieval.run import run_eval

    spec: EvalScenario | None = None
    try:
        check_out(args.out)
        if args.file:
            spec = load_eval(args.file)
            if args.llm_url:  # the command line's endpoint replaces the file's
                llm = {"url": args.llm_url} | (
                    {"model": args.llm_model} if args.llm_model != "default" else {})
                spec = spec.model_copy(update={"llm": spec.llm.model_copy(update=llm)})
            try:  # what would otherwise fail after the weights and the data are loaded
                preflight(spec)
            except ValueError as exc:
                raise ValueError(f"{args.file}: {exc}") from None
        elif args.catalog:
            spec = EvalScenario.model_validate({
                "name": Path(args.out).name if args.out else "eval", "seed": args.seed,
                "dataset": {"source": "catalog", "catalog": args.catalog,
                            "queries": args.queries, "sample": args.sample,
                            "test_fraction": args.test_fraction},
                "taxonomy": {"kind": args.taxonomy, "branching": args.branching,
                             "depth": args.depth, "leaf_size": args.leaf_size,
                             "representatives": args.representatives,
                             "vectors": args.vectors, "centroids": args.centroids},
                "methods": args.methods.split(",") if args.methods else DEFAULT_METHODS,
                "k": args.k, "llm": {"url": args.llm_url, "model": args.llm_model},
                "cache_dir": args.cache_dir})
        else:
            error("eval", "give an eval FILE or --catalog CATALOG.jsonl")
            return 2
        with query_progress() as tick:
            result = run_eval(spec, Path(args.out) if args.out else None,
                              progress=lambda m: progress(f"method {m}"), tick=tick)
    except (ValueError, LLMError) as exc:  # LLMError: the endpoint failed (docs/llm.md)
        error("eval", str(exc))
        return 2
    except KeyboardInterrupt:  # sim.retrieval.run.MethodStore kept the finished methods
        out = args.out or (spec.out or f"results/{spec.name}" if spec is not None
                           else "the output folder")
        stderr(f"tooldns eval: interrupted; finished methods are kept in {out}/.methods/, "
               f"run the same command again to resume")
        return 130
    from analysis.console import eval_grids
    from analysis.tables import markdown, print_grid

    grids = eval_grids(result["summary"], result["paired"], spec.k,
                       f"retrieval: {spec.name} (K = {spec.k})")
    if args.format == "table":
        for grid in grids:
            print_grid(grid, consoles.out)
    elif args.format == "markdown":
        sys.stdout.write("\n".join(markdown(g) for g in grids) + "\n")
    elif args.format == "csv":
        sys.stdout.write(result["summary"].to_csv(index=False))
    else:  # json
        sys.stdout.write(result["summary"].to_json(orient="records", indent=2) + "\n")
    if args.format != "table":
        progress(f"results in {result['out']}")
        return 0
    say(f"results in {result['out']}")
    return 0
