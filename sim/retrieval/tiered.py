"""Seed 003's multi-tier retrieval (§4), ``tiered[:OPT…]``: expert keywords → system
keywords → vector similarity, merged by tier priority (§4.4), with each tier's time.

The paper's tiers hold different tools (an administrator's expert tools, built-in system
tools, database tools); the catalogue has no such partition, so here every tier searches
the query's service with its own strategy (the substitutions, also in docs/retrieval.md):

* **Tier 1, expert keywords** (§4.1). The *expert tools* are the tools the training split's
  queries ask for (standing in for an administrator's assignment: the tools this agent is
  seen to use). Each has a keyword table: its camelCase-split name words, its description
  words and the words of its training queries (the administrator's knowledge replaced by
  the log). Score = name match (exact phrase 3, a name word 1.5) + keyword overlap (1 per
  shared query term, +0.5 for a *domain term*: the 200 most frequent training-query
  terms, standing in for the curated verbs and nouns) + description match (0.25 per query
  term found as a substring of the description). Kept if ≥ ``t1`` (3).
* **Tier 2, system keywords** (§4.2). A keyword set per tool, pre-computed from its name
  and description: words of ≥ 4 letters whose document frequency lies in [2, 5 %] of the
  catalogue (the "curated vocabulary of domain-significant terms"). Bidirectional match:
  the overlap's share of the query's terms plus its share of the tool's keywords. Kept if
  ≥ ``t2`` (0.5).
* **Tier 3, vector similarity** (§4.3): cosine between the query's and each tool's
  name + description embedding (exhaustive, as ``flat:dense``); relevance threshold ``t3``
  (none by default: the paper gives no value).

Merging (§4.4): tier 1's list, then tier 2's, then tier 3's, each best first; a tool
already listed by a higher tier keeps that place (the paper deduplicates by name; here every
tier indexes the same tools, so by tool id); truncated to ``limit`` (default K). Words are
lower-cased, stop words dropped, and a plural ``s`` stripped before matching.

Per query, :attr:`Ranked.extra` carries ``tier1_ms`` … ``tier3_ms`` (NaN for a tier that
did not run), ``tier`` (the tier that supplied the first tool; 0 if none), ``n_tier1`` …
``n_tier3`` (tools each tier contributed) and ``found_tier1``/``found_tier2`` (tools above
the keyword tiers' thresholds).
"""

from __future__ import annotations

import re
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from nodes.scoring import Encoder, approx_tokens, tokenize
from sim.retrieval.ranked import Ranked
from sim.tierspec import DOMAIN_TERMS, TIERED_PAPER, TieredOptions
from topologies.datasets import Row, canonical_id
from topologies.namespace import Namespace

W_EXACT = 3.0  # the tool's whole name appears in the query
W_PARTIAL = 1.5  # one of its name words (≥ 4 letters) does
W_KEYWORD = 1.0  # per query term in the tool's keyword table ...
W_DOMAIN = 0.5  # ... plus this when the term is a domain term
W_DESC = 0.25  # per query term found as a substring of the description
SYSTEM_MIN_LEN = 4  # system keywords: minimum length ...
SYSTEM_MAX_DF = 0.05  # ... and at most this share of the catalogue's tools (at least 2)

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_WORD = re.compile(r"[a-z0-9]+")


def stem(word: str) -> str:
    """A plural ``s`` stripped (``tools`` → ``tool``, not ``class``)."""
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def terms(text: str) -> set[str]:
    """Stemmed content words of a text (camelCase split, stop words dropped)."""
    return {stem(w) for w in tokenize(_CAMEL.sub(" ", text))}


def name_phrase(name: str) -> str:
    """A name as space-separated lower-case words (``ResearchHelper`` → ``research helper``)."""
    return " ".join(_WORD.findall(_CAMEL.sub(" ", name).lower()))


