"""A tiny deterministic sentence "embedding" for tests of the dense code paths."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nodes.scoring import tokenize


def hashed_words(texts: Sequence[str]) -> np.ndarray:
    """A small deterministic sentence "embedding" (hashed bag of words, unit length), so
    the dense code paths run here without the model (tests/nodes/test_scorers.py loads it)."""
    out = np.zeros((len(texts), 64), dtype=np.float32)
    for i, text in enumerate(texts):
        for word in tokenize(text):
            out[i, int.from_bytes(word.encode()[:8].ljust(8, b"_"), "big") % 64] += 1.0
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)
