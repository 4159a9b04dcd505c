"""``tooldns schema``: the JSON Schema of scenario (or evaluation) files, or with
``--markdown`` the field reference in docs/."""

from __future__ import annotations

import argparse
import json
import sys

HELP = "print the JSON Schema (or a Markdown reference) of scenario files"
DESCRIPTION = (
    "JSON Schema for editors and tools (e.g. yaml-language-server), or with "
    "--markdown the field reference in docs/.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--markdown", action="store_true", help="the Markdown field reference")
    p.add_argument("--eval", action="store_true", help="evaluation files instead of scenarios")


def run(args: argparse.Namespace) -> int:
    from sim.schema import json_schema, markdown_reference

    kind = "eval" if args.eval else "scenario"
    text = markdown_reference(kind) if args.markdown else json.dumps(json_schema(kind),
                                                                      indent=2)
    sys.stdout.write(text + "\n")
    return 0
