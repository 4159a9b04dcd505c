"""DNSSEC for the resolver (Unbound's validator): fetching and checking each zone's DNSKEY
against the DS its parent signed (the trust anchor for the root), validating replies with
the zone's key, and the AD decision for clients."""

from __future__ import annotations

from dnslib import DNSRecord

from nodes.dns import dnssec
from nodes.dns.cache import Entry
from nodes.dns.codec import QueryView
from nodes.dns.message import TYPE_DNSKEY, Message
from nodes.dns.zone import Address
from nodes.resolver.context import Context
from nodes.resolver.types import Ask, DiscoveryResult, Reply, Rounds


def fetch_keys(ctx: Context, zones: dict[str, tuple[Address, ...]], result: DiscoveryResult
               ) -> Rounds[None]:
    """One round of DNSKEY queries for zones whose key is not yet validated; each key
    set must match the DS its parent signed (the trust anchor for the root)."""
    caches = ctx.caches
    need = sorted(z for z in zones if caches.get(caches.keys, z) is None)
    if not need:
        return
    replies = yield [Ask(z, TYPE_DNSKEY, zones[z], None) for z in need]
    for zone, reply in zip(need, replies, strict=True):
        ds = (dnssec.anchor_ds(ctx.config.trust_anchor) if zone == "." else
              caches.get(caches.ds, zone))
        if reply.msg is None or not ds:
            continue  # unreachable, or no validated DS: its answers will be bogus
        try:
            keys = dnssec.check_dnskey(reply.wire, zone, ds)
        except dnssec.BogusError as exc:
            ctx.stats["dnssec_bogus"] += 1
            result.bogus += 1
            result.error = f"dnssec: {exc}"
            continue
        caches.put(caches.keys, zone, keys, dnssec.KEY_TTL)
        if not ctx.config.cache:  # validation needs the key for this walk at least
            caches.keys[zone] = Entry(keys, ctx.now + dnssec.KEY_TTL)


def validated(ctx: Context, reply: Reply, zone: str, result: DiscoveryResult) -> Reply:
    """The reply if its signatures verify with ``zone``'s validated key (recording the
    DS of every child it refers to), else a failed reply: a bogus answer is never used."""
    caches = ctx.caches
    entry = caches.keys.get(zone)
    try:
        if entry is None:
            raise dnssec.BogusError(f"no validated DNSKEY for {zone}")
        children = dnssec.check_answer(reply.wire, zone, entry.value)
    except dnssec.BogusError as exc:
        ctx.stats["dnssec_bogus"] += 1
        result.bogus += 1
        return Reply(None, f"dnssec: bogus ({exc})")
    ctx.stats["dnssec_secure"] += 1
    for child, ds in children.items():
        caches.ds[child] = Entry(ds, ctx.now + dnssec.KEY_TTL)
    return reply


def authentic(query: DNSRecord | QueryView, value: object, result: DiscoveryResult) -> bool:
    """AD (RFC 4035 §3.2.3, RFC 6840 §5.7) for a validating resolver's answer: validated
    records of the type asked (denials are not checked here, so never AD on them); the
    caller also needs DO or AD in the client's query."""
    if result.bogus or result.error is not None:
        return False
    if isinstance(value, Message | DNSRecord):  # plain resolution: the records relayed
        qtype = query.qtype if isinstance(query, QueryView) else query.q.qtype
        return any(rr.rtype == qtype for rr in value.rr)
    return bool(result.endpoints)


def set_ad(wire: bytes) -> bytes:
    """The message with the AD (authentic data) flag set."""
    return bytes(wire[:3]) + bytes([wire[3] | 0x20]) + bytes(wire[4:])
