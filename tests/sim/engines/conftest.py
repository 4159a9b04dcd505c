"""Fixtures the engine tests share."""

from __future__ import annotations

import os

import pytest

from sim.engines.mininet import unavailable


@pytest.fixture(scope="module")
def mininet_ok() -> None:
    """Skip (fail in CI, which runs as root after .ci/setup installed Mininet) unless
    Mininet can run here."""
    reason = unavailable()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"Mininet must run in CI: {reason}")
        pytest.skip(reason)
