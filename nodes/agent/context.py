"""What an agent's model context holds: tools, their token cost, the session tool cache.

* :func:`tool_tokens` — Eq. 3 of the paper: (|name| + |description| + |schema|) / 4
  characters per token, rounded up; :data:`META_TOOL` is the meta-tool's own schema.
* :class:`ToolContext` — the session tool cache (``ToolContextManager``, §6): discovered
  tools keyed by tool id, at most ``capacity`` of them; always-include tools are never
  evicted and do not count. Eviction (§6.3) when a bind overflows: phase 1 drops tools
  whose last use is older than ``ttl``, phase 2 the least recently used. A tool past its
  TTL is also dropped when it is next looked at (so a hit never serves an expired tool).
* :class:`Scopes` — RBAC (§9): a tool is visible if granted to the user (tool ids), to one
  of the roles (zone suffixes: ``weather.tools.`` grants every tool at or below it) or to
  the organisation (the tool's ``org``, e.g. of a certified zone ``hku.weather.tools.``).
  Zones and organisations are DNS names: compared case-folded, zones made absolute. A
  :class:`ToolContext` with scopes refuses to bind a tool outside them, whatever path
  (discovery, fallback, always-include) offers it.
* :func:`static_tokens` — static binding's cost: every tool the user may use at once.
"""

from __future__ import annotations

import json
import math
from collections import Counter, OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from nodes.resolver.types import Endpoint

CHARS_PER_TOKEN = 4  # k of Eq. 3

#: the meta-tool as an OpenAI-style function definition (its tokens are always in context)
META_TOOL: dict[str, Any] = {
    "name": "search_tools",
    "description": ("Search the tool registry for tools that provide a capability you do "
                    "not have yet. Returns the best matching tools with their parameter "
                    "schemas; they are bound for your next calls."),
    "parameters": {
        "type": "object",
        "properties": {
            "query": {"type": "string",
                      "description": "natural-language description of the capability"},
            "limit": {"type": "integer", "description": "maximum tools to return",
                      "default": 5},
        },
        "required": ["query"],
    },
}


def tool_tokens(name: str, description: str, schema: object = None) -> int:
    """Eq. 3: characters of name, description and (JSON) schema over 4, rounded up."""
    chars = len(name) + len(description)
    if schema is not None:
        chars += len(json.dumps(schema, sort_keys=True, ensure_ascii=False))
    return math.ceil(chars / CHARS_PER_TOKEN)


META_TOOL_TOKENS = tool_tokens(META_TOOL["name"], META_TOOL["description"],
                               META_TOOL["parameters"])


@dataclass(frozen=True, slots=True)
class ToolInfo:
    """A tool as the session binds it."""

    id: str
    target: str  # the SRV target a DNS answer names it by
    name: str
    zone: str
    org: str
    service: str
    tokens: int
    endpoint: Endpoint | None = None  # as last answered (hits return it)


def zone_name(name: str) -> str:
    """A zone name as scopes compare it: case-folded, absolute (``Weather.Tools`` ->
    ``weather.tools.``)."""
    return name.strip().lower().rstrip(".") + "."


@dataclass(frozen=True)
class Scopes:
    """RBAC visibility: the union of user, role and organisation grants (§9.1). Roles and
    organisations are normalised on construction (DNS names: case-folded, zones absolute)."""

    user: frozenset[str] = frozenset()  # tool ids granted to the user
    roles: tuple[str, ...] = ()  # zone suffixes ("weather.tools.") granted to a role held
    orgs: frozenset[str] = frozenset()  # organisations the user belongs to

    def __post_init__(self) -> None:
        object.__setattr__(self, "roles", tuple(zone_name(r) for r in self.roles))
        object.__setattr__(self, "orgs", frozenset(o.strip().lower() for o in self.orgs))

    def allows(self, tool: ToolInfo) -> bool:
        if tool.id in self.user or tool.org.lower() in self.orgs:
            return True
        zone = zone_name(tool.zone)
        return any(zone == r or zone.endswith("." + r) for r in self.roles)


