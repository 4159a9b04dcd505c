"""A resolver's memory, bounded: one LRU store shared by all of its tables.

:class:`Store` keeps every cached item (referrals, SRV lists, addresses, negative
answers, keys, ...) in one least-recently-used order, bounded by a number of entries and
by an estimate of the bytes they hold (:func:`footprint`), as Unbound bounds its message
and RRset caches by size. When either bound is passed the least recently used items are
evicted, expired or not, and counted. A :class:`Table` is one kind of item in the store:
a dict-like view with its own keys.

Expiry stays the resolver's business (it reads ``expires``); the store only bounds memory.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass

DEFAULT_MAX_ENTRIES = 1_000_000
DEFAULT_MAX_BYTES = 512 * 1024 * 1024

_ATOMS = (str, bytes, int, float, bool, type(None))


def footprint(obj: object, _depth: int = 0) -> int:
    """Bytes an object and what it holds take in this interpreter (``sys.getsizeof``
    summed over containers and the fields of dataclasses, to a depth of 6). Objects shared
    with other entries are counted in each, so the estimate errs on the high side."""
    size = sys.getsizeof(obj)
    if isinstance(obj, _ATOMS) or _depth > 6:
        return size
    if isinstance(obj, (tuple, list, frozenset, set)):
        return size + sum(footprint(x, _depth + 1) for x in obj)
    if isinstance(obj, dict):
        return size + sum(footprint(k, _depth + 1) + footprint(v, _depth + 1)
                          for k, v in obj.items())
    slots = getattr(type(obj), "__slots__", None)
    if slots:
        return size + sum(footprint(getattr(obj, s, None), _depth + 1) for s in slots)
    fields = getattr(obj, "__dict__", None)
    if fields:
        return size + footprint(fields, _depth + 1)
    return size


@dataclass(slots=True)
class Entry:
    value: object
    expires: float
    cost: int = 0


class Store:
    """One LRU order over all tables, bounded in entries and estimated bytes."""

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES,
                 max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if max_entries < 1 or max_bytes < 1:
            raise ValueError("cache bounds must be positive")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.bytes = 0
        self.evictions = 0
        self.evicted_bytes = 0
        self._items: OrderedDict[tuple[str, object], Entry] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def table(self, name: str) -> Table:
        return Table(self, name)

    def get(self, tag: str, key: object) -> Entry | None:
        k = (tag, key)
        entry = self._items.get(k)
        if entry is not None:
            self._items.move_to_end(k)
        return entry

    def put(self, tag: str, key: object, entry: Entry) -> None:
        k = (tag, key)
        entry.cost = footprint(key) + footprint(entry.value) + 120  # + the entry itself
        old = self._items.pop(k, None)
        if old is not None:
            self.bytes -= old.cost
        self._items[k] = entry
        self.bytes += entry.cost
        items = self._items
        while len(items) > self.max_entries or (self.bytes > self.max_bytes and len(items) > 1):
            _, gone = items.popitem(last=False)
            self.bytes -= gone.cost
            self.evictions += 1
            self.evicted_bytes += gone.cost

    def pop(self, tag: str, key: object) -> Entry | None:
        entry = self._items.pop((tag, key), None)
        if entry is not None:
            self.bytes -= entry.cost
        return entry

    def keys(self, tag: str) -> Iterator[object]:
        return (k for t, k in list(self._items) if t == tag)


class Table:
    """The items of one kind in a :class:`Store`: ``get``, ``[key] = entry``, ``del``."""

    __slots__ = ("store", "tag")

    def __init__(self, store: Store, tag: str) -> None:
        self.store, self.tag = store, tag

    def get(self, key: object) -> Entry | None:
        return self.store.get(self.tag, key)

    def __setitem__(self, key: object, entry: Entry) -> None:
        self.store.put(self.tag, key, entry)

    def __delitem__(self, key: object) -> None:
        self.store.pop(self.tag, key)

    def pop(self, key: object, default: object = None) -> object:
        entry = self.store.pop(self.tag, key)
        return default if entry is None else entry

    def __contains__(self, key: object) -> bool:
        return (self.tag, key) in self.store._items

    def __iter__(self) -> Iterator[object]:
        return self.store.keys(self.tag)
