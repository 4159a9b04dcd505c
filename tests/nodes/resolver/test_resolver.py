"""RecursiveResolver walks over an in-memory hierarchy (no sockets, virtual time)."""

from __future__ import annotations

from collections import Counter

import pytest
from dnslib import EDNS0, QTYPE, RCODE, DNSHeader, DNSQuestion, DNSRecord, EDNSOption

from nodes.dns.wire import (
    DEFAULT_OPTION_CODE,
    Intent,
    cursor_name,
    is_subdomain,
    normalise,
    opt_record,
)
from nodes.resolver.config import ResolverConfig
from nodes.resolver.core import RecursiveResolver
from nodes.resolver.types import Discovery, Outgoing
from sim.build.hierarchy import Hierarchy
from sim.engines.memory import MemoryNetwork
from tests.factories import wired
from topologies.namespace import Namespace, Query, Tool
from topologies.synthetic import synthetic

CLIENT = ("127.0.0.7", 33333)


# ------------------------------------------------------------------ helpers


def tree(depth: int = 2, branching: int = 3, seed: int = 11, **kw) -> Namespace:
    return synthetic(n_tools=20 * branching**depth, branching=branching, depth=depth, seed=seed,
                     n_queries=60, **kw)


def discover(net: MemoryNetwork, request: Discovery):
    net.resolver.discover(request, net.now)
    results = net.run()
    assert len(results) == 1
    return results[0]


def request_for(q: Query, k: int = 1, **kw) -> Discovery:
    return Discovery(q.text, service=q.service, k=k, **kw)


def truth_of(ns: Namespace, q: Query) -> Tool:
    return ns.tools[q.truth[0]]


def found(result, tool: Tool) -> bool:
    return any((e.target, e.address, e.port) == (tool.target, tool.address, tool.port)
               for e in result.endpoints)


def zones_asked(h: Hierarchy, result) -> list[str]:
    return [h.zone_of[s.server[0]] for s in result.steps]


def record(net: MemoryNetwork) -> list[Outgoing]:
    """Log everything the resolver sends (the memory network drops non-server traffic)."""
    log: list[Outgoing] = []
    net.tap = log.append
    return log


def by_zone(h: Hierarchy) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for address, zone in sorted(h.zone_of.items()):
        out.setdefault(zone, []).append(address)
    return out


# ------------------------------------------------------------------ cold and warm walks


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_cold_walk_one_round_trip_per_level(depth):
    ns = tree(depth)
    h, net = wired(ns)
    q = ns.queries[0]
    tool = truth_of(ns, q)
    result = discover(net, request_for(q))
    path = ns.path(tool.zone)  # tools., level 1, ..., leaf
    assert len(path) == depth + 1
    assert result.rounds == depth + 2 + 1
    assert result.exchanges == result.rounds  # one exchange per round, no retries
    expected = [cursor_name(q.service, "tools.")] + [cursor_name(q.service, z) for z in path]
    assert [s.qname for s in result.steps] == [*expected, tool.target]
    assert len({s.qname for s in result.steps}) == depth + 2
    assert [s.qtype for s in result.steps] == ["SRV"] * (depth + 2) + ["A"]
    assert [s.with_intent for s in result.steps] == [True] * (depth + 2) + [False]
    assert zones_asked(h, result) == [".", *path, tool.zone]
    assert all(s.server[1] == 53 and s.outcome == "NOERROR" for s in result.steps)
    assert found(result, tool)
    assert len(result.endpoints) == 1
    assert result.leaves == [tool.zone]
    assert result.latency == pytest.approx(result.rounds * 2 * net.delay)


