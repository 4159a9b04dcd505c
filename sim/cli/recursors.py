"""``tooldns recursors``: stock DNS resolvers in front of a served hierarchy (the work and
its options are sim.interop.recursors')."""

from __future__ import annotations

import argparse

from sim.interop import recursors

HELP = recursors.HELP
DESCRIPTION = recursors.DESCRIPTION


def add_arguments(p: argparse.ArgumentParser) -> None:
    recursors.add_arguments(p)


def run(args: argparse.Namespace) -> int:
    return recursors.run(args)
