"""A leaf's ranked SRV answers carry the rank as SRV priority (RFC 2782: lowest first).

Caches and stock recursors reorder an RRset freely, so the top-K order of a leaf's answer
survives only where DNS keeps it: in each record's priority. Both the answers to the intent
option and to an intent carried in the name number their records 0, 1, …, best first; the
static SRV RRset (standard questions, transfers, exported zones) keeps the configured
priority and weight; the reply memo and the once-per-tool encoding of the records keep
giving each reply its own ranks.
"""

from __future__ import annotations

import struct

import pytest
from dnslib import EDNS0, QTYPE, DNSHeader, DNSQuestion, DNSRecord, EDNSOption

from nodes.authoritative.memo import ReplyMemo
from nodes.authoritative.server import AuthoritativeServer
from nodes.authoritative.zonestate import zone_records
from nodes.dns.codec import SRV
from nodes.dns.wire import (
    DEFAULT_OPTION_CODE,
    SCORES_OPTION_CODE,
    Intent,
    get_scores,
    intent_qname,
)
from nodes.dns.zone import ServerRef, ToolRecord, ZoneData
from nodes.scoring import BM25Scorer

SRC = ("127.0.0.9", 5555)
LEAF = "archive.tools."
CURSOR = "_mcp._tcp._archive.tools."
WORDS = ("rain", "snow", "wind", "storm", "frost", "hail", "fog", "heat")
# configured priority/weight: what the static RRset serves; intent answers rank instead
TOOLS = tuple(
    ToolRecord(f"t{i}", f"{w}-log", f"{w} records per station {' '.join(WORDS[:i])}", "mcp",
               f"{w}-log.{LEAF}", f"10.7.0.{i + 1}", 8000 + i, priority=(7 * i) % 5,
               weight=10 * i)
    for i, w in enumerate(WORDS))
ZONE = ZoneData(LEAF, (ServerRef("ns1.archive.tools.", "10.7.1.1"),), summary="weather archive",
                tools=TOOLS)
BY_TARGET = {t.target: t for t in TOOLS}


def server(memo: ReplyMemo | None = None) -> AuthoritativeServer:
    return AuthoritativeServer([ZONE], BM25Scorer(), name="ns1.archive.tools.",
                               packet_cache=0, reply_memo=memo)


def query(qname: str, intent: Intent | None = None, scores: bool = False, qid: int = 7
          ) -> bytes:
    q = DNSRecord(DNSHeader(id=qid, rd=0))
    q.add_question(DNSQuestion(qname, QTYPE.SRV))
    opts = [EDNSOption(DEFAULT_OPTION_CODE, intent.encode())] if intent is not None else []
    if scores:
        opts.append(EDNSOption(SCORES_OPTION_CODE, b""))
    q.add_ar(EDNS0(udp_len=4096, opts=opts))
    return q.pack()


def srv(out: bytes | None) -> list[tuple[int, int, int, str]]:
    """(priority, weight, port, target) of the answer's SRV records, in wire order."""
    assert out is not None
    return [(rr.rdata.priority, rr.rdata.weight, rr.rdata.port, str(rr.rdata.target))
            for rr in DNSRecord.parse(out).rr if rr.rtype == QTYPE.SRV]


@pytest.mark.parametrize("transport", ["udp", "tcp"])
@pytest.mark.parametrize("k", [1, 3, 5, 0])
def test_option_answer_priorities_are_the_ranks(k: int, transport: str) -> None:
    out = server().handle(query(CURSOR, Intent("storm frost hail records", k), scores=True),
                          SRC, 0.0, transport)
    records = srv(out)
    assert len(records) == (k or len(TOOLS))
    assert [r[0] for r in records] == list(range(len(records)))
    # best first: the scores option agrees, and the weight and port stay the tool's own
    assert out is not None
    scores = get_scores(DNSRecord.parse(out))
    assert scores is not None and scores == sorted(scores, reverse=True)
    for _, weight, port, target in records:
        assert (weight, port) == (BY_TARGET[target].weight, BY_TARGET[target].port)


def test_intent_in_the_name_priorities_are_the_ranks() -> None:
    s = server()
    named = srv(s.handle(query(intent_qname("storm frost hail records", 4, zone=LEAF)),
                         SRC, 0.0))
    option = srv(s.handle(query(CURSOR, Intent("storm frost hail records", 4)), SRC, 0.0))
    assert [r[0] for r in named] == [0, 1, 2, 3]
    assert named == option  # the same ranking, the same records


def test_the_static_rrset_keeps_its_configured_priority_and_weight() -> None:
    """A standard question, a transfer and an exported zone get the operator's values."""
    static = srv(server().handle(query(f"_mcp._tcp.{LEAF}"), SRC, 0.0))
    assert sorted(static) == sorted((t.priority, t.weight, t.port, t.target) for t in TOOLS)
    exported = [struct.unpack("!HHH", r.rdata[0]) for r in zone_records(ZONE) if r.rtype == SRV]
    assert sorted(exported) == sorted((t.priority, t.weight, t.port) for t in TOOLS)


def test_ranks_follow_each_intent_through_the_memo_and_the_cached_records() -> None:
    """Two intents rank the same tools differently: each reply numbers its own order,
    whether computed, memoised (another ID) or computed with the memo off; the records
    encoded once per tool keep the configured priority."""
    memo = ReplyMemo()
    s, plain = server(memo), server(None)
    first = Intent("rain snow wind records", 3)
    second = Intent("heat fog hail records", 3)
    a1 = s.handle(query(CURSOR, first, qid=1), SRC, 0.0)
    b1 = s.handle(query(CURSOR, second, qid=2), SRC, 0.0)
    a2 = s.handle(query(CURSOR, first, qid=3), SRC, 0.0)  # from the memo
    assert len(memo) == 2 and a1 is not None and a2 is not None
    assert a2[2:] == a1[2:]
    for out in (a1, b1, a2, plain.handle(query(CURSOR, second, qid=2), SRC, 0.0)):
        assert [r[0] for r in srv(out)] == [0, 1, 2]
    assert [r[3] for r in srv(a1)] != [r[3] for r in srv(b1)]
    tools = next(iter(s._zones[LEAF].tools.values()))
    for tool, recs in zip(tools.tools, tools.records, strict=True):
        if recs is not None:  # encoded once, with the tool's own priority and weight
            assert struct.unpack("!HH", recs[0].rdata[0][:4]) == (tool.priority, tool.weight)
