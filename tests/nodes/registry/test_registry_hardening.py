"""Hardened HTTP registries (issue 13): parsing across reads, 400/401/403/408/413/431/500,
contained handler errors, issued tokens checked for real, signed ANS registration,
deadlines and a connection cap — first on the sans-IO server, then over real sockets."""

from __future__ import annotations

import asyncio
import contextlib
import json

import h11
import pytest

from nodes.registry.agentdns import AgentDNSRegistry, TokenStore
from nodes.registry.client import ans_registration
from nodes.registry.http import ClientConnection, Limits, Request, Response
from nodes.registry.pki import canonical, issue, make_ca
from nodes.registry.server import RegistryServer
from nodes.scoring import make_scorer
from sim.build.registries import REGISTRY_HOST, build_registry, registry_tools
from topologies.synthetic import synthetic

SEARCH = "/api/v1/discovery/search"
ORG_TOKEN = "agent_" + "o" * 43  # configured by the operator for organisation "acme"


@pytest.fixture(scope="module")
def ns():
    return synthetic(n_tools=200, branching=3, depth=2, seed=7, n_orgs=1, n_queries=10)


@pytest.fixture
def agentdns(ns):
    return build_registry("agentdns", ns, make_scorer("bm25"), seed=3,
                          tokens={ORG_TOKEN: "org:acme"})


@pytest.fixture
def ans(ns):
    return build_registry("ans-v0", ns, make_scorer("bm25"), seed=3)


def _request(method: str, target: str, obj: object = None, token: str | None = None,
             extra: list[tuple[str, str]] | None = None, raw: bytes | None = None) -> bytes:
    headers = [("Authorization", f"Bearer {token}")] if token else []
    headers += extra or []
    body = raw if raw is not None else (b"" if obj is None else canonical(obj))
    if body:
        headers.append(("Content-Type", "application/json"))
    return ClientConnection(REGISTRY_HOST).request(method, target, headers, body)


def _status(reply: bytes) -> int:
    return int(reply.split(b" ", 2)[1])


def _responses(data: bytes) -> list[Response]:
    """Every response in ``data`` (one connection's bytes), in order."""
    conn, out = h11.Connection(h11.CLIENT), []
    conn.send(h11.Request(method="GET", target="/", headers=[("Host", "r")]))
    conn.send(h11.EndOfMessage())
    conn.receive_data(data)
    status, body = 0, b""
    while (event := conn.next_event()) not in (h11.NEED_DATA, h11.PAUSED):
        if isinstance(event, h11.Response):
            status, body = event.status_code, b""
        elif isinstance(event, h11.Data):
            body += bytes(event.data)
        elif isinstance(event, h11.EndOfMessage):
            out.append(Response(status, [], body))
            conn.start_next_cycle()
            conn.send(h11.Request(method="GET", target="/", headers=[("Host", "r")]))
            conn.send(h11.EndOfMessage())
    return out


# ---------------------------------------------------------------- sans-IO: parsing


def test_request_split_byte_by_byte_is_answered(agentdns) -> None:
    server = agentdns.server
    data = _request("POST", SEARCH, {"query": "weather forecast", "limit": 2}, agentdns.token)
    replies = [server.receive("c", data[i:i + 1], float(i) * 1e-3) for i in range(len(data))]
    assert all(r == (b"", False) for r in replies[:-1])  # nothing until the last byte
    reply, close = replies[-1]
    assert _status(reply) == 200 and not close
    assert len(json.loads(reply.split(b"\r\n\r\n", 1)[1])["tools"]) == 2
    # the same connection takes a second request, split in two arbitrary places
    again = _request("POST", SEARCH, {"query": "maps", "limit": 1}, agentdns.token)
    assert server.receive("c", again[:7], 1.0) == (b"", False)
    assert server.receive("c", again[7:40], 1.0) == (b"", False)
    assert _status(server.receive("c", again[40:], 1.0)[0]) == 200


def test_pipelined_requests_get_one_answer_each_in_order(agentdns) -> None:
    one = _request("POST", SEARCH, {"query": "a", "limit": 1}, agentdns.token)
    two = _request("GET", "/api/v1/nothing-here", None, agentdns.token)
    reply, close = agentdns.server.receive("p", one + two, 0.0)
    assert [r.status for r in _responses(reply)] == [200, 404] and not close


