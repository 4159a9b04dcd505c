"""Taxonomy construction: a namespace tree of a target branching factor and depth.

:func:`build_taxonomy` clusters a flat catalogue recursively (A2X-style, seed 001, done with
vectors instead of an LLM): a node with more than ``leaf_size`` tools and depth left is
split into ``min(branching, ⌈n / leaf_size⌉)`` clusters by k-means over TF-IDF (LSA) or
sentence-embedding vectors, then rebalanced by a capacity-capped greedy assignment
(no cluster above ``slack · n / k``); clusters under ``min_size`` are merged into their
nearest sibling. Each node is labelled with a DNS-safe label and summarised by its most
distinctive terms (class TF-IDF against its parent), optionally followed by the
descriptions of its most central tools (``summary_examples``). With ``multi_parent`` > 0
a tool whose second-best top-level cluster is nearly as close (similarity ≥ ratio × best)
is placed in both (A2X's cross-domain assignment).

:func:`from_categories` builds the tree from the catalogue's own categories, optionally
merging categories smaller than ``min_size`` (into ``other`` under their parent).
:func:`balance_stats` reports the shape of any namespace.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from sklearn.cluster import KMeans
from sklearn.decomposition import TruncatedSVD
from sklearn.feature_extraction.text import TfidfVectorizer

from nodes.scoring import tokenize
from topologies.datasets import Row, catalog_paths, namespace_from_paths
from topologies.labels import zone_label
from topologies.namespace import ROOT, Namespace

RESERVED = {"general", "other", "tools", "root-servers"}


@dataclass(frozen=True)
class TaxonomyConfig:
    """Shape and method of a built taxonomy."""

    branching: int = 8
    depth: int = 2
    leaf_size: int = 40  # A2X cap: a node this small is a leaf
    min_size: int = 3  # clusters below this merge into their nearest sibling
    slack: float = 1.5  # balance: no cluster above slack · n / k
    multi_parent: float = 0.0  # 0 = off; else similarity ratio for a second top-level parent
    vectors: Literal["tfidf", "dense"] = "tfidf"
    lsa_dims: int = 128
    summary_terms: int = 10
    summary_examples: int = 0  # also quote the descriptions of the m most central tools
    seed: int = 0


@dataclass
class Taxonomy:
    """Label paths per tool id, summaries per label path, and the build's config."""

    paths: dict[str, list[list[str]]]
    summaries: dict[tuple[str, ...], str] = field(default_factory=dict)
    config: TaxonomyConfig | None = None

    def namespace(self, rows: Sequence[Row], queries: Sequence[Row] = (),
                  origin: str = "taxonomy") -> Namespace:
        return namespace_from_paths(rows, self.paths, queries, self.summaries, origin)


def _text(row: Row) -> str:
    return f"{row['name']} {row['description']}"


def _normalise(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms == 0, 1.0, norms)


def balanced_assign(sims: np.ndarray, capacity: int) -> np.ndarray:
    """Each row to a column, best similarity first, no column above ``capacity``."""
    n, k = sims.shape
    if capacity * k < n:
        raise ValueError("capacity too small for the number of items")
    order = np.lexsort((np.tile(np.arange(k), n), np.repeat(np.arange(n), k), -sims.ravel()))
    out = np.full(n, -1)
    load = np.zeros(k, dtype=int)
    left = n
    for flat in order:
        i, j = divmod(int(flat), k)
        if out[i] < 0 and load[j] < capacity:
            out[i] = j
            load[j] += 1
            left -= 1
            if left == 0:
                break
    return out


