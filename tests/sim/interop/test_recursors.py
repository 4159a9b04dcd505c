"""Stock resolvers in front of a served hierarchy (``tooldns recursors``): Unbound, BIND, Knot
Resolver, PowerDNS Recursor and dnsdist, each in a fresh network namespace on port 53.

The matrix runs once for the module (all five, plain and DNSSEC variants, ~45 s); each
test asserts what was measured for one resolver. Needs root (``unshare --net``); a
resolver whose binary is missing is skipped with that reason (``bash .ci/setup`` installs
them, so CI runs every test). The configuration tests run without root.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from sim.interop.matrix import RecursorError, run_matrix
from sim.interop.probe import RANK_INTENTS, RANK_K, _ready, by_priority, minimised
from sim.interop.process import Running
from sim.interop.resolvers import RESOLVERS, SPECS, Setup, Spec
from sim.interop.rows import ROWS, rank_counts
from sim.interop.tables import (
    cost_markdown,
    cost_rows,
    matrix_markdown,
    model_markdown,
    rank_markdown,
)

pytestmark = [pytest.mark.live, pytest.mark.interop]

CI = bool(os.environ.get("CI"))
RECURSORS = ("unbound", "bind", "knot-resolver", "pdns-recursor")
ROOT_HINT = ("a.root-servers.", "127.1.0.1")
ANCHOR = "30049 15 2 6e69d6a76cef59c6c742be0690a56a721a64468a7dcd9d4fe45372231deee700"
needs_root = pytest.mark.skipif(
    os.geteuid() != 0 and not CI,
    reason="needs root: a network namespace (unshare --net) with port 53 inside")


def _installed(name: str) -> None:
    spec = SPECS[name]
    if spec.executable() is None and not CI:
        pytest.skip(f"{spec.binary} is not installed (bash .ci/setup installs it)")


@pytest.fixture(scope="module")
def matrix() -> dict:
    if os.geteuid() != 0 and not CI:
        pytest.skip("needs root: a network namespace (unshare --net) with port 53 inside")
    return run_matrix(RESOLVERS, ("plain", "dnssec"), timeout=300)


def _row(matrix: dict, name: str, row: str) -> dict:
    res = matrix["resolvers"][name]
    for variant, v in res.get("variants", {}).items():
        assert v.get("status") != "failed", f"{name} ({variant}): {v.get('error')}"
    return res["rows"][row]


def _probe(matrix: dict, name: str, key: str, variant: str = "plain") -> dict:
    probes = matrix["resolvers"][name]["variants"][variant]["probes"]
    assert key in probes, f"{name}: probe {key!r} not run ({sorted(probes)})"
    return probes[key]


# ----------------------------------------------------------------- what runs where


@needs_root
@pytest.mark.parametrize("name", RESOLVERS)
def test_every_probe_ran(matrix: dict, name: str) -> None:
    _installed(name)
    res = matrix["resolvers"][name]
    assert res["status"] == "ok", res.get("error")
    assert set(res["variants"]) == {"plain", "dnssec"}
    for variant, v in res["variants"].items():
        assert v["status"] == "ok", f"{name} ({variant}): {v.get('error')}"
    assert set(res["rows"]) == set(ROWS)
    assert matrix["meta"]["versions"][name].startswith(SPECS[name].binary)
    # nothing timed out: every stub query got an answer
    for variant, v in res["variants"].items():
        for key, probe in v["probes"].items():
            assert not probe["answer"].get("error"), f"{name} {variant} {key}: {probe}"


@needs_root
@pytest.mark.parametrize("name", RECURSORS)
def test_recursors_strip_the_intent_option(matrix: dict, name: str) -> None:
    _installed(name)
    row = _row(matrix, name, "option forwarded")
    assert row["cell"] == "no", row
    cost = _probe(matrix, name, "cursor cold")["cost"]
    assert cost["queries"] >= 1  # it did ask the hierarchy, only without the option
    assert cost["intent_option_queries"] == 0
    assert 65432 not in cost["option_codes"]
    assert all(a.split("@")[1] in (".", "tools.") for a in cost["asked"])  # never deeper


@needs_root
@pytest.mark.parametrize("name", RECURSORS)
def test_cursor_walk_fails_through_recursors(matrix: dict, name: str) -> None:
    _installed(name)
    row = _row(matrix, name, "cursor walk")
    assert row["cell"] == "no", row
    for key in ("cursor cold", "cursor warm", "cursor repeat"):
        answer = _probe(matrix, name, key)["answer"]
        assert answer["rcode"] == "NXDOMAIN", answer  # the root has no _tools.
        assert not answer.get("srv")
    # the negative answer is cached: the second intent and the repeat cost nothing
    assert _probe(matrix, name, "cursor warm")["cost"]["queries"] == 0
    assert _probe(matrix, name, "cursor repeat")["cost"]["queries"] == 0


@needs_root
def test_bind_sends_cookies_and_others_no_options(matrix: dict) -> None:
    _installed("bind")
    assert 10 in _probe(matrix, "bind", "cursor cold")["cost"]["option_codes"]  # COOKIE
    for name in ("unbound", "knot-resolver", "pdns-recursor"):
        if SPECS[name].executable() is not None:
            assert _probe(matrix, name, "cursor cold")["cost"]["option_codes"] == [], name


@needs_root
def test_dnsdist_passes_the_option_to_the_aware_resolver(matrix: dict) -> None:
    _installed("dnsdist")
    assert _row(matrix, "dnsdist", "option forwarded")["cell"] == "yes"
    assert _row(matrix, "dnsdist", "cursor walk")["cell"] == "yes"
    cold = _probe(matrix, "dnsdist", "cursor cold")
    assert cold["cost"]["queries"] == 1 and 65432 in cold["cost"]["option_codes"]
    # behind it, our aware resolver walked the tree with the option
    assert cold["servers_cost"]["intent_option_queries"] >= 3
    ref = matrix["meta"]["reference"][matrix["meta"]["intents"][0]]
    assert sorted(cold["answer"]["srv"]) == ref and len(ref) == 3


@needs_root
@pytest.mark.parametrize("name", RESOLVERS)
def test_dns_native_drafts_resolve_unmodified(matrix: dict, name: str) -> None:
    """DNS-AID, ANS v2, DN-ANR, AID and DNS-SD need nothing of a resolver: every question
    of their clients (SVCB, HTTPS, TLSA, TXT, PTR, SRV) comes back with its type."""
    _installed(name)
    row = _row(matrix, name, "DNS-native drafts")
    assert row["cell"] == "yes", row
    svcb = _probe(matrix, name, "DN-ANR SVCB")["answer"]
    assert svcb["types"] == ["SVCB"]
    _host, address = matrix["meta"]["draft_host"]
    assert _probe(matrix, name, "draft host A")["answer"]["a"] == [address]


@needs_root
@pytest.mark.parametrize("name", RESOLVERS)
def test_expanded_srv_and_a_resolve_everywhere(matrix: dict, name: str) -> None:
    _installed(name)
    assert _row(matrix, name, "expanded SRV")["cell"] == "yes"
    assert _row(matrix, name, "A")["cell"] == "yes"
    srv = _probe(matrix, name, "expanded SRV")["answer"]
    assert sorted(srv["srv"]) == matrix["meta"]["expected_srv"]
    assert len(srv["srv"]) > 3  # the whole RRset, not a top-K
    a = _probe(matrix, name, "A")["answer"]
    assert a["a"] == [matrix["meta"]["expected_a"]]


# ---------------------------------------------------------------------- qname walk


@needs_root
@pytest.mark.parametrize("name", RESOLVERS)
def test_qname_walk_returns_the_aware_resolvers_targets(matrix: dict, name: str) -> None:
    _installed(name)
    assert _row(matrix, name, "qname walk")["cell"] == "yes"
    meta = matrix["meta"]
    for key, intent in (("qname cold", 0), ("qname warm", 1), ("qname repeat", 0)):
        answer = _probe(matrix, name, key)["answer"]
        assert answer["rcode"] == "NOERROR"
        assert sorted(answer["srv"]) == meta["reference"][meta["intents"][intent]], key
        # one in-bailiwick CNAME per level below tools. (depth 2: two)
        assert len(answer["cnames"]) == 2, answer
    cold = _probe(matrix, name, "qname cold")["answer"]
    for n, target in enumerate(cold["srv"]):
        assert _probe(matrix, name, f"qname follow-up A {n}")["answer"]["a"], target


@needs_root
@pytest.mark.parametrize("name", RECURSORS)
def test_qname_walk_cost_through_recursors(matrix: dict, name: str) -> None:
    """Qname minimisation shows, the walk costs at least the aware walk's queries cold,
    and a repeated intent is answered from the recursor's cache."""
    _installed(name)
    aware = matrix["aware"]["plain"]
    cold = _probe(matrix, name, "qname cold")
    assert cold["minimised"], cold["cost"]["asked"]
    assert cold["cost"]["intent_option_queries"] == 0
    assert cold["cost"]["queries"] >= aware["cursor cold"]["cost"]["queries"]
    assert _probe(matrix, name, "qname repeat")["cost"]["queries"] == 0
    warm = _probe(matrix, name, "qname warm")["cost"]["queries"]
    assert 0 < warm <= cold["cost"]["queries"]


