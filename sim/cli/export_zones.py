"""``tooldns export-zones DIR``: the hierarchy ``tooldns serve`` would run, written as master
files plus NSD, Knot and BIND configuration (the writing is sim.interop.export's)."""

from __future__ import annotations

import argparse
import sys

from sim.cli.common import add_namespace_args, namespace

HELP = "write the hierarchy's zones as master files plus nsd.conf, knot.conf and named.conf"
DESCRIPTION = (
    "Write every zone of the hierarchy `tooldns serve` would run with the same options as an "
    "RFC 1035 master file (DIR/<zone>.zone, the root as root.zone) and configuration "
    "fragments for NSD, Knot and BIND serving them as primary zones. Only static records are "
    "exported (intent answers are per query, whether the intent rides in the option or in "
    "the name: a static server answers NXDOMAIN where ToolDNS has the empty non-terminals "
    "above intent names, e.g. _mcp._tcp.<zone>). The scorer does not change the records.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``tooldns export-zones DIR`` (serve's namespace options)."""
    p.add_argument("dir", metavar="DIR", help="output folder (created if missing)")
    add_namespace_args(p)


def run(args: argparse.Namespace) -> int:
    """Build the hierarchy, export it, print one line; 0 done, 1 failed."""
    from analysis.files import OutputError
    from nodes.authoritative.zonefile import ZoneFileError
    from sim.build.hierarchy import build_hierarchy
    from sim.interop.export import export_zones

    ns = namespace(args)
    hierarchy = build_hierarchy(ns, replicas=args.replicas, scorer=args.scorer)
    try:
        result = export_zones(hierarchy, args.dir, source=f"namespace {ns.origin}")
    except (ZoneFileError, OutputError) as exc:
        print(f"tooldns export-zones: error: {exc}", file=sys.stderr)
        return 1
    for warning in result.warnings:
        print(f"tooldns export-zones: warning: {warning}", file=sys.stderr)
    print(result.summary())
    return 0