class _Builder:
    def __init__(self, rows: Sequence[Row], config: TaxonomyConfig,
                 encoder: Callable[[Sequence[str]], np.ndarray] | None) -> None:
        self.cfg = config
        texts = [_text(r) for r in rows]
        self.texts = texts
        self.tfidf = TfidfVectorizer(tokenizer=tokenize, lowercase=False, token_pattern=None,
                                     sublinear_tf=True, min_df=2 if len(rows) > 50 else 1)
        self.terms_matrix = self.tfidf.fit_transform(texts).tocsr()
        self.vocab = np.array(self.tfidf.get_feature_names_out())
        if config.vectors == "dense":
            if encoder is None:
                from nodes.scoring import default_encoder

                encoder = default_encoder()
            self.vectors = _normalise(np.asarray(encoder(texts), dtype=float))
        else:
            dims = min(config.lsa_dims, self.terms_matrix.shape[1] - 1, len(rows) - 1)
            if dims >= 2:
                svd = TruncatedSVD(n_components=dims, random_state=config.seed)
                self.vectors = _normalise(svd.fit_transform(self.terms_matrix))
            else:
                self.vectors = _normalise(self.terms_matrix.toarray())
        self.paths: dict[int, list[list[str]]] = defaultdict(list)
        self.summaries: dict[tuple[str, ...], str] = {}

    def distinctive(self, members: np.ndarray, parent: np.ndarray, n: int) -> list[str]:
        mean_c = np.asarray(self.terms_matrix[members].mean(axis=0)).ravel()
        mean_p = np.asarray(self.terms_matrix[parent].mean(axis=0)).ravel()
        score = mean_c - mean_p if len(parent) > len(members) else mean_c
        top = np.lexsort((self.vocab, -score))[: n * 3]
        return [str(self.vocab[i]) for i in top if score[i] > 0][:n] or \
            [str(self.vocab[i]) for i in np.argsort(-mean_c, kind="stable")[:n]]

    def split(self, members: np.ndarray, depth: int) -> list[np.ndarray]:
        cfg = self.cfg
        n = len(members)
        k = min(cfg.branching, math.ceil(n / cfg.leaf_size))
        if k < 2 or depth >= cfg.depth:
            return []
        x = self.vectors[members]
        if len(np.unique(x.round(6), axis=0)) < k:
            return []
        km = KMeans(n_clusters=k, n_init=3, random_state=cfg.seed).fit(x)
        centroids = _normalise(km.cluster_centers_)
        capacity = max(math.ceil(cfg.slack * n / k), math.ceil(n / k))
        assign = balanced_assign(x @ centroids.T, capacity)
        for _ in range(3):  # refine centroids on the balanced assignment
            centroids = _normalise(np.stack([x[assign == j].mean(axis=0) if (assign == j).any()
                                             else centroids[j] for j in range(k)]))
            assign = balanced_assign(x @ centroids.T, capacity)
        sims = x @ centroids.T
        sizes = np.bincount(assign, minlength=k)
        alive = [j for j in range(k) if sizes[j] >= cfg.min_size] or [int(np.argmax(sizes))]
        for j in range(k):  # merge tiny clusters into the nearest surviving sibling
            if j not in alive:
                moved = assign == j
                best = np.array(alive)[np.argmax(sims[moved][:, alive], axis=1)]
                assign[moved] = best
        groups = [members[assign == j] for j in alive]
        if cfg.multi_parent > 0 and depth == 0 and len(alive) > 1:
            s = sims[:, alive]
            order = np.argsort(-s, axis=1, kind="stable")
            first = s[np.arange(n), order[:, 0]]
            second = s[np.arange(n), order[:, 1]]
            extra = (second > 0) & (second >= cfg.multi_parent * first)
            for g in range(len(alive)):
                add = members[extra & (order[:, 1] == g) & (assign != alive[g])]
                groups[g] = np.concatenate([groups[g], add])
        return [g for g in groups if len(g)]

    def build(self, members: np.ndarray, prefix: tuple[str, ...], depth: int) -> None:
        groups = self.split(members, depth)
        if not groups:
            for i in members:
                self.paths[int(i)].append(list(prefix))
            return
        used: set[str] = set()
        for group in sorted(groups, key=lambda g: (-len(g), int(g.min()))):
            terms = self.distinctive(group, members, self.cfg.summary_terms)
            label = next((zone_label(t) for t in terms
                          if zone_label(t) not in used and zone_label(t) not in RESERVED), None)
            if label is None:
                label = f"c{len(used) + 1}"
            used.add(label)
            path = (*prefix, label)
            summary = " ".join(dict.fromkeys([label.replace("-", " "), *terms]))
            if self.cfg.summary_examples:
                x = self.vectors[group]
                central = group[np.argsort(-(x @ x.mean(axis=0)), kind="stable")]
                quotes = [self.texts[i][:160] for i in central[: self.cfg.summary_examples]]
                summary += ". " + "; ".join(quotes)
            self.summaries[path] = summary
            self.build(group, path, depth + 1)