def test_warm_walk_skips_cached_levels():
    depth = 2
    ns = tree(depth)
    h, net = wired(ns)
    q = ns.queries[0]
    tool = truth_of(ns, q)
    cold = discover(net, request_for(q))
    assert cold.rounds == depth + 3

    net.now += 400  # SRV and A (300 s) expired, delegations (86,400 s) still cached
    warm = discover(net, request_for(q))
    assert warm.rounds == 2
    assert [s.qname for s in warm.steps] == [cursor_name(q.service, tool.zone), tool.target]
    assert zones_asked(h, warm) == [tool.zone, tool.zone]
    assert warm.cache["referral_hit"] == depth  # tools. and the intermediate level
    assert found(warm, tool)

    hot = discover(net, request_for(q))  # within the SRV TTL: nothing on the wire
    assert hot.exchanges == 0
    assert hot.rounds == 0
    assert hot.latency == 0
    assert hot.endpoints == warm.endpoints
    assert hot.cache["srv_hit"] == 1 and hot.cache["a_hit"] == 1


def test_other_intent_in_same_branch_starts_at_cached_zones():
    depth = 2
    ns = tree(depth)
    h, net = wired(ns)
    q = ns.queries[0]
    branch = ns.path(truth_of(ns, q).zone)[1]
    other = next(x for x in ns.queries if x.text != q.text
                 and ns.path(truth_of(ns, x).zone)[1] == branch)
    discover(net, request_for(q))
    net.now += 10
    result = discover(net, request_for(other))
    tool = truth_of(ns, other)
    assert "." not in zones_asked(h, result)  # no root query: server address search
    assert zones_asked(h, result) == [*ns.path(tool.zone), tool.zone]
    assert result.rounds == depth + 2
    assert result.cache["ns_hit"] >= 1
    assert found(result, tool)


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_k0_warming_then_query_mock_contacts_only_the_leaf(depth):
    ns = tree(depth)
    h, net = wired(ns)
    r = net.resolver
    r.warm("mcp", net.now)
    warmed = net.run()
    assert len(warmed) == 1 and warmed[0].error is None
    assert all(s.with_intent for s in warmed[0].steps)
    net.now += 1
    q = next(x for x in ns.queries if x.service == "mcp")
    tool = truth_of(ns, q)
    result = discover(net, request_for(q))
    assert [s.qname for s in result.steps] == [cursor_name("mcp", tool.zone), tool.target]
    assert zones_asked(h, result) == [tool.zone, tool.zone]
    assert result.rounds == 2
    assert result.cache["mock_hit"] >= depth  # tools. plus every intermediate level
    assert found(result, tool)


def test_without_query_mock_warming_does_not_skip_levels():
    depth = 2
    ns = tree(depth)
    _, net = wired(ns, config=ResolverConfig(query_mock=False))
    r = net.resolver
    r.warm("mcp", net.now)
    net.run()
    q = next(x for x in ns.queries if x.service == "mcp")
    result = discover(net, request_for(q))
    assert result.cache["mock_hit"] == 0
    assert result.rounds == depth + 2  # tools. and below, no root thanks to cached NS
    assert found(result, truth_of(ns, q))


# ------------------------------------------------------------------ trust: org subdomains


def test_org_restricted_walk_returns_only_that_orgs_tools():
    ns = tree(2, seed=4, n_orgs=3, org_tools=8)
    _, net = wired(ns, scorer="bm25")
    org_zone = next(z for z, node in ns.zones.items() if node.org)
    org = ns.zones[org_zone].org
    org_tools = [t for t in ns.tools.values() if t.zone == org_zone]
    service = Counter(t.service for t in org_tools).most_common(1)[0][0]
    branch = ns.parent_of(org_zone)
    # an intent that, unrestricted, leads to a public tool of the same branch
    public = next(t for t in sorted(ns.tools.values(), key=lambda t: t.id)
                  if t.service == service and is_subdomain(t.zone, branch) and t.org != org
                  and t.zone != org_zone)
    intent = f"{public.name} {public.description}"
    unrestricted = discover(net, Discovery(intent, service=service, k=3))
    assert any(e.target == public.target for e in unrestricted.endpoints)

    net.now += 1000
    result = discover(net, Discovery(intent, service=service, k=3, start=org_zone))
    by_target = {t.target: t for t in ns.tools.values()}
    expected = {t.target for t in org_tools if t.service == service}
    assert result.endpoints
    assert len(result.endpoints) == min(3, len(expected))
    for e in result.endpoints:
        assert is_subdomain(e.target, org_zone)
        assert by_target[e.target].org == org
        assert e.target in expected
        assert e.address == by_target[e.target].address
    cursors = [s.qname for s in result.steps if s.qtype == "SRV"]
    assert set(cursors) == {cursor_name(service, org_zone)}  # the cursor never leaves the org
    assert result.leaves == [org_zone]


