"""ToolDNS zones as RFC 1035 master files that NSD, Knot and BIND load.

:func:`master_file` writes a :class:`nodes.dns.zone.ZoneData` as text: a header comment,
``$ORIGIN``, ``$TTL`` and one line per record, owners relative to the origin (``@`` for the
apex), names in RDATA absolute. The records are
:func:`nodes.authoritative.zonestate.zone_records`: exactly the static records a ToolDNS
server answers to standard questions (SOA, NS, the apex summary TXT, in-zone server
addresses, delegations with NS and glue, tools' SRV at ``_svc._proto.<zone>`` and A/TXT at
their targets), the same records an AXFR sends, plus :func:`walk_records`: one wildcard
per service and protocol, ``*._svc._proto.<zone>``, of a private-use type with empty RDATA,
so that a static copy (NSD, Knot, BIND, a secondary filled by AXFR) holds every name a
walk touches that ToolDNS answers as existing (``_tcp.<zone>``, ``_mcp._tcp.<zone>``, the
partly unfolded intent names below it, RFC 9156): NODATA there, as ToolDNS answers, never
the NXDOMAIN that, cached as RFC 8020 allows, would deny every intent name below. The
servers answer TYPE65280 at those names themselves, so a copy and its primary agree.

Not exportable, and said so in the header: the intent answers (a cursor name such as
``_mcp._tcp._tools.`` with the EDNS0 intent option, answered by the top K of a semantic
ranking per query) and the children's summary TXT records sent with K = 0 referrals. The
file is unsigned unless ``signed``: then its records are what a signed server transfers
(``AuthoritativeServer.transfer_records``: DNSKEY, DS at delegations, an NSEC chain and
RRSIGs; :mod:`nodes.authoritative.signed`), written in presentation form.

Before anything is written every name is checked (labels of 1–63 bytes, names of at most
255 bytes in wire form, ASCII, no ``*`` label), as are addresses, ports and TXT sizes: a
bad zone raises :class:`ZoneFileError` naming the zone and the record instead of producing
a file a server would reject. Names are written as RFC 1035 §5.1 text: a label's printable
special characters (``;``, ``(``, ``"``, ``\\``, ``@``, ``$``, …) escaped as ``\\X``, other
bytes as ``\\DDD``; TXT strings quoted with ``\\"`` and ``\\\\`` escaped and every byte
outside printable ASCII as ``\\DDD``, each at most 255 bytes. An RRset too large for
one DNS message (a leaf with over a thousand tools of one service) is still written, with a
warning in the header (:func:`oversized`); BIND refuses to load the largest such sets.
"""

from __future__ import annotations

import ipaddress
import struct
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

import dns.rdata
import dns.rdataclass
import dns.rdatatype

from nodes.authoritative.zonestate import zone_records
from nodes.dns.codec import AAAA, NS, SOA, SRV, TXT, A, Rec, name_wire
from nodes.dns.wire import MAX_MESSAGE_SIZE, PROTOCOLS, SERVICES
from nodes.dns.zone import ZoneData

#: the type of :func:`walk_records`: the first private-use type (RFC 6895 §3.1), which no
#: resolver asks for (BIND keeps its signing state in 65534)
WALK_TYPE = 65280
TYPE_NAMES = {A: "A", AAAA: "AAAA", NS: "NS", SOA: "SOA", TXT: "TXT", SRV: "SRV"}
#: DNSSEC types, written as dnspython presents them
DNSSEC_TYPES = {43: "DS", 46: "RRSIG", 47: "NSEC", 48: "DNSKEY"}
#: the discovery drafts' types an organisation's zone publishes (topologies.orgzones),
#: written by dnspython from their wire form
DRAFT_TYPES = {12: "PTR", 52: "TLSA", 64: "SVCB", 65: "HTTPS"}
_PRINTABLE_SAFE = frozenset(range(0x20, 0x7F)) - {ord('"'), ord("\\")}
# written as they are in a name; other printable bytes get a backslash, the rest \DDD
_NAME_PLAIN = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_*")


class ZoneFileError(ValueError):
    """A zone that cannot be written as a valid master file (the message says where)."""


# ---------------------------------------------------------------------- validation


