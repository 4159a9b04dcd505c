"""Tool churn during a run (``workload.churn``): the schedule of changes and what they cost.

Remark 4 of the ToolDNS paper says a tool added to a zone is seen by the next query. This
module tests that claim: tools are added, moved (new address and port) and removed at
leaf zones at given workload times, on the simpy and live engines.

* **Schedule** (:func:`plan_churn`): the tools are drawn from the scenario seed. An added
  tool copies a tool of its leaf (service, organisation) under a new name and SRV target
  with a new address, its description made distinct by one marker word. Probe
  discoveries of each changed tool's intent (name and description) are added to the
  workload, from ``probes.before`` seconds before the change to ``probes.duration`` after
  it, every ``probes.interval`` seconds, by one agent. They are ordinary jobs through the
  engine (``source`` ``churn-probe``) and are left out of the scheme summary.
* **Applying** (:meth:`ChurnSchedule.timeline`): at the change time, every server of the
  leaf zone reloads it (:meth:`nodes.authoritative.server.AuthoritativeServer.apply_change`:
  serial + 1, packet cache flushed) and a registry updates its index
  (``apply_change``). Resolvers and registry clients are not told: what they cached
  lives until its TTL, as in real DNS.
* **Measuring** (:meth:`ChurnSchedule.measure`): each answer is classed as showing the
  old state, the new one, ``mixed`` (a moved tool with one of its old address and port:
  the leaf's new SRV with a cached old A record), neither (``absent``: a moved tool not
  returned; ``other``), ``unknown`` (a moved tool returned without an address: AgentDNS
  without ``resolve``) or ``error``.
  Visibility time = send time of the first probe after the change showing the new state,
  minus the change time. Stale answers = answers sent after the change that show the old
  state (``old`` or ``mixed``): probes, and workload answers returning a removed tool or
  a moved tool's old endpoint (added tools: probes only). Each stale ToolDNS answer is
  attributed to the resolver cache that served it (``srv_hit``/``answer_hit``: the cached
  leaf answer; ``a_hit``: a cached address), else to the servers (``server``: nothing
  cached was used). Probes run on a grid 1 ms after the change (``PROBE_LAG``), so
  none races the change on the live engine; visibility is measured from the change.
"""

from __future__ import annotations

import json
import random
import statistics
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import pandas as pd

from nodes.agent.stub import StubResult
from nodes.authoritative.server import AuthoritativeServer
from nodes.dns.zone import ToolRecord
from nodes.registry.agentdns import AgentDNSRegistry
from nodes.registry.ans import ANSRegistry
from nodes.registry.base import RegistryTool
from nodes.registry.client import RegistryResult
from nodes.resolver.types import Endpoint
from sim.build.registries import RegistrySetup
from sim.build.workload import Job
from sim.catalog.registries import REGISTRIES
from sim.errors import ScenarioError
from sim.scenario import ChurnEvent, ChurnProbes, ChurnSpec, Scenario
from sim.schemes import SchemeSpec
from topologies.labels import dns_label
from topologies.namespace import TLD, Namespace, Query, Tool

PROBE_SOURCE = "churn-probe"
CHURN_ADDRESSES = "127.66"  # new endpoints: 127.66.X.Y (tools live in 127.64.0.0/16)
NEW_PORT = 10_000  # a moved tool's new port: NEW_PORT + change index
#: probes run this long after the change instants (seconds): on a live loop two timers due
#: at one instant run in either order, so no probe is due at the change itself
PROBE_LAG = 0.001
STALE = ("old", "mixed")  # answer states counted as stale (see ChurnSchedule._state)


class Answers(Protocol):
    """What churn reads of an engine's output (:class:`sim.engines.base.EngineOutput`)."""

    @property
    def stubs(self) -> Sequence[tuple[Job, StubResult | RegistryResult]]: ...
    @property
    def churn_applied(self) -> Mapping[int, float]: ...


@dataclass(frozen=True)
class Change:
    """One tool added, moved or removed at ``at`` seconds of workload time."""

    index: int
    event: int  # index in workload.churn.events
    at: float
    action: str  # add | change | remove
    zone: str
    tool_id: str
    service: str
    intent: str  # what the probes ask: the tool's name and description
    old: ToolRecord | None  # None for add
    new: ToolRecord | None  # None for remove