@needs_root
@pytest.mark.parametrize("name", RECURSORS)
def test_resolver_model_asks_what_the_binary_asks(matrix: dict, name: str) -> None:
    """The project's resolver with this recursor's profile (``resolver_model``), on the
    same hierarchy and probes in memory, asks the servers the same names, with the same
    types, in the same order as the binary did: the qname walk cold, warm, repeated and
    its targets' A; ten intents' walks one after another; every draft's questions and the
    host's A (``sim.interop.model``)."""
    _installed(name)
    rows = matrix["model"][name]
    assert len(rows) == 29, sorted(rows)
    differ = {probe: (r["binary"], r["model"]) for probe, r in rows.items() if not r["same"]}
    assert not differ, differ
    assert sum(len(r["binary"]) for r in rows.values()) > 16  # minimised: more than one each


@needs_root
def test_unbound_and_bind_minimise_label_by_label(matrix: dict) -> None:
    """Unbound and BIND ask every intermediate name of the qname walk (twice the aware
    walk's queries or more, cold); the aware resolver never minimises."""
    aware = matrix["aware"]["plain"]["cursor cold"]
    assert not aware["minimised"]
    for name in ("unbound", "bind"):
        _installed(name)
        cost = _probe(matrix, name, "qname cold")["cost"]
        assert cost["queries"] >= 2 * aware["cost"]["queries"], (name, cost["asked"])


