"""Load run, sweep and evaluation outputs back for study with pandas.

    from analysis.results import load_run, load_runs, load_sweep, per_phase
    run = load_run("results/quickstart")
    run.records.groupby("scheme").latency_ms.describe()
    run.by_scheme()                                # summary.json's metrics, unrounded
    per_phase(run.records)                         # phased workloads: how caches warm up
    allruns = load_runs(["results/quickstart", "results/cache-warmth"])
    sweep = load_sweep("results/sweep-branching-depth")   # sweep.csv + sweep.json

    python3 -m analysis.results DIR                # a per-scheme table of a run/sweep/eval
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pandas as pd
import yaml

from analysis.metrics import PHASE, SCHEME_TABLE, SWEEP_SHOWN, grouped
from analysis.titles import run_title

Kind = Literal["run", "sweep", "eval"]


@dataclass
class Run:
    path: Path
    records: pd.DataFrame  # one row per query and scheme
    nodes: pd.DataFrame  # per-node load
    summary: dict
    scenario: dict  # the resolved scenario as saved
    complete: bool = True  # False: an interrupted run (partial.json, finished schemes only)

    def by_scheme(self, *keys: str) -> pd.DataFrame:
        """Per scheme, the metrics of ``keys`` (``analysis.metrics`` keys; default: the
        comparison table, ``SCHEME_TABLE``) from the records, unrounded: ``mean_latency_ms``,
        ``median_latency_ms``, ``answered_without_upstream`` ... as in ``summary.json``."""
        tools = int((self.summary.get("namespace_stats") or {}).get("tools") or 0)
        return grouped(self.records, ["scheme"], keys or SCHEME_TABLE, tools)

    @property
    def title(self) -> str:
        """``scenario (engine, seed N)``: what plots and reports are headed with."""
        return run_title(self.summary)


@dataclass
class Sweep:
    path: Path
    table: pd.DataFrame  # sweep.csv: one row per (point, scheme)
    grid: dict[str, list]  # dotted field -> values, in file order
    meta: dict  # sweep.json (scenario, seed, grid, points, ran/skipped/failed, provenance)
    scenario: dict  # the base scenario as saved

    @property
    def axes(self) -> list[str]:
        return list(self.grid)

    def point(self, point_id: str) -> Run:
        """One point's run folder (``points/<id>/``)."""
        return load_run(self.path / "points" / point_id)


@dataclass
class Eval:
    path: Path
    per_query: pd.DataFrame  # one row per (method, query)
    summary: pd.DataFrame  # summary.csv: one row per method
    meta: dict  # summary.json


def kind_of(path: str | Path) -> Kind | None:
    """Which outputs a folder holds: a run (``tooldns run``, or one sweep point), a sweep
    (``tooldns sweep``) or a retrieval evaluation (``tooldns eval``); None if none."""
    path = Path(path)
    if (path / "sweep.csv").exists() or (path / "sweep.json").exists():
        return "sweep"
    if (path / "per_query.csv").exists():
        return "eval"
    if (path / "summary.json").exists() or (path / "partial.json").exists():
        return "run"
    return None


def load_run(path: str | Path, partial: bool = False) -> Run:
    """Read a run directory written by ``tooldns run`` (or one sweep point). With
    ``partial``, an interrupted run's ``partial.json`` stands in for ``summary.json``."""
    path = Path(path)
    summary_path, complete = path / "summary.json", True
    if not summary_path.exists() and partial and (path / "partial.json").exists():
        summary_path, complete = path / "partial.json", False
    if not summary_path.exists():
        raise FileNotFoundError(f"{path}: no summary.json (not a finished run)")
    records = pd.read_parquet(path / "results.parquet")
    nodes = pd.read_csv(path / "nodes.csv") if (path / "nodes.csv").exists() else pd.DataFrame()
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    scenario = yaml.safe_load((path / "scenario.yaml").read_text(encoding="utf-8"))
    return Run(path, records, nodes, summary, scenario, complete)


def load_runs(paths: Iterable[str | Path]) -> pd.DataFrame:
    """Per-query records of several runs in one frame, with a ``run`` column."""
    frames = []
    for p in paths:
        run = load_run(p)
        frames.append(run.records.assign(run=run.path.name))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def load_sweep(path: str | Path) -> Sweep:
    """Read a sweep folder written by ``tooldns sweep`` (``sweep.csv``, ``sweep.json``)."""
    path = Path(path)
    if not (path / "sweep.csv").exists():
        raise FileNotFoundError(f"{path}: no sweep.csv (not a finished sweep)")
    table = pd.read_csv(path / "sweep.csv")
    meta = (json.loads((path / "sweep.json").read_text(encoding="utf-8"))
            if (path / "sweep.json").exists() else {})
    scenario = (yaml.safe_load((path / "scenario.yaml").read_text(encoding="utf-8"))
                if (path / "scenario.yaml").exists() else {})
    grid = meta.get("grid") or (scenario.get("sweep") or {}).get("grid") or {}
    return Sweep(path, table, dict(grid), meta, scenario)


