"""Run a scenario: build namespace, network and nodes, replay the workload per scheme on
an engine, and turn what happened into tidy per-query records and per-node load.

Records carry only what the engine observed and the namespace says; every engine returns
the same :class:`sim.engines.base.EngineOutput`, so records never depend on the engine.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.files import OutputError, Staging, check_output, output_dir
from nodes.agent.session import (
    META_TOOL_TOKENS,
    RegistryFallback,
    Scopes,
    Session,
    SessionAgent,
    SessionConfig,
    ToolInfo,
    static_tokens,
    tool_tokens,
)
from nodes.agent.stub import StubAgent, StubResult
from nodes.dns.wire import parse_intent_qname
from nodes.dns.zone import Ttls
from nodes.registry.client import RegistryAgent, RegistryConfig, RegistryResult
from nodes.resolver.core import Discovery, DiscoveryResult, Endpoint, ResolverConfig
from nodes.scoring import CachedEncoder, default_encoder
from sim.accounting import (
    DotModel,
    TcpModel,
    WireCost,
    dot_acks,
    dot_port,
    http_cost,
    keepalive_acks,
    steps_cost,
)
from sim.build.faults import attach_faults, fault_report, registry_address
from sim.build.hierarchy import Hierarchy, build_hierarchy, dot_setup
from sim.build.registries import (
    REGISTRY_HOST,
    REGISTRY_PORT,
    build_registry,
    tls_sizes,
)
from sim.build.registries import registry_ids as registry_id_map
from sim.build.runplan import RunPlan
from sim.build.trust import sign_hierarchy, trust_policy, trust_report
from sim.build.workload import Job, build_jobs
from sim.engines.base import Engine, EngineOutput
from sim.provenance import KEY as PROVENANCE
from sim.provenance import provenance, utc_now
from sim.retrieval.evaluator import disk_cached_encoder, save_encoder_cache, taxonomy_namespace
from sim.run.capture import Capture, attribute, read_packets
from sim.scenario import Scenario, ScenarioError, SchemeSpec, resolved_yaml
from topologies import network as net
from topologies.datasets import load_catalog, load_queries
from topologies.namespace import Namespace, from_catalog, inject_rogue, synthetic

log = logging.getLogger("tooldns.run")  # -v: what was built and how long each scheme took


def engine_for(name: str) -> Engine:
    """Engines by name; imported lazily so the simulation never loads asyncio code."""
    if name == "simpy":
        from sim.engines.simpy import run_simpy

        return run_simpy
    if name == "live":
        from sim.engines.live import run_live

        return run_live
    if name == "ray":
        from sim.engines.ray import run_ray

        return run_ray
    if name == "mininet":
        from sim.engines.mininet import run_mininet

        return run_mininet
    raise ScenarioError(f"engine: unknown engine {name!r} (simpy | live | ray | mininet)")


ENGINES = ("simpy", "live", "ray", "mininet")


# ------------------------------------------------------------------------ building


def namespace_encoder(sc: Scenario) -> CachedEncoder | None:
    """The dense scenario's shared sentence encoder (disk-cached with ``cache_dir``)."""
    if sc.namespace.scorer != "dense" and not (sc.namespace.taxonomy and (
            sc.namespace.taxonomy.vectors == "dense" or sc.namespace.taxonomy.centroids)):
        return None
    key = sc.namespace.cache_dir or ""
    if key not in _ENCODERS:
        _ENCODERS[key] = (disk_cached_encoder(sc.namespace.cache_dir) if key
                          else default_encoder())
    return _ENCODERS[key]


_ENCODERS: dict[str, CachedEncoder] = {}  # one model (and cache) per process and folder


def build_namespace(sc: Scenario) -> Namespace:
    spec = sc.namespace
    if spec.source == "catalog":
        assert spec.catalog is not None
        queries = spec.queries
        if queries is None and (Path(spec.catalog).parent / "queries.jsonl").exists():
            queries = str(Path(spec.catalog).parent / "queries.jsonl")
        if spec.taxonomy is None:  # the catalogue's own categories
            ns = from_catalog(spec.catalog, queries, limit=spec.limit, protocols=spec.protocols)
        else:
            rows = load_catalog(spec.catalog, spec.limit, spec.protocols)
            qrows = load_queries(queries, [r["id"] for r in rows]) if queries else []
            ns = taxonomy_namespace(spec.taxonomy, rows, qrows, sc.seed,
                                    f"{sc.name}:{spec.taxonomy.kind}", namespace_encoder(sc))
    else:
        n_queries = max(sc.workload.pool or 0, sc.workload.queries, 200)
        ns = synthetic(n_tools=spec.tools, branching=spec.branching, depth=spec.depth,
                       seed=sc.seed, n_orgs=spec.orgs, org_tools=spec.org_tools,
                       n_queries=n_queries)
    if spec.rogue is not None:  # a rogue publisher's look-alike tools (sim.build.trust)
        r = spec.rogue
        try:
            inject_rogue(ns, r.tools, r.mode, r.org, r.victim_org, sc.seed)
        except ValueError as exc:
            raise ScenarioError(f"namespace.rogue: {exc}") from None
    return ns


@dataclass
class Network:
    """Where every node sits and how packets travel between them."""

    resolvers: list[str]
    agents: list[str]
    agent_resolver: list[int]
    role_of: dict[str, str]
    path: net.PathModel


