"""The ToolDNS namespace: a tree of zones under ``tools.`` holding tools, plus queries.

Two builders:
  * :func:`from_catalog` — a catalogue JSONL file (format of ``shared/data/tools``): each
    tool's ``path`` becomes zones ``sub.category.tools.``; tools without a subcategory in a
    category that has some go to ``general.category.tools.``.
  * :func:`synthetic` — N tools over a tree of branching factor b and depth d, every zone
    with its own vocabulary so semantic pruning is meaningful and the truth is known;
    certified organisations get logical subdomains (``hku.weather.tools``) beside public
    branches.

:meth:`Namespace.zone_data` turns the tree into the :class:`nodes.zone.ZoneData` the
authoritative servers serve, with NS replicas placed by :func:`assign_servers`.
"""

from __future__ import annotations

import ipaddress
import json
import random
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from nodes.scoring import tokenize
from nodes.wire import SERVICES
from nodes.zone import Delegation, ServerRef, ToolRecord, Ttls, ZoneData

ROOT = "."
TLD = "tools."
_LABEL_BAD = re.compile(r"[^a-z0-9-]+")


def dns_label(text: str, fallback: str = "x") -> str:
    """A DNS-safe label (``[a-z0-9-]``, 1–63 characters) derived from ``text``."""
    label = _LABEL_BAD.sub("-", text.lower()).strip("-")[:63].strip("-")
    return label or fallback


@dataclass
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


@dataclass
class ZoneNode:
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


@dataclass(frozen=True)
class Query:
    """A natural-language query with its ground-truth tools."""

    id: str
    text: str
    service: str
    truth: tuple[str, ...]
    source: str = "generated"


@dataclass
class Namespace:
    zones: dict[str, ZoneNode]
    tools: dict[str, Tool]
    queries: list[Query]
    origin: str = ""
    rogue: set[str] = field(default_factory=set)  # ids of a rogue publisher's tools

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
        for tool in self.tools.values():
            for zone in self.path(tool.zone):
                out[zone].add(tool.service)
        out[ROOT] = set(out[TLD])
        return {z: frozenset(s) for z, s in out.items()}

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
            tools = tuple(
                ToolRecord(
                    tool_id=t.id, name=t.name, description=t.description, service=t.service,
                    target=t.target, address=t.address, port=t.port, org=t.org,
                )
                for t in (self.tools[i] for i in node.tools)
            )
            out.append(ZoneData(name=name, servers=servers[name], summary=node.summary,
                                children=children, tools=tools, org=node.org, ttls=ttls))
        return out


# -------------------------------------------------------------------- addressing


def _addresses(first: str) -> Iterator[str]:
    """Consecutive usable IPv4 host addresses from ``first`` (skipping .0 and .255)."""
    addr = ipaddress.IPv4Address(first)
    while True:
        if addr.packed[-1] not in (0, 255):
            yield str(addr)
        addr += 1


def assign_servers(
    ns: Namespace, replicas: int = 1, first: str = "127.1.0.1"
) -> dict[str, tuple[ServerRef, ...]]:
    """Give every zone ``replicas`` NS hosts (``nsN.<zone>``) with distinct addresses."""
    addrs = _addresses(first)
    out: dict[str, tuple[ServerRef, ...]] = {}
    for zone in ns.zones:
        hosts = [f"{chr(ord('a') + i)}.root-servers." if zone == ROOT else f"ns{i + 1}.{zone}"
                 for i in range(replicas)]
        out[zone] = tuple(ServerRef(h, next(addrs)) for h in hosts)
    return out


def assign_endpoints(ns: Namespace, first: str = "127.64.0.1") -> None:
    """Give every tool a distinct endpoint address (deterministic, in sorted id order)."""
    addrs = _addresses(first)
    for tid in sorted(ns.tools):
        ns.tools[tid].address = next(addrs)


# -------------------------------------------------------------------- summaries


def summarise(texts: Iterable[str], head: str = "", limit: int = 16) -> str:
    """A short summary: ``head`` plus the most frequent content words of ``texts``."""
    counts: Counter[str] = Counter()
    for text in texts:
        counts.update(set(tokenize(text)))
    head_tokens = tokenize(head)
    words = [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
             if w not in head_tokens][: max(0, limit - len(head_tokens))]
    return " ".join([head, *words]).strip()


def _fill_summaries(ns: Namespace, limit: int = 16) -> None:
    """Summaries bottom-up for zones that have none: label words plus frequent terms."""
    texts: dict[str, list[str]] = {z: [] for z in ns.zones}
    for tool in ns.tools.values():
        for zone in ns.path(tool.zone):
            texts[zone].append(f"{tool.name} {tool.description}")
    for name, node in ns.zones.items():
        if not node.summary and name != ROOT:
            head = name.split(".")[0].replace("-", " ")
            node.summary = summarise(texts[name], head=head, limit=limit)


# -------------------------------------------------------------------- catalogue


