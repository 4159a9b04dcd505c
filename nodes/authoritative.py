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
FORMERR when the header can be read and dropped otherwise; both are counted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from dnslib import NS as NSData
from dnslib import (
    QTYPE,
    RCODE,
    RR,
    SOA,
    SRV,
    TXT,
    A,
    DNSHeader,
    DNSQuestion,
    DNSRecord,
)

from nodes.scoring import BM25Scorer, ScoreIndex, Scorer, top_k
from nodes.wire import (
    CLASSIC_UDP_SIZE,
    DEFAULT_EDNS_SIZE,
    DEFAULT_OPTION_CODE,
    MAX_MESSAGE_SIZE,
    Intent,
    IntentError,
    find_opt,
    get_intent,
    is_subdomain,
    normalise,
    opt_record,
    parse_tool_name,
    requester_udp_size,
)
from nodes.zone import Address, Delegation, ToolRecord, ZoneData

BADVERS = 16  # RFC 6891 extended RCODE


def txt_strings(text: str) -> list[bytes]:
    """Split text into TXT character-strings of at most 255 bytes."""
    raw = text.encode("utf-8")
    return [raw[i : i + 255] for i in range(0, len(raw), 255)] or [b""]


def child_hint(child: Delegation) -> list[bytes]:
    """TXT strings describing a delegated child: summary, services and owning org."""
    parts = txt_strings("summary=" + child.summary)
    parts.append(("services=" + ",".join(sorted(child.services))).encode())
    parts.append(b"kind=leaf" if child.leaf else b"kind=branch")
    if child.org:
        parts.append(f"org={child.org}".encode())
    return parts


@dataclass
class _ZoneState:
    """A zone plus the lookup tables and lazily built score indexes a server keeps for it."""

    data: ZoneData
    records: dict[str, dict[int, list[RR]]]
    names: set[str]  # every name existing in the zone, empty non-terminals included
    cuts: dict[str, Delegation]
    child_index: ScoreIndex | None = None
    tool_index: dict[str, tuple[list[ToolRecord], ScoreIndex]] = field(default_factory=dict)


@dataclass
class ServerStats:
    """Counters a server keeps; engines read them into per-node load records."""

    counts: Counter[str] = field(default_factory=Counter)

    def __getitem__(self, key: str) -> int:
        return self.counts[key]


