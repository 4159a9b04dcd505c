"""Fault schedules of a scenario (``faults:``): the typed models; :mod:`sim.build.faults`
turns them into a run's fault plan."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from sim.spec import PositiveSeconds, Seconds, Spec

FaultKind = Literal["down", "slow", "lossy", "delay", "partition"]
_SELECTOR = (r"^(\*|servers|registry(#\d+)?|resolvers|agents|resolver:\d+|agent:\d+|replica:\d+|"
             r"address:[0-9.]+|zone:[a-z0-9._-]+(#\d+)?|org:[a-z0-9-]+(#\d+)?|"
             r"role:(root|tld|intermediate|leaf|org)(#\d+)?)$")


class FaultSpec(Spec):
    """One fault (see :mod:`sim.build.faults`): from ``at`` for ``duration`` seconds of workload
    time (null: to the end), or, with ``rate``, failures of each target arriving as a
    Poisson process (per second) from ``at`` on, each lasting an exponential time of mean
    ``duration``. ``down`` crashes a server, registry replica or stock recursor (restart
    at the end; a recursor's process is killed and started again with an empty cache);
    ``slow`` adds ``delay`` to everything the target sends; ``lossy`` drops what it sends
    or receives with probability ``loss``; ``delay`` and ``partition`` act on the links
    between ``target`` and ``peer`` (both directions)."""

    kind: FaultKind
    target: str = Field(pattern=_SELECTOR, description="selector: servers, zone:NAME, "
                        "role:leaf#0, resolver:0, registry, address:IP, ...")
    peer: str = Field(default="*", pattern=_SELECTOR, description="delay/partition: the other side")
    at: Seconds = Field(default=0.0, description="seconds of workload time the fault starts")
    duration: Seconds | None = Field(
        default=None, description="seconds it lasts (null: to the end); "
                                     "with rate: mean seconds of each failure")
    rate: float | None = Field(default=None, gt=0, description="failures per second of each target "
                               "(a Poisson process from at on)")
    delay: Seconds = Field(default=0.0, description="seconds added (slow, delay)")
    loss: float = Field(default=0.0, ge=0.0, le=1.0, description="probability of loss (lossy)")

    @model_validator(mode="after")
    def _check(self) -> FaultSpec:
        if self.kind in ("slow", "delay") and self.delay <= 0:
            raise ValueError(f"delay: a '{self.kind}' fault needs delay > 0 (seconds)")
        if self.kind == "lossy" and self.loss <= 0:
            raise ValueError("loss: a 'lossy' fault needs loss > 0")
        if self.kind == "partition" and self.peer == "*":
            raise ValueError("peer: a partition needs the other side (a selector, not '*')")
        if self.rate is not None and not self.duration:
            raise ValueError("duration: a random fault process (rate) needs the mean "
                             "duration of each failure")
        return self


class FaultsSpec(Spec):
    """The fault schedule, plus what to measure against."""

    events: tuple[FaultSpec, ...] = Field(min_length=1)
    baseline: bool = Field(default=True, description="also run every scheme fault-free and report "
                           "the difference")
    bin: PositiveSeconds = Field(default=1.0, description="seconds per bin of success over time")
    horizon: Seconds | None = Field(default=None, description="seconds: random processes are drawn "
                                    "up to here (null: the last scheduled query plus 60 s)")
