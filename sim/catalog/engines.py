"""The one list of engines: each name, where its code lives and what it can run.

A new engine is one module with a function ``(plan: RunPlan) -> EngineOutput`` plus one
entry here; nothing else in the project checks an engine's name (``Scenario.engine``
accepts the keys of :data:`ENGINES`). Modules are imported lazily so
that a simulation never loads asyncio, Ray or Mininet code.

What an engine runs is declared per feature (:data:`FEATURES`) as a :class:`Support`: how
exactly it agrees with the simulation (``exact``, ``statistical``) or why it cannot
(``no``: the note is the reason a refused run prints, :func:`sim.run.runner.check_engine`).
:data:`SHARDED` says the same of a simpy run split over Ray workers. The table in
``docs/engines.md`` is generated from both (``python3 -m sim.engines.matrix --write``);
``tests/sim/engines/test_matrix.py`` runs every cell.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, Literal, cast, get_args

Level = Literal["exact", "statistical", "no"]
Feature = Literal["registries", "faults", "capture", "dot", "sessions", "churn", "dense",
                  "shards", "drafts", "stock"]


@dataclass(frozen=True)
class Support:
    """How an engine runs one feature.

    ``exact``: per query, round trips, bytes and packets identical to the simulation (the
    run's other columns as the engine's own accounting gives them), but for what the note
    says the wall clock decides (:data:`WALL_CLOCK_ACKS`: whole pure ACKs on persistent
    connections, which a loaded machine adds; :data:`SIBLING_WALKS`: a walk delayed past
    its sibling's referral skips that query); ``statistical``: the results agree within a
    tolerance (success rates), not query by query; ``no``: refused before anything runs,
    with ``note`` as the reason. ``note`` is one line: for a supported feature, how it is
    done or what is approximate."""

    level: Level
    note: str

    def __post_init__(self) -> None:
        if self.level not in get_args(Level):
            raise ValueError(f"Support.level: {self.level!r} is not one of {get_args(Level)}")
        if not self.note or "\n" in self.note:
            raise ValueError("Support.note: one non-empty line")

    @property
    def ok(self) -> bool:
        """Whether the engine runs the feature at all."""
        return self.level != "no"


@dataclass(frozen=True)
class FeatureInfo:
    """A feature's name in the docs and what in a scenario (or on the command line) asks
    for it."""

    title: str
    asked_by: str


FEATURES: Mapping[Feature, FeatureInfo] = MappingProxyType({
    "registries": FeatureInfo("HTTP registries",
                              "schemes[].kind: agentdns | ans-v0 | mcp-registry"),
    "faults": FeatureInfo("fault schedules", "faults:"),
    "capture": FeatureInfo("packet capture", "tooldns run --capture"),
    "dot": FeatureInfo("DNS over TLS", "schemes[].upstream: tls"),
    "sessions": FeatureInfo("agent sessions", "agents.session"),
    "churn": FeatureInfo("tool churn", "workload.churn"),
    "dense": FeatureInfo("dense scorer", "namespace.scorer: dense"),
    "shards": FeatureInfo("sharding over Ray workers", "engine_options.shards"),
    "drafts": FeatureInfo("DNS-native drafts", "schemes[].kind: dns-aid | ans-v2 | dn-anr | "
                          "aid | dns-sd"),
    "stock": FeatureInfo("stock recursors", "schemes[].resolver: unbound | bind | "
                         "knot-resolver | pdns-recursor"),
})


@dataclass(frozen=True)
class EngineInfo:
    """One engine and its capabilities (what the run loop may ask of it)."""

    name: str
    entry: str  # "module:function", imported on first use: (plan) -> EngineOutput
    summary: str  # one line for ``--help`` and the docs
    virtual_time: bool  # simulated clock: the plan uses the real DNS port 53
    real_sockets: bool  # packets cross real sockets
    progress: bool  # reports finished discoveries as they end (progress bars)
    user_space_links: bool  # link delay and loss emulated in the socket adapters
    features: Mapping[Feature, Support]  # one entry per key of FEATURES
    # nodes listen on this machine's 127.0.0.0/8 (a run checks their ports are free first)
    loopback: bool = False

    def __post_init__(self) -> None:
        if set(self.features) != set(FEATURES):
            raise ValueError(f"EngineInfo({self.name!r}).features: need exactly "
                             f"{sorted(FEATURES)}, got {sorted(self.features)}")

    def support(self, feature: Feature) -> Support:
        """How this engine runs ``feature`` (a KeyError names an unknown feature)."""
        return self.features[feature]

    def can(self, feature: Feature) -> bool:
        """Whether this engine runs ``feature`` at all."""
        return self.features[feature].ok

    @property
    def shards(self) -> bool:
        """Whether a run on this engine can be sharded (``sim.engines.shards`` reads this)."""
        return self.can("shards")

    def load(self) -> Callable[..., Any]:
        """The engine's entry point, a :data:`sim.engines.base.Engine` (its module imported
        now). Typed loosely: the catalogue imports nothing of the engines, so that it stays
        light and the scenario models can read it without an import cycle."""
        module, function = self.entry.split(":")
        run: Callable[..., Any] = getattr(importlib.import_module(module), function)
        return run


def _features(**cells: Support) -> Mapping[Feature, Support]:
    return MappingProxyType({f: cells[f] for f in FEATURES})


EXACT: Final = "exact"
STATISTICAL: Final = "statistical"
NO: Final = "no"
#: in an exact cell's note: what the wall clock decides on persistent connections (Linux's
#: delayed-ACK timer, sim.accounting.keepalive_acks and dot_acks, compares gaps with 40 ms;
#: a loaded machine stretches them), so those bytes and packets may differ by whole ACKs
WALL_CLOCK_ACKS: Final = "a pure ACK whose gap is near the delayed-ACK timeout may differ"
#: in an exact cell's note: what the wall clock decides between a discovery's walks side by
#: side (a round's questions, sent together): a walk that a loaded host holds up by a round
#: trip finds the referral its sibling fetched in the resolver's cache and skips that query
SIBLING_WALKS: Final = ("a walk a loaded host delays by a round trip may find its sibling's "
                        "referral cached (fewer exchanges, the same servers)")
_NODE_FAULTS = ("each sending node's socket adapter applies the same FaultPlan (a down "
                "node's packets dropped, registry replicas' listeners closed and connections "
                "reset) at wall-clock times: success rates agree within a tolerance")
_REAL_TIME_CHURN = ("changes applied at their workload times on the wall clock: a query in "
                    "flight at a change may see either side of it")
_NOT_SHARDED = "a sharded run is the simulation split over Ray workers"
_STOCK_LATER = ("not yet: Ray's actors serve on this machine's own loopback, where port 53 "
                "at the glue addresses is not the run's")
_DRAFTS_REAL = ("the hosting servers on real sockets; each agent searches its own copy of the "
                f"mirror and asks the same questions; {SIBLING_WALKS}")

ENGINES: dict[str, EngineInfo] = {
    e.name: e
    for e in (
        EngineInfo(
            "simpy", "sim.engines.simpy:run_simpy", "discrete-event simulation in virtual time",
            virtual_time=True, real_sockets=False, progress=True, user_space_links=False,
            features=_features(
                registries=Support(EXACT, "HTTP/1.1 over modelled TCP and TLS 1.3 "
                                          "(sim.accounting.TcpModel, checked against capture)"),
                faults=Support(EXACT, "the reference: every packet checked against the "
                                      "FaultPlan in virtual time"),
                capture=Support(NO, "the simpy engine runs in virtual time: no packet crosses "
                                    "a wire (its byte accounting is the model)"),
                dot=Support(EXACT, "persistent TLS 1.3 connections modelled per resolver and "
                                   "server (handshake sizes from a real in-memory handshake)"),
                sessions=Support(EXACT, "the agents' session layer in virtual time"),
                churn=Support(EXACT, "changes applied at their workload times in virtual "
                                     "time"),
                dense=Support(EXACT, "the servers embed their tools with MiniLM in this "
                                     "process"),
                shards=Support(EXACT, "over Ray workers: per query exact while link delays "
                                      "do not change the walk; delay draws, queueing and "
                                      "latency approximated"),
                drafts=Support(EXACT, "the reference: the organisations' zones on their "
                                      "servers, the pipeline agents' rounds in virtual time"),
                stock=Support(NO, "a binary cannot run in virtual time: resolver_model "
                                  "iterates as it does (calibrated against it)"),
            )),
        EngineInfo(
            "live", "sim.engines.live:run_live", "real UDP/TCP sockets on loopback (asyncio)",
            virtual_time=False, real_sockets=True, progress=True, user_space_links=True,
            features=_features(
                registries=Support(EXACT, "real HTTP/1.1 over TCP and TLS 1.3 sockets on "
                                          "loopback, counted with the simulation's TCP "
                                          f"model; kept alive, {WALL_CLOCK_ACKS}"),
                faults=Support(STATISTICAL, _NODE_FAULTS),
                capture=Support(EXACT, "tcpdump on lo: UDP equals the accounting byte for "
                                       "byte; TCP differs by pure ACKs only"),
                dot=Support(EXACT, "real TLS 1.3 sockets, persistent connections per "
                                   f"resolver and server; {WALL_CLOCK_ACKS}"),
                sessions=Support(EXACT, "the same session layer in the agents"),
                churn=Support(STATISTICAL, _REAL_TIME_CHURN),
                dense=Support(EXACT, "the servers embed their tools with MiniLM in this "
                                     "process"),
                shards=Support(NO, _NOT_SHARDED),
                drafts=Support(EXACT, _DRAFTS_REAL),
                stock=Support(STATISTICAL, "the binary in the run's own network namespace "
                                           "(root), servers on port 53, its packets delayed "
                                           "where they arrive; records from what the "
                                           "servers saw, checked by capture"),
            ), loopback=True),
        EngineInfo(
            "ray", "sim.engines.ray:run_ray", "Ray actors, each serving nodes on real sockets",
            virtual_time=False, real_sockets=True, progress=False, user_space_links=True,
            features=_features(
                registries=Support(EXACT, "the registry served by an actor on real sockets, "
                                          f"counted as on live; kept alive, {WALL_CLOCK_ACKS}"),
                faults=Support(STATISTICAL, _NODE_FAULTS),
                capture=Support(EXACT, "the actors run on this machine's loopback: tcpdump "
                                       "on lo, as on live"),
                dot=Support(EXACT, "real TLS 1.3 sockets between the actors, as on live; "
                                   f"{WALL_CLOCK_ACKS}"),
                sessions=Support(EXACT, "the same session layer in the agents' actors"),
                churn=Support(STATISTICAL, _REAL_TIME_CHURN),
                dense=Support(EXACT, "the driver embeds tools and intents and ships the "
                                     "vectors: no actor loads the model"),
                shards=Support(NO, _NOT_SHARDED),
                drafts=Support(EXACT, _DRAFTS_REAL),
                stock=Support(NO, _STOCK_LATER),
            ), loopback=True),
        EngineInfo(
            "mininet", "sim.engines.mininet:run_mininet",
            "Mininet hosts in network namespaces over emulated links",
            virtual_time=False, real_sockets=True, progress=False, user_space_links=False,
            features=_features(
                registries=Support(EXACT, "the registry served by its host on real sockets, "
                                          f"counted as on live; kept alive, {WALL_CLOCK_ACKS}"),
                faults=Support(STATISTICAL, _NODE_FAULTS),
                capture=Support(EXACT, "tcpdump in every host's namespace (link egress and "
                                       "loopback), merged into one capture"),
                dot=Support(EXACT, "real TLS 1.3 sockets between the hosts, as on live; "
                                   f"{WALL_CLOCK_ACKS}"),
                sessions=Support(EXACT, "the same session layer in the agents' hosts"),
                churn=Support(STATISTICAL, _REAL_TIME_CHURN),
                dense=Support(EXACT, "the driver embeds tools and intents and ships the "
                                     "vectors: no host loads the model"),
                shards=Support(NO, _NOT_SHARDED),
                drafts=Support(EXACT, _DRAFTS_REAL),
                stock=Support(STATISTICAL, "the binary on its resolver's host, in the host's "
                                           "namespace; its packets delayed by netem, or on "
                                           "user-space links where they arrive; records "
                                           "from what the servers saw, checked by capture"),
            )),
    )
}

#: What a sharded run (simpy over Ray workers, ``engine_options.shards.workers`` > 1)
#: supports, feature by feature (``shards`` itself is the engines' cell).
SHARDED: Mapping[Feature, Support] = MappingProxyType({
    "registries": Support(EXACT, "the registry replicated in every shard"),
    "faults": Support(STATISTICAL, "every shard applies the same FaultPlan; its link-delay "
                                   "draws, hence timeouts and retries, are its own"),
    "capture": Support(NO, "a sharded run is the simulation, in virtual time: no packet "
                           "crosses a wire"),
    "dot": Support(EXACT, "connections numbered apart per shard; shard_by: resolver keeps "
                          "each resolver's connections in one shard (shard_by: agent: a "
                          "connection table per resolver copy, more handshakes)"),
    "sessions": Support(EXACT, "each agent's session runs in its shard; its per-job state is "
                               "merged back into the driver's agents"),
    "churn": Support(NO, "a sharded run does not apply tool changes: the shards' plans "
                         "carry no change schedule"),
    "dense": Support(EXACT, "each worker builds the dense servers per scheme (the model is "
                            "needed on every machine)"),
    "drafts": Support(EXACT, "each shard's agents search the mirror and resolve as in one "
                             "run"),
    "stock": Support(NO, "a sharded run is the simulation, in virtual time: no binary runs "
                         "there"),
})


def engine_info(name: str) -> EngineInfo:
    """The catalogue entry of ``name``; a :class:`ScenarioError` naming the choices if none."""
    from sim.errors import ScenarioError  # here: sim.errors loads the scheme models

    try:
        return ENGINES[name]
    except KeyError:
        raise ScenarioError(f"engine: unknown engine {name!r} "
                            f"({' | '.join(ENGINES)})") from None


def engines_with(capability: str) -> list[str]:
    """Names of the engines that run ``capability``: a feature of :data:`FEATURES` (level
    other than ``no``) or a boolean field of :class:`EngineInfo` (for error messages)."""
    if capability in FEATURES:
        feature = cast(Feature, capability)
        return [n for n, e in ENGINES.items() if e.features[feature].ok]
    return [n for n, e in ENGINES.items() if getattr(e, capability)]


def refusal(info: EngineInfo, feature: Feature, sharded: bool = False) -> str | None:
    """Why the engine ``info`` cannot run ``feature`` (in a sharded run: why a sharded run
    cannot, :data:`SHARDED`; ask for ``shards`` first), then where it runs; ``None`` when
    it can. The note is the catalogue's, word for word."""
    support = info.support(feature)
    if sharded and feature != "shards":
        if SHARDED[feature].ok:
            return None
        hint = ("run it unsharded: engine_options.shards.workers: 1" if support.ok
                else f"use {' or '.join(engines_with(feature))}")
        return f"{SHARDED[feature].note} ({hint})"
    if support.ok:
        return None
    able = engines_with(feature)
    return f"{support.note} (use {' or '.join(able)})" if able else support.note
