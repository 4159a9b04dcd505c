"""Retrieval-quality evaluation: discovery methods compared on the same queries.

Methods (``--methods``; ``SCORER`` is one of ``bm25 tfidf dense maxsim llm``):

* ``flat:SCORER`` — one index over every tool of the query's service (ToolLLM-style).
* ``context`` — all descriptions in one prompt (OpenClaw-style context injection): its
  token cost always, its accuracy only when an LLM endpoint is configured.
* ``tooldns:SCORER[:B]`` — the ToolDNS walk, top-1 (B = 1) or beam B, evaluated in
  process with the very rankings the authoritative servers compute (children by their
  summary, leaf tools by ``name description``, only children offering the service; the
  same ``ranker``) and the resolver's beam split and round-robin merge, so the answers
  are the ones the DNS walk returns (``tests/test_eval.py`` checks that against a
  resolver walking servers in memory). ``tooldns:SCORER:B:score`` merges the reached
  leaves' lists by the tools' scores instead, and ``tooldns:SCORER:B:global`` keeps the
  best B children of each level over all zones (resolver ``merge="score"`` and
  ``search="global"``: the servers send their scores in the scores option). With
  ``taxonomy.centroids`` every zone carries one mean tool embedding per service and
  parents route a query by cosine with the centroid of its service (dense scorer).
  With ``taxonomy.representatives`` N > 0 every zone carries N representative
  tools (k-means medoids of its subtree) and parents score a child by its best
  representative (MaxSim), as ``nodes.authoritative.server`` does with ``Delegation.representatives``;
  every representative scored counts in C(q).
* ``a2x:SCORER:POLICY`` — A2X progressive multi-branch descent: at every node the
  children are scored and ``get_one`` (the best), ``get_important`` (min-max normalised
  score ≥ 0.7, at most 3) or ``get_all`` (normalised score ≥ 0.4) are all descended into;
  the reached leaves' rankings are merged round-robin in descent order.
* ``grail`` — GRAIL as published (seed 002, §III, Algorithm 1): a tag index (each tool's
  category path and name words, expanded by a synonym dictionary mined offline as
  embedding neighbours of the tag words among the tags and the training queries' words),
  a context index of pseudo-documents (name + description ⊕ up to 10 of the tool's
  *training-split* queries, standing in for the paper's LLM-written ones), an intent index
  of example matrices (name and description sentences: the catalogue has no usage
  examples); candidates C = tools holding any query word as a tag ∪ the dense top-50 on
  the context index; score α·cos(q, ctx) + (1 − α)·max cos(q, examples), α = 0.5 (the
  paper gives none). No SLM: the predicted tags are the query's own words that are tags.
  Ablations ``grail:OPT[:OPT…]``: ``no-maxsim`` (mean-pooled examples), ``no-tags`` (dense
  recall only, the paper's "w/o SLM"), ``no-pseudo``, ``no-synonyms``, ``intersect``
  (dense top-50 within the tag candidates), ``alpha=X``, ``pseudo=N``;
  ``grail-intersect`` is the testbed's earlier reading (tags = the evaluated tree's zone
  labels, dense top-50 within them — all tools if fewer than 50 match —, no synonyms, no
  pseudo-documents). C(q) = the candidates the dense path scored (the whole pool for
  the union). Pseudo-documents read only ``dataset.test_fraction``'s training split
  (none without it); a training query whose text is also held out is left out.

Metrics per query: hit@1 / hit@K by category (a returned tool in the ground truth's leaf
category of the catalogue, the paper's definition) and by exact tool, recall@K, reciprocal
rank, C(q) = items scored (children + tools; also as a share of the query's service pool
and of all tools, the paper's N), tokens an LLM scorer would read (≈ chars/4 of everything
scored), scoring time.
"""

from __future__ import annotations

import hashlib
import json
import time
import urllib.request
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.files import atomic_write
from nodes.scoring import (
    MINILM,
    CachedEncoder,
    ChatTransport,
    LLMScorer,
    Ranker,
    ScoreIndex,
    Scorer,
    approx_tokens,
    centroid_index,
    default_encoder,
    facets,
    group_max_index,
    make_scorer,
    minilm_encoder,
    ranker,
    scored_top_k,
    tokenize,
)
from sim.evalspec import (  # noqa: F401 (re-exported: the eval file models live there)
    DEFAULT_METHODS,
    GRAIL_ALPHA,
    GRAIL_DENSE_TOP,
    GRAIL_PAPER,
    GRAIL_PSEUDO_QUERIES,
    POLICIES,
    DatasetSpec,
    EvalScenario,
    GrailOptions,
    LLMSpec,
    TaxonomySpec,
    check_method,
    grail_options,
    load_eval,
)
from sim.provenance import KEY as PROVENANCE
from sim.provenance import provenance, utc_now
from topologies.datasets import (
    Row,
    canonical_id,
    category_of,
    load_catalog,
    load_queries,
    load_tooldns_release,
    stratified_split,
    synthetic_catalog,
)
from topologies.namespace import TLD, Namespace, Query
from topologies.taxonomy import (
    TaxonomyConfig,
    add_centroids,
    add_representatives,
    balance_stats,
    build_taxonomy,
    from_categories,
)

# ------------------------------------------------------------------------ transports


