"""The agent session layer (nodes.agent.session): tool cache, loop guard, RBAC, fallbacks, token
counts, and sessions in scenario runs on the simulation and live engines."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest

from nodes.agent.context import (
    META_TOOL,
    META_TOOL_TOKENS,
    Scopes,
    ToolContext,
    ToolInfo,
    static_tokens,
    tool_tokens,
)
from nodes.agent.guard import IterationGuard, args_hash
from nodes.agent.session import Session, SessionConfig
from nodes.resolver.types import Endpoint
from sim.build.namespace import build_namespace
from sim.errors import ScenarioError
from sim.loading import load_scenario
from sim.run.runner import run_scenario
from sim.scenario import Scenario

SCENARIOS = Path(__file__).resolve().parents[3] / "scenarios"


def tool(tid: str, zone: str = "a.tools.", org: str = "pub", tokens: int = 10) -> ToolInfo:
    return ToolInfo(tid, f"{tid}.{zone}", tid, zone, org, "mcp", tokens,
                    Endpoint(f"{tid}.{zone}", "127.64.0.1", 443, 0, 0, zone))


# ------------------------------------------------------------------------ units


def test_tool_tokens_follow_eq3() -> None:
    assert tool_tokens("abcd", "efgh") == 2  # 8 characters / 4
    assert tool_tokens("abc", "de") == 2  # rounded up
    assert tool_tokens("ab", "cd", {"x": 1}) == math.ceil((4 + len('{"x": 1}')) / 4)
    assert tool_tokens(META_TOOL["name"], META_TOOL["description"],
                                           META_TOOL["parameters"]) == META_TOOL_TOKENS
    assert static_tokens([tool("x", tokens=5), tool("y", tokens=7)]) == 12
    assert static_tokens([tool("x", org="a", tokens=5), tool("y", org="b", tokens=7)],
                         Scopes(orgs=frozenset({"b"}))) == 7


def test_cache_evicts_expired_tools_first_then_the_least_recently_used() -> None:
    ctx = ToolContext(capacity=2, ttl=10.0)
    ctx.bind([tool("a")], 0.0)
    ctx.bind([tool("b")], 5.0)
    ctx.touch("a", 1.0)  # a: last used at 1
    assert ctx.bind([tool("c")], 12.0) == ["a"]  # a expired (11 s > 10 s): TTL, not LRU
    assert dict(ctx.evicted) == {"ttl": 1}
    ctx.touch("b", 13.0)
    assert ctx.bind([tool("d")], 14.0) == ["c"]  # nobody expired: least recently used
    assert dict(ctx.evicted) == {"ttl": 1, "lru": 1}
    assert [t.id for t in ctx.bound()] == ["b", "d"] and len(ctx) == 2
    assert not ctx.alive("b", 30.0) and "b" not in ctx  # looked at after its TTL: evicted
    assert ctx.evicted["ttl"] == 2


def test_always_include_tools_never_evicted_nor_counted() -> None:
    core = tool("core", tokens=3)
    ctx = ToolContext(capacity=1, ttl=1.0, always=[core])
    ctx.bind([tool("core"), tool("x")], 0.0)
    ctx.bind([tool("y")], 100.0)
    assert "core" in ctx and ctx.alive("core", 1e9)
    assert [t.id for t in ctx.bound()] == ["y"]
    assert ctx.tools_in_context() == 3  # meta-tool + core + y
    assert ctx.tokens() == META_TOOL_TOKENS + 3 + 10
    assert not ctx.evict("core", "lru")


def test_argument_hash_is_canonical() -> None:
    assert args_hash({"a": 1, "b": [1, {"y": 2, "x": 1}]}) == \
        args_hash({"b": [1, {"x": 1, "y": 2}], "a": 1})
    assert args_hash({"url": "https://x.org/p/"}) == args_hash({"url": " https://x.org/p"})
    assert args_hash({"a": 1}) != args_hash({"a": 2})


def test_guard_trips_in_the_window_and_is_exempt_or_reset() -> None:
    g = IterationGuard(window=4, max_repeats=2, exempt=["memory"])
    assert not g.record("t", {"q": 1, "r": 2})
    assert not g.record("u", {"q": 1})
    assert not g.record("t", {"r": 2, "q": 1})  # same pair, other key order: 2 in window
    assert g.record("t", {"q": 1, "r": 2})  # 3 > 2: trips (A, B, A, A)
    assert g.trips == 1
    assert not g.record("t", {"q": 1, "r": 2})  # tripping forgot the tool's calls
    for _ in range(3):
        g.record("v", {})
        g.record("w", {})
    assert not g.record("t", {"q": 1, "r": 2})  # the earlier t fell out of the window
    assert not any(g.record("memory", {}) for _ in range(10))


def test_guard_time_based_counter() -> None:
    g = IterationGuard(window=0, max_repeats=2, period=10.0)
    assert not g.record("t", {"a": 1}, 0.0) and not g.record("t", {"a": 1}, 5.0)
    assert not g.record("t", {"a": 1}, 11.0)  # the call at 0 is older than 10 s
    assert g.record("t", {"a": 1}, 12.0)  # 5, 11, 12: three within 10 s
    assert not g.record("u", {"a": 1}, 100.0) and g._times.keys() == {("u", args_hash(
        {"a": 1}))}  # records outside the period were collected


def test_guard_evicts_not_blocks_and_rediscovery_restores() -> None:
    s = Session(SessionConfig(capacity=4, guard_window=5, guard_max_repeats=2))
    key = ("weather", "mcp", 1, "tools.")
    t = tool("w")
    s.bind(key, [t], 0.0)
    assert not s.invoke(t, {"q": "x"}, 1.0) and not s.invoke(t, {"q": "x"}, 2.0)
    assert s.invoke(t, {"q": "x"}, 3.0)  # the third identical call ran, then eviction
    assert "w" not in s.context and s.context.evicted["guard"] == 1
    assert s.lookup(key, 4.0) is None  # the agent must search again: a miss
    s.bind(key, [t], 5.0)  # re-discovered: counts cleared
    assert not s.invoke(t, {"q": "x"}, 6.0)
    assert [x.id for x in s.lookup(key, 7.0) or []] == ["w"]
    assert s.counts["hits"] == 1 and s.counts["misses"] == 1 and s.counts["guard_trips"] == 1


def test_redundant_search_is_counted() -> None:
    s = Session(SessionConfig(capacity=4, ttl=10.0))
    s.bind(("a",), [tool("x"), tool("y")], 0.0)
    assert s.redundant([tool("y")], 1.0)  # other words, tools already bound
    assert not s.redundant([tool("y"), tool("z")], 1.0)
    assert not s.redundant([tool("x")], 20.0)  # expired meanwhile
    assert not s.redundant([], 1.0) and s.counts["redundant_searches"] == 1


def test_rbac_scopes_user_role_org() -> None:
    scopes = Scopes(user=frozenset({"granted"}), roles=("weather.tools.",),
                    orgs=frozenset({"hku"}))
    assert scopes.allows(tool("granted", "finance.tools."))
    assert scopes.allows(tool("x", "city.weather.tools."))
    assert scopes.allows(tool("x", "weather.tools."))
    assert not scopes.allows(tool("x", "badweather.tools."))  # a suffix of labels only
    assert scopes.allows(tool("x", "hku.finance.tools.", org="hku"))
    assert not scopes.allows(tool("x", "finance.tools."))
    s = Session(SessionConfig(scopes=scopes))
    kept, dropped = s.admit([tool("x", "finance.tools."), tool("granted"), None])
    assert [t.id for t in kept] == ["granted"] and dropped == 2
    assert s.counts["rbac_filtered"] == 2


def test_context_never_binds_a_tool_outside_the_scopes() -> None:
    scopes = Scopes(roles=("Weather.Tools",), orgs=frozenset({"HKU"}))  # names normalised
    assert scopes.roles == ("weather.tools.",) and scopes.orgs == {"hku"}
    ctx = ToolContext(capacity=4, ttl=10.0, scopes=scopes)
    ctx.bind([tool("in", "city.weather.tools."), tool("out", "finance.tools."),
              tool("org", "hku.finance.tools.", org="hku")], 0.0)
    assert sorted(t.id for t in ctx.bound()) == ["in", "org"] and ctx.refused == 1
    with pytest.raises(ValueError, match="outside the RBAC scopes: out"):
        ToolContext(capacity=4, ttl=10.0, always=[tool("out", "finance.tools.")], scopes=scopes)


# ------------------------------------------------------------------------ runs


def tiny(**session: object) -> Scenario:
    """Two agents, a small tree, a skewed workload; the session on scheme ``on`` only."""
    return Scenario.model_validate({
        "name": "session-tiny", "seed": 4,
        "namespace": {"source": "synthetic", "tools": 300, "branching": 3, "depth": 2,
                      "orgs": 2},
        "network": {"topology": "star", "nodes": 4, "link": {"delay": {"mean": 0.002}},
                    "resolvers": 1, "agents": 2},
        "schemes": [{"name": "off", "k": 2}, {"name": "on", "k": 2}],
        "workload": {"queries": 60, "pool": 8, "popularity": "zipf",
                     "arrival": {"process": "poisson", "rate": 20}},
        "agents": {"session": {"schemes": ["on"], **session}},
        "outputs": {"plots": False}})


def _rx(load, scheme: str, role: str) -> int:
    rows = load[(load.scheme == scheme) & (load.role == role)]
    return int(rows.rx_packets.sum())


def test_session_cuts_dns_queries_on_simpy() -> None:
    res = run_scenario(tiny(capacity=16), write=False)
    df, load = res.records, res.load
    on, off = df[df.scheme == "on"], df[df.scheme == "off"]
    assert {"session", "session_hit", "tools_in_context", "context_tokens", "evictions_ttl",
            "evictions_lru", "guard_trips", "fallback", "rbac_filtered",
            "redundant_search"} <= set(df.columns)
    assert not off.session.any() and not off.session_hit.any()
    assert on.session_hit.sum() > 20  # 8 distinct intents over 2 agents
    assert (on[on.session_hit].packets_up == 0).all()  # a hit sends nothing
    assert (on[on.session_hit].round_trips == 0).all() and on.success.all()
    assert _rx(load, "on", "resolver") < _rx(load, "off", "resolver")
    assert _rx(load, "on", "agent") == (~on.session_hit).sum()  # one answer per miss
    block = res.summary["session"]["schemes"]["on"]
    assert block["hits"] == on.session_hit.sum() and block["hit_rate"] > 0.3
    assert res.summary["session"]["static_tokens"] > block["mean_context_tokens"] > 0
    plain = run_scenario(tiny().model_copy(update={"agents": tiny().agents.model_copy(
        update={"session": None})}), write=False)  # off: no session columns at all
    assert "session_hit" not in plain.records.columns and "session" not in plain.summary


def test_rbac_filter_and_wider_fallback_in_a_run() -> None:
    sc = tiny(capacity=16)
    ns = build_namespace(sc)
    role = sorted(ns.zones["tools."].children)[0]
    sc = tiny(capacity=16, fallback="wider", wider_k=8, scopes={"roles": [role]})
    df = run_scenario(sc, write=False).records
    on = df[df.scheme == "on"]
    assert on.rbac_filtered.sum() > 0
    assert (on.fallback == "wider").sum() > 0
    for returned in on.returned:  # nothing outside the scope is ever returned (bound)
        for tid in returned.split():
            assert ns.tools[tid].zone.endswith("." + role) or ns.tools[tid].zone == role
    wider = on[on.fallback == "wider"]
    assert (wider.stub_attempts >= 2).all()  # the second discovery went through the engine


def test_wider_beam_reaches_the_resolver() -> None:
    """``wider_beam`` rides in the wider discovery's intent option (version 1): the resolver
    walks that wide, so the wider discoveries reach more leaves and ask more upstream."""
    sc = tiny(capacity=16)
    role = sorted(build_namespace(sc).zones["tools."].children)[0]
    runs = {}
    for beam in (None, 3):
        scoped = tiny(capacity=16, fallback="wider", wider_k=8, wider_beam=beam,
                      scopes={"roles": [role]}, min_tools=2)
        on = run_scenario(scoped, write=False).records.query("scheme == 'on'")
        runs[beam] = on[on.fallback == "wider"].set_index("job")
    same = runs[None].index.intersection(runs[3].index)  # the same fallbacks either way
    walked = same[runs[None].loc[same].exchanges.to_numpy() > 0]  # not answered from cache
    assert len(walked) >= 3
    assert (runs[3].loc[walked].exchanges > runs[None].loc[walked].exchanges).all()


def _in_scope(ns: object, tid: str, role: str) -> bool:
    zone = ns.tools[tid].zone  # type: ignore[attr-defined]
    return bool(zone == role or zone.endswith("." + role))


def test_registry_fallback_binds_only_tools_in_scope() -> None:
    """Scopes apply to every path that binds a tool: the marketplace's answers too."""
    ns = build_namespace(tiny())
    free = run_scenario(tiny(min_tools=3, fallback="registry"), write=False).records
    zones = Counter(ns.tools[t].zone for r in free[free.scheme == "on"].returned
                    for t in r.split())
    role = max((z for z, node in ns.zones.items() if node.org), key=lambda z: zones[z])
    assert zones[role] > 0  # an organisation's zone some answers reach
    res = run_scenario(tiny(min_tools=3, fallback="registry", scopes={"roles": [role]}),
                       write=False)
    on = res.records[res.records.scheme == "on"]
    fb = on[on.fallback == "registry"]
    assert len(fb) > 0 and (fb.fallback_tools > 0).all()
    assert fb.rbac_filtered.sum() > 0  # the registry offered tools outside the scope
    returned = [tid for r in on.returned for tid in r.split()]
    assert returned and all(_in_scope(ns, tid, role) for tid in returned)


