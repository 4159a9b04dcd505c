"""`tooldns serve` in a subprocess for the interop tests: started, waited for (its manifest
written), stopped."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def tooldns_serve(args: Sequence[str], manifest: Path, start_timeout: float = 60.0
                  ) -> Iterator[dict]:
    """Run ``tooldns serve ARGS --manifest MANIFEST`` until the block ends; yields the
    manifest (fails the test with serve's output if it does not start)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "sim.cli", "serve", *args, "--manifest", str(manifest)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + start_timeout
    while not manifest.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            out = proc.stdout.read() if proc.stdout else ""
            proc.kill()
            pytest.fail(f"tooldns serve did not start:\n{out}")
        time.sleep(0.1)
    try:
        yield json.loads(manifest.read_text())
    finally:
        proc.terminate()
        proc.wait(timeout=10)
