"""Fault schedules: crashes and restarts, slow or lossy nodes, link delay and partitions.

A scenario's ``faults:`` list (:class:`sim.faultspec.FaultSpec`) is turned, per run, into a
:class:`FaultPlan`: every fault as concrete intervals on concrete addresses. Random
processes (``rate``) are drawn up front from a generator seeded by the scenario seed and
the fault's position, so every engine and every scheme sees the very same timeline.

Engines consult the plan for each packet through :meth:`FaultPlan.fate` (after the
network model has drawn its delay): a packet is dropped when its sender is down when it
leaves, its receiver is down when it arrives, the two sides are partitioned, or a lossy
fault draws a loss; otherwise it may be held back longer (``delay`` on the link, ``slow``
sender). Registry replicas that are down refuse connections (:meth:`FaultPlan.down`): the
simulation pays the SYN / RST round trip, the live engine closes the listening socket.

Times in the scenario are workload time (0 = the first query may leave, after any K = 0
warming); :meth:`FaultPlan.start` sets where that is in node time.

Selectors name nodes: ``*``, ``servers`` (every zone server and registry replica),
``zone:Z`` / ``zone:Z#i`` (all replicas of a zone, or the
i-th; an organisation's zone under ``example.``: its hosting server), ``replica:i`` (the
i-th replica of every zone), ``role:root|tld|intermediate|leaf|org`` (``org``: the servers of
the organisations' zones),
``org:O`` (the zones of an organisation), ``address:IP``, ``registry`` / ``registry#i``,
``resolvers``, ``resolver:i``, ``agents``, ``agent:i``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from sim.errors import ScenarioError
from sim.faultspec import FaultSpec, FaultsSpec
from sim.limits import fault_problem


@dataclass(frozen=True)
class Interval:
    """One fault applied to ``targets`` from ``start`` to ``end`` (workload time)."""

    index: int  # position in the scenario's fault list
    kind: str
    start: float
    end: float
    targets: frozenset[str]
    peers: frozenset[str] | None = None  # None: every node
    delay: float = 0.0
    loss: float = 0.0


@dataclass
class Nodes:
    """What selectors can name in one run."""

    zone_servers: dict[str, list[str]]  # zone -> replica addresses in NS order
    roles: dict[str, str]  # address -> root | tld | intermediate | leaf | org
    orgs: dict[str, str | None]  # address -> organisation of its zone
    registries: list[str] = field(default_factory=list)
    resolvers: list[str] = field(default_factory=list)
    agents: list[str] = field(default_factory=list)

    def every(self) -> set[str]:
        servers = {a for addrs in self.zone_servers.values() for a in addrs}
        return servers | set(self.registries) | set(self.resolvers) | set(self.agents)


def select(selector: str, nodes: Nodes) -> set[str]:
    """Addresses a selector names; ScenarioError (without the file) when it names none."""
    name, _, replica = selector.partition("#")
    pick = int(replica) if replica else None

    def nth(addrs: list[str]) -> list[str]:
        if pick is None:
            return addrs
        return [addrs[pick]] if pick < len(addrs) else []

    kind, _, value = name.partition(":")
    out: set[str] = set()
    if name == "*":
        out = nodes.every()
    elif name == "servers":
        out = nodes.every() - set(nodes.resolvers) - set(nodes.agents)
    elif kind == "zone":
        zone = value if value.endswith(".") else value + "."
        out = set(nth(nodes.zone_servers.get(zone, [])))
    elif kind == "replica":
        i = int(value)
        out = {addrs[i] for addrs in nodes.zone_servers.values() if i < len(addrs)}
    elif kind == "role":
        for addrs in nodes.zone_servers.values():
            if addrs and nodes.roles.get(addrs[0]) == value:
                out.update(nth(addrs))
    elif kind == "org":
        for addrs in nodes.zone_servers.values():
            if addrs and nodes.orgs.get(addrs[0]) == value:
                out.update(nth(addrs))
    elif kind == "address":
        out = {value} & nodes.every()
    elif name == "registry":
        out = set(nth(nodes.registries))
    elif name == "resolvers":
        out = set(nodes.resolvers)
    elif kind == "resolver":
        out = set(nodes.resolvers[int(value):int(value) + 1])
    elif name == "agents":
        out = set(nodes.agents)
    elif kind == "agent":
        out = set(nodes.agents[int(value):int(value) + 1])
    if not out:
        raise ScenarioError(f"'{selector}' names no node of this run")
    return out


def build_fault_plan(spec: FaultsSpec, nodes: Nodes, seed: int, horizon: float,
                     crashable: frozenset[str] = frozenset()) -> FaultPlan:
    """Concrete intervals for every fault; random processes drawn up to ``horizon``, each
    bounded before it is drawn (:func:`sim.limits.fault_problem`, with its real targets).
    ``crashable``: resolver addresses a ``down`` fault may target (stock recursors: their
    process is killed, and started again at the end, :mod:`sim.engines.stock`)."""
    intervals: list[Interval] = []
    for i, f in enumerate(spec.events):
        try:
            targets = select(f.target, nodes)
            peers = None if f.peer == "*" else frozenset(select(f.peer, nodes))
        except ScenarioError as exc:
            raise ScenarioError(f"faults.events.{i}: {exc}") from None
        if f.kind == "down" and (targets - crashable) & (set(nodes.resolvers)
                                                         | set(nodes.agents)):
            raise ScenarioError(f"faults.events.{i}.target: {DOWN_TARGETS}")
        if f.rate is None:
            end = f.at + f.duration if f.duration is not None else float("inf")
            intervals.append(_interval(i, f, f.at, end, frozenset(targets), peers))
            continue
        assert f.duration is not None  # validated: a rate comes with its mean duration
        if problem := fault_problem(i, f, horizon, len(targets), spec.horizon is not None):
            raise ScenarioError(problem)
        rng = np.random.default_rng([seed, 7, i])
        for address in sorted(targets):  # each target fails on its own
            t = f.at
            while True:
                t += float(rng.exponential(1.0 / f.rate))
                if t >= horizon:
                    break
                length = float(rng.exponential(f.duration))
                intervals.append(_interval(i, f, t, t + length, frozenset({address}), peers))
                t += length
    return FaultPlan(intervals, seed)


#: why a ``down`` fault was refused (a run's and the early check's message)
DOWN_TARGETS = ("'down' applies to servers, registry replicas and stock recursors "
                "(schemes[].resolver; use partition or lossy for the project's resolvers and "
                "for agents)")


def _interval(i: int, f: FaultSpec, start: float, end: float, targets: frozenset[str],
              peers: frozenset[str] | None) -> Interval:
    return Interval(i, f.kind, start, end, targets, peers, f.delay, f.loss)


class FaultPlan:
    """The run's fault timeline, fixed once built; each run of a plan asks its own
    :class:`FaultState` (:meth:`begin`) about every packet and connection."""

    def __init__(self, intervals: list[Interval], seed: int) -> None:
        self.intervals = sorted(intervals, key=lambda iv: (iv.start, iv.index))
        self.seed = seed
        self.by_node: dict[str, list[Interval]] = {}
        self.links: list[Interval] = []
        for iv in self.intervals:
            if iv.kind in ("delay", "partition"):
                self.links.append(iv)
            else:
                for a in iv.targets:
                    self.by_node.setdefault(a, []).append(iv)

    def begin(self, seen: FaultsSeen | None = None) -> FaultState:
        """One run's view of the timeline: a new one (no fault active until
        :meth:`FaultState.start`), or the one a run reported (``seen``: its origin, drops
        and recoveries, for the report)."""
        return FaultState(self, seen)

    def windows(self) -> list[tuple[float, float]]:
        """Merged intervals (workload time) during which any fault is active."""
        merged: list[list[float]] = []
        for iv in sorted(self.intervals, key=lambda iv: iv.start):
            if merged and iv.start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], iv.end)
            else:
                merged.append([iv.start, iv.end])
        return [(a, b) for a, b in merged]

    def down_events(self, addresses: set[str] | None = None) -> list[tuple[float, float]]:
        """(start, end) of every ``down`` interval (on ``addresses`` if given)."""
        return sorted({(iv.start, iv.end) for iv in self.intervals if iv.kind == "down"
                       and (addresses is None or iv.targets & addresses)})


@dataclass
class FaultsSeen:
    """What the faults did in one run (an engine's output carries it): node time of
    workload time 0 (``inf``: the workload never started), packets dropped by cause, and
    the first packet each restarted node received ((interval, address) -> workload time)."""

    origin: float = float("inf")
    drops: Counter[str] = field(default_factory=Counter)
    first_rx: dict[tuple[int, str], float] = field(default_factory=dict)

    def absorb(self, other: FaultsSeen) -> None:
        """Fold in another process's (or shard's) view: drops add up, the first packet is
        the earliest, the origin is the latest one a process started from (processes of
        one run start together; shards each when their resolvers are warm)."""
        if other.origin != float("inf"):
            self.origin = other.origin if self.origin == float("inf") else max(
                self.origin, other.origin)
        self.drops.update(other.drops)
        first = self.first_rx
        for key, t in other.first_rx.items():
            first[key] = min(t, first.get(key, t))


class FaultState:
    """One run's faults: the plan's timeline from its origin, the loss draws of lossy
    faults, what was dropped and when restarted nodes were first reached again."""

    def __init__(self, plan: FaultPlan, seen: FaultsSeen | None = None) -> None:
        self.plan = plan
        self.intervals = plan.intervals
        self._by_node, self._links = plan.by_node, plan.links
        seen = seen or FaultsSeen()
        self.origin = seen.origin  # until start(): no fault is active (e.g. K = 0 warming)
        self.rng = np.random.default_rng([plan.seed, 8])  # loss draws of lossy faults
        self.drops: Counter[str] = Counter(seen.drops)
        self.first_rx: dict[tuple[int, str], float] = dict(seen.first_rx)

    def seen(self) -> FaultsSeen:
        return FaultsSeen(self.origin, Counter(self.drops), dict(self.first_rx))

    def start(self, t0: float) -> None:
        """Workload time 0 is node time ``t0``."""
        self.origin = t0

    def _active(self, ivs: list[Interval], t: float) -> list[Interval]:
        t -= self.origin
        return [iv for iv in ivs if iv.start <= t < iv.end]

    def down(self, address: str, t: float) -> bool:
        ivs = self._by_node.get(address)
        if not ivs:
            return False
        return any(iv.kind == "down" for iv in self._active(ivs, t))

    def active_at(self, t: float) -> bool:
        """Is any fault active at node time ``t``?"""
        return bool(self._active(self.intervals, t))

    def down_events(self, addresses: set[str] | None = None) -> list[tuple[float, float]]:
        return self.plan.down_events(addresses)

    def fate(self, src: str, dst: str, t: float, delay: float | None,
             crashes: bool = True) -> float | None:
        """The one-way delay of a packet leaving ``src`` at ``t`` for ``dst`` once faults
        act on it (``delay`` as the network drew it; None = lost), or None if dropped.
        ``crashes=False`` leaves crashed ends to the caller (TCP: a reset, not a loss)."""
        if delay is None:
            return None
        if crashes and self.down(src, t):
            self.drops["sender down"] += 1
            return None
        loss = 0.0
        extra = 0.0
        for iv in self._active(self._by_node.get(src, []), t):
            if iv.kind == "slow":
                extra += iv.delay
            elif iv.kind == "lossy" and _applies(iv.peers, dst):
                loss = 1 - (1 - loss) * (1 - iv.loss)
        for iv in self._active(self._by_node.get(dst, []), t):
            if iv.kind == "lossy" and _applies(iv.peers, src):
                loss = 1 - (1 - loss) * (1 - iv.loss)
        for iv in self._active(self._links, t):
            if _between(iv, src, dst):
                if iv.kind == "partition":
                    self.drops["partition"] += 1
                    return None
                extra += iv.delay
        if loss and self.rng.random() < loss:
            self.drops["lossy"] += 1
            return None
        arrival = t + delay + extra
        ivs = self._by_node.get(dst)
        if ivs:
            if crashes and self.down(dst, arrival):
                self.drops["receiver down"] += 1
                return None
            rel = arrival - self.origin
            for k, iv in enumerate(ivs):  # first packet after a restart (recovery)
                if iv.kind == "down" and iv.end <= rel and (k, dst) not in self.first_rx:
                    self.first_rx[(k, dst)] = rel
        return delay + extra

    def recovery(self) -> list[dict]:
        """Per restarted node: the restart time and when it next received a packet."""
        out = []
        for address, ivs in sorted(self._by_node.items()):
            for k, iv in enumerate(ivs):
                if iv.kind != "down" or iv.end == float("inf"):
                    continue
                back = self.first_rx.get((k, address))
                out.append({"fault": iv.index, "address": address, "down_s": iv.start,
                            "restart_s": iv.end,
                            "first_packet_after_s": None if back is None else
                            round(back - iv.end, 6)})
        return out


def _applies(peers: frozenset[str] | None, other: str) -> bool:
    return peers is None or other in peers


def _between(iv: Interval, a: str, b: str) -> bool:
    if iv.peers is None:
        return a in iv.targets or b in iv.targets
    return (a in iv.targets and b in iv.peers) or (b in iv.targets and a in iv.peers)


# ------------------------------------------------------------------ wiring into a run

REGISTRY_NET = "127.0.80."


def registry_address(i: int) -> str:
    """Address of registry replica ``i`` (replica 0 is
    ``sim.build.registries.REGISTRY_ADDRESS``)."""
    return f"{REGISTRY_NET}{i + 1}"


def registry_order(replicas: int, agent_index: int) -> list[str]:
    """Replicas in the order an agent tries them: the name's addresses rotated per agent
    (round-robin DNS), each tried in turn as ``socket.create_connection`` does."""
    first = agent_index % replicas
    return [registry_address((first + i) % replicas) for i in range(replicas)]
