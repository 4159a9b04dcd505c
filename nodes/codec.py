"""Fast path for the authoritative server: query view, pre-encoded records, reply builder.

dnslib builds and packs a reply through per-field range-checked objects (≈ 300 µs for a
six-record referral, see benchmarks/RESULTS.md), which would make the codec — not the
protocol — the bottleneck of every measurement. So the server:

* reads the common query shape (one question, at most one OPT record) with ``struct``
  (:func:`parse_query`) and hands anything else to dnslib (:func:`view_from_dnslib`);
* keeps every record it may send as a :class:`Rec` prepared once at zone load;
* assembles replies with :class:`ReplyBuilder`, compressing names (RFC 1035 §4.1.4) in
  owners and in NS/SOA RDATA, never in SRV targets (RFC 2782).

The tests check every reply with dnslib, dnspython and dig.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from dnslib import DNSBuffer, DNSRecord

_HEADER = struct.Struct("!HHHHHH")
_RR_FIXED = struct.Struct("!HHIH")
_QFIXED = struct.Struct("!HH")
_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_*")
TYPE_OPT = 41
COMPRESSIBLE_RDATA = frozenset({2, 6})  # NS, SOA


class FormatError(ValueError):
    """The message is not a well-formed DNS query (peer's fault)."""


@dataclass(frozen=True, slots=True)
class QueryView:
    """What the server needs from a query, however it was parsed."""

    id: int
    flags: int
    qdcount: int
    qname: str  # lower-case, absolute ("tools.")
    qtype: int
    qclass: int
    question: bytes  # the question section as sent (case preserved)
    simple_name: bool  # qname labels are plain ASCII (safe to use for compression)
    opt_udp: int | None  # requester's UDP size, None without OPT
    opt_ttl: int  # extended RCODE · version · DO · Z
    options: tuple[tuple[int, bytes], ...]

    @property
    def opcode(self) -> int:
        return (self.flags >> 11) & 0xF

    @property
    def qr(self) -> bool:
        return bool(self.flags & 0x8000)

    @property
    def rd(self) -> bool:
        return bool(self.flags & 0x0100)

    def option(self, code: int) -> bytes | None:
        for c, data in self.options:
            if c == code:
                return data
        return None


def parse_query(wire: bytes) -> QueryView | None:
    """Struct parse of the common shape; None means "let dnslib decide"."""
    if len(wire) < 17:
        return None
    qid, flags, qd, an, ns, ar = _HEADER.unpack_from(wire)
    if qd != 1 or an or ns or ar > 1 or flags & 0x8000:
        return None
    pos, labels = 12, []
    while True:
        if pos >= len(wire):
            return None
        n = wire[pos]
        if n == 0:
            pos += 1
            break
        if n > 63 or pos + 1 + n > len(wire):
            return None
        label = wire[pos + 1 : pos + 1 + n]
        if not _SAFE.issuperset(label):
            return None
        labels.append(label.decode("ascii").lower())
        pos += 1 + n
    if pos + 4 > len(wire) or pos - 12 > 255:
        return None
    qtype, qclass = _QFIXED.unpack_from(wire, pos)
    question = wire[12 : pos + 4]
    pos += 4
    opt_udp, opt_ttl, options = None, 0, ()
    if ar:
        if pos + 11 > len(wire) or wire[pos] != 0:
            return None
        rtype, rclass, ttl, rdlen = _RR_FIXED.unpack_from(wire, pos + 1)
        pos += 11
        if rtype != TYPE_OPT or pos + rdlen != len(wire):
            return None
        opts, end = [], pos + rdlen
        while pos < end:
            if pos + 4 > end:
                return None
            code, length = _QFIXED.unpack_from(wire, pos)
            if pos + 4 + length > end:
                return None
            opts.append((code, bytes(wire[pos + 4 : pos + 4 + length])))
            pos += 4 + length
        opt_udp, opt_ttl, options = rclass, ttl, tuple(opts)
    elif pos != len(wire):
        return None
    qname = ".".join(labels) + "." if labels else "."
    return QueryView(qid, flags, 1, qname, qtype, qclass, bytes(question), True, opt_udp,
                     opt_ttl, options)


def view_from_dnslib(wire: bytes) -> QueryView:
    """Slow path: dnslib parses; raises FormatError on anything it cannot read."""
    try:
        msg = DNSRecord.parse(wire)
    except Exception as exc:  # dnslib raises several types on garbage
        raise FormatError(str(exc)) from None
    h = msg.header
    flags = (h.qr << 15) | (h.opcode << 11) | (h.aa << 10) | (h.tc << 9) | (h.rd << 8) | (
        h.ra << 7) | (h.z << 4) | h.rcode
    qname, qtype, qclass, question = ".", 0, 0, b""
    if msg.questions:
        q = msg.questions[0]
        qname, qtype, qclass = str(q.qname).lower(), q.qtype, q.qclass
        if not qname.endswith("."):
            qname += "."
        buf = DNSBuffer()
        buf.encode_name_nocompress(q.qname)
        buf.pack("!HH", q.qtype, q.qclass)
        question = bytes(buf.data)
    opts = [rr for rr in msg.ar if rr.rtype == TYPE_OPT]
    opt_udp, opt_ttl, options = None, 0, ()
    if opts:
        opt_udp, opt_ttl = opts[0].rclass, opts[0].ttl
        options = tuple((o.code, bytes(o.data)) for o in opts[0].rdata)
    return QueryView(h.id, flags, len(msg.questions), qname, qtype, qclass, question, False,
                     opt_udp, opt_ttl, options)


@dataclass(frozen=True, slots=True)
class Rec:
    """A resource record ready to encode. ``owner`` "" means "the question's name".

    ``rdata`` mixes fixed bytes and domain names (str), in wire order.
    """

    owner: str
    rtype: int
    ttl: int
    rdata: tuple[bytes | str, ...]


def _labels(name: str) -> list[str]:
    return [] if name in (".", "") else name.rstrip(".").split(".")


class ReplyBuilder:
    """Appends records to a reply with name compression; tracks section counts."""

    __slots__ = ("buf", "counts", "names")

    def __init__(self, qid: int, flags: int, question: bytes, qname: str, simple: bool) -> None:
        self.buf = bytearray(12)
        struct.pack_into("!HH", self.buf, 0, qid, flags)
        self.counts = [1 if question else 0, 0, 0, 0]
        self.buf += question
        self.names: dict[str, int] = {}
        if question and simple:  # every suffix of the question name can be pointed at
            offset = 12
            labels = _labels(qname)
            for i, label in enumerate(labels):
                self.names.setdefault(".".join(labels[i:]), offset)
                offset += 1 + len(label)

    def name(self, name: str, compress: bool = True) -> None:
        labels = _labels(name)
        buf = self.buf
        for i in range(len(labels)):
            suffix = ".".join(labels[i:])
            if compress:
                ptr = self.names.get(suffix)
                if ptr is not None:
                    buf += (0xC000 | ptr).to_bytes(2, "big")
                    return
                if len(buf) < 0x3FFF:
                    self.names[suffix] = len(buf)
            raw = labels[i].encode("ascii")
            buf.append(len(raw))
            buf += raw
        buf.append(0)

    def add(self, section: int, rec: Rec) -> None:
        buf = self.buf
        if rec.owner:
            self.name(rec.owner)
        else:
            buf += b"\xc0\x0c"
        start = len(buf)
        buf += b"\x00" * 10
        compress = rec.rtype in COMPRESSIBLE_RDATA
        for part in rec.rdata:
            if isinstance(part, str):
                self.name(part, compress)
            else:
                buf += part
        _RR_FIXED.pack_into(buf, start, rec.rtype, 1, rec.ttl, len(buf) - start - 10)
        self.counts[section] += 1

    def add_raw(self, section: int, raw: bytes) -> None:
        """A record that needs no compression (the OPT pseudo-record)."""
        self.buf += raw
        self.counts[section] += 1

    def finish(self) -> bytes:
        struct.pack_into("!HHHH", self.buf, 4, *self.counts)
        return bytes(self.buf)


def opt_bytes(udp_size: int, ext_rcode: int = 0) -> bytes:
    """An OPT pseudo-record without options (RFC 6891 §6.1.2)."""
    return b"\x00" + _RR_FIXED.pack(TYPE_OPT, udp_size, (ext_rcode & 0xFF) << 24, 0)


def character_strings(strings: list[bytes]) -> bytes:
    """TXT RDATA: length-prefixed character-strings of at most 255 bytes each."""
    return b"".join(bytes([len(s)]) + s for s in strings)
