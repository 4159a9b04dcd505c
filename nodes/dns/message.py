"""Fast codec for the resolver and the agents: query encoder and response reader (``struct``).

The servers have their own fast path (:mod:`nodes.dns.codec`); this is the other side of the
wire. dnslib builds every field of a message through range-checked objects, which made
parsing and packing the resolver's messages most of a simulated discovery's cost. Here:

* :func:`encode_query` writes a query (one question, one OPT record with options) with
  ``struct``; the bytes are exactly what ``DNSRecord.pack()`` gives for the same message
  (tested against dnslib on many shapes);
* :func:`encode_answer` writes the resolver's SRV + A answer to a stub client the same
  way (dnslib's compression, TC when it does not fit);
* :func:`parse_response` reads the shapes ToolDNS servers send (names from
  ``[A-Za-z0-9_*-]`` labels, compressed or not; A, NS, SOA, TXT, SRV and OPT records) into
  light objects with dnslib's attribute names (``msg.header.rcode``, ``msg.rr``,
  ``rr.rdata.target`` …), so the resolver reads either kind the same way. Anything else —
  another record type (DNSSEC's RRSIG, DS, DNSKEY), an unusual label, a malformed or
  trailing byte — returns None and the caller hands the bytes to dnslib, so such a
  message is read exactly as before, errors included.

Names come back as dotted text with a trailing dot, as ``str(DNSLabel)`` gives them.
"""

from __future__ import annotations

import struct
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from dnslib import DNSRecord
from mypy_extensions import mypyc_attr

_HEADER = struct.Struct("!HHHHHH")
_QFIXED = struct.Struct("!HH")
_RR_FIXED = struct.Struct("!HHIH")
_SRV_FIXED = struct.Struct("!HHH")
_SOA_TIMES = struct.Struct("!IIIII")
_OPT_HEAD = b"\x00\x00\x29"  # root owner name, TYPE 41
#: Label bytes read here (and written by :func:`encode_query`); dnslib prints every other
#: byte differently (escapes), so a name with one is left to it.
_SAFE = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_*"
_SAFE_OR_DOT = _SAFE + b"."
A, NS, SOA, TXT, SRV, OPT = 1, 2, 6, 16, 33, 41
#: The same, under names that do not clash with dnslib's record classes, for the resolver
#: and agents (dnslib's ``QTYPE.X`` is a method call per lookup), and response codes.
TYPE_A, TYPE_NS, TYPE_SOA, TYPE_TXT, TYPE_SRV, TYPE_DNSKEY = A, NS, SOA, TXT, SRV, 48
TYPE_CNAME = 5  # not read here (a message with one goes to dnslib)
TYPE_AAAA = 28
RC_NOERROR, RC_FORMERR, RC_SERVFAIL, RC_NXDOMAIN, RC_NOTIMP, RC_REFUSED = range(6)


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Header:
    """The header fields the resolver reads (names as in ``dnslib.DNSHeader``); the flags
    are split out of ``bitmap`` once, not per read."""

    __slots__ = ("a", "aa", "ar", "auth", "bitmap", "id", "opcode", "q", "qr", "ra", "rcode",
                 "rd", "tc")

    def __init__(self, qid: int, bitmap: int, q: int, a: int, auth: int, ar: int) -> None:
        self.id = qid
        self.bitmap = bitmap
        self.q = q
        self.a = a
        self.auth = auth
        self.ar = ar
        self.qr = bitmap >> 15 & 1
        self.opcode = bitmap >> 11 & 0xF
        self.aa = bitmap >> 10 & 1
        self.tc = bitmap >> 9 & 1
        self.rd = bitmap >> 8 & 1
        self.ra = bitmap >> 7 & 1
        self.rcode = bitmap & 0xF


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Question:
    __slots__ = ("qclass", "qname", "qtype")

    def __init__(self, qname: str, qtype: int, qclass: int) -> None:
        self.qname, self.qtype, self.qclass = qname, qtype, qclass


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Record:
    """A resource record: ``rdata`` is one of the RDATA classes below (a list of
    :class:`Option` for OPT, whose ``rclass`` is the UDP size, as in dnslib)."""

    __slots__ = ("rclass", "rdata", "rname", "rtype", "ttl")

    # Any: read by attribute (``rdata.target``) exactly as dnslib's untyped RDATA objects
    # are, by code that takes either kind of message
    rdata: Any

    def __init__(self, rname: str, rtype: int, rclass: int, ttl: int, rdata: Any) -> None:
        self.rname = rname
        self.rtype = rtype
        self.rclass = rclass
        self.ttl = ttl
        self.rdata = rdata


