"""The console tables of ``tooldns run`` (rich): the comparison per scheme, then what the
scenario exists to show when the headline hides it: per-phase change (phased workloads;
needs the records), rogue tools returned per trust policy, success under faults, and a
packet capture against the engine's accounting. Labels and formats are
``analysis.metrics``'s.

Only the standard library and analysis.metrics are imported at module level; rich and
pandas where they are used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from analysis.metrics import (
    FAULT_TABLE,
    NOTE,
    PHASE_TABLE,
    SCHEME_TABLE,
    TRUST_TABLE,
    format_value,
    metrics,
)

if TYPE_CHECKING:
    import pandas as pd
    from rich.console import Console


def print_summary(summary: dict, console: Console, records: pd.DataFrame | None = None
                  ) -> None:
    """The comparison table per scheme; then, where a scenario's point lives elsewhere,
    the per-phase change (``records`` with more than one phase), the trust counts
    (``summary["trust"]``) and success under faults (``summary["faults"]``)."""
    from rich.table import Table

    stats = summary.get("namespace_stats", {})
    title = (f"{summary['scenario']} on {summary['engine']} (seed {summary['seed']}): "
             f"{stats.get('tools', '?')} tools, {stats.get('zones', '?')} zones")
    table = Table(title=title)
    columns = metrics(SCHEME_TABLE)
    table.add_column("scheme", justify="left")
    for m in columns:
        table.add_column(m.label, justify="right")
    for scheme, s in summary["schemes"].items():
        table.add_row(scheme, *(format_value(m.fmt, s.get(m.key)) for m in columns))
    console.print(table)
    console.print(NOTE, style="dim")
    if records is not None:
        from analysis.results import phases

        if phases(records) > 1:
            print_phases(records, console)
    if "trust" in summary:
        print_trust(summary["trust"], console)
    if "faults" in summary:
        print_faults(summary["faults"], console)


def print_phases(records: pd.DataFrame, console: Console) -> None:
    """Per scheme, each metric phase by phase (``a → b → c``)."""
    from rich.table import Table

    from analysis.results import per_phase

    table = per_phase(records)
    ids = list(dict.fromkeys(table.index.get_level_values("phase")))
    # success only when it changes from phase to phase (faults, expiring caches ...)
    varies = table.groupby(level="scheme", sort=False).success.nunique().gt(1).any()
    keys = ("success",) * bool(varies) + ("mean_round_trips", "median_latency_ms",
                                          "cache_hit_queries")
    shown = [m for m in metrics(PHASE_TABLE) if m.key in keys]
    out = Table(title=f"per phase ({' → '.join(f'phase {p}' for p in ids)})")
    out.add_column("scheme")
    for m in shown:
        out.add_column(m.label, justify="right")
    for scheme in dict.fromkeys(table.index.get_level_values("scheme")):
        rows = table.loc[scheme]
        out.add_row(str(scheme), *(" → ".join(format_value(m.fmt, rows[m.key].get(p))
                                              for p in ids) for m in shown))
    console.print(out)


def print_trust(trust: dict, console: Console) -> None:
    from rich.table import Table

    out = Table(title=f"trust: {trust.get('rogue_tools', '?')} rogue look-alike tools in "
                      f"the namespace")
    out.add_column("scheme")
    columns = metrics(TRUST_TABLE)
    for m in columns:
        out.add_column(m.label, justify="right")
    for scheme, s in trust.get("schemes", {}).items():
        out.add_row(scheme, *(format_value(m.fmt, s.get(m.key)) for m in columns))
    console.print(out)
    console.print("rogue returned = rogue tools among all answers; costs against the open "
                  "policy (recall lost, extra median latency)", style="dim")


def print_faults(faults: dict, console: Console) -> None:
    from rich.table import Table

    from analysis.results import fault_rows

    out = Table(title="faults: success and cost")
    out.add_column("scheme")
    columns = metrics(FAULT_TABLE)
    for m in columns:
        out.add_column(m.label, justify="right")
    for scheme, row in fault_rows(faults).items():
        out.add_row(scheme, *(format_value(m.fmt, row.get(m.key)) for m in columns))
    console.print(out)


def print_capture(report: dict, console: Console) -> None:
    """Capture vs the engine's own accounting, per scheme."""
    from rich.table import Table

    table = Table(title=f"packet capture ({report['tool']}, {report['packets']} packets in "
                        f"{report['pcap']}) vs accounting")
    for col in ("scheme", "queries exact", "bytes acct", "bytes captured", "Δ bytes",
                "packets acct", "packets captured", "Δ packets", "unattributed"):
        table.add_column(col, justify="left" if col == "scheme" else "right")
    for scheme, s in report["schemes"].items():
        table.add_row(scheme, f"{s['queries_exact']}/{s['queries']}", str(s["accounted_bytes"]),
                      str(s["captured_bytes"]), format_value("{:+.2f}%", s["bytes_diff_pct"]),
                      str(s["accounted_packets"]), str(s["captured_packets"]),
                      format_value("{:+.2f}%", s["packets_diff_pct"]),
                      str(s["unattributed_packets"]))
    console.print(table)
