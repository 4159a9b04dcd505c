"""The recursive resolver's sans-IO face: :class:`RecursiveResolver` (Algorithm 1 of seed
000, with caches), a ToolDNS-aware recursive resolver that also answers stub clients.

Sans-IO contract (as in aioquic / dnspython's ``_Resolution``): the engine feeds messages
with ``receive(data, src, now, transport)``, drains ``to_send()``, and fires ``on_timer(now)``
at ``next_timer()``. Time is always passed in; randomness comes from the ``rng`` given.

Each discovery is a task: a generator that yields rounds of :class:`Ask` (queries sent in
parallel) and receives one :class:`Reply` per ask (:data:`nodes.resolver.types.Rounds`).
The tasks are the parts — :mod:`~nodes.resolver.walk` (Algorithm 1, K = 0 warming),
:mod:`~nodes.resolver.iterate` (stock resolution, CNAME chains), with
:mod:`~nodes.resolver.validate` (DNSSEC) — and see the resolver only through a
:class:`~nodes.resolver.context.Context`. This module drives them and does the DNS
plumbing: random query IDs, server order by smoothed RTT (:mod:`~nodes.resolver.infra`),
timeouts, failover across a zone's NS replicas, TC → TCP retry, and validation of every
response (ID, question, source address and port); stub queries are read and answered by
:mod:`~nodes.resolver.clients`. What is cached: :mod:`nodes.resolver.caches`.
"""

from __future__ import annotations

import heapq
import random
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from dnslib import QTYPE, RCODE, DNSHeader, DNSQuestion, DNSRecord, EDNSOption
from mypy_extensions import mypyc_attr

from nodes.dns.codec import QueryView, parse_message, parse_query
from nodes.dns.ids import message_id
from nodes.dns.message import (
    RC_FORMERR,
    RC_NOTIMP,
    RC_REFUSED,
    RC_SERVFAIL,
    TYPE_SRV,
    Message,
    encode_query,
    parse_response,
)
from nodes.dns.wire import (
    Intent,
    IntentError,
    encode_embedding,
    get_intent,
    name_fits,
    normalise,
    opt_record,
    parse_tool_name,
)
from nodes.dns.zone import Address
from nodes.resolver import clients, iterate, walk
from nodes.resolver.caches import Caches
from nodes.resolver.config import ResolverConfig
from nodes.resolver.context import Context
from nodes.resolver.infra import Infra
from nodes.resolver.minimise import PROJECT
from nodes.resolver.types import (
    Ask,
    Discovery,
    DiscoveryResult,
    Outgoing,
    Reply,
    Rounds,
    Step,
    Transport,
    rcode_text,
)
from nodes.rng import copy_rng
from nodes.scoring import BM25Scorer, Embedder, Scorer

ClientQuery = tuple[DNSRecord | QueryView, Address, Transport]  # the query, from, over
QUERY_MEMO = 16384  # query bodies kept (first in, first out) …
QUERY_MEMO_MAX_BYTES = 512  # … of at most this many bytes each
_QTYPE_TEXT = {code: QTYPE[code] for code in (1, 2, 5, 6, 16, 28, 33, 43, 46, 48, 255)}
_SENT = {"udp": "sent_udp", "tcp": "sent_tcp", "tls": "sent_tls"}
_RCODE_TEXT = {code: rcode_text(code) for code in range(16)}


#: a question as a stock recursor coalesces it: name (any case), type, the zone's servers
_AskKey = tuple[str, int, frozenset[Address]]


def _ask_key(ask: Ask) -> _AskKey:
    return (ask.qname.lower(), ask.qtype, frozenset(ask.servers))


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(slots=True)
class _Task:
    gen: Rounds[object]
    result: DiscoveryResult | None
    asks: list[Ask] = field(default_factory=list)
    replies: list[Reply | None] = field(default_factory=list)
    # stub query to answer when done: dnslib's parse, or the fast view with its bytes
    client: ClientQuery | None = None
    client_wire: bytes = b""
    value: Any = None  # the generator's return value (Any, not object: mypyc dataclasses)
    waiting: int = 0  # asks of the round still without a reply

    # written out, as nodes.resolver.types' are: a dataclass's own __init__ runs interpreted
    def __init__(self, gen: Rounds[object], result: DiscoveryResult | None,
                 asks: list[Ask] | None = None, replies: list[Reply | None] | None = None,
                 client: ClientQuery | None = None, client_wire: bytes = b"",
                 value: Any = None, waiting: int = 0) -> None:
        self.gen = gen
        self.result = result
        self.asks = [] if asks is None else asks
        self.replies = [] if replies is None else replies
        self.client = client
        self.client_wire = client_wire
        self.value = value
        self.waiting = waiting


