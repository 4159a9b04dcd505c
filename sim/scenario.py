"""Scenario files: typed, frozen models validated before anything runs.

A scenario YAML says everything about a run: engine, seed, namespace, network and
placement, the schemes to compare (:mod:`sim.schemes`), the workload, cache TTLs, trust
policy, faults (:mod:`sim.faultspec`) and outputs. Unknown keys and wrong types are
rejected with one message per problem naming the file, the field and the problem
(:mod:`sim.errors`); :mod:`sim.loading` reads a file and resolves its relative paths.
"""

from __future__ import annotations

import ipaddress
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from nodes.agent.context import zone_name
from sim.catalog.engines import ENGINES
from sim.choices import OneOf
from sim.errors import did_you_mean
from sim.evalspec import TaxonomySpec
from sim.faultspec import FaultsSpec
from sim.overrides import set_dotted
from sim.schemes import DnsScheme, RegistryScheme, SchemeSpec, TrustSpec
from sim.spec import GridValue, PathText, PositiveSeconds, Seconds, Seed, Spec, WholeSeconds

Service = Literal["mcp", "a2a", "rest", "skill"]


class DelaySpec(Spec):
    """One-way delay of every link, drawn per packet. All values are **seconds**
    (``mean: 0.010`` is 10 ms)."""

    dist: Literal["constant", "normal", "lognormal", "empirical"] = Field(
        default="constant", description="distribution of the per-packet one-way delay")
    mean: Seconds = Field(default=0.010, description="seconds (0.010 = 10 ms)")
    std: Seconds = Field(default=0.0, description="seconds (normal, lognormal)")
    samples: tuple[Seconds, ...] = Field(default=(), description="seconds; drawn uniformly "
                                         "(empirical)")

    @model_validator(mode="after")
    def _check(self) -> DelaySpec:
        if self.dist == "empirical" and not self.samples:
            raise ValueError("samples: an empirical delay needs samples")
        return self


class LinkSpecModel(Spec):
    """Every link of the topology."""

    delay: DelaySpec = DelaySpec()
    loss: float = Field(default=0.0, ge=0.0, lt=1.0, description="probability a packet is lost "
                        "on a link (0.01 = 1 %)")
    bandwidth: float | None = Field(
        default=None, gt=0, description="bits per second; null = unlimited")


class ProcessingSpec(Spec):
    """Per-message processing time of nodes (seconds) in the simulation, or ``calibrated``:
    measured on this machine by a short simulated pre-run of the same plan (median cost of
    ``handle``/``receive`` per node kind; servers' semantic queries and resolvers' queries
    from agents apart), then used as fixed values."""

    model: Literal["fixed", "calibrated"] = Field(
        default="fixed", description="fixed: the values below; calibrated: measured here")
    server: Seconds = Field(default=50e-6, description="seconds per message at a server")
    server_semantic: Literal["index"] | Seconds | None = Field(
        default="index", description="seconds per query carrying the intent option (ranking; "
        "with a dense scorer, embedding the intent); index: server plus the search compute "
        "model's cost of ranking the server's items (nodes.searchcost, per scorer; its zone's "
        "children or tools, the most of any zone it serves); null = as server")
    resolver_stub: Seconds | None = Field(
        default=None, description="seconds per agent query at a resolver (it may embed the "
        "intent); null = as resolver")
    resolver: Seconds = Field(default=20e-6, description="seconds per message at a resolver")
    agent: Seconds = Field(default=0.0, description="seconds per message at an agent")
    registry: Literal["index"] | Seconds = Field(
        default="index", description="seconds a registry spends searching before it answers a "
        "search request (AgentDNS's discovery search, ANS's agent listing; not resolve, OCSP "
        "or capability lists), or index: the search compute model's cost of ranking the "
        "items the search scores (nodes.searchcost, per scorer; ANS's listing ranks nothing, "
        "its client ranks); searches run concurrently, so they do not queue behind each "
        "other; the live engine waits it without blocking; added to server")