def build_network(sc: Scenario, hierarchy: Hierarchy) -> Network:
    spec = sc.network
    d = spec.link.delay
    link = net.LinkSpec(delay=net.DelayModel(dist=d.dist, mean=d.mean, std=d.std,
                                             samples=tuple(d.samples)),
                        loss=spec.link.loss, bandwidth=spec.link.bandwidth)
    params = dict(spec.params)
    if spec.topology == "file":
        params["path"] = spec.file
    try:
        graph = net.build_graph(spec.topology, spec.nodes, link, sc.seed, **params)
    except (ValueError, TypeError) as exc:
        raise ScenarioError(f"network: {exc}") from None
    resolvers = [f"127.0.53.{i + 1}" for i in range(spec.resolvers)]
    agents = [f"127.2.{i // 250}.{i % 250 + 1}" for i in range(spec.agents)]
    agent_resolver = [i % len(resolvers) for i in range(len(agents))]
    roles: list[net.Role] = []
    role_of: dict[str, str] = {}
    orgs = {m["address"]: m["org"] for m in hierarchy.manifest}
    kinds = {m["address"]: m["role"] for m in hierarchy.manifest}
    for ip in hierarchy.servers:
        role_of[ip] = f"server:{ip}"
        roles.append(net.Role(role_of[ip], kinds[ip], orgs[ip]))
    for i, ip in enumerate(resolvers):
        role_of[ip] = f"resolver:{i}"
        roles.append(net.Role(role_of[ip], "resolver", None))
    for i, ip in enumerate(agents):
        role_of[ip] = f"agent:{i}"
        roles.append(net.Role(role_of[ip], "agent", f"resolver:{agent_resolver[i]}"))
    session = sc.agents.session  # a marketplace fallback needs the registry placed too
    if any(s.kind != "tooldns" for s in sc.schemes) or (
            session is not None and session.fallback == "registry"):
        for r in range(max((s.replicas for s in sc.schemes if s.kind != "tooldns"),
                           default=1)):
            role_of[registry_address(r)] = f"registry:{r}"
            roles.append(net.Role(f"registry:{r}", "registry", None))
    placement = net.place(graph, roles, sc.seed, strategy=spec.placement)
    return Network(resolvers, agents, agent_resolver, role_of, net.PathModel(graph, placement))


def start_zone(sc: Scenario, ns: Namespace) -> str:
    if sc.trust.policy != "org":
        return "tools."
    zones = sorted(z for z, node in ns.zones.items() if node.org == sc.trust.org)
    if not zones:
        raise ScenarioError(f"trust.org: no zone of organisation {sc.trust.org!r} in the "
                            f"namespace")
    return zones[0]


def scenario_hierarchy(sc: Scenario, ns: Namespace) -> Hierarchy:
    """The scenario's authoritative servers, freshly built."""
    ttls = Ttls(ns=sc.caches.ns_ttl, srv=sc.caches.srv_ttl, a=sc.caches.a_ttl,
                negative=sc.caches.negative_ttl)
    hierarchy = build_hierarchy(ns, replicas=sc.namespace.replicas, scorer=sc.namespace.scorer,
                                ttls=ttls, max_udp_size=sc.namespace.max_udp_size,
                                encoder=namespace_encoder(sc),
                                packet_cache=(sc.caches.packet_cache_size
                                              if sc.caches.packet_cache else 0),
                                packet_cache_bytes=sc.caches.packet_cache_bytes,
                                cname_referral=sc.namespace.cname_referral,
                                aaaa=sc.namespace.aaaa)
    if (encoder := namespace_encoder(sc)) is not None:
        save_encoder_cache(encoder)  # the tools' embeddings, for the next run (disk cache)
    return hierarchy


def make_plan(sc: Scenario, scheme: SchemeSpec, ns: Namespace, jobs: list[Job],
              dns_port: int = 53, hierarchy: Hierarchy | None = None
              ) -> tuple[RunPlan, Network]:
    """One scheme's plan. ``hierarchy``: servers built earlier in this run, reused (and
    reset) when they can be shared (:attr:`Hierarchy.shareable`); else built here."""
    if hierarchy is not None and hierarchy.shareable:
        hierarchy.reset()
    else:
        hierarchy = scenario_hierarchy(sc, ns)
    network = build_network(sc, hierarchy)
    anchor = sign_hierarchy(hierarchy, sc.seed) if sc.namespace.dnssec else ""
    trust = scheme.trust or sc.trust
    if scheme.send_embedding and sc.namespace.scorer != "dense":
        raise ScenarioError(f"schemes: {scheme.name}: send_embedding needs namespace.scorer: "
                            f"dense")
    config = ResolverConfig(mode=scheme.mode, beam=scheme.beam, search=scheme.search,
                            merge=scheme.merge, send_embedding=scheme.send_embedding,
                            timeout=scheme.timeout,
                            max_attempts=scheme.max_attempts, query_mock=scheme.query_mock,
                            cache=scheme.cache, dns_port=dns_port, selection=scheme.selection,
                            srtt_decay=scheme.srtt_decay, serve_stale=scheme.serve_stale,
                            stale_ttl=scheme.stale_ttl, trust=trust_policy(trust, ns),
                            dnssec=scheme.dnssec, trust_anchor=anchor,
                            cache_max_entries=scheme.cache_max_entries,
                            cache_max_bytes=scheme.cache_max_bytes,
                            max_clients=scheme.max_clients, upstream=scheme.upstream)
    plan = RunPlan(
        scenario_name=sc.name, scheme=scheme.name, seed=sc.seed, hierarchy=hierarchy,
        resolvers={}, agents={}, agent_order=list(network.agents), role_of=network.role_of,
        path=network.path, jobs=jobs, requests={},
        server_time=sc.network.processing.server,
        server_semantic_time=sc.network.processing.server_semantic,
        resolver_time=sc.network.processing.resolver,
        resolver_stub_time=sc.network.processing.resolver_stub,
        agent_time=sc.network.processing.agent,
        registry_time=sc.network.processing.registry,
        dns_port=dns_port, closed_loop=sc.workload.arrival.process == "closed",
    )
    if scheme.kind == "tooldns" and scheme.upstream == "tls":
        plan.dot = dot_setup(sc.seed, idle=scheme.upstream_idle,
                             max_connections=scheme.upstream_connections)
    for i, ip in enumerate(network.resolvers):
        plan.resolvers[ip] = hierarchy.resolver(seed=0, config=replace(config), name=ip)
        plan.resolvers[ip].rng = plan.make_rng(f"resolver{i}")
    for i, ip in enumerate(network.agents):
        resolver = (network.resolvers[network.agent_resolver[i]], dns_port)
        plan.agents[ip] = StubAgent(resolver, plan.make_rng(f"agent{i}"), name=ip,
                                    option_code=hierarchy.option_code,
                                    timeout=sc.agents.timeout, attempts=sc.agents.attempts,
                                    style="qname" if scheme.mode == "qname" else "option",
                                    aaaa=sc.namespace.aaaa)
    start = start_zone(sc.model_copy(update={"trust": trust}), ns)
    if scheme.kind != "tooldns":
        _registry_agents(sc, scheme, ns, plan, network)
    elif session_applies(sc, scheme):
        _session_agents(sc, ns, plan, network)
    attach_faults(sc, scheme, plan)
    for job in jobs:
        plan.requests[job.index] = Discovery(job.query.text, service=job.query.service,
                                             k=scheme.k, start=start, beam=scheme.beam)
    if scheme.warm:
        plan.warm_services = tuple(sorted({j.query.service for j in jobs}))
    return plan, network


