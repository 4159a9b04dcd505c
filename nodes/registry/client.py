"""Transport-free client agents for the HTTP registries (AgentDNS, ANS).

A :class:`RegistryAgent` runs each discovery as a generator of HTTP calls, like the
resolver's walks. It owns the HTTP/1.1 state (:mod:`nodes.registry.http`) but not the sockets: it
asks the engine to ``open``/``send``/``close`` numbered connections (:class:`ConnAction`)
and is told ``connected``, ``receive`` and ``closed``. TLS, when configured, is the
engine's business; the agent only counts its handshake round trip.

* **AgentDNS**: one ``POST /api/v1/discovery/search`` (optionally a resolve call for the
  first hit).
* **ANS**: intent → capability is explicit: the capability list (``GET /v1/capabilities``,
  cached for ``cache_ttl``) is ranked on the client with the same scorer the ToolDNS
  servers use; then ``GET /v1/agents?capability=…``, a local ranking of the listed agents,
  and one signed ``POST /v1/resolve`` per agent kept. Each answer's certificate chain
  (to the run CA) and Ed25519 signature are verified; an optional OCSP-style revocation
  call is cached until its ``nextUpdate``.
* **MCP Registry**: names only are searched (a substring match), so the client asks
  ``GET /v0.1/servers?search=`` for a few words of the intent and ranks the union itself
  with the same scorer (``searches``, :func:`search_words`).

Connections: a new one per discovery (``keepalive=False``; the client closes it after
the last response), or a per-agent pool kept open across discoveries.
"""

from __future__ import annotations

import json
import re
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Literal, get_args
from urllib.parse import SplitResult, quote, urlencode, urlsplit

import h11
from cryptography import x509

from nodes.dns.zone import Address
from nodes.registry.http import ClientConnection, Response
from nodes.registry.mcp import PUBLISHER as MCP_PUBLISHER
from nodes.registry.pki import (
    Identity,
    TrustError,
    canonical,
    serial_hex,
    verify_chain,
    verify_signature,
)
from nodes.resolver.types import Discovery, Endpoint
from nodes.scoring import ScoreIndex, Scorer, top_k

#: The registries this client speaks (the simulator's table, ``sim.build.registries``,
#: names the same kinds; nodes cannot import it, a test checks the two agree).
RegistryKind = Literal["agentdns", "ans-v0", "mcp-registry"]


def registry_kind(name: str) -> RegistryKind:
    """``name`` as a kind this client speaks; ValueError for any other."""
    for kind in get_args(RegistryKind):
        if name == kind:
            return kind
    raise ValueError(f"no registry client speaks kind {name!r}")


@dataclass(frozen=True, slots=True)
class RegistryConfig:
    kind: RegistryKind = "agentdns"
    keepalive: bool = False
    tls: bool = False
    timeout: float = 5.0  # seconds per HTTP call (and per connection attempt)
    token: str = ""  # AgentDNS bearer token the registry issued (none sent when empty)
    resolve: bool = False  # AgentDNS: also call resolve for the first hit
    resolve_top: int = 1  # ANS: agents resolved (one signed POST each)
    verify: bool = True  # ANS: verify certificate chain and signatures
    revocation: bool = False  # ANS: OCSP-style check of the registry certificate
    cache_ttl: float = 300.0  # ANS: capability list and revocation answers
    answer_ttl: float = 0.0  # seconds a search's answer is kept per intent (0: never)
    answer_entries: int = 10_000  # answers kept at most (the oldest go first)
    searches: int = 3  # MCP Registry: name searches per discovery (one intent word each)


@dataclass(frozen=True, slots=True)
class ConnAction:
    """What the agent wants the engine to do with connection ``conn``."""

    kind: Literal["open", "send", "close"]
    conn: int
    dst: Address
    data: bytes = b""
    tls: bool = False


@dataclass(slots=True)
class HttpStep:
    """One HTTP exchange of a discovery (application bytes; the engine adds the wire)."""

    call: str
    conn: int
    sent: float
    rtt: float | None = None
    bytes_out: int = 0
    bytes_in: int = 0
    status: int | None = None
    outcome: str = "sent"


