"""The summary of ``tooldns run`` and ``tooldns sweep`` on stdout: the comparison per
scheme, then what the scenario exists to show when the headline hides it: per-phase change
(phased workloads; needs the records), rogue tools returned per trust policy, success under
faults, and a packet capture against the engine's accounting. Each is a
:class:`analysis.tables.Grid` of cells formatted as ``analysis.metrics`` says, printed by rich
to fit the terminal, or as markdown; :func:`summary_text` gives the machine formats (csv,
json) of the headline metrics.

Only the standard library and analysis.metrics/tables are imported at module level; rich
and pandas where they are used.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from analysis.metrics import (
    FAULT_TABLE,
    NOTE,
    PHASE_CHANGE,
    PHASE_TABLE,
    SCHEME_TABLE,
    SWEEP_SHOWN,
    TRUST_TABLE,
    format_value,
    metrics,
)
from analysis.tables import Grid, markdown, print_grid

if TYPE_CHECKING:
    import pandas as pd
    from rich.console import Console

#: the values of ``--format``: rich tables, or the summary as csv, json or markdown
FORMATS = ("table", "csv", "json", "markdown")


def scheme_grid(summary: dict, conditions: Sequence[str] = ()) -> Grid:
    """The comparison table per scheme (``summary.json`` "schemes"); its footer the metric
    notes and ``conditions`` (:func:`analysis.conditions.conditions`: the settings that
    decide the comparison)."""
    stats = summary.get("namespace_stats", {})
    title = (f"{summary['scenario']} on {summary['engine']} (seed {summary['seed']}): "
             f"{stats.get('tools', '?')} tools, {stats.get('zones', '?')} zones")
    columns = metrics(SCHEME_TABLE)
    rows = [[str(scheme), *(format_value(m.fmt, s.get(m.key)) for m in columns)]
            for scheme, s in summary["schemes"].items()]
    return Grid(title, ["scheme", *(m.label for m in columns)], rows,
                note="\n".join((NOTE, *conditions)))


def summary_grids(summary: dict, records: pd.DataFrame | None = None,
                  conditions: Sequence[str] = ()) -> list[Grid]:
    """The comparison table per scheme; then, where a scenario's point lives elsewhere,
    the per-phase change (``records`` with more than one phase), the trust counts
    (``summary["trust"]``) and success under faults (``summary["faults"]``)."""
    grids = [scheme_grid(summary, conditions)]
    if records is not None:
        from analysis.results import phases

        if phases(records) > 1:
            grids.append(phase_grid(records))
    if "trust" in summary:
        grids.append(trust_grid(summary["trust"]))
    if "faults" in summary:
        grids.append(fault_grid(summary["faults"]))
    return grids


def print_summary(summary: dict, console: Console, records: pd.DataFrame | None = None,
                  conditions: Sequence[str] = ()) -> None:
    """:func:`summary_grids` as rich tables that fit ``console``."""
    for grid in summary_grids(summary, records, conditions):
        print_grid(grid, console)


def summary_text(summary: dict, fmt: str, records: pd.DataFrame | None = None,
                 conditions: Sequence[str] = ()) -> str:
    """The summary as ``fmt`` text: ``markdown`` every table of :func:`summary_grids`;
    ``csv`` one row per scheme with every metric of ``summary.json`` "schemes" (raw values,
    empty when missing); ``json`` those metrics per scheme under the run's scenario, engine
    and seed."""
    if fmt == "markdown":
        return "\n".join(markdown(g) for g in summary_grids(summary, records, conditions))
    schemes: dict[str, dict[str, Any]] = summary["schemes"]
    if fmt == "json":
        head = {k: summary.get(k) for k in ("scenario", "engine", "seed")}
        return json.dumps({**head, "schemes": schemes}, indent=2) + "\n"
    if fmt == "csv":
        keys = list(dict.fromkeys(k for s in schemes.values() for k in s))
        return csv_text(["scheme", *keys], [[name, *(s.get(k) for k in keys)]
                                            for name, s in schemes.items()])
    raise ValueError(f"unknown format {fmt!r}: one of {', '.join(FORMATS)}")


def csv_text(header: list[str], rows: list[list[Any]]) -> str:
    """CSV with ``None`` as an empty field and floats as Python writes them (exact)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows([["" if v is None else v for v in row] for row in rows])
    return buf.getvalue()


def phase_grid(records: pd.DataFrame) -> Grid:
    """Per scheme, each metric phase by phase (``a → b → c``)."""
    from analysis.results import per_phase

    table = per_phase(records)
    ids = list(dict.fromkeys(table.index.get_level_values("phase")))
    # success only when it changes from phase to phase (faults, expiring caches ...)
    varies = table.groupby(level="scheme", sort=False).success.nunique().gt(1).any()
    keys = ("success",) * bool(varies) + PHASE_CHANGE
    shown = [m for m in metrics(PHASE_TABLE) if m.key in keys]
    rows = []
    for scheme in dict.fromkeys(table.index.get_level_values("scheme")):
        per = table.loc[scheme]
        rows.append([str(scheme), *(" → ".join(format_value(m.fmt, per[m.key].get(p))
                                               for p in ids) for m in shown)])
    return Grid(f"per phase ({' → '.join(f'phase {p}' for p in ids)})",
                ["scheme", *(m.label for m in shown)], rows)