def _registry_agents(sc: Scenario, scheme: SchemeSpec, ns: Namespace, plan: RunPlan,
                     network: Network) -> None:
    """Replace the DNS stub agents by HTTP agents of one registry (same addresses)."""
    setup = build_registry(scheme.kind, ns, plan.hierarchy.scorer(), sc.seed,
                           ttl=sc.caches.srv_ttl)
    plan.registry, plan.tcp = setup, TcpModel(sc.network.mtu)
    if scheme.tls:
        plan.tls = tls_sizes(setup.identity.cert_pem, setup.identity.key_pem, setup.ca.cert_pem)
    config = RegistryConfig(kind=scheme.kind, keepalive=scheme.keepalive, tls=scheme.tls,
                            timeout=max(scheme.timeout * scheme.max_attempts, 1.0),
                            resolve=scheme.resolve, resolve_top=scheme.resolve_top,
                            verify=scheme.verify, revocation=scheme.revocation,
                            cache_ttl=sc.caches.srv_ttl, token=setup.token)
    plan.agents = {ip: RegistryAgent((setup.address, setup.port), REGISTRY_HOST, config,
                                     scorer=plan.hierarchy.scorer(), ca=setup.ca.cert, name=ip)
                   for ip in network.agents}  # type: ignore[misc]


# ------------------------------------------------------------------------ sessions


def session_applies(sc: Scenario, scheme: SchemeSpec) -> bool:
    """Whether the agents of ``scheme`` run the session layer (``agents.session``)."""
    spec = sc.agents.session
    return (spec is not None and scheme.kind == "tooldns"
            and (not spec.schemes or scheme.name in spec.schemes))


def session_tool_of(ns: Namespace) -> Callable[[str], ToolInfo | None]:
    """SRV target -> the tool as a session binds it (Eq. 3 tokens of name and
    description: the namespace carries no parameter schemas), cached."""
    ids = ns.target_ids()
    known: dict[str, ToolInfo | None] = {}

    def tool_of(target: str) -> ToolInfo | None:
        if target not in known:
            tid = ids.get(target)
            known[target] = None if tid is None else session_tool(ns, tid)
        return known[target]

    return tool_of


def session_tool(ns: Namespace, tool_id: str) -> ToolInfo:
    t = ns.tools[tool_id]
    return ToolInfo(t.id, t.target, t.name, t.zone, t.org, t.service,
                    tool_tokens(t.name, t.description),
                    Endpoint(t.target, t.address or None, t.port, 0, 0, t.zone))


def session_scopes(sc: Scenario) -> Scopes | None:
    spec = sc.agents.session
    if spec is None or spec.scopes is None:
        return None
    return Scopes(frozenset(spec.scopes.user),
                  tuple(z if z.endswith(".") else z + "." for z in spec.scopes.roles),
                  frozenset(spec.scopes.orgs))


def check_session(sc: Scenario, ns: Namespace, engine: str) -> None:
    """Scenario errors of ``agents.session`` that need the namespace or the engine."""
    spec = sc.agents.session
    if spec is None:
        return
    if engine not in ("simpy", "live") or sc.engine_options.shards.workers > 1:
        raise ScenarioError(f"agents.session: the session layer runs on the simpy and live "
                            f"engines (unsharded), not {engine}"
                            + (" with shards" if engine in ("simpy", "live") else ""))
    for field, ids in (("always_include", spec.always_include),
                       ("guard_exempt", spec.guard_exempt),
                       ("scopes.user", spec.scopes.user if spec.scopes else ())):
        unknown = [t for t in ids if t not in ns.tools]
        if unknown:
            raise ScenarioError(f"agents.session.{field}: no tool with id "
                                f"{', '.join(map(repr, unknown[:3]))} in the namespace")


def _session_agents(sc: Scenario, ns: Namespace, plan: RunPlan, network: Network) -> None:
    """Put a session (nodes.agent.session) in front of every DNS stub agent: one per agent."""
    spec = sc.agents.session
    assert spec is not None
    config = SessionConfig(capacity=spec.capacity, ttl=spec.ttl, min_tools=spec.min_tools,
                           fallback=spec.fallback, wider_k=spec.wider_k,
                           wider_beam=spec.wider_beam, guard_window=spec.guard_window,
                           guard_max_repeats=spec.guard_max_repeats,
                           guard_exempt=spec.guard_exempt, guard_period=spec.guard_period,
                           scopes=session_scopes(sc))
    always = [session_tool(ns, t) for t in spec.always_include]
    tool_of = session_tool_of(ns)
    setup = None
    if spec.fallback == "registry":  # the marketplace: an AgentDNS registry of the run
        setup = build_registry("agentdns", ns, plan.hierarchy.scorer(), sc.seed,
                               ttl=sc.caches.srv_ttl)
        by_url = registry_id_map(ns)
        tcp = TcpModel(sc.network.mtu)

        def cost(res: RegistryResult) -> tuple[int, int, int]:  # MODELLED wire cost
            c = http_cost(res.steps, set(res.connections), True, False, None, tcp)
            return c.bytes_up, c.bytes_down, c.packets_up + c.packets_down

        def url_tool(url: str) -> ToolInfo | None:
            tid = by_url.get(url)
            return None if tid is None else session_tool(ns, tid)

    for ip, stub in list(plan.agents.items()):
        fallback = None
        if setup is not None:
            client = RegistryAgent((setup.address, setup.port), REGISTRY_HOST,
                                   RegistryConfig(kind="agentdns", token=setup.token,
                                                  timeout=sc.agents.timeout), name=ip)
            rtt = network.path.rtt_estimate(network.role_of[ip], "registry:0")
            busy = sc.network.processing.server + sc.network.processing.registry
            fallback = RegistryFallback(client, setup.server, rtt, busy, cost, url_tool, ip)
        plan.agents[ip] = SessionAgent(stub, Session(config, always),  # type: ignore[assignment]
                                       tool_of, fallback)


SESSION_COLUMNS = ("session", "session_hit", "tools_in_context", "context_tokens",
                   "evictions_ttl", "evictions_lru", "evictions_guard", "guard_trips",
                   "redundant_search", "fallback", "rbac_filtered", "fallback_tools",
                   "fallback_bytes_up", "fallback_bytes_down", "fallback_packets",
                   "fallback_delay_ms")


