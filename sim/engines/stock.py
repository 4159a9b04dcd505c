"""Stock recursors as a scheme's resolver on the live and Mininet engines
(``schemes[].resolver``).

On live the run is in a network namespace of its own
(:func:`sim.sockets.netns.private_network`, entered by the runner); on Mininet each host
has one. The servers listen on port 53 at their glue addresses. At each of the plan's
resolver addresses (on Mininet: on the resolver's host) :class:`StockResolvers` starts
the binary (Unbound, BIND, Knot Resolver or PowerDNS Recursor, configured as ``tooldns
recursors`` configures it: :mod:`sim.interop.resolvers`, the hierarchy's root as its only
hint, validating with the hierarchy's root DS when the scheme validates) instead of the
project's resolver; the agents ask it as they would ask ours.

The binary sends unshaped, so where the adapters emulate the links its packets get their
link's one-way delay (or loss) where they arrive: at the servers
(:class:`sim.sockets.server.ServerEndpoint`, ``external``) and the agents
(:class:`sim.sockets.node.NodeEndpoint`). The servers log every exchange with it
(:class:`sim.sockets.wirelog.WireExchange`). Once every host's piece is in,
:func:`attribute` gives each exchange to the agent query that caused it
(:func:`wire_walks`), for the same per-query records as the project's resolver
(exchanges, round trips, bytes, packets, servers contacted): an exchange belongs to a stub
query the binary was working on when it was sent (received, not yet answered) whose name
shares the most trailing labels with the exchange's (QNAME minimisation asks suffixes, a
name server's address shares its zone); among equals, one with no exchange of its own in
flight (a recursor walks for one query an exchange at a time), then the one asked first.
Under overlap the attribution is a reading, not a certainty: when a query waits for an
answer another one's exchange fetches, that exchange (and its round trip) counts for the
other; the means per discovery are what the model is compared on. Exchanges while no
query was open (PowerDNS Recursor's priming at start) are counted as unattributed. A
capture checks the records byte for byte (``tooldns run --capture``). A ``down`` fault on
a resolver kills its binary (SIGKILL) when it begins and starts it again, with an empty
cache, when it ends; meanwhile the adapters drop the packets to and from its address as
for any crashed node.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dnslib import QTYPE, DNSRecord

from nodes.agent.stub import StubResult
from nodes.registry.client import RegistryResult
from nodes.resolver.types import Discovery, DiscoveryResult, Step, rcode_text
from sim.build.runplan import StockSetup
from sim.build.workload import Job
from sim.engines.base import EngineOutput
from sim.interop.process import Running
from sim.interop.resolvers import SPECS, Setup
from sim.sockets.wirelog import WireExchange

START_TIMEOUT = 20.0  # seconds a binary has to answer on its address


class StockError(RuntimeError):
    """A binary is not installed, or did not start (its log's tail in the message)."""


def _answers(address: str, port: int) -> bool:
    """Whether something answers ``version.bind. CH TXT`` there (an error answer too: it
    listens; the class keeps a recursor from asking the hierarchy)."""
    q = DNSRecord.question("version.bind.", "TXT", "CH")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(0.3)
        try:
            s.sendto(q.pack(), (address, port))
            data, _ = s.recvfrom(4096)
        except OSError:
            return False
    return len(data) >= 12 and data[:2] == q.pack()[:2]


@dataclass
class StockResolvers:
    """The binary of ``setup`` serving each of ``addresses`` on ``port``; logs and
    configuration in a temporary folder kept for the run (its path in :attr:`workdir`)."""

    setup: StockSetup
    addresses: Sequence[str]
    port: int
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="tooldns-stock-")))
    running: list[Running] = field(default_factory=list)  # every process started
    version: str = ""
    by_address: dict[str, Running] = field(default_factory=dict)  # the current one
    setups: dict[str, Setup] = field(default_factory=dict)
    crashes: int = 0
    restarts: int = 0

    async def start(self) -> None:
        spec = SPECS[self.setup.binary]
        if spec.executable() is None:
            raise StockError(f"{spec.binary} is not installed (bash .ci/setup installs it)")
        self.version = spec.version()
        for ip in self.addresses:  # BIND listens only on an interface's own addresses
            shown = subprocess.run(["ip", "-o", "addr", "show", "to", f"{ip}/32"],
                                   capture_output=True, text=True)
            if not shown.stdout.strip():  # live: loopback; Mininet: the host's interface
                subprocess.run(["ip", "addr", "add", f"{ip}/32", "dev", "lo"],
                               capture_output=True)
        for i, ip in enumerate(self.addresses):
            self.setups[ip] = Setup(self.workdir / f"{spec.name}-{i}", ip,
                                    self.setup.root_hints, self.setup.trust_anchor,
                                    port=self.port, cache_bytes=self.setup.cache_bytes)
            self._launch(ip)
        deadline = time.monotonic() + START_TIMEOUT
        for run, ip in zip(self.running, self.addresses, strict=True):
            while not await asyncio.to_thread(_answers, ip, self.port):
                if run.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise StockError(f"{spec.name} did not start on {ip}:{self.port} "
                                     f"(log {run.log}):\n{run.tail()}")
                await asyncio.sleep(0.05)

    def _launch(self, ip: str) -> None:
        setup = self.setups[ip]
        run = Running(SPECS[self.setup.binary], setup, setup.workdir.with_suffix(".log"))
        self.running.append(run)
        self.by_address[ip] = run

    def crash(self, ip: str) -> None:
        """A ``down`` fault begins: the process at ``ip`` is killed (SIGKILL: its cache and
        its work in progress are lost)."""
        run = self.by_address.get(ip)
        if run is not None and run.proc.poll() is None:
            run.proc.kill()
            self.crashes += 1

    def restart(self, ip: str) -> None:
        """The fault ends: the binary starts again at ``ip``, with an empty cache (the
        agents' retries reach it once it listens)."""
        run = self.by_address.get(ip)
        if run is not None and run.proc.poll() is None:
            return  # not crashed (overlapping faults): still serving
        if run is not None:
            run.stop()
        self._launch(ip)
        self.restarts += 1

    def stop(self) -> None:
        for run in self.running:
            run.stop()

    def report(self) -> dict:
        """The replay summary's ``stock_resolver`` block (:func:`attribute` completes it)."""
        return {"binary": self.setup.binary, "version": self.version,
                "addresses": list(self.addresses), "crashes": self.crashes,
                "restarts": self.restarts, "logs": str(self.workdir)}