def trust_grid(trust: dict) -> Grid:
    columns = metrics(TRUST_TABLE)
    rows = [[str(scheme), *(format_value(m.fmt, s.get(m.key)) for m in columns)]
            for scheme, s in trust.get("schemes", {}).items()]
    return Grid(f"trust: {trust.get('rogue_tools', '?')} rogue look-alike tools in the "
                f"namespace", ["scheme", *(m.label for m in columns)], rows,
                note="rogue returned = rogue tools among all answers; costs against the "
                     "open policy (recall lost, extra median latency)")


def fault_grid(faults: dict) -> Grid:
    from analysis.results import fault_rows

    columns = metrics(FAULT_TABLE)
    rows = [[str(scheme), *(format_value(m.fmt, row.get(m.key)) for m in columns)]
            for scheme, row in fault_rows(faults).items()]
    return Grid("faults: success and cost", ["scheme", *(m.label for m in columns)], rows)


def capture_grid(report: dict) -> Grid:
    """Capture vs the engine's own accounting, per scheme."""
    rows = [[str(scheme), f"{s['queries_exact']}/{s['queries']}", str(s["accounted_bytes"]),
             str(s["captured_bytes"]), format_value("{:+.2f}%", s["bytes_diff_pct"]),
             str(s["accounted_packets"]), str(s["captured_packets"]),
             format_value("{:+.2f}%", s["packets_diff_pct"]), str(s["unattributed_packets"])]
            for scheme, s in report["schemes"].items()]
    dropped = report.get("dropped_by_kernel")
    lost = f"; {dropped} dropped by the kernel before the capture read them" if dropped else ""
    return Grid(f"packet capture ({report['tool']}, {report['packets']} packets in "
                f"{report['pcap']}{lost}) vs accounting",
                ["scheme", "queries exact", "bytes acct", "bytes captured", "Δ bytes",
                 "packets acct", "packets captured", "Δ packets", "unattributed"], rows)


#: metrics a sweep's console table shows: those the grid changes most first
SWEEP_COLUMNS = 6


def sweep_grid(table: pd.DataFrame, axes: list[str], title: str) -> Grid:
    """One row per (point, scheme) of a sweep: its grid values and the metrics the grid
    changes most (:func:`analysis.pivot.by_spread` over the comparison metrics; the fixed
    ``SWEEP_SHOWN`` when nothing varies); every metric is in sweep.csv."""
    from analysis.pivot import by_spread

    varying = by_spread(table, SCHEME_TABLE)[:SWEEP_COLUMNS] if len(table) else []
    shown = (metrics(varying) if varying
             else [m for m in metrics(SWEEP_SHOWN) if m.key in table.columns])
    keys = ["point", *axes, "scheme"]
    rows = [[str(row.get(k, "")) for k in keys] + [format_value(m.fmt, row[m.key])
                                                   for m in shown]
            for row in table.to_dict("records")]
    note = ("metrics ranked by how much the grid changes them (range / largest value, "
            "within a scheme); every metric is in sweep.csv") if varying else ""
    return Grid(title, [*keys, *(m.label for m in shown)], rows, keys=len(keys), note=note)


def sweep_text(table: pd.DataFrame, axes: list[str], title: str, fmt: str) -> str:
    """A sweep's table as ``fmt`` text: ``csv`` and ``json`` every column of ``sweep.csv``
    (raw values), ``markdown`` the shown metrics formatted."""
    if fmt == "markdown":
        return markdown(sweep_grid(table, axes, title))
    if fmt == "csv":
        return table.to_csv(index=False)
    if fmt == "json":
        return table.to_json(orient="records", indent=2) + "\n"
    raise ValueError(f"unknown format {fmt!r}: one of {', '.join(FORMATS)}")


