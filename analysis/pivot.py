"""Sweep tables a reader can scan: readable point names (``b=8,d=3`` from the grid values,
not the folders' hashes), one pivot per metric (grid axes x schemes) and the splitting of a
table too wide for a page into column chunks that each fit.

    from analysis.results import load_sweep
    from analysis.pivot import metric_pivot, point_names
    sw = load_sweep("results/sweep-branching-depth")
    metric_pivot(sw.table, "mean_round_trips", list(sw.grid))   # scheme, b | d=1 d=2 d=3
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from analysis.metrics import METRICS, format_value

if TYPE_CHECKING:
    import pandas as pd

#: characters of table text that fit a 1,400 px page (1,200 px of content at the report's
#: table font: about 8 px a character, with cell padding counted per column)
PAGE_CHARS = 120


def short(axis: str) -> str:
    """``namespace.branching`` -> ``branching``."""
    return axis.rsplit(".", 1)[-1]


def axis_names(axes: Sequence[str]) -> dict[str, str]:
    """A short name per grid axis: its first letter when those are unique across the axes
    (``b``, ``d``), else its last dotted part when those are, else the axis itself."""
    for name in (lambda a: short(a)[:1], short, str):
        names = {a: name(a) for a in axes}
        if len(set(names.values())) == len(names) and all(names.values()):
            return names
    return {a: a for a in axes}


def value_text(value: object) -> str:
    """A grid value as in a point name: ``8`` not ``8.0``."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return f"{value:g}" if isinstance(value, float) else str(value)


def point_names(table: pd.DataFrame, axes: Sequence[str]) -> pd.Series:
    """Per row of ``table``, its point's name from the grid values (``b=8,d=3``); the point
    id when the table has no axis column."""
    present = [a for a in axes if a in table.columns]
    if not present:
        return table["point"].astype(str)
    names = axis_names(present)
    return table[present].apply(
        lambda r: ",".join(f"{names[a]}={value_text(r[a])}" for a in present), axis=1)


def legend_of(axes: Sequence[str]) -> str:
    """What the short names stand for: ``b = namespace.branching, d = namespace.depth``."""
    return ", ".join(f"{n} = {a}" for a, n in axis_names(axes).items() if n != a)


def recorded(table: pd.DataFrame) -> list[str]:
    """The metrics of ``table`` (sweep.csv columns that are metric keys, numeric, varying
    per scheme), in column order; the query count is left out (the workload's size)."""
    import pandas as pd

    return [c for c in table.columns if c in METRICS and c != "queries"
            and pd.api.types.is_numeric_dtype(table[c])]


def spread(values: pd.Series) -> float:
    """How much a metric varies over a sweep: its range over the largest magnitude
    (0 when constant or missing), so shares, milliseconds and bytes compare."""
    v = values.dropna().astype(float)
    if v.empty:
        return 0.0
    scale = float(v.abs().max())
    return float(v.max() - v.min()) / scale if scale else 0.0


def by_spread(table: pd.DataFrame, keys: Sequence[str] | None = None) -> list[str]:
    """The recorded metrics (of ``keys``, default every recorded one) that vary across the
    sweep's rows, largest relative spread (:func:`spread`) first within each scheme's
    rows, i.e. what the grid changes, not how schemes differ; constant ones are left out."""
    shown = [k for k in recorded(table) if keys is None or k in keys]
    groups = [g for _, g in table.groupby("scheme", sort=False)] if "scheme" in table else [
        table]
    ranked = {k: max(spread(g[k]) for g in groups) for k in shown}
    return [k for k, v in sorted(ranked.items(), key=lambda kv: -kv[1]) if v > 0]


def metric_pivot(table: pd.DataFrame, metric: str, axes: Sequence[str]) -> pd.DataFrame:
    """The ``metric`` of every (scheme, point) as text: one row per scheme and value of the
    leading axes, one column per value of the last axis (``d=1 d=2 d=3``); with one axis,
    a row per scheme and a column per value. Repeated cells (same scheme and values) are
    averaged."""
    import pandas as pd

    present = [a for a in axes if a in table.columns]
    fmt = METRICS[metric].fmt
    if not present or table.empty:
        return pd.DataFrame()
    names = axis_names(present)
    across, down = present[-1], present[:-1]
    cells = table.pivot_table(index=["scheme", *down], columns=across, values=metric,
                              aggfunc="mean", sort=False, dropna=False)
    order = list(dict.fromkeys(table["scheme"]))  # schemes in sweep.csv order
    cells = cells.reindex(sorted(cells.index, key=lambda k: (
        order.index(k[0] if isinstance(k, tuple) else k),
        *(k[1:] if isinstance(k, tuple) else ()))))
    cells = cells[sorted(cells.columns)]
    out = cells.reset_index()
    out.columns = ["scheme", *(names[a] for a in down),
                   *(f"{names[across]}={value_text(v)}" for v in cells.columns)]
    for col in out.columns[1 + len(down):]:
        out[col] = out[col].map(lambda v: format_value(fmt, v))
    for a in down:
        out[names[a]] = out[names[a]].map(value_text)
    return out


def width(frame: pd.DataFrame, columns: Sequence[str]) -> int:
    """Estimated characters ``columns`` take on a page: per column its widest cell or the
    longest word of its header (headers wrap), plus 2 for the padding."""
    total = 0
    for c in columns:
        cells = frame[c].astype(str).str.len().max() if len(frame) else 0
        total += max(int(cells), max((len(w) for w in str(c).split()), default=0)) + 2
    return total


def split_columns(frame: pd.DataFrame, keys: int, chars: int = PAGE_CHARS
                  ) -> list[pd.DataFrame]:
    """``frame`` as one or more tables, each with the first ``keys`` columns and as many of
    the others as fit in ``chars`` characters (at least one)."""
    head, rest = list(frame.columns[:keys]), list(frame.columns[keys:])
    budget = chars - width(frame, head)
    chunks: list[list[str]] = []
    for c in rest:
        w = width(frame, [c])
        if chunks and width(frame, chunks[-1]) + w <= budget:
            chunks[-1].append(c)
        else:
            chunks.append([c])
    return [frame[head + chunk] for chunk in chunks] or [frame]
