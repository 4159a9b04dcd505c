"""Readable words for synthetic namespaces: capability verbs and nouns grouped by domain.

:class:`ReadableWords` is the ``namespace.vocabulary: readable`` counterpart of
:class:`topologies.words.Words`, with the same roles (:func:`topologies.synthetic.synthetic`
asks both alike): top-level zones are named by a domain (``weather``), zones below by one of
its nouns (``rainfall.weather.tools``), tools by a verb, a qualifier and a noun of their
zone (``forecast-hourly-rainfall``).
Every draw comes from the seeded RNG it is given. When a list runs out, words spill into
compounds with filler words (``live-radar``), tool names into longer ones
(``forecast-hourly-recent-rainfall``), and past
those into a numbered suffix, so the generator never runs dry; every word is a DNS label.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from topologies.draws import below

VOCABULARY = Path(__file__).with_name("vocabulary.txt")
TRIES = 48  # draws of one shape before the next, longer shape
MAX_LABEL = 63


@dataclass(frozen=True)
class Domain:
    """One line of the word list: a domain's name, its verbs and its nouns."""

    name: str
    verbs: tuple[str, ...]
    nouns: tuple[str, ...]


@dataclass(frozen=True)
class WordList:
    """The parsed word list: the domains, the filler words, the qualifiers of tool names,
    the makers (publishers)."""

    domains: tuple[Domain, ...]
    filler: tuple[str, ...]
    qualifiers: tuple[str, ...]
    makers: tuple[str, ...]


@cache
def word_list(path: Path = VOCABULARY) -> WordList:
    """The word list at ``path``: ``domain: verbs | nouns`` lines, then ``filler:``,
    ``qualifiers:`` and ``makers:``."""
    domains: list[Domain] = []
    special: dict[str, tuple[str, ...]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        key, _, rest = line.partition(":")
        if "|" in rest:
            verbs, _, nouns = rest.partition("|")
            domains.append(Domain(key.strip(), tuple(verbs.split()), tuple(nouns.split())))
        else:
            special[key.strip()] = tuple(rest.split())
    return WordList(tuple(domains), special["filler"], special["qualifiers"],
                    special["makers"])


class ReadableWords:
    """Unique readable words by role, every draw from ``rng`` (see the module docstring)."""

    def __init__(self, rng: random.Random, words: WordList | None = None) -> None:
        self.getrandbits = rng.getrandbits
        self.words = words or word_list()
        self.seen: set[str] = {"general", "tools", "root-servers"}
        self.domain_of: dict[str, int] = {}  # zone word -> index of its domain
        self.unused = list(range(len(self.words.domains)))  # domains not yet at the top
        self.numbered = 0

    def pick(self, options: tuple[str, ...]) -> str:
        return options[below(self.getrandbits, len(options))]

    def unique(self, shapes: list[list[tuple[str, ...]]]) -> str:
        """A word not handed out yet: one draw from each list of a shape, joined by ``-``;
        ``TRIES`` draws per shape, then the next shape, then a numbered suffix."""
        for shape in shapes:
            for _ in range(TRIES):
                word = "-".join(self.pick(options) for options in shape)
                if word not in self.seen and len(word) <= MAX_LABEL:
                    self.seen.add(word)
                    return word
        self.numbered += 1
        word = f"{'-'.join(self.pick(options) for options in shapes[0])}-{self.numbered}"
        self.seen.add(word)
        return word

    def noise(self) -> str:
        """A shared filler word of tool descriptions (``secure``, ``hourly``)."""
        f = self.words.filler
        return self.unique([[f], [f, f], [f, f, f]])

    def publisher(self) -> str:
        """A publisher or organisation name (``acme``, then ``acme-cloud``)."""
        m, f = self.words.makers, self.words.filler
        return self.unique([[m], [m, f], [m, f, f]])

    org = publisher

    def zone_words(self, parent: str | None, k: int) -> list[str]:
        """``k`` words of a new zone, the first naming it: a domain under ``tools.``
        (``parent`` None), else nouns of the parent's domain."""
        if not k:
            return []
        domains, f = self.words.domains, self.words.filler
        if parent is None:
            d = self.unused.pop(below(self.getrandbits, len(self.unused))) if self.unused \
                else below(self.getrandbits, len(domains))
            name = domains[d].name
            first = self.unique([[(name,)], [(name,), domains[d].nouns], [(name,), f, f]])
            words = [first]
        else:
            d = self.domain_of.get(parent, 0)
            words = []
        nouns = domains[d].nouns
        while len(words) < k:
            words.append(self.unique([[nouns], [f, nouns], [f, f, nouns]]))
        for w in words:
            self.domain_of[w] = d
        return words

    def tool_name(self, zone_words: list[str]) -> str:
        """A tool's name and label: a verb of its zone's domain, a qualifier and one of the
        zone's own words (``forecast-hourly-rainfall``), so the name points to its zone and
        the qualifier sets it apart from its neighbours. The domain is that of the first of
        ``zone_words`` that has one (an organisation's own name has none)."""
        d = next((self.domain_of[w] for w in zone_words if w in self.domain_of), 0)
        v, q = self.words.domains[d].verbs, self.words.qualifiers
        n = tuple(w for w in zone_words if w in self.domain_of) or tuple(zone_words[:1])
        return self.unique([[v, q, n], [v, q, q, n], [v, q, q, q, n]])

    @staticmethod
    def describe(name: str, words: list[str]) -> str:
        """A tool's description: its capability, then its other words."""
        return f"{name.replace('-', ' ')}: {' '.join(w for w in words if w != name)}"

    @staticmethod
    def intent(path: list[str], name: str) -> str:
        """An intent for the tool ``name``: the capability, then one word per zone level."""
        return " ".join([name.replace("-", " "), *path])
