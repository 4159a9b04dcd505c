"""Workloads: query pools, popularity, arrival processes, phases, trust start zones."""

from __future__ import annotations

import pickle
import random
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from sim.build.namespace import build_namespace, start_zone
from sim.build.workload import (
    Job,
    Jobs,
    PoissonTimes,
    build_jobs,
    generated_queries,
    jobs_of,
    query_pool,
)
from sim.errors import ScenarioError
from sim.run.runner import run_scenario
from sim.scenario import Scenario
from topologies.synthetic import DrawnQueries


def _sc(**workload: object) -> Scenario:
    return Scenario.model_validate({
        "name": "wl", "seed": 3,
        "namespace": {"tools": 400, "branching": 4, "depth": 2, "orgs": 2},
        "workload": {"queries": 400, **workload},
        "network": {"agents": 5},
        "outputs": {"plots": False},
    })


def test_poisson_arrivals_have_the_configured_rate() -> None:
    sc = _sc(arrival={"process": "poisson", "rate": 20.0})
    jobs = build_jobs(sc, build_namespace(sc), 5)
    gaps = np.diff([j.at for j in jobs])
    assert abs(1 / gaps.mean() - 20.0) < 3.0
    assert {j.agent for j in jobs} == set(range(5))


def test_zipf_popularity_is_skewed_and_uniform_is_not() -> None:
    top_share = {}
    for pop in ("zipf", "uniform"):
        sc = _sc(popularity=pop, pool=50)
        counts = Counter(j.query.text for j in build_jobs(sc, build_namespace(sc), 5))
        top_share[pop] = counts.most_common(1)[0][1] / 400
    assert top_share["zipf"] > 0.15 > top_share["uniform"]


def test_phases_repeat_the_sequence_after_a_gap() -> None:
    sc = _sc(queries=30, phases=3, gap=100.0)
    jobs = build_jobs(sc, build_namespace(sc), 5)
    assert len(jobs) == 90
    phases = [[j for j in jobs if j.phase == p] for p in range(3)]
    assert [j.query for j in phases[0]] == [j.query for j in phases[2]]
    assert phases[1][0].at >= phases[0][-1].at + 100.0


def test_duration_cuts_the_schedule() -> None:
    sc = _sc(arrival={"process": "poisson", "rate": 10.0}).with_overrides({"duration": 5.0})
    jobs = build_jobs(sc, build_namespace(sc), 5)
    assert jobs and max(j.at for j in jobs) <= 5.0 and len(jobs) < 400


def test_closed_loop_jobs_have_no_schedule_but_think_times() -> None:
    sc = _sc(arrival={"process": "closed", "think": 0.5})
    jobs = build_jobs(sc, build_namespace(sc), 5)
    assert all(j.at is None for j in jobs)
    assert abs(np.mean([j.think for j in jobs]) - 0.5) < 0.1


def test_trace_replay(tmp_path: Path) -> None:
    sc = _sc(queries=5)
    ns = build_namespace(sc)
    trace = tmp_path / "trace.csv"
    rows = [(0.5, ns.queries[0].id), (0.1, ns.queries[1].text), (2.0, ns.queries[0].id)]
    trace.write_text("time,query\n" + "".join(f"{t},{q}\n" for t, q in rows))
    sc = sc.with_overrides({"workload.arrival.process": "trace",
                            "workload.arrival.trace": str(trace)})
    jobs = build_jobs(sc, ns, 5)
    assert [j.at for j in jobs] == [0.1, 0.5, 2.0]
    assert [j.query.id for j in jobs] == [ns.queries[1].id, ns.queries[0].id, ns.queries[0].id]
    bad = tmp_path / "bad.csv"
    bad.write_text("time,query\n1.0,no such query\n")
    with pytest.raises(ScenarioError, match=r"workload\.arrival\.trace: line 2: .*bad\.csv"):
        build_jobs(sc.with_overrides({"workload.arrival.trace": str(bad)}), ns, 5)


