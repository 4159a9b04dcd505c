"""The namespace a taxonomy specification builds over catalogue rows.

Shared by retrieval evaluations (``taxonomy:``) and network scenarios
(``namespace.taxonomy``): the tree of :mod:`topologies.taxonomy` (clustered or the
catalogue's own categories), then routing representatives and centroids (learned from a
training query log with ``routing_log``, :mod:`topologies.learned`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

from nodes.llmreply import ChatTransport
from nodes.scoring import Encoder, default_encoder
from topologies.datasets import Row
from topologies.learned import pseudo_vectors
from topologies.llmlabels import llm_labels
from topologies.namespace import Namespace
from topologies.taxonomy import (
    TaxonomyConfig,
    add_centroids,
    add_representatives,
    build_taxonomy,
    from_categories,
)


class TaxonomyOptions(Protocol):
    """The fields read here (``sim.evalspec.TaxonomySpec`` has them)."""

    @property
    def kind(self) -> Literal["categories", "cluster"]: ...
    @property
    def branching(self) -> int: ...
    @property
    def depth(self) -> int: ...
    @property
    def leaf_size(self) -> int: ...
    @property
    def min_size(self) -> int: ...
    @property
    def multi_parent(self) -> float: ...
    @property
    def vectors(self) -> Literal["tfidf", "dense"]: ...
    @property
    def summary_terms(self) -> int: ...
    @property
    def summary_examples(self) -> int: ...
    @property
    def representatives(self) -> int: ...
    @property
    def representative_vectors(self) -> Literal["tfidf", "dense"]: ...
    @property
    def centroids(self) -> bool: ...
    @property
    def routing_log(self) -> RoutingLog | None: ...
    @property
    def labels(self) -> Literal["terms", "llm"]: ...


class RoutingLog(Protocol):
    """Learned routing's fields (``sim.evalspec.RoutingLogSpec``)."""

    @property
    def per_tool(self) -> int: ...
    @property
    def test_fraction(self) -> float: ...


def taxonomy_namespace(tx: TaxonomyOptions, rows: Sequence[Row], queries: Sequence[Row],
                       seed: int = 0, origin: str = "taxonomy",
                       encoder: Encoder | None = None, log: Sequence[Row] = (),
                       chat: ChatTransport | None = None) -> Namespace:
    """The namespace a taxonomy spec builds over catalogue rows (also used by network
    scenarios, ``namespace.taxonomy``): the tree, then representatives and centroids (of
    pseudo-documents from the training queries ``log`` with ``routing_log``)."""
    if tx.kind == "categories":
        tax = from_categories(rows, tx.min_size)
    else:
        tax = build_taxonomy(rows, TaxonomyConfig(
            branching=tx.branching, depth=tx.depth, leaf_size=tx.leaf_size,
            min_size=tx.min_size, multi_parent=tx.multi_parent, vectors=tx.vectors,
            summary_terms=tx.summary_terms, summary_examples=tx.summary_examples,
            seed=seed), encoder=encoder)
    if tx.labels == "llm":  # zones named by the model behind ``chat`` (docs/llm.md)
        if tx.kind != "cluster" or chat is None:
            raise ValueError("taxonomy.labels: llm names the zones of a clustered tree (kind: "
                             "cluster) through an LLM endpoint (an eval file's llm.url)")
        tax = llm_labels(tax, rows, chat)
    ns = tax.namespace(rows, queries, origin=origin)
    if tx.representatives:
        rep_encoder = None
        if tx.representative_vectors == "dense":
            rep_encoder = encoder or default_encoder()
        add_representatives(ns, tx.representatives, rep_encoder, seed)
    if tx.centroids:
        enc = encoder or default_encoder()
        learned = (pseudo_vectors(ns, enc, log, tx.routing_log.per_tool)
                   if tx.routing_log is not None else None)
        add_centroids(ns, enc, learned)
        ns.pseudo_documents = learned
    return ns
