"""The ``tooldns`` command: serve a hierarchy, query it, run and sweep scenarios, evaluate
retrieval, validate files and print their schema.

Each subcommand is one module of this package, listed in :data:`COMMANDS`, with ``HELP``,
``DESCRIPTION``, ``add_arguments(parser)`` and ``run(args) -> int``; a command imports what it
needs from the lower layers inside ``run`` (so ``--help`` stays fast) and prints with rich:
results on stdout, progress, warnings and errors on stderr (``-q`` hides progress, ``-v`` adds
log lines). Exit status: 0 done, 1 failed (or nothing found), 2 bad usage or a bad file,
130/143 interrupted, 141 stdout closed by its reader (``| head``).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from typing import Protocol

from analysis.pipes import closed
from sim.cli import (
    compile,
    eval,
    export_zones,
    query,
    recursors,
    report,
    run,
    schema,
    serve,
    sweep,
    validate,
)
from sim.cli.common import consoles, stderr, warn, warning_lines


class Command(Protocol):
    """What a subcommand module provides."""

    @property
    def HELP(self) -> str: ...

    @property
    def DESCRIPTION(self) -> str: ...

    def add_arguments(self, p: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


#: The subcommands in the order ``tooldns --help`` lists them.
COMMANDS: dict[str, Command] = {
    "serve": serve,
    "export-zones": export_zones,
    "recursors": recursors,
    "query": query,
    "run": run,
    "sweep": sweep,
    "eval": eval,
    "report": report,
    "validate": validate,
    "schema": schema,
    "compile": compile,
}


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions as written; every option's default shown when it has one."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if ("%(default)" not in text and action.default not in (None, False, [])
                and action.default is not argparse.SUPPRESS and action.option_strings
                and action.nargs != 0):
            text += " (default: %(default)s)"
        return text


def build_parser() -> argparse.ArgumentParser:
    from sim.provenance import version

    common = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    # SUPPRESS: given before or after the command, a flag is not reset by the other parser
    common.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                        help="no progress lines or bars (results and errors only)")
    common.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                        help="log what happens (-vv: debug)")
    parser = argparse.ArgumentParser(
        prog="tooldns", allow_abbrev=False, parents=[common],
        description="A testbed for DNS-based AI tool discovery (ToolDNS) and its HTTP-registry "
                    "baselines.\nResults go to stdout; progress, warnings and errors to stderr. "
                    "Exit status: 0 done, 1 failed\n(or nothing found), 2 bad usage or a bad "
                    "file, 130/143 interrupted.",
        formatter_class=_HelpFormatter,
        epilog="tooldns COMMAND --help describes each command; docs/scenario-reference.md "
               "every scenario field.")
    parser.add_argument("--version", action="version", version=f"tooldns {version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in COMMANDS.items():
        p = sub.add_parser(name, help=command.HELP, description=command.DESCRIPTION,
                           parents=[common], allow_abbrev=False, formatter_class=_HelpFormatter)
        command.add_arguments(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    consoles.quiet = getattr(args, "quiet", False)
    if verbose := getattr(args, "verbose", 0):
        logging.basicConfig(level=logging.DEBUG if verbose > 1 else logging.INFO,
                            format="%(asctime)s %(name)s %(levelname)s %(message)s",
                            stream=sys.stderr)
    _warn_if_stale()
    try:
        with warning_lines():
            code = COMMANDS[args.command].run(args)
        sys.stdout.flush()
    except KeyboardInterrupt:  # commands that keep nothing: no traceback either
        stderr(f"tooldns {args.command}: interrupted")
        return 128 + signal.SIGINT
    except BrokenPipeError:  # `tooldns schema | head -1`: quietly, 141
        return closed()
    return code


def _warn_if_stale() -> None:
    """A warning when this code runs from a compiled copy older than its origin, or built
    from another checkout than the one the command runs in."""
    from pathlib import Path

    from sim.compiled import HERE, mismatch, stale

    changed = stale()
    if changed:
        warn(f"running from the compiled copy {HERE}, built before {len(changed)} of its "
             f"origin's files changed ({', '.join(changed[:3])}"
             f"{', …' if len(changed) > 3 else ''}): rebuild with tooldns compile")
    other = mismatch(Path.cwd())
    if other is not None:
        warn(other)


if __name__ == "__main__":
    raise SystemExit(main())