def openai_transport(url: str, api_key: str | None = None, timeout: float = 60.0
                     ) -> ChatTransport:
    """POST request bodies to an OpenAI-compatible ``…/chat/completions`` endpoint."""
    endpoint = url.rstrip("/")
    if not endpoint.endswith("/chat/completions"):
        endpoint += "/chat/completions"

    def chat(body: dict) -> dict:
        headers = {"Content-Type": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        req = urllib.request.Request(endpoint, json.dumps(body).encode(), headers, method="POST")
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read().decode("utf-8"))

    return chat


# ------------------------------------------------------------------------ embeddings cache


class DigestStore(dict):
    """Vectors keyed by the SHA-1 of their text (what the disk cache keeps)."""

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha1(text.encode("utf-8")).hexdigest()

    def __contains__(self, text: object) -> bool:
        return super().__contains__(self.key(str(text)))

    def __getitem__(self, text: str) -> np.ndarray:
        return super().__getitem__(self.key(text))

    def __setitem__(self, text: str, vec: np.ndarray) -> None:
        super().__setitem__(self.key(text), vec)


def disk_cached_encoder(cache_dir: str | Path, encode: Callable | None = None,
                        model: str = MINILM) -> CachedEncoder:
    """A :class:`CachedEncoder` whose vectors persist in ``cache_dir/<model>.npz``,
    keyed by the SHA-1 of each text (so the file holds digests and vectors only)."""
    path = Path(cache_dir) / f"{model}.npz"
    store = DigestStore()
    if path.exists():
        data = np.load(path, allow_pickle=False)
        keys = (data["keys"].tolist() if "keys" in data.files  # older files held the texts
                else [DigestStore.key(t) for t in data["texts"].tolist()])
        for digest, vec in zip(keys, data["vectors"], strict=True):
            dict.__setitem__(store, digest, vec)
    enc = CachedEncoder(encode or minilm_encoder(), store)  # the model is loaded once
    enc.path = path  # type: ignore[attr-defined]
    enc.saved = len(store)  # type: ignore[attr-defined]
    return enc


def save_encoder_cache(enc: CachedEncoder) -> None:
    """Write a disk-cached encoder's vectors back (atomically) if it learnt new ones."""
    path: Path | None = getattr(enc, "path", None)
    if path is None or len(enc.store) == getattr(enc, "saved", -1):
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    keys = list(dict.keys(enc.store))
    vectors = np.stack([dict.__getitem__(enc.store, k) for k in keys])

    def write(tmp: str) -> None:
        with open(tmp, "wb") as fh:
            np.savez(fh, keys=np.array(keys), vectors=vectors)

    atomic_write(path, write)
    enc.saved = len(keys)  # type: ignore[attr-defined]


# ------------------------------------------------------------------------ the hierarchy


@dataclass
class Ranked:
    """What one method returned for one query and what it examined."""

    tools: list[str]
    examined: int  # items scored: child summaries + tool descriptions
    tools_examined: int
    tokens: int
    leaves: list[str] = field(default_factory=list)