def name_problem(name: str) -> str | None:
    """Why ``name`` is not a valid absolute domain name here, or None if it is."""
    if name in (".", ""):
        return None
    if not name.endswith("."):
        return "is not absolute (no trailing dot)"
    try:
        raw = name.encode("ascii")
    except UnicodeEncodeError:
        return "is not ASCII (IDNs must be given in their xn-- form)"
    labels = raw[:-1].split(b".")
    for label in labels:
        if not label:
            return "has an empty label"
        if len(label) > 63:
            return f"has a label of {len(label)} bytes (at most 63): {label[:20].decode()}…"
        if label == b"*":  # a static copy would expand it as a wildcard
            return "has a '*' label (a wildcard in a zone file)"
    size = sum(len(label) + 1 for label in labels) + 1
    if size > 255:
        return f"is {size} bytes in wire form (at most 255)"
    return None


def check_zone(zone: ZoneData) -> None:
    """Raise :class:`ZoneFileError` on the first name, address, port or text of ``zone``
    that cannot go into a master file (nor be served: the codec needs the same)."""
    origin = _absolute(zone.name)

    def fail(what: str, problem: str) -> None:
        raise ZoneFileError(f"zone {origin}: {what}: {problem}")

    def name(what: str, value: str) -> None:
        problem = name_problem(_absolute(value))
        if problem is not None:
            fail(what, f"name {value!r} {problem}")

    def address(what: str, value: str) -> None:
        try:
            ipaddress.IPv4Address(value)
        except ValueError:
            fail(what, f"{value!r} is not an IPv4 address")

    name("zone name", origin)
    for ref in zone.servers:
        name(f"NS record {origin} NS {ref.host}", ref.host)
        address(f"A record of name server {ref.host}", ref.address)
    for child in zone.children:
        name(f"delegation {child.zone}", child.zone)
        for ref in child.servers:
            name(f"NS record {child.zone} NS {ref.host}", ref.host)
            address(f"glue A record {ref.host}", ref.address)
    if len(zone.summary.encode("utf-8")) > 60_000:
        fail(f"TXT record {origin}", "summary too long for one record (65535 bytes)")
    for tool in zone.tools:
        owner = f"_{tool.service}._{tool.proto}.{origin}"
        what = f"tool {tool.tool_id}: SRV record {owner}"
        name(what, owner)
        name(f"{what} → target", tool.target)
        if not 0 <= tool.port <= 65535 or not 0 <= tool.priority <= 65535 or not (
                0 <= tool.weight <= 65535):
            fail(what, f"priority/weight/port out of range ({tool.priority} {tool.weight} "
                       f"{tool.port})")
        address(f"tool {tool.tool_id}: A record {tool.target}", tool.address)
        if len(tool.description.encode("utf-8")) > 60_000:
            fail(f"tool {tool.tool_id}: TXT record {tool.target}",
                 "description too long for one record (65535 bytes)")


def _absolute(name: str) -> str:
    return name if name.endswith(".") else name + "."


# ---------------------------------------------------------------------- text forms


def txt_text(strings: list[bytes]) -> str:
    """TXT RDATA as master-file text: each character-string quoted, ``"`` and ``\\``
    backslash-escaped, bytes outside printable ASCII as ``\\DDD`` (RFC 1035 §5.1)."""
    out = []
    for raw in strings:
        if len(raw) > 255:
            raise ValueError(f"a TXT character-string of {len(raw)} bytes (at most 255)")
        out.append('"' + "".join(chr(c) if c in _PRINTABLE_SAFE else
                                 "\\" + chr(c) if c in (34, 92) else f"\\{c:03d}"
                                 for c in raw) + '"')
    return " ".join(out)


def _split_character_strings(rdata: bytes) -> list[bytes]:
    strings, pos = [], 0
    while pos < len(rdata):
        n = rdata[pos]
        strings.append(rdata[pos + 1 : pos + 1 + n])
        pos += 1 + n
    return strings


def name_text(name: str) -> str:
    """A name (absolute with its trailing dot, or relative) in master-file form: labels'
    printable special characters escaped as ``\\X``, other bytes as ``\\DDD`` (RFC 1035
    §5.1), so that a hostile label can neither end the name nor start a comment."""
    if name in (".", ""):
        return "."
    labels = name[:-1] if name.endswith(".") else name
    text = ".".join("".join(chr(c) if c in _NAME_PLAIN else "\\" + chr(c) if 0x20 < c < 0x7F
                            else f"\\{c:03d}" for c in label.encode("ascii"))
                    for label in labels.split("."))
    return text + "." if name.endswith(".") else text


def _owner_text(owner: str, origin: str) -> str:
    if owner == origin:
        return "@"
    if origin == ".":
        return name_text(owner[:-1])
    if owner.endswith("." + origin):
        return name_text(owner[: -len(origin) - 1])
    return name_text(owner)


