"""Transport-free authoritative DNS server for ToolDNS zones (root, TLD, intermediate, leaf).

``AuthoritativeServer.handle(wire, src, now, transport)`` takes one DNS message and returns
the response bytes (or None to drop). One server may hold several zones.

With the intent option on a cursor name ``_svc._proto._<zone>.``:
  * non-leaf zone → referral: NS records of the top-K children by semantic score (all for
    K = 0) with glue A records; for K = 0 the children's summaries ride along as TXT in the
    additional section so a resolver can match locally ("query mock");
  * leaf zone → top-K SRV records (owner = the query name) with A records of their targets.
Without the option the server is a plain authoritative server for the names it holds:
SRV at ``_svc._proto.<leaf>.``, A/TXT at tool targets, SOA/NS/TXT at the apex, A at its own
NS hosts, referrals below delegations, NXDOMAIN/NODATA with SOA, AA set on its own data.

Responses that do not fit the requester's UDP size go out truncated (TC, empty sections);
the same server answers the retry over TCP. A peer's malformed input is answered with
FORMERR when the header can be read and dropped otherwise; both are counted. Replies are
built by :mod:`nodes.codec` from records prepared at zone load; a bounded packet cache
(keyed on the query bytes after the ID) answers repeated queries.
"""

from __future__ import annotations

import ipaddress
import struct
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from nodes.codec import (
    FormatError,
    QueryView,
    Rec,
    ReplyBuilder,
    character_strings,
    opt_bytes,
    parse_query,
    view_from_dnslib,
)
from nodes.scoring import BM25Scorer, ScoreIndex, Scorer, top_k
from nodes.wire import (
    CLASSIC_UDP_SIZE,
    DEFAULT_EDNS_SIZE,
    DEFAULT_OPTION_CODE,
    MAX_MESSAGE_SIZE,
    Intent,
    IntentError,
    is_subdomain,
    normalise,
    parse_tool_name,
)
from nodes.zone import Address, Delegation, ToolRecord, ZoneData

A, NS, SOA, TXT, SRV, ANY = 1, 2, 6, 16, 33, 255
NOERROR, FORMERR, SERVFAIL, NXDOMAIN, NOTIMP, REFUSED = 0, 1, 2, 3, 4, 5
BADVERS = 16  # RFC 6891 extended RCODE
ANSWER, AUTHORITY, ADDITIONAL = 1, 2, 3


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


def _srv(owner: str, tool: ToolRecord, ttl: int) -> Rec:
    fixed = struct.pack("!HHH", tool.priority, tool.weight, tool.port)
    return Rec(owner, SRV, ttl, (fixed, normalise(tool.target)))


def _txt(owner: str, strings: list[bytes], ttl: int) -> Rec:
    return Rec(owner, TXT, ttl, (character_strings(strings),))


@dataclass
class _Reply:
    rcode: int
    aa: bool = False
    answer: list[Rec] = field(default_factory=list)
    authority: list[Rec] = field(default_factory=list)
    additional: list[Rec] = field(default_factory=list)
    ext_rcode: int = 0
    required: int = 0  # leading additional records that must fit (in-domain glue, RFC 9471)


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


@dataclass
class _ZoneState:
    """A zone plus its lookup tables and lazily built score indexes."""

    data: ZoneData
    records: dict[str, dict[int, list[Rec]]]
    names: set[str]  # every name existing in the zone, empty non-terminals included
    cuts: dict[str, Delegation]
    children: list[_Child]
    negative_soa: Rec
    child_index: ScoreIndex | None = None
    eligible: dict[str, np.ndarray] = field(default_factory=dict)
    tools: dict[str, _Tools] = field(default_factory=dict)


@dataclass
class ServerStats:
    """Counters a server keeps; engines read them into per-node load records."""

    counts: Counter[str] = field(default_factory=Counter)

    def __getitem__(self, key: str) -> int:
        return self.counts[key]


