"""Transport-free authoritative DNS server for ToolDNS zones (root, TLD, intermediate, leaf).

``AuthoritativeServer.handle(wire, src, now, transport)`` takes one DNS message and returns
the response bytes (or None to drop). One server may hold several zones.

With the intent option on a cursor name ``_svc._proto._<zone>.``:
  * non-leaf zone → referral: NS records of the top-K children by semantic score (all for
    K = 0) with glue A records; for K = 0 the children's summaries ride along as TXT in the
    additional section so a resolver can match locally ("query mock");
  * leaf zone → top-K SRV records (owner = the query name) with A records of their targets
    (and, in a zone with ``aaaa``, their AAAA records after every A; glue stays IPv4).
Without the option the server is a plain authoritative server for the names it holds:
SRV at ``_svc._proto.<leaf>.``, A/TXT at tool targets, SOA/NS/TXT at the apex, A at its own
NS hosts, referrals below delegations, NXDOMAIN/NODATA with SOA, AA set on its own data.

The intent may instead ride in the name (:func:`nodes.dns.wire.intent_qname`, no option needed,
for stock recursors that drop it): ``k3.<words>._svc._proto.<zone>.`` is answered, for any
type, with a CNAME to the same labels under the zone's best child, plus that child's NS
and glue (the referral a resolver needs next, so it need not ask for it); at a leaf, SRV
(or ANY) gets the top-K SRV RRset owned by the name, with A records of the targets. Names
above such a name inside ``_proto.<zone>`` are empty non-terminals (NODATA, not NXDOMAIN),
so that QNAME-minimising resolvers (RFC 9156) walk down to it.

Responses that do not fit the requester's UDP size go out truncated (TC, empty sections);
the same server answers the retry over TCP. A peer's malformed input is answered with
FORMERR when the header can be read and dropped otherwise; both are counted. Replies are
built from records encoded at zone load (:mod:`nodes.dns.codec`); a bounded packet cache
(keyed on the query bytes after the ID) answers repeated queries. Nothing else is cached
between queries except what a query name alone determines (its decoded form, its ToolDNS
parts and its suffix offsets, in small bounded memos): scoring, ranking and encoding run
for every query the packet cache does not answer.

Zone transfers (RFC 5936) go through ``transfer(wire, src, now)``, which a TCP adapter calls
before ``handle``: AXFR answers SOA, every record of the zone (:func:`zone_records`: the
static records ``handle`` serves to standard questions, delegations with their glue), SOA
again, in as many messages of at most 65535 bytes as needed, each with the query's ID and
question; IXFR is answered the same way (the AXFR-style fallback of RFC 1995 §4) unless the
client already has the current serial (then the SOA alone). Transfers are allowed only to
sources in ``transfer_acl`` (loopback by default) or ``transfer_peers`` (the hierarchy's own
servers, set by ``sim.build.hierarchy``); others get REFUSED, a name that is not one of the
server's zone apexes NOTAUTH. AXFR/IXFR reaching ``handle`` (over UDP) gets NOTIMP, as NSD
and Knot answer AXFR over UDP. Transfers are never signed nor cached.
"""

from __future__ import annotations

import hashlib
import ipaddress
import struct
from collections import Counter, OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from dnslib import DNSRecord

from nodes.dns.codec import (
    FormatError,
    QueryView,
    Rec,
    character_strings,
    opt_bytes,
    parse_query,
    put_name,
    put_record,
    question_names,
    view_from_dnslib,
)
from nodes.dns.dnssec import ZoneSigner
from nodes.dns.wire import (
    CLASSIC_UDP_SIZE,
    DEFAULT_EDNS_SIZE,
    DEFAULT_OPTION_CODE,
    EMBEDDING_OPTION_CODE,
    INTENT_VERSION,
    MAX_MESSAGE_SIZE,
    PROTOCOLS,
    SCORES_OPTION_CODE,
    IntentError,
    IntentName,
    decode_embedding,
    encode_scores,
    is_subdomain,
    normalise,
    parse_intent_labels,
    parse_intent_qname,
    parse_tool_name,
    retarget,
)
from nodes.dns.zone import Address, Delegation, ToolRecord, Ttls, ZoneData, aaaa_address
from nodes.scoring import (
    BM25Scorer,
    Ranker,
    ScoreIndex,
    Scorer,
    centroid_index,
    group_max_index,
    ranker,
    scored_top_k,
)

A, NS, CNAME, SOA, TXT, SRV, IXFR, AXFR, ANY = 1, 2, 5, 6, 16, 33, 251, 252, 255
AAAA = 28  # tool targets of a zone with ``aaaa`` (nodes.dns.zone.aaaa_address); glue stays A
_HEADER = struct.Struct("!HHHHHH")
_COUNTS3 = struct.Struct("!HHH")  # ANCOUNT, NSCOUNT, ARCOUNT
_INTENT_HEADER = struct.Struct("!BHB")  # nodes.dns.wire.Intent: version · length · K
_RX = {"udp": "rx_udp", "tcp": "rx_tcp"}  # counter keys, not rebuilt per query
# a packet-cache entry's memory beyond its key and reply bytes: two bytes headers (33 each),
# a 2-tuple (56) and the OrderedDict's link and table slot (about 100), on CPython 3.11
_CACHE_ENTRY_OVERHEAD = 220
NOERROR, FORMERR, SERVFAIL, NXDOMAIN, NOTIMP, REFUSED, NOTAUTH = 0, 1, 2, 3, 4, 5, 9
BADVERS = 16  # RFC 6891 extended RCODE
ANSWER, AUTHORITY, ADDITIONAL = 1, 2, 3
#: who may transfer zones unless told otherwise (``transfer_acl``)
LOOPBACK_ACL = ("127.0.0.0/8", "::1/128")
_PROTO_LABELS = frozenset("_" + p for p in PROTOCOLS)  # the last label of an intent name
_XFR_QTYPES = (b"\x00\xfb", b"\x00\xfc")  # IXFR, AXFR as they follow a question name
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def networks(cidrs: Iterable[str]) -> tuple[Network, ...]:
    """Parse an ACL: networks (``10.0.0.0/8``) or single addresses; ValueError if bad."""
    return tuple(ipaddress.ip_network(c, strict=False) for c in cidrs)


