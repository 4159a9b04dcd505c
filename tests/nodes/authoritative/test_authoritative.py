"""AuthoritativeServer.handle with real dnslib-packed queries on hand-built zones."""

from __future__ import annotations

from dataclasses import replace

import pytest
from dnslib import EDNS0, QTYPE, RCODE, DNSHeader, DNSQuestion, DNSRecord, EDNSOption

from nodes.authoritative.server import AuthoritativeServer
from nodes.authoritative.zonestate import child_index
from nodes.dns.wire import (
    DEFAULT_OPTION_CODE,
    EMBEDDING_OPTION_CODE,
    Intent,
    IntentError,
    decode_embedding,
    decode_scores,
    encode_embedding,
    encode_scores,
    find_opt,
    get_scores,
    normalise,
    opt_record,
)
from nodes.dns.zone import Delegation, ServerRef, ToolRecord, ZoneData
from nodes.scoring import CachedEncoder, DenseScorer
from tests.vectors import hashed_words

SRC = ("127.0.0.9", 5555)

# ------------------------------------------------------------------ zones

NS_ROOT = ServerRef("a.root-servers.", "10.0.0.1")
NS_TOOLS = ServerRef("ns1.tools.", "10.0.0.2")
NS_WEATHER = (ServerRef("ns1.weather.tools.", "10.0.1.1"),
              ServerRef("ns2.weather.tools.", "10.0.1.2"))
NS_HISTORY = (ServerRef("ns1.history.weather.tools.", "10.0.2.1"),)
NS_FORECAST = (ServerRef("ns1.forecast.weather.tools.", "10.0.3.1"),)
NS_HKU = (ServerRef("ns1.hku.weather.tools.", "10.0.4.1"),)
NS_BIG = (ServerRef("ns1.big.tools.", "10.0.5.1"),)

HISTORY_SUMMARY = "historical weather archive past climate records temperature"
FORECAST_SUMMARY = "forecast tomorrow rain prediction radar"
HKU_SUMMARY = "hku university campus station sensors"

HISTORY_TOOLS = (
    ToolRecord("h1", "meteostat", "daily temperature records archive since 1900", "mcp",
               "meteostat.history.weather.tools.", "10.9.0.1", 8443),
    ToolRecord("h2", "rainlog", "historical rainfall totals per month and station", "mcp",
               "rainlog.history.weather.tools.", "10.9.0.2", 443),
    ToolRecord("h3", "stormbase", "archive of hurricane and typhoon tracks", "mcp",
               "stormbase.history.weather.tools.", "10.9.0.3", 3000),
    ToolRecord("h4", "climate-api", "climate normals as a plain rest endpoint", "rest",
               "climate-api.history.weather.tools.", "10.9.0.4", 8080),
)
FORECAST_TOOLS = (
    ToolRecord("f1", "rainradar", "radar nowcast of rain for the next hour", "mcp",
               "rainradar.forecast.weather.tools.", "10.9.1.1", 443),
)
HKU_TOOLS = (
    ToolRecord("u1", "campus-station", "hku campus weather station live sensors", "mcp",
               "campus-station.hku.weather.tools.", "10.9.2.1", 443, org="hku"),
)
BIG_TOOLS = tuple(
    ToolRecord(f"b{i}", f"tool{i}", f"a generic tool number {i} doing things", "mcp",
               f"a-rather-long-tool-target-name-number-{i:03d}.big.tools.", f"10.9.3.{i + 1}",
               443)
    for i in range(60)
)

ROOT = ZoneData(".", (NS_ROOT,), children=(
    Delegation("tools.", (NS_TOOLS,), "tools", frozenset({"mcp", "rest"})),))
