"""Workloads: which query each agent asks, and when.

Queries come from the namespace's query file (ground truth from the file) or are
generated from tool descriptions (labelled ``generated``). Popularity is uniform or Zipf
over a pool; arrivals are Poisson (open loop), closed loop (N agents with think time) or a
timestamped trace. Phases repeat the same sequence so cache warm-up shows.
"""

from __future__ import annotations

import csv
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import numpy as np

from sim.errors import ScenarioError, shown
from sim.scenario import Scenario
from topologies.namespace import Namespace, Query


@dataclass(frozen=True, slots=True)
class Job:
    """One query an agent will ask; ``at`` is the scheduled offset (None: closed loop).
    Slotted: a run holds one per query (about 100 bytes instead of 300)."""

    index: int
    phase: int
    agent: int
    query: Query
    at: float | None
    think: float = 0.0


def generated_queries(ns: Namespace, n: int, rng: random.Random) -> list[Query]:
    """Queries made from tool names and descriptions (for namespaces without a query file)."""
    ids = sorted(ns.tools)
    out: list[Query] = []
    for i in range(n):
        tool = ns.tools[ids[rng.randrange(len(ids))]]
        words = tool.description.split()
        start = rng.randrange(max(1, len(words) - 8))
        text = " ".join([tool.name.replace("/", " "), *words[start : start + 8]])
        out.append(Query(id=f"gen{i}", text=text, service=tool.service, truth=(tool.id,),
                         source="generated"))
    return out


def split_part(pool: list[Query], ns: Namespace, part: str, test_fraction: float,
               seed: int) -> list[Query]:
    """One part of the seeded train/test split of ``pool``, stratified by the zone of each
    query's first ground-truth tool (:func:`topologies.datasets.stratified_split`)."""
    from topologies.datasets import stratified_split

    def stratum(q: Query) -> str:
        tool = ns.tools.get(q.truth[0]) if q.truth else None
        return tool.zone if tool is not None else ""

    # typed for dataset rows, it only indexes the sequence and calls ``stratum`` on items
    split = cast(Callable[[list[Query], Callable[[Query], str], float, int],
                          tuple[list[Query], list[Query]]], stratified_split)
    train, test = split(pool, stratum, test_fraction, seed)
    return test if part == "test" else train


NO_QUERY_FILE = "workload.source: 'file' but the namespace has no query file"


def check_query_file(sc: Scenario) -> None:
    """ScenarioError when ``workload.source: file`` has no query file to draw from: a
    synthetic namespace (its queries are generated) or a catalogue without ``queries``
    and without queries.jsonl beside it. Checked before anything is built."""
    ns = sc.namespace
    if sc.workload.source != "file":
        return
    if ns.source == "synthetic":
        raise ScenarioError(f"{NO_QUERY_FILE} (a synthetic namespace's queries are generated; "
                            f"use source: auto or generated)")
    beside = Path(ns.catalog).parent / "queries.jsonl" if ns.catalog else None
    if ns.queries is None and (beside is None or not beside.exists()):
        raise ScenarioError(f"{NO_QUERY_FILE} (set namespace.queries, or put queries.jsonl "
                            f"beside the catalogue)")


def query_pool(sc: Scenario, ns: Namespace) -> list[Query]:
    """The distinct queries the workload draws from, in a seeded order."""
    check_query_file(sc)
    rng = random.Random(f"pool-{sc.seed}")
    wl = sc.workload
    from_file = bool(ns.queries) and ns.queries[0].source != "generated"
    if wl.source == "file" and not from_file:
        raise ScenarioError(NO_QUERY_FILE)
    if ns.queries and not (wl.source == "generated" and from_file):
        pool = list(ns.queries)  # a query file, or a synthetic namespace's own queries
    else:
        pool = generated_queries(ns, wl.pool or wl.queries, rng)
    if wl.split is not None:
        pool = split_part(pool, ns, wl.split.part, wl.split.test_fraction, sc.seed)
    if wl.services:
        pool = [q for q in pool if q.service in wl.services]
    rng.shuffle(pool)
    if wl.pool:
        pool = pool[: wl.pool]
    if not pool:
        raise ScenarioError("workload: no queries left after filtering (split/services/pool)")
    return pool


def _picks(sc: Scenario, n_pool: int, rng: np.random.Generator) -> np.ndarray:
    wl = sc.workload
    if wl.popularity == "uniform":
        return rng.integers(0, n_pool, size=wl.queries)
    ranks = np.arange(1, n_pool + 1, dtype=float)
    weights = ranks ** (-wl.zipf_s)
    return rng.choice(n_pool, size=wl.queries, p=weights / weights.sum())


def _trace(path: str, pool: list[Query]) -> list[tuple[float, Query]]:
    by_text = {q.text: q for q in pool}
    by_id = {q.id: q for q in pool}
    out: list[tuple[float, Query]] = []
    with Path(path).open(encoding="utf-8", newline="") as fh:
        for line, row in enumerate(csv.DictReader(fh), 2):
            try:
                t = float(row["time"])
                key = row["query"]
            except (KeyError, TypeError, ValueError):
                raise ScenarioError(f"workload.arrival.trace: line {line}: need columns "
                                    f"time,query ({path})") from None
            q = by_id.get(key) or by_text.get(key)
            if q is None:
                raise ScenarioError(f"workload.arrival.trace: line {line}: query "
                                    f"{shown(key)} is not in the pool ({path})")
            out.append((t, q))
    return sorted(out, key=lambda x: x[0])


def build_jobs(sc: Scenario, ns: Namespace, n_agents: int) -> list[Job]:
    """All jobs of all phases, in schedule order."""
    pool = query_pool(sc, ns)
    rng = np.random.default_rng([sc.seed, 7])
    arrival = sc.workload.arrival
    if arrival.process == "trace":
        assert arrival.trace is not None
        base = _trace(arrival.trace, pool)
    else:
        picks = _picks(sc, len(pool), rng)
        if arrival.process == "poisson":
            times = np.cumsum(rng.exponential(1.0 / arrival.rate, size=len(picks)))
        else:
            times = np.zeros(len(picks))
        base = [(float(t), pool[int(i)]) for t, i in zip(times, picks, strict=True)]
    span = (base[-1][0] if base else 0.0) + sc.workload.gap
    jobs: list[Job] = []
    for phase in range(sc.workload.phases):
        for i, (t, q) in enumerate(base):
            at = t + phase * span
            if sc.duration is not None and at > sc.duration:
                break
            think = float(rng.exponential(arrival.think)) if arrival.think > 0 else 0.0
            jobs.append(Job(index=len(jobs), phase=phase, agent=i % n_agents, query=q,
                            at=None if arrival.process == "closed" else at, think=think))
    return jobs
