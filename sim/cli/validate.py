"""``tooldns validate``: scenario and evaluation files checked as a run would load them,
without running: every problem (exit 2), then warnings about suspicious values."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from sim.cli.common import error, say, warn

if TYPE_CHECKING:
    from sim.scenario import Scenario

HELP = "check scenario or evaluation files without running them"
DESCRIPTION = (
    "Load each file as `tooldns run` (or `eval`) would: every problem with file, "
    "field and a suggestion, then warnings about suspicious values (units).\n"
    "Exit 0 valid, 2 invalid (1 with --strict and warnings).")

#: a synthetic namespace of at most this many tools and zones is built by validate to check
#: the names a session refers to (about a second); larger ones are checked by the run
BUILD_LIMIT = 100_000


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--strict", action="store_true", help="warnings make the exit status 1")


def _is_eval_file(data: object) -> bool:
    return isinstance(data, dict) and "schemes" not in data and bool(
        {"dataset", "methods", "taxonomy"} & set(data))


def session_names(sc: Scenario, file: str) -> str | None:
    """Check the tool ids, roles and organisations ``agents.session`` names against the
    namespace, as a run does before any scheme runs (a role naming no zone would grant
    nothing): here when the namespace is synthetic and small enough to build in about a
    second; otherwise a warning says the run checks them. Raises ScenarioError."""
    spec = sc.agents.session
    if spec is None or not (spec.always_include or spec.guard_exempt or spec.scopes):
        return None
    from sim.build.namespace import build_namespace
    from sim.build.sessions import check_session_tools
    from sim.errors import ScenarioError
    from sim.limits import zone_count

    ns = sc.namespace
    if ns.source != "synthetic":
        return (f"{file}: agents.session: tool ids, roles and organisations are checked "
                f"against the catalogue's namespace when a run builds it")
    size = ns.tools + zone_count(ns.branching, ns.depth)
    if size > BUILD_LIMIT:
        return (f"{file}: agents.session: tool ids, roles and organisations are checked "
                f"against the namespace when a run builds it ({size:,} tools and zones)")
    try:
        check_session_tools(sc, build_namespace(sc))
    except ScenarioError as exc:
        raise ScenarioError(f"{file}: {exc}") from None
    return None


def run(args: argparse.Namespace) -> int:
    """Check files as a run would, without running: errors (exit 2) and warnings."""
    from sim.errors import ScenarioError
    from sim.evalspec import load_eval
    from sim.loading import load_scenario
    from sim.run.sweep import sweep_points
    from sim.sanity import sanity_warnings
    from sim.yamlfile import read_yaml

    status = 0
    for file in args.files:
        try:
            try:
                data = read_yaml(Path(file))
            except ScenarioError:
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
            warnings = [f"{file}: {w}" for w in sanity_warnings(sc)]
            if note := session_names(sc, file):
                warnings.append(note)
            schemes = ", ".join(s.name for s in sc.schemes)
            say(f"{file}: ok (scenario {sc.name}, engine {sc.engine}, seed {sc.seed}, "
                f"schemes {schemes}{points})")
            for warning in warnings:
                warn(warning)
                if args.strict:
                    status = max(status, 1)
        except (ScenarioError, ValueError) as exc:
            error("validate", str(exc))
            status = 2
    return status