def test_oversized_body_gets_413_before_it_is_read(agentdns) -> None:
    server = agentdns.server
    head = (b"POST " + SEARCH.encode() + b" HTTP/1.1\r\nHost: r\r\nAuthorization: Bearer "
            + agentdns.token.encode() + b"\r\nContent-Length: 10000000\r\n\r\n")
    reply, close = server.receive("big", head, 0.0)  # headers only: no body byte sent yet
    assert _status(reply) == 413 and close and b"Connection: close" in reply
    assert server.stats["body_too_large"] == 1
    assert agentdns.server.app.stats["search"] == 0  # the application never saw it


def test_chunked_body_over_the_limit_gets_413_while_reading(ns) -> None:
    setup = build_registry("agentdns", ns, make_scorer("bm25"), seed=3,
                           limits=Limits(max_body=1000))
    head = (b"POST " + SEARCH.encode() + b" HTTP/1.1\r\nHost: r\r\nAuthorization: Bearer "
            + setup.token.encode() + b"\r\nTransfer-Encoding: chunked\r\n\r\n")
    server = setup.server
    assert server.receive("ch", head, 0.0) == (b"", False)
    chunk = b"258\r\n" + b"x" * 600 + b"\r\n"
    assert server.receive("ch", chunk, 0.0) == (b"", False)  # 600 bytes: under the limit
    reply, close = server.receive("ch", chunk, 0.0)  # 1,200 > 1,000
    assert _status(reply) == 413 and close and server.stats["body_too_large"] == 1


def test_huge_header_arriving_whole_gets_431_too(agentdns) -> None:
    head = b"GET / HTTP/1.1\r\nHost: r\r\nX-Pad: " + b"p" * 20000 + b"\r\n\r\n"
    reply, close = agentdns.server.receive("whole", head, 0.0)
    assert _status(reply) == 431 and close and agentdns.server.app.stats["http_401"] == 0


def test_huge_header_gets_431(agentdns) -> None:
    server = agentdns.server
    head = b"GET / HTTP/1.1\r\nHost: r\r\nX-Pad: " + b"p" * 40000
    reply = b""
    for i in range(0, len(head), 4096):  # arrives in pieces, never completes
        reply, close = server.receive("hdr", head[i:i + 4096], 0.0)
        if reply:
            break
    assert _status(reply) == 431 and close
    assert server.stats["headers_too_large"] == 1


@pytest.mark.parametrize("raw", [
    b'{"query": "x", "limit": 1e400}',  # parses to inf
    b'{"query": "x", "limit": NaN}',
    b'{"query": "x", "limit": 1.0}',  # not an integer
    b'{"query": "x", "limit": true}',
    b'{"query": "x", "limit": 100000000000000000000000}',
    b'{"query": "x", "limit": 1' + b"0" * 5000 + b"}",  # over Python's int digits limit
    b"[" * 100_000 + b"]" * 100_000,  # nesting depth 10^5
    b'{"query": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    b"\xff\xfe not utf-8",
    b'["query", "limit"]',
    b'{"query": "x", "protocol": {"a": 1}}',
], ids=["1e400", "nan", "float", "bool", "1e23", "5000-digits", "deep-array", "deep-field",
        "not-utf8", "array", "protocol-object"])
def test_bad_json_values_get_400_and_keep_the_connection(ns, raw: bytes) -> None:
    # a body limit of 1 MiB lets the 200 kB nesting cases reach the JSON parser
    setup = build_registry("agentdns", ns, make_scorer("bm25"), seed=3,
                           limits=Limits(max_body=1 << 20))
    server, token = setup.server, setup.token
    reply, close = server.receive("j", _request("POST", SEARCH, token=token, raw=raw), 0.0)
    assert _status(reply) == 400 and not close
    ok = _request("POST", SEARCH, {"query": "x", "limit": 1}, token)
    assert _status(server.receive("j", ok, 0.0)[0]) == 200  # same connection still serves


