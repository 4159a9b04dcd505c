"""Unique pronounceable pseudo-words, the vocabulary of the synthetic namespace."""

from __future__ import annotations

import random
from collections import Counter
from typing import Protocol

CONS = "bcdfghjklmnprstvz"
VOWELS = "aeiou"


class Vocabulary(Protocol):
    """The roles :func:`topologies.synthetic.synthetic` draws words for, in its fixed order:
    :class:`Words` (pseudo-words) and :class:`topologies.readable.ReadableWords`."""

    def noise(self) -> str: ...
    def publisher(self) -> str: ...
    def org(self) -> str: ...
    def zone_words(self, parent: str | None, k: int) -> list[str]: ...
    def tool_name(self, zone_words: list[str]) -> str: ...
    def describe(self, name: str, words: list[str]) -> str: ...
    def intent(self, path: list[str], name: str) -> str: ...


class Words:
    """Unique pronounceable pseudo-words (consonant-vowel syllables) from a seeded RNG.

    Letters are drawn as ``rng.choice`` would draw them, again while the word is taken.
    Once the words of ``s`` syllables are used up to ``spill`` of all of them, a request
    for ``s`` syllables gets ``s + 1`` (and so on), so the generator never runs dry;
    :func:`topologies.synthetic.synthetic` passes ``spill=1`` when its demand fits in the
    word space, which keeps the draws of every namespace that the generator without
    spilling could build.
    """

    def __init__(self, rng: random.Random, spill: float = 1.0, consonants: str = CONS,
                 vowels: str = VOWELS) -> None:
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
            for _ in range(syllables):  # inlined draws.below(nc), then below(nv)
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

    def noise(self) -> str:
        """A shared filler word (two syllables)."""
        return self(2)

    publisher = org = noise

    def zone_words(self, parent: str | None, k: int) -> list[str]:
        """``k`` words of a new zone (``parent`` plays no part in pseudo-words)."""
        return [self() for _ in range(k)]

    def tool_name(self, zone_words: list[str]) -> str:
        """A tool's name: a fresh word."""
        return self()

    @staticmethod
    def describe(name: str, words: list[str]) -> str:
        """A tool's description: its words as drawn."""
        return " ".join(words)

    @staticmethod
    def intent(path: list[str], name: str) -> str:
        """An intent: one word per zone level, then the tool's name."""
        return " ".join([*path, name])