def rdata_text(rec: Rec) -> str:
    """The RDATA of a server record (:class:`nodes.dns.codec.Rec`) in master-file form."""
    fixed = [p for p in rec.rdata if isinstance(p, bytes)]  # in RDATA order
    names = [p for p in rec.rdata if isinstance(p, str)]
    names = [name_text(n) for n in names]
    if rec.rtype == A:
        return str(ipaddress.IPv4Address(fixed[0]))
    if rec.rtype == AAAA:
        return str(ipaddress.IPv6Address(fixed[0]))
    if rec.rtype == NS:
        return names[0]
    if rec.rtype == SOA:
        serial, refresh, retry, expire, minimum = struct.unpack("!IIIII", fixed[0])
        return f"{names[0]} {names[1]} {serial} {refresh} {retry} {expire} {minimum}"
    if rec.rtype == SRV:
        priority, weight, port = struct.unpack("!HHH", fixed[0])
        return f"{priority} {weight} {port} {names[0]}"
    if rec.rtype == TXT:
        return txt_text(_split_character_strings(fixed[0]))
    if rec.rtype in DRAFT_TYPES:  # names in RDATA are never compressed here
        data = b"".join(name_wire(p) if isinstance(p, str) else p for p in rec.rdata)
        rd = dns.rdata.from_wire(dns.rdataclass.IN, dns.rdatatype.RdataType.make(rec.rtype),
                                 data, 0, len(data))
        return rd.to_text()
    if rec.rtype in DNSSEC_TYPES and not names:
        data = b"".join(p for p in fixed)
        rd = dns.rdata.from_wire(dns.rdataclass.IN, dns.rdatatype.RdataType.make(rec.rtype),
                                 data, 0, len(data))
        return rd.to_text()
    if rec.rtype == WALK_TYPE and not names:  # RFC 3597 §5 generic form
        data = b"".join(p for p in fixed)
        return f"\\# {len(data)} {data.hex()}".rstrip()
    raise ValueError(f"no master-file form for type {rec.rtype}")


def record_line(rec: Rec, origin: str) -> str:
    """One record as a master-file line: owner, TTL, class, type, RDATA."""
    kind = (TYPE_NAMES.get(rec.rtype) or DNSSEC_TYPES.get(rec.rtype)
            or DRAFT_TYPES.get(rec.rtype, f"TYPE{rec.rtype}"))
    return f"{_owner_text(rec.owner, origin)}\t{rec.ttl}\tIN\t{kind}\t{rdata_text(rec)}"


def walk_records(zone: ZoneData) -> list[Rec]:
    """``*._svc._proto.<zone>`` for every ToolDNS service and protocol, each one record of
    :data:`WALK_TYPE` with empty RDATA (none at or below a delegation of the zone).

    A ToolDNS server answers every name under ``_svc._proto.<zone>`` as existing: intent
    names computed per query, and the empty non-terminals above them that a
    QNAME-minimising resolver (RFC 9156) asks on its way down. A master file cannot hold
    names computed per query; these wildcards make the same names exist in a static copy
    (their parents become empty non-terminals), which then answers NODATA for every
    standard type there, as ToolDNS does, instead of NXDOMAIN (RFC 8020: nothing below).
    Only :data:`WALK_TYPE` itself (and ANY) is answered differently, with this record.
    """
    origin = _absolute(zone.name).lower()
    suffix = "" if origin == "." else origin
    cuts = tuple("." + child.zone.lower() for child in zone.children)
    owners = [f"*._{service}._{proto}.{suffix}" for service in SERVICES for proto in PROTOCOLS]
    return [Rec(owner, WALK_TYPE, zone.ttls.ns, (b"",)) for owner in owners
            if not any(owner.endswith(cut) for cut in cuts)]


@dataclass(frozen=True)
class Oversized:
    """An RRset too large for one DNS message (see :func:`oversized`)."""

    owner: str
    rtype: int
    count: int
    size: int  # bytes of the smallest message holding it (header, question, pointers)
    bind_refuses: bool  # too large for BIND as well (see oversized)

    def __str__(self) -> str:
        text = (f"the {TYPE_NAMES.get(self.rtype, self.rtype)} RRset at {self.owner} "
                f"({self.count} records) needs at least {self.size} bytes, more than one DNS "
                f"message holds: it is answered truncated (TC), even over TCP, as ToolDNS "
                f"answers it")
        return text + ("; BIND refuses to load the zone (ran out of space)"
                       if self.bind_refuses else "")