TOOLS = ZoneData("tools.", (NS_TOOLS,), summary="tools", children=(
    Delegation("weather.tools.", NS_WEATHER, "weather", frozenset({"mcp", "rest"})),
    Delegation("big.tools.", NS_BIG, "big", frozenset({"mcp"}), leaf=True),
))
# history, the best match for most intents below, comes last: order must come from scores
WEATHER = ZoneData("weather.tools.", NS_WEATHER, summary="weather forecasts and history",
                   children=(
    Delegation("forecast.weather.tools.", NS_FORECAST, FORECAST_SUMMARY, frozenset({"mcp"}),
               leaf=True),
    Delegation("hku.weather.tools.", NS_HKU, HKU_SUMMARY, frozenset({"mcp"}), org="hku",
               leaf=True),
    Delegation("history.weather.tools.", NS_HISTORY, HISTORY_SUMMARY,
               frozenset({"mcp", "rest"}), leaf=True),
))
HISTORY = ZoneData("history.weather.tools.", NS_HISTORY, summary=HISTORY_SUMMARY,
                   tools=HISTORY_TOOLS)
FORECAST = ZoneData("forecast.weather.tools.", NS_FORECAST, summary=FORECAST_SUMMARY,
                    tools=FORECAST_TOOLS)
HKU = ZoneData("hku.weather.tools.", NS_HKU, summary=HKU_SUMMARY, tools=HKU_TOOLS, org="hku")
BIG = ZoneData("big.tools.", NS_BIG, summary="big", tools=BIG_TOOLS)


@pytest.fixture
def weather():
    return AuthoritativeServer([WEATHER], name="ns1.weather.tools.")


@pytest.fixture
def history():
    return AuthoritativeServer([HISTORY], name="ns1.history.weather.tools.")


@pytest.fixture
def big():
    return AuthoritativeServer([BIG], name="ns1.big.tools.")


# ------------------------------------------------------------------ helpers


def query(qname, qtype="SRV", intent=None, edns=True, udp_size=1232, qid=4242, option_code=None,
          version=0):
    q = DNSRecord(DNSHeader(id=qid, qr=0, rd=0))
    q.add_question(DNSQuestion(qname, getattr(QTYPE, qtype)))
    if edns:
        opts = []
        if intent is not None:
            opts = [EDNSOption(option_code or DEFAULT_OPTION_CODE, intent.encode())]
        q.add_ar(EDNS0(udp_len=udp_size, version=version, opts=opts))
    return q.pack()


def ask(server, wire, transport="udp"):
    out = server.handle(wire, SRC, now=0.0, transport=transport)
    assert out is not None
    reply = DNSRecord.parse(out)
    assert reply.header.qr == 1
    return reply, out


def names(rrs, rtype=None):
    return [normalise(rr.rname) for rr in rrs if rtype is None or rr.rtype == getattr(QTYPE, rtype)]


def of_type(rrs, rtype):
    return [rr for rr in rrs if rr.rtype == getattr(QTYPE, rtype)]


def ns_zones(reply):
    """Child zones of the NS records in the authority section, first appearance order."""
    return list(dict.fromkeys(names(reply.auth, "NS")))


def glue(reply):
    return {normalise(rr.rname): str(rr.rdata) for rr in of_type(reply.ar, "A")}


def hints(reply):
    out = {}
    for rr in of_type(reply.ar, "TXT"):
        fields = {}
        for raw in rr.rdata.data:
            key, _, value = bytes(raw).decode().partition("=")
            fields[key] = value
        out[normalise(rr.rname)] = fields
    return out


# ------------------------------------------------------------------ semantic referrals


@pytest.mark.parametrize(
    ("text", "best"),
    [
        ("historical temperature records archive", "history.weather.tools."),
        ("rain forecast for tomorrow", "forecast.weather.tools."),
        ("hku campus sensors", "hku.weather.tools."),
    ],
)
def test_cursor_at_nonleaf_refers_to_best_child(weather, text, best):
    reply, _ = ask(weather, query("_mcp._tcp._weather.tools.", intent=Intent(text, 1)))
    assert reply.header.rcode == RCODE.NOERROR
    assert reply.header.aa == 0
    assert reply.rr == []
    assert ns_zones(reply) == [best]
    hosts = {str(rr.rdata.label) for rr in of_type(reply.auth, "NS")}
    expected = {
        "history.weather.tools.": NS_HISTORY,
        "forecast.weather.tools.": NS_FORECAST,
        "hku.weather.tools.": NS_HKU,
    }[best]
    assert hosts == {ref.host for ref in expected}
    assert glue(reply) == {ref.host: ref.address for ref in expected}
    assert of_type(reply.ar, "TXT") == []  # hints only for K = 0
    assert weather.stats.counts["semantic"] == 1


