"""The one beam and merge policy (nodes.resolver.merge), as the resolver and the retrieval
evaluator both use it, and the named merge policies (MERGES) a resolver and a scenario pick."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodes.resolver.config import ResolverConfig
from nodes.resolver.merge import (
    MERGES,
    best,
    narrow,
    round_robin,
    score_merge,
    wire_score,
)
from nodes.resolver.types import Endpoint

NEG_INF = float("-inf")


def ep(target: str, score: float | None = None) -> Endpoint:
    return Endpoint(target, None, 443, 0, 0, "z.", score=score)


def test_round_robin_takes_one_of_each_leaf_in_turn_without_duplicates() -> None:
    lists = [["a", "b", "c"], ["d", "a"], ["e"]]
    assert round_robin(lists, 0) == ["a", "d", "e", "b", "c"]
    assert round_robin(lists, 2) == ["a", "d"]
    assert round_robin([], 3) == [] and round_robin([[], []], 0) == []


def test_score_merge_orders_by_score_then_walk_order_then_rank() -> None:
    lists = [["a", "b"], ["c", "a"], ["d"]]
    assert score_merge(lists, [[0.5, 0.5], [0.5, 0.9], [0.5]], 0) == ["a", "b", "c", "d"]
    assert score_merge(lists, [[0.1, 0.9], [0.5, 0.2], [0.7]], 2) == ["b", "d"]
    # a leaf that sent no scores (-inf each) comes after every scored one, in walk order
    assert score_merge(lists, [[NEG_INF, NEG_INF], [0.0, 0.1], [NEG_INF]], 0) == [
        "a", "c", "b", "d"]


def test_key_dedups_items_that_are_not_themselves_keys() -> None:
    a1, a2, b = ep("a.", 0.2), ep("a.", 0.9), ep("b.", 0.5)
    target = lambda e: e.target  # noqa: E731
    assert round_robin([[a1], [a2, b]], 0, target) == [a1, b]
    assert score_merge([[a1], [a2, b]], [[0.2], [0.9, 0.5]], 0, target) == [a2, b]


lists_of_ids = st.lists(st.lists(st.sampled_from("abcdefg"), max_size=5), max_size=4)


@given(lists=lists_of_ids, k=st.integers(0, 6), data=st.data())
def test_resolver_and_evaluator_uses_agree(lists: list[list[str]], k: int,
                                           data: st.DataObject) -> None:
    """The resolver merges endpoints by target, the evaluator tool IDs by themselves: the
    same policy, so the same order (what the evaluator's walks rely on to equal the DNS
    walk; tests/sim/retrieval/test_eval.py checks the walks end to end)."""
    scores = [[data.draw(st.sampled_from([NEG_INF, 0.0, 0.25, 0.5, 1.0])) for _ in lst]
              for lst in lists]
    endpoints = [[ep(t, s) for t, s in zip(lst, sc, strict=True)]
                 for lst, sc in zip(lists, scores, strict=True)]
    target = lambda e: e.target  # noqa: E731
    assert [e.target for e in round_robin(endpoints, k, target)] == round_robin(lists, k)
    assert ([e.target for e in score_merge(endpoints, scores, k, target)]
            == score_merge(lists, scores, k))
    merged = score_merge(lists, scores, 0)
    assert merged == list(dict.fromkeys(merged)) and set(merged) == {t for x in lists for t in x}


def test_narrow_shares_the_width_among_the_best_children() -> None:
    assert narrow(["a", "b", "c"], 1) == [("a", 1)]
    assert narrow(["a", "b", "c"], 2) == [("a", 1), ("b", 1)]
    assert narrow(["a", "b"], 5) == [("a", 3), ("b", 2)]


def test_best_keeps_the_top_scores_ties_in_learnt_order() -> None:
    pool = [("a", 0.5), ("b", 0.9), ("c", 0.5), ("d", NEG_INF)]
    assert best(pool, 2) == ["b", "a"]
    assert best(pool, 10) == ["b", "a", "c", "d"]


def test_wire_score_is_the_float32_the_option_carries() -> None:
    assert wire_score(0.1) == float(np.float32(0.1)) != 0.1
    assert wire_score(NEG_INF) == NEG_INF



def test_the_named_merge_policies() -> None:
    lists = [["a", "b"], ["c", "a"], ["d"]]
    scores = [[0.1, 0.9], [0.5, 0.2], [0.7]]
    rr, by_score = round_robin(lists, 0), score_merge(lists, scores, 0)
    assert rr != by_score
    assert MERGES["auto"](lists, None, 0) == rr and MERGES["auto"](lists, scores, 0) == by_score
    assert MERGES["score"](lists, scores, 0) == by_score
    assert MERGES["round-robin"](lists, scores, 0) == rr
    assert MERGES["round-robin"](lists, None, 2) == rr[:2]


@pytest.mark.parametrize(("search", "merge", "wants"), [
    ("split", "auto", False), ("global", "auto", True), ("split", "score", True),
    ("split", "round-robin", False), ("global", "round-robin", True)])
def test_the_config_asks_for_scores_when_search_or_merge_needs_them(
        search: str, merge: str, wants: bool) -> None:
    config = ResolverConfig(search="global" if search == "global" else "split", merge=merge)
    assert config.merge_policy is MERGES[merge] and config.wants_scores is wants


def test_an_unknown_merge_policy_fails_when_the_config_is_built() -> None:
    with pytest.raises(ValueError, match="unknown policy 'nope'"):
        ResolverConfig(merge="nope")
