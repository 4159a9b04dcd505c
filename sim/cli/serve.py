"""``tooldns serve``: every authoritative server of a namespace and a recursive resolver on
loopback addresses, until Ctrl-C or ``--duration``."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from sim.cli.common import (
    DEFAULT_OPTION_CODE,
    add_dnssec_args,
    add_namespace_args,
    consoles,
    dnssec_problem,
    error,
    key_seed,
    namespace,
    namespace_problem,
)

HELP = "start a whole hierarchy and a resolver on 127.0.0.0/8"
DESCRIPTION = (
    "Start every authoritative server of a namespace and a recursive resolver on "
    "loopback addresses (real UDP and TCP sockets), until Ctrl-C or --duration.\n"
    "Ask it with `tooldns query`, dig or any stub resolver.")


def transfer_network(text: str) -> str:
    """The argparse type of ``--allow-transfer``: a network or an address."""
    import ipaddress

    try:
        return str(ipaddress.ip_network(text, strict=False))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a network or address: {text!r} (e.g. 10.0.0.0/8, 127.0.0.1, ::1)") from None


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_namespace_args(p)
    p.add_argument("--port", type=int, default=15353, help="DNS port of every server")
    p.add_argument("--resolver", default="127.0.53.1", help="resolver listening address")
    p.add_argument("--option-code", type=int, default=DEFAULT_OPTION_CODE,
                   help="EDNS0 option code carrying the intent")
    p.add_argument("--manifest", help="write role/zone/address/port of every server as JSON")
    p.add_argument("--show", type=int, default=25, help="servers to list on start")
    p.add_argument("--duration", type=float, help="stop after this many seconds")
    p.add_argument("--cache-max-bytes", type=int, default=64 * 2**20,
                   help="bound on the resolver's cache, bytes (estimated; LRU eviction; "
                   "scenario runs default to 512 MiB)")
    p.add_argument("--max-clients", type=int, default=10_000,
                   help="stub queries the resolver works on at once (more are dropped)")
    p.add_argument("--packet-cache-bytes", type=int, default=2**20,
                   help="bound on each server's packet cache, bytes")
    p.add_argument("--tcp-clients", type=int, default=256,
                   help="TCP connections each server and the resolver keep (the one that "
                   "made least progress is closed to admit a new one)")
    p.add_argument("--allow-transfer", action="append", type=transfer_network,
                   metavar="CIDR", help="a network or address allowed to transfer the zones "
                   "by AXFR/IXFR over TCP (repeatable); by default none is: every transfer "
                   "is REFUSED, as NSD and Knot do until secondaries are named")
    p.add_argument("--dot", action="store_true",
                   help="also serve DNS over TLS (RFC 7858) at every server and the resolver, "
                   "with a certificate for dot.tools.test from a CA made at start (fresh keys "
                   "each time; see --dot-ca)")
    p.add_argument("--dot-port", type=int, metavar="PORT",
                   help="with --dot: the DNS-over-TLS port (default: 853 beside --port 53, "
                   "moved with it: --port + 800)")
    p.add_argument("--dot-ca", metavar="FILE",
                   help="with --dot: write the CA certificate (PEM) here, for clients that "
                   "verify (kdig +tls-ca=FILE +tls-hostname=dot.tools.test)")
    p.add_argument("--resolver-upstream", choices=("tls", "udp"),
                   help="how the resolver asks the servers: tls (DNS over TLS, verifying "
                   "their certificate, never falling back to clear text; the default with "
                   "--dot, which it needs) or udp (clear text, TCP after TC; the default "
                   "without --dot)")
    add_dnssec_args(p, "--dnssec", "sign every zone (Ed25519 keys derived from --key-seed): "
                    "DO queries get RRSIGs and NSEC proofs, DNSKEY and DS are answered, "
                    "AXFR carries the signed zone; the resolver validates (AD) and the "
                    "trust anchor (the root's DS) is printed and in the manifest")
    p.add_argument("--aaaa", action="store_true",
                   help="tool targets also get AAAA records (fd74:6f6f:6c73::<IPv4>, a ULA) "
                   "beside A; glue stays IPv4")
    p.add_argument("--org-zones", action="store_true",
                   help="the root also delegates example., where every tool's organisation "
                   "publishes it as DNS-AID, ANS v2, DN-ANR, AID and DNS-SD do "
                   "(docs/schemes.md)")


def _dot_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the DNS-over-TLS options; fills in ``args.dot_port`` and
    ``args.resolver_upstream``."""
    if (args.dot_port is not None or args.dot_ca) and not args.dot:
        return "--dot-port and --dot-ca need --dot"
    if args.resolver_upstream == "tls" and not args.dot:
        return "--resolver-upstream tls needs --dot (the servers' DNS-over-TLS listeners)"
    if args.resolver_upstream is None:
        args.resolver_upstream = "tls" if args.dot else "udp"
    if args.dot:
        from sim.accounting import dot_port

        port = args.dot_port if args.dot_port is not None else dot_port(args.port)
        if not 0 < port < 65536 or port == args.port:
            return (f"DNS-over-TLS port {port} is not a free port beside --port {args.port} "
                    f"(1-65535, not the DNS port): set --dot-port")
        args.dot_port = port
    return None