def test_cursor_at_nonleaf_top_k_in_score_order(weather):
    reply, _ = ask(weather, query("_mcp._tcp._weather.tools.",
                                  intent=Intent("historical rain forecast archive records", 2)))
    # history matches three words, forecast two, hku none
    assert ns_zones(reply) == ["history.weather.tools.", "forecast.weather.tools."]
    assert set(glue(reply)) == {NS_HISTORY[0].host, NS_FORECAST[0].host}


def test_k0_refers_to_all_eligible_children_with_hints(weather):
    reply, _ = ask(weather, query("_mcp._tcp._weather.tools.", intent=Intent("", 0)))
    assert reply.header.aa == 0
    assert set(ns_zones(reply)) == {"history.weather.tools.", "forecast.weather.tools.",
                                    "hku.weather.tools."}
    got = hints(reply)
    assert got["history.weather.tools."] == {"summary": HISTORY_SUMMARY,
                                             "services": "mcp,rest", "kind": "leaf"}
    assert got["forecast.weather.tools."] == {"summary": FORECAST_SUMMARY, "services": "mcp",
                                              "kind": "leaf"}
    assert got["hku.weather.tools."] == {"summary": HKU_SUMMARY, "services": "mcp",
                                         "kind": "leaf", "org": "hku"}
    assert len(glue(reply)) == 3


def test_k0_hint_kind_branch():
    server = AuthoritativeServer([TOOLS])
    reply, _ = ask(server, query("_mcp._tcp._tools.", intent=Intent("", 0)))
    got = hints(reply)
    assert got["weather.tools."]["kind"] == "branch"
    assert got["big.tools."]["kind"] == "leaf"


def test_children_without_the_service_are_excluded(weather):
    reply, _ = ask(weather, query("_rest._tcp._weather.tools.",
                                  intent=Intent("rain forecast tomorrow radar", 0)))
    assert ns_zones(reply) == ["history.weather.tools."]
    assert set(hints(reply)) == {"history.weather.tools."}
    reply, _ = ask(weather, query("_rest._tcp._weather.tools.",
                                  intent=Intent("rain forecast tomorrow radar", 3)))
    assert ns_zones(reply) == ["history.weather.tools."]


def test_no_child_offers_the_service_is_nodata(weather):
    reply, _ = ask(weather, query("_skill._tcp._weather.tools.", intent=Intent("rain", 1)))
    assert reply.header.rcode == RCODE.NOERROR
    assert reply.rr == []
    assert names(reply.auth, "SOA") == ["weather.tools."]
    assert names(reply.auth, "NS") == []


def test_option_with_other_code_is_ignored(weather):
    server = AuthoritativeServer([WEATHER], option_code=65001)
    wire = query("_mcp._tcp._weather.tools.", intent=Intent("rain", 1))  # default code
    reply, _ = ask(server, wire)
    # the literal name _weather.tools. lies in the parent zone, not in weather.tools.
    assert reply.header.rcode == RCODE.REFUSED
    assert server.stats.counts["semantic"] == 0
    wire = query("_mcp._tcp._weather.tools.", intent=Intent("rain", 1), option_code=65001)
    reply, _ = ask(server, wire)
    assert ns_zones(reply) == ["forecast.weather.tools."]


# ------------------------------------------------------------------ leaves


def test_cursor_at_leaf_answers_top_k_srv(history):
    qname = "_mcp._tcp._history.weather.tools."
    reply, _ = ask(history, query(qname, intent=Intent("historical rainfall per station", 2)))
    assert reply.header.rcode == RCODE.NOERROR
    assert reply.header.aa == 1
    srv = of_type(reply.rr, "SRV")
    assert len(srv) == 2 == len(reply.rr)
    assert all(normalise(rr.rname) == qname for rr in srv)
    assert str(srv[0].rdata.target) == "rainlog.history.weather.tools."
    assert srv[0].rdata.port == 443
    tools = {t.target: t for t in HISTORY_TOOLS}
    assert all(tools[str(rr.rdata.target)].service == "mcp" for rr in srv)
    assert glue(reply) == {str(rr.rdata.target): tools[str(rr.rdata.target)].address
                           for rr in srv}
    assert reply.auth == []


