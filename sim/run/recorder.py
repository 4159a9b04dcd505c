"""The record writer of one scheme's run (:class:`Recorder`): the sink the runner hands the
engine with the plan (the engine's second argument).

Streaming (the default): each finished discovery becomes its row the moment it ends; the
row goes to the run's :class:`sim.run.spool.RecordSpool` and :class:`sim.run.summary.Tally`,
and the discovery and its resolver walks leave memory. A DNS discovery whose query timed
out may still have a walk running at the resolver (the in-memory records counted it): its
row waits ("parked") until a walk under each timed-out ID has arrived, or the run ends (a
query lost before reaching the resolver: parked to the end, about a kilobyte each).

Kept (``stream=False``): what needs every discovery at once — DNS over TLS (the ACKs of
each connection), kept-alive registry connections (ACKs over all exchanges), churn
measures, packet-capture comparison, the session layer's per-job state — leaves the
discoveries in :class:`sim.engines.base.EngineOutput` and makes the rows at :meth:`drain`,
exactly as before. So does any engine that returns a merged output (Ray, Mininet, shards).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mypy_extensions import mypyc_attr

from nodes.agent.stub import StubResult
from nodes.registry.client import RegistryResult
from sim.accounting import DotModel, TcpModel, dot_acks
from sim.build.runplan import RunPlan
from sim.build.workload import Job
from sim.engines.base import EngineOutput
from sim.run.records import (
    Lookups,
    connection_acks,
    query_record,
    registry_record,
    session_columns,
    stub_walks,
    take_walks,
)
from sim.run.spool import RecordSpool
from sim.run.summary import Tally
from sim.scenario import Scenario
from sim.schemes import DnsScheme, RegistryScheme, SchemeSpec

Key = tuple[str, int]  # (agent address, DNS query ID)


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass
class _Parked:
    """A finished DNS discovery waiting for the walks of its timed-out queries."""

    job: Job
    stub: StubResult
    agent_ip: str
    keys: set[Key]


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Recorder:
    """Turns one scheme's finished discoveries into rows (``spool``, ``tally``); told of
    each as it ends (:meth:`stub`) and of the rest at the end (:meth:`drain`)."""

    def __init__(self, sc: Scenario, engine: str, scheme: SchemeSpec, plan: RunPlan,
                 lookups: Lookups, spool: RecordSpool, tally: Tally, stream: bool = True,
                 tick: Callable[[int], None] | None = None) -> None:
        self.sc, self.engine, self.scheme, self.plan = sc, engine, scheme, plan
        self.lookups, self.spool, self.tally = lookups, spool, tally
        self.stream, self.tick = stream, tick
        self.waiting: dict[Key, list[_Parked]] = {}  # parked discoveries by awaited key
        self.finished = 0  # discoveries told of so far (progress)
        self._recorded = bytearray(len(plan.jobs))  # 1: the job's row is made
        self._dot: DotModel | None = None
        self._acks: dict[int, int] | None = None
        spool.begin(scheme.name, len(plan.jobs))

    @staticmethod
    def keeps(sc: Scenario, scheme: SchemeSpec, plan: RunPlan, capture: bool) -> bool:
        """Whether this scheme's rows need every discovery at once (``stream=False``)."""
        if plan.churn is not None or capture or sc.agents.session is not None:
            return True
        if isinstance(scheme, RegistryScheme):
            return scheme.keepalive and not scheme.tls
        return plan.dot is not None

    # ------------------------------------------------------------------ the sink

    def stub(self, job: Job, result: StubResult | RegistryResult,
             output: EngineOutput) -> bool:
        self.finished += 1
        if self.tick is not None:
            self.tick(self.finished)
        if not self.stream:
            return False
        if isinstance(result, RegistryResult):
            self._registry_row(job, result)
            return True
        ip = self.plan.agent_order[job.agent]
        keys = {(ip, s.qid) for s in result.steps
                if s.outcome == "timeout" and not _arrived(output, (ip, s.qid), result)}
        if not keys:
            self._dns_row(job, result, output, ip, take=True)
            return True
        parked = _Parked(job, result, ip, keys)
        for key in keys:
            self.waiting.setdefault(key, []).append(parked)
        return True

    def walked(self, key: Key, output: EngineOutput) -> None:
        still = []
        for parked in self.waiting.pop(key, []):
            if not _arrived(output, key, parked.stub):
                still.append(parked)
                continue
            parked.keys.discard(key)
            if not parked.keys:
                self._dns_row(parked.job, parked.stub, output, parked.agent_ip, take=True)
        if still:
            self.waiting[key] = still

    # ------------------------------------------------------------------ the end

    def drain(self, output: EngineOutput) -> None:
        """The engine is done: rows of the parked and kept discoveries, then a "not
        completed" row for each job that never finished; the scheme's rows are complete.
        A streamed scheme's ``output`` then holds no discoveries or walks any more; one that
        keeps them (:meth:`keeps`) leaves them for what reads them later (the capture's
        attribution)."""
        plan, scheme = self.plan, self.scheme
        if plan.dot is not None:  # DNS over TLS: the ACKs depend on each connection
            walked = [*output.warmups, *(w for ws in output.walks.values() for w in ws)]
            self._dot = DotModel(plan.dot.sizes, TcpModel(self.sc.network.mtu),
                                 *dot_acks(s for w in walked for s in w.steps))
        if isinstance(scheme, RegistryScheme) and scheme.keepalive and not scheme.tls:
            self._acks = connection_acks(plan, output)
        parked = {id(p): p for ps in self.waiting.values() for p in ps}
        self.waiting.clear()
        for p in sorted(parked.values(), key=lambda p: p.job.index):
            self._dns_row(p.job, p.stub, output, p.agent_ip, take=False)
        kept: dict[int, tuple[Job, StubResult | RegistryResult]] = {}
        for job, res in output.stubs:
            kept[job.index] = (job, res)  # the last of a job's, as the old tables did
        for job, res in kept.values():
            if isinstance(res, RegistryResult):
                self._registry_row(job, res)
            else:
                self._dns_row(job, res, output, plan.agent_order[job.agent], take=False)
        if 0 in self._recorded:  # some job never finished (a C scan, not 10^6 jobs made)
            for job in plan.jobs:
                if not self._recorded[job.index]:
                    self._missing_row(job, output)
        if self.stream:
            output.stubs.clear()
            output.walks.clear()
        self.spool.end()

    # ------------------------------------------------------------------ rows

    def _add(self, job: Job, row: dict) -> None:
        self._recorded[job.index] = 1
        self.spool.add(job.index, row)
        self.tally.add(row)

    def _dns_row(self, job: Job, stub: StubResult, output: EngineOutput, agent_ip: str,
                 take: bool) -> None:
        scheme = self.scheme
        assert isinstance(scheme, DnsScheme)  # a DNS scheme's discoveries
        walks = (take_walks if take else stub_walks)(output, agent_ip, stub)
        lk = self.lookups
        row = query_record(self.sc, self.engine, scheme, job, stub, walks, lk.target_ids,
                           self.plan.hierarchy.zone_of, lk.candidates, lk.cost, self._dot)
        if self.sc.agents.session is not None:  # the session layer's columns
            row.update(session_columns(output.sessions.get(agent_ip), job))
        self._add(job, row)

    def _registry_row(self, job: Job, res: RegistryResult | None) -> None:
        scheme = self.scheme
        assert isinstance(scheme, RegistryScheme)  # a registry scheme's discoveries
        lk = self.lookups
        row = registry_record(self.sc, self.engine, scheme, job, res, lk.registry_ids,
                              lk.per_service, self.plan, lk.cost, self._acks)
        if self.sc.agents.session is not None:
            row.update(session_columns(None, job))
        self._add(job, row)

    def _missing_row(self, job: Job, output: EngineOutput) -> None:
        if isinstance(self.scheme, RegistryScheme):
            self._registry_row(job, None)
            return
        stub = StubResult(tag=job, request=self.plan.requests[job.index], sent=0.0,
                          rcode="", error="not completed")
        # no walk of the output is this job's; its agent's session state is
        self._dns_row(job, stub, EngineOutput(sessions=output.sessions),
                      self.plan.agent_order[job.agent], take=False)


def _arrived(output: EngineOutput, key: Key, stub: StubResult) -> bool:
    """Whether a walk under ``key`` that started while ``stub`` waited is in ``output``
    (an agent reuses a timed-out ID: a later query's walk may come first)."""
    return any(stub.sent <= w.started <= stub.finished for w in output.walks.get(key, ()))
