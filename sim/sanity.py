"""Sanity warnings: values a scenario accepts that are most often a unit mistake, and a
build that needs more memory than is available now (:mod:`sim.limits`)."""

from __future__ import annotations

from sim.limits import memory_warning
from sim.scenario import Scenario
from sim.schemes import DnsScheme


def sanity_warnings(sc: Scenario) -> list[str]:
    """Valid but suspicious values, most often a unit mistake (times are seconds, rates per
    second): ``dotted.field: what looks wrong``. Shown by ``tooldns validate`` and before a
    run; they never stop one."""
    out: list[str] = []
    delay = sc.network.link.delay
    for field, value in (("mean", delay.mean), ("std", delay.std),
                         ("samples", max(delay.samples, default=0.0))):
        if value > 1.0:
            out.append(f"network.link.delay.{field}: {value:g} s one-way per link; delays "
                       f"are in seconds ({value:g} ms would be {value / 1000:g})")
    for field, value in sc.network.processing.model_dump().items():
        if isinstance(value, float) and value > (30.0 if field == "registry" else 0.1):
            out.append(f"network.processing.{field}: {value:g} s per message; processing "
                       f"times are in seconds (50 µs is 5e-05)")
    hop = 2 * delay.mean  # the round trip over one link: the least an exchange takes
    for i, scheme in enumerate(sc.schemes):
        where = f"schemes.{i}.timeout"
        if scheme.timeout > 30:
            out.append(f"{where}: {scheme.timeout:g} s per upstream try; timeouts are in "
                       f"seconds")
        elif isinstance(scheme, DnsScheme) and scheme.timeout <= hop:
            out.append(f"{where}: {scheme.timeout:g} s is not more than one link's round "
                       f"trip ({hop:g} s): every upstream query will time out")
        if isinstance(scheme, DnsScheme) and sc.agents.timeout < scheme.timeout:
            out.append(f"agents.timeout: {sc.agents.timeout:g} s is shorter than scheme "
                       f"{scheme.name}'s resolver timeout ({scheme.timeout:g} s): agents "
                       f"give up before the resolver retries once")
    if sc.agents.timeout <= 4 * hop:
        out.append(f"agents.timeout: {sc.agents.timeout:g} s is within four link round "
                   f"trips ({4 * hop:g} s): most discoveries will time out")
    if sc.agents.timeout > 60:
        out.append(f"agents.timeout: {sc.agents.timeout:g} s; timeouts are in seconds")
    if sc.workload.arrival.process == "poisson" and sc.workload.arrival.rate > 1e5:
        out.append(f"workload.arrival.rate: {sc.workload.arrival.rate:g} queries per second")
    for field in ("ns_ttl", "srv_ttl", "a_ttl", "negative_ttl"):
        ttl = getattr(sc.caches, field)
        if ttl > 7 * 86_400:
            out.append(f"caches.{field}: {ttl} s is over a week; TTLs are in seconds")
    for i, f in enumerate(sc.faults.events if sc.faults else ()):
        if f.delay > 30:
            out.append(f"faults.events.{i}.delay: {f.delay:g} s; delays are in seconds")
    if memory := memory_warning(sc):  # more than this machine has at all is an error
        out.append(memory)
    return out