# ------------------------------------------------------------------ failures


def test_zone_with_one_of_two_replicas_dead_still_resolves():
    ns = tree(2)
    q = ns.queries[0]
    tool = truth_of(ns, q)
    _, net0 = wired(ns, replicas=2)
    baseline = discover(net0, request_for(q))
    assert all(s.outcome == "NOERROR" for s in baseline.steps)

    h, net = wired(ns, replicas=2)
    r = net.resolver
    zones = by_zone(h)
    assert all(len(a) == 2 for a in zones.values())
    net.dead = {addresses[0] for addresses in zones.values()}
    for addresses in zones.values():  # make the resolver try the dead replica first
        r.infra.srtt[(addresses[1], 53)] = 0.001
    result = discover(net, request_for(q))
    assert found(result, tool)
    assert result.endpoints == baseline.endpoints
    timeouts = [s for s in result.steps if s.outcome == "timeout"]
    assert timeouts
    assert all(s.server[0] in net.dead for s in timeouts)
    assert all(s.server[0] not in net.dead for s in result.steps if s.outcome != "timeout")
    for s in timeouts:  # each timed-out query was retried at the other replica of its zone
        retry = next(x for x in result.steps if x.sent > s.sent and x.qname == s.qname)
        assert retry.outcome == "NOERROR"
        assert h.zone_of[retry.server[0]] == h.zone_of[s.server[0]]
        assert retry.server != s.server
    assert r.stats["timeouts"] == len(timeouts)
    assert result.rounds == baseline.rounds
    assert result.latency == pytest.approx(baseline.latency + len(timeouts) * r.config.timeout)

    # the resolver has learnt: the next walk avoids the dead replica of the leaf
    net.now += 400
    again = discover(net, request_for(q))
    assert found(again, tool)
    assert zones_asked(h, again) == [tool.zone, tool.zone]
    assert all(s.outcome == "NOERROR" for s in again.steps)


def test_all_replicas_dead_fails_cleanly():
    ns = tree(1)
    h, net = wired(ns, replicas=2)
    r = net.resolver
    q = ns.queries[0]
    net.dead = set(by_zone(h)[truth_of(ns, q).zone])
    result = discover(net, request_for(q))
    assert result.endpoints == []
    assert result.error is not None
    assert r.config.max_attempts == sum(s.outcome == "timeout" for s in result.steps)


# ------------------------------------------------------------------ beam


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_beam_visits_beam_leaves(depth):
    ns = tree(depth)
    _, net = wired(ns)
    q = ns.queries[0]
    tool = truth_of(ns, q)
    result = discover(net, request_for(q, k=3, beam=2))
    assert len(result.leaves) == 2
    assert len(set(result.leaves)) == 2
    assert result.leaves[0] == tool.zone  # the best branch first
    assert all(z in ns.leaves() for z in result.leaves)
    assert 0 < len(result.endpoints) <= 3
    assert found(result, tool)
    assert {e.zone for e in result.endpoints} <= set(result.leaves)
    assert result.rounds == depth + 3  # branches go in parallel
    srv_steps = [s for s in result.steps if s.qtype == "SRV"]
    assert len(srv_steps) <= 2 + 2 * depth  # root, tools., then at most 2 per level

    net.now += 400  # again from the cached referrals: the beam stays as wide
    again = discover(net, request_for(q, k=3, beam=2))
    assert again.leaves == result.leaves
    assert len(again.endpoints) <= 3