def test_garbage_gets_400_and_the_server_keeps_serving(agentdns) -> None:
    server = agentdns.server
    for i, (junk, want) in enumerate([
            (b"\x00\x01\x02\r\n\r\n", 400), (b"GET / HTTP/9.9\r\nHost: a\r\n\r\n", 505),
            (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\n\r\n", 400)]):  # no Host
        reply, close = server.receive(f"g{i}", junk, 0.0)
        assert _status(reply) == want and close
    assert server.stats["malformed"] == 5 and server.open_connections == 0
    ok = _request("POST", SEARCH, {"query": "x", "limit": 1}, agentdns.token)
    assert _status(server.receive("fresh", ok, 0.0)[0]) == 200


def test_handler_exception_is_a_500_and_the_connection_stays_usable() -> None:
    calls = []

    def app(req: Request, now: float) -> Response:
        calls.append(req.target)
        if req.target == "/boom":
            raise RuntimeError("a bug in the handler")
        return Response(200, [("Content-Type", "text/plain")], b"ok")

    server = RegistryServer(app, name="t")
    reply, close = server.receive("h", _request("GET", "/boom"), 0.0)
    assert _status(reply) == 500 and not close and b"a bug" not in reply
    reply, close = server.receive("h", _request("GET", "/fine"), 0.0)
    assert _status(reply) == 200 and not close
    assert server.stats["handler_error"] == 1 and calls == ["/boom", "/fine"]


def test_eof_in_the_middle_of_a_request_is_counted(agentdns) -> None:
    server = agentdns.server
    data = _request("POST", SEARCH, {"query": "x", "limit": 1}, agentdns.token)
    assert server.receive("e", data[:-5], 0.0) == (b"", False)
    assert server.receive("e", b"", 0.0) == (b"", True)
    assert server.stats["aborted"] == 1


# ---------------------------------------------------------------- sans-IO: deadlines


def test_request_deadline_gives_408_and_idle_deadline_closes_quietly(ns) -> None:
    setup = build_registry("agentdns", ns, make_scorer("bm25"), seed=3,
                           limits=Limits(request_timeout=2.0, idle_timeout=5.0))
    server = setup.server
    assert server.accept("slow", 10.0)
    assert server.deadline("slow") == 12.0  # from the accept: a silent peer times out too
    server.receive("slow", b"POST / HTTP/1.1\r\nHost: r\r\n", 10.5)
    server.receive("slow", b"X-A: b\r\n", 11.9)  # trickling bytes do not move the deadline
    assert server.on_timer("slow", 11.99) == (b"", False)
    reply, close = server.on_timer("slow", 12.0)
    assert _status(reply) == 408 and close and server.stats["request_timeout"] == 1
    # a trickle that is still arriving past the deadline is cut off by receive itself
    assert server.accept("drip", 13.0)
    server.receive("drip", b"GET / HTTP/1.1\r\n", 13.0)
    reply, close = server.receive("drip", b"X", 15.0)
    assert _status(reply) == 408 and close and server.stats["request_timeout"] == 2
    # keep-alive: after an answer the idle deadline applies; quiet close, nothing written
    assert server.accept("ka", 20.0)
    ok = _request("POST", SEARCH, {"query": "x", "limit": 1}, setup.token)
    assert _status(server.receive("ka", ok, 20.1)[0]) == 200
    assert server.deadline("ka") == pytest.approx(25.1)
    server.receive("ka", ok[:10], 24.0)  # the next request's first byte: request deadline
    assert server.deadline("ka") == pytest.approx(26.0)
    assert _status(server.receive("ka", ok[10:], 24.5)[0]) == 200
    assert server.on_timer("ka", 29.6) == (b"", True) and server.stats["idle_timeout"] == 1
    # a connection that never sends a byte is closed quietly at the request deadline
    assert server.accept("mute", 30.0)
    assert server.on_timer("mute", 32.0) == (b"", True) and server.stats["idle_timeout"] == 2


def test_connection_cap_refuses_and_counts(ns) -> None:
    setup = build_registry("agentdns", ns, make_scorer("bm25"), seed=3, max_connections=2)
    server = setup.server
    assert server.accept("a", 0.0) and server.accept("b", 0.0)
    assert not server.accept("c", 0.0) and server.stats["over_capacity"] == 1
    assert _status(server.refusal()) == 503
    server.receive("a", b"", 0.0)  # one closes: room again
    assert server.accept("c", 0.0)


# ---------------------------------------------------------------- tokens


def test_forged_and_never_issued_tokens_get_401_with_a_challenge(agentdns) -> None:
    app = agentdns.server.app
    q = {"query": "weather", "limit": 1}
    for header in [None, "Bearer agent_" + "T" * 43,  # the old default: right shape, never issued
                   "Bearer " + agentdns.token[:-1] + ("A" if agentdns.token[-1] != "A" else "B"),
                   "Bearer agent_short", "Basic " + agentdns.token, agentdns.token]:
        headers = [("Authorization", header)] if header else []
        resp = app(Request("POST", SEARCH, headers, canonical(q)), 0.0)
        challenge = dict(resp.headers).get("WWW-Authenticate", "")
        assert resp.status == 401 and challenge.startswith('Bearer realm="agentdns"'), header
        assert ('error="invalid_token"' in challenge) == (header is not None)
    assert app.stats["http_401"] == 6
    resp = app(Request("POST", SEARCH, [("Authorization", "bearer " + agentdns.token)],
                       canonical(q)), 0.0)  # the scheme is case-insensitive (RFC 7235)
    assert resp.status == 200


def test_a_rogue_tool_cannot_be_registered_without_an_organisation_token(agentdns) -> None:
    app = agentdns.server.app
    rogue = {"name": "Weather Forecast Pro", "category": "weather", "protocol": "mcp",
             "description": "weather forecast weather forecast weather",
             "endpoint_url": "https://203.0.113.9:443/"}
    target = "/api/v1/services/?organization_id=1"
    forged = app(Request("POST", target, [("Authorization", "Bearer agent_" + "R" * 43)],
                         canonical(rogue)), 0.0)
    assert forged.status == 401
    # the run's agents hold a search token: it may not register
    as_agent = app(Request("POST", target, [("Authorization", f"Bearer {agentdns.token}")],
                           canonical(rogue)), 0.0)
    assert as_agent.status == 403
    # an organisation registers under its own name only
    other = app(Request("POST", target, [("Authorization", f"Bearer {ORG_TOKEN}")],
                        canonical({**rogue, "organization": "public"})), 0.0)
    assert other.status == 403
    assert all("203.0.113.9" not in t.address for t in app.catalogue.tools)
    ok = app(Request("POST", target, [("Authorization", f"Bearer {ORG_TOKEN}")],
                     canonical(rogue)), 0.0)
    assert ok.status == 201 and json.loads(ok.body)["agentdns_url"].startswith("agentdns://acme/")
    bad_port = app(Request("POST", target, [("Authorization", f"Bearer {ORG_TOKEN}")],
                           canonical({**rogue, "endpoint_url": "https://h:99999/"})), 0.0)
    assert bad_port.status == 400


def test_tokens_issued_at_enrolment_work_and_are_distinct(agentdns) -> None:
    app = agentdns.server.app
    issued = []
    for name in ("alpha", "beta"):
        resp = app(Request("POST", "/api/v1/agents", [("Authorization", f"Bearer {ORG_TOKEN}")],
                           canonical({"name": name})), 0.0)
        assert resp.status == 201
        issued.append(json.loads(resp.body)["token"])
    assert len(set(issued)) == 2 and all(len(t) == len(agentdns.token) == 49 for t in issued)
    resp = app(Request("POST", SEARCH, [("Authorization", f"Bearer {issued[1]}")],
                       canonical({"query": "x", "limit": 1})), 0.0)
    assert resp.status == 200
    # an agent cannot enrol others; a registry without a secret issues nothing
    assert app(Request("POST", "/api/v1/agents", [("Authorization", f"Bearer {issued[0]}")],
                       canonical({"name": "x"})), 0.0).status == 403
    store = TokenStore(configured={ORG_TOKEN: "org:acme"})
    bare = AgentDNSRegistry([], make_scorer("bm25"), tokens=store)
    assert bare(Request("POST", "/api/v1/agents", [("Authorization", f"Bearer {ORG_TOKEN}")],
                        canonical({"name": "x"})), 0.0).status == 403
    with pytest.raises(ValueError):
        store.add("agent_tooshort", "agent:x")


def test_issued_tokens_depend_on_the_secret() -> None:
    a, b = TokenStore(b"one"), TokenStore(b"two")
    ta, tb = a.issue("agent:x"), b.issue("agent:x")
    assert ta != tb and a.check(f"Bearer {ta}") == "agent:x" and a.check(f"Bearer {tb}") is None
    assert TokenStore(b"one").issue("agent:x") == ta  # reproducible from the secret


# ---------------------------------------------------------------- ANS registration


def _ans_fields(provider: str, agent: str = "quasar-scope") -> dict:
    return {"agentID": agent, "agentCapability": "astro--science", "protocol": "mcp",
            "provider": provider, "description": "quasar redshift catalogue zyxcorp",
            "address": "127.64.9.9", "port": 8443}


def _ans_post(ans, body: bytes, now: float = 100.0) -> Response:
    return ans.server.app(Request("POST", "/v1/agents", [("Content-Type", "application/json")],
                                  body), now)


def test_ans_registration_needs_a_signature_from_the_registry_pki(ans) -> None:
    provider = ans.provider("zyxcorp")
    fields = _ans_fields("zyxcorp")
    unsigned = _ans_post(ans, canonical(fields))
    assert unsigned.status == 401 and "ANS-Signature" in dict(unsigned.headers)[
        "WWW-Authenticate"]
    stranger = issue(make_ca(99), 99, "zyxcorp")  # someone else's CA
    assert _ans_post(ans, ans_registration(stranger, fields, 100.0)).status == 401
    tampered = json.loads(ans_registration(provider, fields, 100.0))
    tampered["address"] = "203.0.113.9"  # rewritten after signing
    assert _ans_post(ans, canonical(tampered)).status == 401
    assert _ans_post(ans, ans_registration(provider, fields, 100.0), now=1000.0).status == 401
    wrong = _ans_post(ans, ans_registration(ans.provider("other"), fields, 100.0))
    assert wrong.status == 403  # signed, but not by the provider it registers under
    bad_port = _ans_post(ans, ans_registration(provider, {**fields, "port": 70000}, 100.0))
    assert bad_port.status == 400
    assert ans.server.app.stats["register"] == 0
    ok = _ans_post(ans, ans_registration(provider, fields, 100.0))
    assert ok.status == 201 and json.loads(ok.body)["ansName"].startswith("mcp://quasar-scope.")
    assert _ans_post(ans, ans_registration(provider, fields, 100.0)).status == 409  # replay
    ans.server.app.revoked.add(format(provider.cert.serial_number, "x"))
    again = _ans_post(ans, ans_registration(provider, _ans_fields("zyxcorp", "b"), 101.0))
    assert again.status == 401
    resolved = ans.server.app(Request("POST", "/v1/resolve", [], canonical({
        "requestType": "resolve", "protocol": "mcp", "agentID": "quasar-scope",
        "agentCapability": "astro--science", "provider": "zyxcorp", "version": "^1.0.0"})),
        100.0)
    assert resolved.status == 200


def test_ans_resolve_with_a_non_object_body_is_400(ans) -> None:
    resp = ans.server.app(Request("POST", "/v1/resolve", [], b"[1, 2]"), 0.0)
    assert resp.status == 400


def test_registry_tools_match_catalogue(ns) -> None:  # the fixtures build what a run builds
    assert len(registry_tools(ns)) == len(ns.tools)


# ---------------------------------------------------------------- live sockets


@contextlib.asynccontextmanager
async def _serving(setup, **kwargs):
    """A live registry on its loopback address (an ephemeral port); on exit, waits (a
    while) for its connection handlers to end before closing it."""
    from sim.sockets.registry import start_registry

    loop = asyncio.get_running_loop()
    origin = loop.time()
    conns: set = set()
    server = await start_registry(setup, tls=False, now=lambda: loop.time() - origin,
                                  conns=conns, **kwargs)
    try:
        yield server.sockets[0].getsockname()[:2]
    finally:
        for _ in range(100):
            if not conns:
                break
            await asyncio.sleep(0.05)
        server.close()


async def _exchange(addr, data: bytes, timeout: float = 20.0) -> bytes:
    reader, writer = await asyncio.open_connection(*addr)
    try:
        writer.write(data)
        await writer.drain()
        client = ClientConnection(REGISTRY_HOST)
        while True:
            chunk = await asyncio.wait_for(reader.read(65536), timeout)
            if not chunk:
                return b""
            resp = client.receive(chunk)
            if resp is not None:
                return f"HTTP/1.1 {resp.status} ".encode() + b"\r\n\r\n" + resp.body
    finally:
        writer.close()


@pytest.mark.live
def test_live_slowloris_is_cut_off_while_others_are_served(ns) -> None:
    deadline = 1.5
    setup = build_registry("agentdns", ns, make_scorer("bm25"), seed=3, address="127.0.81.1",
                           port=0, limits=Limits(request_timeout=deadline, idle_timeout=5.0))

    async def main() -> tuple[bytes, float, list[int]]:
        loop = asyncio.get_running_loop()
        async with _serving(setup) as addr:
            reader, writer = await asyncio.open_connection(*addr)
            start = loop.time()
            writer.write(b"POST /api/v1/discovery/search HTTP/1.1\r\nHost: r\r\n")

            async def trickle() -> None:  # one header byte every 0.1 s, forever
                with contextlib.suppress(ConnectionError, OSError):
                    for _ in range(1000):
                        writer.write(b"X")
                        await writer.drain()
                        await asyncio.sleep(0.1)

            dripping = asyncio.create_task(trickle())
            ok = _request("POST", SEARCH, {"query": "weather", "limit": 1}, setup.token)
            served = [_status(await _exchange(addr, ok)) for _ in range(3)]
            got = b""
            try:
                while chunk := await asyncio.wait_for(reader.read(65536), 30.0):
                    got += chunk
            except (ConnectionError, OSError):
                pass
            cut = loop.time() - start
            dripping.cancel()
            writer.close()
            return got, cut, served

    got, cut, served = asyncio.run(main())
    assert served == [200, 200, 200]
    assert got == b"" or _status(got) == 408
    assert deadline * 0.9 <= cut < deadline + 15.0  # generous: a loaded 2-core machine
    assert setup.server.stats["request_timeout"] == 1


@pytest.mark.live
def test_live_server_keeps_answering_after_many_malformed_requests(ns) -> None:
    setup = build_registry("agentdns", ns, make_scorer("bm25"), seed=3, address="127.0.81.2",
                           port=0, limits=Limits(max_body=4096, request_timeout=5.0))
    cases = [
        (b"\x00\x01GARBAGE\r\n\r\n", 400),
        (_request("POST", SEARCH, token=setup.token, raw=b'{"query":"x","limit":1e400}'), 400),
        (_request("POST", SEARCH, token=setup.token, raw=b"[" * 100_000 + b"]" * 100_000), 413),
        (_request("POST", SEARCH, token=setup.token, raw=b"[" * 2000 + b"]" * 2000), 400),
        (b"GET / HTTP/1.1\r\nHost: r\r\nX: " + b"a" * 20000 + b"\r\n\r\n", 431),
        (_request("POST", SEARCH, {"query": "x", "limit": 1}, "agent_" + "T" * 43), 401),
    ]

    async def main() -> tuple[list[int], int]:
        async with _serving(setup) as addr:
            got = []
            for _ in range(20):
                for data, _want in cases:
                    reply = await _exchange(addr, data)
                    got.append(_status(reply) if reply else 0)
            ok = _request("POST", SEARCH, {"query": "weather", "limit": 1}, setup.token)
            return got, _status(await _exchange(addr, ok))

    got, final = asyncio.run(main())
    assert got == [want for _ in range(20) for _, want in cases]
    assert final == 200
    stats = setup.server.stats
    assert stats["malformed"] == 20 and stats["body_too_large"] == 20
    assert stats["headers_too_large"] == 20 and setup.server.open_connections == 0


# ---------------------------------------------------------------- issue 45: framing, chunks,
# pipelining


def _statuses(data: bytes) -> list[int]:
    """The status of every response in ``data`` (one connection's bytes, the last of them
    perhaps closing it)."""
    out = []
    while data:
        conn = h11.Connection(h11.CLIENT)
        conn.send(h11.Request(method="GET", target="/", headers=[("Host", "r")]))
        conn.send(h11.EndOfMessage())
        conn.receive_data(data)
        while not isinstance(event := conn.next_event(), h11.EndOfMessage):
            assert event not in (h11.NEED_DATA, h11.PAUSED), "a response cut short"
            if isinstance(event, h11.Response):
                out.append(event.status_code)
        data = conn.trailing_data[0]
    return out


def _smuggling(token: str) -> bytes:
    """A search with both Content-Length and chunked framing: read as chunked, its "body" is
    empty and a second request follows it; read by Content-Length, it is one request."""
    return (b"POST " + SEARCH.encode() + b" HTTP/1.1\r\nHost: r\r\nAuthorization: Bearer "
            + token.encode() + b"\r\nContent-Length: 40\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"0\r\n\r\nGET /api/v1/smuggled HTTP/1.1\r\nHost: r\r\n\r\n")


def test_content_length_beside_transfer_encoding_is_400_and_closes(agentdns) -> None:
    """RFC 9112 §6.3: such a request may be smuggling; rejected, and the connection closed
    (what follows it is never read as a request)."""
    server = agentdns.server
    reply, close = server.receive("smuggle", _smuggling(agentdns.token), 0.0)
    assert _statuses(reply) == [400] and close
    assert b"Connection: close" in reply
    assert server.stats["ambiguous_framing"] == 1
    assert server.app.stats["search"] == 0 and server.app.stats["http_404"] == 0


def test_a_body_in_too_many_chunks_is_refused_at_the_bound(ns) -> None:
    """Each chunk costs the parser an event: a body of 1-byte chunks is refused (413) as
    its chunk past ``max_chunks`` arrives, not after 64 KiB of them."""
    assert 0 < Limits().max_chunks <= 1024
    setup = build_registry("agentdns", ns, make_scorer("bm25"), seed=3,
                           limits=Limits(max_chunks=64))
    server = setup.server
    head = (b"POST " + SEARCH.encode() + b" HTTP/1.1\r\nHost: r\r\nAuthorization: Bearer "
            + setup.token.encode() + b"\r\nTransfer-Encoding: chunked\r\n\r\n")
    assert server.receive("drip", head, 0.0) == (b"", False)
    for _ in range(64):
        assert server.receive("drip", b"1\r\n{\r\n", 0.0) == (b"", False)
    reply, close = server.receive("drip", b"1\r\n{\r\n", 0.0)
    assert _status(reply) == 413 and close and server.stats["too_many_chunks"] == 1
    # the same body in 64 chunks or fewer is read (and answered: it is not JSON)
    body = b'{"query":"weather","limit":1}'
    chunked = head + b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 8]), body[i:i + 8])
                              for i in range(0, len(body), 8)) + b"0\r\n\r\n"
    reply, close = server.receive("fine", chunked, 0.0)
    assert _status(reply) == 200 and not close