def _record(tool: Tool) -> ToolRecord:
    """A namespace tool as its leaf publishes it (as ``Namespace.zone_data`` builds it)."""
    return ToolRecord(tool.id, tool.name, tool.description, tool.service,
                      f"{tool.slug}.{tool.zone}", tool.address, tool.port, tool.org)


def _registry_tool(rec: ToolRecord, zone: str) -> RegistryTool:
    """The same tool as the registries list it (``sim.build.registries.registry_tools``)."""
    return RegistryTool(rec.tool_id, rec.name, rec.description, rec.service,
                        rec.org or "public", zone.removesuffix("." + TLD).rstrip("."),
                        rec.target.split(".", 1)[0], rec.address, rec.port)


def _key(kind: str, rec: ToolRecord, zone: str) -> str:
    """The name a scheme's answers carry for a tool: SRV target or registry name."""
    if kind not in REGISTRIES:  # a DNS scheme's answers carry SRV targets
        return rec.target
    reg = _registry_tool(rec, zone)
    return reg.agentdns_url if kind == "agentdns" else reg.ans_name


@dataclass(frozen=True)
class ChurnSchedule:
    """The changes of a run and the probe jobs (see module doc); fixed once planned."""

    sc: Scenario
    changes: tuple[Change, ...]
    probe_of: Mapping[int, int]  # probe job index -> change index

    # ------------------------------------------------------------------ applying

    def timeline(self, servers: Mapping[str, AuthoritativeServer], zone_of: Mapping[str, str],
                 registry: RegistrySetup | None, applied: dict[int, float]
                 ) -> list[tuple[float, Callable[[float], None]]]:
        """(workload time, apply(now)) for every change, in order; engines call ``apply``
        with their node time when the workload time comes. The changes go to the run's
        own nodes (``servers`` with their zones, or the ``registry``, when its replicas are
        served here); ``applied`` gets each change's node time."""
        def applying(ch: Change) -> Callable[[float], None]:
            return lambda now: self.apply(servers, zone_of, registry, ch, now, applied)

        return [(ch.at, applying(ch)) for ch in self.changes]

    @staticmethod
    def apply(servers: Mapping[str, AuthoritativeServer], zone_of: Mapping[str, str],
              registry: RegistrySetup | None, ch: Change, now: float,
              applied: dict[int, float]) -> None:
        """Make one change on a run's servers (a zone reload) or its registry index."""
        applied[ch.index] = now
        remove = [ch.old.tool_id] if ch.old is not None and ch.new is None else []
        add = [ch.new] if ch.new is not None else []
        if registry is not None:
            app = registry.server.app
            assert isinstance(app, AgentDNSRegistry | ANSRegistry)  # the registry schemes
            app.apply_change([_registry_tool(t, ch.zone) for t in add], remove)
            return
        for ip, zone in zone_of.items():
            if zone == ch.zone and ip in servers:
                servers[ip].apply_change(zone, add, remove)

    # ------------------------------------------------------------------ measuring

    def _state(self, kind: str, ch: Change, endpoints: list[Endpoint], error: bool) -> str:
        if error:
            return "error"
        keys = [e.target for e in endpoints]
        if ch.action == "add":
            assert ch.new is not None
            return "new" if _key(kind, ch.new, ch.zone) in keys else "old"
        assert ch.old is not None  # moved or removed
        key = _key(kind, ch.old, ch.zone)
        if ch.action == "remove":
            return "old" if key in keys else "new"
        assert ch.new is not None  # moved
        eps = [e for e in endpoints if e.target == key]
        if not eps:
            return "absent"
        if eps[0].address is None:
            return "unknown"
        where = (eps[0].address, eps[0].port)
        if where == (ch.new.address, ch.new.port):
            return "new"
        if where == (ch.old.address, ch.old.port):
            return "old"
        # one part old: e.g. the leaf's new SRV (port) with a cached A (old address)
        return "mixed" if ch.old.address in where or ch.old.port in where else "other"

    def measure(self, engine: str, scheme: SchemeSpec, agent_order: Sequence[str],
                output: Answers, stub_walks: Callable[..., list[Any]],
                states: dict[tuple[str, int], str]) -> list[dict[str, Any]]:
        """One row per change for this scheme (``churn.csv``), from what the engine
        reported (``output``: its answers and when each change was applied); each probe's
        and each stale workload answer's state goes to ``states`` ((scheme, job) -> state,
        for :meth:`annotate`). ``stub_walks(output, agent address, stub)``: the resolver
        walks behind a ToolDNS answer (``sim.run.records.stub_walks``)."""
        kind = scheme.kind

        def walks(job: Job, res: object) -> list:
            return stub_walks(output, agent_order[job.agent], res)

        applied = output.churn_applied
        rows = []
        by_change: dict[int, list] = {ch.index: [] for ch in self.changes}
        workload = []
        for job, res in output.stubs:
            c = self.probe_of.get(job.index)
            if c is None:
                workload.append((job, res))
            else:
                by_change[c].append((job, res))
        for ch in self.changes:
            when = applied.get(ch.index)
            probes = sorted(by_change[ch.index], key=lambda jr: jr[1].sent)
            after, visible, last_stale = 0, None, None
            stale_probe = stale_work = 0
            sources: Counter[str] = Counter()
            other: Counter[str] = Counter()
            for job, res in probes:
                error = bool(res.error) or not (res.endpoints or ch.action == "remove")
                state = self._state(kind, ch, res.endpoints, error)
                states[(scheme.name, job.index)] = state
                if when is None or res.sent < when:
                    continue
                after += 1
                if state == "new" and visible is None:
                    visible = res.sent - when
                elif state in STALE:
                    stale_probe += 1
                    last_stale = res.sent - when
                    sources[self._source(kind, job, res, walks)] += 1
                elif state != "new":
                    other[state] += 1
            if when is not None and ch.action != "add":  # the workload's own stale answers
                for job, res in workload:
                    state = self._state(kind, ch, res.endpoints, False)
                    if res.sent >= when and not res.error and state in STALE:
                        stale_work += 1
                        states[(scheme.name, job.index)] = state
                        sources[self._source(kind, job, res, walks)] += 1
            rows.append({
                "scenario": self.sc.name, "engine": engine, "scheme": scheme.name,
                "kind": kind, "change": ch.index, "event": ch.event, "action": ch.action,
                "zone": ch.zone, "tool_id": ch.tool_id, "at_s": ch.at,
                "applied_s": None if when is None else round(when, 9),
                "srv_ttl": self.sc.caches.srv_ttl, "probes_after": after,
                "visible_after_s": None if visible is None else round(visible, 9),
                "last_stale_s": None if last_stale is None else round(last_stale, 9),
                "stale_probe_answers": stale_probe, "stale_workload_answers": stale_work,
                "stale_answers": stale_probe + stale_work,
                "stale_sources": json.dumps(dict(sorted(sources.items()))),
                "other_probe_answers": json.dumps(dict(sorted(other.items()))),
            })
        return rows

    @staticmethod
    def _source(kind: str, job: Job, res: object, walks: Callable[[Job, object], list[Any]]
                ) -> str:
        """Which cache served a stale answer (see the module doc)."""
        if kind in REGISTRIES:
            return "registry"
        cache: Counter[str] = Counter()
        for w in walks(job, res):
            cache.update(w.cache)
        if cache["srv_hit"] or cache["answer_hit"] or cache["stale_srv"]:
            return "resolver_answer"
        if cache["a_hit"] or cache["stale_a"]:
            return "resolver_a"
        return "server"

    def annotate(self, df: pd.DataFrame, states: Mapping[tuple[str, int], str]
                 ) -> pd.DataFrame:
        """``churn_probe`` (the change a probe is about, -1 for the workload) and
        ``churn_state`` (a probe's old/new/mixed/absent/unknown/other/error state; ``old``
        or ``mixed`` for a stale workload answer, else empty) on the records."""
        df = df.copy()
        df["churn_probe"] = [self.probe_of.get(int(j), -1) for j in df["job"]]
        df["churn_state"] = [states.get((s, int(j)), "")
                             for s, j in zip(df["scheme"], df["job"], strict=True)]
        return df

    @staticmethod
    def workload_rows(df: pd.DataFrame) -> pd.DataFrame:
        """The records without the probes (what the scheme summary describes)."""
        if not len(df):
            return df
        return df[df["query_source"] != PROBE_SOURCE].reset_index(drop=True)

    def summary(self, rows: list[dict]) -> dict:
        """The ``churn`` block of ``summary.json``: per scheme, visibility and staleness."""
        churn = self.sc.workload.churn
        assert churn is not None  # a schedule is built only for a churn: block
        p = churn.probes
        out: dict = {"srv_ttl": self.sc.caches.srv_ttl, "a_ttl": self.sc.caches.a_ttl,
                     "probes": {"interval": p.interval, "before": p.before,
                                "duration": p.duration, "agent": p.agent},
                     "changes": [{"change": ch.index, "at": ch.at, "action": ch.action,
                                  "zone": ch.zone, "tool_id": ch.tool_id}
                                 for ch in self.changes],
                     "schemes": {}}
        for name in dict.fromkeys(r["scheme"] for r in rows):
            mine = [r for r in rows if r["scheme"] == name]
            seen = [r["visible_after_s"] for r in mine if r["visible_after_s"] is not None]
            sources: Counter[str] = Counter()
            for r in mine:
                sources.update(json.loads(r["stale_sources"]))
            out["schemes"][name] = {
                "changes": len(mine), "visible": len(seen),
                "median_visible_s": round(statistics.median(seen), 9) if seen else None,
                "max_visible_s": round(max(seen), 9) if seen else None,
                "stale_answers": sum(r["stale_answers"] for r in mine),
                "stale_probe_answers": sum(r["stale_probe_answers"] for r in mine),
                "stale_workload_answers": sum(r["stale_workload_answers"] for r in mine),
                "stale_sources": dict(sorted(sources.items())),
            }
        return out