def test_beam_one_visits_one_leaf():
    ns = tree(2)
    _, net = wired(ns)
    result = discover(net, request_for(ns.queries[0], k=3, beam=1))
    assert len(result.leaves) == 1
    assert len(result.endpoints) == 3


# ------------------------------------------------------------------ resolver modes


def test_strip_mode_fails_with_nxdomain():
    ns = tree(2)
    _, net = wired(ns, config=ResolverConfig(mode="strip"))
    result = discover(net, request_for(ns.queries[0]))
    assert result.endpoints == []
    assert result.rcode == "NXDOMAIN"
    assert result.steps and not any(s.with_intent for s in result.steps)
    assert result.steps[-1].outcome == "NXDOMAIN"


def test_pass_through_mode_fails_with_bogus_referral():
    ns = tree(2)
    _, net = wired(ns, config=ResolverConfig(mode="pass-through"))
    r = net.resolver
    result = discover(net, request_for(ns.queries[0]))
    assert result.endpoints == []
    assert result.rcode == "SERVFAIL"
    assert r.stats["bogus_referral"] >= 1
    assert result.steps and all(s.with_intent for s in result.steps)


def test_aware_mode_succeeds():
    ns = tree(2)
    _, net = wired(ns, config=ResolverConfig(mode="aware"))
    r = net.resolver
    q = ns.queries[0]
    result = discover(net, request_for(q))
    assert found(result, truth_of(ns, q))
    assert result.rcode == "NOERROR"
    assert r.stats["bogus_referral"] == 0


# ------------------------------------------------------------------ stub service


def stub_query(qname: str, intent: Intent | None, qid: int = 4711, qtype=QTYPE.SRV) -> bytes:
    q = DNSRecord(DNSHeader(id=qid, qr=0, rd=1))
    q.add_question(DNSQuestion(qname, qtype))
    q.add_ar(opt_record(intent))
    return q.pack()


def client_replies(log: list[Outgoing]) -> list[DNSRecord]:
    return [DNSRecord.parse(o.data) for o in log
            if o.dst == CLIENT and o.reply and o.transport == "udp"]


def test_stub_query_is_answered_with_srv_and_glue():
    ns = tree(2)
    _, net = wired(ns)
    r = net.resolver
    log = record(net)
    q = next(x for x in ns.queries if x.service == "mcp")
    tool = truth_of(ns, q)
    qname = "_mcp._tcp._tools."
    r.receive(stub_query(qname, Intent(q.text, 2)), CLIENT, net.now, "udp")
    net.run()
    (reply,) = client_replies(log)
    assert reply.header.id == 4711
    assert reply.header.qr == 1 and reply.header.ra == 1 and reply.header.rd == 1
    assert reply.header.rcode == RCODE.NOERROR
    assert [str(x.qname) for x in reply.questions] == [qname]
    srv = [rr for rr in reply.rr if rr.rtype == QTYPE.SRV]
    assert len(srv) == 2 == len(reply.rr)
    assert all(normalise(rr.rname) == qname for rr in srv)
    by_target = {t.target: t for t in ns.tools.values()}
    targets = [normalise(rr.rdata.target) for rr in srv]
    assert targets[0] == tool.target
    assert [rr.rdata.port for rr in srv] == [by_target[t].port for t in targets]
    glue = {normalise(rr.rname): str(rr.rdata) for rr in reply.ar if rr.rtype == QTYPE.A}
    assert glue == {t: by_target[t].address for t in targets}
    assert r.stats["client_queries"] == 1


def test_stub_query_without_intent_is_resolved_literally():
    ns = tree(1)
    _, net = wired(ns)
    r = net.resolver
    log = record(net)
    r.receive(stub_query("_mcp._tcp._tools.", None, qid=99), CLIENT, net.now, "udp")
    net.run()
    (reply,) = client_replies(log)
    assert reply.header.id == 99
    assert reply.header.rcode == RCODE.NXDOMAIN
    assert reply.rr == []