def from_catalog(
    path: str | Path,
    queries: str | Path | None = None,
    limit: int | None = None,
    protocols: Iterable[str] | None = None,
) -> Namespace:
    """Build the tree from a catalogue JSONL (and optionally a query JSONL with truth)."""
    path = Path(path)
    wanted = set(protocols) if protocols else set(SERVICES)
    rows = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                _ = row["id"], row["name"], row["description"], row["protocol"], row["path"]
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise ValueError(f"{path}:{lineno}: not a catalogue row ({exc})") from None
            if row["protocol"] in wanted:
                rows.append(row)
            if limit is not None and len(rows) >= limit:
                break
    zones: dict[str, ZoneNode] = {ROOT: ZoneNode(ROOT, children=[TLD]), TLD: ZoneNode(TLD)}
    has_sub = {dns_label(r["path"][0]) for r in rows if len(r["path"]) > 1}
    tools: dict[str, Tool] = {}
    for row in rows:
        labels = [dns_label(x) for x in row["path"][:2]]
        if len(labels) == 1 and labels[0] in has_sub:
            labels.append("general")
        zone = TLD
        for label in labels:
            child = f"{label}.{zone}"
            if child not in zones:
                zones[child] = ZoneNode(child)
                zones[zone].children.append(child)
            zone = child
        tools[row["id"]] = Tool(
            id=row["id"], name=row["name"], description=row["description"],
            service=row["protocol"], zone=zone, slug=dns_label(row.get("slug") or row["name"]),
            org=_org_of(row),
        )
    _unique_slugs(tools)
    for tool in tools.values():
        zones[tool.zone].tools.append(tool.id)
    for node in zones.values():
        node.children.sort()
    ns = Namespace(zones=zones, tools=tools, queries=[], origin=str(path))
    _fill_summaries(ns)
    assign_endpoints(ns)
    if queries is not None:
        ns.queries = load_queries(queries, tools)
    return ns


def _org_of(row: dict) -> str:
    name = str(row.get("name", ""))
    if "/" in name:
        return dns_label(name.split("/")[0], "org")
    return dns_label(str(row.get("source", "community")), "community")


def _unique_slugs(tools: dict[str, Tool]) -> None:
    seen: set[str] = set()
    for tid in sorted(tools):
        tool = tools[tid]
        slug, n = tool.slug, 1
        while f"{slug}.{tool.zone}" in seen:
            n += 1
            slug = f"{tool.slug[:58]}-{n}"
        tool.slug = slug
        seen.add(tool.target)


def load_queries(path: str | Path, tools: dict[str, Tool]) -> list[Query]:
    """Queries JSONL (``{"query", "tool_ids", "source"}``) restricted to known tools."""
    out = []
    with Path(path).open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                text, ids = row["query"], row["tool_ids"]
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise ValueError(f"{path}:{lineno}: not a query row ({exc})") from None
            truth = tuple(i for i in ids if i in tools)
            if truth:
                out.append(Query(id=f"q{lineno}", text=text, service=tools[truth[0]].service,
                                 truth=truth, source=row.get("source", "file")))
    return out


# -------------------------------------------------------------------- synthetic

_CONS = "bcdfghjklmnprstvz"
_VOWELS = "aeiou"


