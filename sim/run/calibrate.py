"""Calibrated processing: each node kind's cost measured by a short simulated pre-run."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nodes.authoritative.memo import memo_off
from sim.build.hierarchy import Hierarchy
from sim.build.plan import make_plan
from sim.build.workload import Job
from sim.scenario import Scenario
from sim.schemes import SchemeSpec
from topologies.namespace import Namespace


def calibrate(sc: Scenario, ns: Namespace, jobs: Sequence[Job], scheme: SchemeSpec | None = None,
              sample: int = 60, hierarchy: Hierarchy | None = None) -> dict[str, float]:
    """Median measured cost per node kind from a short simulated pre-run of ``scheme``
    (default: the first) over the first ``sample`` jobs (seconds)."""
    from sim.engines.simpy import run_simpy

    plan, _ = make_plan(sc, scheme or sc.schemes[0], ns, jobs[:sample], hierarchy=hierarchy)
    plan.measure = {}
    plan.faults = None  # calibration measures node code, not outages
    with memo_off(plan.hierarchy.servers.values()):  # ... every reply computed
        run_simpy(plan)
    return {kind: float(np.median(v)) for kind, v in sorted(plan.measure.items()) if v}
