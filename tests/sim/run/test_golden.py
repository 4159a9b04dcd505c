"""Hot-path changes keep results byte-identical: a few shipped scenarios against the digests
in benchmarks/golden.json (recorded before the fast paths; `python3 benchmarks/golden.py`
checks every scenario)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("golden", ROOT / "benchmarks" / "golden.py")
golden = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(golden)  # type: ignore[union-attr]
DIGESTS = json.loads(golden.GOLDEN.read_text())


@pytest.mark.parametrize("name", ["quickstart", "engines-small", "hot-k0-tc",
                                  "sweep-branching-depth/004", "trust-rogue-publisher"])
def test_same_bytes_as_before_the_fast_paths(name: str, tmp_path: Path) -> None:
    if DIGESTS["_versions"] != golden.versions():
        pytest.skip(f"digests were recorded with {DIGESTS['_versions']}, these libraries are "
                    f"{golden.versions()} (their number formatting may differ)")
    (case,) = [sc for n, sc in golden.cases(name) if n == name]
    from sim.run.runner import run_scenario

    run_scenario(case, out_dir=tmp_path)
    assert golden.digest(tmp_path) == DIGESTS[name]
