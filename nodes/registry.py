"""HTTP registry baselines, sans-IO: AgentDNS and ANS as request → response applications.

Both search with the very scorer objects the ToolDNS servers use (``nodes.scoring``), over
the same tools, so accuracy differences come from the architecture, not the retriever.

* :class:`AgentDNSRegistry` (Cui et al. 2025): ``POST /api/v1/discovery/search`` with a
  bearer token ``agent_…`` and ``{"query", "limit"}`` (plus our optional ``protocol``
  filter, the counterpart of ToolDNS's ``_mcp`` label) → ``{"tools": […], "total", "query"}``
  in AgentDNS's field layout; ``GET /api/v1/discovery/resolve/{org}/{category}/{name}``;
  registration ``POST /api/v1/services/?organization_id=N``.
* :class:`ANSRegistry` (draft-narajala-ans-00): names
  ``protocol://agentID.capability.provider.vMAJOR.MINOR.PATCH``; the draft has no
  natural-language search, so clients map intent → capability themselves from
  ``GET /v1/capabilities``, list ``GET /v1/agents?capability=…``, then resolve with an
  ``AgentCapabilityRequest`` (``POST /v1/resolve``). Responses are signed (Ed25519) by the
  registry and carry its X.509 certificate; ``GET /v1/ocsp/{serial}`` is an OCSP-style
  revocation answer signed by the CA.
* :class:`RegistryServer` holds the HTTP/1.1 connections (:mod:`nodes.http`) of one
  registry host; engines feed it bytes per connection.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import parse_qs, unquote, urlsplit

import numpy as np

from nodes.http import App, Request, Response, ServerConnection, json_response
from nodes.pki import Identity, canonical, serial_hex
from nodes.scoring import ScoreIndex, Scorer, top_k

TOKEN = re.compile(r"^Bearer agent_[A-Za-z0-9_-]{43}$")
ANS_VERSION = "1.0.0"


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


class _Routes:
    """Shared plumbing: request counters and JSON error answers."""

    server_name = "registry"

    def __init__(self) -> None:
        self.stats: Counter[str] = Counter()

    def _error(self, status: int, message: str) -> Response:
        self.stats[f"http_{status}"] += 1
        return json_response(status, {"error": message}, self.server_name)

    def __call__(self, req: Request, now: float) -> Response:
        try:
            return self.route(req, now)
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
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


class AgentDNSRegistry(_Routes):
    server_name = "agentdns"

    def __init__(self, tools: Sequence[RegistryTool], scorer: Scorer,
                 max_limit: int = 100) -> None:
        super().__init__()
        self.catalogue = _Catalogue(scorer, list(tools))
        self.max_limit = max_limit

    def route(self, req: Request, now: float) -> Response:
        url = urlsplit(req.target)
        path = url.path.rstrip("/")
        if not (req.header("authorization") or "").strip() or not TOKEN.match(
                req.header("authorization") or ""):
            return self._error(401, "missing or malformed bearer token")
        if req.method == "POST" and path == "/api/v1/discovery/search":
            body = req.json()
            query, limit = body["query"], int(body.get("limit", 10))
            if not isinstance(query, str) or not 1 <= limit <= self.max_limit:
                return self._error(400, "query must be text and 1 <= limit <= 100")
            protocol = body.get("protocol")
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
            org_id = parse_qs(url.query).get("organization_id", [""])[0]
            body = req.json()
            if not org_id.isdigit():
                return self._error(400, "organization_id must be a number")
            category = str(body["category"])
            slug = re.sub(r"[^a-z0-9-]+", "-", str(body["name"]).lower()).strip("-") or "svc"
            endpoint = urlsplit(str(body["endpoint_url"]))
            tool = RegistryTool(id=f"registered:{org_id}:{slug}", name=str(body["name"]),
                                description=str(body["description"]),
                                service=str(body.get("protocol", "mcp")).lower(),
                                org=str(body.get("organization", f"org{org_id}")),
                                category=category, slug=slug,
                                address=endpoint.hostname or "", port=endpoint.port or 443)
            self.catalogue.add(tool)
            self.stats["register"] += 1
            return json_response(201, {"id": tool.id, "agentdns_url": tool.agentdns_url},
                                 self.server_name)
        return self._error(404, "not found")


class ANSRegistry(_Routes):
    """ANS resolution with signed answers; ``revoked`` serials fail the OCSP check."""

    server_name = "ans"

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
            body = req.json()
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
            body = req.json()
            tool = RegistryTool(id=f"registered:{body['agentID']}", name=str(body["agentID"]),
                                description=str(body["description"]),
                                service=str(body["protocol"]), org=str(body["provider"]),
                                category=str(body["agentCapability"]).replace("--", "."),
                                slug=str(body["agentID"]), address=str(body["address"]),
                                port=int(body["port"]))
            self.catalogue.add(tool)
            self._by_name[tool.ans_name] = tool
            self.stats["register"] += 1
            return json_response(201, {"ansName": tool.ans_name}, self.server_name)
        return self._error(404, "not found")


def _version_matches(spec: str) -> bool:
    """A small semver range check against the one version the testbed publishes."""
    if spec in ("*", "", ANS_VERSION):
        return True
    if spec.startswith("^"):
        return spec[1:].split(".")[0] == ANS_VERSION.split(".")[0]
    return False


class RegistryServer:
    """One registry host: its application plus one HTTP/1.1 state machine per connection."""

    def __init__(self, app: App, name: str = "registry") -> None:
        self.app = app
        self.name = name
        self._conns: dict[object, ServerConnection] = {}
        self.stats: Counter[str] = Counter()

    def receive(self, conn: object, data: bytes, now: float) -> tuple[bytes, bool]:
        """Bytes from a connection (``b""`` at EOF) → (bytes to write, close afterwards)."""
        sc = self._conns.get(conn)
        if sc is None:
            sc = self._conns[conn] = ServerConnection(self.app)
            self.stats["connections"] += 1
        errors = sc.errors
        out = sc.receive(data, now)
        self.stats["malformed"] += sc.errors - errors
        if sc.closed:
            self._conns.pop(conn, None)
        return out, sc.closed

    def lost(self, conn: object) -> None:
        self._conns.pop(conn, None)
