"""The beam and merge policy, one implementation for the resolver and the retrieval
evaluator (sim.retrieval.hierarchy): how a walk narrows each level (:class:`Descent`: the
beam shared out per branch, the global beam's best B, A2X's child selection), the merge of
the reached leaves' lists (round-robin in walk order, or by score), and the table of merge
policies a resolver names (:data:`MERGES`, ``ResolverConfig.merge``). Generic over the
items walked and merged: zones and endpoints, or tool IDs."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar, cast

import numpy as np
from mypy_extensions import mypyc_attr

T = TypeVar("T")


def narrow(children: Sequence[T], width: int) -> list[tuple[T, int]]:
    """The best ``width`` children, sharing the width so no level holds more branches."""
    chosen = list(children)[:width]
    return [(c, width // len(chosen) + int(i < width % len(chosen)))
            for i, c in enumerate(chosen)]


def best(pool: Sequence[tuple[T, float]], width: int) -> list[T]:
    """The global beam: the ``width`` best-scored of a level's (child, score) pool; ties keep
    the order they were learnt in."""
    chosen = sorted(range(len(pool)), key=lambda i: (-pool[i][1], i))[:width]
    return [pool[i][0] for i in chosen]


#: How a walk may narrow each level (``ResolverConfig.search``, ``schemes[].search``): name
#: -> meaning. :class:`Descent` carries each out; a new one is an entry here and its branch
#: in :meth:`Descent.step` (and :meth:`Descent.end`).
SEARCHES: dict[str, str] = {
    "split": "each branch shares out its width over its best children (Algorithm 1)",
    "global": "the best B children of each level over all its zones, by the servers' scores",
    "a2x-get_one": "A2X (seed 001): descend into the best-scored child",
    "a2x-get_important": "A2X: every child of min-max normalised score >= 0.7, at most 3",
    "a2x-get_all": "A2X: every child of min-max normalised score >= 0.4",
}


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Descent:
    """How a walk narrows each level, the one implementation the resolver's walk
    (:class:`nodes.resolver.walk._Walk`) and the evaluator's in-process walk
    (``sim.retrieval.hierarchy``) call: ``search`` (``ResolverConfig.search``) ``split``
    shares each branch's width out over the best children a zone refers (Algorithm 1,
    :func:`narrow`); ``global`` pools the children of a whole level with their scores and
    keeps the best ``width`` (:func:`best`, at :meth:`end`); ``a2x-POLICY`` descends into
    every child A2X's policy selects from each zone's scored children (:func:`select`)."""

    def __init__(self, search: str, width: int) -> None:
        if search not in SEARCHES:
            raise ValueError(f"search: unknown {search!r} (one of {', '.join(SEARCHES)})")
        self.search = search
        self.width = max(1, width)
        self.pooled = search == "global"
        self.policy = search[4:] if search.startswith("a2x-") else None
        self.scored = self.pooled or self.policy is not None  # children come with scores

    def step(self, children: Sequence[T] | Sequence[tuple[T, float]], width: int,
             pool: list[tuple[T, float]]) -> list[tuple[T, int]]:
        """The branches to walk next from one zone's referred children, best first (``(child,
        score)`` pairs when :attr:`scored`), ``width`` the zone's share of the beam; a
        global search adds them to the level's ``pool`` instead (:meth:`end` chooses)."""
        if self.scored:  # (child, score) pairs
            scored = cast(Sequence[tuple[T, float]], children)
            if self.pooled:
                pool.extend(scored)
                return []
            if not scored:
                return []
            scores = np.array([s for _, s in scored], dtype=np.float64)
            return [(scored[i][0], 1) for i in select(scores, self.policy or "get_one")]
        return narrow(cast(Sequence[T], children), width)  # split: the children

    def end(self, pool: Sequence[tuple[T, float]]) -> list[tuple[T, int]]:
        """The branches a level adds once all its zones are done: a global search's best
        ``width`` of the pool (ties keep the order they were learnt in), else none."""
        return [(c, 1) for c in best(pool, self.width)] if self.pooled else []


def wire_score(score: float) -> float:
    """A score as the scores option carries it (float32), so that comparisons made from
    computed scores order exactly as the resolver's, made from the option, do."""
    return float(np.float32(score))


