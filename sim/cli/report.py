"""``tooldns report``: report.html and report.md of a run, sweep or evaluation folder (the
work and its options are analysis.report's)."""

from __future__ import annotations

import argparse

from analysis import report

HELP = "write report.html and report.md of a run, sweep or evaluation folder"
DESCRIPTION = report.DESCRIPTION


def add_arguments(p: argparse.ArgumentParser) -> None:
    report.add_arguments(p)


def run(args: argparse.Namespace) -> int:
    return report.run(args)
