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
NS hosts, referrals below delegations, NXDOMAIN/NODATA with SOA, AA set on its own data,
and the walk records of its copies (TYPE65280 below ``_svc._proto.<zone>``,
:func:`nodes.authoritative.zonefile.walk_records`).

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
built from records encoded at zone load (:mod:`nodes.dns.codec`, per zone in
:mod:`~nodes.authoritative.zonestate`; answers in :mod:`~nodes.authoritative.answers`,
encoded within the size limit by :mod:`~nodes.authoritative.fit`); a bounded packet cache
(keyed on the query bytes after the ID) answers repeated queries, and counts its hits. Apart
from it, what is kept between queries changes no counter and no byte: what a query name
alone determines (its decoded form, its ToolDNS parts and its suffix offsets) and, with a
pure scorer and no signer, each encoded reply by the query bytes, the transport and the
server's zone generation (:mod:`~nodes.authoritative.memo`), all in bounded memos.

Zone transfers (RFC 5936) go through ``transfer(wire, src, now)``, which a TCP adapter calls
before ``handle``: AXFR answers SOA, every record of the zone
(:func:`~nodes.authoritative.zonestate.zone_records`: the static records ``handle`` serves
to standard questions, delegations with their glue), SOA again, in as many messages of at
most 65535 bytes as needed, each with the query's ID and question; IXFR is answered the same
way (the AXFR-style fallback of RFC 1995 §4) unless the client already has the current
serial (then the SOA alone). Transfers are allowed only to sources in ``transfer_acl``
(empty by default) or ``transfer_peers``, within ``transfers``' bounds on transfers in
progress and started (:class:`~nodes.authoritative.transfer.TransferGate`); others get
REFUSED, a name that is not one of the server's zone apexes NOTAUTH. AXFR/IXFR reaching
``handle`` (over UDP) gets NOTIMP, as NSD and Knot answer AXFR over UDP. Transfers are not
cached (:mod:`nodes.authoritative.transfer`); a signed server's carry the zone signed
(DNSKEY, DS, NSEC chain, RRSIGs: :mod:`nodes.authoritative.signed`).

