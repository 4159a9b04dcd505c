"""Stock recursors as a scheme's resolver (``schemes[].resolver``, :mod:`sim.engines.stock`).

The attribution of what the servers saw to the agent queries (unit), the fields a binary
cannot honour (refused by name), the run's own network namespace, and the four binaries
themselves on the live engine (root): every discovery answered with the aware walk's
tools, each query's bytes and packets as the capture saw them, every exchange claimed,
and the project's model of each binary (``resolver_model``) on simpy within 10 % of its
mean upstream exchanges, cold and warm.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest
from dnslib import DNSRecord
from pydantic import ValidationError

from nodes.agent.stub import StubResult
from nodes.resolver.types import Discovery, Step
from sim.engines.stock import wire_walks
from sim.errors import ScenarioError
from sim.interop.calibration import compare, model_twin, over_seeds
from sim.interop.resolvers import SPECS
from sim.run.runner import run_scenario
from sim.sockets.wirelog import WireExchange
from tests.factories import scenario

CI = bool(os.environ.get("CI"))
RECURSORS = ("unbound", "bind", "knot-resolver", "pdns-recursor")
BINARY = "127.0.53.1"
needs_root = pytest.mark.skipif(os.geteuid() != 0 and not CI,
                                reason="needs root: the run's own network namespace")


# ------------------------------------------------------------------ attribution (unit)


def _stub(agent: int, qname: str, qid: int, sent: float, rtt: float | None,
          ) -> tuple[SimpleNamespace, StubResult]:
    stub = StubResult(None, Discovery(qname), sent)
    stub.steps.append(Step(qname, "SRV", (BINARY, 53), "udp", sent, rtt, 60, 100,
                           "NOERROR", False, qid))
    stub.finished = sent + (rtt or 1.0)
    return SimpleNamespace(agent=agent), stub


def _exchange(name: str, qtype: str, sent: float, rtt: float | None,
              client: str = BINARY) -> WireExchange:
    query = DNSRecord.question(name, qtype).pack()
    ex = WireExchange("127.1.0.1", (client, 40000), "udp", sent, bytes(query), 0.005)
    if rtt is not None:
        ex.reply, ex.rcode, ex.answered, ex.back = 120, 0, sent + rtt - 0.005, 0.005
    return ex


def test_exchanges_go_to_the_query_that_caused_them() -> None:
    a = _stub(0, "k3.alpha._mcp._tcp.tools.", 11, 0.0, 0.2)
    b = _stub(1, "k3.beta._mcp._tcp.tools.", 22, 0.015, 0.2)
    c = _stub(1, "k3.gamma._mcp._tcp.tools.", 33, 1.0, 0.001)  # answered from cache
    exchanges = [
        _exchange(".", "NS", 0.01, 0.02),  # only a is open: priming is a's
        _exchange("_tcp.tools.", "A", 0.02, 0.02),  # a and b share it; a is busy: b's
        _exchange("alpha._mcp._tcp.tools.", "A", 0.04, 0.02),  # a's name
        _exchange("k3.beta._mcp._tcp.tools.", "SRV", 0.05, 0.02),  # b's name
        _exchange("tools.", "NS", 0.1, None),  # both idle, equal: the first asked; lost
        _exchange("k3.alpha._mcp._tcp.tools.", "SRV", 0.3, 0.01),  # nobody is open
        _exchange("k3.beta._mcp._tcp.tools.", "SRV", 0.06, 0.01, client="127.0.9.9"),
    ]
    walks, unattributed = wire_walks(exchanges, [a, b, c], ["127.0.0.10", "127.0.0.11"],
                                     {BINARY})
    assert unattributed == 2  # after every query ended; from another client
    by_qid = {w.client[1]: w for w in walks if w.client is not None}
    assert by_qid.keys() == {11, 22, 33}
    assert [s.qname for s in by_qid[11].steps] == [".", "alpha._mcp._tcp.tools.", "tools."]
    assert [s.qname for s in by_qid[22].steps] == ["_tcp.tools.", "k3.beta._mcp._tcp.tools."]
    assert by_qid[11].client == (("127.0.0.10", 0), 11)
    assert by_qid[11].rounds == 3 and by_qid[22].rounds == 2
    lost = by_qid[11].steps[-1]
    assert lost.rtt is None and lost.outcome == "timeout" and lost.bytes_in == 0
    assert by_qid[22].steps[0].qtype == "A" and by_qid[22].steps[0].rtt == pytest.approx(0.02)
    assert not by_qid[33].steps and by_qid[33].cache["stock_no_upstream"] == 1


def test_a_malformed_query_is_counted_not_attributed() -> None:
    ex = WireExchange("127.1.0.1", (BINARY, 40000), "udp", 0.01, b"\x00\x01garbage", 0.0)
    walks, unattributed = wire_walks([ex], [_stub(0, "k3.a.tools.", 1, 0.0, 0.1)],
                                     ["127.0.0.10"], {BINARY})
    assert unattributed == 1 and not walks[0].steps


# ------------------------------------------------------------------ what is refused


def _qname(binary: str = "unbound", **fields: object) -> dict:
    return {"schemes": [{"name": "q", "k": 3, "mode": "qname", "resolver": binary, **fields}]}


@pytest.mark.parametrize(("fields", "field", "words"), [
    ({"mode": "aware"}, "resolver", "walks cursors with the intent option"),
    ({"mode": "pass-through"}, "resolver", "forwards the intent option"),
    ({"resolver_model": "bind"}, "resolver_model", "set one"),
    ({"beam": 2}, "beam", "follows one CNAME chain"),
    ({"upstream": "tls"}, "upstream", "over UDP"),
    ({"warm": True}, "warm", "K = 0 warming"),
    ({"cache": False}, "cache", "always caches"),
])
def test_what_a_binary_cannot_honour_is_refused_by_name(fields: dict, field: str,
                                                         words: str) -> None:
    with pytest.raises(ValidationError) as refused:
        scenario("engines-small", **_qname(**fields))
    assert f"{field}: " in str(refused.value) and words in str(refused.value)


def test_engines_without_the_binary_refuse_it_with_the_catalogues_reason() -> None:
    sc = scenario("engines-small", **_qname())
    for engine, words in (("simpy", "resolver_model iterates as it does"),
                          ("ray", "not yet")):
        with pytest.raises(ScenarioError, match=r"^schemes\.q\.resolver: ") as refused:
            run_scenario(sc, engine=engine, write=False)
        assert words in str(refused.value)


def test_the_model_twin_runs_each_binary_as_its_model() -> None:
    sc = scenario("engines-small", **_qname("knot-resolver"))
    twin = model_twin(sc)
    assert twin.engine == "simpy"
    (s,) = twin.dns_schemes()
    assert (s.resolver, s.resolver_model) == ("project", "knot-resolver")


def test_calibration_over_seeds_is_a_t_interval_of_each_seeds_figures() -> None:
    def row(seed_exchanges: float, model: float) -> dict:
        r = {"scheme": "q", "binary": "unbound", "phase": "cold", "queries": 10,
             "success_binary": 1.0, "success_model": 1.0, "same_tools_as_model": 10}
        for m in ("exchanges", "round_trips", "bytes_down", "bytes_up"):
            r[f"{m}_binary"], r[f"{m}_model"] = seed_exchanges, model
            r[f"{m}_diff_pct"] = 100 * (model - seed_exchanges) / seed_exchanges
        return r

    (got,) = over_seeds({1: [row(4.0, 4.2)], 2: [row(5.0, 5.5)], 3: [row(6.0, 6.0)]})
    assert got["seeds"] == 3 and got["queries"] == 30 and got["same_tools_as_model"] == 30
    assert got["exchanges_binary"] == 5.0
    assert got["exchanges_binary_half"] == round(4.302653 * 1.0 / 3 ** 0.5, 3)  # t(.975, 2)
    assert got["exchanges_diff_pct"] == round((5.0 + 10.0 + 0.0) / 3, 3)
    (one,) = over_seeds({1: [row(4.0, 4.2)]})
    assert one["exchanges_binary_half"] is None  # no interval from one seed


# ------------------------------------------------------------------ the namespace


@needs_root
def test_the_private_network_is_left_behind() -> None:
    from sim.sockets.netns import private_network

    def here() -> int:
        return os.stat("/proc/thread-self/ns/net").st_ino

    before = here()
    with private_network():
        inside = here()
        import socket

        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind(("127.1.2.3", 53))  # port 53 is free on every loopback address
    assert inside != before and here() == before


# ------------------------------------------------------------------ the binaries


def _installed() -> None:
    missing = [n for n in RECURSORS if SPECS[n].executable() is None]
    if missing and not CI:
        pytest.skip(f"{', '.join(missing)} not installed (bash .ci/setup installs them)")


@pytest.mark.live
@needs_root
def test_each_binary_answers_as_the_aware_walk_and_its_model_predicts_it(
        tmp_path: Path) -> None:
    """One live run: the aware walk and deployable ToolDNS through each binary, 12 queries
    of one closed-loop agent, cold then warm, captured; then the model twin on simpy."""
    _installed()
    sc = scenario("engines-small", **{
        "network.link.delay.mean": 0.005, "network.processing.model": "fixed",
        "network.nodes": 3, "workload.queries": 12, "workload.pool": 8,
        "workload.phases": 2, "workload.gap": 0.5,
        "schemes": [{"name": "tooldns", "k": 3, "timeout": 5.0},
                    *({"name": n, "k": 3, "mode": "qname", "resolver": n, "timeout": 5.0}
                      for n in RECURSORS)]})
    live = run_scenario(sc, engine="live", out_dir=tmp_path / "live", capture=True)
    df, summary = live.records, live.summary
    aware = df[df.scheme == "tooldns"].set_index("job").returned
    for name in RECURSORS:
        mine = df[df.scheme == name]
        assert mine.success.all(), name
        assert (mine.set_index("job").returned == aware).all(), name  # the same tools
        cap = summary["capture"]["schemes"][name]
        assert cap["queries_exact"] == cap["queries"] == len(mine), (name, cap)
        report = summary["replay"][name]["stock_resolver"]
        assert report["binary"] == name and report["version"], report
        # PowerDNS Recursor primes the root at start: before the first query, or beside it
        unclaimed = report["unattributed_exchanges"]
        assert unclaimed <= (1 if name == "pdns-recursor" else 0), report
        assert report["exchanges"] == mine.exchanges.sum() + unclaimed, report
        cold, warm = mine[mine.phase == 0], mine[mine.phase == 1]
        assert cold.exchanges.sum() > 0 and (warm.exchanges == 0).all(), name
    model = run_scenario(model_twin(sc), write=False)
    rows = compare(df, model.records, "tooldns", {n: n for n in RECURSORS})
    for row in rows:
        b, m = row["exchanges_binary"], row["exchanges_model"]
        assert abs(m - b) <= 0.1 * b, row  # warm: 0 on both
        assert row["same_tools_as_reference"] == row["same_tools_as_model"] == row["queries"], row


@pytest.mark.live
@pytest.mark.mininet
def test_a_binary_on_mininet_is_asked_on_port_53_without_being_told(
        mininet_ok: None) -> None:
    """``tooldns run --engine mininet`` (no port given): the servers listen where a recursor
    asks them, on port 53 (they once listened on the live engine's 15353, and Unbound,
    refused, answered SERVFAIL)."""
    if SPECS["unbound"].executable() is None and not CI:
        pytest.skip("unbound is not installed (bash .ci/setup installs it)")
    sc = scenario("engines-small", **{
        "network.link.delay.mean": 0.005, "network.processing.model": "fixed",
        "network.nodes": 3, "workload.queries": 3, "workload.pool": 3,
        "engine_options.mininet.netem": "off",
        "schemes": [{"name": "q", "k": 3, "mode": "qname", "resolver": "unbound",
                     "timeout": 5.0}]})
    df = run_scenario(sc, engine="mininet", write=False).records
    assert df.success.all() and df.exchanges.sum() > 0, df[["success", "error"]]


def test_a_down_fault_on_the_project_resolver_is_refused_before_anything_runs() -> None:
    sc = scenario("engines-small", **{
        "schemes": [{"name": "project", "k": 3, "mode": "qname"},
                    {"name": "q", "k": 3, "mode": "qname", "resolver": "unbound"}],
        "faults": {"events": [{"kind": "down", "target": "resolver:0", "at": 0.1,
                               "duration": 0.2}], "baseline": False}})
    with pytest.raises(ScenarioError, match=r"^faults\.events\.0\.target: .*stock "
                                            r"recursors.*scheme project has none"):
        run_scenario(sc, engine="live", write=False)


@pytest.mark.live
@needs_root
def test_a_down_fault_crashes_the_binary_and_it_starts_again_cold() -> None:
    """Unbound killed from 0.6 s to 1.1 s of a 2 s Poisson workload of 6 intents: queries
    then time out and are asked again until it answers; after the restart its cache is
    empty, so the intents it had cached are walked again (more upstream exchanges than
    the same run without the fault)."""
    if SPECS["unbound"].executable() is None and not CI:
        pytest.skip("unbound is not installed (bash .ci/setup installs it)")
    sc = scenario("engines-small", **{
        "network.link.delay.mean": 0.005, "network.processing.model": "fixed",
        "network.nodes": 3, "workload.queries": 24, "workload.pool": 6,
        "workload.arrival": {"process": "poisson", "rate": 12.0},
        "schemes": [{"name": "q", "k": 3, "mode": "qname", "resolver": "unbound",
                     "timeout": 0.4, "max_attempts": 6}],
        "faults": {"events": [{"kind": "down", "target": "resolver:0", "at": 0.6,
                               "duration": 0.5}], "baseline": False}})
    crashed = run_scenario(sc, engine="live", write=False)
    calm = run_scenario(sc.model_copy(update={"faults": None}), engine="live", write=False)
    report = crashed.summary["replay"]["q"]["stock_resolver"]
    assert report["crashes"] == report["restarts"] == 1, report
    assert calm.summary["replay"]["q"]["stock_resolver"]["crashes"] == 0
    df = crashed.records
    assert df.success.all()  # asked again until the binary answered
    assert df.timeouts.sum() > 0 and calm.records.timeouts.sum() == 0
    assert df.exchanges.sum() > calm.records.exchanges.sum()  # walked again, cold


@pytest.mark.live
@needs_root
def test_the_binaries_validate_a_signed_hierarchy() -> None:
    """``namespace.dnssec`` and ``dnssec: true``: each binary gets the hierarchy's root DS as
    its only trust anchor and validates; every discovery succeeds, the keys' fetches among
    its exchanges (more than unsigned)."""
    _installed()
    over = {"network.link.delay.mean": 0.002, "network.processing.model": "fixed",
            "network.nodes": 3, "workload.queries": 4, "workload.pool": 4,
            "schemes": [{"name": n, "k": 3, "mode": "qname", "resolver": n, "timeout": 5.0,
                         "dnssec": True} for n in RECURSORS]}
    signed = run_scenario(scenario("engines-small", **{**over, "namespace.dnssec": True}),
                          engine="live", write=False).records
    plain = run_scenario(scenario("engines-small", **{**over, "schemes": [
        {**s, "dnssec": False} for s in over["schemes"]]}), engine="live", write=False).records
    assert signed.success.all(), signed.groupby("scheme").success.mean()
    more = (signed.groupby("scheme").exchanges.sum() > plain.groupby("scheme").exchanges.sum())
    assert more.all(), more
