"""DNS message IDs: :func:`message_id` draws one, as ``randrange(1, 65536)`` would.

``random.Random.randrange`` is interpreted Python (argument checks, then ``_randbelow``);
the stub and the resolver draw an ID for every query they send. :func:`message_id` makes
the same draws from ``getrandbits`` (C) — 16 bits, again while the value is 65,535 — so it
returns the same IDs and leaves the generator in the same state, for ``random.Random`` and
for ``random.SystemRandom`` (the live engines' OS-random source) alike
(``tests/nodes/dns/test_ids.py``).
"""

from __future__ import annotations

import random


def message_id(ids: random.Random) -> int:
    """A query ID in 1..65535, the draw ``ids.randrange(1, 65536)`` makes."""
    r = ids.getrandbits(16)  # _randbelow(65535): k = (65535).bit_length() = 16 bits
    while r >= 65535:
        r = ids.getrandbits(16)
    return 1 + r
