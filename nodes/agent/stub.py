"""Transport-free client agent: sends ToolDNS stub queries to its resolver, reads answers.

An agent knows only its resolver. ``ask(tag, request, now)`` queues one SRV query for the
cursor name of ``request.start`` carrying the intent option; the reply's SRV answers and
the A records in its additional section are the discovered endpoints, best first: ordered
by SRV priority (the rank, lowest first, RFC 2782; equal priorities keep the order they
came in), never by the RRset order, which caches and stock recursors shuffle. Timeouts
retry over UDP, a TC reply is retried over TCP, and replies are validated (ID, question,
source).

With ``style="qname"`` (for stock recursors, which drop the option) the intent goes in the
name instead (:func:`nodes.dns.wire.intent_qname`, no option), the answer is a CNAME chain
ending in SRV records, and targets whose A record did not come with it are asked for in
one more round of parallel A queries, as any client of an unmodified resolver must; with
``aaaa`` the round asks AAAA too (for targets whose AAAA did not come with the answer),
and a target missing only its AAAA is no error (IPv4 suffices; NODATA is normal).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from operator import attrgetter
from typing import Any, Literal

from dnslib import RCODE, DNSHeader, DNSQuestion, DNSRecord
from mypy_extensions import mypyc_attr

from nodes.dns.codec import parse_message
from nodes.dns.ids import message_id
from nodes.dns.message import TYPE_A, TYPE_SRV, Message, derive, encode_query, parse_response
from nodes.dns.wire import (
    DEFAULT_EDNS_SIZE,
    DEFAULT_OPTION_CODE,
    Intent,
    cursor_name,
    intent_qname,
    normalise,
)
from nodes.dns.wire import opt_record as _opt
from nodes.dns.zone import Address
from nodes.resolver.types import Discovery, Endpoint, Outgoing, Step, Transport
from nodes.rng import copy_rng

TYPE_AAAA = 28
_QTYPE_NAMES = {TYPE_SRV: "SRV", TYPE_A: "A", TYPE_AAAA: "AAAA"}
_PRIORITY = attrgetter("priority")


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass
class StubResult:
    """The agent's view of one discovery."""

    tag: Any  # whatever the caller passed to ask (Any, not object: mypyc-compiled dataclasses)
    request: Discovery
    sent: float
    finished: float = 0.0
    endpoints: list[Endpoint] = field(default_factory=list)
    rcode: str = ""
    error: str | None = None
    steps: list[Step] = field(default_factory=list)
    qid: int = 0  # ID of the first attempt (the resolver reports the walk under it)
    ids: list[int] = field(default_factory=list)
    a_ids: list[int] = field(default_factory=list)  # IDs of the A round (qname style)
    waiting: int = 0  # A queries of that round still unanswered

    # written out, as nodes.resolver.types' are: a dataclass's own __init__ runs interpreted
    def __init__(self, tag: Any, request: Discovery, sent: float, finished: float = 0.0,
                 endpoints: list[Endpoint] | None = None, rcode: str = "",
                 error: str | None = None, steps: list[Step] | None = None, qid: int = 0,
                 ids: list[int] | None = None, a_ids: list[int] | None = None,
                 waiting: int = 0) -> None:
        self.tag = tag
        self.request = request
        self.sent = sent
        self.finished = finished
        self.endpoints = [] if endpoints is None else endpoints
        self.rcode = rcode
        self.error = error
        self.steps = [] if steps is None else steps
        self.qid = qid
        self.ids = [] if ids is None else ids
        self.a_ids = [] if a_ids is None else a_ids
        self.waiting = waiting

    @property
    def latency(self) -> float:
        return self.finished - self.sent


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass
class _Pending:
    result: StubResult
    wire: bytes
    qname: str
    attempt: int
    transport: Transport
    deadline: float
    step: Step
    qtype: int = TYPE_SRV

    # written out, as nodes.resolver.types' are: a dataclass's own __init__ runs interpreted
    def __init__(self, result: StubResult, wire: bytes, qname: str, attempt: int,
                 transport: Transport, deadline: float, step: Step,
                 qtype: int = TYPE_SRV) -> None:
        self.result = result
        self.wire = wire
        self.qname = qname
        self.attempt = attempt
        self.transport = transport
        self.deadline = deadline
        self.step = step
        self.qtype = qtype


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class StubAgent:
    """A DNS stub client speaking the ToolDNS option to one recursive resolver."""

    def __init__(
        self,
        resolver: Address,
        rng: random.Random,
        option_code: int = DEFAULT_OPTION_CODE,
        timeout: float = 5.0,
        attempts: int = 2,
        edns_size: int = DEFAULT_EDNS_SIZE,
        name: str = "agent",
        style: Literal["option", "qname"] = "option",
        aaaa: bool = False,
    ) -> None:
        self.resolver = resolver
        self.rng = rng
        # query IDs: from ``rng`` unless the live adapters set an OS-random source here
        self.id_source: random.Random | None = None
        self.option_code = option_code
        self.timeout = timeout
        self.attempts = attempts
        self.edns_size = edns_size
        self.name = name
        self.style = style  # the intent in the EDNS option, or in the query name
        self.aaaa = aaaa  # qname style: ask the targets' AAAA beside A
        self._pending: dict[int, _Pending] = {}
        self._out: list[Outgoing] = []
        self._done: list[StubResult] = []
        self.ignored = 0

    def instance(self) -> StubAgent:
        """An agent as this one was built (a generator in its state), for one run."""
        new = type(self)(self.resolver, copy_rng(self.rng), self.option_code, self.timeout,
                         self.attempts, self.edns_size, self.name, self.style, self.aaaa)
        new.id_source = self.id_source
        return new

    def is_pending(self, qid: int) -> bool:
        """Whether a query with this ID still awaits its answer."""
        return qid in self._pending

    def ask(self, tag: object, request: Discovery, now: float) -> StubResult:
        result = StubResult(tag=tag, request=request, sent=now)
        if self.style == "qname":
            try:
                qname = intent_qname(request.intent, request.k, request.service,
                                     request.start, request.proto)
            except ValueError as exc:
                self._finish(result, now, "", str(exc))
                return result
        else:
            qname = cursor_name(request.service, request.start, request.proto)
        self._send(result, qname, 0, "udp", now)
        result.qid = result.ids[0]
        return result

    def _send(self, result: StubResult, qname: str, attempt: int, transport: Transport,
              now: float, qtype: int = TYPE_SRV) -> None:
        ids = self.id_source or self.rng
        qid = message_id(ids)
        while qid in self._pending:
            qid = message_id(ids)
        with_intent = self.style == "option" and qtype == TYPE_SRV
        request = result.request  # its beam, when set, rides in the option (version 1)
        intent = Intent(request.intent, k=request.k, beam=request.beam) if with_intent else None
        options = [(self.option_code, intent.encode())] if intent is not None else []
        wire = encode_query(qid, 0x0100, qname, qtype, options, self.edns_size)  # RD set
        if wire is None:  # a name the struct codec does not write: dnslib does
            msg = DNSRecord(DNSHeader(id=qid, rd=1))
            msg.add_question(DNSQuestion(qname, qtype))
            msg.add_ar(_opt(intent, self.option_code, self.edns_size))
            wire = bytes(msg.pack())
        step = Step(qname=qname, qtype=_QTYPE_NAMES[qtype],
                    server=self.resolver, transport=transport, sent=now, rtt=None,
                    bytes_out=len(wire), bytes_in=0, outcome="sent", with_intent=with_intent,
                    qid=qid)
        result.steps.append(step)
        result.ids.append(qid)
        if qtype != TYPE_SRV:
            result.a_ids.append(qid)
        self._pending[qid] = _Pending(result, wire, qname, attempt, transport,
                                      now + self.timeout, step, qtype)
        self._out.append(Outgoing(wire, self.resolver, transport))

    def to_send(self) -> list[Outgoing]:
        out, self._out = self._out, []
        return out

    def pop_done(self) -> list[StubResult]:
        out, self._done = self._done, []
        return out

    def next_timer(self) -> float | None:
        return min((p.deadline for p in self._pending.values()), default=None)

    def on_timer(self, now: float) -> None:
        for qid in [q for q, p in self._pending.items() if p.deadline <= now]:
            p = self._pending.pop(qid)
            p.step.outcome = "timeout"
            if p.attempt + 1 < self.attempts:
                self._send(p.result, p.qname, p.attempt + 1, "udp", now, p.qtype)
            elif p.qtype == TYPE_A:  # the tool stays without an address
                self._address_done(p.result, now, "timeout")
            elif p.qtype == TYPE_AAAA:  # IPv4 is enough
                self._address_done(p.result, now, None)
            else:
                self._finish(p.result, now, "SERVFAIL", "timeout")

    def receive(self, message: bytes | bytearray, src: Address, now: float,
                transport: Transport = "udp") -> None:
        """The resolver's answer to one of this agent's queries (a ``bytearray`` is copied
        first); anything else is counted in :attr:`ignored`."""
        data = message if isinstance(message, bytes) else bytes(message)
        msg: DNSRecord | Message | None = parse_response(data)  # fast path; else dnslib
        if msg is None:
            try:
                msg = parse_message(data, text=True)  # names checked (nodes.dns.codec)
            except Exception:
                self.ignored += 1
                return
        p = self._pending.get(msg.header.id)
        if (p is None or not msg.header.qr or src != self.resolver or transport != p.transport
                or len(msg.questions) != 1 or normalise(msg.q.qname) != p.qname):
            self.ignored += 1
            return
        del self._pending[msg.header.id]
        p.step.rtt, p.step.bytes_in = now - p.step.sent, len(data)
        p.step.outcome = RCODE[msg.header.rcode] + (" TC" if msg.header.tc else "")
        if msg.header.tc and transport == "udp":
            self._send(p.result, p.qname, p.attempt, "tcp", now, p.qtype)
            return
        if p.qtype in (TYPE_A, TYPE_AAAA):
            self._on_address(p, msg, now)
            return
        aaaa = self.aaaa
        p.result.endpoints = list(derive(msg, ("stub endpoints", aaaa),
                                         lambda: _endpoints(msg, aaaa)))
        p.result.rcode = RCODE[msg.header.rcode]
        missing = list(dict.fromkeys(e.target for e in p.result.endpoints if e.address is None))
        missing6 = (list(dict.fromkeys(e.target for e in p.result.endpoints
                                       if e.address6 is None))
                    if self.aaaa and self.style == "qname" else [])
        if self.style == "qname" and (missing or missing6):  # one parallel round
            p.result.waiting = len(missing) + len(missing6)
            for target in missing:
                self._send(p.result, target, 0, "udp", now, TYPE_A)
            for target in missing6:
                self._send(p.result, target, 0, "udp", now, TYPE_AAAA)
            return
        self._finish(p.result, now, p.result.rcode, None)

    def _on_address(self, p: _Pending, msg: DNSRecord | Message, now: float) -> None:
        """An A or AAAA answer of the address round: fill in the target's endpoints. A
        missing A is an error; a missing AAAA (NODATA) leaves the target IPv4-only."""
        a = next((str(rr.rdata) for rr in msg.rr if rr.rtype == p.qtype
                  and normalise(rr.rname) == p.qname), None)
        if a is not None:
            v4 = p.qtype == TYPE_A
            p.result.endpoints = [
                (replace(e, address=a) if v4 else replace(e, address6=a))
                if e.target == p.qname else e for e in p.result.endpoints]
        missing = a is None and p.qtype == TYPE_A
        self._address_done(p.result, now, f"{p.qname}: no address" if missing else None)

    def _address_done(self, result: StubResult, now: float, error: str | None) -> None:
        result.waiting -= 1
        if error and result.error is None:
            result.error = error
        if result.waiting == 0:
            self._finish(result, now, result.rcode, result.error)

    def _finish(self, result: StubResult, now: float, rcode: str, error: str | None) -> None:
        result.finished, result.rcode, result.error = now, rcode, error
        self._done.append(result)


def _endpoints(msg: DNSRecord | Message, aaaa: bool) -> tuple[Endpoint, ...]:
    """The SRV answers of a reply with the A (and, with ``aaaa``, AAAA) records of their
    targets, by priority (the rank, whatever order the RRset came in)."""
    addresses = {normalise(rr.rname): str(rr.rdata) for rr in msg.ar if rr.rtype == TYPE_A}
    v6 = ({normalise(rr.rname): str(rr.rdata) for rr in msg.ar if rr.rtype == TYPE_AAAA}
          if aaaa else {})
    endpoints = [
        Endpoint(normalise(rr.rdata.target), addresses.get(normalise(rr.rdata.target)),
                 rr.rdata.port, rr.rdata.priority, rr.rdata.weight,
                 normalise(rr.rdata.target).split(".", 1)[1],
                 address6=v6.get(normalise(rr.rdata.target)))
        for rr in msg.rr if rr.rtype == TYPE_SRV
    ]
    endpoints.sort(key=_PRIORITY)
    return tuple(endpoints)