@mypyc_attr(native_class=False)  # compiled, a str subclass must stay a Python class
class AData(str):
    """An IPv4 address; ``str(rdata)`` is the dotted quad, as with dnslib."""

    __slots__ = ()


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class NSData:
    __slots__ = ("label",)

    def __init__(self, label: str) -> None:
        self.label = label

    def __str__(self) -> str:
        return self.label


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class SRVData:
    __slots__ = ("port", "priority", "target", "weight")

    def __init__(self, priority: int, weight: int, port: int, target: str) -> None:
        self.priority, self.weight, self.port, self.target = priority, weight, port, target


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class TXTData:
    __slots__ = ("data",)

    def __init__(self, data: list[bytes]) -> None:
        self.data = data


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class SOAData:
    __slots__ = ("mname", "rname", "times")

    def __init__(self, mname: str, rname: str, times: tuple[int, ...]) -> None:
        self.mname, self.rname, self.times = mname, rname, times


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Option:
    """One EDNS0 option (``dnslib.EDNSOption``'s ``code`` and ``data``)."""

    __slots__ = ("code", "data")

    def __init__(self, code: int, data: bytes) -> None:
        self.code, self.data = code, data


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Message:
    """A parsed response with dnslib's section names; ``wire`` keeps the bytes.

    Read-only by convention: messages with the same bytes after the ID share their
    questions and sections (see :func:`parse_response`), and ``derived``: what readers
    computed from those alone (the resolver's reading of a referral, the endpoints of an
    answer), kept under their own keys, at most :data:`DERIVED_MAX` of them — see
    :func:`derive`."""

    __slots__ = ("ar", "auth", "derived", "header", "questions", "rr", "wire")

    def __init__(self, header: Header, questions: list[Question], rr: list[Record],
                 auth: list[Record], ar: list[Record], wire: bytes,
                 derived: dict[Hashable, Any] | None = None) -> None:
        self.header = header
        self.questions = questions
        self.rr = rr
        self.auth = auth
        self.ar = ar
        self.wire = wire
        self.derived: dict[Hashable, Any] = {} if derived is None else derived

    @property
    def q(self) -> Question:
        return self.questions[0]

    def to_dnslib(self) -> DNSRecord:
        """The same message as dnslib objects (for code that builds dnslib replies)."""
        return DNSRecord.parse(self.wire)


#: Pointers followed in a row to read one name (a name has at most 127 labels).
_MAX_HOPS = 127


class _Decline(Exception):
    """Not a shape read here: the caller falls back to dnslib."""


def _name(wire: bytes, pos: int, memo: dict[int, str], hops: int = 0) -> tuple[str, int]:
    """Dotted name at ``pos`` and the offset after it; a pointer must point before the
    name's first byte (so a chain of them always moves backwards and ends), a chain of
    pointers not already read is followed at most ``_MAX_HOPS`` deep, and the name takes
    at most 255 bytes on the wire (else dnslib reads the message, and refuses it).

    ``memo`` maps offsets of names already read in this message to their text, so a
    compressed name costs one lookup per pointer.
    """
    if hops > _MAX_HOPS:
        raise _Decline
    first = pos
    n = wire[pos]
    if n >= 0xC0:  # a bare pointer (most owner names in a compressed message)
        ptr = (n & 0x3F) << 8 | wire[pos + 1]
        if ptr >= first:  # strictly before this name: no loops, bounded recursion
            raise _Decline
        return memo.get(ptr) or _name(wire, ptr, memo, hops + 1)[0], pos + 2
    raws: list[bytes] = []
    starts: list[int] = []
    while True:
        n = wire[pos]  # IndexError past the end (also after a short label): the caller's
        if n == 0:
            end, suffix = pos + 1, ""
            break
        if n >= 0xC0:
            ptr = (n & 0x3F) << 8 | wire[pos + 1]
            end = pos + 2
            if ptr >= first:  # strictly before this name: no loops, bounded recursion
                raise _Decline
            suffix = memo.get(ptr) or _name(wire, ptr, memo, hops + 1)[0]
            if suffix == ".":
                suffix = ""
            break
        if n > 63:
            raise _Decline
        starts.append(pos)
        raws.append(wire[pos + 1 : pos + 1 + n])
        pos += 1 + n
    if not raws:
        return suffix or ".", end
    joined = b".".join(raws)  # only safe bytes, and no "." inside a label
    if joined.translate(None, _SAFE_OR_DOT) or joined.count(46) != len(raws) - 1:
        raise _Decline
    text = joined.decode("ascii") + "." + suffix
    if len(text) > 254:  # over 255 bytes on the wire (the dotted form is one shorter)
        raise _Decline
    for start in starts:  # label i starts at the same offset in the text as in the run
        memo[start] = text[start - first :]
    return text, end