_LOOPBACK_NETS = networks(LOOPBACK_ACL)  # parsed once, shared by every server


def txt_strings(text: str) -> list[bytes]:
    """Split text into TXT character-strings of at most 255 bytes."""
    raw = text.encode("utf-8")
    return [raw[i : i + 255] for i in range(0, len(raw), 255)] or [b""]


def child_hint(child: Delegation) -> list[bytes]:
    """TXT strings describing a delegated child: summary, services, kind, owning org."""
    parts = txt_strings("summary=" + child.summary)
    parts.append(("services=" + ",".join(sorted(child.services))).encode())
    parts.append(b"kind=leaf" if child.leaf else b"kind=branch")
    if child.org:
        parts.append(f"org={child.org}".encode())
    return parts


def _a(owner: str, address: str, ttl: int) -> Rec:
    return Rec(owner, A, ttl, (ipaddress.IPv4Address(address).packed,))


def _aaaa(owner: str, address: str, ttl: int) -> Rec:
    return Rec(owner, AAAA, ttl, (aaaa_address(address).packed,))


def _srv(owner: str, tool: ToolRecord, ttl: int) -> Rec:
    fixed = struct.pack("!HHH", tool.priority, tool.weight, tool.port)
    return Rec(owner, SRV, ttl, (fixed, normalise(tool.target)))


def _txt(owner: str, strings: list[bytes], ttl: int) -> Rec:
    return Rec(owner, TXT, ttl, (character_strings(strings),))


class _Reply:
    """Sections of a reply before encoding (a plain class: one is built per query)."""

    __slots__ = ("aa", "additional", "answer", "authority", "ext_rcode", "rcode", "required",
                 "scores")

    def __init__(
        self, rcode: int, aa: bool = False, answer: Sequence[Rec] = (),
        authority: Sequence[Rec] = (), additional: Sequence[Rec] = (), ext_rcode: int = 0,
        required: int = 0, scores: bytes | None = None,
    ) -> None:
        self.scores = scores  # scores option data, when the query asked for it
        self.rcode = rcode
        self.aa = aa
        self.answer = answer
        self.authority = authority
        self.additional = additional
        self.ext_rcode = ext_rcode
        self.required = required  # leading additional records that must fit (in-domain glue,
        # RFC 9471)


@dataclass
class _Child:
    data: Delegation
    ns: list[Rec]
    glue: list[Rec]
    hint: Rec


@dataclass
class _Tools:
    """A leaf's tools of one service, with their prepared records and score index."""

    srv: list[Rec]  # owner "" = the query name
    a: list[Rec]
    index: ScoreIndex
    rank: Ranker  # (intent text, K) -> chosen indices, best first
    aaaa: list[Rec] = field(default_factory=list)  # the targets' AAAA (zones with aaaa)


@dataclass
class _ZoneState:
    """A zone plus its lookup tables and lazily built score indexes."""

    data: ZoneData
    records: dict[str, dict[int, list[Rec]]]  # owner -> type -> records (see node())
    names: set[str]  # every name existing in the zone, empty non-terminals included
    cuts: dict[str, Delegation]
    children: list[_Child]
    negative_soa: Rec
    name: str = ""  # normalised zone name (= data.name)
    leaf: bool = False  # = data.is_leaf
    child_by_zone: dict[str, _Child] = field(default_factory=dict)  # by Delegation.zone
    negative: dict[int, _Reply] = field(default_factory=dict)  # rcode -> SOA-only reply
    child_index: ScoreIndex | None = None
    child_rank: Ranker | None = None
    # per-service child indexes when the children carry centroids (see child_index)
    by_centroid: bool = False
    service_index: dict[str, tuple[ScoreIndex, Ranker]] = field(default_factory=dict)
    eligible: dict[str, list[int]] = field(default_factory=dict)  # service -> child indices
    tools: dict[tuple[str, str], _Tools] = field(default_factory=dict)  # (service, proto)
    # tools' owner names whose records are encoded when first asked for (a leaf of 10^5
    # tools would otherwise encode three records per tool at load): owner -> tools
    lazy: dict[str, list[ToolRecord]] = field(default_factory=dict)

    def node(self, owner: str) -> dict[int, list[Rec]] | None:
        """The records owned by ``owner`` (encoding a tool's on first use)."""
        node = self.records.get(owner)
        tools = self.lazy.pop(owner, None)
        if tools is not None:
            if node is None:
                node = self.records[owner] = {}
            _add_tool_records(node, owner, tools, self.name, self.data.ttls, self.data.aaaa)
        return node


@dataclass
class ServerStats:
    """Counters a server keeps; engines read them into per-node load records."""

    counts: Counter[str] = field(default_factory=Counter)

    def __getitem__(self, key: str) -> int:
        return self.counts[key]


#: What a plain query name tells before any zone is consulted: its ToolDNS parts
#: (service, proto, zone, cursor) or None, and the offset of each of its suffixes in a reply
#: (the question starts at offset 12).
_NameInfo = tuple[tuple[str, str, str, bool] | None, dict[str, int]]