@dataclass
class _Entry:
    tool: ToolInfo
    discovered: float
    last_used: float
    uses: int = 0


class ToolContext:
    """Session tool cache: capacity over discovered tools, TTL then LRU eviction. With
    ``scopes``, nothing outside them is ever bound: :meth:`bind` refuses (and counts) such
    tools, and an always-include tool outside them is an error."""

    def __init__(self, capacity: int, ttl: float, always: Iterable[ToolInfo] = (),
                 scopes: Scopes | None = None) -> None:
        if capacity < 1:
            raise ValueError("capacity must be ≥ 1")
        self.capacity = capacity
        self.ttl = ttl
        self.scopes = scopes
        self.always = {t.id: t for t in always}
        outside = [t for t in self.always if scopes is not None
                   and not scopes.allows(self.always[t])]
        if outside:
            raise ValueError(f"always-include tools outside the RBAC scopes: "
                             f"{', '.join(outside[:3])}")
        self.refused = 0  # tools offered to bind outside the scopes
        self._entries: OrderedDict[str, _Entry] = OrderedDict()  # LRU order, oldest first
        self.evicted: Counter[str] = Counter()  # reason -> tools evicted

    def __contains__(self, tool_id: str) -> bool:
        return tool_id in self.always or tool_id in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def bound(self) -> list[ToolInfo]:
        """Discovered tools in context, least recently used first."""
        return [e.tool for e in self._entries.values()]

    def tokens(self) -> int:
        """Tokens of everything in context: meta-tool, always-include, discovered."""
        return (META_TOOL_TOKENS + sum(t.tokens for t in self.always.values())
                + sum(e.tool.tokens for e in self._entries.values()))

    def tools_in_context(self) -> int:
        return 1 + len(self.always) + len(self._entries)

    def alive(self, tool_id: str, now: float) -> bool:
        """Whether the tool is bound now; an expired discovered tool is evicted (TTL)."""
        if tool_id in self.always:
            return True
        entry = self._entries.get(tool_id)
        if entry is None:
            return False
        if now - entry.last_used > self.ttl:
            self.evict(tool_id, "ttl")
            return False
        return True

    def touch(self, tool_id: str, now: float) -> None:
        """A use: last-used time and count (idempotent re-bind of §5.2)."""
        entry = self._entries.get(tool_id)
        if entry is not None:
            entry.last_used = now
            entry.uses += 1
            self._entries.move_to_end(tool_id)

    def bind(self, tools: Iterable[ToolInfo], now: float) -> list[str]:
        """Bind discovered tools (or refresh them); evict on overflow. Returns evicted ids.
        Tools outside the scopes are refused (counted in ``refused``), never bound."""
        for tool in tools:
            if tool.id in self.always:
                continue
            if self.scopes is not None and not self.scopes.allows(tool):
                self.refused += 1
                continue
            entry = self._entries.get(tool.id)
            if entry is None:
                self._entries[tool.id] = _Entry(tool, now, now)
            else:
                entry.tool, entry.last_used = tool, now
                self._entries.move_to_end(tool.id)
        out: list[str] = []
        if len(self._entries) > self.capacity:  # phase 1: TTL
            for tid in [t for t, e in self._entries.items() if now - e.last_used > self.ttl]:
                self.evict(tid, "ttl")
                out.append(tid)
        while len(self._entries) > self.capacity:  # phase 2: LRU
            tid = next(iter(self._entries))
            self.evict(tid, "lru")
            out.append(tid)
        return out

    def evict(self, tool_id: str, reason: str) -> bool:
        if self._entries.pop(tool_id, None) is None:
            return False
        self.evicted[reason] += 1
        return True


def static_tokens(tools: Iterable[ToolInfo], scopes: Scopes | None = None) -> int:
    """Static binding: every tool the user may use, in context at once (no meta-tool)."""
    return sum(t.tokens for t in tools if scopes is None or scopes.allows(t))
