"""Learned routing: zones' routing vectors built from a training query log.

A zone's centroid for a service (:func:`topologies.taxonomy.add_centroids`) is normally
the mean embedding of its subtree's tool descriptions. With a query log, every tool is
represented by a *pseudo-document*: its ``name description`` plus up to ``per_tool``
training queries whose ground truth names it (in log order), each embedded, the unit
vectors averaged and normalised. A zone's centroid is then the normalised mean of its
subtree's pseudo-documents, and is carried to the parent exactly as a plain centroid is
(``Delegation.centroids``): servers route with it over the wire, unchanged.

The log is the training part of a seeded split (:func:`log_split`, stratified by the
catalogue's leaf category, as ``tooldns eval``'s ``dataset.test_fraction`` splits). Only
the test part is evaluated or replayed, and training queries whose text is also a test
query's are dropped, so no evaluated text reaches the routing data.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence

import numpy as np

from topologies.datasets import Row, canonical_id, category_of, stratified_split
from topologies.namespace import Namespace

Encoder = Callable[[Sequence[str]], np.ndarray]


def log_split(rows: Sequence[Row], queries: Sequence[Row], test_fraction: float,
              seed: int) -> tuple[list[Row], list[Row]]:
    """(training log, test queries): the seeded split stratified by the leaf category of
    each query's first tool; training rows whose text is also a test query's are dropped."""
    cats = {r["id"]: category_of(r) for r in rows}
    train, test = stratified_split(queries, lambda q: cats[q["tool_ids"][0]], test_fraction,
                                   seed)
    return without_held_out(train, test), test


def without_held_out(train: Sequence[Row], test: Sequence[Row]) -> list[Row]:
    """``train`` without the rows whose text (case and spaces aside) is a test query's."""
    held_out = {q["query"].strip().lower() for q in test}
    return [r for r in train if r["query"].strip().lower() not in held_out]


def _unit(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.where(norms == 0, 1.0, norms)


def pseudo_vectors(ns: Namespace, encoder: Encoder, log: Sequence[Row], per_tool: int
                   ) -> tuple[list[str], np.ndarray]:
    """(tool ids in sorted order, one unit pseudo-document vector per tool): the normalised
    mean of the unit embeddings of the tool's ``name description`` and of its first
    ``per_tool`` log queries. A multi-parent copy gets its catalogue tool's vector."""
    ids = sorted(ns.tools)
    desc = _unit(np.asarray(encoder(
        [f"{ns.tools[t].name} {ns.tools[t].description}" for t in ids]), dtype=float))
    asked: dict[str, list[str]] = defaultdict(list)
    for row in log:
        for tid in dict.fromkeys(row["tool_ids"]):
            if len(asked[tid]) < per_tool:
                asked[tid].append(row["query"])
    texts = sorted({q for qs in asked.values() for q in qs})
    qvec = dict(zip(texts, _unit(np.asarray(encoder(texts), dtype=float)), strict=True)) \
        if texts else {}
    out = desc.copy()
    for i, tid in enumerate(ids):
        qs = asked.get(canonical_id(tid), [])
        if qs:
            out[i] = _unit(desc[i] + np.sum([qvec[q] for q in qs], axis=0))
    return ids, out


def log_coverage(ns: Namespace, log: Sequence[Row]) -> set[str]:
    """Catalogue ids of the tools some log query names (the rest route by description)."""
    known = {canonical_id(t) for t in ns.tools}
    return {t for row in log for t in row["tool_ids"] if t in known}