def _record(wire: bytes, pos: int, memo: dict[int, str]) -> tuple[Record, int]:
    n = wire[pos]
    # the owner is most often a pointer to a name already read (memo holds only offsets
    # before this record, so it points backwards as _name requires)
    known = memo.get((n & 0x3F) << 8 | wire[pos + 1]) if n >= 0xC0 else None
    if known is not None:
        rname = known
        pos += 2
    else:
        rname, pos = _name(wire, pos, memo)
    rtype, rclass, ttl, rdlength = _RR_FIXED.unpack_from(wire, pos)
    pos += 10
    end = pos + rdlength
    if end > len(wire):
        raise _Decline
    rdata: object
    if rtype == OPT:  # as dnslib: options while more than 4 bytes remain
        options = []
        while end - pos > 4:
            code, length = _QFIXED.unpack_from(wire, pos)
            pos += 4
            if pos + length > end:
                raise _Decline
            options.append(Option(code, wire[pos : pos + length]))
            pos += length
        return Record(rname, rtype, rclass, ttl, options), end
    if not rdlength:
        raise _Decline  # dnslib: "Empty RR"
    if rtype == A:
        if rdlength != 4:
            raise _Decline
        rdata = AData("%d.%d.%d.%d" % tuple(wire[pos:end]))  # noqa: UP031
    elif rtype == NS:
        label, after = _name(wire, pos, memo)
        if after != end:
            raise _Decline
        rdata = NSData(label)
    elif rtype == SRV:
        priority, weight, port = _SRV_FIXED.unpack_from(wire, pos)
        target, after = _name(wire, pos + 6, memo)
        if after != end:
            raise _Decline
        rdata = SRVData(priority, weight, port, target)
    elif rtype == TXT:
        strings = []
        while pos < end:
            n = wire[pos]
            if pos + 1 + n > end:
                raise _Decline
            strings.append(wire[pos + 1 : pos + 1 + n])
            pos += 1 + n
        rdata = TXTData(strings)
    elif rtype == SOA:
        mname, after = _name(wire, pos, memo)
        rname_, after = _name(wire, after, memo)
        if after + 20 != end:
            raise _Decline
        rdata = SOAData(mname, rname_, _SOA_TIMES.unpack_from(wire, after))
    else:
        raise _Decline
    return Record(rname, rtype, rclass, ttl, rdata), end


#: Parsed messages by their bytes after the ID (bounded, first in first out): the same
#: server gives the same answer to the same question and intent, and parsing it again would
#: give equal objects. At most MEMO_SIZE messages (0 turns the memo off) of MEMO_BYTES
#: wire bytes in all (their objects take about ten times as much); a message over 1/16 of
#: that is not kept.
MEMO_SIZE = 16384
MEMO_BYTES = 4 << 20
_MEMO: OrderedDict[bytes, tuple] = OrderedDict()
_memo_bytes = [0]  # wire bytes of the keys in _MEMO


def _memorise(key: bytes, parsed: tuple) -> None:
    size = len(key)
    if size * 16 > MEMO_BYTES:
        return
    held = _memo_bytes[0]
    while _MEMO and (len(_MEMO) >= MEMO_SIZE or held + size > MEMO_BYTES):
        held -= len(_MEMO.popitem(last=False)[0])
    _MEMO[key] = parsed
    _memo_bytes[0] = held + size


