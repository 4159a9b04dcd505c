"""Workloads: which query each agent asks, and when.

Queries come from the namespace's query file (ground truth from the file) or are
generated from tool descriptions (labelled ``generated``). Popularity is uniform or Zipf
over a pool; arrivals are Poisson (open loop), closed loop (N agents with think time) or a
timestamped trace. Phases repeat the same sequence so cache warm-up shows.
"""

from __future__ import annotations

import bisect
import csv
import random
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast, overload

import numpy as np

from sim.errors import ScenarioError, shown
from sim.scenario import Scenario
from topologies.namespace import Namespace, Query
from topologies.ondemand import OnDemand
from topologies.synthetic import DrawnQueries


@dataclass(frozen=True, slots=True)
class Job:
    """One query an agent will ask; ``at`` is the scheduled offset (None: closed loop).
    Slotted: a run holds one per query (about 100 bytes instead of 300)."""

    index: int
    phase: int
    agent: int
    query: Query
    at: float | None
    think: float = 0.0  # seconds the agent waits after it (a closed loop's; else 0)


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
    first = next(iter(ns.queries), None)
    from_file = first is not None and first.source != "generated"
    if wl.source == "file" and not from_file:
        raise ScenarioError(NO_QUERY_FILE)
    own = first is not None and not (wl.source == "generated" and from_file)
    if own and wl.pool and wl.split is None and not wl.services:
        # Shuffling depends only on the length: shuffle positions, then make only the
        # pool's queries (a synthetic namespace draws them again: DrawnQueries.take).
        order = array("q", range(len(ns.queries)))
        rng.shuffle(order)
        picked, queries = order[: wl.pool], ns.queries
        if isinstance(queries, DrawnQueries):
            return queries.take(picked)
        return [queries[i] for i in picked]
    # a query file, or a synthetic namespace's own queries; else made from descriptions
    pool = list(ns.queries) if own else generated_queries(ns, wl.pool or wl.queries, rng)
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


def pick_dtype(n_pool: int) -> type[np.signedinteger]:
    """The narrowest type for positions in a pool of ``n_pool`` queries (2 or 4 bytes)."""
    return np.int16 if n_pool < 2**15 else np.int32 if n_pool < 2**31 else np.int64


#: jobs whose pool positions are drawn at once (numpy's draws of a whole run, as 64-bit
#: integers, would be 8 MB of transient per 10^6 jobs)
PICK_BLOCK = 1 << 16


def _picks(sc: Scenario, n_pool: int, rng: np.random.Generator,
           block: int = PICK_BLOCK) -> np.ndarray:
    """Each job's position in the pool, stored narrow. Drawn ``block`` at a time: the same
    values, and the generator left in the same state, as one draw of them all (uniform: a
    bounded 32-bit draw per job, whose halves of a 64-bit output the bit generator keeps
    between calls; Zipf: one double per job), which ``tests/sim/build/test_workload.py``
    checks against one draw."""
    wl = sc.workload
    out = np.empty(wl.queries, dtype=pick_dtype(n_pool))
    draw = np.int32 if n_pool <= 2**31 else np.int64  # not int16: 16-bit draws differ
    p = None
    if wl.popularity != "uniform":
        weights = np.arange(1, n_pool + 1, dtype=float) ** (-wl.zipf_s)
        p = weights / weights.sum()
    for lo in range(0, wl.queries, block):
        m = min(block, wl.queries - lo)
        out[lo:lo + m] = (rng.integers(0, n_pool, size=m, dtype=draw) if p is None
                          else rng.choice(n_pool, size=m, p=p))
    return out


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


