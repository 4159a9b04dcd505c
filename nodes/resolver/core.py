"""Transport-free, ToolDNS-aware recursive resolver (Algorithm 1 of seed 000, with caches).

Sans-IO contract (as in aioquic / dnspython's ``_Resolution``): the engine feeds messages
with ``receive(data, src, now, transport)``, drains ``to_send()``, and fires ``on_timer(now)``
at ``next_timer()``. Time is always passed in; randomness comes from the ``rng`` given.

Each discovery is a generator that yields batches of :class:`Ask` (queries to send in
parallel, one *round*) and receives one :class:`Reply` per ask. The driver around it does
the DNS plumbing: random query IDs, server order by smoothed RTT, timeouts, failover
across a zone's NS replicas, TC → TCP retry, and validation of every response (ID,
question, source address and port).

Caches (all with expiry from the records' TTLs and the ``now`` passed in):
  * zone servers (NS + glue, long TTL) — "server address search": start at the longest
    cached suffix;
  * semantic referrals per (zone, service, intent, K) — a repeated intent skips levels;
  * complete child lists with summaries from K = 0 warming — "query mock": rank children
    locally and contact servers only beyond the cached tree;
  * SRV answers per (zone, service, intent, K) and A records (short TTL).

Modes toward upstream: ``aware`` walks cursor names with the intent option; ``strip`` and
``pass-through`` model unmodified resolvers: plain iterative resolution of the literal
name, with the client's option removed or forwarded unchanged. ``qname`` is an unmodified
resolver too, for intents carried in the name (:func:`nodes.dns.wire.intent_qname`, the
deployable design): its discoveries resolve that name, following the servers' CNAME chain
down the tree. Plain resolution (any stub query that is not a cursor walk, in every mode)
is what stock recursors do: it follows CNAMEs, learns the delegation sent beside each,
caches every CNAME and answer RRset by name and type (not when an option is forwarded,
since the answer may depend on it), validates with ``dnssec`` and then sets AD for clients
that ask; a repeated intent-in-the-name is answered from cache, a new one costs one
exchange per level once the zones' servers are known.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from dnslib import QTYPE, RCODE, RR, SRV, A, DNSHeader, DNSQuestion, DNSRecord, EDNSOption

from nodes.dns import dnssec
from nodes.dns.cache import DEFAULT_MAX_BYTES, DEFAULT_MAX_ENTRIES, Entry, Store
from nodes.dns.codec import QueryView, parse_query
from nodes.dns.message import (
    RC_FORMERR,
    RC_NOERROR,
    RC_NOTIMP,
    RC_NXDOMAIN,
    RC_REFUSED,
    RC_SERVFAIL,
    TYPE_A,
    TYPE_CNAME,
    TYPE_DNSKEY,
    TYPE_NS,
    TYPE_SOA,
    TYPE_SRV,
    TYPE_TXT,
    Message,
    encode_answer,
    encode_query,
    parse_response,
)
from nodes.dns.wire import (
    CLASSIC_UDP_SIZE,
    DEFAULT_EDNS_SIZE,
    DEFAULT_OPTION_CODE,
    EMBEDDING_OPTION_CODE,
    MAX_MESSAGE_SIZE,
    SCORES_OPTION_CODE,
    Intent,
    IntentError,
    cursor_name,
    encode_embedding,
    find_opt,
    get_intent,
    get_scores,
    intent_qname,
    is_subdomain,
    name_fits,
    normalise,
    opt_record,
    parse_tool_name,
    requester_udp_size,
)
from nodes.dns.zone import Address
from nodes.scoring import BM25Scorer, Scorer, top_k
from nodes.trust import TrustPolicy

Mode = Literal["aware", "strip", "pass-through", "qname"]
MAX_CNAMES = 16  # CNAMEs followed for one question (BIND's max-restarts is 11, Unbound 11)
SRTT_MAX = 65_536  # servers whose smoothed RTT is remembered
# "tls": DNS over TLS (RFC 7858) to the authoritative servers (ResolverConfig.upstream);
# the engines carry it on persistent connections and report them on the Step
Transport = Literal["udp", "tcp", "tls"]


@dataclass(frozen=True, slots=True)
class ResolverConfig:
    """Resolver behaviour; every field can be set from a scenario file."""

    mode: Mode = "aware"
    beam: int = 1  # explore up to B of the top-K branches at each level
    # how the beam is kept: "split" (each branch shares out its width, Algorithm 1) or
    # "global" (the best B children over all zones of a level, by the servers' scores)
    search: Literal["split", "global"] = "split"
    # how the leaves' lists are combined: round-robin in walk order, or by score
    merge: Literal["round-robin", "score"] = "round-robin"
    timeout: float = 0.5  # seconds per attempt before trying the next replica
    max_attempts: int = 4  # attempts per query across a zone's replicas
    query_mock: bool = True  # rank cached child lists locally
    cache: bool = True  # use the caches at all
    a_from_additional: bool = False  # take targets' A from the SRV response's additional data
    edns_size: int = DEFAULT_EDNS_SIZE
    option_code: int = DEFAULT_OPTION_CODE
    dns_port: int = 53
    max_rounds: int = 24  # loop guard
    # bounds on everything cached (one LRU over all tables; bytes are estimated with
    # sys.getsizeof, see nodes.dns.cache); the least recently used items go first
    cache_max_entries: int = DEFAULT_MAX_ENTRIES
    cache_max_bytes: int = DEFAULT_MAX_BYTES
    # stub queries being resolved at once; more are dropped and counted (as Unbound's
    # num-queries-per-thread), so a flood of distinct intents cannot grow state unbounded
    max_clients: int = 10_000
    srtt_alpha: float = 0.3
    selection: Literal["srtt", "random"] = "srtt"  # replica order: smoothed RTT or random
    srtt_decay: float = 1.0  # SRTT of replicas not chosen is multiplied by this (BIND-style
    # decay: a replica that timed out is probed again eventually; 1 = never)
    serve_stale: bool = False  # RFC 8767: answer from expired data when upstream fails
    stale_ttl: float = 86_400.0  # how long past expiry data may still be served
    trust: TrustPolicy | None = None  # which zones tools may come from (nodes.trust)
    dnssec: bool = False  # set DO and validate the chain of delegations (nodes.dns.dnssec)
    trust_anchor: str = ""  # the root zone's DS record (text) when validating
    scores_code: int = SCORES_OPTION_CODE  # the option asking for servers' scores
    # send the intent's embedding (dense scorer) so that dense servers need not compute it
    send_embedding: bool = False
    # how queries to the authoritative servers travel: UDP (TC → TCP), or DNS over TLS on
    # connections the engine keeps open (the node only marks its Outgoing; no TC retry)
    upstream: Literal["udp", "tls"] = "udp"
    embedding_code: int = EMBEDDING_OPTION_CODE


@dataclass(frozen=True, slots=True)
class Discovery:
    """A discovery request: intent, service, K, and the zone to start from (trust)."""

    intent: str
    service: str = "mcp"
    proto: str = "tcp"
    k: int = 1
    start: str = "tools."
    beam: int | None = None


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One discovered tool endpoint."""

    target: str
    address: str | None
    port: int
    priority: int
    weight: int
    zone: str
    score: float | None = None  # the leaf's relevance score, when it sent scores
    address6: str | None = None  # its AAAA address (agents that ask for AAAA)


