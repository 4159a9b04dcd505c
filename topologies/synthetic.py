"""The synthetic namespace: N tools over a tree of branching factor b and depth d.

Every zone has its own vocabulary so semantic pruning is meaningful and the truth is known;
certified organisations get logical subdomains (``hku.weather.tools``) beside public
branches. One seeded ``random.Random`` makes every draw, in a fixed order (see
:func:`synthetic`): equal arguments give equal namespaces, byte for byte.
"""

from __future__ import annotations

import bisect
import itertools
import random
from collections.abc import Callable, Iterator, Sequence
from typing import overload

from nodes.dns.wire import SERVICES
from topologies.addresses import assign_endpoints
from topologies.draws import below, sample
from topologies.gcpause import gc_paused
from topologies.namespace import ROOT, TLD, Namespace, Query, Tool, ZoneNode
from topologies.ondemand import OnDemand
from topologies.readable import ReadableWords
from topologies.words import CONS, VOWELS, Vocabulary, Words

SPILL = 0.9  # share of a syllable count's words taken before longer words are drawn
_N_NOISE = 40  # shared filler words
_SERVICES = list(SERVICES)
_CUM_WEIGHTS = list(itertools.accumulate([0.4, 0.1, 0.3, 0.2]))  # as rng.choices has them
_TOTAL = _CUM_WEIGHTS[-1] + 0.0
_PORTS = [443, 8080, 8443, 3000]


