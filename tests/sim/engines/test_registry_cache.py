"""A registry scheme's optional answer cache (``answer_cache: SECONDS``): each agent keeps a
search's answer per intent and answers a repeat from it with no request, on the simulation
and on real sockets alike; off by default (the registries' clients cache nothing)."""

from __future__ import annotations

import pandas as pd
import pytest

from sim.run.runner import run_scenario
from sim.scenario import Scenario

SPEC = {
    "name": "registry-cache", "seed": 3,
    "namespace": {"tools": 120, "branching": 3, "depth": 2, "orgs": 1},
    "network": {"topology": "star", "nodes": 4, "agents": 2,
                "link": {"delay": {"dist": "constant", "mean": 0.002}}},
    "schemes": [{"name": "agentdns", "kind": "agentdns", "k": 2},
                {"name": "agentdns-cached", "kind": "agentdns", "k": 2, "answer_cache": 300}],
    "workload": {"queries": 40, "popularity": "zipf", "zipf_s": 1.4,
                 "arrival": {"rate": 40.0}},
    "outputs": {"plots": False},
}


def _records(engine: str, **update: object) -> pd.DataFrame:
    sc = Scenario.model_validate({**SPEC, **update, "engine": engine})
    return run_scenario(sc, write=False, live_port=15791).records


@pytest.mark.parametrize("engine", ["simpy", "live"])
def test_repeated_intents_are_answered_from_the_agents_cache(engine: str) -> None:
    df = _records(engine)
    plain, cached = (df[df.scheme == s].set_index("job") for s in ("agentdns",
                                                                   "agentdns-cached"))
    assert (plain.exchanges > 0).all()  # no cache: every discovery asks the registry
    hits = cached[cached.exchanges == 0]
    assert len(hits) > 0 and (hits.bytes_up + hits.bytes_down == 0).all()
    assert (hits.tools_examined == 0).all() and (hits.encodings == 0).all()  # nothing ranked
    assert (hits.compute_ns == 0).all() and (plain.tools_examined > 0).all()
    assert (hits.packets_up + hits.packets_down == 0).all()
    # a hit repeats an intent the same agent asked before, with the same answer
    for job, row in hits.iterrows():
        earlier = cached[(cached.index < job) & (cached.intent == row.intent)
                         & (cached.agent == row.agent)]
        assert len(earlier) and earlier.iloc[0].returned == row.returned
    assert list(cached.returned) == list(plain.returned)  # same answers, fewer requests


def test_the_cache_counts_the_same_on_both_engines_and_expires() -> None:
    simpy, live = _records("simpy"), _records("live")
    count = [(d.scheme == "agentdns-cached") & (d.exchanges == 0) for d in (simpy, live)]
    assert count[0].sum() == count[1].sum() > 0
    # spread over 8 s, a 1 s TTL keeps fewer answers than a 300 s one
    slow = {"workload": {**SPEC["workload"], "arrival": {"rate": 5.0}}}
    kept = [(_records("simpy", schemes=[{**SPEC["schemes"][1], "answer_cache": ttl}],
                      **slow).exchanges == 0).sum() for ttl in (300, 1)]
    assert 0 <= kept[1] < kept[0]