With a ``signer`` (:class:`~nodes.dns.dnssec.ZoneSigner`) the server answers DNSKEY at its
apexes and DS for its delegated children (authoritatively, with or without DO), and signs
replies to DO queries with the proof of a negative answer: the types at the name for NODATA,
the closest encloser for NXDOMAIN (:meth:`AuthoritativeServer._sign`).
"""

from __future__ import annotations

import copy
import hashlib
import struct
from collections import Counter, OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from mypy_extensions import mypyc_attr

from nodes.authoritative.answers import (
    name_exists,
    referral,
    semantic,
    standard,
    tools_answer,
    walk_types,
)
from nodes.authoritative.fit import fit, size_limit
from nodes.authoritative.memo import REPLY_MEMO, ReplyMemo
from nodes.authoritative.reply import (
    BADVERS,
    FORMERR,
    NOERROR,
    NOTAUTH,
    NOTIMP,
    NXDOMAIN,
    REFUSED,
    SERVFAIL,
    Reply,
)
from nodes.authoritative.transfer import (
    TransferGate,
    allowed,
    networks,
    transfer_query,
    transfer_records,
    xfr_messages,
    zone_transfer,
)
from nodes.authoritative.zonestate import ZoneState, build_state
from nodes.dns.codec import (
    ANY,
    AXFR,
    IXFR,
    SOA,
    SRV,
    FormatError,
    QueryView,
    Rec,
    opt_bytes,
    parse_query,
    question_names,
    view_from_dnslib,
)
from nodes.dns.dnssec import KEY_TTL, ZoneSigner
from nodes.dns.wire import (
    DEFAULT_EDNS_SIZE,
    DEFAULT_OPTION_CODE,
    EMBEDDING_OPTION_CODE,
    INTENT_VERSION,
    INTENT_VERSION_BEAM,
    SCORES_OPTION_CODE,
    IntentError,
    decode_embedding,
    normalise,
    parse_intent_qname,
    parse_tool_name,
)
from nodes.dns.zone import Address, ToolRecord, ZoneData
from nodes.scoring import BM25Scorer, Scorer

_INTENT_HEADER = struct.Struct("!BHB")  # nodes.dns.wire.Intent: version · length · K
_RX = {"udp": "rx_udp", "tcp": "rx_tcp"}  # counter keys, not rebuilt per query
_DS, _DNSKEY = 43, 48
# a packet-cache entry's memory beyond its key and reply bytes: two bytes headers (33 each),
# a 2-tuple (56) and the OrderedDict's link and table slot (about 100), on CPython 3.11
_CACHE_ENTRY_OVERHEAD = 220


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
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


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
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
        transfer_acl: Iterable[str] = (),
        cname_referral: bool = True,
        reply_memo: ReplyMemo | None = REPLY_MEMO,
    ) -> None:
        self.name = name
        # replies kept by what they depend on (nodes.authoritative.memo; None: off), under
        # this server's generation, renewed whenever its zones change
        self.reply_memo = reply_memo
        self._generation = object()
        # intent-in-the-name CNAMEs carry the child's NS and glue (else the resolver asks
        # this server again for the delegation: one more exchange per level when cold)
        self.cname_referral = cname_referral
        # who may transfer the zones (AXFR/IXFR): sources in these networks, or any of
        # these exact addresses (sim.build.hierarchy puts the hierarchy's servers here)
        self.transfer_acl = networks(transfer_acl)
        self.transfer_peers: frozenset[str] = frozenset()
        self.transfers = TransferGate()  # transfers in progress and started, per client
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
        self._zones: dict[str, ZoneState] = {}
        for zone in zones:
            self.add_zone(zone)
    def reset(self) -> None:
        """Back to the state after loading the zones: counters zeroed, packet cache empty,
        unsigned. What depends only on the zone data (records, score indexes, parsed
        query names) is kept, so a new run on the same zones skips rebuilding it."""
        self.stats = ServerStats()
        self._clear_cache()
        self.signer = None
        self._generation = object()

    def instance(self) -> AuthoritativeServer:
        """This server for one run, in the state :meth:`reset` gives, leaving this one as it
        is: the same zones (their states shared: records, score indexes built on first use),
        scorer, settings and signer's keys; its own counters, packet cache, parsed-name
        memo, transfer bounds, signature count and zone table (a zone reloaded in the run,
        e.g. by churn, is reloaded in the instance only)."""
        new = copy.copy(self)
        new.stats = ServerStats()
        new.transfers = TransferGate()
        new._cache = OrderedDict()
        new._cache_bytes = 0
        new._name_info = OrderedDict()
        new._zones = dict(self._zones)
        new._generation = object()
        if self.signer is not None:
            new.signer = copy.copy(self.signer)
        return new

    def _clear_cache(self) -> None:
        self._cache.clear()
        self._cache_bytes = 0

    # ------------------------------------------------------------------ zone data

    def add_zone(self, zone: ZoneData) -> None:
        """Load (or replace) a zone; the next query sees it (no global index)."""
        state = build_state(zone)
        if state.by_centroid and not hasattr(self.scorer, "vector_index"):
            raise ValueError(f"{zone.name}: its children carry centroids but the "
                             f"{self.scorer.name!r} scorer cannot score vectors (use dense)")
        self._zones[normalise(zone.name)] = state
        self._clear_cache()
        self._generation = object()  # replies memoised from the old data are never found

    @property
    def zones(self) -> list[str]:
        return sorted(self._zones)

    def zone_data(self, zone: str) -> ZoneData:
        """The data of a zone this server holds (KeyError if it holds no such zone)."""
        return self._zones[normalise(zone)].data

    def zone_records(self, zone: str) -> list[Rec]:
        """Every record of a zone this server holds, as a transfer sends them (SOA first,
        not repeated at the end); see :func:`~nodes.authoritative.zonestate.zone_records`."""
        return self._zones[normalise(zone)].contents()

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

    def _find_zone(self, name: str) -> ZoneState | None:
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
        self, message: bytes | bytearray, src: Address, now: float, transport: str = "udp"
    ) -> bytes | None:
        """Answer one message (a ``bytearray``, as dnslib packs, is copied first). Never
        raises on peer input; returns None to drop."""
        counts = self.stats.counts
        counts[_RX.get(transport) or "rx_" + transport] += 1
        wire = message if isinstance(message, bytes) else bytes(message)
        key = wire[2:] + (b"U" if transport == "udp" else b"T")
        if self.packet_cache_size:
            hit = self._cache.get(key)
            if hit is not None:
                counts["packet_cache_hit"] += 1
                counts[hit[1]] += 1
                counts["tx_bytes"] += len(hit[0])
                return wire[:2] + hit[0][2:]
        memo = self.reply_memo
        if memo is not None and (self.signer is not None
                                 or not getattr(self.scorer, "pure", False)):
            memo = None
        if memo is not None:
            memoised = memo.get((self._generation, key))
            if memoised is not None:  # counted as the reply it stands for
                tail, kind = memoised
                counts[kind] += 1
                if tail[0] & 0x02:  # TC: fit() counted a truncation
                    counts["truncated_" + transport] += 1
                out = wire[:2] + tail
                counts["tx_bytes"] += len(out)
                if self.packet_cache_size:
                    self._remember(key, out, kind)
                return out
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
            kind, reply = "internal_error", Reply(SERVFAIL)
        counts[kind] += 1
        out = fit(view, reply, transport, info[1] if info is not None else None, self._opt,
                  self.max_udp_size, self.scores_code, counts)
        if self.signer is not None and view.opt_udp is not None and view.opt_ttl & 0x8000:
            try:
                out = self._sign(view, reply, out, transport, self.signer)
                counts["signed"] += 1
            except Exception:  # our bug, not the peer's: SERVFAIL, counted, not kept
                counts["internal_error"] += 1
                kind, out = "internal_error", self._fit(view, Reply(SERVFAIL), transport)
        counts["tx_bytes"] += len(out)
        if kind != "internal_error":
            if self.packet_cache_size:
                self._remember(key, out, kind)
            # an embedding may count (embedding_used/ignored): such replies are not kept
            if memo is not None and not any(c == self.embedding_code for c, _ in view.options):
                memo.put((self._generation, key), out[2:], kind)
        return out

    def _sign(self, view: QueryView, reply: Reply, out: bytes, transport: str,
              signer: ZoneSigner) -> bytes:
        """``out`` signed for a DO query, with the proof of a negative answer: the types at
        the name for NODATA, the closest encloser for NXDOMAIN (:mod:`nodes.dns.dnssec`)."""
        limit = size_limit(view.opt_udp, self.max_udp_size, transport)
        negative = (not reply.answer and bool(reply.authority)
                    and reply.authority[0].rtype == SOA)
        nodata = negative and reply.rcode == NOERROR
        encloser = self._encloser(view.qname) if negative and reply.rcode == NXDOMAIN else None
        return signer.sign_reply(out, limit, self._types_at(view.qname) if nodata else None,
                                 encloser)

    def _fit(self, q: QueryView, reply: Reply, transport: str,
             info: _NameInfo | None = None) -> bytes:
        """:func:`~nodes.authoritative.fit.fit` with this server's size and options."""
        return fit(q, reply, transport, info[1] if info is not None else None, self._opt,
                   self.max_udp_size, self.scores_code, self.stats.counts)

    # ------------------------------------------------------------------ zone transfers

    def transfer(self, wire: bytes, src: Address, now: float) -> list[bytes] | None:
        """Answer a zone transfer request received over TCP: the messages to send, in order
        (one for a refusal); None when ``wire`` is not an AXFR/IXFR query (answer it with
        :meth:`handle`). Never raises on peer input."""
        wire = bytes(wire)
        view = transfer_query(wire)
        if view is None:
            return None
        counts = self.stats.counts
        counts["rx_tcp"] += 1
        try:
            kind, messages = self._transfer(view, wire, src, now)
        except Exception:  # our bug, not the peer's
            kind, messages = "internal_error", [self._fit(view, Reply(SERVFAIL), "tcp")]
        counts[kind] += 1
        counts["xfr_messages"] += len(messages)
        counts["tx_bytes"] += sum(map(len, messages))
        return messages

    def transfer_records(self, zone: str) -> list[Rec]:
        """What an AXFR of ``zone`` sends between its two SOAs (SOA first): its records, the
        walk records and, when the server signs, its DNSKEY, DS, NSEC chain and RRSIGs
        (:func:`~nodes.authoritative.transfer.transfer_records`; KeyError: no such zone)."""
        return transfer_records(self._zones[normalise(zone)], self.signer)

    def transfer_allowed(self, address: str) -> bool:
        """Whether ``address`` may transfer zones (``transfer_peers``, ``transfer_acl``)."""
        return allowed(address, self.transfer_acl, self.transfer_peers)

    def _transfer(self, q: QueryView, wire: bytes, src: Address, now: float
                  ) -> tuple[str, list[bytes]]:
        refused = self.transfers.refusal(src[0], now, self.transfer_acl, self.transfer_peers)
        if refused:
            return refused, [self._fit(q, Reply(REFUSED), "tcp")]
        state = self._zones.get(q.qname) if q.qclass == 1 else None
        if state is None:  # not a zone apex this server holds (RFC 5936 §2.2.1)
            return "xfr_notauth", [self._fit(q, Reply(NOTAUTH), "tcp")]
        kind, answer = zone_transfer(q, wire, state, self.signer)
        if isinstance(answer, Reply):
            return kind, [self._fit(q, answer, "tcp")]
        return kind, xfr_messages(q, answer, self._opt if q.opt_udp is not None else b"")

    # ------------------------------------------------------------------ caches

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

    def _answer(self, q: QueryView, info: _NameInfo | None = None) -> tuple[str, Reply]:
        """What to answer: checks of the header and intent option, then the zone's answer
        (:mod:`nodes.authoritative.answers`), with the counter key of its kind."""
        if q.flags & 0x7800:  # opcode other than QUERY
            return "notimp", Reply(NOTIMP)
        if q.qdcount != 1:
            return "formerr", Reply(FORMERR)
        if q.opt_udp is not None and q.opt_ttl & 0xFF0000:  # EDNS version > 0
            return "badvers", Reply(BADVERS & 0xF, ext_rcode=BADVERS >> 4)
        if q.qtype == AXFR or q.qtype == IXFR:  # TCP only, through transfer()
            return "xfr_notimp", Reply(NOTIMP)
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
                return "formerr_intent", Reply(FORMERR)
            version, length, k = _INTENT_HEADER.unpack_from(data)
            head = 5 if version == INTENT_VERSION_BEAM else 4  # version 1: a beam, ignored
            if (version not in (INTENT_VERSION, INTENT_VERSION_BEAM) or len(data) - head != length
                    or length > 65531 or (head == 5 and not data[4])):
                return "formerr_intent", Reply(FORMERR)
            try:
                text = data[head:].decode("utf-8")
            except UnicodeDecodeError:
                return "formerr_intent", Reply(FORMERR)
            for c, d in q.options:
                if c == self.embedding_code:  # the client's embedding of the intent
                    try:
                        text = self._embedded(text, *decode_embedding(d))
                    except IntentError:
                        return "formerr_embedding", Reply(FORMERR)
        if q.qclass != 1:
            return "refused", Reply(REFUSED)
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
            return "refused", Reply(REFUSED)
        if self.signer is not None and (q.qtype == _DS or q.qtype == _DNSKEY):
            keys = self._keys(state, target, q.qtype, self.signer)
            if keys is not None:
                return keys
        if target != state.name and state.cuts:
            cut = state.delegation_for(target)
            if cut is not None:
                return "referral", referral([state.child_by_zone[cut.zone]], False)
        if data is not None and tq is not None and q.qtype in (SRV, ANY):
            service, proto, zone, cursor = tq
            if cursor and target == state.name:
                if state.leaf:
                    return "semantic", tools_answer(state, self.scorer, service, proto, text,
                                                    k, want)
                return "semantic", semantic(state, self.scorer, service, proto, text, k, want)
            if not cursor and zone == state.name and state.leaf:
                return "semantic", tools_answer(state, self.scorer, service, proto, text, k,
                                                want)
        return standard(state, self.scorer, qname, q.qtype, self.cname_referral)

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
        dim = getattr(self.scorer, "dim", None)
        if len(vector) != dim:
            raise IntentError(f"embedding of {len(vector)} values for a "
                              f"{dim}-dimensional model")
        key = "\x00embedding:" + hashlib.sha1(vector.tobytes()).hexdigest()
        if key not in store:
            store[key] = vector / (np.linalg.norm(vector) or 1.0)
        self.stats.counts["embedding_used"] += 1
        return key

    def _keys(self, state: ZoneState, target: str, qtype: int, signer: ZoneSigner
              ) -> tuple[str, Reply] | None:
        """A signed zone's DNSKEY at its apex, or the DS of a delegated child (the parent
        answers it, RFC 4035 §3.1.4.1, also when it holds the child); None otherwise."""
        if qtype == _DNSKEY:
            if target != state.name:
                return None
            rec = Rec(target, _DNSKEY, KEY_TTL, (signer.dnskey_wire(target),))
            return "dnskey", Reply(NOERROR, True, [rec])
        if target == state.name and target != ".":  # a child apex: its parent, if held here
            state = self._find_zone(target.partition(".")[2] or ".") or state
        if target not in state.cuts:
            return None
        rec = Rec(target, _DS, state.data.ttls.ns, (signer.ds_wire(target),))
        return "ds", Reply(NOERROR, True, [rec])

    def _encloser(self, qname: str) -> str | None:
        """The closest encloser of a name its zone answers NXDOMAIN: the longest ancestor
        that exists (:func:`~nodes.authoritative.answers.name_exists`)."""
        state = self._find_zone(qname)
        if state is None:
            return None
        name = qname
        while name != state.name and name != ".":
            name = name.partition(".")[2] or "."
            if name_exists(state, name):
                return name
        return state.name

    def _types_at(self, qname: str) -> tuple[int, ...]:
        """Record types the name has (for a NODATA proof): its records (and DNSKEY at a
        signed apex), SRV for an intent name at a leaf, TYPE65280 where the walk record is
        answered, none for an empty non-terminal."""
        state = self._find_zone(qname)
        if state is None:
            return ()
        node = state.node(qname)
        if node:
            types = tuple(t for t, rrs in node.items() if rrs)
            return (*types, _DNSKEY) if qname == state.name and self.signer else types
        walk = walk_types(state, qname)
        if state.leaf and parse_intent_qname(qname, state.name) is not None:
            return (SRV, *walk)
        return walk
