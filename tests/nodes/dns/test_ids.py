"""Message IDs (nodes/dns/ids.py): the same draws as ``randrange(1, 65536)``."""

from __future__ import annotations

import random

from nodes.dns.ids import message_id


def test_same_ids_and_state_as_randrange():
    for seed in range(20):
        ours, theirs = random.Random(seed), random.Random(seed)
        for _ in range(3000):
            assert message_id(ours) == theirs.randrange(1, 65536)
        assert ours.getstate() == theirs.getstate()


class _Scripted(random.Random):
    """Overrides ``getrandbits`` only, as ``random.SystemRandom`` does (so ``randrange``
    draws through it), from a script that starts with the values a draw must redo."""

    def __init__(self, script: list[int]) -> None:
        super().__init__(0)
        self.script = list(script)
        self.asked: list[int] = []

    def getrandbits(self, k: int) -> int:
        self.asked.append(k)
        return self.script.pop(0)


def test_redraws_65535_as_randrange_does():
    script = [65535, 65535, 0, 65534, 65535, 41]
    ours, theirs = _Scripted(script), _Scripted(script)
    got = [message_id(ours) for _ in range(3)]
    assert got == [theirs.randrange(1, 65536) for _ in range(3)] == [1, 65535, 42]
    assert ours.asked == theirs.asked == [16] * 6


def test_system_random_ids_in_range():
    ids = random.SystemRandom()
    assert all(1 <= message_id(ids) <= 65535 for _ in range(2000))