@dataclass(slots=True)
class Step:
    """One DNS exchange (or a timed-out attempt) made during a discovery."""

    qname: str
    qtype: str
    server: Address
    transport: str
    sent: float
    rtt: float | None
    bytes_out: int
    bytes_in: int
    outcome: str
    with_intent: bool
    qid: int = 0  # DNS message ID (lets a packet capture be matched to its discovery)
    # transport "tls": the engine's connection number, and whether this exchange opened it
    # (and so paid the TCP and TLS handshakes)
    conn: int = 0
    opened: bool = False


@dataclass
class DiscoveryResult:
    """What one discovery found and what it cost."""

    request: Discovery
    started: float
    finished: float = 0.0
    endpoints: list[Endpoint] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    rounds: int = 0  # sequential network rounds on the critical path
    rcode: str = "NOERROR"
    error: str | None = None
    cache: Counter[str] = field(default_factory=Counter)
    leaves: list[str] = field(default_factory=list)
    client: tuple[Address, int] | None = None  # stub client (address, query ID) if any
    rejected: int = 0  # tools the trust policy refused
    bogus: int = 0  # answers that failed DNSSEC validation (and were not used)

    @property
    def latency(self) -> float:
        return self.finished - self.started

    @property
    def exchanges(self) -> int:
        return len(self.steps)

    @property
    def bytes_out(self) -> int:
        return sum(s.bytes_out for s in self.steps)

    @property
    def bytes_in(self) -> int:
        return sum(s.bytes_in for s in self.steps)


@dataclass(frozen=True, slots=True)
class Ask:
    """A query the walk wants answered by one of ``servers``."""

    qname: str
    qtype: int
    servers: tuple[Address, ...]
    intent: Intent | None


@dataclass(frozen=True, slots=True)
class Reply:
    msg: DNSRecord | Message | None  # nodes.dns.message reads the common shapes
    error: str | None = None
    wire: bytes = b""  # the response bytes (kept when validating DNSSEC)


@dataclass(frozen=True, slots=True)
class Outgoing:
    data: bytes
    dst: Address
    transport: Transport
    reply: bool = False  # an answer to a stub client (sent from the listening socket)
    step: Step | None = None  # transport "tls": the exchange, for the engine to annotate


@dataclass(frozen=True, slots=True)
class ChildInfo:
    zone: str
    summary: str
    services: frozenset[str]
    org: str | None
    leaf: bool


@dataclass
class _Task:
    gen: Generator[list[Ask], list[Reply], object]
    result: DiscoveryResult | None
    asks: list[Ask] = field(default_factory=list)
    replies: list[Reply | None] = field(default_factory=list)
    # stub query to answer when done: dnslib's parse, or the fast view with its bytes
    client: tuple[DNSRecord | QueryView, Address, str] | None = None
    client_wire: bytes = b""
    value: object = None  # the generator's return value


@dataclass
class _Pending:
    task: _Task
    index: int
    qid: int
    wire: bytes
    order: list[Address]
    attempt: int
    server: Address
    transport: Transport
    sent: float
    deadline: float
    step: Step | None


