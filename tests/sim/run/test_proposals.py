"""The DNS-native drafts as schemes (scenarios/proposals.yaml): each agent searches its
local mirror, then resolves the chosen agents with its draft's records through the
stock-resolver model, and returns the endpoints the organisations' zones publish."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.build.namespace import build_namespace
from sim.errors import ScenarioError
from sim.loading import load_scenario
from sim.run.runner import run_scenario
from topologies.orgzones import publications

ROOT = Path(__file__).resolve().parents[3]
DRAFTS = ("dns-aid", "ans-v2", "dn-anr", "aid", "dns-sd")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory):
    sc = load_scenario(ROOT / "scenarios" / "proposals.yaml").with_overrides(
        {"workload.queries": 30, "workload.pool": 20, "namespace.tools": 600})
    out = tmp_path_factory.mktemp("proposals")
    return sc, run_scenario(sc, out_dir=out)


@pytest.fixture(scope="module")
def records(run):
    sc, result = run
    return sc, result.records


def test_the_mirror_refresh_is_reported_not_charged(run) -> None:
    """The summary prices one refresh of the drafts' mirror: the MCP Registry's listing
    paged 100 at a time; the footer says so."""
    from analysis.conditions import conditions

    sc, result = run
    mirror = result.summary["mirror"]
    tools = len(build_namespace(sc).tools)
    assert mirror["schemes"] == list(DRAFTS)
    assert mirror["servers"] == tools and mirror["requests"] == -(-tools // 100)
    assert mirror["bytes_down"] > 400 * tools > mirror["bytes_up"] > 0
    assert any(line.startswith("mirror: the agents of dns-aid")
               for line in conditions(sc.model_dump(mode="json"), result.summary))
    mcp = result.records[result.records.scheme == "mcp-registry"]
    assert len(mcp) == 60 and (mcp.exchanges <= 3).all() and mcp.success.any()


def test_every_draft_finds_what_its_search_chose(records) -> None:
    sc, df = records
    ns = build_namespace(sc)
    pubs = publications(ns)
    for draft in DRAFTS:
        rows = df[df.scheme == draft]
        assert len(rows) == 60
        for _, row in rows.iterrows():
            returned = row.returned.split()
            if draft == "aid" and row.service == "skill":  # AID has no token for skills
                assert not returned and row.error == "no candidate resolved"
                continue
            assert row.success and returned, (draft, row.error)
            assert all(t in pubs for t in returned)  # endpoints map back to tools
            assert row.tools_examined == sum(
                1 for t in ns.tools.values() if t.service == row.service)  # the mirror
            assert row.encodings == 1


def test_drafts_ask_what_their_steps_say(records) -> None:
    """Questions per discovery, exactly (no loss here, so no retries): per candidate,
    DN-ANR's SVCB and TXT; AID's TXT then the URI host's A; ANS v2's _ans TXT then HTTPS,
    TLSA and badge; DNS-AID's SVCB after one index TXT per organisation; DNS-SD's SRV and
    TXT after one PTR browse per organisation; addresses ride in the additional section
    of SVCB, HTTPS and SRV answers relayed from the servers, and not in answers the
    resolver gives from its cache (answer RRsets only), so a round of A questions may
    follow (at most one per candidate)."""
    sc, df = records
    pubs = publications(build_namespace(sc))
    for _, row in df[df.scheme.isin(DRAFTS) & (df.returned != "")].iterrows():
        chosen = row.returned.split()
        n, orgs = len(chosen), len({pubs[t].domain for t in chosen})
        expected = {"dn-anr": 2 * n, "aid": 2 * n, "ans-v2": 4 * n, "dns-aid": orgs + n,
                    "dns-sd": orgs + 2 * n}[row.scheme]
        extra = 0 if row.scheme == "aid" else n  # AID always asks the A round
        assert expected <= row.stub_attempts <= expected + extra, (row.scheme, expected)
        if row.cache_hits == 0:  # cold: every question went upstream
            assert row.round_trips >= {"dn-anr": 1, "aid": 2}.get(row.scheme, 2)


def test_same_scenario_same_results(records, tmp_path: Path) -> None:
    sc, df = records
    again = run_scenario(sc.with_overrides({"schemes": [
        s.model_dump(mode="json", exclude_unset=True) for s in sc.schemes
        if s.name in ("dns-aid", "dns-sd")]}), out_dir=tmp_path).records
    for name in ("dns-aid", "dns-sd"):
        a = df[df.scheme == name].reset_index(drop=True)
        b = again[again.scheme == name].reset_index(drop=True)
        assert a.drop(columns=[]).equals(b)


def test_fields_a_draft_cannot_take_are_refused() -> None:
    sc = load_scenario(ROOT / "scenarios" / "proposals.yaml")
    with pytest.raises((ValueError, ScenarioError), match="does not apply to mode mirror"):
        sc.with_overrides({"schemes": [{"name": "d", "kind": "dns-aid", "warm": True}]})


def test_ans_tiers_ask_what_they_verify(tmp_path: Path) -> None:
    """ANS v2's verification tiers: gold asks the host's HTTPS record, the TLSA record and
    the badge after _ans; silver leaves the badge out, bronze the TLSA record too."""
    sc = load_scenario(ROOT / "scenarios" / "proposals.yaml").with_overrides({
        "workload.queries": 10, "workload.pool": 10, "workload.phases": 1,
        "namespace.tools": 300,
        "schemes": [{"name": tier, "kind": "ans-v2", "mode": tier, "k": 2}
                    for tier in ("gold", "silver", "bronze")]})
    df = run_scenario(sc, out_dir=tmp_path).records.set_index(["scheme", "job"])
    for tier, per in (("gold", 4), ("silver", 3), ("bronze", 2)):
        rows = df.loc[tier]
        assert rows.success.all()
        n = rows.returned.str.split().str.len()
        assert (rows.stub_attempts >= per * n).all() and (rows.stub_attempts <= per * n + n).all()
    assert (df.loc["gold"].returned == df.loc["bronze"].returned).all()  # same endpoints


def test_a_missing_badge_fails_gold_only() -> None:
    from dnslib import RR, DNSRecord

    from nodes.agent.drafts import DRAFTS
    from nodes.agent.mirror import Candidate

    c = Candidate("t1", "acme.example.", "bot", "mcp")
    host = "bot.acme.example."

    def answer(zone: str) -> DNSRecord:
        msg = DNSRecord.question(zone.split()[0])
        msg.add_answer(*RR.fromZone(zone))
        return msg

    answers = {
        (f"_ans.{host}", 16): answer(f'_ans.{host} 3600 IN TXT "v=ans1; version=v1.0.0; '
                                     f'p=mcp; mode=direct; url=https://bot.acme.example:8443/"'),
        (host, 65): answer(f"{host} 3600 IN HTTPS 1 . alpn=h2 port=8443"),
        (f"_8443._tcp.{host}", 52): answer(f"_8443._tcp.{host} 3600 IN TLSA 3 0 1 " + "ab" * 32),
        (f"_ans-badge.{host}", 16): None,  # the badge did not resolve
    }
    assert DRAFTS["ans-v2"].locate(c, answers) is None
    assert DRAFTS["ans-v2-silver"].locate(c, answers) == (host, 8443)
    assert DRAFTS["ans-v2-bronze"].locate(c, answers) == (host, 8443)


def test_hostile_records_fail_the_candidate_not_the_agent() -> None:
    """Records are hostile input: a URL with a bad port, another scheme, a host that is not
    the agent's (ANS), a name the agent cannot ask; and bytes that are no DNS message."""
    import random

    from dnslib import RR, DNSRecord

    from nodes.agent.drafts import DRAFTS, url_endpoint
    from nodes.agent.mirror import Candidate, Mirror
    from nodes.agent.pipeline import PipelineAgent
    from nodes.resolver.types import Discovery
    from nodes.scoring import make_scorer
    from nodes.searchcost import cost_of

    assert url_endpoint("https://a.example:99999/") is None
    assert url_endpoint("http://a.example/") is None and url_endpoint("https:///x") is None
    assert url_endpoint("https://a.example:8443/mcp") == ("a.example.", 8443)
    c = Candidate("t1", "acme.example.", "bot", "mcp")
    host = "bot.acme.example."

    def txt(owner: str, text: str) -> DNSRecord:
        msg = DNSRecord.question(owner, "TXT")
        msg.add_answer(*RR.fromZone(f'{owner} 300 IN TXT "{text}"'))
        return msg

    aid = (f"_agent._mcp.{host}", 16)
    for bad in ("v=aid1;u=https://bot.acme.example:70000/;p=mcp",
                "v=aid1;u=ftp://bot.acme.example/;p=mcp", "v=aid1;p=mcp"):
        assert DRAFTS["aid"].locate(c, {aid: txt(aid[0], bad)}) is None
    ans = (f"_ans.{host}", 16)
    elsewhere = txt(ans[0], "v=ans1; version=v1.0.0; p=mcp; mode=direct; "
                            "url=https://evil.example/")
    assert DRAFTS["ans-v2-bronze"].rounds[1](c, {ans: elsewhere}) is None
    agent = PipelineAgent(("127.0.53.1", 53), random.Random(1), draft="aid", mirror=Mirror(
        [c], ["bot that does things"], make_scorer("bm25"), cost_of("bm25")))
    result = agent.ask("job", Discovery("things", service="mcp", k=1), 0.0)
    agent.on_timer(1.0)  # the search's time has passed: the first round goes out
    (out,) = agent.to_send()
    agent.receive(b"\x00\x01garbage", ("127.0.53.1", 53), 1.1)
    assert agent.ignored == 1 and agent.is_pending(result.qid)
    reply = txt(aid[0], "v=aid1;u=https://" + "x" * 70 + ".example/;p=mcp")  # no DNS name
    reply.header.id, reply.header.qr = DNSRecord.parse(out.data).header.id, 1
    agent.receive(reply.pack(), ("127.0.53.1", 53), 1.2)
    (done,) = agent.pop_done()
    assert done.error == "no candidate resolved" and not done.endpoints


