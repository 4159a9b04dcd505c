"""What the engine tests share: the small scenario, its plan, and the comparisons."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from sim.engines import RunPlan
from sim.runner import build_namespace, make_plan
from sim.scenario import Scenario, load_scenario
from sim.workload import build_jobs

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
# columns every engine must give identically, query by query (replica choice follows
# measured RTTs, so servers_contacted may differ between real-time runs)
SAME = ("query_id", "returned", "round_trips", "exchanges", "bytes_up", "bytes_down",
        "packets_up", "packets_down", "tools_examined")


def small(**overrides: object) -> Scenario:
    """``scenarios/engines-small.yaml`` with dotted fields replaced."""
    return load_scenario(SCENARIOS / "engines-small.yaml").with_overrides(overrides)


def first_plan(sc: Scenario, dns_port: int = 53) -> RunPlan:
    """The run plan of the scenario's first scheme."""
    ns = build_namespace(sc)
    return make_plan(sc, sc.schemes[0], ns, build_jobs(sc, ns, sc.network.agents),
                     dns_port=dns_port)[0]


def median_gaps(sim: pd.DataFrame, rec: pd.DataFrame) -> dict[str, float]:
    """|median - simpy median| / simpy median of latency, per scheme."""
    out = {}
    for scheme in sim.scheme.unique():
        s = sim[sim.scheme == scheme].latency_ms.median()
        out[scheme] = abs(rec[rec.scheme == scheme].latency_ms.median() - s) / s
    return out