class InProcessHierarchy:
    """The servers' rankings over a namespace, without the network (see module doc)."""

    def __init__(self, ns: Namespace, scorer: Scorer) -> None:
        self.ns = ns
        self.scorer = scorer
        self.below = ns.services_below()
        self._children: dict[tuple[str, str], tuple[Ranker, list[str], object]] = {}
        self._by_centroid: dict[str, bool] = {}  # zone -> its children carry centroids
        self._eligible: dict[tuple[str, str], list[int]] = {}
        self._tools: dict[tuple[str, str], tuple[Ranker, list[str], object, int]] = {}

    def children(self, zone: str, service: str) -> tuple[Ranker, list[str], list[int], object]:
        by_service = self._by_centroid.get(zone)
        if by_service is None:  # centroids differ per service
            by_service = self._by_centroid[zone] = any(
                self.ns.zones[c].centroids for c in self.ns.zones[zone].children)
        key = (zone, service if by_service else "")
        entry = self._children.get(key)
        if entry is None:  # as nodes.authoritative.server.child_index
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

    def leaf(self, zone: str, service: str) -> tuple[Ranker, list[str], object, int]:
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
            chosen, sc = scored_top_k(index, intent, k)  # type: ignore[arg-type]
            tally.scored[zone] = [_f32(x) for x in sc]
        else:
            chosen = rank(intent, k) if ids else []
        tally.results[zone] = [ids[i] for i in chosen]
        tally.order.append(zone)
        tally.examined += len(ids)
        tally.tools_examined += len(ids)
        tally.tokens += tok + approx_tokens(intent)

    def _inner(self, zone: str, service: str, intent: str, tally: _Tally
               ) -> tuple[Ranker, list[str], list[int], object]:
        """A non-leaf's children scored (counted into ``tally`` when any is eligible)."""
        rank, kids, eligible, index = self.children(zone, service)
        if eligible:
            tally.examined += self.child_items(zone, eligible)
            tally.tokens += self.summary_tokens(zone, eligible) + approx_tokens(intent)
        return rank, kids, eligible, index

    def walk(self, intent: str, service: str, k: int, beam: int = 1,
             start: str = TLD, merge: str = "rr") -> Ranked:
        """The resolver's Algorithm 1 with beam ``beam`` (see ``nodes.resolver.core``).

        ``merge="score"`` merges the leaves' lists by the tools' scores instead of
        round-robin (resolver ``merge="score"``)."""
        tally = _Tally()
        branches = [(start, max(1, beam))]
        while branches:
            nxt: list[tuple[str, int]] = []
            for zone, width in branches:
                if self.is_leaf(zone):
                    self._leaf(zone, service, intent, k, tally, merge == "score")
                    continue
                rank, kids, eligible, _ = self._inner(zone, service, intent, tally)
                chosen = rank(intent, k, eligible) if eligible else []
                picked = [kids[i] for i in chosen][:width]
                nxt += [(c, width // len(picked) + int(i < width % len(picked)))
                        for i, c in enumerate(picked)]
            branches = nxt
        return tally.ranked(k, by_score=merge == "score")

    def global_walk(self, intent: str, service: str, k: int, beam: int) -> Ranked:
        """Level-wise global beam, as the resolver's ``search="global"`` walks it with the
        servers' scores option: every frontier zone refers its top-K children with their
        scores, the best ``beam`` of all are kept; the reached leaves' tools are merged by
        score."""
        tally = _Tally()
        frontier = [TLD]
        while frontier:
            cands: list[tuple[float, int, str]] = []
            for zone in frontier:
                if self.is_leaf(zone):
                    self._leaf(zone, service, intent, k, tally, True)
                    continue
                _, kids, eligible, index = self._inner(zone, service, intent, tally)
                if not eligible:
                    continue
                top, sc = scored_top_k(index, intent, k, eligible)  # type: ignore[arg-type]
                cands += [(-_f32(x), len(cands) + j, kids[i])  # what the server refers
                          for j, (i, x) in enumerate(zip(top, sc, strict=True))]
            frontier = [z for *_, z in sorted(cands)[: max(1, beam)]]
        return tally.ranked(k, by_score=True)

    def leaf_index(self, zone: str, service: str) -> ScoreIndex:
        """The score index of a leaf's tools of ``service``."""
        return self.leaf(zone, service)[2]  # type: ignore[return-value]

    def descend(self, intent: str, service: str, k: int, policy: str) -> Ranked:
        """A2X progressive multi-branch descent with a child selection policy."""
        tally = _Tally()
        frontier = [TLD]
        while frontier:
            nxt: list[str] = []
            for zone in frontier:
                if self.is_leaf(zone):
                    self._leaf(zone, service, intent, k, tally, False)
                    continue
                _, kids, eligible, index = self._inner(zone, service, intent, tally)
                if not eligible:
                    continue
                scores = np.asarray(index.scores(intent), dtype=float)[eligible]  # type: ignore[attr-defined]
                nxt += [kids[eligible[i]] for i in select(scores, policy)]
            frontier = nxt
        return tally.ranked(k, by_score=False)


@dataclass
class _Tally:
    """What a walk reached (leaves in walk order, their lists and scores) and examined."""

    results: dict[str, list[str]] = field(default_factory=dict)
    scored: dict[str, list[float]] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    examined: int = 0
    tools_examined: int = 0
    tokens: int = 0

    def ranked(self, k: int, by_score: bool) -> Ranked:
        merged = (_score_merge(self.results, self.scored, self.order, k) if by_score
                  else _merge(self.results, self.order, k))
        return Ranked(merged, self.examined, self.tools_examined, self.tokens, self.order)


def _f32(score: float) -> float:
    """A score as the scores option carries it (float32), so cross-server comparisons
    here order exactly as the resolver's do."""
    return float(np.float32(score))


def select(scores: np.ndarray, policy: str) -> list[int]:
    """A2X's child selection over scored children, best first (ties by position)."""
    order = np.lexsort((np.arange(len(scores)), -scores)).tolist()
    if policy == "get_one" or len(scores) == 1:
        return order[:1]
    lo, hi = float(scores.min()), float(scores.max())
    norm = (scores - lo) / (hi - lo) if hi > lo else np.ones_like(scores)
    if policy == "get_important":
        return [i for i in order if norm[i] >= 0.7][:3]
    if policy == "get_all":
        return [i for i in order if norm[i] >= 0.4]
    raise ValueError(f"unknown policy {policy!r}; choose one of {POLICIES}")


def _score_merge(results: dict[str, list[str]], scores: dict[str, list[float]],
                 order: list[str], k: int) -> list[str]:
    """The leaves' lists merged by score, best first (ties: walk order, then rank)."""
    items = [(-scores.get(z, [0.0] * len(results[z]))[r], o, r, tid)
             for o, z in enumerate(order) for r, tid in enumerate(results[z])]
    merged: list[str] = []
    seen: set[str] = set()
    for *_, tid in sorted(items):
        cid = canonical_id(tid)
        if cid not in seen:
            seen.add(cid)
            merged.append(cid)
    return merged if k == 0 else merged[:k]


def _merge(results: dict[str, list[str]], order: list[str], k: int) -> list[str]:
    """Round-robin over leaves in walk order, de-duplicated, cut to K (the resolver's)."""
    merged: list[str] = []
    seen: set[str] = set()
    lists = [results[z] for z in order]
    for i in range(max((len(x) for x in lists), default=0)):
        for lst in lists:
            if i < len(lst):
                cid = canonical_id(lst[i])
                if cid not in seen:
                    seen.add(cid)
                    merged.append(cid)
    return merged if k == 0 else merged[:k]


# ------------------------------------------------------------------------ flat and GRAIL


class FlatIndex:
    """One index per service over every tool offering it."""

    def __init__(self, ns: Namespace, scorer: Scorer) -> None:
        self.by_service: dict[str, tuple[Ranker, list[str], int]] = {}
        groups: dict[str, list[str]] = defaultdict(list)
        for tid in sorted(ns.tools):
            if canonical_id(tid) == tid:  # multi-parent copies are the same tool
                groups[ns.tools[tid].service].append(tid)
        for service, ids in groups.items():
            texts = [f"{ns.tools[t].name} {ns.tools[t].description}" for t in ids]
            self.by_service[service] = (ranker(scorer.index(ids, texts)), ids,
                                        sum(approx_tokens(x) for x in texts))

    def rank(self, intent: str, service: str, k: int) -> Ranked:
        rank, ids, tok = self.by_service.get(service, (None, [], 0))
        chosen = rank(intent, k) if rank is not None else []
        return Ranked([ids[i] for i in chosen], len(ids), len(ids), tok + approx_tokens(intent))


SYNONYMS_PER_TAG = 3  # embedding neighbours kept per tag word ...
SYNONYM_MIN_COSINE = 0.65  # ... if at least this close (MiniLM cosine of the bare words)


def pseudo_queries(train: Sequence[Row], limit: int) -> dict[str, list[str]]:
    """Per catalogue tool id, the texts of its first ``limit`` training queries (file
    order), the stand-in for the paper's LLM-written synthetic queries (eq. 1). Only the
    rows given are read: pass the training split, never the evaluated queries."""
    out: dict[str, list[str]] = defaultdict(list)
    for row in train:
        for tid in row["tool_ids"]:
            if len(out[tid]) < limit:
                out[tid].append(row["query"])
    return dict(out)


def mine_synonyms(tags: Sequence[str], vocabulary: Sequence[str], encoder: Callable,
                  per_tag: int = SYNONYMS_PER_TAG, min_cosine: float = SYNONYM_MIN_COSINE,
                  chunk: int = 512) -> dict[str, tuple[str, ...]]:
    """The synonym dictionary of GRAIL's tag index (§III-B1), mined offline: for every tag
    word its ``per_tag`` nearest other words of ``vocabulary`` by the sentence encoder's
    cosine, kept if ≥ ``min_cosine``. No WordNet here (nltk is not installed and its data
    would be a download), so the neighbours come from the embedding model that the dense
    path uses. Deterministic: sorted inputs, ties broken by vocabulary order."""
    tag_list = sorted(set(tags))
    vocab = sorted(set(vocabulary) | set(tag_list))
    if not tag_list or len(vocab) < 2:
        return {}
    pos = {w: i for i, w in enumerate(vocab)}
    vv = np.asarray(encoder(vocab), dtype=np.float32)
    vv /= np.maximum(np.linalg.norm(vv, axis=1, keepdims=True), 1e-12)
    out: dict[str, tuple[str, ...]] = {}
    m = min(per_tag + 1, len(vocab))
    for lo in range(0, len(tag_list), chunk):
        words = tag_list[lo:lo + chunk]
        rows = np.array([pos[w] for w in words])
        sims = vv[rows] @ vv.T
        sims[np.arange(len(words)), rows] = -np.inf  # a word is not its own synonym
        top = np.argpartition(-sims, m - 1, axis=1)[:, :m]
        for r, word in enumerate(words):
            cand = top[r][np.lexsort((top[r], -sims[r, top[r]]))][:per_tag]
            syn = tuple(vocab[j] for j in cand if sims[r, j] >= min_cosine)
            if syn:
                out[word] = syn
    return out


def _unit(m: np.ndarray) -> np.ndarray:
    return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)