@dataclass
class RegistryResult:
    tag: object
    request: Discovery
    sent: float
    finished: float = 0.0
    endpoints: list[Endpoint] = field(default_factory=list)
    error: str | None = None
    steps: list[HttpStep] = field(default_factory=list)
    connections: list[int] = field(default_factory=list)  # connections this discovery opened
    round_trips: int = 0
    examined: int = 0  # items the client itself ranked (ANS capabilities and agents)
    verified: int = 0  # signatures verified

    @property
    def latency(self) -> float:
        return self.finished - self.sent


@dataclass(frozen=True, slots=True)
class _Call:
    name: str
    method: str
    target: str
    headers: list[tuple[str, str]]
    body: bytes = b""


@dataclass
class _Conn:
    id: int
    http: ClientConnection
    connected: bool = False
    task: _Task | None = None


@dataclass
class _Task:
    result: RegistryResult
    gen: Generator[_Call, tuple[Response, float], None]
    conn: _Conn | None = None
    call: _Call | None = None
    step: HttpStep | None = None
    deadline: float | None = None


def _answer_key(request: Discovery) -> tuple[str, str, int]:
    return request.intent, request.service or "", request.k or 0


def ans_registration(provider: Identity, fields: dict, now: float) -> bytes:
    """The body of an ANS ``POST /v1/agents`` signed by ``provider`` (whose certificate,
    from the registry's CA, names the ``provider`` field): ``fields`` (agentID,
    agentCapability, protocol, provider, description, address, port) plus ``timestamp``
    (node time) go under the Ed25519 signature, the certificate rides along."""
    signed = {**fields, "timestamp": round(now, 6)}
    return canonical({**signed, "cert": provider.cert_pem,
                      "signature": provider.sign(canonical(signed))})


def _json_call(name: str, method: str, target: str, obj: object, headers=()) -> _Call:
    body = json.dumps(obj, separators=(",", ":")).encode()
    return _Call(name, method, target, [*headers, ("Content-Type", "application/json"),
                                        ("Accept", "application/json")], body)


