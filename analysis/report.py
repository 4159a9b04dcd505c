"""Comparison tables for the console (rich) from a run's summary."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

COLUMNS = (
    ("queries", "queries", "{}"),
    ("success", "success", "{:.1%}"),
    ("hit_at_1", "hit@1", "{:.1%}"),
    ("hit_at_k", "hit@K", "{:.1%}"),
    ("mean_round_trips", "RTTs", "{:.2f}"),
    ("median_latency_ms", "median ms", "{:.2f}"),
    ("p95_latency_ms", "p95 ms", "{:.2f}"),
    ("mean_bytes_up", "bytes up", "{:.0f}"),
    ("mean_bytes_down", "bytes down", "{:.0f}"),
    ("mean_packets", "packets", "{:.2f}"),
    ("mean_tools_examined", "C(q)", "{:.1f}"),
    ("cache_hit_queries", "cache-helped", "{:.1%}"),
)


def _fmt(fmt: str, value: object) -> str:
    return "-" if value is None else fmt.format(value)


def print_summary(summary: dict, console: Console) -> None:
    stats = summary.get("namespace_stats", {})
    title = (f"{summary['scenario']} on {summary['engine']} (seed {summary['seed']}): "
             f"{stats.get('tools', '?')} tools, {stats.get('zones', '?')} zones")
    table = Table(title=title)
    table.add_column("scheme", justify="left")
    for _, label, _ in COLUMNS:
        table.add_column(label, justify="right")
    for scheme, s in summary["schemes"].items():
        table.add_row(scheme, *(_fmt(fmt, s.get(key)) for key, _, fmt in COLUMNS))
    console.print(table)
    console.print("per query; RTTs = sequential round trips (ToolDNS: resolver↔servers; "
                  "registries: TCP/TLS handshakes + HTTP calls); bytes/packets at the IP "
                  "layer incl. the agent↔resolver exchange; C(q) = items scored (servers, "
                  "registry, ANS client)", style="dim")


def print_capture(report: dict, console: Console) -> None:
    """Capture vs the engine's own accounting, per scheme."""
    table = Table(title=f"packet capture ({report['tool']}, {report['packets']} packets in "
                        f"{report['pcap']}) vs accounting")
    for col in ("scheme", "queries exact", "bytes acct", "bytes captured", "Δ bytes",
                "packets acct", "packets captured", "Δ packets", "unattributed"):
        table.add_column(col, justify="left" if col == "scheme" else "right")
    for scheme, s in report["schemes"].items():
        table.add_row(scheme, f"{s['queries_exact']}/{s['queries']}", str(s["accounted_bytes"]),
                      str(s["captured_bytes"]), _fmt("{:+.2f}%", s["bytes_diff_pct"]),
                      str(s["accounted_packets"]), str(s["captured_packets"]),
                      _fmt("{:+.2f}%", s["packets_diff_pct"]), str(s["unattributed_packets"]))
    console.print(table)
