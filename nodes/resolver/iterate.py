"""Stock iteration (Unbound's iterator): plain iterative resolution of a literal name, as
an unmodified resolver does — referrals towards the name, CNAMEs followed (at most
:data:`MAX_CNAMES`), the delegation sent beside a CNAME learned; unless an option is
forwarded (pass-through), every CNAME and answer RRset is cached by (name, type), and
NXDOMAIN by the SOA's TTL. With ``dnssec`` every reply is validated with the key of the
zone asked (a positive answer then earns the client AD; denials are not checked).

Used for the ``strip``, ``pass-through`` and ``qname`` modes and for any stub query that is
not a cursor walk. With a ``resolver_model`` other than the project's it iterates as that
stock recursor does (:mod:`nodes.resolver.minimise`: QNAME minimisation, priming, what it
caches and uses). A state machine the core drives (:data:`nodes.resolver.types.Rounds`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from dnslib import RR, DNSHeader, DNSLabel, DNSRecord

from nodes.dns.message import (
    RC_NOERROR,
    RC_NXDOMAIN,
    TYPE_A,
    TYPE_AAAA,
    TYPE_CNAME,
    TYPE_NS,
    TYPE_SOA,
    TYPE_SRV,
    Message,
)
from nodes.dns.svcb import TYPE_HTTPS, TYPE_SVCB
from nodes.dns.wire import Intent, is_subdomain, normalise
from nodes.dns.zone import Address
from nodes.resolver.caches import Known
from nodes.resolver.context import Context
from nodes.resolver.minimise import PROFILES, Profile, minimised
from nodes.resolver.types import Answer, Ask, DiscoveryResult, Reply, Rounds, rcode_text
from nodes.resolver.validate import fetch_keys, validated

MAX_CNAMES = 16  # CNAMEs followed for one question (BIND's max-restarts is 11, Unbound 11)

Final = tuple[Answer | None, str | None]  # the response to relay (or None) and the error


@dataclass(slots=True)
class _Chase:
    """One resolution under way: the name now asked, the CNAMEs followed, where to ask."""

    qname: str
    chain: list[RR]
    known: Known
    bailiwick: str = "."
    servers: tuple[Address, ...] = ()

    def follow(self, ctx: Context, cname: RR) -> None:
        """Go on with the CNAME's target, from the closest servers known for it."""
        self.chain.append(cname)
        self.qname = normalise(cname.rdata.label)
        self.bailiwick, self.servers = ctx.caches.servers_for(self.qname, self.known)


def plain(ctx: Context, qname: str, qtype: int, intent: Intent | None,
          result: DiscoveryResult) -> Rounds[Answer | None]:
    """A stub's plain query resolved: the response to relay, the error on ``result``."""
    msg, error = yield from iterate(ctx, qname, qtype, intent, result)
    result.error = error
    result.finished = ctx.now
    return msg


def iterate(ctx: Context, qname: str, qtype: int, intent: Intent | None,
            result: DiscoveryResult) -> Rounds[Final]:
    """Resolve ``qname``/``qtype`` (see the module docstring); ``intent`` is forwarded."""
    caches = ctx.caches
    chase = _Chase(normalise(qname), [], {})
    if caches.get(caches.negative, (chase.qname, qtype)) is not None:
        result.cache["negative_hit"] += 1
        result.rcode = "NXDOMAIN"
        return None, "NXDOMAIN"
    profile = PROFILES.get(ctx.config.resolver_model)
    if profile is not None:
        return (yield from _minimising(ctx, chase, qtype, intent, result, profile))
    answers = intent is None  # the answer depends on the name alone: cache it by name
    chase.bailiwick, chase.servers = caches.servers_for(chase.qname, chase.known)
    for _ in range(ctx.config.max_rounds):
        hit = _cached(ctx, chase, qtype, result) if answers else None
        if hit == "too long":
            break
        if hit == "followed":
            continue
        if hit is not None:
            return hit
        reply = yield from _ask(ctx, chase, chase.qname, qtype, intent, result)
        if reply.msg is None:
            result.rcode = "SERVFAIL"
            return None, reply.error
        final = _on_reply(ctx, chase, reply.msg, qtype, answers, result)
        if final is not None:
            return final
    return _give_up(chase, result)


def _ask(ctx: Context, chase: _Chase, name: str, qtype: int, intent: Intent | None,
         result: DiscoveryResult) -> Rounds[Reply]:
    """``name``/``qtype`` asked of the servers of the zone ``chase`` is in (with DNSSEC: the
    zone's key first, checked against its DS, and the reply validated)."""
    if ctx.config.dnssec:
        yield from fetch_keys(ctx, {chase.bailiwick: chase.servers}, result)
    (reply,) = yield [Ask(name, qtype, chase.servers, intent)]
    if ctx.config.dnssec and reply.msg is not None:
        reply = validated(ctx, reply, chase.bailiwick, result)
    return reply


