"""Fast path for the authoritative server: query view, pre-encoded records, name compression.

dnslib builds and packs a reply through per-field range-checked objects (≈ 300 µs for a
six-record referral, see benchmarks/HISTORY.md), which would make the codec — not the
protocol — the bottleneck of every measurement. So the server:

* reads the common query shape (one question, at most one OPT record) with ``struct``
  (:func:`parse_query`, which remembers the names it has decoded) and hands anything else
  to dnslib (:func:`view_from_dnslib`, through :func:`parse_message`, which refuses the
  names dnslib reads but cannot write: a label over 63 bytes, a name over 255, a pointer
  in the first question name);
* keeps every record it may send as a :class:`Rec` encoded once at zone load: the whole
  record where nothing depends on the message (an SRV owned by the question's name), else
  fixed chunks plus names prepared for compression (:func:`prepare_name`);
* appends records with :func:`put_name` / :func:`put_record` (from
  ``AuthoritativeServer._fit``), compressing names (RFC 1035 §4.1.4) in owners and in
  NS/SOA RDATA, never in SRV targets (RFC 2782).

``tests/nodes/authoritative/test_golden_replies.py`` pins the reply bytes; the tests check
every reply with dnslib, dnspython and dig.
"""

from __future__ import annotations

import struct
from collections import OrderedDict
from functools import lru_cache

from dnslib import DNSBuffer, DNSLabel, DNSRecord
from mypy_extensions import mypyc_attr

_HEADER = struct.Struct("!HHHHHH")
_RR_FIXED = struct.Struct("!HHIH")
_QFIXED = struct.Struct("!HH")
_ID_FLAGS = struct.Struct("!HH")
_COUNTS = struct.Struct("!HHHH")
_TYPE_CLASS_TTL = struct.Struct("!HHI")
_SAFE = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_*"
_SAFE_OR_DOT = _SAFE + b"."
#: Record types the servers write (AAAA only at tool targets of a zone with ``aaaa``),
#: and the query types IXFR, AXFR and ANY.
A, NS, CNAME, SOA, TXT, AAAA, SRV, IXFR, AXFR, ANY = 1, 2, 5, 6, 16, 28, 33, 251, 252, 255
TYPE_OPT = 41
COMPRESSIBLE_RDATA = frozenset({NS, SOA})


class FormatError(ValueError):
    """The message is not a well-formed DNS query (peer's fault)."""


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class QueryView:
    """What the server needs from a query, however it was parsed (read-only by convention).

    A plain slotted class: building a frozen dataclass costs four times as much, and one is
    built per query.
    """

    _FIELDS = ("id", "flags", "qdcount", "qname", "qtype", "qclass", "question",
               "simple_name", "opt_udp", "opt_ttl", "options")
    __slots__ = ("flags", "id", "opt_ttl", "opt_udp", "options", "qclass", "qdcount", "qname",
                 "qtype", "question", "simple_name")

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

    def __init__(self, id: int, flags: int, qdcount: int, qname: str, qtype: int,
                 qclass: int, question: bytes, simple_name: bool, opt_udp: int | None,
                 opt_ttl: int, options: tuple[tuple[int, bytes], ...]) -> None:
        self.id = id
        self.flags = flags
        self.qdcount = qdcount
        self.qname = qname
        self.qtype = qtype
        self.qclass = qclass
        self.question = question
        self.simple_name = simple_name
        self.opt_udp = opt_udp
        self.opt_ttl = opt_ttl
        self.options = options

    def __repr__(self) -> str:
        fields = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._FIELDS)
        return f"QueryView({fields})"

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


#: Wire form of plain question names (labels only, no terminator) -> their lower-case
#: dotted form; bounded, first in first out. Only names :func:`_walk_name` accepted are
#: stored, and such a name contains no zero byte, so the first zero after offset 12 in a
#: query carrying it is its terminator.
_NAME_MEMO: OrderedDict[bytes, str] = OrderedDict()
NAME_MEMO_SIZE = 2048  # 0 turns the memo off


