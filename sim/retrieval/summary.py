"""An evaluation's summary: every metric's mean per method (or per method and category),
and the method table in markdown."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from sim.evalspec import variant

METRICS = ("hit1_cat", "hitk_cat", "hit1_tool", "hitk_tool", "recall_k", "rr", "examined",
           "examined_frac", "examined_frac_all", "tokens", "time_ms", "disc_acc")


#: the quality metrics given with a 95 % interval over the queries (``<metric>_half``)
INTERVALS = ("hit1_tool", "hitk_tool", "recall_k", "rr")


def summarise(df: pd.DataFrame, by: Sequence[str] = ("method",)) -> pd.DataFrame:
    """Mean of every metric per group (``rr`` mean = MRR), with the query count and, for
    the quality metrics, the half-width of their 95 % interval over the queries
    (:func:`analysis.intervals.t_interval`; NaN for a method that does not rank)."""
    from analysis.intervals import t_interval

    groups = df.groupby(list(by), sort=False)
    out = groups[list(METRICS)].mean()
    out.insert(0, "queries", groups.size())
    for key in INTERVALS:
        out[f"{key}_half"] = groups[key].agg(lambda v: t_interval(v.tolist()).half)
    return out.reset_index()


def paired_methods(df: pd.DataFrame, baseline: str | None = None) -> pd.DataFrame:
    """Each method's paired difference from ``baseline`` (default: the first method) over
    the queries both answered: per quality metric the mean difference and its 95 %
    interval (``<metric>``, ``<metric>_lo``, ``<metric>_hi``); ``*_excludes_zero`` says
    whether the data tell the two apart; ``examined_frac`` the method's mean share of the
    query's pool scored (what the difference is bought with). Then each walk that has a
    plain variant (``…@plain``) against it: learned minus plain routing."""
    methods = list(dict.fromkeys(df.method))
    if not methods:
        return pd.DataFrame()
    baseline = baseline or methods[0]
    rows = [_pair(df, method, baseline) for method in methods if method != baseline]
    rows += [_pair(df, learned, method) for method in methods
             for learned, plain in [variant(method)] if plain and learned in methods]
    return pd.DataFrame(rows)


def _pair(df: pd.DataFrame, method: str, baseline: str) -> dict:
    """``method`` minus ``baseline``, query by query (see :func:`paired_methods`)."""
    from analysis.intervals import t_interval

    base = df[df.method == baseline].set_index("query")
    mine = df[df.method == method].set_index("query")
    both = mine.index.intersection(base.index)
    row: dict = {"method": method, "baseline": baseline, "queries": len(both),
                 "examined_frac": float(mine.loc[both, "examined_frac"].mean())}
    for key in INTERVALS:
        iv = t_interval((mine.loc[both, key] - base.loc[both, key]).tolist())
        row.update({key: iv.mean, f"{key}_lo": iv.lo, f"{key}_hi": iv.hi,
                    f"{key}_excludes_zero": iv.excludes_zero})
    return row


def markdown_table(summary: pd.DataFrame, k: int) -> str:
    """The method table as GitHub markdown (percentages for rates; recall@K ± its 95 %
    interval over the queries)."""
    head = (f"| method | queries | hit@1 cat | hit@{k} cat | hit@1 tool | hit@{k} tool | "
            f"recall@{k} | MRR | C(q) | C(q) % of pool | C(q) % of all | tokens/query | "
            f"ms/query |")
    lines = [head, "|" + "---|" * 13]

    def pct(x: float) -> str:
        return "—" if x != x else f"{100 * x:.1f}"

    for _, r in summary.iterrows():
        lines.append(
            f"| {r['method']} | {int(r['queries'])} | {pct(r['hit1_cat'])} | "
            f"{pct(r['hitk_cat'])} | {pct(r['hit1_tool'])} | {pct(r['hitk_tool'])} | "
            f"{pct(r['recall_k'])}{_pm(r.get('recall_k_half'))} | "
            f"{'—' if r['rr'] != r['rr'] else f'{r.rr:.3f}'} | "
            f"{r['examined']:.0f} | {100 * r['examined_frac']:.2f} | "
            f"{100 * r['examined_frac_all']:.2f} | {r['tokens']:.0f} | "
            f"{r['time_ms']:.2f} |")
    return "\n".join(lines) + "\n"


def _pm(half: float | None) -> str:
    """`` ± h`` (points) for an interval's half-width; nothing without one."""
    return "" if half is None or half != half else f" ± {100 * half:.1f}"