def build_taxonomy(rows: Sequence[Row], config: TaxonomyConfig | None = None,
                   encoder: Callable[[Sequence[str]], np.ndarray] | None = None) -> Taxonomy:
    """Cluster ``rows`` into a tree (see the module docstring). Deterministic per seed."""
    config = config or TaxonomyConfig()
    if config.branching < 2 or config.depth < 1 or config.leaf_size < 1:
        raise ValueError("branching >= 2, depth >= 1 and leaf_size >= 1 are required")
    if not rows:
        return Taxonomy({}, {}, config)
    builder = _Builder(rows, config, encoder)
    builder.build(np.arange(len(rows)), (), 0)
    paths: dict[str, list[list[str]]] = {}
    for i, row in enumerate(rows):
        found = builder.paths[i]
        if any(not p for p in found):  # the whole catalogue fits one leaf
            found = [["all"]]
        paths[row["id"]] = found
    return Taxonomy(paths, builder.summaries, config)


def add_representatives(ns: Namespace, count: int,
                        encoder: Callable[[Sequence[str]], np.ndarray] | None = None,
                        seed: int = 0) -> Namespace:
    """Give every zone below ``tools.`` up to ``count`` representative tools for routing.

    The representatives are the tools nearest the centroids of a k-means (k = ``count``)
    over the embeddings (``encoder``; TF-IDF/LSA when None) of every tool in the zone's
    subtree, as ``name description`` texts; a parent then scores a child by its best
    representative (:func:`nodes.authoritative.zonestate.child_index`). Data the parent holds about
    its child, like the summary. Deterministic per seed; modifies and returns ``ns``."""
    if count < 1:
        return ns
    ids = sorted(ns.tools)
    texts = [f"{ns.tools[t].name} {ns.tools[t].description}" for t in ids]
    if encoder is not None:
        vectors = _normalise(np.asarray(encoder(texts), dtype=float))
    else:
        m = TfidfVectorizer(tokenizer=tokenize, lowercase=False, token_pattern=None,
                            sublinear_tf=True).fit_transform(texts)
        dims = min(128, m.shape[1] - 1, len(ids) - 1)
        vectors = _normalise(TruncatedSVD(n_components=dims, random_state=seed)
                             .fit_transform(m) if dims >= 2 else m.toarray())
    row = {t: i for i, t in enumerate(ids)}
    below: dict[str, list[int]] = defaultdict(list)
    for tid, tool in ns.tools.items():
        for z in ns.path(tool.zone)[1:]:
            below[z].append(row[tid])
    for zone, members in below.items():
        idx = np.array(sorted(set(members)))
        x = vectors[idx]
        k = min(count, len(np.unique(x.round(6), axis=0)))
        if k <= 1:
            picks = [int(np.argmax(x @ x.mean(axis=0)))]
        else:
            km = KMeans(n_clusters=k, n_init=1, random_state=seed).fit(x)
            centroids = _normalise(km.cluster_centers_)
            picks = list(dict.fromkeys(int(i) for i in np.argmax(x @ centroids.T, axis=0)))
        ns.zones[zone].representatives = [texts[idx[i]] for i in picks]
    return ns