class RegistryAgent:
    """An AI agent discovering tools through one HTTP registry."""

    def __init__(self, registry: Address, host: str, config: RegistryConfig,
                 scorer: Scorer | None = None, ca: x509.Certificate | None = None,
                 name: str = "agent") -> None:
        if config.kind == "ans-v0" and (scorer is None or (config.verify and ca is None)):
            raise ValueError("an ANS agent needs a scorer (intent → capability) and the CA")
        if config.kind == "mcp-registry" and scorer is None:
            raise ValueError("an MCP Registry agent needs a scorer (it ranks what it lists)")
        self.registry = registry
        self.host = host
        self.config = config
        self.scorer = scorer
        self.ca = ca
        self.name = name
        self._next_conn = 1
        self._conns: dict[int, _Conn] = {}
        self._idle: list[_Conn] = []
        self._out: list[ConnAction] = []
        self._done: list[RegistryResult] = []
        self._caps: dict[str, tuple[float, list[dict], ScoreIndex]] = {}  # service -> cache
        self._ocsp: dict[str, float] = {}  # serial -> good until
        # (intent, service, k) -> (good until, endpoints): answers kept (config.answer_ttl)
        self._answers: dict[tuple[str, str, int], tuple[float, list[Endpoint]]] = {}
        self.ignored = 0
        self.answer_hits = 0

    def instance(self) -> RegistryAgent:
        """An agent as this one was built (no connection, no cache), for one run."""
        return RegistryAgent(self.registry, self.host, self.config, self.scorer, self.ca,
                             self.name)

    # -- engine interface ---------------------------------------------------------

    def ask(self, tag: object, request: Discovery, now: float) -> RegistryResult:
        result = RegistryResult(tag=tag, request=request, sent=now)
        if self.config.answer_ttl > 0:  # a repeated intent from the agent's own cache
            kept = self._answers.get(_answer_key(request))
            if kept is not None and now < kept[0]:
                self.answer_hits += 1
                result.endpoints, result.finished = list(kept[1]), now
                self._done.append(result)
                return result
        kind = self.config.kind
        gen = (self._agentdns(request, result) if kind == "agentdns" else
               self._mcp(request, result) if kind == "mcp-registry" else
               self._ans(request, result))
        task = _Task(result, gen)
        self._advance(task, None, now)
        return result

    def to_send(self) -> list[ConnAction]:
        out, self._out = self._out, []
        return out

    def pop_done(self) -> list[RegistryResult]:
        out, self._done = self._done, []
        return out

    def next_timer(self) -> float | None:
        return min((c.task.deadline for c in self._conns.values()
                    if c.task is not None and c.task.deadline is not None), default=None)

    def on_timer(self, now: float) -> None:
        for conn in list(self._conns.values()):
            task = conn.task
            if task is not None and task.deadline is not None and task.deadline <= now:
                if task.step is not None:
                    task.step.outcome = "timeout"
                self._fail(task, now, "timeout")

    def connected(self, conn_id: int, now: float) -> None:
        conn = self._conns.get(conn_id)
        if conn is None or conn.connected:
            return
        conn.connected = True
        if conn.task is not None and conn.task.call is not None:
            self._write(conn.task, now)

    def receive(self, conn_id: int, data: bytes, now: float) -> None:
        conn = self._conns.get(conn_id)
        task = conn.task if conn is not None else None
        if conn is None or task is None or task.step is None:
            self.ignored += 1
            return
        task.step.bytes_in += len(data)
        try:
            resp = conn.http.receive(data)
        except (h11.RemoteProtocolError, h11.LocalProtocolError):
            self._fail(task, now, "bad HTTP response")
            return
        if resp is None:
            return
        step = task.step
        step.rtt, step.status, step.outcome = now - step.sent, resp.status, "ok"
        task.step, task.deadline = None, None
        if resp.status >= 400:
            self._fail(task, now, f"HTTP {resp.status}")
            return
        self._advance(task, (resp, now), now)

    def closed(self, conn_id: int, now: float) -> None:
        conn = self._conns.pop(conn_id, None)
        if conn is None:
            return
        if conn in self._idle:
            self._idle.remove(conn)
        if conn.task is not None:
            why = "connection refused" if not conn.connected else "connection closed"
            conn.task.conn = None
            self._fail(conn.task, now, why)

    # -- driver ---------------------------------------------------------------------

    def _advance(self, task: _Task, value: tuple[Response, float] | None, now: float) -> None:
        try:
            call = task.gen.send(value) if value is not None else next(task.gen)
        except StopIteration:
            self._finish(task, now, None)
            return
        except (TrustError, ValueError, KeyError, TypeError) as exc:
            self._finish(task, now, f"{type(exc).__name__}: {exc}")
            return
        task.call = call
        if task.conn is None:
            if self.config.keepalive and self._idle:
                task.conn = self._idle.pop()
                task.conn.task = task
            else:
                conn = _Conn(self._next_conn, ClientConnection(self.host), task=task)
                self._next_conn += 1
                self._conns[conn.id] = conn
                task.conn = conn
                task.result.connections.append(conn.id)
                task.result.round_trips += 1 + (1 if self.config.tls else 0)
                task.deadline = now + self.config.timeout
                self._out.append(ConnAction("open", conn.id, self.registry,
                                            tls=self.config.tls))
                return
        self._write(task, now)

    def _write(self, task: _Task, now: float) -> None:
        conn, call = task.conn, task.call
        assert conn is not None and call is not None
        data = conn.http.request(call.method, call.target, call.headers, call.body)
        task.step = HttpStep(call.name, conn.id, now, bytes_out=len(data))
        task.result.steps.append(task.step)
        task.result.round_trips += 1
        task.deadline = now + self.config.timeout
        task.call = None
        self._out.append(ConnAction("send", conn.id, self.registry, data))

    def _finish(self, task: _Task, now: float, error: str | None) -> None:
        result = task.result
        result.finished, result.error = now, error
        if error is None and self.config.answer_ttl > 0 and result.endpoints:
            answers = self._answers
            key = _answer_key(result.request)
            answers.pop(key, None)  # re-inserted last: the dict's order is the age order
            while len(answers) >= self.config.answer_entries:
                del answers[next(iter(answers))]
            answers[key] = (now + self.config.answer_ttl, list(result.endpoints))
        conn = task.conn
        task.conn, task.deadline = None, None
        if conn is not None:
            conn.task = None
            if self.config.keepalive and error is None and conn.http.reusable:
                self._idle.append(conn)
            else:
                self._conns.pop(conn.id, None)
                self._out.append(ConnAction("close", conn.id, self.registry))
        self._done.append(result)

    def _fail(self, task: _Task, now: float, why: str) -> None:
        task.gen.close()
        self._finish(task, now, why)  # an error never returns the connection to the pool

    # -- discoveries ------------------------------------------------------------------

    def _agentdns(self, req: Discovery, result: RegistryResult):
        auth = [("Authorization", f"Bearer {self.config.token}")] if self.config.token else []
        limit = req.k or 10
        resp, _ = yield _json_call("search", "POST", "/api/v1/discovery/search",
                                   {"query": req.intent, "limit": limit,
                                    "protocol": req.service}, auth)
        tools = resp.json()["tools"]
        result.endpoints = [Endpoint(t["agentdns_url"], None, 0, 0, 0,
                                     t["agentdns_url"].split("/", 3)[3].rsplit("/", 1)[0])
                            for t in tools]
        if self.config.resolve and tools:
            org, category, name = tools[0]["agentdns_url"].removeprefix("agentdns://").split("/")
            target = "/api/v1/discovery/resolve/" + "/".join(quote(p) for p in
                                                             (org, category, name))
            resp, _ = yield _Call("resolve", "GET", target, [*auth, ("Accept",
                                                                     "application/json")])
            url = urlsplit(resp.json()["endpoint_url"])
            first = result.endpoints[0]
            result.endpoints[0] = Endpoint(first.target, url.hostname, url.port or 443, 0, 0,
                                           first.zone)

    def _ans(self, req: Discovery, result: RegistryResult):
        assert self.scorer is not None
        accept = [("Accept", "application/json")]
        cached = self._caps.get(req.service)
        now = result.sent
        if cached is None or cached[0] <= now:
            resp, now = yield _Call("capabilities", "GET",
                                    "/v1/capabilities?" + urlencode({"protocol": req.service}),
                                    accept)
            caps = resp.json()["capabilities"]
            index = self.scorer.index([c["name"] for c in caps], [c["description"]
                                                                  for c in caps])
            cached = self._caps[req.service] = (now + self.config.cache_ttl, caps, index)
        _, caps, index = cached
        result.examined += len(caps)
        best = top_k(index.scores(req.intent), 1)
        if not best:
            return
        capability = caps[best[0]]["name"]
        resp, now = yield _Call("agents", "GET", "/v1/agents?" + urlencode(
            {"capability": capability, "protocol": req.service}), accept)
        agents = resp.json()["agents"]
        result.examined += len(agents)
        if not agents:
            return
        ranked = self.scorer.index([a["ansName"] for a in agents],
                                   [a["description"] for a in agents])
        keep = top_k(ranked.scores(req.intent), max(1, self.config.resolve_top))
        for i in keep:
            agent = agents[i]
            request = {"requestType": "resolve", "protocol": req.service,
                       "agentID": agent["agentID"], "agentCapability": capability,
                       "provider": agent["provider"], "version": "^1.0.0"}
            resp, now = yield _json_call("resolve", "POST", "/v1/resolve", request)
            answer = resp.json()
            if self.config.verify:
                assert self.ca is not None
                cert = verify_chain(answer["cert"], self.ca, now)
                payload = {k: answer[k] for k in ("Endpoint", "actualEndpoint", "ttl")}
                verify_signature(cert, canonical(payload), answer["signature"])
                result.verified += 1
                serial = serial_hex(cert)
                if self.config.revocation and self._ocsp.get(serial, -1.0) <= now:
                    resp, now = yield _Call("ocsp", "GET", f"/v1/ocsp/{serial}", accept)
                    status = resp.json()
                    verify_signature(self.ca, canonical({k: status[k] for k in (
                        "serial", "status", "thisUpdate", "nextUpdate")}), status["signature"])
                    result.verified += 1
                    if status["status"] != "good":
                        raise TrustError(f"registry certificate {status['status']}")
                    self._ocsp[serial] = min(float(status["nextUpdate"]),
                                             now + self.config.cache_ttl)
            url = urlsplit(answer["actualEndpoint"])
            result.endpoints.append(Endpoint(answer["Endpoint"], url.hostname, url.port or 0,
                                             0, 0, capability))

    def _mcp(self, req: Discovery, result: RegistryResult):
        """The MCP Registry searches names only: one ``GET /v0.1/servers?search=`` per
        intent word (:func:`search_words`, longest first, at most ``searches``), one page
        of at most 100 each; the union (by name), kept to the request's protocol, is
        ranked here with the scheme's scorer over title and description, top K."""
        assert self.scorer is not None
        accept = [("Accept", "application/json")]
        found: dict[str, dict] = {}
        for word in search_words(req.intent, self.config.searches):
            resp, _ = yield _Call("servers", "GET", "/v0.1/servers?" + urlencode(
                {"search": word, "limit": MCP_PAGE, "version": "latest"}), accept)
            body = resp.json()
            servers = body["servers"] if isinstance(body, dict) else None
            if not isinstance(servers, list) or len(servers) > MCP_PAGE:
                raise ValueError("MCP Registry: not a server list of at most one page")
            for item in servers:
                server = item["server"]
                name = server["name"]
                if not isinstance(name, str):
                    raise TypeError("MCP Registry: a server name is not text")
                found.setdefault(name, item)
        kept = [(n, item) for n, item in found.items()
                if not req.service or _mcp_protocol(item) == req.service]
        result.examined += len(kept)
        if not kept:
            return
        index = self.scorer.index([n for n, _ in kept], [_mcp_text(item) for _, item in kept])
        for i in top_k(index.scores(req.intent), req.k or 10):
            name, item = kept[i]
            url = _mcp_remote(item)
            if url is None:
                continue  # a listed server without a usable remote is skipped
            result.endpoints.append(Endpoint(name, None, url.port or 443,
                                             len(result.endpoints), 0, url.hostname or ""))


