"""The resolver model iterating as stock recursors do (``resolver_model``,
``nodes.resolver.minimise``): the names each profile asks equal, probe by probe and in
order, what Unbound, BIND, Knot Resolver and PowerDNS Recursor asked on the harness's
hierarchy (``tests/data/recursors_asked.json``: from a run of ``tooldns recursors --json``
here, the probes' names asked and answers; the harness checks the same against the
running binaries, ``tests/sim/interop``). No sockets."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import get_args

import pytest

from nodes.resolver.config import ResolverConfig
from nodes.resolver.minimise import MODELS, PROFILES, minimised
from nodes.resolver.types import Discovery, Outgoing
from sim.build.hierarchy import build_hierarchy
from sim.build.trust import sign_hierarchy
from sim.engines.memory import MemoryNetwork
from sim.interop.matrix import _namespace
from sim.interop.model import alike, compare, model_asked, sessions
from sim.schemes import DnsScheme
from topologies.synthetic import synthetic

CAPTURED = json.loads((Path(__file__).resolve().parents[2] / "data" /
                       "recursors_asked.json").read_text())
QNAME = "k3.jureli-behevu-cotemu._mcp._tcp.tools."


@pytest.fixture(scope="module")
def hierarchy():
    assert CAPTURED["namespace"] == "synthetic(n=120,b=3,d=2,seed=7)"
    return build_hierarchy(_namespace(None, 200, 120, 3, 2, 7), org_zones=True)


@pytest.mark.parametrize("name", list(PROFILES))
def test_each_profile_asks_what_its_binary_asked(hierarchy, name: str) -> None:
    """29 probes in four sessions: the qname walk cold, warm, repeated and its targets'
    A; ten intents' walks one after another; every draft's questions and the host's A."""
    rows = compare(hierarchy, CAPTURED, {name: CAPTURED["resolvers"][name]})[name]
    assert len(rows) == 29
    differ = {probe: (r["binary"], r["model"]) for probe, r in rows.items() if not r["same"]}
    assert not differ, differ


def test_the_profiles_differ_where_the_binaries_do(hierarchy) -> None:
    """The traits each profile names, read off the cold qname walk."""
    cold = {name: model_asked(hierarchy, sessions(CAPTURED)[0], name)["qname cold"]
            for name in (*PROFILES, "project")}
    assert cold["project"] == [  # the full name at every server, the delegation beside
        f"{QNAME} SRV @.", f"{QNAME} SRV @tools.",  # the CNAME taken
        "k3.jureli-behevu-cotemu._mcp._tcp.nucabu.tools. SRV @nucabu.tools.",
        "k3.jureli-behevu-cotemu._mcp._tcp.lemuku.nucabu.tools. SRV @lemuku.nucabu.tools."]
    assert [len(cold[n]) for n in PROFILES] == [17, 16, 9, 10]
    assert cold["unbound"][0] == cold["bind"][0] == ". NS @."  # priming
    assert all(q.split()[1] == "A" for q in cold["unbound"][1:-1])
    assert {q.split()[1] for q in cold["bind"][1:]} == {"NS", "SRV"}
    assert cold["knot-resolver"][1:3] == ["_tcp.tools. NS @tools.", f"{QNAME} SRV @tools."]
    assert cold["pdns-recursor"][0] == "_mcp._tcp.tools. A @."  # underscores grouped


def test_priming_may_leave_beside_the_first_query() -> None:
    """BIND sends the root's priming query beside its first one, in either order (four runs
    of the harness here: twice each); nothing else may move."""
    model = [". NS @.", "example. NS @.", "duze.example. NS @example."]
    assert alike(model, model)
    assert alike(["example. NS @.", ". NS @.", "duze.example. NS @example."], model)
    assert not alike(["example. NS @.", "duze.example. NS @example.", ". NS @."], model)
    assert not alike(["duze.example. NS @example.", ". NS @.", "example. NS @."], model)
    assert not alike(["example. NS @.", ". NS @."], model)
    assert not alike(["example. NS @.", "duze.example. NS @example."], model[1:] + model[:1])
    # a retransmission (the same query again at once) is the machine's timing, not the pattern
    assert alike([". NS @.", "example. NS @.", "example. NS @.", "duze.example. NS @example."],
                 model)
    assert not alike([". NS @.", "example. NS @.", "duze.example. NS @example.",
                      "example. NS @."], model)


def test_minimised_names() -> None:
    pdns, bind = PROFILES["pdns-recursor"], PROFILES["bind"]
    assert minimised(QNAME, ".", 1, bind) == ("tools.", 1)
    assert minimised(QNAME, "tools.", 1, bind) == ("_tcp.tools.", 1)
    assert minimised(QNAME, "tools.", 1, pdns) == ("_mcp._tcp.tools.", 2)
    assert minimised(QNAME, "tools.", 3, pdns) == ("jureli-behevu-cotemu._mcp._tcp.tools.", 3)
    assert minimised(QNAME, "tools.", 4, bind) == (QNAME, 4)
    assert minimised(QNAME, "tools.", 9, bind) == (QNAME, 4)
    assert minimised("_index._agents.duze.example.", "example.", 1, pdns) == (
        "_index._agents.duze.example.", 3)


