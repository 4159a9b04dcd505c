"""Discovery schemes: a DNS client strategy (:class:`DnsScheme`: a kind of
:data:`sim.catalog.strategies.STRATEGIES`, today ToolDNS in its modes) or an HTTP registry
baseline (:class:`RegistryScheme`: a kind of :data:`sim.catalog.registries.REGISTRIES`), one
:data:`SchemeSpec` union told apart by ``kind``; the trust policy a scheme walks under; the
resolver configuration a DNS scheme gives."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Discriminator, Field, Tag, model_validator

from nodes.dns.cache import DEFAULT_MAX_BYTES, DEFAULT_MAX_ENTRIES
from nodes.resolver.config import ResolverConfig
from nodes.resolver.merge import MERGES, SEARCHES
from nodes.resolver.minimise import PROJECT
from nodes.trust import TrustPolicy
from sim.catalog.registries import REGISTRIES
from sim.catalog.strategies import MODES, STRATEGIES
from sim.choices import OneOf, expected
from sim.spec import PositiveSeconds, Spec, WholeSeconds


class TrustSpec(Spec):
    """Which tools an agent accepts (:mod:`nodes.trust`): ``open`` (the public entry,
    anything), ``org`` (start at one organisation's zone), ``allowlist`` (walk only the
    zones of ``orgs``), ``certified`` (walk only certified organisation zones),
    ``public-then-certified`` (walk the public entry, keep only tools of certified zones,
    fall back to the certified zones when none is left)."""

    policy: Literal["open", "org", "allowlist", "certified", "public-then-certified"] = "open"
    org: str | None = Field(default=None, description="org: the organisation trusted")
    orgs: tuple[str, ...] = Field(default=(), description="allowlist: the organisations trusted")

    @model_validator(mode="after")
    def _check(self) -> TrustSpec:
        if self.policy == "org" and not self.org:
            raise ValueError("org: needed when policy is 'org' (the organisation to trust)")
        if self.policy == "allowlist" and not self.orgs:
            raise ValueError("orgs: needed when policy is 'allowlist' (organisations trusted)")
        return self


class _Scheme(Spec):
    """What every scheme has: a name, K, and how long its clients wait."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.+-]+$", description="the "
                      "scheme's label in tables (unique; --set schemes.NAME.k=1)")
    k: int = Field(default=3, ge=0, le=255, description="top-K children or tools each server "
                   "returns (0 = all: plain DNS, no pruning)")
    timeout: PositiveSeconds = Field(default=0.5, description="seconds the resolver waits for "
                                     "a server "
                           "before retrying")
    max_attempts: int = Field(default=4, ge=1, description="tries per upstream question")