def attribute(out: EngineOutput, agent_order: Sequence[str], binaries: Iterable[str]) -> None:
    """Once every host's piece is in ``out``: the binaries' walks (:func:`wire_walks`) join
    its walks, and its ``stock`` block says how many exchanges there were and how many no
    query could claim."""
    walks, unattributed = wire_walks(out.wire, out.stubs, agent_order, set(binaries))
    out.add_walks(walks)
    out.stock = {**(out.stock or {}), "exchanges": len(out.wire),
                 "attributed_queries": len(walks), "unattributed_exchanges": unattributed}
    out.wire = []


def _labels(name: str) -> list[str]:
    return [x for x in name.lower().rstrip(".").split(".") if x]


def _shared(a: list[str], b: list[str]) -> int:
    """Trailing labels ``a`` and ``b`` have in common."""
    n = 0
    for x, y in zip(reversed(a), reversed(b), strict=False):
        if x != y:
            break
        n += 1
    return n


@dataclass
class _Open:
    """One stub query the binary worked on: who asked, with which ID and name, when."""

    agent: str
    step: Step
    end: float
    labels: list[str]
    request: Discovery
    steps: list[Step] = field(default_factory=list)
    busy: float = 0.0  # when its last exchange so far was answered


def _question(wire: bytes) -> tuple[int, str, str] | None:
    try:
        msg = DNSRecord.parse(wire)
    except Exception:  # not DNS: the server answered FORMERR or dropped it
        return None
    if not msg.questions:
        return msg.header.id, "", ""
    q = msg.q
    return msg.header.id, str(q.qname).lower(), QTYPE.get(q.qtype, str(q.qtype))


def _rounds(steps: list[Step]) -> int:
    """Sequential rounds: the exchanges' intervals merged where they overlap."""
    rounds, end = 0, -1.0
    for st in sorted(steps, key=lambda s: s.sent):
        if st.sent >= end:
            rounds += 1
            end = st.sent + (st.rtt or 0.0)
        else:
            end = max(end, st.sent + (st.rtt or 0.0))
    return rounds


def wire_walks(exchanges: Iterable[WireExchange],
               stubs: Iterable[tuple[Job, StubResult | RegistryResult]],
               agent_order: Sequence[str],
               binaries: set[str]) -> tuple[list[DiscoveryResult], int]:
    """The walks the binaries made, one per stub query (see the module docstring), as the
    project's resolver reports its own (``client`` = the agent's address and the query's
    ID); and how many exchanges no open query could claim."""
    opened: list[_Open] = []
    for job, stub in stubs:
        if not isinstance(stub, StubResult):  # an HTTP registry's: no resolver
            continue
        agent = agent_order[job.agent]
        for st in stub.steps:
            if st.server[0] not in binaries:
                continue
            end = st.sent + st.rtt if st.rtt is not None else (stub.finished or float("inf"))
            opened.append(_Open(agent, st, end, _labels(st.qname), stub.request))
    opened.sort(key=lambda o: o.step.sent)
    unattributed = 0
    for ex in sorted(exchanges, key=lambda e: e.sent):
        q = _question(ex.query)
        if q is None or ex.client[0] not in binaries:
            unattributed += 1
            continue
        qid, qname, qtype = q
        labels = _labels(qname)
        best: _Open | None = None
        rank = (-1, False)
        for o in opened:
            if o.step.sent > ex.sent:
                break
            if o.end < ex.sent or o.step.server[0] != ex.client[0]:
                continue
            r = (_shared(labels, o.labels), o.busy <= ex.sent)
            if r > rank:  # ties: the first asked (earlier in the list) keeps it
                best, rank = o, r
        if best is None:
            unattributed += 1
            continue
        best.busy = max(best.busy, ex.sent + (ex.rtt or 0.0))
        outcome = "timeout" if ex.rtt is None else (
            rcode_text(ex.rcode) + (" TC" if ex.tc else ""))
        best.steps.append(Step(qname, qtype, (ex.server, 53), ex.transport, ex.sent, ex.rtt,
                               len(ex.query), ex.reply if ex.rtt is not None else 0,
                               outcome, False, qid))
    walks = []
    for o in opened:
        res = DiscoveryResult(o.request, o.step.sent, finished=o.end if o.end != float("inf")
                              else o.step.sent, steps=o.steps, rounds=_rounds(o.steps),
                              client=((o.agent, 0), o.step.qid))
        if not o.steps:
            res.cache["stock_no_upstream"] += 1  # answered from the binary's cache
        walks.append(res)
    return walks, unattributed
