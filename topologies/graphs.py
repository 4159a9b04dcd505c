"""Graph builders: star, line, tree, Waxman, random geometric, or a file, by name.

Every builder puts a :class:`~topologies.links.LinkSpec` on each edge (attribute ``link``).
Spatial graphs (Waxman, geometric) are made connected and scale each edge's delay with its
Euclidean length, so geography matters. :data:`TOPOLOGIES` registers the builders by name
and :func:`build_graph` dispatches on it. Randomness comes from a ``random.Random`` made
from the explicit seed.
"""

from __future__ import annotations

import inspect
import math
import random
import statistics
from collections.abc import Callable
from dataclasses import replace

import networkx as nx
import numpy as np

from topologies.graphfile import from_file
from topologies.graphnodes import node_key
from topologies.links import LinkSpec


def _count(name: str, value: object, minimum: int) -> int:
    """An integer parameter (floats with integral value accepted, as scenario params are)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if int(value) < minimum:
        raise ValueError(f"{name} must be ≥ {minimum}, got {value!r}")
    return int(value)


def _with_links(graph: nx.Graph, link: LinkSpec) -> nx.Graph:
    if not isinstance(link, LinkSpec):
        raise ValueError(f"link must be a LinkSpec, got {link!r}")
    for _u, _v, data in graph.edges(data=True):
        data["link"] = link
    return graph


def star(n: int, link: LinkSpec) -> nx.Graph:
    """Hub ``0`` and ``n`` leaves ``1..n``."""
    return _with_links(nx.star_graph(_count("n", n, 0)), link)


def line(n: int, link: LinkSpec) -> nx.Graph:
    """A path ``0 - 1 - … - n-1`` (``n`` ≥ 1 nodes)."""
    return _with_links(nx.path_graph(_count("n", n, 1)), link)


def tree(n: int, link: LinkSpec, branching: int = 3) -> nx.Graph:
    """A balanced ``branching``-ary tree of exactly ``n`` nodes (root ``0``; the levels fill in
    breadth-first order, so all leaves sit on the last two levels)."""
    n = _count("n", n, 1)
    r = _count("branching", branching, 1)
    return _with_links(nx.full_rary_tree(r, n), link)


def _connect_spatial(graph: nx.Graph, pos_name: str = "pos") -> None:
    """Join the components by their closest node pairs (largest component first, then by
    smallest node; ties by node order), marking added edges ``bridge=True``."""
    comps = sorted((sorted(c, key=node_key) for c in nx.connected_components(graph)),
                   key=lambda c: (-len(c), node_key(c[0])))
    if len(comps) <= 1:
        return
    main = list(comps[0])
    for comp in comps[1:]:
        a = np.array([graph.nodes[v][pos_name] for v in comp], dtype=float)
        b = np.array([graph.nodes[v][pos_name] for v in main], dtype=float)
        d = np.sqrt(((a[:, None, :] - b[None, :, :]) ** 2).sum(axis=2))
        i, j = np.unravel_index(int(np.argmin(d)), d.shape)
        graph.add_edge(comp[i], main[j], bridge=True)
        main = sorted([*main, *comp], key=node_key)


def _distance_scaled(graph: nx.Graph, link: LinkSpec, pos_name: str = "pos") -> nx.Graph:
    if not isinstance(link, LinkSpec):
        raise ValueError(f"link must be a LinkSpec, got {link!r}")
    _connect_spatial(graph, pos_name)
    lengths = {}
    for u, v in graph.edges():
        pu = np.asarray(graph.nodes[u][pos_name], dtype=float)
        pv = np.asarray(graph.nodes[v][pos_name], dtype=float)
        lengths[u, v] = float(np.linalg.norm(pu - pv))
    mean_length = statistics.fmean(lengths.values()) if lengths else 0.0
    for (u, v), length in lengths.items():
        factor = length / mean_length if mean_length > 0 else 1.0
        graph.edges[u, v]["distance"] = length
        graph.edges[u, v]["link"] = replace(link, delay=link.delay.scaled(factor))
    return graph


def waxman(n: int, link: LinkSpec, seed: int, alpha: float = 0.4,
           beta: float = 0.1) -> nx.Graph:
    """A Waxman graph on the unit square: nodes ``u, v`` at distance ``d`` are linked with
    probability ``alpha * exp(-d / (beta * L))`` (``L`` the largest distance; ``alpha`` is
    networkx's ``beta`` and vice versa). Made connected; each edge's delay is ``link``'s scaled
    by its length over the mean edge length (same distribution kind)."""
    n = _count("n", n, 1)
    if not (0 < alpha <= 1):
        raise ValueError(f"waxman: alpha must be in (0, 1], got {alpha!r}")
    if not (beta > 0 and math.isfinite(beta)):
        raise ValueError(f"waxman: beta must be > 0, got {beta!r}")
    rand = random.Random(seed)
    if n == 1:  # networkx needs a pair of nodes to find the largest distance
        graph = nx.empty_graph(1)
        graph.nodes[0]["pos"] = (rand.uniform(0, 1), rand.uniform(0, 1))
    else:
        graph = nx.waxman_graph(n, beta=alpha, alpha=beta, seed=rand)
    return _distance_scaled(graph, link)


def geometric(n: int, link: LinkSpec, seed: int, radius: float | None = None) -> nx.Graph:
    """A random geometric graph on the unit square (nodes within ``radius`` linked; default
    ``sqrt(2 ln n / (π n))``, twice the connectivity threshold's area). Made connected and
    distance-scaled like :func:`waxman`."""
    n = _count("n", n, 1)
    if radius is None:
        radius = min(1.5, math.sqrt(2 * math.log(max(n, 2)) / (math.pi * n)))
    if not (radius > 0 and math.isfinite(radius)):
        raise ValueError(f"geometric: radius must be > 0, got {radius!r}")
    graph = nx.random_geometric_graph(n, radius, seed=random.Random(seed))
    return _distance_scaled(graph, link)


TOPOLOGIES: dict[str, Callable[..., nx.Graph]] = {
    "star": star,
    "line": line,
    "tree": tree,
    "waxman": waxman,
    "geometric": geometric,
    "file": from_file,
}
"""Builders by name; :func:`build_graph` passes each the arguments it declares."""


def build_graph(kind: str, n: int, link: LinkSpec, seed: int, **params: object) -> nx.Graph:
    """Build the topology ``kind`` from :data:`TOPOLOGIES`. ``n`` and ``seed`` go to builders
    that take them (``file`` takes neither: it needs ``path=``); ``params`` are the builder's
    own keyword arguments (e.g. ``alpha``, ``radius``, ``branching``)."""
    builder = TOPOLOGIES.get(kind)
    if builder is None:
        raise ValueError(f"unknown topology {kind!r}; known: {', '.join(sorted(TOPOLOGIES))}")
    accepted = inspect.signature(builder).parameters
    args: dict[str, object] = {"link": link}
    if "n" in accepted:
        args["n"] = n
    if "seed" in accepted:
        args["seed"] = seed
    own = [p for p in accepted if p not in ("n", "link", "seed")]
    for name, value in params.items():
        if name not in own:
            takes = ", ".join(own) or "no parameters"
            raise ValueError(f"topology {kind!r} has no parameter {name!r} (takes: {takes})")
        args[name] = value
    for name, p in accepted.items():
        if name not in args and p.default is inspect.Parameter.empty:
            raise ValueError(f"topology {kind!r} needs parameter {name!r}")
    return builder(**args)
