"""The resolver model against the stock recursors themselves, on the same workload.

``python3 -m sim.interop.calibration SCENARIO`` runs a scenario whose schemes use stock
binaries (``schemes[].resolver``) on the live engine (as root: the run is in a network
namespace of its own), then its model twin on simpy — each binary replaced by the project's
resolver iterating as that binary does (``resolver_model``, :mod:`nodes.resolver.minimise`)
— and prints, per scheme and phase (cold, warm), the mean upstream exchanges, round trips
and bytes per discovery of both, their difference, and how many discoveries returned the
same tools as the model and as the scheme named by ``--reference`` (the aware walk) did.
``--json`` keeps the table; ``--out DIR --capture`` writes the live run with its packet
capture and prints the capture's check of the records. ``--seeds N`` runs both once per
seed (``seed`` … ``seed+N-1``: namespace, workload and link draws change together) and
prints each figure as mean ± a 95 % Student t interval over the seeds, the difference as
the interval of the per-seed differences; ``--json`` is rewritten after every seed, so an
interrupted run keeps the seeds it finished.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.intervals import METHOD, t_interval
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


def over_seeds(per_seed: Mapping[int, list[dict]]) -> list[dict]:
    """:func:`compare`'s rows of several seeds as one row per scheme and phase: every
    figure's mean and 95 % half-width over the seeds (``<figure>_half``), the difference
    as the interval of the per-seed differences; tool agreement summed."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for rows in per_seed.values():
        for r in rows:
            groups.setdefault((r["scheme"], r["phase"]), []).append(r)
    out = []
    for (scheme, phase), rows in groups.items():
        row: dict[str, Any] = {"scheme": scheme, "binary": rows[0]["binary"], "phase": phase,
                               "seeds": len(rows), "queries": sum(r["queries"] for r in rows)}
        for col in ("success_binary", "success_model",
                    *(f"{m}_{side}" for m in METRICS for side in ("binary", "model",
                                                                   "diff_pct"))):
            iv = t_interval(r[col] for r in rows)
            row[col], row[f"{col}_half"] = _round(iv.mean), _round(iv.half)
        for col in ("same_tools_as_model", "same_tools_as_reference"):
            if all(col in r for r in rows):
                row[col] = sum(r[col] for r in rows)
        out.append(row)
    return out


def seeds_markdown(rows: list[dict], reference: str | None) -> str:
    """:func:`over_seeds`' rows as Markdown: mean ± half-width (95 %, t over seeds)."""
    head = ["scheme", "binary", "phase", "seeds", "queries", "exchanges binary",
            "exchanges model", "diff", "round trips binary / model", "tools as the model"]
    if reference is not None:
        head.append(f"tools as {reference}")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["scheme"], r["binary"], r["phase"], str(r["seeds"]), str(r["queries"]),
                 _pm(r, "exchanges_binary"), _pm(r, "exchanges_model"),
                 _pm(r, "exchanges_diff_pct", "{:+.1f}") + " %",
                 f"{r['round_trips_binary']:.2f} / {r['round_trips_model']:.2f}",
                 f"{r.get('same_tools_as_model', '')}/{r['queries']}"]
        if reference is not None:
            cells.append(f"{r.get('same_tools_as_reference', '')}/{r['queries']}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + f"\n\n(mean ± half-width: {METHOD})"


def _pm(row: dict, col: str, fmt: str = "{:.2f}") -> str:
    """``mean ± half`` of ``col`` (``n/a`` without a value)."""
    mean, half = row[col], row[col + "_half"]
    if mean is None:
        return "n/a"
    return fmt.format(mean) + ("" if half is None else f" ± {half:.2f}")


def _round(v: float) -> float | None:
    return None if v != v else round(v, 3)  # NaN (one seed, or no value): None in JSON


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


def _write_json(path: Path, sc: Scenario, per_seed: Mapping[int, list[dict]]) -> None:
    """The rows so far (one seed: its rows; several: each seed's and the intervals)."""
    from analysis.files import atomic_write

    if len(per_seed) == 1 and next(iter(per_seed)) == sc.seed:
        data: dict[str, Any] = {"scenario": sc.name, "seed": sc.seed,
                                "rows": per_seed[sc.seed]}
    else:
        data = {"scenario": sc.name, "seeds": sorted(per_seed), "method": METHOD,
                "rows": over_seeds(per_seed),
                "per_seed": {str(k): v for k, v in per_seed.items()}}
    text = json.dumps(data, indent=1)
    atomic_write(path, lambda tmp: Path(tmp).write_text(text + "\n", encoding="utf-8"))


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
    ap.add_argument("--seeds", type=int, default=1,
                    help="runs, one per seed from the scenario's: intervals over them")
    args = ap.parse_args(argv)
    sc = load_scenario(args.scenario)
    stock = {s.name: s.resolver for s in sc.dns_schemes() if s.resolver != "project"}
    if not stock:
        print(f"{args.scenario}: no scheme runs a stock binary (schemes[].resolver)",
              file=sys.stderr)
        return 2
    if args.capture and args.out is None:
        ap.error("--capture needs --out (the capture is written beside the results)")
    if args.seeds < 1:
        ap.error("--seeds must be at least 1")
    per_seed: dict[int, list[dict]] = {}
    for seed in range(sc.seed, sc.seed + args.seeds):
        this = sc if args.seeds == 1 else sc.with_overrides({"seed": seed})
        out = (args.out if args.seeds == 1 or args.out is None
               else args.out / f"seed-{seed}")
        live = run_scenario(this, engine="live", out_dir=out, write=out is not None,
                            capture=args.capture)
        model = run_scenario(model_twin(this), write=False)
        per_seed[seed] = compare(live.records, model.records, args.reference, stock)
        if args.seeds > 1:
            print(f"seed {seed}:", file=sys.stderr)
            print(markdown(per_seed[seed], args.reference), file=sys.stderr)
        if args.capture:
            print("\n" + capture_markdown(live.summary["capture"]),
                  file=sys.stderr if args.seeds > 1 else sys.stdout)
        if args.json is not None:
            _write_json(args.json, sc, per_seed)
    if args.seeds == 1:
        print(markdown(per_seed[sc.seed], args.reference))
    else:
        print(seeds_markdown(over_seeds(per_seed), args.reference))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