@needs_root
def test_bind_adds_the_targets_a_records(matrix: dict) -> None:
    for name in RECURSORS:
        _installed(name)
        cold = _probe(matrix, name, "qname cold")["answer"]
        extra = cold.get("additional_a", {})
        if name == "bind":  # minimal-responses no-auth-recursive keeps the additional data
            assert all(t in extra for t in cold["srv"]), extra
        else:  # minimal responses: the agent asks for each target's A itself
            assert not extra, (name, extra)


# --------------------------------------------------------------------- rank order


@needs_root
@pytest.mark.parametrize("name", RESOLVERS)
def test_rank_order_survives_every_resolver(matrix: dict, name: str) -> None:
    """Ten intents walked with K = 5: the leaves number their top K by SRV priority, and
    through every resolver the order read back from the priorities is the leaf's, whatever
    order the RRset arrived in (the recursors reorder it; measured before the priorities
    carried the rank: 3/10 through Unbound, 0/10 through BIND, 3/10 through Knot)."""
    _installed(name)
    meta = matrix["meta"]
    assert len(meta["rank_intents"]) == RANK_INTENTS and meta["rank_k"] == RANK_K
    for intent in meta["rank_intents"]:
        targets, priorities = meta["ranking"][intent]
        assert priorities == list(range(len(targets))) and len(targets) >= 2, intent
    row = _row(matrix, name, "rank order")
    assert row["cell"] == "yes", row
    for n, intent in enumerate(meta["rank_intents"]):
        answer = _probe(matrix, name, f"rank {n}")["answer"]
        assert answer["rcode"] == "NOERROR", answer
        assert by_priority(answer["srv"], answer["priority"]) == meta["ranking"][intent][0]
    probes = matrix["resolvers"][name]["variants"]["plain"]["probes"]
    counts = rank_counts(probes, meta)
    assert counts["by_priority"] == counts["answered"] == RANK_INTENTS
    assert f"| {name} | {RANK_INTENTS} | " in rank_markdown(matrix)