# ---------------------------------------------------------------------- planning


def _new_address(i: int) -> str:
    return f"{CHURN_ADDRESSES}.{i // 250}.{i % 250 + 1}"


WHERE = "workload.churn"


def plan_churn(sc: Scenario, ns: Namespace, jobs: Sequence[Job]
               ) -> tuple[ChurnSchedule, list[Job]]:
    """The run's changes (drawn from the seed) and the jobs with the probes appended.
    Raises :class:`ScenarioError` for what cannot run, before anything runs."""
    spec = sc.workload.churn
    assert spec is not None
    _check(sc, spec)
    end = max((j.at for j in jobs if j.at is not None), default=0.0)
    if sc.duration is not None:
        end = max(end, sc.duration)
    changes = _draw_changes(sc.seed, spec, ns, end)
    out, probe_of = _with_probes(jobs, changes, spec.probes)
    return ChurnSchedule(sc, tuple(changes), probe_of), out


def _check(sc: Scenario, spec: ChurnSpec) -> None:
    """What churn cannot run with (ScenarioError)."""
    # (a sharded run is refused by the engine catalogue: sim.run.runner.check_engine)
    if sc.workload.arrival.process == "closed":
        raise ScenarioError(f"{WHERE}: needs timed arrivals (poisson or trace); a closed "
                            f"loop has no workload times to change tools at")
    if sc.namespace.dnssec:
        raise ScenarioError(f"{WHERE}: not with namespace.dnssec (changed zones are not "
                            f"re-signed)")
    if spec.probes.agent >= sc.network.agents:
        raise ScenarioError(f"{WHERE}.probes.agent: {spec.probes.agent} but the network has "
                            f"{sc.network.agents} agents")


