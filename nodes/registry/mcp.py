"""The official MCP Registry's read API as a sans-IO request → response application.

Follows ``modelcontextprotocol/registry``'s OpenAPI document (version 2025-12-01, paths
under ``/v0.1``), unauthenticated as the official registry's reads are:

* ``GET /v0.1/servers?search=&limit=&cursor=&version=`` — the servers whose name contains
  ``search`` (a case-insensitive substring match: the registry has no ranking and no
  natural-language search), ``limit`` of 1 to 100 per page (default 30), pages in name
  order behind an opaque ``cursor`` (``metadata.nextCursor``, absent on the last page);
  ``version`` is ``latest`` or an exact version (each server here has one, :data:`VERSION`).
* ``GET /v0.1/servers/{serverName}/versions/{version}`` — one server (``latest`` or
  :data:`VERSION`), its name URL-encoded.

Each entry is a ``ServerResponse``: the ``server.json`` document (name in reverse-DNS form
with one ``/``, description of at most 100 characters, one ``streamable-http`` remote) and
the registry's ``_meta`` (status, publication time). The entries are given by the builder
(:func:`sim.build.registries.mcp_registry_app`), which names every catalogue tool after its
organisation's domain; the agent's protocol rides in the publisher-provided ``_meta``.
Anything else gets 404, a bad parameter 400 (the official registry's validator answers
422; the status differs, the refusal does not).
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import parse_qs, unquote, urlsplit

from nodes.registry.base import RegistryTool, Routes
from nodes.registry.http import Request, Response

SCHEMA = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
VERSION = "1.0.0"
DEFAULT_LIMIT, MAX_LIMIT = 30, 100
MAX_SEARCH = 200  # characters: a server name is at most 200
OFFICIAL = "io.modelcontextprotocol.registry/official"
PUBLISHER = "io.modelcontextprotocol.registry/publisher-provided"
DESCRIPTION_MAX = 100  # the server.json schema's maxLength


@dataclass(frozen=True, slots=True)
class ServerEntry:
    """One catalogue tool as the MCP Registry lists it."""

    tool: RegistryTool
    name: str  # reverse-DNS namespace "/" server name, e.g. "example.acme/weather"
    url: str  # its streamable-http remote

    def document(self, published: str) -> dict:
        """The ``ServerResponse`` object (``server`` and ``_meta``)."""
        t = self.tool
        return {
            "server": {"$schema": SCHEMA, "name": self.name, "title": t.name[:100],
                       "description": t.description[:DESCRIPTION_MAX] or t.name[:100],
                       "version": VERSION,
                       "remotes": [{"type": "streamable-http", "url": self.url}]},
            "_meta": {OFFICIAL: {"status": "active", "publishedAt": published,
                                 "updatedAt": published, "isLatest": True},
                      PUBLISHER: {"protocol": t.service}},
        }


class MCPRegistry(Routes):
    """The MCP Registry's server listing and lookup over ``servers``, sorted by name."""

    server_name = "mcp-registry"
    search_routes = ("servers",)  # GET /v0.1/servers: the listing a search is

    def __init__(self, servers: Sequence[ServerEntry],
                 published: str = "2026-01-01T00:00:00Z") -> None:
        super().__init__()
        ordered = sorted(servers, key=lambda s: s.name)
        self.names = [s.name for s in ordered]
        if len(set(self.names)) != len(self.names):
            raise ValueError("MCP Registry: server names must be unique")
        self._folded = [n.lower() for n in self.names]
        # each entry's JSON, encoded once: a listing joins them
        self._json = [json.dumps(s.document(published), separators=(",", ":"))
                      for s in ordered]
        self._by_name = {n: i for i, n in enumerate(self.names)}

    def route(self, req: Request, now: float) -> Response:
        url = urlsplit(req.target)
        if req.method != "GET":
            return self._error(404, "not found")
        if url.path.rstrip("/") == "/v0.1/servers":
            return self._list(parse_qs(url.query, keep_blank_values=True))
        parts = url.path.split("/")  # "", v0.1, servers, {name}, versions, {version}
        if len(parts) == 6 and parts[1:3] == ["v0.1", "servers"] and parts[4] == "versions":
            i = self._by_name.get(unquote(parts[3]))
            if i is None or unquote(parts[5]) not in ("latest", VERSION):
                return self._error(404, "Server not found")
            self.stats["server"] += 1
            return self._json_body(self._json[i])
        return self._error(404, "not found")

    def _list(self, query: dict[str, list[str]]) -> Response:
        def one(key: str) -> str | None:
            values = query.get(key)
            if values is not None and len(values) != 1:
                raise ValueError(f"{key} given more than once")
            return values[0] if values else None

        limit_text, search = one("limit"), one("search") or ""
        cursor, version = one("cursor"), one("version")
        limit = DEFAULT_LIMIT if limit_text is None else int(limit_text)
        if not 1 <= limit <= MAX_LIMIT or len(search) > MAX_SEARCH:
            return self._error(400, f"limit must be 1 to {MAX_LIMIT}, search at most "
                               f"{MAX_SEARCH} characters")
        self.stats["servers"] += 1
        picked: list[int] = []
        more = False  # a match past the page: the page has a successor
        if version in (None, "", "latest", VERSION):
            start = bisect.bisect_right(self.names, cursor) if cursor else 0
            needle = search.lower()
            for i in range(start, len(self.names)):
                if needle in self._folded[i]:
                    if len(picked) == limit:
                        more = True
                        break
                    picked.append(i)
        items = ",".join(self._json[i] for i in picked)
        meta: dict[str, object] = {"count": len(picked)}
        if more:
            meta["nextCursor"] = self.names[picked[-1]]
        return self._json_body(f'{{"servers":[{items}],"metadata":'
                               f'{json.dumps(meta, separators=(",", ":"))}}}')

    def _json_body(self, text: str) -> Response:
        return Response(200, [("Content-Type", "application/json"),
                              ("Server", self.server_name)], text.encode())