def interval_grids(table: pd.DataFrame, axes: list[str], title: str,
                   conditions: Sequence[str] = ()) -> list[Grid]:
    """Replications (a ``seed`` axis): per scheme (and per value of the other axes) each
    comparison metric as mean ± 95 % CI over the seeds; then each scheme's paired
    difference from the first scheme, seed by seed, ``*`` where its interval excludes 0."""
    from analysis.intervals import (
        METHOD,
        SEED,
        cell,
        interval_table,
        numeric_metrics,
        paired_table,
    )

    shown = metrics(numeric_metrics(table, SCHEME_TABLE))
    rest = [a for a in axes if a != SEED]
    means = interval_table(table, axes, SCHEME_TABLE)
    seeds = table[SEED].nunique() if SEED in table else len(table)
    rows = [[*(str(r[a]) for a in rest), str(r["scheme"]), str(r["seeds"]),
             *(cell(m.fmt, r[m.key], r[f"{m.key}_half"]) for m in shown)]
            for r in means.to_dict("records")]
    grids = [Grid(f"{title}: mean ± 95 % CI over {seeds} seeds",
                  [*rest, "scheme", "seeds", *(m.label for m in shown)], rows,
                  keys=len(rest) + 1, note="\n".join((f"{METHOD}; {NOTE}", *conditions)))]
    schemes = list(dict.fromkeys(table.scheme))
    if len(schemes) < 2:
        return grids
    paired = paired_table(table, axes, SCHEME_TABLE, schemes[0])
    shown = [m for m in shown if m.key != "queries"]  # the same workload: always 0
    rows = [[*(str(r[a]) for a in rest), str(r["scheme"]), str(r["pairs"]),
             *(_difference(m.fmt, r[m.key], r[f"{m.key}_half"]) for m in shown)]
            for r in paired.to_dict("records")]
    grids.append(Grid(f"paired difference from {schemes[0]} (same seeds): scheme − "
                      f"{schemes[0]}, mean ± 95 % CI",
                      [*rest, "scheme", "pairs", *(m.label for m in shown)], rows,
                      keys=len(rest) + 1,
                      note="* the interval excludes 0: a difference at 95 % confidence; "
                           "without * the data do not tell the schemes apart"))
    return grids


def _difference(fmt: str, mean: float, half: float) -> str:
    """A paired difference: signed, ± its half-width, ``*`` when the interval excludes 0."""
    from analysis.intervals import Interval, cell

    text = cell(fmt, mean, half)
    if text != "-" and not text.startswith("-") and mean != 0:
        text = "+" + text
    return text + (" *" if Interval(mean, half, 2).excludes_zero else "")


def interval_text(table: pd.DataFrame, axes: list[str], title: str, fmt: str,
                  conditions: Sequence[str] = ()) -> str:
    """Replications as ``fmt`` text: ``csv`` the intervals table (mean, lo, hi, half per
    metric), ``json`` the ``intervals`` block of ``sweep.json``, ``markdown`` the grids."""
    from analysis.intervals import interval_block, interval_table

    if fmt == "markdown":
        grids = interval_grids(table, axes, title, conditions)
        return "\n".join(markdown(g) for g in grids) + "\n"
    if fmt == "csv":
        return interval_table(table, axes, SCHEME_TABLE).to_csv(index=False)
    if fmt == "json":
        return json.dumps(interval_block(table, axes, SCHEME_TABLE), indent=2) + "\n"
    raise ValueError(f"unknown format {fmt!r}: one of {', '.join(FORMATS)}")


def eval_grids(summary: pd.DataFrame, paired: pd.DataFrame, k: int, title: str
               ) -> list[Grid]:
    """``tooldns eval``'s tables: per method the quality (recall@K ± its 95 % interval over
    the queries) and cost; then each method's paired difference from the first method,
    query by query, ``*`` where the interval excludes 0."""
    def pct(v: float, half: float | None = None) -> str:
        if v != v:
            return "-"
        return f"{100 * v:.1f}" + ("" if half is None or half != half
                                   else f" ± {100 * half:.1f}")

    rows = [[str(r["method"]), str(int(r["queries"])), pct(r["hit1_tool"]),
             pct(r["hitk_tool"]), pct(r["recall_k"], r.get("recall_k_half")),
             "-" if r["rr"] != r["rr"] else f"{r['rr']:.3f}", f"{r['examined']:.0f}",
             f"{100 * r['examined_frac']:.2f}", f"{r['tokens']:.0f}", f"{r['time_ms']:.2f}"]
            for r in summary.to_dict("records")]
    grids = [Grid(title, ["method", "queries", "hit@1 tool %", f"hit@{k} tool %",
                          f"recall@{k} % (95 % CI)", "MRR", "C(q)", "% pool", "tokens", "ms"],
                  rows, note="percentages over the queries; ± the half-width of a 95 % "
                             "interval over them (Student t); C(q) = items scored; ms = "
                             "wall-clock per query on this machine")]
    if len(paired):
        def diff(r: dict, key: str) -> str:
            mean, lo, hi = r[key], r[f"{key}_lo"], r[f"{key}_hi"]
            if mean != mean:
                return "-"
            star = " *" if r[f"{key}_excludes_zero"] else ""
            return f"{100 * mean:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]{star}"

        first = paired["baseline"].iloc[0]
        headline: list[Grid] = []
        for base, group in paired.groupby("baseline", sort=False):
            rows = [[str(r["method"]), diff(r, "recall_k"), diff(r, "hit1_tool"),
                     f"{100 * r['examined_frac']:.2f}", str(r["queries"])]
                    for r in group.to_dict("records")]
            title = (f"each method minus {first}, query by query (points, 95 % CI)"
                     if base == first else "learned routing minus plain routing (the same "
                     "walk on the tree without the query log), query by query")
            headline.append(Grid(title, ["method", f"recall@{k}", "hit@1 tool",
                                         "at % of pool", "queries"], rows,
                                 note="* the interval excludes 0: a difference at 95 % "
                                      "confidence"))
        grids = [*headline, *grids]  # the answer first, the full table after it
    return grids