class PoissonTimes:
    """Poisson arrival times, ``np.cumsum(rng.exponential(scale, size=n))`` bit for bit,
    made a block at a time: a run holds the generator's state and the time before each
    block of :attr:`BLOCK` jobs instead of 8 bytes a job. numpy draws the same gaps in
    blocks as all at once, and its cumulative sum adds them one by one, so a block summed
    on from the time before it gives the same floats. ``rng`` is left where drawing every
    gap at once would leave it. Read in order (as the open loop does), each block is drawn
    twice: once here, once when read."""

    BLOCK = 1 << 16

    def __init__(self, rng: np.random.Generator, scale: float, n: int) -> None:
        self.scale, self.n = scale, n
        self._kind = type(rng.bit_generator)
        self._marks: list[tuple[Mapping[str, Any], float]] = []  # per block: state, time before
        before = 0.0
        for lo in range(0, n, self.BLOCK):
            self._marks.append((rng.bit_generator.state, before))
            gaps = rng.exponential(scale, size=min(self.BLOCK, n - lo))
            before = float(self._summed(gaps, before)[-1])
        self.last = before  # the last job's time (0.0 without jobs)
        self._held: tuple[int, np.ndarray] | None = None  # the block read last

    @staticmethod
    def _summed(gaps: np.ndarray, before: float) -> np.ndarray:
        return np.cumsum(np.concatenate(([before], gaps)))[1:]

    def _block(self, b: int) -> np.ndarray:
        held = self._held
        if held is not None and held[0] == b:
            return held[1]
        state, before = self._marks[b]
        rng = np.random.Generator(self._kind(0))  # any seed: the saved state replaces it
        rng.bit_generator.state = state
        lo = b * self.BLOCK
        times = self._summed(rng.exponential(self.scale, size=min(self.BLOCK, self.n - lo)),
                             before)
        self._held = (b, times)
        return times

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> float:
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError(f"arrival {i} of {self.n}")
        return float(self._block(i // self.BLOCK)[i % self.BLOCK])

    def __iter__(self) -> Iterator[float]:
        for b in range(len(self._marks)):
            yield from self._block(b).tolist()

    def __getstate__(self) -> dict[str, Any]:  # pickled (shards) without the block held
        return {**self.__dict__, "_held": None}


class Jobs(OnDemand[Job]):
    """All jobs of all phases in schedule order, each made when it is read.

    A run of 10^6 discoveries would hold 10^6 :class:`Job` objects (~110 bytes each); this
    holds the pool and one small number per job (its pool position; a closed loop's think
    time; its time from a trace, Poisson times are drawn again a block at a time:
    :class:`PoissonTimes`)
    and makes the same jobs on demand: job ``j`` of phase ``p`` is the ``i``-th draw
    (``j`` = the jobs of earlier phases + ``i``), asked by agent ``i % agents`` at
    ``times[i] + p * span`` (``times`` None: a closed loop, ``at`` None) after
    ``thinks[j]`` (None: no think time).
    """

    def __init__(self, pool: list[Query], picks: np.ndarray,
                 times: np.ndarray | PoissonTimes | None,
                 thinks: np.ndarray | None, counts: list[int], span: float,
                 agents: int) -> None:
        self.pool, self.picks, self.times, self.thinks = pool, picks, times, thinks
        self.counts, self.span, self.agents = counts, span, agents
        self.starts = [sum(counts[:p]) for p in range(len(counts))]  # first index per phase
        self._n = sum(counts)

    def _job(self, j: int, phase: int, i: int) -> Job:
        thinks, times = self.thinks, self.times
        return Job(index=j, phase=phase, agent=i % self.agents,
                   query=self.pool[int(self.picks[i])],
                   at=None if times is None else float(times[i]) + phase * self.span,
                   think=0.0 if thinks is None else float(thinks[j]))

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, j: int) -> Job: ...
    @overload
    def __getitem__(self, j: slice) -> list[Job]: ...
    def __getitem__(self, j: int | slice) -> Job | list[Job]:
        if isinstance(j, slice):
            return [self[k] for k in range(*j.indices(self._n))]
        if j < 0:
            j += self._n
        if not 0 <= j < self._n:
            raise IndexError(f"job {j} of {self._n}")
        phase = bisect.bisect_right(self.starts, j) - 1
        return self._job(j, phase, j - self.starts[phase])

    def __iter__(self) -> Iterator[Job]:
        for phase, (start, count) in enumerate(zip(self.starts, self.counts, strict=True)):
            for i in range(count):
                yield self._job(start + i, phase, i)

    def of_agent(self, agent: int) -> Iterator[Job]:
        """Agent ``agent``'s jobs, in order, without reading the others."""
        for phase, (start, count) in enumerate(zip(self.starts, self.counts, strict=True)):
            for i in range(agent, count, self.agents):
                yield self._job(start + i, phase, i)


def jobs_of(jobs: Sequence[Job], agent: int) -> Iterator[Job]:
    """The jobs of ``agent`` among ``jobs``, in order."""
    if isinstance(jobs, Jobs):
        return jobs.of_agent(agent)
    return (j for j in jobs if j.agent == agent)


def build_jobs(sc: Scenario, ns: Namespace, n_agents: int) -> Jobs:
    """All jobs of all phases, in schedule order (made on demand: :class:`Jobs`)."""
    pool = query_pool(sc, ns)
    rng = np.random.default_rng([sc.seed, 7])
    arrival = sc.workload.arrival
    times: np.ndarray | PoissonTimes | None = None  # closed loop: every job at 0
    if arrival.process == "trace":
        assert arrival.trace is not None
        traced = _trace(arrival.trace, pool)
        times = np.array([t for t, _ in traced], dtype=float)
        pool = [q for _, q in traced]
        picks = np.arange(len(pool), dtype=pick_dtype(len(pool)))  # 2 or 4 bytes a job
    else:
        picks = _picks(sc, len(pool), rng)  # as narrow
        if arrival.process == "poisson":
            times = PoissonTimes(rng, 1.0 / arrival.rate, len(picks))
    n = len(picks)
    span = (float(times[-1]) if times is not None and n else 0.0) + sc.workload.gap
    counts = []
    for phase in range(sc.workload.phases):  # a phase stops at the first job past duration
        count = n
        if sc.duration is not None and times is None:
            count = n if 0.0 + phase * span <= sc.duration else 0
        elif sc.duration is not None and times is not None:
            count = int(np.searchsorted([float(t) + phase * span for t in times],
                                        sc.duration, side="right"))
        counts.append(count)
    # think times in job order, the same draws one by one or in a block; a closed loop's
    # only (an open loop's jobs leave at their times: drawn, they were 8 unread bytes a job)
    thinks = (rng.exponential(arrival.think, size=sum(counts))
              if arrival.think > 0 and arrival.process == "closed" else None)
    return Jobs(pool, picks, times, thinks, counts, span, n_agents)