class RogueSpec(Spec):
    """A rogue publisher: look-alike copies of popular tools, under the public branches
    (``public``: open registration) or inside a certified organisation's zone
    (``compromised``: that organisation's zone is taken over)."""

    tools: int = Field(default=20, ge=1, description="look-alike tools published")
    mode: Literal["public", "compromised"] = "public"
    org: str = Field(default="rogue", pattern=r"^[a-z0-9-]{1,63}$", description="the rogue "
                     "publisher's organisation label")
    victim_org: str | None = Field(default=None, description="compromised: whose zone (null: the "
                                   "first organisation zone)")


class NamespaceSpec(Spec):
    """The ``.tools`` tree: synthetic (branching ** depth zones) or a real catalogue."""

    source: Literal["synthetic", "catalog"] = "synthetic"
    tools: int = Field(default=2000, ge=1, description="synthetic: number of tools")
    branching: int = Field(default=6, ge=1, description="synthetic: child zones per zone")
    depth: int = Field(default=2, ge=1, le=8, description="synthetic: zone levels below tools.")
    orgs: int = Field(
        default=3, ge=0, description="certified organisation zones (hku.weather.tools)")
    org_tools: int = Field(default=5, ge=1, description="tools each organisation publishes")
    vocabulary: Literal["pseudo", "readable"] = Field(default="pseudo", description="synthetic: "
                                                      "pseudo-words, or readable domains, nouns "
                                                      "and verbs (forecast-rainfall)")
    catalog: PathText | None = Field(default=None, description="catalog: catalogue JSONL "
                                     "(relative to the scenario file)")
    queries: PathText | None = Field(default=None, description="catalog: queries JSONL (default: "
                                "queries.jsonl beside the catalogue)")
    limit: int | None = Field(
        default=None, ge=1, description="catalog: load at most this many tools")
    protocols: tuple[Service, ...] | None = Field(default=None, description="catalog: keep only "
                                                  "these services (null: all)")
    replicas: int = Field(default=1, ge=1, le=8, description="NS replicas (servers) per zone")
    scorer: Literal["bm25", "tfidf", "oracle", "dense"] = Field(
        default="bm25", description="how servers rank children and tools against the intent")
    taxonomy: TaxonomySpec | None = Field(
        default=None, description="catalog: build this tree (e.g. clustered, with centroids) "
        "instead "
        "of the catalogue's own categories; as an eval file's taxonomy")
    cache_dir: PathText | None = Field(default=None, description="dense: keep sentence "
                                       "embeddings on disk here (relative to where tooldns "
                                       "runs)")
    max_udp_size: int = Field(default=1232, ge=512, le=65535, description="bytes: the servers' "
                              "EDNS UDP payload limit (larger replies are truncated, TC)")
    cname_referral: bool = Field(default=True, description="intent-in-the-name answers (resolver "
                                 "mode qname) carry the next zone's delegation beside the "
                                 "CNAME (else resolvers ask for it: one more exchange per "
                                 "level when cold)")
    rogue: RogueSpec | None = Field(
        default=None, description="a rogue publisher's look-alike tools")
    dnssec: bool = Field(default=False, description="sign every zone (replies to DO queries carry "
                         "RRSIG/DS/DNSKEY)")
    aaaa: bool = Field(default=False, description="tool targets also get an AAAA record (ULA "
                       "fd74:6f6f:6c73::/96 + the IPv4 address), served beside A; agents of "
                       "mode qname ask for it too (the servers' glue stays IPv4)")
    allow_transfer: tuple[str, ...] = Field(default=(), description="networks or addresses "
                                            "allowed to transfer zones by AXFR from the live "
                                            "engine's servers, e.g. a secondary's (default: "
                                            "none, every transfer REFUSED)")

    @model_validator(mode="after")
    def _check(self) -> NamespaceSpec:
        if self.source == "catalog" and not self.catalog:
            raise ValueError("catalog: needed when source is 'catalog' (a catalogue JSONL path)")
        if self.taxonomy is not None and self.source != "catalog":
            raise ValueError("taxonomy: builds a tree over a catalogue (source: catalog)")
        if self.taxonomy is not None and self.taxonomy.centroids and self.scorer != "dense":
            raise ValueError("taxonomy.centroids: routing by centroids needs scorer: dense")
        if self.taxonomy is not None and self.taxonomy.labels == "llm":
            raise ValueError("taxonomy.labels: llm needs an LLM endpoint, which network "
                             "scenarios do not take (docs/llm.md)")
        for net in self.allow_transfer:
            ipaddress.ip_network(net, strict=False)  # ValueError: not a network or address
        return self