def _complete(replies: list[Reply | None]) -> TypeGuard[list[Reply]]:
    """Whether every ask of a round has its reply."""
    return all(r is not None for r in replies)


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(slots=True)
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

    # written out, as nodes.resolver.types' are: a dataclass's own __init__ runs interpreted
    def __init__(self, task: _Task, index: int, qid: int, wire: bytes, order: list[Address],
                 attempt: int, server: Address, transport: Transport, sent: float,
                 deadline: float, step: Step | None) -> None:
        self.task = task
        self.index = index
        self.qid = qid
        self.wire = wire
        self.order = order
        self.attempt = attempt
        self.server = server
        self.transport = transport
        self.sent = sent
        self.deadline = deadline
        self.step = step


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
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
        fallback = self.config.upstream_fallback
        # where a query to a server whose DNS over TLS failed goes (None: strict, TLS only)
        self._fallback: Transport | None = None if fallback == "none" else fallback
        self.rng = rng
        # query IDs: from ``rng`` (seeded) in simulation, for determinism; the live adapters
        # set an OS-random source (RFC 5452: IDs an off-path attacker cannot predict)
        self.id_source: random.Random | None = None
        self.scorer = scorer or BM25Scorer()
        self._embedder: Embedder | None = None
        if self.config.send_embedding:
            if not isinstance(self.scorer, Embedder):
                raise ValueError("send_embedding needs a dense scorer (it embeds the intent)")
            self._embedder = self.scorer
        self._embeddings: dict[str, bytes] = {}  # intent text -> option data (bounded)
        self.name = name
        self.root_hints = tuple((a, self.config.dns_port) for a in root_hints)
        self.stats: Counter[str] = Counter()
        self.infra = Infra(self.config, rng)
        self.caches = Caches(self.config, self.root_hints, self.scorer, self.stats)
        self._ctx = Context(self.config, self.caches, self.stats)
        self._pending: dict[int, _Pending] = {}
        # (deadline, qid) of every query sent: a min-heap for next_timer; at most one
        # entry per query still in flight or sent within the last timeout, compacted
        self._deadlines: list[tuple[float, int]] = []
        # a query's bytes after the ID, by qname, qtype and intent: they depend on nothing
        # else (the config is fixed), and a walk asks the same few names again and again
        # (an OrderedDict: a plain dict's first key, after many deletions at the front, is
        # found by a scan past the deleted slots)
        self._bodies: OrderedDict[tuple[str | int, ...], bytes] = OrderedDict()
        self._out: list[Outgoing] = []
        self._results: list[DiscoveryResult] = []
        self._active_clients = 0
        # as a stock recursor (resolver_model): a question already asked of a zone's
        # servers and not yet answered is not asked again; the other walks wanting it
        # wait for that answer (the binaries do: Q12 in benchmarks/RESULTS.md)
        self._coalesce = self.config.resolver_model != PROJECT
        # each question in flight: the walks waiting for it besides the one that asked
        self._inflight: dict[_AskKey, list[tuple[_Task, int]]] = {}

    def instance(self) -> RecursiveResolver:
        """A resolver as this one was built (same root hints, configuration, scorer and
        name; a generator in its state), for one run: this one is left as it is."""
        new = RecursiveResolver([a for a, _ in self.root_hints], copy_rng(self.rng),
                                self.config, scorer=self.scorer, name=self.name)
        new.id_source = self.id_source
        return new

    # ------------------------------------------------------------------ public API

    def discover(self, request: Discovery, now: float) -> DiscoveryResult:
        """Start a discovery; its result (returned, filled in as the walk goes) appears in
        :meth:`pop_results` when finished."""
        self.caches.now = now
        result = DiscoveryResult(request=request, started=now)
        self._start(_Task(gen=walk.discover(self._ctx, request, result), result=result), now)
        return result

    def warm(self, service: str, now: float, proto: str = "tcp", start: str = "tools."
             ) -> DiscoveryResult:
        """K = 0 cache warming: fetch every delegation level below ``start`` for ``service``."""
        self.caches.now = now
        request = Discovery(intent="", service=service, proto=proto, k=0, start=start)
        result = DiscoveryResult(request=request, started=now)
        self._start(_Task(gen=walk.warm(self._ctx, request, result), result=result), now)
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
        """The earliest deadline of a pending query (heap entries of answered queries are
        dropped as they surface)."""
        heap, pending = self._deadlines, self._pending
        while heap:
            deadline, qid = heap[0]
            p = pending.get(qid)
            if p is not None and p.deadline == deadline:
                return deadline
            heapq.heappop(heap)
        return None

    def on_timer(self, now: float) -> None:
        self.caches.now = now
        for qid in [q for q, p in self._pending.items() if p.deadline <= now]:
            pending = self._pending.pop(qid, None)
            if pending is None:
                continue
            self.stats["timeouts"] += 1
            if pending.step is not None:
                pending.step.outcome = "timeout"
            self.infra.timed_out(pending.server)
            self._retry(pending, now, "timeout")

    def upstream_lost(self, server: Address, transport: Transport, now: float,
                      refused: bool) -> None:
        """The engine lost ``server`` over ``transport``: a connection to it could not be
        opened (``refused``: reset, refused, or the handshake timed out) or it closed with
        queries on it. Those queries are retried at once, each on its zone's next server
        (the one that failed ranks last: its SRTT doubles); with ``upstream_fallback`` a
        server whose TLS was refused is asked in clear text for a while."""
        self.caches.now = now
        if refused:
            self.stats["upstream_unreachable"] += 1
            self.infra.timed_out(server)
            if self._fallback is not None and transport == "tls":
                self.infra.tls_failed(server, now)
        lost = [p for p in self._pending.values()
                if p.server == server and p.transport == transport]
        for pending in lost:
            del self._pending[pending.qid]
            self.stats["upstream_lost"] += 1
            if pending.step is not None:
                pending.step.outcome = "unreachable"
            self._retry(pending, now, "unreachable")

    def receive(self, message: bytes | bytearray, src: Address, now: float,
                transport: Transport = "udp") -> None:
        """A response from upstream, or a query from a stub client (a ``bytearray``, as
        dnslib packs, is copied first)."""
        data = message if isinstance(message, bytes) else bytes(message)
        self.caches.now = now
        msg: DNSRecord | Message | None = parse_response(data)  # fast path; else dnslib
        if msg is None and len(data) > 2 and not data[2] & 0x80:  # a stub client's query
            view = parse_query(data)
            if view is not None and self._on_client_view(view, data, src, now, transport):
                return
        if msg is None:
            try:
                msg = parse_message(data, text=True)  # names checked (nodes.dns.codec)
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
        task.asks, task.replies, task.waiting = asks, [None] * len(asks), len(asks)
        unsendable = []  # names a hostile or odd referral made too long for the wire
        for i, ask in enumerate(asks):
            if len(ask.qname) > 63 and not name_fits(ask.qname):  # (short names always fit)
                unsendable.append(i)
                continue
            if self._coalesce and self._joined(task, i, ask):
                continue
            self._send(task, i, self.infra.order(ask.servers), 0, self._upstream, now)
        for i in unsendable:  # answered at once, after the others left (the last may advance)
            self.stats["unsendable_name"] += 1
            self._deliver(task, i, Reply(None, "name too long for the wire"), now)

    def _send(
        self, task: _Task, index: int, order: list[Address], attempt: int, transport: Transport,
        now: float,
    ) -> None:
        ask = task.asks[index]
        pending = self._pending
        ids = self.id_source or self.rng
        qid = message_id(ids)
        while qid in pending:  # an ID not in use by a pending query
            qid = message_id(ids)
        intent = ask.intent  # the key holds its fields (hashed and compared in C)
        key = ((ask.qname, ask.qtype) if intent is None
               else (ask.qname, ask.qtype, intent.text, intent.k, intent.version,
                     intent.beam or 0))
        body = self._bodies.get(key)
        if body is None:
            body = self._query(0, ask)[2:]
            if len(body) <= QUERY_MEMO_MAX_BYTES:
                if len(self._bodies) >= QUERY_MEMO:
                    self._bodies.popitem(last=False)
                self._bodies[key] = body
        wire = qid.to_bytes(2, "big") + body
        server = order[attempt % len(order)]
        if (transport == "tls" and self._fallback is not None
                and self.infra.without_tls(server, now)):
            transport = self._fallback
        step = Step(ask.qname, _QTYPE_TEXT.get(ask.qtype) or QTYPE[ask.qtype], server,
                    transport, now, None, len(wire), 0, "sent", ask.intent is not None, qid)
        if task.result is not None:
            task.result.steps.append(step)
        deadline = now + self.config.timeout
        pending[qid] = _Pending(task, index, qid, wire, order, attempt, server, transport,
                                now, deadline, step)
        heap = self._deadlines
        if len(heap) > 4 * len(pending) + 64:  # mostly answered queries: rebuild
            heap[:] = [(p.deadline, q) for q, p in pending.items()]
            heapq.heapify(heap)
        else:
            heapq.heappush(heap, (deadline, qid))
        self.stats[_SENT[transport]] += 1
        self._out.append(Outgoing(wire, server, transport, False,
                                  step if transport == "tls" else None))

    def _query(self, qid: int, ask: Ask) -> bytes:
        """The query's bytes: EDNS with the intent (and the scores, embedding options), DO
        when validating. :meth:`_send` keeps them by ask (all but the ID)."""
        config = self.config
        options = [] if ask.intent is None else [(config.option_code, ask.intent.encode())]
        if ask.intent is not None and config.wants_scores:
            options.append((config.scores_code, b""))
        if ask.intent is not None and config.send_embedding:
            options.append((config.embedding_code, self._embedding(ask.intent.text)))
        opt_ttl = 0x8000 if config.dnssec else 0  # DO: servers add RRSIG, DS, DNSKEY
        wire = encode_query(qid, 0, ask.qname, ask.qtype, options, config.edns_size, opt_ttl)
        if wire is None:  # a name the struct codec does not write: dnslib does
            query = DNSRecord(DNSHeader(id=qid, qr=0, rd=0))
            query.add_question(DNSQuestion(ask.qname, ask.qtype))
            opt = opt_record(None, config.option_code, config.edns_size)
            opt.rdata.extend(EDNSOption(code, data) for code, data in options)
            opt.ttl |= opt_ttl
            query.add_ar(opt)
            wire = bytes(query.pack())  # dnslib packs a bytearray
        return wire

    def _embedding(self, text: str) -> bytes:
        """The embedding option for an intent: computed once per text (a few kept)."""
        data = self._embeddings.get(text)
        if data is None:
            embedder = self._embedder
            assert embedder is not None  # send_embedding: checked in __init__
            data = encode_embedding(embedder.model, embedder.encoder([text])[0])
            if len(self._embeddings) >= 256:
                self._embeddings.pop(next(iter(self._embeddings)))
            self._embeddings[text] = data
        return data

    def _retry(self, pending: _Pending, now: float, why: str) -> None:
        if pending.attempt + 1 < self.config.max_attempts:
            self.stats["retries"] += 1
            self._send(pending.task, pending.index, pending.order, pending.attempt + 1,
                       self._upstream, now)
        else:
            self._deliver(pending.task, pending.index, Reply(None, why), now)

    def _joined(self, task: _Task, index: int, ask: Ask) -> bool:
        """Whether ask ``index`` of ``task`` waits for the same question in flight (it is
        then answered with that answer); else it leads its question from now on."""
        waiting = self._inflight.get(_ask_key(ask))
        if waiting is not None:
            waiting.append((task, index))
            self.stats["coalesced"] += 1
            return True
        self._inflight[_ask_key(ask)] = []
        return False

    def _deliver(self, task: _Task, index: int, reply: Reply, now: float) -> None:
        """The reply to a question this task asked (or could not send): with coalescing,
        the walks that waited for the same question get it too."""
        waiting = self._inflight.pop(_ask_key(task.asks[index]), None) if self._coalesce \
            else None
        self._answer(task, index, reply, now)
        for other, i in waiting or ():
            self._answer(other, i, reply, now)

    def _answer(self, task: _Task, index: int, reply: Reply, now: float) -> None:
        task.replies[index] = reply
        task.waiting -= 1  # replies still missing (each ask is answered once)
        if task.waiting <= 0 and _complete(task.replies):
            self._advance(task, list(task.replies), now)

    def _on_response(
        self, msg: DNSRecord | Message, size: int, src: Address, now: float,
        transport: Transport, data: bytes = b"",
    ) -> None:
        header = msg.header
        pending = self._pending.get(header.id)
        if pending is None or pending.server != src or pending.transport != transport:
            self.stats["unexpected_response"] += 1
            return
        ask = pending.task.asks[pending.index]
        questions = msg.questions
        q = questions[0] if len(questions) == 1 else None
        if (q is None or q.qtype != ask.qtype or q.qclass != 1 or header.opcode
                or (q.qname != ask.qname and normalise(q.qname) != normalise(ask.qname))):
            self.stats["mismatched_question"] += 1  # keep waiting for the genuine answer
            return
        del self._pending[header.id]
        rtt = now - pending.sent
        self.infra.measured(src, rtt)
        step = pending.step
        tc = header.tc
        if step is not None:
            step.rtt, step.bytes_in = rtt, size
            step.outcome = (_RCODE_TEXT.get(header.rcode) or rcode_text(header.rcode)
                            ) + (" TC" if tc else "")
        if tc and transport == "udp":
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

    def _malformed(self, data: bytes, src: Address, transport: Transport) -> None:
        self.stats["malformed"] += 1
        reply = clients.malformed_reply(data)
        if reply is not None:
            self._out.append(Outgoing(reply, src, transport, reply=True))

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
            rcode = RC_FORMERR if msg.header.opcode == 0 else RC_NOTIMP
            self._out.append(Outgoing(clients.error_reply(msg, rcode), src, transport,
                                      reply=True))
            return
        try:
            intent = get_intent(msg, self.config.option_code)
        except IntentError:
            self.stats["client_formerr"] += 1
            self._out.append(Outgoing(clients.error_reply(msg, RC_FORMERR), src, transport,
                                      reply=True))
            return
        q = msg.q
        self._start_client(intent, normalise(q.qname), q.qtype, src, msg.header.id,
                           (msg, src, transport), b"", now)

    def _on_client_view(self, view: QueryView, data: bytes, src: Address, now: float,
                        transport: Transport) -> bool:
        """:meth:`_on_client_query` for the common shape (``nodes.dns.codec.parse_query``):
        False, having done nothing, for what it leaves to dnslib (another opcode, a bad
        intent option)."""
        try:
            intent = clients.view_intent(view, self.config.option_code)
        except clients.Unread:
            return False
        self.stats["client_queries"] += 1
        self._start_client(intent, view.qname, view.qtype, src, view.id,
                           (view, src, transport), data, now)
        return True

    def _start_client(self, intent: Intent | None, qname: str, qtype: int, src: Address,
                      qid: int, client: ClientQuery, wire: bytes, now: float) -> None:
        """A stub's query (``qname`` normalised): a ToolDNS walk for an intent on a cursor
        name (aware mode), else plain resolution with the option stripped or forwarded."""
        if self._active_clients >= self.config.max_clients:
            self.stats["client_dropped_overload"] += 1
            return
        self._active_clients += 1
        tq = parse_tool_name(qname)
        gen: Rounds[object]
        if (self.config.mode == "aware" and intent is not None and tq is not None and tq.cursor
                and qtype == TYPE_SRV):
            beam = intent.beam  # the client's beam (intent option version 1), bounded
            if beam is not None and beam > self.config.max_client_beam:
                self.stats["client_beam_capped"] += 1
                beam = self.config.max_client_beam
            request = Discovery(intent=intent.text, service=tq.service, proto=tq.proto,
                                k=intent.k, start=tq.zone, beam=beam)
            result = DiscoveryResult(request=request, started=now, client=(src, qid))
            gen = walk.discover(self._ctx, request, result)
        else:
            upstream = None if self.config.mode == "strip" else intent
            result = DiscoveryResult(request=Discovery(intent=intent.text if intent else "",
                                                       start=qname), started=now,
                                     client=(src, qid))
            gen = iterate.plain(self._ctx, qname, qtype, upstream, result)
        self._start(_Task(gen=gen, result=result, client=client, client_wire=wire), now)

    def _answer_client(self, task: _Task, now: float) -> None:
        assert task.client is not None and task.result is not None
        query, src, transport = task.client
        data = clients.answer(self.config, query, task.client_wire, task.value, task.result,
                              transport)
        self._out.append(Outgoing(data, src, transport, reply=True))