def load_eval(path: str | Path) -> Eval:
    """Read an evaluation folder written by ``tooldns eval``."""
    path = Path(path)
    if not (path / "per_query.csv").exists():
        raise FileNotFoundError(f"{path}: no per_query.csv (not an evaluation)")
    per_query = pd.read_csv(path / "per_query.csv")
    summary = (pd.read_csv(path / "summary.csv") if (path / "summary.csv").exists()
               else pd.DataFrame())
    meta = (json.loads((path / "summary.json").read_text(encoding="utf-8"))
            if (path / "summary.json").exists() else {})
    return Eval(path, per_query, summary, meta)


def per_phase(records: pd.DataFrame) -> pd.DataFrame:
    """One row per (scheme, phase) of a run's records: what a repeated workload changes
    (``analysis.metrics.PHASE``: share answered without upstream queries, mean and median
    latency of the successes, upstream queries, ...), unrounded; ``summary.json``
    "phases" holds the same figures rounded."""
    if records.empty:
        return pd.DataFrame()
    return grouped(records, ["scheme", "phase"], PHASE)


def phases(records: pd.DataFrame) -> int:
    """Number of workload phases in a run's records."""
    return int(records["phase"].nunique()) if "phase" in records and len(records) else 0


def scheme_table(summary: dict, columns: Iterable[str] | None = None) -> pd.DataFrame:
    """``summary.json`` → ``schemes`` as a frame (one row per scheme)."""
    df = pd.DataFrame.from_dict(summary.get("schemes", {}), orient="index")
    df.index.name = "scheme"
    return df[[c for c in columns if c in df.columns]] if columns is not None else df


def fault_rows(faults: dict) -> dict[str, dict[str, Any]]:
    """``summary["faults"]`` flattened to one dict per scheme (FAULT_TABLE keys)."""
    rows = {}
    for scheme, e in faults.get("schemes", {}).items():
        extra = e.get("extra_latency_during_faults_ms") or {}
        ok_after = [r.get("queries_ok_after_s") for r in e.get("recovery", [])]
        rows[scheme] = {
            **{k: e.get(k) for k in ("success", "success_during_faults",
                                     "success_outside_faults", "mean_retries",
                                     "stale_answers")},
            "baseline_success": (e.get("baseline") or {}).get("success"),
            "extra_mean_ms": extra.get("mean"), "extra_p95_ms": extra.get("p95"),
            "recovered_after_s": max((x for x in ok_after if x is not None), default=None),
        }
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python3 -m analysis.results",
        description="Print a per-scheme summary of a run folder (per phase too when the "
                    "workload has phases), a sweep folder (one row per point and scheme) or "
                    "an evaluation folder (one row per method).")
    p.add_argument("dir", metavar="DIR", type=Path, help="output folder of tooldns run/sweep/eval")
    args = p.parse_args(argv)
    kind = kind_of(args.dir)
    with pd.option_context("display.width", 200, "display.max_columns", 40,
                           "display.max_rows", 500, "display.float_format", "{:.4g}".format):
        if kind == "run":
            run = load_run(args.dir, partial=True)
            print(f"{run.title}{'' if run.complete else ' (interrupted: finished schemes)'}")
            print(run.by_scheme())
            if phases(run.records) > 1:
                print("\nper phase")
                print(per_phase(run.records).drop(columns="start_s"))
        elif kind == "sweep":
            sweep = load_sweep(args.dir)
            print(f"sweep {sweep.meta.get('scenario', args.dir.name)} over "
                  f"{', '.join(sweep.axes) or '?'}")
            cols = ["point", *sweep.axes, "scheme", *SWEEP_SHOWN]
            print(sweep.table[[c for c in cols if c in sweep.table]].to_string(index=False))
        elif kind == "eval":
            ev = load_eval(args.dir)
            print(f"evaluation {ev.meta.get('name', args.dir.name)}: "
                  f"{ev.meta.get('queries_evaluated', '?')} queries, "
                  f"{ev.meta.get('tools', '?')} tools")
            print(ev.summary.set_index("method").to_string())
        else:
            print(f"{args.dir}: not a run, sweep or evaluation folder (no summary.json, "
                  f"sweep.csv or per_query.csv)", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    from analysis.pipes import guarded

    raise SystemExit(guarded(main))
