"""Zone transfers (AXFR, RFC 5936; IXFR answered AXFR-style, RFC 1995 §4) and who may ask.

:func:`transfer_query` recognises a transfer request, :func:`zone_transfer` decides the
answer (a single reply, or the records to stream: SOA, every record of the zone, SOA), and
:func:`xfr_messages` splits records over messages of at most 65535 bytes. The access list
helpers (:func:`networks`, :func:`allowed`) decide who may transfer.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from dnslib import DNSRecord

from nodes.authoritative.fit import COUNTS3, HEADER
from nodes.authoritative.reply import FORMERR, NOERROR, Reply
from nodes.authoritative.zonestate import ZoneState
from nodes.dns.codec import (
    AXFR,
    IXFR,
    SOA,
    FormatError,
    QueryView,
    Rec,
    parse_query,
    put_record,
    question_names,
    view_from_dnslib,
)
from nodes.dns.wire import MAX_MESSAGE_SIZE

#: who may transfer zones unless told otherwise (``transfer_acl``)
LOOPBACK_ACL = ("127.0.0.0/8", "::1/128")
_XFR_QTYPES = (b"\x00\xfb", b"\x00\xfc")  # IXFR, AXFR as they follow a question name
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def networks(cidrs: Iterable[str]) -> tuple[Network, ...]:
    """Parse an ACL: networks (``10.0.0.0/8``) or single addresses; ValueError if bad."""
    return tuple(ipaddress.ip_network(c, strict=False) for c in cidrs)


LOOPBACK_NETS = networks(LOOPBACK_ACL)  # parsed once, shared by every server


def allowed(address: str, acl: tuple[Network, ...], peers: frozenset[str]) -> bool:
    """Whether ``address`` is one of ``peers`` or inside a network of ``acl``."""
    if address in peers:
        return True
    try:
        ip = ipaddress.ip_address(address.split("%")[0])  # no IPv6 scope
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip in net for net in acl)


def transfer_query(wire: bytes) -> QueryView | None:
    """``wire`` as a query if it is an AXFR/IXFR request, else None.

    The check reads the type after the first zero byte past the header, which is exact
    for the plain names ToolDNS zones have; a query it misses goes to the server's
    ``handle``, which answers AXFR/IXFR with NOTIMP.
    """
    end = wire.find(0, 12)
    if end < 0 or wire[end + 1 : end + 3] not in _XFR_QTYPES or len(wire) < 17:
        return None
    view = parse_query(wire)
    if view is None:
        try:
            view = view_from_dnslib(wire)
        except FormatError:
            return None
    if (view.flags & 0xF800 or view.qdcount != 1  # a response, not QUERY, or odd
            or view.qtype not in (AXFR, IXFR)):
        return None
    return view


def zone_transfer(q: QueryView, wire: bytes, state: ZoneState) -> tuple[str, Reply | list[Rec]]:
    """The answer to a transfer of ``state``'s zone: a single reply (IXFR from a client at
    the current serial, or a malformed IXFR) or the records to send (SOA ... SOA)."""
    records = state.contents()
    soa = records[0]
    if q.qtype == IXFR:
        serial = _ixfr_serial(wire)
        if serial is None:
            return "formerr", Reply(FORMERR)
        # RFC 1995 §2: a client at (or past) the current serial gets the SOA alone
        if (state.data.serial - serial) % 2**32 >= 2**31 or serial == state.data.serial:
            return "ixfr_current", Reply(NOERROR, True, [soa])
        return "ixfr_full", [*records, soa]
    return "axfr", [*records, soa]


def xfr_messages(q: QueryView, records: list[Rec], opt: bytes) -> list[bytes]:
    """Records split over messages of at most 65535 bytes (never a record split), each
    with the query's ID and question, AA set and ``opt`` (the server's OPT record, or
    nothing when the query had none)."""
    room = MAX_MESSAGE_SIZE - len(opt)
    flags = 0x8000 | (q.flags & 0x7900) | 0x0400
    head = HEADER.pack(q.id, flags, 1, 0, 0, 0) + q.question
    base = question_names(q.qname) if q.simple_name else {}
    messages: list[bytes] = []
    buf, names, n = bytearray(head), base.copy(), 0
    for rec in records:
        mark = len(buf)
        put_record(buf, names, rec)
        if len(buf) <= room:
            n += 1
            continue
        del buf[mark:]
        if not n:
            raise ValueError(f"{rec.owner} {rec.rtype}: a record too large for a message")
        messages.append(_finish(buf, n, opt))
        buf, names, n = bytearray(head), base.copy(), 0
        put_record(buf, names, rec)
        if len(buf) > room:
            raise ValueError(f"{rec.owner} {rec.rtype}: a record too large for a message")
        n = 1
    messages.append(_finish(buf, n, opt))
    return messages


def _finish(buf: bytearray, n: int, opt: bytes) -> bytes:
    """Close one transfer message: ANCOUNT ``n``, then OPT (ARCOUNT 1) if there is one."""
    buf += opt
    COUNTS3.pack_into(buf, 6, n, 0, 1 if opt else 0)
    return bytes(buf)


def _ixfr_serial(wire: bytes) -> int | None:
    """The client's serial from an IXFR query's authority SOA (RFC 1995 §3), or None."""
    try:
        msg = DNSRecord.parse(wire)
    except Exception:  # dnslib raises several types on garbage
        return None
    for rr in msg.auth:
        if rr.rtype == SOA:
            return int(rr.rdata.times[0])
    return None
