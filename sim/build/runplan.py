"""What every engine receives: :class:`RunPlan`, one scheme of one scenario, fully built.

A plan is one scheme of one scenario, decided and frozen once built: the server nodes, the
resolver and agent nodes with their addresses, the network path model, the jobs, the
processing times, faults, churn and what the engines are asked to do (capture, options).
Its nodes are built but never run: an engine runs the plan's :meth:`RunPlan.instantiate`
(fresh instances of them, sharing what building them cost: zones, indexes, scorers) and
reports everything it observed in its :class:`sim.engines.base.EngineOutput`, so a plan
runs the same way every time and reads the same after a run. Engines only move bytes and
fire timers; they never decide anything about DNS.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from nodes.agent.session import DnsAgent
from nodes.agent.stub import StubResult
from nodes.registry.client import RegistryAgent, RegistryResult
from nodes.resolver.core import RecursiveResolver
from nodes.resolver.types import Discovery
from nodes.searchcost import SearchCost
from sim.accounting import TcpModel, TlsSizes
from sim.build.hierarchy import DotSetup, Hierarchy
from sim.build.registries import RegistrySetup
from sim.build.workload import Job
from topologies.paths import PathModel

if TYPE_CHECKING:  # both import this module
    from nodes.authoritative.server import AuthoritativeServer
    from sim.build.churn import ChurnSchedule
    from sim.build.faults import FaultPlan, FaultState

AGENT_PORT = 40000
#: tcpdump's kernel buffer (``-B``, KiB) wherever a run captures: a capture process a loaded
#: machine holds off the CPU keeps what it has not yet read (libpcap's default is 2 MiB, a
#: thousand snap-length frames, and loopback puts every packet in the ring twice)
RING_KIB = 16384


@dataclass(frozen=True)
class CaptureRequest:
    """``tooldns run --capture`` for an engine whose nodes live in network namespaces of
    their own (Mininet): it records every host's packets into ``directory`` (one pcap per
    host, filter ``bpf``) and lists the files in its output's ``pcaps``."""

    directory: str
    bpf: str


@dataclass(frozen=True)
class StockSetup:
    """A stock recursor as the scheme's resolver (``schemes[].resolver``): the binary (a
    name in :data:`sim.interop.resolvers.SPECS`), the hierarchy's root servers as its only
    hints, the root DS it validates with (None: no validation), its cache size in bytes
    (None: the binary's default). :mod:`sim.engines.stock` runs it."""

    binary: str
    root_hints: tuple[tuple[str, str], ...]
    trust_anchor: str | None = None
    cache_bytes: int | None = None


class StubSink(Protocol):
    """Told of each finished discovery as it ends (the runner's record writer,
    :class:`sim.run.recorder.Recorder`): it may take the discovery (its record is made and
    it leaves memory) or leave it in the engine's output (``output``: its
    :class:`sim.engines.base.EngineOutput`, untyped here: the plan does not import the
    engines) for the end of the run."""

    @property
    def waiting(self) -> Collection[tuple[str, int]]:
        """(agent address, query ID) of the walks it waits for (``add_walks`` tells it)."""

    def stub(self, job: Job, result: StubResult | RegistryResult, output: Any) -> bool:
        """True: taken (not to be kept in ``output.stubs``)."""

    def walked(self, key: tuple[str, int], output: Any) -> None:
        """A walk under ``key`` (one it waits for) has arrived."""


class Requests(Mapping[int, Discovery]):
    """Job index -> the request its agent asks, for jobs whose index is their position in
    ``jobs``: one :class:`Discovery` per distinct query text and service, made on first
    use and shared by every job asking it (a run holds the jobs, not a request per job).
    ``beam``: the width the agents ask for (None: the resolver's own, the scheme's)."""

    def __init__(self, jobs: Sequence[Job], k: int, start: str, beam: int | None = None
                 ) -> None:
        self.jobs, self.k, self.start, self.beam = jobs, k, start, beam
        self._made: dict[tuple[str, str], Discovery] = {}

    def __getitem__(self, index: int) -> Discovery:
        jobs = self.jobs
        if not 0 <= index < len(jobs) or jobs[index].index != index:
            raise KeyError(index)
        q = jobs[index].query
        made = self._made.get((q.text, q.service))
        if made is None:
            made = self._made[q.text, q.service] = Discovery(
                q.text, service=q.service, k=self.k, start=self.start, beam=self.beam)
        return made

    def __len__(self) -> int:
        return len(self.jobs)

    def __iter__(self) -> Iterator[int]:
        return (job.index for job in self.jobs)