def test_leaf_ranking_follows_intent(history):
    qname = "_mcp._tcp._history.weather.tools."
    reply, _ = ask(history, query(qname, intent=Intent("typhoon tracks", 1)))
    assert [str(rr.rdata.target) for rr in reply.rr] == ["stormbase.history.weather.tools."]
    reply, _ = ask(history, query(qname, intent=Intent("daily temperature since 1900", 1)))
    assert [str(rr.rdata.target) for rr in reply.rr] == ["meteostat.history.weather.tools."]
    assert [rr.rdata.port for rr in reply.rr] == [8443]


def test_leaf_k0_and_service_filter(history):
    reply, _ = ask(history, query("_mcp._tcp._history.weather.tools.", intent=Intent("", 0)))
    assert sorted(str(rr.rdata.target) for rr in reply.rr) == sorted(
        t.target for t in HISTORY_TOOLS if t.service == "mcp")
    reply, _ = ask(history, query("_rest._tcp._history.weather.tools.", intent=Intent("x", 5)))
    assert [str(rr.rdata.target) for rr in reply.rr] == ["climate-api.history.weather.tools."]
    reply, _ = ask(history, query("_a2a._tcp._history.weather.tools.", intent=Intent("x", 5)))
    assert reply.header.rcode == RCODE.NOERROR
    assert reply.rr == []
    assert names(reply.auth, "SOA") == ["history.weather.tools."]


def test_expanded_name_with_intent_at_leaf_is_ranked(history):
    qname = "_mcp._tcp.history.weather.tools."
    reply, _ = ask(history, query(qname, intent=Intent("typhoon tracks", 1)))
    assert reply.header.aa == 1
    assert [str(rr.rdata.target) for rr in reply.rr] == ["stormbase.history.weather.tools."]
    assert names(reply.rr) == [qname]


# ------------------------------------------------------------------ plain DNS


def test_expanded_srv_without_option_returns_all_of_service(history):
    qname = "_mcp._tcp.history.weather.tools."
    reply, _ = ask(history, query(qname))
    assert reply.header.aa == 1
    assert reply.header.rcode == RCODE.NOERROR
    srv = of_type(reply.rr, "SRV")
    mcp = {t.target: t for t in HISTORY_TOOLS if t.service == "mcp"}
    assert sorted(str(rr.rdata.target) for rr in srv) == sorted(mcp)
    assert all(normalise(rr.rname) == qname for rr in srv)
    assert {str(rr.rdata.target): rr.rdata.port for rr in srv} == {
        t: mcp[t].port for t in mcp}
    assert glue(reply) == {t: mcp[t].address for t in mcp}  # additional-section processing


def test_a_lookup_of_tool_target(history):
    reply, _ = ask(history, query("stormbase.history.weather.tools.", "A"))
    assert reply.header.aa == 1
    assert [(normalise(rr.rname), str(rr.rdata)) for rr in reply.rr] == [
        ("stormbase.history.weather.tools.", "10.9.0.3")]
    reply, _ = ask(history, query("stormbase.history.weather.tools.", "TXT"))
    assert b"".join(reply.rr[0].rdata.data) == b"archive of hurricane and typhoon tracks"


def test_apex_soa_and_ns(weather):
    reply, _ = ask(weather, query("weather.tools.", "SOA"))
    assert reply.header.aa == 1
    (soa,) = reply.rr
    assert soa.rtype == QTYPE.SOA
    assert str(soa.rdata.mname) == "ns1.weather.tools."
    reply, _ = ask(weather, query("weather.tools.", "NS"))
    assert reply.header.aa == 1
    assert sorted(str(rr.rdata.label) for rr in reply.rr) == [r.host for r in NS_WEATHER]
    assert glue(reply) == {r.host: r.address for r in NS_WEATHER}
    reply, _ = ask(weather, query("ns2.weather.tools.", "A"))
    assert [str(rr.rdata) for rr in reply.rr] == ["10.0.1.2"]


