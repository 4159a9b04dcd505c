"""nodes/ is transport-free: no engine, socket, wall clock or global random state."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

NODES = Path(__file__).resolve().parents[1] / "nodes"
FORBIDDEN_MODULES = {"asyncio", "socket", "simpy", "ray", "mininet", "scapy", "time", "sim",
                     "topologies", "selectors", "threading"}
FORBIDDEN_CALLS = {("random", "random"), ("random", "choice"), ("random", "randint"),
                   ("random", "randrange"), ("random", "shuffle"), ("random", "sample"),
                   ("random", "uniform"), ("time", "time"), ("time", "monotonic"),
                   ("datetime", "now")}


@pytest.mark.parametrize("path", sorted(NODES.glob("*.py")), ids=lambda p: p.name)
def test_nodes_module_is_transport_free(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        else:
            names = []
        for name in names:
            assert name.split(".")[0] not in FORBIDDEN_MODULES, f"{path.name} imports {name}"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            base = node.func.value
            if isinstance(base, ast.Name):
                assert (base.id, node.func.attr) not in FORBIDDEN_CALLS, (
                    f"{path.name}:{node.lineno} calls {base.id}.{node.func.attr}()")
