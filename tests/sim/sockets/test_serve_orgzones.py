"""The organisations' zones on real sockets: `tooldns serve --org-zones` answers every
DNS-native draft's questions to `dig` and `kdig` (software nobody here wrote), and
dnspython parses the SVCB, HTTPS, TLSA, TXT, PTR and SRV answers to the published values."""

from __future__ import annotations

import os
import shutil
import subprocess

import dns.message
import dns.query
import dns.rdatatype
import pytest

from tests.sim.sockets.serving import tooldns_serve
from topologies.orgzones import dnsaid_index, dnssd_browse, publications
from topologies.synthetic import synthetic

pytestmark = [pytest.mark.live, pytest.mark.interop]

NS_ARGS = dict(n_tools=300, branching=3, depth=2, seed=7, n_orgs=1)
CLI_ARGS = ["--tools", "300", "--branching", "3", "--depth", "2", "--seed", "7", "--orgs", "1"]
PORT = 20000 + (os.getpid() + 7) % 20000
DIG, KDIG = shutil.which("dig"), shutil.which("kdig")
needs = pytest.mark.skipif((DIG is None or KDIG is None) and not os.environ.get("CI"),
                           reason="dig/kdig not installed (bind9-dnsutils, knot-dnsutils)")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    manifest = tmp_path_factory.mktemp("serve") / "manifest.json"
    with tooldns_serve([*CLI_ARGS, "--org-zones", "--port", str(PORT), "--duration", "300"],
                       manifest) as served_manifest:
        ns = synthetic(**NS_ARGS)
        yield served_manifest, ns, publications(ns)


def _at(manifest: dict, zone: str) -> str:
    return next(m["address"] for m in manifest["servers"] if m["zone"] == zone)


def _host_server(manifest: dict, domain: str) -> str:
    """The hosting server of an organisation: the TLD's referral names it (glue)."""
    q = dns.message.make_query(domain, "NS")
    r = dns.query.udp(q, _at(manifest, "example."), port=PORT, timeout=3)
    return str(r.additional[0][0])


def _ask(server: str, name: str, rtype: str) -> dns.message.Message:
    r = dns.query.udp(dns.message.make_query(name, rtype), server, port=PORT, timeout=3)
    if r.flags & dns.flags.TC:
        r = dns.query.tcp(dns.message.make_query(name, rtype), server, port=PORT, timeout=3)
    return r


@needs
def test_every_drafts_records_read_by_dig_kdig_and_dnspython(served) -> None:
    manifest, _ns, pubs = served
    p = next(p for p in pubs.values() if p.service == "mcp")
    server = _host_server(manifest, p.domain)
    questions = [(p.host, "SVCB"), (p.host, "HTTPS"), (p.host, "A"),
                 (f"_ans.{p.host}", "TXT"), (f"_{p.port}._tcp.{p.host}", "TLSA"),
                 (f"_ans-badge.{p.host}", "TXT"), (f"_agent.{p.host}", "SVCB"),
                 (f"_agent.{p.host}", "TXT"), (f"_agent._mcp.{p.host}", "TXT"),
                 (dnsaid_index(p.domain), "TXT"), (dnssd_browse(p.domain, "mcp"), "PTR"),
                 (p.dnssd_instance, "SRV")]
    for name, rtype in questions:
        for tool in (DIG, KDIG):
            assert tool is not None
            out = subprocess.run([tool, f"@{server}", "-p", str(PORT), "+norec", "+tcp",
                                  name, rtype], capture_output=True, text=True, timeout=30)
            assert out.returncode == 0 and "NOERROR" in out.stdout, (tool, name, out.stdout)
            assert rtype in out.stdout.split("ANSWER SECTION")[1], (tool, name, rtype)
        answer = _ask(server, name, rtype).answer
        assert answer and answer[0].rdtype == dns.rdatatype.from_text(rtype)
    svcb = _ask(server, f"_agent.{p.host}", "SVCB")
    (rd,) = svcb.answer[0]
    assert str(rd.target) == p.host and rd.params[3].port == p.port
    assert rd.params[65481].value == b"mcp"  # DN-ANR's protocols key
    assert str(svcb.additional[0][0]) == p.address  # the target's A rides along
    (txt,) = _ask(server, f"_agent._mcp.{p.host}", "TXT").answer[0]
    assert b"".join(txt.strings).startswith(b"v=aid1;u=https://")
    ptrs = {str(r.target) for r in _ask(server, dnssd_browse(p.domain, "mcp"), "PTR").answer[0]}
    assert p.dnssd_instance in ptrs
    assert ptrs == {q.dnssd_instance for q in pubs.values()
                    if q.domain == p.domain and q.service == "mcp"}


@needs
def test_the_root_delegates_example_to_its_server(served) -> None:
    manifest, _, pubs = served
    p = next(iter(pubs.values()))
    r = _ask(_at(manifest, "."), p.host, "A")
    assert [str(rr.name) for rr in r.authority] == ["example."]
