"""Network graphs, node placement and the path model shared by the simulation and live engines.

What lives here:

* :class:`DelayModel` and :class:`LinkSpec` — what one link does to a packet: a delay drawn
  from a constant, truncated-normal, lognormal or empirical distribution, an independent loss
  probability and an optional bandwidth (serialisation delay).
* Graph builders — :func:`star`, :func:`line`, :func:`tree`, :func:`waxman`,
  :func:`geometric` and :func:`from_file` (GML / GraphML with per-edge ``delay``, ``loss`` and
  ``bandwidth`` such as ``"10ms"`` or ``"100Mbps"``), registered by name in
  :data:`TOPOLOGIES` and dispatched by :func:`build_graph`. Every edge carries its
  :class:`LinkSpec` in the attribute ``link``; spatial graphs (Waxman, geometric) are made
  connected and scale each edge's delay with its Euclidean length, so geography matters.
* :func:`place` — which graph node hosts each :class:`Role` (root/TLD/intermediate/leaf
  servers, resolvers, agents, registries): ``"default"`` puts clients around the graph's
  center with resolvers near their agents, root and TLD servers on the nodes farthest from the
  agents and every organisation's servers on one site; ``"random"`` and ``"same-node"`` are
  the controls.
* :class:`PathModel` — shortest paths by mean link delay between placed roles, and per-packet
  one-way delays / losses drawn from a caller's :class:`numpy.random.Generator`.

Nothing here reads a clock or global random state: every draw comes from a generator passed
in (or a :class:`random.Random` made from an explicit seed), so equal inputs give equal
outputs.
"""

from __future__ import annotations

import inspect
import itertools
import math
import numbers
import random
import re
import statistics
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, get_args

import networkx as nx
import numpy as np

DelayKind = Literal["constant", "normal", "lognormal", "empirical"]
RoleKind = Literal["root", "tld", "intermediate", "leaf", "resolver", "agent", "registry"]
Strategy = Literal["default", "random", "same-node"]
Node = Hashable

DELAY_KINDS: tuple[str, ...] = get_args(DelayKind)
ROLE_KINDS: tuple[str, ...] = get_args(RoleKind)
STRATEGIES: tuple[str, ...] = get_args(Strategy)

_STD_NORMAL = statistics.NormalDist()
_U_MIN = 1e-300  # keeps inverse-CDF arguments inside (0, 1)
_U_MAX = 1.0 - 2.0**-53
HOP_EPSILON = 1e-12  # seconds added per hop when routing: among equal delays, fewest hops wins


