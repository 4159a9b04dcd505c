"""The resolver's and agents' struct codec (nodes.dns.message) against dnslib, byte for byte.

Whatever :func:`parse_response` accepts must read exactly as dnslib reads it; whatever it
declines goes to dnslib. :func:`encode_query` must write exactly dnslib's bytes.
"""

from __future__ import annotations

import random

from dnslib import NS as NSrec
from dnslib import QTYPE, RR, SOA, SRV, TXT, A, DNSHeader, DNSQuestion, DNSRecord, EDNSOption
from hypothesis import given, settings
from hypothesis import strategies as st

from nodes.dns.message import Message, encode_query, parse_response
from nodes.dns.wire import Intent, opt_record
from sim.build.hierarchy import build_hierarchy
from topologies.synthetic import synthetic


def _fields(msg: DNSRecord | Message) -> tuple:
    """Everything the resolver reads, in one comparable tuple."""
    def rdata(rr: object) -> object:
        d = rr.rdata  # type: ignore[attr-defined]
        t = rr.rtype  # type: ignore[attr-defined]
        if t == QTYPE.OPT:
            return tuple((o.code, bytes(o.data)) for o in d)
        if t == QTYPE.A:
            return str(d)
        if t == QTYPE.NS:
            return str(d.label)
        if t == QTYPE.SRV:
            return (d.priority, d.weight, d.port, str(d.target))
        if t == QTYPE.TXT:
            return tuple(bytes(x) for x in d.data)
        if t == QTYPE.SOA:
            return (str(d.mname), str(d.rname), tuple(d.times))
        return None

    h = msg.header
    return (
        (h.id, h.qr, h.opcode, h.aa, h.tc, h.rd, h.ra, h.rcode),
        tuple((str(q.qname), q.qtype, q.qclass) for q in msg.questions),
        *(tuple((str(rr.rname), rr.rtype, rr.rclass, rr.ttl, rdata(rr)) for rr in section)
          for section in (msg.rr, msg.auth, msg.ar)),
    )


def _dnslib_query(qid: int, rd: int, qname: str, qtype: int, opts: list[tuple[int, bytes]],
                  size: int, do: bool) -> bytes:
    q = DNSRecord(DNSHeader(id=qid, qr=0, rd=rd))
    q.add_question(DNSQuestion(qname, qtype))
    opt = opt_record(None, 65432, size)
    opt.rdata.extend(EDNSOption(c, d) for c, d in opts)
    if do:
        opt.ttl |= 0x8000
    q.add_ar(opt)
    return q.pack()


labels = st.text("abcdefghijklmnopqrstuvwxyz0123456789-_", min_size=1, max_size=20)


@settings(max_examples=300, deadline=None)
@given(qid=st.integers(0, 65535), rd=st.integers(0, 1), name=st.lists(labels, min_size=0,
       max_size=6), qtype=st.sampled_from([1, 2, 16, 33, 255, 48]),
       opts=st.lists(st.tuples(st.integers(0, 65535), st.binary(max_size=40)), max_size=3),
       size=st.integers(512, 65535), do=st.booleans())
def test_encode_query_is_dnslibs(qid: int, rd: int, name: list[str], qtype: int,
                                 opts: list[tuple[int, bytes]], size: int, do: bool) -> None:
    qname = ".".join(name) + "." if name else "."
    ours = encode_query(qid, rd << 8, qname, qtype, opts, size, 0x8000 if do else 0)
    assert ours == _dnslib_query(qid, rd, qname, qtype, opts, size, do)


def test_encode_query_declines_names_it_cannot_write() -> None:
    assert encode_query(1, 0, "a b.tools.", 33, []) is None
    assert encode_query(1, 0, "é.tools.", 33, []) is None
    assert encode_query(1, 0, "a..tools.", 33, []) is None
    assert encode_query(1, 0, ("x" * 64) + ".tools.", 33, []) is None