class AuthoritativeServer:
    """Serves one or more ToolDNS zones; stateless per message apart from counters/caches."""

    #: Query names whose parse is memoised (see ``_learn_name``); 0 disables the memo.
    NAME_MEMO = 1024

    def __init__(
        self,
        zones: Iterable[ZoneData],
        scorer: Scorer | None = None,
        option_code: int = DEFAULT_OPTION_CODE,
        max_udp_size: int = DEFAULT_EDNS_SIZE,
        name: str = "auth",
        packet_cache: int = 4096,
        signer: ZoneSigner | None = None,
        scores_code: int = SCORES_OPTION_CODE,
        embedding_code: int = EMBEDDING_OPTION_CODE,
        packet_cache_bytes: int = 16 * 1024 * 1024,
        transfer_acl: Iterable[str] = LOOPBACK_ACL,
        cname_referral: bool = True,
    ) -> None:
        self.name = name
        # intent-in-the-name CNAMEs carry the child's NS and glue (else the resolver asks
        # this server again for the delegation: one more exchange per level when cold)
        self.cname_referral = cname_referral
        # who may transfer the zones (AXFR/IXFR): sources in these networks, or any of
        # these exact addresses (sim.build.hierarchy puts the hierarchy's servers here)
        self.transfer_acl = (_LOOPBACK_NETS if transfer_acl is LOOPBACK_ACL
                             else networks(transfer_acl))
        self.transfer_peers: frozenset[str] = frozenset()
        self.scores_code = scores_code  # the option asking for (and carrying) scores
        self.embedding_code = embedding_code  # the option carrying the intent's embedding
        self.signer = signer  # DNSSEC (nodes.dns.dnssec): replies to DO queries get signed
        self.scorer = scorer or BM25Scorer()
        self.option_code = option_code
        self.max_udp_size = max_udp_size
        self.stats = ServerStats()
        self.packet_cache_size = packet_cache
        # bytes of keys and replies kept (a query's bytes are the key, so a stream of large
        # queries must not grow the cache); one entry may take at most 1/16 of the budget
        self.packet_cache_bytes = packet_cache_bytes
        self._cache_bytes = 0
        # First in, first out. OrderedDict evicts its oldest entry in O(1); a plain dict's
        # ``del d[next(iter(d))]`` rescans the deleted prefix and cost ~2 µs per miss here.
        self._cache: OrderedDict[bytes, tuple[bytes, str]] = OrderedDict()
        self._name_info: OrderedDict[str, _NameInfo] = OrderedDict()
        self._opt = opt_bytes(max_udp_size)
        self._zones: dict[str, _ZoneState] = {}
        for zone in zones:
            self.add_zone(zone)

    def reset(self) -> None:
        """Back to the state after loading the zones: counters zeroed, packet cache empty,
        unsigned. What depends only on the zone data (records, score indexes, parsed
        query names) is kept, so a new run on the same zones skips rebuilding it."""
        self.stats = ServerStats()
        self._clear_cache()
        self.signer = None

    def _clear_cache(self) -> None:
        self._cache.clear()
        self._cache_bytes = 0

    # ------------------------------------------------------------------ zone data

    def add_zone(self, zone: ZoneData) -> None:
        """Load (or replace) a zone; the next query sees it (no global index)."""
        state = _build_state(zone)
        if state.by_centroid and not hasattr(self.scorer, "vector_index"):
            raise ValueError(f"{zone.name}: its children carry centroids but the "
                             f"{self.scorer.name!r} scorer cannot score vectors (use dense)")
        self._zones[normalise(zone.name)] = state
        self._clear_cache()

    @property
    def zones(self) -> list[str]:
        return sorted(self._zones)

    def zone_data(self, zone: str) -> ZoneData:
        """The data of a zone this server holds (KeyError if it holds no such zone)."""
        return self._zones[normalise(zone)].data

    def zone_records(self, zone: str) -> list[Rec]:
        """Every record of a zone this server holds, as a transfer sends them (SOA first,
        not repeated at the end); see :func:`zone_records`."""
        return _contents(self._zones[normalise(zone)])

    def apply_change(self, zone: str, add: Sequence[ToolRecord] = (),
                     remove: Iterable[str] = ()) -> int:
        """Change a zone's tools as a reload of its edited zone file would: tools whose
        ``tool_id`` is in ``remove`` go, ``add`` replaces tools of the same id (a changed
        endpoint) or joins the zone; the SOA serial goes up by one and the packet cache is
        flushed (:meth:`add_zone`). Returns the new serial (KeyError: no such zone)."""
        state = self._zones[normalise(zone)]
        gone = set(remove)
        new = {t.tool_id: t for t in add}
        tools = [new.pop(t.tool_id, t) for t in state.data.tools if t.tool_id not in gone]
        data = replace(state.data, tools=(*tools, *new.values()),
                       serial=(state.data.serial + 1) % 2**32)
        self.add_zone(data)
        self.stats.counts["zone_reload"] += 1
        return data.serial

    def _find_zone(self, name: str) -> _ZoneState | None:
        """Closest enclosing zone this server is authoritative for."""
        if name in self._zones:
            return self._zones[name]
        labels = name.rstrip(".").split(".") if name != "." else []
        for i in range(1, len(labels)):
            state = self._zones.get(".".join(labels[i:]) + ".")
            if state is not None:
                return state
        return self._zones.get(".")

    # ------------------------------------------------------------------ entry point

    def handle(
        self, wire: bytes, src: Address, now: float, transport: str = "udp"
    ) -> bytes | None:
        """Answer one message. Never raises on peer input; returns None to drop."""
        counts = self.stats.counts
        counts[_RX.get(transport) or "rx_" + transport] += 1
        wire = bytes(wire)
        key = None
        if self.packet_cache_size:
            key = wire[2:] + (b"U" if transport == "udp" else b"T")
            hit = self._cache.get(key)
            if hit is not None:
                counts["packet_cache_hit"] += 1
                counts[hit[1]] += 1
                counts["tx_bytes"] += len(hit[0])
                return wire[:2] + hit[0][2:]
        view = parse_query(wire)
        if view is None:
            try:
                view = view_from_dnslib(wire)
            except FormatError:
                return self._formerr_raw(wire)
        if view.flags & 0x8000:  # a response
            counts["dropped_response"] += 1
            return None
        info = None
        try:
            if view.simple_name:
                info = self._name_info.get(view.qname) or self._learn_name(view.qname)
            kind, reply = self._answer(view, info)
        except Exception:  # our bug, not the peer's: answer SERVFAIL and count it loudly
            kind, reply = "internal_error", _Reply(SERVFAIL)
        counts[kind] += 1
        out = self._fit(view, reply, transport, info)
        if self.signer is not None and view.opt_udp is not None and view.opt_ttl & 0x8000:
            limit = (min(max(CLASSIC_UDP_SIZE, view.opt_udp), self.max_udp_size)
                     if transport == "udp" else MAX_MESSAGE_SIZE)
            nodata = (reply.rcode == NOERROR and not reply.answer and bool(reply.authority)
                      and reply.authority[0].rtype == SOA)
            out = self.signer.sign_reply(out, limit,
                                         self._types_at(view.qname) if nodata else None)
            counts["signed"] += 1
        counts["tx_bytes"] += len(out)
        if key is not None and kind != "internal_error":
            self._remember(key, out, kind)
        return out

    # ------------------------------------------------------------------ zone transfers

    def transfer(self, wire: bytes, src: Address, now: float) -> list[bytes] | None:
        """Answer a zone transfer request received over TCP: the messages to send, in order
        (one for a refusal); None when ``wire`` is not an AXFR/IXFR query (answer it with
        :meth:`handle`). Never raises on peer input.

        The check for a transfer reads the type after the first zero byte past the header,
        which is exact for the plain names ToolDNS zones have; a query it misses goes to
        :meth:`handle`, which answers AXFR/IXFR with NOTIMP.
        """
        wire = bytes(wire)
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
        counts = self.stats.counts
        counts["rx_tcp"] += 1
        try:
            kind, messages = self._transfer(view, wire, src)
        except Exception:  # our bug, not the peer's
            kind, messages = "internal_error", [self._fit(view, _Reply(SERVFAIL), "tcp")]
        counts[kind] += 1
        counts["xfr_messages"] += len(messages)
        counts["tx_bytes"] += sum(map(len, messages))
        return messages

    def transfer_allowed(self, address: str) -> bool:
        """Whether ``address`` may transfer zones (``transfer_peers``, ``transfer_acl``)."""
        if address in self.transfer_peers:
            return True
        try:
            ip = ipaddress.ip_address(address.split("%")[0])  # no IPv6 scope
        except ValueError:
            return False
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        return any(ip in net for net in self.transfer_acl)

    def _transfer(self, q: QueryView, wire: bytes, src: Address) -> tuple[str, list[bytes]]:
        if not self.transfer_allowed(src[0]):
            return "xfr_refused_acl", [self._fit(q, _Reply(REFUSED), "tcp")]
        state = self._zones.get(q.qname) if q.qclass == 1 else None
        if state is None:  # not a zone apex this server holds (RFC 5936 §2.2.1)
            return "xfr_notauth", [self._fit(q, _Reply(NOTAUTH), "tcp")]
        records = _contents(state)
        soa = records[0]
        if q.qtype == IXFR:
            serial = _ixfr_serial(wire)
            if serial is None:
                return "formerr", [self._fit(q, _Reply(FORMERR), "tcp")]
            # RFC 1995 §2: a client at (or past) the current serial gets the SOA alone
            if (state.data.serial - serial) % 2**32 >= 2**31 or serial == state.data.serial:
                return "ixfr_current", [self._fit(q, _Reply(NOERROR, True, [soa]), "tcp")]
            return "ixfr_full", self._xfr_messages(q, [*records, soa])
        return "axfr", self._xfr_messages(q, [*records, soa])

    def _xfr_messages(self, q: QueryView, records: list[Rec]) -> list[bytes]:
        """Records split over messages of at most 65535 bytes (never a record split), each
        with the query's ID and question, AA set and OPT when the query had one."""
        opt = self._opt if q.opt_udp is not None else b""
        room = MAX_MESSAGE_SIZE - len(opt)
        flags = 0x8000 | (q.flags & 0x7900) | 0x0400
        head = _HEADER.pack(q.id, flags, 1, 0, 0, 0) + q.question
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
            messages.append(_finish_xfr(buf, n, opt))
            buf, names, n = bytearray(head), base.copy(), 0
            put_record(buf, names, rec)
            if len(buf) > room:
                raise ValueError(f"{rec.owner} {rec.rtype}: a record too large for a message")
            n = 1
        messages.append(_finish_xfr(buf, n, opt))
        return messages

    def _remember(self, key: bytes, out: bytes, kind: str) -> None:
        """Keep a reply in the packet cache, within its entry and byte bounds (FIFO)."""
        cost = len(key) + len(out) + _CACHE_ENTRY_OVERHEAD
        if cost * 16 > self.packet_cache_bytes:
            self.stats.counts["packet_cache_too_big"] += 1
            return
        cache = self._cache
        while cache and (len(cache) >= self.packet_cache_size
                         or self._cache_bytes + cost > self.packet_cache_bytes):
            old_key, (old_out, _) = cache.popitem(last=False)
            self._cache_bytes -= len(old_key) + len(old_out) + _CACHE_ENTRY_OVERHEAD
        cache[key] = (out, kind)
        self._cache_bytes += cost

    def _learn_name(self, qname: str) -> _NameInfo:
        """Parse a plain query name once: its ToolDNS parts and its suffix offsets.

        Both depend on nothing but the (lower-case) name, so they are kept in a small
        bounded memo (first in, first out): a resolver asks each zone under a handful of
        cursor names, and splitting them costs more than the dictionary lookup.
        """
        info = (parse_tool_name(qname) if qname.startswith("_") else None,
                question_names(qname))
        memo = self._name_info
        if len(memo) >= self.NAME_MEMO:
            if not self.NAME_MEMO:
                return info
            memo.popitem(last=False)
        memo[qname] = info
        return info

    def _formerr_raw(self, wire: bytes) -> bytes | None:
        if len(wire) < 12 or wire[2] & 0x80:  # no header, or a (garbled) response: drop
            self.stats.counts["dropped_malformed"] += 1
            return None
        self.stats.counts["formerr"] += 1
        flags = 0x8000 | (wire[2] & 0x78) << 8 | FORMERR
        return wire[:2] + struct.pack("!HHHHH", flags, 0, 0, 0, 0)

    # ------------------------------------------------------------------ answering

    def _answer(self, q: QueryView, info: _NameInfo | None = None) -> tuple[str, _Reply]:
        if q.flags & 0x7800:  # opcode other than QUERY
            return "notimp", _Reply(NOTIMP)
        if q.qdcount != 1:
            return "formerr", _Reply(FORMERR)
        if q.opt_udp is not None and q.opt_ttl & 0xFF0000:  # EDNS version > 0
            return "badvers", _Reply(BADVERS & 0xF, ext_rcode=BADVERS >> 4)
        if q.qtype == AXFR or q.qtype == IXFR:  # TCP only, through transfer()
            return "xfr_notimp", _Reply(NOTIMP)
        data = None
        code = self.option_code
        for c, d in q.options:
            if c == code:
                data = d
                break
        text, k = "", 0
        want = any(c == self.scores_code for c, _ in q.options) if data is not None else False
        if data is not None:  # nodes.dns.wire.Intent.decode's checks, without the dataclass
            if len(data) < 4:
                return "formerr_intent", _Reply(FORMERR)
            version, length, k = _INTENT_HEADER.unpack_from(data)
            if version != INTENT_VERSION or len(data) - 4 != length or length > 65531:
                return "formerr_intent", _Reply(FORMERR)
            try:
                text = data[4:].decode("utf-8")
            except UnicodeDecodeError:
                return "formerr_intent", _Reply(FORMERR)
            for c, d in q.options:
                if c == self.embedding_code:  # the client's embedding of the intent
                    try:
                        text = self._embedded(text, *decode_embedding(d))
                    except IntentError:
                        return "formerr_embedding", _Reply(FORMERR)
        if q.qclass != 1:
            return "refused", _Reply(REFUSED)
        qname = q.qname
        if info is not None:
            tq = info[0]
        elif qname.startswith("_"):
            tq = parse_tool_name(qname)
        else:
            tq = None
        # A cursor points at a zone; any other name is looked up as itself.
        target = tq[2] if tq is not None and tq[3] and data is not None else qname
        state = self._zones.get(target) or self._find_zone(target)
        if state is None:
            return "refused", _Reply(REFUSED)
        if target != state.name and state.cuts:
            cut = _delegation_for(state, target)
            if cut is not None:
                return "referral", self._referral([state.child_by_zone[cut.zone]], False)
        if data is not None and tq is not None and q.qtype in (SRV, ANY):
            service, proto, zone, cursor = tq
            if cursor and target == state.name:
                if state.leaf:
                    return "semantic", self._tools_answer(state, service, proto, text, k, want)
                return "semantic", self._semantic(state, service, proto, text, k, want)
            if not cursor and zone == state.name and state.leaf:
                return "semantic", self._tools_answer(state, service, proto, text, k, want)
        return self._standard(state, qname, q.qtype)

    def _embedded(self, text: str, model: str, vector: np.ndarray) -> str:
        """What to rank by when the query carries the intent's embedding: with a dense
        scorer of that model, a key under which the (normalised) vector sits in this
        server's embedding cache — its digest, never the intent text, so one client's
        vector cannot change another's answer; otherwise the text (counted as ignored)."""
        encoder = getattr(self.scorer, "encoder", None)
        store = getattr(encoder, "store", None)
        if model != getattr(self.scorer, "model", None) or store is None:
            self.stats.counts["embedding_ignored"] += 1
            return text
        if len(vector) != self.scorer.dim:  # type: ignore[attr-defined]
            raise IntentError(f"embedding of {len(vector)} values for a "
                              f"{self.scorer.dim}-dimensional model")  # type: ignore[attr-defined]
        key = "\x00embedding:" + hashlib.sha1(vector.tobytes()).hexdigest()
        if key not in store:
            store[key] = vector / (np.linalg.norm(vector) or 1.0)
        self.stats.counts["embedding_used"] += 1
        return key

    def _semantic(self, state: _ZoneState, service: str, proto: str, text: str, k: int,
                  want_scores: bool = False) -> _Reply:
        if state.leaf:
            return self._tools_answer(state, service, proto, text, k, want_scores)
        chosen, scores = self._top_children(state, service, text, k, want_scores)
        if not chosen:
            return state.negative[NOERROR]
        children = state.children
        reply = self._referral([children[i] for i in chosen], k == 0)
        reply.scores = scores
        return reply

    def _top_children(self, state: _ZoneState, service: str, text: str, k: int,
                      want_scores: bool = False) -> tuple[list[int], bytes | None]:
        """Indices of the zone's top-K children offering ``service`` (K = 0: all)."""
        kids = state.data.children
        if state.by_centroid:  # routing vectors differ per service
            entry = state.service_index.get(service)
            if entry is None:
                index = child_index(self.scorer, kids, service)
                entry = state.service_index[service] = (index, ranker(index))
            index, rank = entry
        else:
            if state.child_rank is None:
                state.child_index = child_index(self.scorer, kids)
                state.child_rank = ranker(state.child_index)
            index, rank = state.child_index, state.child_rank  # type: ignore[assignment]
        eligible = state.eligible.get(service)
        if eligible is None:
            eligible = [i for i, c in enumerate(kids) if service in c.services]
            state.eligible[service] = eligible
        return _choose(index, rank, text, k, eligible, want_scores)

    def _tools_answer(self, state: _ZoneState, service: str, proto: str, text: str, k: int,
                      want_scores: bool = False) -> _Reply:
        tools = state.tools.get((service, proto))
        if tools is None:
            chosen_tools = [t for t in state.data.tools
                            if t.service == service and t.proto == proto]
            ttls = state.data.ttls
            index = self.scorer.index([t.tool_id for t in chosen_tools],
                                      [f"{t.name} {t.description}" for t in chosen_tools])
            tools = _Tools(
                srv=[_srv("", t, ttls.srv) for t in chosen_tools],
                a=[_a(normalise(t.target), t.address, ttls.a) for t in chosen_tools],
                index=index,
                rank=ranker(index),
                aaaa=[_aaaa(normalise(t.target), t.address, ttls.a) for t in chosen_tools]
                if state.data.aaaa else [],
            )
            state.tools[(service, proto)] = tools
        if not tools.srv:
            return state.negative[NOERROR]
        chosen, scores = _choose(tools.index, tools.rank, text, k, None, want_scores)
        srv, a = tools.srv, tools.a
        additional = [a[i] for i in chosen]
        if tools.aaaa:  # every A first: under the size limit IPv4 addresses go first
            additional += [tools.aaaa[i] for i in chosen]
        return _Reply(NOERROR, True, [srv[i] for i in chosen], (), additional, scores=scores)

    @staticmethod
    def _referral(children: Sequence[_Child], hints: bool) -> _Reply:
        authority: list[Rec] = []
        additional: list[Rec] = []
        for child in children:
            authority += child.ns
        for child in children:
            additional += child.glue
        if hints:  # K = 0 asks for the summaries: they are not optional here
            additional += [child.hint for child in children]
        return _Reply(NOERROR, False, (), authority, additional, 0, len(additional))

    def _standard(self, state: _ZoneState, qname: str, qtype: int) -> tuple[str, _Reply]:
        node = state.node(qname)
        if node is None:
            if qname not in state.names:
                return self._named_intent(state, qname, qtype)
            return "nodata", state.negative[NOERROR]
        rrs = [r for rs in node.values() for r in rs] if qtype == ANY else node.get(qtype)
        if not rrs:
            return "nodata", state.negative[NOERROR]
        additional: list[Rec] = []
        if qtype in (SRV, NS):  # additional-section processing (RFC 1034 §4.3.2)
            for rec in rrs:
                additional.extend((state.node(rec.rdata[-1]) or {}).get(A, ()))
            if state.data.aaaa:  # then the targets' AAAA (A first, as above)
                for rec in rrs:
                    additional.extend((state.node(rec.rdata[-1]) or {}).get(AAAA, ()))
        return "standard", _Reply(NOERROR, True, rrs, (), additional)

    def _types_at(self, qname: str) -> tuple[int, ...]:
        """Record types the name has (for a NODATA proof): its records, SRV for an intent
        name at a leaf, none for an empty non-terminal."""
        state = self._find_zone(qname)
        if state is None:
            return ()
        node = state.node(qname)
        if node:
            return tuple(t for t, rrs in node.items() if rrs)
        if state.leaf and parse_intent_qname(qname, state.name) is not None:
            return (SRV,)
        return ()

    def _named_intent(self, state: _ZoneState, qname: str, qtype: int) -> tuple[str, _Reply]:
        """A name the zone does not hold: an intent carried in the name (CNAME one level
        down, or the leaf's top-K SRV), an empty non-terminal above one, or NXDOMAIN."""
        relative = qname[: len(qname) - len(state.name)] if state.name != "." else qname
        labels = relative.rstrip(".").split(".")
        if labels[-1] not in _PROTO_LABELS or (len(labels) > 1
                                                and not labels[-2].startswith("_")):
            return "nxdomain", state.negative[NXDOMAIN]
        intent = parse_intent_labels(labels)
        if intent is None:
            return "intent_ent", state.negative[NOERROR]
        if state.leaf:
            if qtype != SRV and qtype != ANY:
                return "intent_nodata", state.negative[NOERROR]
            return "intent_srv", self._tools_answer(state, intent.service, intent.proto,
                                                    intent.text, intent.k)
        return self._intent_cname(state, intent)

    def _intent_cname(self, state: _ZoneState, intent: IntentName) -> tuple[str, _Reply]:
        chosen = self._top_children(state, intent.service, intent.text, 1)[0]
        if not chosen:
            return "intent_nodata", state.negative[NOERROR]
        child = state.children[chosen[0]]
        target = retarget(intent, child.data.zone)
        if len(target) > 254:  # would not fit in a name: no answer rather than a bad one
            return "intent_too_long", state.negative[NOERROR]
        cname = Rec("", CNAME, state.data.ttls.ns, (target,))
        if not self.cname_referral:
            return "intent_cname", _Reply(NOERROR, True, [cname])
        return "intent_cname", _Reply(NOERROR, True, [cname], child.ns, child.glue,
                                      required=len(child.glue))

    # ------------------------------------------------------------------ size limits

    def _fit(self, q: QueryView, reply: _Reply, transport: str,
             info: _NameInfo | None = None) -> bytes:
        """Encode, attaching OPT when the query had one, and enforce the size limit.

        Records are appended in section order until one does not fit: optional additional
        data (beyond ``reply.required``) is simply left out (RFC 2181 §9); anything else
        truncates (TC). Over UDP a truncated reply keeps only the question (and OPT), so the
        client retries over TCP; over TCP it keeps what fits.
        """
        opt_udp = q.opt_udp
        if opt_udp is None:
            opt = plain_opt = b""
            room = CLASSIC_UDP_SIZE if transport == "udp" else MAX_MESSAGE_SIZE
        else:
            opt = opt_bytes(self.max_udp_size, reply.ext_rcode) if reply.ext_rcode else self._opt
            plain_opt = opt
            if reply.scores is not None:  # OPT with the scores option (RDLENGTH is last)
                option = struct.pack("!HH", self.scores_code, len(reply.scores)) + reply.scores
                opt = opt[:-2] + struct.pack("!H", len(option)) + option
            room = (min(max(CLASSIC_UDP_SIZE, opt_udp), self.max_udp_size)
                    if transport == "udp" else MAX_MESSAGE_SIZE) - len(opt)
        flags = 0x8000 | (q.flags & 0x7900) | (0x0400 if reply.aa else 0) | (reply.rcode & 0xF)
        question = q.question
        buf = bytearray(_HEADER.pack(q.id, flags, 1 if question else 0, 0, 0, 0))
        buf += question
        if info is not None:
            names = info[1].copy()
        elif question and q.simple_name:
            names = question_names(q.qname)
        else:
            names = {}
        counts = [0, 0, 0]  # answer, authority, additional
        truncated = False
        section = -1
        # Header and question always fit (room >= 512 - 11 > 12 + 259), so an empty section
        # needs no size check.
        for recs in (reply.answer, reply.authority, reply.additional):
            section += 1
            if not recs:
                continue
            n = 0
            for rec in recs:
                wire = rec.wire
                if wire is not None:  # fixed bytes: check before copying
                    if len(buf) + len(wire) > room:
                        truncated = section != 2 or n < reply.required
                        break
                    buf += wire
                else:
                    mark = len(buf)
                    pieces = rec.pieces
                    if len(pieces) == 2:  # owner name + fixed rest
                        put_name(buf, names, pieces[0])  # type: ignore[arg-type]
                        buf += pieces[1]  # type: ignore[operator]
                    else:  # NS/SOA: names in RDATA too
                        put_record(buf, names, rec)
                    if len(buf) > room:
                        del buf[mark:]
                        truncated = section != 2 or n < reply.required
                        break
                n += 1
            else:
                counts[section] = n
                if len(buf) >= room:
                    break
                continue
            counts[section] = n  # a record did not fit
            break
        if truncated:
            self.stats.counts["truncated_" + transport] += 1
            if transport == "udp":  # TC with empty sections: the client retries over TCP
                del buf[12 + len(question):]
                counts = [0, 0, 0]
            buf[2] |= 0x02
        if opt_udp is not None:
            # scores describe every record chosen: a truncated reply goes without them
            buf += plain_opt if truncated else opt
            counts[2] += 1
        _COUNTS3.pack_into(buf, 6, *counts)
        return bytes(buf)


