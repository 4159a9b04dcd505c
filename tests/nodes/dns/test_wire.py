"""The ToolDNS intent option codec and the name helpers (nodes/dns/wire.py)."""

from __future__ import annotations

import pytest
from dnslib import EDNS0, QTYPE, DNSRecord, EDNSOption
from hypothesis import given, settings
from hypothesis import strategies as st

from nodes.dns.wire import (
    DEFAULT_OPTION_CODE,
    Intent,
    IntentError,
    ToolQuery,
    cursor_name,
    expanded_name,
    get_intent,
    is_subdomain,
    normalise,
    opt_record,
    parent,
    parse_tool_name,
    requester_udp_size,
)

# ------------------------------------------------------------------ option codec


def test_encode_known_example_exact_bytes():
    assert Intent("weather", 3).encode() == b"\x00\x00\x07\x03weather"


def test_encode_length_counts_payload_bytes_not_characters():
    # "é" is two bytes in UTF-8: length field is 3, K is 255
    assert Intent("né", 255).encode() == b"\x00\x00\x03\xffn\xc3\xa9"


def test_encode_empty_intent_k0():
    assert Intent("", 0).encode() == b"\x00\x00\x00\x00"


def test_encode_length_is_big_endian_16_bit():
    data = Intent("x" * 300, 1).encode()
    assert data[:4] == b"\x00\x01\x2c\x01"
    assert len(data) == 304


def test_decode_known_example():
    intent = Intent.decode(b"\x00\x00\x07\x03weather")
    assert (intent.text, intent.k, intent.version) == ("weather", 3, 0)


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=300), k=st.integers(0, 255))
def test_round_trip(text, k):
    data = Intent(text, k).encode()
    assert len(data) == 4 + len(text.encode("utf-8"))
    back = Intent.decode(data)
    assert back == Intent(text, k)


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=64))
def test_decode_arbitrary_bytes_is_exact_or_raises(data):
    try:
        intent = Intent.decode(data)
    except IntentError:
        return
    assert intent.encode() == data  # anything accepted must be canonical


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00",
        b"\x00\x00\x00",  # header needs four bytes
        b"\x00\x00\x05\x01abc",  # length says 5, payload has 3
        b"\x00\x00\x02\x01abc",  # length says 2, payload has 3
        b"\x00\x01\x00\x01",  # length 256, no payload
        b"\x00\x00\x02\x01\xff\xfe",  # not UTF-8
        b"\x00\x00\x01\x01\x80",  # lone continuation byte
        b"\x00\x00\x03\x01\xed\xa0\x80",  # UTF-8-encoded surrogate
        b"\x01\x00\x07\x03weather",  # version 1
        b"\xff\x00\x00\x00",  # version 255
    ],
)
def test_decode_malformed_raises(data):
    with pytest.raises(IntentError):
        Intent.decode(data)


def test_intent_error_is_a_value_error():
    assert issubclass(IntentError, ValueError)


@pytest.mark.parametrize("k", [-1, 256, 1000])
def test_k_must_fit_eight_bits(k):
    with pytest.raises(IntentError):
        Intent("x", k)


def test_payload_length_must_fit_option():
    Intent("a" * 65531)  # largest payload that fits one 16-bit option length
    with pytest.raises(IntentError):
        Intent("a" * 65532)


# ------------------------------------------------------------------ names


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("_mcp._tcp._weather.tools.", ToolQuery("mcp", "tcp", "weather.tools.", True)),
        ("_mcp._tcp.history.weather.tools.", ToolQuery("mcp", "tcp", "history.weather.tools.",
                                                       False)),
        ("_a2a._udp._tools.", ToolQuery("a2a", "udp", "tools.", True)),
        ("_REST._TCP._Weather.Tools", ToolQuery("rest", "tcp", "weather.tools.", True)),
        ("_skill._tcp.tools.", ToolQuery("skill", "tcp", "tools.", False)),
    ],
)
def test_parse_tool_name(name, expected):
    assert parse_tool_name(name) == expected


@pytest.mark.parametrize(
    "name",
    [
        "weather.tools.",
        "open-meteo.history.weather.tools.",
        "_mcp._tcp.",  # no zone
        "_mcp.tcp.weather.tools.",  # protocol label without underscore
        "mcp._tcp.weather.tools.",  # service label without underscore
        "_._tcp.weather.tools.",  # empty service
        "_mcp._.weather.tools.",  # empty protocol
        "_mcp._tcp._.tools.",  # cursor marker with nothing after it
        "_mcp._tcp.__weather.tools.",  # two cursor markers
        ".",
        "",
    ],
)
def test_parse_tool_name_rejects_other_names(name):
    assert parse_tool_name(name) is None


