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

from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from nodes.cache import DEFAULT_MAX_BYTES, DEFAULT_MAX_ENTRIES
from sim.evaluate import TaxonomySpec

Service = Literal["mcp", "a2a", "rest", "skill"]
Seconds = Annotated[float, Field(ge=0)]


class ScenarioError(ValueError):
    """A scenario file is unusable; the message names the file, the field and the problem."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DelaySpec(_Model):
    dist: Literal["constant", "normal", "lognormal", "empirical"] = "constant"
    mean: Seconds = 0.010
    std: Seconds = 0.0
    samples: tuple[Seconds, ...] = ()

    @model_validator(mode="after")
    def _check(self) -> DelaySpec:
        if self.dist == "empirical" and not self.samples:
            raise ValueError("samples: an empirical delay needs samples")
        return self


class LinkSpecModel(_Model):
    delay: DelaySpec = DelaySpec()
    loss: float = Field(0.0, ge=0.0, lt=1.0)
    bandwidth: float | None = Field(None, gt=0, description="bits per second; null = unlimited")


class ProcessingSpec(_Model):
    """Per-message processing time of nodes (seconds) in the simulation, or ``calibrated``:
    measured on this machine by a short simulated pre-run of the same plan (median cost of
    ``handle``/``receive`` per node kind; servers' semantic queries and resolvers' queries
    from agents apart), then used as fixed values."""

    model: Literal["fixed", "calibrated"] = "fixed"
    server: Seconds = 50e-6
    # a query carrying the intent option (ranking; with a dense scorer, embedding the
    # intent); default: the same as ``server``
    server_semantic: Seconds | None = None
    # a resolver receiving an agent's query (it may embed the intent); default: ``resolver``
    resolver_stub: Seconds | None = None
    resolver: Seconds = 20e-6
    agent: Seconds = 0.0


class RogueSpec(_Model):
    """A rogue publisher: look-alike copies of popular tools, under the public branches
    (``public``: open registration) or inside a certified organisation's zone
    (``compromised``: that organisation's zone is taken over)."""

    tools: int = Field(20, ge=1)
    mode: Literal["public", "compromised"] = "public"
    org: str = Field("rogue", pattern=r"^[a-z0-9-]{1,63}$")
    victim_org: str | None = None  # compromised: whose zone (default: the first org zone)


class NamespaceSpec(_Model):
    source: Literal["synthetic", "catalog"] = "synthetic"
    tools: int = Field(2000, ge=1)
    branching: int = Field(6, ge=1)
    depth: int = Field(2, ge=1, le=8)
    orgs: int = Field(3, ge=0)
    org_tools: int = Field(5, ge=1)
    catalog: str | None = None
    queries: str | None = None
    limit: int | None = Field(None, ge=1)
    protocols: tuple[Service, ...] | None = None
    replicas: int = Field(1, ge=1, le=8)
    scorer: Literal["bm25", "tfidf", "oracle", "dense"] = "bm25"
    # catalog source: build this tree (e.g. clustered, with centroids) instead of the
    # catalogue's own categories; the same spec as an eval file's taxonomy (sim.evaluate)
    taxonomy: TaxonomySpec | None = None
    cache_dir: str | None = Field(None, description="dense: keep sentence embeddings on "
                                  "disk here (relative to where tooldns runs)")
    max_udp_size: int = Field(1232, ge=512, le=65535)
    rogue: RogueSpec | None = None  # a rogue publisher's look-alike tools
    dnssec: bool = False  # sign every zone (replies to DO queries carry RRSIG/DS/DNSKEY)

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
    topology: Literal["star", "tree", "waxman", "geometric", "file"] = "star"
    nodes: int = Field(16, ge=1)
    file: str | None = None
    params: dict[str, float] = {}
    link: LinkSpecModel = LinkSpecModel()
    placement: Literal["default", "random", "same-node"] = "default"
    resolvers: int = Field(1, ge=1)
    agents: int = Field(4, ge=1)
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
    org: str | None = None
    orgs: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _check(self) -> TrustSpec:
        if self.policy == "org" and not self.org:
            raise ValueError("org: needed when policy is 'org' (the organisation to trust)")
        if self.policy == "allowlist" and not self.orgs:
            raise ValueError("orgs: needed when policy is 'allowlist' (organisations trusted)")
        return self


class SchemeSpec(_Model):
    """One discovery scheme to compare; every scheme replays the same workload."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.+-]+$")
    kind: Literal["tooldns", "agentdns", "ans"] = "tooldns"
    k: int = Field(3, ge=0, le=255)
    beam: int = Field(1, ge=1)
    # the beam kept per branch ("split", Algorithm 1) or the best B of each level over all
    # zones ("global"); both need the servers' scores (scores option), as "merge: score" does
    search: Literal["split", "global"] = "split"
    merge: Literal["round-robin", "score"] = "round-robin"
    # send the intent's embedding with every semantic query (namespace.scorer: dense)
    send_embedding: bool = False
    mode: Literal["aware", "strip", "pass-through"] = "aware"
    cache: bool = True
    query_mock: bool = True
    warm: bool = False
    timeout: float = Field(0.5, gt=0)
    max_attempts: int = Field(4, ge=1)
    # HTTP registries (kind agentdns | ans)
    keepalive: bool = False  # one connection per agent kept open, or a new one per query
    tls: bool = False  # HTTPS (TLS 1.3) with a CA made for the run
    resolve: bool = False  # agentdns: also call the resolve endpoint for the first hit
    resolve_top: int = Field(1, ge=1)  # ans: agents resolved (one signed answer each)
    verify: bool = True  # ans: verify certificate chain and signatures
    revocation: bool = False  # ans: OCSP-style check of the registry certificate (cached)
    replicas: int = Field(1, ge=1, le=8)  # registry replicas behind one name (clients fail over)
    # resolver knobs (tooldns): server selection, serve-stale (RFC 8767), trust
    selection: Literal["srtt", "random"] = "srtt"
    srtt_decay: float = Field(1.0, gt=0, le=1, description="factor applied to the SRTT of "
                              "replicas not chosen (BIND-style; 1 = never decay)")
    serve_stale: bool = False
    stale_ttl: int = Field(86_400, ge=0, description="how long past expiry stale data may "
                           "be served")
    trust: TrustSpec | None = None  # overrides the scenario's trust policy for this scheme
    dnssec: bool = False  # set DO and validate the chain of trust (needs namespace.dnssec)
    # bounds on the resolver's memory: cached items (one LRU over all its tables), their
    # estimated bytes, and stub queries resolved at once (more are dropped and counted)
    cache_max_entries: int = Field(DEFAULT_MAX_ENTRIES, ge=1)
    cache_max_bytes: int = Field(DEFAULT_MAX_BYTES, ge=4096, description="bytes (estimated "
                                 "with sys.getsizeof) the resolver's cache may hold")
    max_clients: int = Field(10_000, ge=1, description="stub queries a resolver works on at "
                             "once")

    @model_validator(mode="after")
    def _resolver_only(self) -> SchemeSpec:
        if self.kind == "tooldns" and self.replicas != 1:
            raise ValueError("replicas: applies to registry schemes; zones take "
                             "namespace.replicas")
        if self.kind != "tooldns":
            for name in ("serve_stale", "dnssec"):
                if getattr(self, name):
                    raise ValueError(f"{name}: applies to tooldns schemes only")
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
    process: Literal["poisson", "closed", "trace"] = "poisson"
    rate: float = Field(10.0, gt=0, description="queries per second (poisson)")
    think: Seconds = 1.0
    trace: str | None = None

    @model_validator(mode="after")
    def _check(self) -> ArrivalSpec:
        if self.process == "trace" and not self.trace:
            raise ValueError(
                "trace: needed when process is 'trace' (a CSV with columns time,query)")
        return self


class WorkloadSpec(_Model):
    source: Literal["auto", "file", "generated"] = "auto"
    queries: int = Field(200, ge=1, description="queries issued per phase")
    pool: int | None = Field(None, ge=1, description="distinct queries drawn from")
    popularity: Literal["uniform", "zipf"] = "uniform"
    zipf_s: float = Field(1.0, gt=0)
    arrival: ArrivalSpec = ArrivalSpec()
    phases: int = Field(1, ge=1)
    gap: Seconds = 60.0
    services: tuple[Service, ...] | None = None


class CacheSpec(_Model):
    """TTLs (seconds) the zones publish, and the servers' caches. The resolvers' caches
    are per scheme (``cache``, ``query_mock``, ``warm``, ``serve_stale``)."""

    ns_ttl: int = Field(86_400, ge=0)
    srv_ttl: int = Field(300, ge=0)
    a_ttl: int = Field(300, ge=0)
    negative_ttl: int = Field(60, ge=0)
    # each authoritative server's cache of whole replies, keyed on the query's bytes after
    # its ID (replies are byte-identical either way; off: every query is scored and encoded)
    packet_cache: bool = True
    packet_cache_size: int = Field(4096, ge=1, description="replies kept per server")
    packet_cache_bytes: int = Field(16 * 1024 * 1024, ge=4096, description="bytes of queries "
                                    "and replies kept per server")


FaultKind = Literal["down", "slow", "lossy", "delay", "partition"]
_SELECTOR = (r"^(\*|servers|registry(#\d+)?|resolvers|agents|resolver:\d+|agent:\d+|replica:\d+|"
             r"address:[0-9.]+|zone:[a-z0-9._-]+(#\d+)?|org:[a-z0-9-]+(#\d+)?|"
             r"role:(root|tld|intermediate|leaf)(#\d+)?)$")


class FaultSpec(_Model):
    """One fault (see :mod:`sim.faults`): from ``at`` for ``duration`` seconds of workload
    time (null: to the end), or, with ``rate``, failures of each target arriving as a
    Poisson process (per second) from ``at`` on, each lasting an exponential time of mean
    ``duration``. ``down`` crashes a server or registry replica (restart at the end);
    ``slow`` adds ``delay`` to everything the target sends; ``lossy`` drops what it sends
    or receives with probability ``loss``; ``delay`` and ``partition`` act on the links
    between ``target`` and ``peer`` (both directions)."""

    kind: FaultKind
    target: str = Field(pattern=_SELECTOR)
    peer: str = Field("*", pattern=_SELECTOR)
    at: Seconds = 0.0
    duration: Seconds | None = None
    rate: float | None = Field(None, gt=0)
    delay: Seconds = 0.0
    loss: float = Field(0.0, ge=0.0, le=1.0)

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
    baseline: bool = True  # also run every scheme fault-free and report the difference
    bin: float = Field(1.0, gt=0, description="seconds per bin of success over time")
    horizon: Seconds | None = None  # random processes are drawn up to here (default: the
    # last scheduled query plus 60 s)


class OutputSpec(_Model):
    dir: str | None = None
    plots: bool = True


class SweepSpec(_Model):
    """A grid over dotted scenario fields, e.g. ``namespace.branching: [2, 4, 8]``."""

    grid: dict[str, list[Any]]
    workers: int = Field(2, ge=1)

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
    """Ray engine: how zones are grouped into actors (see :mod:`sim.engine_ray`)."""

    placement: Literal["level", "org", "count"] = "level"
    zones_per_actor: int = Field(16, ge=1, description="zones per actor for 'count'")
    agent_actors: int = Field(1, ge=1, description="actors the agents are spread over")
    address: str | None = None  # a Ray cluster to join (default: a local instance)


class ShardSpec(_Model):
    """One simpy run sharded over Ray workers (see :mod:`sim.shards`): resolvers split
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
    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.+-]+$")
    description: str = ""
    engine: Literal["simpy", "live", "ray", "mininet"] = "simpy"
    engine_options: EngineOptions = EngineOptions()
    seed: int = 0
    duration: float | None = Field(None, gt=0, description="stop issuing queries after this")
    namespace: NamespaceSpec = NamespaceSpec()
    network: NetworkSpec = NetworkSpec()
    schemes: tuple[SchemeSpec, ...] = (SchemeSpec(name="tooldns"),)
    workload: WorkloadSpec = WorkloadSpec()
    caches: CacheSpec = CacheSpec()
    trust: TrustSpec = TrustSpec()
    faults: FaultsSpec | None = None
    outputs: OutputSpec = OutputSpec()
    sweep: SweepSpec | None = None

    @model_validator(mode="after")
    def _signed(self) -> Scenario:
        for i, s in enumerate(self.schemes):
            if s.dnssec and not self.namespace.dnssec:
                raise ValueError(f"schemes: scheme {i} ({s.name}) validates DNSSEC but the "
                                 f"zones are not signed (set namespace.dnssec: true)")
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
            if not (part.isdigit() and int(part) < len(node)):
                raise ValueError(f"'{dotted}' is not a field of the scenario")
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
                raise ValueError(f"'{dotted}' is not a field of the scenario")
        else:
            raise ValueError(f"'{dotted}' is not a field of the scenario")


# ---------------------------------------------------------------------------- loading

_PATH_FIELDS = (("namespace", "catalog"), ("namespace", "queries"), ("network", "file"),
                ("workload", "arrival", "trace"))


def _format_errors(path: Path, exc: ValidationError) -> str:
    """One line per problem: ``FILE: dotted.field: problem``."""
    lines = []
    for err in exc.errors():
        loc = [str(x) for x in err["loc"]]
        msg = err["msg"]
        kind = err["type"]
        if kind == "extra_forbidden":
            msg = "unknown field"
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
        raise ScenarioError(_format_errors(path, exc)) from None
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
                    first = _format_errors(path, exc).splitlines()[0].split(": ", 2)[-1]
                    raise ScenarioError(f"{path}: sweep.grid.{key}: value {value!r}: {first}"
                                        ) from None
                except ValueError as exc:
                    raise ScenarioError(f"{path}: sweep.grid.{key}: {exc}") from None
    return Scenario.model_validate(data)


def resolved_yaml(scenario: Scenario) -> str:
    """The fully defaulted scenario, as saved beside the results."""
    return yaml.safe_dump(scenario.model_dump(mode="json"), sort_keys=False)
