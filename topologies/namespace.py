"""The ToolDNS namespace: a tree of zones under ``tools.`` holding tools, plus queries.

Two builders:
  * :func:`from_catalog` — a catalogue JSONL file (format of ``shared/data/tools``): each
    tool's ``path`` becomes zones ``sub.category.tools.``; tools without a subcategory in a
    category that has some go to ``general.category.tools.``.
  * :func:`synthetic` — N tools over a tree of branching factor b and depth d, every zone
    with its own vocabulary so semantic pruning is meaningful and the truth is known;
    certified organisations get logical subdomains (``hku.weather.tools``) beside public
    branches.

:meth:`Namespace.zone_data` turns the tree into the :class:`nodes.dns.zone.ZoneData` the
authoritative servers serve, with NS replicas placed by :func:`assign_servers`.
"""

from __future__ import annotations

import bisect
import contextlib
import gc
import ipaddress
import itertools
import json
import random
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from nodes.dns.wire import SERVICES
from nodes.dns.zone import Delegation, ServerRef, ToolRecord, Ttls, ZoneData
from nodes.scoring import tokenize

ROOT = "."
TLD = "tools."
_LABEL_BAD = re.compile(r"[^a-z0-9-]+")


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection inside (restored after): building millions of
    long-lived, acyclic objects otherwise pays for repeated full collections."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


ZONE_LABEL_MAX = 62  # a cursor prefixes "_" to a zone's label (``_mcp._tcp._<zone>``)


def dns_label(text: str, fallback: str = "x", max_len: int = 63) -> str:
    """A DNS-safe label (``[a-z0-9-]``, 1–``max_len`` characters) derived from ``text``.
    Zone labels use ``max_len=ZONE_LABEL_MAX`` so that cursor names still fit."""
    label = _LABEL_BAD.sub("-", text.lower()).strip("-")[:max_len].strip("-")
    return label or fallback


def zone_label(text: str, fallback: str = "x") -> str:
    """A label for a zone: :func:`dns_label` short enough for the cursor's ``_`` prefix."""
    return dns_label(text, fallback, ZONE_LABEL_MAX)


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

    def get(self, target: str, default: str | None = None) -> str | None:  # type: ignore[override]
        found = dict.get(self, target)
        if found is not None or self.complete:
            return default if found is None else found
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


# -------------------------------------------------------------------- addressing


def _addresses(first: str) -> Iterator[str]:
    """Consecutive usable IPv4 host addresses from ``first`` (skipping .0 and .255)."""
    for addr in range(int(ipaddress.IPv4Address(first)), 1 << 32):
        if 0 < addr & 255 < 255:
            yield f"{addr >> 24}.{addr >> 16 & 255}.{addr >> 8 & 255}.{addr & 255}"
    raise ValueError(f"no IPv4 addresses left after {first}")


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
    tools = ns.tools
    for tid, address in zip(sorted(tools), _addresses(first), strict=False):
        tools[tid].address = address


# -------------------------------------------------------------------- summaries


def summarise(texts: Iterable[str], head: str = "", limit: int = 16,
              counts: Counter[str] | None = None) -> str:
    """A short summary: ``head`` plus the most frequent content words of ``texts`` (or of
    ``counts``: in how many texts each word occurs)."""
    if counts is None:
        counts = Counter()
        for text in texts:
            counts.update(set(tokenize(text)))
    head_tokens = tokenize(head)
    words = [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
             if w not in head_tokens][: max(0, limit - len(head_tokens))]
    return " ".join([head, *words]).strip()


