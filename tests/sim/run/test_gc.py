"""The cyclic collector around a run: what a simulated scheme leaves behind is frozen until
the run ends (not walked by a collection after each scheme), then thawed, so that nothing
leaks; cyclic garbage made during a scheme is collectable after the run; engines on real
sockets and sharded runs keep the collector running."""

from __future__ import annotations

import gc
import weakref
from types import SimpleNamespace
from typing import Any

import pytest

from sim.run import runner
from sim.run.runner import run_scenario
from sim.scenario import Scenario

TWO_SCHEMES: dict[str, Any] = {
    "name": "gc-two", "engine": "simpy", "seed": 2,
    "namespace": {"tools": 120, "branching": 3, "depth": 2, "orgs": 0},
    "network": {"topology": "star", "nodes": 4, "agents": 2},
    "schemes": [{"name": "a", "k": 2}, {"name": "b", "k": 3, "cache": False}],
    "workload": {"queries": 30, "pool": 10},
    "outputs": {"plots": False},
}


class _Cycle:
    """An object in a reference cycle (freed only by the collector), weakly referable."""

    def __init__(self) -> None:
        self.me = self


def test_scheme_leftovers_frozen_then_thawed(monkeypatch: pytest.MonkeyPatch) -> None:
    executed = runner._execute
    cycles: list[weakref.ref[_Cycle]] = []
    frozen_between: list[int] = []
    survived: list[bool] = []

    def execute(run: runner.Run, plan: Any, sink: Any) -> Any:
        frozen_between.append(gc.get_freeze_count())
        assert not gc.isenabled()  # a simulated scheme runs without the collector
        if cycles:  # a collection now does not reach the first scheme's frozen leftovers
            gc.collect()
            survived.append(cycles[0]() is not None)
        cycles.append(weakref.ref(_Cycle()))  # cyclic garbage the scheme leaves behind
        return executed(run, plan, sink)

    monkeypatch.setattr(runner, "_execute", execute)
    was_enabled, before = gc.isenabled(), gc.get_freeze_count()
    run_scenario(Scenario.model_validate(TWO_SCHEMES), write=False)
    # the first scheme's leftovers were frozen while the second ran …
    assert frozen_between[1] > frozen_between[0]
    assert survived == [True]
    # … and thawed at the end: nothing stays frozen, the collector is as it was
    assert gc.get_freeze_count() == before
    assert gc.isenabled() == was_enabled
    gc.collect()
    assert [ref() for ref in cycles] == [None, None]  # the schemes' cycles were collected


@pytest.mark.parametrize(("virtual", "workers", "paused"),
                         [(True, 1, True), (False, 1, False), (True, 2, False)])
def test_collector_kept_for_sockets_and_shards(virtual: bool, workers: int,
                                               paused: bool) -> None:
    run = SimpleNamespace(info=SimpleNamespace(virtual_time=virtual), sharded=workers > 1)
    before = gc.get_freeze_count()
    gc.enable()
    try:
        with runner._kept_frozen(run):  # type: ignore[arg-type]
            assert gc.isenabled() is not paused
        assert gc.isenabled()
        assert (gc.get_freeze_count() > before) is paused
    finally:
        gc.unfreeze()