# ---------------------------------------------------------------------- helpers


def _finish_xfr(buf: bytearray, n: int, opt: bytes) -> bytes:
    """Close one transfer message: ANCOUNT ``n``, then OPT (ARCOUNT 1) if there is one."""
    buf += opt
    _COUNTS3.pack_into(buf, 6, n, 0, 1 if opt else 0)
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


def zone_records(zone: ZoneData) -> list[Rec]:
    """Every record ``zone`` holds, exactly as a server loaded with it serves them to
    standard questions: SOA first, the apex's NS and other records, then the other owners
    in canonical order (RFC 4034 §6.1): tools' SRV/A/TXT, in-zone server addresses,
    delegations' NS with their glue. What ``transfer`` sends between its two SOAs and what
    ``nodes.authoritative.zonefile`` writes. Intent answers (top-K per query) and the children's summary
    TXT records (only in K = 0 referrals) are not static records and are not included."""
    return _contents(_build_state(zone))


def _canonical(owner: str) -> tuple[str, ...]:
    return tuple(reversed(owner.rstrip(".").split("."))) if owner != "." else ()


def _contents(state: _ZoneState) -> list[Rec]:
    """:func:`zone_records` of a loaded zone; tool records not yet encoded are encoded for
    this but not kept (the zone's lazily encoded records stay lazy)."""
    name = state.name
    nodes: dict[str, dict[int, list[Rec]]] = {}
    for owner, node in state.records.items():
        nodes[owner] = {rtype: list(recs) for rtype, recs in node.items()}
    for owner, tools in state.lazy.items():
        _add_tool_records(nodes.setdefault(owner, {}), owner, tools, name, state.data.ttls,
                          state.data.aaaa)
    # what a query would never reach: names outside the zone, or below a delegation
    for owner in [o for o in nodes if not is_subdomain(o, name)
                  or (state.cuts and _delegation_for(state, o) is not None)]:
        del nodes[owner]
    for child in state.children:
        for rec in (*child.ns, *child.glue):
            nodes.setdefault(rec.owner, {}).setdefault(rec.rtype, []).append(rec)
    out: list[Rec] = []
    seen: set[Rec] = set()
    for owner in sorted(nodes, key=_canonical):
        node = nodes[owner]
        for rtype in sorted(node, key=lambda t: (t != SOA, t != NS, t)):
            for rec in node[rtype]:
                if rec not in seen:
                    seen.add(rec)
                    out.append(rec)
    return out