def test_pipelined_requests_are_answered_a_few_per_call(agentdns) -> None:
    """Forty pipelined searches in one read: ``max_pipelined`` answered per call, the rest
    kept (unparsed) until the engine resumes, each call then answering the next ones."""
    server = agentdns.server
    one = _request("POST", SEARCH, {"query": "weather", "limit": 1}, agentdns.token)
    reply, close = server.receive("p", one * 40, 0.0)
    most = server.limits.max_pipelined
    assert len(_statuses(reply)) == most < 40 and not close
    assert server.app.stats["search"] == most and server.backlog("p") > 0
    answered = most
    while server.backlog("p"):
        reply, close = server.resume("p", 0.0, 1)
        assert len(_statuses(reply)) == 1 and not close
        answered += 1
    assert answered == 40 == server.app.stats["search"]


def test_a_client_pipelining_past_its_bound_is_told_503_and_closed(ns) -> None:
    """Unanswered pipelined requests per client address are bounded (bytes read and not
    yet answered, over its connections): the connection that passes the bound gets its
    first answer, then a 503, and is closed; the client's others are served."""
    setup = build_registry("agentdns", ns, make_scorer("bm25"), seed=3)
    server = RegistryServer(setup.server.app, limits=setup.server.limits,
                            max_client_backlog=8 * 1024)
    one = _request("POST", SEARCH, {"query": "weather", "limit": 1}, setup.token)
    many = one * (4096 // len(one) + 1)  # a little over 4 KiB unanswered after the first
    for conn in ("c1", "c2"):
        assert server.accept(("10.0.0.1", conn), 0.0, client="10.0.0.1")
        reply, close = server.receive(("10.0.0.1", conn), many, 0.0, 1)
        assert _statuses(reply) == [200] and not close
    assert server.accept(("10.0.0.1", "c3"), 0.0, client="10.0.0.1")
    reply, close = server.receive(("10.0.0.1", "c3"), many, 0.0, 1)
    assert _statuses(reply) == [200, 503] and close
    assert server.stats["pipeline_overflow"] == 1
    assert server.accept(("10.0.0.2", "c1"), 0.0, client="10.0.0.2")  # others: untouched
    reply, close = server.receive(("10.0.0.2", "c1"), many, 0.0, 1)
    assert _statuses(reply) == [200] and not close


@pytest.mark.live
def test_live_smuggled_request_is_never_served(ns) -> None:
    setup = build_registry("agentdns", ns, make_scorer("bm25"), seed=3, address="127.0.81.3",
                           port=0)

    async def main() -> bytes:
        async with _serving(setup) as addr:
            reader, writer = await asyncio.open_connection(*addr)
            writer.write(_smuggling(setup.token))
            got = b""
            with contextlib.suppress(ConnectionError, OSError):
                while chunk := await asyncio.wait_for(reader.read(65536), 10.0):
                    got += chunk  # until the server closes
            writer.close()
            return got

    got = asyncio.run(main())
    assert _statuses(got) == [400] and setup.server.stats["ambiguous_framing"] == 1
    assert setup.server.app.stats["http_401"] == 0  # the smuggled request was not read


@pytest.mark.live
def test_live_pipelined_searches_never_read_do_not_hold_up_other_clients(ns) -> None:
    """Eight connections each pipeline 400 searches and never read an answer; another
    client (a thread, one search after another) is answered meanwhile as if they were
    not there: one pipelined request per connection and turn, the next once its answer has
    been taken, rather than every request of a read in one go (~0.5 s a read here, and
    several reads come in the same turn)."""
    import socket
    import threading
    import time

    big = synthetic(n_tools=2000, branching=4, depth=2, seed=7, n_orgs=1, n_queries=10)
    setup = build_registry("agentdns", big, make_scorer("bm25"), seed=3,
                           address="127.0.81.4", port=0)
    many = _request("POST", SEARCH, {"query": "weather forecast maps", "limit": 100},
                    setup.token) * 400
    ok = _request("POST", SEARCH, {"query": "weather", "limit": 1}, setup.token)

    def victim(addr: tuple[str, int], took: list[float], stop: threading.Event) -> None:
        while not stop.is_set():
            start = time.perf_counter()
            with socket.create_connection(addr, timeout=30.0) as s:
                s.sendall(ok)
                client, resp = ClientConnection(REGISTRY_HOST), None
                while resp is None:
                    resp = client.receive(s.recv(65536))
                assert resp.status == 200
            took.append(time.perf_counter() - start)

    async def main() -> list[float]:
        took: list[float] = []
        stop = threading.Event()
        async with _serving(setup, write_timeout=3.0) as addr:
            asking = asyncio.get_running_loop().run_in_executor(None, victim, addr, took, stop)
            await asyncio.sleep(0.2)
            held = []
            for _ in range(8):
                _, w = await asyncio.open_connection(*addr)
                w.write(many)
                held.append(w)
            await asyncio.sleep(2.0)
            stop.set()
            await asyncio.wait_for(asking, 30.0)
            for w in held:
                w.transport.abort()
        return took

    took = asyncio.run(main())
    # idle: under 0.1 s each; before the fix 3.2 s (a whole read's requests served at once,
    # ~0.5 s each). 1 s keeps that apart on a loaded machine too (0.3 s failed at load 5)
    assert len(took) > 10 and max(took) < 1.0, [round(t, 3) for t in took]