class RecursiveResolver:
    """ToolDNS-aware recursive resolver; also answers stub clients."""

    def __init__(
        self,
        root_hints: Sequence[str],
        rng: random.Random,
        config: ResolverConfig | None = None,
        scorer: Scorer | None = None,
        name: str = "resolver",
    ) -> None:
        self.config = config or ResolverConfig()
        self._upstream: Transport = self.config.upstream
        self.rng = rng
        # query IDs: from ``rng`` (seeded) in simulation, for determinism; the live adapters
        # set an OS-random source (RFC 5452: IDs an off-path attacker cannot predict)
        self.id_source: random.Random | None = None
        self.scorer = scorer or BM25Scorer()
        if self.config.send_embedding and not hasattr(self.scorer, "model"):
            raise ValueError("send_embedding needs a dense scorer (it embeds the intent)")
        self._embeddings: dict[str, bytes] = {}  # intent text -> option data (bounded)
        self.name = name
        self.root_hints = tuple((a, self.config.dns_port) for a in root_hints)
        self.stats: Counter[str] = Counter()
        self.srtt: dict[Address, float] = {}  # bounded by SRTT_MAX (oldest dropped)
        # every cached item lives in one LRU store bounded in entries and bytes
        self.store = Store(self.config.cache_max_entries, self.config.cache_max_bytes)
        table = self.store.table
        self._servers = table("servers")  # zone -> tuple[Address]
        self._referrals = table("referrals")  # (zone, svc, proto, intent, k) -> [zone]
        self._children = table("children")  # (zone, svc) -> [ChildInfo]
        self._child_index = table("child_index")  # (zone, svc) -> (children, ScoreIndex)
        self._srv = table("srv")  # (zone, svc, proto, intent, k) -> [Endpoint]
        self._addr = table("addr")  # target -> address
        self._negative = table("negative")  # (qname, qtype) -> True
        self._answers = table("answers")  # plain names: (qname, qtype) -> [RR] (CNAME too)
        self._keys = table("keys")  # zone -> validated DNSKEY rdataset (DNSSEC)
        self._ds = table("ds")  # zone -> DS records validated in its parent
        self._pending: dict[int, _Pending] = {}
        self._out: list[Outgoing] = []
        self._results: list[DiscoveryResult] = []
        self._active_clients = 0
        self._now = 0.0

    # ------------------------------------------------------------------ public API

    def discover(self, request: Discovery, now: float) -> DiscoveryResult:
        """Start a discovery; its result (returned, filled in as the walk goes) appears in
        :meth:`pop_results` when finished."""
        self._now = now
        result = DiscoveryResult(request=request, started=now)
        self._start(_Task(gen=self._discover(request, result), result=result), now)
        return result

    def warm(self, service: str, now: float, proto: str = "tcp", start: str = "tools."
             ) -> DiscoveryResult:
        """K = 0 cache warming: fetch every delegation level below ``start`` for ``service``."""
        self._now = now
        request = Discovery(intent="", service=service, proto=proto, k=0, start=start)
        result = DiscoveryResult(request=request, started=now)
        self._start(_Task(gen=self._warm(request, result), result=result), now)
        return result

    def is_pending(self, qid: int) -> bool:
        """Whether an upstream query with this ID still awaits its answer."""
        return qid in self._pending

    def pop_results(self) -> list[DiscoveryResult]:
        out, self._results = self._results, []
        return out

    def to_send(self) -> list[Outgoing]:
        out, self._out = self._out, []
        return out

    def next_timer(self) -> float | None:
        return min((p.deadline for p in self._pending.values()), default=None)

    def on_timer(self, now: float) -> None:
        self._now = now
        for qid in [q for q, p in self._pending.items() if p.deadline <= now]:
            pending = self._pending.pop(qid, None)
            if pending is None:
                continue
            self.stats["timeouts"] += 1
            if pending.step is not None:
                pending.step.outcome = "timeout"
            old = self.srtt.get(pending.server, self.config.timeout)
            self._set_srtt(pending.server, max(old * 2, self.config.timeout))
            self._retry(pending, now, "timeout")

    def receive(self, data: bytes, src: Address, now: float, transport: Transport = "udp") -> None:
        """A response from upstream, or a query from a stub client."""
        self._now = now
        msg: DNSRecord | Message | None = parse_response(data)  # fast path; else dnslib
        if msg is None and len(data) > 2 and not data[2] & 0x80:  # a stub client's query
            view = parse_query(data)
            if view is not None and self._on_client_view(view, data, src, now, transport):
                return
        if msg is None:
            try:
                msg = DNSRecord.parse(data)
            except Exception:
                self._malformed(data, src, transport)
                return
        if msg.header.qr:
            self._on_response(msg, len(data), src, now, transport, data)
        else:
            self._on_client_query(msg, src, now, transport)

    # ------------------------------------------------------------------ driver

    def _start(self, task: _Task, now: float) -> None:
        self._advance(task, None, now)

    def _advance(self, task: _Task, replies: list[Reply] | None, now: float) -> None:
        """Run the task's generator until it needs the network or finishes."""
        try:
            asks = next(task.gen) if replies is None else task.gen.send(replies)
        except StopIteration as stop:
            task.value = stop.value
            self._finish(task, now)
            return
        if task.result is not None:
            task.result.rounds += 1
        task.asks, task.replies = asks, [None] * len(asks)
        unsendable = []  # names a hostile or odd referral made too long for the wire
        for i, ask in enumerate(asks):
            if not name_fits(ask.qname):
                unsendable.append(i)
                continue
            self._send(task, i, self._order(ask.servers), 0, self._upstream, now)
        for i in unsendable:  # answered at once, after the others left (the last may advance)
            self.stats["unsendable_name"] += 1
            self._deliver(task, i, Reply(None, "name too long for the wire"), now)

    def _order(self, servers: tuple[Address, ...]) -> list[Address]:
        """Replicas in the order they will be tried (lowest SRTT first, or random)."""
        if self.config.selection == "random":
            order = list(servers)
            self.rng.shuffle(order)
        else:
            order = sorted(servers, key=lambda s: (self.srtt.get(s, 0.0), self.rng.random()))
        decay = self.config.srtt_decay
        if decay != 1.0:
            for other in order[1:]:
                if other in self.srtt:
                    self.srtt[other] *= decay
        return order

    def _send(
        self, task: _Task, index: int, order: list[Address], attempt: int, transport: Transport,
        now: float,
    ) -> None:
        ask = task.asks[index]
        ids = self.id_source or self.rng
        qid = ids.randrange(1, 65536)
        while qid in self._pending:
            qid = ids.randrange(1, 65536)
        options = [] if ask.intent is None else [(self.config.option_code,
                                                  ask.intent.encode())]
        if ask.intent is not None and self._want_scores:
            options.append((self.config.scores_code, b""))
        if ask.intent is not None and self.config.send_embedding:
            options.append((self.config.embedding_code, self._embedding(ask.intent.text)))
        opt_ttl = 0x8000 if self.config.dnssec else 0  # DO: servers add RRSIG, DS, DNSKEY
        wire = encode_query(qid, 0, ask.qname, ask.qtype, options, self.config.edns_size,
                            opt_ttl)
        if wire is None:  # a name the struct codec does not write: dnslib does
            query = DNSRecord(DNSHeader(id=qid, qr=0, rd=0))
            query.add_question(DNSQuestion(ask.qname, ask.qtype))
            opt = opt_record(None, self.config.option_code, self.config.edns_size)
            opt.rdata.extend(EDNSOption(code, data) for code, data in options)
            opt.ttl |= opt_ttl
            query.add_ar(opt)
            wire = query.pack()
        server = order[attempt % len(order)]
        step = Step(
            qname=ask.qname, qtype=QTYPE[ask.qtype], server=server, transport=transport,
            sent=now, rtt=None, bytes_out=len(wire), bytes_in=0, outcome="sent",
            with_intent=ask.intent is not None, qid=qid,
        )
        if task.result is not None:
            task.result.steps.append(step)
        self._pending[qid] = _Pending(
            task=task, index=index, qid=qid, wire=wire, order=order, attempt=attempt,
            server=server, transport=transport, sent=now, deadline=now + self.config.timeout,
            step=step,
        )
        self.stats[f"sent_{transport}"] += 1
        self._out.append(Outgoing(wire, server, transport, step=step if transport == "tls"
                                  else None))

    def _retry(self, pending: _Pending, now: float, why: str) -> None:
        if pending.attempt + 1 < self.config.max_attempts:
            self.stats["retries"] += 1
            self._send(pending.task, pending.index, pending.order, pending.attempt + 1,
                       self._upstream, now)
        else:
            self._deliver(pending.task, pending.index, Reply(None, why), now)

    def _deliver(self, task: _Task, index: int, reply: Reply, now: float) -> None:
        task.replies[index] = reply
        if all(r is not None for r in task.replies):
            self._advance(task, list(task.replies), now)  # type: ignore[arg-type]

    def _on_response(
        self, msg: DNSRecord, size: int, src: Address, now: float, transport: Transport,
        data: bytes = b"",
    ) -> None:
        pending = self._pending.get(msg.header.id)
        if pending is None or pending.server != src or pending.transport != transport:
            self.stats["unexpected_response"] += 1
            return
        ask = pending.task.asks[pending.index]
        q = msg.questions[0] if len(msg.questions) == 1 else None
        if (q is None or q.qtype != ask.qtype or q.qclass != 1 or msg.header.opcode
                or normalise(q.qname) != normalise(ask.qname)):
            self.stats["mismatched_question"] += 1  # keep waiting for the genuine answer
            return
        del self._pending[msg.header.id]
        rtt = now - pending.sent
        old = self.srtt.get(src)
        a = self.config.srtt_alpha
        self._set_srtt(src, rtt if old is None else (1 - a) * old + a * rtt)
        step = pending.step
        if step is not None:
            step.rtt, step.bytes_in = rtt, size
            step.outcome = _rcode_text(msg.header.rcode) + (" TC" if msg.header.tc else "")
        if msg.header.tc and transport == "udp":
            self.stats["truncated"] += 1
            if pending.task.result is not None:
                pending.task.result.cache["tc_retry"] += 1
            order = [src]
            self._send(pending.task, pending.index, order, 0, "tcp", now)
            return
        if msg.header.rcode in (RC_SERVFAIL, RC_REFUSED, RC_FORMERR, RC_NOTIMP):
            self.stats[f"upstream_{RCODE[msg.header.rcode].lower()}"] += 1
            self._retry(pending, now, RCODE[msg.header.rcode])
            return
        self._deliver(pending.task, pending.index,
                      Reply(msg, wire=data if self.config.dnssec else b""), now)

    def _set_srtt(self, server: Address, value: float) -> None:
        srtt = self.srtt
        if server not in srtt and len(srtt) >= SRTT_MAX:
            del srtt[next(iter(srtt))]  # forget the server learned first
        srtt[server] = value

    def _malformed(self, data: bytes, src: Address, transport: Transport) -> None:
        self.stats["malformed"] += 1
        if len(data) >= 12 and not data[2] & 0x80:
            header = DNSHeader(id=int.from_bytes(data[:2], "big"), qr=1, ra=1,
                               rcode=RC_FORMERR)
            self._out.append(Outgoing(DNSRecord(header).pack(), src, transport, reply=True))

    # ------------------------------------------------------------------ caches

    def _get(self, table: dict, key: object) -> object | None:
        if not self.config.cache:
            return None
        entry = table.get(key)
        if entry is None:
            return None
        if entry.expires <= self._now:
            if not self.config.serve_stale or entry.expires + self.config.stale_ttl <= self._now:
                del table[key]
            return None
        return entry.value

    def _get_stale(self, table: dict, key: object) -> object | None:
        """Expired data still within the serve-stale window (RFC 8767), else None."""
        if not (self.config.cache and self.config.serve_stale):
            return None
        entry = table.get(key)
        if entry is None or entry.expires + self.config.stale_ttl <= self._now:
            return None
        return entry.value

    def _put(self, table: dict, key: object, value: object, ttl: float) -> None:
        if self.config.cache:
            table[key] = Entry(value, self._now + ttl)

    def _servers_for(
        self, zone: str, known: dict[str, tuple[Address, ...]]
    ) -> tuple[str, tuple[Address, ...]]:
        """Longest enclosing zone with known servers: learned during this walk, or cached
        ("server address search"); the root hints last."""
        labels = zone.rstrip(".").split(".") if zone != "." else []
        for i in range(len(labels)):
            candidate = ".".join(labels[i:]) + "."
            servers = known.get(candidate) or self._get(self._servers, candidate)
            if servers:
                return candidate, servers  # type: ignore[return-value]
        return ".", self.root_hints

    def _learn_referral(
        self, msg: DNSRecord, bailiwick: str, known: dict[str, tuple[Address, ...]]
    ) -> list[str]:
        """NS sets with in-bailiwick glue, kept for this walk (``known``) and cached;
        returns the child zones in response order."""
        glue: dict[str, str] = {}
        for rr in msg.ar:
            if rr.rtype == TYPE_A and is_subdomain(normalise(rr.rname), bailiwick):
                glue.setdefault(normalise(rr.rname), str(rr.rdata))
        zones: list[str] = []
        servers: dict[str, list[Address]] = {}
        ttls: dict[str, int] = {}
        for rr in msg.auth:
            if rr.rtype != TYPE_NS:
                continue
            owner = normalise(rr.rname)
            if not is_subdomain(owner, bailiwick) or owner == bailiwick:
                self.stats["bogus_referral"] += 1
                continue
            if owner not in servers:
                zones.append(owner)
                servers[owner] = []
            host = normalise(rr.rdata.label)
            if host in glue:
                servers[owner].append((glue[host], self.config.dns_port))
            ttls[owner] = min(ttls.get(owner, rr.ttl), rr.ttl)
        for owner in zones:
            if servers[owner]:
                known[owner] = tuple(servers[owner])
                self._put(self._servers, owner, known[owner], ttls[owner])
        return [z for z in zones if servers[z]]

    def _learn_hints(self, msg: DNSRecord, service: str, zone: str, ttl: float) -> None:
        """Child summaries (TXT in the additional section of a K = 0 referral)."""
        children = []
        for rr in msg.ar:
            if rr.rtype != TYPE_TXT:
                continue
            fields = _parse_hint(rr.rdata.data)
            children.append(ChildInfo(
                zone=normalise(rr.rname), summary=fields.get("summary", ""),
                services=frozenset(filter(None, fields.get("services", "").split(","))),
                org=fields.get("org"), leaf=fields.get("kind") == "leaf",
            ))
        self._put(self._children, (zone, service), children, ttl)
        self._child_index.pop((zone, service), None)

    def _mock(self, zone: str, service: str, intent: Intent) -> list[str] | None:
        """Rank a cached complete child list locally; None if the list is not cached."""
        children = self._get(self._children, (zone, service))
        if children is None or not self.config.query_mock:
            return None
        cached = self._child_index.get((zone, service))
        if cached is None or cached.value[0] is not children:  # once per cached child list
            index = self.scorer.index([c.zone for c in children],  # type: ignore[union-attr]
                                      [c.summary for c in children])  # type: ignore[union-attr]
            self._child_index[(zone, service)] = Entry((children, index), float("inf"))
        else:
            index = cached.value[1]
        scores = index.scores(intent.text) if children else []
        eligible = [i for i, c in enumerate(children) if service in c.services]
        return [children[i].zone for i in top_k(scores, intent.k, eligible)]

    # ------------------------------------------------------------------ DNSSEC

    def _fetch_keys(self, zones: dict[str, tuple[Address, ...]], result: DiscoveryResult):
        """One round of DNSKEY queries for zones whose key is not yet validated; each key
        set must match the DS its parent signed (the trust anchor for the root)."""
        need = sorted(z for z in zones if self._get(self._keys, z) is None)
        if not need:
            return
        replies = yield [Ask(z, TYPE_DNSKEY, zones[z], None) for z in need]
        for zone, reply in zip(need, replies, strict=True):
            ds = (dnssec.anchor_ds(self.config.trust_anchor) if zone == "." else
                  self._get(self._ds, zone))
            if reply.msg is None or not ds:
                continue  # unreachable, or no validated DS: its answers will be bogus
            try:
                keys = dnssec.check_dnskey(reply.wire, zone, ds)  # type: ignore[arg-type]
            except dnssec.BogusError as exc:
                self.stats["dnssec_bogus"] += 1
                result.bogus += 1
                result.error = f"dnssec: {exc}"
                continue
            self._put(self._keys, zone, keys, dnssec.KEY_TTL)
            if not self.config.cache:  # validation needs the key for this walk at least
                self._keys[zone] = Entry(keys, self._now + dnssec.KEY_TTL)

    def _validated(self, reply: Reply, zone: str, result: DiscoveryResult) -> Reply:
        """The reply if its signatures verify with ``zone``'s validated key (recording the
        DS of every child it refers to), else a failed reply: a bogus answer is never used."""
        entry = self._keys.get(zone)
        try:
            if entry is None:
                raise dnssec.BogusError(f"no validated DNSKEY for {zone}")
            children = dnssec.check_answer(reply.wire, zone, entry.value)
        except dnssec.BogusError as exc:
            self.stats["dnssec_bogus"] += 1
            result.bogus += 1
            return Reply(None, f"dnssec: bogus ({exc})")
        self.stats["dnssec_secure"] += 1
        for child, ds in children.items():
            self._ds[child] = Entry(ds, self._now + dnssec.KEY_TTL)
        return reply

    def _is_leaf(self, zone: str, service: str) -> bool:
        parent_zone = zone.split(".", 1)[1] if zone.count(".") > 1 else "."
        children = self._get(self._children, (parent_zone, service)) or []
        return any(c.zone == zone and c.leaf for c in children)  # type: ignore[attr-defined]

    # ------------------------------------------------------------------ walks

    def _discover(self, req: Discovery, result: DiscoveryResult):
        """Algorithm 1 with beam, caches and failover. Yields rounds of asks."""
        if self.config.mode == "qname":  # the intent in the name, the tree's CNAME chain
            qname = intent_qname(req.intent, req.k, req.service, req.start, req.proto)
            msg, error = yield from self._iterate(qname, TYPE_SRV, None, result)
            result.error = error
            if msg is not None:
                found = [replace(e, zone=e.target.split(".", 1)[1])
                         for e in _endpoints(msg, req.start)]
                result.leaves = sorted({e.zone for e in found})
                result.endpoints = yield from self._resolve_targets(found, result, {})
            result.finished = self._now
            return result
        if self.config.mode != "aware":
            qname = cursor_name(req.service, req.start, req.proto)
            intent = Intent(req.intent, k=req.k) if self.config.mode == "pass-through" else None
            msg, error = yield from self._iterate(qname, TYPE_SRV, intent, result)
            if msg is not None:
                result.endpoints = _endpoints(msg, req.start)
            result.error = error
            result.finished = self._now
            return result
        intent = Intent(req.intent, k=req.k)
        known: dict[str, tuple[Address, ...]] = {}  # delegations learned during this walk
        beam = max(1, req.beam or self.config.beam)
        start = normalise(req.start)
        policy = self.config.trust
        trusted = [(z, beam) for z in policy.zones] if policy is not None else []
        if policy is not None and policy.restricts_start and not policy.accepts(start):
            branches = trusted  # walk only the trusted zones, from the first round
        else:
            branches = [(start, beam)]  # (zone, share of the beam width it may still use)
        leaf_results: dict[str, list[Endpoint]] = {}
        leaf_order: list[str] = []
        yield from self._walk(req, result, intent, branches, known, leaf_results, leaf_order)
        if policy is not None and policy.filters:
            merged = self._merge(leaf_results, leaf_order, 0)
            endpoints = [e for e in merged if policy.accepts(e.target)]
            if not endpoints and policy.kind == "public-then-certified":
                result.rejected += len(merged)
                leaf_results, leaf_order = {}, []
                result.error = None
                yield from self._walk(req, result, intent, trusted, known, leaf_results,
                                      leaf_order)
                merged = self._merge(leaf_results, leaf_order, 0)
                endpoints = [e for e in merged if policy.accepts(e.target)]
            result.rejected += len(merged) - len(endpoints)
            endpoints = endpoints if req.k == 0 else endpoints[:req.k]
        else:
            endpoints = self._merge(leaf_results, leaf_order, req.k)
        start_ok = [e for e in endpoints if is_subdomain(e.target, start)]
        if len(start_ok) != len(endpoints):
            self.stats["outside_start_zone"] += len(endpoints) - len(start_ok)
        result.leaves = leaf_order
        result.endpoints = yield from self._resolve_targets(start_ok, result, known)
        if result.endpoints:
            result.error = None
        result.finished = self._now
        return result

    def _walk(self, req: Discovery, result: DiscoveryResult, intent: Intent,
              branches: list[tuple[str, int]], known: dict[str, tuple[Address, ...]],
              leaf_results: dict[str, list[Endpoint]], leaf_order: list[str]):
        """Rounds of the beam walk from ``branches`` down to leaves (fills the leaf dicts).

        With ``search="global"`` every round is one level: the children referred (or cached)
        for all zones of the level are pooled with their scores and the best B go on; the
        referral cache then holds (child, score) pairs and the query mock is not used (its
        local scores are not comparable with the servers')."""
        key = (req.service, req.proto, req.intent, req.k)
        pooled = self.config.search == "global"
        width_b = max(1, req.beam or self.config.beam)
        for _ in range(self.config.max_rounds):
            asks: list[Ask] = []
            asked: list[tuple[str, str, int]] = []  # (branch zone, bailiwick asked, width)
            next_branches: list[tuple[str, int]] = []
            pool: list[tuple[str, float]] = []  # global search: this level's scored children
            while branches:  # local steps first: caches and query mock
                zone, width = branches.pop(0)
                cached_srv = self._get(self._srv, (zone, *key))
                if cached_srv is not None:
                    result.cache["srv_hit"] += 1
                    leaf_results[zone] = list(cached_srv)  # type: ignore[arg-type]
                    leaf_order.append(zone)
                    continue
                ranked = self._get(self._referrals, (zone, *key))
                if ranked is not None:
                    result.cache["referral_hit"] += 1
                    if pooled:
                        pool.extend(ranked)  # type: ignore[arg-type]
                    else:
                        branches = _narrow(ranked, width) + branches  # type: ignore[arg-type]
                    continue
                if not pooled and not self._is_leaf(zone, req.service):
                    mocked = self._mock(zone, req.service, intent)
                    if mocked is not None:
                        result.cache["mock_hit"] += 1
                        branches = _narrow(mocked, width) + branches
                        continue
                bailiwick, servers = self._servers_for(zone, known)
                if bailiwick == zone and zone not in known:
                    result.cache["ns_hit"] += 1
                asks.append(Ask(cursor_name(req.service, zone, req.proto), TYPE_SRV,
                                servers, intent))
                asked.append((zone, bailiwick, width))
            if not asks and not pool:
                break
            replies: list[Reply] = []
            if asks and self.config.dnssec:  # each asked zone's DNSKEY, checked against its DS
                yield from self._fetch_keys({b: a.servers for (_, b, _), a in
                                             zip(asked, asks, strict=True)}, result)
            if asks:
                replies = yield asks
            for (zone, bailiwick, width), reply in zip(asked, replies, strict=True):
                if self.config.dnssec and reply.msg is not None:
                    reply = self._validated(reply, bailiwick, result)
                msg = reply.msg
                if msg is None:
                    result.error = f"{zone}: {reply.error}"
                    stale = self._get_stale(self._srv, (zone, *key))
                    if stale is not None:  # RFC 8767: the leaf's expired answer
                        result.cache["stale_srv"] += 1
                        leaf_results[zone] = list(stale)  # type: ignore[arg-type]
                        leaf_order.append(zone)
                        continue
                    stale = self._get_stale(self._referrals, (zone, *key))
                    if stale is not None:
                        result.cache["stale_referral"] += 1
                        if pooled:
                            pool.extend(stale)  # type: ignore[arg-type]
                        else:
                            next_branches.extend(_narrow(stale, width))  # type: ignore[arg-type]
                    continue
                srv = [rr for rr in msg.rr if rr.rtype == TYPE_SRV]
                if srv:
                    endpoints = self._scored(_endpoints(msg, zone), msg)
                    self._put(self._srv, (zone, *key), endpoints, min(r.ttl for r in srv))
                    leaf_results[zone] = endpoints
                    leaf_order.append(zone)
                    continue
                children = self._learn_referral(msg, bailiwick, known)
                if not children:
                    if msg.header.rcode == RC_NXDOMAIN:
                        result.rcode = "NXDOMAIN"
                    continue
                below = [c for c in children if is_subdomain(c, zone) and c != zone]
                if below and bailiwick == zone:  # semantic referral: the zone's top-K children
                    ttl = min(rr.ttl for rr in msg.auth if rr.rtype == TYPE_NS)
                    if pooled:
                        scored = self._scored_children(below, msg)
                        self._put(self._referrals, (zone, *key), scored, ttl)
                        pool.extend(scored)
                        continue
                    self._put(self._referrals, (zone, *key), below, ttl)
                    if req.k == 0:
                        self._learn_hints(msg, req.service, zone, ttl)
                    next_branches.extend(_narrow(below, width))
                elif any(is_subdomain(zone, c) for c in children):  # a step towards the zone
                    next_branches.append((zone, width))
                else:
                    self.stats["bogus_referral"] += 1
                    result.error = f"{zone}: referral to {children} is out of the walk"
            if pooled:  # the best B of the level; ties keep the order they were learnt in
                best = sorted(range(len(pool)), key=lambda i: (-pool[i][1], i))[:width_b]
                next_branches += [(pool[i][0], 1) for i in best]
            branches = next_branches

    def _embedding(self, text: str) -> bytes:
        """The embedding option for an intent: computed once per text (a few kept)."""
        data = self._embeddings.get(text)
        if data is None:
            vector = self.scorer.encoder([text])[0]  # type: ignore[attr-defined]
            data = encode_embedding(self.scorer.model, vector)  # type: ignore[attr-defined]
            if len(self._embeddings) >= 256:
                self._embeddings.pop(next(iter(self._embeddings)))
            self._embeddings[text] = data
        return data

    @property
    def _want_scores(self) -> bool:
        return self.config.search == "global" or self.config.merge == "score"

    def _scores_of(self, msg: DNSRecord, n: int) -> list[float]:
        """The reply's scores option (one per choice), or -inf for each if it sent none."""
        try:
            scores = get_scores(msg, self.config.scores_code)
        except IntentError:
            scores = None
        if scores is None or len(scores) != n:
            self.stats["missing_scores"] += 1
            return [float("-inf")] * n
        return scores

    def _scored(self, endpoints: list[Endpoint], msg: DNSRecord) -> list[Endpoint]:
        if not self._want_scores:
            return endpoints
        scores = self._scores_of(msg, len(endpoints))
        return [replace(e, score=s) for e, s in zip(endpoints, scores, strict=True)]

    def _scored_children(self, below: list[str], msg: DNSRecord) -> list[tuple[str, float]]:
        """Referred children with their scores; the option lists one per NS owner name."""
        owners = list(dict.fromkeys(normalise(rr.rname) for rr in msg.auth
                                    if rr.rtype == TYPE_NS))
        scores = dict(zip(owners, self._scores_of(msg, len(owners)), strict=True))
        return [(c, scores.get(c, float("-inf"))) for c in below]

    def _merge(self, results: dict[str, list[Endpoint]], order: list[str], k: int
               ) -> list[Endpoint]:
        if self._want_scores:
            return _score_merge(results, order, k)
        return _merge(results, order, k)

    def _resolve_targets(self, endpoints: list[Endpoint], result: DiscoveryResult,
                         known: dict[str, tuple[Address, ...]]):
        """A lookups for SRV targets (one parallel round), unless cached."""
        addresses: dict[str, str] = {}
        need: list[Endpoint] = []
        for ep in endpoints:
            addr = self._get(self._addr, ep.target)
            if addr is None and self.config.a_from_additional and ep.address:
                addr = ep.address
            if addr is not None:
                result.cache["a_hit"] += 1
                addresses[ep.target] = addr  # type: ignore[assignment]
            elif ep.target not in {n.target for n in need}:
                need.append(ep)
        where = [self._servers_for(ep.zone, known) for ep in need]
        asks = [Ask(ep.target, TYPE_A, servers, None) for ep, (_, servers) in
                zip(need, where, strict=True)]
        if asks and self.config.dnssec:
            yield from self._fetch_keys(dict(where), result)
        replies = (yield asks) if asks else []
        if self.config.dnssec:
            replies = [self._validated(r, b, result) if r.msg is not None else r
                       for r, (b, _) in zip(replies, where, strict=True)]
        for ep, reply in zip(need, replies, strict=True):
            a = [rr for rr in (reply.msg.rr if reply.msg else []) if rr.rtype == TYPE_A
                 and normalise(rr.rname) == ep.target]
            if a:
                addresses[ep.target] = str(a[0].rdata)
                self._put(self._addr, ep.target, addresses[ep.target], a[0].ttl)
            elif reply.msg is None:
                stale = self._get_stale(self._addr, ep.target)
                if stale is not None:
                    result.cache["stale_a"] += 1
                    addresses[ep.target] = stale  # type: ignore[assignment]
        return [replace(ep, address=addresses[ep.target]) for ep in endpoints
                if ep.target in addresses]

    def _iterate(self, qname: str, qtype: int, intent: Intent | None, result: DiscoveryResult):
        """Plain iterative resolution of a literal name, as an unmodified resolver does:
        referrals towards the name, CNAMEs followed (at most :data:`MAX_CNAMES`); unless an
        option is forwarded (pass-through), every CNAME and answer RRset is cached by
        (name, type). With ``dnssec`` every reply is validated with the key of the zone
        asked (a positive answer then earns the client AD; denials are not checked)."""
        qname = normalise(qname)
        neg = self._get(self._negative, (qname, qtype))
        if neg is not None:
            result.cache["negative_hit"] += 1
            result.rcode = "NXDOMAIN"
            return None, "NXDOMAIN"
        answers = intent is None  # the answer depends on the name alone: cache it by name
        chain: list[RR] = []  # CNAME records followed so far
        known: dict[str, tuple[Address, ...]] = {}
        bailiwick, servers = self._servers_for(qname, known)
        for _ in range(self.config.max_rounds):
            if answers:
                cached = self._get(self._answers, (qname, qtype))
                if cached is not None:
                    result.cache["answer_hit"] += 1
                    return _chained(chain, cached), None  # type: ignore[arg-type]
                cname = self._get(self._answers, (qname, TYPE_CNAME))
                if cname is not None:
                    result.cache["cname_hit"] += 1
                    if len(chain) >= MAX_CNAMES:
                        break
                    chain.append(cname[0])  # type: ignore[index]
                    qname = normalise(cname[0].rdata.label)  # type: ignore[index]
                    bailiwick, servers = self._servers_for(qname, known)
                    continue
            if self.config.dnssec:  # the zone's key first, checked against its DS
                yield from self._fetch_keys({bailiwick: servers}, result)
            (reply,) = yield [Ask(qname, qtype, servers, intent)]
            if self.config.dnssec and reply.msg is not None:
                reply = self._validated(reply, bailiwick, result)
            msg = reply.msg
            if msg is None:
                result.rcode = "SERVFAIL"
                return None, reply.error
            owned = [rr for rr in msg.rr if normalise(rr.rname) == qname]
            if owned:
                cname = next((rr for rr in owned if rr.rtype == TYPE_CNAME), None)
                if cname is None or qtype == TYPE_CNAME or any(rr.rtype == qtype for rr in owned):
                    if answers:
                        rrs = msg.rr if isinstance(msg, DNSRecord) else msg.to_dnslib().rr
                        here = [rr for rr in rrs if normalise(rr.rname) == qname]
                        self._put(self._answers, (qname, qtype), here,
                                  min(rr.ttl for rr in here))
                    return (_chained(chain, msg) if chain else msg), None
                if len(chain) >= MAX_CNAMES:
                    break
                self.stats["cnames_followed"] += 1
                if answers:
                    self._put(self._answers, (qname, TYPE_CNAME), [cname], cname.ttl)
                chain.append(cname)
                if any(rr.rtype == TYPE_NS for rr in msg.auth):  # the next zone, beside it
                    self._learn_referral(msg, bailiwick, known)
                qname = normalise(cname.rdata.label)
                bailiwick, servers = self._servers_for(qname, known)
                continue
            if msg.header.rcode == RC_NXDOMAIN or not any(
                rr.rtype == TYPE_NS for rr in msg.auth
            ):
                result.rcode = _rcode_text(msg.header.rcode)
                soa = [rr for rr in msg.auth if rr.rtype == TYPE_SOA]
                if soa and msg.header.rcode == RC_NXDOMAIN:
                    self._put(self._negative, (qname, qtype), True, soa[0].ttl)
                if chain:
                    msg = _chained(chain, msg)
                return msg, None if msg.header.rcode == RC_NOERROR else "no such name"
            children = self._learn_referral(msg, bailiwick, known)
            closer = [c for c in children if is_subdomain(qname, c)]
            if not closer:  # RFC-compliant resolvers reject a referral not towards qname
                self.stats["bogus_referral"] += 1
                result.rcode = "SERVFAIL"
                return None, f"referral to {children} does not lead to {qname}"
            bailiwick = closer[0]
            servers = known.get(bailiwick, ())
            if not servers:
                result.rcode = "SERVFAIL"
                return None, f"no glue for {bailiwick}"
        result.rcode = "SERVFAIL"
        return None, ("CNAME chain too long" if len(chain) >= MAX_CNAMES
                      else "too many referrals")

    def _warm(self, req: Discovery, result: DiscoveryResult):
        """Breadth-first K = 0 walk over non-leaf zones, one round per level."""
        intent = Intent("", k=0)
        known: dict[str, tuple[Address, ...]] = {}
        level = [normalise(req.start)]
        while level:
            asks, asked = [], []
            for zone in level:
                bailiwick, servers = self._servers_for(zone, known)
                asks.append(Ask(cursor_name(req.service, zone, req.proto), TYPE_SRV, servers,
                                intent))
                asked.append((zone, bailiwick))
            replies = yield asks
            level = []
            for (zone, bailiwick), reply in zip(asked, replies, strict=True):
                if reply.msg is None:
                    result.error = f"{zone}: {reply.error}"
                    continue
                children = self._learn_referral(reply.msg, bailiwick, known)
                if bailiwick != zone:
                    level.extend(c for c in children if is_subdomain(zone, c))
                    continue
                ttl = min((rr.ttl for rr in reply.msg.auth if rr.rtype == TYPE_NS), default=0)
                self._learn_hints(reply.msg, req.service, zone, ttl)
                infos = self._get(self._children, (zone, req.service)) or []
                level.extend(c.zone for c in infos if not c.leaf)  # type: ignore[attr-defined]
            result.leaves = sorted(z for (z, s) in self._children if s == req.service)
        result.finished = self._now
        return result

    def _finish(self, task: _Task, now: float) -> None:
        if task.result is not None:
            task.result.finished = now
            self._results.append(task.result)
        if task.client is not None:
            self._active_clients -= 1
            self._answer_client(task, now)

    # ------------------------------------------------------------------ stub service

    def _on_client_query(
        self, msg: DNSRecord, src: Address, now: float, transport: Transport
    ) -> None:
        self.stats["client_queries"] += 1
        if msg.header.opcode != 0 or len(msg.questions) != 1:
            self._reply_client(msg, src, transport, RC_FORMERR if msg.header.opcode == 0
                               else RC_NOTIMP)
            return
        try:
            intent = get_intent(msg, self.config.option_code)
        except IntentError:
            self.stats["client_formerr"] += 1
            self._reply_client(msg, src, transport, RC_FORMERR)
            return
        q = msg.q
        self._start_client(intent, normalise(q.qname), q.qtype, src, msg.header.id,
                           (msg, src, transport), b"", now)

    def _on_client_view(self, view: QueryView, data: bytes, src: Address, now: float,
                        transport: Transport) -> bool:
        """:meth:`_on_client_query` for the common shape (``nodes.dns.codec.parse_query``):
        False, having done nothing, for what it leaves to dnslib (another opcode, a bad
        intent option)."""
        if view.flags & 0x7800:
            return False
        options = view.options
        if options and not options[-1][1]:  # dnslib drops an empty last option: so do we
            options = options[:-1]
        intent = None
        for code, value in options:
            if code == self.config.option_code:
                try:
                    intent = Intent.decode(value)
                except IntentError:
                    return False
                break
        self.stats["client_queries"] += 1
        self._start_client(intent, view.qname, view.qtype, src, view.id,
                           (view, src, transport), data, now)
        return True

    def _start_client(self, intent: Intent | None, qname: str, qtype: int, src: Address,
                      qid: int, client: tuple, wire: bytes, now: float) -> None:
        """A stub's query (``qname`` normalised): a ToolDNS walk for an intent on a cursor
        name (aware mode), else plain resolution with the option stripped or forwarded."""
        if self._active_clients >= self.config.max_clients:
            self.stats["client_dropped_overload"] += 1
            return
        self._active_clients += 1
        tq = parse_tool_name(qname)
        if (self.config.mode == "aware" and intent is not None and tq is not None and tq.cursor
                and qtype == TYPE_SRV):
            request = Discovery(intent=intent.text, service=tq.service, proto=tq.proto,
                                k=intent.k, start=tq.zone)
            result = DiscoveryResult(request=request, started=now, client=(src, qid))
            gen = self._discover(request, result)
        else:
            upstream = None if self.config.mode == "strip" else intent
            result = DiscoveryResult(request=Discovery(intent=intent.text if intent else "",
                                                       start=qname), started=now,
                                     client=(src, qid))
            gen = self._plain(qname, qtype, upstream, result)
        self._start(_Task(gen=gen, result=result, client=client, client_wire=wire), now)

    def _plain(self, qname: str, qtype: int, intent: Intent | None, result: DiscoveryResult):
        msg, error = yield from self._iterate(qname, qtype, intent, result)
        result.error = error
        result.finished = self._now
        return msg

    def _answer_client(self, task: _Task, now: float) -> None:
        query, src, transport = task.client  # type: ignore[misc]
        result = task.result
        assert result is not None
        authentic = self.config.dnssec and _authentic(query, task.value, result)
        if isinstance(query, QueryView):
            if not isinstance(task.value, Message | DNSRecord):
                wire = self._fast_answer(query, result, transport)
                if wire is not None:
                    if authentic and (query.flags & 0x20 or query.opt_ttl & 0x8000):
                        wire = _set_ad(wire)
                    self._out.append(Outgoing(wire, src, transport, reply=True))
                    return
            query = DNSRecord.parse(task.client_wire)  # the rare shapes: dnslib
        reply = _client_reply(query, RC_NOERROR)
        if isinstance(task.value, Message):
            task.value = task.value.to_dnslib()  # relayed records are packed by dnslib
        if isinstance(task.value, DNSRecord):  # plain resolution: relay the final answer
            reply.header.rcode = task.value.header.rcode
            for rr in task.value.rr:
                reply.add_answer(rr)
            for rr in task.value.auth:
                if rr.rtype == TYPE_SOA:
                    reply.add_auth(rr)
        elif result.endpoints:
            owner = query.q.qname
            for ep in result.endpoints:
                reply.add_answer(RR(owner, TYPE_SRV, ttl=60, rdata=SRV(
                    priority=ep.priority, weight=ep.weight, port=ep.port, target=ep.target)))
            for ep in result.endpoints:
                reply.add_ar(RR(ep.target, TYPE_A, ttl=60, rdata=A(ep.address)))
        elif result.error and not result.endpoints:
            reply.header.rcode = RC_SERVFAIL if result.rcode != "NXDOMAIN" else RC_NXDOMAIN
        elif result.rcode == "NXDOMAIN":
            reply.header.rcode = RC_NXDOMAIN
        wire = self._fit_client(query, reply, transport)
        opt = find_opt(query)
        if authentic and (query.header.ad or (opt is not None and opt.ttl & 0x8000)):
            wire = _set_ad(wire)
        self._out.append(Outgoing(wire, src, transport, reply=True))

    def _fast_answer(self, query: QueryView, result: DiscoveryResult, transport: Transport
                     ) -> bytes | None:
        """The bytes :meth:`_answer_client` and :meth:`_fit_client` give for a discovery's
        answer, written by ``nodes.dns.message.encode_answer`` (None: let dnslib write it)."""
        rcode = RC_NOERROR
        if not result.endpoints and (result.error or result.rcode == "NXDOMAIN"):
            rcode = RC_SERVFAIL if result.error and result.rcode != "NXDOMAIN" else RC_NXDOMAIN
        edns = query.opt_udp is not None
        limit = MAX_MESSAGE_SIZE if transport == "tcp" else (
            min(max(CLASSIC_UDP_SIZE, query.opt_udp), self.config.edns_size)  # type: ignore[type-var]
            if edns else CLASSIC_UDP_SIZE)
        eps = result.endpoints
        return encode_answer(query.id, query.flags >> 8 & 1, rcode, query.question,
                             [(e.priority, e.weight, e.port, e.target) for e in eps],
                             [(e.target, e.address or "") for e in eps],
                             self.config.edns_size if edns else None, limit)

    def _reply_client(self, query: DNSRecord, src: Address, transport: Transport, rcode: int):
        self._out.append(Outgoing(_client_reply(query, rcode).pack(), src, transport, reply=True))

    def _fit_client(self, query: DNSRecord, reply: DNSRecord, transport: Transport) -> bytes:
        if find_opt(query) is not None:
            reply.add_ar(opt_record(None, self.config.option_code, self.config.edns_size))
        limit = MAX_MESSAGE_SIZE if transport == "tcp" else (
            min(requester_udp_size(query), self.config.edns_size)
            if find_opt(query) is not None else CLASSIC_UDP_SIZE)
        wire = reply.pack()
        if len(wire) > limit:
            opt = find_opt(reply)
            reply.rr, reply.auth, reply.ar = [], [], [opt] if opt else []
            reply.header.tc = 1
            wire = reply.pack()
        return wire


