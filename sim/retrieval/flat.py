"""``flat:SCORER``: one index over every tool of the query's service (ToolLLM-style);
``flat-log:dense``: the same over the tools' pseudo-documents (description plus training
queries, :func:`topologies.learned.pseudo_vectors`), flat retrieval that also reads the log."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from nodes.scoring import Ranker, Scorer, approx_tokens, centroid_index, ranker
from sim.retrieval.ranked import Ranked
from topologies.datasets import canonical_id
from topologies.namespace import Namespace


class FlatIndex:
    """One index per service over every tool offering it; by the tools' texts, or by
    ``vectors`` (tool id -> unit vector, scored by cosine) when given."""

    def __init__(self, ns: Namespace, scorer: Scorer,
                 vectors: dict[str, np.ndarray] | None = None) -> None:
        self.by_service: dict[str, tuple[Ranker, list[str], int]] = {}
        groups: dict[str, list[str]] = defaultdict(list)
        for tid in sorted(ns.tools):
            if canonical_id(tid) == tid:  # multi-parent copies are the same tool
                groups[ns.tools[tid].service].append(tid)
        for service, ids in groups.items():
            texts = [f"{ns.tools[t].name} {ns.tools[t].description}" for t in ids]
            index = (scorer.index(ids, texts) if vectors is None
                     else centroid_index(scorer, ids, [vectors[t].tolist() for t in ids]))
            self.by_service[service] = (ranker(index), ids,
                                        sum(approx_tokens(x) for x in texts))

    def rank(self, intent: str, service: str, k: int) -> Ranked:
        rank, ids, tok = self.by_service.get(service, (None, [], 0))
        chosen = rank(intent, k) if rank is not None else []
        return Ranked([ids[i] for i in chosen], len(ids), len(ids), tok + approx_tokens(intent))
