"""What building a scenario would take, estimated and checked before any work.

The counts a scenario gives (tools, zones = branching^1 + … + branching^depth, servers,
agents, resolvers, graph sites, queries) are multiplied by the memory each costs, measured
on this testbed (RSS growth of ``prepare`` and one scheme's plan, fresh process, 2-core VM,
Python 3.11; rounded up by about a third), and the sum is compared with the machine's
physical memory: more is an error, more than what is available now a warning. Like
:func:`analysis.files.estimated_output_bytes` guards the disk against ``queries``, this
guards memory against everything else, so ``namespace.tools: 10**12`` is one line, not an
out-of-memory kill. :func:`check_scenario` is the one check ``validate``, ``run`` and
``sweep`` share (each sweep point too); :func:`check_sweep_size` bounds a grid before it is
expanded. Catalogue namespaces and topology files are not estimated (their size is that of
a file on disk).

Two more bounds are not about memory alone. A random fault process is drawn up front,
interval by interval, up to the fault horizon: :func:`fault_problem` bounds the expected
number of intervals before anything is drawn (here with the horizon the run would take and
one target; :func:`sim.build.faults.build_fault_plan` again with the real targets). And an
engine in real time waits out the workload's times on the wall clock: a run on one whose
workload would last longer than :data:`MAX_REAL_TIME` (:func:`workload_seconds`) is refused.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sim.catalog.engines import ENGINES
from sim.errors import ScenarioError

if TYPE_CHECKING:
    from sim.faultspec import FaultSpec
    from sim.scenario import NamespaceSpec, Scenario

MAX_SWEEP_POINTS = 10_000  # runs in one sweep
MAX_SWEEP_AXES = 32  # fields one grid varies (each value of each is validated up front)
MAX_FAULT_INTERVALS = 1_000_000  # expected intervals of a random fault process (~0.5 KiB each)
MAX_REAL_TIME = 86_400.0  # seconds of workload a real-time engine may wait out (24 h)

# bytes per unit, measured (see the module docstring): 200,000 tools +191 MiB; 8,422 zones
# with one server each +115 MiB, with three +364 MiB; 50,000 agents +175 MiB; 5,000
# resolvers +27 MiB; 300,000 queries (jobs) +140 MiB; a pool of 300,000 generated queries
# +83 MiB; default placement's all-pairs distances ~75 bytes per pair of sites (peak)
BASE = 300 * 2**20  # interpreter and imports
PER_TOOL = 1_300
PER_SERVER = 19_000  # a zone's server (one per replica), with its share of the zone
PER_AGENT = 4_800
PER_RESOLVER = 7_500
PER_JOB = 650
PER_POOL_QUERY = 400
PER_SITE = 2_000
PER_SITE_PAIR = 100


def count_text(n: int) -> str:
    """A count for a message: ``12,345``, ``1.2e+12`` or ``about 10^800``."""
    if n < 10**7:
        return f"{n:,}"
    if n.bit_length() < 1000:
        return f"{float(n):.2g}"
    return f"about 10^{round(n.bit_length() * math.log10(2))}"


def bytes_text(n: int) -> str:
    for unit, size in (("PiB", 2**50), ("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if n >= size:
            return f"{count_text(n // size) if n >= 10**7 * size else f'{n / size:.3g}'} {unit}"
    return f"{n / 2**10:.3g} KiB"


def zone_count(branching: int, depth: int) -> int:
    """Zones below ``tools.`` of a synthetic tree: branching^1 + … + branching^depth."""
    return sum(branching**level for level in range(1, depth + 1))


def tool_count(ns: NamespaceSpec) -> int:
    """Tools of a synthetic namespace: public, the organisations' and a rogue's."""
    return ns.tools + ns.orgs * ns.org_tools + (ns.rogue.tools if ns.rogue else 0)


def memory_estimate(sc: Scenario) -> dict[str, tuple[int, str]]:
    """Bytes of memory a run of ``sc`` needs, by the field that drives each part:
    ``field -> (bytes, what)``."""
    ns, net, wl = sc.namespace, sc.network, sc.workload
    parts: dict[str, tuple[int, str]] = {}
    if ns.source == "synthetic":
        public = tool_count(ns) - ns.orgs * ns.org_tools
        parts["namespace.tools"] = (public * PER_TOOL, f"{count_text(public)} tools")
        if ns.orgs:  # org_tools is per organisation
            org = ns.orgs * ns.org_tools
            parts["namespace.org_tools"] = (
                org * PER_TOOL, f"{count_text(org)} tools in {ns.orgs:,} organisation"
                + ("s" if ns.orgs > 1 else ""))
        zones = zone_count(ns.branching, ns.depth) + 2 + 2 * ns.orgs  # root, tools., orgs
        parts["namespace.branching"] = (
            zones * ns.replicas * PER_SERVER,
            f"branching {count_text(ns.branching)} to depth {ns.depth}: {count_text(zones)} zones"
            + (f" × {ns.replicas} replicas" if ns.replicas > 1 else ""))
        pool = max(wl.pool or 0, wl.queries, 200)  # generated with the namespace
        parts["workload.pool"] = (pool * PER_POOL_QUERY, f"{count_text(pool)} generated queries")
    jobs = wl.queries * wl.phases
    parts["workload.queries"] = (jobs * PER_JOB, f"{count_text(jobs)} queries"
                                 + (f" over {wl.phases} phases" if wl.phases > 1 else ""))
    parts["network.agents"] = (net.agents * PER_AGENT, f"{count_text(net.agents)} agents")
    parts["network.resolvers"] = (net.resolvers * PER_RESOLVER,
                                  f"{count_text(net.resolvers)} resolvers")
    if net.topology != "file":
        pairs = net.nodes**2 if net.placement == "default" else 0  # all-pairs distances
        parts["network.nodes"] = (net.nodes * PER_SITE + pairs * PER_SITE_PAIR,
                                  f"{count_text(net.nodes)} graph sites")
    return parts


def physical_memory() -> int | None:
    """This machine's physical memory in bytes (None where it cannot be known)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def available_memory() -> int | None:
    """Memory available now (``MemAvailable`` of /proc/meminfo; None elsewhere)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def check_scenario(sc: Scenario, where: str, memory: int | None = None) -> None:
    """Refuse (:class:`ScenarioError`, ``WHERE: field: problem``) a scenario whose build
    would need more memory than ``memory`` (default: this machine's physical memory), whose
    sweep grid has too many points, whose random faults would draw too many intervals, or
    whose workload would last longer than :data:`MAX_REAL_TIME` on a real-time engine."""
    if sc.sweep is not None:
        check_sweep_size(sc.sweep.grid, where)
    check_time(sc, where)
    limit = physical_memory() if memory is None else memory
    if limit is None:
        return
    parts = memory_estimate(sc)
    need = BASE + sum(b for b, _ in parts.values())
    if need > limit:
        field, (_, what) = max(parts.items(), key=lambda kv: kv[1][0])
        raise ScenarioError(f"{where}: {field}: {what} would need about {bytes_text(need)} of "
                            f"memory, more than this machine's {bytes_text(limit)}")


def memory_warning(sc: Scenario) -> str | None:
    """A warning when the estimate exceeds the memory available now (not the machine's)."""
    free = available_memory()
    if free is None:
        return None
    parts = memory_estimate(sc)
    need = BASE + sum(b for b, _ in parts.values())
    if need <= free:
        return None
    field, (_, what) = max(parts.items(), key=lambda kv: kv[1][0])
    return (f"{field}: {what} need about {bytes_text(need)} of memory; {bytes_text(free)} is "
            f"available now")


def check_sweep_size(grid: Mapping[str, Sequence[Any]], where: str) -> None:
    """Refuse a grid of more than :data:`MAX_SWEEP_AXES` fields or
    :data:`MAX_SWEEP_POINTS` points, before it is expanded (``where``, if any, begins the
    message)."""
    prefix = f"{where}: " if where else ""
    if len(grid) > MAX_SWEEP_AXES:
        raise ScenarioError(f"{prefix}sweep.grid: {len(grid):,} fields; a grid varies at "
                            f"most {MAX_SWEEP_AXES}")
    points = math.prod(len(values) for values in grid.values())
    if points > MAX_SWEEP_POINTS:
        raise ScenarioError(f"{prefix}sweep.grid: {count_text(points)} points; a sweep runs at "
                            f"most {MAX_SWEEP_POINTS:,}")


# ------------------------------------------------------------------------ time


def seconds_text(seconds: float) -> str:
    """A duration for a message: ``90 s``, ``2.5 h``, ``3.2e+02 years``."""
    if seconds < 600:
        return f"{seconds:.3g} s"
    if seconds < 3 * 86_400:
        return f"{seconds / 3600:.3g} h"
    if seconds < 365.25 * 86_400:
        return f"{seconds / 86_400:.3g} days"
    return f"{seconds / (365.25 * 86_400):.2g} years"


def _trace_end(path: str) -> float:
    """The latest time of a trace file (0 when it cannot be read: the build says why)."""
    end = 0.0
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            for row in csv.DictReader(fh):
                end = max(end, float(row["time"]))
    except (OSError, KeyError, TypeError, ValueError, UnicodeDecodeError, csv.Error):
        return 0.0
    return end if math.isfinite(end) else 0.0


def workload_seconds(sc: Scenario) -> tuple[float, str, str]:
    """Expected seconds of workload time from the first query to the last one's start
    (open loops: the arrivals of every phase and the gaps between them, up to
    ``duration``; a closed loop: each agent's think times, one after another), with the
    field that drives most of it and what it says: ``(seconds, field, what)``."""
    wl, arrival = sc.workload, sc.workload.arrival
    phases, gap = wl.phases, wl.gap
    if arrival.process == "closed":  # phases follow each other at once (no gap)
        if sc.duration is not None:  # a phase starts only before duration (build_jobs)
            phases = min(phases, int(sc.duration // gap) + 1 if gap else phases)
        jobs = -(-wl.queries // sc.network.agents) * phases  # per agent
        return (jobs * arrival.think, "workload.arrival.think",
                f"{jobs:,} queries per agent {arrival.think:g} s apart")
    if arrival.process == "trace" and arrival.trace:
        end = _trace_end(arrival.trace)
        field, what = "workload.arrival.trace", f"a trace of {end:g} s"
    else:
        end = wl.queries / arrival.rate
        field, what = ("workload.arrival.rate",
                       f"{wl.queries:,} queries at {arrival.rate:g} per second")
    total = phases * end + (phases - 1) * gap
    if (phases - 1) * gap > phases * end:
        field, what = "workload.gap", (f"{phases - 1:,} gap{'s' if phases > 2 else ''} of "
                                       f"{gap:g} s between phases")
    return (min(total, sc.duration) if sc.duration is not None else total), field, what


def check_time(sc: Scenario, where: str) -> None:
    """Refuse a run on a real-time engine whose workload would last longer than
    :data:`MAX_REAL_TIME`, and random faults that would draw more than
    :data:`MAX_FAULT_INTERVALS` intervals (:func:`fault_problem`, at least one target)."""
    info = ENGINES.get(sc.engine)
    seconds, field, what = workload_seconds(sc)
    if info is not None and not info.virtual_time and seconds > MAX_REAL_TIME:
        raise ScenarioError(
            f"{where}: {field}: {what}: the workload would last about "
            f"{seconds_text(seconds)} on engine {sc.engine}, which runs in real time; at most "
            f"{MAX_REAL_TIME / 3600:g} h (the simulation, engine simpy, runs it in virtual "
            f"time)")
    if sc.faults is None:
        return
    horizon = sc.faults.horizon
    if horizon is None:  # as sim.build.plan.fault_plan: the last scheduled query + 60 s
        last = seconds if sc.workload.arrival.process != "closed" else None
        horizon = (last if last is not None else sc.duration or 600.0) + 60.0
    for i, f in enumerate(sc.faults.events):
        if problem := fault_problem(i, f, horizon, 1, sc.faults.horizon is not None):
            raise ScenarioError(f"{where}: {problem}")


def fault_problem(i: int, f: FaultSpec, horizon: float, targets: int,
                  horizon_given: bool) -> str | None:
    """``field: problem`` when fault ``i``'s random process (``rate``) on ``targets`` nodes
    would draw more than :data:`MAX_FAULT_INTERVALS` intervals up to ``horizon`` (workload
    seconds): each target waits an exponential time of mean 1 / rate, fails for one of mean
    ``duration``, and again."""
    if f.rate is None or not f.duration:
        return None
    span = max(0.0, horizon - f.at)
    expected = targets * span / (1.0 / f.rate + f.duration)
    if expected <= MAX_FAULT_INTERVALS:
        return None
    field = "faults.horizon" if horizon_given else f"faults.events.{i}.rate"
    on = f"{targets:,} targets" if targets > 1 else "one target at least"
    return (f"{field}: a failure rate of {f.rate:g}/s per target over {span:g} s "
            f"(from at to the horizon) on {on} would draw about "
            f"{count_text(int(min(expected, 2.0**1000)))} failure intervals; at most "
            f"{MAX_FAULT_INTERVALS:,} (lower the rate or the horizon)")
