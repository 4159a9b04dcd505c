"""The notebooks in notebooks/ run from top to bottom without an error (nbclient, a python3
kernel), so they never rot; and they are committed executed, without timing metadata
(``python3 notebooks/run_all.py`` re-executes and saves them)."""

from __future__ import annotations

import importlib.util
import json
import os
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))
_spec = importlib.util.spec_from_file_location("run_all", ROOT / "notebooks" / "run_all.py")
run_all = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(run_all)  # type: ignore[union-attr]

if not os.environ.get("CI"):  # CI installs them (the test extra): missing is a failure there
    pytest.importorskip("nbclient", reason="pip install -e '.[test]' (nbclient, ipykernel)")
    pytest.importorskip("ipykernel", reason="pip install -e '.[test]' (nbclient, ipykernel)")


def test_there_is_a_notebook_per_question() -> None:
    assert [p.name[:2] for p in NOTEBOOKS] == ["01", "02", "03", "04", "05", "06"]
    assert run_all.notebooks() == NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_executed_without_timing_metadata(path: Path) -> None:
    nb = json.loads(path.read_text(encoding="utf-8"))
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code and all(c["execution_count"] for c in code), "run notebooks/run_all.py"
    assert [c["execution_count"] for c in code] == list(range(1, len(code) + 1))
    first = nb["cells"][0]
    assert first["cell_type"] == "markdown" and first["source"][0].startswith("# ")
    for cell in code:
        assert "execution" not in cell["metadata"]
        for out in cell["outputs"]:
            assert out["output_type"] != "error"
            assert not (out["output_type"] == "stream" and out["name"] == "stderr"), out
    text = path.read_text(encoding="utf-8")
    assert str(ROOT) not in text and "/tmp/" not in text  # no machine paths in outputs
    assert path.stat().st_size < 400_000


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the kernel inherits the environment: runs go to tmp_path, not results/notebooks
    monkeypatch.setenv("TOOLDNS_NOTEBOOK_OUT", str(tmp_path))
    start = time.perf_counter()
    run_all.execute(path, save=False, timeout=300)  # raises CellExecutionError on any error
    assert time.perf_counter() - start < 300
    assert any(tmp_path.iterdir())  # the notebook wrote its run there
