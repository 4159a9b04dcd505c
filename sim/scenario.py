"""Scenario files: typed, frozen models validated before anything runs.

A scenario YAML says everything about a run: engine, seed, namespace, network and
placement, the schemes to compare, the workload, cache TTLs, trust policy and outputs.
Unknown keys and wrong types are rejected with one message per problem naming the file,
the field and the problem (:class:`ScenarioError`). Relative input paths (catalogue,
queries, topology file, trace) are resolved against the scenario file's folder; the
output directory is relative to where the command runs, like ``--out``.
``resolved_yaml`` gives the fully defaulted scenario that is saved beside the results.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from nodes.dns.cache import DEFAULT_MAX_BYTES, DEFAULT_MAX_ENTRIES
from sim.evalspec import TaxonomySpec

Service = Literal["mcp", "a2a", "rest", "skill"]
Seconds = Annotated[float, Field(ge=0, description="seconds")]


class ScenarioError(ValueError):
    """A scenario file is unusable; the message names the file, the field and the problem."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DelaySpec(_Model):
    """One-way delay of every link, drawn per packet. All values are **seconds**
    (``mean: 0.010`` is 10 ms)."""

    dist: Literal["constant", "normal", "lognormal", "empirical"] = Field(
        "constant", description="distribution of the per-packet one-way delay")
    mean: Seconds = Field(0.010, description="seconds (0.010 = 10 ms)")
    std: Seconds = Field(0.0, description="seconds (normal, lognormal)")
    samples: tuple[Seconds, ...] = Field((), description="seconds; drawn uniformly "
                                         "(empirical)")

    @model_validator(mode="after")
    def _check(self) -> DelaySpec:
        if self.dist == "empirical" and not self.samples:
            raise ValueError("samples: an empirical delay needs samples")
        return self


class LinkSpecModel(_Model):
    """Every link of the topology."""

    delay: DelaySpec = DelaySpec()
    loss: float = Field(0.0, ge=0.0, lt=1.0, description="probability a packet is lost "
                        "on a link (0.01 = 1 %)")
    bandwidth: float | None = Field(None, gt=0, description="bits per second; null = unlimited")


class ProcessingSpec(_Model):
    """Per-message processing time of nodes (seconds) in the simulation, or ``calibrated``:
    measured on this machine by a short simulated pre-run of the same plan (median cost of
    ``handle``/``receive`` per node kind; servers' semantic queries and resolvers' queries
    from agents apart), then used as fixed values."""

    model: Literal["fixed", "calibrated"] = Field(
        "fixed", description="fixed: the values below; calibrated: measured here")
    server: Seconds = Field(50e-6, description="seconds per message at a server")
    server_semantic: Seconds | None = Field(
        None, description="seconds per query carrying the intent option (ranking; with a "
        "dense scorer, embedding the intent); null = as server")
    resolver_stub: Seconds | None = Field(
        None, description="seconds per agent query at a resolver (it may embed the "
        "intent); null = as resolver")
    resolver: Seconds = Field(20e-6, description="seconds per message at a resolver")
    agent: Seconds = Field(0.0, description="seconds per message at an agent")
    registry: Seconds = Field(0.0, description="seconds a registry spends searching before "
                              "it answers a search request (AgentDNS's discovery search, "
                              "ANS's agent listing; not resolve, OCSP or capability lists): "
                              "modelled, e.g. embedding or LLM search; searches run "
                              "concurrently, so they do not queue behind each other; the "
                              "live engine waits it without blocking; added to server")


class RogueSpec(_Model):
    """A rogue publisher: look-alike copies of popular tools, under the public branches
    (``public``: open registration) or inside a certified organisation's zone
    (``compromised``: that organisation's zone is taken over)."""

    tools: int = Field(20, ge=1, description="look-alike tools published")
    mode: Literal["public", "compromised"] = "public"
    org: str = Field("rogue", pattern=r"^[a-z0-9-]{1,63}$", description="the rogue "
                     "publisher's organisation label")
    victim_org: str | None = Field(None, description="compromised: whose zone (null: the "
                                   "first organisation zone)")


