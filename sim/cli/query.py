"""``tooldns query``: one intent walked through a hierarchy started by ``tooldns serve``
(every step printed, like ``dig +trace``), or one stub query sent to its resolver."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sim.cli.common import DEFAULT_OPTION_CODE, consoles, error

# nodes.resolver.merge.SEARCHES, spelt out so that --help imports nothing heavy
SEARCH_CHOICES = ("split", "global", "a2x-get_one", "a2x-get_important", "a2x-get_all")

if TYPE_CHECKING:
    from nodes.resolver.types import DiscoveryResult

HELP = "discover tools through a served hierarchy"
DESCRIPTION = (
    "Walk a hierarchy started by `tooldns serve` for one intent and print every "
    "step (like dig +trace), or send one stub query to its resolver.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("intent", help="what the agent wants, in words")
    p.add_argument("--service", default="mcp", choices=["mcp", "a2a", "rest", "skill"])
    p.add_argument("-k", type=int, default=3, help="top-K per pruning step (0 = all)")
    p.add_argument("--beam", type=int, default=1, help="branches explored per level")
    p.add_argument("--search", choices=SEARCH_CHOICES, default="split",
                   help="global: keep the best B children of each level by the servers' "
                   "scores (scores option); a2x-get_one|get_important|get_all: A2X's "
                   "progressive search (every child the policy selects, by those scores)")
    p.add_argument("--merge", default="auto",
                   help="how the leaves' tools are merged, a name in "
                   "nodes.resolver.merge.MERGES: auto (by score with --search global, else "
                   "round-robin), score, round-robin")
    p.add_argument("--start", default="tools.", help="zone to start at (trust: an org zone)")
    p.add_argument("--manifest", default="tooldns-manifest.json",
                   help="written by `tooldns serve --manifest`")
    p.add_argument("--via-resolver", action="store_true",
                   help="send one stub query to the served resolver instead of walking here")
    p.add_argument("--timeout", type=float, default=5.0, help="seconds (--via-resolver)")
    p.add_argument("--seed", type=int, default=0, help="query IDs of the walk")
    p.add_argument("--mode", choices=["aware", "qname"], default="aware",
                   help="aware: cursor names with the intent option; qname: the intent in "
                   "the query name (k3.<words>._mcp._tcp.tools.), CNAMEs followed, as a "
                   "stock resolver does it")


def _load_manifest(path: str) -> dict[str, Any]:
    try:
        manifest: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SystemExit(
            f"tooldns query: error: {path}: no such manifest (start `tooldns serve "
            f"--manifest {path}`)") from None
    return manifest


def run(args: argparse.Namespace) -> int:
    import asyncio
    import random

    from nodes.resolver.config import ResolverConfig
    from nodes.resolver.core import RecursiveResolver
    from nodes.resolver.merge import MERGES
    from nodes.resolver.types import Discovery
    from sim.sockets.node import NodeEndpoint

    if args.merge not in MERGES:
        error("query", f"--merge: unknown policy {args.merge!r} (one of {', '.join(MERGES)})")
        return 2
    manifest = _load_manifest(args.manifest)
    port = manifest["port"]
    code = manifest.get("option_code", DEFAULT_OPTION_CODE)
    if args.via_resolver:
        return _query_via_resolver(args, manifest["resolver"]["address"], port, code)
    zone_of = {m["address"]: m["zone"] for m in manifest["servers"]}
    config = ResolverConfig(dns_port=port, option_code=code, beam=args.beam,
                            search=args.search, merge=args.merge, mode=args.mode)
    resolver = RecursiveResolver(manifest["root_hints"], random.Random(args.seed), config)
    request = Discovery(args.intent, service=args.service, k=args.k, start=args.start,
                        beam=args.beam)

    async def main() -> DiscoveryResult:
        endpoint = NodeEndpoint(resolver)
        await endpoint.start()
        try:
            return await endpoint.discover(request)
        finally:
            endpoint.close()

    result = asyncio.run(main())
    print_walk(result, zone_of)
    return 0 if result.endpoints else 1


def print_walk(result: DiscoveryResult, zone_of: dict[str, str] | None = None) -> None:
    """The steps of one discovery and what it found."""
    from rich.table import Table

    console = consoles.out
    zone_of = zone_of or {}
    table = Table(title=f"walk for {result.request.intent!r} ({result.rounds} rounds, "
                        f"{result.latency * 1000:.2f} ms)")
    for col in ("#", "name", "type", "server", "zone", "via", "rtt ms", "bytes out", "bytes in",
                "outcome"):
        table.add_column(col)
    for i, s in enumerate(result.steps, 1):
        rtt = f"{s.rtt * 1000:.2f}" if s.rtt is not None else "-"
        table.add_row(str(i), s.qname, s.qtype, f"{s.server[0]}:{s.server[1]}",
                      zone_of.get(s.server[0], ""), s.transport, rtt, str(s.bytes_out),
                      str(s.bytes_in), s.outcome)
    console.print(table)
    if result.endpoints:
        found = Table(title="endpoints (best first; a stub's answer carries the rank as "
                            "SRV priority)")
        for col in ("rank", "target", "address", "port", "leaf zone"):
            found.add_column(col)
        for rank, e in enumerate(result.endpoints):
            found.add_row(str(rank), e.target, e.address or "", str(e.port), e.zone)
        console.print(found)
    else:
        console.print(f"[red]no endpoints[/red] ({result.rcode}; {result.error})")


def _query_via_resolver(args: argparse.Namespace, address: str, port: int, code: int) -> int:
    """A plain stub query with the intent option (or, ``--mode qname``, in the name), as any
    DNS client would send it."""
    import random
    import socket

    from dnslib import QTYPE, DNSHeader, DNSQuestion, DNSRecord

    from nodes.dns.wire import Intent, cursor_name, intent_qname, opt_record

    query = DNSRecord(DNSHeader(id=random.Random(args.seed).randrange(1, 65536), rd=1))
    if args.mode == "qname":
        query.add_question(DNSQuestion(intent_qname(args.intent, args.k, args.service,
                                                    args.start), QTYPE.SRV))
        query.add_ar(opt_record(None, code))
    else:
        query.add_question(DNSQuestion(cursor_name(args.service, args.start), QTYPE.SRV))
        query.add_ar(opt_record(Intent(args.intent, k=args.k), code))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(args.timeout)
        sock.sendto(query.pack(), (address, port))
        try:
            data, _ = sock.recvfrom(65535)
        except TimeoutError:
            error("query", f"no answer from {address}:{port} within {args.timeout:g} s")
            return 1
    reply = DNSRecord.parse(data)
    consoles.out.print(str(reply), markup=False, highlight=False)
    return 0 if reply.rr else 1