def test_server_replies_read_as_dnslib_reads_them() -> None:
    """Referrals (K = 0 with TXT hints, top-K), SRV answers with scores, A, NXDOMAIN with
    SOA, TC: every reply the in-memory hierarchy sends for a sample of questions."""
    ns = synthetic(n_tools=300, branching=4, depth=2, seed=3, n_orgs=1, n_queries=20)
    hierarchy = build_hierarchy(ns, max_udp_size=700)  # some replies truncate (TC)
    rng = random.Random(5)
    seen = 0
    servers = list(hierarchy.servers.values())
    zones = sorted(ns.zones)
    for q in ns.queries:
        for k in (0, 1, 3):
            for server in servers:
                zone = rng.choice(zones)
                if zone == ".":
                    continue
                name = f"_{q.service}._tcp._{zone}"
                opts = [(65432, Intent(q.text, k).encode()), (65433, b"")]
                for size in (512, 1232):
                    wire = encode_query(rng.randrange(65536), 0, name, 33, opts, size)
                    reply = server.handle(wire, ("127.0.0.9", 53), 0.0)
                    assert reply is not None
                    fast = parse_response(reply)
                    assert fast is not None, DNSRecord.parse(reply)
                    assert _fields(fast) == _fields(DNSRecord.parse(reply))
                    seen += 1
        tool = ns.tools[q.truth[0]]
        for qtype in (1, 16, 33, 6, 2):
            for name in (tool.target, f"_{tool.service}._tcp.{tool.zone}", "nope." + tool.zone,
                         tool.zone):
                wire = encode_query(7, 0, name, qtype, [], 1232)
                for server in servers:
                    reply = server.handle(wire, ("127.0.0.9", 53), 0.0)
                    if reply is None:
                        continue
                    fast = parse_response(reply)
                    assert fast is not None
                    assert _fields(fast) == _fields(DNSRecord.parse(reply))
                    seen += 1
    assert seen > 1000


def _sample_reply() -> bytes:
    r = DNSRecord(DNSHeader(id=99, qr=1, aa=1, rcode=0))
    r.add_question(DNSQuestion("_mcp._tcp._x.tools.", QTYPE.SRV))
    r.add_answer(RR("_mcp._tcp._x.tools.", QTYPE.SRV, ttl=60,
                    rdata=SRV(0, 0, 443, "a.x.tools.")))
    r.add_auth(RR("x.tools.", QTYPE.NS, ttl=600, rdata=NSrec("ns1.x.tools.")))
    r.add_auth(RR("x.tools.", QTYPE.SOA, ttl=60, rdata=SOA("ns1.x.tools.", "h.x.tools.",
                                                           (1, 2, 3, 4, 5))))
    r.add_ar(RR("a.x.tools.", QTYPE.A, ttl=60, rdata=A("127.0.0.1")))
    r.add_ar(RR("x.tools.", QTYPE.TXT, ttl=60, rdata=TXT([b"summary=a b", b"kind=leaf"])))
    r.add_ar(opt_record(Intent("hi", 2)))
    return r.pack()


def test_handmade_reply_with_compression() -> None:
    wire = _sample_reply()
    fast = parse_response(wire)
    assert fast is not None
    assert _fields(fast) == _fields(DNSRecord.parse(wire))
    assert fast.to_dnslib().pack() == DNSRecord.parse(wire).pack()


@settings(max_examples=2000, deadline=None)
@given(data=st.data())
def test_mutated_replies_read_as_dnslib_or_declined(data: st.DataObject) -> None:
    """Flip, cut or extend a valid reply: if the fast reader accepts the bytes, dnslib
    reads them the same way (it never accepts what dnslib rejects)."""
    wire = bytearray(_sample_reply())
    for _ in range(data.draw(st.integers(1, 4))):
        op = data.draw(st.sampled_from(["flip", "cut", "add"]))
        if not wire:
            op = "add"
        if op == "flip":
            i = data.draw(st.integers(0, len(wire) - 1))
            wire[i] = data.draw(st.integers(0, 255))
        elif op == "cut":
            del wire[data.draw(st.integers(0, len(wire) - 1)):]
        else:
            wire += data.draw(st.binary(min_size=1, max_size=8))
    fast = parse_response(bytes(wire))
    if fast is None:
        return
    assert _fields(fast) == _fields(DNSRecord.parse(bytes(wire)))


