"""Make the project importable when pytest is run without installing it."""

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@pytest.fixture(scope="module")
def ray_session():  # type: ignore[no-untyped-def]
    """A local Ray instance (2 CPUs) for one test module."""
    if os.environ.get("CI"):  # CI installs Ray (.ci/setup): a missing Ray is a failure there
        import ray
    else:
        ray = pytest.importorskip("ray", reason="Ray is not installed (bash .ci/setup)")
    from sim.engines.ray import ensure_ray

    ensure_ray(num_cpus=2)
    yield ray
    ray.shutdown()
