"""``tooldns export-zones DIR``: the hierarchy ``tooldns serve`` would run, written as master
files plus NSD, Knot and BIND configuration (the writing is sim.interop.export's)."""

from __future__ import annotations

import argparse
import sys

from sim.cli.common import (
    add_dnssec_args,
    add_namespace_args,
    dnssec_problem,
    error,
    key_seed,
    namespace,
    namespace_problem,
)

HELP = "write the hierarchy's zones as master files plus nsd.conf, knot.conf and named.conf"
DESCRIPTION = (
    "Write every zone of the hierarchy `tooldns serve` would run with the same options as an "
    "RFC 1035 master file (DIR/<zone>.zone, the root as root.zone) and configuration "
    "fragments for NSD, Knot and BIND serving them as primary zones. Only static records are "
    "exported (intent answers are per query, whether the intent rides in the option or in "
    "the name); wildcards of a private-use type at *._svc._proto.<zone> make the names "
    "above intent names exist, so a static server answers NODATA there as ToolDNS does. "
    "The scorer does not change the records. With --sign every zone is written signed, as "
    "`tooldns serve --dnssec` serves it with the same options and key seed (DNSKEY, the "
    "children's DS, an NSEC chain, RRSIGs), so the copies validate from the same trust "
    "anchor (printed). DIR must be printable ASCII without \" or \\ (it is quoted in the "
    "configurations).")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``tooldns export-zones DIR`` (serve's namespace options)."""
    p.add_argument("dir", metavar="DIR", help="output folder (created if missing)")
    add_namespace_args(p)
    p.add_argument("--aaaa", action="store_true",
                   help="tool targets also get AAAA records (fd74:6f6f:6c73::<IPv4>, a ULA) "
                   "beside A, as `tooldns serve --aaaa` serves them")
    p.add_argument("--org-zones", action="store_true",
                   help="also the organisations' zones under example. (the DNS-native "
                   "drafts' records), as `tooldns serve --org-zones` serves them")
    add_dnssec_args(p, "--sign", "write the zones signed (DNSKEY, DS, NSEC chain, RRSIG), "
                    "as `tooldns serve --dnssec` serves them")


def run(args: argparse.Namespace) -> int:
    """Build the hierarchy, export it, print one line; 0 done, 1 failed, 2 a folder the
    configurations cannot name (checked first: nothing built, nothing written)."""
    from pathlib import Path

    from analysis.files import OutputError
    from nodes.authoritative.zonefile import ZoneFileError
    from sim.build.hierarchy import build_hierarchy
    from sim.interop.export import ExportPathError, export_zones, path_problem

    problem = (path_problem(Path(args.dir).resolve()) or namespace_problem(args)
               or dnssec_problem(args, "--sign"))
    if problem is not None:
        error("export-zones", problem)
        return 2
    ns = namespace(args)
    hierarchy = build_hierarchy(ns, replicas=args.replicas, scorer=args.scorer, aaaa=args.aaaa,
                                org_zones=args.org_zones)
    anchor = None
    if args.sign:
        from sim.build.trust import sign_hierarchy

        anchor = sign_hierarchy(hierarchy, key_seed(args))
    try:
        result = export_zones(hierarchy, args.dir, source=f"namespace {ns.origin}")
    except ExportPathError as exc:  # the folder's path changed since (a symbolic link)
        error("export-zones", str(exc))
        return 2
    except (ZoneFileError, OutputError) as exc:
        error("export-zones", str(exc))
        return 1
    for warning in result.warnings:
        print(f"tooldns export-zones: warning: {warning}", file=sys.stderr)
    print(result.summary())
    if anchor is not None:
        print(f"trust anchor: . DS {anchor}")
    return 0
