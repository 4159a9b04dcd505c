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
i-th), ``replica:i`` (the i-th replica of every zone), ``role:root|tld|intermediate|leaf``,
``org:O`` (the zones of an organisation), ``address:IP``, ``registry`` / ``registry#i``,
``resolvers``, ``resolver:i``, ``agents``, ``agent:i``.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from sim.errors import ScenarioError
from sim.faultspec import FaultSpec, FaultsSpec
from sim.scenario import Scenario


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
    roles: dict[str, str]  # address -> root | tld | intermediate | leaf
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


def build_fault_plan(spec: FaultsSpec, nodes: Nodes, seed: int, horizon: float) -> FaultPlan:
    """Concrete intervals for every fault; random processes drawn up to ``horizon``."""
    intervals: list[Interval] = []
    for i, f in enumerate(spec.events):
        try:
            targets = select(f.target, nodes)
            peers = None if f.peer == "*" else frozenset(select(f.peer, nodes))
        except ScenarioError as exc:
            raise ScenarioError(f"faults.events.{i}: {exc}") from None
        if f.kind == "down" and targets & (set(nodes.resolvers) | set(nodes.agents)):
            raise ScenarioError(f"faults.events.{i}.target: 'down' applies to servers and "
                                f"registry replicas (use partition or lossy for resolvers "
                                f"and agents)")
        if f.rate is None:
            end = f.at + f.duration if f.duration is not None else float("inf")
            intervals.append(_interval(i, f, f.at, end, frozenset(targets), peers))
            continue
        assert f.duration is not None  # validated: a rate comes with its mean duration
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


def _interval(i: int, f: FaultSpec, start: float, end: float, targets: frozenset[str],
              peers: frozenset[str] | None) -> Interval:
    return Interval(i, f.kind, start, end, targets, peers, f.delay, f.loss)


class FaultPlan:
    """The run's fault timeline; engines ask it about every packet and connection."""

    def __init__(self, intervals: list[Interval], seed: int) -> None:
        self.intervals = sorted(intervals, key=lambda iv: (iv.start, iv.index))
        self.origin = float("inf")  # until start(): no fault is active (e.g. K = 0 warming)
        self.rng = np.random.default_rng([seed, 8])  # loss draws of lossy faults
        self.drops: Counter[str] = Counter()
        self.first_rx: dict[tuple[int, str], float] = {}  # (interval, address) -> time
        self._by_node: dict[str, list[Interval]] = {}
        self._links: list[Interval] = []
        for iv in self.intervals:
            if iv.kind in ("delay", "partition"):
                self._links.append(iv)
            else:
                for a in iv.targets:
                    self._by_node.setdefault(a, []).append(iv)

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


# ------------------------------------------------------------------ metrics


