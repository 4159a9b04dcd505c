"""The one list of engines: each name, where its code lives and what it can run.

A new engine is one module with a function ``(plan: RunPlan) -> EngineOutput`` plus one
entry here; nothing else in the project checks an engine's name (``Scenario.engine``
accepts the keys of :data:`ENGINES`). Modules are imported lazily so
that a simulation never loads asyncio, Ray or Mininet code.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class EngineInfo:
    """One engine and its capabilities (what the run loop may ask of it)."""

    name: str
    entry: str  # "module:function", imported on first use: (plan) -> EngineOutput
    summary: str  # one line for ``--help`` and the docs
    virtual_time: bool  # simulated clock: the plan uses the real DNS port 53
    real_sockets: bool  # packets cross real sockets
    capture: bool  # loopback traffic can be recorded and checked (``tooldns run --capture``)
    faults: bool  # applies scenario fault schedules per packet
    dot: bool  # DNS over TLS between resolvers and servers (schemes[].upstream: tls)
    sessions: bool  # runs the agent session layer (agents.session)
    churn: bool  # applies tool changes during the run (workload.churn)
    shards: bool  # can be split over Ray workers (engine_options.shards)
    progress: bool  # reports finished discoveries as they end (progress bars)
    user_space_links: bool  # link delay and loss emulated in the socket adapters

    def load(self) -> Callable[..., Any]:
        """The engine's entry point, a :data:`sim.engines.base.Engine` (its module imported
        now). Typed loosely: the catalogue imports nothing of the engines, so that it stays
        light and the scenario models can read it without an import cycle."""
        module, function = self.entry.split(":")
        run: Callable[..., Any] = getattr(importlib.import_module(module), function)
        return run


ENGINES: dict[str, EngineInfo] = {
    e.name: e
    for e in (
        EngineInfo("simpy", "sim.engines.simpy:run_simpy",
                   "discrete-event simulation in virtual time",
                   virtual_time=True, real_sockets=False, capture=False, faults=True, dot=True,
                   sessions=True, churn=True, shards=True, progress=True,
                   user_space_links=False),
        EngineInfo("live", "sim.engines.live:run_live",
                   "real UDP/TCP sockets on loopback (asyncio)",
                   virtual_time=False, real_sockets=True, capture=True, faults=True, dot=True,
                   sessions=True, churn=True, shards=False, progress=True,
                   user_space_links=True),
        EngineInfo("ray", "sim.engines.ray:run_ray",
                   "Ray actors, each serving nodes on real sockets",
                   virtual_time=False, real_sockets=True, capture=False, faults=False, dot=False,
                   sessions=False, churn=False, shards=False, progress=False,
                   user_space_links=True),
        EngineInfo("mininet", "sim.engines.mininet:run_mininet",
                   "Mininet hosts in network namespaces over emulated links",
                   virtual_time=False, real_sockets=True, capture=False, faults=False, dot=False,
                   sessions=False, churn=False, shards=False, progress=False,
                   user_space_links=False),
    )
}


def engine_info(name: str) -> EngineInfo:
    """The catalogue entry of ``name``; a :class:`ScenarioError` naming the choices if none."""
    from sim.errors import ScenarioError  # here: sim.errors loads the scheme models

    try:
        return ENGINES[name]
    except KeyError:
        raise ScenarioError(f"engine: unknown engine {name!r} "
                            f"({' | '.join(ENGINES)})") from None


def engines_with(capability: str) -> list[str]:
    """Names of the engines that have ``capability`` (for error messages)."""
    return [n for n, e in ENGINES.items() if getattr(e, capability)]
