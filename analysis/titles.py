"""Titles that head figures and reports: ``scenario (engine, seed N)`` for a run, and the
sweep and evaluation counterparts, from a summary, sweep meta, eval meta or records."""

from __future__ import annotations

from typing import Any

import pandas as pd


def run_title(summary: dict[str, Any]) -> str:
    """``scenario (engine, seed N)`` from a run's ``summary.json``."""
    return (f"{summary.get('scenario', '?')} ({summary.get('engine', '?')}, "
            f"seed {summary.get('seed', '?')})")


def records_title(df: pd.DataFrame) -> str:
    """``scenario (engine, seed N)`` from a run's records ('' if they do not say)."""
    if df.empty or not {"scenario", "engine", "seed"} <= set(df.columns):
        return ""
    first = df.iloc[0]
    return f"{first.scenario} ({first.engine}, seed {first.seed})"


def sweep_title(meta: dict[str, Any]) -> str:
    """``sweep scenario (seed N)`` from a sweep's ``sweep.json``."""
    return f"sweep {meta.get('scenario', '?')} (seed {meta.get('seed', '?')})"


def eval_title(meta: dict[str, Any]) -> str:
    """``name (seed N)`` from an evaluation's ``summary.json``."""
    return f"{meta.get('name', '?')} (seed {(meta.get('spec') or {}).get('seed', '?')})"