def _fill_summaries(ns: Namespace, limit: int = 16) -> None:
    """Summaries bottom-up for zones that have none: label words plus frequent terms."""
    wanted = {z for z, node in ns.zones.items() if not node.summary and z != ROOT}
    if not wanted:
        return
    # per zone, in how many texts of the tools in or below it each word occurs: each text
    # is tokenised once, counted in its own zone, and each zone's counts added up its path
    own: dict[str, Counter[str]] = {}
    for tool in ns.tools.values():
        counts = own.get(tool.zone)
        if counts is None:
            counts = own[tool.zone] = Counter()
        counts.update(set(tokenize(f"{tool.name} {tool.description}")))
    below: dict[str, Counter[str]] = {z: Counter() for z in wanted}
    for zone, counts in own.items():
        for z in ns.path(zone):
            if z in below:
                below[z].update(counts)
    for name, node in ns.zones.items():
        if name in wanted:
            head = name.split(".")[0].replace("-", " ")
            node.summary = summarise((), head=head, limit=limit, counts=below[name])


# -------------------------------------------------------------------- catalogue


@gc_paused()
def from_catalog(
    path: str | Path,
    queries: str | Path | None = None,
    limit: int | None = None,
    protocols: Iterable[str] | None = None,
) -> Namespace:
    """Build the tree from a catalogue JSONL (and optionally a query JSONL with truth)."""
    path = Path(path)
    wanted = set(protocols) if protocols else set(SERVICES)
    # per kept row only what the tree needs (not the parsed row): id, name, description,
    # protocol, path labels, whether the path has a subcategory, slug, organisation
    rows: list[tuple[str, str, str, str, list[str], bool, str, str]] = []
    shared: dict[str, str] = {}  # one string object per distinct protocol / organisation
    labels: dict[str, str] = {}  # path entry -> its DNS label (few distinct)
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
                org = _org_of(row)
                rows.append((row["id"], row["name"], row["description"],
                             shared.setdefault(row["protocol"], row["protocol"]),
                             [labels.get(x) or labels.setdefault(x, zone_label(x))
                              for x in row["path"][:2]], len(row["path"]) > 1,
                             dns_label(row.get("slug") or row["name"]),
                             shared.setdefault(org, org)))
            if limit is not None and len(rows) >= limit:
                break
    zones: dict[str, ZoneNode] = {ROOT: ZoneNode(ROOT, children=[TLD]), TLD: ZoneNode(TLD)}
    has_sub = {r[4][0] for r in rows if r[5]}
    tools: dict[str, Tool] = {}
    for tid, name, description, service, labels, _, slug, org in rows:
        if len(labels) == 1 and labels[0] in has_sub:
            labels.append("general")
        zone = TLD
        for label in labels:
            child = f"{label}.{zone}"
            node = zones.get(child)
            if node is None:
                node = zones[child] = ZoneNode(child)
                zones[zone].children.append(child)
            zone = node.name  # the zone's own string, shared by its tools
        tools[tid] = Tool(id=tid, name=name, description=description, service=service,
                          zone=zone, slug=slug, org=org)
    del rows
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
    """Suffix ``-2``, ``-3`` … to slugs taken in their zone (in id order), so targets are
    unique. (Slugs are DNS labels: a target is taken iff its slug is taken in its zone.)"""
    seen: dict[str, set[str]] = {}  # zone -> slugs
    for tid in sorted(tools):
        tool = tools[tid]
        taken = seen.get(tool.zone)
        if taken is None:
            taken = seen[tool.zone] = set()
        slug, n = tool.slug, 1
        while slug in taken:
            n += 1
            slug = f"{tool.slug[:58]}-{n}"
        tool.slug = slug
        taken.add(slug)


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
_SPILL = 0.9  # share of a syllable count's words taken before longer words are drawn


def _below(getrandbits: Callable[[int], int], n: int) -> int:
    """``random.Random._randbelow(n)`` (rejection over ``n.bit_length()`` bits): the very
    same draws, without the method look-ups (``choice``, ``sample``, ``shuffle`` use it)."""
    k = n.bit_length()
    r = getrandbits(k)
    while r >= n:
        r = getrandbits(k)
    return r