class NamespaceSpec(_Model):
    """The ``.tools`` tree: synthetic (branching ** depth zones) or a real catalogue."""

    source: Literal["synthetic", "catalog"] = "synthetic"
    tools: int = Field(2000, ge=1, description="synthetic: number of tools")
    branching: int = Field(6, ge=1, description="synthetic: child zones per zone")
    depth: int = Field(2, ge=1, le=8, description="synthetic: zone levels below tools.")
    orgs: int = Field(3, ge=0, description="certified organisation zones (hku.weather.tools)")
    org_tools: int = Field(5, ge=1, description="tools each organisation publishes")
    catalog: str | None = Field(None, description="catalog: catalogue JSONL (relative to "
                                "the scenario file)")
    queries: str | None = Field(None, description="catalog: queries JSONL (default: "
                                "queries.jsonl beside the catalogue)")
    limit: int | None = Field(None, ge=1, description="catalog: load at most this many tools")
    protocols: tuple[Service, ...] | None = Field(None, description="catalog: keep only "
                                                  "these services (null: all)")
    replicas: int = Field(1, ge=1, le=8, description="NS replicas (servers) per zone")
    scorer: Literal["bm25", "tfidf", "oracle", "dense"] = Field(
        "bm25", description="how servers rank children and tools against the intent")
    taxonomy: TaxonomySpec | None = Field(
        None, description="catalog: build this tree (e.g. clustered, with centroids) instead "
        "of the catalogue's own categories; as an eval file's taxonomy")
    cache_dir: str | None = Field(None, description="dense: keep sentence embeddings on "
                                  "disk here (relative to where tooldns runs)")
    max_udp_size: int = Field(1232, ge=512, le=65535, description="bytes: the servers' "
                              "EDNS UDP payload limit (larger replies are truncated, TC)")
    cname_referral: bool = Field(True, description="intent-in-the-name answers (resolver "
                                 "mode qname) carry the next zone's delegation beside the "
                                 "CNAME (else resolvers ask for it: one more exchange per "
                                 "level when cold)")
    rogue: RogueSpec | None = Field(None, description="a rogue publisher's look-alike tools")
    dnssec: bool = Field(False, description="sign every zone (replies to DO queries carry "
                         "RRSIG/DS/DNSKEY)")
    aaaa: bool = Field(False, description="tool targets also get an AAAA record (ULA "
                       "fd74:6f6f:6c73::/96 + the IPv4 address), served beside A; agents of "
                       "mode qname ask for it too (the servers' glue stays IPv4)")

    @model_validator(mode="after")
    def _check(self) -> NamespaceSpec:
        if self.source == "catalog" and not self.catalog:
            raise ValueError("catalog: needed when source is 'catalog' (a catalogue JSONL path)")
        if self.taxonomy is not None and self.source != "catalog":
            raise ValueError("taxonomy: builds a tree over a catalogue (source: catalog)")
        if self.taxonomy is not None and self.taxonomy.centroids and self.scorer != "dense":
            raise ValueError("taxonomy.centroids: routing by centroids needs scorer: dense")
        return self


class NetworkSpec(_Model):
    """Where nodes sit and what links between them do (topologies.network)."""

    topology: Literal["star", "tree", "waxman", "geometric", "file"] = "star"
    nodes: int = Field(16, ge=1, description="graph sites (routers) of generated topologies")
    file: str | None = Field(None, description="topology: file — a GML or GraphML path")
    params: dict[str, float] = Field({}, description="generator parameters (e.g. waxman "
                                     "alpha, beta)")
    link: LinkSpecModel = LinkSpecModel()
    placement: Literal["default", "random", "same-node"] = Field(
        "default", description="how servers, resolvers and agents are put on sites")
    resolvers: int = Field(1, ge=1, description="recursive resolvers")
    agents: int = Field(4, ge=1, description="client agents (the workload is spread over them)")
    processing: ProcessingSpec = ProcessingSpec()
    mtu: int = Field(65536, ge=576, le=65536, description="link MTU for TCP segmenting "
                     "(65536 = loopback; 1500 = Ethernet)")

    @model_validator(mode="after")
    def _check(self) -> NetworkSpec:
        if self.topology == "file" and not self.file:
            raise ValueError("file: needed when topology is 'file' (a GML or GraphML path)")
        return self


class TrustSpec(_Model):
    """Which tools an agent accepts (:mod:`nodes.trust`): ``open`` (the public entry,
    anything), ``org`` (start at one organisation's zone), ``allowlist`` (walk only the
    zones of ``orgs``), ``certified`` (walk only certified organisation zones),
    ``public-then-certified`` (walk the public entry, keep only tools of certified zones,
    fall back to the certified zones when none is left)."""

    policy: Literal["open", "org", "allowlist", "certified", "public-then-certified"] = "open"
    org: str | None = Field(None, description="org: the organisation trusted")
    orgs: tuple[str, ...] = Field((), description="allowlist: the organisations trusted")

    @model_validator(mode="after")
    def _check(self) -> TrustSpec:
        if self.policy == "org" and not self.org:
            raise ValueError("org: needed when policy is 'org' (the organisation to trust)")
        if self.policy == "allowlist" and not self.orgs:
            raise ValueError("orgs: needed when policy is 'allowlist' (organisations trusted)")
        return self


