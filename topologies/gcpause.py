"""Bulk building without the cyclic garbage collector (namespaces, hierarchies, shards)."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection inside (restored after): building millions of
    long-lived, acyclic objects otherwise pays for repeated full collections."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
