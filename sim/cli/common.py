"""What every ``tooldns`` command shares: the consoles and their one-line messages (results,
progress, warnings, errors), the namespace options of ``serve`` and ``export-zones``, the
scenario file with ``--seed``/``--set`` applied, progress bars and interruption by signal.

Heavy modules are imported inside the functions that need them, so ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from sim.scenario import Scenario
    from topologies.namespace import Namespace

DEFAULT_OPTION_CODE = 65432  # nodes.dns.wire.DEFAULT_OPTION_CODE (a test checks they agree)
SCORERS = ("bm25", "tfidf", "oracle", "dense")


class _Consoles:
    """rich consoles made on first use: ``out`` (results) and ``err`` (progress, warnings,
    errors); ``quiet`` hides progress."""

    quiet = False
    _out: Console | None = None
    _err: Console | None = None

    @property
    def out(self) -> Console:
        if self._out is None:
            from rich.console import Console
            self._out = Console(width=_width(sys.stdout))
        return self._out

    @property
    def err(self) -> Console:
        if self._err is None:
            from rich.console import Console
            self._err = Console(stderr=True, width=_width(sys.stderr))
        return self._err


def _width(stream: Any) -> int | None:
    """A console's width: ``COLUMNS`` when set, else the terminal's (None: rich asks), else
    160 (a file or a pipe)."""
    with contextlib.suppress(ValueError):
        if (columns := int(os.environ.get("COLUMNS", ""))) > 0:
            return columns
    return None if stream.isatty() else 160


consoles = _Consoles()


def _printable(text: str, keep: str = "") -> str:
    """:func:`sim.spec.printable`: control characters escaped (a path's ESC or newline is
    shown, never acted on by the terminal)."""
    from sim.spec import printable

    return printable(text, keep)


def progress(message: str) -> None:
    """A progress line on stderr (hidden by ``-q``)."""
    if not consoles.quiet:
        consoles.err.print(_printable(message, "\n"), style="dim", markup=False,
                           highlight=False)


def say(message: str) -> None:
    """A plain line of results on stdout (no markup, never wrapped)."""
    consoles.out.print(_printable(message, "\n\t"), markup=False, highlight=False,
                       soft_wrap=True)


def warn(message: str) -> None:
    """``warning: message`` on stderr (``message`` without a prefix of its own)."""
    text = _printable(message, "\n")
    consoles.err.print(f"warning: {text}", style="yellow", markup=False, highlight=False,
                       soft_wrap=True)


@contextlib.contextmanager
def warning_lines() -> Iterator[None]:
    """Python warnings raised by the project's own code (an engine's fall-back, ...) as
    :func:`warn` lines, each text once however often it is raised; other warnings (from
    libraries) as Python shows them."""
    seen: set[str] = set()
    root = Path(__file__).resolve().parents[2]
    show = warnings.showwarning

    def shown(message: Warning | str, category: type[Warning], filename: str, lineno: int,
              file: Any = None, line: str | None = None) -> None:
        path = Path(filename).resolve()
        if not path.is_relative_to(root) or "site-packages" in path.parts:
            show(message, category, filename, lineno, file, line)
        elif (text := " ".join(str(message).split())) not in seen:
            seen.add(text)
            warn(text)

    with warnings.catch_warnings():  # the filters as they are; repeats dropped here, by text
        warnings.showwarning = shown
        yield


def stderr(message: str) -> None:
    """One line to stderr (no wrapping, no markup, control characters escaped): errors and
    interruptions."""
    print(_printable(" ".join(message.split())), file=sys.stderr, flush=True)


def error(command: str, message: str) -> None:
    """One problem per line on stderr, each prefixed like argparse does."""
    for line in str(message).splitlines() or [""]:
        stderr(f"tooldns {command}: error: {line}")


def check_out(out: str | Path | None) -> None:
    """Refuse (ScenarioError) an ``--out`` folder with control characters, before any work."""
    from sim.errors import ScenarioError
    from sim.spec import path_problem

    if out is not None and (problem := path_problem(str(out))):
        raise ScenarioError(f"--out: {problem}")


def port_number(text: str) -> int:
    """The argparse type of ports: 1..65535."""
    value = positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"a port is 1..65535, got {value}")
    return value


def positive_int(text: str) -> int:
    """The argparse type of counts of workers and shards."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


# ------------------------------------------------------------------------ namespace


