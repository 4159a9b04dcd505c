"""Per-zone state built once at load: record sets by owner, names, cuts, children, indexes.

:func:`build_state` turns a :class:`~nodes.dns.zone.ZoneData` into a :class:`ZoneState`:
the static records encoded for standard lookups (tools' records encoded on first use), the
delegations with their NS, glue and summary hint, and the SOA-only negative replies. Score
indexes (children by summary, centroid or representatives; a leaf's tools per service) are
built when a query first needs them, and a tool's records for semantic answers when one
first chooses it (:class:`Tools`). :func:`zone_records` lists what a zone serves.
"""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

from mypy_extensions import mypyc_attr

from nodes.authoritative.reply import NOERROR, NXDOMAIN, Reply
from nodes.dns.codec import AAAA, NS, SOA, SRV, TXT, A, Rec, character_strings
from nodes.dns.wire import is_subdomain, normalise
from nodes.dns.zone import Delegation, ToolRecord, Ttls, ZoneData, aaaa_address
from nodes.scoring import (
    Ranker,
    ScoreIndex,
    Scorer,
    centroid_index,
    group_max_index,
    ranker,
)


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


def ipv4_packed(address: str) -> bytes:
    """The four bytes of a dotted-quad IPv4 address, as ``ipaddress.IPv4Address(address)
    .packed`` (which also reads, and rejects, every other form: about 8x slower)."""
    parts = address.split(".")
    if len(parts) == 4 and all(p.isdigit() and p.isascii() and len(p) <= 3
                               and (p[0] != "0" or p == "0") for p in parts):
        octets = [int(p) for p in parts]
        if max(octets) <= 255:
            return bytes(octets)
    return ipaddress.IPv4Address(address).packed


def a_record(owner: str, address: str, ttl: int) -> Rec:
    return Rec(owner, A, ttl, (ipv4_packed(address),))


def aaaa_record(owner: str, address: str, ttl: int) -> Rec:
    return Rec(owner, AAAA, ttl, (aaaa_address(address).packed,))


def srv_record(owner: str, tool: ToolRecord, ttl: int) -> Rec:
    fixed = struct.pack("!HHH", tool.priority, tool.weight, tool.port)
    return Rec(owner, SRV, ttl, (fixed, normalise(tool.target)))


def txt_record(owner: str, strings: list[bytes], ttl: int) -> Rec:
    return Rec(owner, TXT, ttl, (character_strings(strings),))


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass
class Child:
    """A delegated child with its prepared NS, in-domain glue and summary hint."""

    data: Delegation
    ns: list[Rec]
    glue: list[Rec]
    hint: Rec