def test_queries_and_dnssec_types_are_left_to_dnslib() -> None:
    q = _dnslib_query(1, 1, "tools.", 33, [], 1232, False)
    assert parse_response(q) is None  # QR clear
    r = DNSRecord(DNSHeader(id=1, qr=1))
    r.add_question(DNSQuestion("tools.", QTYPE.DS))
    r.add_answer(*RR.fromZone("tools. 60 IN DS 1 15 2 " + "ab" * 32))
    assert parse_response(r.pack()) is None


targets = st.lists(labels, min_size=1, max_size=4).map(lambda ls: ".".join(ls) + ".tools.")


@settings(max_examples=300, deadline=None)
@given(qname=st.sampled_from(["_mcp._tcp._tools.", "_MCP._tcp._Weather.TOOLS.",
                              "_a2a._tcp._hist.weather.tools.", "tools."]),
       eps=st.lists(st.tuples(targets, st.integers(0, 255), st.integers(0, 65535)),
                    max_size=12),
       outcome=st.sampled_from(["ok", "error", "nxdomain"]), rd=st.integers(0, 1),
       edns=st.sampled_from([None, 0, 512, 700, 1232, 4096]),
       transport=st.sampled_from(["udp", "tcp"]))
def test_answer_to_stub_is_dnslibs(qname: str, eps: list, outcome: str, rd: int,
                                   edns: int | None, transport: str) -> None:
    """The resolver's fast answer (QueryView + encode_answer) equals its dnslib answer."""
    from nodes.dns.codec import parse_query
    from nodes.resolver.core import RecursiveResolver, _Task
    from nodes.resolver.types import Discovery, DiscoveryResult, Endpoint

    opts = None if edns is None else [(65432, Intent("x", 3).encode())]
    wire = encode_query(4242, rd << 8, qname, 33, opts, edns or 0)
    assert wire is not None
    result = DiscoveryResult(request=Discovery("x"), started=0.0)
    if outcome == "ok":
        result.endpoints = [Endpoint(t, f"127.64.{i // 250}.{i % 250 + 1}", port, 0, w, "z.")
                            for i, (t, w, port) in enumerate(eps)]
    elif outcome == "error":
        result.error = "timeout"
    else:
        result.rcode = "NXDOMAIN"
    sent = []
    for query in (DNSRecord.parse(wire), parse_query(wire)):
        resolver = RecursiveResolver(["127.1.0.1"], random.Random(0))
        task = _Task(gen=None, result=result, client=(query, ("127.2.0.1", 40000), transport),
                     client_wire=wire)  # type: ignore[arg-type]
        resolver._answer_client(task, 0.0)
        (out,) = resolver.to_send()
        sent.append(bytes(out.data))
    assert sent[0] == sent[1]


@settings(max_examples=300, deadline=None)
@given(name=st.text("abcXYZ019-_*.é ?\x00", max_size=70))
def test_plain_name_is_the_reference_form(name: str) -> None:
    """plain_name (memoised) equals its definition: codec.name_wire when every label is
    1-63 plain bytes and the whole at most 255, else None; asked twice, the same."""
    from nodes.dns.codec import name_wire
    from nodes.dns.message import _SAFE, plain_name

    if name in (".", ""):
        want: bytes | None = b"\x00"
    else:
        labels = name.encode("ascii", "replace").rstrip(b".").split(b".")
        ok = all(0 < len(label) <= 63 and not label.translate(None, _SAFE)
                 for label in labels)
        want = name_wire(name) if ok and len(name_wire(name)) <= 255 else None
    assert plain_name(name) == want
    assert plain_name(name) == want


