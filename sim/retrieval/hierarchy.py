"""ToolDNS and A2X over a namespace in process: the servers' rankings without the network,
walked by the resolver's own policy (:class:`nodes.resolver.merge.Descent` for each level,
its merge table for the leaves' lists), so there is one walk to change.

* ``tooldns:SCORER[:B]`` — the ToolDNS walk, top-1 (B = 1) or beam B, with the very rankings
  the authoritative servers compute (children by their summary, leaf tools by
  ``name description``, only children offering the service; the same ``ranker``) and the
  resolver's beam split and round-robin merge, so the answers are the ones the DNS walk
  returns (``tests/sim/retrieval/test_eval.py`` checks that against a resolver walking servers in
  memory). ``tooldns:SCORER:B:score`` merges the reached leaves' lists by the tools' scores
  instead, and ``tooldns:SCORER:B:global`` keeps the best B children of each level over all
  zones (resolver ``merge="score"`` and ``search="global"``: the servers send their scores
  in the scores option); the suffix is any merge policy or search the resolver names.
  With ``taxonomy.centroids`` every zone carries one mean tool embedding per service and
  parents route a query by cosine with the centroid of its service (dense scorer). With
  ``taxonomy.representatives`` N > 0 every zone carries N representative tools (k-means
  medoids of its subtree) and parents score a child by its best representative (MaxSim),
  as ``nodes.authoritative.server`` does with ``Delegation.representatives``; every
  representative scored counts in C(q).
* ``a2x:SCORER:POLICY`` — A2X progressive multi-branch descent, as the resolver's
  ``search="a2x-POLICY"`` walks it: at every node the server's top-K children (what it
  refers, with their scores in the scores option) are selected from by ``get_one`` (the
  best), ``get_important`` (min-max normalised score ≥ 0.7, at most 3) or ``get_all``
  (normalised score ≥ 0.4), the normalisation over those K (K = 0: all eligible), and all
  selected are descended into; the reached leaves' top-K lists are merged round-robin in
  descent order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from nodes.resolver.config import ResolverConfig
from nodes.resolver.merge import Descent, wire_score
from nodes.scoring import (
    Ranker,
    ScoreIndex,
    Scorer,
    approx_tokens,
    centroid_index,
    group_max_index,
    ranker,
    scored_top_k,
)
from sim.retrieval.ranked import Ranked
from topologies.datasets import canonical_id
from topologies.namespace import TLD, Namespace


class InProcessHierarchy:
    """The servers' rankings over a namespace, without the network (see module doc)."""

    def __init__(self, ns: Namespace, scorer: Scorer) -> None:
        self.ns = ns
        self.scorer = scorer
        self.below = ns.services_below()
        self._children: dict[tuple[str, str], tuple[Ranker, list[str], ScoreIndex]] = {}
        self._by_centroid: dict[str, bool] = {}  # zone -> its children carry centroids
        self._eligible: dict[tuple[str, str], list[int]] = {}
        self._tools: dict[tuple[str, str], tuple[Ranker, list[str], ScoreIndex, int]] = {}

    def children(self, zone: str, service: str) -> tuple[Ranker, list[str], list[int], ScoreIndex]:
        by_service = self._by_centroid.get(zone)
        if by_service is None:  # centroids differ per service
            by_service = self._by_centroid[zone] = any(
                self.ns.zones[c].centroids for c in self.ns.zones[zone].children)
        key = (zone, service if by_service else "")
        entry = self._children.get(key)
        if entry is None:  # as nodes.authoritative.zonestate.child_index
            kids = self.ns.zones[zone].children
            nodes = [self.ns.zones[c] for c in kids]
            if by_service:
                index = centroid_index(self.scorer, kids,
                                       [n.centroids.get(service) for n in nodes])
            elif any(n.representatives for n in nodes):
                index = group_max_index(self.scorer, kids,
                                        [n.representatives or [n.summary] for n in nodes])
            else:
                index = self.scorer.index(kids, [n.summary for n in nodes])
            entry = self._children[key] = (ranker(index), kids, index)
        eligible = self._eligible.get((zone, service))
        if eligible is None:
            eligible = self._eligible[(zone, service)] = [
                i for i, c in enumerate(entry[1]) if service in self.below[c]]
        return entry[0], entry[1], eligible, entry[2]

    def summary_tokens(self, zone: str, idx: Sequence[int]) -> int:
        """Tokens of what scoring children ``idx`` of ``zone`` reads (summaries or reps)."""
        kids = [self.ns.zones[self.ns.zones[zone].children[i]] for i in idx]
        return sum(sum(approx_tokens(t) for t in (n.representatives or [n.summary]))
                   for n in kids)

    def child_items(self, zone: str, idx: Sequence[int]) -> int:
        """Items examined scoring children ``idx`` of ``zone``: one per summary or rep."""
        kids = [self.ns.zones[self.ns.zones[zone].children[i]] for i in idx]
        return sum(len(n.representatives) or 1 for n in kids)

    def leaf(self, zone: str, service: str) -> tuple[Ranker, list[str], ScoreIndex, int]:
        entry = self._tools.get((zone, service))
        if entry is None:
            tools = [self.ns.tools[t] for t in self.ns.zones[zone].tools]
            tools = [t for t in tools if t.service == service]
            texts = [f"{t.name} {t.description}" for t in tools]
            index = self.scorer.index([t.id for t in tools], texts)
            entry = (ranker(index), [t.id for t in tools], index,
                     sum(approx_tokens(x) for x in texts))
            self._tools[(zone, service)] = entry
        return entry

    def is_leaf(self, zone: str) -> bool:
        return not self.ns.zones[zone].children

    def _leaf(self, zone: str, service: str, intent: str, k: int, tally: _Tally,
              scores: bool) -> None:
        """A leaf's top-K tools (with their scores when ``scores``), into ``tally``."""
        rank, ids, index, tok = self.leaf(zone, service)
        if scores and ids:
            chosen, sc = scored_top_k(index, intent, k)
            tally.scored[zone] = [wire_score(x) for x in sc]
        else:
            chosen = rank(intent, k) if ids else []
        tally.results[zone] = [ids[i] for i in chosen]
        tally.order.append(zone)
        tally.examined += len(ids)
        tally.tools_examined += len(ids)
        tally.tokens += tok + approx_tokens(intent)

    def _inner(self, zone: str, service: str, intent: str, tally: _Tally
               ) -> tuple[Ranker, list[str], list[int], ScoreIndex]:
        """A non-leaf's children scored (counted into ``tally`` when any is eligible)."""
        rank, kids, eligible, index = self.children(zone, service)
        if eligible:
            tally.examined += self.child_items(zone, eligible)
            tally.tokens += self.summary_tokens(zone, eligible) + approx_tokens(intent)
        return rank, kids, eligible, index

    def walk(self, intent: str, service: str, k: int, beam: int = 1, search: str = "split",
             merge: str = "auto", start: str = TLD) -> Ranked:
        """The resolver's walk with beam ``beam``, ``search`` and ``merge`` (the resolver's
        own names: ``ResolverConfig.search`` and ``merge``), over the servers' rankings:
        each level narrowed by the resolver's :class:`nodes.resolver.merge.Descent`, the
        reached leaves' lists merged by its merge policy. A scored search (global, A2X)
        ranks each zone's top-K children with the scores the servers send (float32, as
        the scores option carries them); leaves send scores when the merge uses them."""
        config = ResolverConfig(beam=beam, search=search, merge=merge)
        descent = Descent(config.search, config.beam)
        scores = config.merges_by_score
        tally = _Tally()
        branches: list[tuple[str, int]] = [(start, descent.width)]
        while branches:
            nxt: list[tuple[str, int]] = []
            pool: list[tuple[str, float]] = []
            for zone, width in branches:
                if self.is_leaf(zone):
                    self._leaf(zone, service, intent, k, tally, scores)
                    continue
                rank, kids, eligible, index = self._inner(zone, service, intent, tally)
                if not eligible:
                    continue
                if descent.scored:  # what the server refers, with its scores
                    top, sc = scored_top_k(index, intent, k, eligible)
                    referred: list[str] | list[tuple[str, float]] = [
                        (kids[i], wire_score(x)) for i, x in zip(top, sc, strict=True)]
                else:
                    referred = [kids[i] for i in rank(intent, k, eligible)]
                nxt += descent.step(referred, width, pool)
            branches = nxt + descent.end(pool)
        return tally.ranked(k, config)

    def leaf_index(self, zone: str, service: str) -> ScoreIndex:
        """The score index of a leaf's tools of ``service``."""
        return self.leaf(zone, service)[2]


@dataclass
class _Tally:
    """What a walk reached (leaves in walk order, their lists and scores) and examined."""

    results: dict[str, list[str]] = field(default_factory=dict)
    scored: dict[str, list[float]] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    examined: int = 0
    tools_examined: int = 0
    tokens: int = 0

    def ranked(self, k: int, config: ResolverConfig) -> Ranked:
        """The reached leaves' lists merged by the resolver's merge policy (with the
        leaves' scores when it merges by score; a leaf that sent none scores -inf)."""
        lists = [[canonical_id(t) for t in self.results[z]] for z in self.order]
        scores = ([self.scored.get(z, [float("-inf")] * len(self.results[z]))
                   for z in self.order] if config.merges_by_score else None)
        merged = config.merge_policy(lists, scores, k)
        return Ranked(merged, self.examined, self.tools_examined, self.tokens, self.order)