def session_columns(agent: object, job: Job) -> dict:
    """A record's session columns (zeros for a scheme without sessions). The registry
    fallback's bytes, packets and delay are MODELLED (not carried by the engine); its
    delay is part of ``latency_ms``."""
    info = agent.info.get(job.index) if isinstance(agent, SessionAgent) else None
    if info is None:
        return {"session": isinstance(agent, SessionAgent),
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


def session_summary(sc: Scenario, df: pd.DataFrame, ns: Namespace) -> dict:
    """The summary's ``session`` block: per scheme with sessions, hits, evictions, guard
    trips, fallbacks, RBAC drops and tool tokens (static: every tool in scope bound at
    once; dynamic: meta-tool + always-include + bound tools, per query)."""
    spec = sc.agents.session
    assert spec is not None
    scopes = session_scopes(sc)
    static = static_tokens((session_tool(ns, t) for t in ns.tools), scopes)
    out: dict = {"static_tokens": static, "meta_tool_tokens": META_TOOL_TOKENS,
                 "fallback": spec.fallback, "schemes": {}}
    if spec.fallback == "registry":
        out["fallback_cost"] = "modelled"  # not carried by the engine (nodes.agent.session)
    for scheme, g in df[df.session.astype(bool)].groupby("scheme", sort=False):
        fb = g.fallback[g.fallback != ""].value_counts()
        out["schemes"][scheme] = {
            "queries": len(g), "hits": int(g.session_hit.sum()),
            "misses": int((~g.session_hit.astype(bool)).sum()),
            "hit_rate": round(float(g.session_hit.mean()), 6),
            "evictions_ttl": int(g.evictions_ttl.sum()),
            "evictions_lru": int(g.evictions_lru.sum()),
            "evictions_guard": int(g.evictions_guard.sum()),
            "guard_trips": int(g.guard_trips.sum()),
            "redundant_searches": int(g.redundant_search.sum()),
            "fallbacks": {k: int(v) for k, v in sorted(fb.items())},
            "rbac_filtered": int(g.rbac_filtered.sum()),
            "mean_tools_in_context": round(float(g.tools_in_context.mean()), 3),
            "mean_context_tokens": round(float(g.context_tokens.mean()), 3),
            "max_context_tokens": int(g.context_tokens.max()),
            "token_reduction": (round(1 - float(g.context_tokens.mean()) / static, 6)
                                if static else None),
        }
        if spec.fallback == "registry":
            out["schemes"][scheme]["fallback_modelled"] = {
                "bytes": int((g.fallback_bytes_up + g.fallback_bytes_down).sum()),
                "packets": int(g.fallback_packets.sum()),
                "mean_delay_ms": round(float(g.fallback_delay_ms[g.fallback == "registry"]
                                             .mean()), 6) if (g.fallback == "registry").any()
                else 0.0}
    return out


# ------------------------------------------------------------------------ records


def _candidates(ns: Namespace) -> dict[tuple[str, str], int]:
    """Items a server scores for (zone, service): eligible children, or the leaf's tools."""
    below = ns.services_below()
    tools = ns.tools
    out: dict[tuple[str, str], int] = {}
    for zone, node in ns.zones.items():
        if node.children:
            counts = Counter(s for c in node.children for s in below[c])
        else:
            counts = Counter(tools[t].service for t in node.tools)
        for service in ("mcp", "a2a", "rest", "skill"):
            out[zone, service] = counts[service]
    return out


def _walk_examined(walk: DiscoveryResult, zone_of: dict[str, str],
                   cand: dict[tuple[str, str], int]) -> int:
    """Items the servers scored for a walk: per answered cursor query (option) or
    intent-in-the-name query at the zone the server holds, that zone's candidates."""
    total = 0
    for step in walk.steps:
        if step.rtt is None:
            continue
        zone = zone_of.get(step.server[0])
        if zone is None:
            continue
        if step.with_intent and step.qtype == "SRV":
            if f"._{zone}" in f".{step.qname}":  # the cursor stands here
                total += cand.get((zone, walk.request.service), 0)
        elif step.qname.startswith("k"):
            named = parse_intent_qname(step.qname, zone)
            if named is not None:
                total += cand.get((zone, named.service), 0)
    return total


def query_record(sc: Scenario, engine: str, scheme: SchemeSpec, job: Job, stub: StubResult,
                 walks: list[DiscoveryResult], ns: Namespace, target_ids: dict[str, str],
                 zone_of: dict[str, str], cand: dict[tuple[str, str], int],
                 dot: DotModel | None = None) -> dict:
    returned = [target_ids.get(e.target, e.target) for e in stub.endpoints]
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
        "tools_examined": sum(_walk_examined(w, zone_of, cand) for w in walks),
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
        "cache_detail": json.dumps(cache, sort_keys=True),
        "timeouts": sum(s.outcome == "timeout" for s in steps + stub.steps),
        "retries": sum(s.outcome == "timeout" for s in steps),
        "tcp_exchanges": sum(s.transport == "tcp" for s in steps),
        "rcode": stub.rcode,
        "error": stub.error or next((w.error for w in walks if w.error), "") or "",
    }


def connection_acks(plan: RunPlan, output: EngineOutput) -> dict[int, int]:
    """Client pure ACKs per HTTP exchange (by ``id``) on kept-alive connections, from the
    exchanges of all discoveries on each (agent, connection) in time order."""
    conns: dict[tuple[str, int], list] = {}
    for job, res in output.stubs:
        for step in res.steps:
            conns.setdefault((plan.agent_order[job.agent], step.conn), []).append(step)
    acks: dict[int, int] = {}
    for steps in conns.values():
        steps.sort(key=lambda st: st.sent)
        acks.update(zip(map(id, steps), keepalive_acks(steps), strict=True))
    return acks