class DnsScheme(_Scheme):
    """A DNS scheme: agents ask a recursive resolver as the scheme's DNS client strategy
    (its kind, a name in sim.catalog.strategies.STRATEGIES) says, in one of its modes."""

    kind: Annotated[str, OneOf(STRATEGIES)] = Field(
        default="tooldns", description="the discovery scheme: a DNS client strategy (a name "
        "in sim.catalog.strategies.STRATEGIES) or an HTTP registry baseline (a name in "
        "sim.catalog.registries.REGISTRIES)")
    beam: int = Field(default=1, ge=1, description="branches explored per level (split, "
                      "global)")
    search: Annotated[str, OneOf(SEARCHES)] = Field(
        default="split", description="keep the beam per branch (split, Algorithm 1), the best B "
        "of each level over all zones (global; needs the servers' scores), or A2X's "
        "progressive search (seed 001): a2x-get_one, a2x-get_important, a2x-get_all descend "
        "into every child the policy selects from each zone's top-K referred children by "
        "their scores (beam unused)")
    merge: Annotated[str, OneOf(MERGES)] = Field(
        default="auto", description="how the leaves' tools are merged (a name in "
        "nodes.resolver.merge.MERGES): auto (by score with the global search, else "
        "round-robin in walk order, as A2X merges), score (ask for scores, merge by them), "
        "round-robin (even when scores came)")
    send_embedding: bool = Field(default=False, description="send the intent's embedding with "
                                 "every semantic query (namespace.scorer: dense)")
    mode: Annotated[str, OneOf(MODES)] = Field(
        default="aware", description="how the strategy runs (its catalogue entry's modes; "
        "tooldns: aware walks cursors with the intent option, strip / pass-through are "
        "unmodified resolvers dropping or forwarding the option, qname an unmodified resolver "
        "with the intent carried in the query name and the servers' CNAME chain followed: "
        "the deployable design); unset: the strategy's first mode")
    resolver_model: Literal["project", "unbound", "bind", "knot-resolver", "pdns-recursor"] = (
        Field(default="project", description="a stock resolver's plain iteration (modes strip, "
              "pass-through, qname and the drafts): project (the full name at every server), "
              "or as a stock recursor does it, calibrated against its binary in tooldns "
              "recursors (QNAME minimisation with A or NS, underscore labels, priming, "
              "which NODATA it caches, whether it uses the delegation beside a CNAME; "
              "nodes.resolver.minimise)"))
    resolver: Literal["project", "unbound", "bind", "knot-resolver", "pdns-recursor"] = Field(
        default="project", description="the scheme's recursive resolver: project (the "
        "project's own, on every engine) or a stock binary run in the scenario (live, in a "
        "network namespace of the run's own, as root; Mininet, on the resolver's host; "
        "sim.engines.stock): modes strip, qname and the drafts; the fields it cannot "
        "honour are refused")
    cache: bool = Field(default=True, description="the resolver caches referrals and answers")
    query_mock: bool = Field(default=True, description="the resolver answers repeated intents "
                             "from cache (per intent text)")
    warm: bool = Field(default=False, description="walk every service once before the workload "
                       "(a warmed cache; with k: 0 the paper's 'K=0 warmed')")
    selection: Literal["srtt", "random"] = Field(
        default="srtt", description="tooldns: how the resolver picks among a zone's servers")
    srtt_decay: float = Field(default=1.0, gt=0, le=1, description="factor applied to the SRTT of "
                              "replicas not chosen (BIND-style; 1 = never decay)")
    serve_stale: bool = Field(default=False, description="serve expired data when servers fail "
                              "(RFC 8767)")
    stale_ttl: WholeSeconds = Field(default=86_400, description="seconds past expiry stale data "
                                    "may "
                           "be served")
    trust: TrustSpec | None = Field(default=None, description="overrides the scenario's trust "
                                    "policy for this scheme")
    dnssec: bool = Field(default=False, description="set DO and validate the chain of trust "
                         "(needs namespace.dnssec)")
    cache_max_entries: int = Field(default=DEFAULT_MAX_ENTRIES, ge=1, description="items the "
                                   "resolver's cache holds (one LRU over all its tables)")
    cache_max_bytes: int = Field(default=DEFAULT_MAX_BYTES, ge=4096, description="bytes (estimated "
                                 "with sys.getsizeof) the resolver's cache may hold")
    max_clients: int = Field(
        default=10_000, ge=1, description="stub queries a resolver works on at "
                             "once")
    upstream: Literal["udp", "tls"] = Field(
        default="udp", description="tooldns: how the resolver queries the authoritative servers: "
        "UDP "
        "(TC → TCP) or DNS over TLS (RFC 7858, port 853) on persistent connections, one per "
        "server (every engine)")
    upstream_fallback: Literal["none", "tcp", "udp"] = Field(
        default="none", description="upstream tls: a server whose DNS over TLS cannot be "
        "reached: none (strict, RFC 8310: the zone's other servers over TLS, never clear "
        "text), or ask it over tcp / udp for 60 s (opportunistic)")
    upstream_idle: PositiveSeconds = Field(
        default=10.0, description="upstream tls: seconds a connection "
                                 "may stay idle before the resolver closes it")
    upstream_connections: int = Field(default=64, ge=1, description="upstream tls: connections a "
                                      "resolver keeps open (the one idle longest is closed "
                                      "to open another)")

    @model_validator(mode="after")
    def _mode(self) -> DnsScheme:
        """The mode is one the strategy runs in (unset: its first), and the fields that mode
        fixes keep their values."""
        strategy = STRATEGIES[self.kind]
        if "mode" not in self.model_fields_set and self.mode not in strategy.modes:
            object.__setattr__(self, "mode", strategy.default_mode)
        mode = strategy.modes.get(self.mode)
        if mode is None:
            raise ValueError(f"mode: {self.kind} runs in {expected(list(strategy.modes))}, "
                             f"not {self.mode!r}")
        if mode.mirror and self.k == 0:  # a draft's agent resolves what its search chose
            raise ValueError(f"k: {self.kind} resolves the top K tools its search chose; "
                             "K ≥ 1")
        if self.resolver_model != PROJECT and mode.resolver == "aware":
            raise ValueError(f"resolver_model: {self.resolver_model} is a stock recursor's "
                             "iteration; mode aware walks cursors with the intent option "
                             "(use strip, pass-through, qname or a draft)")
        if self.resolver != PROJECT:
            self._stock(mode.resolver)
        if self.mode == "qname" and self.k == 0:  # a stock resolver follows one CNAME chain
            raise ValueError("k: mode qname needs K ≥ 1 (one CNAME chain to a leaf, "
                             "its top-K tools)")
        for name, value in mode.fixed.items():
            if getattr(self, name) != value:
                raise ValueError(f"{name}: does not apply to mode {self.mode} ({mode.why})")
        return self


    def _stock(self, behaviour: str) -> None:
        """A stock binary as the resolver: refused with what it cannot do, by field."""
        if behaviour in ("aware", "pass-through"):
            raise ValueError(f"resolver: {self.resolver} is an unmodified recursor; mode "
                             f"{self.mode} needs a resolver that "
                             + ("walks cursors with the intent option" if behaviour == "aware"
                                else "forwards the intent option")
                             + " (use strip, qname or a draft)")
        if self.resolver_model != PROJECT:
            raise ValueError(f"resolver_model: models {self.resolver_model} where the binary "
                             f"cannot run (simpy); resolver: {self.resolver} runs it (set one)")
        for name, why in STOCK_REFUSED.items():
            if name in self.model_fields_set and getattr(self, name) != (
                    DnsScheme.model_fields[name].default):
                raise ValueError(f"{name}: resolver {self.resolver} cannot honour it ({why})")


