"""The resolver's timer and query bytes: ``next_timer`` is always the earliest deadline of
a pending query (kept in a heap, answered queries dropped as they surface), and a query's
bytes after the ID are those a fresh encoding gives."""

from __future__ import annotations

from nodes.resolver.core import RecursiveResolver
from nodes.resolver.types import Discovery, Outgoing
from sim.build.hierarchy import build_hierarchy
from topologies.synthetic import synthetic

INTENTS = ["weather forecast", "currency exchange", "send email", "translate text",
           "stock prices", "calendar events"]


def _earliest(resolver: RecursiveResolver) -> float | None:
    return min((p.deadline for p in resolver._pending.values()), default=None)


def test_next_timer_is_the_earliest_pending_deadline_throughout() -> None:
    h = build_hierarchy(synthetic(n_tools=300, branching=3, depth=2, seed=5, n_queries=80))
    resolver = h.resolver(seed=4)
    inflight: list[Outgoing] = []
    for i, intent in enumerate(INTENTS):  # queries sent at different times
        resolver.discover(Discovery(intent, k=2), i * 0.1)
        inflight += resolver.to_send()
        assert resolver.next_timer() == _earliest(resolver)
    now = 1.0
    while inflight:  # answered out of order: newest first
        out = inflight.pop()
        reply = h.servers[out.dst[0]].handle(out.data, ("127.0.0.9", 53), now)
        assert reply is not None
        resolver.receive(reply, out.dst, now)
        inflight += resolver.to_send()
        assert resolver.next_timer() == _earliest(resolver)
        assert len(resolver._deadlines) <= 4 * len(resolver._pending) + 65  # compacted
        now += 0.01
    assert resolver.next_timer() is None
    assert len(resolver.pop_results()) == len(INTENTS)


def test_timeouts_fire_in_deadline_order_and_retry() -> None:
    h = build_hierarchy(synthetic(n_tools=300, branching=3, depth=2, seed=5, n_queries=80))
    resolver = h.resolver(seed=4)
    for i, intent in enumerate(INTENTS[:3]):
        resolver.discover(Discovery(intent, k=2), i * 0.5)
    assert len(resolver.to_send()) == 3
    deadline = resolver.next_timer()
    assert deadline == _earliest(resolver) == resolver.config.timeout  # the first query's
    resolver.on_timer(deadline)  # only the first query's deadline has passed
    assert resolver.stats["timeouts"] == 1
    retry = resolver.to_send()
    assert len(retry) == 1  # sent again
    assert resolver.next_timer() == _earliest(resolver) > deadline


def test_query_bytes_after_the_id_are_a_fresh_encoding() -> None:
    h = build_hierarchy(synthetic(n_tools=300, branching=3, depth=2, seed=5, n_queries=80))
    resolver = h.resolver(seed=4)
    resolver.discover(Discovery("weather forecast", k=2), 0.0)
    resolver.discover(Discovery("weather forecast", k=2), 0.0)  # the same ask again
    a, b = resolver.to_send()
    assert a.data[:2] != b.data[:2] and a.data[2:] == b.data[2:]
    pending = resolver._pending[int.from_bytes(a.data[:2], "big")]
    ask = pending.task.asks[pending.index]
    assert resolver._query(pending.qid, ask) == a.data
