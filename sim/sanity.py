"""The checks ``tooldns validate`` and ``tooldns run`` (and ``sweep``) share after a scenario
has loaded: times written as bare numbers that are most often a unit mistake (an error
unless ``--allow-units``, or unless written with a unit such as ``"2s"``), and warnings
about valid but suspicious values and a build that needs more memory than is available
now (:mod:`sim.limits`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sim.errors import ScenarioError
from sim.limits import memory_warning
from sim.scenario import Scenario
from sim.schemes import DnsScheme

ALLOW_UNITS = "--allow-units"  # the flag that turns unit mistakes back into warnings
WEEK = 7 * 86_400
HOUR = 3_600  # a fault lasting longer, written bare, is most often milliseconds meant


def _ms(value: float) -> str:
    """How ``value`` milliseconds is written in seconds or with a unit: ``0.01 or '10ms'``."""
    return f"{value / 1000:g} or '{value:g}ms'"


def unit_mistakes(sc: Scenario) -> list[tuple[str, float, str]]:
    """Times that look like a unit mistake (times are seconds; milliseconds meant):
    ``(dotted field, value in seconds, problem)``."""
    out: list[tuple[str, float, str]] = []
    delay = sc.network.link.delay
    values = [("mean", delay.mean), ("std", delay.std),
              *((f"samples.{i}", s) for i, s in enumerate(delay.samples))]
    for field, value in values:
        if value >= 1.0:
            out.append((f"network.link.delay.{field}", value,
                        f"{value:g} s one-way per link looks like milliseconds meant "
                        f"({value:g} ms is {_ms(value)})"))
    for field, value in sc.network.processing.model_dump().items():
        if isinstance(value, float) and value > (30.0 if field == "registry" else 0.1):
            out.append((f"network.processing.{field}", value,
                        f"{value:g} s per message looks like another unit meant (50 µs is "
                        f"5e-05 or '50us')"))
    for i, scheme in enumerate(sc.schemes):
        if scheme.timeout > 30:
            out.append((f"schemes.{i}.timeout", scheme.timeout,
                        f"{scheme.timeout:g} s per upstream try "
                        f"looks like milliseconds meant ({scheme.timeout:g} ms is "
                        f"{_ms(scheme.timeout)})"))
    if sc.agents.timeout > 60:
        out.append(("agents.timeout", sc.agents.timeout,
                    f"{sc.agents.timeout:g} s looks like milliseconds "
                    f"meant ({sc.agents.timeout:g} ms is {_ms(sc.agents.timeout)})"))
    for field in ("ns_ttl", "srv_ttl", "a_ttl", "negative_ttl"):
        if (ttl := getattr(sc.caches, field)) > WEEK:
            out.append((f"caches.{field}", ttl, f"{ttl} s is over a week; TTLs are in seconds"))
    for i, f in enumerate(sc.faults.events if sc.faults else ()):
        if f.delay > 30:
            out.append((f"faults.events.{i}.delay", f.delay,
                        f"{f.delay:g} s looks like milliseconds "
                        f"meant ({f.delay:g} ms is {_ms(f.delay)})"))
        if f.duration is not None and f.duration > HOUR:  # each failure's, with a rate
            out.append((f"faults.events.{i}.duration", f.duration,
                        f"{f.duration:g} s ({f.duration / HOUR:.3g} h) looks like "
                        f"milliseconds meant ({f.duration:g} ms is {_ms(f.duration)})"))
    return out


def sanity_warnings(sc: Scenario) -> list[str]:
    """Valid but suspicious values that are not a unit mistake (:func:`unit_mistakes`):
    ``dotted.field: what looks wrong``. They never stop a run."""
    out: list[str] = []
    hop = 2 * sc.network.link.delay.mean  # one link's round trip: the least an exchange takes
    for i, scheme in enumerate(sc.schemes):
        if isinstance(scheme, DnsScheme) and scheme.timeout <= hop:
            out.append(f"schemes.{i}.timeout: {scheme.timeout:g} s is not more than one "
                       f"link's round trip ({hop:g} s): every upstream query will time out")
        if isinstance(scheme, DnsScheme) and sc.agents.timeout < scheme.timeout:
            out.append(f"agents.timeout: {sc.agents.timeout:g} s is shorter than scheme "
                       f"{scheme.name}'s resolver timeout ({scheme.timeout:g} s): agents "
                       f"give up before the resolver retries once")
    if sc.agents.timeout <= 4 * hop:
        out.append(f"agents.timeout: {sc.agents.timeout:g} s is within four link round "
                   f"trips ({4 * hop:g} s): most discoveries will time out")
    if sc.workload.arrival.process == "poisson" and sc.workload.arrival.rate > 1e5:
        out.append(f"workload.arrival.rate: {sc.workload.arrival.rate:g} queries per second")
    if memory := memory_warning(sc):  # more than this machine has at all is an error
        out.append(memory)
    return out


def _strings(data: Any, prefix: str = "") -> set[str]:
    """Dotted paths of the strings in ``data`` (list items by index); a bounded walk (the
    file was read with the bounded loader)."""
    found: set[str] = set()
    stack: list[tuple[Any, str]] = [(data, prefix)]
    while stack:
        node, path = stack.pop()
        if isinstance(node, str):
            found.add(path)
        elif isinstance(node, dict):
            stack.extend((v, f"{path}.{k}" if path else str(k)) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, f"{path}.{i}" if path else str(i)) for i, v in enumerate(node))
    return found


def with_units(sc: Scenario, file: str, sets: Sequence[str] | None = None) -> set[str]:
    """Dotted fields written as strings (a time with a unit, ``"2s"``) in ``file`` or in
    ``--set FIELD=VALUE`` items (a scheme named by its name or index)."""
    from sim.yamlfile import read_yaml, yaml_value

    found = _strings(read_yaml(Path(file)))
    names = [s.name for s in sc.schemes]
    for item in sets or ():
        key, _, text = item.partition("=")
        parts = key.strip().split(".")
        if len(parts) > 1 and parts[0] == "schemes" and parts[1] in names:
            parts[1] = str(names.index(parts[1]))
        dotted = ".".join(parts)
        found = {f for f in found if f != dotted and not f.startswith(dotted + ".")}
        found |= _strings(yaml_value(text), dotted)  # the file read it; so does --set
    return found


def scenario_warnings(sc: Scenario, file: str, sets: Sequence[str] | None = None,
                      allow_units: bool = False) -> list[str]:
    """The checks validate and run share after loading: ScenarioError, one
    ``FILE: field: problem`` line per time that looks like a unit mistake (not written with
    a unit; with ``allow_units`` they are warnings instead), then the warnings of
    :func:`sanity_warnings`, each ``FILE: field: ...``."""
    explicit = with_units(sc, file, sets)
    mistakes = [m for m in unit_mistakes(sc) if m[0] not in explicit]
    if mistakes and not allow_units:
        raise ScenarioError("\n".join(
            f"{file}: {field}: {problem}; write '{value:g}s' if seconds are meant, or pass "
            f"{ALLOW_UNITS}" for field, value, problem in mistakes))
    return [f"{file}: {field}: {problem}" for field, _, problem in mistakes] + [
        f"{file}: {w}" for w in sanity_warnings(sc)]
