"""``tooldns compile``: the simulation's hot modules compiled by mypyc into a copy of the
code (:mod:`sim.compiled`), to run from with ``PYTHONPATH``."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "compile the hot modules with mypyc into a copy of the code (faster simulation)"
DESCRIPTION = (
    "Copies the packages of the checkout it is run in (the working folder's; --origin "
    "names another) into OUT and compiles the codec, resolver, authoritative server, stub "
    "and path model there with mypyc (about a minute; needs a C compiler). Run anything "
    "from the copy with PYTHONPATH=OUT: the same scenario and seed give the same bytes. "
    "The copy does not follow later edits: tooldns warns when it is stale, or when it was "
    "built from another checkout than the one it runs in.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, default=Path("build/compiled"),
                   help="the folder of the compiled copy (replaced if it is one)")
    p.add_argument("--origin", type=Path, default=None,
                   help="the checkout to compile (default: the one the working folder is "
                        "in; outside any checkout, the installed code)")


def run(args: argparse.Namespace) -> int:
    import sys

    from sim.cli.common import progress, say
    from sim.compiled import HERE, CompileError, build, checkout_of

    origin = checkout_of(args.origin or Path.cwd())
    if args.origin is not None and origin is None:
        print(f"tooldns compile: --origin {args.origin}: not a checkout of the testbed "
              f"(no pyproject.toml of tooldns-testbed with sim/compiled.py)", file=sys.stderr)
        return 2
    origin = origin or HERE
    say(f"compiling the checkout {origin}")
    try:
        made = build(args.out, origin=origin, log=progress)
    except CompileError as exc:  # mypyc's output, lines kept
        print(f"tooldns compile: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"tooldns compile: {exc}", file=sys.stderr)
        return 1
    out = args.out.resolve()
    say(f"compiled {len(made['modules'])} modules into {out} in {made['built_s']} s")
    say(f"run from it with: PYTHONPATH={out} tooldns run …")
    return 0
