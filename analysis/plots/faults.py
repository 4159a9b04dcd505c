"""Fault runs (``faults:`` in a scenario): success over time per scheme, fault windows
shaded, and a one-line-per-scheme table of what the faults cost.

    python3 -m analysis.plots.faults results/faults-replicas      # writes success_over_time.png
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from analysis.plots.style import new_figure, save_figure, scheme_colors
from analysis.titles import run_title


def success_figure(summary: dict[str, Any], title: str | None = None) -> Figure:
    """The ``faults.schemes.*.timeline`` bins of a run's summary: share of discoveries
    that succeed per bin and scheme; shaded: from each crash to its restart."""
    faults = summary["faults"]
    fig, ax = new_figure((7, 3.5))
    colors = scheme_colors(faults["schemes"])
    for scheme, entry in faults["schemes"].items():
        t = [b[0] + faults["bin_s"] / 2 for b in entry["timeline"]]
        ax.plot(t, [b[2] for b in entry["timeline"]], marker=".", label=scheme,
                color=colors[scheme])
    restarts = {(r["down_s"], r["restart_s"]) for e in faults["schemes"].values()
                for r in e.get("recovery", [])}
    for start, end in sorted(restarts):
        ax.axvspan(start, end, color="grey", alpha=0.15, lw=0)
    ax.set_xlabel("workload time (s)")
    ax.set_ylabel("discoveries that succeed")
    ax.set_ylim(-0.02, 1.02)
    ax.legend(fontsize="small")
    if title is None:
        title = run_title(summary)
    ax.set_title(f"discoveries that succeed over time; shaded: node down\n{title}",
                 fontsize=10)
    fig.tight_layout()
    return fig


def success_over_time(summary: dict[str, Any], out: Path, title: str | None = None) -> Path:
    """Write :func:`success_figure` to ``out/success_over_time.png`` (atomically)."""
    path = out / "success_over_time.png"
    save_figure(success_figure(summary, title), path)
    return path


def table(summary: dict[str, Any]) -> str:
    """Markdown: success overall / during faults, extra latency, retries, stale answers."""
    lines = ["| scheme | success | during faults | baseline | extra ms (mean / p95 during) "
             "| retries | stale |", "|---|---|---|---|---|---|---|"]
    for scheme, e in summary["faults"]["schemes"].items():
        extra = e.get("extra_latency_during_faults_ms", {})
        base = e.get("baseline", {})
        lines.append(f"| {scheme} | {e['success']:.4f} | {e['success_during_faults']} | "
                     f"{base.get('success', '')} | {extra.get('mean', '')} / "
                     f"{extra.get('p95', '')} | {e['mean_retries']} | {e['stale_answers']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m analysis.plots.faults",
                                description="Table of what the faults cost and "
                                            "success_over_time.png of a run with faults.")
    p.add_argument("dir", metavar="DIR", type=Path, help="run folder (tooldns run)")
    run = p.parse_args(argv).dir
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    if "faults" not in summary:
        print(f"{run}: the run has no faults section", file=sys.stderr)
        return 2
    print(table(summary))
    print(success_over_time(summary, run))
    return 0


if __name__ == "__main__":
    from analysis.pipes import guarded

    raise SystemExit(guarded(main))