def add_centroids(ns: Namespace, encoder: Callable[[Sequence[str]], np.ndarray],
                  tool_vectors: tuple[list[str], np.ndarray] | None = None) -> Namespace:
    """Give every zone below ``tools.`` one routing vector per service offered below it:
    the normalised mean of the sentence embeddings (``name description``, as leaves score
    them) of the subtree's tools of that service — or of ``tool_vectors`` (sorted tool ids
    and one unit vector each; learned routing's pseudo-documents,
    :func:`topologies.learned.pseudo_vectors`) when given.

    A parent holding its children's centroids routes a query of service *s* by cosine
    with their *s* centroids (IVF-style; :func:`nodes.authoritative.zonestate.child_index`). Like a
    summary, it is data the child registers with its parent. Modifies and returns ``ns``."""
    if tool_vectors is None:
        ids = sorted(ns.tools)
        vectors = _normalise(np.asarray(encoder(
            [f"{ns.tools[t].name} {ns.tools[t].description}" for t in ids]), dtype=float))
    else:
        ids, vectors = tool_vectors
    sums: dict[tuple[str, str], np.ndarray] = {}
    for i, tid in enumerate(ids):
        tool = ns.tools[tid]
        for z in ns.path(tool.zone)[1:]:
            key = (z, tool.service)
            sums[key] = sums[key] + vectors[i] if key in sums else vectors[i].copy()
    for (zone, service), total in sorted(sums.items()):
        unit = total / (np.linalg.norm(total) or 1.0)
        ns.zones[zone].centroids[service] = tuple(float(x) for x in unit.astype(np.float32))
    return ns


def from_categories(rows: Sequence[Row], min_size: int = 1) -> Taxonomy:
    """The catalogue's own (category, subcategory) tree; leaves under ``min_size`` tools
    are merged into ``other`` under their parent (top-level ones into ``other``)."""
    paths = catalog_paths(rows)
    if min_size > 1:
        for _ in range(2):
            sizes = Counter(tuple(p[0]) for p in paths.values())
            for tid, [p] in list(paths.items()):
                if sizes[tuple(p)] < min_size:
                    paths[tid] = [[*p[:-1], "other"] if len(p) > 1 else ["other"]]
    return Taxonomy(paths, {}, None)


def balance_stats(ns: Namespace) -> dict[str, float]:
    """Shape of a tree: leaves, depths, branching, leaf sizes, Gini and entropy balance."""
    leaves = ns.leaves()
    sizes = np.array([len(ns.zones[z].tools) for z in leaves], dtype=float)
    internal = [n for z, n in ns.zones.items() if n.children and z != ROOT]
    branching = np.array([len(n.children) for n in internal], dtype=float)
    depths = np.array([ns.zones[z].depth for z in leaves], dtype=float)
    total = sizes.sum()
    srt = np.sort(sizes)
    gini = float((2 * np.arange(1, len(srt) + 1) - len(srt) - 1) @ srt / (len(srt) * total)) \
        if total else 0.0
    p = sizes[sizes > 0] / total if total else np.array([])
    entropy = float(-(p * np.log(p)).sum() / math.log(len(sizes))) if len(sizes) > 1 else 1.0
    canonical = {t.split("~", 1)[0] for t in ns.tools}
    return {
        "tools": len(canonical),
        "placements": len(ns.tools),
        "zones": len(ns.zones) - 1,
        "leaves": len(leaves),
        "depth_max": float(depths.max()) if len(depths) else 0.0,
        "depth_mean_per_tool": float((depths * sizes).sum() / total) if total else 0.0,
        "branching_mean": float(branching.mean()) if len(branching) else 0.0,
        "branching_max": float(branching.max()) if len(branching) else 0.0,
        "leaf_min": float(sizes.min()) if len(sizes) else 0.0,
        "leaf_median": float(np.median(sizes)) if len(sizes) else 0.0,
        "leaf_mean": float(sizes.mean()) if len(sizes) else 0.0,
        "leaf_max": float(sizes.max()) if len(sizes) else 0.0,
        "leaf_cv": float(sizes.std() / sizes.mean()) if len(sizes) and sizes.mean() else 0.0,
        "leaf_gini": gini,
        "leaf_entropy": entropy,
    }
