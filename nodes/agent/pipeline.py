"""Transport-free agent of the DNS-native discovery schemes: search, then resolve.

``ask`` searches the agent's local mirror of the catalogue (:mod:`nodes.agent.mirror`) for
the top-K tools of the intent, waits the search's modelled compute time, then resolves
every candidate the way its draft's client does (:mod:`nodes.agent.drafts`): rounds of
plain queries, all candidates' questions of a round in parallel, through one unmodified
recursive resolver; the same question is asked once per discovery. A last round asks for
the addresses (A) of targets none of the answers carried. Endpoints come out in the
search's order (SRV-style priority = rank), only for candidates whose records resolved.
Timeouts retry over UDP, a TC reply is retried over TCP, replies are validated (ID,
question, source) as by :class:`~nodes.agent.stub.StubAgent`, whose results these are
(:class:`PipelineResult` adds the rounds and the items the search ranked).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from dnslib import RCODE, DNSRecord

from nodes.agent.drafts import DRAFTS, Answers, Draft, Question
from nodes.agent.mirror import Candidate, Mirror
from nodes.agent.stub import StubResult
from nodes.dns import svcb
from nodes.dns.codec import parse_message
from nodes.dns.ids import message_id
from nodes.dns.message import encode_query, plain_name
from nodes.dns.wire import DEFAULT_EDNS_SIZE, DEFAULT_OPTION_CODE, normalise
from nodes.dns.zone import Address
from nodes.resolver.types import Discovery, Endpoint, Outgoing, Step, Transport
from nodes.rng import copy_rng

TYPE_A = 1
_TYPE_NAMES = {1: "A", 12: "PTR", 16: "TXT", 33: "SRV", 52: "TLSA", svcb.TYPE_SVCB: "SVCB",
               svcb.TYPE_HTTPS: "HTTPS"}


class PipelineResult(StubResult):
    """A pipeline discovery: the stub result, the candidates, the answers so far, the IDs
    of each round's queries and the items the search ranked."""

    def __init__(self, tag: Any, request: Discovery, sent: float) -> None:
        super().__init__(tag, request, sent)
        self.candidates: list[Candidate] = []
        self.answers: dict[Question, DNSRecord | None] = {}
        self.rounds: list[list[int]] = []
        self.stage = 0  # the draft's next round
        self.searched = 0  # items the search ranked
        self.located: list[tuple[Candidate, str, int]] = []


@dataclass
class _Ask:
    result: PipelineResult
    question: Question
    wire: bytes
    attempt: int
    transport: Transport
    deadline: float
    step: Step


