"""The resolver model against the stock recursors themselves, on the same workload.

``python3 -m sim.interop.calibration SCENARIO`` runs a scenario whose schemes use stock
binaries (``schemes[].resolver``) on the live engine (as root: the run is in a network
namespace of its own), then its model twin on simpy — each binary replaced by the project's
resolver iterating as that binary does (``resolver_model``, :mod:`nodes.resolver.minimise`)
— and prints, per scheme and phase (cold, warm), the mean upstream exchanges, round trips
and bytes per discovery of both, their difference, and how many discoveries returned the
same tools as the model and as the scheme named by ``--reference`` (the aware walk) did.
``--json`` keeps the table; ``--out DIR --capture`` writes the live run with its packet
capture and prints the capture's check of the records.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from sim.loading import load_scenario
from sim.run.runner import run_scenario
from sim.scenario import Scenario

METRICS = {"exchanges": "upstream exchanges", "round_trips": "round trips",
           "bytes_down": "bytes down", "bytes_up": "bytes up"}
PHASES = {0: "cold", 1: "warm"}


def model_twin(sc: Scenario) -> Scenario:
    """``sc`` with every stock binary replaced by the resolver model of it, on simpy."""
    over: dict[str, Any] = {"engine": "simpy"}
    for s in sc.dns_schemes():
        if s.resolver != "project":
            over[f"schemes.{s.name}.resolver_model"] = s.resolver
            over[f"schemes.{s.name}.resolver"] = "project"
    return sc.with_overrides(over)


def compare(binary: pd.DataFrame, model: pd.DataFrame, reference: str | None,
            stock: Mapping[str, str]) -> list[dict]:
    """One row per stock scheme and phase: each metric's mean on both, the difference."""
    rows = []
    ref = (binary[binary.scheme == reference].set_index("job").returned
           if reference is not None and reference in set(binary.scheme) else None)
    modelled = model.set_index(["scheme", "job"]).returned
    for name, binary_name in stock.items():
        for phase in sorted(set(binary.phase)):
            b = binary[(binary.scheme == name) & (binary.phase == phase)]
            m = model[(model.scheme == name) & (model.phase == phase)]
            row: dict[str, Any] = {"scheme": name, "binary": binary_name,
                                   "phase": PHASES.get(int(phase), str(phase)),
                                   "queries": len(b),
                                   "success_binary": round(float(b.success.mean()), 4),
                                   "success_model": round(float(m.success.mean()), 4)}
            for col in METRICS:
                bv, mv = float(b[col].mean()), float(m[col].mean())
                row[f"{col}_binary"], row[f"{col}_model"] = round(bv, 3), round(mv, 3)
                row[f"{col}_diff_pct"] = round(100 * (mv - bv) / bv, 2) if bv else (
                    0.0 if mv == 0 else None)
            got = b.set_index("job").returned
            row["same_tools_as_model"] = int(sum(
                modelled.get((name, j)) == r for j, r in got.items()))
            if ref is not None:
                row["same_tools_as_reference"] = int((got == ref.reindex(got.index)).sum())
            rows.append(row)
    return rows


def markdown(rows: list[dict], reference: str | None) -> str:
    """The table as Markdown: per scheme and phase, binary vs model."""
    head = ["scheme", "binary", "phase", "queries", "exchanges (binary / model, diff)",
            "round trips", "bytes down", "success", "tools as the model"]
    if reference is not None:
        head.append(f"tools as {reference}")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["scheme"], r["binary"], r["phase"], str(r["queries"]),
                 f"{r['exchanges_binary']:.2f} / {r['exchanges_model']:.2f} "
                 f"({_pct(r['exchanges_diff_pct'])})",
                 f"{r['round_trips_binary']:.2f} / {r['round_trips_model']:.2f}",
                 f"{r['bytes_down_binary']:.0f} / {r['bytes_down_model']:.0f}",
                 f"{r['success_binary']:.2f} / {r['success_model']:.2f}",
                 f"{r['same_tools_as_model']}/{r['queries']}"]
        if reference is not None:
            cells.append(f"{r.get('same_tools_as_reference', '')}/{r['queries']}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def capture_markdown(capture: dict) -> str:
    """The capture's check per scheme: queries whose captured bytes and packets equal the
    records', and the totals."""
    lines = ["| scheme | queries exact | bytes (records / capture) | packets (records / "
             "capture) | unattributed packets |", "|---|---|---|---|---|"]
    for name, r in capture["schemes"].items():
        lines.append(f"| {name} | {r['queries_exact']}/{r['queries']} | "
                     f"{r['accounted_bytes']} / {r['captured_bytes']} | "
                     f"{r['accounted_packets']} / {r['captured_packets']} | "
                     f"{r['unattributed_packets']} |")
    return "\n".join(lines)


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v:+.1f} %"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m sim.interop.calibration",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("scenario", type=Path)
    ap.add_argument("--reference", default="tooldns",
                    help="the scheme whose returned tools the others are compared with")
    ap.add_argument("--json", type=Path, help="write the rows here")
    ap.add_argument("--out", type=Path, help="write the live run's results here")
    ap.add_argument("--capture", action="store_true",
                    help="capture the live run (with --out) and print the capture's check")
    args = ap.parse_args(argv)
    sc = load_scenario(args.scenario)
    stock = {s.name: s.resolver for s in sc.dns_schemes() if s.resolver != "project"}
    if not stock:
        print(f"{args.scenario}: no scheme runs a stock binary (schemes[].resolver)",
              file=sys.stderr)
        return 2
    if args.capture and args.out is None:
        ap.error("--capture needs --out (the capture is written beside the results)")
    live = run_scenario(sc, engine="live", out_dir=args.out, write=args.out is not None,
                        capture=args.capture)
    model = run_scenario(model_twin(sc), write=False)
    rows = compare(live.records, model.records, args.reference, stock)
    print(markdown(rows, args.reference))
    if args.capture:
        print("\n" + capture_markdown(live.summary["capture"]))
    if args.json is not None:
        from analysis.files import atomic_write

        text = json.dumps({"scenario": sc.name, "seed": sc.seed, "rows": rows}, indent=1)
        atomic_write(args.json, lambda tmp: Path(tmp).write_text(text + "\n", encoding="utf-8"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
