"""The MCP Registry baseline: its v0.1 listing (paging, name search, bounds), its client
(name searches, local ranking, hostile answers) and its HTTP/1.1 on a real socket, read by
curl."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
from urllib.parse import quote

import pytest

from nodes.registry.client import RegistryAgent, RegistryConfig, search_words
from nodes.registry.http import Request
from nodes.registry.mcp import DESCRIPTION_MAX, MCPRegistry
from nodes.resolver.types import Discovery
from nodes.scoring import make_scorer
from sim.build.registries import REGISTRY_HOST, build_registry, registry_ids
from tests.nodes.registry.drive import drive
from topologies.synthetic import synthetic

NAME = re.compile(r"^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$")  # server.json's name pattern
URL = re.compile(r"^https?://[^\s]+$")  # a remote's url pattern


@pytest.fixture(scope="module")
def ns():
    return synthetic(n_tools=300, branching=3, depth=2, seed=3, n_orgs=1, n_queries=40)


@pytest.fixture(scope="module")
def setup(ns):
    return build_registry("mcp-registry", ns, make_scorer("bm25"), seed=1)


def _get(app: MCPRegistry, target: str):
    return app(Request("GET", target, [("Host", REGISTRY_HOST)], b""), 0.0)


def test_listing_pages_every_server_once_in_name_order(setup, ns) -> None:
    app = setup.server.app
    names, cursor, pages = [], None, 0
    while True:
        resp = _get(app, "/v0.1/servers?limit=37" + (f"&cursor={quote(cursor)}" if cursor
                                                      else ""))
        body = resp.json()
        assert resp.status == 200 and body["metadata"]["count"] == len(body["servers"]) <= 37
        names += [s["server"]["name"] for s in body["servers"]]
        pages += 1
        cursor = body["metadata"].get("nextCursor")
        if not cursor:
            break
    assert names == sorted(names) and len(names) == len(set(names)) == len(ns.tools)
    assert pages == -(-len(ns.tools) // 37)
    entry = _get(app, "/v0.1/servers?limit=1").json()["servers"][0]
    server = entry["server"]
    assert NAME.match(server["name"]) and len(server["description"]) <= DESCRIPTION_MAX
    assert server["version"] == "1.0.0" and URL.match(server["remotes"][0]["url"])
    assert entry["_meta"]["io.modelcontextprotocol.registry/official"]["isLatest"] is True
    one = _get(app, f"/v0.1/servers/{quote(server['name'], safe='')}/versions/latest")
    assert one.status == 200 and one.json() == entry
    # every name the registry returns maps back to its tool (what the records score by)
    assert set(names) <= set(registry_ids(ns))


def test_search_is_a_case_insensitive_name_substring(setup) -> None:
    app = setup.server.app
    some = _get(app, "/v0.1/servers?limit=1").json()["servers"][0]["server"]["name"]
    word = some.split("/")[1][:4].upper()
    found = [s["server"]["name"] for s in _get(
        app, f"/v0.1/servers?search={word}&limit=100").json()["servers"]]
    assert some in found and all(word.lower() in n.lower() for n in found)
    want = [n for n in app.names if word.lower() in n.lower()]
    assert found == want[:100]
    assert _get(app, "/v0.1/servers?search=zzzzzz-none").json() == {
        "servers": [], "metadata": {"count": 0}}
    assert _get(app, "/v0.1/servers?version=2.0.0").json()["servers"] == []


@pytest.mark.parametrize("target", [
    "/v0.1/servers?limit=0", "/v0.1/servers?limit=101", "/v0.1/servers?limit=x",
    "/v0.1/servers?limit=1&limit=2", "/v0.1/servers?limit=" + "9" * 5000,
    "/v0.1/servers?search=" + "a" * 201])
def test_bad_parameters_are_refused_with_400(setup, target) -> None:
    assert _get(setup.server.app, target).status == 400


def test_unknown_paths_and_methods_are_404(setup) -> None:
    app = setup.server.app
    assert _get(app, "/v0.1/servers/nobody%2Fnothing/versions/latest").status == 404
    assert _get(app, "/v0/servers/x").status == 404
    assert app(Request("POST", "/v0.1/servers", [], b"{}"), 0.0).status == 404


def _agent(setup, searches: int = 3) -> RegistryAgent:
    return RegistryAgent((setup.address, setup.port), REGISTRY_HOST,
                         RegistryConfig(kind="mcp-registry", keepalive=True,
                                        searches=searches), scorer=make_scorer("bm25"))


def test_search_words_are_the_longest_distinct_words() -> None:
    assert search_words("Get the weather forecast for a city, weather!", 3) == [
        "forecast", "weather", "city"]
    assert search_words("a an to", 3) == [] and search_words("x", 0) == []


def test_client_searches_words_and_ranks_the_union(setup, ns) -> None:
    ids = registry_ids(ns)
    q = next(q for q in ns.queries if q.service == "mcp")
    agent = _agent(setup)
    agent.ask(1, Discovery(q.text, service="mcp", k=3), 0.0)
    (res,) = drive(agent, setup.server)
    words = search_words(q.text, 3)
    assert res.error is None and [s.call for s in res.steps] == ["servers"] * len(words)
    assert res.round_trips == 1 + len(words)  # one connection, kept for every search
    assert res.endpoints and all(e.target in ids for e in res.endpoints)
    assert all(ns.tools[ids[e.target]].service == "mcp" for e in res.endpoints)
    assert [e.priority for e in res.endpoints] == list(range(len(res.endpoints)))
    assert all(e.zone.endswith(".example") and e.port for e in res.endpoints)
    assert res.examined >= len(res.endpoints)


def test_client_refuses_hostile_listings(setup, ns) -> None:
    q = next(q for q in ns.queries if q.service == "mcp")

    def run(tamper):
        agent = _agent(setup, searches=1)
        agent.ask(1, Discovery(q.text, service="mcp", k=3), 0.0)
        (res,) = drive(agent, setup.server, tamper=tamper)
        return res

    def body(reply: bytes, new: bytes) -> bytes:
        head = reply.split(b"\r\n\r\n", 1)[0]
        head = re.sub(rb"Content-Length: \d+", b"Content-Length: %d" % len(new), head)
        return head + b"\r\n\r\n" + new

    not_a_list = run(lambda r: body(r, b'{"servers":{"a":1}}'))
    assert not_a_list.error and not not_a_list.endpoints
    too_many = json.dumps({"servers": [{"server": {"name": f"a.b/c{i}"}}
                                       for i in range(101)]}).encode()
    assert run(lambda r: body(r, too_many)).error
    # a plain-http or malformed remote is no endpoint; the discovery still finishes
    res = run(lambda r: r.replace(b'"url":"https://', b'"url":"http://'))
    assert res.error is None and not res.endpoints
    bad_port = run(lambda r: re.sub(rb'\.example:\d+/mcp', b'.example:99999/mcp', r))
    assert bad_port.error is None and not bad_port.endpoints


@pytest.mark.live
@pytest.mark.skipif(shutil.which("curl") is None, reason="curl not installed")
def test_curl_reads_the_listing_over_a_real_socket(ns) -> None:
    """curl (an HTTP/1.1 client that shares no code with ours) pages the live registry."""
    from sim.sockets.registry import start_registry

    setup = build_registry("mcp-registry", ns, make_scorer("bm25"), seed=1,
                           address="127.0.81.9", port=0)

    async def main() -> list[dict]:
        loop = asyncio.get_running_loop()
        server = await start_registry(setup, tls=False, now=lambda: loop.time(), conns=set())
        host, port = server.sockets[0].getsockname()[:2]
        pages: list[dict] = []
        cursor = ""
        try:
            while True:
                url = f"http://{host}:{port}/v0.1/servers?limit=100"
                url += f"&cursor={quote(cursor)}" if cursor else ""
                out = await asyncio.to_thread(subprocess.run, [
                    "curl", "-sS", "--fail", "--max-time", "20", "-H", "Accept: application/json",
                    url], capture_output=True, check=True)
                pages.append(json.loads(out.stdout))
                cursor = pages[-1]["metadata"].get("nextCursor", "")
                if not cursor:
                    return pages
        finally:
            server.close()

    pages = asyncio.run(main())
    names = [s["server"]["name"] for p in pages for s in p["servers"]]
    assert len(names) == len(set(names)) == len(ns.tools)
    assert len(pages) == setup.server.app.stats["servers"] == -(-len(ns.tools) // 100)