def test_role_names_are_normalised_and_checked_against_the_namespace() -> None:
    ns = build_namespace(tiny())
    role = sorted(ns.zones["tools."].children)[0]
    sc = tiny(capacity=16, scopes={"roles": [f" {role.rstrip('.').upper()}"]})
    assert sc.agents.session is not None and sc.agents.session.scopes is not None
    assert sc.agents.session.scopes.roles == (role,)  # case-folded, absolute: grants as meant
    on = run_scenario(sc, write=False).records.query("scheme == 'on'")
    returned = [tid for r in on.returned for tid in r.split()]
    assert returned and all(_in_scope(ns, tid, role) for tid in returned)
    with pytest.raises(ScenarioError, match=r"scopes\.roles: 'nowhere\.tools\.' names no zone"):
        run_scenario(tiny(scopes={"roles": ["Nowhere.Tools"]}), write=False)
    with pytest.raises(ScenarioError, match=r"scopes\.orgs: 'nobody' owns no tool"):
        run_scenario(tiny(scopes={"orgs": ["Nobody"]}), write=False)
    with pytest.raises(ValueError, match="is not a zone under tools"):
        tiny(scopes={"roles": ["weather.xtools"]})


def test_registry_fallback_is_modelled_http() -> None:
    res = run_scenario(tiny(min_tools=3, fallback="registry"), write=False)
    on = res.records[res.records.scheme == "on"]
    fb = on[on.fallback == "registry"]
    assert len(fb) == (~on.session_hit).sum() > 0  # K = 2 < 3 on every miss
    assert (fb.fallback_bytes_up > 0).all() and (fb.fallback_packets >= 8).all()
    assert (fb.fallback_tools > 0).all() and (fb.returned.str.split().str.len() >= 3).all()
    assert (fb.latency_ms >= fb.fallback_delay_ms).all() and (fb.fallback_delay_ms > 0).all()
    assert res.summary["session"]["fallback_cost"] == "modelled"


def test_session_on_the_live_engine() -> None:
    sc = tiny(capacity=16).with_overrides({"engine": "live", "workload.arrival.rate": 60})
    res = run_scenario(sc, write=False, live_port=15391)
    on = res.records[res.records.scheme == "on"]
    assert on.success.all() and on.session_hit.sum() > 0
    assert _rx(res.load, "on", "resolver") < _rx(res.load, "off", "resolver")


def test_bad_session_input_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"session\.schemes: no scheme named 'of'"):
        Scenario.model_validate({**tiny().model_dump(),
                                 "agents": {"session": {"schemes": ["of"]}}})
    with pytest.raises(ValueError, match="can never trip"):
        tiny(guard_window=3, guard_max_repeats=3)
    with pytest.raises(ValueError, match="grant at least one"):
        tiny(scopes={})
    with pytest.raises(ScenarioError, match="always_include: no tool with id 'nope'"):
        run_scenario(tiny(always_include=["nope"]), write=False)


def test_shipped_scenario_loads() -> None:
    sc = load_scenario(SCENARIOS / "session-zipf.yaml")
    assert sc.agents.session is not None and sc.agents.session.schemes