def select(scores: np.ndarray, policy: str) -> list[int]:
    """A2X's child selection over scored children, best first (ties by position):
    ``get_one`` (the best), ``get_important`` (min-max normalised score ≥ 0.7, at most 3) or
    ``get_all`` (normalised score ≥ 0.4); the names are checked where a method is parsed
    (``sim.evalspec.POLICIES``)."""
    order: list[int] = np.lexsort((np.arange(len(scores)), -scores)).tolist()
    if policy == "get_one" or len(scores) == 1:
        return order[:1]
    lo, hi = float(scores.min()), float(scores.max())
    norm = (scores - lo) / (hi - lo) if hi > lo else np.ones_like(scores)
    if policy == "get_important":
        return [i for i in order if norm[i] >= 0.7][:3]
    if policy == "get_all":
        return [i for i in order if norm[i] >= 0.4]
    raise ValueError(f"unknown policy {policy!r}")


def round_robin(lists: Sequence[Sequence[T]], k: int,
                key: Callable[[T], Hashable] | None = None) -> list[T]:
    """Round-robin over the leaves' lists in walk order, de-duplicated (by ``key``, else
    the item), cut to K (K = 0: all)."""
    merged: list[T] = []
    seen: set[Hashable] = set()
    for i in range(max((len(x) for x in lists), default=0)):
        for lst in lists:
            if i < len(lst):
                item = lst[i]
                ident = item if key is None else key(item)
                if ident not in seen:
                    seen.add(ident)
                    merged.append(item)
    return merged if k == 0 else merged[:k]


def score_merge(lists: Sequence[Sequence[T]], scores: Sequence[Sequence[float]], k: int,
                key: Callable[[T], Hashable] | None = None) -> list[T]:
    """The leaves' lists merged by score (``scores[i][r]`` is ``lists[i][r]``'s), best
    first (ties: walk order, then rank), de-duplicated (by ``key``, else the item), cut to
    K (K = 0: all)."""
    items = sorted((-scores[o][r], o, r) for o, lst in enumerate(lists) for r in range(len(lst)))
    merged: list[T] = []
    seen: set[Hashable] = set()
    for _, o, r in items:
        item = lists[o][r]
        ident = item if key is None else key(item)
        if ident not in seen:
            seen.add(ident)
            merged.append(item)
    return merged if k == 0 else merged[:k]


class Merge(Protocol):
    """A merge: the leaves' lists in walk order, their scores (``scores[i][r]`` is
    ``lists[i][r]``'s; None when the servers were not asked for any), K (0: all) and the
    de-duplication key (None: the item) → one de-duplicated list cut to K."""

    def __call__(self, lists: Sequence[Sequence[T]], scores: Sequence[Sequence[float]] | None,
                 k: int, key: Callable[[T], Hashable] | None = None) -> list[T]: ...


@dataclass(frozen=True, slots=True)
class MergePolicy:
    """A named merge policy: its merge, and whether the resolver must ask the servers for
    scores (the scores option) so that the merge gets them."""

    merge: Merge
    wants_scores: bool = False

    def __reduce__(self) -> tuple[type[MergePolicy], tuple[Merge, bool]]:
        # by its fields: compiled by mypyc, a frozen dataclass is not restored field by field
        return (MergePolicy, (self.merge, self.wants_scores))

    def __call__(self, lists: Sequence[Sequence[T]], scores: Sequence[Sequence[float]] | None,
                 k: int, key: Callable[[T], Hashable] | None = None) -> list[T]:
        return self.merge(lists, scores, k, key)


def _by_score_if_sent(lists: Sequence[Sequence[T]], scores: Sequence[Sequence[float]] | None,
                      k: int, key: Callable[[T], Hashable] | None = None) -> list[T]:
    """By score when there are scores, else round-robin."""
    if scores is None:
        return round_robin(lists, k, key)
    return score_merge(lists, scores, k, key)


def _round_robin(lists: Sequence[Sequence[T]], scores: Sequence[Sequence[float]] | None,
                 k: int, key: Callable[[T], Hashable] | None = None) -> list[T]:
    """Round-robin, whatever scores came."""
    return round_robin(lists, k, key)


#: The merge policies a resolver (``ResolverConfig.merge``) and a scenario's DNS scheme
#: (``schemes[].merge``) may name. ``auto``: by score when the servers send scores (global
#: search), else round-robin; ``score``: ask for scores and merge by them; ``round-robin``:
#: round-robin even when scores came.
MERGES: dict[str, MergePolicy] = {
    "auto": MergePolicy(_by_score_if_sent),
    "score": MergePolicy(_by_score_if_sent, wants_scores=True),
    "round-robin": MergePolicy(_round_robin),
}
