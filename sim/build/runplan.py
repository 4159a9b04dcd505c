"""What every engine receives: :class:`RunPlan`, one scheme of one scenario, fully built.

A plan is one scheme of one scenario, fully instantiated: the server nodes, the resolver
and agent nodes with their addresses, the network path model and the jobs. Engines only
move bytes and fire timers; they never decide anything about DNS.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nodes.agent.session import DnsAgent
from nodes.registry.client import RegistryAgent
from nodes.resolver.core import RecursiveResolver
from nodes.resolver.types import Discovery
from sim.accounting import TcpModel
from sim.build.hierarchy import DotSetup, Hierarchy
from sim.build.registries import RegistrySetup, TlsSizes
from sim.build.workload import Job
from topologies.paths import PathModel

if TYPE_CHECKING:  # both import this module
    from sim.build.churn import ChurnSchedule
    from sim.build.faults import FaultPlan

AGENT_PORT = 40000


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
    jobs: list[Job]
    requests: dict[int, Discovery]  # job index -> request
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
    # called with the number of discoveries finished so far (progress bars; simpy and live)
    on_stub: Callable[[int], None] | None = None

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
