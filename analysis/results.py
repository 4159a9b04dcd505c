"""Load run outputs back for study with pandas (one run, or many runs/sweep points).

    from analysis.results import load_run, load_runs
    run = load_run("results/quickstart")
    run.records.groupby("scheme").latency_ms.describe()
    allruns = load_runs(["results/quickstart", "results/cache-warmth"])
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml


@dataclass
class Run:
    path: Path
    records: pd.DataFrame  # one row per query and scheme
    nodes: pd.DataFrame  # per-node load
    summary: dict
    scenario: dict  # the resolved scenario as saved

    def by_scheme(self, *metrics: str) -> pd.DataFrame:
        """Mean of the given per-query metrics (default: a few usual ones) per scheme."""
        cols = list(metrics) or ["success", "hit_at_1", "hit_at_k", "round_trips",
                                 "latency_ms", "bytes_up", "bytes_down", "tools_examined"]
        return self.records.groupby("scheme", sort=False)[cols].mean()


def load_run(path: str | Path) -> Run:
    """Read a run directory written by ``tooldns run`` (or one sweep point)."""
    path = Path(path)
    if not (path / "summary.json").exists():
        raise FileNotFoundError(f"{path}: no summary.json (not a finished run)")
    records = pd.read_parquet(path / "results.parquet")
    nodes = pd.read_csv(path / "nodes.csv") if (path / "nodes.csv").exists() else pd.DataFrame()
    summary = json.loads((path / "summary.json").read_text(encoding="utf-8"))
    scenario = yaml.safe_load((path / "scenario.yaml").read_text(encoding="utf-8"))
    return Run(path, records, nodes, summary, scenario)


def load_runs(paths: Iterable[str | Path]) -> pd.DataFrame:
    """Per-query records of several runs in one frame, with a ``run`` column."""
    frames = []
    for p in paths:
        run = load_run(p)
        frames.append(run.records.assign(run=run.path.name))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
