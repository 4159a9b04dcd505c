"""Instantiate a namespace as authoritative server nodes, one per NS replica address.

Engine-independent: the memory, live (and later simpy/ray/mininet) engines all start
from a :class:`Hierarchy`, so they run the very same node objects.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

from nodes.authoritative import AuthoritativeServer
from nodes.resolver import RecursiveResolver, ResolverConfig
from nodes.scoring import OracleScorer, Scorer, make_scorer
from nodes.wire import DEFAULT_OPTION_CODE
from nodes.zone import Ttls
from topologies.namespace import ROOT, Namespace, assign_servers


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

    def scorer(self) -> Scorer:
        """A fresh scorer of the hierarchy's kind (the resolver's query mock uses one)."""
        return _scorer(self.scorer_name, self.namespace)

    def resolver(
        self, seed: int = 0, config: ResolverConfig | None = None, name: str = "resolver"
    ) -> RecursiveResolver:
        config = config or ResolverConfig()
        if config.option_code != self.option_code:
            config = replace(config, option_code=self.option_code)
        return RecursiveResolver(self.root_hints, random.Random(seed), config,
                                 scorer=self.scorer(), name=name)


def _scorer(name: str, ns: Namespace) -> Scorer:
    return OracleScorer(ns.oracle_truth()) if name == "oracle" else make_scorer(name)


def build_hierarchy(
    ns: Namespace,
    replicas: int = 1,
    scorer: str = "bm25",
    ttls: Ttls | None = None,
    first_address: str = "127.1.0.1",
    max_udp_size: int = 1232,
    option_code: int = DEFAULT_OPTION_CODE,
) -> Hierarchy:
    """One :class:`AuthoritativeServer` per (zone, replica); they share one scorer object."""
    servers_by_zone = assign_servers(ns, replicas=replicas, first=first_address)
    shared = _scorer(scorer, ns)
    servers: dict[str, AuthoritativeServer] = {}
    zone_of: dict[str, str] = {}
    manifest = []
    for zone in ns.zone_data(servers_by_zone, ttls):
        role = "root" if zone.name == ROOT else "tld" if zone.name == "tools." else (
            "leaf" if zone.is_leaf else "intermediate")
        for ref in zone.servers:
            servers[ref.address] = AuthoritativeServer(
                [zone], scorer=shared, option_code=option_code, max_udp_size=max_udp_size,
                name=ref.host)
            zone_of[ref.address] = zone.name
            manifest.append({"role": role, "zone": zone.name, "host": ref.host,
                             "address": ref.address, "org": zone.org})
    root_hints = [ref.address for ref in servers_by_zone[ROOT]]
    return Hierarchy(ns, servers, zone_of, root_hints, scorer, manifest, option_code)