class SchemeSpec(_Model):
    """One discovery scheme to compare; every scheme replays the same workload."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.+-]+$", description="the "
                      "scheme's label in tables (unique; --set schemes.NAME.k=1)")
    kind: Literal["tooldns", "agentdns", "ans"] = Field(
        "tooldns", description="ToolDNS resolver walk, or an HTTP registry baseline")
    k: int = Field(3, ge=0, le=255, description="top-K children or tools each server "
                   "returns (0 = all: plain DNS, no pruning)")
    beam: int = Field(1, ge=1, description="branches explored per level")
    search: Literal["split", "global"] = Field(
        "split", description="keep the beam per branch (split, Algorithm 1) or the best B "
        "of each level over all zones (global; needs the servers' scores)")
    merge: Literal["round-robin", "score"] = Field(
        "round-robin", description="order the leaves' tools round-robin or by score")
    send_embedding: bool = Field(False, description="send the intent's embedding with "
                                 "every semantic query (namespace.scorer: dense)")
    mode: Literal["aware", "strip", "pass-through", "qname"] = Field(
        "aware", description="resolver behaviour: aware (walks cursors with the intent "
        "option), strip / pass-through (unmodified resolvers dropping or forwarding the "
        "option), qname (unmodified resolver, the intent carried in the query name and the "
        "servers' CNAME chain followed: the deployable design)")
    cache: bool = Field(True, description="the resolver caches referrals and answers")
    query_mock: bool = Field(True, description="the resolver answers repeated intents "
                             "from cache (per intent text)")
    warm: bool = Field(False, description="walk every service once before the workload "
                       "(a warmed cache; with k: 0 the paper's 'K=0 warmed')")
    timeout: float = Field(0.5, gt=0, description="seconds the resolver waits for a server "
                           "before retrying")
    max_attempts: int = Field(4, ge=1, description="tries per upstream question")
    keepalive: bool = Field(False, description="registries: one connection per agent kept "
                            "open (else a new one per query)")
    tls: bool = Field(False, description="registries: HTTPS (TLS 1.3) with a CA made for "
                      "the run")
    resolve: bool = Field(False, description="agentdns: also call the resolve endpoint for "
                          "the first hit")
    resolve_top: int = Field(1, ge=1, description="ans: agents resolved (one signed answer "
                             "each)")
    verify: bool = Field(True, description="ans: verify certificate chain and signatures")
    revocation: bool = Field(False, description="ans: OCSP-style check of the registry "
                             "certificate (cached)")
    replicas: int = Field(1, ge=1, le=8, description="registries: replicas behind one name "
                          "(clients fail over)")
    selection: Literal["srtt", "random"] = Field(
        "srtt", description="tooldns: how the resolver picks among a zone's servers")
    srtt_decay: float = Field(1.0, gt=0, le=1, description="factor applied to the SRTT of "
                              "replicas not chosen (BIND-style; 1 = never decay)")
    serve_stale: bool = Field(False, description="serve expired data when servers fail "
                              "(RFC 8767)")
    stale_ttl: int = Field(86_400, ge=0, description="seconds past expiry stale data may "
                           "be served")
    trust: TrustSpec | None = Field(None, description="overrides the scenario's trust "
                                    "policy for this scheme")
    dnssec: bool = Field(False, description="set DO and validate the chain of trust "
                         "(needs namespace.dnssec)")
    cache_max_entries: int = Field(DEFAULT_MAX_ENTRIES, ge=1, description="items the "
                                   "resolver's cache holds (one LRU over all its tables)")
    cache_max_bytes: int = Field(DEFAULT_MAX_BYTES, ge=4096, description="bytes (estimated "
                                 "with sys.getsizeof) the resolver's cache may hold")
    max_clients: int = Field(10_000, ge=1, description="stub queries a resolver works on at "
                             "once")
    upstream: Literal["udp", "tls"] = Field(
        "udp", description="tooldns: how the resolver queries the authoritative servers: UDP "
        "(TC → TCP) or DNS over TLS (RFC 7858, port 853) on persistent connections, one per "
        "server (simpy and live engines)")
    upstream_idle: float = Field(10.0, gt=0, description="upstream tls: seconds a connection "
                                 "may stay idle before the resolver closes it")
    upstream_connections: int = Field(64, ge=1, description="upstream tls: connections a "
                                      "resolver keeps open (the one idle longest is closed "
                                      "to open another)")

    @model_validator(mode="after")
    def _resolver_only(self) -> SchemeSpec:
        if self.kind == "tooldns" and self.replicas != 1:
            raise ValueError("replicas: applies to registry schemes; zones take "
                             "namespace.replicas")
        if self.kind != "tooldns":
            for name in ("serve_stale", "dnssec"):
                if getattr(self, name):
                    raise ValueError(f"{name}: applies to tooldns schemes only")
            if self.upstream != "udp":
                raise ValueError("upstream: applies to tooldns schemes only (registries: tls)")
        if self.mode == "qname":  # a stock resolver follows one CNAME chain, no option
            if self.k == 0:
                raise ValueError("k: mode qname needs K ≥ 1 (one CNAME chain to a leaf, "
                                 "its top-K tools)")
            for name, default in (("warm", False), ("beam", 1), ("search", "split"),
                                  ("merge", "round-robin"), ("send_embedding", False)):
                if getattr(self, name) != default:
                    raise ValueError(f"{name}: does not apply to mode qname (a stock "
                                     f"resolver following one CNAME chain)")
        return self

    @model_validator(mode="after")
    def _registry_only(self) -> SchemeSpec:
        if self.kind == "tooldns":
            for name in ("keepalive", "tls", "resolve", "revocation"):
                if getattr(self, name):
                    raise ValueError(f"{name}: applies to registry schemes (kind agentdns "
                                     f"or ans), not tooldns")
        elif (self.warm or self.mode != "aware" or self.beam != 1 or self.search != "split"
              or self.merge != "round-robin" or self.send_embedding):
            raise ValueError("kind: warm, mode, beam, search, merge and send_embedding apply "
                             "to tooldns schemes only")
        return self


class ArrivalSpec(_Model):
    """When queries are sent."""

    process: Literal["poisson", "closed", "trace"] = Field(
        "poisson", description="open Poisson arrivals, closed loop per agent, or a trace")
    rate: float = Field(10.0, gt=0, description="queries per second (poisson)")
    think: Seconds = Field(1.0, description="seconds an agent waits between its queries "
                           "(closed)")
    trace: str | None = Field(None, description="trace: CSV with columns time,query")

    @model_validator(mode="after")
    def _check(self) -> ArrivalSpec:
        if self.process == "trace" and not self.trace:
            raise ValueError(
                "trace: needed when process is 'trace' (a CSV with columns time,query)")
        return self


class SplitSpec(_Model):
    """A seeded train/test split of the query pool, stratified by the ground-truth tool's
    zone (its leaf category in the catalogue's own tree), as the paper's 60/40 split."""

    part: Literal["test", "train"] = Field("test", description="which part the workload uses")
    test_fraction: float = Field(0.4, gt=0.0, lt=1.0, description="share of each stratum "
                                 "held out as the test part (paper: 0.4)")


class ChurnEvent(_Model):
    """One change to the published tools during the run (sim.build.churn): like a zone reload at
    the leaf servers (serial bumped, packet cache flushed) and an index update at the
    registries; resolvers and registry clients keep what they cached."""

    at: Seconds = Field(description="seconds of workload time when the change is made")
    action: Literal["add", "change", "remove"] = Field(
        description="add: a new tool (new SRV target and address); change: an existing "
        "tool's endpoint (address and port) moves; remove: a tool disappears")
    count: int = Field(1, ge=1, le=100, description="tools changed by this event (chosen "
                       "from the scenario seed)")
    zone: str | None = Field(None, description="the leaf zone changed (null: leaves drawn "
                             "from the seed)")


class ChurnProbes(_Model):
    """Discoveries of each changed tool's intent, made to see when the change shows."""

    interval: float = Field(1.0, gt=0, description="seconds between probes of one change")
    duration: float = Field(60.0, gt=0, description="seconds after the change that probes "
                            "go on")
    before: Seconds = Field(5.0, description="seconds before the change of the first probe "
                            "(caches then hold the old state, as for an agent that used "
                            "the tool before); 0: probes start at the change")
    agent: int = Field(0, ge=0, description="index of the agent that sends the probes")


class ChurnSpec(_Model):
    """Tools added, changed and removed at leaf zones during a run, and probes measuring
    how long each change takes to show (simpy and live engines)."""

    events: tuple[ChurnEvent, ...] = Field(min_length=1, description="the changes, any "
                                           "order")
    probes: ChurnProbes = ChurnProbes()


class WorkloadSpec(_Model):
    """The queries agents send: drawn from the catalogue's queries or generated."""

    source: Literal["auto", "file", "generated"] = Field(
        "auto", description="auto: the catalogue's queries when there are some, else "
        "generated from tool descriptions")
    queries: int = Field(200, ge=1, description="queries issued per phase")
    pool: int | None = Field(None, ge=1, description="distinct queries drawn from")
    popularity: Literal["uniform", "zipf"] = "uniform"
    zipf_s: float = Field(1.0, gt=0, description="Zipf exponent (popularity: zipf)")
    arrival: ArrivalSpec = ArrivalSpec()
    phases: int = Field(1, ge=1, description="the workload repeated this many times (the "
                        "same queries; caches stay warm between phases)")
    gap: Seconds = Field(60.0, description="seconds between the end of one phase's "
                         "schedule and the next")
    services: tuple[Service, ...] | None = Field(None, description="only queries for these "
                                                 "services (null: all)")
    split: SplitSpec | None = Field(None, description="only one part of a seeded stratified "
                                    "train/test split of the query file (null: all queries)")
    churn: ChurnSpec | None = Field(None, description="tools added, changed and removed "
                                    "during the run, with probes (sim.build.churn; null: none)")


class CacheSpec(_Model):
    """TTLs (seconds) the zones publish, and the servers' caches. The resolvers' caches
    are per scheme (``cache``, ``query_mock``, ``warm``, ``serve_stale``)."""

    ns_ttl: int = Field(86_400, ge=0, description="seconds: TTL of NS and glue records")
    srv_ttl: int = Field(300, ge=0, description="seconds: TTL of tools' SRV (and TXT) records")
    a_ttl: int = Field(300, ge=0, description="seconds: TTL of tools' A records")
    negative_ttl: int = Field(60, ge=0, description="seconds: SOA minimum (NXDOMAIN, NODATA)")
    packet_cache: bool = Field(True, description="each server caches whole replies, keyed "
                               "on the query's bytes after its ID (replies are identical "
                               "either way; off: every query is scored and encoded)")
    packet_cache_size: int = Field(4096, ge=1, description="replies kept per server")
    packet_cache_bytes: int = Field(16 * 1024 * 1024, ge=4096, description="bytes of queries "
                                    "and replies kept per server")


FaultKind = Literal["down", "slow", "lossy", "delay", "partition"]
_SELECTOR = (r"^(\*|servers|registry(#\d+)?|resolvers|agents|resolver:\d+|agent:\d+|replica:\d+|"
             r"address:[0-9.]+|zone:[a-z0-9._-]+(#\d+)?|org:[a-z0-9-]+(#\d+)?|"
             r"role:(root|tld|intermediate|leaf)(#\d+)?)$")


class FaultSpec(_Model):
    """One fault (see :mod:`sim.build.faults`): from ``at`` for ``duration`` seconds of workload
    time (null: to the end), or, with ``rate``, failures of each target arriving as a
    Poisson process (per second) from ``at`` on, each lasting an exponential time of mean
    ``duration``. ``down`` crashes a server or registry replica (restart at the end);
    ``slow`` adds ``delay`` to everything the target sends; ``lossy`` drops what it sends
    or receives with probability ``loss``; ``delay`` and ``partition`` act on the links
    between ``target`` and ``peer`` (both directions)."""

    kind: FaultKind
    target: str = Field(pattern=_SELECTOR, description="selector: servers, zone:NAME, "
                        "role:leaf#0, resolver:0, registry, address:IP, ...")
    peer: str = Field("*", pattern=_SELECTOR, description="delay/partition: the other side")
    at: Seconds = Field(0.0, description="seconds of workload time the fault starts")
    duration: Seconds | None = Field(None, description="seconds it lasts (null: to the end); "
                                     "with rate: mean seconds of each failure")
    rate: float | None = Field(None, gt=0, description="failures per second of each target "
                               "(a Poisson process from at on)")
    delay: Seconds = Field(0.0, description="seconds added (slow, delay)")
    loss: float = Field(0.0, ge=0.0, le=1.0, description="probability of loss (lossy)")

    @model_validator(mode="after")
    def _check(self) -> FaultSpec:
        if self.kind in ("slow", "delay") and self.delay <= 0:
            raise ValueError(f"delay: a '{self.kind}' fault needs delay > 0 (seconds)")
        if self.kind == "lossy" and self.loss <= 0:
            raise ValueError("loss: a 'lossy' fault needs loss > 0")
        if self.kind == "partition" and self.peer == "*":
            raise ValueError("peer: a partition needs the other side (a selector, not '*')")
        if self.rate is not None and not self.duration:
            raise ValueError("duration: a random fault process (rate) needs the mean "
                             "duration of each failure")
        return self


class FaultsSpec(_Model):
    """The fault schedule, plus what to measure against."""

    events: tuple[FaultSpec, ...] = Field(min_length=1)
    baseline: bool = Field(True, description="also run every scheme fault-free and report "
                           "the difference")
    bin: float = Field(1.0, gt=0, description="seconds per bin of success over time")
    horizon: Seconds | None = Field(None, description="seconds: random processes are drawn "
                                    "up to here (null: the last scheduled query plus 60 s)")


class ScopesSpec(_Model):
    """RBAC scopes of the agents' sessions (nodes.agent.session.Scopes): a tool is visible when
    any scope grants it; answered tools outside them never enter the context."""

    user: tuple[str, ...] = Field((), description="tool ids granted to the user")
    roles: tuple[str, ...] = Field((), description="zone suffixes granted to the user's "
                                   "roles ('weather.tools.': every tool at or below it)")
    orgs: tuple[str, ...] = Field((), description="organisations the user belongs to (a "
                                  "tool's org, e.g. of a certified zone hku.weather.tools.)")

    @model_validator(mode="after")
    def _check(self) -> ScopesSpec:
        if not (self.user or self.roles or self.orgs):
            raise ValueError("scopes: grant at least one of user, roles, orgs (or drop "
                             "scopes for no RBAC)")
        for zone in self.roles:
            if not zone.rstrip(".").endswith("tools"):
                raise ValueError(f"roles: {zone!r} is not a zone under tools.")
        return self


class SessionSpec(_Model):
    """The agent session layer of seed 003 (nodes.agent.session): a search_tools meta-tool in
    front of each agent's discoveries, a session tool cache (hits send no packets), a
    loop guard, RBAC scopes and a fallback when too few tools survive. One session per
    agent. The registry fallback's cost is MODELLED (not carried by the engine)."""

    schemes: tuple[str, ...] = Field((), description="ToolDNS schemes the sessions apply "
                                     "to (empty: every ToolDNS scheme)")
    capacity: int = Field(8, ge=1, description="discovered tools a session keeps bound "
                          "(always-include tools and the meta-tool do not count)")
    ttl: Seconds = Field(600.0, description="seconds since a tool's last use after which "
                         "it is evicted (first on overflow, then LRU)")
    always_include: tuple[str, ...] = Field((), description="tool ids always in context, "
                                            "never evicted")
    min_tools: int = Field(1, ge=1, description="fewer tools than this in scope after a "
                           "discovery trigger the fallback")
    fallback: Literal["none", "wider", "registry"] = Field(
        "none", description="wider: a second discovery with wider_k / wider_beam; "
        "registry: an AgentDNS marketplace search (modelled cost)")
    wider_k: int = Field(10, ge=1, le=255, description="K of the wider discovery")
    wider_beam: int | None = Field(None, ge=1, description="beam of the wider discovery "
                                   "(null: the scheme's)")
    guard_window: int = Field(20, ge=0, description="recent tool calls the loop guard "
                              "looks at (0: guard off)")
    guard_max_repeats: int = Field(5, ge=1, description="the same (tool, arguments) more "
                                   "than this many times in the window evicts the tool")
    guard_exempt: tuple[str, ...] = Field((), description="tool ids the guard ignores")
    guard_period: float | None = Field(None, gt=0, description="seconds: also evict a tool "
                                       "called with the same arguments more than "
                                       "guard_max_repeats times within this time (null: "
                                       "the window only)")
    scopes: ScopesSpec | None = Field(None, description="RBAC scopes (null: every tool "
                                      "visible)")

    @model_validator(mode="after")
    def _check(self) -> SessionSpec:
        if (self.guard_window and self.guard_period is None
                and self.guard_max_repeats >= self.guard_window):
            raise ValueError(f"guard_max_repeats: {self.guard_max_repeats} can never trip "
                             f"in a window of {self.guard_window} calls")
        return self


class AgentSpec(_Model):
    """What a client agent does when the resolver does not answer (nodes.agent.stub.StubAgent):
    it waits ``timeout`` seconds, then asks again, ``attempts`` times in all. Registry
    schemes' HTTP clients use the scheme's ``timeout`` × ``max_attempts`` (at least 1 s)
    per call instead."""

    timeout: float = Field(5.0, gt=0, description="seconds an agent waits for the "
                           "resolver's answer before asking again")
    attempts: int = Field(2, ge=1, le=16, description="queries per discovery (the first "
                          "and its retries)")
    session: SessionSpec | None = Field(None, description="the agent session layer "
                                        "(search_tools meta-tool, tool cache, loop guard, "
                                        "RBAC, fallback; null: off)")


class OutputSpec(_Model):
    """Where results go (``--out`` overrides ``dir``)."""

    dir: str | None = Field(None, description="output folder (default: results/<name>), "
                            "relative to where tooldns runs")
    plots: bool = Field(True, description="write the standard PNG figures")


class SweepSpec(_Model):
    """A grid over dotted scenario fields, e.g. ``namespace.branching: [2, 4, 8]``."""

    grid: dict[str, list[Any]] = Field(description="dotted field -> values; every "
                                       "combination is one run")
    workers: int = Field(2, ge=1, description="points run at once (processes)")

    @field_validator("grid")
    @classmethod
    def _grid(cls, grid: dict[str, list[Any]]) -> dict[str, list[Any]]:
        if not grid:
            raise ValueError("the grid is empty")
        for key, values in grid.items():
            if not values:
                raise ValueError(f"'{key}' has no values")
        return grid


class RaySpec(_Model):
    """Ray engine: how zones are grouped into actors (see :mod:`sim.engines.ray`)."""

    placement: Literal["level", "org", "count"] = "level"
    zones_per_actor: int = Field(16, ge=1, description="zones per actor for 'count'")
    agent_actors: int = Field(1, ge=1, description="actors the agents are spread over")
    address: str | None = None  # a Ray cluster to join (default: a local instance)


class ShardSpec(_Model):
    """One simpy run sharded over Ray workers (see :mod:`sim.engines.shards`): resolvers split
    across ``workers`` shards, each agent with its resolver, servers replicated per shard."""

    workers: int = Field(1, ge=1, description="shards (Ray actors); 1 = one process")
    address: str | None = None  # a Ray cluster to join (default: a local instance)


class MininetSpec(_Model):
    """Mininet engine: hosts per graph site or per node; kernel netem or user-space links."""

    hosts: Literal["site", "node"] = "site"
    netem: Literal["auto", "off"] = "auto"
    pcap_dir: str | None = None  # tcpdump on every host interface: one pcap per host here


class EngineOptions(_Model):
    ray: RaySpec = RaySpec()
    mininet: MininetSpec = MininetSpec()
    shards: ShardSpec = ShardSpec()


class Scenario(_Model):
    """A whole experiment: what is built, what runs over it, what is compared."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.+-]+$", description="names the "
                      "run (default output folder results/<name>)")
    description: str = Field("", description="free text, kept with the results")
    engine: Literal["simpy", "live", "ray", "mininet"] = Field(
        "simpy", description="simulation (simpy), loopback sockets (live), Ray actors, or "
        "Mininet hosts")
    engine_options: EngineOptions = EngineOptions()
    seed: int = Field(0, description="every random draw of the run derives from it")
    duration: float | None = Field(None, gt=0, description="seconds: stop issuing queries "
                                   "after this")
    namespace: NamespaceSpec = NamespaceSpec()
    network: NetworkSpec = NetworkSpec()
    schemes: tuple[SchemeSpec, ...] = Field((SchemeSpec(name="tooldns"),),
                                            description="the discovery schemes compared")
    workload: WorkloadSpec = WorkloadSpec()
    agents: AgentSpec = AgentSpec()
    caches: CacheSpec = CacheSpec()
    trust: TrustSpec = TrustSpec()
    faults: FaultsSpec | None = Field(None, description="injected failures (null: none)")
    outputs: OutputSpec = OutputSpec()
    sweep: SweepSpec | None = Field(None, description="a grid of runs (tooldns sweep)")

    @model_validator(mode="after")
    def _signed(self) -> Scenario:
        for i, s in enumerate(self.schemes):
            if s.dnssec and not self.namespace.dnssec:
                raise ValueError(f"schemes: scheme {i} ({s.name}) validates DNSSEC but the "
                                 f"zones are not signed (set namespace.dnssec: true)")
        return self

    @model_validator(mode="after")
    def _session_schemes(self) -> Scenario:
        session = self.agents.session
        if session is not None:  # sessions wrap DNS stub agents only
            kinds = {s.name: s.kind for s in self.schemes}
            for name in session.schemes:
                if name not in kinds:
                    raise ValueError(f"agents: session.schemes: no scheme named {name!r}"
                                     + did_you_mean(name, kinds))
                if kinds[name] != "tooldns":
                    raise ValueError(f"agents: session.schemes: {name!r} is a {kinds[name]} "
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

    def with_overrides(self, overrides: dict[str, Any]) -> Scenario:
        """A copy with dotted fields replaced (validated again)."""
        data = self.model_dump(mode="json")
        for dotted, value in overrides.items():
            _set_dotted(data, dotted, value)
        return Scenario.model_validate(data)


def _set_dotted(data: dict, dotted: str, value: Any) -> None:
    """Set ``a.b.0.c`` in nested dicts/lists; new keys are left for validation to judge."""
    parts = dotted.split(".")
    node: Any = data
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(node, list):
            names = [x.get("name") for x in node if isinstance(x, dict)]
            if part in names:  # a scheme (or any named item) by its name
                part = str(names.index(part))
            if not (part.isdigit() and int(part) < len(node)):
                raise ValueError(f"'{dotted}' is not a field of the scenario"
                                 + did_you_mean(part, [n for n in names if n]))
            if last:
                node[int(part)] = value
            else:
                node = node[int(part)]
        elif isinstance(node, dict):
            if last and (part in node or parts[i - 1:i] == ["params"]):  # params is free-form
                node[part] = value
            elif isinstance(node.get(part), dict | list):
                node = node[part]
            else:
                raise ValueError(f"'{dotted}' is not a field of the scenario"
                                 + did_you_mean(part, node))
        else:
            raise ValueError(f"'{dotted}' is not a field of the scenario")


# ---------------------------------------------------------------------------- loading

_PATH_FIELDS = (("namespace", "catalog"), ("namespace", "queries"), ("network", "file"),
                ("workload", "arrival", "trace"))


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside an annotation (``X | None``, ``tuple[X, ...]``, ...)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        if (model := _model_of(arg)) is not None:
            return model
    return None


def _literals(annotation: Any) -> list[str]:
    """The allowed strings of a ``Literal`` inside an annotation."""
    if get_origin(annotation) is Literal:
        return [a for a in get_args(annotation) if isinstance(a, str)]
    return [v for arg in get_args(annotation) for v in _literals(arg)]


def _field_at(loc: Sequence[str | int], root: type[BaseModel] | None = None) -> tuple[
        type[BaseModel] | None, Any]:
    """The model holding the field at ``loc`` (list indices skipped; ``root`` default
    :class:`Scenario`) and the field's annotation (None when ``loc`` leaves the models)."""
    model: type[BaseModel] | None = root or Scenario
    annotation: Any = None
    for i, part in enumerate(loc):
        if isinstance(part, int) or (isinstance(part, str) and part.isdigit()):
            continue
        if model is None or part not in model.model_fields:
            return (model, None) if i == len(loc) - 1 else (None, None)
        annotation = model.model_fields[part].annotation
        if i < len(loc) - 1:
            model = _model_of(annotation)
    return model, annotation


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest choice, or nothing."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def format_errors(path: Path | str, exc: ValidationError,
                   root: type[BaseModel] | None = None) -> str:
    """One line per problem: ``FILE: dotted.field: problem``."""
    lines = []
    for err in exc.errors():
        loc = [str(x) for x in err["loc"]]
        msg = err["msg"]
        kind = err["type"]
        if kind == "extra_forbidden":
            model, _ = _field_at(err["loc"], root)
            msg = "unknown field" + (did_you_mean(loc[-1], model.model_fields)
                                     if model is not None else "")
        elif kind == "missing":
            msg = "required field is missing"
        elif kind == "value_error":
            msg = msg.removeprefix("Value error, ")
            field, sep, rest = msg.partition(": ")
            if sep and field.isidentifier():  # our validators name the field they judge
                loc.append(field)
                msg = rest
        given = err.get("input")
        if kind not in ("extra_forbidden", "missing", "value_error") and not isinstance(
                given, dict | list):
            msg += f" (got {given!r})"
        if kind == "literal_error" and isinstance(given, str):
            msg += did_you_mean(given, _literals(_field_at(err["loc"], root)[1]))
        lines.append(f"{path}: {'.'.join(loc) or '(top level)'}: {msg}")
    return "\n".join(lines)


