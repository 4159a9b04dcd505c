"""The upkeep of the catalogue mirror the DNS-native drafts' agents search.

The drafts leave search out of their scope, so their agents rank a local copy of the
catalogue (:mod:`nodes.agent.mirror`), as the MCP Registry's aggregators copy its listing.
That copy is not free: :func:`mirror_refresh` pages the run's own MCP Registry listing
(:class:`nodes.registry.mcp.MCPRegistry`, every tool, ``limit=100``) between the real
HTTP/1.1 client and server objects, in process, over one kept-alive HTTPS connection with
the run CA's TLS 1.3 sizes, and prices it with the registries' TCP model: what one full
refresh costs. The run does not charge it to any discovery (how often an aggregator
refreshes is its own choice); the summary reports it beside the schemes that rely on it.
"""

from __future__ import annotations

from urllib.parse import urlencode

from nodes.registry.client import HttpStep
from nodes.registry.http import ClientConnection
from nodes.registry.mcp import MAX_LIMIT
from nodes.scoring import make_scorer
from sim.accounting import TcpModel, http_cost
from sim.build.registries import REGISTRY_HOST, build_registry, tls_sizes
from topologies.namespace import Namespace

MIRROR_SOURCE = (f"the MCP Registry listing (GET /v0.1/servers, limit={MAX_LIMIT}, cursor "
                 f"paging) over one kept-alive HTTPS connection")


def mirror_refresh(ns: Namespace, seed: int, mtu: int) -> dict:
    """One full refresh of the mirror of ``ns``: servers listed, requests, IP-layer bytes
    and packets each way (``sim.accounting.http_cost``)."""
    setup = build_registry("mcp-registry", ns, make_scorer("bm25"), seed)  # no search: any
    tls = tls_sizes(setup.identity.cert_pem, setup.identity.key_pem, setup.ca.cert_pem)
    client = ClientConnection(REGISTRY_HOST)
    steps: list[HttpStep] = []
    cursor = ""
    listed = 0
    while True:
        query = {"limit": MAX_LIMIT, **({"cursor": cursor} if cursor else {})}
        data = client.request("GET", "/v0.1/servers?" + urlencode(query),
                              [("Accept", "application/json")])
        reply, _ = setup.server.receive("mirror", data, 0.0)
        resp = client.receive(reply)
        if resp is None or resp.status != 200:
            raise RuntimeError("the MCP Registry listing did not answer a page")
        steps.append(HttpStep("servers", 1, 0.0, bytes_out=len(data), bytes_in=len(reply)))
        body = resp.json()
        assert isinstance(body, dict)  # our own registry's page
        listed += len(body["servers"])
        cursor = body["metadata"].get("nextCursor") or ""
        if not cursor:
            break
    cost = http_cost(steps, {1}, True, True, tls, TcpModel(mtu))
    return {"source": MIRROR_SOURCE, "servers": listed, "requests": len(steps),
            "bytes_up": cost.bytes_up, "bytes_down": cost.bytes_down,
            "packets": cost.packets_up + cost.packets_down}