# ---------------------------------------------------------------------- helpers


def _rcode_text(code: int) -> str:
    """RCODE mnemonic; a peer may send codes dnslib has no name for (11-15)."""
    return RCODE.get(code, f"RCODE{code}")


def _client_reply(query: DNSRecord, rcode: int) -> DNSRecord:
    header = DNSHeader(id=query.header.id, qr=1, rd=query.header.rd, ra=1, rcode=rcode)
    reply = DNSRecord(header)
    for q in query.questions[:1]:
        reply.add_question(DNSQuestion(q.qname, q.qtype, q.qclass))
    return reply


def _authentic(query: DNSRecord | QueryView, value: object, result: DiscoveryResult) -> bool:
    """AD (RFC 4035 §3.2.3, RFC 6840 §5.7) for a validating resolver's answer: validated
    records of the type asked (denials are not checked here, so never AD on them); the
    caller also needs DO or AD in the client's query."""
    if result.bogus or result.error is not None:
        return False
    if isinstance(value, Message | DNSRecord):  # plain resolution: the records relayed
        qtype = query.qtype if isinstance(query, QueryView) else query.q.qtype
        return any(rr.rtype == qtype for rr in value.rr)
    return bool(result.endpoints)


def _set_ad(wire: bytes) -> bytes:
    """The message with the AD (authentic data) flag set."""
    return bytes(wire[:3]) + bytes([wire[3] | 0x20]) + bytes(wire[4:])


