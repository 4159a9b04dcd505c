"""Golden replies: AuthoritativeServer.handle() answers byte for byte as pinned.

``tests/data/golden_replies.json.gz`` (gzip-compressed JSON, about 2 MB of hex unpacked)
holds zone data and about 1,600 queries with the exact reply bytes the server produced when
the file was generated (the struct/ReplyBuilder implementation of commit 3c289fa). The
zones are stored in the file, not rebuilt from the generators, so edits to
``topologies``/``sim`` cannot move the goalposts: a synthetic namespace
(``synthetic(n_tools=600, branching=4, depth=2, n_orgs=2, seed=3)`` placed by
``sim.build.hierarchy.build_hierarchy``) plus two hand-built zones with long names, out-of-zone
name servers and replies larger than 16 KiB (compression pointers stop at offset 0x3FFF).

The queries cover semantic cursor queries at the root, TLD, intermediate and leaf zones with
K 0–5 (K=0 truncation over small EDNS buffers, and the TCP retry), intents on expanded
names, plain SRV/A/TXT/SOA/NS/ANY lookups, referrals, NXDOMAIN/NODATA, queries without OPT,
mixed-case names, odd header bits, EDNS versions and options, malformed intent options and
queries that only the dnslib fallback parser reads.

Regenerate (only when a reply is *meant* to change)::

    python tests/nodes/authoritative/test_golden_replies.py --regenerate
"""

from __future__ import annotations

import gzip
import json
import random
import struct
import sys
from pathlib import Path

import dns.message
import pytest
from dnslib import DNSRecord

# allow `python tests/nodes/authoritative/test_golden_replies.py --regenerate` from a checkout
if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from nodes.authoritative.server import AuthoritativeServer
from nodes.dns import codec
from nodes.dns.wire import DEFAULT_OPTION_CODE, Intent
from nodes.dns.zone import Delegation, ServerRef, ToolRecord, Ttls, ZoneData
from nodes.scoring import BM25Scorer, TfidfScorer, tokenize, top_k

GOLDEN = Path(__file__).resolve().parents[2] / "data" / "golden_replies.json.gz"
SRC = ("127.0.0.9", 5555)

# ---------------------------------------------------------------- zone data as JSON


def _ref(r: ServerRef) -> list[str]:
    return [r.host, r.address]


def zone_to_json(z: ZoneData) -> dict:
    return {
        "name": z.name, "servers": [_ref(r) for r in z.servers], "summary": z.summary,
        "children": [{"zone": c.zone, "servers": [_ref(r) for r in c.servers],
                      "summary": c.summary, "services": sorted(c.services), "org": c.org,
                      "leaf": c.leaf} for c in z.children],
        "tools": [[t.tool_id, t.name, t.description, t.service, t.target, t.address, t.port,
                   t.org, t.proto, t.priority, t.weight] for t in z.tools],
        "org": z.org,
        "ttls": [z.ttls.ns, z.ttls.srv, z.ttls.a, z.ttls.soa, z.ttls.negative],
        "serial": z.serial,
    }


def zone_from_json(d: dict) -> ZoneData:
    refs = lambda rs: tuple(ServerRef(h, a) for h, a in rs)  # noqa: E731
    return ZoneData(
        name=d["name"], servers=refs(d["servers"]), summary=d["summary"],
        children=tuple(Delegation(c["zone"], refs(c["servers"]), c["summary"],
                                  frozenset(c["services"]), c["org"], c["leaf"])
                       for c in d["children"]),
        tools=tuple(ToolRecord(*t) for t in d["tools"]), org=d["org"], ttls=Ttls(*d["ttls"]),
        serial=d["serial"])


# ---------------------------------------------------------------- servers under test