def _finite_nonneg(name: str, value: object, owner: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{owner}: {name} must be a number, got {value!r}")
    x = float(value)
    if not math.isfinite(x) or x < 0:
        raise ValueError(f"{owner}: {name} must be a finite number ≥ 0, got {value!r}")
    return x


# --------------------------------------------------------------------------- delays, links


@dataclass(frozen=True)
class DelayModel:
    """A per-link one-way delay distribution, in seconds (never negative).

    * ``constant`` — always ``mean`` (``std`` must be 0).
    * ``normal`` — normal(``mean``, ``std``) truncated at 0 (drawn by inverse CDF on the
      positive part, so there is no point mass at 0; with ``std`` ≪ ``mean`` the realised mean
      is ``mean``, otherwise slightly above it — see :meth:`expected`).
    * ``lognormal`` — parameterised so that its mean and standard deviation are ``mean`` and
      ``std``.
    * ``empirical`` — uniform over ``samples``; ``mean`` and ``std`` are recomputed from the
      samples (the values passed are ignored) and the samples are stored sorted.

    Every :meth:`sample` consumes exactly one ``rng.random()`` draw whatever the kind, and maps
    it through the inverse CDF, so runs that differ only in delay distribution stay aligned.
    """

    dist: DelayKind
    mean: float
    std: float = 0.0
    samples: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        owner = f"DelayModel({self.dist!r})"
        if self.dist not in DELAY_KINDS:
            raise ValueError(f"DelayModel: unknown dist {self.dist!r}; "
                             f"expected one of {', '.join(DELAY_KINDS)}")
        set_ = object.__setattr__
        set_(self, "_a", 0.0)  # derived parameters (not fields): see below
        set_(self, "_b", 0.0)
        if self.dist == "empirical":
            if not self.samples:
                raise ValueError(f"{owner}: an empirical delay needs at least one sample")
            values = sorted(_finite_nonneg("every sample", s, owner) for s in self.samples)
            set_(self, "samples", tuple(values))
            set_(self, "mean", statistics.fmean(values))
            set_(self, "std", statistics.pstdev(values) if len(values) > 1 else 0.0)
            return
        if self.samples:
            raise ValueError(f"{owner}: samples are only for dist='empirical'")
        mean = _finite_nonneg("mean", self.mean, owner)
        std = _finite_nonneg("std", self.std, owner)
        set_(self, "mean", mean)
        set_(self, "std", std)
        if self.dist == "constant" and std != 0:
            raise ValueError(f"{owner}: a constant delay has std 0, got {std!r}")
        if self.dist == "normal" and std > 0:
            # _a: probability mass below 0 that the truncation removes
            set_(self, "_a", _STD_NORMAL.cdf(-mean / std))
        if self.dist == "lognormal" and std > 0:
            if mean == 0:
                raise ValueError(f"{owner}: a lognormal delay with std > 0 needs mean > 0")
            sigma2 = math.log1p((std / mean) ** 2)
            set_(self, "_a", math.log(mean) - sigma2 / 2)  # mu
            set_(self, "_b", math.sqrt(sigma2))  # sigma

    # constructors -------------------------------------------------------------------------

    @classmethod
    def constant(cls, mean: float) -> DelayModel:
        return cls("constant", mean)

    @classmethod
    def from_samples(cls, samples: Iterable[float]) -> DelayModel:
        """An empirical delay (mean and std computed from the samples)."""
        return cls("empirical", 0.0, samples=tuple(samples))

    def scaled(self, factor: float) -> DelayModel:
        """The same kind of distribution with every value multiplied by ``factor`` (≥ 0)."""
        f = _finite_nonneg("factor", factor, "DelayModel.scaled")
        if self.dist == "empirical":
            return DelayModel.from_samples(s * f for s in self.samples)
        return DelayModel(self.dist, self.mean * f, self.std * f)

    # distribution -------------------------------------------------------------------------

    def quantile(self, u: float) -> float:
        """The value at cumulative probability ``u`` ∈ [0, 1) (inverse CDF)."""
        if self.dist == "constant" or (self.std == 0 and self.dist != "empirical"):
            return self.mean
        if self.dist == "empirical":
            n = len(self.samples)
            return self.samples[min(int(u * n), n - 1)]
        if self.dist == "normal":
            p = self._a + u * (1.0 - self._a)
            x = self.mean + self.std * _STD_NORMAL.inv_cdf(min(max(p, _U_MIN), _U_MAX))
            return max(x, 0.0)
        z = _STD_NORMAL.inv_cdf(min(max(u, _U_MIN), _U_MAX))
        return math.exp(self._a + self._b * z)

    def sample(self, rng: np.random.Generator) -> float:
        """One delay in seconds (≥ 0); consumes exactly one ``rng.random()``."""
        return self.quantile(float(rng.random()))

    def median(self) -> float:
        if self.dist == "empirical":
            return float(statistics.median(self.samples))
        return self.quantile(0.5)

    def expected(self) -> float:
        """The distribution's actual mean (differs from ``mean`` only for a truncated normal)."""
        if self.dist != "normal" or self.std == 0:
            return self.mean
        alpha = -self.mean / self.std
        tail = 1.0 - self._a
        return self.mean + self.std * _STD_NORMAL.pdf(alpha) / tail


@dataclass(frozen=True)
class LinkSpec:
    """One link: delay distribution, independent loss probability, bandwidth in bits/s."""

    delay: DelayModel
    loss: float = 0.0
    bandwidth: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.delay, DelayModel):
            raise ValueError(f"LinkSpec: delay must be a DelayModel, got {self.delay!r}")
        loss = _finite_nonneg("loss", self.loss, "LinkSpec")
        if loss >= 1:
            raise ValueError(f"LinkSpec: loss must be in [0, 1), got {self.loss!r}")
        object.__setattr__(self, "loss", loss)
        if self.bandwidth is not None:
            bw = _finite_nonneg("bandwidth", self.bandwidth, "LinkSpec")
            if bw == 0:
                raise ValueError("LinkSpec: bandwidth must be > 0 bits/s (None = unlimited)")
            object.__setattr__(self, "bandwidth", bw)

    def serialisation(self, size: int) -> float:
        """Seconds to put ``size`` bytes on this link."""
        return 0.0 if self.bandwidth is None else size * 8 / self.bandwidth


