"""The agent session layer of seed 003 (dynamic tool binding), transport-free.

An LLM agent binds one always-present meta-tool, ``search_tools``; calling it with an
intent either finds tools already bound in the session (a *hit*: no packets) or runs a
discovery (a *miss*: the wrapped DNS stub agent walks the hierarchy). The tools in context,
the session tool cache and RBAC scopes are in :mod:`nodes.agent.context`, loop detection in
:mod:`nodes.agent.guard`, the registry fallback in :mod:`nodes.agent.fallback`. Here:

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
``registry`` (the marketplace, §10: an AgentDNS search over HTTP/1.1). Every path passes
the same scopes: the fallbacks' tools are admitted like the first answer's, and the tool
context itself refuses anything outside them (:class:`~nodes.agent.context.ToolContext`).
The registry exchange is real bytes between the real client
(:class:`nodes.registry.client.RegistryAgent`) and server
(:class:`nodes.registry.server.RegistryServer`) in process; its wire cost and delay are
MODELLED by the caller (:class:`~nodes.agent.fallback.RegistryFallback`), not carried by an
engine: the discovery finishes after the modelled delay on the agent's timer.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from nodes.agent.context import Scopes, ToolContext, ToolInfo
from nodes.agent.fallback import RegistryFallback
from nodes.agent.guard import IterationGuard
from nodes.agent.stub import StubAgent, StubResult
from nodes.dns.zone import Address
from nodes.resolver.types import Discovery, Endpoint, Outgoing, Transport


def intent_key(request: Discovery) -> tuple[str, str, int, str]:
    """What a search is remembered under: normalised intent, service, K, start zone."""
    return (" ".join(request.intent.lower().split()), request.service, request.k,
            request.start)


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
        self.context = ToolContext(config.capacity, config.ttl, always, config.scopes)
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

    def admit(self, tools: Sequence[ToolInfo | None]) -> tuple[list[ToolInfo], int]:
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
        self._jobs: dict[object, _Job] = {}  # inner tag -> job
        self._seq = 0
        self._done: list[StubResult] = []
        self._later: list[tuple[float, int, StubResult]] = []  # modelled fallbacks

    def instance(self) -> SessionAgent:
        """This agent for one run: its stub, session and fallback as they were built."""
        session = Session(self.session.config, self.session.context.always.values())
        registry = self.registry.instance() if self.registry is not None else None
        return SessionAgent(self.stub.instance(), session, self.tool_of, registry)

    # -- what the engines and live adapters use of a StubAgent ---------------------

    @property
    def resolver(self) -> Address:
        return self.stub.resolver

    @property
    def id_source(self) -> random.Random | None:
        return self.stub.id_source

    @id_source.setter
    def id_source(self, value: random.Random | None) -> None:
        self.stub.id_source = value

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

    def receive(self, message: bytes | bytearray, src: Address, now: float,
                transport: Transport = "udp") -> None:
        self.stub.receive(message, src, now, transport)
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
            job = self._jobs.pop(inner.tag)
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
            offered, filtered = self.session.admit(got.tools)  # scopes apply here too
            info.rbac_filtered += filtered
            kept = list({t.id: t for t in [*kept, *offered]}.values())
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


# what a DNS scheme's engine drives: a stub agent, or one with a session in front
DnsAgent = StubAgent | SessionAgent