def registry_record(sc: Scenario, engine: str, scheme: SchemeSpec, job: Job,
                    res: RegistryResult | None, ids: dict[str, str], per_service: Counter,
                    plan: RunPlan, acks: dict[int, int] | None = None) -> dict:
    """The same columns as :func:`query_record`, for an HTTP-registry discovery."""
    if res is None:
        res = RegistryResult(tag=job, request=plan.requests[job.index], sent=0.0,  # type: ignore[arg-type]
                             error="not completed")
    returned = [ids.get(e.target, e.target) for e in res.endpoints]
    truth = set(job.query.truth)
    closed = bool(res.connections or res.steps) and (not scheme.keepalive or bool(res.error))
    cost = http_cost(res.steps, set(res.connections), closed, scheme.keepalive, plan.tls,
                     plan.tcp, [acks.get(id(s), 0) for s in res.steps] if acks else None)
    examined = res.examined if scheme.kind == "ans" else per_service[job.query.service]
    return {
        "scenario": sc.name, "engine": engine, "scheme": scheme.name, "seed": sc.seed,
        "phase": job.phase, "job": job.index, "agent": job.agent, "query_id": job.query.id,
        "query_source": job.query.source, "intent": job.query.text,
        "service": job.query.service, "truth": " ".join(job.query.truth),
        "returned": " ".join(returned), "success": bool(returned) and not res.error,
        "hit_at_1": bool(returned) and returned[0] in truth,
        "hit_at_k": bool(truth & set(returned)),
        "tools_examined": examined, "round_trips": res.round_trips,
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


def _round_trips(walks: list[DiscoveryResult], stub: StubResult) -> int:
    """Sequential upstream rounds: the walks' rounds, counting the parallel A queries of a
    qname-style agent's second round once (their longest walk)."""
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


def load_records(sc: Scenario, engine: str, scheme: SchemeSpec, plan: RunPlan,
                 output: EngineOutput, network: Network) -> list[dict]:
    rows = []
    zone_of = plan.hierarchy.zone_of
    for ip, counters in sorted(output.load.items()):
        server = plan.hierarchy.servers.get(ip)
        role = network.role_of.get(ip, "")
        row = {"scenario": sc.name, "engine": engine, "scheme": scheme.name, "seed": sc.seed,
               "node": ip, "role": role.split(":")[0], "zone": zone_of.get(ip, ""),
               **{k: counters.get(k, 0) for k in ("rx_packets", "rx_bytes", "tx_packets",
                                                   "tx_bytes")}}
        if plan.registry is not None and ip == plan.registry.address:  # type: ignore[attr-defined]
            row["role"] = "registry"
            row.update({f"http_{k}": v for k, v in sorted(
                {**plan.registry.server.stats, **plan.registry.server.app.stats}.items())})  # type: ignore[attr-defined]
        if server is not None:
            stats = server.stats.counts
            row.update({k: stats.get(k, 0) for k in ("semantic", "referral", "standard",
                                                     "nxdomain", "nodata", "formerr",
                                                     "packet_cache_hit")})
        rows.append(row)
    return rows


# ------------------------------------------------------------------------ running


@dataclass
class RunResult:
    records: pd.DataFrame
    load: pd.DataFrame
    summary: dict
    out_dir: Path | None


class RunInterrupted(KeyboardInterrupt):
    """A run stopped by Ctrl-C (or SIGTERM, see ``tooldns run``): the schemes that had
    finished are in ``out`` (``results.*``, ``nodes.csv``, ``partial.json``), if any."""

    def __init__(self, out: Path | None, finished: list[str], unfinished: list[str],
                 files: list[str]) -> None:
        super().__init__(out, finished, unfinished, files)
        self.out, self.finished, self.unfinished, self.files = out, finished, unfinished, files

    def __str__(self) -> str:
        if not self.files:
            return "interrupted before any scheme finished; nothing written"
        return (f"interrupted: kept {len(self.finished)} finished scheme"
                f"{'s' if len(self.finished) != 1 else ''} of "
                f"{len(self.finished) + len(self.unfinished)} "
                f"({', '.join(self.finished)}) in {self.out}/ ({', '.join(self.files)}); "
                f"not finished: {', '.join(self.unfinished) or 'none'}")


def run_scenario(sc: Scenario, engine: str | None = None, out_dir: str | Path | None = None,
                 progress: Callable[[str], None] | None = None, write: bool = True,
                 live_port: int = 15353, capture: bool = False,
                 check: bool = True,
                 tick: Callable[[str, int, int], None] | None = None) -> RunResult:
    """Run every scheme of ``sc``; with ``capture`` (live engine), also record
    ``capture.pcap`` in the output directory and compare it with the accounting.
    ``tick(scheme, done, total)`` is told of every finished discovery (simpy and live
    engines, not sharded: progress bars). The summary ends with a ``provenance`` block.

    With ``write``, the output folder is checked first (``check``: writable, free space;
    :class:`analysis.files.OutputError` otherwise) and the files appear together at the end. If
    the run is interrupted (``KeyboardInterrupt``: :class:`RunInterrupted` is raised) or
    fails after some schemes finished, those schemes are written with ``partial.json``
    instead of ``summary.json``.
    """
    engine = engine or sc.engine
    started = utc_now()
    out = output_dir(sc, out_dir)
    if write and check:
        warning = check_output(sc, out_dir, capture)
        if warning:
            (progress or _warn)(warning)
    run = engine_for(engine)
    built = time.perf_counter()
    ns = build_namespace(sc)
    log.info("namespace %s: %d tools, %d zones in %.2f s", ns.origin, len(ns.tools),
             len(ns.zones), time.perf_counter() - built)
    jobs = build_jobs(sc, ns, sc.network.agents)
    churn = None  # sim.build.churn: tools changed during the run, probes appended to the jobs
    if sc.workload.churn is not None:
        from sim.build.churn import plan_churn

        churn, jobs = plan_churn(sc, ns, jobs, engine)
    churn_rows: list[dict] = []
    start_zone(sc, ns)  # fail before running anything
    if sc.faults is not None and engine not in ("simpy", "live"):
        raise ScenarioError(f"faults: the {engine} engine does not apply fault schedules yet "
                            f"(simpy and live do)")
    for s in sc.schemes:
        sharded = sc.engine_options.shards.workers > 1
        if s.upstream != "udp" and (engine not in ("simpy", "live") or sharded):
            raise ScenarioError(f"schemes.{s.name}.upstream: DNS over TLS to the servers runs "
                                f"on the simpy and live engines (unsharded), not {engine}"
                                + (" with shards" if sharded else ""))
    check_session(sc, ns, engine)
    target_ids = ns.target_ids()  # built per zone as answers come in
    registry_ids = registry_id_map(ns) if any(s.kind != "tooldns" for s in sc.schemes) else {}
    per_service = Counter(t.service for t in ns.tools.values())
    cand = _candidates(ns)
    records, load, replay, wall = [], [], {}, {}
    windows: list = []
    fault_plans: dict = {}
    sniffer = None
    if capture:
        if engine != "live":
            raise ScenarioError("--capture: packet capture needs the live engine (real sockets)")
        dot = any(s.upstream != "udp" for s in sc.schemes)  # + the DNS-over-TLS port
        sniffer = Capture(out / "capture.pcap",
                          f"net 127.0.0.0/8 and (port {live_port} or tcp port {REGISTRY_PORT}"
                          + (f" or tcp port {dot_port(live_port)})" if dot else ")"))
        try:
            sniffer.start()
        except (OSError, RuntimeError) as exc:  # no tcpdump rights, no interface …
            raise ScenarioError(f"--capture: cannot capture on lo ({exc}); run as root") from None
    calibrated = sc.network.processing.model == "calibrated"
    processing: dict[str, dict[str, float]] = {}
    # servers built once and reset per scheme (dense ones are built per scheme: see
    # Hierarchy.shareable)
    shared = None if sc.namespace.scorer == "dense" else scenario_hierarchy(sc, ns)
    # what was built lives to the end of the run: keep it out of the collector's full
    # passes (they would walk every tool's objects again and again); thawed below
    gc.collect()
    gc.freeze()
    finished: list[str] = []  # schemes whose records are complete
    written: list[str] = []  # files of the complete run moved into place
    try:
        for scheme in sc.schemes:
            if progress:
                progress(f"{sc.name}: scheme {scheme.name} on {engine} ({len(jobs)} queries)")
            if calibrated:  # each scheme's own node costs (warming and query mock cost more)
                processing[scheme.name] = calibrate(sc, ns, jobs, scheme, hierarchy=shared)
            plan, network = make_plan(sc, scheme, ns, jobs,
                                      dns_port=53 if engine == "simpy" else live_port,
                                      hierarchy=shared)
            for kind, value in processing.get(scheme.name, {}).items():
                setattr(plan, f"{kind}_time", value)
            plan.churn = churn
            plan.engine_options = {"ray": sc.engine_options.ray,
                                   "mininet": sc.engine_options.mininet}
            if tick is not None and engine in ("simpy", "live") and (
                    sc.engine_options.shards.workers == 1):
                plan.on_stub = partial(tick, scheme.name, total=len(jobs))
            t = time.perf_counter()
            window = time.time()
            try:
                if sc.engine_options.shards.workers > 1:  # one run over Ray workers
                    from sim.engines.shards import run_sharded

                    output = run_sharded(sc, engine, plan)
                else:
                    output = run(plan)
            except BaseException:
                if sniffer is not None:  # never leave a tcpdump running behind a failed run
                    sniffer.stop()
                raise
            wall[scheme.name] = round(time.perf_counter() - t, 3)
            log.info("scheme %s on %s: %d of %d discoveries completed, %.2f s wall, %.3f s "
                     "of workload time", scheme.name, engine, len(output.stubs), len(jobs),
                     wall[scheme.name], output.end_time)
            fault_plans[scheme.name] = plan.faults
            if churn is not None:  # what each change looked like, then the zones put back
                churn_rows += churn.measure(engine, scheme, plan, output, stub_walks)
                churn.restore(plan)
            if sniffer is not None:
                windows.append((scheme, plan, output, window, time.time()))
            replay[scheme.name] = {"schedule_error_ms": _error_stats(output.schedule_error),
                                   "warm_time_s": round(output.warm_time, 9),
                                   "end_time_s": round(output.end_time, 9),
                                   "lost_packets": output.lost,
                                   "completed": len(output.stubs)}
            if plan.dot is not None:  # DNS over TLS connections the resolvers opened, closed
                replay[scheme.name].update({key: sum(c.get(key, 0) for c in output.load.values())
                                            for key in ("dot_opened", "dot_closed")})
            done = {job.index: (job, stub) for job, stub in output.stubs}
            if scheme.kind != "tooldns":
                acks = connection_acks(plan, output) if scheme.keepalive and not scheme.tls else {}
                for job in jobs:
                    records.append(registry_record(sc, engine, scheme, job,
                                                   done.get(job.index, (job, None))[1],
                                                   registry_ids, per_service, plan, acks))
                    if sc.agents.session is not None:
                        records[-1].update(session_columns(None, job))
                load.extend(load_records(sc, engine, scheme, plan, output, network))
            else:
                dot = None
                if plan.dot is not None:  # DNS over TLS: the ACKs depend on each connection
                    walked = [*output.warmups, *(w for ws in output.walks.values() for w in ws)]
                    dot = DotModel(plan.dot.sizes, TcpModel(sc.network.mtu),  # type: ignore[attr-defined]
                                   *dot_acks(s for w in walked for s in w.steps))
                for job in jobs:
                    job_, stub = done.get(job.index, (job, None))
                    if stub is None:
                        stub = StubResult(tag=job, request=plan.requests[job.index], sent=0.0,
                                          rcode="", error="not completed")
                    agent_ip = plan.agent_order[job.agent]
                    walks = stub_walks(output, agent_ip, stub)
                    records.append(query_record(sc, engine, scheme, job_, stub, walks, ns,
                                                target_ids, plan.hierarchy.zone_of, cand, dot))
                    if sc.agents.session is not None:  # the session layer's columns
                        records[-1].update(session_columns(plan.agents[agent_ip], job))
                load.extend(load_records(sc, engine, scheme, plan, output, network))
            finished.append(scheme.name)
        gc.unfreeze()
        df = pd.DataFrame(records)
        load_df = pd.DataFrame(load)
        tables: dict[str, pd.DataFrame] = {}
        if churn is not None:  # probes are in the records, not in the scheme summary
            df = churn.annotate(df)
            summary = {**summarise(sc, engine, churn.workload_rows(df), ns), "replay": replay,
                       "churn": churn.summary(churn_rows)}
            tables["churn.csv"] = pd.DataFrame(churn_rows)
        else:
            summary = {**summarise(sc, engine, df, ns), "replay": replay}
        if sc.agents.session is not None:
            summary["session"] = session_summary(sc, df, ns)
        if sniffer is not None:
            pcap = sniffer.stop()
            df, summary["capture"] = compare_capture(df, pcap, windows, sniffer.tool,
                                                     {live_port, REGISTRY_PORT,
                                                      dot_port(live_port)})
        if processing:
            summary["calibrated_processing_s"] = {
                name: {k: round(v, 9) for k, v in costs.items()}
                for name, costs in processing.items()}
        if sc.faults is not None:  # sim.build.faults: success over time, extra latency, recovery
            base = (run_scenario(sc.model_copy(update={"faults": None}), engine, write=False,
                                 live_port=live_port).records if sc.faults.baseline else None)
            df, summary["faults"] = fault_report(sc, df, load_df, base, fault_plans)
        if ns.rogue or any(s.trust for s in sc.schemes) or sc.trust.policy != "open":
            summary["trust"] = trust_report(df, ns, {s.name: (s.trust or sc.trust).policy
                                                     if s.kind == "tooldns" else "registry"
                                                     for s in sc.schemes})
        summary[PROVENANCE] = provenance(started)  # last: all above is deterministic
        # wall-clock figures vary run to run; they go to the console, not the result files
        summary_for_console = {**summary, "wall_s": wall}
        if write:
            write_outputs(out, sc, df, load_df, summary, plots=sc.outputs.plots,
                          committed=written, tables=tables)
    except BaseException as exc:
        gc.unfreeze()
        if sniffer is not None:  # never leave a tcpdump running behind a stopped run
            with contextlib.suppress(Exception):
                sniffer.stop()
        _keep_finished(exc, write, out, sc, engine, ns, records, load, replay, finished,
                       written)
        raise
    return RunResult(df, load_df, summary_for_console, out if write else None)


def compare_capture(df: pd.DataFrame, pcap: Path, windows: list, tool: str,
                    ports: set[int]) -> tuple[pd.DataFrame, dict]:
    """Attribute captured packets to queries; add ``cap_*`` columns; compare per scheme."""
    packets = read_packets(pcap)
    cols = {c: [] for c in ("cap_bytes_up", "cap_bytes_down", "cap_packets_up",
                            "cap_packets_down")}
    report: dict = {"pcap": pcap.name, "tool": tool, "packets": len(packets), "schemes": {}}
    for scheme, plan, output, start, end in windows:
        mine = [p for p in packets if start <= p.ts <= end]
        dns_keys: dict = {}
        flows: dict[tuple[str, int], list[tuple[float, int]]] = {}
        conn_flow = {(ip, conn): (ip, port) for (ip, port), conn in output.flows.items()}
        for job, res in output.stubs:
            agent_ip = plan.agent_order[job.agent]
            if scheme.kind != "tooldns":
                for st in res.steps:
                    flow = conn_flow.get((agent_ip, st.conn))
                    if flow is not None:
                        flows.setdefault(flow, []).append((st.sent, job.index))
                continue
            for st in res.steps:
                dns_keys.setdefault((agent_ip, st.server[0], st.qid, st.qname), []).append(
                    (st.sent, job.index))
            resolver_ip = plan.agents[agent_ip].resolver[0]  # walks leave from there
            for walk in stub_walks(output, agent_ip, res):
                for st in walk.steps:
                    if st.transport == "tls":  # DNS over TLS: by connection, as HTTP flows
                        flow = conn_flow.get((resolver_ip, st.conn))
                        if flow is not None:
                            flows.setdefault(flow, []).append((st.sent, job.index))
                        continue
                    dns_keys.setdefault((resolver_ip, st.server[0], st.qid, st.qname),
                                        []).append((st.sent, job.index))
        for sends in (*flows.values(), *dns_keys.values()):
            sends.sort()
        costs, left = attribute(mine, ports, dns_keys, flows, output.clock_offset,
                                until=output.end_time)
        rows = df.scheme == scheme.name
        acct = df[rows]
        cap = [costs.get(j, WireCost()) for j in acct.job]
        for name, attr in (("cap_bytes_up", "bytes_up"), ("cap_bytes_down", "bytes_down"),
                           ("cap_packets_up", "packets_up"),
                           ("cap_packets_down", "packets_down")):
            cols[name].append(pd.Series([getattr(c, attr) for c in cap], index=acct.index))
        exact = sum(c == WireCost(r.bytes_up, r.packets_up, r.bytes_down, r.packets_down)
                    for c, r in zip(cap, acct.itertuples(), strict=True))
        acc_b = int((acct.bytes_up + acct.bytes_down).sum())
        acc_p = int((acct.packets_up + acct.packets_down).sum())
        cap_b = sum(c.bytes_up + c.bytes_down for c in cap)
        cap_p = sum(c.packets_up + c.packets_down for c in cap)
        report["schemes"][scheme.name] = {
            "queries": len(acct), "queries_exact": exact,
            "accounted_bytes": acc_b, "captured_bytes": cap_b,
            "accounted_packets": acc_p, "captured_packets": cap_p,
            "bytes_diff_pct": round(100 * (cap_b - acc_b) / acc_b, 3) if acc_b else None,
            "packets_diff_pct": round(100 * (cap_p - acc_p) / acc_p, 3) if acc_p else None,
            "unattributed_packets": len(left),
            "unattributed_bytes": sum(p.size for p in left),
        }
    df = df.copy()
    for name, parts in cols.items():
        df[name] = pd.concat(parts) if parts else 0
    return df, report


def calibrate(sc: Scenario, ns: Namespace, jobs: list[Job], scheme: SchemeSpec | None = None,
              sample: int = 60, hierarchy: Hierarchy | None = None) -> dict[str, float]:
    """Median measured cost per node kind from a short simulated pre-run of ``scheme``
    (default: the first) over the first ``sample`` jobs (seconds)."""
    from sim.engines.simpy import run_simpy

    plan, _ = make_plan(sc, scheme or sc.schemes[0], ns, jobs[:sample], hierarchy=hierarchy)
    plan.measure = {}
    plan.faults = None  # calibration measures node code, not outages
    run_simpy(plan)
    return {kind: float(np.median(v)) for kind, v in sorted(plan.measure.items()) if v}


def _error_stats(errors: list[float]) -> dict[str, float]:
    if not errors:
        return {}
    arr = np.abs(np.asarray(errors)) * 1000
    return {"median": round(float(np.median(arr)), 6),
            "p99": round(float(np.percentile(arr, 99)), 6), "max": round(float(arr.max()), 6)}


def summarise(sc: Scenario, engine: str, df: pd.DataFrame, ns: Namespace) -> dict:
    schemes = {}
    for scheme, g in df.groupby("scheme", sort=False):
        ok = g[g.success]
        schemes[scheme] = {
            "queries": len(g),
            "success": round(float(g.success.mean()), 6),
            "hit_at_1": round(float(g.hit_at_1.mean()), 6),
            "hit_at_k": round(float(g.hit_at_k.mean()), 6),
            "mean_round_trips": round(float(g.round_trips.mean()), 6),
            "median_latency_ms": round(float(ok.latency_ms.median()), 6) if len(ok) else None,
            "p95_latency_ms": round(float(ok.latency_ms.quantile(0.95)), 6) if len(ok) else None,
            "mean_bytes_up": round(float(g.bytes_up.mean()), 3),
            "mean_bytes_down": round(float(g.bytes_down.mean()), 3),
            "mean_packets": round(float((g.packets_up + g.packets_down).mean()), 3),
            "mean_tools_examined": round(float(g.tools_examined.mean()), 3),
            "search_space_reduction": round(1 - float(g.tools_examined.mean()) / len(ns.tools),
                                            6),
            "cache_hit_queries": round(float((g.cache_hits > 0).mean()), 6),
        }
    return {"scenario": sc.name, "engine": engine, "seed": sc.seed, "namespace": ns.origin,
            "namespace_stats": ns.stats(), "schemes": schemes}


SUMMARY, PARTIAL = "summary.json", "partial.json"
#: files of a complete run that an interrupted one does not rewrite (they would describe an
#: older run): removed when partial results are kept
PLOTS = ("latency_cdf.png", "bytes_per_query.png", "cache_hits_over_time.png",
         "success_over_time.png")


def _stage_tables(st: Staging, sc: Scenario, df: pd.DataFrame, load: pd.DataFrame) -> None:
    st.write("results.parquet", lambda p: df.to_parquet(p, index=False))
    st.write("results.csv", lambda p: df.to_csv(p, index=False))
    st.write("nodes.csv", lambda p: load.to_csv(p, index=False))
    st.write("scenario.yaml", lambda p: Path(p).write_text(resolved_yaml(sc), encoding="utf-8"))


def _json(data: dict) -> Callable[[str], None]:
    return lambda p: Path(p).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def write_outputs(out: Path, sc: Scenario, df: pd.DataFrame, load: pd.DataFrame,
                  summary: dict, plots: bool = False,
                  committed: list[str] | None = None,
                  tables: dict[str, pd.DataFrame] | None = None) -> list[str]:
    """Write a complete run: every file (and, with ``plots``, the figures) is staged in a
    hidden folder inside ``out`` and moved into place together, ``summary.json`` last (its
    presence marks a finished run; sweeps resume on it); a ``partial.json`` of an earlier
    interrupted run is removed. On any failure nothing in ``out`` changes. Returns the
    names written (also appended to ``committed`` as they are moved into place).
    ``tables``: more CSV files by name (``churn.csv``), staged with the rest."""
    with Staging(out, committed) as st:
        _stage_tables(st, sc, df, load)
        for name, table in (tables or {}).items():
            st.write(name, lambda p, table=table: table.to_csv(p, index=False))
        st.write(SUMMARY, _json(summary))
        if plots:
            try:
                from analysis.plots.core import standard_plots

                standard_plots(df, st.dir)
                if "faults" in summary:
                    from analysis.plots.faults import success_over_time

                    success_over_time(summary, st.dir)
            except OSError as exc:
                raise OutputError.from_os(exc, exc.filename or out) from exc
        return st.commit(last=[SUMMARY], remove=[PARTIAL])


def write_partial(out: Path, sc: Scenario, engine: str, ns: Namespace, records: list[dict],
                  load: list[dict], replay: dict, finished: list[str], reason: str
                  ) -> list[str]:
    """Keep the schemes that finished: their records and node load, the scenario and
    ``partial.json`` (the finished schemes' summary plus which schemes are missing and
    why), written together like :func:`write_outputs`. ``summary.json`` and plots of an
    earlier run in ``out`` are removed, so the folder never claims a complete run."""
    df = pd.DataFrame(records)
    df = df[df["scheme"].isin(finished)].reset_index(drop=True) if len(df) else df
    load_df = pd.DataFrame(load)
    if len(load_df):
        load_df = load_df[load_df["scheme"].isin(finished)].reset_index(drop=True)
    partial = {"complete": False, "reason": reason, "finished_schemes": list(finished),
               "unfinished_schemes": [s.name for s in sc.schemes if s.name not in finished],
               **summarise(sc, engine, _without_probes(sc, df), ns),
               "replay": {k: v for k, v in replay.items() if k in finished}}
    with Staging(out) as st:
        _stage_tables(st, sc, df, load_df)
        st.write(PARTIAL, _json(partial))
        return st.commit(last=[PARTIAL], remove=[SUMMARY, *PLOTS])


def _without_probes(sc: Scenario, df: pd.DataFrame) -> pd.DataFrame:
    """The records a scheme summary describes: churn probes (sim.build.churn) left out."""
    if sc.workload.churn is None:
        return df
    from sim.build.churn import ChurnSchedule

    return ChurnSchedule.workload_rows(df)


def _keep_finished(exc: BaseException, write: bool, out: Path, sc: Scenario, engine: str,
                   ns: Namespace, records: list[dict], load: list[dict], replay: dict,
                   finished: list[str], written: list[str]) -> None:
    """A run stopped: on Ctrl-C (raises :class:`RunInterrupted`) or an unexpected error
    (adds a note to it), write the schemes that finished. Scenario and output errors, and
    runs that write nothing, are left as they are."""
    interrupted = isinstance(exc, KeyboardInterrupt)
    if isinstance(exc, RunInterrupted) or not write or not (interrupted or (
            isinstance(exc, Exception) and not isinstance(exc, (ScenarioError, OutputError)))):
        return
    unfinished = [s.name for s in sc.schemes if s.name not in finished]
    files = list(written)
    if finished and not written:
        reason = "interrupted" if interrupted else f"failed: {type(exc).__name__}: {exc}"
        try:
            files = write_partial(out, sc, engine, ns, records, load, replay, finished,
                                  reason.splitlines()[0])
        except OutputError as err:
            if not interrupted:
                exc.add_note(f"finished schemes not kept: {err}")
                return
            raise err from None
    if interrupted:
        raise RunInterrupted(out if files else None, list(finished), unfinished,
                             files) from None
    if files:
        exc.add_note(f"kept the {len(finished)} finished schemes ({', '.join(finished)}) in "
                     f"{out}/ ({', '.join(files)})")


def _warn(message: str) -> None:
    print(message, file=sys.stderr)
