"""The Mininet engine: hosts in network namespaces, bridged links, same records as simpy."""

from __future__ import annotations

import os
import subprocess
import warnings
from collections import Counter
from pathlib import Path

import networkx as nx
import pytest

from sim.engines.mininet import ROOT, NetemWarning, host_groups, switch_links
from sim.run.runner import run_scenario
from sim.scenario import MininetSpec
from tests.sim.engines.cases import assert_agrees, first_plan, small, two_schemes
from topologies.links import DelayModel, LinkSpec


def _leftovers() -> list[str]:
    """Interfaces or bridges a run of this process could have left behind."""
    tag = f"mn{os.getpid() % 1000:03d}"
    text = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    return [line for line in text.splitlines() if f": {tag}" in line]


def test_hosts_per_site_and_per_node() -> None:
    plan = first_plan(small())
    sites = host_groups(plan, MininetSpec(hosts="site"))
    nodes = host_groups(plan, MininetSpec(hosts="node"))
    everything = sorted([*plan.hierarchy.servers, *plan.resolvers, *plan.agents])
    for groups in (sites, nodes):
        assert sorted(ip for _, ips, _ in groups for ip in ips) == everything
        assert len({name for name, _, _ in groups}) == len(groups)
    assert len(nodes) == len(everything)
    assert len(sites) <= plan.path.graph.number_of_nodes() < len(nodes)  # several per host
    for _, ips, site in sites:
        assert {plan.path.node_of(plan.role_of[ip]) for ip in ips} == {site}


def test_host_agents_run_this_checkout() -> None:
    """Host agents start with the checkout on PYTHONPATH and as their folder, so they run
    the driver's code (not another checkout an editable install points at)."""
    assert (ROOT / "sim" / "engines" / "hostagent.py").is_file()
    assert (ROOT / "pyproject.toml").is_file()


def test_switch_links_are_loop_free() -> None:
    link = LinkSpec(delay=DelayModel(dist="constant", mean=0.01))
    ring = nx.cycle_graph(5)
    nx.set_edge_attributes(ring, link, "link")
    edges, dropped = switch_links(ring)
    assert len(edges) == 4 and dropped == 1
    assert nx.is_tree(nx.Graph([(u, v) for u, v, _ in edges]))
    star = nx.star_graph(4)
    nx.set_edge_attributes(star, link, "link")
    assert switch_links(star)[1] == 0


@pytest.mark.mininet
@pytest.mark.live
def test_mininet_agrees_with_simpy(mininet_ok, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    sc = two_schemes(small())
    sim = run_scenario(sc, engine="simpy", out_dir=tmp_path / "sim").records
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mn = run_scenario(sc, engine="mininet", out_dir=tmp_path / "mn", live_port=53)
    from sim.engines.mininet import has_netem

    if not has_netem():  # this machine: the fall-back is announced, not silent
        assert any(issubclass(w.category, NetemWarning) for w in caught)
    assert set(mn.records.engine) == {"mininet"}
    assert_agrees(sim, mn.records, lambda: run_scenario(
        sc, engine="mininet", write=False, live_port=53).records)
    servers = mn.load[mn.load.role == "server"]
    assert servers.semantic.sum() > 0
    assert not _leftovers()


@pytest.mark.mininet
@pytest.mark.live
def test_capture_on_host_interfaces(mininet_ok, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from scapy.all import IP, UDP, rdpcap

    pcaps = tmp_path / "pcap"
    sc = small(**{"schemes": [{"name": "tooldns", "k": 3}], "workload.queries": 4,
                  "network.processing.model": "fixed",
                  "engine_options.mininet.pcap_dir": str(pcaps)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NetemWarning)
        result = run_scenario(sc, engine="mininet", write=False, live_port=53)
    assert result.records["success"].all()
    plan = first_plan(sc)
    files = sorted(pcaps.glob("*.pcap"))
    assert len(files) == len(host_groups(plan, sc.engine_options.mininet))
    nodes = {*plan.hierarchy.servers, *plan.resolvers, *plan.agents}
    dns = [p for f in files for p in rdpcap(str(f)) if UDP in p and 53 in (p[UDP].sport,
                                                                             p[UDP].dport)]
    assert dns, "no DNS packet captured on any host interface"
    assert {p[IP].src for p in dns} <= nodes and {p[IP].dst for p in dns} <= nodes
    # every packet crossing a wire is seen leaving one host and entering another
    copies = Counter((p[IP].src, p[IP].dst, p[IP].id, p[UDP].sport, p[UDP].dport) for p in dns)
    assert set(copies.values()) == {2}, [k for k, n in copies.items() if n != 2]
    # and they are ToolDNS queries: the intent option is on the wire
    code = plan.hierarchy.option_code.to_bytes(2, "big")
    assert any(code in bytes(p[UDP].payload) for p in dns)
    assert not _leftovers()


@pytest.mark.mininet
def test_a_failing_run_leaves_nothing_behind(mininet_ok,  # type: ignore[no-untyped-def]
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil
    import sys

    # every host agent dies before answering "start" (its interpreter is `false`)
    monkeypatch.setattr(sys, "executable", shutil.which("false"))
    sc = small(**{"schemes": [{"name": "tooldns", "k": 3}], "workload.queries": 2,
                  "network.processing.model": "fixed"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NetemWarning)
        with pytest.raises(RuntimeError, match=r"mininet host h\d+: no answer to 'start'"):
            run_scenario(sc, engine="mininet", write=False, live_port=53)
    assert not _leftovers()
    tag = f"mn{os.getpid() % 1000:03d}"
    shells = subprocess.run(["pgrep", "-f", f"mininet:{tag}"], capture_output=True, text=True)
    assert shells.stdout.strip() == ""  # the hosts' shells are gone with their namespaces
