"""HTTP registry baselines, sans-IO: AgentDNS and ANS as request → response applications.

Both search with the very scorer objects the ToolDNS servers use (``nodes.scoring``), over
the same tools, so accuracy differences come from the architecture, not the retriever.

* :class:`AgentDNSRegistry` (Cui et al. 2025): ``POST /api/v1/discovery/search`` with a
  bearer token ``agent_…`` and ``{"query", "limit"}`` (plus our optional ``protocol``
  filter, the counterpart of ToolDNS's ``_mcp`` label) → ``{"tools": […], "total", "query"}``
  in AgentDNS's field layout; ``GET /api/v1/discovery/resolve/{org}/{category}/{name}``;
  registration ``POST /api/v1/services/?organization_id=N``. Tokens (:class:`TokenStore`)
  are configured by the operator or issued by the registry (``POST /api/v1/agents``, an
  organisation enrolling one of its agents) and checked against what was issued, in
  constant time: any token may search and resolve, only an organisation's token may
  register services, and only under its own name.
* :class:`ANSRegistry` (draft-narajala-ans-00): names
  ``protocol://agentID.capability.provider.vMAJOR.MINOR.PATCH``; the draft has no
  natural-language search, so clients map intent → capability themselves from
  ``GET /v1/capabilities``, list ``GET /v1/agents?capability=…``, then resolve with an
  ``AgentCapabilityRequest`` (``POST /v1/resolve``). Responses are signed (Ed25519) by the
  registry and carry its X.509 certificate; ``GET /v1/ocsp/{serial}`` is an OCSP-style
  revocation answer signed by the CA. Registration (``POST /v1/agents``) is signed by the
  provider with a certificate from the registry's CA (see :meth:`ANSRegistry.register`).
* :class:`RegistryServer` holds the HTTP/1.1 connections (:mod:`nodes.registry.http`) of one
  registry host; engines feed it bytes per connection.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import parse_qs, unquote, urlsplit

import numpy as np
from cryptography.x509.oid import NameOID

from nodes.registry.http import (
    App,
    Limits,
    Request,
    Response,
    ServerConnection,
    error_bytes,
    json_response,
)
from nodes.registry.pki import (
    Identity,
    TrustError,
    canonical,
    serial_hex,
    verify_chain,
    verify_signature,
)
from nodes.scoring import ScoreIndex, Scorer, top_k

TOKEN = re.compile(r"^agent_[A-Za-z0-9_-]{43}$")
ANS_VERSION = "1.0.0"
_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,62}$")  # agentID, provider, protocol


@dataclass(frozen=True, slots=True)
class RegistryTool:
    """One tool as a registry lists it (built from the namespace by the engine side)."""

    id: str
    name: str
    description: str
    service: str
    org: str  # organisation, "public" for the public branch
    category: str  # zone path without "tools.", e.g. "history.weather"
    slug: str
    address: str
    port: int

    @property
    def agentdns_url(self) -> str:
        return f"agentdns://{self.org}/{self.category}/{self.slug}"

    @property
    def capability(self) -> str:
        """ANS capability label: the category path, dots turned into hyphens."""
        return self.category.replace(".", "--")

    @property
    def ans_name(self) -> str:
        return f"{self.service}://{self.slug}.{self.capability}.{self.org}.v{ANS_VERSION}"


@dataclass
class _Catalogue:
    """Tools plus a flat score index over ``name description``, the text a ToolDNS leaf
    scores (rebuilt after a change)."""

    scorer: Scorer
    tools: list[RegistryTool]
    _index: ScoreIndex | None = None
    _by_service: dict[str, np.ndarray] = field(default_factory=dict)

    def add(self, tool: RegistryTool) -> None:
        self.tools.append(tool)
        self._index = None

    def apply_change(self, add: Sequence[RegistryTool], remove: Iterable[str]) -> None:
        """Tools with an id in ``remove`` go; ``add`` replaces tools of the same id (a
        moved endpoint, in place) or is appended; the index is rebuilt on the next search."""
        gone = set(remove)
        new = {t.id: t for t in add}
        self.tools = [new.pop(t.id, t) for t in self.tools if t.id not in gone]
        self.tools.extend(new.values())
        self._index = None

    def search(self, text: str, k: int, service: str | None) -> list[RegistryTool]:
        if self._index is None:
            self._index = self.scorer.index([t.id for t in self.tools],
                                            [f"{t.name} {t.description}" for t in self.tools])
            services = np.asarray([t.service for t in self.tools])
            self._by_service = {s: np.flatnonzero(services == s) for s in set(services)}
        cand = None if service is None else self._by_service.get(service, np.zeros(0, int))
        return [self.tools[i] for i in top_k(self._index.scores(text), k, cand)]

    def examined(self, service: str | None) -> int:
        return len(self.tools) if service is None else sum(
            t.service == service for t in self.tools)


class TokenStore:
    """Bearer tokens of one AgentDNS registry: ``agent_`` + 43 URL-safe base64 characters.

    A token is either configured by the operator (:meth:`add`) or issued by the registry
    (:meth:`issue`: an HMAC-SHA256 of its secret over a counter and the holder, so it is
    unguessable without the secret, and reproducible from it — the run's PKI keys are
    derived from the seed the same way). Each token maps to a *principal*: ``org:NAME``
    (an organisation: may register services and enrol agents) or ``agent:…`` (may search
    and resolve). :meth:`check` finds the candidate by the SHA-256 of what was presented
    and compares it with :func:`hmac.compare_digest`, so neither the lookup nor the
    comparison depends on how much of a stored token an attacker got right.
    """

    def __init__(self, secret: bytes | None = None, configured: Mapping[str, str] | None = None,
                 max_tokens: int = 65536) -> None:
        self._secret = secret
        self._tokens: dict[bytes, tuple[bytes, str]] = {}  # sha256(token) -> (token, principal)
        self._issued = 0
        self.max_tokens = max_tokens
        for token, principal in (configured or {}).items():
            self.add(token, principal)

    def __len__(self) -> int:
        return len(self._tokens)

    def add(self, token: str, principal: str) -> None:
        if not TOKEN.match(token):
            raise ValueError("a token is 'agent_' followed by 43 characters [A-Za-z0-9_-]")
        if not principal.startswith(("org:", "agent:")) or len(principal) <= 6:
            raise ValueError("a principal is 'org:NAME' or 'agent:NAME'")
        self._tokens[hashlib.sha256(token.encode()).digest()] = (token.encode(), principal)

    def issue(self, principal: str) -> str:
        """A new token for ``principal`` (needs the registry's secret)."""
        if not self._secret:
            raise ValueError("this registry has no secret to issue tokens with")
        if len(self._tokens) >= self.max_tokens:
            raise OverflowError("token store full")
        self._issued += 1
        mac = hmac.new(self._secret, f"{self._issued}\0{principal}".encode(),
                       hashlib.sha256).digest()
        token = "agent_" + base64.urlsafe_b64encode(mac).rstrip(b"=").decode()
        self.add(token, principal)
        return token

    def check(self, authorization: str | None) -> str | None:
        """The principal of a valid ``Authorization: Bearer …`` header, else None."""
        scheme, _, token = (authorization or "").strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not TOKEN.match(token):
            return None
        entry = self._tokens.get(hashlib.sha256(token.encode()).digest())
        if entry is None or not hmac.compare_digest(entry[0], token.encode()):
            return None
        return entry[1]


class _Routes:
    """Shared plumbing: request counters and JSON error answers.

    A request the application cannot make sense of (bad JSON, a missing or mistyped field,
    a number out of range) is the peer's fault: 400. Anything else raised by a route is a
    bug of ours; it propagates to :class:`nodes.registry.http.ServerConnection`, which answers 500
    and counts it (``handler_error``) without dropping the connection.
    """

    server_name = "registry"
    #: ``stats`` keys of the requests that run a search (what ``processing.registry`` costs)
    search_routes: tuple[str, ...] = ()

    def __init__(self) -> None:
        self.stats: Counter[str] = Counter()

    def searches(self) -> int:
        """Search requests answered so far (an engine compares it before and after a
        request to charge the modelled search time to searching requests only)."""
        return sum(self.stats[k] for k in self.search_routes)

    def _error(self, status: int, message: str,
               headers: Sequence[tuple[str, str]] = ()) -> Response:
        self.stats[f"http_{status}"] += 1
        return json_response(status, {"error": message}, self.server_name, headers)

    def __call__(self, req: Request, now: float) -> Response:
        try:
            return self.route(req, now)
        except (ValueError, KeyError, TypeError, UnicodeDecodeError, OverflowError) as exc:
            return self._error(400, f"bad request: {type(exc).__name__}")

    def route(self, req: Request, now: float) -> Response:
        raise NotImplementedError


def _agentdns_entry(t: RegistryTool) -> dict:
    """One tool in AgentDNS's search-result layout."""
    return {
        "name": t.name,
        "description": t.description,
        "organization": t.org,
        "agentdns_url": t.agentdns_url,
        "cost": {"type": "per_call", "price": 0.0, "currency": "USD",
                 "description": "free in the testbed"},
        "protocol": t.service.upper() if t.service != "skill" else "SKILL",
        "method": "POST",
        "http_mode": "sse" if t.service == "mcp" else "json",
        "input_description": f"JSON arguments for {t.name}",
        "output_description": f"JSON result of {t.name}",
    }


def _object(req: Request) -> dict:
    body = req.json()
    if not isinstance(body, dict):
        raise TypeError("the body must be a JSON object")
    return body


def _text(value: object, name: str, max_len: int = 4096) -> str:
    if not isinstance(value, str) or not value or len(value) > max_len:
        raise ValueError(f"{name} must be text of 1 to {max_len} characters")
    return value


def _integer(value: object, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer from {low} to {high}")
    return value


class AgentDNSRegistry(_Routes):
    """AgentDNS search, resolve and registration behind bearer tokens (:class:`TokenStore`).

    ``tokens`` None gives an empty store without a secret: every request is refused until
    tokens are configured, never accepted for looking like one.
    """

    server_name = "agentdns"
    realm = 'Bearer realm="agentdns"'
    search_routes = ("search",)  # POST /api/v1/discovery/search

    def __init__(self, tools: Sequence[RegistryTool], scorer: Scorer,
                 max_limit: int = 100, tokens: TokenStore | None = None) -> None:
        super().__init__()
        self.catalogue = _Catalogue(scorer, list(tools))
        self.max_limit = max_limit
        self.tokens = tokens if tokens is not None else TokenStore()

    def apply_change(self, add: Sequence[RegistryTool] = (), remove: Iterable[str] = ()
                     ) -> None:
        """A publisher's update, effective for the next request (sim.build.churn)."""
        self.catalogue.apply_change(add, remove)

    def _unauthorised(self, req: Request) -> Response:
        """401 with the RFC 6750 challenge (``invalid_token`` when one was presented)."""
        presented = bool((req.header("authorization") or "").strip())
        challenge = self.realm + (', error="invalid_token"' if presented else "")
        return self._error(401, "invalid bearer token" if presented else
                           "missing bearer token", [("WWW-Authenticate", challenge)])

    def _forbidden(self, why: str) -> Response:
        return self._error(403, why, [("WWW-Authenticate",
                                       self.realm + ', error="insufficient_scope"')])

    def route(self, req: Request, now: float) -> Response:
        url = urlsplit(req.target)
        path = url.path.rstrip("/")
        principal = self.tokens.check(req.header("authorization"))
        if principal is None:
            return self._unauthorised(req)
        if req.method == "POST" and path == "/api/v1/discovery/search":
            body = _object(req)
            query, limit = body["query"], body.get("limit", 10)
            if (not isinstance(query, str) or isinstance(limit, bool)
                    or not isinstance(limit, int) or not 1 <= limit <= self.max_limit):
                return self._error(400, "query must be text and 1 <= limit <= 100")
            protocol = body.get("protocol")
            if protocol is not None and not isinstance(protocol, str):
                return self._error(400, "protocol must be text")
            self.stats["search"] += 1
            found = self.catalogue.search(query, limit, protocol)
            return json_response(200, {"tools": [_agentdns_entry(t) for t in found],
                                       "total": len(found), "query": query}, self.server_name)
        if req.method == "GET" and path.startswith("/api/v1/discovery/resolve/"):
            parts = [unquote(p) for p in path.split("/")[5:]]
            if len(parts) != 3:
                return self._error(400, "expected /resolve/{org}/{category}/{name}")
            url_wanted = f"agentdns://{parts[0]}/{parts[1]}/{parts[2]}"
            for t in self.catalogue.tools:
                if t.agentdns_url == url_wanted:
                    self.stats["resolve"] += 1
                    return json_response(200, {**_agentdns_entry(t), "endpoint_url":
                                               f"https://{t.address}:{t.port}/"},
                                         self.server_name)
            return self._error(404, "no such service")
        if req.method == "POST" and path == "/api/v1/services":
            return self._register_service(req, url.query, principal)
        if req.method == "POST" and path == "/api/v1/agents":
            return self._enrol_agent(req, principal)
        return self._error(404, "not found")

    def _register_service(self, req: Request, query: str, principal: str) -> Response:
        """An organisation registers a service, under its own name only."""
        if not principal.startswith("org:"):
            return self._forbidden("only an organisation's token may register services")
        org = principal.removeprefix("org:")
        org_id = parse_qs(query).get("organization_id", [""])[0]
        body = _object(req)
        if not org_id.isdigit() or len(org_id) > 18:
            return self._error(400, "organization_id must be a number")
        if body.get("organization", org) != org:
            return self._forbidden(f"this token registers for organisation {org!r} only")
        name = _text(body["name"], "name", 256)
        category = _text(body["category"], "category", 256)
        slug = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-") or "svc"
        endpoint = urlsplit(_text(body["endpoint_url"], "endpoint_url", 2048))
        port = endpoint.port or 443  # ValueError (400) when out of range
        tool = RegistryTool(id=f"registered:{org_id}:{slug}", name=name,
                            description=_text(body["description"], "description"),
                            service=_text(body.get("protocol", "mcp"), "protocol", 32).lower(),
                            org=org, category=category, slug=slug,
                            address=endpoint.hostname or "", port=port)
        self.catalogue.add(tool)
        self.stats["register"] += 1
        return json_response(201, {"id": tool.id, "agentdns_url": tool.agentdns_url},
                             self.server_name)

    def _enrol_agent(self, req: Request, principal: str) -> Response:
        """An organisation enrols one of its agents: the registry issues it a token."""
        if not principal.startswith("org:"):
            return self._forbidden("only an organisation's token may enrol agents")
        name = _text(_object(req)["name"], "name", 128)
        agent = f"{principal.removeprefix('org:')}/{name}"
        try:
            token = self.tokens.issue(f"agent:{agent}")
        except (OverflowError, ValueError) as exc:  # store full, or no secret to issue with
            return self._error(403, f"no token issued: {exc}")
        self.stats["token_issued"] += 1
        return json_response(201, {"agent_id": agent, "token": token}, self.server_name)


class ANSRegistry(_Routes):
    """ANS resolution with signed answers; ``revoked`` serials fail the OCSP check."""

    server_name = "ans"
    search_routes = ("agents",)  # GET /v1/agents: the capability's agents, the discovery step

    def __init__(self, tools: Sequence[RegistryTool], scorer: Scorer, identity: Identity,
                 ca: Identity, summaries: dict[str, str] | None = None, ttl: int = 300) -> None:
        super().__init__()
        self.catalogue = _Catalogue(scorer, list(tools))
        self.identity = identity
        self.ca = ca
        self.ttl = ttl
        self.summaries = summaries or {}
        self.revoked: set[str] = set()
        self._by_name = {t.ans_name: t for t in tools}

    def apply_change(self, add: Sequence[RegistryTool] = (), remove: Iterable[str] = ()
                     ) -> None:
        """A publisher's update, effective for the next request (sim.build.churn)."""
        self.catalogue.apply_change(add, remove)
        self._by_name = {t.ans_name: t for t in self.catalogue.tools}

    def capabilities(self, service: str | None) -> list[dict]:
        caps: dict[str, str] = {}
        for t in self.catalogue.tools:
            if service is None or t.service == service:
                caps.setdefault(t.capability, self.summaries.get(t.category, t.category))
        return [{"name": c, "description": d} for c, d in sorted(caps.items())]

    def route(self, req: Request, now: float) -> Response:
        url = urlsplit(req.target)
        path, query = url.path.rstrip("/"), parse_qs(url.query)
        if req.method == "GET" and path == "/v1/capabilities":
            self.stats["capabilities"] += 1
            service = query.get("protocol", [None])[0]
            return json_response(200, {"capabilities": self.capabilities(service)},
                                 self.server_name)
        if req.method == "GET" and path == "/v1/agents":
            cap = query.get("capability", [""])[0]
            service = query.get("protocol", [None])[0]
            self.stats["agents"] += 1
            agents = [{"ansName": t.ans_name, "agentID": t.slug, "provider": t.org,
                       "version": ANS_VERSION, "description": t.description}
                      for t in self.catalogue.tools
                      if t.capability == cap and (service is None or t.service == service)]
            return json_response(200, {"capability": cap, "agents": agents}, self.server_name)
        if req.method == "POST" and path == "/v1/resolve":
            body = _object(req)
            if body.get("requestType") != "resolve":
                return self._error(400, "requestType must be 'resolve'")
            name = (f"{body['protocol']}://{body['agentID']}.{body['agentCapability']}."
                    f"{body['provider']}.v{ANS_VERSION}")
            tool = self._by_name.get(name)
            if tool is None or not _version_matches(str(body.get("version", "*"))):
                return self._error(404, "no agent matches the request")
            self.stats["resolve"] += 1
            payload = {"Endpoint": name,
                       "actualEndpoint": f"{tool.service}://{tool.address}:{tool.port}",
                       "ttl": self.ttl}
            return json_response(200, {**payload,
                                       "signature": self.identity.sign(canonical(payload)),
                                       "cert": self.identity.cert_pem}, self.server_name)
        if req.method == "GET" and path.startswith("/v1/ocsp/"):
            serial = path.rsplit("/", 1)[1].lower()
            self.stats["ocsp"] += 1
            status = "revoked" if serial in self.revoked else (
                "good" if serial == serial_hex(self.identity.cert) else "unknown")
            payload = {"serial": serial, "status": status, "thisUpdate": round(now, 6),
                       "nextUpdate": round(now + self.ttl, 6)}
            return json_response(200, {**payload, "signature": self.ca.sign(canonical(payload))},
                                 self.server_name)
        if req.method == "POST" and path == "/v1/agents":
            return self.register(req, now)
        return self._error(404, "not found")

    # Registration is authenticated with the registry's own PKI, not a bearer token.
    # ANS (draft-narajala-ans) rests every identity on certificates: a Registration
    # Authority checks the registrant and the CA binds the agent's name to its key, and
    # resolution answers are signed (as ours are). So a real ANS registry would accept a
    # registration only when it is signed by a key whose certificate chains to its CA
    # and names the provider being registered under. A signature over the request body
    # also binds the endpoint it registers (a proxy cannot rewrite it, as it could behind
    # a token) and works the same on plain HTTP and HTTPS; the timestamp in the signed
    # body bounds replays, and a replay inside the window meets the existing name (409).
    realm = 'ANS-Signature realm="ans", alg="ed25519"'
    max_skew = 300.0  # seconds a signed registration stays acceptable

    def register(self, req: Request, now: float) -> Response:
        """``POST /v1/agents``: the registration fields, ``timestamp`` (node time, s),
        ``cert`` (the provider's PEM certificate, CN = provider) and ``signature``
        (Ed25519, base64, over :func:`nodes.registry.pki.canonical` of every other field)."""
        body = _object(req)
        cert_pem, signature = body.pop("cert", None), body.pop("signature", None)
        if not isinstance(cert_pem, str) or not isinstance(signature, str):
            return self._unauthorised("registration must be signed (cert, signature)")
        try:
            cert = verify_chain(cert_pem, self.ca.cert, now)
            verify_signature(cert, canonical(body), signature)
        except TrustError as exc:
            return self._unauthorised(str(exc))
        if serial_hex(cert) in self.revoked:
            return self._unauthorised("certificate revoked")
        stamp = body["timestamp"]
        if (isinstance(stamp, bool) or not isinstance(stamp, int | float)
                or not math.isfinite(stamp) or abs(now - stamp) > self.max_skew):
            return self._unauthorised("registration timestamp outside the accepted window")
        provider = _text(body["provider"], "provider", 63)
        names = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
        if names != [provider]:
            return self._error(403, f"certificate does not name provider {provider!r}")
        agent_id = _text(body["agentID"], "agentID", 63)
        protocol = _text(body["protocol"], "protocol", 32)
        if not (_LABEL.match(agent_id) and _LABEL.match(provider) and _LABEL.match(protocol)):
            return self._error(400, "agentID, provider and protocol must be DNS-style labels")
        tool = RegistryTool(id=f"registered:{provider}:{agent_id}", name=agent_id,
                            description=_text(body["description"], "description"),
                            service=protocol, org=provider,
                            category=_text(body["agentCapability"], "agentCapability",
                                           255).replace("--", "."),
                            slug=agent_id, address=_text(body["address"], "address", 255),
                            port=_integer(body["port"], "port", 1, 65535))
        if tool.ans_name in self._by_name:
            return self._error(409, f"{tool.ans_name} is already registered")
        self.catalogue.add(tool)
        self._by_name[tool.ans_name] = tool
        self.stats["register"] += 1
        return json_response(201, {"ansName": tool.ans_name}, self.server_name)

    def _unauthorised(self, why: str) -> Response:
        return self._error(401, why, [("WWW-Authenticate", self.realm)])


def _version_matches(spec: str) -> bool:
    """A small semver range check against the one version the testbed publishes."""
    if spec in ("*", "", ANS_VERSION):
        return True
    if spec.startswith("^"):
        return spec[1:].split(".")[0] == ANS_VERSION.split(".")[0]
    return False


class RegistryServer:
    """One registry host: its application plus one HTTP/1.1 state machine per connection.

    Engines feed bytes per connection (:meth:`receive`; the connection's state lives
    across calls). A live engine also calls :meth:`accept` when a TCP connection arrives
    (refused beyond ``max_connections``), sleeps until :meth:`deadline` and then calls
    :meth:`on_timer`, and reports write deadlines and resets through :meth:`lost`.
    ``stats`` counts connections and every rejection or drop (keys appear when they first
    happen): ``malformed`` (400), ``headers_too_large`` (431), ``body_too_large`` (413),
    ``request_timeout`` (408), ``idle_timeout``, ``aborted``, ``handler_error`` (500),
    ``over_capacity`` (refused at the cap), ``write_timeout`` and ``reset``.
    """

    def __init__(self, app: App, name: str = "registry", limits: Limits | None = None,
                 max_connections: int = 1024) -> None:
        self.app = app
        self.name = name
        self.limits = limits or Limits()
        self.max_connections = max_connections
        self._conns: dict[object, ServerConnection] = {}
        self.stats: Counter[str] = Counter()

    @property
    def open_connections(self) -> int:
        return len(self._conns)

    def accept(self, conn: object, now: float) -> bool:
        """A new TCP connection: False (and counted) when the server is at its cap."""
        if len(self._conns) >= self.max_connections:
            self.stats["over_capacity"] += 1
            return False
        self._conns[conn] = ServerConnection(self.app, self.limits, now)
        self.stats["connections"] += 1
        return True

    def refusal(self) -> bytes:
        """What a connection refused at the cap is told before it is closed."""
        return error_bytes(503, "too many connections", [("Retry-After", "1")])

    def receive(self, conn: object, data: bytes, now: float) -> tuple[bytes, bool]:
        """Bytes from a connection (``b""`` at EOF) → (bytes to write, close afterwards)."""
        sc = self._conns.get(conn)
        if sc is None:  # engines without accept(): the first bytes open the connection
            sc = self._conns[conn] = ServerConnection(self.app, self.limits, now)
            self.stats["connections"] += 1
        out = sc.receive(data, now)
        self.stats["malformed"] += 0  # a column of nodes.csv from the first bytes on, as ever
        return out, self._settle(conn, sc)

    def deadline(self, conn: object) -> float | None:
        """Node time of the connection's next deadline (None: none, or unknown)."""
        sc = self._conns.get(conn)
        return None if sc is None else sc.deadline()

    def on_timer(self, conn: object, now: float) -> tuple[bytes, bool]:
        """The deadline passed: (bytes to write, close afterwards) as :meth:`receive`."""
        sc = self._conns.get(conn)
        if sc is None:
            return b"", True
        out = sc.on_timer(now)
        return out, self._settle(conn, sc)

    def lost(self, conn: object, reason: str | None = None) -> None:
        """The engine gave the connection up (``reason`` is counted, e.g. write_timeout)."""
        sc = self._conns.pop(conn, None)
        if sc is not None:
            self._settle(conn, sc)
        if reason is not None:
            self.stats[reason] += 1

    def _settle(self, conn: object, sc: ServerConnection) -> bool:
        """Move the connection's new counters into ``stats``; forget it once closed."""
        self.stats.update(sc.counts)
        sc.counts.clear()
        if sc.closed:
            self._conns.pop(conn, None)
        return sc.closed