class NetworkSpec(Spec):
    """Where nodes sit and what links between them do (topologies: graphs, placement, links)."""

    topology: Literal["star", "tree", "waxman", "geometric", "file"] = "star"
    nodes: int = Field(
        default=16, ge=1, description="graph sites (routers) of generated topologies")
    file: PathText | None = Field(default=None, description="topology: file — a GML or "
                                  "GraphML path")
    params: dict[str, float] = Field(default={}, description="generator parameters (e.g. waxman "
                                     "alpha, beta)")
    link: LinkSpecModel = LinkSpecModel()
    placement: Literal["default", "random", "same-node"] = Field(
        default="default", description="how servers, resolvers and agents are put on sites")
    resolvers: int = Field(default=1, ge=1, description="recursive resolvers")
    agents: int = Field(
        default=4, ge=1, description="client agents (the workload is spread over them)")
    processing: ProcessingSpec = ProcessingSpec()
    mtu: int = Field(default=65536, ge=576, le=65536, description="link MTU for TCP segmenting "
                     "(65536 = loopback; 1500 = Ethernet)")

    @model_validator(mode="after")
    def _check(self) -> NetworkSpec:
        if self.topology == "file" and not self.file:
            raise ValueError("file: needed when topology is 'file' (a GML or GraphML path)")
        return self


class ArrivalSpec(Spec):
    """When queries are sent."""

    process: Literal["poisson", "closed", "trace"] = Field(
        default="poisson", description="open Poisson arrivals, closed loop per agent, or a trace")
    rate: float = Field(default=10.0, gt=0, description="queries per second (poisson)")
    think: Seconds = Field(default=1.0, description="seconds an agent waits between its queries "
                           "(closed)")
    trace: PathText | None = Field(default=None, description="trace: CSV with columns time,query")

    @model_validator(mode="after")
    def _check(self) -> ArrivalSpec:
        if self.process == "trace" and not self.trace:
            raise ValueError(
                "trace: needed when process is 'trace' (a CSV with columns time,query)")
        return self


class SplitSpec(Spec):
    """A seeded train/test split of the query pool, stratified by the ground-truth tool's
    zone (its leaf category in the catalogue's own tree), as the paper's 60/40 split."""

    part: Literal["test", "train"] = Field(
        default="test", description="which part the workload uses")
    test_fraction: float = Field(default=0.4, gt=0.0, lt=1.0, description="share of each stratum "
                                 "held out as the test part (paper: 0.4)")


class ChurnEvent(Spec):
    """One change to the published tools during the run (sim.build.churn): like a zone reload at
    the leaf servers (serial bumped, packet cache flushed) and an index update at the
    registries; resolvers and registry clients keep what they cached."""

    at: Seconds = Field(description="seconds of workload time when the change is made")
    action: Literal["add", "change", "remove"] = Field(
        description="add: a new tool (new SRV target and address); change: an existing "
        "tool's endpoint (address and port) moves; remove: a tool disappears")
    count: int = Field(default=1, ge=1, le=100, description="tools changed by this event (chosen "
                       "from the scenario seed)")
    zone: str | None = Field(default=None, description="the leaf zone changed (null: leaves drawn "
                             "from the seed)")