class _UniqueKeyLoader(yaml.SafeLoader):
    """A safe loader that rejects a key given twice in one mapping."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: set = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_scenario(path: str | Path) -> Scenario:
    """Read, validate and resolve a scenario file; raise ScenarioError on any problem."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read the file ({exc.strerror})") from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f"line {where.line + 1}: " if where is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ScenarioError(f"{path}: {line}not valid YAML ({problem})") from None
    if data is None:
        raise ScenarioError(f"{path}: (top level): the file is empty")
    if not isinstance(data, dict):
        raise ScenarioError(f"{path}: (top level): a scenario must be a mapping of fields, "
                            f"got {type(data).__name__}")
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(format_errors(path, exc)) from None
    return _resolve_paths(scenario, path)


def _resolve_paths(scenario: Scenario, path: Path) -> Scenario:
    data = scenario.model_dump(mode="json")
    base = path.resolve().parent
    for fields in _PATH_FIELDS:
        node = data
        for f in fields[:-1]:
            node = node[f]
        value = node[fields[-1]]
        if value is None:
            continue
        resolved = Path(value) if Path(value).is_absolute() else base / value
        if not resolved.exists():
            raise ScenarioError(f"{path}: {'.'.join(fields)}: file not found ({resolved})")
        node[fields[-1]] = str(resolved)
    if scenario.sweep is not None:
        for key, values in scenario.sweep.grid.items():
            for value in values:
                try:
                    scenario.with_overrides({key: value})
                except ValidationError as exc:
                    first = format_errors(path, exc).splitlines()[0].split(": ", 2)[-1]
                    raise ScenarioError(f"{path}: sweep.grid.{key}: value {value!r}: {first}"
                                        ) from None
                except ValueError as exc:
                    raise ScenarioError(f"{path}: sweep.grid.{key}: {exc}") from None
    return Scenario.model_validate(data)


