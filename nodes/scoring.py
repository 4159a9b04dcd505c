"""Semantic scorers, chosen by name: a server ranks only its own zone's children or tools.

A scorer builds an index over short texts (child summaries, tool descriptions) once and
scores an intent against it. Ranking is deterministic: higher score first, ties broken by
position in the zone's own (sorted) order.

* ``bm25`` (default) — Okapi BM25 via the bm25s library.
* ``tfidf`` — TF-IDF cosine similarity via scikit-learn.
* ``oracle`` — follows the ground truth: an item scores 1 when its key lies on the true
  path of the intent (for pure network studies where retrieval quality must not interfere).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import bm25s
import numpy as np
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, TfidfVectorizer

_TOKEN = re.compile(r"[a-z0-9]+")


def tokenize(text: str) -> list[str]:
    """Lower-case alphanumeric tokens without English stop words or single characters."""
    return [t for t in _TOKEN.findall(text.lower()) if len(t) > 1 and t not in ENGLISH_STOP_WORDS]


class ScoreIndex(Protocol):
    """Scores one intent against every indexed item."""

    def scores(self, intent: str) -> np.ndarray: ...


class Scorer(Protocol):
    """Builds a :class:`ScoreIndex` from item keys (zone names, tool ids) and their texts."""

    name: str

    def index(self, keys: Sequence[str], texts: Sequence[str]) -> ScoreIndex: ...


class _ZeroIndex:
    def __init__(self, n: int) -> None:
        self._n = n

    def scores(self, intent: str) -> np.ndarray:
        return np.zeros(self._n)


class _BM25Index:
    """bm25s computes the BM25 weights; lookups use its per-token columns directly.

    ``bm25s.BM25.get_scores`` spends ~17 µs of Python per call on tiny zone corpora; the
    same sums over the same precomputed weights cost a few µs this way.
    """

    def __init__(self, texts: Sequence[str]) -> None:
        model = bm25s.BM25()
        model.index([tokenize(t) or ["\x00empty"] for t in texts], show_progress=False)
        sc = model.scores
        self._n = int(sc["num_docs"])
        self._columns: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for token, tid in model.vocab_dict.items():
            if tid + 1 >= len(sc["indptr"]):  # bm25s's empty-string token has no column
                continue
            lo, hi = sc["indptr"][tid], sc["indptr"][tid + 1]
            self._columns[token] = (sc["indices"][lo:hi], sc["data"][lo:hi].astype(float))

    def scores(self, intent: str) -> np.ndarray:
        out = np.zeros(self._n)
        for token in tokenize(intent):
            column = self._columns.get(token)
            if column is not None:
                out[column[0]] += column[1]
        return out


class BM25Scorer:
    """Okapi BM25 (bm25s, Lucene variant) over the zone's item texts."""

    name = "bm25"

    def index(self, keys: Sequence[str], texts: Sequence[str]) -> ScoreIndex:
        if not texts:
            return _ZeroIndex(0)
        return _BM25Index(texts)


class _TfidfIndex:
    def __init__(self, texts: Sequence[str]) -> None:
        self._vec = TfidfVectorizer(tokenizer=tokenize, lowercase=False, token_pattern=None)
        self._matrix = self._vec.fit_transform(texts)  # rows are L2-normalised

    def scores(self, intent: str) -> np.ndarray:
        q = self._vec.transform([intent])
        return np.asarray((self._matrix @ q.T).toarray()).ravel()


class TfidfScorer:
    """TF-IDF cosine similarity (scikit-learn) over the zone's item texts."""

    name = "tfidf"

    def index(self, keys: Sequence[str], texts: Sequence[str]) -> ScoreIndex:
        if not any(tokenize(t) for t in texts):
            return _ZeroIndex(len(texts))
        return _TfidfIndex(texts)


class _OracleIndex:
    def __init__(self, keys: Sequence[str], truth: Mapping[str, frozenset[str]]) -> None:
        self._keys = list(keys)
        self._truth = truth

    def scores(self, intent: str) -> np.ndarray:
        relevant = self._truth.get(intent, frozenset())
        return np.array([1.0 if k in relevant else 0.0 for k in self._keys])


class OracleScorer:
    """Scores 1 for items on the ground-truth path of an intent, 0 otherwise.

    ``truth`` maps an intent text to the keys (zone names and tool ids) on its true path;
    build it with ``topologies.namespace.Namespace.oracle_truth``.
    """

    name = "oracle"

    def __init__(self, truth: Mapping[str, frozenset[str]] | None = None) -> None:
        self.truth: Mapping[str, frozenset[str]] = truth or {}

    def index(self, keys: Sequence[str], texts: Sequence[str]) -> ScoreIndex:
        return _OracleIndex(keys, self.truth)


SCORERS: dict[str, Callable[..., Scorer]] = {
    "bm25": BM25Scorer,
    "tfidf": TfidfScorer,
    "oracle": OracleScorer,
}


def make_scorer(name: str, **kwargs: object) -> Scorer:
    """Instantiate a scorer by name (see :data:`SCORERS`)."""
    try:
        factory = SCORERS[name]
    except KeyError:
        raise ValueError(f"unknown scorer {name!r}; choose one of {sorted(SCORERS)}") from None
    return factory(**kwargs)


def top_k(scores: np.ndarray, k: int, candidates: np.ndarray | None = None) -> list[int]:
    """Indices of the ``k`` best candidates (``k = 0``: all), best first, ties by index."""
    idx = np.arange(len(scores)) if candidates is None else np.asarray(candidates, dtype=int)
    if len(idx) == 0:
        return []
    order = np.lexsort((idx, -np.asarray(scores, dtype=float)[idx]))
    chosen = idx[order]
    return (chosen if k == 0 else chosen[:k]).tolist()