def test_rank_row_reads_priority_not_rrset_order() -> None:
    """The row's logic on made-up probes: a shuffled RRset with the ranks as priorities
    keeps the order; the same shuffle with every priority 0 loses it."""
    from sim.interop.rows import _rank_row

    want = ["a.leaf.", "b.leaf.", "c.leaf."]
    meta = {"rank_intents": ["x", "y"], "rank_k": 3,
            "ranking": {"x": (want, [0, 1, 2]), "y": (want[:2], [0, 1])}}

    def probes(srv: list[list[str]], priority: list[list[int]]) -> dict:
        return {f"rank {n}": {"answer": {"rcode": "NOERROR", "srv": s, "priority": p}}
                for n, (s, p) in enumerate(zip(srv, priority, strict=True))}

    shuffled = [["c.leaf.", "a.leaf.", "b.leaf."], ["a.leaf.", "b.leaf."]]
    good = _rank_row(probes(shuffled, [[2, 0, 1], [0, 1]]), None, meta)
    assert good["cell"] == "yes", good
    assert "priority 2/2" in good["detail"] and "as received 1/2" in good["detail"]
    flat = _rank_row(probes(shuffled, [[0, 0, 0], [0, 0]]), None, meta)
    assert flat["cell"] == "no" and "priority 1/2" in flat["detail"], flat
    unnumbered = {**meta, "ranking": {"x": (want, [0, 0, 0]), "y": (want[:2], [0, 0])}}
    assert _rank_row(probes([want, want[:2]], [[0, 0, 0], [0, 0]]), None,
                     unnumbered)["cell"] == "no"


# ------------------------------------------------------------------------- DNSSEC


@needs_root
@pytest.mark.parametrize("name", RESOLVERS)
def test_validating_resolvers_set_ad(matrix: dict, name: str) -> None:
    """Every validator (dnsdist: our aware resolver behind it) marks the A record, the
    expanded SRV and the whole qname walk authentic (AD)."""
    _installed(name)
    assert _row(matrix, name, "DNSSEC")["cell"] == "yes"
    a = _probe(matrix, name, "A", "dnssec")["answer"]
    assert a["ad"] and a["a"] == [matrix["meta"]["expected_a"]]
    assert _probe(matrix, name, "expanded SRV", "dnssec")["answer"]["ad"]
    q = _probe(matrix, name, "qname cold", "dnssec")["answer"]
    assert q["ad"] and q["rcode"] == "NOERROR"
    meta = matrix["meta"]
    assert sorted(q["srv"]) == meta["reference"][meta["intents"][0]]


@needs_root
def test_pdns_recursor_accepts_the_nsec_at_empty_non_terminals(matrix: dict) -> None:
    """PowerDNS Recursor checks the denials on the way down (it asked DS for ``_tcp.tools.``
    when they had no proof, and logged "Invalid denial": Bogus, SERVFAIL). With the NSEC
    owned by each NODATA name (RFC 4470 style, nodes.dns.dnssec) the walk validates."""
    _installed("pdns-recursor")
    q = _probe(matrix, "pdns-recursor", "qname cold", "dnssec")
    assert q["answer"]["rcode"] == "NOERROR" and q["answer"]["ad"]
    lines = matrix["resolvers"]["pdns-recursor"]["variants"]["dnssec"]["log_lines"]
    assert not any("Invalid denial" in line for line in lines), lines


