"""Zone transfers (AXFR, RFC 5936; IXFR answered AXFR-style, RFC 1995 §4) and who may ask.

:func:`transfer_query` recognises a transfer request, :func:`zone_transfer` decides the
answer (a single reply, or the records to stream: SOA, every record of the zone, the
names a walk touches made to exist (``nodes.authoritative.zonefile.walk_records``) and, from
a signed server, the zone's DNSKEY, DS, NSEC chain and RRSIGs
(:mod:`nodes.authoritative.signed`), SOA), and :func:`xfr_messages` splits records over
messages of at most 65535 bytes.

Who may transfer, how many at once and how often is :class:`TransferGate`'s (sans-IO: the
caller passes the time in): an access list (:func:`networks`, :func:`allowed`; empty by
default, so every transfer is REFUSED as NSD and Knot do until one is configured), then
:class:`TransferLimits`: transfers in progress per client address and in all (BIND's
``transfers-out``), and a per-address token bucket on transfers started. A transfer is in
progress from its admission until the socket layer has written its last message or
dropped the connection (:meth:`TransferGate.sending`).
"""

from __future__ import annotations

import ipaddress
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from dnslib import DNSRecord

from nodes.authoritative.fit import COUNTS3, HEADER
from nodes.authoritative.reply import FORMERR, NOERROR, Reply
from nodes.authoritative.signed import signed_records
from nodes.authoritative.zonefile import walk_records
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
from nodes.dns.dnssec import ZoneSigner
from nodes.dns.wire import MAX_MESSAGE_SIZE

_XFR_QTYPES = (b"\x00\xfb", b"\x00\xfc")  # IXFR, AXFR as they follow a question name
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def networks(cidrs: Iterable[str]) -> tuple[Network, ...]:
    """Parse an ACL: networks (``10.0.0.0/8``) or single addresses; ValueError if bad."""
    return tuple(ipaddress.ip_network(c, strict=False) for c in cidrs)


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


def transfer_records(state: ZoneState, signer: ZoneSigner | None = None) -> list[Rec]:
    """What a transfer of ``state``'s zone sends between its SOAs (SOA first): its records
    and walk records, signed with ``signer`` when given (kept by the signer until the
    zone's state changes)."""
    records = [*state.contents(), *walk_records(state.data)]
    if signer is None:
        return records
    return signed_records(records, state.name, signer, state.negative_soa.ttl, state)


def zone_transfer(q: QueryView, wire: bytes, state: ZoneState, signer: ZoneSigner | None = None
                  ) -> tuple[str, Reply | list[Rec]]:
    """The answer to a transfer of ``state``'s zone: a single reply (IXFR from a client at
    the current serial, or a malformed IXFR) or the records to send (SOA ... SOA), signed
    by ``signer`` when the server signs."""
    records = transfer_records(state, signer)
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


# ---------------------------------------------------------------------- admission


@dataclass(frozen=True)
class TransferLimits:
    """Bounds on one server's zone transfers (REFUSED beyond them, counted)."""

    per_client: int = 2  # transfers in progress from one address
    total: int = 10  # transfers in progress from all addresses (BIND's transfers-out)
    per_minute: float = 60.0  # transfers one address may start per minute, on average
    burst: int = 10  # ... and back to back after a quiet spell (token bucket size)
    clients: int = 4096  # addresses whose rate is remembered (the longest unseen forgotten)


class _Client:
    __slots__ = ("busy", "last", "tokens")

    def __init__(self, tokens: float, now: float) -> None:
        self.busy = 0  # transfers in progress
        self.tokens = tokens
        self.last = now


class TransferGate:
    """Admission of zone transfers: the access list, then :class:`TransferLimits`."""

    def __init__(self, limits: TransferLimits | None = None) -> None:
        self.limits = limits or TransferLimits()
        self.in_progress = 0
        self._clients: OrderedDict[str, _Client] = OrderedDict()

    def refusal(self, address: str, now: float, acl: tuple[Network, ...],
                peers: frozenset[str] = frozenset()) -> str:
        """"" to admit a transfer from ``address`` at ``now`` (seconds; spends a token),
        else the counter key of the refusal: ``xfr_refused_acl`` (not in ``acl`` nor
        ``peers``), ``xfr_refused_busy`` (the client's transfers in progress),
        ``xfr_refused_full`` (everyone's), ``xfr_refused_rate`` (its token bucket)."""
        if not allowed(address, acl, peers):
            return "xfr_refused_acl"
        limits = self.limits
        client = self._client(address, now)
        if client.busy >= limits.per_client:
            return "xfr_refused_busy"
        if self.in_progress >= limits.total:
            return "xfr_refused_full"
        elapsed = max(0.0, now - client.last)  # time never runs back here
        client.tokens = min(float(limits.burst), client.tokens + elapsed * limits.per_minute / 60)
        client.last = now
        if client.tokens < 1.0:
            return "xfr_refused_rate"
        client.tokens -= 1.0
        return ""

    def sending(self, messages: list[bytes], address: str) -> Iterable[bytes]:
        """``messages`` (a transfer's answer to ``address``) as the socket layer writes
        them. A transfer (a NOERROR answer) is in progress until the last message has been
        taken or the iterator is dropped (its connection ended); a refusal or error reply
        holds nothing."""
        first = messages[0] if messages else b""
        if len(first) < 4 or first[3] & 0x0F:  # no message, or not NOERROR
            return messages
        client = self._clients.get(address)
        if client is None:  # not admitted by refusal() (the caller skipped the gate)
            return messages
        client.busy += 1
        self.in_progress += 1
        return _Held(self, client, messages)

    def _client(self, address: str, now: float) -> _Client:
        """The address's entry, most recently seen last; a new one starts with a full
        bucket, and the table keeps at most ``limits.clients`` entries (idle ones go)."""
        clients = self._clients
        client = clients.get(address)
        if client is not None:
            clients.move_to_end(address)
            return client
        if len(clients) >= self.limits.clients:
            # the oldest idle entry (at most ``total`` entries are busy, so one is near)
            for old in clients:
                if not clients[old].busy:
                    del clients[old]
                    break
        client = clients[address] = _Client(float(self.limits.burst), now)
        return client


class _Held:
    """A transfer's messages while the socket layer writes them: its slot is freed when
    the iterator is exhausted (asked once more after the last message was written) or
    dropped unfinished (the connection ended), whichever comes first."""

    __slots__ = ("_client", "_gate", "_messages", "_next")

    def __init__(self, gate: TransferGate, client: _Client, messages: list[bytes]) -> None:
        self._gate: TransferGate | None = gate
        self._client = client
        self._messages = messages
        self._next = 0

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        if self._next < len(self._messages):
            self._next += 1
            return self._messages[self._next - 1]
        self.release()
        raise StopIteration

    def release(self) -> None:
        """Free the slot (once)."""
        if self._gate is not None:
            self._client.busy -= 1
            self._gate.in_progress -= 1
            self._gate = None

    def __del__(self) -> None:
        self.release()
