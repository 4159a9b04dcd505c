"""What every engine receives: :class:`RunPlan`, one scheme of one scenario, fully built.

A plan is one scheme of one scenario, fully instantiated: the server nodes, the resolver
and agent nodes with their addresses, the network path model and the jobs. Engines only
move bytes and fire timers; they never decide anything about DNS.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from nodes.agent.session import DnsAgent
from nodes.agent.stub import StubResult
from nodes.registry.client import RegistryAgent, RegistryResult
from nodes.resolver.core import RecursiveResolver
from nodes.resolver.types import Discovery
from sim.accounting import TcpModel, TlsSizes
from sim.build.hierarchy import DotSetup, Hierarchy
from sim.build.registries import RegistrySetup
from sim.build.workload import Job
from topologies.paths import PathModel

if TYPE_CHECKING:  # both import this module
    from sim.build.churn import ChurnSchedule
    from sim.build.faults import FaultPlan

AGENT_PORT = 40000


@dataclass(frozen=True)
class CaptureRequest:
    """``tooldns run --capture`` for an engine whose nodes live in network namespaces of
    their own (Mininet): it records every host's packets into ``directory`` (one pcap per
    host, filter ``bpf``) and lists the files in its output's ``pcaps``."""

    directory: str
    bpf: str


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
    use and shared by every job asking it (a run holds the jobs, not a request per job)."""

    def __init__(self, jobs: Sequence[Job], k: int, start: str, beam: int | None) -> None:
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
    measure: dict[str, list[float]] | None = None  # simpy only: measured cost per node kind
    dns_port: int = 53
    engine_options: dict | None = None  # engine-specific settings (scenario engine_options)
    registry: RegistrySetup | None = None  # HTTP-registry schemes
    tcp: TcpModel | None = None  # registry schemes
    tls: TlsSizes | None = None  # when the registry scheme uses TLS
    dot: DotSetup | None = None  # the resolvers query over DNS over TLS
    faults: FaultPlan | None = None  # scenario faults:, consulted per packet
    registry_replicas: int = 1  # registry hosts behind one name (sim.build.faults: failover order)
    shard: int | None = None  # this plan is shard N of a run (own link-delay stream)
    churn: ChurnSchedule | None = None  # tools change at workload times
    capture: CaptureRequest | None = None  # packet capture asked of the engine itself
    # told of each discovery as it finishes (the runner's record writer; engines hand it
    # to their EngineOutput)
    on_stub: StubSink | None = None

    def make_rng(self, salt: str) -> random.Random:
        return random.Random(f"{self.seed}-{self.scheme}-{salt}")

    def dns_agents(self) -> dict[str, DnsAgent]:
        """``agents`` of a DNS scheme (an engine checks them once, at its start)."""
        out: dict[str, DnsAgent] = {}
        for ip, agent in self.agents.items():
            if isinstance(agent, RegistryAgent):
                raise TypeError(f"{ip}: a registry agent in DNS scheme {self.scheme}")
            out[ip] = agent
        return out

    def registry_agents(self) -> dict[str, RegistryAgent]:
        """``agents`` of a registry scheme (an engine checks them once, at its start)."""
        out: dict[str, RegistryAgent] = {}
        for ip, agent in self.agents.items():
            if not isinstance(agent, RegistryAgent):
                raise TypeError(f"{ip}: a DNS agent in registry scheme {self.scheme}")
            out[ip] = agent
        return out
