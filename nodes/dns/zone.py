"""Zone contents as authoritative servers hold them: delegations, tools, server sets, TTLs.

Plain frozen data, built by ``topologies.namespace`` and served by
``nodes.authoritative.server``. A zone with children is a non-leaf (it refers); a zone without
children is a leaf (it holds tools as SRV records sharing the name ``_svc._proto.<zone>``).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

Address = tuple[str, int]

#: ULA prefix (RFC 4193, fd00::/8) of the tools' IPv6 addresses: ``fd74:6f6f:6c73::/96``
#: ("tools" in ASCII after fd), the IPv4 address in the low 32 bits.
AAAA_PREFIX = ipaddress.IPv6Network("fd74:6f6f:6c73::/96")


def aaaa_address(ipv4: str) -> ipaddress.IPv6Address:
    """The IPv6 (AAAA) address a tool target gets beside its IPv4 (A) address: the IPv4
    address embedded in :data:`AAAA_PREFIX` (127.2.0.5 → ``fd74:6f6f:6c73::7f02:5``), a
    deterministic, reversible mapping in unique-local space that routes nowhere."""
    return AAAA_PREFIX[int(ipaddress.IPv4Address(ipv4))]


@dataclass(frozen=True, slots=True)
class ServerRef:
    """One NS replica of a zone: its host name and IPv4 address (port is the DNS port)."""

    host: str
    address: str


@dataclass(frozen=True, slots=True)
class Delegation:
    """A child zone as its parent sees it: NS set with glue, summary, services below."""

    zone: str
    servers: tuple[ServerRef, ...]
    summary: str
    services: frozenset[str]
    org: str | None = None  # certified organisation owning this logical subdomain
    leaf: bool = False  # the child holds tools rather than further delegations
    # texts of representative tools below the child; when any child has some, the parent
    # scores each child by its best representative (MaxSim) instead of by its summary
    representatives: tuple[str, ...] = ()
    # (service, unit vector) pairs: the mean sentence embedding of the child's tools of
    # that service; when children carry them, a dense parent routes by cosine with them
    centroids: tuple[tuple[str, tuple[float, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class ToolRecord:
    """One tool as a leaf publishes it: an SRV record plus A (and TXT) for its target."""

    tool_id: str
    name: str
    description: str
    service: str  # mcp | a2a | rest | skill
    target: str  # absolute name, e.g. ``open-meteo.history.weather.tools.``
    address: str
    port: int
    org: str | None = None
    proto: str = "tcp"
    priority: int = 0
    weight: int = 0


@dataclass(frozen=True, slots=True)
class StaticRecord:
    """A record a zone publishes as given, such as an organisation's discovery records
    (:mod:`topologies.orgzones`: SVCB, HTTPS, TLSA, TXT, PTR, SRV, A): owner, type, TTL and
    the RDATA in wire order, fixed ``bytes`` and domain names (``str``, never compressed)."""

    owner: str
    rtype: int
    ttl: int
    rdata: tuple[bytes | str, ...]


@dataclass(frozen=True, slots=True)
class Ttls:
    """TTLs in seconds: delegations long (hours), tool records short (minutes)."""

    ns: int = 86_400
    srv: int = 300
    a: int = 300
    soa: int = 3_600
    negative: int = 60


@dataclass(frozen=True)
class ZoneData:
    """Everything one zone publishes."""

    name: str
    servers: tuple[ServerRef, ...]
    summary: str = ""
    children: tuple[Delegation, ...] = ()
    tools: tuple[ToolRecord, ...] = ()
    org: str | None = None
    ttls: Ttls = field(default_factory=Ttls)
    serial: int = 1
    aaaa: bool = False  # tool targets also get an AAAA record (:func:`aaaa_address`)
    records: tuple[StaticRecord, ...] = ()  # published as given, beside the tools

    @property
    def is_leaf(self) -> bool:
        return not self.children

    @property
    def services(self) -> frozenset[str]:
        """Services reachable in or below this zone."""
        own = {t.service for t in self.tools}
        for child in self.children:
            own |= child.services
        return frozenset(own)
