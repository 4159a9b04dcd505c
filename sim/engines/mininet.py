"""Mininet engine: the plan's nodes on Mininet hosts joined by the scenario's network graph.

* **Hosts.** One host per graph site that has placed nodes (``engine_options.mininet.hosts:
  site``, the default) or one per node (``node``). Each host runs a host agent
  (:mod:`sim.engines.hostagent`, started with the host's ``popen``) serving its nodes with the live
  engine's adapters; results come back as :class:`sim.engines.base.EngineOutput` pieces and
  are folded into one with :func:`sim.engines.base.merge_outputs`, as every engine's.
* **Addresses.** Nodes keep their 127.x addresses, so every message is byte for byte what
  the other engines exchange: each host carries its nodes' addresses on its interface, with
  ``route_localnet`` set and 127.0.0.0/8 routed over the interface (loopback keeps only
  127.0.0.1). These addresses exist only inside the run's own network namespaces.
* **Links.** One ``LinuxBridge`` switch per graph node (no controller), switch-to-switch
  links along the graph's edges (a minimum spanning tree by mean delay, since a bridged
  network must be loop-free: a cyclic graph loses its longer edges, with a warning), each
  host on its site's switch. With the kernel's ``netem`` qdisc links are ``TCLink`` with the
  edge's delay (a varying one as a netem table of its own quantiles, sim.engines.netemtable),
  loss and bandwidth, and the adapters only count
  packets; without it (this machine) links are plain and the adapters emulate delay and
  loss in user space from the path model, as on the live engine, with a warning.
* **Capture.** ``tooldns run --capture`` (:attr:`RunPlan.capture`) runs ``tcpdump`` in every
  host's namespace on the host's link (``-Q out``) and on its loopback (between two nodes of
  one host), so each packet is recorded once, by its sender's host; the runner merges the
  hosts' files into the run's ``capture.pcap`` and attributes packets to queries as on the
  live engine. ``engine_options.mininet.pcap_dir`` keeps, in addition, one pcap per host
  interface (both directions) there.
* **Everything the live engine runs** — HTTP registries (replicas on the registry's site),
  DNS over TLS, fault schedules (applied by each sending node's adapter from the run's
  fault plan, as on live; a down registry replica closes its listener), churn, sessions
  and the dense scorer (the driver ships the intents' vectors: no host loads the model) —
  since every host serves its part with :class:`sim.engines.nodehost.NodeHost`.

Needs root, Mininet's Python package (Debian's ``mininet``; it lives in the system Python's
``dist-packages``, which is found even from another interpreter), ``mnexec`` and
``brctl``. Everything the run creates is removed when it ends, also after a failure.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import pickle
import select
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import networkx as nx

from sim.build.runplan import RING_KIB, RunPlan, StubSink
from sim.engines.base import EngineOutput, merge_outputs
from sim.engines.netemtable import set_distribution
from sim.engines.nodehost import (
    HostPart,
    plan_addresses,
    split_plan,
)
from sim.engines.vectors import ship_intent_vectors
from sim.scenario import MininetSpec

ROOT = Path(__file__).resolve().parents[2]  # the checkout: host agents import its code
DIST_PACKAGES = ("/usr/lib/python3/dist-packages", "/usr/local/lib/python3/dist-packages")
START_MARGIN = 0.05
COMMAND_TIMEOUT = 120.0  # seconds for one phase on every host (replay: plus the drain)
#: how much longer a phase may take on an emulated CPU: a TCG guest of ``tooldns run --vm``
#: (sim.vm.job exports TOOLDNS_VM=<accelerator>) runs Python ~15x slower, more on a busy host
EMULATED_CPU_FACTOR = 15.0


def command_timeout() -> float:
    """Seconds one phase may take on every host here (see :data:`EMULATED_CPU_FACTOR`)."""
    emulated = os.environ.get("TOOLDNS_VM") == "tcg"
    return COMMAND_TIMEOUT * (EMULATED_CPU_FACTOR if emulated else 1.0)


class NetemWarning(RuntimeWarning):
    """Link delay and loss fall back to user-space emulation (no netem qdisc)."""


def import_mininet() -> Any:
    """Import ``mininet``; from the system Python's dist-packages if not installed here."""
    try:
        import mininet.net
    except ImportError:
        for base in DIST_PACKAGES:
            init = Path(base, "mininet", "__init__.py")
            if init.exists():
                spec = importlib.util.spec_from_file_location(
                    "mininet", init, submodule_search_locations=[str(init.parent)])
                assert spec is not None and spec.loader is not None
                module = importlib.util.module_from_spec(spec)
                sys.modules["mininet"] = module
                spec.loader.exec_module(module)
                break
        import mininet.net
    import mininet

    return mininet