def _draw_changes(seed: int, spec: ChurnSpec, ns: Namespace, end: float) -> list[Change]:
    """Every event's changes, events in time order, each drawn from its own seeded stream
    over the leaves as the earlier changes left them (a tool is changed at most once)."""
    leaves = sorted(z for z in ns.leaves() if ns.zones[z].tools)
    live: dict[str, list[ToolRecord]] = {z: [_record(ns.tools[t]) for t in ns.zones[z].tools]
                                         for z in leaves}
    touched: set[str] = set()
    changes: list[Change] = []
    order = sorted(range(len(spec.events)), key=lambda i: (spec.events[i].at, i))
    for e in order:
        ev = spec.events[e]
        field_ = f"{WHERE}.events.{e}"
        if ev.at > end:
            raise ScenarioError(f"{field_}.at: {ev.at:g} s is after the workload's last "
                                f"query ({end:g} s)")
        zone = None
        if ev.zone is not None:
            zone = ev.zone if ev.zone.endswith(".") else ev.zone + "."
            if zone not in live:
                raise ScenarioError(f"{field_}.zone: {ev.zone!r} is not a leaf zone with "
                                    f"tools (e.g. {leaves[0] if leaves else 'none'})")
        rng = random.Random(f"churn-{seed}-{e}")
        for _ in range(ev.count):
            z = _pick_zone(ev, zone, field_, leaves, live, touched, rng)
            changes.append(_change(len(changes), e, ev, z, live, touched, rng))
    return changes


