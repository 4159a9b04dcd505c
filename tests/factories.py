"""Plain factories the tests share (the fixtures in ``conftest.py`` hand them out): a tiny
namespace, its servers wired to a resolver by an in-memory network, a shipped scenario with
dotted overrides. Import them where a fixture does not fit (module-level constants)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nodes.resolver.config import ResolverConfig
from sim.build.hierarchy import Hierarchy, build_hierarchy
from sim.engines.memory import MemoryNetwork
from sim.scenario import Scenario
from topologies.namespace import Namespace
from topologies.synthetic import synthetic

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "scenarios"
TINY = {"n_tools": 120, "branching": 3, "depth": 2, "seed": 2, "n_queries": 20}


def tiny_namespace(**overrides: Any) -> Namespace:
    """A synthetic namespace: 120 tools, branching 3, depth 2, 20 queries, seed 2 (any of
    :func:`topologies.synthetic.synthetic`'s arguments can be changed)."""
    return synthetic(**{**TINY, **overrides})


def wired(ns: Namespace, scorer: str = "oracle", replicas: int = 1, seed: int = 1,
          config: ResolverConfig | None = None, **hierarchy: Any
          ) -> tuple[Hierarchy, MemoryNetwork]:
    """The namespace's servers and one resolver joined by an in-memory network."""
    h = build_hierarchy(ns, replicas=replicas, scorer=scorer, **hierarchy)
    return h, MemoryNetwork(h, h.resolver(seed=seed, config=config))


def scenario(name: str = "quickstart", **overrides: Any) -> Scenario:
    """A shipped scenario (``scenarios/<name>.yaml``) with dotted fields replaced, e.g.
    ``scenario(**{"workload.queries": 20, "schemes.0.k": 2})``."""
    from sim.loading import load_scenario

    return load_scenario(SCENARIOS / f"{name}.yaml").with_overrides(overrides)
