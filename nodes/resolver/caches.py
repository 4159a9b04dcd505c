"""The resolver's tables (Unbound's services/cache): one LRU store, entries expiring with
the records' TTLs at the ``now`` the core sets; serve-stale reads; learning the zone
servers of referrals and the child hints of K = 0 referrals; the query mock (cached child
lists ranked locally).

Tables (keys -> values):
  * ``servers``: zone -> NS addresses (glue) — "server address search" starts at the
    longest cached suffix;
  * ``referrals``: (zone, service, proto, intent, K) -> the children referred (global
    search: (child, score) pairs) — a repeated intent skips levels;
  * ``children``: (zone, service) -> [ChildInfo] from K = 0 warming, ``child_index`` its
    score index — "query mock";
  * ``srv``: (zone, service, proto, intent, K) -> [Endpoint]; ``addr``: target -> address;
  * ``negative``: (name, type) -> True; ``answers``: (name, type) -> [RR] (CNAME too);
  * ``keys`` / ``ds``: zone -> its validated DNSKEY set / the DS its parent signed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any, cast

import numpy as np
from dnslib import DNSRecord
from mypy_extensions import mypyc_attr

from nodes.dns.cache import Entry, Store, Table
from nodes.dns.message import TYPE_A, TYPE_NS, TYPE_TXT, Message, derive
from nodes.dns.wire import Intent, below, normalise
from nodes.dns.zone import Address
from nodes.resolver.config import ResolverConfig
from nodes.resolver.types import ChildInfo
from nodes.scoring import ScoreIndex, Scorer, top_k

Known = dict[str, tuple[Address, ...]]  # delegations learned during one task
_Indexed = tuple[list[ChildInfo], ScoreIndex]  # a child list and its score index


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Caches:
    """The resolver's cached data, read and written at the time :attr:`now`."""

    def __init__(self, config: ResolverConfig, root_hints: tuple[Address, ...],
                 scorer: Scorer, stats: Counter[str]) -> None:
        self.config = config
        self.root_hints = root_hints
        self.scorer = scorer
        self.stats = stats
        self.now = 0.0
        # every cached item lives in one LRU store bounded in entries and bytes
        self.store = Store(config.cache_max_entries, config.cache_max_bytes)
        table = self.store.table
        self.servers = table("servers")
        self.referrals = table("referrals")
        self.children = table("children")
        self.child_index = table("child_index")
        self.srv = table("srv")
        self.addr = table("addr")
        self.negative = table("negative")
        self.answers = table("answers")
        self.keys = table("keys")
        self.ds = table("ds")

    def get(self, table: Table, key: object) -> Any:
        """The live value cached under ``key``, else None (expired data past the serve-stale
        window is dropped)."""
        if not self.config.cache:
            return None
        entry = table.get(key)
        if entry is None:
            return None
        if entry.expires <= self.now:
            if not self.config.serve_stale or entry.expires + self.config.stale_ttl <= self.now:
                del table[key]
            return None
        return entry.value

    def get_stale(self, table: Table, key: object) -> Any:
        """Expired data still within the serve-stale window (RFC 8767), else None."""
        if not (self.config.cache and self.config.serve_stale):
            return None
        entry = table.get(key)
        if entry is None or entry.expires + self.config.stale_ttl <= self.now:
            return None
        return entry.value

    def put(self, table: Table, key: object, value: object, ttl: float) -> None:
        if self.config.cache:
            table[key] = Entry(value, self.now + ttl)

    def servers_for(self, zone: str, known: Known) -> tuple[str, tuple[Address, ...]]:
        """Longest enclosing zone with known servers: learned during this walk, or cached
        ("server address search"); the root hints last."""
        if zone[-1:] == "." and zone[-2:-1] != "." and zone != ".":  # the first candidate
            servers = known.get(zone) or self.get(self.servers, zone)  # (the usual find)
            if servers:
                return zone, servers
        labels = zone.rstrip(".").split(".") if zone != "." else []
        for i in range(len(labels)):
            candidate = ".".join(labels[i:]) + "."
            servers = known.get(candidate) or self.get(self.servers, candidate)
            if servers:
                return candidate, servers
        return ".", self.root_hints

    def learn_referral(self, msg: DNSRecord | Message, bailiwick: str, known: Known
                       ) -> list[str]:
        """NS sets with in-bailiwick glue, kept for this walk (``known``) and cached;
        returns the child zones in response order (``msg``: dnslib's, or a
        ``nodes.dns.message.Message`` of the same shape, whose reading is kept with it)."""
        port = self.config.dns_port
        bogus, delegations, zones = derive(msg, ("referral", bailiwick, port),
                                           lambda: _read_referral(msg, bailiwick, port))
        if bogus:
            self.stats["bogus_referral"] += bogus
        if self.config.cache:
            table, expires = self.servers, self.now
            for owner, servers, ttl in delegations:
                known[owner] = servers
                table[owner] = Entry(servers, expires + ttl)
        else:
            for owner, servers, _ in delegations:
                known[owner] = servers
        return list(zones)

    def learn_hints(self, msg: DNSRecord, service: str, zone: str, ttl: float
                    ) -> None:
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
        self.put(self.children, (zone, service), children, ttl)
        self.child_index.pop((zone, service), None)

    def mock(self, zone: str, service: str, intent: Intent) -> list[str] | None:
        """Rank a cached complete child list locally; None if the list is not cached."""
        children: list[ChildInfo] | None = self.get(self.children, (zone, service))
        if children is None or not self.config.query_mock:
            return None
        cached = self.child_index.get((zone, service))
        kept = None if cached is None else cast(_Indexed, cached.value)
        if kept is None or kept[0] is not children:  # once per cached child list
            index = self.scorer.index([c.zone for c in children],
                                      [c.summary for c in children])
            self.child_index[(zone, service)] = Entry((children, index), float("inf"))
        else:
            index = kept[1]
        if not children:
            return []
        eligible = np.asarray([i for i, c in enumerate(children) if service in c.services],
                              dtype=int)
        return [children[i].zone for i in top_k(index.scores(intent.text), intent.k, eligible)]

    def is_leaf(self, zone: str, service: str) -> bool:
        """Whether the cached child list of ``zone``'s parent marks it a leaf."""
        parent_zone = zone.split(".", 1)[1] if zone.count(".") > 1 else "."
        children: list[ChildInfo] = self.get(self.children, (parent_zone, service)) or []
        return any(c.zone == zone and c.leaf for c in children)

    def zones_with_children(self, service: str) -> list[str]:
        """The zones whose child list for ``service`` is cached, sorted."""
        keys = cast(Iterator[tuple[str, str]], iter(self.children))
        return sorted(z for (z, s) in keys if s == service)


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


