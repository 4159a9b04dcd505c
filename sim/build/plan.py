"""Scenario -> plan: one scheme's :class:`RunPlan` (servers, resolvers, agents, network,
requests), and the scenario's authoritative servers."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING

from analysis.files import atomic_write
from nodes.agent.session import DnsAgent
from nodes.agent.stub import StubAgent
from nodes.dns.dnssec import trust_anchor
from nodes.dns.wire import SERVICES
from nodes.dns.zone import Ttls
from nodes.registry.client import RegistryAgent, RegistryConfig, registry_kind
from nodes.resolver.config import ResolverConfig
from nodes.searchcost import cost_of
from sim.accounting import TcpModel, TlsSizes
from sim.build.faults import FaultPlan, Nodes, build_fault_plan, registry_address
from sim.build.hierarchy import Hierarchy, build_hierarchy, dot_setup
from sim.build.namespace import catalogue_mirror, namespace_encoder, start_zone
from sim.build.network import Network, build_network
from sim.build.registries import REGISTRY_HOST, RegistrySetup, build_registry, tls_sizes
from sim.build.runplan import CaptureRequest, Requests, RunPlan, StockSetup
from sim.build.sessions import session_agents, session_applies
from sim.build.trust import sign_hierarchy, trust_policy
from sim.build.workload import Job
from sim.catalog.strategies import STRATEGIES, Mode
from sim.errors import ScenarioError
from sim.scenario import Scenario
from sim.schemes import DnsScheme, RegistryScheme, SchemeSpec, resolver_config
from topologies.encoders import save_encoder_cache
from topologies.namespace import ROOT, Namespace

if TYPE_CHECKING:
    from sim.build.churn import ChurnSchedule


@dataclass(frozen=True)
class PlanOptions:
    """What the run decides beside the scenario, given to :func:`make_plan` so that the
    plan is complete once built: processing times measured for this scheme (``calibrated``:
    kind -> seconds, the plan's ``<kind>_time``), the tool changes of the run, a packet
    capture asked of the engine itself, and a calibration pre-run (``measure``: node
    work timed, no faults)."""

    calibrated: Mapping[str, float] = field(default_factory=dict)
    churn: ChurnSchedule | None = None
    capture: CaptureRequest | None = None
    measure: bool = False


def scenario_hierarchy(sc: Scenario, ns: Namespace) -> Hierarchy:
    """The scenario's authoritative servers, freshly built (and signed with
    ``namespace.dnssec``: every scheme of the run walks the same signed zones)."""
    ttls = Ttls(ns=sc.caches.ns_ttl, srv=sc.caches.srv_ttl, a=sc.caches.a_ttl,
                negative=sc.caches.negative_ttl)
    hierarchy = build_hierarchy(ns, replicas=sc.namespace.replicas, scorer=sc.namespace.scorer,
                                ttls=ttls, max_udp_size=sc.namespace.max_udp_size,
                                encoder=namespace_encoder(sc),
                                packet_cache=(sc.caches.packet_cache_size
                                              if sc.caches.packet_cache else 0),
                                packet_cache_bytes=sc.caches.packet_cache_bytes,
                                cname_referral=sc.namespace.cname_referral,
                                aaaa=sc.namespace.aaaa,
                                allow_transfer=sc.namespace.allow_transfer,
                                org_zones=any("orgzones" in STRATEGIES[d.kind].publishes
                                              for d in sc.dns_schemes()))
    if (encoder := namespace_encoder(sc)) is not None:
        save_encoder_cache(encoder, atomic_write)  # the tools' embeddings, for the next run
    if sc.namespace.dnssec:
        sign_hierarchy(hierarchy, sc.seed)
    return hierarchy


def _config(sc: Scenario, scheme: SchemeSpec, ns: Namespace, anchor: str,
            dns_port: int) -> ResolverConfig:
    """The resolvers' configuration: a DNS scheme's own, else the defaults (a registry
    scheme's resolvers answer nobody)."""
    if isinstance(scheme, RegistryScheme):
        return ResolverConfig(timeout=scheme.timeout, max_attempts=scheme.max_attempts,
                              dns_port=dns_port, trust=trust_policy(sc.trust, ns),
                              trust_anchor=anchor)
    return resolver_config(scheme, trust_policy(scheme.trust or sc.trust, ns), anchor,
                           dns_port)


def _processing(sc: Scenario, calibrated: Mapping[str, float], hierarchy: Hierarchy,
                ns: Namespace, embeds: bool = False) -> dict[str, object]:
    """The nodes' processing times (the plan's ``*_time`` fields): the scenario's fixed
    values, with what calibration measured for this scheme in their place; ``index``
    values become the search compute model's costs (:mod:`nodes.searchcost`): per server
    address (``semantic_times``: the most items any service has in its zone; the root
    only refers to ``tools.``, ranking nothing) and per registry search
    (``registry_cost``). ``embeds``: the resolver sends the intent's embedding, so it
    encodes once per discovery (its agent queries) and the servers only score."""
    p = sc.network.processing
    cost = cost_of(sc.namespace.scorer)
    times: dict[str, object] = {
        "server_time": p.server, "server_semantic_time": p.server_semantic,
        "resolver_time": p.resolver, "resolver_stub_time": p.resolver_stub,
        "agent_time": p.agent, "registry_time": p.registry}
    for kind, value in calibrated.items():
        if f"{kind}_time" not in times:
            raise ValueError(f"calibrated processing: unknown node kind {kind!r}")
        times[f"{kind}_time"] = value
    if times["server_semantic_time"] == "index":
        items = ns.scored_items()
        times["server_semantic_time"] = None
        encode = 0.0 if embeds else cost.encode
        server = calibrated.get("server", p.server)  # fixed or measured
        times["semantic_times"] = MappingProxyType({
            ip: server + encode + cost.per_item * max(items.get((zone, s), 0) for s in SERVICES)
            for ip, zone in hierarchy.zone_of.items() if zone != ROOT})  # the root refers
        if embeds and times["resolver_stub_time"] is None:
            times["resolver_stub_time"] = calibrated.get("resolver", p.resolver) + cost.encode
    if times["registry_time"] == "index":
        times["registry_time"] = 0.0
        times["registry_cost"] = cost
    return times


def make_plan(sc: Scenario, scheme: SchemeSpec, ns: Namespace, jobs: Sequence[Job],
              dns_port: int = 53, hierarchy: Hierarchy | None = None,
              options: PlanOptions | None = None) -> tuple[RunPlan, Network]:
    """One scheme's plan, complete and frozen. ``hierarchy``: servers built earlier in this
    run, shared when they can be (:attr:`Hierarchy.shareable`; runs use instances of them,
    so sharing changes nothing); else built here."""
    options = options or PlanOptions()
    if hierarchy is None or not hierarchy.shareable:
        hierarchy = scenario_hierarchy(sc, ns)
    network = build_network(sc, hierarchy)
    anchor = trust_anchor(str(sc.seed)) if sc.namespace.dnssec else ""
    config = _config(sc, scheme, ns, anchor, dns_port)
    dns = scheme if isinstance(scheme, DnsScheme) else None
    dot = None
    if dns is not None and dns.upstream == "tls":
        dot = dot_setup(sc.seed, idle=dns.upstream_idle,
                        max_connections=dns.upstream_connections)
    seed, name = sc.seed, scheme.name

    def rng(salt: str) -> random.Random:  # RunPlan.make_rng, before the plan exists
        return random.Random(f"{seed}-{name}-{salt}")

    resolvers = {ip: hierarchy.resolver(config=replace(config), name=ip,
                                        rng=rng(f"resolver{i}"))
                 for i, ip in enumerate(network.resolvers)}
    agents: dict[str, DnsAgent | RegistryAgent]
    if dns is not None and (missing := set(STRATEGIES[dns.kind].publishes)
                            - hierarchy.publishes):
        raise ScenarioError(f"schemes.{dns.name}.kind: {dns.kind} needs the namespace to "
                            f"publish {', '.join(sorted(missing))}, which it does not")
    mode = STRATEGIES[dns.kind].modes[dns.mode] if dns is not None else Mode("aware")
    make_agent = mode.load_agent()  # the strategy's agent, asking as its mode says
    mirror = ({"mirror": catalogue_mirror(ns, hierarchy.scorer(), cost_of(sc.namespace.scorer))}
              if mode.mirror else {})
    stubs: dict[str, StubAgent] = {
        ip: make_agent((network.resolvers[network.agent_resolver[i]], dns_port),
                       rng(f"agent{i}"), name=ip, option_code=hierarchy.option_code,
                       timeout=sc.agents.timeout, attempts=sc.agents.attempts,
                       aaaa=sc.namespace.aaaa, **mode.agent_options, **mirror)
        for i, ip in enumerate(network.agents)}
    registry: RegistrySetup | None = None
    tcp = tls = None
    if isinstance(scheme, RegistryScheme):
        registry, tcp, tls, http = registry_agents(sc, scheme, ns, hierarchy, network)
        agents = dict(http)
    elif session_applies(sc, scheme):
        agents = dict(session_agents(sc, ns, stubs, hierarchy, network))
    else:
        agents = dict(stubs)
    trust = dns.trust if dns is not None and dns.trust else sc.trust
    start = start_zone(sc.model_copy(update={"trust": trust}), ns)
    replicas = scheme.replicas if isinstance(scheme, RegistryScheme) else 1
    faults = None if options.measure else fault_plan(
        sc, hierarchy, resolvers, network, jobs,
        stock=dns is not None and dns.resolver != "project")
    plan = RunPlan(
        scenario_name=sc.name, scheme=scheme.name, seed=sc.seed, hierarchy=hierarchy,
        resolvers=resolvers, agents=agents, agent_order=list(network.agents),
        role_of=network.role_of, path=network.path, jobs=jobs,
        requests=Requests(jobs, k=scheme.k, start=start),
        warm_services=(tuple(sorted({j.query.service for j in jobs}))
                       if dns is not None and dns.warm else ()),
        closed_loop=sc.workload.arrival.process == "closed",
        **_processing(sc, options.calibrated, hierarchy, ns,  # type: ignore[arg-type]
                      embeds=dns is not None and dns.send_embedding),
        measure=options.measure, dns_port=dns_port,
        engine_options=MappingProxyType({"ray": sc.engine_options.ray,
                                         "mininet": sc.engine_options.mininet}),
        registry=registry, tcp=tcp, tls=tls, dot=dot, faults=faults,
        registry_replicas=replicas, churn=options.churn, capture=options.capture,
        stock=_stock(dns, hierarchy, anchor))
    return plan, network


def _stock(scheme: DnsScheme | None, hierarchy: Hierarchy, anchor: str) -> StockSetup | None:
    """The stock recursor the scheme runs as its resolver, if any."""
    if scheme is None or scheme.resolver == "project":
        return None
    hints = tuple((m["host"], m["address"]) for m in hierarchy.manifest if m["zone"] == ".")
    sized = scheme.cache_max_bytes != DnsScheme.model_fields["cache_max_bytes"].default
    return StockSetup(scheme.resolver, hints, anchor if scheme.dnssec and anchor else None,
                      scheme.cache_max_bytes if sized else None)  # else the binary's own


def registry_agents(sc: Scenario, scheme: RegistryScheme, ns: Namespace, hierarchy: Hierarchy,
                    network: Network
                    ) -> tuple[RegistrySetup, TcpModel, TlsSizes | None, dict[str, RegistryAgent]]:
    """One registry for ``scheme`` and the HTTP agents that ask it (at the DNS agents'
    addresses), with the TCP model and (HTTPS) TLS sizes its accounting needs."""
    setup = build_registry(scheme.kind, ns, hierarchy.scorer(), sc.seed, ttl=sc.caches.srv_ttl,
                           index=scheme.index)
    tls = (tls_sizes(setup.identity.cert_pem, setup.identity.key_pem, setup.ca.cert_pem)
           if scheme.tls else None)
    config = RegistryConfig(kind=registry_kind(scheme.kind), keepalive=scheme.keepalive,
                            tls=scheme.tls,
                            timeout=max(scheme.timeout * scheme.max_attempts, 1.0),
                            resolve=scheme.resolve, resolve_top=scheme.resolve_top,
                            verify=scheme.verify, revocation=scheme.revocation,
                            cache_ttl=sc.caches.srv_ttl, token=setup.token,
                            answer_ttl=float(scheme.answer_cache), searches=scheme.searches)
    agents = {ip: RegistryAgent((setup.address, setup.port), REGISTRY_HOST, config,
                                scorer=hierarchy.scorer(), ca=setup.ca.cert, name=ip)
              for ip in network.agents}
    return setup, TcpModel(sc.network.mtu), tls, agents


def run_nodes(hierarchy: Hierarchy, resolvers: Sequence[str], agents: Sequence[str],
              registries: int) -> Nodes:
    """Selectable nodes of a run (``registries``: replicas the scenario's schemes use)."""
    zone_servers: dict[str, list[str]] = {}
    roles: dict[str, str] = {}
    orgs: dict[str, str | None] = {}
    for m in hierarchy.manifest:
        zone_servers.setdefault(m["zone"], []).append(m["address"])
        roles[m["address"]] = m["role"]
        orgs[m["address"]] = m["org"]
    for zone, address in hierarchy.zone_servers().items():  # a hosting server's other zones
        if zone not in zone_servers:
            zone_servers[zone] = [address]
    return Nodes(zone_servers, roles, orgs, [registry_address(i) for i in range(registries)],
                 list(resolvers), list(agents))


def fault_plan(sc: Scenario, hierarchy: Hierarchy, resolvers: Mapping[str, object],
               network: Network, jobs: Sequence[Job], stock: bool = False
               ) -> FaultPlan | None:
    """The scenario's :class:`sim.build.faults.FaultPlan` for this run (None without
    faults); ScenarioError when a selector names nothing. ``stock``: the resolvers are
    stock binaries, which a ``down`` fault may crash."""
    spec = sc.faults
    if spec is None:
        return None
    regs = [s.replicas for s in sc.registry_schemes()]
    if spec.horizon is not None:
        horizon = spec.horizon
    else:
        times = [j.at for j in jobs if j.at is not None]
        horizon = (max(times) if times else sc.duration or 600.0) + 60.0
    return build_fault_plan(spec, run_nodes(hierarchy, list(resolvers), network.agents,
                                            max(regs, default=0)), sc.seed, horizon,
                            frozenset(resolvers) if stock else frozenset())
