"""The agent session layer of seed 003 (dynamic tool binding), transport-free.

An LLM agent binds one always-present meta-tool, ``search_tools``; calling it with an
intent either finds tools already bound in the session (a *hit*: no packets) or runs a
discovery (a *miss*: the wrapped DNS stub agent walks the hierarchy). What lives here:

* :func:`tool_tokens` — Eq. 3 of the paper: (|name| + |description| + |schema|) / 4
  characters per token, rounded up; :data:`META_TOOL` is the meta-tool's own schema.
* :class:`ToolContext` — the session tool cache (``ToolContextManager``, §6): discovered
  tools keyed by tool id, at most ``capacity`` of them; always-include tools are never
  evicted and do not count. Eviction (§6.3) when a bind overflows: phase 1 drops tools
  whose last use is older than ``ttl``, phase 2 the least recently used. A tool past its
  TTL is also dropped when it is next looked at (so a hit never serves an expired tool).
* :class:`IterationGuard` — loop detection (§7): a sliding window of the last ``window``
  calls as (tool, hash of canonical JSON arguments); a call that makes its pair appear
  more than ``max_repeats`` times trips it. Eviction, not blocking: the call has already
  run and its result stands; the tool leaves the context and the agent must search again,
  and that re-discovery clears the tool's count.
* :class:`Scopes` — RBAC (§9): a tool is visible if granted to the user (tool ids), to one
  of the roles (zone suffixes: ``weather.tools.`` grants every tool at or below it) or to
  the organisation (the tool's ``org``, e.g. of a certified zone ``hku.weather.tools.``).
* :class:`Session` — one agent's cache, guard, intent memory, scopes and counters; it
  also counts §8's redundant searches (a miss whose tools were all bound already: the
  headroom of a hit rule that matched intents to bound tools' descriptions).
* :class:`SessionAgent` — the engine-facing wrapper of :class:`nodes.agent.stub.StubAgent`
  with the same interface (ask/to_send/pop_done/next_timer/on_timer/receive/is_pending).

What counts as a hit (our reading of §3.1, §5.2 and §8): the agent searches only on a
capability gap, so a ``search_tools`` call for an intent (normalised: lower case,
whitespace collapsed; same service, K and start zone) that an earlier search of this
session answered is served from the session when every tool of that answer is still
bound (not evicted by TTL, LRU or the guard). Any other call is a miss and is discovered.

RBAC is applied inside the session's search, before anything is bound: DNS servers do not
know the user, so answered tools outside the scopes are dropped (and counted) and never
enter the context. When fewer than ``min_tools`` survive, a fallback runs: ``wider`` (a
second discovery with a larger K and/or beam, through the engine like any other) or
``registry`` (the marketplace, §10: an AgentDNS search over HTTP/1.1). The registry
exchange is real bytes between the real client (:class:`nodes.registry.client.RegistryAgent`)
and server (:class:`nodes.registry.server.RegistryServer`) in process; its wire cost and delay are
MODELLED by the caller (:class:`RegistryFallback`), not carried by an engine: the
discovery finishes after the modelled delay on the agent's timer.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from nodes.agent.stub import StubAgent, StubResult
from nodes.dns.zone import Address
from nodes.registry.client import RegistryAgent, RegistryResult
from nodes.registry.server import RegistryServer
from nodes.resolver.core import Discovery, Endpoint, Outgoing, Transport

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


def _normal_arg(value: object) -> object:
    """Collapse trivial variations before hashing (§7.2): strings stripped, URLs without a
    trailing slash; containers recursively."""
    if isinstance(value, str):
        text = value.strip()
        return text.rstrip("/") if "://" in text else text
    if isinstance(value, Mapping):
        return {str(k): _normal_arg(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_normal_arg(v) for v in value]
    return value


def args_hash(args: Mapping[str, object]) -> str:
    """Hash of a call's arguments: canonical JSON (sorted keys, no spaces) → SHA-256."""
    text = json.dumps(_normal_arg(args), sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def intent_key(request: Discovery) -> tuple[str, str, int, str]:
    """What a search is remembered under: normalised intent, service, K, start zone."""
    return (" ".join(request.intent.lower().split()), request.service, request.k,
            request.start)


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


@dataclass(frozen=True)
class Scopes:
    """RBAC visibility: the union of user, role and organisation grants (§9.1)."""

    user: frozenset[str] = frozenset()  # tool ids granted to the user
    roles: tuple[str, ...] = ()  # zone suffixes ("weather.tools.") granted to a role held
    orgs: frozenset[str] = frozenset()  # organisations the user belongs to

    def allows(self, tool: ToolInfo) -> bool:
        if tool.id in self.user or tool.org in self.orgs:
            return True
        zone = tool.zone
        return any(zone == r or zone.endswith("." + r) for r in self.roles)


@dataclass
class _Entry:
    tool: ToolInfo
    discovered: float
    last_used: float
    uses: int = 0


class ToolContext:
    """Session tool cache: capacity over discovered tools, TTL then LRU eviction."""

    def __init__(self, capacity: int, ttl: float, always: Iterable[ToolInfo] = ()) -> None:
        if capacity < 1:
            raise ValueError("capacity must be ≥ 1")
        self.capacity = capacity
        self.ttl = ttl
        self.always = {t.id: t for t in always}
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
        """Bind discovered tools (or refresh them); evict on overflow. Returns evicted ids."""
        for tool in tools:
            if tool.id in self.always:
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


class IterationGuard:
    """Loop detection over (tool, argument hash), §7.2; evict, never block. Two detectors:
    the sliding window of the last ``window`` calls (catches A → B → A → B …) and, with
    ``period``, a time-based counter (the same pair more than ``max_repeats`` times within
    ``period`` seconds; older records are dropped)."""

    def __init__(self, window: int, max_repeats: int, exempt: Iterable[str] = (),
                 period: float | None = None) -> None:
        self.window = window
        self.max_repeats = max_repeats
        self.exempt = frozenset(exempt)
        self.period = period
        self._calls: deque[tuple[str, str]] = deque(maxlen=max(window, 0))
        self._times: dict[tuple[str, str], deque[float]] = {}
        self.trips = 0

    def record(self, tool_id: str, args: Mapping[str, object], now: float = 0.0) -> bool:
        """A call that has run; True when it trips the guard (evict the tool)."""
        if self.max_repeats <= 0 or tool_id in self.exempt or (
                self.window <= 0 and self.period is None):
            return False
        pair = (tool_id, args_hash(args))
        tripped = False
        if self.window > 0:
            self._calls.append(pair)
            tripped = sum(p == pair for p in self._calls) > self.max_repeats
        if self.period is not None:
            for key in [k for k, ts in self._times.items() if now - ts[-1] > self.period]:
                del self._times[key]  # garbage: nothing of it inside the period
            times = self._times.setdefault(pair, deque())
            times.append(now)
            while now - times[0] > self.period:
                times.popleft()
            tripped = tripped or len(times) > self.max_repeats
        if tripped:
            self.trips += 1
            self.reset(tool_id)
        return tripped

    def reset(self, tool_id: str) -> None:
        """Re-discovery permits renewed use (§7.5): forget the tool's calls."""
        kept = [p for p in self._calls if p[0] != tool_id]
        self._calls.clear()
        self._calls.extend(kept)
        for key in [k for k in self._times if k[0] == tool_id]:
            del self._times[key]


@dataclass(frozen=True)
class SessionConfig:
    capacity: int = 8
    ttl: float = 600.0
    min_tools: int = 1
    fallback: Literal["none", "wider", "registry"] = "none"
    wider_k: int = 10
    wider_beam: int | None = None
    guard_window: int = 20
    guard_max_repeats: int = 5
    guard_exempt: tuple[str, ...] = ()
    guard_period: float | None = None
    scopes: Scopes | None = None


@dataclass
class JobInfo:
    """What the session did for one ``search_tools`` call (the records' columns)."""

    hit: bool = False
    rbac_filtered: int = 0
    fallback: str = ""
    evictions_ttl: int = 0
    evictions_lru: int = 0
    evictions_guard: int = 0
    guard_trip: bool = False
    redundant: bool = False  # a miss that found only tools already bound (§8)
    tools_in_context: int = 0
    context_tokens: int = 0
    fallback_bytes_up: int = 0  # registry fallback: MODELLED wire cost and delay
    fallback_bytes_down: int = 0
    fallback_packets: int = 0
    fallback_delay_s: float = 0.0
    fallback_tools: int = 0


class Session:
    """One agent's session: tool context, loop guard, intent memory, RBAC, counters."""

    def __init__(self, config: SessionConfig, always: Iterable[ToolInfo] = ()) -> None:
        self.config = config
        self.context = ToolContext(config.capacity, config.ttl, always)
        self.guard = IterationGuard(config.guard_window, config.guard_max_repeats,
                                    config.guard_exempt, config.guard_period)
        self._intents: dict[tuple, tuple[str, ...]] = {}  # intent key -> tool ids answered
        self.counts: Counter[str] = Counter()

    def lookup(self, key: tuple, now: float) -> list[ToolInfo] | None:
        """``search_tools`` against the session: the bound tools of an earlier answer to
        this intent (hit; their use refreshed), or None (miss: discover)."""
        ids = self._intents.get(key)
        if ids and all(self.context.alive(t, now) for t in ids):
            for t in ids:
                self.context.touch(t, now)
            self.counts["hits"] += 1
            return [self._tool(t) for t in ids]
        self._intents.pop(key, None)
        self.counts["misses"] += 1
        return None

    def _tool(self, tool_id: str) -> ToolInfo:
        if tool_id in self.context.always:
            return self.context.always[tool_id]
        return self.context._entries[tool_id].tool

    def admit(self, tools: list[ToolInfo | None]) -> tuple[list[ToolInfo], int]:
        """RBAC inside the search: the answered tools the scopes allow, and how many were
        dropped (unknown tools count as outside any scope)."""
        scopes = self.config.scopes
        kept = [t for t in tools if t is not None and (scopes is None or scopes.allows(t))]
        filtered = len(tools) - len(kept)
        self.counts["rbac_filtered"] += filtered
        return kept, filtered

    def redundant(self, tools: list[ToolInfo], now: float) -> bool:
        """§8 redundant search: every tool a discovery found was already bound (a search
        under other words for what the session had; the paper appends a guidance note)."""
        if tools and all(self.context.alive(t.id, now) for t in tools):
            self.counts["redundant_searches"] += 1
            return True
        return False

    def bind(self, key: tuple, tools: list[ToolInfo], now: float) -> list[str]:
        """Bind a discovery's (admitted) tools; re-discovery clears their guard counts."""
        for t in tools:
            self.guard.reset(t.id)
        evicted = self.context.bind(tools, now)
        if tools:
            self._intents[key] = tuple(dict.fromkeys(t.id for t in tools))
        return evicted

    def invoke(self, tool: ToolInfo, args: Mapping[str, object], now: float) -> bool:
        """The agent calls a bound tool (it always runs); True when the guard evicted it."""
        self.context.touch(tool.id, now)
        if self.guard.record(tool.id, args, now):
            self.counts["guard_trips"] += 1
            self.context.evict(tool.id, "guard")
            return True
        return False


@dataclass
class FallbackOutcome:
    """A registry fallback: tools found and the exchange's MODELLED cost."""

    tools: list[ToolInfo]
    delay: float
    bytes_up: int
    bytes_down: int
    packets: int
    error: str | None = None


class RegistryFallback:
    """The marketplace fallback: one AgentDNS search, real HTTP/1.1 bytes between the real
    client and server objects in process (no engine). Its delay is MODELLED: ``rtt`` (the
    path model's round trip agent ↔ registry) per round trip the client counts, plus
    ``server_time`` per request; its wire cost comes from ``cost(result)`` (the caller's
    TCP model, e.g. :func:`sim.accounting.http_cost`) → (bytes up, bytes down, packets).
    ``tool_of(url)`` maps a registry answer back to the tool it names."""

    def __init__(self, client: RegistryAgent, server: RegistryServer, rtt: float,
                 server_time: float, cost: Callable[[RegistryResult], tuple[int, int, int]],
                 tool_of: Callable[[str], ToolInfo | None], peer: str = "agent") -> None:
        self.client, self.server = client, server
        self.rtt, self.server_time = rtt, server_time
        self.cost, self.tool_of, self.peer = cost, tool_of, peer
        self.calls = 0

    def search(self, request: Discovery, now: float) -> FallbackOutcome:
        self.calls += 1
        client, t = self.client, now
        result = client.ask(("fallback", self.calls), request, t)
        done: list[RegistryResult] = []
        for _ in range(64):  # a discovery is a handful of exchanges; never loop forever
            done.extend(client.pop_done())
            actions = client.to_send()
            if not actions:
                break
            for act in actions:
                conn = (self.peer, act.conn)
                if act.kind == "open":  # SYN, SYN-ACK: one round trip
                    t += self.rtt
                    client.connected(act.conn, t)
                elif act.kind == "send":
                    reply, _close = self.server.receive(conn, act.data, t)
                    t += self.rtt + self.server_time
                    if reply:
                        client.receive(act.conn, reply, t)
                else:  # close: the server sees EOF
                    self.server.receive(conn, b"", t)
        done.extend(client.pop_done())
        if all(r is not result for r in done) and result.error is None:
            result.error = "registry exchange did not finish"
        tools = [tool for e in result.endpoints if (tool := self.tool_of(e.target)) is not None]
        up, down, packets = self.cost(result)
        return FallbackOutcome(tools, t - now, up, down, packets, result.error)


@dataclass
class _Job:
    outer: StubResult
    key: tuple
    info: JobInfo
    stage: str = "first"  # first | wider


class SessionAgent:
    """An engine-facing agent: :class:`StubAgent`'s interface with a session in front.

    A hit finishes the discovery at once with no packets; a miss runs the stub agent's
    discovery (its steps and query IDs are copied onto the job's result, so records find
    the resolver walks); an answer with fewer than ``min_tools`` tools in scope triggers
    the fallback. ``info[job index]`` holds what the session did for each job.
    """

    def __init__(self, stub: StubAgent, session: Session,
                 tool_of: Callable[[str], ToolInfo | None],
                 registry: RegistryFallback | None = None) -> None:
        self.stub = stub
        self.session = session
        self.tool_of = tool_of  # SRV target -> tool
        self.registry = registry
        self.name = stub.name
        self.info: dict[int, JobInfo] = {}
        self._jobs: dict[int, _Job] = {}  # inner tag -> job
        self._seq = 0
        self._done: list[StubResult] = []
        self._later: list[tuple[float, int, StubResult]] = []  # modelled fallbacks

    # -- what the engines and live adapters use of a StubAgent ---------------------

    @property
    def resolver(self) -> Address:
        return self.stub.resolver

    @property
    def id_source(self) -> object:
        return self.stub.id_source

    @id_source.setter
    def id_source(self, value: object) -> None:
        self.stub.id_source = value  # type: ignore[assignment]

    @property
    def ignored(self) -> int:
        return self.stub.ignored

    def is_pending(self, qid: int) -> bool:
        return self.stub.is_pending(qid)

    def ask(self, tag: object, request: Discovery, now: float) -> StubResult:
        outer = StubResult(tag=tag, request=request, sent=now)
        info = JobInfo()
        index = getattr(tag, "index", None)
        if index is not None:
            self.info[index] = info
        key = intent_key(request)
        before = Counter(self.session.context.evicted)
        tools = self.session.lookup(key, now)
        if tools is not None:
            info.hit = True
            outer.endpoints = [t.endpoint for t in tools if t.endpoint is not None]
            self._finish(_Job(outer, key, info), now, "NOERROR", None, before)
            return outer
        self._start(_Job(outer, key, info), request, now)
        self._drain(now)
        return outer

    def to_send(self) -> list[Outgoing]:
        return self.stub.to_send()

    def pop_done(self) -> list[StubResult]:
        out, self._done = self._done, []
        return out

    def next_timer(self) -> float | None:
        mine = min((w for w, _, _ in self._later), default=None)
        theirs = self.stub.next_timer()
        return theirs if mine is None else mine if theirs is None else min(mine, theirs)

    def on_timer(self, now: float) -> None:
        self.stub.on_timer(now)
        due = [x for x in self._later if x[0] <= now]
        self._later = [x for x in self._later if x[0] > now]
        for _, _, outer in due:
            outer.finished = now
            self._done.append(outer)
        self._drain(now)

    def receive(self, data: bytes, src: Address, now: float, transport: Transport = "udp"
                ) -> None:
        self.stub.receive(data, src, now, transport)
        self._drain(now)

    # -- the session's logic ----------------------------------------------------------

    def _start(self, job: _Job, request: Discovery, now: float) -> None:
        self._seq += 1
        self._jobs[self._seq] = job
        self.stub.ask(self._seq, request, now)

    def _drain(self, now: float) -> None:
        """Fold finished stub discoveries into their jobs (before the engine asks for
        packets, so a wider fallback's queries leave in the same turn)."""
        for inner in self.stub.pop_done():
            job = self._jobs.pop(inner.tag)  # type: ignore[arg-type]
            self._absorb(job, inner, now)

    def _absorb(self, job: _Job, inner: StubResult, now: float) -> None:
        outer, info = job.outer, job.info
        outer.steps.extend(inner.steps)
        outer.ids.extend(inner.ids)
        outer.a_ids.extend(inner.a_ids)
        if not outer.qid:
            outer.qid = inner.qid
        found = [self._known(e) for e in inner.endpoints]
        kept, filtered = self.session.admit(found)
        info.rbac_filtered += filtered
        before = Counter(self.session.context.evicted)
        if job.stage == "wider":  # keep the first answer's tools in scope too
            kept = list({t.id: t for t in [*self._kept(outer), *kept]}.values())
        outer.endpoints = [t.endpoint for t in kept if t.endpoint is not None]
        cfg = self.session.config
        if len(kept) < cfg.min_tools and job.stage == "first" and cfg.fallback == "wider":
            info.fallback = "wider"
            self.session.counts["fallback_wider"] += 1
            job.stage = "wider"
            request = replace(outer.request, k=cfg.wider_k,
                              beam=cfg.wider_beam or outer.request.beam)
            self._start(job, request, now)
            return
        if len(kept) < cfg.min_tools and cfg.fallback == "registry" and self.registry:
            info.fallback = "registry"
            self.session.counts["fallback_registry"] += 1
            got = self.registry.search(replace(outer.request, k=max(outer.request.k,
                                                                    cfg.min_tools)), now)
            info.fallback_bytes_up, info.fallback_bytes_down = got.bytes_up, got.bytes_down
            info.fallback_packets, info.fallback_delay_s = got.packets, got.delay
            info.fallback_tools = len(got.tools)
            # marketplace tools are installable suggestions (§10.1): not RBAC-filtered
            kept = list({t.id: t for t in [*kept, *got.tools]}.values())
            outer.endpoints = [t.endpoint for t in kept if t.endpoint is not None]
            self.session.bind(job.key, kept, now)
            self._wrap_up(job, kept, now, before)
            outer.rcode = inner.rcode or "NOERROR"
            outer.error = None if kept else (got.error or inner.error or "no tools in scope")
            self._seq += 1  # finishes after the modelled delay, on this agent's timer
            self._later.append((now + got.delay, self._seq, outer))
            return
        info.redundant = self.session.redundant(kept, now)
        self.session.bind(job.key, kept, now)
        self._finish(job, now, inner.rcode, inner.error, before, kept)

    def _kept(self, outer: StubResult) -> list[ToolInfo]:
        return [t for e in outer.endpoints if (t := self.tool_of(e.target)) is not None]

    def _known(self, e: Endpoint) -> ToolInfo | None:
        tool = self.tool_of(e.target)
        return None if tool is None else replace(tool, endpoint=e)

    def _finish(self, job: _Job, now: float, rcode: str, error: str | None,
                before: Counter, kept: list[ToolInfo] | None = None) -> None:
        outer = job.outer
        tools = kept if kept is not None else self._kept(outer)
        self._wrap_up(job, tools, now, before)
        outer.finished, outer.rcode, outer.error = now, rcode, error
        self._done.append(outer)

    def _wrap_up(self, job: _Job, tools: list[ToolInfo], now: float,
                 before: Counter) -> None:
        """The agent calls the best tool it got (args: the intent); the guard may evict it.
        Then the job's context figures."""
        info, session = job.info, self.session
        if tools:
            info.guard_trip = session.invoke(tools[0], {"query": job.key[0]}, now)
        delta = session.context.evicted - before
        info.evictions_ttl, info.evictions_lru = delta["ttl"], delta["lru"]
        info.evictions_guard = delta["guard"]
        info.tools_in_context = session.context.tools_in_context()
        info.context_tokens = session.context.tokens()


def static_tokens(tools: Iterable[ToolInfo], scopes: Scopes | None = None) -> int:
    """Static binding: every tool the user may use, in context at once (no meta-tool)."""
    return sum(t.tokens for t in tools if scopes is None or scopes.allows(t))