#: fields of the project's resolver that a stock binary has no setting for
STOCK_REFUSED = {
    "cache": "a stock recursor always caches; its size is cache_max_bytes",
    "query_mock": "the project's intent cache; a recursor caches by name",
    "warm": "K = 0 warming walks cursors with the intent option",
    "selection": "each recursor picks among a zone's servers its own way",
    "srtt_decay": "each recursor picks among a zone's servers its own way",
    "serve_stale": "not configured in the testbed's recursor setups",
    "stale_ttl": "not configured in the testbed's recursor setups",
    "trust": "a trust policy is the project resolver's filter of the tools it returns",
    "cache_max_entries": "the recursors' caches are sized in bytes: cache_max_bytes",
    "max_clients": "each recursor bounds its clients its own way",
    "upstream": "the recursors query the servers over UDP (TC → TCP)",
    "upstream_fallback": "the recursors query the servers over UDP (TC → TCP)",
    "upstream_idle": "the recursors query the servers over UDP (TC → TCP)",
    "upstream_connections": "the recursors query the servers over UDP (TC → TCP)",
    "beam": "a stock recursor follows one CNAME chain",
    "search": "a stock recursor follows one CNAME chain",
    "merge": "a stock recursor follows one CNAME chain",
    "send_embedding": "a stock recursor sends no intent",
}


