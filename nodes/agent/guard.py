"""IterationGuard: loop detection of the agent session layer (§7).

A sliding window of the last ``window`` calls as (tool, hash of canonical JSON arguments); a
call that makes its pair appear more than ``max_repeats`` times trips it. Eviction, not
blocking: the call has already run and its result stands; the tool leaves the context and
the agent must search again, and that re-discovery clears the tool's count.
"""

from __future__ import annotations

import hashlib
import json
from collections import deque
from collections.abc import Iterable, Mapping


def _normal_arg(value: object) -> object:
    """Collapse trivial variations before hashing (§7.2): strings stripped, URLs without a
    trailing slash; containers recursively."""
    if isinstance(value, str):
        text = value.strip()
        return text.rstrip("/") if "://" in text else text
    if isinstance(value, Mapping):
        return {str(k): _normal_arg(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_normal_arg(v) for v in value]
    return value


def args_hash(args: Mapping[str, object]) -> str:
    """Hash of a call's arguments: canonical JSON (sorted keys, no spaces) → SHA-256."""
    text = json.dumps(_normal_arg(args), sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class IterationGuard:
    """Loop detection over (tool, argument hash), §7.2; evict, never block. Two detectors:
    the sliding window of the last ``window`` calls (catches A → B → A → B …) and, with
    ``period``, a time-based counter (the same pair more than ``max_repeats`` times within
    ``period`` seconds; older records are dropped)."""

    def __init__(self, window: int, max_repeats: int, exempt: Iterable[str] = (),
                 period: float | None = None) -> None:
        self.window = window
        self.max_repeats = max_repeats
        self.exempt = frozenset(exempt)
        self.period = period
        self._calls: deque[tuple[str, str]] = deque(maxlen=max(window, 0))
        self._times: dict[tuple[str, str], deque[float]] = {}
        self.trips = 0

    def record(self, tool_id: str, args: Mapping[str, object], now: float = 0.0) -> bool:
        """A call that has run; True when it trips the guard (evict the tool)."""
        if self.max_repeats <= 0 or tool_id in self.exempt or (
                self.window <= 0 and self.period is None):
            return False
        pair = (tool_id, args_hash(args))
        tripped = False
        if self.window > 0:
            self._calls.append(pair)
            tripped = sum(p == pair for p in self._calls) > self.max_repeats
        if self.period is not None:
            for key in [k for k, ts in self._times.items() if now - ts[-1] > self.period]:
                del self._times[key]  # garbage: nothing of it inside the period
            times = self._times.setdefault(pair, deque())
            times.append(now)
            while now - times[0] > self.period:
                times.popleft()
            tripped = tripped or len(times) > self.max_repeats
        if tripped:
            self.trips += 1
            self.reset(tool_id)
        return tripped

    def reset(self, tool_id: str) -> None:
        """Re-discovery permits renewed use (§7.5): forget the tool's calls."""
        kept = [p for p in self._calls if p[0] != tool_id]
        self._calls.clear()
        self._calls.extend(kept)
        for key in [k for k in self._times if k[0] == tool_id]:
            del self._times[key]
