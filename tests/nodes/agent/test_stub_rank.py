"""The agent reads the ranking from SRV priority, never from RRset order.

Stock recursors and caches shuffle an RRset; a ToolDNS leaf numbers its top K by SRV
priority (0 = best) and our resolver numbers the merged list it relays the same way. The
stub orders what it found by priority (stable: equal priorities keep their arrival order),
in both the option and the qname style. No sockets.
"""

from __future__ import annotations

import random

from dnslib import QTYPE, RR, SRV, A, DNSHeader, DNSRecord

from nodes.agent.stub import StubAgent
from nodes.resolver.config import ResolverConfig
from nodes.resolver.types import Discovery
from sim.build.hierarchy import build_hierarchy
from sim.engines.memory import MemoryNetwork
from topologies.synthetic import synthetic

RESOLVER = ("127.0.53.1", 53)
AGENT = ("127.0.0.7", 40000)
# (priority, target) as a recursor might relay them: shuffled, with one tie (3, 3)
SHUFFLED = [(2, "c.leaf.tools."), (0, "a.leaf.tools."), (3, "d.leaf.tools."),
            (1, "b.leaf.tools."), (3, "e.leaf.tools.")]
RANKED = ["a.leaf.tools.", "b.leaf.tools.", "c.leaf.tools.", "d.leaf.tools.", "e.leaf.tools."]


def _reply(query: bytes, srv: list[tuple[int, str]], with_a: bool) -> bytes:
    q = DNSRecord.parse(query)
    r = DNSRecord(DNSHeader(id=q.header.id, qr=1, aa=0, ra=1), q=q.q)
    for priority, target in srv:
        r.add_answer(RR(q.q.qname, QTYPE.SRV, ttl=60, rdata=SRV(priority, 0, 443, target)))
    if with_a:
        for n, (_, target) in enumerate(srv):
            r.add_ar(RR(target, QTYPE.A, ttl=60, rdata=A(f"10.0.0.{n + 1}")))
    return r.pack()


def test_option_style_orders_a_shuffled_rrset_by_priority() -> None:
    agent = StubAgent(RESOLVER, random.Random(1))
    result = agent.ask("t", Discovery("anything", k=5), 0.0)
    (out,) = agent.to_send()
    agent.receive(_reply(out.data, SHUFFLED, with_a=True), RESOLVER, 0.01)
    assert agent.pop_done() == [result] and result.error is None
    assert [e.target for e in result.endpoints] == RANKED  # the tie keeps arrival order
    assert [e.priority for e in result.endpoints] == [0, 1, 2, 3, 3]
    assert result.endpoints[0].address == "10.0.0.2"  # each with its own address


def test_qname_style_keeps_the_rank_through_the_address_round() -> None:
    agent = StubAgent(RESOLVER, random.Random(2), style="qname")
    result = agent.ask("t", Discovery("anything", k=5), 0.0)
    (out,) = agent.to_send()
    agent.receive(_reply(out.data, SHUFFLED, with_a=False), RESOLVER, 0.01)
    asks = agent.to_send()
    assert len(asks) == len(SHUFFLED)
    for n, ask in enumerate(reversed(asks)):  # answered in another order again
        q = DNSRecord.parse(ask.data)
        r = DNSRecord(DNSHeader(id=q.header.id, qr=1, ra=1), q=q.q)
        r.add_answer(RR(q.q.qname, QTYPE.A, ttl=60, rdata=A(f"10.1.0.{n + 1}")))
        agent.receive(r.pack(), RESOLVER, 0.02)
    assert agent.pop_done() == [result] and result.error is None
    assert [e.target for e in result.endpoints] == RANKED
    assert all(e.address for e in result.endpoints)


def test_the_resolver_relays_its_merged_ranking_as_priorities() -> None:
    """Beam 2 with score merge: the relayed list interleaves two leaves' tools, so the
    leaves' own priorities would repeat and disagree with the order; the resolver numbers
    its answer 0, 1, … and the agent ends with the resolver's order."""
    ns = synthetic(n_tools=240, branching=3, depth=2, seed=4, n_queries=10)
    config = ResolverConfig(beam=2, search="global", merge="score")
    h = build_hierarchy(ns, scorer="bm25")
    query = next(q for q in ns.queries if q.service == "mcp")
    request = Discovery(query.text, service="mcp", k=6, beam=2)
    direct = MemoryNetwork(h, h.resolver(seed=1, config=config))
    direct.resolver.discover(request, direct.now)
    (walked,) = direct.run()
    assert len({e.zone for e in walked.endpoints}) == 2  # the merge spans two leaves
    assert len(walked.endpoints) == 6

    h.reset()
    resolver = h.resolver(seed=1, config=config)
    net = MemoryNetwork(h, resolver)
    to_client: list = []  # the network drops what goes to the agent: seen as it leaves
    net.tap = lambda out: out.reply and to_client.append(out)
    agent = StubAgent(RESOLVER, random.Random(3))
    stub = agent.ask("t", request, 0.0)
    for out in agent.to_send():
        resolver.receive(out.data, AGENT, net.now)
    net.run()
    (relayed,) = to_client
    srv = [rr.rdata for rr in DNSRecord.parse(relayed.data).rr if rr.rtype == QTYPE.SRV]
    assert [rd.priority for rd in srv] == list(range(6))
    agent.receive(relayed.data, RESOLVER, net.now)
    assert agent.pop_done() == [stub]
    assert [e.target for e in stub.endpoints] == [e.target for e in walked.endpoints]