#: name -> (which zones, AuthoritativeServer keyword arguments). "each" means one server per
#: synthetic zone, named by the zone.
CONFIGS: dict[str, tuple[str, dict]] = {
    "each": ("synthetic", {}),
    "all": ("synthetic", {}),
    "all-512": ("synthetic", {"max_udp_size": 512}),
    "all-4096": ("synthetic", {"max_udp_size": 4096}),
    "all-tfidf": ("synthetic", {"scorer": "tfidf"}),
    "all-code65001": ("synthetic", {"option_code": 65001}),
    "hand": ("hand", {}),
    "hand-64k": ("hand", {"max_udp_size": 65535}),
}


def make_servers(golden: dict, packet_cache: int) -> dict[str, AuthoritativeServer]:
    groups = {g: [zone_from_json(z) for z in zs] for g, zs in golden["zones"].items()}
    out: dict[str, AuthoritativeServer] = {}
    for name, (group, kwargs) in CONFIGS.items():
        kw = dict(kwargs)
        if kw.get("scorer") == "tfidf":
            kw["scorer"] = TfidfScorer()
        if name == "each":
            for zone in groups[group]:
                out[zone.name] = AuthoritativeServer([zone], packet_cache=packet_cache, **kw)
        else:
            out[name] = AuthoritativeServer(groups[group], packet_cache=packet_cache, **kw)
    return out


# ---------------------------------------------------------------- query construction


def encode_name(name: str) -> bytes:
    """Labels as given (case kept); ``name`` is absolute or relative to the root."""
    labels = [x for x in name.rstrip(".").split(".") if x] if name != "." else []
    return b"".join(bytes([len(x)]) + x.encode("latin-1") for x in labels) + b"\x00"


def make_query(
    name: str | bytes, qtype: int, qid: int = 0x1234, flags: int = 0, qclass: int = 1,
    edns: int | None = 1232, edns_ttl: int = 0, options: list[tuple[int, bytes]] | None = None,
    counts: tuple[int, int, int, int] | None = None, tail: bytes = b"",
) -> bytes:
    qname = name if isinstance(name, bytes) else encode_name(name)
    question = qname + struct.pack("!HH", qtype, qclass)
    opt = b""
    if edns is not None:
        data = b"".join(struct.pack("!HH", c, len(d)) + d for c, d in options or ())
        opt = b"\x00" + struct.pack("!HHIH", 41, edns, edns_ttl, len(data)) + data
    qd, an, ns, ar = counts or (1, 0, 0, 1 if opt else 0)
    return struct.pack("!HHHHHH", qid, flags, qd, an, ns, ar) + question + tail + opt


def intent_option(text: str, k: int, code: int = DEFAULT_OPTION_CODE) -> tuple[int, bytes]:
    return code, Intent(text, k).encode()


SRV, A, NS, SOA, TXT, AAAA, MX, ANY = 33, 1, 2, 6, 16, 28, 15, 255