def _cached(ctx: Context, chase: _Chase, qtype: int, result: DiscoveryResult,
            additional: bool = False) -> Final | Literal["followed", "too long"] | None:
    """What the cache holds for the name now asked: the answer (with the chain followed;
    ``additional``: with the targets' addresses kept beside it), "followed" when a cached
    CNAME moved ``chase`` on, "too long" when the chain is, else None."""
    caches = ctx.caches
    cached = caches.get(caches.answers, (chase.qname, qtype))
    if cached is not None:
        result.cache["answer_hit"] += 1
        out = chained(chase.chain, cached)
        extra = caches.get(caches.answers, (chase.qname, ADDITIONAL)) if additional else None
        if extra is not None:  # kept beside the answer (Profile.additional)
            out.ar = list(extra)
        return out, None
    cname = caches.get(caches.answers, (chase.qname, TYPE_CNAME))
    if cname is None:
        return None
    result.cache["cname_hit"] += 1
    if len(chase.chain) >= MAX_CNAMES:
        return "too long"
    chase.follow(ctx, cname[0])
    return "followed"


#: a key type of the answer cache beside an SRV, SVCB or HTTPS answer: the targets'
#: addresses that came with it (Profile.additional); no record type has this number (RR
#: types are 16 bits)
ADDITIONAL = 0x10000
TARGETED = frozenset({TYPE_SRV, TYPE_SVCB, TYPE_HTTPS})  # record types that name a target


def _keep_additional(ctx: Context, msg: Answer, qname: str, answer: list) -> None:
    """Keep the A and AAAA records of ``answer``'s targets that ``msg`` carried."""
    # dnslib's SVCB/HTTPS reader keeps the target as a list of labels, SRV's as a name
    targets = {normalise(str(DNSLabel(rr.rdata.target))) for rr in answer
               if rr.rtype in TARGETED}
    ar = msg.ar if isinstance(msg, DNSRecord) else msg.to_dnslib().ar
    extra = [rr for rr in ar if rr.rtype in (TYPE_A, TYPE_AAAA)
             and normalise(str(rr.rname)) in targets]
    if extra:
        ctx.caches.put(ctx.caches.answers, (qname, ADDITIONAL), extra,
                       min(rr.ttl for rr in extra))


def _on_reply(ctx: Context, chase: _Chase, msg: Answer, qtype: int, answers: bool,
              result: DiscoveryResult, beside: bool = True,
              additional: bool = False) -> Final | None:
    """What a response means: the final answer (or failure), else None with ``chase``
    moved on (a CNAME followed, a referral taken; ``beside``: the delegation sent with a
    CNAME learned; ``additional``: an SRV answer's target addresses kept beside it)."""
    caches = ctx.caches
    qname = chase.qname
    owned = [rr for rr in msg.rr if normalise(rr.rname) == qname]
    if owned:
        cname = next((rr for rr in owned if rr.rtype == TYPE_CNAME), None)
        if cname is None or qtype == TYPE_CNAME or any(rr.rtype == qtype for rr in owned):
            if answers:
                rrs = msg.rr if isinstance(msg, DNSRecord) else msg.to_dnslib().rr
                here = [rr for rr in rrs if normalise(rr.rname) == qname]
                caches.put(caches.answers, (qname, qtype), here, min(rr.ttl for rr in here))
                if additional and qtype in TARGETED:
                    _keep_additional(ctx, msg, qname, here)
            return (chained(chase.chain, msg) if chase.chain else msg), None
        if len(chase.chain) >= MAX_CNAMES:
            return _give_up(chase, result)
        ctx.stats["cnames_followed"] += 1
        if answers:
            caches.put(caches.answers, (qname, TYPE_CNAME), [cname], cname.ttl)
        if beside and any(rr.rtype == TYPE_NS for rr in msg.auth):  # the next zone, beside it
            caches.learn_referral(msg, chase.bailiwick, chase.known)
        chase.follow(ctx, cname)
        return None
    if msg.header.rcode == RC_NXDOMAIN or not any(rr.rtype == TYPE_NS for rr in msg.auth):
        result.rcode = rcode_text(msg.header.rcode)
        soa = [rr for rr in msg.auth if rr.rtype == TYPE_SOA]
        if soa and msg.header.rcode == RC_NXDOMAIN:
            caches.put(caches.negative, (qname, qtype), True, soa[0].ttl)
        if chase.chain:
            msg = chained(chase.chain, msg)
        return msg, None if msg.header.rcode == RC_NOERROR else "no such name"
    children = caches.learn_referral(msg, chase.bailiwick, chase.known)
    closer = [c for c in children if is_subdomain(qname, c)]
    if not closer:  # RFC-compliant resolvers reject a referral not towards qname
        ctx.stats["bogus_referral"] += 1
        result.rcode = "SERVFAIL"
        return None, f"referral to {children} does not lead to {qname}"
    chase.bailiwick = closer[0]
    chase.servers = chase.known.get(chase.bailiwick, ())
    if not chase.servers:
        result.rcode = "SERVFAIL"
        return None, f"no glue for {chase.bailiwick}"
    return None