class _Words:
    """Unique pronounceable pseudo-words drawn from a seeded RNG."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.seen: set[str] = {"general", "tools", "root-servers"}

    def __call__(self, syllables: int = 3) -> str:
        while True:
            word = "".join(self.rng.choice(_CONS) + self.rng.choice(_VOWELS)
                           for _ in range(syllables))
            if word not in self.seen:
                self.seen.add(word)
                return word


def synthetic(
    n_tools: int = 1000,
    branching: int = 4,
    depth: int = 2,
    seed: int = 0,
    n_orgs: int = 0,
    org_tools: int = 5,
    n_queries: int = 200,
    words_per_zone: int = 5,
) -> Namespace:
    """A balanced tree with known truth; see the module docstring."""
    if branching < 1 or depth < 1 or n_tools < 1:
        raise ValueError("branching, depth and n_tools must be positive")
    rng = random.Random(seed)
    word = _Words(rng)
    noise = [word(2) for _ in range(40)]  # shared filler vocabulary
    zones: dict[str, ZoneNode] = {ROOT: ZoneNode(ROOT, children=[TLD]), TLD: ZoneNode(TLD)}
    vocab: dict[str, list[str]] = {TLD: []}
    frontier = [TLD]
    for _ in range(depth):
        nxt = []
        for parent_zone in frontier:
            for _ in range(branching):
                words = [word() for _ in range(words_per_zone)]
                child = f"{words[0]}.{parent_zone}"
                zones[child] = ZoneNode(child)
                zones[parent_zone].children.append(child)
                vocab[child] = words
                nxt.append(child)
        frontier = nxt
    leaves = frontier
    services = list(SERVICES)
    weights = [0.4, 0.1, 0.3, 0.2]
    tools: dict[str, Tool] = {}
    publishers = [word(2) for _ in range(max(4, n_tools // 50))]

    def path_vocab(zone: str) -> list[list[str]]:
        out, z = [], zone
        while z != TLD:
            out.append(vocab[z])
            z = z.split(".", 1)[1]
        return out[::-1]

    def make_tool(i: int, zone: str, org: str, extra: list[str]) -> Tool:
        own = word()
        levels = path_vocab(zone)
        desc_words = [own, *extra, *rng.sample(levels[-1], k=min(3, len(levels[-1])))]
        desc_words += [rng.choice(v) for v in levels[:-1]]
        desc_words += rng.sample(noise, k=3)
        rng.shuffle(desc_words)
        service = rng.choices(services, weights)[0]
        return Tool(id=f"t{i:07d}", name=own, description=" ".join(desc_words), service=service,
                    zone=zone, slug=own, org=org, port=rng.choice([443, 8080, 8443, 3000]))

    for i in range(n_tools):
        zone = leaves[i % len(leaves)]
        tools[f"t{i:07d}"] = make_tool(i, zone, rng.choice(publishers), [])
    # certified organisations with logical subdomains beside public branches; at depth 1
    # the top-level zones are leaves themselves, so org zones sit beside them under tools.
    top = list(zones[TLD].children)
    for o in range(n_orgs):
        org = word(2)
        branch = top[o % len(top)] if depth > 1 else TLD
        zone = f"{org}.{branch}"
        zones[zone] = ZoneNode(zone, org=org)
        zones[branch].children.append(zone)
        vocab[zone] = [org, *(word() for _ in range(words_per_zone - 1))]
        for _ in range(org_tools):
            i = len(tools)
            tools[f"t{i:07d}"] = make_tool(i, zone, org, [org])
    for tool in tools.values():
        zones[tool.zone].tools.append(tool.id)
    for name, node in zones.items():  # summary: own words plus a few words of each child
        if name in (ROOT, TLD):
            continue
        kids = [vocab[c][1] for c in node.children]
        node.summary = " ".join(vocab[name] + kids)
    zones[TLD].summary = "tools"
    ns = Namespace(zones=zones, tools=tools, queries=[],
                   origin=f"synthetic(n={n_tools},b={branching},d={depth},seed={seed})")
    assign_endpoints(ns)
    ids = sorted(tools)
    for q in range(n_queries):
        tool = tools[ids[rng.randrange(len(ids))]]
        levels = path_vocab(tool.zone)
        text_words = [rng.choice(v) for v in levels] + [tool.name]
        ns.queries.append(Query(id=f"g{q}", text=" ".join(text_words), service=tool.service,
                                truth=(tool.id,), source="generated"))
    return ns


# -------------------------------------------------------------------- rogue publisher


def inject_rogue(ns: Namespace, n_tools: int, mode: str = "public", org: str = "rogue",
                 victim_org: str | None = None, seed: int = 0) -> list[str]:
    """Add a rogue publisher's look-alike tools; returns their ids (also in ``ns.rogue``).

    Victims are the tools the queries ask for most (then by id), each copied once: same
    service, the victim's description plus the victim's name, a name ``<victim>-pro`` and
    an endpoint of the rogue's own. ``public``: each copy goes into its victim's public
    leaf (open registration under a public branch). ``compromised``: the copies go into
    one certified organisation's zone (``victim_org``, default the first), copying that
    zone's tools, as if the organisation's zone had been taken over.
    """
    rng = random.Random(f"rogue-{seed}")
    asked = Counter(t for q in ns.queries for t in q.truth)
    if mode == "public":
        pool = [t for t in ns.tools.values() if ns.zones[t.zone].org is None]
    elif mode == "compromised":
        org_zones = sorted(z for z, n in ns.zones.items() if n.org is not None
                           and (victim_org is None or n.org == victim_org))
        if not org_zones:
            raise ValueError(f"no zone of organisation {victim_org!r} to compromise"
                             if victim_org else "no certified organisation zone to compromise")
        pool = [ns.tools[i] for i in ns.zones[org_zones[0]].tools]
    else:
        raise ValueError(f"unknown rogue mode {mode!r} (public | compromised)")
    victims = sorted(pool, key=lambda t: (-asked[t.id], t.id))[:n_tools]
    addrs = _addresses("127.66.0.1")
    ids = []
    for victim in victims:
        tid = f"r{len(ids):06d}"
        tool = Tool(id=tid, name=f"{victim.name}-pro",
                    description=f"{victim.name} {victim.description}", service=victim.service,
                    zone=victim.zone, slug=dns_label(f"{victim.slug}-pro"), org=org,
                    port=rng.choice([443, 8443]), address=next(addrs))
        while any(ns.tools[o].slug == tool.slug for o in ns.zones[tool.zone].tools):
            tool.slug = dns_label(f"{tool.slug}-{rng.randrange(10, 99)}")
        ns.tools[tid] = tool
        ns.zones[tool.zone].tools.append(tid)
        ns.rogue.add(tid)
        ids.append(tid)
    ns.origin += f"+rogue({mode},{len(ids)})"
    return ids
