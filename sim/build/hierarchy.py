"""Instantiate a namespace as authoritative server nodes, one per NS replica address.

Engine-independent: the memory, live (and later simpy/ray/mininet) engines all start
from a :class:`Hierarchy`, so they run the very same node objects. :func:`dot_setup` makes
the certificate the servers present to resolvers that query them over DNS over TLS.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from nodes.authoritative.server import AuthoritativeServer
from nodes.dns.wire import DEFAULT_OPTION_CODE
from nodes.dns.zone import Ttls
from nodes.resolver.config import ResolverConfig
from nodes.resolver.core import RecursiveResolver
from nodes.scoring import (
    CachedEncoder,
    DenseScorer,
    OracleScorer,
    Scorer,
    default_encoder,
    make_scorer,
    node_encoder,
)
from topologies import orgzones
from topologies.addresses import assign_servers
from topologies.gcpause import gc_paused
from topologies.namespace import ROOT, Namespace

if TYPE_CHECKING:
    import ssl

    from nodes.registry.pki import Identity
    from sim.accounting import TlsSizes

#: the name in the servers' DNS-over-TLS certificate, which resolvers authenticate (one
#: certificate for every server of the run, as one operator's; RFC 6761 reserved name)
DOT_HOST = "dot.tools.test"


@dataclass
class Hierarchy:
    """Servers keyed by IPv4 address, plus what a resolver needs to find them."""

    namespace: Namespace
    servers: dict[str, AuthoritativeServer]
    zone_of: dict[str, str]  # address -> zone it serves
    root_hints: list[str]
    scorer_name: str = "bm25"
    manifest: list[dict] = field(default_factory=list)
    option_code: int = DEFAULT_OPTION_CODE
    given_scorer: Scorer | None = None  # a scorer object passed in (shared with the servers)
    encoder: CachedEncoder | None = None  # dense: the shared model and tool-text cache
    # the record sets the servers publish (sim.catalog.strategies.RECORD_SETS): what the
    # schemes' client strategies may rely on
    publishes: frozenset[str] = frozenset({"tooldns"})

    @property
    def shareable(self) -> bool:
        """Whether the schemes of a run may share these servers (after :meth:`reset`).

        Servers keep only counters, a packet cache and pure memos between queries, plus
        score indexes built from zone data alone. Dense servers also keep the intents they
        embedded, which changes the measured (calibrated) cost of the next scheme's
        queries, so a dense hierarchy is built afresh per scheme, as each machine would be.
        """
        return self.encoder is None

    def zone_servers(self) -> dict[str, str]:
        """Every zone the servers hold -> the address of its first server (a hosting
        server of the organisations' zones holds many; ``zone_of`` names one of them)."""
        out: dict[str, str] = {}
        for address, server in self.servers.items():
            for zone in server.zones:
                out.setdefault(zone, address)
        return out

    def reset(self) -> None:
        """Forget what the last run left on the servers: counters, packet caches, signers
        (zone data, parsed names and score indexes stay: they depend on the zones only)."""
        for server in self.servers.values():
            server.reset()

    def scorer(self) -> Scorer:
        """A scorer of the hierarchy's kind for one more node (resolver query mock, registry):
        a fresh one for a named kind (dense: its own intent cache over the shared model),
        the object itself when one was given."""
        if self.given_scorer is not None:
            return self.given_scorer
        return _scorer(self.scorer_name, self.namespace, self.encoder)

    def resolver(
        self, seed: int = 0, config: ResolverConfig | None = None, name: str = "resolver",
        rng: random.Random | None = None,
    ) -> RecursiveResolver:
        """A recursive resolver primed with the root hints; randomness from ``rng`` (else
        seeded with ``seed``)."""
        config = config or ResolverConfig()
        if config.option_code != self.option_code:
            config = replace(config, option_code=self.option_code)
        return RecursiveResolver(self.root_hints, rng or random.Random(seed), config,
                                 scorer=self.scorer(), name=name)


def _scorer(name: str, ns: Namespace, encoder: CachedEncoder | None = None) -> Scorer:
    if name == "oracle":
        return OracleScorer(ns.oracle_truth())
    if name == "dense":
        return DenseScorer(node_encoder(encoder or default_encoder()))
    return make_scorer(name)


@gc_paused()  # a server's zone data and records are many long-lived objects
def build_hierarchy(
    ns: Namespace,
    replicas: int = 1,
    scorer: str | Scorer = "bm25",
    ttls: Ttls | None = None,
    first_address: str = "127.1.0.1",
    max_udp_size: int = 1232,
    option_code: int = DEFAULT_OPTION_CODE,
    encoder: CachedEncoder | None = None,
    packet_cache: int = 4096,
    packet_cache_bytes: int = 16 * 1024 * 1024,
    cname_referral: bool = True,
    aaaa: bool = False,
    allow_transfer: Sequence[str] = (),
    org_zones: bool = False,
) -> Hierarchy:
    """One :class:`AuthoritativeServer` per (zone, replica) (``packet_cache``: replies each
    server keeps for repeated queries, 0 for none, within ``packet_cache_bytes``); they
    share one scorer object, except with ``scorer="dense"``: the tools' texts are embedded
    once, here (``encoder``, a disk cache if given), and every server embeds each intent it
    sees itself, with its own cache, as separate machines would; so does every node
    :meth:`Hierarchy.scorer` equips. Each server refuses zone transfers (AXFR) except to
    the networks of ``allow_transfer``. ``aaaa``: tool targets also get AAAA
    records (:func:`nodes.dns.zone.aaaa_address`); the servers' own addresses stay IPv4.
    ``org_zones``: the root also delegates ``example.``, under which every tool's
    organisation publishes the DNS-native drafts' records (:mod:`topologies.orgzones`), on
    one TLD server and a few hosting servers; the hierarchy then publishes ``orgzones``."""
    servers_by_zone = assign_servers(ns, replicas=replicas, first=first_address)
    given = None if isinstance(scorer, str) else scorer
    name = scorer if isinstance(scorer, str) else scorer.name
    per_server = given is None and name == "dense"
    if per_server:  # the zones' tool texts, embedded once (what servers publish)
        base = encoder or default_encoder()
        texts = [f"{t.name} {t.description}" for t in ns.tools.values()]
        encoder = CachedEncoder(base._encode, dict(zip(texts, base(texts), strict=True)))
    shared = given or (None if per_server else _scorer(name, ns))
    servers: dict[str, AuthoritativeServer] = {}
    zone_of: dict[str, str] = {}
    manifest = []
    orgs = orgzones.org_zones(ns, ttls or Ttls(), aaaa) if org_zones else None
    for zone in ns.zone_data(servers_by_zone, ttls):
        if aaaa:
            zone = replace(zone, aaaa=True)
        if orgs is not None and zone.name == ROOT:  # no service: never a ranked child
            zone = replace(zone, children=(*zone.children, orgs.delegation))
        role = "root" if zone.name == ROOT else "tld" if zone.name == "tools." else (
            "leaf" if zone.is_leaf else "intermediate")
        for ref in zone.servers:
            own = shared if shared is not None else _scorer(name, ns, encoder)
            servers[ref.address] = AuthoritativeServer(
                [zone], scorer=own, option_code=option_code, max_udp_size=max_udp_size,
                name=ref.host, packet_cache=packet_cache,
                packet_cache_bytes=packet_cache_bytes, cname_referral=cname_referral,
                transfer_acl=allow_transfer)
            zone_of[ref.address] = zone.name
            manifest.append({"role": role, "zone": zone.name, "host": ref.host,
                             "address": ref.address, "org": zone.org})
    root_hints = [ref.address for ref in servers_by_zone[ROOT]]
    publishes = {"tooldns"}
    if orgs is not None:
        publishes.add("orgzones")
        ns.hosts = orgzones.hosts(orgs.publications)
        for address, zones in orgs.servers.items():
            host = zones[0].servers[0].host
            servers[address] = AuthoritativeServer(
                zones, scorer=shared or _scorer(name, ns, encoder), option_code=option_code,
                max_udp_size=max_udp_size, name=host, packet_cache=packet_cache,
                packet_cache_bytes=packet_cache_bytes, transfer_acl=allow_transfer)
            zone_of[address] = zones[0].name  # one of them (zone_servers(): all)
            manifest.append({"role": "org", "zone": zones[0].name, "host": host,
                             "address": address, "org": None})
    return Hierarchy(ns, servers, zone_of, root_hints, name, manifest, option_code, given,
                     encoder if per_server else None, frozenset(publishes))


@dataclass(frozen=True)
class DotSetup:
    """DNS over TLS (RFC 7858) between resolvers and the authoritative servers: a run CA
    and one certificate for :data:`DOT_HOST` (deterministic per seed, as the registries'),
    the measured TLS 1.3 sizes of a handshake with them, and the resolvers' connection
    policy (idle timeout in seconds, connections each resolver keeps open). The servers
    listen on port 853 beside 53 (:func:`sim.accounting.dot_port`)."""

    ca: Identity
    identity: Identity
    sizes: TlsSizes
    idle: float = 10.0
    max_connections: int = 64

    def server_context(self) -> ssl.SSLContext:
        from sim.build.registries import _server_context
        return _server_context(self.identity.cert_pem, self.identity.key_pem)

    def client_context(self) -> ssl.SSLContext:
        from sim.build.registries import client_context
        return client_context(self.ca.cert_pem)


def dot_setup(seed: int, idle: float = 10.0,
              max_connections: int = 64) -> DotSetup:
    """The run's DNS-over-TLS certificate and measured handshake sizes."""
    from nodes.registry.pki import issue, make_ca
    from sim.build.registries import tls_sizes
    ca = make_ca(seed, "ToolDNS testbed DNS CA")
    identity = issue(ca, seed, DOT_HOST)
    sizes = tls_sizes(identity.cert_pem, identity.key_pem, ca.cert_pem, DOT_HOST)
    return DotSetup(ca, identity, sizes, idle, max_connections)
