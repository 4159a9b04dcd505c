"""Options of seed 003's multi-tier retrieval (method ``tiered[:OPT…]``), parsed without
numpy or the scorers so that validating an evaluation file stays cheap
(:func:`sim.evalspec.check_method`). The retrieval itself is :mod:`sim.retrieval.tiered`."""

from __future__ import annotations

from dataclasses import dataclass, replace

TIER1_MIN = 3.0  # expert tier: a tool's weighted keyword score must reach this ...
TIER2_MIN = 0.5  # system tier: ... and its bidirectional keyword overlap this
DOMAIN_TERMS = 200  # the "curated vocabulary": the training queries' most frequent terms


@dataclass(frozen=True)
class TieredOptions:
    """One reading of seed 003 §4 (``tiered[:OPT…]``).

    ``tiers`` — which tiers run, in priority order (``only=12`` … ``only=3``: ablations);
    ``t1``/``t2`` — minimum scores of the expert and system keyword tiers; ``t3`` — the
    vector tier's relevance threshold (cosine; None = none: the paper gives no value);
    ``limit`` — tools returned per search (0 = the evaluation's K; the paper: typically 5);
    ``lazy`` — skip a tier once the higher ones filled the result (the paper runs all).
    """

    tiers: tuple[int, ...] = (1, 2, 3)
    t1: float = TIER1_MIN
    t2: float = TIER2_MIN
    t3: float | None = None
    limit: int = 0
    lazy: bool = False


TIERED_PAPER = TieredOptions()


def tiered_options(method: str) -> TieredOptions:
    """Parse ``tiered[:t1=X][:t2=X][:t3=X][:limit=N][:only=123][:lazy]``; ValueError
    naming the bad part."""
    parts = method.split(":")
    if parts[0] != "tiered":
        raise ValueError(f"not a tiered method: {method!r}")
    opts = TIERED_PAPER
    for part in parts[1:]:
        key, _, value = part.partition("=")
        try:
            if part == "lazy":
                opts = replace(opts, lazy=True)
            elif key == "t1" and value:
                opts = replace(opts, t1=float(value))
            elif key == "t2" and value:
                opts = replace(opts, t2=float(value))
            elif key == "t3" and value:
                opts = replace(opts, t3=float(value))
            elif key == "limit" and value.isdigit():
                opts = replace(opts, limit=int(value))
            elif (key == "only" and value and set(value) <= set("123")
                  and len(set(value)) == len(value)):
                opts = replace(opts, tiers=tuple(sorted(int(c) for c in value)))
            else:
                raise ValueError
        except ValueError:
            raise ValueError(f"{method!r}: unknown tiered option {part!r} (t1=X, t2=X, t3=X, "
                             f"limit=N, only=123, lazy)") from None
    return opts
