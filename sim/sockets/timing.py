"""Emulated delays kept to within tens of microseconds on an asyncio loop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

SPIN = 0.002  # the last 2 ms of an emulated delay are spun, not slept (see call_precisely)


def call_precisely(delay: float, fn: Callable[..., object], *args: object) -> None:
    """Call ``fn(*args)`` after ``delay`` seconds, to within a few tens of microseconds.

    asyncio's selector rounds its timeout up to whole milliseconds, which would add up to
    1 ms to every emulated hop; so the loop sleeps until ``SPIN`` before the deadline and
    then re-checks on every iteration (other callbacks keep running meanwhile).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + delay

    def check() -> None:
        left = deadline - loop.time()
        if left <= 0:
            fn(*args)
        elif left > SPIN:
            loop.call_later(left - SPIN, check)
        else:
            loop.call_soon(check)

    check()


async def sleep_precisely(delay: float) -> None:
    """``asyncio.sleep`` to within tens of microseconds (:func:`call_precisely`)."""
    fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def wake() -> None:
        if not fut.done():
            fut.set_result(None)

    call_precisely(delay, wake)
    await fut

