"""Calibrated processing: each node kind's cost measured by a short simulated pre-run."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sim.build.hierarchy import Hierarchy
from sim.build.plan import PlanOptions, make_plan
from sim.build.workload import Job
from sim.scenario import Scenario
from sim.schemes import SchemeSpec
from topologies.namespace import Namespace


def calibrate(sc: Scenario, ns: Namespace, jobs: Sequence[Job], scheme: SchemeSpec | None = None,
              sample: int = 60, hierarchy: Hierarchy | None = None) -> dict[str, float]:
    """Median measured cost per node kind from a short simulated pre-run of ``scheme``
    (default: the first) over the first ``sample`` jobs (seconds): a plan built to measure
    (every reply computed, no faults: node code, not outages), its output's timings."""
    from sim.engines.simpy import run_simpy

    plan, _ = make_plan(sc, scheme or sc.schemes[0], ns, jobs[:sample], hierarchy=hierarchy,
                        options=PlanOptions(measure=True))
    measured = run_simpy(plan).measured
    return {kind: float(np.median(v)) for kind, v in sorted(measured.items()) if v}
