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

import math
import re
from collections.abc import Callable, Mapping, Sequence
from operator import add
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

    :meth:`rank` (what the server calls) goes further and avoids numpy for small corpora,
    where its per-call overhead dominates. It adds the same float64 weights in the same
    order and sorts stably, so it returns exactly ``top_k(self.scores(intent), ...)``:

    * up to :attr:`DENSE_MAX` documents: one dense weight list per token, summed
      element-wise with ``map(operator.add, …)``;
    * up to :attr:`PYTHON_MAX`: per-token (document, weight) postings summed in a dict;
      only the touched documents are sorted (weights are positive, so untouched ones score
      exactly 0.0 and come last, by index);
    * larger: numpy.

    The limits are the crossovers measured on a 2-vCPU VM (3 common-word tokens per intent;
    ``tests/test_codec.py`` checks all three paths against numpy's lexsort).
    """

    #: Largest corpus ranked with dense per-token weight lists.
    DENSE_MAX = 24
    #: Largest corpus ranked in pure Python (numpy above).
    PYTHON_MAX = 160

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
        # (document, weight) pairs per token, for the pure-Python path. Only real tokens
        # (what tokenize() can return) are kept, so raw regex matches can be looked up
        # without tokenize()'s filter: a stop word or one-letter token is never a key.
        self._postings: dict[str, tuple[tuple[int, float], ...]] = {
            token: tuple(zip(docs.tolist(), weights.tolist(), strict=True))
            for token, (docs, weights) in self._columns.items() if tokenize(token) == [token]}
        weights = [w for col in self._postings.values() for _, w in col]
        self._docs = list(range(self._n))
        # Dense lists: exact as long as no weight is NaN (sort order would differ).
        self._vectors: dict[str, list[float]] | None = None
        if self._n <= self.DENSE_MAX and all(math.isfinite(w) for w in weights):
            self._vectors = {}
            for token, column in self._postings.items():
                vector = [0.0] * self._n
                for doc, weight in column:
                    vector[doc] = weight
                self._vectors[token] = vector
        # Sparse: with only positive weights a document no token touches scores exactly 0.0
        # and every touched one more, so only touched documents need sorting.
        self._sparse = self._n <= self.PYTHON_MAX and all(
            w > 0.0 and math.isfinite(w) for w in weights)

    def scores(self, intent: str) -> np.ndarray:
        out = np.zeros(self._n)
        for token in tokenize(intent):
            column = self._columns.get(token)
            if column is not None:
                out[column[0]] += column[1]
        return out

    def rank(self, intent: str, k: int, candidates: Sequence[int] | None = None) -> list[int]:
        """``top_k(self.scores(intent), k, candidates)``, computed without numpy when small."""
        vectors = self._vectors
        if vectors is not None:
            get = vectors.get
            total = None
            for token in _TOKEN.findall(intent.lower()):
                vector = get(token)
                if vector is not None:  # numpy's order: 0.0 + w1 + w2 …
                    total = vector if total is None else list(map(add, total, vector))
            order = self._docs if candidates is None else sorted(candidates)
            if total is None:  # every score 0.0: index order
                order = order.copy()
            else:  # stable: ties keep index order
                order = sorted(order, key=total.__getitem__, reverse=True)
            return order if k == 0 else order[:k]
        if not self._sparse:
            return top_k(self.scores(intent), k, candidates)
        acc: dict[int, float] = {}
        get = self._postings.get
        for token in _TOKEN.findall(intent.lower()):
            column = get(token)
            if column is not None:
                for doc, weight in column:
                    acc[doc] = acc.get(doc, 0.0) + weight  # numpy's order: 0.0 + w1 + w2 …
        if candidates is not None:
            dense = [0.0] * self._n
            for doc, score in acc.items():
                dense[doc] = score
            order = sorted(candidates)  # ties by index: a stable sort keeps this order
            order.sort(key=dense.__getitem__, reverse=True)
            return order if k == 0 else order[:k]
        order = sorted(acc)
        order.sort(key=acc.__getitem__, reverse=True)
        if (k == 0 or len(order) < k) and len(order) < self._n:  # then the zeros, by index
            order += [doc for doc in range(self._n) if doc not in acc]
        return order if k == 0 else order[:k]


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


#: ``rank(intent_text, k, candidates=None)`` -> chosen indices, best first (see top_k).
Ranker = Callable[..., list[int]]


def ranker(index: ScoreIndex) -> Ranker:
    """The index's own ``rank`` method if it has one, else top_k over its scores."""
    fast = getattr(index, "rank", None)
    if fast is not None:
        return fast

    def rank(intent: str, k: int, candidates: Sequence[int] | None = None) -> list[int]:
        return top_k(index.scores(intent), k, candidates)

    return rank