class GrailIndex:
    """GRAIL (seed 002, §III): tag index, context index over pseudo-documents, intent index
    of example matrices; hybrid recall then MaxSim resonance re-ranking (module doc).

    ``categories`` maps a catalogue tool id to its category label path (the tool's tags
    with its name words); ``train`` are the training-split query rows the pseudo-documents
    and the synonym vocabulary are built from. Every part is built lazily, once, and shared
    by the variants that need it. Stand-ins for what the catalogue lacks (documented in
    docs/eval-reference.md and RESULTS.md): the SLM tag predictor is the query's own words
    that are tags (no model is trained); the usage examples of the intent index are the
    tool's name and description sentences (:func:`nodes.scoring.facets`).
    """

    def __init__(self, ns: Namespace, encoder: Callable,
                 categories: dict[str, str] | None = None,
                 train: Sequence[Row] = (), dense_top: int = GRAIL_DENSE_TOP,
                 min_candidates: int = 50) -> None:
        self.ns = ns
        self.encoder = encoder
        self.categories = categories or {}
        self.train = list(train)
        self.dense_top = dense_top
        self.min_candidates = min_candidates  # intersect reading: below this, all tools
        self.ids: dict[str, list[str]] = defaultdict(list)
        for tid in sorted(ns.tools):
            if canonical_id(tid) == tid:
                self.ids[ns.tools[tid].service].append(tid)
        self.tokens = {s: np.array([approx_tokens(self._text(t)) for t in ids])
                       for s, ids in self.ids.items()}
        self._context: dict[tuple[str, int], np.ndarray] = {}
        self._facets: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._mean: dict[str, np.ndarray] = {}
        self._tags: dict[tuple[str, str, bool], dict[str, set[int]]] = {}
        self._synonyms: dict[str, tuple[str, ...]] | None = None
        self._pseudo: dict[int, dict[str, list[str]]] = {}

    def _text(self, tid: str) -> str:
        t = self.ns.tools[tid]
        return f"{t.name} {t.description}"

    def tool_tags(self, tid: str, source: str) -> set[str]:
        """A tool's tags: its category path (``catalog``) or its zones' labels (``zone``),
        plus its name words."""
        t = self.ns.tools[tid]
        if source == "zone":
            labels = " ".join(z.split(".")[0] for z in self.ns.path(t.zone)[1:])
        else:
            labels = self.categories.get(canonical_id(tid), "")
        return set(tokenize(labels.replace("-", " ").replace("/", " ")) + tokenize(t.name))

    def synonyms(self) -> dict[str, tuple[str, ...]]:
        """Mined once over every tag word; neighbours from the tags and the words of the
        training queries (never the evaluated ones)."""
        if self._synonyms is None:
            tags = {w for ids in self.ids.values() for t in ids
                    for w in self.tool_tags(t, "catalog")}
            words = {w for row in self.train for w in tokenize(row["query"])}
            self._synonyms = mine_synonyms(sorted(tags), sorted(words | tags), self.encoder)
        return self._synonyms

    def tag_index(self, service: str, source: str, synonyms: bool) -> dict[str, set[int]]:
        key = (service, source, synonyms)
        if key not in self._tags:
            syn = self.synonyms() if synonyms else {}
            inverted: dict[str, set[int]] = defaultdict(set)
            for i, tid in enumerate(self.ids[service]):
                for tag in self.tool_tags(tid, source):
                    inverted[tag].add(i)
                    for alt in syn.get(tag, ()):  # a synonym of a tag selects the tool too
                        inverted[alt].add(i)
            self._tags[key] = dict(inverted)
        return self._tags[key]

    def pseudo_documents(self, service: str, pseudo: int) -> list[str]:
        """D'_i = name + description ⊕ up to ``pseudo`` training queries (eq. 1)."""
        if pseudo not in self._pseudo:
            self._pseudo[pseudo] = pseudo_queries(self.train, pseudo) if pseudo else {}
        extra = self._pseudo[pseudo]
        return [self._text(t) + "".join(f"\n{x}" for x in extra.get(canonical_id(t), []))
                for t in self.ids[service]]

    def context(self, service: str, pseudo: int) -> np.ndarray:
        """I_ctx: one unit vector per tool (its pseudo-document's embedding)."""
        if (service, pseudo) not in self._context:
            # the encoder returns unit vectors (as the dense scorer assumes)
            self._context[(service, pseudo)] = np.asarray(
                self.encoder(self.pseudo_documents(service, pseudo)), dtype=np.float32)
        return self._context[(service, pseudo)]

    def facets(self, service: str) -> tuple[np.ndarray, np.ndarray]:
        """I_int: the example vectors of every tool (rows) and their owners."""
        if service not in self._facets:
            pieces, owner = [], []
            for i, tid in enumerate(self.ids[service]):
                t = self.ns.tools[tid]
                for p in [t.name, *facets(t.description)]:
                    pieces.append(p)
                    owner.append(i)
            self._facets[service] = (self.encoder(pieces), np.asarray(owner))
        return self._facets[service]

    def mean_examples(self, service: str) -> np.ndarray:
        """Mean-pooled example vectors per tool, renormalised (the "w/o MaxSim" variant)."""
        if service not in self._mean:
            vecs, owner = self.facets(service)
            n = len(self.ids[service])
            sums = np.zeros((n, vecs.shape[1]), dtype=np.float64)
            np.add.at(sums, owner, vecs)
            self._mean[service] = _unit(sums).astype(np.float32)
        return self._mean[service]

    def sparse(self, intent: str, service: str, opts: GrailOptions) -> set[int]:
        """C_sparse: tools holding any of the query's predicted tags (OR logic)."""
        inverted = self.tag_index(service, opts.tag_source, opts.synonyms)
        cand: set[int] = set()
        for tag in set(tokenize(intent)):
            cand |= inverted.get(tag, set())
        return cand

    def candidates(self, intent: str, service: str, q: np.ndarray, opts: GrailOptions
                   ) -> tuple[np.ndarray, np.ndarray]:
        """(candidate set C, the tools the dense path scored), both sorted."""
        n = len(self.ids[service])
        ctx = self.context(service, opts.pseudo) @ q
        sparse = self.sparse(intent, service, opts) if opts.tags else set()
        if opts.recall == "intersect":  # dense top-50 within the tag candidates
            pool = (np.array(sorted(sparse)) if len(sparse) >= self.min_candidates
                    else np.arange(n))
            top = pool[np.lexsort((pool, -ctx[pool]))[: self.dense_top]]
            return np.sort(top), pool
        everyone = np.arange(n)
        dense = everyone[np.lexsort((everyone, -ctx))[: self.dense_top]]
        return np.array(sorted(sparse | set(dense.tolist()))), everyone

    def scores(self, service: str, q: np.ndarray, cand: np.ndarray, opts: GrailOptions
               ) -> np.ndarray:
        """S_final = α·(v_q·v_ctx) + (1 − α)·S_res over the candidates (eq. 4–5)."""
        ctx = self.context(service, opts.pseudo)[cand] @ q
        if opts.maxsim:
            vecs, owner = self.facets(service)
            mask = np.isin(owner, cand)
            best = np.full(len(self.ids[service]), -np.inf)
            np.maximum.at(best, owner[mask], vecs[mask] @ q)
            res = best[cand]
        else:
            res = self.mean_examples(service)[cand] @ q
        return opts.alpha * ctx + (1.0 - opts.alpha) * res

    def rank(self, intent: str, service: str, k: int, opts: GrailOptions = GRAIL_PAPER
             ) -> Ranked:
        ids = self.ids.get(service, [])
        if not ids:
            return Ranked([], 0, 0, 0)
        q = self.encoder([intent])[0]
        cand, scanned = self.candidates(intent, service, q, opts)
        final = self.scores(service, q, cand, opts)
        order = cand[np.lexsort((cand, -final))]
        chosen = order if k == 0 else order[:k]
        tokens = int(self.tokens[service][scanned].sum()) + approx_tokens(intent)
        return Ranked([ids[i] for i in chosen], len(scanned), len(scanned), tokens)


