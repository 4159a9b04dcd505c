"""BM25 weights: per token, the (document, weight) pairs of a small corpus, as bm25s has them.

The servers' BM25 scorer (:class:`nodes.scoring.BM25Scorer`) builds one index per zone and
service the first time a query needs it; :func:`bm25_postings` computes its weights in
plain Python, bit for bit those of ``bm25s.BM25().index`` (Lucene variant), without the
library's vocabulary, sparse matrix and numpy arrays.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence

#: bm25s's defaults (``bm25s.BM25()``: Lucene variant), which :func:`bm25_postings` follows.
BM25_K1, BM25_B = 1.5, 0.75


def bm25_postings(docs: Sequence[Sequence[str]], k1: float = BM25_K1, b: float = BM25_B
                  ) -> dict[str, tuple[tuple[int, float], ...]]:
    """Per token, its (document, weight) pairs in document order: the BM25 weights
    ``bm25s.BM25(k1=k1, b=b).index(docs)`` stores, bit for bit, without building its
    vocabulary, sparse matrix and numpy arrays (2-4x cheaper on a zone's few dozen texts).

    bm25s (Lucene variant) stores ``float32(idf * tf / (k1 * ((1 - b) + b * len / avg) +
    tf))`` with ``idf = float32(log(1 + (N - df + 0.5) / (df + 0.5)))`` and every other step
    in float64 (its average length is a numpy float64, which makes the sum float64); the
    same operations in the same order on Python floats give the same float64 values, and
    :class:`array.array` rounds them to float32 as numpy's cast does (to nearest).
    ``tests/nodes/test_scorers.py`` checks this against bm25s itself.
    """
    n = len(docs)
    avg = sum(map(len, docs)) / n  # exact: an integer sum and one rounding, as numpy's mean
    # per token: the documents holding it and their tf parts tf / (norm + tf), in order
    holders: dict[str, list[int]] = {}
    parts: dict[str, list[float]] = {}
    for doc, tokens in enumerate(docs):
        norm = k1 * ((1 - b) + b * len(tokens) / avg)
        once = 1 / (norm + 1)  # the part of a token seen once (most are), same operations
        counts: dict[str, int] = {}  # Counter(tokens), counted here: Counter's is interpreted
        for token in tokens:
            counts[token] = counts.get(token, 0) + 1
        for token, f in counts.items():
            part = once if f == 1 else f / (norm + f)
            held = holders.get(token)
            if held is None:
                holders[token] = [doc]
                parts[token] = [part]
            else:
                held.append(doc)
                parts[token].append(part)
    log = math.log
    idf = array("f", [log(1 + (n - d + 0.5) / (d + 0.5)) for d in map(len, holders.values())])
    weights = array("f", [w * p for w, ps in zip(idf, parts.values(), strict=True) for p in ps])
    rounded = iter(weights.tolist())  # float32 weights, in the order of holders
    # each token takes its own count of weights from the shared iterator
    return {token: tuple(zip(held, rounded, strict=False)) for token, held in holders.items()}