def generate_cases(golden: dict, seed: int = 7) -> list[dict]:
    """The query list (run once, with the reference implementation, to pin replies)."""
    rng = random.Random(seed)
    zones = [zone_from_json(z) for z in golden["zones"]["synthetic"]]
    by_name = {z.name: z for z in zones}
    leaves = [z for z in zones if z.is_leaf and z.tools]
    inner = [z for z in zones if z.children and z.name not in (".", "tools.")]
    cases: list[dict] = []

    def add(server: str, wire: bytes, what: str, transport: str = "udp") -> None:
        cases.append({"server": server, "transport": transport, "what": what,
                      "query": wire.hex()})

    def mixcase(name: str) -> str:
        return "".join(c.upper() if rng.random() < 0.4 else c for c in name)

    def qid() -> int:
        return rng.randrange(0x10000)

    def words(z: ZoneData, n: int) -> str:
        pool = [w for t in z.tools for w in tokenize(f"{t.name} {t.description}")]
        pool += [w for c in z.children for w in tokenize(c.summary)] + tokenize(z.summary)
        pool = pool or ["nothing"]
        return " ".join(rng.choice(pool) for _ in range(n))

    def intents(z: ZoneData) -> list[str]:
        texts = [words(z, 1), words(z, 3), words(z, 6), "", "the of and",
                 words(z, 2) + " zzqx", words(z, 2).upper(), "météo " + words(z, 1)]
        if z.tools:
            t = rng.choice(z.tools)
            texts.append(f"{t.name} {t.description}")
        return texts

    # Semantic cursor queries: own server and the all-zones servers, K 0..5.
    sample = [by_name["tools."], *inner, *rng.sample(leaves, 8),
              *[z for z in leaves if z.org]]
    for z in sample:
        cursor = f"_mcp._tcp._{z.name}"
        for text in intents(z):
            k = rng.choice([0, 1, 2, 3, 3, 4, 5])
            add(z.name, make_query(cursor, SRV, qid(), options=[intent_option(text, k)]),
                f"cursor {z.name} K={k}")
        for k in range(6):
            text = words(z, 3)
            wire = make_query(mixcase(cursor), rng.choice([SRV, SRV, ANY]), qid(),
                              flags=rng.choice([0, 0x0100, 0x0120, 0x0010]),
                              options=[intent_option(text, k)])
            add(z.name, wire, f"cursor mixed case K={k}")
            add("all", wire, f"cursor (all) K={k}")
        for service, proto in (("a2a", "tcp"), ("rest", "tcp"), ("skill", "tcp"),
                               ("mcp", "udp"), ("nosuch", "tcp")):
            wire = make_query(f"_{service}._{proto}._{z.name}", SRV, qid(),
                              options=[intent_option(words(z, 2), rng.choice([0, 1, 3]))])
            add(z.name, wire, f"cursor {service}/{proto}")
        for size in (0, 512, 600, 900, 4096, 65535):  # K=0: summaries / whole set, TC
            wire = make_query(cursor, SRV, qid(), edns=size,
                              options=[intent_option(words(z, 2), 0)])
            add(z.name, wire, f"cursor K=0 edns {size}")
            if size in (512, 4096):
                add("all-512" if size == 512 else "all-4096", wire, f"cursor K=0 edns {size}")
        wire = make_query(cursor, SRV, qid(), edns=512, options=[intent_option("", 0)])
        add(z.name, wire, "cursor K=0 tcp", "tcp")
        add("all-512", wire, "cursor K=0 tcp", "tcp")
        add("all-tfidf", make_query(cursor, SRV, qid(), options=[
            intent_option(words(z, 3), 3)]), "cursor tfidf")
        add("all-code65001", make_query(cursor, SRV, qid(), options=[
            intent_option(words(z, 3), 3)]), "cursor, other option code")
        add("all-code65001", make_query(cursor, SRV, qid(), options=[
            intent_option(words(z, 3), 2, 65001)]), "cursor, server's option code")
    # The root refers cursor queries for the TLD; every server refers below its cuts.
    for k in (0, 1, 3):
        add(".", make_query("_mcp._tcp._tools.", SRV, qid(), options=[
            intent_option("weather", k)]), f"root cursor K={k}")
    for z in inner[:3]:
        child = rng.choice(z.children).zone
        add("tools.", make_query(f"_mcp._tcp._{z.name}", SRV, qid(), options=[
            intent_option("x", 2)]), "cursor below a cut")
        add(z.name, make_query(f"_mcp._tcp._{child}", SRV, qid(), options=[
            intent_option("x", 2)]), "cursor for a child")
        add(z.name, make_query(f"_mcp._tcp.{child}", SRV, qid()), "expanded below cut")
        add(z.name, make_query(f"www.{child}", A, qid(), edns=None), "name below cut")
        add("tools.", make_query(f"ns1.{child}", A, qid()), "glue name below cut")
    # Intents on expanded names: leaf answers semantically, others look up the name.
    for z in rng.sample(leaves, 5):
        for k in (0, 1, 3):
            add(z.name, make_query(f"_mcp._tcp.{z.name}", rng.choice([SRV, ANY]), qid(),
                                   options=[intent_option(words(z, 2), k)]),
                f"expanded+intent K={k}")
        add(z.name, make_query(z.tools[0].target, A, qid(), options=[
            intent_option("x", 1)]), "A with intent")
        add(z.name, make_query(f"_mcp._tcp.{z.name}", TXT, qid(), options=[
            intent_option("x", 1)]), "TXT at SRV name with intent")
    # Plain lookups without the option.
    for z in zones:
        server = z.name
        for qtype in (SOA, NS, TXT, ANY, A, AAAA, MX, SRV):
            for edns in (None, 1232):
                add(server, make_query(z.name, qtype, qid(), edns=edns),
                    f"apex {qtype} edns={edns}")
        for server_name in z.servers:
            add(server, make_query(server_name.host, A, qid()), "own NS host A")
        add(server, make_query(f"nope.{z.name}", A, qid()), "nxdomain")
        add(server, make_query(f"a.b.c.{z.name}", TXT, qid(), edns=None), "nxdomain deep")
        add(server, make_query("example.com.", A, qid()), "out of zone")
        add(server, make_query(mixcase(z.name), SOA, qid(), edns=None), "apex mixed case")
    for z in leaves:
        t = rng.choice(z.tools)
        for qtype in (A, TXT, ANY, AAAA):
            add(z.name, make_query(mixcase(t.target), qtype, qid(),
                                   edns=rng.choice([None, 1232])), f"target {qtype}")
        for service in ("mcp", "rest", "skill", "a2a"):
            wire = make_query(f"_{service}._tcp.{z.name}", SRV, qid(),
                              edns=rng.choice([None, 512, 1232, 4096]))
            add(z.name, wire, f"expanded {service}")
            add(z.name, wire, f"expanded {service} tcp", "tcp")
        add(z.name, make_query(f"_tcp.{z.name}", SRV, qid()), "empty non-terminal")
        add(z.name, make_query(f"_mcp._tcp.nope.{z.name}", SRV, qid()), "nxdomain SRV")
    for z in rng.sample(leaves, 4):  # the same through the all-zones servers
        t = rng.choice(z.tools)
        for server in ("all", "all-512", "all-4096"):
            add(server, make_query(t.target, A, qid(), edns=None), "target A (all)")
            add(server, make_query(f"_mcp._tcp.{z.name}", SRV, qid(), edns=None),
                "expanded (all)")
            add(server, make_query(f"_mcp._tcp.{z.name}", SRV, qid(), edns=4096),
                "expanded edns 4096 (all)")
    # Header, class, opcode and EDNS variants.
    leaf = leaves[0]
    cursor = f"_mcp._tcp._{leaf.name}"
    opt = [intent_option(words(leaf, 3), 3)]
    variants = [
        ("qclass CH", make_query(cursor, SRV, qid(), qclass=3, options=opt)),
        ("qclass ANY", make_query(leaf.name, SOA, qid(), qclass=255)),
        ("opcode NOTIFY", make_query(leaf.name, SOA, qid(), flags=4 << 11)),
        ("opcode UPDATE", make_query(cursor, SRV, qid(), flags=5 << 11, options=opt)),
        ("opcode STATUS rd", make_query(leaf.name, SOA, qid(), flags=2 << 11 | 0x0100)),
        ("all flag bits", make_query(cursor, SRV, qid(), flags=0x07F0, options=opt)),
        ("tc bit in query", make_query(leaf.name, SOA, qid(), flags=0x0200)),
        ("EDNS version 1", make_query(cursor, SRV, qid(), edns_ttl=1 << 16, options=opt)),
        ("EDNS version 1 plain", make_query(leaf.name, SOA, qid(), edns_ttl=1 << 16)),
        ("DO bit", make_query(cursor, SRV, qid(), edns_ttl=0x8000, options=opt)),
        ("ext rcode bits", make_query(leaf.name, SOA, qid(), edns_ttl=0x05000000)),
        ("cookie + intent", make_query(cursor, SRV, qid(), options=[
            (10, bytes(range(8))), *opt])),
        ("intent + cookie", make_query(cursor, SRV, qid(), options=[
            *opt, (10, bytes(range(8)))])),
        ("two intents", make_query(cursor, SRV, qid(), options=[
            intent_option("aaa", 1), intent_option(words(leaf, 2), 2)])),
        ("unknown option only", make_query(cursor, SRV, qid(), options=[(65000, b"xy")])),
        ("empty option", make_query(cursor, SRV, qid(), options=[(DEFAULT_OPTION_CODE, b"")])),
        ("intent version 1", make_query(cursor, SRV, qid(), options=[
            (DEFAULT_OPTION_CODE, b"\x01\x00\x01\x03x")])),
        ("intent length mismatch", make_query(cursor, SRV, qid(), options=[
            (DEFAULT_OPTION_CODE, b"\x00\x00\x05\x03xy")])),
        ("intent bad utf-8", make_query(cursor, SRV, qid(), options=[
            (DEFAULT_OPTION_CODE, b"\x00\x00\x02\x03\xff\xfe")])),
        ("intent K=255", make_query(cursor, SRV, qid(), options=[
            intent_option(words(leaf, 2), 255)])),
        ("edns 100", make_query(cursor, SRV, qid(), edns=100, options=opt)),
        ("no OPT, cursor", make_query(cursor, SRV, qid(), edns=None)),
        ("qdcount 0", make_query(b"", 0, qid(), edns=None, counts=(0, 0, 0, 0))[:12]),
        ("qdcount 2", make_query(leaf.name, SOA, qid(), edns=None, counts=(2, 0, 0, 0),
                                 tail=encode_name(leaf.name) + struct.pack("!HH", 6, 1))),
        ("answer count 1", make_query(leaf.name, SOA, qid(), edns=None, counts=(1, 1, 0, 0),
                                      tail=b"\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x3c"
                                           b"\x00\x04\x0a\x00\x00\x01")),
        ("two OPT", make_query(cursor, SRV, qid(), options=opt, counts=(1, 0, 0, 2),
                               tail=b"\x00\x00\x29\x04\xd0\x00\x00\x00\x00\x00\x00")),
        ("compressed qname", make_query(b"\x03www\xc0\x0c", A, qid())),
        ("space in label", make_query(b"\x04a b c" + encode_name(leaf.name), A, qid())),
        ("latin-1 label", make_query(b"\x02\xe9t" + encode_name(leaf.name), A, qid())),
        ("dot in label", make_query(b"\x03a.b" + encode_name(leaf.name), A, qid())),
        ("response bit", make_query(leaf.name, SOA, qid(), flags=0x8000)),
        ("short garbage", bytes([1, 2, 3, 4, 5])),
        ("header only", struct.pack("!HHHHHH", qid(), 0, 1, 0, 0, 0)),
        ("garbage with header", struct.pack("!HHHHHH", qid(), 0x0100, 1, 0, 0, 0) +
         bytes(rng.randrange(256) for _ in range(20))),
        ("trailing bytes", make_query(leaf.name, SOA, qid(), edns=None) + b"\x00\x00"),
        ("root SOA", make_query(".", SOA, qid())),
        ("root NS no edns", make_query(".", NS, qid(), edns=None)),
        ("long name", make_query(".".join(["abcdefghij"] * 20) + "." + leaf.name, A, qid())),
    ]
    for what, wire in variants:
        for server in (leaf.name, "all", "."):
            add(server, wire, what)
        add(leaf.name, wire, what + " tcp", "tcp")
    # Hand-built zones: long names, replies above 16 KiB, out-of-zone name servers.
    for server in ("hand", "hand-64k"):
        for k in (0, 1, 3, 5):
            for transport in ("udp", "tcp"):
                add(server, make_query("_mcp._tcp._big.tools.", SRV, qid(), edns=65535,
                                       options=[intent_option("generic number 7 things", k)]),
                    f"big cursor K={k}", transport)
        add(server, make_query("_mcp._tcp.big.tools.", SRV, qid()), "big expanded", "tcp")
        add(server, make_query("_rest._tcp._big.tools.", SRV, qid(), edns=65535,
                               options=[intent_option("generic", 0)]), "big rest K=0", "tcp")
        add(server, make_query("_mcp._tcp.big.tools.", ANY, qid(), edns=65535), "big expanded")
        add(server, make_query("big.tools.", ANY, qid()), "big apex ANY")
        add(server, make_query("big.tools.", NS, qid(), edns=None), "big apex NS")
        for k in (0, 1, 2):
            add(server, make_query("_mcp._tcp._mixed.tools.", SRV, qid(),
                                   options=[intent_option("alpha beta", k)]), f"mixed K={k}")
        add(server, make_query("_rest._tcp._mixed.tools.", SRV, qid(),
                               options=[intent_option("gamma", 0)]), "mixed rest K=0")
        add(server, make_query("www.alpha.mixed.tools.", A, qid()), "mixed below cut")
        add(server, make_query("mixed.tools.", NS, qid()), "mixed apex NS")
        add(server, make_query("mixed.tools.", ANY, qid(), edns=None), "mixed apex ANY")
    return cases