def parse_response(message: bytes | bytearray) -> Message | None:
    """A response (QR set) read with ``struct``, or None: let dnslib read it (a
    ``bytearray``, as dnslib packs, is copied first)."""
    wire = message if isinstance(message, bytes) else bytes(message)
    if len(wire) < 12 or not wire[2] & 0x80:
        return None
    key = wire[2:]
    hit = _MEMO.get(key)
    if hit is not None:
        header, questions, rr, auth, ar, derived = hit
        return Message(Header(wire[0] << 8 | wire[1], *header), questions, rr, auth, ar, wire,
                       derived)
    qid, bitmap, qd, an, ns, ar_count = _HEADER.unpack_from(wire)
    memo: dict[int, str] = {}
    try:
        pos = 12
        questions = []
        for _ in range(qd):
            qname, pos = _name(wire, pos, memo)
            qtype, qclass = _QFIXED.unpack_from(wire, pos)
            pos += 4
            questions.append(Question(qname, qtype, qclass))
        sections: list[list[Record]] = [[], [], []]
        for section, count in zip(sections, (an, ns, ar_count), strict=True):
            for _ in range(count):
                rec, pos = _record(wire, pos, memo)
                section.append(rec)
    except (_Decline, IndexError, struct.error):
        return None
    if pos != len(wire):
        return None
    derived = {}
    if MEMO_SIZE:
        _memorise(key, ((bitmap, qd, an, ns, ar_count), questions, *sections, derived))
    answer, authority, additional = sections
    return Message(Header(qid, bitmap, qd, an, ns, ar_count), questions, answer, authority,
                   additional, wire, derived)


#: Results kept per message content (:attr:`Message.derived`); readers ask for few.
DERIVED_MAX = 8

_T = TypeVar("_T")


def derive(msg: object, key: Hashable, compute: Callable[[], _T]) -> _T:
    """``compute()``, a function of ``msg``'s content (bytes after the ID) and ``key``
    alone, kept with the message's content when ``msg`` is a :class:`Message` (all messages
    with the same bytes after the ID share it), so that reading the same response again
    costs a lookup. The value is shared: callers must not change it."""
    derived = msg.derived if isinstance(msg, Message) else None
    if derived is None:
        return compute()
    value: _T = derived.get(key, _ABSENT)
    if value is _ABSENT:
        value = compute()
        if len(derived) < DERIVED_MAX:
            derived[key] = value
    return value


_ABSENT = object()


#: plain_name's answers by name; bounded: when full it starts afresh.
_PLAIN: dict[str, bytes | None] = {}
_PLAIN_MAX = 1 << 16


def plain_name(name: str) -> bytes | None:
    """Uncompressed wire form of a plain dotted name, or None if it is not plain."""
    wire = _PLAIN.get(name, b"")
    if wire != b"":
        return wire
    if name in (".", ""):
        return b"\x00"
    # a non-ASCII character becomes "?", which is not a plain label byte
    labels = name.encode("ascii", "replace").rstrip(b".").split(b".")
    if any(not 0 < len(label) <= 63 or label.translate(None, _SAFE) for label in labels):
        wire = None
    else:
        wire = b"".join([len(label).to_bytes(1, "big") + label for label in labels]) + b"\x00"
        if len(wire) > 255:
            wire = None
    if len(_PLAIN) >= _PLAIN_MAX:
        _PLAIN.clear()
    _PLAIN[name] = wire
    return wire


def encode_query(qid: int, flags: int, qname: str, qtype: int,
                 options: list[tuple[int, bytes]] | None, udp_size: int = 1232,
                 opt_ttl: int = 0, qclass: int = 1) -> bytes | None:
    """A query with one question and (unless ``options`` is None) one OPT record carrying
    ``options`` in order; None if ``qname`` is not plain (build it with dnslib then)."""
    name = plain_name(qname)
    if name is None:
        return None
    head = _HEADER.pack(qid, flags, 1, 0, 0, 0 if options is None else 1)
    question = name + _QFIXED.pack(qtype, qclass)
    if options is None:
        return head + question
    rdata = b"".join([_QFIXED.pack(code, len(data)) + data for code, data in options])
    opt = _OPT_HEAD + struct.pack("!HIH", udp_size, opt_ttl, len(rdata)) + rdata
    return head + question + opt


#: encode_answer's results by everything but the ID (first in, first out): a repeated
#: discovery gets the same answer. Answers of at most ANSWER_MEMO_MAX_SRV tools and
#: ANSWER_MEMO_MAX_BYTES bytes are kept, at most ANSWER_MEMO of them (0: no memo).
ANSWER_MEMO = 4096
ANSWER_MEMO_MAX_SRV = 32
ANSWER_MEMO_MAX_BYTES = 2048
_ANSWERS: OrderedDict[tuple[object, ...], bytes | None] = OrderedDict()


