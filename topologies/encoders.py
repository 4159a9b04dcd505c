"""Sentence-embedding cache on disk: vectors kept by the SHA-1 of their text.

:func:`disk_cached_encoder` loads ``<cache_dir>/<model>.npz`` into a
:class:`DiskCachedEncoder` (a :class:`nodes.scoring.CachedEncoder` that remembers its file);
:func:`save_encoder_cache` writes the vectors back when new ones were learnt. Network runs
(dense servers) and retrieval evaluations share the cache.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import numpy as np

from nodes.scoring import MINILM, CachedEncoder, Encoder, minilm_encoder

#: ``atomic_write(path, write)`` of :mod:`analysis.files` (passed in: topologies/ does not
#: import analysis/)
FileWriter = Callable[[Path, Callable[[str], None]], object]


class DigestStore(dict):
    """Vectors keyed by the SHA-1 of their text (what the disk cache keeps)."""

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha1(text.encode("utf-8")).hexdigest()

    def __contains__(self, text: object) -> bool:
        return super().__contains__(self.key(str(text)))

    def __getitem__(self, text: str) -> np.ndarray:
        return super().__getitem__(self.key(text))

    def __setitem__(self, text: str, vec: np.ndarray) -> None:
        super().__setitem__(self.key(text), vec)


class DiskCachedEncoder(CachedEncoder):
    """A :class:`CachedEncoder` over a :class:`DigestStore` loaded from ``path``;
    ``saved`` is how many vectors the file holds."""

    def __init__(self, encode: Encoder, store: DigestStore, path: Path) -> None:
        super().__init__(encode, store)
        self.path = path
        self.saved = len(store)


def disk_cached_encoder(cache_dir: str | Path, encode: Encoder | None = None,
                        model: str = MINILM) -> DiskCachedEncoder:
    """A :class:`CachedEncoder` whose vectors persist in ``cache_dir/<model>.npz``,
    keyed by the SHA-1 of each text (so the file holds digests and vectors only)."""
    path = Path(cache_dir) / f"{model}.npz"
    store = DigestStore()
    if path.exists():
        data = np.load(path, allow_pickle=False)
        keys = (data["keys"].tolist() if "keys" in data.files  # older files held the texts
                else [DigestStore.key(t) for t in data["texts"].tolist()])
        for digest, vec in zip(keys, data["vectors"], strict=True):
            dict.__setitem__(store, digest, vec)
    return DiskCachedEncoder(encode or minilm_encoder(), store, path)  # the model loads once


def save_encoder_cache(enc: CachedEncoder, write: FileWriter) -> None:
    """Write a disk-cached encoder's vectors back through ``write`` (an atomic writer) if
    it learnt new ones; any other encoder is left alone."""
    if not isinstance(enc, DiskCachedEncoder) or len(enc.store) == enc.saved:
        return
    path = enc.path
    path.parent.mkdir(parents=True, exist_ok=True)
    keys = list(dict.keys(enc.store))
    vectors = np.stack([dict.__getitem__(enc.store, k) for k in keys])

    def dump(tmp: str) -> None:
        with open(tmp, "wb") as fh:
            np.savez(fh, keys=np.array(keys), vectors=vectors)

    write(path, dump)
    enc.saved = len(keys)