MCP_PAGE = 100  # the MCP Registry's largest page
_WORD = re.compile(r"[a-z0-9]+")


def search_words(intent: str, most: int) -> list[str]:
    """The words of ``intent`` an MCP Registry client searches names for: lower case,
    three characters or more, each once, longest first (ties in the intent's order)."""
    words = list(dict.fromkeys(w for w in _WORD.findall(intent.lower()) if len(w) >= 3))
    return sorted(words, key=len, reverse=True)[:max(0, most)]


def _mcp_protocol(item: dict) -> str | None:
    meta = item.get("_meta")
    publisher = meta.get(MCP_PUBLISHER) if isinstance(meta, dict) else None
    protocol = publisher.get("protocol", "mcp") if isinstance(publisher, dict) else "mcp"
    return protocol if isinstance(protocol, str) else None


def _mcp_text(item: dict) -> str:
    server = item["server"]
    title, description = server.get("title", ""), server.get("description", "")
    if not isinstance(title, str) or not isinstance(description, str):
        raise TypeError("MCP Registry: title and description must be text")
    return f"{title} {description}"


def _mcp_remote(item: dict) -> SplitResult | None:
    """The first https remote (streamable-http or sse) of a listed server, split."""
    remotes = item["server"].get("remotes", [])
    for remote in remotes if isinstance(remotes, list) else []:
        if not isinstance(remote, dict) or remote.get("type") not in ("streamable-http", "sse"):
            continue
        url = remote.get("url")
        if isinstance(url, str) and url.startswith("https://"):
            try:
                split = urlsplit(url)
                split.port  # noqa: B018 - ValueError for a port out of range
            except ValueError:
                continue
            if split.hostname:
                return split
    return None
