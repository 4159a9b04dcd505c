"""The run's network: addresses of resolvers and agents, their placement on the topology
graph and the path model drawing packet delays."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sim.build.faults import registry_address
from sim.build.hierarchy import Hierarchy
from sim.errors import ScenarioError
from sim.scenario import Scenario
from topologies.graphs import build_graph
from topologies.links import DelayModel, LinkSpec
from topologies.paths import PathModel
from topologies.placement import Role, place


@dataclass
class Network:
    """Where every node sits and how packets travel between them."""

    resolvers: list[str]
    agents: list[str]
    agent_resolver: list[int]
    role_of: dict[str, str]
    path: PathModel


def _roles(sc: Scenario, hierarchy: Hierarchy, resolvers: list[str], agents: list[str],
           agent_resolver: list[int]) -> tuple[list[Role], dict[str, str]]:
    """Every node's placement role, and its role id by address."""
    roles: list[Role] = []
    role_of: dict[str, str] = {}
    orgs = {m["address"]: m["org"] for m in hierarchy.manifest}
    kinds = {m["address"]: m["role"] for m in hierarchy.manifest}
    for ip in hierarchy.servers:
        role_of[ip] = f"server:{ip}"
        roles.append(Role(role_of[ip], kinds[ip], orgs[ip]))
    for i, ip in enumerate(resolvers):
        role_of[ip] = f"resolver:{i}"
        roles.append(Role(role_of[ip], "resolver", None))
    for i, ip in enumerate(agents):
        role_of[ip] = f"agent:{i}"
        roles.append(Role(role_of[ip], "agent", f"resolver:{agent_resolver[i]}"))
    session = sc.agents.session  # a marketplace fallback needs the registry placed too
    if sc.registry_schemes() or (session is not None and session.fallback == "registry"):
        for r in range(max((s.replicas for s in sc.registry_schemes()), default=1)):
            role_of[registry_address(r)] = f"registry:{r}"
            roles.append(Role(f"registry:{r}", "registry", None))
    return roles, role_of


def build_network(sc: Scenario, hierarchy: Hierarchy) -> Network:
    """The topology graph of ``sc`` with every node of the run placed on it."""
    spec = sc.network
    d = spec.link.delay
    link = LinkSpec(delay=DelayModel(dist=d.dist, mean=d.mean, std=d.std,
                                     samples=tuple(d.samples)),
                    loss=spec.link.loss, bandwidth=spec.link.bandwidth)
    params: dict[str, Any] = dict(spec.params)
    if spec.topology == "file":
        params["path"] = spec.file
    try:
        graph = build_graph(spec.topology, spec.nodes, link, sc.seed, **params)
    except (ValueError, TypeError) as exc:
        raise ScenarioError(f"network: {exc}") from None
    resolvers = [f"127.0.53.{i + 1}" for i in range(spec.resolvers)]
    agents = [f"127.2.{i // 250}.{i % 250 + 1}" for i in range(spec.agents)]
    agent_resolver = [i % len(resolvers) for i in range(len(agents))]
    roles, role_of = _roles(sc, hierarchy, resolvers, agents, agent_resolver)
    placement = place(graph, roles, sc.seed, strategy=spec.placement)
    return Network(resolvers, agents, agent_resolver, role_of, PathModel(graph, placement))
