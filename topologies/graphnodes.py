"""Graph nodes: what names a node, and the one total order over them every step sorts by."""

from __future__ import annotations

from collections.abc import Hashable, Iterable

Node = Hashable


def node_key(node: Node) -> tuple[int, float, str]:
    """Total order over int and string nodes: integers first (numerically), then by text."""
    if isinstance(node, int | float) and not isinstance(node, bool):
        return (0, float(node), "")
    return (1, 0.0, str(node))


def sorted_nodes(nodes: Iterable[Node]) -> list[Node]:
    """``nodes`` in :func:`node_key` order."""
    return sorted(nodes, key=node_key)
