"""docs/results.md is generated from analysis.columns and not stale; every column and key a
real run writes is documented, and every always-present one is written."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from analysis.columns import NODES, RECORDS, SCHEME_KEYS, SUMMARY_KEYS, Field, markdown
from sim.loading import load_scenario
from sim.run.runner import run_scenario

ROOT = Path(__file__).resolve().parents[2]


def test_results_doc_is_not_stale() -> None:
    committed = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    assert committed == markdown() + "\n", (
        "docs/results.md is stale: python3 -m analysis.columns --markdown > docs/results.md")


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("quickstart")
    run_scenario(load_scenario(ROOT / "scenarios" / "quickstart.yaml"), "simpy", out_dir=out)
    return out


def _check(written: list[str], documented: tuple[Field, ...], what: str) -> None:
    undocumented = [n for n in written if not any(f.matches(n) for f in documented)]
    assert not undocumented, f"{what}: written but not in analysis/columns.py: {undocumented}"
    missing = [f.name for f in documented if not f.when and f.name not in written]
    assert not missing, f"{what}: documented as always present but not written: {missing}"


def test_every_written_column_is_documented(quickstart: Path) -> None:
    _check(list(pd.read_csv(quickstart / "results.csv", nrows=1).columns), RECORDS,
           "results.csv")
    _check(list(pd.read_csv(quickstart / "nodes.csv", nrows=1).columns), NODES, "nodes.csv")
    summary = json.loads((quickstart / "summary.json").read_text(encoding="utf-8"))
    _check(list(summary), SUMMARY_KEYS, "summary.json")
    for scheme, metrics in summary["schemes"].items():
        _check(list(metrics), SCHEME_KEYS, f"summary.json schemes.{scheme}")