def word_demand(n_tools: int, branching: int, depth: int, n_orgs: int, org_tools: int,
                words_per_zone: int) -> dict[int, int]:
    """Words :func:`synthetic` asks :class:`Words` for, by syllables."""
    zones = sum(branching**level for level in range(1, depth + 1))
    return {2: _N_NOISE + max(4, n_tools // 50) + n_orgs,
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
    vocabulary: str = "pseudo",
    _letters: tuple[str, str] = (CONS, VOWELS),
) -> Namespace:
    """A balanced tree with known truth; see the module docstring. ``vocabulary``:
    ``pseudo`` (pronounceable pseudo-words) or ``readable`` (domains, nouns and capability
    verbs of :mod:`topologies.readable`). (``_letters`` shrinks the word space, for tests.)

    The draws, in order: the noise words, each zone's words (breadth-first), the
    publishers, each public tool, each organisation with its tools, then the queries.
    """
    if branching < 1 or depth < 1 or n_tools < 1:
        raise ValueError("branching, depth and n_tools must be positive")
    if vocabulary not in ("pseudo", "readable"):
        raise ValueError(f"vocabulary {vocabulary!r}: must be pseudo or readable")
    rng = random.Random(seed)
    demand = word_demand(n_tools, branching, depth, n_orgs, org_tools, words_per_zone)
    syllables = len(_letters[0]) * len(_letters[1])
    fits = all(n <= syllables**s for s, n in demand.items())
    word: Vocabulary = (ReadableWords(rng) if vocabulary == "readable"  # spill if not fits
                        else Words(rng, 1.0 if fits else SPILL, *_letters))
    build = _Builder(rng, word, words_per_zone)
    build.grow(branching, depth)
    build.public_tools(n_tools)
    build.organisations(n_orgs, org_tools, nested=depth > 1)
    ns = build.namespace(f"synthetic(n={n_tools},b={branching},d={depth},seed={seed})")
    build.add_queries(ns, n_queries)
    return ns


def path_vocab(vocab: dict[str, list[str]], zone: str) -> list[list[str]]:
    """The words of each zone from the top level down to ``zone``."""
    out, z = [], zone
    while z != TLD:
        out.append(vocab[z])
        z = z.split(".", 1)[1]
    return out[::-1]


class _Builder:
    """The tree :func:`synthetic` grows, one step per method, every draw from ``rng``."""

    def __init__(self, rng: random.Random, word: Vocabulary, words_per_zone: int) -> None:
        self.rng = rng
        self.getrandbits = rng.getrandbits
        self.word = word
        self.words_per_zone = words_per_zone
        self.noise = [word.noise() for _ in range(_N_NOISE)]  # shared filler vocabulary
        self.zones: dict[str, ZoneNode] = {ROOT: ZoneNode(ROOT, children=[TLD]),
                                           TLD: ZoneNode(TLD)}
        self.vocab: dict[str, list[str]] = {TLD: []}
        self.leaves: list[str] = []
        self.tools: dict[str, Tool] = {}
        self.levels_of: dict[str, tuple[list[str], list[list[str]]]] = {}  # zone -> own, above
        self.bits = [m.bit_length() for m in range(max(64, words_per_zone + 1))]

    def grow(self, branching: int, depth: int) -> None:
        """The public zones, breadth-first, each named by the first of its own words."""
        zones, vocab, word = self.zones, self.vocab, self.word
        frontier = [TLD]
        for _ in range(depth):
            nxt = []
            for parent_zone in frontier:
                for _ in range(branching):
                    parent = None if parent_zone == TLD else vocab[parent_zone][0]
                    words = word.zone_words(parent, self.words_per_zone)
                    child = f"{words[0]}.{parent_zone}"
                    zones[child] = ZoneNode(child)
                    zones[parent_zone].children.append(child)
                    vocab[child] = words
                    nxt.append(child)
            frontier = nxt
        self.leaves = frontier

    def public_tools(self, n_tools: int) -> None:
        """``n_tools`` tools round-robin over the leaves, each by a drawn publisher."""
        publishers = [self.word.publisher() for _ in range(max(4, n_tools // 50))]
        leaves, getrandbits = self.leaves, self.getrandbits
        n_pub = len(publishers)
        for i in range(n_tools):
            zone = leaves[i % len(leaves)]
            self.make_tool(i, zone, publishers[below(getrandbits, n_pub)], [])  # choice first

    def organisations(self, n_orgs: int, org_tools: int, nested: bool) -> None:
        """Certified organisations with logical subdomains beside public branches; when not
        ``nested`` (depth 1) the top-level zones are leaves themselves, so org zones sit
        beside them under ``tools.``."""
        zones, word = self.zones, self.word
        top = list(zones[TLD].children)
        for o in range(n_orgs):
            org = word.org()
            branch = top[o % len(top)] if nested else TLD
            zone = f"{org}.{branch}"
            zones[zone] = ZoneNode(zone, org=org)
            zones[branch].children.append(zone)
            above = None if branch == TLD else self.vocab[branch][0]
            self.vocab[zone] = [org, *word.zone_words(above, self.words_per_zone - 1)]
            for _ in range(org_tools):
                self.make_tool(len(self.tools), zone, org, [org])

    def namespace(self, origin: str) -> Namespace:
        """The namespace: tools listed in their zones, summaries, endpoint addresses."""
        zones, vocab = self.zones, self.vocab
        for tool in self.tools.values():
            zones[tool.zone].tools.append(tool.id)
        for name, node in zones.items():  # summary: own words plus a few words of each child
            if name in (ROOT, TLD):
                continue
            kids = [vocab[c][1] for c in node.children]
            node.summary = " ".join(vocab[name] + kids)
        zones[TLD].summary = "tools"
        ns = Namespace(zones=zones, tools=self.tools, queries=[], origin=origin)
        assign_endpoints(ns)
        return ns

    def add_queries(self, ns: Namespace, n_queries: int) -> None:
        """The queries, drawn on demand (:class:`DrawnQueries`): the last draws of ``rng``."""
        ns.queries = DrawnQueries(self.rng.getstate(), n_queries, self.tools, self.vocab,
                                  self.word.intent)

    def path_vocab(self, zone: str) -> list[list[str]]:
        """The words of each zone from the top level down to ``zone``."""
        return path_vocab(self.vocab, zone)

    def make_tool(self, i: int, zone: str, org: str, extra: list[str]) -> Tool:
        """The draws of ``own = word()``, ``rng.sample(own level's words, min(3, n))``,
        one ``rng.choice`` per level above, ``rng.sample(noise, 3)``, ``rng.shuffle`` of the
        words, ``rng.choices(services, weights)`` and ``rng.choice(ports)``, inlined: each
        ``r = getrandbits(b); while r >= m: ...`` is ``rng._randbelow(m)`` (see draws)."""
        gb, bits, noise = self.getrandbits, self.bits, self.noise
        levels_of = self.levels_of
        if zone not in levels_of:
            levels = self.path_vocab(zone)
            levels_of[zone] = (levels[-1], levels[:-1])
        last, above = levels_of[zone]
        own = self.word.tool_name(last)
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
            words += sample(gb, last, 3)
        for v in above:  # rng.choice(v)
            m = len(v)
            b = bits[m]
            r = gb(b)
            while r >= m:
                r = gb(b)
            words.append(v[r])
        n_noise = len(noise)
        b = bits[n_noise]  # rng.sample(noise, 3): redraw while taken (a set, as 40 > 21)
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
        service = _SERVICES[bisect.bisect(_CUM_WEIGHTS, self.rng.random() * _TOTAL, 0, 3)]
        r = gb(3)  # rng.choice(ports)
        while r >= 4:
            r = gb(3)
        tid = f"t{i:07d}"
        tool = self.tools[tid] = Tool(id=tid, name=own, description=self.word.describe(own, words),
                                      service=service, zone=zone, slug=own, org=org,
                                      port=_PORTS[r])
        return tool


class DrawnQueries(OnDemand[Query]):
    """A synthetic namespace's queries, drawn when they are read, always the same ones.

    Each query names a drawn tool: one drawn word of each zone on its path, then its name.
    The generator's state before the first query is kept, and every read draws the queries
    again from a copy of it: the same draws in the same order as drawing them all at once.
    Reading in order (iteration, :meth:`take`) holds one query at a time, so a run whose
    pool is a few thousand of 10^6 drawn queries does not hold all of them (~250 bytes
    each); indexing draws them all once and keeps them.
    """

    def __init__(self, state: tuple, n: int, tools: dict[str, Tool],
                 vocab: dict[str, list[str]], intent: Callable[[list[str], str], str]) -> None:
        self._state, self._n, self._tools = state, n, tools
        self._vocab, self._intent = vocab, intent  # zone -> its words; a static method
        self._ids = sorted(tools)
        self._all: list[Query] | None = None

    def _draw(self) -> Iterator[Query]:
        rng = random.Random()
        rng.setstate(self._state)
        tools, ids, vocab, intent = self._tools, self._ids, self._vocab, self._intent
        for q in range(self._n):
            tool = tools[ids[rng.randrange(len(ids))]]
            path = [rng.choice(v) for v in path_vocab(vocab, tool.zone)]
            yield Query(id=f"g{q}", text=intent(path, tool.name), service=tool.service,
                        truth=(tool.id,), source="generated")

    def __len__(self) -> int:
        return self._n

    def __iter__(self) -> Iterator[Query]:
        return iter(self._all) if self._all is not None else self._draw()

    @overload
    def __getitem__(self, i: int) -> Query: ...
    @overload
    def __getitem__(self, i: slice) -> list[Query]: ...
    def __getitem__(self, i: int | slice) -> Query | list[Query]:
        if self._all is None:
            self._all = list(self._draw())
        return self._all[i]

    def take(self, indices: Sequence[int]) -> list[Query]:
        """The queries at ``indices``, in that order; the others are drawn only to pass."""
        want = set(indices)
        if want and (min(want) < 0 or max(want) >= self._n):
            raise IndexError(f"query index out of range 0..{self._n - 1}")
        last = max(want, default=-1)
        found: dict[int, Query] = {}
        for i, q in enumerate(self):
            if i > last:
                break
            if i in want:
                found[i] = q
        return [found[i] for i in indices]