def _choose(index: ScoreIndex, rank: Ranker, text: str, k: int,
            candidates: Sequence[int] | None, want_scores: bool
            ) -> tuple[list[int], bytes | None]:
    """The top-K choices, and the scores option data for them when the query asked."""
    if not want_scores:
        return rank(text, k, candidates), None
    chosen, scores = scored_top_k(index, text, k, candidates)
    return chosen, encode_scores(scores)


def child_index(scorer: Scorer, kids: Sequence[Delegation], service: str | None = None
                ) -> ScoreIndex:
    """How a parent scores its children for a query of ``service``: by their centroids for
    that service when they carry some (a dense scorer's cosine with the mean embedding of
    the child's tools of the service; see ``topologies.taxonomy.add_centroids``); else by
    summary, or, when any child carries representatives, by the best-scoring
    representative of each (its summary if it has none)."""
    keys = [c.zone for c in kids]
    if service is not None and any(c.centroids for c in kids):
        return centroid_index(scorer, keys, [dict(c.centroids).get(service) for c in kids])
    if any(c.representatives for c in kids):
        return group_max_index(scorer, keys, [c.representatives or (c.summary,) for c in kids])
    return scorer.index(keys, [c.summary for c in kids])


def _delegation_for(state: _ZoneState, name: str) -> Delegation | None:
    """The delegated child at or above ``name`` inside this zone, if any."""
    if name == state.data.name or not state.cuts:
        return None
    labels = name.rstrip(".").split(".")
    zone_depth = len(state.data.name.rstrip(".").split(".")) if state.data.name != "." else 0
    for i in range(len(labels) - zone_depth - 1, -1, -1):  # shortest candidate first
        cut = state.cuts.get(".".join(labels[i:]) + ".")
        if cut is not None:
            return cut
    return None


