"""What every engine returns (:class:`EngineOutput`), the engine call signature, and the
one fold of partial outputs (:func:`merge_outputs`: a socket engine's processes, a
sharded run's shards).

An output is everything a run observed: finished discoveries (to the runner's sink as they
end, ``on_stub``, or kept), resolver walks, packet and byte counters, the servers' and the
registry's counters, what the faults did, when tool changes were applied, the sessions'
per-job state, captures and timing. The runner reads results from it alone; the plan an
engine was given is left as built.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from nodes.agent.session import JobInfo, SessionAgent
from nodes.agent.stub import StubResult
from nodes.registry.base import Routes
from nodes.registry.client import RegistryResult
from nodes.resolver.types import DiscoveryResult
from sim.build.faults import FaultsSeen
from sim.build.runplan import RunNodes, RunPlan, StubSink
from sim.build.workload import Job
from sim.engines.fidelity import HopTimes
from sim.sockets.wirelog import WireExchange


@dataclass
class EngineOutput:
    """What an engine observed. Finished discoveries go to the sink (``on_stub``) as they
    end; those it does not take, and all of an output built without one (merged pieces),
    stay in ``stubs``. Walks stay in ``walks`` until the record of their discovery is made."""

    stubs: list[tuple[Job, StubResult | RegistryResult]] = field(default_factory=list)
    walks: dict[tuple[str, int], list[DiscoveryResult]] = field(default_factory=dict)
    warmups: list[DiscoveryResult] = field(default_factory=list)
    # address -> counters (ints: packets, bytes, replies; int | float so compiled code keeps
    # the ints as ints, sim.compiled)
    load: dict[str, dict[str, int | float]] = field(default_factory=dict)
    schedule_error: list[float] = field(default_factory=list)  # actual - scheduled send time
    lost: int = 0
    flows: dict[tuple[str, int], int] = field(default_factory=dict)  # live: (ip, port) -> conn
    clock_offset: float = 0.0  # live: wall-clock time minus node time (capture alignment)
    warm_time: float = 0.0
    end_time: float = 0.0
    on_stub: StubSink | None = None  # the runner's sink, if any (the engine's second argument)
    streamed: int = 0  # discoveries the sink took (their records are made)
    # real-time engines: what delayed and dropped packets, "netem" (the kernel's qdisc on
    # Mininet links) or "user-space" (the socket adapters, from the path model); the summary's
    # replay block says it. None in virtual time (the simulation draws delays itself).
    link_emulation: str | None = None
    # packet captures the engine made itself (Mininet: one pcap per host namespace), which
    # the runner merges into the run's capture
    pcaps: list[str] = field(default_factory=list)
    # dense plans split over processes (Ray, Mininet): how often the hosts loaded the
    # sentence model (0 when the shipped vectors covered the run)
    model_loads: int | None = None
    stock: dict | None = None  # stock recursors (sim.engines.stock): binary, exchanges
    # what the servers saw of the stock recursors (sim.engines.stock.attribute turns it into
    # walks once every host's piece is in)
    wire: list[WireExchange] = field(default_factory=list)
    # what the run's nodes counted (EngineOutput.observe): each authoritative server's
    # counters by address, the registry's host and application counters ("server", "app")
    servers: dict[str, Counter[str]] = field(default_factory=dict)
    registry: dict[str, Counter[str]] = field(default_factory=dict)
    faults: FaultsSeen | None = None  # what the fault schedule did (None: no faults)
    churn_applied: dict[int, float] = field(default_factory=dict)  # change -> node time
    sessions: dict[str, dict[int, JobInfo]] = field(default_factory=dict)  # agent -> jobs
    # a calibration pre-run (RunPlan.measure): seconds of node work per node kind
    measured: dict[str, list[float]] = field(default_factory=dict)
    # real-time engines: each hop's time against the model's, each host's CPU share
    # (sim.engines.fidelity); None in virtual time
    hop_times: HopTimes | None = None

    def add_stub(self, job: Job, stub: StubResult | RegistryResult) -> None:
        """A discovery finished: to the sink, or kept (walks of a DNS discovery should be
        added before it, as engines see them: the resolver answers after its walk)."""
        sink = self.on_stub
        if sink is not None and sink.stub(job, stub, self):
            self.streamed += 1
        else:
            self.stubs.append((job, stub))

    def completed(self) -> int:
        """Discoveries finished: taken by the sink or kept."""
        return self.streamed + len(self.stubs)

    def count(self, address: str, key: str, value: float = 1) -> None:
        node = self.load.setdefault(address, {})
        node[key] = node.get(key, 0) + value

    def add_walks(self, results: list[DiscoveryResult]) -> None:
        if not results:
            return
        sink = self.on_stub
        waiting = sink.waiting if sink is not None else None
        for r in results:
            if r.client is None:
                self.warmups.append(r)
            else:
                (ip, _port), qid = r.client
                key = (ip, qid)
                self.walks.setdefault(key, []).append(r)
                if waiting and key in waiting:
                    assert sink is not None
                    sink.walked(key, self)

    def observe(self, nodes: RunNodes, registry_here: bool = True) -> None:
        """Take in what a run's nodes counted once it is over: the servers' counters, the
        registry's (``registry_here``: its replicas ran with these nodes), the faults'
        drops and recoveries, when the tool changes were applied, and the session agents'
        per-job state."""
        for ip, server in nodes.servers.items():
            self.servers[ip] = Counter(server.stats.counts)
        if nodes.registry is not None and registry_here:
            host = nodes.registry.server
            app = host.app
            assert isinstance(app, Routes)  # every registry kind is a Routes app
            self.registry = {"server": Counter(host.stats), "app": Counter(app.stats)}
        if nodes.faults is not None:
            self.faults = nodes.faults.seen()
        self.churn_applied.update(nodes.churn_applied)
        for ip, agent in nodes.agents.items():
            if isinstance(agent, SessionAgent):
                self.sessions[ip] = agent.info

    def absorb(self, piece: EngineOutput) -> None:
        """Fold a partial output in (another process's part, a shard): the sessions' per-job
        state first (a record made as a discovery is fed reads it), walks, discoveries
        (through :meth:`add_stub`: to the sink, if any), then every counter summed, the
        earliest time of each tool change, the faults' views folded
        (:meth:`FaultsSeen.absorb`), the latest warm-up and end."""
        self.sessions.update(piece.sessions)
        self.add_walks(piece.warmups)
        for walks in piece.walks.values():
            self.add_walks(walks)
        for job, stub in piece.stubs:
            self.add_stub(job, stub)
        for ip, counters in piece.load.items():
            for k, v in counters.items():
                self.count(ip, k, v)
        for ip, counts in piece.servers.items():
            self.servers.setdefault(ip, Counter()).update(counts)
        for part, counts in piece.registry.items():
            self.registry.setdefault(part, Counter()).update(counts)
        if piece.faults is not None:
            if self.faults is None:
                self.faults = FaultsSeen()
            self.faults.absorb(piece.faults)
        applied = self.churn_applied
        for index, t in piece.churn_applied.items():
            applied[index] = min(t, applied.get(index, t))
        for kind, times in piece.measured.items():
            self.measured.setdefault(kind, []).extend(times)
        self.schedule_error.extend(piece.schedule_error)
        self.lost += piece.lost
        self.flows.update(piece.flows)
        self.pcaps.extend(piece.pcaps)
        self.warm_time = max(self.warm_time, piece.warm_time)
        self.end_time = max(self.end_time, piece.end_time)
        if piece.model_loads is not None:
            self.model_loads = (self.model_loads or 0) + piece.model_loads
        self.wire.extend(piece.wire)
        if piece.stock is not None:  # the host that ran the binaries
            mine = self.stock or {}
            self.stock = {**piece.stock, **{k: mine.get(k, 0) + piece.stock[k]
                                            for k in ("crashes", "restarts") if k in mine}}
        if piece.hop_times is not None:
            if self.hop_times is None:
                self.hop_times = HopTimes()
            self.hop_times.absorb(piece.hop_times)


def merge_outputs(pieces: Iterable[EngineOutput], on_stub: StubSink | None = None,
                  origin: float = 0.0) -> EngineOutput:
    """One output from the pieces, in order (:meth:`EngineOutput.absorb`); ``origin``: the
    wall-clock time of node time zero (captures). Kept discoveries end in job order."""
    out = EngineOutput(on_stub=on_stub, clock_offset=origin)
    for piece in pieces:
        out.absorb(piece)
    out.stubs.sort(key=lambda js: js[0].index)
    return out


Engine = Callable[[RunPlan, StubSink | None], EngineOutput]
"""An engine runs one plan (:class:`RunPlan`: one scheme of one scenario, fully built) and
tells the sink (the runner's record writer, when it runs in this process; may be None) of
each discovery as it finishes; it runs ``plan.instantiate()``, never the plan's own nodes."""
