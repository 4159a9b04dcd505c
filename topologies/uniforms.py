"""Uniform draws: what a delay or loss sample needs (:class:`Draws`), and a numpy
generator's draws taken in blocks (:class:`Uniforms`)."""

from __future__ import annotations

from typing import Protocol

import numpy as np
from mypy_extensions import mypyc_attr

BLOCK = 4096  # draws per refill: large enough to amortise numpy's call, small in memory


class Draws(Protocol):
    """A source of uniform draws in [0, 1) (a numpy ``Generator`` is one)."""

    def random(self) -> float: ...


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Uniforms:
    """``random()`` in [0, 1) from ``rng`` — the same values, in the same order, as that
    many ``rng.random()`` calls (numpy fills a block from the same stream) — at a fraction
    of a scalar numpy call's cost. Draws are taken ahead of use: nothing else may draw from
    ``rng`` once it is wrapped."""

    __slots__ = ("_block", "_buf", "_next", "_rng")

    def __init__(self, rng: np.random.Generator, block: int = BLOCK) -> None:
        if block < 1:
            raise ValueError(f"Uniforms: block must be ≥ 1, got {block!r}")
        self._rng = rng
        self._block = block
        self._buf: list[float] = []
        self._next = 0

    def random(self) -> float:
        i = self._next
        buf = self._buf
        if i == len(buf):
            buf = self._buf = self._rng.random(self._block).tolist()
            i = 0
        self._next = i + 1
        return buf[i]
