"""Serving stub clients (Unbound's listen side, without the sockets): reading a stub's
query and its intent option, and writing the answer — the discovery's SRV and A records, or
the plain resolution's records relayed, the rcode, AD for validated data — fitted to UDP
(the requester's EDNS size, else 512; TC when over) or TCP. The common shapes are written by
``nodes.dns.message.encode_answer``; the rest by dnslib, byte for byte the same."""

from __future__ import annotations

from dnslib import RR, SRV, A, DNSHeader, DNSQuestion, DNSRecord

from nodes.dns.codec import QueryView
from nodes.dns.message import (
    RC_FORMERR,
    RC_NOERROR,
    RC_NXDOMAIN,
    RC_SERVFAIL,
    TYPE_A,
    TYPE_AAAA,
    TYPE_SOA,
    TYPE_SRV,
    Message,
    encode_answer,
)
from nodes.dns.wire import (
    CLASSIC_UDP_SIZE,
    MAX_MESSAGE_SIZE,
    Intent,
    IntentError,
    find_opt,
    opt_record,
    requester_udp_size,
)
from nodes.resolver.config import ResolverConfig
from nodes.resolver.minimise import PROFILES
from nodes.resolver.types import DiscoveryResult, Transport
from nodes.resolver.validate import authentic, set_ad


class Unread(Exception):
    """A stub query the fast reader leaves to dnslib (another opcode, a bad intent)."""


def view_intent(view: QueryView, option_code: int) -> Intent | None:
    """The intent option of a query in the common shape (``nodes.dns.codec.parse_query``),
    if any; raises :class:`Unread` for what it leaves to dnslib."""
    if view.flags & 0x7800:
        raise Unread
    options = view.options
    if options and not options[-1][1]:  # dnslib drops an empty last option: so do we
        options = options[:-1]
    for code, value in options:
        if code == option_code:
            try:
                return Intent.decode(value)
            except IntentError:
                raise Unread from None
    return None


def error_reply(query: DNSRecord, rcode: int) -> bytes:
    """An answer with no records and ``rcode``."""
    return bytes(_reply(query, rcode).pack())  # dnslib packs a bytearray


def malformed_reply(data: bytes) -> bytes | None:
    """FORMERR for bytes that look like a query but do not parse (None if not a query)."""
    if len(data) >= 12 and not data[2] & 0x80:
        header = DNSHeader(id=int.from_bytes(data[:2], "big"), qr=1, ra=1, rcode=RC_FORMERR)
        return bytes(DNSRecord(header).pack())
    return None


def answer(config: ResolverConfig, query: DNSRecord | QueryView, wire: bytes, value: object,
           result: DiscoveryResult, transport: Transport) -> bytes:
    """The answer to a stub's query (``wire``: its bytes) once its task has finished with
    ``value`` (plain resolution: the response to relay) and ``result``."""
    ad = config.dnssec and authentic(query, value, result)
    if isinstance(query, QueryView):
        if not isinstance(value, Message | DNSRecord):
            data = _fast_answer(config, query, result, transport)
            if data is not None:
                if ad and (query.flags & 0x20 or query.opt_ttl & 0x8000):
                    data = set_ad(data)
                return data
        query = DNSRecord.parse(wire)  # the rare shapes: dnslib
    reply = _reply(query, RC_NOERROR)
    if isinstance(value, Message):
        value = value.to_dnslib()  # relayed records are packed by dnslib
    if isinstance(value, DNSRecord):  # plain resolution: relay the final answer
        reply.header.rcode = value.header.rcode
        for rr in value.rr:
            reply.add_answer(rr)
        for rr in value.auth:
            if rr.rtype == TYPE_SOA:
                reply.add_auth(rr)
        if additional(config):  # the targets' addresses that came with the answer (BIND)
            for rr in value.ar:
                if rr.rtype in (TYPE_A, TYPE_AAAA):
                    reply.add_ar(rr)
    elif result.endpoints:
        owner = query.q.qname
        for rank, ep in enumerate(result.endpoints):  # the rank as priority (RFC 2782)
            reply.add_answer(RR(owner, TYPE_SRV, ttl=60, rdata=SRV(
                priority=min(rank, 0xFFFF), weight=ep.weight, port=ep.port, target=ep.target)))
        for ep in result.endpoints:
            reply.add_ar(RR(ep.target, TYPE_A, ttl=60, rdata=A(ep.address)))
    elif result.error and not result.endpoints:
        reply.header.rcode = RC_SERVFAIL if result.rcode != "NXDOMAIN" else RC_NXDOMAIN
    elif result.rcode == "NXDOMAIN":
        reply.header.rcode = RC_NXDOMAIN
    data = _fit(config, query, reply, transport)
    opt = find_opt(query)
    if ad and (query.header.ad or (opt is not None and opt.ttl & 0x8000)):
        data = set_ad(data)
    return data


def additional(config: ResolverConfig) -> bool:
    """Whether the resolver sends an SRV answer's target addresses with it (a profile's
    ``additional``: :mod:`nodes.resolver.minimise`)."""
    profile = PROFILES.get(config.resolver_model)
    return profile is not None and profile.additional


def _fast_answer(config: ResolverConfig, query: QueryView, result: DiscoveryResult,
                 transport: Transport) -> bytes | None:
    """The bytes :func:`answer` and :func:`_fit` give for a discovery's answer, written by
    ``nodes.dns.message.encode_answer`` (None: let dnslib write it)."""
    rcode = RC_NOERROR
    if not result.endpoints and (result.error or result.rcode == "NXDOMAIN"):
        rcode = RC_SERVFAIL if result.error and result.rcode != "NXDOMAIN" else RC_NXDOMAIN
    udp = query.opt_udp
    limit = MAX_MESSAGE_SIZE if transport == "tcp" else (
        min(max(CLASSIC_UDP_SIZE, udp), config.edns_size) if udp is not None
        else CLASSIC_UDP_SIZE)
    eps = result.endpoints
    return encode_answer(query.id, query.flags >> 8 & 1, rcode, query.question,
                         [(min(r, 0xFFFF), e.weight, e.port, e.target)  # rank: priority
                          for r, e in enumerate(eps)],
                         [(e.target, e.address or "") for e in eps],
                         config.edns_size if udp is not None else None, limit)


def _fit(config: ResolverConfig, query: DNSRecord, reply: DNSRecord, transport: Transport
         ) -> bytes:
    """The reply's bytes within the client's limit (truncated, TC set, when over)."""
    if find_opt(query) is not None:
        reply.add_ar(opt_record(None, config.option_code, config.edns_size))
    limit = MAX_MESSAGE_SIZE if transport == "tcp" else (
        min(requester_udp_size(query), config.edns_size)
        if find_opt(query) is not None else CLASSIC_UDP_SIZE)
    wire = bytes(reply.pack())  # dnslib packs a bytearray
    if len(wire) > limit:
        opt = find_opt(reply)
        reply.rr, reply.auth, reply.ar = [], [], [opt] if opt else []
        reply.header.tc = 1
        wire = bytes(reply.pack())
    return wire


def _reply(query: DNSRecord, rcode: int) -> DNSRecord:
    header = DNSHeader(id=query.header.id, qr=1, rd=query.header.rd, ra=1, rcode=rcode)
    reply = DNSRecord(header)
    for q in query.questions[:1]:
        reply.add_question(DNSQuestion(q.qname, q.qtype, q.qclass))
    return reply