@needs_root
@pytest.mark.parametrize("name", RECURSORS)
def test_recursors_validate_denial_ds_and_dnskey(matrix: dict, name: str) -> None:
    """With the root DS as trust anchor, every recursor proves NXDOMAIN (a name missing
    from a leaf, and one below the empty non-terminal ``_tcp.tools.``) and NODATA from the
    servers' NSEC records and answers both with AD, not SERVFAIL; the leaf's DS (answered
    by its parent) and DNSKEY come back validated too."""
    _installed(name)
    row = _row(matrix, name, "DNSSEC denial")
    assert row["cell"] == "yes", row
    for key in ("NXDOMAIN", "NXDOMAIN below an empty non-terminal"):
        answer = _probe(matrix, name, key, "dnssec")["answer"]
        assert answer["rcode"] == "NXDOMAIN" and answer["ad"], (key, answer)
    nodata = _probe(matrix, name, "NODATA", "dnssec")["answer"]
    assert nodata["rcode"] == "NOERROR" and nodata["ad"] and not nodata.get("types"), nodata
    for key in ("DS", "DNSKEY"):  # the RRset with its RRSIG (the stub set DO)
        answer = _probe(matrix, name, key, "dnssec")["answer"]
        assert answer["rcode"] == "NOERROR" and answer["ad"], answer
        assert answer["types"] == [key, "RRSIG"], answer
    lines = matrix["resolvers"][name]["variants"]["dnssec"]["log_lines"]
    assert not any(re.search(r"bogus|invalid denial", line, re.I) for line in lines), lines


@needs_root
def test_dnsdist_relays_the_aware_resolvers_cache(matrix: dict) -> None:
    """Behind dnsdist our resolver caches the qname walk's CNAMEs and SRV RRset by name, as
    a stock recursor does: a repeated intent costs the servers nothing."""
    _installed("dnsdist")
    repeat = _probe(matrix, "dnsdist", "qname repeat")
    assert repeat["cost"]["queries"] == 1  # dnsdist → our resolver (no dnsdist cache)
    assert repeat["servers_cost"]["queries"] == 0
    assert _probe(matrix, "dnsdist", "qname cold")["servers_cost"]["queries"] > 0


@needs_root
def test_outputs_render(matrix: dict, tmp_path: Path) -> None:
    table = matrix_markdown(matrix)
    assert table.splitlines()[0] == "| probe | " + " | ".join(RESOLVERS) + " |"
    assert len(table.splitlines()) == 2 + len(ROWS)
    cost = cost_markdown(matrix)
    assert "| aware (ours) | cursor cold |" in cost
    rows = cost_rows(matrix)
    assert {r["resolver"] for r in rows} == {n for n in RESOLVERS
                                           if SPECS[n].executable() is not None}
    model = model_markdown(matrix).splitlines()
    assert model[0].startswith("| recursor | probes asked alike |")
    assert {line.split(" | ")[0][2:] for line in model[2:]} == set(matrix["model"])


# --------------------------------------------------- no root needed: configuration


@pytest.mark.parametrize("name", RESOLVERS)
@pytest.mark.parametrize("anchor", [None, ANCHOR], ids=["plain", "dnssec"])
def test_configs_point_at_the_hierarchy_only(tmp_path: Path, name: str,
                                             anchor: str | None) -> None:
    spec = SPECS[name]
    setup = Setup(tmp_path, spec.address, [ROOT_HINT], anchor)
    argv = spec.configure(setup)
    text = "\n".join(p.read_text() for p in tmp_path.iterdir() if p.is_file())
    assert spec.address in text
    if spec.kind == "recursor":
        assert "127.1.0.1" in text and "a.root-servers." in text
        assert "198.41.0.4" not in text  # never the real a.root-servers.net
    else:
        assert "127.0.53.1:53" in text
    phone_home = {
        "unbound": ["do-not-query-localhost: no", "control-enable: no"],
        "bind": ["type hint", "controls { }", "empty-zones-enable no"],
        "knot-resolver": ["modules.unload('ta_update')", "modules.unload('priming')",
                          "modules.unload('ta_signal_query')", "trust_anchors.remove('.')",
                          "ALLOW_LOCAL"],
        "pdns-recursor": ["security-poll-suffix=\n", "dont-query=\n", "clearTA('.')"],
        "dnsdist": ["setSecurityPollSuffix('')"],
    }[name]
    for needle in phone_home:
        assert needle in text, needle
    assert "auto-trust-anchor" not in text
    if anchor is not None and spec.kind == "recursor":
        assert anchor.split()[0] in text and anchor.split()[-1] in text
    if name == "bind":
        assert ("dnssec-validation yes" in text) == (anchor is not None)
    assert argv  # a foreground command line


