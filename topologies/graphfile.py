"""Graphs read from GML or GraphML files, with per-edge delay, loss and bandwidth."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import networkx as nx

from topologies.graphnodes import Node
from topologies.links import DelayModel, LinkSpec
from topologies.units import parse_bandwidth, parse_duration, parse_loss


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
