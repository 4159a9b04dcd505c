"""What an evaluation reads: the catalogue, its queries split into training and evaluated
ones, and a seeded sample of the evaluated queries."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from sim.evalspec import EvalScenario
from topologies.datasets import (
    Row,
    category_of,
    load_catalog,
    load_queries,
    load_tooldns_release,
    stratified_split,
    synthetic_catalog,
    tool_split,
)
from topologies.namespace import Query


def sample_queries(queries: Sequence[Query], n: int | None, seed: int) -> list[Query]:
    """A seeded sample of ``n`` queries (all when ``n`` is None or larger)."""
    if n is None or n >= len(queries):
        return list(queries)
    rng = np.random.default_rng(seed)
    idx = np.sort(rng.choice(len(queries), size=n, replace=False))
    return [queries[i] for i in idx]


def category_map(rows: Sequence[Row]) -> dict[str, str]:
    """Catalogue tool id -> its leaf category label path."""
    return {r["id"]: category_of(r) for r in rows}


def load_dataset(spec: EvalScenario) -> tuple[list[Row], list[Row]]:
    """(tools, evaluated queries): the test split when ``dataset.test_fraction`` is set."""
    rows, _, queries = load_split(spec)
    return rows, queries


def load_split(spec: EvalScenario) -> tuple[list[Row], list[Row], list[Row]]:
    """(tools, training queries, evaluated queries). Without ``dataset.test_fraction``
    (or ``taxonomy.routing_log``) every query is evaluated and the training list is empty."""
    ds = spec.dataset
    if ds.source == "synthetic":
        rows, queries = synthetic_catalog(ds.tools, ds.branching, ds.depth, spec.seed,
                                          n_queries=ds.sample or 500)
    elif ds.source == "tooldns-release":
        if not ds.catalog:
            raise ValueError("dataset.catalog: the ToolDNS release file is needed")
        rows, queries = load_tooldns_release(ds.catalog)
    else:
        if not ds.catalog:
            raise ValueError("dataset.catalog: a catalogue JSONL is needed")
        rows = load_catalog(ds.catalog, ds.limit, ds.protocols)
        qpath = ds.queries or str(Path(ds.catalog).parent / "queries.jsonl")
        queries = load_queries(qpath, [r["id"] for r in rows]) if Path(qpath).exists() else []
    train: list[Row] = []
    log = spec.taxonomy.routing_log  # learned routing splits as dataset.test_fraction does
    fraction = ds.test_fraction if ds.test_fraction is not None else (
        log.test_fraction if log is not None else None)
    cats = category_map(rows) if fraction is not None else {}
    if fraction is not None and ds.split == "by-tool":
        train, queries, _ = tool_split(queries, lambda t: cats.get(t, ""), ds.unseen_tools,
                                       fraction, spec.seed)
    elif fraction is not None:
        train, queries = stratified_split(queries, lambda q: cats[q["tool_ids"][0]],
                                          fraction, spec.seed)
    return rows, train, queries

