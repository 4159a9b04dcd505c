"""The path model: shortest paths by mean link delay between placed roles, and per-packet
one-way delays and losses drawn from a caller's uniform source (a
:class:`numpy.random.Generator` or :class:`topologies.uniforms.Uniforms`)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import networkx as nx
from mypy_extensions import mypyc_attr

from topologies.graphnodes import Node, node_key
from topologies.links import LinkSpec
from topologies.uniforms import Draws

HOP_EPSILON = 1e-12  # seconds added per hop when routing: among equal delays, fewest hops wins


def route_weight(_u: Node, _v: Node, data: Mapping[str, Any]) -> float:
    """An edge's routing weight (networkx's ``weight=`` callable): mean delay plus a hop."""
    return data["link"].delay.mean + HOP_EPSILON


def _fixed_delay(links: tuple[LinkSpec, ...]) -> float | None:
    """The one-way delay of a route whose links are lossless, constant and of unlimited
    bandwidth — summed in path order, as :meth:`PathModel.one_way` sums it — else None."""
    total = 0.0
    for link in links:
        delay = link.delay
        if link.loss or link.bandwidth is not None or not delay.is_constant:
            return None
        total += delay.mean
    return total


@dataclass(frozen=True)
class _Route:
    """A route between two nodes: the nodes visited, the links crossed, their mean delay,
    and the fixed one-way delay when no draw can change it (:func:`_fixed_delay`)."""

    nodes: tuple[Node, ...]
    links: tuple[LinkSpec, ...]
    mean_delay: float
    fixed: float | None = None

    def __reduce__(self) -> tuple[type[_Route], tuple[tuple[Node, ...], tuple[LinkSpec, ...],
                                                     float, float | None]]:
        # by its fields: compiled by mypyc, a frozen dataclass is not restored field by field
        return (_Route, (self.nodes, self.links, self.mean_delay, self.fixed))

    @classmethod
    def of(cls, nodes: tuple[Node, ...], links: tuple[LinkSpec, ...], mean_delay: float
           ) -> _Route:
        return cls(nodes, links, mean_delay, _fixed_delay(links))


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class PathModel:
    """One-way delays between placed roles along shortest paths by mean link delay.

    Paths are computed lazily (one Dijkstra per source node, cached) and are symmetric: the
    route from B to A is the route from A to B reversed.
    """

    def __init__(self, graph: nx.Graph, placement: Mapping[str, Node]) -> None:
        missing = sorted(rid for rid, v in placement.items() if v not in graph)
        if missing:
            raise ValueError(f"PathModel: roles placed on nodes not in the graph: {missing}")
        for u, v, data in graph.edges(data=True):
            if not isinstance(data.get("link"), LinkSpec):
                raise ValueError(f"PathModel: edge ({u!r}, {v!r}) has no LinkSpec 'link'")
        self.graph = graph
        self.placement = dict(placement)
        self._trees: dict[Node, dict[Node, list[Node]]] = {}
        self._node_routes: dict[tuple[Node, Node], _Route] = {}
        self._routes: dict[tuple[str, str], _Route] = {}

    def node_of(self, role_id: str) -> Node:
        try:
            return self.placement[role_id]
        except KeyError:
            raise KeyError(f"PathModel: unknown role {role_id!r}") from None

    def _node_route(self, a: Node, b: Node) -> _Route:
        key = (a, b)
        route = self._node_routes.get(key)
        if route is not None:
            return route
        if a == b:
            route = _Route.of((a,), (), 0.0)
        elif node_key(b) < node_key(a):
            back = self._node_route(b, a)
            route = _Route.of(back.nodes[::-1], back.links[::-1], back.mean_delay)
        else:
            tree = self._trees.get(a)
            if tree is None:
                tree = nx.single_source_dijkstra_path(self.graph, a, weight=route_weight)
                self._trees[a] = tree
            if b not in tree:
                raise ValueError(f"PathModel: no path between nodes {a!r} and {b!r}")
            path = tuple(tree[b])
            links = tuple(self.graph.edges[x, y]["link"] for x, y in itertools.pairwise(path))
            route = _Route.of(path, links, math.fsum(lk.delay.mean for lk in links))
        self._node_routes[key] = route
        return route

    def _route(self, src_id: str, dst_id: str) -> _Route:
        key = (src_id, dst_id)
        route = self._routes.get(key)
        if route is None:
            route = self._node_route(self.node_of(src_id), self.node_of(dst_id))
            self._routes[key] = route
        return route

    def path(self, src_id: str, dst_id: str) -> list[Node]:
        """The graph nodes a packet from ``src_id`` to ``dst_id`` visits, both ends included."""
        return list(self._route(src_id, dst_id).nodes)

    def one_way(self, src_id: str, dst_id: str, size: int, rng: Draws) -> float | None:
        """Seconds for a ``size``-byte packet from ``src_id`` to ``dst_id``, or None if lost.

        Sum over the path's links of a delay sample plus ``size * 8 / bandwidth``; each link
        loses the packet independently. Per link, in path order, exactly two draws are made
        (loss, then delay) whether or not the packet survives, so the stream stays aligned.
        Roles on the same node: 0.0, never lost, no draws. A route no draw can change
        still consumes its draws, then returns its fixed delay.
        """
        if size < 0:
            raise ValueError(f"PathModel.one_way: size must be ≥ 0 bytes, got {size!r}")
        route = self._routes.get((src_id, dst_id)) or self._route(src_id, dst_id)
        if route.fixed is not None:
            draw = rng.random
            for _ in route.links:
                draw()
                draw()
            return route.fixed
        lost = False
        total = 0.0
        for link in route.links:
            if rng.random() < link.loss:
                lost = True
            total += link.delay.sample(rng)
            if link.bandwidth is not None:
                total += size * 8 / link.bandwidth
        return None if lost else total

    def rtt_estimate(self, src_id: str, dst_id: str) -> float:
        """Twice the sum of the path's mean link delays (no serialisation, no loss)."""
        return 2.0 * self._route(src_id, dst_id).mean_delay

    def hops(self, src_id: str, dst_id: str) -> int:
        return len(self._route(src_id, dst_id).links)
