"""What every engine returns (:class:`EngineOutput`) and the engine call signature; finished
discoveries go to the plan's sink (:class:`sim.build.runplan.StubSink`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from nodes.agent.stub import StubResult
from nodes.registry.client import RegistryResult
from nodes.resolver.types import DiscoveryResult
from sim.build.runplan import RunPlan, StubSink
from sim.build.workload import Job


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
    on_stub: StubSink | None = None  # the plan's sink (RunPlan.on_stub), if any
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


Engine = Callable[[RunPlan], EngineOutput]