class ChurnProbes(Spec):
    """Discoveries of each changed tool's intent, made to see when the change shows."""

    interval: PositiveSeconds = Field(default=1.0, description="seconds between probes of "
                                      "one change")
    duration: PositiveSeconds = Field(default=60.0, description="seconds after the change that "
                                      "probes go on")
    before: Seconds = Field(default=5.0, description="seconds before the change of the first probe "
                            "(caches then hold the old state, as for an agent that used "
                            "the tool before); 0: probes start at the change")
    agent: int = Field(default=0, ge=0, description="index of the agent that sends the probes")


class ChurnSpec(Spec):
    """Tools added, changed and removed at leaf zones during a run, and probes measuring
    how long each change takes to show (every engine; not sharded runs)."""

    events: tuple[ChurnEvent, ...] = Field(min_length=1, description="the changes, any "
                                           "order")
    probes: ChurnProbes = ChurnProbes()


class WorkloadSpec(Spec):
    """The queries agents send: drawn from the catalogue's queries or generated."""

    source: Literal["auto", "file", "generated"] = Field(
        default="auto", description="auto: the catalogue's queries when there are some, else "
        "generated from tool descriptions")
    queries: int = Field(default=200, ge=1, description="queries issued per phase")
    pool: int | None = Field(default=None, ge=1, description="distinct queries drawn from")
    popularity: Literal["uniform", "zipf"] = "uniform"
    zipf_s: float = Field(default=1.0, gt=0, description="Zipf exponent (popularity: zipf)")
    arrival: ArrivalSpec = ArrivalSpec()
    phases: int = Field(default=1, ge=1, description="the workload repeated this many times (the "
                        "same queries; caches stay warm between phases)")
    gap: Seconds = Field(default=60.0, description="seconds between the end of one phase's "
                         "schedule and the next")
    services: tuple[Service, ...] | None = Field(default=None, description="only queries for these "
                                                 "services (null: all)")
    split: SplitSpec | None = Field(
        default=None, description="only one part of a seeded stratified "
                                    "train/test split of the query file (null: all queries)")
    churn: ChurnSpec | None = Field(default=None, description="tools added, changed and removed "
                                    "during the run, with probes (sim.build.churn; null: none)")


class CacheSpec(Spec):
    """TTLs (seconds) the zones publish, and the servers' caches. The resolvers' caches
    are per scheme (``cache``, ``query_mock``, ``warm``, ``serve_stale``)."""

    ns_ttl: WholeSeconds = Field(default=86_400, description="seconds: TTL of NS and glue records")
    srv_ttl: WholeSeconds = Field(
        default=300, description="seconds: TTL of tools' SRV (and TXT) records")
    a_ttl: WholeSeconds = Field(default=300, description="seconds: TTL of tools' A records")
    negative_ttl: WholeSeconds = Field(
        default=60, description="seconds: SOA minimum (NXDOMAIN, NODATA)")
    packet_cache: bool = Field(default=True, description="each server caches whole replies, keyed "
                               "on the query's bytes after its ID (replies are identical "
                               "either way; off: every query is scored and encoded)")
    packet_cache_size: int = Field(default=4096, ge=1, description="replies kept per server")
    packet_cache_bytes: int = Field(
        default=16 * 1024 * 1024, ge=4096, description="bytes of queries "
                                    "and replies kept per server")