def _walk_name(wire: bytes) -> tuple[str | None, int]:
    """(lower-case dotted question name, offset after it), or (None, 0) if not plain.

    Plain: labels of at most 63 bytes from ``[A-Za-z0-9_*-]``, at most 255 bytes in all.
    """
    pos, labels = 12, []
    try:
        n = wire[12]
        while n:  # an overrun shows up as IndexError on the next length byte
            if n > 63:
                return None, 0
            labels.append(wire[pos + 1 : pos + 1 + n])
            pos += 1 + n
            n = wire[pos]
    except IndexError:
        return None, 0
    pos += 1
    if pos - 12 > 255:
        return None, 0
    if not labels:
        return ".", pos
    raw = b".".join(labels)
    # only safe characters, and no "." inside a label
    if raw.translate(None, _SAFE_OR_DOT) or raw.count(46) != len(labels) - 1:
        return None, 0
    return raw.decode("ascii").lower() + ".", pos


def parse_query(wire: bytes) -> QueryView | None:
    """Struct parse of the common shape; None means "let dnslib decide".

    The common shape: a query (QR clear) with one question whose labels use only
    ``[A-Za-z0-9_*-]``, no answer or authority records and at most one additional record,
    which must be an OPT record ending the message.
    """
    if wire.__class__ is not bytes:
        wire = bytes(wire)
    size = len(wire)
    if size < 17:
        return None
    qid, flags, qd, an, ns, ar = _HEADER.unpack_from(wire)
    if qd != 1 or an or ns or ar > 1 or flags & 0x8000:
        return None
    # A plain name has no zero byte before its terminator: look it up by its wire form.
    end = wire.find(0, 12)
    qname = _NAME_MEMO.get(wire[12:end]) if end > 0 else None
    if qname is not None:
        pos = end + 1
    else:
        qname, pos = _walk_name(wire)
        if qname is None:
            return None
        if NAME_MEMO_SIZE:
            if len(_NAME_MEMO) >= NAME_MEMO_SIZE:
                _NAME_MEMO.popitem(last=False)
            _NAME_MEMO[wire[12 : pos - 1]] = qname
    if pos + 4 > size:
        return None
    qtype, qclass = _QFIXED.unpack_from(wire, pos)
    question = wire[12 : pos + 4]
    pos += 4
    if not ar:
        if pos != size:
            return None
        return QueryView(qid, flags, 1, qname, qtype, qclass, question, True, None, 0, ())
    if pos + 11 > size or wire[pos]:
        return None
    rtype, rclass, ttl, rdlen = _RR_FIXED.unpack_from(wire, pos + 1)
    pos += 11
    if rtype != TYPE_OPT or pos + rdlen != size:
        return None
    opts = []
    while pos < size:
        if pos + 4 > size:
            return None
        code, length = _QFIXED.unpack_from(wire, pos)
        pos += 4 + length
        if pos > size:
            return None
        opts.append((code, wire[pos - length : pos]))
    return QueryView(qid, flags, 1, qname, qtype, qclass, question, True, rclass, ttl,
                     tuple(opts))


def wire_name_ok(name: DNSLabel, text: bool = False) -> bool:
    """Whether a name dnslib decoded can go back on the wire: labels of 1–63 bytes, at most
    255 bytes in all (RFC 1035 §2.3.4). dnslib's reader takes a length byte of 64–191
    (reserved and extended label types) as a label and puts no bound on a name's length;
    its writer raises on both.

    ``text``: also whether the name survives dnslib's text form, which nodes that keep
    names as text (the resolver, the agents) turn back into labels: no ``.`` or ``\\``
    inside a label (unescaped in ``str(DNSLabel)``) and no byte over 127 (IDNA-encoded on
    the way back, which changes the name or raises)."""
    size = 1
    for label in name.label:
        n = len(label)
        if not 0 < n <= 63:
            return False
        if text and (b"." in label or b"\\" in label or not label.isascii()):
            return False
        size += 1 + n
    return size <= 255


def _names_ok(msg: DNSRecord, text: bool) -> bool:
    """:func:`wire_name_ok` for every name of ``msg``: questions, owners, RDATA names."""
    for q in msg.questions:
        if not wire_name_ok(q.qname, text):
            return False
    for rr in (*msg.rr, *msg.auth, *msg.ar):
        if not wire_name_ok(rr.rname, text):
            return False
        for value in getattr(rr.rdata, "__dict__", {}).values():
            if isinstance(value, DNSLabel) and not wire_name_ok(value, text):
                return False
    return True


def _question_pointer(wire: bytes) -> bool:
    """Whether the first question name holds a compression pointer: nothing precedes it
    but the header, so the pointer reads the header (or points forward)."""
    if len(wire) < 13 or not (wire[4] or wire[5]):
        return False
    pos, size = 12, len(wire)
    while pos < size:
        n = wire[pos]
        if not n:
            return False
        if n > 63:
            return True
        pos += 1 + n
    return False