class PipelineAgent:
    """An agent of a DNS-native scheme (``draft``, a key of :data:`DRAFTS`) asking one
    recursive resolver, with a local ``mirror`` as its search front end."""

    def __init__(self, resolver: Address, rng: random.Random,
                 option_code: int = DEFAULT_OPTION_CODE, timeout: float = 5.0,
                 attempts: int = 2, edns_size: int = DEFAULT_EDNS_SIZE, name: str = "agent",
                 aaaa: bool = False, draft: str = "dns-aid", mirror: Mirror | None = None
                 ) -> None:
        if draft not in DRAFTS:
            raise ValueError(f"draft {draft!r}: not one of {', '.join(DRAFTS)}")
        if mirror is None:
            raise ValueError("a pipeline agent needs a mirror to search")
        self.resolver = resolver
        self.rng = rng
        self.id_source: random.Random | None = None
        self.option_code = option_code  # unused: the drafts' queries carry no option
        self.timeout = timeout
        self.attempts = attempts
        self.edns_size = edns_size
        self.name = name
        self.aaaa = aaaa
        self.draft_name = draft  # the client by name: its rounds are functions (not pickled)
        self.mirror = mirror
        self._pending: dict[int, _Ask] = {}
        self._starts: list[tuple[float, PipelineResult]] = []  # searches computing
        self._out: list[Outgoing] = []
        self._done: list[StubResult] = []
        self.ignored = 0

    @property
    def draft(self) -> Draft:
        return DRAFTS[self.draft_name]

    def instance(self) -> PipelineAgent:
        """An agent as this one was built (the mirror shared: read-only)."""
        new = type(self)(self.resolver, copy_rng(self.rng), self.option_code, self.timeout,
                         self.attempts, self.edns_size, self.name, self.aaaa,
                         self.draft_name, self.mirror)
        new.id_source = self.id_source
        return new

    def is_pending(self, qid: int) -> bool:
        return qid in self._pending

    # ------------------------------------------------------------------ the node contract

    def ask(self, tag: object, request: Discovery, now: float) -> StubResult:
        result = PipelineResult(tag, request, now)
        result.candidates = self.mirror.search(request.intent, request.service, request.k)
        result.searched = self.mirror.items(request.service)
        self._starts.append((now + self.mirror.seconds(request.service), result))
        return result

    def to_send(self) -> list[Outgoing]:
        out, self._out = self._out, []
        return out

    def pop_done(self) -> list[StubResult]:
        out, self._done = self._done, []
        return out

    def next_timer(self) -> float | None:
        deadlines = [p.deadline for p in self._pending.values()]
        deadlines += [t for t, _ in self._starts]
        return min(deadlines, default=None)

    def on_timer(self, now: float) -> None:
        due = [r for t, r in self._starts if t <= now]
        self._starts = [(t, r) for t, r in self._starts if t > now]
        for result in due:
            self._next_round(result, now)
        for qid in [q for q, p in self._pending.items() if p.deadline <= now]:
            p = self._pending.pop(qid)
            p.step.outcome = "timeout"
            if p.attempt + 1 < self.attempts:
                self._send(p.result, p.question, p.attempt + 1, "udp", now)
            else:
                self._answered(p.result, p.question, None, now)

    def receive(self, message: bytes | bytearray, src: Address, now: float,
                transport: Transport = "udp") -> None:
        """The resolver's answer to one of this agent's queries; anything else is counted
        in :attr:`ignored`."""
        data = bytes(message)
        try:
            msg = parse_message(data, text=True)
        except Exception:
            self.ignored += 1
            return
        p = self._pending.get(msg.header.id)
        if (p is None or not msg.header.qr or src != self.resolver or transport != p.transport
                or len(msg.questions) != 1 or normalise(str(msg.q.qname)) != p.question[0]
                or msg.q.qtype != p.question[1]):
            self.ignored += 1
            return
        del self._pending[msg.header.id]
        p.step.rtt, p.step.bytes_in = now - p.step.sent, len(data)
        p.step.outcome = RCODE[msg.header.rcode] + (" TC" if msg.header.tc else "")
        if msg.header.tc and transport == "udp":
            self._send(p.result, p.question, p.attempt, "tcp", now)
            return
        self._answered(p.result, p.question, msg, now)

    # ------------------------------------------------------------------ the rounds

    def _send(self, result: PipelineResult, question: Question, attempt: int,
              transport: Transport, now: float) -> int:
        ids = self.id_source or self.rng
        qid = message_id(ids)
        while qid in self._pending:
            qid = message_id(ids)
        qname, qtype = question
        wire = encode_query(qid, 0x0100, qname, qtype, [], self.edns_size)  # RD set
        assert wire is not None  # _askable checked the name
        step = Step(qname=qname, qtype=_TYPE_NAMES.get(qtype, str(qtype)),
                    server=self.resolver, transport=transport, sent=now, rtt=None,
                    bytes_out=len(wire), bytes_in=0, outcome="sent", with_intent=False,
                    qid=qid)
        result.steps.append(step)
        result.ids.append(qid)
        if not result.qid:
            result.qid = qid
        self._pending[qid] = _Ask(result, question, wire, attempt, transport,
                                  now + self.timeout, step)
        self._out.append(Outgoing(wire, self.resolver, transport))
        return qid

    def _ask_round(self, result: PipelineResult, questions: list[Question], now: float) -> bool:
        """Send a round's new questions; False when none could be asked (a name from a
        record that is no DNS name is a failed question, never sent)."""
        fresh = [q for q in dict.fromkeys(questions) if q not in result.answers]
        for q in fresh:
            result.answers[q] = None  # asked (or unaskable); an answer replaces it
        fresh = [q for q in fresh if _askable(q[0])]
        if not fresh:
            return False
        result.waiting = len(fresh)
        result.rounds.append([self._send(result, q, 0, "udp", now) for q in fresh])
        return True

    def _answered(self, result: PipelineResult, question: Question, msg: DNSRecord | None,
                  now: float) -> None:
        ok = msg is not None and msg.header.rcode == 0
        result.answers[question] = msg if ok else None
        if msg is not None:
            result.rcode = RCODE[msg.header.rcode]
        result.waiting -= 1
        if result.waiting == 0:
            self._next_round(result, now)

    def _next_round(self, result: PipelineResult, now: float) -> None:
        """Ask the draft's next round (skipping rounds with nothing new to ask), then the
        address round, then finish."""
        rounds = self.draft.rounds
        while result.stage < len(rounds):
            make = rounds[result.stage]
            result.stage += 1
            kept, questions = [], []
            for c in result.candidates:
                asked = make(c, result.answers)
                if asked is not None:
                    kept.append(c)
                    questions += asked
            result.candidates = kept
            if self._ask_round(result, questions, now):
                return
        if result.stage == len(rounds):  # locate the endpoints, then their addresses
            result.stage += 1
            for c in result.candidates:
                where = self.draft.locate(c, result.answers)
                if where is not None:
                    result.located.append((c, *where))
            missing = [(t, TYPE_A) for _, t, _ in result.located
                       if _address(result.answers, t) is None]
            if self._ask_round(result, missing, now):
                return
        self._finish(result, now)

    def _finish(self, result: PipelineResult, now: float) -> None:
        endpoints = []
        for rank, (c, target, port) in enumerate(result.located):
            address = _address(result.answers, target)
            if address is not None:
                endpoints.append(Endpoint(target, address, port, rank, 0, c.domain))
        result.endpoints = endpoints
        result.finished = now
        if not endpoints:
            result.error = ("search found nothing" if not result.rounds
                            else "no candidate resolved")
        # the discovery's rcode: NOERROR with an endpoint, else the last answer's (SERVFAIL
        # when nothing answered: every question timed out)
        result.rcode = "NOERROR" if endpoints else (result.rcode or "SERVFAIL")
        self._done.append(result)


def _askable(name: str) -> bool:
    """Whether the agent's encoder writes ``name`` (letters, digits, ``-``, ``_``; labels of
    1-63 bytes; at most 255 in all): names from records are hostile input."""
    return plain_name(name) is not None


def _address(answers: Answers, target: str) -> str | None:
    """The target's IPv4 address from any answer so far (answer or additional section)."""
    for msg in answers.values():
        if msg is None:
            continue
        for rr in (*msg.rr, *msg.ar):
            if rr.rtype == TYPE_A and normalise(str(rr.rname)) == target:
                return str(rr.rdata)
    return None
