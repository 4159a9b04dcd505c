"""Forged answers at the live resolver (raw sockets: root); accepted forgeries are counted."""

from __future__ import annotations

import argparse
import os
import socket
import struct
import threading
import time

from benchmarks.robustness.serving import DnsServer, ask, stub_query
from benchmarks.robustness.table import table


def _raw_udp(sock: socket.socket, src: tuple[str, int], dst: tuple[str, int],
             payload: bytes) -> None:
    """One UDP datagram with a forged source address, through a raw socket (root)."""
    udp = struct.pack("!HHHH", src[1], dst[1], 8 + len(payload), 0) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, socket.IPPROTO_UDP, 0,
                     socket.inet_aton(src[0]), socket.inet_aton(dst[0]))
    sock.sendto(ip + udp, (dst[0], 0))


def _forged_referral(qid: int, qname: str, rogue: str) -> bytes:
    """A referral for ``tools.`` to a name server at ``rogue``, as an attacker forges it."""
    from dnslib import NS, QTYPE, RR, A, DNSHeader, DNSQuestion, DNSRecord

    m = DNSRecord(DNSHeader(id=qid, qr=1, aa=1))
    m.add_question(DNSQuestion(qname, QTYPE.SRV))
    m.add_auth(RR("tools.", QTYPE.NS, rdata=NS("ns.evil.tools."), ttl=86_400))
    m.add_ar(RR("ns.evil.tools.", QTYPE.A, rdata=A(rogue), ttl=86_400))
    return m.pack()


def run(args: argparse.Namespace) -> dict:
    """Forged answers against the live resolver; accepted forgeries are counted.

    1. Targeted (one query held pending at a root that never answers; raw sockets forge
       the root's own address): every ID at the resolver's listening port; every wrong ID
       at the query's own source port; the right ID from another address; the right ID,
       port and address with another question; then the control, everything right.
    2. Blind after restart (the original attack): ``--restarts`` fresh resolvers, each
       sprayed right after start with referrals for the IDs the old fixed seed produced,
       at the listening port and ``--ports`` guessed ports, while a stub asks; a walk is
       poisoned if the rogue address reaches the resolver's cache.
    """
    import asyncio
    import random

    if os.geteuid() != 0:
        return {"kind": "spoof",
                "skipped": "forging source addresses needs a raw socket (run as root)"}
    raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    rows: list[dict] = []

    async def targeted() -> None:
        from nodes.resolver.config import ResolverConfig
        from nodes.resolver.core import RecursiveResolver
        from nodes.resolver.types import Discovery
        from sim.sockets.node import NodeEndpoint

        root = ("127.0.9.9", args.port)  # nothing listens there: the query stays pending
        me = "127.0.53.9"
        config = ResolverConfig(dns_port=args.port, timeout=600.0, max_attempts=1)
        resolver = RecursiveResolver([root[0]], random.Random(0), config)
        ep = NodeEndpoint(resolver, (me, args.port), source_ip=me)
        await ep.start()
        task = asyncio.get_running_loop().create_task(ep.discover(Discovery("weather")))
        await asyncio.sleep(0.2)
        ((qid, pending),) = resolver._pending.items()
        (port,) = ep._upstream.ports
        qname = pending.task.asks[0].qname

        async def spray(name: str, packets: list[tuple[tuple, tuple, bytes]]) -> None:
            before = resolver.is_pending(qid)
            t0 = time.perf_counter()
            for i, (src, dst, data) in enumerate(packets, 1):
                _raw_udp(raw, src, dst, data)
                if i % 32 == 0:
                    await asyncio.sleep(0.002)  # the resolver reads as a real one would
            await asyncio.sleep(0.5)
            accepted = int(before and not resolver.is_pending(qid))
            rows.append({"case": name, "forged": len(packets), "accepted": accepted,
                         "seconds": round(time.perf_counter() - t0, 1),
                         "counters": {k: v for k, v in {**ep.stats, **resolver.stats}.items()
                                      if k in ("response_on_listen",
                                               "upstream_unexpected_answer",
                                               "mismatched_question")}})

        ids = range(1, 65536)
        await spray("every ID at the listening port",
                    [(root, (me, args.port), _forged_referral(i, qname, args.rogue))
                     for i in ids])
        await spray("every wrong ID at the query's port",
                    [(root, (me, port), _forged_referral(i, qname, args.rogue))
                     for i in ids if i != qid])
        await spray("right ID and port, other source",
                    [(("127.0.9.8", args.port), (me, port),
                      _forged_referral(qid, qname, args.rogue))])
        await spray("right ID, port, source; other question",
                    [(root, (me, port), _forged_referral(qid, "_mcp._tcp._evil.tools.",
                                                         args.rogue))])
        await spray("control: everything right (an on-path attacker)",
                    [(root, (me, port), _forged_referral(qid, qname, args.rogue))])
        task.cancel()
        ep.close()

    asyncio.run(targeted())
    old = random.Random(0)  # the IDs the resolver used to send after every restart
    old_ids = [old.randrange(1, 65536) for _ in range(args.ids)]
    rng = random.Random(args.seed)
    poisoned, answered = 0, 0
    sent = 0
    for _ in range(args.restarts):
        srv = DnsServer(args)
        try:
            me = srv.resolver
            root = (srv.manifest["root_hints"][0], srv.port)
            ports = [me[1], *(rng.randint(1024, 65535) for _ in range(args.ports))]
            stub = threading.Thread(target=ask, args=(me, stub_query("weather"), 10.0))
            stub.start()
            for qid in old_ids:
                for p in ports:
                    _raw_udp(raw, root, (me[0], p),
                             _forged_referral(qid, "_mcp._tcp._tools.", args.rogue))
                    sent += 1
            stub.join()
            answered += 1
            poisoned += srv.counters()["poisoned"]
        finally:
            srv.close()
    rows.append({"case": f"blind after restart ({args.restarts} restarts, {args.ids} old-seed "
                         f"IDs x {args.ports + 1} ports)", "forged": sent,
                 "accepted": poisoned, "seconds": None, "counters": {}})
    raw.close()
    control = rows[-2]  # the on-path forgery: accepted, which shows the checks are live
    return {"kind": "spoof", "cases": rows, "control_accepted": control["accepted"],
            "accepted_total": sum(r["accepted"] for r in rows if r is not control)}


HELP = 'forged answers at the resolver (raw sockets: root)'
USES_DNS = True


def add_options(p: argparse.ArgumentParser) -> None:
    """This probe's own options."""
    p.add_argument("--restarts", type=int, default=5)
    p.add_argument("--ids", type=int, default=50, help="old-seed IDs sprayed per restart")
    p.add_argument("--ports", type=int, default=20, help="guessed ports per restart")


def show(result: dict) -> None:
    """Print the figures."""
    print(result["machine"])
    if "skipped" in result:
        print("skipped:", result["skipped"])
        return
    table(result["cases"])
    print(f"forgeries accepted: {result['accepted_total']} (control, an on-path attacker "
          f"with everything right: {result['control_accepted']})")
