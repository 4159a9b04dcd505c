"""A sequence whose items are made when read (:class:`OnDemand`), compared like a list.

Base of the workload's on-demand sequences: a synthetic namespace's drawn queries
(:class:`topologies.synthetic.DrawnQueries`) and a run's jobs (:class:`sim.build.workload.
Jobs`). They hold a few numbers instead of one object per item; equality is by items.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


class OnDemand(Sequence[T]):
    """A :class:`Sequence` equal to any sequence of the same items (a list, another one);
    unhashable, like a list. Subclasses give ``__len__``, ``__getitem__`` and ``__iter__``."""

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]
