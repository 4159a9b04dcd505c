"""The paper-scale options: the registry's modelled search time and the train/test split."""

from __future__ import annotations

import copy
import re

import pytest
from pydantic import ValidationError

from nodes.searchcost import cost_of
from sim.build.namespace import build_namespace
from sim.build.workload import query_pool
from sim.errors import ScenarioError
from sim.loading import load_scenario
from sim.run.runner import run_scenario
from sim.scenario import Scenario

BASE = {
    "name": "paper-scale", "seed": 1,
    "namespace": {"tools": 200, "branching": 4, "depth": 2, "orgs": 0},
    "network": {"topology": "star", "nodes": 4,
                "link": {"delay": {"dist": "constant", "mean": 0.005}},
                "resolvers": 1, "agents": 1},
    "schemes": [{"name": "agentdns", "kind": "agentdns", "k": 1},
                {"name": "ans", "kind": "ans-v0", "k": 1},
                {"name": "tooldns", "k": 1}],
    "workload": {"queries": 8, "pool": 8, "arrival": {"process": "closed", "think": 0.0}},
    "outputs": {"plots": False},
}


def _run(search: float | None):  # type: ignore[no-untyped-def]
    data = copy.deepcopy(BASE)
    if search is not None:
        data["network"]["processing"] = {"registry": search}
    return run_scenario(Scenario.model_validate(data), engine="simpy", write=False).records


def test_registry_search_adds_exactly_its_time_per_search_request() -> None:
    model, before, after = _run(None), _run(0.0), _run(0.5)
    # the default (index) charges AgentDNS's search the model's time for its pool; ANS's
    # listing ranks nothing (its client ranks); the DNS side is not the registry's
    by_model = model.set_index(["scheme", "job"]).latency_ms - before.set_index(
        ["scheme", "job"]).latency_ms
    pools = model.set_index(["scheme", "job"]).tools_examined.loc["agentdns"]
    assert list(by_model.loc["agentdns"]) == pytest.approx(
        [cost_of("bm25").seconds(n) * 1000 for n in pools], abs=1e-6)
    assert (by_model.loc["ans"] == 0.0).all() and (by_model.loc["tooldns"] == 0.0).all()
    diff = after.set_index(["scheme", "job"]).latency_ms - before.set_index(
        ["scheme", "job"]).latency_ms
    # one search request per discovery: AgentDNS's discovery search, ANS's agent listing
    # (its capability list, resolve and OCSP requests do not search); one agent in a
    # closed loop, so nothing queues
    assert diff.loc["agentdns"].to_numpy() == pytest.approx(500.0, abs=1e-6)
    assert diff.loc["ans"].to_numpy() == pytest.approx(500.0, abs=1e-6)
    assert (diff.loc["tooldns"] == 0.0).all()
    # bytes and packets do not change with the search time (cold connections)
    cols = ["bytes_up", "bytes_down", "packets_up", "packets_down", "hit_at_1"]
    assert before[cols].equals(after[cols])


def test_registry_search_is_validated() -> None:
    data = copy.deepcopy(BASE)
    data["network"]["processing"] = {"registry": -1.0}
    with pytest.raises(ValidationError, match="registry"):
        Scenario.model_validate(data)


def test_split_selects_disjoint_stratified_parts() -> None:
    data = copy.deepcopy(BASE)
    data["workload"] = {"queries": 10, "pool": None}
    sc = Scenario.model_validate(data)
    ns = build_namespace(sc)
    every = {q.id for q in query_pool(sc, ns)}
    parts = {}
    for part in ("test", "train"):
        split = sc.with_overrides({"workload.split": {"part": part, "test_fraction": 0.4}})
        parts[part] = [q.id for q in query_pool(split, ns)]
        assert parts[part] == [q.id for q in query_pool(split, ns)]  # seeded
    test, train = set(parts["test"]), set(parts["train"])
    assert not test & train
    assert test | train == every
    assert abs(len(test) / len(every) - 0.4) < 0.05
    # stratified: every zone with >= 3 queries is represented on both sides
    zone = {q.id: ns.tools[q.truth[0]].zone for q in query_pool(sc, ns)}
    zones = {z for z in zone.values() if list(zone.values()).count(z) >= 3}
    assert zones <= {zone[i] for i in test} and zones <= {zone[i] for i in train}


def test_split_rejects_bad_fraction(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import yaml

    data = copy.deepcopy(BASE)
    data["workload"]["split"] = {"part": "test", "test_fraction": 1.5}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ScenarioError, match=re.escape("workload.split.test_fraction")):
        load_scenario(path)


def test_live_registry_waits_the_search_time_once_per_discovery() -> None:
    """Real sockets: the registries answer their search request after the modelled time
    (awaited, not slept in the event loop), and nothing else."""
    data = copy.deepcopy(BASE)
    data["schemes"] = data["schemes"][:2]
    data["workload"] = {"queries": 3, "pool": 3, "arrival": {"process": "closed", "think": 0.0}}
    data["network"]["processing"] = {"registry": 0.25}
    rec = run_scenario(Scenario.model_validate(data), engine="live", write=False).records
    assert rec.success.all()
    # the links alone take ~20-60 ms here; one search adds 250 ms, two would add 500
    assert rec.latency_ms.between(250.0, 250.0 + 200.0).all(), rec.latency_ms.tolist()
