"""GRAIL (seed 002, §III, Algorithm 1) as published, and its ablations.

A tag index (each tool's category path and name words, expanded by a synonym dictionary
mined offline as embedding neighbours of the tag words among the tags and the training
queries' words), a context index of pseudo-documents (name + description ⊕ up to 10 of the
tool's *training-split* queries, standing in for the paper's LLM-written ones), an intent
index of example matrices (name and description sentences: the catalogue has no usage
examples); candidates C = tools holding any query word as a tag ∪ the dense top-50 on the
context index; score α·cos(q, ctx) + (1 − α)·max cos(q, examples), α = 0.5 (the paper gives
none). No SLM: the predicted tags are the query's own words that are tags.

Ablations ``grail:OPT[:OPT…]``: ``no-maxsim`` (mean-pooled examples), ``no-tags`` (dense
recall only, the paper's "w/o SLM"), ``no-pseudo``, ``no-synonyms``, ``intersect`` (dense
top-50 within the tag candidates), ``alpha=X``, ``pseudo=N``; ``grail-intersect`` is the
testbed's earlier reading (tags = the evaluated tree's zone labels, dense top-50 within
them — all tools if fewer than 50 match —, no synonyms, no pseudo-documents);
``sparse-only`` is the paper's SLM-Sort baseline (the tag candidates alone, in a random
order seeded by the query), ``sparse-count`` the same ranked by tags matched. C(q) = the
candidates the dense path scored (the whole pool for the union). Pseudo-documents read only
``dataset.test_fraction``'s training split (none without it); a training query whose text
is also held out is left out. ``docs/grail.md`` maps the paper onto the testbed.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from nodes.scoring import Encoder, approx_tokens, facets, tokenize
from sim.evalspec import GRAIL_DENSE_TOP, GRAIL_PAPER, GrailOptions
from sim.retrieval.ranked import Ranked
from topologies.datasets import Row, canonical_id
from topologies.namespace import Namespace

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


def mine_synonyms(tags: Sequence[str], vocabulary: Sequence[str], encoder: Encoder,
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
    docs/eval-reference.md and HISTORY.md): the SLM tag predictor is the query's own words
    that are tags (no model is trained); the usage examples of the intent index are the
    tool's name and description sentences (:func:`nodes.scoring.facets`).
    """

    def __init__(self, ns: Namespace, encoder: Encoder,
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

    def sparse_counts(self, intent: str, service: str, opts: GrailOptions) -> dict[int, int]:
        """Per tool of C_sparse, how many of the query's predicted tags select it (its
        sparse score)."""
        inverted = self.tag_index(service, opts.tag_source, opts.synonyms)
        counts: dict[int, int] = defaultdict(int)
        for tag in set(tokenize(intent)):
            for i in inverted.get(tag, ()):
                counts[i] += 1
        return dict(counts)

    def sparse_rank(self, intent: str, service: str, k: int, opts: GrailOptions) -> Ranked:
        """The sparse path alone (``sparse-only``, the paper's SLM-Sort: the tag candidates
        in random order, seeded by the query text; ``sparse-count``: by tag count, ties by
        id). No embedding is computed; C(q) = the candidates."""
        ids = self.ids[service]
        counts = self.sparse_counts(intent, service, opts)
        cand = np.array(sorted(counts), dtype=int)
        if opts.sparse_only == "count":
            score = np.array([counts[i] for i in cand])
            order = cand[np.lexsort((cand, -score))]
        else:
            seed = int.from_bytes(hashlib.sha1(intent.encode("utf-8")).digest()[:8], "big")
            order = np.random.default_rng(seed).permutation(cand)
        chosen = order if k == 0 else order[:k]
        tokens = int(self.tokens[service][cand].sum()) if len(cand) else 0
        return Ranked([ids[i] for i in chosen], len(cand), len(cand),
                      tokens + approx_tokens(intent))

    def rank(self, intent: str, service: str, k: int, opts: GrailOptions = GRAIL_PAPER
             ) -> Ranked:
        ids = self.ids.get(service, [])
        if not ids:
            return Ranked([], 0, 0, 0)
        if opts.sparse_only:
            return self.sparse_rank(intent, service, k, opts)
        q = self.encoder([intent])[0]
        cand, scanned = self.candidates(intent, service, q, opts)
        final = self.scores(service, q, cand, opts)
        order = cand[np.lexsort((cand, -final))]
        chosen = order if k == 0 else order[:k]
        tokens = int(self.tokens[service][scanned].sum()) + approx_tokens(intent)
        return Ranked([ids[i] for i in chosen], len(scanned), len(scanned), tokens)

