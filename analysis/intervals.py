"""Replications and their intervals: each scheme's metrics over independent runs (one per
seed: ``seeds: N``, or a ``seed`` axis of a sweep grid) as mean ± a 95 % confidence
interval, and each scheme's paired difference from a baseline scheme.

The interval is Student's t over the per-seed values: ``mean ± t(0.975, n-1) · s / √n``
with ``s`` the sample standard deviation (``ddof=1``). A paired difference is the
difference of two schemes' figures within each seed (same namespace, workload and network
draws), then that t-interval over the seeds, so the shared randomness cancels. With one
seed there is no interval (``half`` is NaN).

Only pandas, numpy and scipy's t quantile are used; the functions take and return frames
so they serve the console, the report and a notebook alike.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

#: the grid axis that replicates a run (``seeds: N`` adds it; a sweep may name it)
SEED = "seed"
CONFIDENCE = 0.95
METHOD = "Student t over seeds, 95 %"


@dataclass(frozen=True)
class Interval:
    """A mean and its confidence interval over ``n`` values."""

    mean: float
    half: float  # half-width; NaN with fewer than two values
    n: int

    @property
    def lo(self) -> float:
        return self.mean - self.half

    @property
    def hi(self) -> float:
        return self.mean + self.half

    @property
    def excludes_zero(self) -> bool:
        """Whether the interval lies wholly on one side of zero (for a difference: real at
        this confidence)."""
        return not math.isnan(self.half) and (self.lo > 0 or self.hi < 0)


def t_quantile(n: int, confidence: float = CONFIDENCE) -> float:
    """The two-sided Student t quantile for ``n`` values (``n - 1`` degrees of freedom)."""
    from scipy.stats import t

    return float(t.ppf(0.5 + confidence / 2, n - 1))


def t_interval(values: Iterable[float], confidence: float = CONFIDENCE) -> Interval:
    """Mean ± t(confidence, n-1) · s / √n of the non-missing ``values``."""
    arr = np.asarray([v for v in values if v is not None], dtype=np.float64)
    arr = arr[~np.isnan(arr)]
    n = len(arr)
    if n == 0:
        return Interval(math.nan, math.nan, 0)
    mean = float(arr.mean())
    if n < 2:
        return Interval(mean, math.nan, n)
    half = t_quantile(n, confidence) * float(arr.std(ddof=1)) / math.sqrt(n)
    return Interval(mean, half, n)


def numeric_metrics(table: pd.DataFrame, keys: Sequence[str]) -> list[str]:
    """The ``keys`` that are numeric columns of ``table`` (a sweep table)."""
    return [k for k in keys if k in table.columns and pd.api.types.is_numeric_dtype(table[k])]


def interval_table(table: pd.DataFrame, axes: Sequence[str], keys: Sequence[str]
                   ) -> pd.DataFrame:
    """One row per (axes other than ``seed``, scheme) of a sweep table (one row per point
    and scheme): per metric of ``keys``, ``<key>`` (the mean over seeds), ``<key>_lo``,
    ``<key>_hi`` and ``<key>_half``; ``seeds`` the number of replications."""
    by = [a for a in axes if a != SEED] + ["scheme"]
    shown = numeric_metrics(table, keys)
    rows = []
    for name, g in table.groupby(by, sort=False):
        row = dict(zip(by, name if isinstance(name, tuple) else (name,), strict=True))
        row["seeds"] = int(g[SEED].nunique()) if SEED in g else len(g)
        for k in shown:
            iv = t_interval(g[k].tolist())
            row.update({k: iv.mean, f"{k}_lo": iv.lo, f"{k}_hi": iv.hi, f"{k}_half": iv.half})
        rows.append(row)
    return pd.DataFrame(rows)


def paired_table(table: pd.DataFrame, axes: Sequence[str], keys: Sequence[str],
                 baseline: str) -> pd.DataFrame:
    """Per (axes other than ``seed``, scheme other than ``baseline``): per metric, the mean
    paired difference ``scheme - baseline`` over the seeds both finished, with its interval
    (``<key>``, ``_lo``, ``_hi``, ``_half``) and ``pairs``, the seeds paired."""
    if SEED not in table.columns:
        raise ValueError(f"paired differences need a '{SEED}' column")
    rest = [a for a in axes if a != SEED]
    shown = numeric_metrics(table, keys)
    rows = []
    groups = table.groupby(rest, sort=False) if rest else [((), table)]
    for name, g in groups:
        where = dict(zip(rest, name if isinstance(name, tuple) else (name,), strict=True))
        base = g[g.scheme == baseline].set_index(SEED)
        if base.empty:
            continue
        for scheme in dict.fromkeys(g.scheme):
            if scheme == baseline:
                continue
            other = g[g.scheme == scheme].set_index(SEED)
            seeds = [s for s in other.index if s in base.index]
            row = {**where, "scheme": scheme, "baseline": baseline, "pairs": len(seeds)}
            for k in shown:
                diff = (other.loc[seeds, k] - base.loc[seeds, k]).tolist()
                iv = t_interval(diff)
                row.update({k: iv.mean, f"{k}_lo": iv.lo, f"{k}_hi": iv.hi,
                            f"{k}_half": iv.half})
            rows.append(row)
    return pd.DataFrame(rows)


def interval_block(table: pd.DataFrame, axes: Sequence[str], keys: Sequence[str]) -> dict:
    """``sweep.json``'s ``intervals`` block: the method, the seeds and, per row of
    :func:`interval_table` and :func:`paired_table` (baseline: the first scheme), each
    metric as ``{"mean", "lo", "hi"}`` (JSON: NaN as null)."""
    means = interval_table(table, axes, keys)
    schemes = list(dict.fromkeys(table.scheme)) if len(table) else []
    paired = (paired_table(table, axes, keys, schemes[0]) if len(schemes) > 1
              else pd.DataFrame())
    shown = numeric_metrics(table, keys)
    seeds = sorted({int(s) for s in table[SEED]}) if SEED in table else []

    def figures(row: dict) -> dict:
        return {k: {"mean": _json(row[k]), "lo": _json(row[f"{k}_lo"]),
                    "hi": _json(row[f"{k}_hi"])} for k in shown if k in row}

    rest = [a for a in axes if a != SEED]
    return {"method": METHOD, "seeds": seeds,
            "baseline": schemes[0] if schemes else None,
            "schemes": [{**{a: row[a] for a in rest}, "scheme": row["scheme"],
                         "seeds": row["seeds"], **figures(row)}
                        for row in means.to_dict("records")],
            "paired": [{**{a: row[a] for a in rest}, "scheme": row["scheme"],
                        "baseline": row["baseline"], "pairs": row["pairs"], **figures(row)}
                       for row in paired.to_dict("records")]}


def _json(v: float) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def cell(fmt: str, mean: float, half: float) -> str:
    """``mean ± half`` formatted as the metric's ``fmt`` (``-`` for a missing mean; the
    mean alone without an interval)."""
    from analysis.metrics import format_value

    shown = format_value(fmt, mean)
    if shown == "-" or half is None or math.isnan(half):
        return shown
    return f"{shown} ± {format_value(fmt, half).lstrip('+')}"
