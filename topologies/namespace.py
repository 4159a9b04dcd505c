"""The ToolDNS namespace model: a tree of zones under ``tools.`` holding tools, plus queries.

:class:`Namespace` holds the :class:`ZoneNode` tree, the :class:`Tool` records and the
:class:`Query` list with its truth; :meth:`Namespace.zone_data` turns the tree into the
:class:`nodes.dns.zone.ZoneData` the authoritative servers serve. The builders live beside
it: :mod:`topologies.catalog` (a catalogue file), :mod:`topologies.synthetic` (a generated
tree) and :mod:`topologies.rogue` (a rogue publisher's look-alikes).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

from nodes.dns.wire import SERVICES
from nodes.dns.zone import Delegation, ServerRef, ToolRecord, Ttls, ZoneData

ROOT = "."
TLD = "tools."

_T = TypeVar("_T")


@dataclass(slots=True)
class Tool:
    """A tool as published: where it lives and where its endpoint is."""

    id: str
    name: str
    description: str
    service: str
    zone: str
    slug: str
    org: str
    port: int = 443
    address: str = ""

    @property
    def target(self) -> str:
        return f"{self.slug}.{self.zone}"


@dataclass(slots=True)
class ZoneNode:
    """A zone of the tree: its summary, child zones, tools and routing hints."""

    name: str
    summary: str = ""
    children: list[str] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    org: str | None = None  # certified organisation owning this logical subdomain
    representatives: list[str] = field(default_factory=list)  # tool texts below, for routing
    centroids: dict[str, tuple[float, ...]] = field(default_factory=dict)  # service -> vector

    @property
    def depth(self) -> int:
        """Levels below ``tools.`` (``tools.`` is 0, the root -1)."""
        return -1 if self.name == ROOT else self.name.count(".") - 1


@dataclass(frozen=True, slots=True)
class Query:
    """A natural-language query with its ground-truth tools."""

    id: str
    text: str
    service: str
    truth: tuple[str, ...]
    source: str = "generated"


@dataclass
class Namespace:
    """Zones, tools and queries; ``rogue`` names the tools a rogue publisher added."""

    zones: dict[str, ZoneNode]
    tools: dict[str, Tool]
    queries: Sequence[Query]  # a list, or a synthetic namespace's DrawnQueries
    origin: str = ""
    rogue: set[str] = field(default_factory=set)  # ids of a rogue publisher's tools
    # learned routing's pseudo-document vectors (tool ids in sorted order, one unit row
    # each: description plus logged queries), kept for a registry given the same log
    pseudo_documents: tuple[list[str], Any] | None = None
    # agent host -> tool id, when the organisations' zones publish the tools
    # (topologies.orgzones): the DNS-native schemes' endpoints are scored by it
    hosts: dict[str, str] = field(default_factory=dict)

    # ---------------------------------------------------------------- structure

    def parent_of(self, zone: str) -> str:
        return ROOT if zone == TLD else zone.split(".", 1)[1]

    def path(self, zone: str) -> list[str]:
        """Zones from ``tools.`` down to ``zone``."""
        out = [zone]
        while out[-1] != TLD:
            out.append(self.parent_of(out[-1]))
        return out[::-1]

    def leaves(self) -> list[str]:
        return [z for z, n in self.zones.items() if not n.children and z != ROOT]

    def services_below(self) -> dict[str, frozenset[str]]:
        """Services reachable in or below every zone."""
        out: dict[str, set[str]] = {z: set() for z in self.zones}
        own: dict[str, set[str]] = {}  # zone -> services of the tools it holds
        for tool in self.tools.values():
            services = own.get(tool.zone)
            if services is None:
                services = own[tool.zone] = set()
            services.add(tool.service)
        for zone, services in own.items():  # then up each holding zone's path, once
            for z in self.path(zone):
                out[z] |= services
        out[ROOT] = set(out[TLD])
        return {z: frozenset(s) for z, s in out.items()}

    def scored_items(self) -> dict[tuple[str, str], int]:
        """Items a server scores for (zone, service) in one ranking pass: the eligible
        children, or the leaf's tools of the service."""
        below = self.services_below()
        out: dict[tuple[str, str], int] = {}
        for zone, node in self.zones.items():
            if node.children:
                counts = Counter(s for c in node.children for s in below[c])
            else:
                counts = Counter(self.tools[t].service for t in node.tools)
            for service in SERVICES:
                out[zone, service] = counts[service]
        return out

    def target_ids(self) -> TargetIds:
        """``{tool.target: tool.id}`` for every tool, built per zone on demand."""
        return TargetIds(self)

    def oracle_truth(self) -> dict[str, frozenset[str]]:
        """Intent text → zones on the true paths and the true tool ids (oracle scorer)."""
        truth: dict[str, set[str]] = {}
        for q in self.queries:
            keys = truth.setdefault(q.text, set())
            for tid in q.truth:
                if tid in self.tools:
                    keys.add(tid)
                    keys.update(self.path(self.tools[tid].zone))
        return {k: frozenset(v) for k, v in truth.items()}

    def stats(self) -> dict[str, float]:
        leaves = self.leaves()
        sizes = [len(self.zones[z].tools) for z in leaves]
        return {
            "zones": len(self.zones) - 1,
            "leaves": len(leaves),
            "tools": len(self.tools),
            "queries": len(self.queries),
            "max_depth": max(self.zones[z].depth for z in leaves) if leaves else 0,
            "max_branching": max(len(n.children) for n in self.zones.values()),
            "mean_leaf_size": sum(sizes) / len(sizes) if sizes else 0.0,
            "max_leaf_size": max(sizes, default=0),
        }

    # ---------------------------------------------------------------- to zones

    def zone_data(
        self, servers: dict[str, tuple[ServerRef, ...]], ttls: Ttls | None = None
    ) -> list[ZoneData]:
        """One :class:`ZoneData` per zone, root included, with the given NS sets."""
        ttls = ttls or Ttls()
        below = self.services_below()
        out = []
        for name, node in self.zones.items():
            children = tuple(
                Delegation(
                    zone=c, servers=servers[c], summary=self.zones[c].summary,
                    services=below[c], org=self.zones[c].org, leaf=not self.zones[c].children,
                    representatives=tuple(self.zones[c].representatives),
                    centroids=tuple(sorted(self.zones[c].centroids.items())),
                )
                for c in node.children
            )
            tools = tuple([  # positional: tool_id, name, description, service, target, …
                ToolRecord(t.id, t.name, t.description, t.service, f"{t.slug}.{t.zone}",
                           t.address, t.port, t.org)
                for t in map(self.tools.__getitem__, node.tools)
            ])
            out.append(ZoneData(name=name, servers=servers[name], summary=node.summary,
                                children=children, tools=tools, org=node.org, ttls=ttls))
        return out