def test_generated_queries_are_labelled_and_point_at_their_tool() -> None:
    sc = _sc()
    ns = build_namespace(sc)
    queries = generated_queries(ns, 20, random.Random(1))
    assert all(q.source == "generated" and q.truth[0] in ns.tools for q in queries)
    assert all(ns.tools[q.truth[0]].name in q.text for q in queries)


def test_org_trust_policy_starts_at_the_org_zone_and_returns_only_its_tools(
        tmp_path: Path) -> None:
    sc = _sc(queries=20)
    ns = build_namespace(sc)
    org = next(node.org for node in ns.zones.values() if node.org)
    trusted = sc.with_overrides({"trust.policy": "org", "trust.org": org})
    zone = start_zone(trusted, ns)
    assert ns.zones[zone].org == org
    records = run_scenario(trusted, out_dir=tmp_path).records
    returned = [t for r in records.returned.dropna() for t in r.split()]
    assert returned and all(ns.tools[t].org == org for t in returned)
    with pytest.raises(ScenarioError, match=r"trust\.org"):
        start_zone(sc.with_overrides({"trust.policy": "org", "trust.org": "nobody"}), ns)


# ---------------------------------------------------------------- made on demand, the same

def _one_draw(sc: Scenario, n_pool: int, rng: np.random.Generator) -> np.ndarray:
    """Every job's pool position in one numpy call, as 64-bit integers (before blocks)."""
    if sc.workload.popularity == "uniform":
        return rng.integers(0, n_pool, size=sc.workload.queries)
    weights = np.arange(1, n_pool + 1, dtype=float) ** (-sc.workload.zipf_s)
    return rng.choice(n_pool, size=sc.workload.queries, p=weights / weights.sum())


@pytest.mark.parametrize("popularity", ["uniform", "zipf"])
@pytest.mark.parametrize("n_pool", [3, 2000, 40_000])
@pytest.mark.parametrize("block", [1, 7, 1000, 1 << 16])
def test_picks_in_blocks_equal_one_draw(popularity: str, n_pool: int, block: int) -> None:
    from sim.build.workload import _picks, pick_dtype

    sc = _sc(queries=3001, popularity=popularity)
    at_once, in_blocks = np.random.default_rng([5, 7]), np.random.default_rng([5, 7])
    eager = _one_draw(sc, n_pool, at_once)
    picks = _picks(sc, n_pool, in_blocks, block)
    assert picks.dtype == pick_dtype(n_pool) and picks.dtype.itemsize == (2 if n_pool < 2**15
                                                                          else 4)
    assert picks.tolist() == eager.tolist()
    assert in_blocks.random() == at_once.random()  # the generator left where it would be


def _eager_jobs(sc: Scenario, ns: object, n_agents: int) -> list[Job]:
    """The jobs as they were built before :class:`Jobs`: every Job made up front, one think
    draw per job (the reference the lazy sequence must equal)."""
    from sim.build.workload import _trace, query_pool

    pool = query_pool(sc, ns)  # type: ignore[arg-type]
    rng = np.random.default_rng([sc.seed, 7])
    arrival = sc.workload.arrival
    if arrival.process == "trace":
        base = _trace(str(arrival.trace), pool)
    else:
        picks = _one_draw(sc, len(pool), rng)
        times = (np.cumsum(rng.exponential(1.0 / arrival.rate, size=len(picks)))
                 if arrival.process == "poisson" else np.zeros(len(picks)))
        base = [(float(t), pool[int(i)]) for t, i in zip(times, picks, strict=True)]
    span = (base[-1][0] if base else 0.0) + sc.workload.gap
    jobs: list[Job] = []
    for phase in range(sc.workload.phases):
        for i, (t, q) in enumerate(base):
            at = t + phase * span
            if sc.duration is not None and at > sc.duration:
                break
            think = (float(rng.exponential(arrival.think))
                     if arrival.think > 0 and arrival.process == "closed" else 0.0)
            jobs.append(Job(index=len(jobs), phase=phase, agent=i % n_agents, query=q,
                            at=None if arrival.process == "closed" else at, think=think))
    return jobs


