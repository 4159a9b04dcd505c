"""The beam and merge policy, one implementation for the resolver and the retrieval
evaluator (sim.retrieval.hierarchy): narrowing a level to the beam, the global beam's best
B, A2X's child selection, and the merge of the reached leaves' lists (round-robin in walk
order, or by score), and the table of merge policies a resolver names
(:data:`MERGES`, ``ResolverConfig.merge``). Generic over the items merged: endpoints, or tool
IDs."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

import numpy as np

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
