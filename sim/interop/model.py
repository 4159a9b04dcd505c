"""The resolver model beside the binaries: the names the project's resolver asks the servers
with a stock recursor's profile (``resolver_model``, :mod:`nodes.resolver.minimise`) on the
harness's sessions (:func:`sessions`, each on a fresh resolver), in memory on the harness's
own hierarchy, and how they compare with the names that recursor asked (its capture:
``probes[…].cost.asked``; :func:`alike`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dnslib import QTYPE, DNSRecord

from nodes.dns.wire import intent_qname
from nodes.resolver.config import ResolverConfig
from nodes.resolver.minimise import PROFILES
from nodes.resolver.types import Outgoing
from sim.engines.memory import MemoryNetwork

if TYPE_CHECKING:
    from sim.build.hierarchy import Hierarchy

PRIMING = ". NS @."  # the root's NS set asked of the root (RFC 8109)
#: one probe: its name in the harness, the name asked, its type
Probe = tuple[str, str, str]
STUB = ("127.0.0.7", 40000)


def sessions(meta: dict[str, Any]) -> list[list[Probe]]:
    """The harness's sessions the model replays (each on a fresh resolver): the qname walk
    cold, warm (its second intent) and repeated; the rank probes (ten intents' qname walks
    one after another, K = ``rank_k``); every draft's questions, then the host's A."""
    k, service = meta["k"], meta["service"]
    first, second = (intent_qname(text, k, service) for text in meta["intents"])
    qname: list[Probe] = [("qname cold", first, "SRV"), ("qname warm", second, "SRV"),
                          ("qname repeat", first, "SRV")]
    rank: list[Probe] = [(f"rank {n}", intent_qname(text, meta["rank_k"], service), "SRV")
                         for n, text in enumerate(meta.get("rank_intents", []))]
    drafts: list[Probe] = [(key, name, qtype) for key, name, qtype in meta.get("drafts", [])]
    if meta.get("draft_host"):
        drafts.append(("draft host A", meta["draft_host"][0], "A"))
    return [session for session in (qname, rank, drafts) if session]


def model_asked(hierarchy: Hierarchy, session: list[Probe], profile: str
                ) -> dict[str, list[str]]:
    """Per probe of one session, ``qname QTYPE @zone`` of every query the model sent
    upstream, in order."""
    resolver = hierarchy.resolver(seed=1, config=ResolverConfig(resolver_model=profile))
    net = MemoryNetwork(hierarchy, resolver)
    asked: list[str] = []

    def tap(out: Outgoing) -> None:
        if out.reply:
            return
        q = DNSRecord.parse(out.data).q
        zone = hierarchy.zone_of.get(out.dst[0], out.dst[0])
        asked.append(f"{str(q.qname).lower()} {QTYPE.get(q.qtype)} @{zone}")

    net.tap = tap
    got: dict[str, list[str]] = {}
    for probe, name, qtype in session:
        asked.clear()
        resolver.receive(DNSRecord.question(name, qtype).pack(), STUB, net.now)
        net.run()
        got[probe] = list(asked)
    return got


def compare(hierarchy: Hierarchy, meta: dict[str, Any], resolvers: dict[str, Any]
            ) -> dict[str, Any]:
    """For each recursor measured (plain variant) that has a profile: per probe, the
    binary's names, the model's, whether they are :func:`alike` and how many queries the
    binary resent."""
    hierarchy.reset()  # unsigned, as the plain variant
    out: dict[str, Any] = {}
    for name, res in resolvers.items():
        if name not in PROFILES:
            continue
        probes = res.get("variants", {}).get("plain", {}).get("probes", {})
        rows: dict[str, Any] = {}
        for session in sessions(meta):
            if session[0][0] == "qname cold" and "qname cold" in probes:  # then the targets'
                targets = probes["qname cold"]["answer"].get("srv", [])  # A, in the order
                session = session + [(f"qname follow-up A {n}", target, "A")  # the binary
                                     for n, target in enumerate(targets)]  # answered them
            if not all(probe in probes for probe, _, _ in session):
                continue
            for probe, asked in model_asked(hierarchy, session, name).items():
                binary = probes[probe]["cost"]["asked"]
                rows[probe] = {"binary": binary, "model": asked, "same": alike(binary, asked),
                               "resent": len(binary) - len(resent_once(binary))}
        out[name] = rows
    return out


def alike(binary: list[str], model: list[str]) -> bool:
    """The same queries in the same order, a query sent again at once (a retransmission
    after a timeout: when is the machine's, not the pattern's) counted once; the priming
    query may come first or second (BIND primes beside the first query it sends, and
    either may leave first)."""
    binary = resent_once(binary)
    if binary == model:
        return True
    head = 2  # where priming may be
    return (binary.count(PRIMING) == model.count(PRIMING) == 1
            and PRIMING in binary[:head] and PRIMING in model[:head]
            and [q for q in binary if q != PRIMING] == [q for q in model if q != PRIMING])


def resent_once(asked: list[str]) -> list[str]:
    """``asked`` without a query that repeats the one just before it."""
    return [q for i, q in enumerate(asked) if i == 0 or asked[i - 1] != q]