class _Words:
    """Unique pronounceable pseudo-words (consonant-vowel syllables) from a seeded RNG.

    Letters are drawn as ``rng.choice`` would draw them, again while the word is taken.
    Once the words of ``s`` syllables are used up to ``spill`` of all of them, a request
    for ``s`` syllables gets ``s + 1`` (and so on), so the generator never runs dry;
    :func:`synthetic` passes ``spill=1`` when its demand fits in the word space, which
    keeps the draws of every namespace that the generator without spilling could build.
    """

    def __init__(self, rng: random.Random, spill: float = 1.0, consonants: str = _CONS,
                 vowels: str = _VOWELS) -> None:
        self.getrandbits = rng.getrandbits
        self.seen: set[str] = {"general", "tools", "root-servers"}
        self.taken: Counter[int] = Counter()  # words handed out, by syllables
        self.limits: dict[int, int] = {}
        self.spill = spill
        self.syllables = [c + v for c in consonants for v in vowels]  # index c * |V| + v
        self.nc, self.nv = len(consonants), len(vowels)

    def limit(self, syllables: int) -> int:
        """How many words of ``syllables`` syllables are handed out before spilling."""
        space = (self.nc * self.nv) ** syllables
        return space if self.spill >= 1.0 else max(1, int(self.spill * space))

    def __call__(self, syllables: int = 3) -> str:
        limits = self.limits
        while self.taken[syllables] >= (limits.get(syllables)
                                        or limits.setdefault(syllables, self.limit(syllables))):
            syllables += 1
        getrandbits, table, seen = self.getrandbits, self.syllables, self.seen
        nc, nv = self.nc, self.nv
        kc, kv = nc.bit_length(), nv.bit_length()
        while True:
            parts = []
            for _ in range(syllables):  # inlined _below(nc), then _below(nv)
                c = getrandbits(kc)
                while c >= nc:
                    c = getrandbits(kc)
                v = getrandbits(kv)
                while v >= nv:
                    v = getrandbits(kv)
                parts.append(table[c * nv + v])
            word = "".join(parts)
            if word not in seen:
                seen.add(word)
                self.taken[syllables] += 1
                return word


