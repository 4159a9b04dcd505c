"""ANS (draft-narajala-ans-00) as a sans-IO request → response application.

Names ``protocol://agentID.capability.provider.vMAJOR.MINOR.PATCH``; the draft has no
natural-language search, so clients map intent → capability themselves from ``GET
/v1/capabilities``, list ``GET /v1/agents?capability=…``, then resolve with an
``AgentCapabilityRequest`` (``POST /v1/resolve``). Responses are signed (Ed25519) by the
registry and carry its X.509 certificate; ``GET /v1/ocsp/{serial}`` is an OCSP-style
revocation answer signed by the CA. Registration (``POST /v1/agents``) is signed by the
provider with a certificate from the registry's CA (see :meth:`ANSRegistry.register`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from urllib.parse import parse_qs, urlsplit

from cryptography.x509.oid import NameOID

from nodes.registry.base import (
    ANS_VERSION,
    LABEL,
    Catalogue,
    RegistryTool,
    Routes,
    integer_field,
    json_object,
    text_field,
)
from nodes.registry.http import Request, Response, json_response
from nodes.registry.pki import (
    Identity,
    TrustError,
    canonical,
    serial_hex,
    verify_chain,
    verify_signature,
)
from nodes.scoring import Scorer


class ANSRegistry(Routes):
    """ANS resolution with signed answers; ``revoked`` serials fail the OCSP check."""

    server_name = "ans"
    search_routes = ("agents",)  # GET /v1/agents: the capability's agents, the discovery step

    def __init__(self, tools: Sequence[RegistryTool], scorer: Scorer, identity: Identity,
                 ca: Identity, summaries: dict[str, str] | None = None, ttl: int = 300) -> None:
        super().__init__()
        self.catalogue = Catalogue(scorer, list(tools))
        self.identity = identity
        self.ca = ca
        self.ttl = ttl
        self.summaries = summaries or {}
        self.revoked: set[str] = set()
        self._by_name = {t.ans_name: t for t in tools}

    def instance(self) -> ANSRegistry:
        new = super().instance()
        assert isinstance(new, ANSRegistry)
        new._by_name = dict(self._by_name)  # registrations in a run stay in it
        return new

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
            body = json_object(req)
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
        body = json_object(req)
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
        provider = text_field(body["provider"], "provider", 63)
        names = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
        if names != [provider]:
            return self._error(403, f"certificate does not name provider {provider!r}")
        agent_id = text_field(body["agentID"], "agentID", 63)
        protocol = text_field(body["protocol"], "protocol", 32)
        if not (LABEL.match(agent_id) and LABEL.match(provider) and LABEL.match(protocol)):
            return self._error(400, "agentID, provider and protocol must be DNS-style labels")
        tool = RegistryTool(id=f"registered:{provider}:{agent_id}", name=agent_id,
                            description=text_field(body["description"], "description"),
                            service=protocol, org=provider,
                            category=text_field(body["agentCapability"], "agentCapability",
                                           255).replace("--", "."),
                            slug=agent_id, address=text_field(body["address"], "address", 255),
                            port=integer_field(body["port"], "port", 1, 65535))
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