@dataclass
class RunNodes:
    """One run of a plan: fresh instances of its nodes (all of them, or one process's
    share), its fault timeline's state and when its tool changes were applied. What an
    engine observed of them goes into its output (``EngineOutput.observe``)."""

    servers: dict[str, AuthoritativeServer]
    resolvers: dict[str, RecursiveResolver]
    agents: dict[str, DnsAgent | RegistryAgent]
    registry: RegistrySetup | None = None  # the registry (its server an instance)
    faults: FaultState | None = None
    churn_applied: dict[int, float] = field(default_factory=dict)  # change -> node time

    def dns_agents(self) -> dict[str, DnsAgent]:
        """``agents`` of a DNS scheme (an engine checks them once, at its start)."""
        out: dict[str, DnsAgent] = {}
        for ip, agent in self.agents.items():
            if isinstance(agent, RegistryAgent):
                raise TypeError(f"{ip}: a registry agent in a DNS scheme")
            out[ip] = agent
        return out

    def registry_agents(self) -> dict[str, RegistryAgent]:
        """``agents`` of a registry scheme (an engine checks them once, at its start)."""
        out: dict[str, RegistryAgent] = {}
        for ip, agent in self.agents.items():
            if not isinstance(agent, RegistryAgent):
                raise TypeError(f"{ip}: a DNS agent in a registry scheme")
            out[ip] = agent
        return out


@dataclass(frozen=True)
class RunPlan:
    scenario_name: str
    scheme: str
    seed: int
    hierarchy: Hierarchy
    resolvers: dict[str, RecursiveResolver]  # address -> node
    agents: dict[str, DnsAgent | RegistryAgent]  # address -> node (by the scheme's kind)
    agent_order: list[str]  # agent index -> address
    role_of: dict[str, str]  # address -> placement role id
    path: PathModel
    jobs: Sequence[Job]
    requests: Mapping[int, Discovery]  # job index -> request (:class:`Requests`)
    warm_services: tuple[str, ...] = ()
    closed_loop: bool = False
    server_time: float = 50e-6  # simulated processing per message received (seconds)
    server_semantic_time: float | None = None  # queries with the intent option (None: as above)
    resolver_time: float = 20e-6
    resolver_stub_time: float | None = None  # an agent's query at the resolver (None: as above)
    agent_time: float = 0.0
    registry_time: float = 0.0  # modelled search before each registry search answer (seconds)
    # processing ``index`` (nodes.searchcost): a semantic query's time per server address, and
    # the cost model a registry search is charged by (items it scored)
    semantic_times: Mapping[str, float] | None = None
    registry_cost: SearchCost | None = None
    measure: bool = False  # simpy only: time each node's work (output.measured; calibration)
    dns_port: int = 53
    engine_options: Mapping[str, Any] | None = None  # engine-specific settings by engine name
    registry: RegistrySetup | None = None  # HTTP-registry schemes
    tcp: TcpModel | None = None  # registry schemes
    tls: TlsSizes | None = None  # when the registry scheme uses TLS
    dot: DotSetup | None = None  # the resolvers query over DNS over TLS
    faults: FaultPlan | None = None  # scenario faults:, consulted per packet
    registry_replicas: int = 1  # registry hosts behind one name (sim.build.faults: failover order)
    shard: int | None = None  # this plan is shard N of a run (own link-delay stream)
    churn: ChurnSchedule | None = None  # tools change at workload times
    capture: CaptureRequest | None = None  # packet capture asked of the engine itself
    stock: StockSetup | None = None  # a stock binary serves the resolvers' addresses

    def make_rng(self, salt: str) -> random.Random:
        return random.Random(f"{self.seed}-{self.scheme}-{salt}")

    def instantiate(self, addresses: Collection[str] | None = None) -> RunNodes:
        """A run of this plan: fresh instances of its nodes (of ``addresses`` only, when
        given: one process's share), its faults' state and an empty record of tool
        changes. The plan's own nodes are left as built."""
        def mine(ip: str) -> bool:
            return addresses is None or ip in addresses

        registry = self.registry
        if registry is not None:
            registry = replace(registry, server=registry.server.instance())
        return RunNodes(
            servers={ip: s.instance() for ip, s in self.hierarchy.servers.items() if mine(ip)},
            resolvers={ip: r.instance() for ip, r in self.resolvers.items() if mine(ip)},
            agents={ip: a.instance() for ip, a in self.agents.items() if mine(ip)},
            registry=registry,
            faults=self.faults.begin() if self.faults is not None else None)

    def with_shard(self, shard: int, resolvers: dict[str, RecursiveResolver],
                   agents: dict[str, DnsAgent | RegistryAgent], jobs: Sequence[Job]) -> RunPlan:
        """This plan restricted to one shard's resolvers, agents and jobs (own link-delay
        stream)."""
        return replace(self, resolvers=resolvers, agents=agents, jobs=jobs,
                       requests={j.index: self.requests[j.index] for j in jobs}, shard=shard)
