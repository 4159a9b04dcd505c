"""An evaluation's summary: every metric's mean per method (or per method and category),
and the method table in markdown."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

METRICS = ("hit1_cat", "hitk_cat", "hit1_tool", "hitk_tool", "recall_k", "rr", "examined",
           "examined_frac", "examined_frac_all", "tokens", "time_ms", "disc_acc")


def summarise(df: pd.DataFrame, by: Sequence[str] = ("method",)) -> pd.DataFrame:
    """Mean of every metric per group (``rr`` mean = MRR), with the query count."""
    out = df.groupby(list(by), sort=False)[list(METRICS)].mean()
    out.insert(0, "queries", df.groupby(list(by), sort=False).size())
    return out.reset_index()


def markdown_table(summary: pd.DataFrame, k: int) -> str:
    """The method table as GitHub markdown (percentages for rates)."""
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
            f"{pct(r['recall_k'])} | {'—' if r['rr'] != r['rr'] else f'{r.rr:.3f}'} | "
            f"{r['examined']:.0f} | {100 * r['examined_frac']:.2f} | "
            f"{100 * r['examined_frac_all']:.2f} | {r['tokens']:.0f} | "
            f"{r['time_ms']:.2f} |")
    return "\n".join(lines) + "\n"
