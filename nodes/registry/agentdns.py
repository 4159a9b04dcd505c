"""AgentDNS (Cui et al. 2025) as a sans-IO request → response application.

``POST /api/v1/discovery/search`` with a bearer token ``agent_…`` and ``{"query", "limit"}``
(plus our optional ``protocol`` filter, the counterpart of ToolDNS's ``_mcp`` label) →
``{"tools": […], "total", "query"}`` in AgentDNS's field layout; ``GET
/api/v1/discovery/resolve/{org}/{category}/{name}``; registration ``POST
/api/v1/services/?organization_id=N``. Tokens (:class:`TokenStore`) are configured by the
operator or issued by the registry (``POST /api/v1/agents``, an organisation enrolling one
of its agents) and checked against what was issued, in constant time: any token may search
and resolve, only an organisation's token may register services, and only under its own
name.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from collections.abc import Iterable, Mapping, Sequence
from urllib.parse import parse_qs, unquote, urlsplit

from nodes.registry.base import (
    Catalogue,
    RegistryTool,
    Routes,
    json_object,
    text_field,
)
from nodes.registry.http import Request, Response, json_response
from nodes.scoring import Scorer

TOKEN = re.compile(r"^agent_[A-Za-z0-9_-]{43}$")


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

    def instance(self) -> TokenStore:
        """A store holding these tokens, issuing on from the same count."""
        new = TokenStore(self._secret, max_tokens=self.max_tokens)
        new._tokens = dict(self._tokens)
        new._issued = self._issued
        return new

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


class AgentDNSRegistry(Routes):
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
        self.catalogue = Catalogue(scorer, list(tools))
        self.max_limit = max_limit
        self.tokens = tokens if tokens is not None else TokenStore()

    def instance(self) -> AgentDNSRegistry:
        new = super().instance()
        assert isinstance(new, AgentDNSRegistry)
        new.tokens = self.tokens.instance()  # tokens issued in a run stay in it
        return new

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
            body = json_object(req)
            query, limit = body["query"], body.get("limit", 10)
            if (not isinstance(query, str) or isinstance(limit, bool)
                    or not isinstance(limit, int) or not 1 <= limit <= self.max_limit):
                return self._error(400, "query must be text and 1 <= limit <= 100")
            protocol = body.get("protocol")
            if protocol is not None and not isinstance(protocol, str):
                return self._error(400, "protocol must be text")
            self.stats["search"] += 1
            found = self.catalogue.search(query, limit, protocol)
            self.items_scored += self.catalogue.pool(protocol)
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
        body = json_object(req)
        if not org_id.isdigit() or len(org_id) > 18:
            return self._error(400, "organization_id must be a number")
        if body.get("organization", org) != org:
            return self._forbidden(f"this token registers for organisation {org!r} only")
        name = text_field(body["name"], "name", 256)
        category = text_field(body["category"], "category", 256)
        slug = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-") or "svc"
        endpoint = urlsplit(text_field(body["endpoint_url"], "endpoint_url", 2048))
        port = endpoint.port or 443  # ValueError (400) when out of range
        tool = RegistryTool(id=f"registered:{org_id}:{slug}", name=name,
                            description=text_field(body["description"], "description"),
                            service=text_field(body.get("protocol", "mcp"), "protocol", 32).lower(),
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
        name = text_field(json_object(req)["name"], "name", 128)
        agent = f"{principal.removeprefix('org:')}/{name}"
        try:
            token = self.tokens.issue(f"agent:{agent}")
        except (OverflowError, ValueError) as exc:  # store full, or no secret to issue with
            return self._error(403, f"no token issued: {exc}")
        self.stats["token_issued"] += 1
        return json_response(201, {"agent_id": agent, "token": token}, self.server_name)
