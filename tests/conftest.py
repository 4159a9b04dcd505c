"""What the tests share: the project on ``sys.path`` and a local Ray instance. The plain
factories most tests build from — a tiny namespace, its servers wired to a resolver in
memory, a shipped scenario with dotted overrides — are in ``tests/factories.py``."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


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
