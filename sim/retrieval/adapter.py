"""``flat:dense-adapter``: flat dense retrieval with a linear query adapter learnt from the
training split — a stand-in for a retrained retriever, not one.

Fine-tuning MiniLM itself on the training split's (query, tool) pairs was measured on this
2-core CPU at ≈ 1.1 s per batch of 32 (360 batches, ≈ 6.4 min per epoch) plus ≈ 4.8 min to
re-embed the catalogue (HISTORY.md), more than an evaluation should spend. What is fitted
here instead, in a second: a matrix W (d × d) on the frozen encoder's query side,
minimising ‖Q·W − T‖² + λ‖W − I‖² over the training pairs (Q: query embeddings, T: the
embeddings of their tools' name + description), closed form
W = (QᵀQ + λI)⁻¹(QᵀT + λI). A query is embedded, multiplied by W, renormalised and scored
by cosine against the unchanged tool vectors of its service. λ is chosen from
:data:`RIDGE` on a seeded 10 % of the training queries (hit@10 against every tool), then
W is refitted on all of them. No evaluated query is read: only ``train``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from nodes.scoring import Encoder, approx_tokens
from sim.retrieval.ranked import Ranked
from topologies.datasets import Row, canonical_id
from topologies.namespace import Namespace

RIDGE = (0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0)  # λ candidates
VALIDATION = 0.1  # share of the training queries that picks λ


def fit_adapter(q: np.ndarray, t: np.ndarray, lam: float) -> np.ndarray:
    """W = argmin ‖q·W − t‖² + λ‖W − I‖² (ridge towards the identity)."""
    d = q.shape[1]
    eye = np.eye(d)
    gram = q.T.astype(np.float64) @ q + lam * eye
    return np.linalg.solve(gram, q.T.astype(np.float64) @ t + lam * eye).astype(np.float32)


def _unit(m: np.ndarray) -> np.ndarray:
    return m / np.maximum(np.linalg.norm(m, axis=-1, keepdims=True), 1e-12)


class AdapterIndex:
    """Per service, the tools' embeddings; one query adapter fitted on ``train`` (module
    doc). ``info`` records the fit: pairs, the λ chosen and each λ's validation hit@10."""

    def __init__(self, ns: Namespace, encoder: Encoder, train: Sequence[Row], seed: int = 0,
                 ridge: Sequence[float] = RIDGE, k: int = 10) -> None:
        self.encoder = encoder
        groups: dict[str, list[str]] = defaultdict(list)
        for tid in sorted(ns.tools):
            if canonical_id(tid) == tid:
                groups[ns.tools[tid].service].append(tid)
        ids = [t for s in sorted(groups) for t in groups[s]]
        texts = [f"{ns.tools[t].name} {ns.tools[t].description}" for t in ids]
        vecs = np.asarray(encoder(texts), dtype=np.float32) if ids else np.zeros((0, 1))
        pos = {t: i for i, t in enumerate(ids)}
        self.by_service: dict[str, tuple[np.ndarray, list[str], int]] = {}
        for service, members in groups.items():
            rows = [pos[t] for t in members]
            self.by_service[service] = (vecs[rows], members, sum(
                approx_tokens(texts[i]) for i in rows))
        pairs = [(r["query"], pos[t]) for r in train for t in r["tool_ids"] if t in pos]
        self.info: dict[str, object] = {"pairs": len(pairs), "lambda": None, "validation": {}}
        dim = vecs.shape[1] if len(ids) else 1
        self.w = np.eye(dim, dtype=np.float32)
        if len(pairs) < 2:
            return
        queries = sorted({q for q, _ in pairs})
        qvec = np.asarray(encoder(queries), dtype=np.float32)
        qpos = {q: i for i, q in enumerate(queries)}
        qi = np.array([qpos[q] for q, _ in pairs])
        ti = np.array([t for _, t in pairs])
        rng = np.random.default_rng(seed)
        held = rng.random(len(queries)) < VALIDATION
        fit, val = ~held[qi], held[qi]
        if fit.any() and val.any():
            scores = {}
            for lam in ridge:
                w = fit_adapter(qvec[qi[fit]], vecs[ti[fit]], lam)
                sims = _unit(qvec[qi[val]] @ w) @ vecs.T
                top = np.argpartition(-sims, min(k, sims.shape[1] - 1), axis=1)[:, :k]
                scores[lam] = float(np.mean([t in row for t, row in zip(ti[val], top,
                                                                         strict=True)]))
            best = max(ridge, key=lambda lam: (scores[lam], -lam))
            self.info["validation"] = scores
        else:
            best = ridge[len(ridge) // 2]
        self.info["lambda"] = best
        self.w = fit_adapter(qvec[qi], vecs[ti], best)

    def rank(self, intent: str, service: str, k: int) -> Ranked:
        matrix, ids, tok = self.by_service.get(service, (np.zeros((0, 1)), [], 0))
        if not ids:
            return Ranked([], 0, 0, approx_tokens(intent))
        q = _unit(np.asarray(self.encoder([intent])[0], dtype=np.float32) @ self.w)
        sims = matrix @ q
        idx = np.arange(len(ids))
        order = idx[np.lexsort((idx, -sims))]
        chosen = order if k == 0 else order[:k]
        return Ranked([ids[i] for i in chosen], len(ids), len(ids), tok + approx_tokens(intent))
