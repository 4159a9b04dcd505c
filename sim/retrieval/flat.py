"""``flat:SCORER``: one index over every tool of the query's service (ToolLLM-style)."""

from __future__ import annotations

from collections import defaultdict

from nodes.scoring import Ranker, Scorer, approx_tokens, ranker
from sim.retrieval.ranked import Ranked
from topologies.datasets import canonical_id
from topologies.namespace import Namespace


class FlatIndex:
    """One index per service over every tool offering it."""

    def __init__(self, ns: Namespace, scorer: Scorer) -> None:
        self.by_service: dict[str, tuple[Ranker, list[str], int]] = {}
        groups: dict[str, list[str]] = defaultdict(list)
        for tid in sorted(ns.tools):
            if canonical_id(tid) == tid:  # multi-parent copies are the same tool
                groups[ns.tools[tid].service].append(tid)
        for service, ids in groups.items():
            texts = [f"{ns.tools[t].name} {ns.tools[t].description}" for t in ids]
            self.by_service[service] = (ranker(scorer.index(ids, texts)), ids,
                                        sum(approx_tokens(x) for x in texts))

    def rank(self, intent: str, service: str, k: int) -> Ranked:
        rank, ids, tok = self.by_service.get(service, (None, [], 0))
        chosen = rank(intent, k) if rank is not None else []
        return Ranked([ids[i] for i in chosen], len(ids), len(ids), tok + approx_tokens(intent))