def _pick_zone(ev: ChurnEvent, zone: str | None, field_: str, leaves: list[str],
               live: dict[str, list[ToolRecord]], touched: set[str],
               rng: random.Random) -> str:
    """The leaf one change of ``ev`` happens at (``zone``: the event's, else any leaf)."""
    if ev.action == "add":
        pool = [zone] if zone is not None else leaves
    else:
        pool = [z for z in ([zone] if zone is not None else leaves)
                if any(t.tool_id not in touched for t in live[z])]
        if not pool:
            n = sum(t.tool_id not in touched for z in live for t in live[z]
                    if zone is None or z == zone)
            raise ScenarioError(
                f"{field_}.count: {ev.action} of {ev.count} tools but "
                f"{'leaf ' + repr(ev.zone) if ev.zone else 'the namespace'} has "
                f"{n} tools not changed before")
    return pool[rng.randrange(len(pool))]


def _change(i: int, e: int, ev: ChurnEvent, z: str, live: dict[str, list[ToolRecord]],
            touched: set[str], rng: random.Random) -> Change:
    """Change ``i`` (of event ``e``) at leaf ``z``; ``live`` and ``touched`` updated."""
    old: ToolRecord | None
    new: ToolRecord | None
    if ev.action == "add":
        tpl = live[z][rng.randrange(len(live[z]))]
        marker = f"churnadd{i}"
        slug = dns_label(f"{marker}-{tpl.target.split('.', 1)[0]}")
        added = replace(tpl, tool_id=f"churn-{i}", name=f"{tpl.name} {marker}",
                        description=f"{tpl.description} {marker}", target=f"{slug}.{z}",
                        address=_new_address(i))
        old, new = None, added
        live[z].append(added)
        touched.add(added.tool_id)
    else:
        cand = [t for t in live[z] if t.tool_id not in touched]
        old = cand[rng.randrange(len(cand))]
        touched.add(old.tool_id)
        if ev.action == "change":
            new = replace(old, address=_new_address(i), port=NEW_PORT + i)
            live[z] = [new if t is old else t for t in live[z]]
        else:
            new = None
            live[z] = [t for t in live[z] if t is not old]
    tool = new or old
    assert tool is not None
    return Change(i, e, ev.at, ev.action, z, tool.tool_id, tool.service,
                  f"{tool.name} {tool.description}", old, new)


def _with_probes(jobs: Sequence[Job], changes: list[Change], probes: ChurnProbes
                 ) -> tuple[list[Job], dict[int, int]]:
    """The jobs with every change's probe jobs appended, and probe job index -> change."""
    out = list(jobs)
    probe_of: dict[int, int] = {}
    timed = sorted((j.at, j.phase) for j in jobs if j.at is not None)
    for ch in changes:
        # every `interval` on a grid PROBE_LAG after the change, from `before` ahead of it
        first = ch.at + PROBE_LAG - probes.interval * int(probes.before / probes.interval
                                                          + 1e-9)
        while first < 0:
            first += probes.interval
        t, m = first, 0
        while t <= ch.at + probes.duration + PROBE_LAG + 1e-9:
            phase = max((p for a, p in timed if a <= t), default=0)
            query = Query(id=f"churn{ch.index}-{m}", text=ch.intent, service=ch.service,
                          truth=(ch.tool_id,), source=PROBE_SOURCE)
            probe_of[len(out)] = ch.index
            out.append(Job(index=len(out), phase=phase, agent=probes.agent, query=query,
                           at=round(t, 9)))
            m += 1
            t = first + m * probes.interval
    return out, probe_of