# ------------------------------------------------------------------------ evaluation


@dataclass
class EvalConfig:
    methods: tuple[str, ...] = DEFAULT_METHODS
    k: int = 10
    llm_url: str | None = None
    llm_model: str = "default"
    llm_key: str | None = None
    cache_dir: str | None = None


class Evaluator:
    """Runs methods over a namespace's queries; one tidy row per (method, query)."""

    def __init__(self, ns: Namespace, category: dict[str, str], config: EvalConfig,
                 encoder: Callable | None = None, train: Sequence[Row] = ()) -> None:
        self.ns = ns
        self.category = category  # catalogue id -> leaf category label path
        self.config = config
        self.train = list(train)  # training-split query rows (GRAIL's pseudo-documents)
        self._encoder = encoder
        self._scorers: dict[str, Scorer] = {}
        self._hier: dict[str, InProcessHierarchy] = {}
        self._flat: dict[str, FlatIndex] = {}
        self._grail: GrailIndex | None = None
        self.n_tools = sum(canonical_id(t) == t for t in ns.tools)  # copies are one tool
        self.zones_of: dict[str, set[str]] = defaultdict(set)
        for tid, tool in ns.tools.items():
            self.zones_of[canonical_id(tid)].add(tool.zone)

    @property
    def encoder(self) -> Callable:
        if self._encoder is None:
            self._encoder = (disk_cached_encoder(self.config.cache_dir) if self.config.cache_dir
                             else default_encoder())
        return self._encoder

    def scorer(self, name: str) -> Scorer:
        if name not in self._scorers:
            if name in ("dense", "maxsim"):
                self._scorers[name] = make_scorer(name, encoder=self.encoder)
            elif name == "llm":
                if not self.config.llm_url:
                    raise ValueError("the llm scorer needs --llm-url (an OpenAI-compatible "
                                     "endpoint)")
                self._scorers[name] = LLMScorer(
                    openai_transport(self.config.llm_url, self.config.llm_key),
                    model=self.config.llm_model, top=self.config.k)
            else:
                self._scorers[name] = make_scorer(name)
        return self._scorers[name]

    def hierarchy(self, scorer: str) -> InProcessHierarchy:
        if scorer not in self._hier:
            self._hier[scorer] = InProcessHierarchy(self.ns, self.scorer(scorer))
        return self._hier[scorer]

    def flat(self, scorer: str) -> FlatIndex:
        if scorer not in self._flat:
            self._flat[scorer] = FlatIndex(self.ns, self.scorer(scorer))
        return self._flat[scorer]

    def runner(self, method: str) -> Callable[[Query, int], Ranked | None]:
        """``run(query, k) -> Ranked`` for a method spec (``None`` = no ranking made)."""
        parts = method.split(":")
        kind = parts[0]
        if kind == "flat" and len(parts) == 2:
            flat = self.flat(parts[1])
            return lambda q, k: flat.rank(q.text, q.service, k)
        if kind == "tooldns" and len(parts) in (2, 3, 4):
            beam = int(parts[2]) if len(parts) >= 3 else 1
            merge = parts[3] if len(parts) == 4 else "rr"
            hier = self.hierarchy(parts[1])
            if merge == "global":
                return lambda q, k: hier.global_walk(q.text, q.service, k, beam)
            return lambda q, k: hier.walk(q.text, q.service, k, beam, merge=merge)
        if kind == "a2x" and len(parts) == 3 and parts[2] in POLICIES:
            hier = self.hierarchy(parts[1])
            return lambda q, k: hier.descend(q.text, q.service, k, parts[2])
        if kind in ("grail", "grail-intersect"):
            opts = grail_options(method)
            if self._grail is None:
                self._grail = GrailIndex(self.ns, self.encoder, self.category, self.train)
            grail = self._grail
            return lambda q, k: grail.rank(q.text, q.service, k, opts)
        if kind == "context" and len(parts) == 1:
            if self.config.llm_url:
                flat = self.flat("llm")
                return lambda q, k: flat.rank(q.text, q.service, k)
            counts: dict[str, tuple[int, int]] = defaultdict(lambda: (0, 0))
            for tid, tool in self.ns.tools.items():
                if canonical_id(tid) == tid:
                    n, tok = counts[tool.service]
                    counts[tool.service] = (n + 1, tok + approx_tokens(
                        f"{tool.name} {tool.description}"))

            def context(q: Query, k: int) -> Ranked:
                n, tok = counts[q.service]
                return Ranked([], n, n, tok + approx_tokens(q.text))

            return context
        raise ValueError(f"unknown method {method!r} (flat:S, context, "
                         f"tooldns:S[:B[:score|global]], a2x:S:POLICY, grail[:OPT…], "
                         f"grail-intersect)")

    def run(self, queries: Sequence[Query], progress: Callable[[str], None] | None = None,
            tick: Callable[[str, int, int], None] | None = None) -> pd.DataFrame:
        """Every method over every query; ``progress(method)`` as each starts and
        ``tick(method, done, total)`` after each query (progress bars)."""
        k = self.config.k
        rows = []
        pool = {s: sum(1 for t, tool in self.ns.tools.items()
                       if tool.service == s and canonical_id(t) == t)
                for s in {q.service for q in queries}}
        for method in self.config.methods:
            run = self.runner(method)
            if progress:
                progress(method)
            for i, q in enumerate(queries, 1):
                t0 = time.perf_counter()
                ranked = run(q, k)
                elapsed = time.perf_counter() - t0
                rows.append(self._row(method, q, ranked, elapsed, pool[q.service], k))
                if tick is not None:
                    tick(method, i, len(queries))
            if isinstance(self._encoder, CachedEncoder):
                save_encoder_cache(self._encoder)
        return pd.DataFrame(rows)

    def _row(self, method: str, q: Query, r: Ranked, elapsed: float, pool: int,
             k: int) -> dict:
        truth = {canonical_id(t) for t in q.truth}
        truth_cats = {self.category.get(t, "") for t in truth}
        got = r.tools
        ranked = method == "context" and not self.config.llm_url
        cats = [self.category.get(t, "") for t in got]
        rr = next((1.0 / (i + 1) for i, t in enumerate(got) if t in truth), 0.0)
        nan = float("nan")
        return {
            "method": method, "query": q.id, "service": q.service,
            "category": sorted(truth_cats)[0], "n_truth": len(truth),
            "hit1_cat": nan if ranked else float(bool(cats[:1]) and cats[0] in truth_cats),
            "hitk_cat": nan if ranked else float(any(c in truth_cats for c in cats[:k])),
            "hit1_tool": nan if ranked else float(bool(got) and got[0] in truth),
            "hitk_tool": nan if ranked else float(any(t in truth for t in got[:k])),
            "recall_k": nan if ranked else len(truth & set(got[:k])) / len(truth),
            "rr": nan if ranked else rr,
            "examined": r.examined, "tools_examined": r.tools_examined,
            "examined_frac": r.examined / pool if pool else nan,
            # the paper's search space counts against every tool N (seed 000, Fig. 8)
            "examined_frac_all": r.examined / self.n_tools if self.n_tools else nan,
            "tokens": r.tokens, "time_ms": elapsed * 1e3, "pool": pool,
        }