# --------------------------------------------------------------------------- unit parsing

_NUMBER = r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE]([-+]?[0-9]+))?"
_QUANTITY = re.compile(rf"^\s*{_NUMBER}\s*([A-Za-zµμ/%]*)\s*$")
_TIME_UNITS = {"": 1.0, "s": 1.0, "sec": 1.0, "secs": 1.0, "ms": 1e-3, "us": 1e-6,
               "µs": 1e-6, "μs": 1e-6, "ns": 1e-9}
_SI = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_RATE = re.compile(r"^([kKmMgGtT]?)(bps|bit/s|bits/s|b/s|Bps|B/s|byte/s|bytes/s)?$")


def _split(value: str) -> tuple[float, str] | None:
    m = _QUANTITY.match(value)
    if not m:
        return None
    number = float(m.group(1) + (f"e{m.group(2)}" if m.group(2) else ""))
    return number, m.group(3)


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, numbers.Real):
        return float(value)
    return None


def parse_duration(value: object) -> float:
    """Seconds from a number (seconds) or a string like ``"10ms"``, ``"1.5 ms"``, ``"0.2s"``,
    ``"250us"``; raises ValueError."""
    x = _number(value)
    if x is None:
        parts = _split(value) if isinstance(value, str) else None
        if parts is None or parts[1].lower() not in _TIME_UNITS:
            raise ValueError(f"not a duration: {value!r} (use seconds or e.g. '10ms', '0.2s')")
        x = parts[0] * _TIME_UNITS[parts[1].lower()]
    if not math.isfinite(x) or x < 0:
        raise ValueError(f"a duration must be finite and ≥ 0, got {value!r}")
    return x


def parse_bandwidth(value: object) -> float:
    """Bits per second from a number (bits/s) or a string like ``"100Mbps"``, ``"1Gbps"``,
    ``"10 Mbit/s"`` (``"MBps"``/``"MB/s"`` are bytes/s); raises ValueError."""
    x = _number(value)
    if x is None:
        parts = _split(value) if isinstance(value, str) else None
        m = _RATE.match(parts[1]) if parts is not None else None
        if parts is None or m is None or (m.group(1) and not m.group(2)):
            raise ValueError(f"not a bandwidth: {value!r} (use bits/s or e.g. '100Mbps', "
                             f"'1Gbps')")
        unit = m.group(2) or "bps"
        x = parts[0] * _SI[m.group(1).lower()] * (8.0 if unit[0] == "B" else 1.0)
    if not math.isfinite(x) or x <= 0:
        raise ValueError(f"a bandwidth must be finite and > 0, got {value!r}")
    return x


def parse_loss(value: object) -> float:
    """A loss probability in [0, 1) from a number or a string (``"0.01"``, ``"1%"``)."""
    x = _number(value)
    if x is None:
        parts = _split(value) if isinstance(value, str) else None
        if parts is None or parts[1] not in ("", "%"):
            raise ValueError(f"not a loss probability: {value!r} (use e.g. 0.01 or '1%')")
        x = parts[0] / (100.0 if parts[1] == "%" else 1.0)
    if not math.isfinite(x) or not 0 <= x < 1:
        raise ValueError(f"a loss probability must be in [0, 1), got {value!r}")
    return x


# --------------------------------------------------------------------------- graph builders


