"""The agent session layer of a run (seed 003, :mod:`nodes.agent.session`): which schemes
have it, the tools as sessions bind them, RBAC scopes, and the sessions put in front of
the DNS stub agents of a plan (with the marketplace fallback's registry)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from nodes.agent.context import Scopes, ToolInfo, tool_tokens
from nodes.agent.fallback import RegistryFallback
from nodes.agent.session import Session, SessionAgent, SessionConfig
from nodes.agent.stub import StubAgent
from nodes.registry.client import RegistryAgent, RegistryConfig, RegistryResult
from nodes.resolver.types import Endpoint
from nodes.searchcost import cost_of
from sim.accounting import TcpModel, http_cost
from sim.build.hierarchy import Hierarchy
from sim.build.network import Network
from sim.build.registries import REGISTRY_HOST, build_registry, registry_ids
from sim.errors import ScenarioError, did_you_mean
from sim.scenario import Scenario
from sim.schemes import DnsScheme, SchemeSpec
from topologies.namespace import Namespace


def session_applies(sc: Scenario, scheme: SchemeSpec) -> bool:
    """Whether the agents of ``scheme`` run the session layer (``agents.session``)."""
    spec = sc.agents.session
    return (spec is not None and isinstance(scheme, DnsScheme)
            and (not spec.schemes or scheme.name in spec.schemes))


def session_tool(ns: Namespace, tool_id: str) -> ToolInfo:
    """The namespace's tool ``tool_id`` as a session binds it."""
    t = ns.tools[tool_id]
    return ToolInfo(t.id, t.target, t.name, t.zone, t.org, t.service,
                    tool_tokens(t.name, t.description),
                    Endpoint(t.target, t.address or None, t.port, 0, 0, t.zone))


class SessionTools:
    """SRV target -> the tool as a session binds it (Eq. 3 tokens of name and description:
    the namespace carries no parameter schemas), cached. A class, not a closure, so that a
    session agent pickles into the process of a distributed engine (with the namespace)."""

    def __init__(self, ns: Namespace) -> None:
        self.ns = ns
        self.ids = ns.target_ids()
        self.known: dict[str, ToolInfo | None] = {}

    def __call__(self, target: str) -> ToolInfo | None:
        known = self.known
        if target not in known:
            tid = self.ids.get(target)
            known[target] = None if tid is None else session_tool(self.ns, tid)
        return known[target]


def session_tool_of(ns: Namespace) -> Callable[[str], ToolInfo | None]:
    """SRV target -> the tool as a session binds it (:class:`SessionTools`)."""
    return SessionTools(ns)


def session_scopes(sc: Scenario) -> Scopes | None:
    """The sessions' RBAC scopes (``agents.session.scopes``; Scopes normalises the names)."""
    spec = sc.agents.session
    if spec is None or spec.scopes is None:
        return None
    return Scopes(frozenset(spec.scopes.user), spec.scopes.roles, frozenset(spec.scopes.orgs))


def check_session_tools(sc: Scenario, ns: Namespace) -> None:
    """Scenario errors of ``agents.session`` that need the namespace: unknown tool ids, roles
    naming no zone and organisations owning no tool (each would silently grant nothing),
    always-include tools outside the scopes (the context never holds such a tool)."""
    spec = sc.agents.session
    if spec is None:
        return
    for field, ids in (("always_include", spec.always_include),
                       ("guard_exempt", spec.guard_exempt),
                       ("scopes.user", spec.scopes.user if spec.scopes else ())):
        unknown = [t for t in ids if t not in ns.tools]
        if unknown:
            raise ScenarioError(f"agents.session.{field}: no tool with id "
                                f"{', '.join(map(repr, unknown[:3]))} in the namespace")
    if spec.scopes is None:
        return
    scopes = session_scopes(sc)
    assert scopes is not None
    for role in scopes.roles:
        if role not in ns.zones:
            raise ScenarioError(f"agents.session.scopes.roles: {role!r} names no zone of the "
                                f"namespace" + did_you_mean(role, ns.zones))
    orgs = {t.org for t in ns.tools.values()}
    if missing := sorted(scopes.orgs - orgs):
        raise ScenarioError(f"agents.session.scopes.orgs: {missing[0]!r} owns no tool of the "
                            f"namespace" + did_you_mean(missing[0], sorted(orgs)))
    outside = [t for t in spec.always_include if not scopes.allows(session_tool(ns, t))]
    if outside:
        raise ScenarioError(f"agents.session.always_include: {', '.join(map(repr, outside[:3]))}"
                            f" outside the RBAC scopes (always-include tools must be granted)")


def _registry_fallback(sc: Scenario, ns: Namespace, hierarchy: Hierarchy, network: Network
                       ) -> Callable[[str], RegistryFallback] | None:
    """Per agent address, the marketplace fallback (an AgentDNS registry of the run)."""
    spec = sc.agents.session
    if spec is None or spec.fallback != "registry":
        return None
    setup = build_registry("agentdns", ns, hierarchy.scorer(), sc.seed,
                           ttl=sc.caches.srv_ttl)
    by_url = registry_ids(ns)
    tcp = TcpModel(sc.network.mtu)

    def cost(res: RegistryResult) -> tuple[int, int, int]:  # MODELLED wire cost
        c = http_cost(res.steps, set(res.connections), True, False, None, tcp)
        return c.bytes_up, c.bytes_down, c.packets_up + c.packets_down

    def url_tool(url: str) -> ToolInfo | None:
        tid = by_url.get(url)
        return None if tid is None else session_tool(ns, tid)

    def fallback(ip: str) -> RegistryFallback:
        client = RegistryAgent((setup.address, setup.port), REGISTRY_HOST,
                               RegistryConfig(kind="agentdns", token=setup.token,
                                              timeout=sc.agents.timeout), name=ip)
        rtt = network.path.rtt_estimate(network.role_of[ip], "registry:0")
        search = sc.network.processing.registry  # ``index``: the whole catalogue ranked
        busy = sc.network.processing.server + (
            cost_of(sc.namespace.scorer).seconds(len(ns.tools)) if search == "index"
            else search)
        return RegistryFallback(client, setup.server, rtt, busy, cost, url_tool, ip)

    return fallback


def session_agents(sc: Scenario, ns: Namespace, agents: Mapping[str, StubAgent],
                   hierarchy: Hierarchy, network: Network) -> dict[str, SessionAgent]:
    """A session (nodes.agent.session) in front of every DNS stub agent: one per agent."""
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
    fallback = _registry_fallback(sc, ns, hierarchy, network)
    return {ip: SessionAgent(stub, Session(config, always), tool_of,
                             fallback(ip) if fallback is not None else None)
            for ip, stub in agents.items()}