CHECKERS = {
    "unbound": lambda d: ["unbound-checkconf", str(d / "unbound.conf")],
    "bind": lambda d: ["named-checkconf", str(d / "named.conf")],
    "dnsdist": lambda d: ["dnsdist", "--check-config", "-C", str(d / "dnsdist.conf")],
}


@pytest.mark.parametrize("name", sorted(CHECKERS))
@pytest.mark.parametrize("anchor", [None, ANCHOR], ids=["plain", "dnssec"])
def test_configs_pass_the_resolvers_own_checker(tmp_path: Path, name: str,
                                                anchor: str | None) -> None:
    argv = CHECKERS[name](tmp_path)
    exe = SPECS[name].executable() and shutil.which(
        argv[0], path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin"]))
    if not exe:
        if CI:
            pytest.fail(f"{argv[0]} missing in CI")
        pytest.skip(f"{argv[0]} is not installed (bash .ci/setup installs it)")
    SPECS[name].configure(Setup(tmp_path, SPECS[name].address, [ROOT_HINT], anchor))
    out = subprocess.run([exe, *argv[1:]], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_resolver_that_cannot_start_reports_its_log(tmp_path: Path) -> None:
    """A resolver that exits at once: the error names it and shows its log's tail."""
    _installed("unbound")

    def broken(s: Setup) -> list[str]:
        (s.workdir / "unbound.conf").write_text("server:\n  no-such-option: yes\n")
        return ["-d", "-c", str(s.workdir / "unbound.conf")]

    spec = Spec("unbound", "unbound", "127.0.99.1", "recursor", broken, ("-V",), "")
    running = Running(spec, Setup(tmp_path / "w", spec.address, [ROOT_HINT]),
                      tmp_path / "unbound.log")
    try:
        error = asyncio.run(_ready("127.0.99.1", running))
    finally:
        running.stop()
    assert error is not None
    assert "unbound exited with status 1" in error
    assert "no-such-option" in error  # unbound's own complaint, from the log


def test_missing_binary_is_a_not_installed_row(monkeypatch: pytest.MonkeyPatch) -> None:
    ghost = Spec("ghost", "no-such-resolver-binary", "127.0.99.9", "recursor",
                 SPECS["unbound"].configure, ("-V",), "")
    monkeypatch.setitem(SPECS, "ghost", ghost)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    result = run_matrix(["ghost"], ["plain"])
    row = result["resolvers"]["ghost"]
    assert row["status"] == "not installed"
    assert row["rows"]["A"] == {"cell": "not installed", "detail": row["error"]}
    assert "no-such-resolver-binary is not installed" in row["error"]
    assert "not installed" in matrix_markdown(result)


def test_not_root_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(RecursorError, match="must run as root"):
        run_matrix(["unbound"])
    with pytest.raises(RecursorError, match="unknown resolver 'powerdns'"):
        run_matrix(["powerdns"])


def test_minimisation_is_read_from_the_names_asked() -> None:
    name = "k3.a-b._mcp._tcp.tools."
    assert minimised(["tools. A @.", f"{name} SRV @tools."], name)
    assert minimised(["_.tools. A @.", f"{name} SRV @tools."], name)
    assert not minimised([f"{name} SRV @.", f"{name} SRV @tools.",
                          "ns1.tools. A @tools."], name)