def encode_answer(qid: int, rd: int, rcode: int, question: bytes,
                  srv: list[tuple[int, int, int, str]], a: list[tuple[str, str]],
                  opt_size: int | None, limit: int, ttl: int = 60) -> bytes | None:
    """:func:`_encode_answer`, its bytes after the ID kept in a bounded memo."""
    if not ANSWER_MEMO or len(srv) > ANSWER_MEMO_MAX_SRV or len(question) > 512:
        return _encode_answer(qid, rd, rcode, question, srv, a, opt_size, limit, ttl)
    key = (rd & 1, rcode, question, tuple(srv), tuple(a), opt_size, limit, ttl)
    tail = _ANSWERS.get(key, b"")  # b"": not kept (a kept answer is longer than its ID)
    if tail == b"":
        wire = _encode_answer(qid, rd, rcode, question, srv, a, opt_size, limit, ttl)
        if wire is None or len(wire) <= ANSWER_MEMO_MAX_BYTES:
            if len(_ANSWERS) >= ANSWER_MEMO:
                _ANSWERS.popitem(last=False)
            _ANSWERS[key] = None if wire is None else wire[2:]
        return wire
    return None if tail is None else qid.to_bytes(2, "big") + tail


def _encode_answer(qid: int, rd: int, rcode: int, question: bytes,
                   srv: list[tuple[int, int, int, str]], a: list[tuple[str, str]],
                   opt_size: int | None, limit: int, ttl: int = 60) -> bytes | None:
    """A resolver's answer to a stub client, as dnslib packs it (``RecursiveResolver.
    _answer_client``): SRV records owned by the question's name, A records of their targets
    in the additional section, an OPT record (no options) if ``opt_size`` is given; over
    ``limit`` bytes the answer goes out with TC and only the question (and OPT).

    ``question`` is the question section as the client sent it. Names are compressed as
    dnslib does (every suffix written by a compressing record, case-sensitive; SRV targets
    never). None if a name is not plain or the message would need pointers beyond 0x3FFF.
    """
    flags = 0x8000 | (rd & 1) << 8 | 0x80 | (rcode & 0xF)
    buf = bytearray(_HEADER.pack(qid, flags, 1, len(srv), 0, len(a) + (opt_size is not None)))
    names: dict[bytes, int] = {}
    pos = 0
    while question[pos]:  # register the question name's suffixes (case as sent)
        names[question[pos:question.index(0, pos) + 1]] = 12 + pos
        pos += 1 + question[pos]
    buf += question
    head = _RR_FIXED.pack(SRV, 1, ttl, 0)[:-2]
    for priority, weight, port, target in srv:
        wire = plain_name(target)
        if wire is None:
            return None
        rdata = _SRV_FIXED.pack(priority, weight, port) + wire
        buf += b"\xc0\x0c" + head + len(rdata).to_bytes(2, "big") + rdata
    a_head = _RR_FIXED.pack(A, 1, ttl, 4)
    for owner, address in a:
        wire = plain_name(owner)
        if wire is None:
            return None
        i = 0
        while wire[i]:  # the longest suffix already written becomes a pointer
            ptr = names.get(wire[i:])
            if ptr is not None:
                buf += wire[:i] + (0xC000 | ptr).to_bytes(2, "big")
                break
            names[wire[i:]] = len(buf) + i
            i += 1 + wire[i]
        else:
            buf += wire
        try:
            buf += a_head + bytes(map(int, address.split(".")))
        except ValueError:
            return None
    if opt_size is not None:
        buf += _OPT_HEAD + struct.pack("!HIH", opt_size, 0, 0)
    if len(buf) > 0x3FFF or max(names.values(), default=0) > 0x3FFF:
        return None
    if len(buf) > limit:  # truncated: question (and OPT) only, TC set
        out = bytearray(_HEADER.pack(qid, flags | 0x0200, 1, 0, 0, opt_size is not None))
        out += question
        if opt_size is not None:
            out += _OPT_HEAD + struct.pack("!HIH", opt_size, 0, 0)
        return bytes(out)
    return bytes(buf)