class TargetIds(dict[str, str]):
    """``{tool.target: tool.id for tool in ns.tools.values()}`` without building it: a
    target's first label is the tool's slug (a DNS label, no dots) and the rest its zone,
    so :meth:`get` indexes that one zone's tools (each tool is listed in its own zone).
    Anything not found that way falls back to the whole mapping, built once."""

    def __init__(self, ns: Namespace) -> None:
        super().__init__()
        self.ns = ns
        self.indexed: set[str] = set()
        self.complete = False

    @overload
    def get(self, target: str, default: None = None) -> str | None: ...

    @overload
    def get(self, target: str, default: str) -> str: ...

    @overload
    def get(self, target: str, default: _T) -> str | _T: ...

    def get(self, target: str, default: _T | None = None) -> str | _T | None:
        found = dict.get(self, target)
        if found is not None or self.complete:
            return default if found is None else found
        if self.ns.hosts and (found := self.ns.hosts.get(target)) is not None:
            return found
        zone = target.partition(".")[2]
        node = self.ns.zones.get(zone)
        if node is not None and zone not in self.indexed:
            self.indexed.add(zone)
            tools = self.ns.tools
            for tid in node.tools:
                tool = tools[tid]
                if tool.zone == zone:
                    self[tool.target] = tid
            found = dict.get(self, target)
        if found is None:  # not a tool target of that zone's list: index every tool
            self.complete = True
            self.clear()
            self.update({t.target: t.id for t in self.ns.tools.values()})
            found = dict.get(self, target)
        return default if found is None else found

    def __getitem__(self, target: str) -> str:
        found = self.get(target)
        if found is None:
            raise KeyError(target)
        return found

    def __contains__(self, target: object) -> bool:
        return isinstance(target, str) and self.get(target) is not None