class AuthoritativeServer:
    """Serves one or more ToolDNS zones; stateless per message apart from its counters."""

    def __init__(
        self,
        zones: Iterable[ZoneData],
        scorer: Scorer | None = None,
        option_code: int = DEFAULT_OPTION_CODE,
        max_udp_size: int = DEFAULT_EDNS_SIZE,
        name: str = "auth",
    ) -> None:
        self.name = name
        self.scorer = scorer or BM25Scorer()
        self.option_code = option_code
        self.max_udp_size = max_udp_size
        self.stats = ServerStats()
        self._zones: dict[str, _ZoneState] = {}
        for zone in zones:
            self.add_zone(zone)

    # ------------------------------------------------------------------ zone data

    def add_zone(self, zone: ZoneData) -> None:
        """Load (or replace) a zone; its score indexes are rebuilt on first use."""
        self._zones[normalise(zone.name)] = _build_state(zone)

    @property
    def zones(self) -> list[str]:
        return sorted(self._zones)

    def _find_zone(self, name: str) -> _ZoneState | None:
        """Closest enclosing zone this server is authoritative for."""
        labels = name.rstrip(".").split(".") if name != "." else []
        for i in range(len(labels) + 1):
            candidate = ".".join(labels[i:]) + "." if i < len(labels) else "."
            if candidate in self._zones:
                return self._zones[candidate]
        return None

    # ------------------------------------------------------------------ entry point

    def handle(
        self, wire: bytes, src: Address, now: float, transport: str = "udp"
    ) -> bytes | None:
        """Answer one message. Never raises on peer input; returns None to drop."""
        self.stats.counts[f"rx_{transport}"] += 1
        try:
            query = DNSRecord.parse(wire)
        except Exception:
            return self._formerr_raw(wire)
        if query.header.qr:
            self.stats.counts["dropped_response"] += 1
            return None
        try:
            reply = self._answer(query)
        except Exception:  # our bug, not the peer's: answer SERVFAIL and count it loudly
            self.stats.counts["internal_error"] += 1
            reply = _reply(query, RCODE.SERVFAIL)
        return self._fit(query, reply, transport)

    def _formerr_raw(self, wire: bytes) -> bytes | None:
        if len(wire) < 12 or wire[2] & 0x80:  # no header, or a (garbled) response: drop
            self.stats.counts["dropped_malformed"] += 1
            return None
        self.stats.counts["formerr"] += 1
        header = DNSHeader(id=int.from_bytes(wire[:2], "big"), qr=1, rcode=RCODE.FORMERR)
        header.opcode = (wire[2] >> 3) & 0xF
        return DNSRecord(header).pack()

    # ------------------------------------------------------------------ answering

    def _answer(self, query: DNSRecord) -> DNSRecord:
        hdr = query.header
        if hdr.opcode != 0:
            self.stats.counts["notimp"] += 1
            return _reply(query, RCODE.NOTIMP)
        if len(query.questions) != 1:
            self.stats.counts["formerr"] += 1
            return _reply(query, RCODE.FORMERR)
        opt = find_opt(query)
        if opt is not None and (opt.ttl >> 16) & 0xFF != 0:  # EDNS version > 0
            self.stats.counts["badvers"] += 1
            reply = _reply(query, 0)
            reply.add_ar(opt_record(None, self.option_code, self.max_udp_size))
            reply.ar[-1].ttl = (BADVERS >> 4) << 24
            return reply
        try:
            intent = get_intent(query, self.option_code)
        except IntentError:
            self.stats.counts["formerr_intent"] += 1
            return _reply(query, RCODE.FORMERR)
        q = query.q
        if q.qclass != 1:
            self.stats.counts["refused"] += 1
            return _reply(query, RCODE.REFUSED)
        qname = normalise(q.qname)
        tq = parse_tool_name(qname)
        # A cursor points at a zone; any other name is looked up as itself.
        target = tq.zone if tq is not None and tq.cursor and intent is not None else qname
        state = self._find_zone(target)
        if state is None:
            self.stats.counts["refused"] += 1
            return _reply(query, RCODE.REFUSED)
        cut = _delegation_for(state, target)
        if cut is not None:
            self.stats.counts["referral"] += 1
            return self._referral(query, state, [cut], hints=False)
        if intent is not None and tq is not None and q.qtype in (QTYPE.SRV, QTYPE.ANY):
            if tq.cursor and target == state.data.name:
                self.stats.counts["semantic"] += 1
                return self._semantic(query, state, tq.service, tq.proto, intent)
            if not tq.cursor and tq.zone == state.data.name and state.data.is_leaf:
                self.stats.counts["semantic"] += 1
                return self._tools_answer(query, state, tq.service, tq.proto, intent)
        self.stats.counts["standard"] += 1
        return self._standard(query, state, qname, q.qtype)

    def _semantic(
        self, query: DNSRecord, state: _ZoneState, service: str, proto: str, intent: Intent
    ) -> DNSRecord:
        zone = state.data
        if zone.is_leaf:
            return self._tools_answer(query, state, service, proto, intent)
        if state.child_index is None:
            keys = [c.zone for c in zone.children]
            state.child_index = self.scorer.index(keys, [c.summary for c in zone.children])
        scores = state.child_index.scores(intent.text)
        eligible = [service in c.services for c in zone.children]
        chosen = [zone.children[i] for i in top_k(scores, intent.k, eligible)]
        if not chosen:
            return self._nodata(query, state)
        return self._referral(query, state, chosen, hints=intent.k == 0)

    def _tools_answer(
        self, query: DNSRecord, state: _ZoneState, service: str, proto: str, intent: Intent
    ) -> DNSRecord:
        key = f"{service}/{proto}"
        if key not in state.tool_index:
            tools = [t for t in state.data.tools if t.service == service and t.proto == proto]
            index = self.scorer.index([t.tool_id for t in tools], [_tool_text(t) for t in tools])
            state.tool_index[key] = (tools, index)
        tools, index = state.tool_index[key]
        if not tools:
            return self._nodata(query, state)
        chosen = [tools[i] for i in top_k(index.scores(intent.text), intent.k)]
        reply = _reply(query, RCODE.NOERROR, aa=True)
        owner = query.q.qname
        ttls = state.data.ttls
        for tool in chosen:
            reply.add_answer(_srv_rr(owner, tool, ttls.srv))
        for tool in chosen:
            reply.add_ar(RR(tool.target, QTYPE.A, ttl=ttls.a, rdata=A(tool.address)))
        return reply

    def _referral(
        self, query: DNSRecord, state: _ZoneState, children: Sequence[Delegation], hints: bool
    ) -> DNSRecord:
        reply = _reply(query, RCODE.NOERROR)
        ttl = state.data.ttls.ns
        for child in children:
            for server in child.servers:
                reply.add_auth(RR(child.zone, QTYPE.NS, ttl=ttl, rdata=NSData(server.host)))
        for child in children:
            for server in child.servers:
                if is_subdomain(server.host, child.zone):  # glue only where it is needed
                    reply.add_ar(RR(server.host, QTYPE.A, ttl=ttl, rdata=A(server.address)))
        if hints:
            for child in children:
                reply.add_ar(RR(child.zone, QTYPE.TXT, ttl=ttl, rdata=TXT(child_hint(child))))
        return reply

    def _standard(self, query: DNSRecord, state: _ZoneState, qname: str, qtype: int) -> DNSRecord:
        node = state.records.get(qname)
        if node is None and qname not in state.names:
            self.stats.counts["nxdomain"] += 1
            return self._negative(query, state, RCODE.NXDOMAIN)
        node = node or {}
        rrs = [rr for rrs in node.values() for rr in rrs] if qtype == QTYPE.ANY else node.get(qtype)
        if not rrs:
            return self._nodata(query, state)
        reply = _reply(query, RCODE.NOERROR, aa=True)
        for rr in rrs:
            reply.add_answer(rr)
        if qtype in (QTYPE.SRV, QTYPE.NS):  # additional-section processing (RFC 1034 §4.3.2)
            for rr in rrs:
                host = rr.rdata.target if qtype == QTYPE.SRV else rr.rdata.label
                for glue in state.records.get(normalise(host), {}).get(QTYPE.A, []):
                    reply.add_ar(glue)
        return reply

    def _nodata(self, query: DNSRecord, state: _ZoneState) -> DNSRecord:
        self.stats.counts["nodata"] += 1
        return self._negative(query, state, RCODE.NOERROR)

    def _negative(self, query: DNSRecord, state: _ZoneState, rcode: int) -> DNSRecord:
        reply = _reply(query, rcode, aa=True)
        soa = state.records[state.data.name][QTYPE.SOA][0]
        neg = RR(soa.rname, QTYPE.SOA, ttl=min(soa.ttl, state.data.ttls.negative), rdata=soa.rdata)
        reply.add_auth(neg)
        return reply

    # ------------------------------------------------------------------ size limits

    def _fit(self, query: DNSRecord, reply: DNSRecord, transport: str) -> bytes:
        """Pack, attaching OPT when the query had one, and enforce the size limit."""
        edns = find_opt(query) is not None
        if edns and find_opt(reply) is None:
            reply.add_ar(opt_record(None, self.option_code, self.max_udp_size))
        if transport == "udp":
            limit = min(requester_udp_size(query), self.max_udp_size) if edns else CLASSIC_UDP_SIZE
        else:
            limit = MAX_MESSAGE_SIZE
        wire = reply.pack()
        if len(wire) <= limit:
            self.stats.counts["tx_bytes"] += len(wire)
            return wire
        self.stats.counts[f"truncated_{transport}"] += 1
        opt = find_opt(reply)
        if transport == "udp":  # TC with empty sections: the client retries over TCP
            reply.rr, reply.auth, reply.ar = [], [], [opt] if opt else []
        else:  # over TCP drop optional additional data first, then records from the end
            reply.ar = [opt] if opt else []
            while len(reply.pack()) > limit and (reply.rr or reply.auth):
                (reply.rr or reply.auth).pop()
        reply.header.tc = 1
        wire = reply.pack()
        self.stats.counts["tx_bytes"] += len(wire)
        return wire