@dataclass
class _Service:
    """One service's tools and the three tiers' indices."""

    ids: list[str]
    tokens: np.ndarray
    phrase: list[str] = field(default_factory=list)  # name as words
    compact: list[str] = field(default_factory=list)  # name without separators
    name_words: list[set[str]] = field(default_factory=list)
    desc: list[str] = field(default_factory=list)  # lower-case description
    expert_kw: dict[int, set[str]] = field(default_factory=dict)  # expert tools only
    expert_inv: dict[str, list[int]] = field(default_factory=dict)
    system_kw: list[set[str]] = field(default_factory=list)
    system_inv: dict[str, list[int]] = field(default_factory=dict)
    vectors: np.ndarray | None = None


@dataclass
class TierResult:
    """One tier's ranked tools (service indices, best first) and how many it scored."""

    order: list[int]
    scored: int


class TieredIndex:
    """Seed 003's three tiers over a namespace (module doc); ``train`` are the training
    split's query rows (the expert tools and their keyword tables read only them)."""

    def __init__(self, ns: Namespace, encoder: Encoder, train: Sequence[Row] = (),
                 domain_terms: int = DOMAIN_TERMS) -> None:
        self.ns = ns
        self.encoder = encoder
        groups: dict[str, list[str]] = defaultdict(list)
        for tid in sorted(ns.tools):
            if canonical_id(tid) == tid:  # multi-parent copies are the same tool
                groups[ns.tools[tid].service].append(tid)
        asked: dict[str, set[str]] = defaultdict(set)  # tool -> its training queries' terms
        df_queries: Counter[str] = Counter()
        for row in train:
            words = terms(row["query"])
            df_queries.update(words)
            for tid in row["tool_ids"]:
                asked[tid] |= words
        self.domain = {w for w, _ in sorted(df_queries.items(),
                                            key=lambda x: (-x[1], x[0]))[:domain_terms]}
        texts = {tid: f"{ns.tools[tid].name} {ns.tools[tid].description}"
                 for ids in groups.values() for tid in ids}
        own = {tid: terms(text) for tid, text in texts.items()}
        df_tools: Counter[str] = Counter(w for ws in own.values() for w in ws)
        max_df = max(2, int(SYSTEM_MAX_DF * len(own)))
        vocab = {w for w, n in df_tools.items()
                 if 2 <= n <= max_df and len(w) >= SYSTEM_MIN_LEN}
        self.services: dict[str, _Service] = {}
        for service, ids in groups.items():
            svc = _Service(ids, np.array([approx_tokens(texts[t]) for t in ids]))
            expert_inv: dict[str, list[int]] = defaultdict(list)
            system_inv: dict[str, list[int]] = defaultdict(list)
            for i, tid in enumerate(ids):
                tool = ns.tools[tid]
                svc.phrase.append(name_phrase(tool.name))
                svc.compact.append(svc.phrase[-1].replace(" ", ""))
                svc.name_words.append({stem(w) for w in svc.phrase[-1].split()
                                       if len(w) >= SYSTEM_MIN_LEN})
                svc.desc.append(tool.description.lower())
                if tid in asked:  # an expert tool: its keyword table
                    svc.expert_kw[i] = own[tid] | asked[tid]
                    for w in svc.expert_kw[i]:
                        expert_inv[w].append(i)
                kws = own[tid] & vocab
                svc.system_kw.append(kws)
                for w in kws:
                    system_inv[w].append(i)
            svc.expert_inv = dict(expert_inv)
            svc.system_inv = dict(system_inv)
            self.services[service] = svc

    # -------------------------------------------------------------------------- tiers
    def expert(self, intent: str, svc: _Service, minimum: float) -> TierResult:
        """Tier 1: weighted keyword score over the expert tools (§4.1)."""
        q = terms(intent)
        words = _WORD.findall(_CAMEL.sub(" ", intent).lower())
        padded = f" {' '.join(words)} "
        raw = {w for w in tokenize(intent) if len(w) >= 3}
        cand: set[int] = set()
        for w in q:
            cand.update(svc.expert_inv.get(w, ()))
        scored: list[tuple[float, int]] = []
        for i in cand:
            s = 0.0
            if svc.phrase[i] and (f" {svc.phrase[i]} " in padded or svc.compact[i] in words):
                s += W_EXACT
            elif svc.name_words[i] & q:
                s += W_PARTIAL
            for w in q & svc.expert_kw[i]:
                s += W_KEYWORD + (W_DOMAIN if w in self.domain else 0.0)
            s += W_DESC * sum(1 for w in raw if w in svc.desc[i])
            if s >= minimum:
                scored.append((-s, i))
        scored.sort()
        return TierResult([i for _, i in scored], len(cand))

    def system(self, intent: str, svc: _Service, minimum: float) -> TierResult:
        """Tier 2: bidirectional keyword match on pre-computed keyword sets (§4.2)."""
        q = {w for w in terms(intent) if len(w) >= SYSTEM_MIN_LEN}
        if not q:
            return TierResult([], 0)
        shared: Counter[int] = Counter()
        for w in q:
            shared.update(svc.system_inv.get(w, ()))
        scored = []
        for i, n in shared.items():
            s = n / len(q) + n / len(svc.system_kw[i])
            if s >= minimum:
                scored.append((-s, i))
        scored.sort()
        return TierResult([i for _, i in scored], len(shared))

    def vector(self, intent: str, svc: _Service, threshold: float | None, need: int
               ) -> TierResult:
        """Tier 3: cosine of the query's embedding with every tool's, best ``need`` above
        the relevance threshold (§4.3)."""
        if svc.vectors is None:
            svc.vectors = np.asarray(self.encoder(
                [f"{self.ns.tools[t].name} {self.ns.tools[t].description}" for t in svc.ids]),
                dtype=np.float32)
        q = np.asarray(self.encoder([intent])[0], dtype=np.float32)
        sims = svc.vectors @ q
        idx = np.arange(len(svc.ids)) if threshold is None else np.flatnonzero(sims >= threshold)
        if need and len(idx) > need:
            idx = idx[np.argpartition(-sims[idx], need - 1)[:need]]
        order = idx[np.lexsort((idx, -sims[idx]))]
        return TierResult(order.tolist(), len(svc.ids))

    # -------------------------------------------------------------------------- search
    def rank(self, intent: str, service: str, k: int, opts: TieredOptions = TIERED_PAPER
             ) -> Ranked:
        """The merged list (tier priority, deduplicated, truncated) and per-tier timings."""
        svc = self.services.get(service)
        limit = min(k, opts.limit) if opts.limit else k
        nan = float("nan")
        extra: dict[str, float] = {"tier1_ms": nan, "tier2_ms": nan, "tier3_ms": nan,
                                   "tier": 0.0, "n_tier1": 0.0, "n_tier2": 0.0,
                                   "n_tier3": 0.0, "found_tier1": nan, "found_tier2": nan}
        if svc is None:
            return Ranked([], 0, 0, approx_tokens(intent), extra=extra)
        merged: list[int] = []
        source: list[int] = []
        seen: set[int] = set()
        examined = 0
        for tier in opts.tiers:
            if opts.lazy and len(merged) >= limit:
                break
            t0 = time.perf_counter()
            if tier == 1:
                res = self.expert(intent, svc, opts.t1)
            elif tier == 2:
                res = self.system(intent, svc, opts.t2)
            else:
                res = self.vector(intent, svc, opts.t3, limit + len(merged))
            for i in res.order:
                if len(merged) >= limit:
                    break
                if i not in seen:
                    seen.add(i)
                    merged.append(i)
                    source.append(tier)
            extra[f"tier{tier}_ms"] = (time.perf_counter() - t0) * 1e3
            if tier < 3:
                extra[f"found_tier{tier}"] = float(len(res.order))
            examined = max(examined, res.scored)
        for tier in source:
            extra[f"n_tier{tier}"] += 1
        extra["tier"] = float(source[0]) if source else 0.0
        # C(q): the largest set one tier scored (tier 3 scores the whole service pool)
        tokens = int(svc.tokens.sum()) if 3 in opts.tiers else 0
        return Ranked([svc.ids[i] for i in merged], examined, examined,
                      tokens + approx_tokens(intent), extra=extra)
