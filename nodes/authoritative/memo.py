"""The reply memo: encoded replies by what they depend on, shared by a process's servers.

An authoritative server's reply to a query is a function of the query's bytes after the
ID, the transport, the server's zones and its settings, as long as its scorer is pure
(``Scorer.pure``: scores depend on the texts alone) and it signs nothing. So a server
(:meth:`~nodes.authoritative.server.AuthoritativeServer.handle`) keeps each reply it
encodes here under (its *generation*, query bytes after the ID + transport) and, for the
same query again, sends the kept bytes with the new ID instead of parsing, ranking and
encoding once more. This is a speed-up of the simulator, not a modelled cache: the server
counts a memoised reply exactly as one it computed (its kind, ``truncated_*`` from the TC
bit, ``tx_bytes``), unlike its packet cache, whose hits are counted and which scenarios
switch off.

A server's generation is a fresh object whenever its zones change (``add_zone``, and so
``apply_change``) or it is reset, so replies built from older data are never found again
and age out. One memo per process (:data:`REPLY_MEMO`) bounds the memory of every server
together: at most :attr:`ReplyMemo.entries` replies and :attr:`ReplyMemo.max_bytes` bytes
of keys and replies, first in first out; one reply may take at most 1/16 of the bytes, so
no stream of queries, however large or varied, grows it past its bounds.

Where a server's own compute time is what is measured (calibrated processing times, see
``sim.run.calibrate``), :func:`memo_off` switches the memo off for the measurement, so
that a repeated query is timed as computed, not looked up.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Protocol

#: Memory of an entry beyond its key and reply bytes: two bytes headers (33 each), the
#: key and value tuples (56 + 56), the OrderedDict's link and slot (about 100).
ENTRY_OVERHEAD = 280

#: (server generation, query bytes after the ID + transport tag)
MemoKey = tuple[object, bytes]


class ReplyMemo:
    """Bounded FIFO map from :data:`MemoKey` to (reply bytes after the ID, kind)."""

    def __init__(self, entries: int = 1 << 15, max_bytes: int = 32 << 20) -> None:
        self.entries = entries
        self.max_bytes = max_bytes
        self.bytes = 0
        self._table: OrderedDict[MemoKey, tuple[bytes, str]] = OrderedDict()
        # the table's own lookup (no Python frame per query); the table is never replaced
        self.get: Callable[[MemoKey], tuple[bytes, str] | None] = self._table.get

    def __len__(self) -> int:
        return len(self._table)

    def __reduce__(self) -> str | tuple[type[ReplyMemo], tuple[int, int]]:
        # the process's memo stays the receiving process's own (engines pickle servers to
        # other processes); another memo travels empty, with its bounds
        if self is REPLY_MEMO:
            return "REPLY_MEMO"
        return ReplyMemo, (self.entries, self.max_bytes)

    def put(self, key: MemoKey, reply: bytes, kind: str) -> None:
        """Keep ``reply`` (the bytes after the ID) unless it is too big for the budget."""
        cost = len(key[1]) + len(reply) + ENTRY_OVERHEAD
        if cost * 16 > self.max_bytes or not self.entries:
            return
        table = self._table
        same = table.pop(key, None)  # (kept twice only if asked twice before the first put)
        if same is not None:
            self.bytes -= len(key[1]) + len(same[0]) + ENTRY_OVERHEAD
        while table and (len(table) >= self.entries or self.bytes + cost > self.max_bytes):
            (_, old_key), (old, _) = table.popitem(last=False)
            self.bytes -= len(old_key) + len(old) + ENTRY_OVERHEAD
        table[key] = (reply, kind)
        self.bytes += cost

    def clear(self) -> None:
        self._table.clear()
        self.bytes = 0


#: The memo every server of this process uses unless given another (or None).
REPLY_MEMO = ReplyMemo()


class _Memoising(Protocol):
    reply_memo: ReplyMemo | None


@contextmanager
def memo_off(servers: Iterable[_Memoising]) -> Iterator[None]:
    """Within the block, ``servers`` compute every reply (their memos restored after)."""
    held = [(server, server.reply_memo) for server in servers]
    for server, _ in held:
        server.reply_memo = None
    try:
        yield
    finally:
        for server, memo in held:
            server.reply_memo = memo
