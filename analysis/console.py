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


def scheme_grid(summary: dict) -> Grid:
    """The comparison table per scheme (``summary.json`` "schemes")."""
    stats = summary.get("namespace_stats", {})
    title = (f"{summary['scenario']} on {summary['engine']} (seed {summary['seed']}): "
             f"{stats.get('tools', '?')} tools, {stats.get('zones', '?')} zones")
    columns = metrics(SCHEME_TABLE)
    rows = [[str(scheme), *(format_value(m.fmt, s.get(m.key)) for m in columns)]
            for scheme, s in summary["schemes"].items()]
    return Grid(title, ["scheme", *(m.label for m in columns)], rows, note=NOTE)


def summary_grids(summary: dict, records: pd.DataFrame | None = None) -> list[Grid]:
    """The comparison table per scheme; then, where a scenario's point lives elsewhere,
    the per-phase change (``records`` with more than one phase), the trust counts
    (``summary["trust"]``) and success under faults (``summary["faults"]``)."""
    grids = [scheme_grid(summary)]
    if records is not None:
        from analysis.results import phases

        if phases(records) > 1:
            grids.append(phase_grid(records))
    if "trust" in summary:
        grids.append(trust_grid(summary["trust"]))
    if "faults" in summary:
        grids.append(fault_grid(summary["faults"]))
    return grids


def print_summary(summary: dict, console: Console, records: pd.DataFrame | None = None
                  ) -> None:
    """:func:`summary_grids` as rich tables that fit ``console``."""
    for grid in summary_grids(summary, records):
        print_grid(grid, console)


def summary_text(summary: dict, fmt: str, records: pd.DataFrame | None = None) -> str:
    """The summary as ``fmt`` text: ``markdown`` every table of :func:`summary_grids`;
    ``csv`` one row per scheme with every metric of ``summary.json`` "schemes" (raw values,
    empty when missing); ``json`` those metrics per scheme under the run's scenario, engine
    and seed."""
    if fmt == "markdown":
        return "\n".join(markdown(g) for g in summary_grids(summary, records))
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
    return Grid(f"packet capture ({report['tool']}, {report['packets']} packets in "
                f"{report['pcap']}) vs accounting",
                ["scheme", "queries exact", "bytes acct", "bytes captured", "Δ bytes",
                 "packets acct", "packets captured", "Δ packets", "unattributed"], rows)


def sweep_grid(table: pd.DataFrame, axes: list[str], title: str) -> Grid:
    """One row per (point, scheme) of a sweep: its grid values and the shown metrics."""
    shown = [m for m in metrics(SWEEP_SHOWN) if m.key in table.columns]
    keys = ["point", *axes, "scheme"]
    rows = [[str(row.get(k, "")) for k in keys] + [format_value(m.fmt, row[m.key])
                                                   for m in shown]
            for row in table.to_dict("records")]
    return Grid(title, [*keys, *(m.label for m in shown)], rows, keys=len(keys))


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