def parse_message(wire: bytes, text: bool = False) -> DNSRecord:
    """A peer's message parsed by dnslib, or FormatError: what dnslib cannot read (pointer
    loops and forward pointers included), a pointer in the first question name, or a name
    that cannot be written back (:func:`wire_name_ok`; with ``text``, nor kept as text)."""
    try:
        msg = DNSRecord.parse(wire)
    except Exception as exc:  # dnslib raises several types on garbage (RecursionError too)
        raise FormatError(f"{type(exc).__name__}: {str(exc)[:200]}") from None
    if _question_pointer(wire) or not _names_ok(msg, text):
        raise FormatError("a malformed name")
    return msg


def view_from_dnslib(wire: bytes) -> QueryView:
    """Slow path: dnslib parses (:func:`parse_message`); raises FormatError on anything it
    cannot read."""
    msg = parse_message(wire)
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
    opt_udp, opt_ttl = None, 0
    options: tuple[tuple[int, bytes], ...] = ()
    if opts:
        opt_udp, opt_ttl = opts[0].rclass, opts[0].ttl
        options = tuple((o.code, bytes(o.data)) for o in opts[0].rdata)
    return QueryView(h.id, flags, len(msg.questions), qname, qtype, qclass, question, False,
                     opt_udp, opt_ttl, options)


#: A domain name prepared for compression: (uncompressed wire form, suffix keys, prefixes).
#: ``keys[i]`` names the suffix starting at label i (labels joined by ".", no trailing dot:
#: the form the question's suffixes are registered under) and ``prefixes[i]`` is the wire
#: form of the labels before it, so "labels 0..i-1, then a pointer" is
#: ``prefixes[i] + pointer``.
PreparedName = tuple[bytes, tuple[str, ...], tuple[bytes, ...]]


def name_wire(name: str) -> bytes:
    """Uncompressed wire form of a dotted name (``""`` and ``"."`` are the root);
    ``prepare_name(name)[0]``, without the compression tables."""
    if name in (".", ""):
        return b"\x00"
    out = bytearray()
    for label in name.rstrip(".").split("."):
        raw = label.encode("ascii")
        out.append(len(raw))
        out += raw
    out.append(0)
    return bytes(out)


@lru_cache(maxsize=8192)
def prepare_name(name: str) -> PreparedName:
    """Split and encode ``name`` once (``""`` and ``"."`` are the root); the last 8192
    names are remembered (a tool's target owns its A and TXT records and is its SRV's
    target)."""
    if name in (".", ""):
        return b"\x00", (), ()
    text = name.rstrip(".")
    labels = text.split(".")
    # label i starts at the same offset in the dotted text as in the wire form
    starts = []
    pos = 0
    for label in labels:
        starts.append(pos)
        pos += len(label) + 1
    wire = b"".join([bytes((len(label),)) + label.encode("ascii") for label in labels])
    wire += b"\x00"
    return wire, tuple([text[i:] for i in starts]), tuple([wire[:i] for i in starts])


def question_names(qname: str) -> dict[str, int]:
    """Offsets of every suffix of a plain question name (``qname`` from :func:`parse_query`).

    The question starts at offset 12, and in wire form label i starts exactly where it
    starts in the dotted text, so the offset of a suffix is 12 plus its text position.
    """
    names: dict[str, int] = {}
    end = len(qname) - 1  # the trailing dot
    pos = 0
    while pos < end:
        names[qname[pos:end]] = 12 + pos
        pos = qname.index(".", pos) + 1
    return names