def _word_demand(n_tools: int, branching: int, depth: int, n_orgs: int, org_tools: int,
                 words_per_zone: int) -> dict[int, int]:
    """Words :func:`synthetic` asks :class:`_Words` for, by syllables."""
    zones = sum(branching**level for level in range(1, depth + 1))
    return {2: 40 + max(4, n_tools // 50) + n_orgs,
            3: words_per_zone * zones + n_tools + n_orgs * (org_tools + words_per_zone - 1)}


@gc_paused()
def synthetic(
    n_tools: int = 1000,
    branching: int = 4,
    depth: int = 2,
    seed: int = 0,
    n_orgs: int = 0,
    org_tools: int = 5,
    n_queries: int = 200,
    words_per_zone: int = 5,
    _letters: tuple[str, str] = (_CONS, _VOWELS),
) -> Namespace:
    """A balanced tree with known truth; see the module docstring. (``_letters`` shrinks
    the word space, for tests.)"""
    if branching < 1 or depth < 1 or n_tools < 1:
        raise ValueError("branching, depth and n_tools must be positive")
    rng = random.Random(seed)
    getrandbits = rng.getrandbits
    demand = _word_demand(n_tools, branching, depth, n_orgs, org_tools, words_per_zone)
    syllables = len(_letters[0]) * len(_letters[1])
    fits = all(n <= syllables**s for s, n in demand.items())
    word = _Words(rng, 1.0 if fits else _SPILL, *_letters)  # if not, spill into longer words
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
    cum_weights = list(itertools.accumulate([0.4, 0.1, 0.3, 0.2]))  # as rng.choices has them
    total = cum_weights[-1] + 0.0
    ports = [443, 8080, 8443, 3000]
    tools: dict[str, Tool] = {}
    publishers = [word(2) for _ in range(max(4, n_tools // 50))]
    levels_of: dict[str, tuple[list[str], list[list[str]]]] = {}  # zone -> own, above

    def path_vocab(zone: str) -> list[list[str]]:
        out, z = [], zone
        while z != TLD:
            out.append(vocab[z])
            z = z.split(".", 1)[1]
        return out[::-1]

    bits = [m.bit_length() for m in range(max(64, words_per_zone + 1))]
    n_noise = len(noise)
    noise_bits = bits[n_noise]

    def make_tool(i: int, zone: str, org: str, extra: list[str]) -> Tool:
        """The draws of ``own = word()``, ``rng.sample(own level's words, min(3, n))``,
        one ``rng.choice`` per level above, ``rng.sample(noise, 3)``, ``rng.shuffle`` of the
        words, ``rng.choices(services, weights)`` and ``rng.choice(ports)``, inlined: each
        ``r = getrandbits(b); while r >= m: ...`` is ``rng._randbelow(m)`` (see _below)."""
        gb = getrandbits
        own = word()
        if zone not in levels_of:
            levels = path_vocab(zone)
            levels_of[zone] = (levels[-1], levels[:-1])
        last, above = levels_of[zone]
        words = [own, *extra]
        n = len(last)
        if n <= 21:  # rng.sample's partial Fisher-Yates on a copy (a list beats a set)
            pool = last.copy()
            for t in range(min(3, n)):
                m = n - t
                b = bits[m]
                r = gb(b)
                while r >= m:
                    r = gb(b)
                words.append(pool[r])
                pool[r] = pool[m - 1]
        else:
            words += _sample(gb, last, 3)
        for v in above:  # rng.choice(v)
            m = len(v)
            b = bits[m]
            r = gb(b)
            while r >= m:
                r = gb(b)
            words.append(v[r])
        b = noise_bits  # rng.sample(noise, 3): redraw while taken (a set, as 40 > 21)
        r1 = gb(b)
        while r1 >= n_noise:
            r1 = gb(b)
        r2 = gb(b)
        while r2 >= n_noise or r2 == r1:
            r2 = gb(b)
        r3 = gb(b)
        while r3 >= n_noise or r3 in (r1, r2):
            r3 = gb(b)
        words += (noise[r1], noise[r2], noise[r3])
        for j in range(len(words) - 1, 0, -1):  # rng.shuffle
            m = j + 1
            b = bits[m]
            r = gb(b)
            while r >= m:
                r = gb(b)
            words[j], words[r] = words[r], words[j]
        service = services[bisect.bisect(cum_weights, rng.random() * total, 0, 3)]
        r = gb(3)  # rng.choice(ports)
        while r >= 4:
            r = gb(3)
        tid = f"t{i:07d}"
        tool = tools[tid] = Tool(id=tid, name=own, description=" ".join(words),
                                 service=service, zone=zone, slug=own, org=org,
                                 port=ports[r])
        return tool

    n_pub = len(publishers)
    for i in range(n_tools):
        zone = leaves[i % len(leaves)]
        make_tool(i, zone, publishers[_below(getrandbits, n_pub)], [])  # rng.choice first
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
            make_tool(len(tools), zone, org, [org])
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


def _sample(getrandbits: Callable[[int], int], population: list[str], k: int) -> list[str]:
    """``rng.sample(population, k)`` for ``k <= 5`` (CPython's algorithm, same draws)."""
    n = len(population)
    if not 0 <= k <= min(n, 5):
        raise ValueError("sample larger than population or above 5")
    if n <= 21:  # a list is smaller than a set: partial Fisher-Yates on a copy
        pool = list(population)
        out = []
        for i in range(k):
            j = _below(getrandbits, n - i)
            out.append(pool[j])
            pool[j] = pool[n - i - 1]
        return out
    chosen: list[int] = []
    for _ in range(k):
        j = _below(getrandbits, n)
        while j in chosen:
            j = _below(getrandbits, n)
        chosen.append(j)
    return [population[j] for j in chosen]


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