METRICS = ("hit1_cat", "hitk_cat", "hit1_tool", "hitk_tool", "recall_k", "rr", "examined",
           "examined_frac", "examined_frac_all", "tokens", "time_ms")


def summarise(df: pd.DataFrame, by: Sequence[str] = ("method",)) -> pd.DataFrame:
    """Mean of every metric per group (``rr`` mean = MRR), with the query count."""
    out = df.groupby(list(by), sort=False)[list(METRICS)].mean()
    out.insert(0, "queries", df.groupby(list(by), sort=False).size())
    return out.reset_index()


def markdown_table(summary: pd.DataFrame, k: int) -> str:
    """The method table as GitHub markdown (percentages for rates)."""
    head = (f"| method | queries | hit@1 cat | hit@{k} cat | hit@1 tool | hit@{k} tool | "
            f"recall@{k} | MRR | C(q) | C(q) % of pool | C(q) % of all | tokens/query | "
            f"ms/query |")
    lines = [head, "|" + "---|" * 13]

    def pct(x: float) -> str:
        return "—" if x != x else f"{100 * x:.1f}"

    for _, r in summary.iterrows():
        lines.append(
            f"| {r['method']} | {int(r['queries'])} | {pct(r['hit1_cat'])} | "
            f"{pct(r['hitk_cat'])} | {pct(r['hit1_tool'])} | {pct(r['hitk_tool'])} | "
            f"{pct(r['recall_k'])} | {'—' if r['rr'] != r['rr'] else f'{r.rr:.3f}'} | "
            f"{r['examined']:.0f} | {100 * r['examined_frac']:.2f} | "
            f"{100 * r['examined_frac_all']:.2f} | {r['tokens']:.0f} | "
            f"{r['time_ms']:.2f} |")
    return "\n".join(lines) + "\n"