def test_a_walk_finds_the_same_tools_with_every_profile() -> None:
    """Minimising changes the questions, not the answers: every profile's qname walk returns
    what the project's iteration returns, also validating a signed hierarchy."""
    ns = synthetic(n_tools=300, branching=3, depth=2, seed=4, n_queries=12)
    h = build_hierarchy(ns, scorer="bm25")
    anchor = sign_hierarchy(h, 4)
    found: dict[str, list[list[str]]] = {}
    for model in MODELS:
        config = ResolverConfig(mode="qname", resolver_model=model, dnssec=True,
                                trust_anchor=anchor)
        net = MemoryNetwork(h, h.resolver(seed=1, config=config))
        found[model] = []
        for query in ns.queries[:6]:
            net.resolver.discover(Discovery(query.text, service=query.service, k=2), net.now)
            (result,) = net.run()
            assert result.error is None and result.bogus == 0, (model, result.error)
            found[model].append([e.target for e in result.endpoints])
    assert all(found[m] == found["project"] for m in MODELS), found
    assert all(found["project"])


def test_a_question_in_flight_is_asked_once_as_a_stock_recursor_asks_it() -> None:
    """Two walks for the same intent at once: a resolver model asks each question once and
    the second walk waits for its answer (the binaries do; RESULTS Q12), while the
    project's own iteration asks everything twice. Both walks find the same tools."""
    ns = synthetic(n_tools=300, branching=3, depth=2, seed=4, n_queries=4)
    h = build_hierarchy(ns, scorer="bm25")
    query = ns.queries[0]
    sent: dict[str, list[tuple[bytes, tuple[str, int]]]] = {}
    for model in ("project", "unbound", "bind"):
        net = MemoryNetwork(h, h.resolver(seed=1, config=ResolverConfig(
            mode="qname", resolver_model=model)))
        sent[model] = []
        net.tap = lambda out, mine=sent[model]: mine.append((out.data[2:], out.dst))
        for _ in range(2):
            net.resolver.discover(Discovery(query.text, service=query.service, k=2), net.now)
        first, second = net.run()
        assert first.endpoints and [e.target for e in first.endpoints] == [
            e.target for e in second.endpoints], model
        questions = [q for q, _ in sent[model]]
        if model == "project":
            assert min(Counter(questions).values()) >= 2  # every question at least twice
            assert net.resolver.stats["coalesced"] == 0
        else:  # every question once; the second walk sent nothing of its own
            assert len(questions) == len(set(questions)) and not second.steps, model
            assert net.resolver.stats["coalesced"] > 0


def test_a_deep_tree_stays_within_the_loop_guard() -> None:
    """A five-level tree: each CNAME of the chain has its own rounds (Unbound asks about 30
    names for one walk here; one guard over the whole chain failed it at depth 4)."""
    ns = synthetic(n_tools=1500, branching=3, depth=5, seed=4, n_queries=6)
    h = build_hierarchy(ns, scorer="bm25")
    for model in MODELS:
        net = MemoryNetwork(h, h.resolver(seed=1, config=ResolverConfig(
            mode="qname", resolver_model=model)))
        for query in ns.queries[:3]:
            net.resolver.discover(Discovery(query.text, service=query.service, k=2), net.now)
            (result,) = net.run()
            assert result.error is None and result.endpoints, (model, result.error)


def test_resolver_model_is_checked() -> None:
    assert get_args(DnsScheme.model_fields["resolver_model"].annotation) == MODELS
    with pytest.raises(ValueError, match="resolver_model: unknown 'powerdns'"):
        ResolverConfig(resolver_model="powerdns")
    with pytest.raises(ValueError, match="resolver_model: unbound is a stock recursor"):
        DnsScheme(name="t", k=3, resolver_model="unbound")  # mode aware
    assert DnsScheme(name="t", k=3, mode="qname", resolver_model="bind").resolver_model == "bind"
    assert DnsScheme(name="d", kind="dns-aid", k=3, resolver_model="unbound")


def test_bind_sends_the_targets_addresses_with_the_answer() -> None:
    """BIND keeps the addresses that came with an SRV answer and sends them in the
    additional section, also when it answers from its cache; the other profiles relay the
    answer RRset alone from their cache (their clients then ask for the addresses)."""
    from dnslib import DNSRecord

    from nodes.dns.wire import intent_qname

    ns = synthetic(n_tools=300, branching=3, depth=2, seed=4, n_queries=4)
    h = build_hierarchy(ns, scorer="bm25")
    query = ns.queries[0]
    qname = intent_qname(query.text, 3, query.service)
    for model in MODELS:
        net = MemoryNetwork(h, h.resolver(seed=1, config=ResolverConfig(
            mode="qname", resolver_model=model)))
        replies: list[bytes] = []

        def tap(out: Outgoing, replies: list[bytes] = replies) -> None:
            if out.reply:  # what went back to the stub client
                replies.append(out.data)

        net.tap = tap
        sections = []
        for qid in (1, 2):  # cold, then from the cache
            ask = DNSRecord.question(qname, "SRV")
            ask.header.id = qid
            net.resolver.receive(bytes(ask.pack()), ("127.0.0.9", 5300 + qid), net.now, "udp")
            net.run()
            reply = DNSRecord.parse(replies[-1])
            assert reply.header.id == qid, model
            targets = {str(rr.rdata.target) for rr in reply.rr if rr.rtype == 33}
            assert targets, model
            sections.append({str(rr.rname) for rr in reply.ar if rr.rtype == 1} & targets)
        cold, cached = sections
        if model == "bind":
            assert cold and cached == cold, sections
        else:
            assert not cached, (model, sections)