#: One tool's records in a semantic answer: its SRV (owner "" = the query name), its
#: target's A and, in a zone with ``aaaa``, AAAA record.
ToolRecs = tuple[Rec, Rec, Rec | None]


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Tools:
    """A leaf's tools of one service, with their score index; each tool's records are
    encoded when an answer first chooses it (a query picks K of them). The SRV record is
    encoded once, with the tool's configured priority and weight; an answer that ranks it
    sends its rank as the priority instead (written at reply time by
    :func:`nodes.authoritative.fit.rank_into`; the weight stays as configured)."""

    __slots__ = ("aaaa", "index", "rank", "records", "tools", "ttls")

    def __init__(self, tools: list[ToolRecord], index: ScoreIndex, rank: Ranker, ttls: Ttls,
                 aaaa: bool) -> None:
        self.tools = tools
        self.index = index
        self.rank = rank  # (intent text, K) -> chosen indices, best first
        self.ttls = ttls
        self.aaaa = aaaa  # AAAA records too (the zone's ``aaaa``)
        self.records: list[ToolRecs | None] = [None] * len(tools)  # by tool index

    def prepare(self, i: int) -> ToolRecs:
        """Tool ``i``'s records (encoded on first use, then kept in ``records``)."""
        tool, ttls = self.tools[i], self.ttls
        target = normalise(tool.target)
        recs = (srv_record("", tool, ttls.srv), a_record(target, tool.address, ttls.a),
                aaaa_record(target, tool.address, ttls.a) if self.aaaa else None)
        self.records[i] = recs
        return recs


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass
class ZoneState:
    """A zone plus its lookup tables and lazily built score indexes."""

    data: ZoneData
    records: dict[str, dict[int, list[Rec]]]  # owner -> type -> records (see node())
    names: set[str]  # every name existing in the zone, empty non-terminals included
    cuts: dict[str, Delegation]
    children: list[Child]
    negative_soa: Rec
    name: str = ""  # normalised zone name (= data.name)
    leaf: bool = False  # = data.is_leaf
    child_by_zone: dict[str, Child] = field(default_factory=dict)  # by Delegation.zone
    negative: dict[int, Reply] = field(default_factory=dict)  # rcode -> SOA-only reply
    # the children's index and ranker (by summary or representatives), built on first use
    child_ranking: tuple[ScoreIndex, Ranker] | None = None
    # per-service child indexes when the children carry centroids (see child_index)
    by_centroid: bool = False
    service_index: dict[str, tuple[ScoreIndex, Ranker]] = field(default_factory=dict)
    eligible: dict[str, list[int]] = field(default_factory=dict)  # service -> child indices
    tools: dict[tuple[str, str], Tools] = field(default_factory=dict)  # (service, proto)
    # tools' owner names whose records are encoded when first asked for (a leaf of 10^5
    # tools would otherwise encode three records per tool at load): owner -> tools
    lazy: dict[str, list[ToolRecord]] = field(default_factory=dict)

    def node(self, owner: str) -> dict[int, list[Rec]] | None:
        """The records owned by ``owner`` (encoding a tool's on first use)."""
        node = self.records.get(owner)
        tools = self.lazy.pop(owner, None)
        if tools is not None:
            if node is None:
                node = self.records[owner] = {}
            add_tool_records(node, owner, tools, self.name, self.data.ttls, self.data.aaaa)
        return node

    def delegation_for(self, name: str) -> Delegation | None:
        """The delegated child at or above ``name`` inside this zone, if any."""
        if name == self.data.name or not self.cuts:
            return None
        labels = name.rstrip(".").split(".")
        zone_depth = len(self.data.name.rstrip(".").split(".")) if self.data.name != "." else 0
        for i in range(len(labels) - zone_depth - 1, -1, -1):  # shortest candidate first
            cut = self.cuts.get(".".join(labels[i:]) + ".")
            if cut is not None:
                return cut
        return None

    def tools_of(self, service: str, proto: str, scorer: Scorer) -> Tools:
        """The leaf's tools of ``service`` over ``proto``, prepared on first use."""
        tools = self.tools.get((service, proto))
        if tools is None:
            chosen = [t for t in self.data.tools if t.service == service and t.proto == proto]
            index = scorer.index([t.tool_id for t in chosen],
                                 [f"{t.name} {t.description}" for t in chosen])
            tools = Tools(chosen, index, ranker(index), self.data.ttls, self.data.aaaa)
            self.tools[(service, proto)] = tools
        return tools

    def contents(self) -> list[Rec]:
        """:func:`zone_records` of this loaded zone; tool records not yet encoded are encoded
        for this but not kept (the zone's lazily encoded records stay lazy)."""
        name = self.name
        nodes: dict[str, dict[int, list[Rec]]] = {}
        for owner, node in self.records.items():
            nodes[owner] = {rtype: list(recs) for rtype, recs in node.items()}
        for owner, tools in self.lazy.items():
            add_tool_records(nodes.setdefault(owner, {}), owner, tools, name, self.data.ttls,
                             self.data.aaaa)
        # what a query would never reach: names outside the zone, or below a delegation
        for owner in [o for o in nodes if not is_subdomain(o, name)
                      or (self.cuts and self.delegation_for(o) is not None)]:
            del nodes[owner]
        for child in self.children:
            for rec in (*child.ns, *child.glue):
                nodes.setdefault(rec.owner, {}).setdefault(rec.rtype, []).append(rec)
        out: list[Rec] = []
        seen: set[Rec] = set()
        for owner in sorted(nodes, key=_canonical):
            node = nodes[owner]
            for rtype in sorted(node, key=lambda t: (t != SOA, t != NS, t)):
                for rec in node[rtype]:
                    if rec not in seen:
                        seen.add(rec)
                        out.append(rec)
        return out


def zone_records(zone: ZoneData) -> list[Rec]:
    """Every record ``zone`` holds, exactly as a server loaded with it serves them to
    standard questions: SOA first, the apex's NS and other records, then the other owners
    in canonical order (RFC 4034 §6.1): tools' SRV/A/TXT, in-zone server addresses,
    delegations' NS with their glue. What a transfer sends between its two SOAs and what
    ``nodes.authoritative.zonefile`` writes. Intent answers (top-K per query) and the
    children's summary TXT records (only in K = 0 referrals) are not static records and
    are not included."""
    return build_state(zone).contents()