def add_namespace_args(p: argparse.ArgumentParser) -> None:
    """The namespace options of ``serve`` and ``export-zones`` (plus replicas and scorer)."""
    g = p.add_argument_group("namespace (synthetic unless --catalog is given)")
    g.add_argument("--catalog", help="catalogue JSONL (format of shared/data/tools/catalog.jsonl)")
    g.add_argument("--queries", help="queries JSONL with tool_ids (default: beside the catalogue)")
    g.add_argument("--limit", type=int, help="load at most this many catalogue rows")
    g.add_argument("--tools", type=int, default=2000, help="synthetic: number of tools")
    g.add_argument("--branching", type=int, default=6, help="synthetic: branching factor")
    g.add_argument("--depth", type=int, default=2, help="synthetic: depth below tools.")
    g.add_argument("--orgs", type=int, default=3, help="synthetic: certified organisations")
    g.add_argument("--seed", type=int, default=0, help="synthetic tree and IDs")
    g.add_argument("--vocabulary", choices=("pseudo", "readable"), default="pseudo",
                   help="synthetic: pseudo-words or readable words (forecast-rainfall)")
    p.add_argument("--replicas", type=int, default=1, help="NS replicas per zone")
    p.add_argument("--scorer", default="bm25", choices=SCORERS,
                   help="how servers rank children and tools")


def namespace_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the options of :func:`add_namespace_args`, before anything is
    built: the ranges of the scenario file's ``namespace`` fields, and the memory estimate
    of :mod:`sim.limits` (so ``--tools 10**12`` is one line, not an out-of-memory kill)."""
    from sim.limits import (
        BASE,
        PER_SERVER,
        PER_TOOL,
        bytes_text,
        count_text,
        physical_memory,
        zone_count,
    )

    ranges = (("--replicas", args.replicas, 1, 8), ("--limit", args.limit, 1, None),
              ("--tools", args.tools, 1, None), ("--branching", args.branching, 1, None),
              ("--depth", args.depth, 1, 8), ("--orgs", args.orgs, 0, None),
              ("--seed", args.seed, 0, 2**32 - 1))
    for flag, value, low, high in ranges[:2] if args.catalog else ranges:
        if value is not None and (value < low or (high is not None and value > high)):
            span = f"{low}..{high}" if high is not None else f"at least {low}"
            return f"{flag} {value}: must be {span}"
    if args.catalog:
        return None  # its size is that of a file on disk
    tools = args.tools + 5 * args.orgs
    zones = zone_count(args.branching, args.depth) + 2 + 2 * args.orgs
    need = BASE + tools * PER_TOOL + zones * args.replicas * PER_SERVER
    limit = physical_memory()
    if limit is not None and need > limit:
        flag = "--tools" if tools * PER_TOOL > zones * PER_SERVER else "--branching/--depth"
        return (f"{flag}: {count_text(tools)} tools in {count_text(zones)} zones would need "
                f"about {bytes_text(need)} of memory, more than this machine's "
                f"{bytes_text(limit)}")
    return None


def namespace(args: argparse.Namespace) -> Namespace:
    """The namespace the options of :func:`add_namespace_args` describe (check them first
    with :func:`namespace_problem`)."""
    from topologies.catalog import from_catalog
    from topologies.synthetic import synthetic

    if args.catalog:
        queries = args.queries or (Path(args.catalog).parent / "queries.jsonl")
        return from_catalog(args.catalog, queries if Path(queries).exists() else None,
                            limit=args.limit)
    return synthetic(n_tools=args.tools, branching=args.branching, depth=args.depth,
                     seed=args.seed, n_orgs=args.orgs, vocabulary=args.vocabulary)


def add_dnssec_args(p: argparse.ArgumentParser, flag: str, text: str) -> None:
    """``flag`` (``--dnssec`` of serve, ``--sign`` of export-zones; ``args.sign``) and
    ``--key-seed``: the zones' keys (:func:`nodes.dns.dnssec.zone_key`)."""
    p.add_argument(flag, dest="sign", action="store_true", help=text)
    p.add_argument("--key-seed", metavar="TEXT",
                   help=f"with {flag}: the zone keys derive from this text and each zone's "
                   "name (default: --seed, so serve and export-zones with the same options "
                   "have the same keys); anyone who knows it can sign for the zones: pick a "
                   "secret one beyond a testbed")


def dnssec_problem(args: argparse.Namespace, flag: str) -> str | None:
    """What is wrong with the options of :func:`add_dnssec_args`."""
    if args.key_seed is not None and not args.sign:
        return f"--key-seed needs {flag}"
    return None


def key_seed(args: argparse.Namespace) -> str:
    """The text the zone keys derive from: ``--key-seed``, else ``--seed``."""
    return args.key_seed if args.key_seed is not None else str(args.seed)


# ------------------------------------------------------------------------ scenario files


def add_format_arg(p: argparse.ArgumentParser, what: str) -> None:
    """``--format``: how the summary goes to stdout (:data:`analysis.console.FORMATS`)."""
    from analysis.console import FORMATS

    p.add_argument("--format", choices=FORMATS, default="table",
                   help=f"{what} on stdout: rich tables that fit the terminal (COLUMNS), or "
                        f"csv, json or markdown (then nothing else goes to stdout: progress "
                        f"and notes to stderr)")


