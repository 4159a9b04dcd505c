"""Scenario -> plan: one scheme's :class:`RunPlan` (servers, resolvers, agents, network,
requests), and the scenario's authoritative servers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from analysis.files import atomic_write
from nodes.agent.stub import StubAgent
from nodes.dns.zone import Ttls
from nodes.registry.client import RegistryAgent, RegistryConfig, registry_kind
from nodes.resolver.config import ResolverConfig
from sim.accounting import TcpModel
from sim.build.faults import Nodes, build_fault_plan, registry_address
from sim.build.hierarchy import Hierarchy, build_hierarchy, dot_setup
from sim.build.namespace import namespace_encoder, start_zone
from sim.build.network import Network, build_network
from sim.build.registries import REGISTRY_HOST, build_registry, tls_sizes
from sim.build.runplan import Requests, RunPlan
from sim.build.sessions import session_agents, session_applies
from sim.build.trust import sign_hierarchy, trust_policy
from sim.build.workload import Job
from sim.scenario import Scenario
from sim.schemes import DnsScheme, RegistryScheme, SchemeSpec, resolver_config
from topologies.encoders import save_encoder_cache
from topologies.namespace import Namespace


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
                                aaaa=sc.namespace.aaaa,
                                allow_transfer=sc.namespace.allow_transfer)
    if (encoder := namespace_encoder(sc)) is not None:
        save_encoder_cache(encoder, atomic_write)  # the tools' embeddings, for the next run
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


def _plan(sc: Scenario, scheme: SchemeSpec, hierarchy: Hierarchy, network: Network,
          jobs: Sequence[Job], dns_port: int) -> RunPlan:
    """The plan's frame: who is where, the jobs and the nodes' processing times."""
    processing = sc.network.processing
    return RunPlan(
        scenario_name=sc.name, scheme=scheme.name, seed=sc.seed, hierarchy=hierarchy,
        resolvers={}, agents={}, agent_order=list(network.agents), role_of=network.role_of,
        path=network.path, jobs=jobs, requests={},
        server_time=processing.server, server_semantic_time=processing.server_semantic,
        resolver_time=processing.resolver, resolver_stub_time=processing.resolver_stub,
        agent_time=processing.agent, registry_time=processing.registry,
        dns_port=dns_port, closed_loop=sc.workload.arrival.process == "closed",
    )


def make_plan(sc: Scenario, scheme: SchemeSpec, ns: Namespace, jobs: Sequence[Job],
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
    config = _config(sc, scheme, ns, anchor, dns_port)
    plan = _plan(sc, scheme, hierarchy, network, jobs, dns_port)
    dns = scheme if isinstance(scheme, DnsScheme) else None
    if dns is not None and dns.upstream == "tls":
        plan.dot = dot_setup(sc.seed, idle=dns.upstream_idle,
                             max_connections=dns.upstream_connections)
    for i, ip in enumerate(network.resolvers):
        plan.resolvers[ip] = hierarchy.resolver(config=replace(config), name=ip,
                                                rng=plan.make_rng(f"resolver{i}"))
    for i, ip in enumerate(network.agents):
        resolver = (network.resolvers[network.agent_resolver[i]], dns_port)
        plan.agents[ip] = StubAgent(resolver, plan.make_rng(f"agent{i}"), name=ip,
                                    option_code=hierarchy.option_code,
                                    timeout=sc.agents.timeout, attempts=sc.agents.attempts,
                                    style="qname" if config.mode == "qname" else "option",
                                    aaaa=sc.namespace.aaaa)
    trust = dns.trust if dns is not None and dns.trust else sc.trust
    start = start_zone(sc.model_copy(update={"trust": trust}), ns)
    if isinstance(scheme, RegistryScheme):
        registry_agents(sc, scheme, ns, plan, network)
    elif session_applies(sc, scheme):
        session_agents(sc, ns, plan, network)
    attach_faults(sc, scheme, plan)
    beam = dns.beam if dns is not None else 1
    plan.requests = Requests(jobs, k=scheme.k, start=start, beam=beam)
    if dns is not None and dns.warm:
        plan.warm_services = tuple(sorted({j.query.service for j in jobs}))
    return plan, network


def registry_agents(sc: Scenario, scheme: RegistryScheme, ns: Namespace, plan: RunPlan,
                    network: Network) -> None:
    """Replace the DNS stub agents by HTTP agents of one registry (same addresses)."""
    setup = build_registry(scheme.kind, ns, plan.hierarchy.scorer(), sc.seed,
                           ttl=sc.caches.srv_ttl)
    plan.registry, plan.tcp = setup, TcpModel(sc.network.mtu)
    if scheme.tls:
        plan.tls = tls_sizes(setup.identity.cert_pem, setup.identity.key_pem, setup.ca.cert_pem)
    config = RegistryConfig(kind=registry_kind(scheme.kind), keepalive=scheme.keepalive,
                            tls=scheme.tls,
                            timeout=max(scheme.timeout * scheme.max_attempts, 1.0),
                            resolve=scheme.resolve, resolve_top=scheme.resolve_top,
                            verify=scheme.verify, revocation=scheme.revocation,
                            cache_ttl=sc.caches.srv_ttl, token=setup.token)
    plan.agents = {ip: RegistryAgent((setup.address, setup.port), REGISTRY_HOST,
                                     config, scorer=plan.hierarchy.scorer(), ca=setup.ca.cert,
                                     name=ip)
                   for ip in network.agents}


def run_nodes(plan: RunPlan, registries: int) -> Nodes:
    """Selectable nodes of a plan (``registries``: replicas the scenario's schemes use)."""
    zone_servers: dict[str, list[str]] = {}
    roles: dict[str, str] = {}
    orgs: dict[str, str | None] = {}
    for m in plan.hierarchy.manifest:
        zone_servers.setdefault(m["zone"], []).append(m["address"])
        roles[m["address"]] = m["role"]
        orgs[m["address"]] = m["org"]
    return Nodes(zone_servers, roles, orgs, [registry_address(i) for i in range(registries)],
                 list(plan.resolvers), list(plan.agent_order))


def attach_faults(sc: Scenario, scheme: SchemeSpec, plan: RunPlan) -> None:
    """Give ``plan`` its registry replica count and (if the scenario has faults) its
    :class:`sim.build.faults.FaultPlan`; ScenarioError when a selector names nothing."""
    regs = [s.replicas for s in sc.registry_schemes()]
    if isinstance(scheme, RegistryScheme):
        plan.registry_replicas = scheme.replicas
    spec = sc.faults
    if spec is None:
        return
    if spec.horizon is not None:
        horizon = spec.horizon
    else:
        times = [j.at for j in plan.jobs if j.at is not None]
        horizon = (max(times) if times else sc.duration or 600.0) + 60.0
    plan.faults = build_fault_plan(spec, run_nodes(plan, max(regs, default=0)), sc.seed,
                                   horizon)
