"""The data the resolver's parts share: requests, results, exchanges, asks and replies."""

from __future__ import annotations

from collections import Counter
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Literal, TypeAlias, TypeVar

from dnslib import RCODE, DNSRecord

from nodes.dns.message import Message
from nodes.dns.wire import Intent
from nodes.dns.zone import Address

# "tls": DNS over TLS (RFC 7858) to the authoritative servers (ResolverConfig.upstream);
# the engines carry it on persistent connections and report them on the Step
Transport = Literal["udp", "tcp", "tls"]


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
    """A query a task wants answered by one of ``servers``."""

    qname: str
    qtype: int
    servers: tuple[Address, ...]
    intent: Intent | None


# a response as parsed: nodes.dns.message's fast parse (the common shapes) or dnslib's
Answer: TypeAlias = DNSRecord | Message


@dataclass(frozen=True, slots=True)
class Reply:
    """The answer to one :class:`Ask`: a response, or why there is none."""

    msg: Answer | None
    error: str | None = None
    wire: bytes = b""  # the response bytes (kept when validating DNSSEC)


@dataclass(frozen=True, slots=True)
class Outgoing:
    """A message for the engine to send."""

    data: bytes
    dst: Address
    transport: Transport
    reply: bool = False  # an answer to a stub client (sent from the listening socket)
    step: Step | None = None  # transport "tls": the exchange, for the engine to annotate


@dataclass(frozen=True, slots=True)
class ChildInfo:
    """A child zone as a K = 0 referral describes it (its TXT hint)."""

    zone: str
    summary: str
    services: frozenset[str]
    org: str | None
    leaf: bool


R = TypeVar("R")
# A task of the resolver: yields rounds of asks (sent in parallel), receives one reply per
# ask, returns its value; the core drives it (nodes.resolver.core)
Rounds = Generator[list[Ask], list[Reply], R]


def rcode_text(code: int) -> str:
    """RCODE mnemonic; a peer may send codes dnslib has no name for (11-15)."""
    text = _RCODE_TEXT.get(code)
    return text if text is not None else RCODE.get(code, f"RCODE{code}")


_RCODE_TEXT = {code: RCODE.get(code, f"RCODE{code}") for code in range(16)}