def hand_zones() -> list[ZoneData]:
    """A leaf whose K=0 reply exceeds 16 KiB, and a non-leaf with out-of-zone servers."""
    tools = tuple(
        ToolRecord(f"b{i}", f"tool{i}", f"a generic tool number {i % 13} doing things",
                   ("mcp", "rest")[i % 5 == 0],
                   f"a-rather-long-tool-target-name-number-{i:03d}.sub{i % 3}.big.tools.",
                   f"10.{9 + i // 250}.{i % 250}.{i % 7 + 1}", 443 + i % 4,
                   priority=i % 3, weight=i % 7)
        for i in range(1400))
    big = ZoneData("big.tools.", (ServerRef("ns1.big.tools.", "10.0.5.1"),
                                  ServerRef("ns.elsewhere.example.", "10.0.5.2")),
                   summary="big generic tools", tools=tools, serial=2024)
    kids = tuple(
        Delegation(f"{w}.mixed.tools.",
                   (ServerRef(f"ns1.{w}.mixed.tools.", f"10.0.6.{i + 1}"),
                    ServerRef(f"ns2.{w}.mixed.tools.", f"10.0.7.{i + 1}"),
                    ServerRef(f"dns.provider{i}.example.", f"10.0.8.{i + 1}")),
                   f"{w} summary words " + " ".join(["alpha", "beta", "gamma"][: i % 3 + 1]),
                   frozenset({"mcp"} if i % 2 else {"mcp", "rest"}),
                   org=f"org{i}" if i == 2 else None, leaf=i % 2 == 0)
        for i, w in enumerate(["alpha", "beta", "gamma", "delta", "epsilon"]))
    mixed = ZoneData("mixed.tools.", (ServerRef("ns.elsewhere.example.", "10.0.6.100"),),
                     summary="x" * 300, children=kids,
                     ttls=Ttls(ns=7200, srv=60, a=30, soa=1800, negative=120))
    return [big, mixed]


