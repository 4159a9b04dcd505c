"""A whole hierarchy on real sockets (``tooldns serve``): every server plus one resolver,
on UDP and TCP, and with a :class:`sim.build.hierarchy.DotSetup` on DNS over TLS too, whose
new handshakes are bounded in rate per client address and per process
(:func:`serving_limits`: it serves whoever reaches it, not a run's own resolvers)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from nodes.authoritative.transfer import networks
from nodes.dns.cache import DEFAULT_MAX_BYTES
from nodes.resolver.config import ResolverConfig
from sim.accounting import dot_port
from sim.build.hierarchy import DOT_HOST, DotSetup, Hierarchy
from sim.sockets.dot import DotUpstream
from sim.sockets.node import DEFAULT_PORT, NodeEndpoint
from sim.sockets.server import DOT_LIMITS, ServerEndpoint
from sim.sockets.tcp import TcpLimits, raise_fd_limit

DEFAULT_RESOLVER_ADDRESS = "127.0.53.1"


def serving_limits(limits: TcpLimits, own: Sequence[str] = ()) -> TcpLimits:
    """``limits`` with the new DNS-over-TLS handshakes ``tooldns serve`` starts a second
    bounded, per client address and in all (sim.sockets.tls): a flood of them, from one
    address or many, is refused before any TLS work, leaving the event loop to UDP, TCP
    and established connections (a handshake costs the process ~1.5 ms: 100 a second take
    ~15 % of it). Handshakes from ``own`` addresses (its resolver's) are not bounded."""
    return replace(limits, handshake_rate=20.0, process_handshake_rate=100.0,
                   rate_exempt=frozenset(own))


@dataclass
class LiveHierarchy:
    """All servers of a hierarchy on one port, plus a resolver serving stub clients."""

    hierarchy: Hierarchy
    port: int = DEFAULT_PORT
    resolver_address: str = DEFAULT_RESOLVER_ADDRESS
    resolver_seed: int = 0  # replica tie-breaks only: IDs and ports come from the OS
    cache_max_bytes: int = DEFAULT_MAX_BYTES  # the resolver's cache bound (estimated bytes)
    max_clients: int = 10_000  # stub queries the resolver works on at once
    tcp_limits: TcpLimits = field(default_factory=TcpLimits)
    # who may transfer zones (AXFR): networks or addresses, replacing the servers' ACL
    # (by default empty: every transfer REFUSED; see sim.build.hierarchy.build_hierarchy)
    allow_transfer: Sequence[str] | None = None
    # DNS over TLS (RFC 7858) beside UDP and TCP: every server and the resolver also listen
    # on ``dot_port`` (0: sim.accounting.dot_port(port), 853 beside 53) with its certificate
    dot: DotSetup | None = None
    dot_port: int = 0
    # with ``dot``: the resolver asks the servers over DNS over TLS too (RFC 7858, strict:
    # never clear text); else over UDP (TC → TCP)
    dot_upstream: bool = False
    # the root DS of a signed hierarchy (sim.build.trust.sign_hierarchy): the resolver
    # validates with it and sets AD for stubs that set DO; in the manifest
    trust_anchor: str | None = None
    endpoints: list[ServerEndpoint] = field(default_factory=list)
    resolver: NodeEndpoint | None = None

    async def start(self) -> None:
        raise_fd_limit()
        if self.allow_transfer is not None:
            acl = networks(self.allow_transfer)  # a bad network fails here, before binding
            for server in self.hierarchy.servers.values():
                server.transfer_acl, server.transfer_peers = acl, frozenset()
        dot = self.dot
        tls = dot.server_context() if dot is not None else None
        tls_port = self.tls_port
        for address, server in self.hierarchy.servers.items():
            endpoint = ServerEndpoint(server, (address, self.port), tcp_limits=self.tcp_limits,
                                      tls=tls, tls_port=tls_port,
                                      tls_limits=serving_limits(
                                          DOT_LIMITS, [self.resolver_address]))
            await endpoint.start()
            self.endpoints.append(endpoint)
        if self.dot_upstream and dot is None:
            raise ValueError("dot_upstream needs dot (the servers' DNS-over-TLS listeners)")
        config = ResolverConfig(dns_port=self.port, cache_max_bytes=self.cache_max_bytes,
                                max_clients=self.max_clients,
                                upstream="tls" if self.dot_upstream else "udp",
                                dnssec=self.trust_anchor is not None,
                                trust_anchor=self.trust_anchor or "")
        node = self.hierarchy.resolver(seed=self.resolver_seed, config=config)
        self.resolver = NodeEndpoint(node, (self.resolver_address, self.port),
                                     source_ip=self.resolver_address,
                                     tcp_limits=serving_limits(self.tcp_limits), tls=tls,
                                     tls_port=tls_port)
        if self.dot_upstream and dot is not None:
            self.resolver.dot = self._dot_upstream(self.resolver, dot)
        await self.resolver.start()

    def _dot_upstream(self, endpoint: NodeEndpoint, dot: DotSetup) -> DotUpstream:
        """The resolver's DNS-over-TLS connections to the servers (verifying their
        certificate against the setup's CA, at ``tls_port``)."""
        def deliver(data: bytes, src: tuple[str, int]) -> None:
            endpoint._receive(data, src, "tls")

        return DotUpstream(self.resolver_address, dot.client_context(), deliver,
                           endpoint.count, None, dot.idle, dot.max_connections,
                           sizes=dot.sizes, tls_port=self.tls_port)

    @property
    def tls_port(self) -> int:
        """The DNS-over-TLS port (with ``dot``)."""
        return self.dot_port or dot_port(self.port)

    def close(self) -> None:
        for endpoint in self.endpoints:
            endpoint.close()
        if self.resolver is not None:
            self.resolver.close()

    def manifest(self) -> dict:
        servers = [{**m, "port": self.port} for m in self.hierarchy.manifest]
        return {
            "port": self.port,
            "option_code": self.hierarchy.option_code,
            "root_hints": self.hierarchy.root_hints,
            "resolver": {"role": "resolver", "address": self.resolver_address,
                         "port": self.port,
                         "upstream": "tls" if self.dot_upstream else "udp"},
            "servers": servers,
            "namespace": self.hierarchy.namespace.origin,
            **({"dot": {"port": self.tls_port, "hostname": DOT_HOST}} if self.dot else {}),
            **({"trust_anchor": f". DS {self.trust_anchor}"} if self.trust_anchor else {}),
        }

    def write_manifest(self, path: str | Path) -> None:
        """Write the manifest atomically (temp file + rename)."""
        path = Path(path)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(self.manifest(), indent=2) + "\n", encoding="utf-8")
        tmp.replace(path)