def unavailable() -> str | None:
    """Why this machine cannot run the engine, or None if it can."""
    if os.geteuid() != 0:
        return "the Mininet engine needs root (network namespaces)"
    for tool in ("mnexec", "brctl", "ip", "tc"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (bash .ci/setup installs mininet, bridge-utils)"
    try:
        import_mininet()
    except ImportError:
        return "Mininet's Python package is not installed (apt-get install mininet)"
    return None


def has_netem() -> bool:
    """Whether this kernel offers the netem qdisc (tried on a scratch dummy interface)."""
    name = f"tdnsnetem{os.getpid() % 100000}"
    if subprocess.run(["ip", "link", "add", name, "type", "dummy"],
                      capture_output=True).returncode != 0:
        return False
    try:
        return subprocess.run(["tc", "qdisc", "add", "dev", name, "root", "netem", "delay",
                               "1ms"], capture_output=True).returncode == 0
    finally:
        subprocess.run(["ip", "link", "del", name], capture_output=True)


# ------------------------------------------------------------------------ layout


def host_groups(plan: RunPlan, spec: MininetSpec) -> list[tuple[str, list[str], Any]]:
    """(host name, node addresses, graph node) per host, in a stable order."""
    path = plan.path
    sites: dict[Any, list[str]] = {}
    for ip in plan_addresses(plan):
        sites.setdefault(path.node_of(plan.role_of[ip]), []).append(ip)
    out: list[tuple[str, list[str], Any]] = []
    for site, ips in sorted(sites.items(), key=lambda kv: str(kv[0])):
        for chunk in ([ips] if spec.hosts == "site" else [[ip] for ip in ips]):
            out.append((f"h{len(out) + 1}", chunk, site))
    return out


def switch_links(graph: nx.Graph) -> tuple[list[tuple[Any, Any, Any]], int]:
    """Loop-free switch links: the graph's edges if it is a forest, else a minimum spanning
    tree by mean link delay; returns (u, v, LinkSpec) triples and the edges dropped."""
    tree = nx.minimum_spanning_tree(graph, weight=lambda u, v, d: d["link"].delay.mean)
    edges = sorted(((u, v, d["link"]) for u, v, d in tree.edges(data=True)),
                   key=lambda e: (str(e[0]), str(e[1])))
    return edges, graph.number_of_edges() - tree.number_of_edges()


def _link_params(link: Any) -> dict[str, Any]:
    """TCLink parameters (delay, jitter, loss %, bandwidth Mbit/s) of a LinkSpec."""
    params: dict[str, Any] = {"delay": f"{link.delay.mean * 1000:.3f}ms"}
    if not link.delay.is_constant and link.delay.std:  # the table: sim.engines.netemtable
        params["jitter"] = f"{link.delay.std * 1000:.3f}ms"
    if link.loss:
        params["loss"] = round(link.loss * 100, 6)
    if link.bandwidth:
        params["bw"] = link.bandwidth / 1e6
    return params


# ------------------------------------------------------------------------ running


class _Agents:
    """The host agents' control pipes: one command to all, then one answer from each."""

    def __init__(self, procs: dict[str, subprocess.Popen]) -> None:
        self.procs = procs

    def call(self, command: str | dict[str, str], timeout: float | None = None) -> dict:
        for name, proc in self.procs.items():
            line = command if isinstance(command, str) else command[name]
            assert proc.stdin is not None
            try:
                proc.stdin.write((line + "\n").encode())
                proc.stdin.flush()
            except OSError:  # a broken pipe: the agent is gone
                raise RuntimeError(f"mininet host {name}: no answer to {command!r} (agent "
                                   f"exited with status {proc.poll()})") from None
        answers = {}
        deadline = time.monotonic() + (command_timeout() if timeout is None else timeout)
        for name, proc in self.procs.items():
            assert proc.stdout is not None
            left = deadline - time.monotonic()
            ready, _, _ = select.select([proc.stdout], [], [], max(0.0, left))
            reply = proc.stdout.readline() if ready else b""
            if not reply:
                raise RuntimeError(f"mininet host {name}: no answer to {command!r} "
                                   f"({'timed out' if not ready else 'agent exited'})")
            answer = json.loads(reply)
            if "error" in answer:
                raise RuntimeError(f"mininet host {name}: {answer['error']}")
            answers[name] = answer["ok"]
        return answers

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
            with contextlib.suppress(Exception):
                proc.wait(timeout=5)


def run_mininet(plan: RunPlan, sink: StubSink | None = None) -> EngineOutput:
    """Run one scheme of ``plan`` on Mininet hosts (the catalogue's entry point); the hosts'
    pieces are folded at the end, every discovery told to ``sink``."""
    options = plan.engine_options or {}
    spec = options.get("mininet")
    spec = spec if isinstance(spec, MininetSpec) else MininetSpec.model_validate(spec or {})
    reason = unavailable()
    if reason is not None:
        raise RuntimeError(f"mininet engine: {reason}")
    netem = spec.netem != "off" and has_netem()
    if spec.netem == "require" and not netem:
        raise RuntimeError("mininet engine: engine_options.mininet.netem is require, but this "
                           "kernel has no netem qdisc (tooldns run --vm boots one that has)")
    if not netem:
        warnings.warn("mininet engine: no netem qdisc on this kernel (or netem: off): links "
                      "carry no delay or loss; the adapters emulate them in user space from "
                      "the path model, as on the live engine. A kernel with sch_netem (the "
                      "Vagrant VM) gives TCLink delays.", NetemWarning, stacklevel=2)
    if plan.stock is not None:  # records at the end: walks come from the servers' logs
        sink = None
    groups = host_groups(plan, spec)
    ship_intent_vectors(plan)  # dense: the hosts look vectors up, none loads the model
    parts = split_plan(plan, [(name, ips) for name, ips, _ in groups], emulate=not netem)
    with tempfile.TemporaryDirectory(prefix="tooldns-mininet-") as tmp:
        out = _run(plan, spec, groups, parts, netem, Path(tmp), sink)
    out.link_emulation = "netem" if netem else "user-space"
    return out


def _run(plan: RunPlan, spec: MininetSpec, groups: list[tuple[str, list[str], Any]],
         parts: list[HostPart], netem: bool, tmp: Path, sink: StubSink | None
         ) -> EngineOutput:
    import_mininet()
    from mininet.link import Link, TCLink
    from mininet.log import setLogLevel
    from mininet.net import Mininet
    from mininet.node import Host
    from mininet.nodelib import LinuxBridge

    setLogLevel("error")
    tag = f"mn{os.getpid() % 1000:03d}"  # names of this run: h1 -> mn123h1, s2 -> mn123s2
    graph = plan.path.graph
    edges, dropped = switch_links(graph)
    if dropped and netem:
        warnings.warn(f"mininet engine: the graph has cycles; {dropped} edges were left out "
                      f"of the bridged network (TCLink delays follow a spanning tree)",
                      NetemWarning, stacklevel=3)
    net = Mininet(topo=None, switch=LinuxBridge, controller=None, host=Host,
                  link=TCLink if netem else Link, build=False, autoSetMacs=True,
                  waitConnected=False)
    agents = _Agents({})
    pcaps: list[subprocess.Popen] = []
    captured: list[str] = []
    try:
        hosts = _build_network(net, tag, graph, edges, groups, netem, tmp)
        for (name, ips, _), part in zip(groups, parts, strict=True):
            intf = _configure_host(hosts[name], name, ips)
            (tmp / f"{name}.part").write_bytes(pickle.dumps(part))
            if spec.pcap_dir:
                Path(spec.pcap_dir).mkdir(parents=True, exist_ok=True)
                pcaps.append(_tcpdump(hosts[name], ["-i", intf], "udp or tcp",
                                      Path(spec.pcap_dir) / f"{name}.pcap"))
            if plan.capture is not None:  # each packet once, at its sender
                folder = Path(plan.capture.directory)
                folder.mkdir(parents=True, exist_ok=True)
                # what leaves on the host's link, and what stays on its loopback (libpcap's
                # "any" device skips loopback's outgoing copies, so lo is a capture of its own)
                for where, file in ((["-i", intf, "-Q", "out"], f"{name}-link.pcap"),
                                    (["-i", "lo"], f"{name}-lo.pcap")):
                    captured.append(str(folder / file))
                    pcaps.append(_tcpdump(hosts[name], where, plan.capture.bpf,
                                          Path(captured[-1])))
        if pcaps:
            time.sleep(0.5)  # tcpdump needs a moment before it captures
        _start_agents(agents, hosts, [name for name, _, _ in groups], tmp)
        origin = _drive(agents, plan, [name for name, _, _ in groups], tmp)
        pieces: list[EngineOutput] = [pickle.loads((tmp / f"{name}.out").read_bytes())
                                      for name, _, _ in groups]
    finally:
        agents.stop()
        if pcaps:
            time.sleep(0.2)  # the last packets reach tcpdump's file before it is stopped
        for proc in pcaps:
            proc.terminate()
            with contextlib.suppress(Exception):
                proc.wait(timeout=5)
        _stop(net, tag)
    out = merge_outputs(pieces, sink, origin)
    out.pcaps = captured
    if plan.stock is not None:  # the servers' logs of the binary, from every host
        from sim.engines.stock import attribute

        attribute(out, plan.agent_order, plan.resolvers)
    return out


def _tcpdump(host: Any, where: list[str], bpf: str, path: Path) -> subprocess.Popen:
    """``tcpdump`` in ``host``'s namespace, writing every packet to ``path`` at once."""
    return host.popen(["tcpdump", *where, "-U", "--immediate-mode", "-n", "-s", "1024", "-B",
                       str(RING_KIB), "-w", str(path), bpf],
                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _build_network(net: Any, tag: str, graph: nx.Graph, edges: list[tuple[Any, Any, Any]],
                   groups: list[tuple[str, list[str], Any]], netem: bool,
                   tmp: Path) -> dict[str, Any]:
    """One switch per graph node, the switch links, one host per group on its site's
    switch; builds and starts the network and returns the hosts by name. Links whose delay
    varies get the model's own netem table (:mod:`sim.engines.netemtable`) in both
    directions."""
    switch = {}
    for i, node in enumerate(sorted(graph.nodes, key=str)):
        switch[node] = net.addSwitch(f"{tag}s{i + 1}")
    varying = []
    for u, v, link in edges:
        params = _link_params(link) if netem else {}
        made = net.addLink(switch[u], switch[v], **params)
        if "jitter" in params:
            varying.append((made, link))
    hosts = {}
    for name, _, site in groups:
        hosts[name] = net.addHost(f"{tag}{name}", ip=None)
        net.addLink(hosts[name], switch[site])
    net.build()
    net.start()
    for made, link in varying:
        for intf in (made.intf1, made.intf2):
            set_distribution(intf.name, link, tmp)
    return hosts


def _configure_host(host: Any, name: str, ips: list[str]) -> str:
    """Put the host's node addresses on its interface and route 127.0.0.0/8 over it
    (see the module doc); returns the interface name."""
    intf = host.defaultIntf().name
    script = [f"ip link set {intf} up", "ip link set lo up",
              "ip addr flush dev lo", "ip addr add 127.0.0.1/32 dev lo",
              "sysctl -qw net.ipv4.conf.all.route_localnet=1",
              f"sysctl -qw net.ipv4.conf.{intf}.route_localnet=1",
              *(f"ip addr add {ip}/32 dev {intf}" for ip in ips),
              f"ip route replace 127.0.0.0/8 dev {intf}"]
    host.cmd(" && ".join(script))
    got = host.cmd(f"ip -o -4 addr show dev {intf}")
    missing = [ip for ip in ips if f" {ip}/32" not in got]
    if missing:
        raise RuntimeError(f"mininet host {name}: could not add {missing[:3]}")
    return str(intf)


def _start_agents(agents: _Agents, hosts: dict[str, Any], names: list[str], tmp: Path) -> None:
    """A host agent per host, on the part pickled for it (stderr kept in ``tmp``)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    for name in names:
        err = open(tmp / f"{name}.err", "wb")  # noqa: SIM115 (closed with the process)
        agents.procs[name] = hosts[name].popen(
            [sys.executable, "-m", "sim.engines.hostagent", str(tmp / f"{name}.part")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, cwd=str(ROOT),
            env=env)


def _drive(agents: _Agents, plan: RunPlan, names: list[str], tmp: Path) -> float:
    """Start, warm, replay and finish on every host (each writes its piece into ``tmp``);
    returns the wall-clock origin of node time. A failure carries the agents' stderr."""
    try:
        agents.call("start")
        origin = time.time()
        agents.call(f"origin {origin!r}")
        agents.call("warm")
        last = max((j.at or 0.0 for j in plan.jobs), default=0.0)
        agents.call(f"replay {time.time() + START_MARGIN!r}",
                    timeout=command_timeout() + last + 30.0)
        agents.call("hangup")
        agents.call({name: f"finish {tmp / (name + '.out')}" for name in names})
    except RuntimeError as exc:
        tails = {name: (tmp / f"{name}.err").read_text(errors="replace")[-2000:]
                 for name in names}
        detail = "; ".join(f"{n}: {t.strip()}" for n, t in tails.items() if t.strip())
        raise RuntimeError(f"{exc}{' — stderr: ' + detail if detail else ''}") from None
    return origin


def _stop(net: Any, tag: str) -> None:
    """``net.stop()``, then remove any interface or bridge of this run still left."""
    with contextlib.suppress(Exception):
        net.stop()
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    for line in links.splitlines():
        name = line.split(":")[1].strip().split("@")[0] if ":" in line else ""
        if name.startswith(tag):
            subprocess.run(["ip", "link", "del", name], capture_output=True)