def regenerate() -> None:
    from sim.build.hierarchy import build_hierarchy
    from topologies.synthetic import synthetic

    ns = synthetic(n_tools=600, branching=4, depth=2, n_orgs=2, seed=3)
    h = build_hierarchy(ns)
    zones = [s._zones[z].data for s in h.servers.values() for z in s.zones]
    golden: dict = {"zones": {"synthetic": [zone_to_json(z) for z in zones],
                              "hand": [zone_to_json(z) for z in hand_zones()]}}
    cases = generate_cases(golden)
    servers = make_servers(golden, packet_cache=0)
    for case in cases:
        out = servers[case["server"]].handle(bytes.fromhex(case["query"]), SRC, 0.0,
                                             case["transport"])
        case["reply"] = None if out is None else out.hex()
    golden["cases"] = cases
    GOLDEN.parent.mkdir(exist_ok=True)
    text = json.dumps(golden, separators=(",", ":"), ensure_ascii=True) + "\n"
    GOLDEN.write_bytes(gzip.compress(text.encode("ascii"), compresslevel=9, mtime=0))
    print(f"{len(cases)} cases written to {GOLDEN}")


# ---------------------------------------------------------------- tests


@pytest.fixture(scope="module")
def golden() -> dict:
    return json.loads(gzip.decompress(GOLDEN.read_bytes()))