def _canonical(owner: str) -> tuple[str, ...]:
    return tuple(reversed(owner.rstrip(".").split("."))) if owner != "." else ()


def child_index(scorer: Scorer, kids: Sequence[Delegation], service: str | None = None
                ) -> ScoreIndex:
    """How a parent scores its children for a query of ``service``: by their centroids for
    that service when they carry some (a dense scorer's cosine with the mean embedding of
    the child's tools of the service; see ``topologies.taxonomy.add_centroids``); else by
    summary, or, when any child carries representatives, by the best-scoring
    representative of each (its summary if it has none)."""
    keys = [c.zone for c in kids]
    if service is not None and any(c.centroids for c in kids):
        return centroid_index(scorer, keys, [dict(c.centroids).get(service) for c in kids])
    if any(c.representatives for c in kids):
        return group_max_index(scorer, keys, [c.representatives or (c.summary,) for c in kids])
    return scorer.index(keys, [c.summary for c in kids])


def add_tool_records(node: dict[int, list[Rec]], owner: str, tools: list[ToolRecord],
                     zone: str, ttls: Ttls, aaaa: bool = False) -> None:
    """A tool owner's records, as :func:`build_state` would have added them eagerly: the
    SRV records of the zone's tools at ``_svc._proto.<zone>``, A (AAAA) then TXT at a
    target."""
    for tool in tools:
        if owner == f"_{tool.service}._{tool.proto}.{zone}":
            node.setdefault(SRV, []).append(srv_record(owner, tool, ttls.srv))
        if owner == normalise(tool.target):
            node.setdefault(A, []).append(a_record(owner, tool.address, ttls.a))
            if aaaa:
                node.setdefault(AAAA, []).append(aaaa_record(owner, tool.address, ttls.a))
            node.setdefault(TXT, []).append(txt_record(owner, txt_strings(tool.description),
                                                       ttls.srv))


def _children(zone: ZoneData) -> list[Child]:
    ttls = zone.ttls
    children = []
    for child in zone.children:
        cz = normalise(child.zone)
        hosts = [normalise(s.host) for s in child.servers]
        children.append(Child(
            data=child,
            ns=[Rec(cz, NS, ttls.ns, (h,)) for h in hosts],
            glue=[a_record(h, s.address, ttls.ns)
                  for h, s in zip(hosts, child.servers, strict=True)
                  if is_subdomain(h, cz)],  # glue only where it is needed
            hint=txt_record(cz, child_hint(child), ttls.ns),
        ))
    return children


def _names(name: str, owners: Sequence[str]) -> set[str]:
    """Every name existing in zone ``name`` given its owners: them and the empty
    non-terminals between them and the apex."""
    names: set[str] = set()
    for owner in owners:
        if owner.partition(".")[2] == name:  # one label below the apex (most tools)
            names.add(owner)
            names.add(name)
            continue
        labels = owner.rstrip(".").split(".")
        for i in range(len(labels)):
            candidate = ".".join(labels[i:]) + "."
            if not is_subdomain(candidate, name):
                break
            names.add(candidate)
    return names


def build_state(zone: ZoneData) -> ZoneState:
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
            add(a_record(host, server.address, ttls.ns))
    if zone.summary:
        add(txt_record(name, txt_strings("summary=" + zone.summary), ttls.ns))
    children = _children(zone)
    lazy: dict[str, list[ToolRecord]] = {}
    for tool in zone.tools:  # encoded on first use (ZoneState.node), in this order
        for owner in (f"_{tool.service}._{tool.proto}.{name}", normalise(tool.target)):
            tools = lazy.setdefault(owner, [])
            if not tools or tools[-1] is not tool:
                tools.append(tool)
    for static in zone.records:
        add(Rec(normalise(static.owner), static.rtype, static.ttl, static.rdata))
    negative = Rec(name, SOA, min(ttls.soa, ttls.negative), soa.rdata)
    data = zone if zone.name == name else ZoneData(**{**zone.__dict__, "name": name})
    return ZoneState(
        data=data, records=records, names=_names(name, [*records, *lazy]),
        cuts={normalise(c.zone): c for c in zone.children}, children=children,
        negative_soa=negative, name=name, leaf=data.is_leaf,
        child_by_zone={c.data.zone: c for c in children},
        by_centroid=any(c.centroids for c in zone.children), lazy=lazy,
        negative={rcode: Reply(rcode, True, (), (negative,)) for rcode in (NOERROR, NXDOMAIN)})