class RegistryScheme(_Scheme):
    """An HTTP registry baseline: AgentDNS, ANS v0 or the MCP Registry, one registry (with
    replicas)."""

    kind: Annotated[str, OneOf(REGISTRIES)] = Field(
        description="the registry baseline (a name in sim.build.registries.REGISTRIES)")
    keepalive: bool = Field(default=False, description="registries: one connection per agent kept "
                            "open (else a new one per query)")
    tls: bool = Field(default=False, description="registries: HTTPS (TLS 1.3) with a CA made for "
                      "the run")
    resolve: bool = Field(default=False, description="agentdns: also call the resolve endpoint for "
                          "the first hit")
    resolve_top: int = Field(default=1, ge=1, description="ans: agents resolved (one signed answer "
                             "each)")
    verify: bool = Field(default=True, description="ans: verify certificate chain and signatures")
    searches: int = Field(default=3, ge=1, le=10, description="mcp-registry: name searches per "
                          "discovery (one intent word each, longest first; the client ranks "
                          "their union)")
    revocation: bool = Field(default=False, description="ans: OCSP-style check of the registry "
                             "certificate (cached)")
    replicas: int = Field(default=1, ge=1, le=8, description="registries: replicas behind one name "
                          "(clients fail over)")
    index: Literal["descriptions", "log"] = Field(
        default="descriptions", description="agentdns: what the registry indexes: the "
        "tools' descriptions, or log: each tool's pseudo-document (description plus its "
        "logged queries: the query log ToolDNS's learned centroids route with; needs "
        "namespace.taxonomy.routing_log and the dense scorer)")
    answer_cache: WholeSeconds = Field(
        default=0, description="seconds each agent keeps a search's answer, keyed on the "
        "intent, service and K, and answers a repeated intent from it without a request "
        "(as a resolver's query cache does for ToolDNS); 0: no cache")


def scheme_kinds() -> list[str]:
    """Every ``kind`` a scheme may name: the DNS strategies, then the registry kinds."""
    return [*STRATEGIES, *REGISTRIES]


def _scheme_tag(value: Any) -> str | None:
    """``dns`` or ``registry`` by ``kind`` (default tooldns); None for an unknown kind."""
    kind = value.get("kind", "tooldns") if isinstance(value, dict) else value.kind
    if kind in STRATEGIES:
        return "dns"
    return "registry" if kind in REGISTRIES else None


SCHEME_KIND_ERROR = "scheme_kind"  # a validation error's type when ``kind`` is unknown
#: One discovery scheme to compare; every scheme replays the same workload.
SchemeSpec = Annotated[
    Annotated[DnsScheme, Tag("dns")] | Annotated[RegistryScheme, Tag("registry")],
    Discriminator(_scheme_tag, custom_error_type=SCHEME_KIND_ERROR,
                  custom_error_message=f"Input should be {expected(scheme_kinds())}")]
SCHEME_TAGS = ("dns", "registry")  # where a validation error's location names the member

_REGISTRY_ONLY = (f"applies to registry schemes (kind {' or '.join(REGISTRIES)}), not DNS "
                  f"schemes")
_DNS_ONLY = "applies to DNS schemes only"


def foreign_field(model: type[BaseModel], field: str) -> str | None:
    """Why ``field`` is unknown to a scheme model when the other kind has it, else None."""
    if model is DnsScheme and field in RegistryScheme.model_fields:
        return ("applies to registry schemes; zones take namespace.replicas"
                if field == "replicas" else _REGISTRY_ONLY)
    if model is RegistryScheme and field in DnsScheme.model_fields:
        return _DNS_ONLY + (" (registries: tls)" if field == "upstream" else "")
    return None


def resolver_config(scheme: DnsScheme, trust: TrustPolicy | None, trust_anchor: str,
                    dns_port: int) -> ResolverConfig:
    """The resolvers' configuration of ``scheme`` (the walk, caches, retries, trust; the
    resolver behaviour its strategy's mode names)."""
    mode = STRATEGIES[scheme.kind].modes[scheme.mode]
    return ResolverConfig(mode=mode.resolver, beam=scheme.beam, search=scheme.search,
                          merge=scheme.merge, send_embedding=scheme.send_embedding,
                          timeout=scheme.timeout, max_attempts=scheme.max_attempts,
                          query_mock=scheme.query_mock, cache=scheme.cache, dns_port=dns_port,
                          selection=scheme.selection, srtt_decay=scheme.srtt_decay,
                          serve_stale=scheme.serve_stale, stale_ttl=scheme.stale_ttl,
                          trust=trust, dnssec=scheme.dnssec, trust_anchor=trust_anchor,
                          cache_max_entries=scheme.cache_max_entries,
                          cache_max_bytes=scheme.cache_max_bytes,
                          max_clients=scheme.max_clients, upstream=scheme.upstream,
                          upstream_fallback=scheme.upstream_fallback,
                          resolver_model=scheme.resolver_model)
