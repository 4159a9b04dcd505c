"""The folder contract, read from the code's own imports (every import, function-level too).

- ``nodes/`` is transport-free: no engine, socket, wall clock or global random state, and
  nothing from ``sim/``, ``topologies/`` or ``analysis/``.
- ``analysis/`` never imports ``sim/`` (it reads results folders, whoever wrote them).
- ``sim/engines/`` never imports the run loop or the CLI; ``sim/build/`` (scenario → plan)
  never imports an engine, the run loop or the CLI.
- The scenario models and what they rest on (``sim/*.py``: scenario, schemes, eval files,
  schema, checks …) and the catalogues (``sim/catalog/``) import nothing above them: no
  plan building, engine, socket, run loop, retrieval, interop, VM or CLI code.
- No import cycle among the project's modules.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("nodes", "sim", "topologies", "analysis")
FORBIDDEN_IN_NODES = {"asyncio", "socket", "simpy", "ray", "mininet", "scapy", "time", "sim",
                      "topologies", "analysis", "selectors", "threading"}
FORBIDDEN_CALLS = {("random", "random"), ("random", "choice"), ("random", "randint"),
                   ("random", "randrange"), ("random", "shuffle"), ("random", "sample"),
                   ("random", "uniform"), ("time", "time"), ("time", "monotonic"),
                   ("datetime", "now")}
# importer prefix -> module prefixes it must not import
#: what the model layer (sim/*.py and sim/catalog/) sits below
ABOVE_MODELS = ("sim.build", "sim.engines", "sim.run", "sim.cli", "sim.retrieval",
                "sim.interop", "sim.sockets", "sim.vm")
CONTRACT = {
    "analysis": ("sim",),
    "sim.catalog": ABOVE_MODELS,
    "topologies": ("sim", "analysis"),
    "sim.engines": ("sim.run", "sim.cli"),
    "sim.build": ("sim.engines", "sim.run", "sim.cli"),
    "sim.sockets": ("sim.run", "sim.cli"),
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every import in the file; ``from a import b`` gives ``a.b`` when
    that is a project module, else ``a``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = _module_name(path)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against the importing package
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for a in node.names:
                sub = f"{base}.{a.name}"
                out.append((node.lineno, sub if sub in MODULES else base))
    return out


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


@pytest.mark.parametrize("name", sorted(m for m in MODULES if _within(m, "nodes")))
def test_nodes_module_is_transport_free(name: str) -> None:
    path = MODULES[name]
    for line, module in _imports(path):
        assert module.split(".")[0] not in FORBIDDEN_IN_NODES, f"{name}:{line} imports {module}"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            base = node.func.value
            if isinstance(base, ast.Name):
                assert (base.id, node.func.attr) not in FORBIDDEN_CALLS, (
                    f"{name}:{node.lineno} calls {base.id}.{node.func.attr}()")


def _models(name: str) -> bool:
    """A module of the model layer: ``sim/<name>.py`` (not a package's)."""
    return (name.startswith("sim.") and name.count(".") == 1
            and MODULES[name].name != "__init__.py")


def test_folder_contract() -> None:
    broken = []
    for name, path in MODULES.items():
        rules = [f for importer, f in CONTRACT.items() if _within(name, importer)]
        if _models(name):
            rules.append(ABOVE_MODELS)
        for forbidden in rules:
            for line, module in _imports(path):
                if any(_within(module, f) for f in forbidden):
                    broken.append(f"{name}:{line} imports {module}")
    assert not broken, "folder contract broken:\n" + "\n".join(broken)


def test_the_model_layer_is_seen() -> None:
    """The model rule reads the files it is about (and would catch the imports it forbids)."""
    models = [m for m in MODULES if _models(m)]
    assert {"sim.scenario", "sim.schemes", "sim.evalspec"} <= set(models)
    assert not any(_models(m) for m in ("sim.build.plan", "sim.catalog.engines"))


def test_no_import_cycle() -> None:
    graph = nx.DiGraph()
    graph.add_nodes_from(MODULES)
    for name, path in MODULES.items():
        for _line, module in _imports(path):
            # importing a.b.c also runs a/__init__ and a/b/__init__: only the module itself
            # counts here (package __init__ files hold docstrings only)
            if module in MODULES and module != name:
                graph.add_edge(name, module)
    cycles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert not cycles, f"import cycles among project modules: {cycles}"


def test_package_inits_hold_only_a_docstring() -> None:
    """One home per name: no package re-exports what its modules define."""
    for path in MODULES.values():
        if path.name != "__init__.py":
            continue
        body = ast.parse(path.read_text(encoding="utf-8")).body
        assert all(isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
                   for s in body), f"{path.relative_to(ROOT)} holds more than a docstring"


def test_the_scan_sees_the_tree() -> None:
    """A guard against a contract that passes because it reads nothing."""
    assert len(MODULES) > 60
    assert "nodes.resolver.core" in MODULES and "sim.catalog.engines" in MODULES
    edges = {m for _l, m in _imports(MODULES["sim.catalog.engines"])}
    assert "sim.errors" in edges  # imported inside a function