def test_stub_query_with_bad_intent_is_formerr():
    ns = tree(1)
    _, net = wired(ns)
    r = net.resolver
    log = record(net)
    q = DNSRecord(DNSHeader(id=98, rd=1))
    q.add_question(DNSQuestion("_mcp._tcp._tools.", QTYPE.SRV))
    q.add_ar(EDNS0(udp_len=1232, opts=[EDNSOption(DEFAULT_OPTION_CODE, b"\x00\x00\x09\x01abc")]))
    wire = q.pack()
    r.receive(wire, CLIENT, net.now, "udp")
    net.run()
    (reply,) = client_replies(log)
    assert reply.header.rcode == RCODE.FORMERR
    assert r.stats["client_formerr"] == 1
    assert not [o for o in log if o.dst != CLIENT]  # nothing went upstream


# ------------------------------------------------------------------ response validation


def test_forged_responses_are_ignored_and_genuine_one_completes():
    ns = tree(2)
    h, net = wired(ns)
    r = net.resolver
    q = ns.queries[0]
    tool = truth_of(ns, q)
    r.discover(request_for(q), 0.0)
    (out,) = r.to_send()
    genuine = h.servers[out.dst[0]].handle(out.data, net.resolver_address, 0.0, "udp")
    assert genuine is not None
    msg = DNSRecord.parse(genuine)
    qid = msg.header.id
    server = out.dst

    # a poisoned referral: tools. is served at an address outside the hierarchy
    evil = DNSRecord.parse(genuine)
    for rr in evil.ar:
        if rr.rtype == QTYPE.A:
            rr.rdata = type(rr.rdata)("10.66.6.6")
    forged_id = DNSRecord.parse(evil.pack())
    forged_id.header.id = (qid + 1) % 65536
    wrong_question = DNSRecord.parse(evil.pack())
    wrong_question.questions[0].qname = "_mcp._tcp._evil.tools."
    wrong_qtype = DNSRecord.parse(evil.pack())
    wrong_qtype.questions[0].qtype = QTYPE.A

    t = 0.001
    for data, src, transport in [
        (forged_id.pack(), server, "udp"),
        (evil.pack(), ("127.1.9.9", 53), "udp"),  # wrong source address
        (evil.pack(), (server[0], 5353), "udp"),  # wrong source port
        (evil.pack(), server, "tcp"),  # asked over UDP
    ]:
        r.receive(data, src, t, transport)
        t += 0.001
    assert r.stats["unexpected_response"] == 4
    for data in (wrong_question.pack(), wrong_qtype.pack()):
        r.receive(data, server, t, "udp")
    assert r.stats["mismatched_question"] == 2
    assert r.to_send() == []  # none of them moved the walk on
    assert r.pop_results() == []

    r.receive(genuine, server, 0.02, "udp")
    net.now = 0.02
    (result,) = net.run()
    assert found(result, tool)
    assert result.steps[0].rtt == pytest.approx(0.02)
    assert all(s.server[0] in h.servers for s in result.steps)
    assert zones_asked(h, result) == [".", *ns.path(tool.zone), tool.zone]
    assert r.stats["timeouts"] == 0


def test_late_duplicate_response_is_unexpected():
    ns = tree(1)
    h, net = wired(ns)
    r = net.resolver
    log = record(net)
    discover(net, request_for(ns.queries[0]))
    first = log[0]
    reply = h.servers[first.dst[0]].handle(first.data, net.resolver_address, net.now, "udp")
    before = r.stats["unexpected_response"]
    r.receive(reply, first.dst, net.now, "udp")
    assert r.stats["unexpected_response"] == before + 1
    assert r.to_send() == []


# ------------------------------------------------------------------ determinism


