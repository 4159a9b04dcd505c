"""The reply memo (nodes/authoritative/memo.py): invisible in bytes and counters, bounded,
never stale after a zone change, and off where a reply depends on more than the query."""

from __future__ import annotations

import gzip
import json
import pickle
from dataclasses import replace

import pytest
from dnslib import DNSRecord

from nodes.authoritative.memo import ENTRY_OVERHEAD, REPLY_MEMO, ReplyMemo
from nodes.authoritative.server import AuthoritativeServer
from nodes.dns.dnssec import ZoneSigner
from nodes.dns.wire import Intent, cursor_name
from nodes.scoring import BM25Scorer
from tests.nodes.authoritative.test_authoritative import (
    HISTORY,
    HISTORY_TOOLS,
    WEATHER,
    query,
)
from tests.nodes.authoritative.test_golden_replies import GOLDEN, make_servers

SRC = ("127.0.0.9", 5555)
LEAF_QUERY = query(cursor_name("mcp", "history.weather.tools."),
                   intent=Intent("daily temperature records archive", k=2))


@pytest.fixture(scope="module")
def golden() -> dict:
    return json.loads(gzip.decompress(GOLDEN.read_bytes()))


def _with_id(wire: bytes, qid: int) -> bytes:
    return qid.to_bytes(2, "big") + wire[2:]


def _targets(out: bytes) -> list[str]:
    return [str(rr.rdata.target) for rr in DNSRecord.parse(out).rr]


def test_memoised_replies_equal_computed_ones_in_bytes_and_counters(golden):
    """Every golden query, asked three times (new IDs), to servers with and without the
    memo: the same bytes, the same counters; the repeats were answered from the memo."""
    memo = ReplyMemo()
    on = make_servers(golden, packet_cache=0)
    off = make_servers(golden, packet_cache=0)
    for server in on.values():
        server.reply_memo = memo
    for server in off.values():
        server.reply_memo = None
    hits = [0]
    lookup = memo.get

    def counting(key):  # type: ignore[no-untyped-def]
        found = lookup(key)
        hits[0] += found is not None
        return found

    memo.get = counting
    for case in golden["cases"]:
        wire = bytes.fromhex(case["query"])
        for i in range(3):
            if len(wire) >= 2:
                wire = _with_id(wire, (int.from_bytes(wire[:2], "big") + 7 * i) % 65536)
            got = on[case["server"]].handle(wire, SRC, 0.0, case["transport"])
            want = off[case["server"]].handle(wire, SRC, 0.0, case["transport"])
            assert got == want, case["what"]
    for name, server in on.items():
        assert server.stats.counts == off[name].stats.counts, name
    assert len(memo) > 300
    assert hits[0] > 0.5 * 3 * len(golden["cases"])  # most repeats came from the memo
    assert sum(s.stats.counts["truncated_udp"] for s in on.values()) > 0  # TC counted too


def test_memo_is_bounded_in_entries_and_bytes():
    memo = ReplyMemo(entries=8, max_bytes=64 * 1024)
    gen = object()
    for i in range(1000):
        memo.put((gen, i.to_bytes(4, "big") * 50), b"r" * (i % 700), "semantic")
        assert len(memo) <= 8 and memo.bytes <= 64 * 1024
    assert memo.get((gen, (999).to_bytes(4, "big") * 50)) == (b"r" * (999 % 700), "semantic")
    assert memo.get((gen, (0).to_bytes(4, "big") * 50)) is None  # evicted, first in first out
    held = sum(len(k[1]) + len(v[0]) + ENTRY_OVERHEAD for k, v in memo._table.items())
    assert memo.bytes == held
    memo.put((gen, b"q"), b"x" * 5000, "semantic")  # more than 1/16 of the budget
    assert memo.get((gen, b"q")) is None


def test_a_stream_of_distinct_queries_keeps_the_memo_within_bounds():
    memo = ReplyMemo(entries=64, max_bytes=32 * 1024)
    server = AuthoritativeServer([HISTORY], reply_memo=memo, packet_cache=0)
    for i in range(400):  # a hostile client: every intent different and long
        wire = query(cursor_name("mcp", "history.weather.tools."),
                     intent=Intent(f"intent number {i} " + "padding " * (i % 40), k=3))
        server.handle(wire, SRC, 0.0)
        assert len(memo) <= 64 and memo.bytes <= 32 * 1024
    assert server.stats.counts["semantic"] == 400


def test_a_changed_zone_is_never_answered_from_the_memo():
    memo = ReplyMemo()
    server = AuthoritativeServer([HISTORY], reply_memo=memo, packet_cache=0)
    before = server.handle(LEAF_QUERY, SRC, 0.0)
    assert before is not None and _targets(before)[0] == "meteostat.history.weather.tools."
    assert server.handle(LEAF_QUERY, SRC, 0.0) == before  # from the memo
    server.apply_change("history.weather.tools.", remove=["h1"])
    after = server.handle(LEAF_QUERY, SRC, 0.0)
    fresh = AuthoritativeServer([replace(HISTORY, tools=HISTORY_TOOLS[1:], serial=2)],
                                reply_memo=None, packet_cache=0)
    assert after == fresh.handle(LEAF_QUERY, SRC, 0.0)
    assert after is not None and "meteostat.history.weather.tools." not in _targets(after)
    moved = replace(HISTORY_TOOLS[1], target="moved.history.weather.tools.")
    server.add_zone(replace(HISTORY, tools=(moved,), serial=9))
    assert _targets(server.handle(LEAF_QUERY, SRC, 0.0) or b"") == [
        "moved.history.weather.tools."]


def test_no_memo_for_signed_replies_or_impure_scorers():
    memo = ReplyMemo()
    signed = AuthoritativeServer([WEATHER], reply_memo=memo, packet_cache=0,
                                 signer=ZoneSigner("7", ["weather.tools."]))

    class Impure(BM25Scorer):
        pure = False

    impure = AuthoritativeServer([HISTORY], reply_memo=memo, packet_cache=0, scorer=Impure())
    for _ in range(3):
        signed.handle(query("weather.tools.", "SOA"), SRC, 0.0)
        impure.handle(LEAF_QUERY, SRC, 0.0)
    assert len(memo) == 0
    pure = AuthoritativeServer([HISTORY], reply_memo=memo, packet_cache=0)
    pure.handle(LEAF_QUERY, SRC, 0.0)
    assert len(memo) == 1


def test_servers_pickle_with_the_process_memo():
    server = AuthoritativeServer([HISTORY])
    assert pickle.loads(pickle.dumps(server)).reply_memo is REPLY_MEMO
    own = AuthoritativeServer([HISTORY], reply_memo=ReplyMemo(entries=5))
    own.handle(LEAF_QUERY, SRC, 0.0)
    copy = pickle.loads(pickle.dumps(own)).reply_memo
    assert copy is not None and copy is not own.reply_memo
    assert (copy.entries, len(copy)) == (5, 0)


def test_memo_off_computes_every_reply_and_restores_the_memo():
    from nodes.authoritative.memo import memo_off

    memo = ReplyMemo()
    servers = [AuthoritativeServer([HISTORY], reply_memo=memo, packet_cache=0),
               AuthoritativeServer([HISTORY], reply_memo=None, packet_cache=0)]
    with memo_off(servers):
        assert [s.reply_memo for s in servers] == [None, None]
        servers[0].handle(LEAF_QUERY, SRC, 0.0)
        servers[0].handle(LEAF_QUERY, SRC, 0.0)
    assert len(memo) == 0
    assert servers[0].reply_memo is memo and servers[1].reply_memo is None
