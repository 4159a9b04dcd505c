"""Random generators a node is given, copied for a run: a node built once (a run plan's)
is instantiated for each run with its generator's starting state, so that a plan runs the
same way every time and is never advanced by a run."""

from __future__ import annotations

import random


def copy_rng(rng: random.Random) -> random.Random:
    """A generator in ``rng``'s state, of the same class, drawing independently of it."""
    out = type(rng).__new__(type(rng))
    out.setstate(rng.getstate())
    return out