def sample_queries(queries: Sequence[Query], n: int | None, seed: int) -> list[Query]:
    """A seeded sample of ``n`` queries (all when ``n`` is None or larger)."""
    if n is None or n >= len(queries):
        return list(queries)
    rng = np.random.default_rng(seed)
    idx = np.sort(rng.choice(len(queries), size=n, replace=False))
    return [queries[i] for i in idx]


def category_map(rows: Sequence[Row]) -> dict[str, str]:
    return {r["id"]: category_of(r) for r in rows}


def write_outputs(out: Path, per_query: pd.DataFrame, k: int, meta: dict,
                  plots: bool = True, origin: dict | None = None) -> dict[str, pd.DataFrame]:
    """per_query.csv, summary.csv, by_category.csv, summary.json (ending with ``origin``,
    the provenance block, when given), table.md (+ plots)."""
    out.mkdir(parents=True, exist_ok=True)
    summary = summarise(per_query)
    by_cat = summarise(per_query, ("method", "category"))
    frames = {"per_query.csv": per_query, "summary.csv": summary, "by_category.csv": by_cat}
    for name, frame in frames.items():
        atomic_write(out / name, lambda tmp, f=frame: f.to_csv(tmp, index=False))
    doc = {**meta, "k": k, "methods": json.loads(summary.to_json(orient="records"))}
    if origin is not None:
        doc[PROVENANCE] = origin
    atomic_write(out / "summary.json",
                 lambda tmp: Path(tmp).write_text(json.dumps(doc, indent=2), encoding="utf-8"))
    table = markdown_table(summary, k)
    atomic_write(out / "table.md", lambda tmp: Path(tmp).write_text(table, encoding="utf-8"))
    if plots:
        from analysis.plots.core import eval_title
        from analysis.plots.retrieval import plot_all

        plot_all(per_query, out, eval_title(meta))  # titled with the evaluation and seed
    return {"summary": summary, "by_category": by_cat}


