"""The search compute model: what ranking items for one intent costs a node, by scorer.

One node's ranking pass costs ``encode + per_item × items``: ``encode`` is turning the
intent into what the scorer compares (tokens for BM25 and TF-IDF, a MiniLM embedding for
dense) plus the pass's fixed overhead, ``per_item`` each item scored. The coefficients are
measured on the machine named in :data:`MACHINE` by ``benchmarks/bench_search_cost.py``
(which prints its fit beside these), and shipped, so a run stays deterministic.

Both sides are charged by the same model (``processing.model: fixed`` with
``server_semantic: index`` and ``registry: index``, the defaults): a ToolDNS server for
each query carrying the intent (its zone's children or tools), a registry for each search
(its service pool). The records' ``encodings`` and ``compute_ns`` columns count the same
passes whatever the latency model says (what a server or registry scores per pass:
:meth:`topologies.namespace.Namespace.scored_items`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SearchCost:
    """One ranking pass's cost (seconds): ``encode`` once, ``per_item`` per item scored."""

    encode: float
    per_item: float

    def seconds(self, items: int) -> float:
        return self.encode + self.per_item * items

    def search(self, items: int) -> float:
        """A registry request's search time: nothing when it ranked nothing (ANS's agent
        listing: its client ranks)."""
        return self.seconds(items) if items else 0.0


#: where and how :data:`COSTS` were measured
MACHINE = ("a shared 2-core AMD EPYC KVM guest, Python 3.11.7, 2026-11-29: "
           "`python3 benchmarks/bench_search_cost.py`; bm25 the median of 3 runs' fits, "
           "tfidf and oracle the mean of 2, dense 1 run timed in parts (HISTORY §36)")

#: per scorer (``namespace.scorer``); measured, see the module docstring
COSTS: dict[str, SearchCost] = {
    "bm25": SearchCost(encode=8.8e-6, per_item=34e-9),
    "tfidf": SearchCost(encode=1.0e-3, per_item=98e-9),
    "oracle": SearchCost(encode=6.0e-6, per_item=75e-9),
    "dense": SearchCost(encode=13.4e-3, per_item=168e-9),
}


def cost_of(scorer: str) -> SearchCost:
    """The model's cost for ``scorer`` (a scorer without one costs as BM25)."""
    return COSTS.get(scorer, COSTS["bm25"])