def sanity_warnings(sc: Scenario) -> list[str]:
    """Valid but suspicious values, most often a unit mistake (times are seconds, rates per
    second): ``dotted.field: what looks wrong``. Shown by ``tooldns validate`` and before a
    run; they never stop one."""
    out: list[str] = []
    delay = sc.network.link.delay
    for field, value in (("mean", delay.mean), ("std", delay.std),
                         ("samples", max(delay.samples, default=0.0))):
        if value > 1.0:
            out.append(f"network.link.delay.{field}: {value:g} s one-way per link; delays "
                       f"are in seconds ({value:g} ms would be {value / 1000:g})")
    for field, value in sc.network.processing.model_dump().items():
        if isinstance(value, float) and value > (30.0 if field == "registry" else 0.1):
            out.append(f"network.processing.{field}: {value:g} s per message; processing "
                       f"times are in seconds (50 µs is 5e-05)")
    hop = 2 * delay.mean  # the round trip over one link: the least an exchange takes
    for i, scheme in enumerate(sc.schemes):
        where = f"schemes.{i}.timeout"
        if scheme.timeout > 30:
            out.append(f"{where}: {scheme.timeout:g} s per upstream try; timeouts are in "
                       f"seconds")
        elif scheme.kind == "tooldns" and scheme.timeout <= hop:
            out.append(f"{where}: {scheme.timeout:g} s is not more than one link's round "
                       f"trip ({hop:g} s): every upstream query will time out")
        if scheme.kind == "tooldns" and sc.agents.timeout < scheme.timeout:
            out.append(f"agents.timeout: {sc.agents.timeout:g} s is shorter than scheme "
                       f"{scheme.name}'s resolver timeout ({scheme.timeout:g} s): agents "
                       f"give up before the resolver retries once")
    if sc.agents.timeout <= 4 * hop:
        out.append(f"agents.timeout: {sc.agents.timeout:g} s is within four link round "
                   f"trips ({4 * hop:g} s): most discoveries will time out")
    if sc.agents.timeout > 60:
        out.append(f"agents.timeout: {sc.agents.timeout:g} s; timeouts are in seconds")
    if sc.workload.arrival.process == "poisson" and sc.workload.arrival.rate > 1e5:
        out.append(f"workload.arrival.rate: {sc.workload.arrival.rate:g} queries per second")
    for field in ("ns_ttl", "srv_ttl", "a_ttl", "negative_ttl"):
        ttl = getattr(sc.caches, field)
        if ttl > 7 * 86_400:
            out.append(f"caches.{field}: {ttl} s is over a week; TTLs are in seconds")
    for i, f in enumerate(sc.faults.events if sc.faults else ()):
        if f.delay > 30:
            out.append(f"faults.events.{i}.delay: {f.delay:g} s; delays are in seconds")
    return out


def resolved_yaml(scenario: Scenario) -> str:
    """The fully defaulted scenario, as saved beside the results."""
    return yaml.safe_dump(scenario.model_dump(mode="json"), sort_keys=False)