# ---------------------------------------------------------------------- helpers


def _reply(query: DNSRecord, rcode: int, aa: bool = False) -> DNSRecord:
    header = DNSHeader(
        id=query.header.id, qr=1, aa=int(aa), rd=query.header.rd, ra=0, rcode=rcode & 0xF
    )
    header.opcode = query.header.opcode
    reply = DNSRecord(header)
    for q in query.questions[:1]:
        reply.add_question(DNSQuestion(q.qname, q.qtype, q.qclass))
    return reply


def _tool_text(tool: ToolRecord) -> str:
    return f"{tool.name} {tool.description}"


def _srv_rr(owner: object, tool: ToolRecord, ttl: int) -> RR:
    rdata = SRV(priority=tool.priority, weight=tool.weight, port=tool.port, target=tool.target)
    return RR(owner, QTYPE.SRV, ttl=ttl, rdata=rdata)


def _delegation_for(state: _ZoneState, name: str) -> Delegation | None:
    """The delegated child at or above ``name`` inside this zone, if any."""
    if name == state.data.name:
        return None
    labels = name.rstrip(".").split(".")
    zone_depth = len(state.data.name.rstrip(".").split(".")) if state.data.name != "." else 0
    for i in range(len(labels) - zone_depth - 1, -1, -1):  # shortest candidate first
        candidate = ".".join(labels[i:]) + "."
        if candidate in state.cuts:
            return state.cuts[candidate]
    return None