def _read_referral(msg: DNSRecord | Message, bailiwick: str, port: int
                   ) -> tuple[int, tuple[tuple[str, tuple[Address, ...], int], ...],
                              tuple[str, ...]]:
    """What :meth:`Caches.learn_referral` learns from a referral: the NS records outside
    the bailiwick (counted as bogus), each child zone with glue for its servers (in
    response order) with those servers and its lowest NS TTL, and those zones."""
    bailiwick = normalise(bailiwick)
    glue: dict[str, str] = {}
    for rr in msg.ar:
        if rr.rtype == TYPE_A:
            name = normalise(rr.rname)
            if below(name, bailiwick):
                glue.setdefault(name, str(rr.rdata))
    bogus = 0
    zones: list[str] = []
    servers: dict[str, list[Address]] = {}
    ttls: dict[str, int] = {}
    for rr in msg.auth:
        if rr.rtype != TYPE_NS:
            continue
        owner = normalise(rr.rname)
        if owner == bailiwick or not below(owner, bailiwick):
            bogus += 1
            continue
        if owner not in servers:
            zones.append(owner)
            servers[owner] = []
        host = normalise(rr.rdata.label)
        if host in glue:
            servers[owner].append((glue[host], port))
        ttls[owner] = min(ttls.get(owner, rr.ttl), rr.ttl)
    delegations = tuple((z, tuple(servers[z]), ttls[z]) for z in zones if servers[z])
    return bogus, delegations, tuple(z for z, _, _ in delegations)