def _mismatch(case: dict, got: bytes | None) -> str:
    return (f"{case['what']} → {case['server']} over {case['transport']}\n"
            f"query    {case['query']}\nexpected {case['reply']}\n"
            f"got      {got and got.hex()}")


def test_golden_file_covers_the_promised_cases(golden):
    cases = golden["cases"]
    assert len(cases) >= 300
    whats = " ".join(c["what"] for c in cases)
    for needle in ("cursor tools.", "K=0 edns 512", "K=0 tcp", "apex", "nxdomain",
                   "empty non-terminal", "mixed case", "edns=None", "big cursor K=0"):
        assert needle in whats, needle
    assert any(c["reply"] and bytes.fromhex(c["reply"])[2] & 0x02 for c in cases)  # TC
    assert any(c["reply"] and len(c["reply"]) > 2 * 0x4000 for c in cases)  # > 16 KiB
    assert any(c["reply"] and c["transport"] == "tcp" and bytes.fromhex(c["reply"])[2] & 0x02
               for c in cases)  # TCP: TC with the records that fit in 64 KiB


@pytest.mark.parametrize("memo", ["default", "tiny"])
def test_replies_are_byte_identical_to_golden(golden, memo, monkeypatch):
    if memo == "tiny":  # name memos evicting all the time (codec) or off (server)
        monkeypatch.setattr(codec, "NAME_MEMO_SIZE", 2)
        monkeypatch.setattr(AuthoritativeServer, "NAME_MEMO", 0)
    servers = make_servers(golden, packet_cache=0)
    bad = []
    for case in golden["cases"]:
        out = servers[case["server"]].handle(bytes.fromhex(case["query"]), SRC, 0.0,
                                             case["transport"])
        if (None if out is None else out.hex()) != case["reply"]:
            bad.append(_mismatch(case, out))
    assert not bad, f"{len(bad)} of {len(golden['cases'])} replies differ:\n" + "\n".join(bad[:5])
    for server in servers.values():
        assert server.stats.counts["internal_error"] == 0