class AuthoritativeServer:
    """Serves one or more ToolDNS zones; stateless per message apart from counters/cache."""

    def __init__(
        self,
        zones: Iterable[ZoneData],
        scorer: Scorer | None = None,
        option_code: int = DEFAULT_OPTION_CODE,
        max_udp_size: int = DEFAULT_EDNS_SIZE,
        name: str = "auth",
        packet_cache: int = 4096,
    ) -> None:
        self.name = name
        self.scorer = scorer or BM25Scorer()
        self.option_code = option_code
        self.max_udp_size = max_udp_size
        self.stats = ServerStats()
        self.packet_cache_size = packet_cache
        self._cache: dict[bytes, tuple[bytes, str]] = {}
        self._opt = opt_bytes(max_udp_size)
        self._zones: dict[str, _ZoneState] = {}
        for zone in zones:
            self.add_zone(zone)

    # ------------------------------------------------------------------ zone data

    def add_zone(self, zone: ZoneData) -> None:
        """Load (or replace) a zone; the next query sees it (no global index)."""
        self._zones[normalise(zone.name)] = _build_state(zone)
        self._cache.clear()

    @property
    def zones(self) -> list[str]:
        return sorted(self._zones)

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
        counts["rx_" + transport] += 1
        wire = bytes(wire)
        key = None
        if self.packet_cache_size:
            key = wire[2:] + (b"T" if transport == "tcp" else b"U")
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
        if view.qr:
            counts["dropped_response"] += 1
            return None
        try:
            kind, reply = self._answer(view)
        except Exception:  # our bug, not the peer's: answer SERVFAIL and count it loudly
            kind, reply = "internal_error", _Reply(SERVFAIL)
        counts[kind] += 1
        out = self._fit(view, reply, transport)
        counts["tx_bytes"] += len(out)
        if key is not None and kind != "internal_error":
            if len(self._cache) >= self.packet_cache_size:
                del self._cache[next(iter(self._cache))]
            self._cache[key] = (out, kind)
        return out

    def _formerr_raw(self, wire: bytes) -> bytes | None:
        if len(wire) < 12 or wire[2] & 0x80:  # no header, or a (garbled) response: drop
            self.stats.counts["dropped_malformed"] += 1
            return None
        self.stats.counts["formerr"] += 1
        flags = 0x8000 | (wire[2] & 0x78) << 8 | FORMERR
        return wire[:2] + struct.pack("!HHHHH", flags, 0, 0, 0, 0)

    # ------------------------------------------------------------------ answering

    def _answer(self, q: QueryView) -> tuple[str, _Reply]:
        if q.opcode != 0:
            return "notimp", _Reply(NOTIMP)
        if q.qdcount != 1:
            return "formerr", _Reply(FORMERR)
        if q.opt_udp is not None and (q.opt_ttl >> 16) & 0xFF != 0:  # EDNS version > 0
            return "badvers", _Reply(BADVERS & 0xF, ext_rcode=BADVERS >> 4)
        intent = None
        data = q.option(self.option_code)
        if data is not None:
            try:
                intent = Intent.decode(data)
            except IntentError:
                return "formerr_intent", _Reply(FORMERR)
        if q.qclass != 1:
            return "refused", _Reply(REFUSED)
        qname = q.qname
        tq = parse_tool_name(qname) if qname.startswith("_") else None
        # A cursor points at a zone; any other name is looked up as itself.
        target = tq.zone if tq is not None and tq.cursor and intent is not None else qname
        state = self._find_zone(target)
        if state is None:
            return "refused", _Reply(REFUSED)
        cut = _delegation_for(state, target)
        if cut is not None:
            return "referral", self._referral(state, [cut], hints=False)
        if intent is not None and tq is not None and q.qtype in (SRV, ANY):
            if tq.cursor and target == state.data.name:
                return "semantic", self._semantic(state, tq.service, tq.proto, intent)
            if not tq.cursor and tq.zone == state.data.name and state.data.is_leaf:
                return "semantic", self._tools_answer(state, tq.service, tq.proto, intent)
        return self._standard(state, qname, q.qtype)

    def _semantic(self, state: _ZoneState, service: str, proto: str, intent: Intent) -> _Reply:
        if state.data.is_leaf:
            return self._tools_answer(state, service, proto, intent)
        if state.child_index is None:
            kids = state.data.children
            state.child_index = self.scorer.index([c.zone for c in kids], [c.summary for c in kids])
        eligible = state.eligible.get(service)
        if eligible is None:
            eligible = np.array([i for i, c in enumerate(state.data.children)
                                 if service in c.services], dtype=np.int64)
            state.eligible[service] = eligible
        chosen = top_k(state.child_index.scores(intent.text), intent.k, eligible)
        if not chosen:
            return self._negative(state, NOERROR)
        return self._referral(state, [state.data.children[i] for i in chosen],
                              hints=intent.k == 0, states=[state.children[i] for i in chosen])

    def _tools_answer(self, state: _ZoneState, service: str, proto: str, intent: Intent) -> _Reply:
        key = f"{service}/{proto}"
        tools = state.tools.get(key)
        if tools is None:
            chosen_tools = [t for t in state.data.tools
                            if t.service == service and t.proto == proto]
            ttls = state.data.ttls
            tools = _Tools(
                srv=[_srv("", t, ttls.srv) for t in chosen_tools],
                a=[_a(normalise(t.target), t.address, ttls.a) for t in chosen_tools],
                index=self.scorer.index([t.tool_id for t in chosen_tools],
                                        [f"{t.name} {t.description}" for t in chosen_tools]),
            )
            state.tools[key] = tools
        if not tools.srv:
            return self._negative(state, NOERROR)
        chosen = top_k(tools.index.scores(intent.text), intent.k)
        return _Reply(NOERROR, aa=True, answer=[tools.srv[i] for i in chosen],
                      additional=[tools.a[i] for i in chosen])

    def _referral(
        self, state: _ZoneState, children: Sequence[Delegation], hints: bool,
        states: Sequence[_Child] | None = None,
    ) -> _Reply:
        if states is None:
            by_zone = {c.data.zone: c for c in state.children}
            states = [by_zone[c.zone] for c in children]
        reply = _Reply(NOERROR)
        for child in states:
            reply.authority.extend(child.ns)
        for child in states:
            reply.additional.extend(child.glue)
        if hints:  # K = 0 asks for the summaries: they are not optional here
            reply.additional.extend(child.hint for child in states)
        reply.required = len(reply.additional)
        return reply

    def _standard(self, state: _ZoneState, qname: str, qtype: int) -> tuple[str, _Reply]:
        node = state.records.get(qname)
        if node is None and qname not in state.names:
            return "nxdomain", self._negative(state, NXDOMAIN)
        node = node or {}
        rrs = [r for rs in node.values() for r in rs] if qtype == ANY else node.get(qtype)
        if not rrs:
            return "nodata", self._negative(state, NOERROR)
        reply = _Reply(NOERROR, aa=True, answer=list(rrs))
        if qtype in (SRV, NS):  # additional-section processing (RFC 1034 §4.3.2)
            for rec in rrs:
                reply.additional.extend(state.records.get(rec.rdata[-1], {}).get(A, ()))
        return "standard", reply

    def _negative(self, state: _ZoneState, rcode: int) -> _Reply:
        return _Reply(rcode, aa=True, authority=[state.negative_soa])

    # ------------------------------------------------------------------ size limits

    def _fit(self, q: QueryView, reply: _Reply, transport: str) -> bytes:
        """Encode, attaching OPT when the query had one, and enforce the size limit."""
        edns = q.opt_udp is not None
        opt = opt_bytes(self.max_udp_size, reply.ext_rcode) if reply.ext_rcode else self._opt
        if transport != "udp":
            limit = MAX_MESSAGE_SIZE
        elif edns:
            limit = min(max(CLASSIC_UDP_SIZE, q.opt_udp or 0), self.max_udp_size)
        else:
            limit = CLASSIC_UDP_SIZE
        room = limit - (len(opt) if edns else 0)
        flags = 0x8000 | (q.flags & 0x7900) | (0x0400 if reply.aa else 0) | (reply.rcode & 0xF)
        qname = q.qname if q.simple_name else ""
        b = ReplyBuilder(q.id, flags, q.question, qname, q.simple_name)
        truncated = False
        for section, recs in ((ANSWER, reply.answer), (AUTHORITY, reply.authority),
                              (ADDITIONAL, reply.additional)):
            for i, rec in enumerate(recs):
                mark = len(b.buf)
                b.add(section, rec)
                if len(b.buf) > room:
                    del b.buf[mark:]
                    b.counts[section] -= 1
                    # optional additional data may simply be left out (RFC 2181 §9)
                    truncated = section != ADDITIONAL or i < reply.required
                    break
            if truncated or len(b.buf) >= room:
                break
        if truncated:
            self.stats.counts["truncated_" + transport] += 1
            if transport == "udp":  # TC with empty sections: the client retries over TCP
                b = ReplyBuilder(q.id, flags | 0x0200, q.question, qname, q.simple_name)
            else:
                b.buf[2] |= 0x02
        if edns:
            b.add_raw(ADDITIONAL, opt)
        return b.finish()


# ---------------------------------------------------------------------- helpers


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
    for tool in zone.tools:
        add(_srv(f"_{tool.service}._{tool.proto}.{name}", tool, ttls.srv))
        add(_a(normalise(tool.target), tool.address, ttls.a))
        add(_txt(normalise(tool.target), txt_strings(tool.description), ttls.srv))
    names: set[str] = set()
    for owner in records:
        labels = owner.rstrip(".").split(".")
        for i in range(len(labels)):
            candidate = ".".join(labels[i:]) + "."
            if not is_subdomain(candidate, name):
                break
            names.add(candidate)
    negative = Rec(name, SOA, min(ttls.soa, ttls.negative), soa.rdata)
    data = zone if zone.name == name else ZoneData(**{**zone.__dict__, "name": name})
    return _ZoneState(data=data, records=records, names=names, cuts=cuts, children=children,
                      negative_soa=negative)
