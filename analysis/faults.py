"""Fault runs (``faults:`` in a scenario): success over time per scheme, fault windows
shaded, and a one-line-per-scheme table of what the faults cost.

    python3 -m analysis.faults results/faults-replicas      # writes success_over_time.png
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def success_over_time(summary: dict, out: Path) -> Path:
    """Plot the ``faults.schemes.*.timeline`` bins of a run's summary."""
    faults = summary["faults"]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for scheme, entry in faults["schemes"].items():
        t = [b[0] + faults["bin_s"] / 2 for b in entry["timeline"]]
        ax.plot(t, [b[2] for b in entry["timeline"]], marker=".", label=scheme)
    restarts = {(r["down_s"], r["restart_s"]) for e in faults["schemes"].values()
                for r in e.get("recovery", [])}
    for start, end in sorted(restarts):
        ax.axvspan(start, end, color="grey", alpha=0.15, lw=0)
    ax.set_xlabel("workload time (s)")
    ax.set_ylabel("discoveries that succeed")
    ax.set_ylim(-0.02, 1.02)
    ax.legend(fontsize="small")
    ax.set_title(f"{summary['scenario']} ({summary['engine']}); shaded: node down")
    fig.tight_layout()
    path = out / "success_over_time.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def table(summary: dict) -> str:
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


def main(argv: list[str]) -> int:
    run = Path(argv[0]) if argv else Path("results")
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    if "faults" not in summary:
        print(f"{run}: the run has no faults section", file=sys.stderr)
        return 2
    print(table(summary))
    print(success_over_time(summary, run))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
