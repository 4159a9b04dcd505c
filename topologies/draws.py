"""``random.Random``'s own draws, inlined: the same numbers from ``getrandbits`` without the
method look-ups, so that the synthetic generator is fast and its namespaces unchanged."""

from __future__ import annotations

from collections.abc import Callable


def below(getrandbits: Callable[[int], int], n: int) -> int:
    """``random.Random._randbelow(n)`` (rejection over ``n.bit_length()`` bits): the very
    same draws, without the method look-ups (``choice``, ``sample``, ``shuffle`` use it)."""
    k = n.bit_length()
    r = getrandbits(k)
    while r >= n:
        r = getrandbits(k)
    return r


def sample(getrandbits: Callable[[int], int], population: list[str], k: int) -> list[str]:
    """``rng.sample(population, k)`` for ``k <= 5`` (CPython's algorithm, same draws)."""
    n = len(population)
    if not 0 <= k <= min(n, 5):
        raise ValueError("sample larger than population or above 5")
    if n <= 21:  # a list is smaller than a set: partial Fisher-Yates on a copy
        pool = list(population)
        out = []
        for i in range(k):
            j = below(getrandbits, n - i)
            out.append(pool[j])
            pool[j] = pool[n - i - 1]
        return out
    chosen: list[int] = []
    for _ in range(k):
        j = below(getrandbits, n)
        while j in chosen:
            j = below(getrandbits, n)
        chosen.append(j)
    return [population[j] for j in chosen]