def test_packet_cache_returns_the_same_bytes(golden):
    servers = make_servers(golden, packet_cache=4096)
    bad = []
    for case in golden["cases"]:
        wire = bytes.fromhex(case["query"])
        server = servers[case["server"]]
        for i in range(2):
            if i and len(wire) >= 2:  # a repeat with another ID comes from the cache
                wire = bytes([wire[0] ^ 0x5A, wire[1]]) + wire[2:]
            out = server.handle(wire, SRC, 0.0, case["transport"])
            expected = case["reply"]
            if expected is not None and i:
                expected = wire[:2].hex() + expected[4:]
            if (None if out is None else out.hex()) != expected:
                bad.append(_mismatch(case, out))
    assert not bad, "\n".join(bad[:5])
    assert sum(s.stats.counts["packet_cache_hit"] for s in servers.values()) > 300


def test_packet_cache_evicts_first_in_first_out(golden):
    server = AuthoritativeServer([zone_from_json(z) for z in golden["zones"]["synthetic"]],
                                 packet_cache=3)
    q = [make_query(name, SOA) for name in ("tools.", ".", "x.tools.", "y.tools.")]
    for i in (0, 1, 2, 3, 1, 0, 1, 3):  # cache after each: 0 / 01 / 012 / 123 / hit /
        server.handle(q[i], SRC, 0.0)  # 230 / 301 / hit
    assert server.stats.counts["packet_cache_hit"] == 2
    assert server.stats.counts["rx_udp"] == 8