def run(args: argparse.Namespace) -> int:
    import asyncio

    from rich.table import Table

    from sim.build.hierarchy import build_hierarchy
    from sim.sockets.hierarchy import LiveHierarchy
    from sim.sockets.tcp import TcpLimits

    problem = (namespace_problem(args) or _dot_problem(args)
               or dnssec_problem(args, "--dnssec"))
    if problem is not None:
        error("serve", problem)
        return 2
    dot = None
    if args.dot:
        import secrets

        from sim.build.hierarchy import dot_setup

        dot = dot_setup(secrets.randbits(128))  # keys derive from the seed: a secret one
    ns = namespace(args)
    hierarchy = build_hierarchy(ns, replicas=args.replicas, scorer=args.scorer,
                                option_code=args.option_code,
                                packet_cache_bytes=args.packet_cache_bytes, aaaa=args.aaaa,
                                org_zones=args.org_zones)
    anchor = None
    if args.sign:
        from sim.build.trust import sign_hierarchy

        anchor = sign_hierarchy(hierarchy, key_seed(args))
    live = LiveHierarchy(hierarchy, port=args.port, resolver_address=args.resolver,
                         cache_max_bytes=args.cache_max_bytes, max_clients=args.max_clients,
                         tcp_limits=TcpLimits(per_listener=args.tcp_clients),
                         allow_transfer=args.allow_transfer, dot=dot,
                         dot_port=args.dot_port or 0,
                         dot_upstream=args.resolver_upstream == "tls", trust_anchor=anchor)
    console = consoles.out

    async def main() -> None:
        try:
            await live.start()
        except OSError:
            live.close()
            raise
        table = Table(title=f"ToolDNS hierarchy on port {args.port}: {ns.origin}")
        for col in ("role", "zone", "address", "org"):
            table.add_column(col)
        shown = live.manifest()["servers"]
        for m in shown[: args.show]:
            table.add_row(m["role"], m["zone"], m["address"], m["org"] or "")
        console.print(table)
        if len(shown) > args.show:
            console.print(f"… and {len(shown) - args.show} more servers (see --manifest)")
        stubs = "UDP, TCP and TLS" if dot is not None else "UDP and TCP"
        upstream = "DNS over TLS" if args.resolver_upstream == "tls" else "UDP and TCP"
        console.print(f"resolver {args.resolver}:{args.port} (stub clients: {stubs}; "
                      f"to the servers: {upstream}"
                      f"{'; validating' if anchor else ''})")
        if anchor is not None:
            console.print(f"signed zones; trust anchor: . DS {anchor}", highlight=False,
                          soft_wrap=True)  # one line: it is copied into configurations
        if dot is not None:
            console.print(f"DNS over TLS on port {args.dot_port} at every server and the "
                          f"resolver (certificate for dot.tools.test)")
            if args.dot_ca:
                Path(args.dot_ca).write_text(dot.ca.cert_pem, encoding="utf-8")
                console.print(f"CA certificate written to {args.dot_ca}")
        if args.manifest:
            live.write_manifest(args.manifest)
            console.print(f"manifest written to {args.manifest}")
        console.print("[bold]ready[/bold]", highlight=False)
        sys.stdout.flush()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        if args.duration:
            loop.call_later(args.duration, stop.set)
        await stop.wait()
        live.close()
        await asyncio.sleep(0.1)  # aborted connections' handlers end before the loop does

    try:
        asyncio.run(main())
    except OSError as exc:  # a busy or foreign address: say which, no traceback
        error("serve", f"{exc.strerror or exc}; is another `tooldns serve` running? "
                       f"(--port, --resolver; addresses other than 127.0.0.1 need Linux's "
                       f"127.0.0.0/8 loopback)")
        return 1
    return 0