def test_nxdomain_with_soa(history):
    reply, _ = ask(history, query("nosuch.history.weather.tools.", "A"))
    assert reply.header.rcode == RCODE.NXDOMAIN
    assert reply.header.aa == 1
    assert reply.rr == []
    (soa,) = reply.auth
    assert soa.rtype == QTYPE.SOA
    assert normalise(soa.rname) == "history.weather.tools."
    assert soa.ttl == HISTORY.ttls.negative


def test_nodata_for_existing_name_wrong_type(history):
    for qname, qtype in [("stormbase.history.weather.tools.", "MX"),
                         ("history.weather.tools.", "A"),
                         ("_mcp._tcp.history.weather.tools.", "A"),
                         ("_tcp.history.weather.tools.", "SRV")]:  # empty non-terminal
        reply, _ = ask(history, query(qname, qtype))
        assert reply.header.rcode == RCODE.NOERROR, qname
        assert reply.rr == [], qname
        assert names(reply.auth, "SOA") == ["history.weather.tools."], qname


def test_cursor_without_option_is_nxdomain_in_parent_zone():
    # _mcp._tcp._weather.tools. is a name of the parent zone tools.: without the option it is
    # looked up literally there, where it does not exist
    for zones, qname in [([TOOLS], "_mcp._tcp._weather.tools."),
                         ([ROOT], "_mcp._tcp._tools."),
                         ([WEATHER], "_mcp._tcp._history.weather.tools.")]:
        server = AuthoritativeServer(zones)
        for wire in (query(qname), query(qname, edns=False)):
            reply, _ = ask(server, wire)
            assert reply.header.rcode == RCODE.NXDOMAIN, qname
            assert reply.header.aa == 1
            assert reply.rr == []
            assert names(reply.auth, "SOA") == [zones[0].name]
        assert server.stats.counts["semantic"] == 0


def test_cursor_without_option_at_the_zone_itself_is_refused(history):
    reply, _ = ask(history, query("_mcp._tcp._history.weather.tools."))
    assert reply.header.rcode == RCODE.REFUSED
    assert reply.rr == []


def test_name_below_delegation_gets_referral(weather):
    reply, _ = ask(weather, query("meteostat.history.weather.tools.", "A"))
    assert reply.header.rcode == RCODE.NOERROR
    assert reply.header.aa == 0
    assert reply.rr == []
    assert ns_zones(reply) == ["history.weather.tools."]
    assert glue(reply) == {NS_HISTORY[0].host: NS_HISTORY[0].address}
    # an expanded SRV name below the cut, even with an intent, is referred too
    reply, _ = ask(weather, query("_mcp._tcp.history.weather.tools.", intent=Intent("rain", 1)))
    assert reply.header.aa == 0
    assert ns_zones(reply) == ["history.weather.tools."]
    # a cursor for a grandchild is a step towards it
    reply, _ = ask(AuthoritativeServer([TOOLS]),
                   query("_mcp._tcp._history.weather.tools.", intent=Intent("rain", 1)))
    assert reply.header.aa == 0
    assert ns_zones(reply) == ["weather.tools."]
    assert glue(reply) == {r.host: r.address for r in NS_WEATHER}


def test_root_refers_to_tools():
    root = AuthoritativeServer([ROOT])
    reply, _ = ask(root, query("_mcp._tcp._tools.", intent=Intent("rain", 1)))
    assert reply.header.aa == 0
    assert ns_zones(reply) == ["tools."]
    assert glue(reply) == {NS_TOOLS.host: NS_TOOLS.address}


def test_zone_not_served_is_refused(weather):
    for qname, qtype in [("example.com.", "A"), ("tools.", "SOA"), ("big.tools.", "NS")]:
        reply, _ = ask(weather, query(qname, qtype))
        assert reply.header.rcode == RCODE.REFUSED, qname
        assert reply.rr == reply.auth == []
    reply, _ = ask(weather, query("_mcp._tcp._big.tools.", intent=Intent("x", 1)))
    assert reply.header.rcode == RCODE.REFUSED
    assert weather.stats.counts["refused"] == 4