def test_k_zero_is_refused_for_a_draft() -> None:
    with pytest.raises(ValueError, match="resolves the top K tools its search chose"):
        load_scenario(ROOT / "scenarios" / "proposals.yaml").with_overrides(
            {"schemes": [{"name": "d", "kind": "dn-anr", "k": 0}]})


def test_fault_selectors_name_the_organisations_servers() -> None:
    """``zone:<org>.example.`` is that organisation's hosting server (each holds many
    zones), ``role:org`` every server of the organisations' zones."""
    from sim.build.faults import select
    from sim.build.plan import run_nodes, scenario_hierarchy

    sc = load_scenario(ROOT / "scenarios" / "proposals.yaml").with_overrides(
        {"namespace.tools": 300})
    ns = build_namespace(sc)
    hierarchy = scenario_hierarchy(sc, ns)
    nodes = run_nodes(hierarchy, ["127.0.53.1"], ["127.2.0.1"], 1)
    held = hierarchy.zone_servers()
    for domain in sorted({p.domain for p in publications(ns).values()}):
        (address,) = select(f"zone:{domain}", nodes)
        assert address == held[domain] and domain in hierarchy.servers[address].zones
    org = select("role:org", nodes)
    assert org == {held["example."], *(held[d] for d in held if d.endswith(".example."))}
    assert len(org) == 5  # example.'s server and the four hosting servers
