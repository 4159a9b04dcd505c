"""The data the resolver's parts share: requests, results, exchanges, asks and replies.

Compiled by mypyc (``sim.compiled.HOT``), these are native classes. The ones made on every
message write their ``__init__`` out: a dataclass's generated ``__init__`` runs interpreted
even in a compiled module, about five times slower than a compiled one (HISTORY.md §31).
The dataclass still makes ``__eq__``, ``__repr__``, ``__hash__`` and ``replace`` from the
fields, so a field added must be added to the ``__init__`` too (``tests/nodes/resolver/
test_types.py`` checks every one). A frozen one sets its fields with ``object.__setattr__``
and pickles by its fields (``__reduce__``): compiled, a frozen class is not restored field
by field.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Literal, TypeAlias, TypeVar

from dnslib import RCODE, DNSRecord
from mypy_extensions import mypyc_attr

from nodes.dns.message import Message
from nodes.dns.wire import Intent
from nodes.dns.zone import Address

# "tls": DNS over TLS (RFC 7858) to the authoritative servers (ResolverConfig.upstream);
# the engines carry it on persistent connections and report them on the Step
Transport = Literal["udp", "tcp", "tls"]


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True, slots=True)
class Discovery:
    """A discovery request: intent, service, K, and the zone to start from (trust)."""

    intent: str
    service: str = "mcp"
    proto: str = "tcp"
    k: int = 1
    start: str = "tools."
    beam: int | None = None

    def __init__(self, intent: str, service: str = "mcp", proto: str = "tcp", k: int = 1,
                 start: str = "tools.", beam: int | None = None) -> None:
        object.__setattr__(self, "intent", intent)
        object.__setattr__(self, "service", service)
        object.__setattr__(self, "proto", proto)
        object.__setattr__(self, "k", k)
        object.__setattr__(self, "start", start)
        object.__setattr__(self, "beam", beam)

    def __reduce__(self) -> tuple[type[Discovery], tuple[str, str, str, int, str, int | None]]:
        return (Discovery, (self.intent, self.service, self.proto, self.k, self.start,
                            self.beam))


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
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

    def __init__(self, target: str, address: str | None, port: int, priority: int,
                 weight: int, zone: str, score: float | None = None,
                 address6: str | None = None) -> None:
        object.__setattr__(self, "target", target)
        object.__setattr__(self, "address", address)
        object.__setattr__(self, "port", port)
        object.__setattr__(self, "priority", priority)
        object.__setattr__(self, "weight", weight)
        object.__setattr__(self, "zone", zone)
        object.__setattr__(self, "score", score)
        object.__setattr__(self, "address6", address6)

    def __reduce__(self) -> tuple[type[Endpoint], tuple[object, ...]]:
        return (Endpoint, (self.target, self.address, self.port, self.priority, self.weight,
                           self.zone, self.score, self.address6))


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
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

    def __init__(self, qname: str, qtype: str, server: Address, transport: str, sent: float,
                 rtt: float | None, bytes_out: int, bytes_in: int, outcome: str,
                 with_intent: bool, qid: int = 0, conn: int = 0, opened: bool = False) -> None:
        self.qname = qname
        self.qtype = qtype
        self.server = server
        self.transport = transport
        self.sent = sent
        self.rtt = rtt
        self.bytes_out = bytes_out
        self.bytes_in = bytes_in
        self.outcome = outcome
        self.with_intent = with_intent
        self.qid = qid
        self.conn = conn
        self.opened = opened


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
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

    def __init__(self, request: Discovery, started: float, finished: float = 0.0,
                 endpoints: list[Endpoint] | None = None, steps: list[Step] | None = None,
                 rounds: int = 0, rcode: str = "NOERROR", error: str | None = None,
                 cache: Counter[str] | None = None, leaves: list[str] | None = None,
                 client: tuple[Address, int] | None = None, rejected: int = 0,
                 bogus: int = 0) -> None:
        self.request = request
        self.started = started
        self.finished = finished
        self.endpoints = [] if endpoints is None else endpoints
        self.steps = [] if steps is None else steps
        self.rounds = rounds
        self.rcode = rcode
        self.error = error
        self.cache = Counter() if cache is None else cache
        self.leaves = [] if leaves is None else leaves
        self.client = client
        self.rejected = rejected
        self.bogus = bogus

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


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True, slots=True)
class Ask:
    """A query a task wants answered by one of ``servers``."""

    qname: str
    qtype: int
    servers: tuple[Address, ...]
    intent: Intent | None

    def __init__(self, qname: str, qtype: int, servers: tuple[Address, ...],
                 intent: Intent | None) -> None:
        object.__setattr__(self, "qname", qname)
        object.__setattr__(self, "qtype", qtype)
        object.__setattr__(self, "servers", servers)
        object.__setattr__(self, "intent", intent)

    def __reduce__(self) -> tuple[type[Ask], tuple[str, int, tuple[Address, ...],
                                                   Intent | None]]:
        return (Ask, (self.qname, self.qtype, self.servers, self.intent))


# a response as parsed: nodes.dns.message's fast parse (the common shapes) or dnslib's
Answer: TypeAlias = DNSRecord | Message


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True, slots=True)
class Reply:
    """The answer to one :class:`Ask`: a response, or why there is none."""

    msg: Answer | None
    error: str | None = None
    wire: bytes = b""  # the response bytes (kept when validating DNSSEC)

    def __init__(self, msg: Answer | None, error: str | None = None,
                 wire: bytes = b"") -> None:
        object.__setattr__(self, "msg", msg)
        object.__setattr__(self, "error", error)
        object.__setattr__(self, "wire", wire)

    def __reduce__(self) -> tuple[type[Reply], tuple[Answer | None, str | None, bytes]]:
        return (Reply, (self.msg, self.error, self.wire))


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True, slots=True)
class Outgoing:
    """A message for the engine to send."""

    data: bytes
    dst: Address
    transport: Transport
    reply: bool = False  # an answer to a stub client (sent from the listening socket)
    step: Step | None = None  # transport "tls": the exchange, for the engine to annotate

    def __init__(self, data: bytes, dst: Address, transport: Transport, reply: bool = False,
                 step: Step | None = None) -> None:
        object.__setattr__(self, "data", data)
        object.__setattr__(self, "dst", dst)
        object.__setattr__(self, "transport", transport)
        object.__setattr__(self, "reply", reply)
        object.__setattr__(self, "step", step)

    def __reduce__(self) -> tuple[type[Outgoing], tuple[bytes, Address, Transport, bool,
                                                        Step | None]]:
        return (Outgoing, (self.data, self.dst, self.transport, self.reply, self.step))


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(frozen=True, slots=True)
class ChildInfo:
    """A child zone as a K = 0 referral describes it (its TXT hint)."""

    zone: str
    summary: str
    services: frozenset[str]
    org: str | None
    leaf: bool

    def __reduce__(self) -> tuple[type[ChildInfo], tuple[str, str, frozenset[str],
                                                         str | None, bool]]:
        return (ChildInfo, (self.zone, self.summary, self.services, self.org, self.leaf))


R = TypeVar("R")
# A task of the resolver: yields rounds of asks (sent in parallel), receives one reply per
# ask, returns its value; the core drives it (nodes.resolver.core)
Rounds = Generator[list[Ask], list[Reply], R]


def rcode_text(code: int) -> str:
    """RCODE mnemonic; a peer may send codes dnslib has no name for (11-15)."""
    text = _RCODE_TEXT.get(code)
    return text if text is not None else RCODE.get(code, f"RCODE{code}")


_RCODE_TEXT = {code: RCODE.get(code, f"RCODE{code}") for code in range(16)}
