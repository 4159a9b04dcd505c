"""Stock recursive resolvers in front of a served ToolDNS hierarchy: a compatibility matrix.

Does ToolDNS work through the DNS resolvers people actually run? Five of them (Unbound,
BIND, Knot Resolver, PowerDNS Recursor and dnsdist) are put in front of a hierarchy served
with :class:`sim.sockets.hierarchy.LiveHierarchy` on port 53 in a network namespace of its
own, and each is asked the same stub queries. The parts:

* :mod:`sim.interop.resolvers` — each resolver's configuration (:class:`Spec`, ``SPECS``);
* :mod:`sim.interop.process` — a started resolver process;
* :mod:`sim.interop.probe` — the stub queries, their windows and upstream cost;
* :mod:`sim.interop.matrix` — the run, outside as root and inside the namespace;
* :mod:`sim.interop.rows` — the probes turned into the matrix's cells;
* :mod:`sim.interop.tables` — the matrix, details, cost and log lines as markdown.

This module is the command: ``python3 -m sim.interop.recursors [--resolver NAME ...]
[--variant plain|dnssec] [--json FILE] [--markdown]`` prints the matrix; :func:`add_arguments`
and :func:`run` are that command, shaped for ``tooldns recursors``. ``docs/recursors.md``
tells how to reproduce a row by hand.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from sim.interop.matrix import RecursorError, run_matrix
from sim.interop.resolvers import RESOLVERS, VARIANTS
from sim.interop.tables import (
    cost_markdown,
    details_markdown,
    matrix_markdown,
    model_markdown,
    quirks_markdown,
    rank_markdown,
)

HELP = "stock DNS resolvers in front of a served hierarchy (compatibility matrix)"
DESCRIPTION = (
    "Start a small ToolDNS hierarchy on port 53 in a fresh network namespace (only "
    "loopback), put Unbound, BIND, Knot Resolver, PowerDNS Recursor and dnsdist in front of "
    "it one at a time, send each the same stub queries (cursor walk with the intent option, "
    "qname walk, expanded SRV, A, DNSSEC, the rank order of ten top-K answers) and print "
    "what works and what it cost upstream. "
    "Needs root (unshare --net, port 53) and the resolvers' binaries (bash .ci/setup).")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``python3 -m sim.interop.recursors`` and of ``tooldns recursors``."""
    p.add_argument("--resolver", action="append", choices=RESOLVERS, metavar="NAME",
                   help=f"resolver to test, repeatable ({', '.join(RESOLVERS)}; default: all)")
    p.add_argument("--variant", action="append", choices=VARIANTS,
                   help="plain (unsigned hierarchy) and/or dnssec (signed, validating "
                   "resolvers); default: both")
    p.add_argument("--json", metavar="FILE", help="write the full results as JSON")
    p.add_argument("--markdown", action="store_true",
                   help="print markdown tables (matrix, details, cost, log lines)")
    p.add_argument("--keep", action="store_true",
                   help="keep the temporary folder (configurations, logs, pcap)")
    p.add_argument("--verbose-logs", action="store_true",
                   help="resolvers log every step (large logs, for reading; with --keep)")
    g = p.add_argument_group("namespace (small synthetic unless --catalog is given)")
    g.add_argument("--catalog", help="catalogue JSONL (e.g. ../shared/data/tools/catalog.jsonl)")
    g.add_argument("--limit", type=int, default=200, help="catalogue rows to load")
    g.add_argument("--tools", type=int, default=120, help="synthetic: number of tools")
    g.add_argument("--branching", type=int, default=3, help="synthetic: branching factor")
    g.add_argument("--depth", type=int, default=2, help="synthetic: depth below tools.")
    g.add_argument("--seed", type=int, default=7, help="synthetic tree; DNSSEC keys")


def run(args: argparse.Namespace) -> int:
    """Run the matrix and print it; 0 done, 1 failed (a resolver failed or no run)."""
    try:
        result = run_matrix(args.resolver or RESOLVERS, args.variant or VARIANTS,
                            catalog=args.catalog, limit=args.limit, tools=args.tools,
                            branching=args.branching, depth=args.depth, seed=args.seed,
                            keep=args.keep, verbose_logs=args.verbose_logs)
    except RecursorError as exc:
        print(f"sim.interop.recursors: error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        from analysis.files import OutputError, atomic_write

        text = json.dumps(result, indent=1) + "\n"
        try:
            atomic_write(Path(args.json),
                         lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
        except OutputError as exc:
            print(f"sim.interop.recursors: error: {exc}", file=sys.stderr)
            return 1
    print(matrix_markdown(result))
    if args.markdown:
        print()
        print(details_markdown(result))
        for variant in result.get("aware", {}):
            print()
            print(f"Upstream cost ({variant}):")
            print()
            print(cost_markdown(result, variant))
        if result.get("model"):
            print()
            print("The resolver model as each recursor (resolver_model), against the binary "
                  "(plain: the qname walk and its targets, ten walks in a row, the drafts' "
                  "questions):")
            print()
            print(model_markdown(result))
        print()
        print("Rank order (plain): the leaf's top K as relayed, read from SRV priority:")
        print()
        print(rank_markdown(result))
        quirks = quirks_markdown(result)
        if quirks:
            print()
            print(quirks)
    else:
        for name, res in result["resolvers"].items():
            for variant, v in res.get("variants", {}).items():
                if v.get("status") == "failed":
                    print(f"{name} ({variant}): {v.get('error')}", file=sys.stderr)
    meta = result.get("meta", {})
    if meta.get("workdir"):
        print(f"configurations and logs kept in {meta['workdir']}", file=sys.stderr)
    failed = any(v.get("status") == "failed" for r in result["resolvers"].values()
                 for v in r.get("variants", {}).values())
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python3 -m sim.interop.recursors``: parse, run, print; 130 on an interrupt."""
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(prog="python3 -m sim.interop.recursors", description=DESCRIPTION,
                                allow_abbrev=False)
    add_arguments(p)
    args = p.parse_args(argv)
    try:
        return run(args)
    except KeyboardInterrupt:
        print("sim.interop.recursors: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
