"""Placement: which graph node hosts each :class:`Role` (servers, resolvers, agents,
registries).

``"default"`` puts clients around the graph's center with resolvers near their agents, root
and TLD servers on the nodes farthest from the agents and every organisation's servers on one
site; ``"random"`` and ``"same-node"`` are the controls. Draws come from a ``random.Random``
made from the explicit seed.
"""

from __future__ import annotations

import random
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

import networkx as nx

from topologies.graphnodes import Node, node_key, sorted_nodes
from topologies.paths import route_weight

RoleKind = Literal["root", "tld", "intermediate", "leaf", "resolver", "agent", "registry",
                   "org"]
Strategy = Literal["default", "random", "same-node"]
ROLE_KINDS: tuple[str, ...] = get_args(RoleKind)
STRATEGIES: tuple[str, ...] = get_args(Strategy)


@dataclass(frozen=True)
class Role:
    """Something to place on a graph node. ``group`` is the organisation of an org zone's
    server (one site per organisation) or, for an agent, the id of its resolver."""

    id: str
    kind: RoleKind
    group: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise ValueError(f"Role: id must be a non-empty string, got {self.id!r}")
        if self.kind not in ROLE_KINDS:
            raise ValueError(f"Role {self.id!r}: unknown kind {self.kind!r}; "
                             f"expected one of {', '.join(ROLE_KINDS)}")
        if not self.group:
            object.__setattr__(self, "group", None)


def place(graph: nx.Graph, roles: Sequence[Role], seed: int,
          strategy: Strategy = "default") -> dict[str, Node]:
    """Map each role id to the graph node hosting it.

    ``"default"``: the center is the node with the least total mean-delay distance to all
    others; resolvers (by id) take distinct nodes in order of distance from the center; each
    agent sits next to its resolver (round-robin over the resolver's neighbours in seeded
    order, then the resolver's own node; agents without a resolver go round-robin over
    resolvers);
    root and TLD servers (root first, by id) take distinct nodes in order of decreasing mean
    distance to the agents (nodes without clients first), registries likewise from the
    farthest; intermediate and leaf servers go round-robin over the nodes without root/TLD
    servers, sorted then shuffled with ``seed``, one slot per organisation (all its servers on
    one site) or per server without one; then the servers of the organisations' own zones
    (``org``: ``example.`` and its hosting servers, :mod:`topologies.orgzones`) continue the
    same round-robin, so adding them moves no other node. ``"random"``: every role on a
    uniformly drawn node. ``"same-node"``: all on one node (zero network delay).
    Deterministic for equal inputs.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown placement strategy {strategy!r}; "
                         f"expected one of {', '.join(STRATEGIES)}")
    nodes = sorted_nodes(graph.nodes)
    if not nodes:
        raise ValueError("place: the graph has no nodes")
    dupes = sorted(i for i, k in Counter(r.id for r in roles).items() if k > 1)
    if dupes:
        raise ValueError(f"place: duplicate role ids {dupes}")
    ordered = sorted(roles, key=lambda r: r.id)
    rng = random.Random(seed)
    if strategy == "same-node":
        where = {r.id: nodes[0] for r in ordered}
    elif strategy == "random":
        where = {r.id: rng.choice(nodes) for r in ordered}
    else:
        where = _place_default(graph, nodes, ordered, rng)
    return {r.id: where[r.id] for r in roles}


def _place_default(graph: nx.Graph, nodes: list[Node], roles: list[Role],
                   rng: random.Random) -> dict[str, Node]:
    if not nx.is_connected(graph):
        raise ValueError("place: the graph is not connected")
    dist = dict(nx.all_pairs_dijkstra_path_length(graph, weight=route_weight))
    center = min(nodes, key=lambda v: (sum(dist[v].values()), node_key(v)))
    by_center = sorted(nodes, key=lambda v: (dist[center][v], node_key(v)))
    where: dict[str, Node] = {}
    of_kind: dict[str, list[Role]] = {k: [] for k in ROLE_KINDS}
    for r in roles:
        of_kind[r.kind].append(r)

    resolvers = of_kind["resolver"]
    for i, r in enumerate(resolvers):
        where[r.id] = by_center[i % len(by_center)]
    resolver_ids = {r.id for r in resolvers}

    anchors: dict[Node, list[Role]] = {}
    loose = 0
    for r in of_kind["agent"]:
        if r.group is not None:
            if r.group not in resolver_ids:
                raise ValueError(f"place: agent {r.id!r} names resolver {r.group!r}, which is "
                                 f"not among the roles")
            anchor = where[r.group]
        elif resolvers:
            anchor = where[resolvers[loose % len(resolvers)].id]
            loose += 1
        else:
            anchor = center
        anchors.setdefault(anchor, []).append(r)
    for anchor in sorted_nodes(anchors):
        around = sorted_nodes(graph.neighbors(anchor))
        rng.shuffle(around)
        spots = [*around, anchor]  # a neighbour first: stub → resolver crosses a link
        for j, r in enumerate(anchors[anchor]):
            where[r.id] = spots[j % len(spots)]

    clients = ([where[r.id] for r in of_kind["agent"]]
               or [where[r.id] for r in resolvers] or [center])
    remoteness = {v: statistics.fmean(dist[c][v] for c in clients) for v in nodes}
    occupied = set(clients) | {where[r.id] for r in resolvers}
    far = sorted(nodes, key=lambda v: (v in occupied, -remoteness[v], node_key(v)))
    top = [*of_kind["root"], *of_kind["tld"]]
    for i, r in enumerate(top):
        where[r.id] = far[i % len(far)]
    for i, r in enumerate(of_kind["registry"]):
        where[r.id] = far[i % len(far)]

    infra = {where[r.id] for r in top}
    pool = [v for v in nodes if v not in infra] or list(nodes)
    rng.shuffle(pool)
    site: dict[str, Node] = {}
    slot = 0
    for r in sorted([*of_kind["intermediate"], *of_kind["leaf"]], key=lambda r: r.id):
        if r.group is not None and r.group in site:
            where[r.id] = site[r.group]
            continue
        where[r.id] = pool[slot % len(pool)]
        slot += 1
        if r.group is not None:
            site[r.group] = where[r.id]
    for r in of_kind["org"]:  # last: the draws above are the same with or without them
        where[r.id] = pool[slot % len(pool)]
        slot += 1
    return where
