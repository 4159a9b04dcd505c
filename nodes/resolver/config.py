"""The resolver's configuration (:class:`ResolverConfig`) and its upstream modes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from nodes.dns.cache import DEFAULT_MAX_BYTES, DEFAULT_MAX_ENTRIES
from nodes.dns.wire import (
    DEFAULT_EDNS_SIZE,
    DEFAULT_OPTION_CODE,
    EMBEDDING_OPTION_CODE,
    SCORES_OPTION_CODE,
)
from nodes.resolver.merge import MERGES, SEARCHES, MergePolicy
from nodes.resolver.minimise import MODELS, PROJECT
from nodes.trust import TrustPolicy

# ``aware`` walks cursor names with the intent option; ``strip`` and ``pass-through`` model
# unmodified resolvers (the client's option removed or forwarded); ``qname`` resolves the
# intent carried in the name (nodes.dns.wire.intent_qname), following the CNAME chain
Mode = Literal["aware", "strip", "pass-through", "qname"]


@dataclass(frozen=True, slots=True)
class ResolverConfig:
    """Resolver behaviour; every field can be set from a scenario file."""

    mode: Mode = "aware"
    beam: int = 1  # explore up to B of the top-K branches at each level (split, global)
    search: str = "split"  # how each level is narrowed: a key of merge.SEARCHES
    # how the leaves' lists are combined: a key of nodes.resolver.merge.MERGES
    merge: str = "auto"
    timeout: float = 0.5  # seconds per attempt before trying the next replica
    max_attempts: int = 4  # attempts per query across a zone's replicas
    query_mock: bool = True  # rank cached child lists locally
    cache: bool = True  # use the caches at all
    a_from_additional: bool = False  # take targets' A from the SRV response's additional data
    edns_size: int = DEFAULT_EDNS_SIZE
    option_code: int = DEFAULT_OPTION_CODE
    dns_port: int = 53
    max_rounds: int = 24  # loop guard
    # bounds on everything cached (one LRU over all tables; bytes are estimated with
    # sys.getsizeof, see nodes.dns.cache); the least recently used items go first
    cache_max_entries: int = DEFAULT_MAX_ENTRIES
    cache_max_bytes: int = DEFAULT_MAX_BYTES
    # stub queries being resolved at once; more are dropped and counted (as Unbound's
    # num-queries-per-thread), so a flood of distinct intents cannot grow state unbounded
    max_clients: int = 10_000
    # the widest beam a stub may ask for (intent option version 1); wider asks walk this
    # wide and are counted (a client's beam multiplies the resolver's upstream queries)
    max_client_beam: int = 16
    srtt_alpha: float = 0.3
    selection: Literal["srtt", "random"] = "srtt"  # replica order: smoothed RTT or random
    srtt_decay: float = 1.0  # SRTT of replicas not chosen is multiplied by this (BIND-style
    # decay: a replica that timed out is probed again eventually; 1 = never)
    serve_stale: bool = False  # RFC 8767: answer from expired data when upstream fails
    stale_ttl: float = 86_400.0  # how long past expiry data may still be served
    trust: TrustPolicy | None = None  # which zones tools may come from (nodes.trust)
    dnssec: bool = False  # set DO and validate the chain of delegations (nodes.dns.dnssec)
    trust_anchor: str = ""  # the root zone's DS record (text) when validating
    scores_code: int = SCORES_OPTION_CODE  # the option asking for servers' scores
    # send the intent's embedding (dense scorer) so that dense servers need not compute it
    send_embedding: bool = False
    # how queries to the authoritative servers travel: UDP (TC → TCP), or DNS over TLS on
    # connections the engine keeps open (the node only marks its Outgoing; no TC retry)
    upstream: Literal["udp", "tls"] = "udp"
    # upstream tls, a server whose DNS over TLS cannot be reached (handshake refused, reset
    # or timed out): "none" stays on TLS, trying the zone's other servers (RFC 8310's strict
    # profile: never clear text); "tcp" / "udp" ask that server in clear text for a while
    # (the opportunistic profile)
    upstream_fallback: Literal["none", "tcp", "udp"] = "none"
    embedding_code: int = EMBEDDING_OPTION_CODE
    # plain iteration as a stock recursor does it (nodes.resolver.minimise: QNAME
    # minimisation, priming, ...), or the project's own (the full name at every server)
    resolver_model: str = PROJECT
    # MERGES[merge], looked up once here
    merge_policy: MergePolicy = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.search not in SEARCHES:
            raise ValueError(f"search: unknown {self.search!r} (one of {', '.join(SEARCHES)})")
        policy = MERGES.get(self.merge)
        if policy is None:
            raise ValueError(f"merge: unknown policy {self.merge!r} (one of "
                             f"{', '.join(MERGES)})")
        object.__setattr__(self, "merge_policy", policy)
        if self.resolver_model not in MODELS:
            raise ValueError(f"resolver_model: unknown {self.resolver_model!r} (one of "
                             f"{', '.join(MODELS)})")

    @property
    def wants_scores(self) -> bool:
        """Whether the servers' scores are asked for (global or A2X search, or a merge
        policy that needs them)."""
        return self.search != "split" or self.merge_policy.wants_scores

    @property
    def merges_by_score(self) -> bool:
        """Whether the leaves' scores reach the merge (global search, or a merge policy that
        wants them); A2X's search asks for scores to select children but merges the
        leaves' lists round-robin in descent order unless ``merge="score"``."""
        return self.search == "global" or self.merge_policy.wants_scores

    @property
    def a2x_policy(self) -> str | None:
        """A2X's selection policy (``get_one``, ``get_important``, ``get_all``) with an
        ``a2x-…`` search, else None."""
        return self.search[4:] if self.search.startswith("a2x-") else None