def _node_key(node: Node) -> tuple[int, float, str]:
    """Total order over int and string nodes: integers first (numerically), then by text."""
    if isinstance(node, int | float) and not isinstance(node, bool):
        return (0, float(node), "")
    return (1, 0.0, str(node))


def _sorted_nodes(nodes: Iterable[Node]) -> list[Node]:
    return sorted(nodes, key=_node_key)


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
    comps = sorted((sorted(c, key=_node_key) for c in nx.connected_components(graph)),
                   key=lambda c: (-len(c), _node_key(c[0])))
    if len(comps) <= 1:
        return
    main = list(comps[0])
    for comp in comps[1:]:
        a = np.array([graph.nodes[v][pos_name] for v in comp], dtype=float)
        b = np.array([graph.nodes[v][pos_name] for v in main], dtype=float)
        d = np.sqrt(((a[:, None, :] - b[None, :, :]) ** 2).sum(axis=2))
        i, j = np.unravel_index(int(np.argmin(d)), d.shape)
        graph.add_edge(comp[i], main[j], bridge=True)
        main = sorted([*main, *comp], key=_node_key)


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


def _read_graph(path: Path) -> nx.Graph:
    suffix = path.suffix.lower()
    if suffix not in (".gml", ".graphml", ".xml"):
        raise ValueError(f"{path}: unknown graph format {path.suffix!r} "
                         f"(expected .gml or .graphml)")
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    try:
        if suffix == ".gml":
            graph = nx.read_gml(path, label=None)
            labels = [graph.nodes[v].get("label") for v in graph]
            if all(label is not None for label in labels) and len(set(labels)) == len(labels):
                graph = nx.relabel_nodes(graph, dict(zip(graph, labels, strict=True)))
        else:
            graph = nx.read_graphml(path)
    except Exception as exc:  # networkx raises several kinds of parse errors
        raise ValueError(f"{path}: cannot read graph: {exc}") from exc
    names = list(graph)
    if names and all(isinstance(v, str) and v.isascii() and v.isdigit() and str(int(v)) == v
                     for v in names):
        graph = nx.relabel_nodes(graph, {v: int(v) for v in names})
    return graph


def from_file(path: str | Path, link: LinkSpec) -> nx.Graph:
    """A graph from a GML (``.gml``) or GraphML (``.graphml``/``.xml``) file.

    Edge attributes override ``link``: ``delay`` (seconds, or ``"10ms"``, ``"1.5 ms"``,
    ``"0.2s"``; the default distribution is scaled to that mean, keeping its kind and
    coefficient of variation), ``loss`` (probability or ``"1%"``), ``bandwidth`` (bits/s, or
    ``"100Mbps"``, ``"1Gbps"``). GML nodes are named by their labels when all are present and
    unique; numeric string names become ints. Self-loops are dropped; the graph must be
    connected. Any bad value raises ValueError naming the file and the edge.
    """
    if not isinstance(link, LinkSpec):
        raise ValueError(f"link must be a LinkSpec, got {link!r}")
    path = Path(path)
    source = _read_graph(path)
    graph = nx.Graph()
    for v, data in source.nodes(data=True):
        graph.add_node(v, **data)
    seen: dict[frozenset, dict] = {}
    for u, v, data in source.edges(data=True):
        if u == v:
            continue
        pair = frozenset((u, v))
        if pair in seen:
            if seen[pair] != data:
                raise ValueError(f"{path}: edge ({u!r}, {v!r}) is given twice with different "
                                 f"attributes")
            continue
        seen[pair] = dict(data)
        attrs = {k: val for k, val in data.items() if k != "link"}
        graph.add_edge(u, v, **attrs, link=_edge_link(path, u, v, data, link))
    if graph.number_of_nodes() == 0:
        raise ValueError(f"{path}: the graph has no nodes")
    if not nx.is_connected(graph):
        k = nx.number_connected_components(graph)
        raise ValueError(f"{path}: the graph is not connected ({k} components)")
    return graph


