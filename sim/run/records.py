"""Tidy records of a run: one row per discovery (the per-query columns, DNS and registry
schemes alike, plus the session layer's) and one row per node (its load).

Records carry only what the engine observed (its :class:`sim.engines.base.EngineOutput`)
and what the plan and namespace say as built (addresses, zones, requests); every engine
returns the same output, so records never depend on the engine.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from mypy_extensions import mypyc_attr

from nodes.agent.pipeline import PipelineResult
from nodes.agent.session import JobInfo
from nodes.agent.stub import StubResult
from nodes.dns.wire import parse_intent_qname
from nodes.registry.client import HttpStep, RegistryResult
from nodes.resolver.types import DiscoveryResult
from nodes.searchcost import SearchCost, cost_of
from sim.accounting import (
    DotModel,
    WireCost,
    http_cost,
    keepalive_acks,
    steps_cost,
)
from sim.build.network import Network
from sim.build.registries import registry_ids
from sim.build.runplan import RunPlan
from sim.build.workload import Job
from sim.catalog.registries import REGISTRIES
from sim.engines.base import EngineOutput
from sim.engines.fidelity import RANKING_CALLS
from sim.scenario import Scenario
from sim.schemes import DnsScheme, RegistryScheme, SchemeSpec
from topologies.namespace import Namespace

SESSION_COLUMNS = ("session", "session_hit", "tools_in_context", "context_tokens",
                   "evictions_ttl", "evictions_lru", "evictions_guard", "guard_trips",
                   "redundant_search", "fallback", "rbac_filtered", "fallback_tools",
                   "fallback_bytes_up", "fallback_bytes_down", "fallback_packets",
                   "fallback_delay_ms")


def session_columns(jobs: Mapping[int, JobInfo] | None, job: Job) -> dict:
    """A record's session columns from what the agent's session did per job (``jobs``, the
    output's ``sessions`` entry of the agent; None: the agent has no session, zeros). The
    registry fallback's bytes, packets and delay are MODELLED (not carried by the engine);
    its delay is part of ``latency_ms``."""
    info = jobs.get(job.index) if jobs is not None else None
    if info is None:
        return {"session": jobs is not None,
                **{c: "" if c == "fallback" else False if c in ("session_hit",
                                                                "redundant_search") else 0
                   for c in SESSION_COLUMNS[1:]}}
    return {"session": True, "session_hit": info.hit,
            "tools_in_context": info.tools_in_context, "context_tokens": info.context_tokens,
            "evictions_ttl": info.evictions_ttl, "evictions_lru": info.evictions_lru,
            "evictions_guard": info.evictions_guard, "guard_trips": int(info.guard_trip),
            "redundant_search": info.redundant,
            "fallback": info.fallback, "rbac_filtered": info.rbac_filtered,
            "fallback_tools": info.fallback_tools,
            "fallback_bytes_up": info.fallback_bytes_up,
            "fallback_bytes_down": info.fallback_bytes_down,
            "fallback_packets": info.fallback_packets,
            "fallback_delay_ms": round(info.fallback_delay_s * 1000, 6)}


#: ``json.dumps(cache, sort_keys=True)`` without making an encoder per record
_CACHE_JSON = json.JSONEncoder(sort_keys=True).encode


def _walk_examined(walk: DiscoveryResult, zone_of: dict[str, str],
                   cand: dict[tuple[str, str], int]) -> tuple[int, int]:
    """Items the servers scored for a walk and the ranking passes that scored them: per
    answered cursor query (option) or intent-in-the-name query at the zone the server
    holds, that zone's candidates."""
    total = passes = 0
    for step in walk.steps:
        if step.rtt is None:
            continue
        zone = zone_of.get(step.server[0])
        if zone is None:
            continue
        if step.with_intent and step.qtype == "SRV":
            if f"._{zone}" in f".{step.qname}":  # the cursor stands here
                total += cand.get((zone, walk.request.service), 0)
                passes += 1
        elif step.qname.startswith("k"):
            named = parse_intent_qname(step.qname, zone)
            if named is not None:
                total += cand.get((zone, named.service), 0)
                passes += 1
    return total, passes


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass
class Lookups:
    """What records look up in the namespace, built once per run."""

    # SRV target -> tool id, built per zone as answers come in (a dict whose get is its own:
    # a Mapping, so compiled code calls that get, not dict's)
    target_ids: Mapping[str, str]
    registry_ids: dict[str, str]  # registry URL -> tool id (registry schemes)
    per_service: Counter[str]  # tools per service (what a registry search scores)
    candidates: dict[tuple[str, str], int]  # (zone, service) -> items its server scores
    cost: SearchCost  # the search compute model of the namespace's scorer

    @classmethod
    def of(cls, sc: Scenario, ns: Namespace) -> Lookups:
        return cls(ns.target_ids(), registry_ids(ns) if sc.registry_schemes() else {},
                   Counter(t.service for t in ns.tools.values()), ns.scored_items(),
                   cost_of(sc.namespace.scorer))


def query_record(sc: Scenario, engine: str, scheme: DnsScheme, job: Job, stub: StubResult,
                 walks: list[DiscoveryResult], target_ids: Mapping[str, str],
                 zone_of: dict[str, str], cand: dict[tuple[str, str], int],
                 search: SearchCost, dot: DotModel | None = None) -> dict:
    """One discovery's row (a ToolDNS scheme): outcome, accuracy, rounds, bytes, caches,
    and the search compute its ranking passes cost (:mod:`nodes.searchcost`; a resolver that
    sends the intent's embedding encodes it once for all of them)."""
    returned = [target_ids.get(e.target, e.target) for e in stub.endpoints]
    examined = passes = 0
    for w in walks:
        items, n = _walk_examined(w, zone_of, cand)
        examined += items
        passes += n
    if isinstance(stub, PipelineResult):  # the agent's own search of its mirror
        examined += stub.searched
        passes += 1
    encodings = min(passes, 1) if scheme.send_embedding else passes
    truth = set(job.query.truth)
    steps = [s for w in walks for s in w.steps]
    cost: WireCost = steps_cost(stub.steps) + steps_cost(steps, dot)
    cache: dict[str, int] = {}
    for w in walks:
        for key, value in w.cache.items():
            cache[key] = cache.get(key, 0) + value
    return {
        "scenario": sc.name,
        "engine": engine,
        "scheme": scheme.name,
        "seed": sc.seed,
        "phase": job.phase,
        "job": job.index,
        "agent": job.agent,
        "query_id": job.query.id,
        "query_source": job.query.source,
        "intent": job.query.text,
        "service": job.query.service,
        "truth": " ".join(job.query.truth),
        "returned": " ".join(returned),
        "success": bool(returned),
        "hit_at_1": bool(returned) and returned[0] in truth,
        "hit_at_k": bool(truth & set(returned)),
        "tools_examined": examined,
        "encodings": encodings,
        "compute_ns": _compute_ns(search, encodings, examined),
        "round_trips": _round_trips(walks, stub),
        "exchanges": len(steps),
        "stub_attempts": len(stub.steps),
        "sent_s": round(stub.sent, 9),
        "latency_ms": round(stub.latency * 1000, 6),
        "bytes_up": cost.bytes_up,
        "bytes_down": cost.bytes_down,
        "packets_up": cost.packets_up,
        "packets_down": cost.packets_down,
        "servers_contacted": len({s.server for s in steps}),
        "cache_hits": sum(cache.values()),
        "cache_detail": _CACHE_JSON(cache) if cache else "{}",  # the encoder is interpreted
        "timeouts": sum(s.outcome == "timeout" for s in steps + stub.steps),
        "retries": sum(s.outcome == "timeout" for s in steps),
        "tcp_exchanges": sum(s.transport == "tcp" for s in steps),
        "rcode": stub.rcode,
        "error": stub.error or next((w.error for w in walks if w.error), "") or "",
    }


def connection_acks(plan: RunPlan, output: EngineOutput) -> dict[int, int]:
    """Client pure ACKs per HTTP exchange (by ``id``) on kept-alive connections, from the
    exchanges of all discoveries on each (agent, connection) in time order."""
    conns: dict[tuple[str, int], list[HttpStep]] = {}
    for job, res in output.stubs:
        assert isinstance(res, RegistryResult)  # a registry scheme's
        for step in res.steps:
            conns.setdefault((plan.agent_order[job.agent], step.conn), []).append(step)
    acks: dict[int, int] = {}
    for steps in conns.values():
        steps.sort(key=lambda st: st.sent)
        acks.update(zip(map(id, steps), keepalive_acks(steps), strict=True))
    return acks


def registry_record(sc: Scenario, engine: str, scheme: RegistryScheme, job: Job,
                    res: RegistryResult | None, ids: dict[str, str], per_service: Counter,
                    plan: RunPlan, search: SearchCost,
                    acks: dict[int, int] | None = None) -> dict:
    """The same columns as :func:`query_record`, for an HTTP-registry discovery."""
    if res is None:
        res = RegistryResult(tag=job, request=plan.requests[job.index], sent=0.0,
                             error="not completed")
    assert plan.tcp is not None  # a registry scheme's plan has its TCP model
    returned = [ids.get(e.target, e.target) for e in res.endpoints]
    truth = set(job.query.truth)
    closed = bool(res.connections or res.steps) and (not scheme.keepalive or bool(res.error))
    cost = http_cost(res.steps, set(res.connections), closed, scheme.keepalive, plan.tls,
                     plan.tcp, [acks.get(id(s), 0) for s in res.steps] if acks else None)
    if REGISTRIES[scheme.kind].ranks == "client":  # it ranks the lists it fetched, at once
        examined = res.examined
        encodings, scored = min(res.examined, 1), res.examined
    else:  # each search answered ranks the service's pool at the registry; an answer from
        # the agent's own cache (no request) ranks nothing
        asked = any(s.call in RANKING_CALLS for s in res.steps)
        examined = per_service[job.query.service] if asked else 0
        encodings = sum(s.call in RANKING_CALLS and s.status == 200 for s in res.steps)
        scored = encodings * per_service[job.query.service]
    return {
        "scenario": sc.name, "engine": engine, "scheme": scheme.name, "seed": sc.seed,
        "phase": job.phase, "job": job.index, "agent": job.agent, "query_id": job.query.id,
        "query_source": job.query.source, "intent": job.query.text,
        "service": job.query.service, "truth": " ".join(job.query.truth),
        "returned": " ".join(returned), "success": bool(returned) and not res.error,
        "hit_at_1": bool(returned) and returned[0] in truth,
        "hit_at_k": bool(truth & set(returned)),
        "tools_examined": examined, "encodings": encodings,
        "compute_ns": _compute_ns(search, encodings, scored), "round_trips": res.round_trips,
        "exchanges": len(res.steps), "stub_attempts": 1,
        "sent_s": round(res.sent, 9), "latency_ms": round(res.latency * 1000, 6),
        "bytes_up": cost.bytes_up, "bytes_down": cost.bytes_down,
        "packets_up": cost.packets_up, "packets_down": cost.packets_down,
        "servers_contacted": 1, "cache_hits": 0, "cache_detail": "{}",
        "timeouts": sum(s.outcome == "timeout" for s in res.steps), "retries": 0,
        "tcp_exchanges": len(res.steps),
        "rcode": str(res.steps[-1].status or "") if res.steps else "",
        "error": res.error or "",
    }


def _compute_ns(search: SearchCost, encodings: int, items: int) -> int:
    """Nanoseconds of search compute, ``encodings`` intent encodings and ``items`` scored
    (a whole number: the run's tally sums it exactly)."""
    return round((search.encode * encodings + search.per_item * items) * 1e9)


def _round_trips(walks: list[DiscoveryResult], stub: StubResult) -> int:
    """Sequential upstream rounds: the walks' rounds, counting the parallel A queries of a
    qname-style agent's second round once (their longest walk), and each round of a
    pipeline agent's parallel questions once (its longest walk)."""
    if isinstance(stub, PipelineResult):
        longest: dict[int, int] = {}
        for w in walks:
            qid = w.client[1] if w.client is not None else -1
            longest[qid] = max(longest.get(qid, 0), w.rounds)
        return sum(max((longest.get(q, 0) for q in ids), default=0) for ids in stub.rounds)
    if not stub.a_ids:
        return sum(w.rounds for w in walks)
    a_ids = set(stub.a_ids)
    first = sum(w.rounds for w in walks if w.client is None or w.client[1] not in a_ids)
    return first + max((w.rounds for w in walks
                        if w.client is not None and w.client[1] in a_ids), default=0)


def stub_walks(output: EngineOutput, agent_ip: str, stub: StubResult) -> list[DiscoveryResult]:
    """The resolver walks that served one stub query: same client and query ID, started
    while the stub waited (IDs are 16 bits, so an agent reuses one now and then)."""
    end = stub.finished if stub.finished else float("inf")
    return [w for qid in stub.ids for w in output.walks.get((agent_ip, qid), [])
            if stub.sent <= w.started <= end]


def take_walks(output: EngineOutput, agent_ip: str, stub: StubResult) -> list[DiscoveryResult]:
    """:func:`stub_walks`, and those walks leave ``output`` with any older ones under the
    same IDs (no later discovery can claim a walk that started before it was sent)."""
    walks = stub_walks(output, agent_ip, stub)
    end = stub.finished if stub.finished else float("inf")
    table = output.walks
    for qid in stub.ids:
        key = (agent_ip, qid)
        kept = [w for w in table.get(key, ()) if w.started > end]
        if kept:
            table[key] = kept
        else:
            table.pop(key, None)
    return walks


def load_records(sc: Scenario, engine: str, scheme: SchemeSpec, plan: RunPlan,
                 output: EngineOutput, network: Network) -> list[dict]:
    """One row per node that sent or received: packets, bytes, and what it answered (the
    servers' and registry's counters as the output reports them)."""
    rows = []
    zone_of = plan.hierarchy.zone_of
    for ip, counters in sorted(output.load.items()):
        server = output.servers.get(ip)
        role = network.role_of.get(ip, "")
        row = {"scenario": sc.name, "engine": engine, "scheme": scheme.name, "seed": sc.seed,
               "node": ip, "role": role.split(":")[0], "zone": zone_of.get(ip, ""),
               **{k: counters.get(k, 0) for k in ("rx_packets", "rx_bytes", "tx_packets",
                                                   "tx_bytes")}}
        if plan.registry is not None and ip == plan.registry.address:
            row["role"] = "registry"
            counts = {**output.registry.get("server", {}), **output.registry.get("app", {})}
            row.update({f"http_{k}": v for k, v in sorted(counts.items())})
        if server is not None:
            stats = server
            row.update({k: stats.get(k, 0) for k in ("semantic", "referral", "standard",
                                                     "nxdomain", "nodata", "formerr",
                                                     "packet_cache_hit")})
        rows.append(row)
    return rows