def test_cursor_and_expanded_names():
    assert cursor_name("mcp", "weather.tools.") == "_mcp._tcp._weather.tools."
    assert cursor_name("rest", "Weather.Tools", proto="udp") == "_rest._udp._weather.tools."
    assert cursor_name("mcp", "tools.") == "_mcp._tcp._tools."
    assert expanded_name("mcp", "history.weather.tools.") == "_mcp._tcp.history.weather.tools."
    assert expanded_name("a2a", "history.weather.tools") == "_a2a._tcp.history.weather.tools."
    with pytest.raises(ValueError):
        cursor_name("mcp", ".")


@pytest.mark.parametrize("zone", ["tools.", "weather.tools.", "a.b.c.tools."])
@pytest.mark.parametrize("service", ["mcp", "a2a", "rest", "skill"])
def test_names_parse_back(service, zone):
    assert parse_tool_name(cursor_name(service, zone)) == ToolQuery(service, "tcp", zone, True)
    assert parse_tool_name(expanded_name(service, zone)) == ToolQuery(service, "tcp", zone, False)


def test_normalise():
    assert normalise("Weather.TOOLS") == "weather.tools."
    assert normalise("tools.") == "tools."
    assert normalise(".") == "."


@pytest.mark.parametrize(
    ("zone", "expected"),
    [
        ("history.weather.tools.", "weather.tools."),
        ("weather.tools", "tools."),
        ("tools.", "."),
        ("Tools", "."),
    ],
)
def test_parent(zone, expected):
    assert parent(zone) == expected


def test_parent_of_root_raises():
    with pytest.raises(ValueError):
        parent(".")


@pytest.mark.parametrize(
    ("name", "zone", "expected"),
    [
        ("history.weather.tools.", "weather.tools.", True),
        ("weather.tools.", "weather.tools.", True),
        ("WEATHER.tools", "weather.TOOLS.", True),
        ("anything.at.all.", ".", True),
        (".", ".", True),
        ("xweather.tools.", "weather.tools.", False),  # label-wise, not string-wise
        ("weather.tools.", "history.weather.tools.", False),
        ("tools.", "weather.tools.", False),
        ("weather.tools.", "example.", False),
    ],
)
def test_is_subdomain(name, zone, expected):
    assert is_subdomain(name, zone) is expected


# ------------------------------------------------------------------ in a DNS message


def _query_with(opt: EDNS0 | None) -> bytes:
    q = DNSRecord.question("_mcp._tcp._weather.tools.", "SRV")
    if opt is not None:
        q.add_ar(opt)
    return q.pack()


def test_option_survives_pack_and_parse_with_custom_code():
    intent = Intent("historical temperature in Hong Kong — 2019", 4)
    wire = _query_with(opt_record(intent, option_code=65001, udp_size=4096))
    msg = DNSRecord.parse(wire)
    assert get_intent(msg, option_code=65001) == intent
    assert get_intent(msg) is None  # the default code is not in the message
    assert requester_udp_size(msg) == 4096


def test_option_found_among_other_options():
    intent = Intent("weather", 3)
    opt = EDNS0(udp_len=1232, opts=[EDNSOption(10, b"\x01" * 8),  # a cookie first
                                    EDNSOption(DEFAULT_OPTION_CODE, intent.encode())])
    msg = DNSRecord.parse(_query_with(opt))
    assert get_intent(msg) == intent


def test_opt_record_layout_on_the_wire():
    wire = _query_with(opt_record(Intent("weather", 3)))
    # OPT: root name, type 41, class = UDP size 1232, TTL 0, then the option TLV
    option = (DEFAULT_OPTION_CODE.to_bytes(2, "big") + (11).to_bytes(2, "big")
              + b"\x00\x00\x07\x03weather")
    opt = b"\x00" + QTYPE.OPT.to_bytes(2, "big") + (1232).to_bytes(2, "big") + b"\x00" * 4
    assert wire.endswith(opt + len(option).to_bytes(2, "big") + option)


def test_no_opt_or_no_intent():
    assert get_intent(DNSRecord.parse(_query_with(None))) is None
    msg = DNSRecord.parse(_query_with(opt_record(None)))
    assert get_intent(msg) is None
    assert requester_udp_size(msg) == 1232


def test_malformed_option_in_message_raises():
    opt = EDNS0(udp_len=1232, opts=[EDNSOption(DEFAULT_OPTION_CODE, b"\x00\x00\x09\x01abc")])
    with pytest.raises(IntentError):
        get_intent(DNSRecord.parse(_query_with(opt)))


def test_requester_udp_size_floor():
    assert requester_udp_size(DNSRecord.parse(_query_with(None))) == 512
    small = DNSRecord.parse(_query_with(EDNS0(udp_len=100)))
    assert requester_udp_size(small) == 512