def oversized(records: list[Rec]) -> list[Oversized]:
    """The RRsets too large for one DNS message even with the best compression (a header,
    the question, each record's owner as a pointer). A leaf with over a thousand tools of
    one service has such an SRV set: no server can answer that question whole, even over
    TCP (ToolDNS sets TC), and from somewhat larger sets on BIND refuses to load the zone.
    ToolDNS's own answers to such a leaf are the top K per intent."""
    sizes: dict[tuple[str, int], list[int]] = {}
    for rec in records:
        rdlen = sum(len(name_wire(p)) if isinstance(p, str) else len(p) for p in rec.rdata)
        entry = sizes.setdefault((rec.owner, rec.rtype), [0, 0])
        entry[0] += 1
        entry[1] += rdlen
    out = []
    for (owner, rtype), (count, rdata) in sizes.items():
        # owner pointer (2), type, class, TTL, RDLENGTH (10) per record
        need = 12 + len(name_wire(owner)) + 4 + 12 * count + rdata
        if need > MAX_MESSAGE_SIZE:
            # BIND 9.18 keeps an RRset's RDATA with 2 bytes each and 24 of header in
            # at most 65535 bytes (measured: named-checkzone's "ran out of space")
            out.append(Oversized(owner, rtype, count, need,
                                 24 + 2 * count + rdata > MAX_MESSAGE_SIZE))
    return out


def header(zone: ZoneData, records: int, source: str = "",
           warnings: Sequence[Oversized] = (), signed: bool = False) -> list[str]:
    """The comment opening a zone file: what it holds and what it cannot hold."""
    origin = _absolute(zone.name)
    primary = zone.servers[0] if zone.servers else None
    source = " ".join(source.split()).encode("ascii", "backslashreplace").decode()
    lines = [
        f"Zone {name_text(origin)} exported from ToolDNS{f' ({source})' if source else ''}",
        f"serial {zone.serial}, {records} records"
        + (f", primary {name_text(primary.host)} ({primary.address})" if primary else ""),
        "",
        "Static records only: what a ToolDNS server answers to standard questions (SOA,",
        "NS, glue, the summary TXT at the apex, tools' SRV at _svc._proto.<zone> and A/TXT",
        "at their targets); the same records an AXFR from the ToolDNS server sends.",
        f"The TYPE{WALK_TYPE} wildcards at *._svc._proto.<zone> make the names under",
        "_svc._proto.<zone> exist, as on ToolDNS: NODATA there, not NXDOMAIN.",
        "Not exportable: the ToolDNS intent answers (cursor names such as",
        "_mcp._tcp._<zone> with the EDNS0 intent option, answered with the top K of a",
        "semantic ranking per query) and the children's summary TXT sent with K = 0",
        "referrals; a plain server loaded with this file answers standard questions only.",
    ]
    lines += [
        "Signed as ToolDNS serves it: its DNSKEY (the keys `tooldns serve --dnssec` uses for",
        "the same seed), DS records of the delegated children, an NSEC chain and RRSIGs;",
        "the parent's file holds this zone's DS. Load it as it is (pre-signed).",
    ] if signed else [
        "Unsigned: `tooldns export-zones --sign` writes the zone with the DNSKEY, DS, NSEC",
        "and RRSIG records ToolDNS serves signed (nodes/dns/dnssec.py).",
    ]
    for warning in warnings:
        lines += ["", *textwrap.wrap(f"WARNING: {warning}.", 84, break_on_hyphens=False)]
    return [f"; {line}".rstrip() for line in lines]


def master_file(zone: ZoneData, source: str = "", records: list[Rec] | None = None,
                warnings: Sequence[Oversized] | None = None, signed: bool = False) -> str:
    """``zone`` as an RFC 1035 master file (checked first: :class:`ZoneFileError`).

    ``records`` are the zone's records when already at hand (a server's
    ``zone_records``); by default they are built from ``zone`` as a server would.
    ``warnings`` for the header: by default :func:`oversized` of the records. ``signed``:
    ``records`` are a signed server's ``transfer_records`` (walk records and DNSSEC
    included), written as they are.
    """
    check_zone(zone)
    recs = zone_records(zone) if records is None else records
    origin = _absolute(zone.name).lower()
    soa = recs[0]
    walk = [] if signed else walk_records(zone)
    lines = header(zone, len(recs) + len(walk), source,
                   oversized(recs) if warnings is None else warnings, signed)
    lines += [f"$ORIGIN {name_text(origin)}", f"$TTL {soa.ttl}", ""]
    lines += [record_line(rec, origin) for rec in (*recs, *walk)]
    return "\n".join(lines) + "\n"