def load_dataset(spec: EvalScenario) -> tuple[list[Row], list[Row]]:
    """(tools, evaluated queries): the test split when ``dataset.test_fraction`` is set."""
    rows, _, queries = load_split(spec)
    return rows, queries


def load_split(spec: EvalScenario) -> tuple[list[Row], list[Row], list[Row]]:
    """(tools, training queries, evaluated queries). Without ``dataset.test_fraction``
    every query is evaluated and the training list is empty."""
    ds = spec.dataset
    if ds.source == "synthetic":
        rows, queries = synthetic_catalog(ds.tools, ds.branching, ds.depth, spec.seed,
                                          n_queries=ds.sample or 500)
    elif ds.source == "tooldns-release":
        if not ds.catalog:
            raise ValueError("dataset.catalog: the ToolDNS release file is needed")
        rows, queries = load_tooldns_release(ds.catalog)
    else:
        if not ds.catalog:
            raise ValueError("dataset.catalog: a catalogue JSONL is needed")
        rows = load_catalog(ds.catalog, ds.limit, ds.protocols)
        qpath = ds.queries or str(Path(ds.catalog).parent / "queries.jsonl")
        queries = load_queries(qpath, [r["id"] for r in rows]) if Path(qpath).exists() else []
    train: list[Row] = []
    if ds.test_fraction is not None:
        cats = category_map(rows)
        train, queries = stratified_split(queries, lambda q: cats[q["tool_ids"][0]],
                                          ds.test_fraction, spec.seed)
    return rows, train, queries


def build_namespace(spec: EvalScenario, rows: Sequence[Row], queries: Sequence[Row],
                    encoder: Callable | None = None) -> tuple[Namespace, dict]:
    ns = taxonomy_namespace(spec.taxonomy, rows, queries, spec.seed,
                            f"{spec.name}:{spec.taxonomy.kind}", encoder)
    return ns, balance_stats(ns)


def taxonomy_namespace(tx: TaxonomySpec, rows: Sequence[Row], queries: Sequence[Row],
                       seed: int = 0, origin: str = "taxonomy",
                       encoder: Callable | None = None) -> Namespace:
    """The namespace a taxonomy spec builds over catalogue rows (also used by network
    scenarios, ``namespace.taxonomy``): the tree, then representatives and centroids."""
    if tx.kind == "categories":
        tax = from_categories(rows, tx.min_size)
    else:
        tax = build_taxonomy(rows, TaxonomyConfig(
            branching=tx.branching, depth=tx.depth, leaf_size=tx.leaf_size,
            min_size=tx.min_size, multi_parent=tx.multi_parent, vectors=tx.vectors,
            summary_terms=tx.summary_terms, summary_examples=tx.summary_examples,
            seed=seed), encoder=encoder)
    ns = tax.namespace(rows, queries, origin=origin)
    if tx.representatives:
        rep_encoder = None
        if tx.representative_vectors == "dense":
            rep_encoder = encoder or default_encoder()
        add_representatives(ns, tx.representatives, rep_encoder, seed)
    if tx.centroids:
        add_centroids(ns, encoder or default_encoder())
    return ns


def run_eval(spec: EvalScenario, out: Path | None = None,
             progress: Callable[[str], None] | None = None,
             tick: Callable[[str, int, int], None] | None = None) -> dict:
    """Load, build the tree, run every method, write the outputs; returns the summary.
    ``summary.json`` ends with a ``provenance`` block (sim.provenance)."""
    started = utc_now()
    rows, train, queries = load_split(spec)
    if not rows:
        raise ValueError("the dataset has no tools")
    config = EvalConfig(methods=spec.methods, k=spec.k, llm_url=spec.llm.url,
                        llm_model=spec.llm.model, cache_dir=spec.cache_dir)
    ev_encoder = disk_cached_encoder(spec.cache_dir) if spec.cache_dir else None
    ns, balance = build_namespace(spec, rows, queries, ev_encoder)
    qs = sample_queries(ns.queries, spec.dataset.sample, spec.seed)
    if not qs:
        raise ValueError("no query has a ground-truth tool in the catalogue")
    # a training query whose text is also a held-out one (the catalogue's queries repeat
    # 21 texts) stays out of GRAIL's pseudo-documents: no evaluated text reaches an index
    held_out = {q["query"].strip().lower() for q in queries}
    train = [r for r in train if r["query"].strip().lower() not in held_out]
    ev = Evaluator(ns, category_map(rows), config, ev_encoder, train)
    for method in spec.methods:  # reject bad method names before anything runs
        check_method(method)
    df = ev.run(qs, progress, tick)
    out = out or Path(spec.out or f"results/{spec.name}")
    meta = {"name": spec.name, "tools": len(rows), "queries_evaluated": len(qs),
            "queries_available": len(ns.queries), "namespace": ns.origin, "balance": balance,
            "spec": spec.model_dump(mode="json")}
    if any(m.startswith("grail") for m in spec.methods):  # what the pseudo-documents read
        meta["grail_train_queries"] = len(train)
    frames = write_outputs(out, df, spec.k, meta, spec.plots, provenance(started))
    return {"out": out, "balance": balance, **frames}
