"""The search compute model (``nodes.searchcost``), the default ``index`` processing:
a registry search is charged by the items it ranks, a ToolDNS server by its zone's items
per query carrying the intent, and every record counts its encodings and compute."""

from __future__ import annotations

import pandas as pd
import pytest

from nodes.dns.wire import SERVICES
from nodes.searchcost import cost_of
from sim.build.namespace import build_namespace
from sim.build.plan import PlanOptions, make_plan
from sim.build.workload import build_jobs
from sim.run.runner import run_scenario
from sim.scenario import Scenario

SPEC = {
    "name": "search-compute", "seed": 4,
    "namespace": {"tools": 400, "branching": 4, "depth": 2, "orgs": 0},
    "network": {"topology": "star", "nodes": 4, "agents": 1,
                "link": {"delay": {"dist": "constant", "mean": 0.002}}},
    "schemes": [{"name": "walk", "k": 2, "cache": False},
                {"name": "agentdns", "kind": "agentdns", "k": 2},
                {"name": "qname", "k": 2, "cache": False, "mode": "qname"}],
    "workload": {"queries": 30, "arrival": {"process": "closed", "think": 0.5}},
    "outputs": {"plots": False},
}
COST = cost_of("bm25")


def _records(**processing: object) -> pd.DataFrame:
    spec = {**SPEC, "network": {**SPEC["network"], "processing": processing}}
    return run_scenario(Scenario.model_validate(spec), write=False).records


def _by_job(df: pd.DataFrame, scheme: str) -> pd.DataFrame:
    return df[df.scheme == scheme].set_index("job").sort_index()


def test_scored_items_are_the_children_or_the_leaf_tools() -> None:
    sc = Scenario.model_validate(SPEC)
    ns = build_namespace(sc)
    items = ns.scored_items()
    for zone, node in ns.zones.items():
        for service in SERVICES:
            if node.children:  # children with a tool of the service in or below them
                below = ns.services_below()
                want = sum(service in below[c] for c in node.children)
            else:
                want = sum(ns.tools[t].service == service for t in node.tools)
            assert items[zone, service] == want


def test_a_registry_search_is_charged_by_the_items_it_ranks() -> None:
    index, zero = _records(), _records(registry=0.0)
    a, b = _by_job(index, "agentdns"), _by_job(zero, "agentdns")
    assert (a.success & b.success).all() and list(a.returned) == list(b.returned)
    pools = a.tools_examined  # AgentDNS ranks the query's service pool
    assert pools.min() > 0
    extra = a.latency_ms - b.latency_ms  # closed loop, one agent: nothing queues
    want = [COST.seconds(n) * 1000 for n in pools]
    assert list(extra) == pytest.approx(want, abs=1e-6)
    assert (a.encodings == 1).all()
    assert list(a.compute_ns) == [round(w * 1e6) for w in want]
    assert (b.compute_ns == a.compute_ns).all()  # compute is counted whatever latency says


def test_a_server_is_charged_its_zone_items_per_semantic_query() -> None:
    sc = Scenario.model_validate(SPEC)
    ns = build_namespace(sc)
    jobs = build_jobs(sc, ns, 1)
    plan, _ = make_plan(sc, sc.schemes[0], ns, jobs)
    items = ns.scored_items()
    assert plan.server_semantic_time is None and plan.semantic_times
    for ip, zone in plan.hierarchy.zone_of.items():
        if zone == ".":  # the root refers to tools. and ranks nothing
            assert ip not in plan.semantic_times
            continue
        most = max(items[zone, s] for s in SERVICES)
        assert plan.semantic_times[ip] == pytest.approx(50e-6 + COST.seconds(most), rel=1e-12)
    measured, _ = make_plan(sc, sc.schemes[0], ns, jobs,  # calibrated: the measured base
                            options=PlanOptions(calibrated={"server": 1e-3}))
    assert measured.semantic_times is not None
    for ip, t in plan.semantic_times.items():
        assert measured.semantic_times[ip] == pytest.approx(t - 50e-6 + 1e-3, rel=1e-12)
    index, plain = _records(), _records(server_semantic=None)
    top = max(items.values())
    for scheme in ("walk", "qname"):  # the intent in an option, or in the QNAME
        a, b = _by_job(index, scheme), _by_job(plain, scheme)
        assert a.success.all() and list(a.returned) == list(b.returned)
        assert (a.encodings >= 3).all()
        extra = a.latency_ms - b.latency_ms  # each ranking pass: encode plus its items
        assert (extra >= a.encodings * COST.encode * 1000 - 1e-6).all()
        assert (extra <= a.encodings * COST.seconds(top) * 1000 + 1e-6).all()
        want = (COST.encode * a.encodings + COST.per_item * a.tools_examined) * 1e9
        assert list(a.compute_ns) == [round(w) for w in want]


def test_fixed_values_still_apply_and_the_summary_counts_compute() -> None:
    fixed = _by_job(_records(registry=0.021), "agentdns")
    zero = _by_job(_records(registry=0.0), "agentdns")
    assert list(fixed.latency_ms - zero.latency_ms) == pytest.approx([21.0] * len(fixed),
                                                                     abs=1e-6)
    spec = {**SPEC, "workload": {**SPEC["workload"], "queries": 10}}
    summary = run_scenario(Scenario.model_validate(spec), write=False).summary
    records = run_scenario(Scenario.model_validate(spec), write=False).records
    for scheme in ("walk", "agentdns"):
        block = summary["schemes"][scheme]
        mine = records[records.scheme == scheme]
        assert block["mean_encodings"] == round(mine.encodings.mean(), 3) >= 1
        assert block["mean_compute_ms"] == round(mine.compute_ns.mean() / 1e6, 6) > 0