def test_one_server_many_zones_picks_closest_enclosing():
    server = AuthoritativeServer([WEATHER, HISTORY])
    reply, _ = ask(server, query("meteostat.history.weather.tools.", "A"))
    assert reply.header.aa == 1
    assert [str(rr.rdata) for rr in reply.rr] == ["10.9.0.1"]
    assert server.zones == ["history.weather.tools.", "weather.tools."]


# ------------------------------------------------------------------ sizes


def test_oversize_udp_is_truncated_and_tcp_answers_in_full(big):
    wire = query("_mcp._tcp._big.tools.", intent=Intent("", 0))
    reply, raw = ask(big, wire)
    assert reply.header.tc == 1
    assert reply.rr == [] and reply.auth == []
    assert [rr.rtype for rr in reply.ar] == [QTYPE.OPT]
    assert len(raw) <= 1232
    assert big.stats.counts["truncated_udp"] == 1
    reply, raw = ask(big, wire, transport="tcp")
    assert reply.header.tc == 0
    assert len(raw) > 1232
    assert len(of_type(reply.rr, "SRV")) == len(BIG_TOOLS)
    assert len(of_type(reply.ar, "A")) == len(BIG_TOOLS)


def test_large_requester_buffer_still_capped_by_server(big):
    wire = query("_mcp._tcp._big.tools.", intent=Intent("", 0), udp_size=65000)
    reply, _ = ask(big, wire)
    assert reply.header.tc == 1
    server = AuthoritativeServer([BIG], max_udp_size=65000)
    reply, _ = ask(server, wire)
    assert reply.header.tc == 0
    assert len(reply.rr) == len(BIG_TOOLS)


def test_no_edns_limits_udp_to_512(big):
    wire = query("_mcp._tcp.big.tools.", edns=False)
    reply, raw = ask(big, wire)
    assert reply.header.tc == 1
    assert len(raw) <= 512
    assert reply.rr == [] and reply.ar == []  # no OPT without EDNS in the query
    # a small answer fits
    reply, raw = ask(big, query(BIG_TOOLS[1].target, "A", edns=False))
    assert reply.header.tc == 0
    assert len(reply.rr) == 1
    assert find_opt(reply) is None


def test_edns_small_buffer_treated_as_512(big):
    wire = query("_mcp._tcp._big.tools.", intent=Intent("tool", 3), udp_size=100)
    reply, raw = ask(big, wire)
    assert reply.header.tc == 0  # 3 SRV + 3 A fit within 512
    assert len(raw) <= 512
    assert len(reply.rr) == 3
    wire = query("_mcp._tcp._big.tools.", intent=Intent("tool", 12), udp_size=100)
    reply, raw = ask(big, wire)
    assert reply.header.tc == 1  # 12 do not
    assert len(raw) <= 512


# ------------------------------------------------------------------ errors


def test_edns_version_1_gets_badvers(weather):
    reply, _ = ask(weather, query("weather.tools.", "SOA", version=1))
    opt = find_opt(reply)
    assert opt is not None
    extended = ((opt.ttl >> 24) << 4) | reply.header.rcode
    assert extended == 16
    assert (opt.ttl >> 16) & 0xFF == 0  # the server speaks version 0
    assert reply.rr == [] and reply.auth == []
    assert weather.stats.counts["badvers"] == 1


@pytest.mark.parametrize(
    "data",
    [b"\x00\x00\x09\x01abc", b"\x01\x00\x01\x01a", b"\x00\x00\x02\x01\xff\xfe", b"\x00"],
)
def test_bad_intent_option_is_formerr(weather, data):
    q = DNSRecord(DNSHeader(id=77, rd=0))
    q.add_question(DNSQuestion("_mcp._tcp._weather.tools.", QTYPE.SRV))
    q.add_ar(EDNS0(udp_len=1232, opts=[EDNSOption(DEFAULT_OPTION_CODE, data)]))
    reply, _ = ask(weather, q.pack())
    assert reply.header.rcode == RCODE.FORMERR
    assert reply.header.id == 77
    assert reply.rr == [] and reply.auth == []
    assert weather.stats.counts["formerr_intent"] == 1