def test_every_reply_parses_with_dnslib_and_dnspython(golden):
    for case in golden["cases"]:
        if case["reply"] is None:
            continue
        raw = bytes.fromhex(case["reply"])
        msg = DNSRecord.parse(raw)
        assert msg.header.qr == 1
        assert raw[:2] == bytes.fromhex(case["query"])[:2]
        if (raw[2] >> 3) & 0xF == 5:  # dnspython reads UPDATE replies as updates (needs SOA)
            raw = raw[:2] + bytes([raw[2] & 0x87]) + raw[3:]
        parsed = dns.message.from_wire(raw, ignore_trailing=False)
        assert parsed.id == msg.header.id
        if case["transport"] == "udp":
            assert len(raw) <= 65535


def test_parse_query_name_memo_is_transparent(golden):
    """A remembered name decodes as a fresh one; look-alikes are not taken for it."""
    for case in golden["cases"]:
        wire = bytes.fromhex(case["query"])
        codec._NAME_MEMO.clear()
        cold = codec.parse_query(wire)
        warm = codec.parse_query(wire)
        if cold is None:
            assert warm is None
            continue
        assert warm is not None
        assert [getattr(cold, f) for f in cold._FIELDS] == [
            getattr(warm, f) for f in warm._FIELDS]
    plain = make_query("ab.cd.", A)
    assert codec.parse_query(plain).qname == "ab.cd."
    # same bytes up to the first zero, but that zero sits inside a label / the name is longer
    for name in (b"\x02ab\x03c\x00d\x00", b"\x02ab\x02cd\x00\x00", b"\x02ab\x02cd\x01"):
        wire = make_query(name, A)
        assert codec.parse_query(wire) is None or codec.parse_query(wire).qname != "ab.cd."


@pytest.mark.parametrize("path", ["dense", "sparse", "numpy"])
def test_rankings_match_numpy_reference(golden, path, monkeypatch):
    """Every ranking path of the BM25 index equals lexsort over the dense score vector."""
    from nodes.scoring import _BM25Index

    limits = {"dense": (10**9, 10**9), "sparse": (0, 10**9), "numpy": (0, 0)}[path]
    monkeypatch.setattr(_BM25Index, "DENSE_MAX", limits[0])
    monkeypatch.setattr(_BM25Index, "PYTHON_MAX", limits[1])
    rng = random.Random(11)
    zones = [zone_from_json(z) for g in golden["zones"].values() for z in g]
    corpora = [["same words here"] * 5 + ["same words", "words", "", "other"]]  # ties
    for zone in zones:
        for service in sorted({t.service for t in zone.tools}):
            corpora.append([f"{t.name} {t.description}" for t in zone.tools
                            if t.service == service])
        if zone.children:
            corpora.append([c.summary for c in zone.children])
    for items in corpora:
        index = BM25Scorer().index([str(i) for i in range(len(items))], items)
        rank = index.rank  # type: ignore[attr-defined]
        vocab = [*sorted({w for t in items for w in tokenize(t)}), "zzqx", "the", "a"]
        for _ in range(30):
            text = " ".join(rng.choice(vocab) for _ in range(rng.randrange(0, 7)))
            scores = index.scores(text)
            k = rng.choice([0, 1, 2, 3, 5, 255])
            cands = sorted(rng.sample(range(len(items)), rng.randrange(0, len(items) + 1)))
            for c in (None, cands):
                want = top_k(scores, k, c)  # the numpy lexsort reference
                assert rank(text, k, c) == want, (items[:2], text, k, c)


if __name__ == "__main__":
    if sys.argv[1:] == ["--regenerate"]:
        regenerate()
    else:
        sys.exit("usage: python tests/nodes/authoritative/test_golden_replies.py --regenerate")
