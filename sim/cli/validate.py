"""``tooldns validate``: scenario and evaluation files checked as a run would load them,
without running: every problem (exit 2), then warnings about suspicious values."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from sim.cli.common import error, say, warn

if TYPE_CHECKING:
    from sim.scenario import Scenario

HELP = "check scenario or evaluation files without running them"
DESCRIPTION = (
    "Load each file as `tooldns run` (or `eval`) would, with the checks the run makes "
    "while it builds: every problem with file, field and a suggestion (times that look "
    "like a unit mistake are errors unless --allow-units), then warnings about "
    "suspicious values.\n"
    "Exit 0 valid, 2 invalid (1 with --strict and warnings).")

#: a synthetic namespace of at most this many tools and zones is built by validate to make
#: the run's build-time checks (about a second); larger ones are checked by the run
BUILD_LIMIT = 100_000


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--strict", action="store_true", help="warnings make the exit status 1")
    p.add_argument("--allow-units", action="store_true",
                   help="times that look like a unit mistake (a 10 s link delay) are "
                        "warnings, not errors")


def _is_eval_file(data: object) -> bool:
    return isinstance(data, dict) and "schemes" not in data and bool(
        {"dataset", "methods", "taxonomy"} & set(data))


def _needs_namespace(sc: Scenario) -> bool:
    """Whether the scenario names tools, zones, organisations or nodes that only a built
    namespace can check (the filters of the workload are not counted: a catalogue's query
    file rarely leaves none)."""
    session = sc.agents.session
    return bool((session is not None and (session.always_include or session.guard_exempt
                                          or session.scopes))
                or sc.trust.policy != "open" or any(s.trust for s in sc.dns_schemes())
                or sc.faults or sc.workload.churn or sc.namespace.rogue)


def build_checks(sc: Scenario, file: str) -> str | None:
    """Every check a run makes while it builds (:func:`sim.run.runner.prepare` and each
    scheme's :func:`sim.build.plan.make_plan`: the engine can run the scenario, the query
    file, the workload, churn, the trust policy's start zone, the names sessions refer to,
    fault selectors), here by building the namespace and the plans as a run does when the
    namespace is synthetic and small enough to build in about a second; otherwise the
    checks that need no namespace, and a note when the run checks the rest. Raises
    ScenarioError with the run's message, ``FILE: field: problem``."""
    from sim.build.namespace import build_namespace, start_zone
    from sim.build.plan import make_plan, scenario_hierarchy
    from sim.build.sessions import check_session_tools
    from sim.build.workload import Job, build_jobs, check_query_file
    from sim.catalog.engines import engine_info
    from sim.errors import ScenarioError, in_file
    from sim.limits import tool_count, zone_count
    from sim.run.runner import check_engine

    ns = sc.namespace
    size = tool_count(ns) + zone_count(ns.branching, ns.depth)  # organisations' tools too
    try:
        if sc.engine_options.shards.workers > 1:  # as run's --shards check
            from sim.engines.shards import check_shardable

            check_shardable(sc, sc.engine, sc.network.resolvers)
        check_engine(sc, sc.engine, engine_info(sc.engine), capture=False)
        check_query_file(sc)
        if ns.source != "synthetic" or size > BUILD_LIMIT:
            where = ("the catalogue's namespace" if ns.source != "synthetic"
                     else f"the namespace ({size:,} tools and zones)")
            return (f"{file}: the names sessions, trust, faults and churn refer to are "
                    f"checked against {where} when a run builds it"
                    if _needs_namespace(sc) else None)
        built = build_namespace(sc)  # the run's order (sim.run.runner.prepare)
        jobs: Sequence[Job] = build_jobs(sc, built, sc.network.agents)
        if sc.workload.churn is not None:
            from sim.build.churn import plan_churn

            _, jobs = plan_churn(sc, built, jobs)
        start_zone(sc, built)
        check_session_tools(sc, built)
        if ns.scorer != "dense":  # dense servers embed every tool: the run checks the plans
            hierarchy = scenario_hierarchy(sc, built)
            for scheme in sc.schemes:
                make_plan(sc, scheme, built, jobs, hierarchy=hierarchy)
    except ScenarioError as exc:
        raise ScenarioError(in_file(file, str(exc))) from None
    return None


def run(args: argparse.Namespace) -> int:
    """Check files as a run would, without running: errors (exit 2) and warnings."""
    from sim.errors import ScenarioError
    from sim.evalspec import load_eval, needs_llm, preflight
    from sim.loading import load_scenario
    from sim.run.sweep import sweep_points
    from sim.sanity import scenario_warnings
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
                try:
                    preflight(spec, llm=False)
                except ValueError as exc:
                    raise ValueError(f"{file}: {exc}") from None
                say(f"{file}: ok (evaluation {spec.name}: {len(spec.methods)} methods, "
                    f"dataset {spec.dataset.source})")
                if (uses := needs_llm(spec)) and not spec.llm.url:
                    warn(f"{file}: {', '.join(uses)}: `tooldns eval` needs --llm-url "
                         f"(the file sets no llm.url)")
                    if args.strict:
                        status = max(status, 1)
                continue
            sc = load_scenario(file)
            points = ""
            if sc.sweep is not None or sc.seeds > 1:  # seeds: N replications are points
                try:
                    what = "sweep of" if sc.sweep is not None else "replications:"
                    points = f", {what} {len(sweep_points(sc))} points"
                except ScenarioError as exc:
                    raise ScenarioError(f"{file}: {exc}") from None
            warnings = scenario_warnings(sc, file, allow_units=args.allow_units)
            if note := build_checks(sc, file):
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