def test_parse_memo_is_bounded_in_messages_and_bytes(monkeypatch) -> None:
    from nodes.dns import message

    monkeypatch.setattr(message, "_MEMO", message.OrderedDict())
    monkeypatch.setattr(message, "_memo_bytes", [0])
    monkeypatch.setattr(message, "MEMO_SIZE", 50)
    monkeypatch.setattr(message, "MEMO_BYTES", 64 * 1024)
    for i in range(2000):  # distinct responses, up to 3 kB each (TXT records)
        reply = DNSRecord(DNSHeader(id=i, qr=1, aa=1), q=DNSQuestion("t.tools.", QTYPE.TXT))
        reply.add_answer(RR("t.tools.", QTYPE.TXT, rdata=TXT([b"x" * 200] * (i % 15 + 1)),
                            ttl=i))
        assert parse_response(reply.pack()) is not None
        held = sum(map(len, message._MEMO))
        assert len(message._MEMO) <= 50 and held == message._memo_bytes[0] <= 64 * 1024
    big = DNSRecord(DNSHeader(id=1, qr=1), q=DNSQuestion("t.tools.", QTYPE.TXT))
    big.add_answer(RR("t.tools.", QTYPE.TXT, rdata=TXT([b"y" * 250] * 20)))
    wire = bytes(big.pack())  # 5 kB: over 1/16 of the budget, read but not kept
    assert parse_response(wire) is not None and wire[2:] not in message._MEMO


def test_answer_memo_gives_the_bytes_encoding_gives_and_is_bounded(monkeypatch) -> None:
    """encode_answer's memo (keyed by all but the ID) returns what _encode_answer writes for
    every ID, truncated and unwritable answers (None) included, and holds at most
    ANSWER_MEMO."""
    from nodes.dns import message

    monkeypatch.setattr(message, "_ANSWERS", message.OrderedDict())
    monkeypatch.setattr(message, "ANSWER_MEMO", 20)
    question = encode_query(1, 0, "_mcp._tcp.w.tools.", 33, None, 0)[12:]  # type: ignore[index]
    rng = random.Random(3)
    for i in range(300):
        n = rng.randrange(0, 40)  # over ANSWER_MEMO_MAX_SRV: not kept
        name = "t {}.w.tools." if i % 7 == 0 else "t{}.w.tools."  # a space: not plain
        srv = [(0, 1, 443, name.format(j)) for j in range(n)]
        a = [(name.format(j), f"127.64.0.{j + 1}") for j in range(n)]
        limit = rng.choice([512, 1232, 65535])  # 512 bytes: many answers do not fit
        args = (0, 0, question, srv, a, 1232 if i % 2 else None, limit)
        for qid in (i, 65535 - i):
            assert message.encode_answer(qid, *args) == message._encode_answer(qid, *args)
        assert len(message._ANSWERS) <= 20
    assert None in message._ANSWERS.values()  # "cannot be written" (None) is kept too


def test_derived_readings_are_shared_by_messages_of_the_same_content() -> None:
    """What a reader derives from a response is kept with its content: a message with the
    same bytes after the ID (another ID) finds it; other content, or dnslib's objects,
    compute again; at most DERIVED_MAX readings are kept per content."""
    from nodes.dns.message import DERIVED_MAX, derive

    reply = DNSRecord(DNSHeader(id=7, qr=1, aa=1), q=DNSQuestion("d.tools.", QTYPE.A))
    reply.add_answer(RR("d.tools.", QTYPE.A, rdata=A("127.0.0.9"), ttl=30))
    wire = bytes(reply.pack())
    first, again = parse_response(wire), parse_response(b"\x12\x34" + wire[2:])
    assert first is not None and again is not None and again.header.id == 0x1234
    calls: list[str] = []

    def reading(tag: str) -> str:
        calls.append(tag)
        return f"{tag}:{first.rr[0].rdata}"

    assert derive(first, "k", lambda: reading("k")) == "k:127.0.0.9"
    assert derive(again, "k", lambda: reading("k")) == "k:127.0.0.9" and calls == ["k"]
    other = DNSRecord(DNSHeader(id=7, qr=1, aa=1), q=DNSQuestion("e.tools.", QTYPE.A))
    other.add_answer(RR("e.tools.", QTYPE.A, rdata=A("127.0.0.8"), ttl=30))
    msg = parse_response(bytes(other.pack()))
    derive(msg, "k", lambda: reading("other"))
    derive(DNSRecord.parse(wire), "k", lambda: reading("dnslib"))  # no memo on dnslib's
    assert calls == ["k", "other", "dnslib"]
    for i in range(DERIVED_MAX + 5):
        derive(first, ("many", i), lambda: reading("many"))
    assert len(first.derived) == DERIVED_MAX and first.derived is again.derived
