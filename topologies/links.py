"""What one link does to a packet: a delay distribution, a loss probability, a bandwidth.

:class:`DelayModel` draws a one-way delay from a constant, truncated-normal, lognormal or
empirical distribution; :class:`LinkSpec` adds independent loss and an optional bandwidth
(serialisation delay). Every draw comes from a generator passed in.
"""

from __future__ import annotations

import math
import numbers
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal, get_args

from topologies.uniforms import Draws

DelayKind = Literal["constant", "normal", "lognormal", "empirical"]
DELAY_KINDS: tuple[str, ...] = get_args(DelayKind)

_STD_NORMAL = statistics.NormalDist()
_U_MIN = 1e-300  # keeps inverse-CDF arguments inside (0, 1)
_U_MAX = 1.0 - 2.0**-53


def _finite_nonneg(name: str, value: object, owner: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{owner}: {name} must be a number, got {value!r}")
    x = float(value)
    if not math.isfinite(x) or x < 0:
        raise ValueError(f"{owner}: {name} must be a finite number ≥ 0, got {value!r}")
    return x


@dataclass(frozen=True)
class DelayModel:
    """A per-link one-way delay distribution, in seconds (never negative).

    * ``constant`` — always ``mean`` (``std`` must be 0).
    * ``normal`` — normal(``mean``, ``std``) truncated at 0 (drawn by inverse CDF on the
      positive part, so there is no point mass at 0; with ``std`` ≪ ``mean`` the realised mean
      is ``mean``, otherwise slightly above it — see :meth:`expected`).
    * ``lognormal`` — parameterised so that its mean and standard deviation are ``mean`` and
      ``std``.
    * ``empirical`` — uniform over ``samples``; ``mean`` and ``std`` are recomputed from the
      samples (the values passed are ignored) and the samples are stored sorted.

    Every :meth:`sample` consumes exactly one ``rng.random()`` draw whatever the kind, and maps
    it through the inverse CDF, so runs that differ only in delay distribution stay aligned.
    """

    dist: DelayKind
    mean: float
    std: float = 0.0
    samples: tuple[float, ...] = ()
    # derived parameters, set in __post_init__ (see there); not compared nor shown
    _a: float = field(default=0.0, init=False, repr=False, compare=False)
    _b: float = field(default=0.0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        owner = f"DelayModel({self.dist!r})"
        if self.dist not in DELAY_KINDS:
            raise ValueError(f"DelayModel: unknown dist {self.dist!r}; "
                             f"expected one of {', '.join(DELAY_KINDS)}")
        set_ = object.__setattr__
        if self.dist == "empirical":
            if not self.samples:
                raise ValueError(f"{owner}: an empirical delay needs at least one sample")
            values = sorted(_finite_nonneg("every sample", s, owner) for s in self.samples)
            set_(self, "samples", tuple(values))
            set_(self, "mean", statistics.fmean(values))
            set_(self, "std", statistics.pstdev(values) if len(values) > 1 else 0.0)
            return
        if self.samples:
            raise ValueError(f"{owner}: samples are only for dist='empirical'")
        mean = _finite_nonneg("mean", self.mean, owner)
        std = _finite_nonneg("std", self.std, owner)
        set_(self, "mean", mean)
        set_(self, "std", std)
        if self.dist == "constant" and std != 0:
            raise ValueError(f"{owner}: a constant delay has std 0, got {std!r}")
        if self.dist == "normal" and std > 0:
            # _a: probability mass below 0 that the truncation removes
            set_(self, "_a", _STD_NORMAL.cdf(-mean / std))
        if self.dist == "lognormal" and std > 0:
            if mean == 0:
                raise ValueError(f"{owner}: a lognormal delay with std > 0 needs mean > 0")
            sigma2 = math.log1p((std / mean) ** 2)
            set_(self, "_a", math.log(mean) - sigma2 / 2)  # mu
            set_(self, "_b", math.sqrt(sigma2))  # sigma

    # constructors -------------------------------------------------------------------------

    @classmethod
    def constant(cls, mean: float) -> DelayModel:
        return cls("constant", mean)

    @classmethod
    def from_samples(cls, samples: Iterable[float]) -> DelayModel:
        """An empirical delay (mean and std computed from the samples)."""
        return cls("empirical", 0.0, samples=tuple(samples))

    def scaled(self, factor: float) -> DelayModel:
        """The same kind of distribution with every value multiplied by ``factor`` (≥ 0)."""
        f = _finite_nonneg("factor", factor, "DelayModel.scaled")
        if self.dist == "empirical":
            return DelayModel.from_samples(s * f for s in self.samples)
        return DelayModel(self.dist, self.mean * f, self.std * f)

    # distribution -------------------------------------------------------------------------

    @property
    def is_constant(self) -> bool:
        """Whether every draw gives ``mean`` (a constant, or a spread of zero)."""
        return self.dist == "constant" or (self.std == 0 and self.dist != "empirical")

    def quantile(self, u: float) -> float:
        """The value at cumulative probability ``u`` ∈ [0, 1) (inverse CDF)."""
        if self.is_constant:
            return self.mean
        if self.dist == "empirical":
            n = len(self.samples)
            return self.samples[min(int(u * n), n - 1)]
        if self.dist == "normal":
            p = self._a + u * (1.0 - self._a)
            x = self.mean + self.std * _STD_NORMAL.inv_cdf(min(max(p, _U_MIN), _U_MAX))
            return max(x, 0.0)
        z = _STD_NORMAL.inv_cdf(min(max(u, _U_MIN), _U_MAX))
        return math.exp(self._a + self._b * z)

    def sample(self, rng: Draws) -> float:
        """One delay in seconds (≥ 0); consumes exactly one ``rng.random()``."""
        return self.quantile(float(rng.random()))

    def median(self) -> float:
        if self.dist == "empirical":
            return float(statistics.median(self.samples))
        return self.quantile(0.5)

    def expected(self) -> float:
        """The distribution's actual mean (differs from ``mean`` only for a truncated normal)."""
        if self.dist != "normal" or self.std == 0:
            return self.mean
        alpha = -self.mean / self.std
        tail = 1.0 - self._a
        return self.mean + self.std * _STD_NORMAL.pdf(alpha) / tail


@dataclass(frozen=True)
class LinkSpec:
    """One link: delay distribution, independent loss probability, bandwidth in bits/s."""

    delay: DelayModel
    loss: float = 0.0
    bandwidth: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.delay, DelayModel):
            raise ValueError(f"LinkSpec: delay must be a DelayModel, got {self.delay!r}")
        loss = _finite_nonneg("loss", self.loss, "LinkSpec")
        if loss >= 1:
            raise ValueError(f"LinkSpec: loss must be in [0, 1), got {self.loss!r}")
        object.__setattr__(self, "loss", loss)
        if self.bandwidth is not None:
            bw = _finite_nonneg("bandwidth", self.bandwidth, "LinkSpec")
            if bw == 0:
                raise ValueError("LinkSpec: bandwidth must be > 0 bits/s (None = unlimited)")
            object.__setattr__(self, "bandwidth", bw)

    def serialisation(self, size: int) -> float:
        """Seconds to put ``size`` bytes on this link."""
        return 0.0 if self.bandwidth is None else size * 8 / self.bandwidth
