"""What the tests share: the project on ``sys.path``, and factories for the things most tests
build — a tiny namespace, its hierarchy of authoritative servers, an in-memory network
(a resolver wired to the servers through a dictionary, virtual time), a small scenario with
dotted overrides, and a local Ray instance.

Factories are fixtures that return a function, so each test states what it changes::

    def test_x(make_namespace, memory_network):
        ns = make_namespace(depth=3)
        hierarchy, net = memory_network(ns, scorer="oracle")
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sim.build.hierarchy import Hierarchy, build_hierarchy  # noqa: E402
from sim.engines.memory import MemoryNetwork  # noqa: E402
from sim.scenario import Scenario  # noqa: E402
from tests.factories import scenario, tiny_namespace, wired  # noqa: E402
from topologies.namespace import Namespace  # noqa: E402


@pytest.fixture
def make_namespace() -> Callable[..., Namespace]:
    return tiny_namespace


@pytest.fixture(scope="module")
def namespace() -> Namespace:
    """The tiny namespace, built once per module (read it, do not change it)."""
    return tiny_namespace()


@pytest.fixture(scope="module")
def hierarchy(namespace: Namespace) -> Hierarchy:
    """The tiny namespace's authoritative servers (BM25), built once per module."""
    return build_hierarchy(namespace, scorer="bm25")


@pytest.fixture
def memory_network() -> Callable[..., tuple[Hierarchy, MemoryNetwork]]:
    return wired


@pytest.fixture
def small_scenario() -> Callable[..., Scenario]:
    return scenario


@pytest.fixture(scope="module")
def ray_session() -> Iterator[Any]:
    """A local Ray instance (2 CPUs) for one test module."""
    if os.environ.get("CI"):  # CI installs Ray (.ci/setup): a missing Ray is a failure there
        import ray
    else:
        ray = pytest.importorskip("ray", reason="Ray is not installed (bash .ci/setup)")
    from sim.engines.ray import ensure_ray

    ensure_ray(num_cpus=2)
    yield ray
    ray.shutdown()