def add_scenario_args(p: argparse.ArgumentParser) -> None:
    """``--seed``, ``--seeds`` and ``--set`` of the commands that take a scenario file."""
    p.add_argument("--seed", type=int, help="override the file's seed")
    p.add_argument("--seeds", type=positive_int, metavar="N",
                   help="N independent replications (seeds SEED … SEED+N-1): mean ± 95 %% CI "
                        "and paired differences (overrides the file's seeds)")
    p.add_argument("--set", action="append", metavar="FIELD=VALUE",
                   help="override a field (repeatable; dotted, YAML value), e.g. "
                   "--set namespace.tools=5000 --set schemes.tooldns.k=1 "
                   "--set network.link.delay.mean=0.02")
    p.add_argument("--allow-units", action="store_true", help="times that look like a unit "
                   "mistake (a 10 s link delay) are warnings, not errors")


def scenario_from_args(args: argparse.Namespace) -> Scenario:
    """The scenario file with ``--seed``, ``--set`` and ``--engine`` applied and validated
    again (the one place a command's engine meets the file's), then
    checked as ``validate`` checks a file (:func:`sim.limits.check_scenario`: before any
    work); its warnings (suspicious units) printed. Raises ScenarioError naming file and
    field."""
    from sim.errors import ScenarioError
    from sim.limits import check_scenario
    from sim.loading import read_scenario
    from sim.sanity import scenario_warnings
    from sim.yamlfile import yaml_value

    scenario = read_scenario(args.file)
    overrides: dict[str, Any] = {}
    for item in args.set or ():
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise ScenarioError(f"--set {_plain(item)}: expected FIELD=VALUE, e.g. "
                                f"--set namespace.tools=5000 or --set schemes.tooldns.k=1")
        try:
            overrides[key.strip()] = yaml_value(text)
        except ValueError as exc:
            raise ScenarioError(f"--set {_plain(key.strip())}: the value is {exc}") from None
    if args.seed is not None:
        overrides["seed"] = args.seed
    if getattr(args, "seeds", None) is not None:
        overrides["seeds"] = args.seeds
    if getattr(args, "engine", None):  # --engine: the run's engine is the scenario's, here
        overrides["engine"] = args.engine
    if overrides:
        scenario = _overridden(scenario, overrides, args.file)
    check_scenario(scenario, args.file)
    for warning in scenario_warnings(scenario, args.file, args.set, args.allow_units):
        warn(warning)
    return scenario


def _overridden(scenario: Scenario, overrides: dict[str, Any], file: str) -> Scenario:
    from pydantic import ValidationError

    from sim.errors import ScenarioError, format_errors

    for key, value in overrides.items():  # one at a time: errors name the --set given
        name = _plain(key)
        try:
            scenario = scenario.with_overrides({key: value})
        except ValidationError as exc:
            raise ScenarioError(format_errors(f"{file} (--set {name}={_plain(value)})", exc,
                                              type(scenario))) from None
        except ValueError as exc:
            raise ScenarioError(f"{file}: --set {name}: {exc}") from None
    return scenario


def _plain(value: object) -> str:
    """A ``--set`` key or value as given, shortened (:func:`sim.errors.shown`: bounded)."""
    from sim.errors import shown

    text = shown(value)
    return text[1:-1] if isinstance(value, str) else text


# ------------------------------------------------------------------------ long commands


class Stopped:
    """The exit status of an interrupted command: 130 (SIGINT) or 143 (SIGTERM)."""

    code = 128 + signal.SIGINT


@contextlib.contextmanager
def interruptible() -> Iterator[Stopped]:
    """SIGTERM stops a command the way Ctrl-C does (``KeyboardInterrupt``, via the SIGINT
    handler, so asyncio's own handling applies), remembering which signal it was."""
    stopped = Stopped()

    def on_term(signum: int, _frame: object) -> None:
        stopped.code = 128 + signum
        if signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, signal.SIG_DFL, None):
            raise KeyboardInterrupt
        signal.raise_signal(signal.SIGINT)

    try:
        previous = signal.signal(signal.SIGTERM, on_term)
    except ValueError:  # not the main thread (tests calling main() from a thread)
        yield stopped
        return
    try:
        yield stopped
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def query_progress() -> Iterator[Callable[[str, int, int], None] | None]:
    """Per-query progress bars with ETA on a terminal (one per scheme), else nothing."""
    if consoles.quiet or not consoles.err.is_terminal:
        yield None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    bars = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                    console=consoles.err, transient=True)
    tasks: dict[str, Any] = {}

    def tick(label: str, done: int, total: int) -> None:
        if label not in tasks:
            tasks[label] = bars.add_task(label, total=total)
        bars.update(tasks[label], completed=done)

    with bars:
        yield tick