def _add_tool_records(node: dict[int, list[Rec]], owner: str, tools: list[ToolRecord],
                      zone: str, ttls: Ttls, aaaa: bool = False) -> None:
    """A tool owner's records, as :func:`_build_state` would have added them eagerly: the
    SRV records of the zone's tools at ``_svc._proto.<zone>``, A (AAAA) then TXT at a
    target."""
    for tool in tools:
        if owner == f"_{tool.service}._{tool.proto}.{zone}":
            node.setdefault(SRV, []).append(_srv(owner, tool, ttls.srv))
        if owner == normalise(tool.target):
            node.setdefault(A, []).append(_a(owner, tool.address, ttls.a))
            if aaaa:
                node.setdefault(AAAA, []).append(_aaaa(owner, tool.address, ttls.a))
            node.setdefault(TXT, []).append(_txt(owner, txt_strings(tool.description),
                                                 ttls.srv))


def _build_state(zone: ZoneData) -> _ZoneState:
    """Records prepared once for standard lookups, referrals and negative answers."""
    name = normalise(zone.name)
    ttls = zone.ttls
    records: dict[str, dict[int, list[Rec]]] = {}

    def add(rec: Rec) -> None:
        records.setdefault(rec.owner, {}).setdefault(rec.rtype, []).append(rec)

    primary = normalise(zone.servers[0].host) if zone.servers else f"ns1.{name}"
    hostmaster = "hostmaster." + (name if name != "." else "invalid.")
    fixed = struct.pack("!IIIII", zone.serial, 3600, 600, 604800, ttls.negative)
    soa = Rec(name, SOA, ttls.soa, (primary, hostmaster, fixed))
    add(soa)
    for server in zone.servers:
        host = normalise(server.host)
        add(Rec(name, NS, ttls.ns, (host,)))
        if is_subdomain(host, name):
            add(_a(host, server.address, ttls.ns))
    if zone.summary:
        add(_txt(name, txt_strings("summary=" + zone.summary), ttls.ns))
    cuts: dict[str, Delegation] = {}
    children = []
    for child in zone.children:
        cz = normalise(child.zone)
        cuts[cz] = child
        hosts = [normalise(s.host) for s in child.servers]
        children.append(_Child(
            data=child,
            ns=[Rec(cz, NS, ttls.ns, (h,)) for h in hosts],
            glue=[_a(h, s.address, ttls.ns) for h, s in zip(hosts, child.servers, strict=True)
                  if is_subdomain(h, cz)],  # glue only where it is needed
            hint=_txt(cz, child_hint(child), ttls.ns),
        ))
    lazy: dict[str, list[ToolRecord]] = {}
    for tool in zone.tools:  # encoded on first use (_ZoneState.node), in this order
        for owner in (f"_{tool.service}._{tool.proto}.{name}", normalise(tool.target)):
            tools = lazy.setdefault(owner, [])
            if not tools or tools[-1] is not tool:
                tools.append(tool)
    names: set[str] = set()
    for owner in (*records, *lazy):
        if owner.partition(".")[2] == name:  # one label below the apex (most tools)
            names.add(owner)
            names.add(name)
            continue
        labels = owner.rstrip(".").split(".")
        for i in range(len(labels)):
            candidate = ".".join(labels[i:]) + "."
            if not is_subdomain(candidate, name):
                break
            names.add(candidate)
    negative = Rec(name, SOA, min(ttls.soa, ttls.negative), soa.rdata)
    data = zone if zone.name == name else ZoneData(**{**zone.__dict__, "name": name})
    return _ZoneState(
        data=data, records=records, names=names, cuts=cuts, children=children,
        negative_soa=negative, name=name, leaf=data.is_leaf,
        child_by_zone={c.data.zone: c for c in children},
        by_centroid=any(c.centroids for c in zone.children), lazy=lazy,
        negative={rcode: _Reply(rcode, True, (), (negative,)) for rcode in (NOERROR, NXDOMAIN)})