def _minimising(ctx: Context, chase: _Chase, qtype: int, intent: Intent | None,
                result: DiscoveryResult, profile: Profile) -> Rounds[Final]:
    """:func:`iterate` as ``profile``'s recursor does it: the root primed, then at each zone
    one more label shown at a time (QTYPE A or NS) until a referral, an NXDOMAIN (nothing
    below, RFC 8020) or the full name, which is asked with its own type (Unbound: with A
    first); NODATA for a shown name means go on."""
    caches = ctx.caches
    if profile.primes and caches.get(caches.answers, (".", TYPE_NS)) is None:
        (reply,) = yield [Ask(".", TYPE_NS, caches.root_hints, None)]
        roots = [rr for rr in reply.msg.rr if rr.rtype == TYPE_NS] if reply.msg else []
        if roots:
            caches.put(caches.answers, (".", TYPE_NS), roots, min(rr.ttl for rr in roots))
    answers = intent is None
    chase.bailiwick, chase.servers = caches.servers_for(chase.qname, chase.known)
    labels, probe_a = 1, profile.full_as_a and qtype != TYPE_A
    rounds, chain = 0, 0  # the loop guard counts per name of the CNAME chain (bounded)
    while rounds < ctx.config.max_rounds:
        if len(chase.chain) != chain:
            rounds, chain = 0, len(chase.chain)
        rounds += 1
        hit = _cached(ctx, chase, qtype, result, profile.additional) if answers else None
        if hit == "too long":
            break
        if hit == "followed":  # a cached CNAME: the target from its closest zone
            labels, probe_a = 1, profile.full_as_a and qtype != TYPE_A
            continue
        if hit is not None:
            return hit
        name, shown = minimised(chase.qname, chase.bailiwick, labels, profile)
        full = name == chase.qname
        if not full and profile.keeps_nodata and caches.get(
                caches.negative, (name, "nodata")) is not None:
            result.cache["nodata_hit"] += 1
            labels = shown + 1
            continue
        asked = (qtype if not probe_a else TYPE_A) if full else profile.qtype
        reply = yield from _ask(ctx, chase, name, asked, intent, result)
        msg = reply.msg
        if msg is None:
            result.rcode = "SERVFAIL"
            return None, reply.error
        delegates = msg.header.rcode == RC_NOERROR and not msg.rr and any(
            rr.rtype == TYPE_NS for rr in msg.auth)
        owned_cname = any(rr.rtype == TYPE_CNAME and normalise(rr.rname) == name
                          for rr in msg.rr)
        if (full and (asked == qtype or owned_cname)) or delegates or (
                full and msg.header.rcode == RC_NXDOMAIN):
            final = _on_reply(ctx, chase, msg, qtype, answers, result, profile.beside_cname,
                              profile.additional)
            if final is not None:
                return final
            labels, probe_a = 1, profile.full_as_a and qtype != TYPE_A
            continue
        if msg.header.rcode == RC_NXDOMAIN:  # nothing exists below the name shown
            result.rcode = "NXDOMAIN"
            caches.put(caches.negative, (chase.qname, qtype), True, _negative_ttl(msg))
            return (chained(chase.chain, msg) if chase.chain else msg), "no such name"
        if msg.header.rcode != RC_NOERROR:
            result.rcode = rcode_text(msg.header.rcode)
            return None, f"{result.rcode} for {name}"
        if full:  # the full name's A (Unbound) answered without a CNAME: now its own type
            probe_a = False
            continue
        if profile.keeps_nodata:  # NODATA (or another type's data) for the name shown
            caches.put(caches.negative, (name, "nodata"), True, _negative_ttl(msg))
        labels = MAX_LABELS if profile.stops_on_nodata else shown + 1
    return _give_up(chase, result)


MAX_LABELS = 127  # more than a name can have: "the full name"


def _negative_ttl(msg: Answer) -> float:
    """How long a denial may be cached: its SOA's TTL (0 without one)."""
    soa = [rr for rr in msg.auth if rr.rtype == TYPE_SOA]
    return float(soa[0].ttl) if soa else 0.0


def _give_up(chase: _Chase, result: DiscoveryResult) -> Final:
    result.rcode = "SERVFAIL"
    return None, ("CNAME chain too long" if len(chase.chain) >= MAX_CNAMES
                  else "too many referrals")


def chained(chain: list[RR], final: Answer | list[RR]) -> DNSRecord:
    """A response whose answer is the CNAME chain followed, then the final records."""
    if isinstance(final, list):
        out = DNSRecord(DNSHeader(qr=1))
        out.rr = list(chain) + list(final)
        return out
    out = final.to_dnslib() if isinstance(final, Message) else final
    out.rr = list(chain) + list(out.rr)
    return out