def test_response_packet_is_dropped(weather):
    q = DNSRecord(DNSHeader(id=5, qr=1))
    q.add_question(DNSQuestion("weather.tools.", QTYPE.SOA))
    assert weather.handle(q.pack(), SRC, now=0.0) is None
    assert weather.stats.counts["dropped_response"] == 1


@pytest.mark.parametrize("opcode", [1, 2, 4, 5])
def test_other_opcodes_are_notimp(weather, opcode):
    q = DNSRecord(DNSHeader(id=6, opcode=opcode))
    q.add_question(DNSQuestion("weather.tools.", QTYPE.SOA))
    reply, _ = ask(weather, q.pack())
    assert reply.header.rcode == RCODE.NOTIMP
    assert reply.header.opcode == opcode
    assert reply.rr == []


def test_garbage_with_header_is_formerr_and_short_garbage_dropped(weather):
    out = weather.handle(b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\xff", SRC, 0.0)
    reply = DNSRecord.parse(out)
    assert reply.header.id == 0x1234
    assert reply.header.rcode == RCODE.FORMERR
    assert weather.handle(b"\x12\x34\x01", SRC, 0.0) is None


def test_two_questions_is_formerr(weather):
    q = DNSRecord(DNSHeader(id=8))
    q.add_question(DNSQuestion("weather.tools.", QTYPE.SOA))
    q.add_question(DNSQuestion("weather.tools.", QTYPE.NS))
    reply, _ = ask(weather, q.pack())
    assert reply.header.rcode == RCODE.FORMERR


def test_reply_echoes_id_question_and_rd(weather):
    q = DNSRecord(DNSHeader(id=31337, rd=1))
    q.add_question(DNSQuestion("Weather.Tools.", QTYPE.SOA))
    q.add_ar(opt_record(None))
    reply, _ = ask(weather, q.pack())
    assert reply.header.id == 31337
    assert reply.header.rd == 1
    assert reply.header.ra == 0
    assert [(str(x.qname), x.qtype) for x in reply.questions] == [("Weather.Tools.", QTYPE.SOA)]
    assert find_opt(reply) is not None  # EDNS in, EDNS out


# ------------------------------------------------------------------ scores option


def scored_query(qname: str, text: str, k: int, scores: bool = True) -> bytes:
    q = DNSRecord(DNSHeader(id=77, qr=0, rd=0))
    q.add_question(DNSQuestion(qname, QTYPE.SRV))
    q.add_ar(opt_record(Intent(text, k=k), want_scores=scores))
    return q.pack()


def test_scores_option_lists_one_score_per_child_best_first(weather):
    reply, _ = ask(weather, scored_query("_mcp._tcp._weather.tools.", "rain radar forecast", 3))
    scores = get_scores(reply)
    assert scores is not None and len(scores) == len(ns_zones(reply)) >= 2
    assert scores == sorted(scores, reverse=True) and scores[0] > 0
    assert ns_zones(reply)[0] == "forecast.weather.tools."
    # the same scores the server's own index gives (float32 on the wire)
    index = child_index(weather.scorer, WEATHER.children)
    by_zone = dict(zip([c.zone for c in WEATHER.children],
                       index.scores("rain radar forecast"), strict=True))
    assert scores == pytest.approx([by_zone[z] for z in ns_zones(reply)], rel=1e-6)


def test_scores_option_on_a_leaf_answer(history):
    reply, _ = ask(history, scored_query("_mcp._tcp._history.weather.tools.",
                                         "archive of typhoon tracks", 2))
    scores = get_scores(reply)
    assert len(of_type(reply.rr, "SRV")) == len(scores) == 2
    assert of_type(reply.rr, "SRV")[0].rdata.target == "stormbase.history.weather.tools."
    assert scores[0] > scores[1]


def test_scores_are_only_sent_when_asked(weather):
    plain, plain_wire = ask(weather, scored_query("_mcp._tcp._weather.tools.", "rain", 2,
                                                  scores=False))
    scored, scored_wire = ask(weather, scored_query("_mcp._tcp._weather.tools.", "rain", 2))
    assert get_scores(plain) is None
    assert ns_zones(plain) == ns_zones(scored)
    # 4 bytes more in the query; the OPT of the reply grows by 4 + 4 per child
    assert len(scored_wire) == len(plain_wire) + 4 + 4 * len(ns_zones(scored))


def test_malformed_scores_option_is_an_error():
    assert decode_scores(encode_scores([0.5, -1.25])) == [0.5, -1.25]
    with pytest.raises(IntentError):
        decode_scores(b"\x00\x01\x02")


def test_truncated_reply_carries_no_scores(big):
    q = DNSRecord(DNSHeader(id=78, qr=0, rd=0))
    q.add_question(DNSQuestion("_mcp._tcp._big.tools.", QTYPE.SRV))
    q.add_ar(opt_record(Intent("generic tool", k=0), udp_size=512, want_scores=True))
    udp, _ = ask(big, q.pack())
    assert udp.header.tc and get_scores(udp) is None  # 60 SRV + A do not fit 512 bytes
    tcp, _ = ask(big, q.pack(), transport="tcp")
    assert not tcp.header.tc and len(get_scores(tcp)) == len(tcp.rr) == 60


def test_centroid_children_need_a_scorer_that_scores_vectors():
    routed = ZoneData("weather.tools.", NS_WEATHER, children=tuple(
        replace(c, centroids=(("mcp", (1.0, 0.0)),)) for c in WEATHER.children))
    with pytest.raises(ValueError, match="cannot score vectors"):
        AuthoritativeServer([routed])  # BM25 by default: refused when loading, not per query


# ------------------------------------------------------------------ embedding option


def test_embedding_option_round_trip_and_malformed():
    model, vector = decode_embedding(encode_embedding("m1", [0.5, -0.25, 1.0]))
    assert model == "m1" and vector.tolist() == [0.5, -0.25, 1.0]
    for bad in (b"", b"\x05ab", b"\x02m1\x00", b"\x02m1", b"\x02m1\x7c\x00"):  # last: inf
        with pytest.raises(IntentError):
            decode_embedding(bad)


def embedded_query(qname: str, text: str, k: int, model: str, vector) -> bytes:
    q = DNSRecord(DNSHeader(id=79, qr=0, rd=0))
    q.add_question(DNSQuestion(qname, QTYPE.SRV))
    opt = opt_record(Intent(text, k=k), want_scores=True)
    opt.rdata.append(EDNSOption(EMBEDDING_OPTION_CODE, encode_embedding(model, vector)))
    q.add_ar(opt)
    return q.pack()


def test_dense_server_ranks_by_the_embedding_it_is_sent():
    encoder = CachedEncoder(hashed_words)  # dense servers cache embeddings; the sent one too
    server = AuthoritativeServer([WEATHER], scorer=DenseScorer(encoder, model="hw"))
    text = "rain radar forecast"
    own, _ = ask(server, scored_query("_mcp._tcp._weather.tools.", text, 3))
    # the same intent's vector, sent along: same ranking, scores equal to float16 precision
    sent, _ = ask(server, embedded_query("_mcp._tcp._weather.tools.", text, 3, "hw",
                                         hashed_words([text])[0]))
    assert ns_zones(sent) == ns_zones(own)
    assert get_scores(sent) == pytest.approx(get_scores(own), abs=2e-3)
    assert server.stats["embedding_used"] == 1
    # the vector decides, not the text: an "archive" vector sent with a "rain" intent
    other, _ = ask(server, embedded_query("_mcp._tcp._weather.tools.", text, 1, "hw",
                                          hashed_words(["historical archive"])[0]))
    assert ns_zones(other) == ["history.weather.tools."]
    # …and it was not cached under the text: the plain query still gets its own answer
    again, _ = ask(server, scored_query("_mcp._tcp._weather.tools.", text, 3))
    assert ns_zones(again) == ns_zones(own)
    # another model's vector is ignored (counted); a wrong size is FORMERR
    ask(server, embedded_query("_mcp._tcp._weather.tools.", text, 3, "other-model", [1.0]))
    assert server.stats["embedding_ignored"] == 1
    bad, _ = ask(server, embedded_query("_mcp._tcp._weather.tools.", text, 3, "hw", [1.0, 0]))
    assert bad.header.rcode == RCODE.FORMERR and server.stats["formerr_embedding"] == 1
