"""The search compute model's coefficients, measured: seconds to rank N items for one intent.

What it measures
    For each scorer of ``namespace.scorer`` (bm25, tfidf, dense, oracle): the time a node
    spends ranking its items for one new intent (the scorer's own ``rank``, or ``top_k``
    over ``scores``, exactly what a server and a registry call), over indexes of N item
    texts for N in ``--sizes``. A least-squares line ``encode + per_item × N`` is fitted
    per scorer, and printed beside the coefficients the testbed ships
    (:data:`nodes.searchcost.COSTS`, the ``index`` processing model), with their ratio.

How
    The item texts and intents are a synthetic readable namespace's tool descriptions and
    queries (``topologies.synthetic``, seed 0). Every timed call ranks an intent the index
    has not seen, so nothing is answered from a memo. Dense is timed in two parts, as the
    encoder's time varies too much here to fit beside the ranking's: embedding one new
    intent with the MiniLM encoder uncached (what a server without an embedding cache
    pays; the median over all sizes), and scoring plus ranking the N vectors. Each size is
    timed ``--repeat`` times over ``--intents`` intents and the median per call is kept.

Run
    python3 benchmarks/bench_search_cost.py                  # all scorers
    python3 benchmarks/bench_search_cost.py --scorers bm25 tfidf --sizes 8 64 512 4096
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nodes.scoring import make_scorer, minilm_encoder, ranker, top_k
from nodes.searchcost import COSTS, MACHINE
from topologies.synthetic import synthetic


def per_call(scorer_name: str, texts: list[str], intents: list[str], repeat: int) -> float:
    """Median seconds per ``rank(intent, 10)`` over ``texts``, each intent new to the index."""
    kwargs = {"encoder": minilm_encoder()} if scorer_name == "dense" else {}
    scorer = make_scorer(scorer_name, **kwargs)
    rank = ranker(scorer.index([str(i) for i in range(len(texts))], texts))
    rank(intents[0], 10)  # first use builds lazy parts (numpy columns)
    times = []
    for r in range(repeat):
        batch = [f"{q} {r}" for q in intents]  # a new text each round: no memo helps
        t0 = time.perf_counter()
        for q in batch:
            rank(q, 10)
        times.append((time.perf_counter() - t0) / len(batch))
    return statistics.median(times)


def dense_parts(texts: list[str], intents: list[str], repeat: int) -> tuple[float, float]:
    """Dense apart: median seconds to embed one new intent (MiniLM, uncached), and median
    seconds to score and rank ``texts``' vectors for an embedded one (what varies with N;
    the encoder's time is too noisy here to fit the two together)."""
    encode = minilm_encoder()
    matrix = np.asarray(encode(texts), dtype=np.float32)
    vectors = np.asarray(encode(intents), dtype=np.float32)
    enc, rank = [], []
    for r in range(repeat):
        t0 = time.perf_counter()
        for q in intents:
            encode([f"{q} {r}"])
        enc.append((time.perf_counter() - t0) / len(intents))
        t0 = time.perf_counter()
        for v in vectors:
            top_k((matrix @ v).astype(float), 10)
        rank.append((time.perf_counter() - t0) / len(intents))
    return statistics.median(enc), statistics.median(rank)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scorers", nargs="+", default=["bm25", "tfidf", "oracle", "dense"])
    ap.add_argument("--sizes", nargs="+", type=int, default=[8, 32, 128, 512, 2048, 8192])
    ap.add_argument("--intents", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    ns = synthetic(n_tools=max(args.sizes), branching=8, depth=2, vocabulary="readable",
                   n_queries=args.intents)
    texts = [t.description for t in ns.tools.values()]
    intents = [q.text for q in list(ns.queries)[:args.intents]]
    print(f"shipped coefficients measured on: {MACHINE}")
    print(f"{'scorer':8} {'N':>6} {'µs/call':>10}")
    for name in args.scorers:
        sizes = np.array(args.sizes, dtype=float)
        if name == "dense":  # the embedding once, plus the ranking's line in N
            parts = [dense_parts(texts[:n], intents, args.repeat) for n in args.sizes]
            embed = statistics.median(e for e, _ in parts)
            secs = np.array([embed + r for _, r in parts])
            print(f"{name:8} embedding one intent: {embed * 1e6:.1f} µs (median)")
        else:
            secs = np.array([per_call(name, texts[:n], intents, args.repeat)
                             for n in args.sizes])
        for n, s in zip(args.sizes, secs, strict=True):
            print(f"{name:8} {n:>6} {s * 1e6:>10.1f}")
        per_item, encode = np.polyfit(sizes, secs, 1)
        shipped = COSTS[name]
        print(f"{name:8} fit: encode {encode * 1e6:.1f} µs + {per_item * 1e9:.1f} ns/item; "
              f"shipped: {shipped.encode * 1e6:.1f} µs + {shipped.per_item * 1e9:.1f} ns/item"
              f" (measured/shipped at N=2048: "
              f"{(encode + per_item * 2048) / max(shipped.seconds(2048), 1e-12):.2f})")


if __name__ == "__main__":
    main()