def _build_state(zone: ZoneData) -> _ZoneState:
    """Static record tables for standard (non-semantic) lookups."""
    name = normalise(zone.name)
    zone = ZoneData(**{**zone.__dict__, "name": name}) if name != zone.name else zone
    ttls = zone.ttls
    records: dict[str, dict[int, list[RR]]] = {}

    def add(owner: str, rtype: int, rdata: object, ttl: int) -> None:
        owner = normalise(owner)
        records.setdefault(owner, {}).setdefault(rtype, []).append(
            RR(owner, rtype, ttl=ttl, rdata=rdata)
        )

    primary = zone.servers[0].host if zone.servers else f"ns1.{name}"
    hostmaster = "hostmaster." + (name if name != "." else "invalid.")
    add(name, QTYPE.SOA, SOA(primary, hostmaster, (zone.serial, 3600, 600, 604800, ttls.negative)),
        ttls.soa)
    for server in zone.servers:
        add(name, QTYPE.NS, NSData(server.host), ttls.ns)
        if is_subdomain(server.host, name):
            add(server.host, QTYPE.A, A(server.address), ttls.ns)
    if zone.summary:
        add(name, QTYPE.TXT, TXT(txt_strings("summary=" + zone.summary)), ttls.ns)
    cuts: dict[str, Delegation] = {}
    for child in zone.children:
        cuts[normalise(child.zone)] = child
        for server in child.servers:  # glue, served only as additional data in referrals
            if is_subdomain(server.host, child.zone):
                records.setdefault(normalise(server.host), {})
    for tool in zone.tools:
        add(f"_{tool.service}._{tool.proto}.{name}", QTYPE.SRV,
            SRV(priority=tool.priority, weight=tool.weight, port=tool.port, target=tool.target),
            ttls.srv)
        add(tool.target, QTYPE.A, A(tool.address), ttls.a)
        add(tool.target, QTYPE.TXT, TXT(txt_strings(tool.description)), ttls.srv)
    # glue owners live below cuts and are not this zone's data
    records = {k: v for k, v in records.items() if v}
    names: set[str] = set()
    for owner in records:
        labels = owner.rstrip(".").split(".")
        for i in range(len(labels)):
            candidate = ".".join(labels[i:]) + "."
            if not is_subdomain(candidate, name):
                break
            names.add(candidate)
    return _ZoneState(data=zone, records=records, names=names, cuts=cuts)