def _edge_link(path: Path, u: Node, v: Node, data: Mapping[str, object],
               default: LinkSpec) -> LinkSpec:
    delay, loss, bandwidth = default.delay, default.loss, default.bandwidth
    for attr, parse in (("delay", parse_duration), ("loss", parse_loss),
                        ("bandwidth", parse_bandwidth)):
        if attr not in data:
            continue
        try:
            value = parse(data[attr])
        except ValueError as exc:
            raise ValueError(f"{path}: edge ({u!r}, {v!r}): bad {attr} "
                             f"{data[attr]!r}: {exc}") from None
        if attr == "delay":
            base = default.delay
            delay = (base.scaled(value / base.mean) if base.mean > 0
                     else DelayModel.constant(value))
        elif attr == "loss":
            loss = value
        else:
            bandwidth = value
    return LinkSpec(delay=delay, loss=loss, bandwidth=bandwidth)


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


# --------------------------------------------------------------------------- placement


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


def _weight(_u: Node, _v: Node, data: Mapping[str, Any]) -> float:
    return data["link"].delay.mean + HOP_EPSILON


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
    one site) or per server without one. ``"random"``: every role on a uniformly drawn node.
    ``"same-node"``: all on one node (zero network delay). Deterministic for equal inputs.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown placement strategy {strategy!r}; "
                         f"expected one of {', '.join(STRATEGIES)}")
    nodes = _sorted_nodes(graph.nodes)
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
    dist = dict(nx.all_pairs_dijkstra_path_length(graph, weight=_weight))
    center = min(nodes, key=lambda v: (sum(dist[v].values()), _node_key(v)))
    by_center = sorted(nodes, key=lambda v: (dist[center][v], _node_key(v)))
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
    for anchor in _sorted_nodes(anchors):
        around = _sorted_nodes(graph.neighbors(anchor))
        rng.shuffle(around)
        spots = [*around, anchor]  # a neighbour first: stub → resolver crosses a link
        for j, r in enumerate(anchors[anchor]):
            where[r.id] = spots[j % len(spots)]

    clients = ([where[r.id] for r in of_kind["agent"]]
               or [where[r.id] for r in resolvers] or [center])
    remoteness = {v: statistics.fmean(dist[c][v] for c in clients) for v in nodes}
    occupied = set(clients) | {where[r.id] for r in resolvers}
    far = sorted(nodes, key=lambda v: (v in occupied, -remoteness[v], _node_key(v)))
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
    return where


# --------------------------------------------------------------------------- path model


@dataclass(frozen=True)
class _Route:
    nodes: tuple[Node, ...]
    links: tuple[LinkSpec, ...]
    mean_delay: float


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
            route = _Route((a,), (), 0.0)
        elif _node_key(b) < _node_key(a):
            back = self._node_route(b, a)
            route = _Route(back.nodes[::-1], back.links[::-1], back.mean_delay)
        else:
            tree = self._trees.get(a)
            if tree is None:
                tree = nx.single_source_dijkstra_path(self.graph, a, weight=_weight)
                self._trees[a] = tree
            if b not in tree:
                raise ValueError(f"PathModel: no path between nodes {a!r} and {b!r}")
            path = tuple(tree[b])
            links = tuple(self.graph.edges[x, y]["link"] for x, y in itertools.pairwise(path))
            route = _Route(path, links, math.fsum(lk.delay.mean for lk in links))
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

    def one_way(self, src_id: str, dst_id: str, size: int,
                rng: np.random.Generator) -> float | None:
        """Seconds for a ``size``-byte packet from ``src_id`` to ``dst_id``, or None if lost.

        Sum over the path's links of a delay sample plus ``size * 8 / bandwidth``; each link
        loses the packet independently. Per link, in path order, exactly two draws are made
        (loss, then delay) whether or not the packet survives, so the stream stays aligned.
        Roles on the same node: 0.0, never lost, no draws.
        """
        if size < 0:
            raise ValueError(f"PathModel.one_way: size must be ≥ 0 bytes, got {size!r}")
        lost = False
        total = 0.0
        for link in self._route(src_id, dst_id).links:
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