def _chained(chain: list[RR], final: DNSRecord | Message | list[RR]) -> DNSRecord:
    """A response whose answer is the CNAME chain followed, then the final records."""
    if isinstance(final, list):
        out = DNSRecord(DNSHeader(qr=1))
        out.rr = list(chain) + list(final)
        return out
    out = final.to_dnslib() if isinstance(final, Message) else final
    out.rr = list(chain) + list(out.rr)
    return out


def _parse_hint(strings: Sequence[bytes]) -> dict[str, str]:
    fields: dict[str, str] = {}
    last = None
    for raw in strings:
        text = bytes(raw).decode("utf-8", "replace")
        key, sep, value = text.partition("=")
        if sep and key in ("summary", "services", "org", "kind"):
            fields[key] = value
            last = key
        elif last == "summary":  # continuation of a summary longer than 255 bytes
            fields["summary"] += text
    return fields


def _endpoints(msg: DNSRecord, zone: str) -> list[Endpoint]:
    glue = {normalise(rr.rname): str(rr.rdata) for rr in msg.ar if rr.rtype == TYPE_A}
    out = []
    for rr in msg.rr:
        if rr.rtype != TYPE_SRV:
            continue
        target = normalise(rr.rdata.target)
        out.append(Endpoint(target, glue.get(target), rr.rdata.port, rr.rdata.priority,
                            rr.rdata.weight, normalise(zone)))
    return out


