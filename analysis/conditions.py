"""The settings that decide a comparison, in words, for the footer of every comparison
table and the report: processing times (and whether they were measured), the registry's
search time, each scheme's transport and encryption, caches, and what each side knows
(a query log the DNS side routes with and the registry does not).

Read from the resolved scenario as a mapping (``Scenario.model_dump(mode="json")``, or
``scenario.yaml`` as saved with the results), so a table printed now and a report made
later from the folder say the same thing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodes.searchcost import cost_of


def _us(seconds: float | None) -> str:
    if seconds is None:
        return "as server"
    if seconds == 0:
        return "0"
    if seconds < 1e-3:
        return f"{seconds * 1e6:g} µs"
    return f"{seconds * 1e3:g} ms" if seconds < 1 else f"{seconds:g} s"


def _model(scorer: str) -> str:
    cost = cost_of(scorer)
    return (f"the search compute model ({scorer}: {_us(cost.encode)} + "
            f"{cost.per_item * 1e9:g} ns per item scored, nodes.searchcost)")


def processing_line(scenario: Mapping[str, Any]) -> str:
    """Per-message processing of the nodes and the registry's search time."""
    p = (scenario.get("network") or {}).get("processing") or {}
    scorer = (scenario.get("namespace") or {}).get("scorer", "bm25")
    registry = p.get("registry", "index")
    search = ("registry search by " + _model(scorer) + " over the items it scores (the "
              "clients of ANS v0 and the MCP Registry rank their lists: counted in compute "
              "ms, not in latency)"
              if registry == "index" else
              f"registry search {_us(registry)} per search" if registry else
              "registry search 0 s (not modelled: a registry answers a search at once, "
              "whatever its catalogue's size)")
    if p.get("model") == "calibrated":
        return ("processing: calibrated (each node kind's handling measured on this machine "
                f"by a pre-run: summary.json calibrated_processing_s); {search}")
    semantic = p.get("server_semantic", "index")
    with_intent = ("plus the same model over its zone's items" if semantic == "index" else
                   _us(semantic) if semantic is not None else "the same")
    return (f"processing: fixed, server {_us(p.get('server', 50e-6))} per message"
            f" ({with_intent} with an intent), "
            f"resolver {_us(p.get('resolver', 20e-6))}, agent {_us(p.get('agent', 0.0))}; "
            f"{search}")


def _dns_scheme(s: Mapping[str, Any]) -> str:
    upstream = "DNS over TLS" if s.get("upstream") == "tls" else "UDP"
    cache = "resolver cache on" if s.get("cache", True) else "resolver cache off"
    model = s.get("resolver_model") or "project"
    stock = "" if model == "project" else f", iterating as {model} (QNAME minimisation)"
    return f"DNS, agent→resolver UDP, resolver→servers {upstream}, {cache}{stock}"


def _registry_scheme(s: Mapping[str, Any]) -> str:
    wire = "HTTPS (TLS 1.3)" if s.get("tls") else "HTTP/1.1 plaintext"
    conn = "one kept-alive connection" if s.get("keepalive") else "a connection per call"
    ttl = s.get("answer_cache") or 0
    return f"{wire}, {conn}, " + (f"answers kept {ttl} s per intent" if ttl else "no cache")


def transport_line(scenario: Mapping[str, Any]) -> str:
    """Each scheme's transport, encryption and cache (schemes alike share one entry); a
    note when DNS and registry schemes differ in encryption."""
    schemes = scenario.get("schemes") or []
    dns = [s for s in schemes if "upstream" in s]  # DNS client strategies' fields
    http = [s for s in schemes if "upstream" not in s]  # HTTP registries
    alike: dict[str, list[str]] = {}
    for s in dns:
        alike.setdefault(_dns_scheme(s), []).append(s["name"])
    for s in http:
        alike.setdefault(_registry_scheme(s), []).append(s["name"])
    encrypted = {s.get("upstream") == "tls" for s in dns} | {bool(s.get("tls")) for s in http}
    note = ("; encryption differs between schemes" if len(encrypted) > 1 else
            "; every scheme encrypted" if encrypted == {True} else
            "; every scheme in plaintext" if encrypted else "")
    return "transport: " + "; ".join(f"{', '.join(names)}: {what}"
                                     for what, names in alike.items()) + note


def knowledge_line(scenario: Mapping[str, Any]) -> str | None:
    """What the DNS side knows that a registry may not (a routing query log)."""
    tx = (scenario.get("namespace") or {}).get("taxonomy") or {}
    log = tx.get("routing_log")
    if not log:
        return None
    http = [s for s in scenario.get("schemes") or [] if "upstream" not in s]
    given = [s["name"] for s in http if s.get("index") == "log"]
    denied = [s["name"] for s in http if s.get("index") != "log"]
    registries = "; ".join(
        ([f"{', '.join(given)} index the same log (pseudo-documents)"] if given else [])
        + ([f"{', '.join(denied)} index tool descriptions only"] if denied else []))
    return (f"knowledge: ToolDNS zones route with a query log ({log.get('per_tool')} "
            f"logged queries per tool, {1 - log.get('test_fraction', 0.4):.0%} of the "
            f"queries)" + (f"; {registries}" if registries else ""))


def mirror_line(summary: Mapping[str, Any] | None) -> str | None:
    """What one refresh of the drafts' agents' catalogue mirror costs (``summary["mirror"]``,
    sim.run.mirror), not charged to their discoveries."""
    m = (summary or {}).get("mirror")
    if not m:
        return None
    return (f"mirror: the agents of {', '.join(m['schemes'])} search a local copy of the "
            f"catalogue; one refresh pages {m['source']}: {m['servers']} servers in "
            f"{m['requests']} "
            f"requests, {m['bytes_down']:,} bytes down, {m['bytes_up']:,} up, "
            f"{m['packets']:,} packets (not charged to their discoveries)")


def conditions(scenario: Mapping[str, Any], summary: Mapping[str, Any] | None = None
               ) -> list[str]:
    """The footer lines: processing and registry search, transport, knowledge, and (given
    a run's summary) the mirror's upkeep."""
    lines = [processing_line(scenario), transport_line(scenario)]
    if (known := knowledge_line(scenario)) is not None:
        lines.append(known)
    if (mirror := mirror_line(summary)) is not None:
        lines.append(mirror)
    return lines
