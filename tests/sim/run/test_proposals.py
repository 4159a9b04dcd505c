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
def records(tmp_path_factory: pytest.TempPathFactory):
    sc = load_scenario(ROOT / "scenarios" / "proposals.yaml").with_overrides(
        {"workload.queries": 30, "workload.pool": 20, "namespace.tools": 600})
    out = tmp_path_factory.mktemp("proposals")
    return sc, run_scenario(sc, out_dir=out).records


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