@pytest.mark.parametrize("workload,duration", [
    ({"arrival": {"process": "closed", "think": 0.3}, "phases": 2}, None),
    ({"arrival": {"process": "closed", "think": 0.0}, "pool": 37}, None),
    ({"arrival": {"process": "poisson", "rate": 40.0}, "phases": 3, "gap": 2.0}, 17.0),
    ({"arrival": {"process": "poisson", "rate": 40.0, "think": 0.1}, "popularity": "zipf",
      "pool": 60}, 4.0),
    ({"arrival": {"process": "closed"}, "phases": 3, "gap": 1.0}, 1.5),
])
def test_jobs_made_on_demand_equal_the_jobs_made_up_front(
        workload: dict, duration: float | None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(PoissonTimes, "BLOCK", 7)  # Poisson times: many blocks
    sc = _sc(**workload).with_overrides({"duration": duration})
    ns = build_namespace(sc)
    jobs, eager = build_jobs(sc, ns, 5), _eager_jobs(sc, ns, 5)
    assert isinstance(jobs, Jobs) and len(jobs) == len(eager) > 0
    assert list(jobs) == eager and jobs == eager
    assert [jobs[i] for i in range(len(jobs))] == eager and jobs[-1] == eager[-1]
    assert jobs[3:9] == eager[3:9]
    for a in range(5):  # what each agent's loop reads
        assert list(jobs_of(jobs, a)) == [j for j in eager if j.agent == a]
    with pytest.raises(IndexError):
        jobs[len(jobs)]


@pytest.mark.parametrize("block", [1, 7, 64, 1 << 16])
def test_poisson_times_in_blocks_equal_one_cumulative_sum(
        block: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(PoissonTimes, "BLOCK", block)
    at_once, in_blocks = np.random.default_rng([5, 7]), np.random.default_rng([5, 7])
    eager = np.cumsum(at_once.exponential(0.025, size=1000)).tolist()
    times = PoissonTimes(in_blocks, 0.025, 1000)
    assert len(times) == 1000 and list(times) == eager  # the same floats, bit for bit
    picked = (999, 0, 500, 1, 998, 64, 63)  # read out of order: blocks drawn again
    assert [times[i] for i in picked] == [eager[i] for i in picked]
    assert times[-1] == times.last == eager[-1]
    assert in_blocks.random() == at_once.random()  # the generator left where it would be
    assert list(pickle.loads(pickle.dumps(times))) == eager
    with pytest.raises(IndexError):
        times[1000]
    assert list(PoissonTimes(in_blocks, 1.0, 0)) == [] and PoissonTimes(in_blocks, 1, 0).last == 0


def test_trace_jobs_equal_the_jobs_made_up_front(tmp_path: Path) -> None:
    sc = _sc(queries=5, phases=2, gap=1.0)
    ns = build_namespace(sc)
    trace = tmp_path / "trace.csv"
    trace.write_text("time,query\n" + "".join(f"{t},{ns.queries[i].id}\n"
                                              for t, i in ((0.5, 0), (0.1, 3), (2.0, 0))))
    sc = sc.with_overrides({"workload.arrival.process": "trace",
                            "workload.arrival.trace": str(trace), "duration": 3.5})
    assert list(build_jobs(sc, ns, 2)) == _eager_jobs(sc, ns, 2)


def test_a_pool_is_the_same_when_only_its_queries_are_drawn() -> None:
    """With ``workload.pool`` the positions are shuffled and only the pool's queries made;
    the pool equals shuffling all drawn queries and taking the first ones."""
    sc = _sc(queries=3000, pool=50)
    ns = build_namespace(sc)
    assert isinstance(ns.queries, DrawnQueries) and len(ns.queries) == 3000
    everything = list(ns.queries)
    random.Random(f"pool-{sc.seed}").shuffle(everything)
    assert query_pool(sc, ns) == everything[:50]
    assert ns.queries._all is None  # nothing kept: iteration and take draw again
    drawn = list(ns.queries)
    assert ns.queries.take([7, 2, 7]) == [drawn[7], drawn[2], drawn[7]]
    assert ns.queries[2999] == drawn[2999]  # indexing draws all once and keeps them
    assert ns.queries._all is not None
    assert ns.queries == drawn and ns.queries != drawn[:-1]