def _narrow(children: Sequence[str], width: int) -> list[tuple[str, int]]:
    """The best ``width`` children, sharing the width so no level holds more branches."""
    chosen = list(children)[:width]
    return [(c, width // len(chosen) + int(i < width % len(chosen)))
            for i, c in enumerate(chosen)]


def _score_merge(results: dict[str, list[Endpoint]], order: list[str], k: int
                 ) -> list[Endpoint]:
    """The leaves' lists merged by score, best first (ties: walk order, then rank),
    de-duplicated, cut to K (K = 0: all)."""
    items = sorted((-(e.score if e.score is not None else float("-inf")), o, r)
                   for o, z in enumerate(order) for r, e in enumerate(results[z]))
    merged: list[Endpoint] = []
    seen: set[str] = set()
    for _, o, r in items:
        e = results[order[o]][r]
        if e.target not in seen:
            seen.add(e.target)
            merged.append(e)
    return merged if k == 0 else merged[:k]


def _merge(results: dict[str, list[Endpoint]], order: list[str], k: int) -> list[Endpoint]:
    """Round-robin over leaves in beam order, de-duplicated, cut to K (K = 0: all)."""
    merged: list[Endpoint] = []
    seen: set[str] = set()
    lists = [results[z] for z in order]
    for i in range(max((len(x) for x in lists), default=0)):
        for lst in lists:
            if i < len(lst) and lst[i].target not in seen:
                seen.add(lst[i].target)
                merged.append(lst[i])
    return merged if k == 0 else merged[:k]