def _run(seed: int):
    ns = tree(2, seed=5)
    h, net = wired(ns, replicas=2, seed=seed)
    net.dead = {a[0] for a in by_zone(h).values()}  # failover makes server order matter
    log = record(net)
    results = []
    for q in ns.queries[:3]:
        results.append(discover(net, request_for(q, k=2, beam=2)))
        net.now += 1
    steps = [[(s.qname, s.qtype, s.server, s.transport, s.sent, s.rtt, s.bytes_out, s.bytes_in,
               s.outcome) for s in res.steps] for res in results]
    ids = [int.from_bytes(o.data[:2], "big") for o in log]
    endpoints = [res.endpoints for res in results]
    return steps, ids, endpoints


def test_same_seed_same_run():
    steps1, ids1, eps1 = _run(seed=7)
    steps2, ids2, eps2 = _run(seed=7)
    assert steps1 == steps2
    assert ids1 == ids2
    assert eps1 == eps2
    assert any(s[-1] == "timeout" for run in steps1 for s in run)
    _, ids3, _ = _run(seed=8)
    assert ids3 != ids1  # IDs come from the seeded generator
    assert len(set(ids1)) > len(ids1) // 2


def test_zone_label_too_long_for_a_cursor_fails_that_walk_not_the_resolver():
    """A referral to a zone whose first label has 63 octets cannot be asked as a cursor
    (``_`` makes it 64): that walk fails with a reason, the resolver keeps serving, and
    namespaces built from catalogue categories cap zone labels at 62 (issue 16)."""
    from topologies.datasets import catalog_paths, namespace_from_paths
    from topologies.labels import ZONE_LABEL_MAX, zone_label

    long = "l" * 63
    rows = [{"id": "s:a", "name": "a", "description": "weather forecast for a city",
             "protocol": "mcp", "path": ["weather"]},
            {"id": "s:b", "name": "b", "description": "translate english text",
             "protocol": "mcp", "path": [long]}]
    assert len(zone_label(long)) == ZONE_LABEL_MAX == 62
    assert all(len(p[0][0]) <= 62 for p in catalog_paths(rows).values())
    ns = namespace_from_paths(rows, {"s:a": [["weather"]], "s:b": [[long]]})
    _h, net = wired(ns, scorer="bm25")
    bad = discover(net, Discovery("translate english text", service="mcp", k=1))
    assert not bad.endpoints and "name too long" in bad.error
    assert net.resolver.stats["unsendable_name"] == 1
    good = discover(net, Discovery("weather forecast for a city", service="mcp", k=1))
    assert [e.target.split(".")[0] for e in good.endpoints] == [ns.tools["s:a"].slug]


def test_resolve_targets_copies_every_endpoint_field() -> None:
    """resolve_targets builds Endpoint positionally (for speed): it must stay the same as
    ``dataclasses.replace(ep, address=…)``, every field kept, whatever fields are added."""
    import dataclasses
    import random as _random

    from nodes.resolver.types import Discovery, DiscoveryResult, Endpoint
    from nodes.resolver.walk import resolve_targets

    resolver = RecursiveResolver(["127.1.0.1"], _random.Random(0))
    def distinct(i: int, kind: str) -> object:  # a value of the field's type, its own
        return (1000 + i if kind == "int" else 0.5 + i if kind.startswith("float")
                else f"v-{i}")

    values = {f.name: distinct(i, str(f.type)) for i, f in enumerate(dataclasses.fields(Endpoint))}
    values.update(target="t1.w.tools.", address=None, zone="w.tools.")
    ep = Endpoint(**values)  # type: ignore[arg-type]
    ctx = resolver._ctx
    ctx.caches.put(ctx.caches.addr, "t1.w.tools.", "127.64.0.1", 60)  # a cached A: no ask
    rounds = resolve_targets(ctx, [ep], DiscoveryResult(request=Discovery("x"), started=0.0),
                             {})
    with pytest.raises(StopIteration) as done:
        next(rounds)
    assert done.value.value == [dataclasses.replace(ep, address="127.64.0.1")]
