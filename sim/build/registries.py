"""Instantiate the HTTP registry baselines for a run, and their TLS set-up.

* :data:`sim.catalog.registries.REGISTRIES` names every registry kind (what
  ``schemes[].kind`` may say beside the DNS strategies) and the builder of its application
  (here: :func:`agentdns_app`, :func:`ans_app`, :func:`mcp_registry_app`);
  :func:`build_registry` instantiates one.
* :func:`registry_tools` lists a namespace's tools as the registries publish them
  (:func:`registry_ids` maps what the registries return back to tool ids).
* :class:`RegistrySetup` holds one run's PKI (CA, registry certificate; deterministic per
  seed), the registry node, the TLS contexts the live engine uses and the credentials of
  the run's agents: an AgentDNS token the registry issued them (``token``; the run's
  agents are enrolled before anything is measured) and, for ANS registration, provider
  certificates from the run CA (:meth:`RegistrySetup.provider`).
* :func:`tls_sizes` measures the byte sizes of a real TLS 1.3 handshake and record
  overhead with those very contexts, in memory (``ssl.MemoryBIO``), so the simulation's
  TCP/TLS accounting comes from real encoded messages too.

The registry applications, their tools and the namespace (which load the scorers) are
imported where they are used.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import ssl
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING

from nodes.registry.http import App, Limits
from nodes.registry.pki import Identity, issue, make_ca
from nodes.registry.server import RegistryServer
from sim.accounting import TlsSizes
from sim.catalog.registries import REGISTRIES

if TYPE_CHECKING:
    from nodes.registry.base import RegistryTool
    from nodes.registry.mcp import ServerEntry
    from nodes.scoring import Scorer
    from topologies.namespace import Namespace

REGISTRY_HOST = "registry.test"  # RFC 6761 reserved name; the certificate's subject
REGISTRY_ADDRESS = "127.0.80.1"
REGISTRY_PORT = 8080
RUN_AGENTS = "agent:testbed/run"  # the principal of the token the run's agents share


def registry_tools(ns: Namespace) -> list[RegistryTool]:
    """Every tool as the registries list it, in id order."""
    from nodes.registry.base import RegistryTool
    from topologies.namespace import TLD

    categories: dict[str, str] = {}  # zone -> category, one string per zone
    out = []
    for t in sorted(ns.tools.values(), key=attrgetter("id")):
        category = categories.get(t.zone)
        if category is None:
            category = categories[t.zone] = t.zone.removesuffix("." + TLD).rstrip(".")
        out.append(RegistryTool(t.id, t.name, t.description, t.service, t.org or "public",
                                category, t.slug, t.address, t.port))
    return out


def registry_ids(ns: Namespace) -> dict[str, str]:
    """Tool id by every name a registry returns for it (AgentDNS URL, ANS name, MCP
    Registry server name)."""
    tools = registry_tools(ns)
    out = {k: t.id for t in tools for k in (t.agentdns_url, t.ans_name)}
    out.update((e.name, e.tool.id) for e in mcp_servers(ns, tools))
    return out


def mcp_servers(ns: Namespace, tools: list[RegistryTool]) -> list[ServerEntry]:
    """Every tool as the MCP Registry lists it: named ``<tld>.<org>/<label>`` after its
    publication (:func:`topologies.orgzones.publications`, the name the DNS-native drafts
    publish it under), its remote at its agent host."""
    from nodes.registry.mcp import ServerEntry
    from topologies.orgzones import publications

    pubs = publications(ns)
    out = []
    for t in tools:
        p = pubs[t.id]
        reverse = ".".join(reversed(p.domain.rstrip(".").split(".")))
        host = p.host.rstrip(".")
        out.append(ServerEntry(t, f"{reverse}/{p.label}",
                               f"https://{host}{'' if p.port == 443 else f':{p.port}'}/mcp"))
    return out


@dataclass(frozen=True)
class RegistryInputs:
    """What a registry builder may use: the run's namespace and its tools as registries
    list them, the scorer, the seed, the run PKI and the operator's settings."""

    ns: Namespace
    tools: list[RegistryTool]
    scorer: Scorer
    seed: int
    ca: Identity
    identity: Identity  # the registry's certificate
    ttl: int  # ANS: seconds a signed answer is valid
    tokens: Mapping[str, str] | None  # AgentDNS: configured token -> principal
    secret: bytes | None  # AgentDNS: key of the tokens it issues (None: from the seed)
    index: str = "descriptions"  # AgentDNS: what it indexes (``log``: pseudo-documents)


#: A registry application and the token issued to the run's agents ("" when none).
RegistryBuilder = Callable[[RegistryInputs], tuple[App, str]]


def agentdns_app(given: RegistryInputs) -> tuple[App, str]:
    """The AgentDNS registry and the token it issued the run's agents."""
    from nodes.registry.agentdns import AgentDNSRegistry, TokenStore

    secret = given.secret
    if secret is None:
        secret = hashlib.sha256(f"agentdns-token-secret/{given.seed}".encode()).digest()
    store = TokenStore(secret, given.tokens)
    token = store.issue(RUN_AGENTS)
    app = AgentDNSRegistry(given.tools, given.scorer, tokens=store)
    if given.index == "log":  # the query log ToolDNS's centroids learn from, given too
        if given.ns.pseudo_documents is None:
            raise ValueError("a registry index over the query log needs the namespace's "
                             "learned routing (namespace.taxonomy.routing_log)")
        app.catalogue.use_vectors(*given.ns.pseudo_documents)
    return app, token


