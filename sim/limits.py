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
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sim.errors import ScenarioError

if TYPE_CHECKING:
    from sim.scenario import Scenario

MAX_SWEEP_POINTS = 10_000  # runs in one sweep
MAX_SWEEP_AXES = 32  # fields one grid varies (each value of each is validated up front)

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


def memory_estimate(sc: Scenario) -> dict[str, tuple[int, str]]:
    """Bytes of memory a run of ``sc`` needs, by the field that drives each part:
    ``field -> (bytes, what)``."""
    ns, net, wl = sc.namespace, sc.network, sc.workload
    parts: dict[str, tuple[int, str]] = {}
    if ns.source == "synthetic":
        tools = ns.tools + ns.orgs * ns.org_tools + (ns.rogue.tools if ns.rogue else 0)
        parts["namespace.tools"] = (tools * PER_TOOL, f"{count_text(tools)} tools")
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
    would need more memory than ``memory`` (default: this machine's physical memory) or
    whose sweep grid has too many points."""
    if sc.sweep is not None:
        check_sweep_size(sc.sweep.grid, where)
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
