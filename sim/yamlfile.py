"""YAML read with bounds, for scenario and evaluation files and ``--set`` values.

:func:`read_yaml` (files) and :func:`yaml_value` (text) use a safe loader with bounds: a
file of at most :data:`MAX_FILE_BYTES`, nesting at most :data:`MAX_DEPTH` deep, aliases
adding at most :data:`MAX_ALIAS_NODES` nodes by expansion (a "billion laughs" is refused
while it is parsed, not expanded), no recursive alias, no key given twice in one mapping.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.nodes import MappingNode, Node, SequenceNode

from sim.errors import ScenarioError, shown

MAX_FILE_BYTES = 4 * 2**20  # a hand-written scenario is kilobytes; PyYAML reads ~1 MB/s
MAX_DEPTH = 64  # nesting of sequences and mappings (PyYAML composes recursively)
MAX_ALIAS_NODES = 100_000  # nodes aliases may add by expansion, over one document


class _BoundedLoader(yaml.SafeLoader):
    """A safe loader with the bounds of the module docstring."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._open: set[str] = set()  # anchors of the nodes being composed
        self._sizes: dict[int, int] = {}  # id(node) -> nodes in its expansion
        self._expanded = 0  # nodes added by aliases so far

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            if event.anchor in self._open:
                raise ComposerError(None, None, f"alias *{event.anchor} refers to a node "
                                    f"that contains it (recursive)", event.start_mark)
            node = super().compose_node(parent, index)
            self._expanded += 0 if node is None else self._size(node)
            if self._expanded > MAX_ALIAS_NODES:
                raise ComposerError(None, None, f"aliases expand to more than "
                                    f"{MAX_ALIAS_NODES:,} nodes", event.start_mark)
            return node
        event = self.peek_event()
        if self._depth >= MAX_DEPTH:
            raise ComposerError(None, None, f"nested more than {MAX_DEPTH} levels deep",
                                event.start_mark)
        anchor = event.anchor
        self._depth += 1
        if anchor is not None:
            self._open.add(anchor)
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1
            if anchor is not None:
                self._open.discard(anchor)

    def _size(self, node: Node) -> int:
        """Nodes in ``node``'s full expansion, memoised per node (each counted once): as
        deep as the nesting bound allows, no deeper."""
        size = self._sizes.get(id(node))
        if size is None:
            size = 1
            if isinstance(node, SequenceNode):
                size += sum(self._size(child) for child in node.value)
            elif isinstance(node, MappingNode):
                size += sum(self._size(k) + self._size(v) for k, v in node.value)
            self._sizes[id(node)] = size
        return size

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict:
        seen: set = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {shown(key)}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def yaml_value(text: str, lines: bool = False) -> Any:
    """YAML text read with the bounded loader; raises ValueError saying what is wrong (with
    ``lines``, where: ``line N: ...``)."""
    try:
        return yaml.load(text, Loader=_BoundedLoader)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f"line {where.line + 1}: " if where is not None and lines else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ValueError(f"{line}not valid YAML ({problem})") from None
    except (ValueError, RecursionError) as exc:  # e.g. an integer of over 4,300 digits
        raise ValueError(f"not valid YAML ({shown(str(exc), 80)})") from None


def read_yaml(path: Path) -> Any:
    """A YAML file read with the bounded loader; ScenarioError naming the file otherwise."""
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ScenarioError(f"{path}: (top level): the file has {size:,} bytes; scenario "
                                f"files are limited to {MAX_FILE_BYTES:,}")
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read the file ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise ScenarioError(f"{path}: (top level): not UTF-8 text") from None
    try:
        return yaml_value(text, lines=True)
    except ValueError as exc:
        raise ScenarioError(f"{path}: {exc}") from None