def put_name(buf: bytearray, names: dict[str, int], name: PreparedName) -> None:
    """Append ``name`` compressed against ``names`` (RFC 1035 §4.1.4); register new suffixes.

    The longest suffix already in the message becomes a pointer. Suffixes written here are
    registered while their offset still fits a pointer (below 0x3FFF).
    """
    wire, keys, prefixes = name
    base = len(buf)
    i = 0
    for key in keys:
        ptr = names.get(key)
        if ptr is not None:
            buf += prefixes[i]
            buf += (0xC000 | ptr).to_bytes(2, "big")
            break
        i += 1
    else:
        buf += wire
    for j in range(i):
        at = base + len(prefixes[j])
        if at >= 0x3FFF:
            break
        names[keys[j]] = at


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class _Marker:
    """A module-level sentinel that stays itself through pickling (engines that ship nodes
    to other processes, e.g. Ray actors and Mininet hosts, compare it with ``is``)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __reduce__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return self.name


#: Marks where RDATA starts in :attr:`Rec.pieces` (RDLENGTH is patched after it).
RDATA = _Marker("RDATA")


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Rec:
    """A resource record, encoded as far as possible when the zone is loaded.

    ``owner`` "" means "the question's name" (a pointer to offset 12). ``rdata`` mixes fixed
    bytes and domain names (str), in wire order; names are compressed only in NS and SOA
    RDATA (RFC 3597 §4), never in SRV targets (RFC 2782).

    Prepared forms:

    * ``wire``: the whole record, when nothing in it depends on the message (owner "" and
      no compressible RDATA name), so appending it is one copy; else None;
    * ``pieces``: what :func:`put_record` appends, in order: fixed ``bytes``, names to
      compress (:data:`PreparedName`) and the :data:`RDATA` marker, after which RDLENGTH
      (the two bytes before it) is patched. Usually (owner name, TYPE · CLASS · TTL ·
      RDLENGTH · RDATA); for NS/SOA (owner, TYPE · CLASS · TTL · 0, RDATA, RDATA parts…);
    * ``split``: (owner name, the rest) when the owner is the only name to compress, else
      None.
    """

    __slots__ = ("owner", "pieces", "rdata", "rtype", "split", "ttl", "wire")

    owner: str
    rtype: int
    ttl: int
    rdata: tuple[bytes | str, ...]
    wire: bytes | None
    pieces: tuple[bytes | PreparedName | _Marker, ...]
    split: tuple[PreparedName, bytes] | None

    def __init__(self, owner: str, rtype: int, ttl: int, rdata: tuple[bytes | str, ...]) -> None:
        self.owner = owner
        self.rtype = rtype
        self.ttl = ttl
        self.rdata = rdata
        head = _TYPE_CLASS_TTL.pack(rtype, 1, ttl)
        first: bytes | PreparedName = prepare_name(owner) if owner else b"\xc0\x0c"
        if rtype in COMPRESSIBLE_RDATA and any(isinstance(p, str) for p in rdata):
            parts = tuple(prepare_name(p) if isinstance(p, str) else p for p in rdata)
            self.pieces = (first, head + b"\x00\x00", RDATA, *parts)
            self.wire = self.split = None
            return
        raw = b"".join([prepare_name(p)[0] if isinstance(p, str) else p for p in rdata])
        tail = head + len(raw).to_bytes(2, "big") + raw
        self.pieces = (first, tail)
        if isinstance(first, bytes):
            self.wire, self.split = first + tail, None
        else:
            self.wire, self.split = None, (first, tail)

    def __repr__(self) -> str:
        return f"Rec({self.owner!r}, {self.rtype}, {self.ttl}, {self.rdata!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Rec):
            return NotImplemented
        return (self.owner, self.rtype, self.ttl, self.rdata) == (
            other.owner, other.rtype, other.ttl, other.rdata)

    def __hash__(self) -> int:
        return hash((self.owner, self.rtype, self.ttl, self.rdata))


def put_record(buf: bytearray, names: dict[str, int], rec: Rec) -> None:
    """Append ``rec``, compressing its owner and (NS/SOA) RDATA names against ``names``."""
    rdata = 0
    for piece in rec.pieces:
        if piece.__class__ is bytes:  # (not isinstance: this runs per piece of a reply)
            buf += piece
        elif piece.__class__ is tuple:
            put_name(buf, names, piece)
        else:  # the RDATA marker
            rdata = len(buf)
    if rdata:
        buf[rdata - 2 : rdata] = (len(buf) - rdata).to_bytes(2, "big")


def opt_bytes(udp_size: int, ext_rcode: int = 0) -> bytes:
    """An OPT pseudo-record without options (RFC 6891 §6.1.2)."""
    return b"\x00" + _RR_FIXED.pack(TYPE_OPT, udp_size, (ext_rcode & 0xFF) << 24, 0)


def character_strings(strings: list[bytes]) -> bytes:
    """TXT RDATA: length-prefixed character-strings of at most 255 bytes each."""
    return b"".join(bytes([len(s)]) + s for s in strings)