def fault_report(sc: Scenario, df: pd.DataFrame, load: pd.DataFrame,
                 base: pd.DataFrame | None, plans: dict[str, FaultPlan | None],
                 streak: int = 5) -> tuple[pd.DataFrame, dict]:
    """Add ``during_fault`` to the records and summarise, per scheme: success (overall,
    during and outside faults) and over time, latency and retries against the fault-free
    ``base`` run (same queries), stale answers served, packets the faults dropped, time
    to recover after each restart (first packet the node gets; first query from which
    ``streak`` in a row succeed) and load per replica."""
    assert sc.faults is not None
    width = sc.faults.bin
    df = df.copy()
    during = pd.Series(False, index=df.index)
    rel = pd.Series(0.0, index=df.index)
    for name, plan in plans.items():
        if plan is None:
            continue
        rows = df.scheme == name
        rel[rows] = df.sent_s[rows] - plan.origin
        during[rows] = np.array([plan.active_at(t) for t in df.sent_s[rows]], dtype=bool)
    df["during_fault"] = during
    out: dict[str, Any] = {"bin_s": width, "schemes": {}}
    for scheme, g in df.groupby("scheme", sort=False):
        plan = plans.get(str(scheme))
        ok = g[g.success]
        stale = g.cache_detail.map(lambda d: sum(v for k, v in json.loads(d).items()
                                                 if k.startswith("stale_")))
        times = rel[g.index]
        bins = (times // width).astype(int)
        timeline = [[round(float(b * width), 6), len(x), round(float(x.success.mean()), 6)]
                    for b, x in g.groupby(bins)]
        d = g[g.during_fault]
        entry: dict[str, Any] = {
            "queries": len(g),
            "success": round(float(g.success.mean()), 6),
            "queries_during_faults": len(d),
            "success_during_faults": round(float(d.success.mean()), 6) if len(d) else None,
            "success_outside_faults": round(float(g[~g.during_fault].success.mean()), 6)
            if (~g.during_fault).any() else None,
            "median_latency_ms": _q(ok.latency_ms, 0.5),
            "p95_latency_ms": _q(ok.latency_ms, 0.95),
            "mean_retries": round(float(g.retries.mean()), 6),
            "mean_timeouts": round(float(g.timeouts.mean()), 6),
            "stale_answers": int((stale > 0).sum()),
            "errors": {str(k): int(v) for k, v in g[~g.success].error.map(_error_kind)
                       .value_counts().items()},
            "timeline": timeline,
        }
        if base is not None:
            b = base[base.scheme == scheme].set_index("job")
            bok = b[b.success]
            entry["baseline"] = {
                "success": round(float(b.success.mean()), 6),
                "median_latency_ms": _q(bok.latency_ms, 0.5),
                "p95_latency_ms": _q(bok.latency_ms, 0.95),
                "mean_retries": round(float(b.retries.mean()), 6),
                "mean_round_trips": round(float(b.round_trips.mean()), 6),
            }
            both = g[g.success].set_index("job").join(
                bok[["latency_ms", "retries"]].add_suffix("_base"), how="inner")
            extra = both.latency_ms - both.latency_ms_base
            entry["extra_latency_ms"] = {"mean": _r(extra.mean()), "median": _q(extra, 0.5),
                                         "p95": _q(extra, 0.95)}
            entry["extra_retries"] = _r((both.retries - both.retries_base).mean())
            hit = both[both.during_fault]
            extra = hit.latency_ms - hit.latency_ms_base
            entry["extra_latency_during_faults_ms"] = {
                "mean": _r(extra.mean()), "median": _q(extra, 0.5), "p95": _q(extra, 0.95),
                "p99": _q(extra, 0.99), "max": _r(extra.max())}
            entry["success_drop"] = round(entry["baseline"]["success"] - entry["success"], 6)
        if plan is not None:
            entry["dropped_packets"] = dict(sorted(plan.drops.items()))
            mine = load[(load.scheme == scheme) & (load.rx_packets > 0)]
            entry["recovery"] = _recovery(plan, g, times, streak, set(mine.node))
        entry["load_by_replica"] = _replica_load(load[load.scheme == scheme])
        out["schemes"][str(scheme)] = entry
    return df, out


def _recovery(plan: FaultPlan, g: pd.DataFrame, times: pd.Series, streak: int,
              used: set[str]) -> list[dict]:
    restarts = [r for r in plan.recovery() if r["address"] in used]
    order = times.sort_values()
    success = g.success.reindex(order.index).tolist()
    when = order.tolist()
    for r in restarts:
        r["queries_ok_after_s"] = None
        for i, t in enumerate(when):
            if t >= r["restart_s"] and all(success[i:i + streak]) and i + streak <= len(when):
                r["queries_ok_after_s"] = round(t - r["restart_s"], 6)
                break
    # one row per fault event: the slowest of its targets
    merged: dict[tuple[int, float], dict] = {}
    for r in restarts:
        k = (r["fault"], r["restart_s"])
        m = merged.setdefault(k, {"fault": r["fault"], "down_s": round(r["down_s"], 6),
                                  "restart_s": round(r["restart_s"], 6), "nodes": 0,
                                  "first_packet_after_s": 0.0, "never_contacted": 0,
                                  "queries_ok_after_s": r["queries_ok_after_s"]})
        m["nodes"] += 1
        if r["first_packet_after_s"] is None:
            m["never_contacted"] += 1
        else:
            m["first_packet_after_s"] = max(m["first_packet_after_s"],
                                             r["first_packet_after_s"])
    return sorted(merged.values(), key=lambda m: (m["restart_s"], m["fault"]))


def _replica_load(load: pd.DataFrame) -> dict[str, int]:
    """Packets received per replica index (zone servers ranked by address; registries)."""
    out: Counter[str] = Counter()
    if load.empty:
        return {}
    servers = load[load.zone.fillna("") != ""]
    for _, zone in servers.groupby("zone"):
        ranked = sorted(_node_packets(zone),
                        key=lambda r: tuple(int(x) for x in r[0].split(".")))
        for i, (_node, rx) in enumerate(ranked):
            out[f"zone_replica_{i}"] += rx
    for node, rx in _node_packets(load[load.role == "registry"]):
        out[f"registry_{node}"] += rx
    return dict(sorted(out.items()))


def _node_packets(load: pd.DataFrame) -> list[tuple[str, int]]:
    """(address, packets received) per row of load records."""
    return [(str(node), int(rx)) for node, rx in zip(load["node"].tolist(),
                                                      load["rx_packets"].tolist(), strict=True)]


def _error_kind(error: str) -> str:
    text = str(error or "")
    return text.split(": ", 1)[-1] if text else "no tools"


def _q(series: pd.Series, q: float) -> float | None:
    return round(float(series.quantile(q)), 6) if len(series) else None


def _r(value: float) -> float | None:
    return None if pd.isna(value) else round(float(value), 6)
