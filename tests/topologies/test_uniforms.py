"""Link-delay draws in blocks: the same stream as one numpy call per draw, and the path
model's fixed-delay routes consume exactly the draws the general loop does."""

from __future__ import annotations

import numpy as np
import pytest

from topologies.graphs import line
from topologies.links import DelayModel, LinkSpec
from topologies.paths import PathModel
from topologies.uniforms import Uniforms


def test_blocks_give_the_same_values_in_the_same_order() -> None:
    scalar = np.random.default_rng([7, 1])
    blocked = Uniforms(np.random.default_rng([7, 1]), block=5)  # several refills
    got = [blocked.random() for _ in range(23)]
    assert got == [scalar.random() for _ in range(23)]
    assert all(type(x) is float for x in got)  # Python floats, as a scalar draw gives
    with pytest.raises(ValueError, match="block"):
        Uniforms(np.random.default_rng(0), block=0)


def _model(link: LinkSpec, hops: int) -> PathModel:
    graph = line(hops + 1, link)
    return PathModel(graph, {"a": 0, "b": hops})


def test_a_fixed_route_consumes_two_draws_per_link_and_returns_their_sum() -> None:
    fixed = _model(LinkSpec(DelayModel.constant(0.003)), 3)
    # the same delay as a one-sample empirical distribution: the general loop
    varied = _model(LinkSpec(DelayModel.from_samples([0.003])), 3)
    assert not varied.graph.edges[0, 1]["link"].delay.is_constant
    a, b = np.random.default_rng(1), np.random.default_rng(1)
    for _ in range(5):
        assert fixed.one_way("a", "b", 100, a) == varied.one_way("a", "b", 100, b)
    assert a.random() == b.random()  # both consumed 2 draws per link per packet
    assert fixed.one_way("a", "b", 100, a) == pytest.approx(0.009)


def test_lossy_or_slow_links_take_the_general_path() -> None:
    lossy = _model(LinkSpec(DelayModel.constant(0.001), loss=0.5), 2)
    rng = np.random.default_rng(3)
    outcomes = {lossy.one_way("a", "b", 100, rng) is None for _ in range(50)}
    assert outcomes == {True, False}  # some packets lost, some not
    slow = _model(LinkSpec(DelayModel.constant(0.001), bandwidth=8e3), 1)
    assert slow.one_way("a", "b", 100, np.random.default_rng(0)) == pytest.approx(0.101)