class ScopesSpec(Spec):
    """RBAC scopes of the agents' sessions (nodes.agent.context.Scopes): a tool is visible when
    any scope grants it; answered tools outside them never enter the context."""

    user: tuple[str, ...] = Field(default=(), description="tool ids granted to the user")
    roles: tuple[str, ...] = Field(default=(), description="zone suffixes granted to the user's "
                                   "roles ('weather.tools.': every tool at or below it)")
    orgs: tuple[str, ...] = Field(default=(), description="organisations the user belongs to (a "
                                  "tool's org, e.g. of a certified zone hku.weather.tools.)")

    @field_validator("roles", "orgs")
    @classmethod
    def _names(cls, names: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        """DNS names, normalised as they are compared: case-folded, zones absolute."""
        return tuple(zone_name(n) if info.field_name == "roles" else n.strip().lower()
                     for n in names)

    @model_validator(mode="after")
    def _check(self) -> ScopesSpec:
        if not (self.user or self.roles or self.orgs):
            raise ValueError("scopes: grant at least one of user, roles, orgs (or drop "
                             "scopes for no RBAC)")
        for zone in self.roles:
            if zone != "tools." and not zone.endswith(".tools."):
                raise ValueError(f"roles: {zone!r} is not a zone under tools.")
        return self


class SessionSpec(Spec):
    """The agent session layer of seed 003 (nodes.agent.session): a search_tools meta-tool in
    front of each agent's discoveries, a session tool cache (hits send no packets), a
    loop guard, RBAC scopes and a fallback when too few tools survive. One session per
    agent. The registry fallback's cost is MODELLED (not carried by the engine)."""

    schemes: tuple[str, ...] = Field(default=(), description="ToolDNS schemes the sessions apply "
                                     "to (empty: every ToolDNS scheme)")
    capacity: int = Field(default=8, ge=1, description="discovered tools a session keeps bound "
                          "(always-include tools and the meta-tool do not count)")
    ttl: Seconds = Field(default=600.0, description="seconds since a tool's last use after which "
                         "it is evicted (first on overflow, then LRU)")
    always_include: tuple[str, ...] = Field(default=(), description="tool ids always in context, "
                                            "never evicted")
    min_tools: int = Field(default=1, ge=1, description="fewer tools than this in scope after a "
                           "discovery trigger the fallback")
    fallback: Literal["none", "wider", "registry"] = Field(
        default="none", description="wider: a second discovery with wider_k / wider_beam; "
        "registry: an AgentDNS marketplace search (modelled cost)")
    wider_k: int = Field(default=10, ge=1, le=255, description="K of the wider discovery")
    wider_beam: int | None = Field(default=None, ge=1, le=255, description="beam of the wider "
                                   "discovery, asked of the resolver in the intent option "
                                   "(version 1; a resolver walks at most its max_client_beam, "
                                   "16; the option modes only); null: the scheme's")
    guard_window: int = Field(default=20, ge=0, description="recent tool calls the loop guard "
                              "looks at (0: guard off)")
    guard_max_repeats: int = Field(default=5, ge=1, description="the same (tool, arguments) more "
                                   "than this many times in the window evicts the tool")
    guard_exempt: tuple[str, ...] = Field(default=(), description="tool ids the guard ignores")
    guard_period: PositiveSeconds | None = Field(default=None, description="seconds: also evict "
                                                 "a tool "
                                       "called with the same arguments more than "
                                       "guard_max_repeats times within this time (null: "
                                       "the window only)")
    scopes: ScopesSpec | None = Field(default=None, description="RBAC scopes (null: every tool "
                                      "visible)")

    @model_validator(mode="after")
    def _check(self) -> SessionSpec:
        if (self.guard_window and self.guard_period is None
                and self.guard_max_repeats >= self.guard_window):
            raise ValueError(f"guard_max_repeats: {self.guard_max_repeats} can never trip "
                             f"in a window of {self.guard_window} calls")
        return self


class AgentSpec(Spec):
    """What a client agent does when the resolver does not answer (nodes.agent.stub.StubAgent):
    it waits ``timeout`` seconds, then asks again, ``attempts`` times in all. Registry
    schemes' HTTP clients use the scheme's ``timeout`` × ``max_attempts`` (at least 1 s)
    per call instead."""

    timeout: PositiveSeconds = Field(default=5.0, description="seconds an agent waits for the "
                           "resolver's answer before asking again")
    attempts: int = Field(default=2, ge=1, le=16, description="queries per discovery (the first "
                          "and its retries)")
    session: SessionSpec | None = Field(default=None, description="the agent session layer "
                                        "(search_tools meta-tool, tool cache, loop guard, "
                                        "RBAC, fallback; null: off)")


class OutputSpec(Spec):
    """Where results go (``--out`` overrides ``dir``)."""

    dir: PathText | None = Field(default=None, description="output folder (default: "
                                 "results/<name>), relative to where tooldns runs")
    plots: bool = Field(default=True, description="write the standard PNG figures")


class SweepSpec(Spec):
    """A grid over dotted scenario fields, e.g. ``namespace.branching: [2, 4, 8]``."""

    grid: dict[str, list[GridValue]] = Field(description="dotted field -> values; every "
                                             "combination is one run")
    workers: int = Field(default=2, ge=1, description="points run at once (processes)")

    @field_validator("grid")
    @classmethod
    def _grid(cls, grid: dict[str, list[Any]]) -> dict[str, list[Any]]:
        if not grid:
            raise ValueError("the grid is empty")
        for key, values in grid.items():
            if not values:
                raise ValueError(f"'{key}' has no values")
        return grid


class RaySpec(Spec):
    """Ray engine: how zones are grouped into actors (see :mod:`sim.engines.ray`)."""

    placement: Literal["level", "org", "count"] = "level"
    zones_per_actor: int = Field(default=16, ge=1, description="zones per actor for 'count'")
    agent_actors: int = Field(default=1, ge=1, description="actors the agents are spread over")
    address: str | None = None  # a Ray cluster to join (default: a local instance)


class ShardSpec(Spec):
    """One simpy run sharded over Ray workers (see :mod:`sim.engines.shards`): resolvers split
    across ``workers`` shards, each agent with its resolver (``shard_by: agent``: agents
    split, each shard with its own copy of their resolvers), servers replicated per shard."""

    workers: int = Field(default=1, ge=1, description="shards (Ray actors); 1 = one process")
    shard_by: Literal["resolver", "agent"] = Field(
        default="resolver", description="resolver: resolvers split, agents follow (caches "
        "exact); agent: agents split, resolver caches and SRTT per shard (approximate)")
    address: str | None = None  # a Ray cluster to join (default: a local instance)


class MininetSpec(Spec):
    """Mininet engine: hosts per graph site or per node; kernel netem or user-space links."""

    hosts: Literal["site", "node"] = "site"
    netem: Literal["auto", "require", "off"] = Field(
        default="auto", description="auto: TCLink delays where the kernel has the netem qdisc, "
        "else user-space emulation; require: netem or an error (tooldns run --vm sets it); off: "
        "user-space emulation")
    pcap_dir: PathText | None = None  # tcpdump on every host interface: one pcap per host here


class EngineOptions(Spec):
    ray: RaySpec = RaySpec()
    mininet: MininetSpec = MininetSpec()
    shards: ShardSpec = ShardSpec()


class Scenario(Spec):
    """A whole experiment: what is built, what runs over it, what is compared."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.+-]+$", description="names the "
                      "run (default output folder results/<name>)")
    description: str = Field(default="", description="free text, kept with the results")
    engine: Annotated[str, OneOf(ENGINES)] = Field(
        default="simpy", description="simulation (simpy), loopback sockets (live), Ray actors, or "
        "Mininet hosts")
    engine_options: EngineOptions = EngineOptions()
    seed: Seed = Field(default=0, description="every random draw of the run derives from it")
    seeds: int = Field(default=1, ge=1, le=1000, description="independent replications, "
                       "seeds seed, seed+1, …: each a run of its own; tables give mean ± 95 % "
                       "CI over them and paired differences from the first scheme")
    duration: PositiveSeconds | None = Field(default=None, description="seconds: stop issuing "
                                             "queries "
                                   "after this")
    namespace: NamespaceSpec = NamespaceSpec()
    network: NetworkSpec = NetworkSpec()
    schemes: tuple[SchemeSpec, ...] = Field(default=(DnsScheme(name="tooldns"),),
                                            description="the discovery schemes compared")
    workload: WorkloadSpec = WorkloadSpec()
    agents: AgentSpec = AgentSpec()
    caches: CacheSpec = CacheSpec()
    trust: TrustSpec = TrustSpec()
    faults: FaultsSpec | None = Field(default=None, description="injected failures (null: none)")
    outputs: OutputSpec = OutputSpec()
    sweep: SweepSpec | None = Field(default=None, description="a grid of runs (tooldns sweep)")

    @model_validator(mode="after")
    def _schemes_fit(self) -> Scenario:
        """Scheme options that need a namespace option (checked here, not at build)."""
        for i, s in enumerate(self.schemes):
            if isinstance(s, DnsScheme) and s.dnssec and not self.namespace.dnssec:
                raise ValueError(f"schemes: scheme {i} ({s.name}) validates DNSSEC but the "
                                 f"zones are not signed (set namespace.dnssec: true)")
            if isinstance(s, DnsScheme) and s.send_embedding and self.namespace.scorer != "dense":
                raise ValueError(f"schemes: scheme {i} ({s.name}): send_embedding needs "
                                 f"namespace.scorer: dense")
            if isinstance(s, RegistryScheme) and s.kind == "mcp-registry" and self.workload.churn:
                raise ValueError(f"schemes: scheme {i} ({s.name}): churn is not modelled for "
                                 f"the MCP Registry (its entries are named after the "
                                 f"organisations' publications)")
            if isinstance(s, RegistryScheme) and s.index == "log":
                tx = self.namespace.taxonomy
                if s.kind != "agentdns":
                    raise ValueError(f"schemes: scheme {i} ({s.name}): index: log is an "
                                     f"AgentDNS search index ({s.kind} does not search)")
                if tx is None or tx.routing_log is None or self.namespace.scorer != "dense":
                    raise ValueError(f"schemes: scheme {i} ({s.name}): index: log needs a "
                                     f"query log (namespace.taxonomy.routing_log, "
                                     f"centroids: true) and namespace.scorer: dense")
        return self

    @model_validator(mode="after")
    def _seeds_fit(self) -> Scenario:
        if self.seed + self.seeds > 2**32:
            raise ValueError(f"seeds: seed {self.seed} + {self.seeds} replications passes "
                             f"2**32 - 1, the largest seed")
        if self.seeds > 1 and self.sweep is not None and "seed" in self.sweep.grid:
            raise ValueError("seeds: the sweep grid already varies seed; give one or the "
                             "other")
        return self

    @model_validator(mode="after")
    def _one_split(self) -> Scenario:
        tx = self.namespace.taxonomy
        if tx is not None and tx.routing_log is not None and self.workload.split is not None:
            raise ValueError("workload.split: namespace.taxonomy.routing_log already replays "
                             "only the test part of its split (the rest is the routing log)")
        return self

    @model_validator(mode="after")
    def _session_schemes(self) -> Scenario:
        session = self.agents.session
        if session is not None:  # sessions wrap DNS stub agents only
            by_name = {s.name: s for s in self.schemes}
            for name in session.schemes:
                if name not in by_name:
                    raise ValueError(f"agents: session.schemes: no scheme named {name!r}"
                                     + did_you_mean(name, by_name))
                if not isinstance(by_name[name], DnsScheme):
                    raise ValueError(f"agents: session.schemes: {name!r} is a "
                                     f"{by_name[name].kind} "
                                     f"registry scheme; sessions wrap ToolDNS agents only")
        return self

    @field_validator("schemes")
    @classmethod
    def _unique(cls, schemes: tuple[SchemeSpec, ...]) -> tuple[SchemeSpec, ...]:
        if not schemes:
            raise ValueError("at least one scheme is needed")
        names = [s.name for s in schemes]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"scheme names must be unique; repeated: {', '.join(dup)}")
        return schemes

    def dns_schemes(self) -> list[DnsScheme]:
        """The ToolDNS schemes, in order."""
        return [s for s in self.schemes if isinstance(s, DnsScheme)]

    def registry_schemes(self) -> list[RegistryScheme]:
        """The HTTP registry schemes, in order."""
        return [s for s in self.schemes if isinstance(s, RegistryScheme)]

    def with_overrides(self, overrides: dict[str, Any]) -> Scenario:
        """A copy with dotted fields replaced (validated again)."""
        data = self.model_dump(mode="json")
        for dotted, value in overrides.items():
            set_dotted(data, dotted, value)
        return type(self).model_validate(data)