def ans_app(given: RegistryInputs) -> tuple[App, str]:
    """The ANS registry (no token: agents verify its signed answers)."""
    from nodes.registry.ans import ANSRegistry
    from topologies.namespace import TLD

    summaries = {z.removesuffix("." + TLD).rstrip("."): n.summary
                 for z, n in given.ns.zones.items()}
    return ANSRegistry(given.tools, given.scorer, given.identity, given.ca, summaries,
                       ttl=given.ttl), ""


def mcp_registry_app(given: RegistryInputs) -> tuple[App, str]:
    """The MCP Registry (unauthenticated reads: no token)."""
    from nodes.registry.mcp import MCPRegistry

    return MCPRegistry(mcp_servers(given.ns, given.tools)), ""


@dataclass
class RegistrySetup:
    kind: str
    ca: Identity
    identity: Identity
    server: RegistryServer
    address: str = REGISTRY_ADDRESS
    port: int = REGISTRY_PORT
    token: str = ""  # AgentDNS: the bearer token issued to the run's agents ("" for ANS)
    seed: int = 0

    def provider(self, name: str) -> Identity:
        """A provider's certificate from the run CA (CN = ``name``): what signs an ANS
        registration under that provider."""
        return issue(self.ca, self.seed, name)

    def server_context(self) -> ssl.SSLContext:
        return _server_context(self.identity.cert_pem, self.identity.key_pem)

    def client_context(self) -> ssl.SSLContext:
        return client_context(self.ca.cert_pem)


def build_registry(kind: str, ns: Namespace, scorer: Scorer, seed: int,
                   address: str = REGISTRY_ADDRESS, port: int = REGISTRY_PORT,
                   ttl: int = 300, tokens: Mapping[str, str] | None = None,
                   secret: bytes | None = None, limits: Limits | None = None,
                   max_connections: int = 1024, index: str = "descriptions") -> RegistrySetup:
    """One registry of ``kind`` (a key of :data:`sim.catalog.registries.REGISTRIES`) for a
    run. AgentDNS ``tokens`` (token → ``org:NAME`` / ``agent:NAME``) are the operator's
    configured ones; ``secret`` keys the tokens the registry issues (None: derived from the
    seed like the run's PKI, so a simulated run is reproducible; give
    ``secrets.token_bytes(32)`` to a registry serving anyone else). The run's own agents
    get one issued token (``RegistrySetup.token``, the length the simulation has always
    sent). ``limits`` and ``max_connections`` bound each registry connection. ``index``
    (AgentDNS): ``log`` indexes each tool's pseudo-document of the namespace's query log
    (:attr:`topologies.namespace.Namespace.pseudo_documents`) instead of its text."""
    entry = REGISTRIES.get(kind)
    if entry is None:
        raise ValueError(f"unknown registry kind {kind!r}")
    builder: RegistryBuilder = entry.load()
    ca = make_ca(seed)
    identity = issue(ca, seed, REGISTRY_HOST, (address,))
    app, token = builder(RegistryInputs(ns, registry_tools(ns), scorer, seed, ca, identity, ttl,
                                        tokens, secret, index))
    server = RegistryServer(app, name=kind, limits=limits, max_connections=max_connections)
    return RegistrySetup(kind, ca, identity, server, address, port, token, seed)


def _context(server: bool) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if server else ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_3
    return ctx


def _server_context(cert_pem: str, key_pem: bytes) -> ssl.SSLContext:
    ctx = _context(server=True)
    with tempfile.TemporaryDirectory() as tmp:  # load_cert_chain reads files only
        cert, key = Path(tmp) / "cert.pem", Path(tmp) / "key.pem"
        cert.write_text(cert_pem)
        key.write_bytes(key_pem)
        ctx.load_cert_chain(cert, key)
    return ctx


def client_context(ca_pem: str) -> ssl.SSLContext:
    """A TLS 1.3 client context trusting the run CA ``ca_pem`` (registries, DNS over TLS)."""
    ctx = _context(server=False)
    ctx.load_verify_locations(cadata=ca_pem)
    return ctx


@functools.cache
def tls_sizes(cert_pem: str, key_pem: bytes, ca_pem: str,
              server_hostname: str = REGISTRY_HOST) -> TlsSizes:
    """Run one real TLS 1.3 handshake between the run's contexts, in memory, and measure
    (``server_hostname``: the name the client asks for, SNI, as the live client does)."""
    s_in, s_out, c_in, c_out = (ssl.MemoryBIO() for _ in range(4))
    server = _server_context(cert_pem, key_pem).wrap_bio(s_in, s_out, server_side=True)
    client = client_context(ca_pem).wrap_bio(c_in, c_out, server_side=False,
                                              server_hostname=server_hostname)

    def handshake(obj: ssl.SSLObject) -> None:
        with contextlib.suppress(ssl.SSLWantReadError):
            obj.do_handshake()

    def carry(src: ssl.MemoryBIO, dst: ssl.MemoryBIO) -> int:
        data = src.read()
        dst.write(data)
        return len(data)

    handshake(client)
    hello = carry(c_out, s_in)
    handshake(server)
    flight = carry(s_out, c_in)
    handshake(client)
    finished = carry(c_out, s_in)
    handshake(server)  # completes; OpenSSL then queues the session tickets
    server.write(b"x")
    tickets_and_one = carry(s_out, c_in)
    client.read(1)
    client.write(b"y" * 100)
    overhead = carry(c_out, s_in) - 100
    return TlsSizes(hello, flight, finished, tickets_and_one - (1 + overhead), overhead)
