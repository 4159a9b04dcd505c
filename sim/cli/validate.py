"""``tooldns validate``: scenario and evaluation files checked as a run would load them,
without running: every problem (exit 2), then warnings about suspicious values."""

from __future__ import annotations

import argparse
from pathlib import Path

from sim.cli.common import error, say, warn

HELP = "check scenario or evaluation files without running them"
DESCRIPTION = (
    "Load each file as `tooldns run` (or `eval`) would: every problem with file, "
    "field and a suggestion, then warnings about suspicious values (units).\n"
    "Exit 0 valid, 2 invalid (1 with --strict and warnings).")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--strict", action="store_true", help="warnings make the exit status 1")


def _is_eval_file(data: object) -> bool:
    return isinstance(data, dict) and "schemes" not in data and bool(
        {"dataset", "methods", "taxonomy"} & set(data))


def run(args: argparse.Namespace) -> int:
    """Check files as a run would, without running: errors (exit 2) and warnings."""
    import yaml

    from sim.errors import ScenarioError
    from sim.evalspec import load_eval
    from sim.loading import load_scenario
    from sim.run.sweep import sweep_points
    from sim.sanity import sanity_warnings

    status = 0
    for file in args.files:
        try:
            try:
                data = yaml.safe_load(Path(file).read_text(encoding="utf-8"))
            except (OSError, yaml.YAMLError):
                data = None  # load_scenario says what is wrong
            if _is_eval_file(data):
                spec = load_eval(file)
                say(f"{file}: ok (evaluation {spec.name}: {len(spec.methods)} methods, "
                    f"dataset {spec.dataset.source})")
                continue
            sc = load_scenario(file)
            points = ""
            if sc.sweep is not None:
                try:
                    points = f", sweep of {len(sweep_points(sc))} points"
                except ScenarioError as exc:
                    raise ScenarioError(f"{file}: {exc}") from None
            schemes = ", ".join(s.name for s in sc.schemes)
            say(f"{file}: ok (scenario {sc.name}, engine {sc.engine}, seed {sc.seed}, "
                f"schemes {schemes}{points})")
            for warning in sanity_warnings(sc):
                warn(f"{file}: {warning}")
                if args.strict:
                    status = max(status, 1)
        except (ScenarioError, ValueError) as exc:
            error("validate", str(exc))
            status = 2
    return status
