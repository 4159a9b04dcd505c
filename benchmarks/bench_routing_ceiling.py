"""Routing ceiling: can any partition tree match flat dense retrieval at ≤ 5 % of the pool?

    PYTHONPATH=. python3 benchmarks/bench_routing_ceiling.py [--sample 1000] [--seed 0]
        [--out results/bench-routing-ceiling] [--quick]

An upper-bound study of *partition routing*, independent of the DNS code: it uses only the
evaluator's data (``../shared/data/tools``, the same seeded query sample) and its dense
scorer (all-MiniLM-L6-v2 unit vectors, cosine), and asks whether any hierarchy in which
every tool sits in leaves and a parent routes a query to children by the cosine of the query
with a child's routing vector can reach flat dense retrieval's recall@10 within 2 points
while scoring at most 5 % of the tools of the query's service pool.

Trees are grown by recursive spherical k-means (seeded; a cluster of at most ``branching``
tools stays a leaf), for (branching, depth) in {(16,2), (24,2), (32,2), (8,3), (64,1),
(128,1)}, in two kinds:

* ``shared`` — one tree over all tools of every service;
* ``per-service`` — one tree per service over that service's pool.

For a query of service *s*, the routing vector of a node is the normalised mean of the unit
vectors of its subtree's tools of service *s*; a node without a tool of *s* is not eligible
(neither scored nor counted). Optionally (``spill``) each leaf tool is also placed in its
second-nearest sibling leaf (multi-parent placement; the leaf routing vectors then include
the copies). Two searches:

* ``beam`` — level-wise global beam B: at each level keep the best B eligible children over
  the whole frontier, then score the reached leaves' pool tools;
* ``best-first`` — priority search with a budget (FLANN-style): pop the best node; an inner
  node costs its eligible children, a leaf costs its (not yet scored) pool tools; stop once
  the budget (a % of the pool) is spent, so the last pop may overshoot it.

Cost C(q) = routing vectors scored + pool tools scored in the reached leaves (each tool once),
also given as a % of the query's pool. For every configuration: recall@10 (|truth ∩ top10| /
|truth|), ANN recall (overlap of the returned top 10 with flat dense's top 10), mean C(q) in %
and in items. Flat dense (every pool tool scored) is the reference.

Writes into ``--out`` (atomically): ``ceiling.csv`` (one row per configuration, flat first)
and ``frontier.png`` (recall@10 vs % of pool examined, one line per tree and search); prints
the flat figure, the best recall at ≤ 5 % of the pool, the smallest % of the pool at which
any configuration comes within 2 points of flat, and a markdown table of the best recall at
≤ 3 / 5 / 10 / 20 % per tree kind, placement and search. ``--quick`` runs 200 queries and a
few configurations. Embeddings come from (and new ones go to) ``results/.cache``.
"""

from __future__ import annotations

import argparse
import csv
import heapq
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from analysis.files import atomic_write
from sim.evalspec import EvalScenario
from sim.retrieval.dataset import load_dataset, sample_queries
from sim.retrieval.run import build_namespace
from topologies.datasets import canonical_id
from topologies.encoders import disk_cached_encoder, save_encoder_cache

ROOT = Path(__file__).resolve().parents[1]
CATALOG = ROOT.parent / "shared" / "data" / "tools" / "catalog.jsonl"
CACHE = ROOT / "results" / ".cache"

K = 10  # recall@K
KINDS = ("shared", "per-service")
SHAPES = ((16, 2), (24, 2), (32, 2), (8, 3), (64, 1), (128, 1))  # (branching, depth)
BEAMS = (2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32)
BUDGETS = (2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30)  # % of the query's pool
QUICK_SHAPES = ((16, 2), (64, 1))
QUICK_BEAMS = (4, 8, 16)
QUICK_BUDGETS = (3, 5, 10)
TARGET_PCT = 5.0  # the cost the question allows (% of pool)
GAP = 0.02  # "within 2 points" of flat recall@10
THRESHOLDS = (3.0, 5.0, 10.0, 20.0)  # columns of the summary table (% of pool)
KMEANS_ITERS = 20


# ----------------------------------------------------------------------------- data


@dataclass(frozen=True)
class Data:
    """Tool and query vectors, services and ground truth (as tool indices)."""

    X: np.ndarray  # (tools, dim) unit vectors of "name description"
    svc: np.ndarray  # service of each tool
    Q: np.ndarray  # (queries, dim) unit vectors
    qsvc: np.ndarray  # service of each query
    truth: list[list[int]]  # per query: indices of the relevant tools (-1: not in catalogue)


def load_data(sample: int, seed: int) -> Data:
    """The evaluator's catalogue, namespace and seeded query sample, embedded as it does."""
    spec = EvalScenario.model_validate({
        "name": "ceiling", "seed": seed,
        "dataset": {"source": "catalog", "catalog": str(CATALOG), "sample": sample},
        "taxonomy": {"kind": "categories"}, "cache_dir": str(CACHE)})
    rows, queries = load_dataset(spec)
    ns, _ = build_namespace(spec, rows, queries)
    qs = sample_queries(ns.queries, sample, seed)
    enc = disk_cached_encoder(CACHE)
    ids = sorted(t for t in ns.tools if canonical_id(t) == t)
    index = {t: i for i, t in enumerate(ids)}
    X = enc([f"{ns.tools[t].name} {ns.tools[t].description}" for t in ids])
    Q = enc([q.text for q in qs])
    save_encoder_cache(enc, atomic_write)  # in case new queries were embedded
    return Data(
        X=np.ascontiguousarray(X, dtype=np.float32),
        svc=np.array([ns.tools[t].service for t in ids]),
        Q=np.ascontiguousarray(Q, dtype=np.float32),
        qsvc=np.array([q.service for q in qs]),
        truth=[[index.get(canonical_id(t), -1) for t in q.truth] for q in qs])


def unit(v: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return v / np.where(n > 0, n, 1.0)


# ----------------------------------------------------------------------------- trees


def spherical_kmeans(V: np.ndarray, k: int, rng: np.random.Generator,
                     iters: int = KMEANS_ITERS) -> np.ndarray:
    """Cluster labels of the unit rows of ``V``: k-means on the sphere (cosine assignment,
    normalised-mean centroids), initialised on k distinct random rows. An empty cluster
    keeps its centroid; labels may therefore skip values."""
    C = V[rng.choice(len(V), size=k, replace=False)].copy()
    labels = np.full(len(V), -1)
    for _ in range(iters):
        new = np.argmax(V @ C.T, axis=1)
        if np.array_equal(new, labels):
            break
        labels = new
        counts = np.bincount(labels, minlength=k)
        full = counts > 0
        order = np.argsort(labels, kind="stable")
        starts = (np.cumsum(counts) - counts)[full]
        C[full] = unit(np.add.reduceat(V[order], starts, axis=0))
    return labels


@dataclass
class Tree:
    """A partition tree over tool indices; node 0 is the root."""

    branching: int
    depth: int
    spill: bool = False
    children: list[list[int]] = field(default_factory=list)
    members: list[np.ndarray] = field(default_factory=list)  # tools in the subtree
    centroid: list[np.ndarray] = field(default_factory=list)  # of the clustered members

    def is_leaf(self, node: int) -> bool:
        return not self.children[node]


def build_tree(X: np.ndarray, tools: np.ndarray, branching: int, depth: int,
               rng: np.random.Generator) -> Tree:
    """Recursive spherical k-means: split every node of more than ``branching`` tools
    into up to ``branching`` children, ``depth`` levels deep."""
    tree = Tree(branching, depth)

    def grow(members: np.ndarray, level: int) -> int:
        node = len(tree.children)
        tree.children.append([])
        tree.members.append(members)
        tree.centroid.append(unit(X[members].mean(axis=0)))
        if level < depth and len(members) > branching:
            labels = spherical_kmeans(X[members], branching, rng)
            tree.children[node] = [grow(members[labels == j], level + 1)
                                   for j in np.unique(labels)]
        return node

    grow(np.asarray(tools), 0)
    return tree


def with_spill(tree: Tree, X: np.ndarray) -> Tree:
    """The same tree with every leaf tool also placed in its second-nearest sibling leaf
    (by the leaves' cluster centroids). Inner nodes keep their member sets: the copies stay
    under the same parent."""
    members = list(tree.members)
    for kids in tree.children:
        leaves = [c for c in kids if tree.is_leaf(c)]
        if len(leaves) < 2:
            continue
        C = np.stack([tree.centroid[c] for c in leaves])
        extra: list[list[np.ndarray]] = [[] for _ in leaves]
        for i, leaf in enumerate(leaves):
            m = tree.members[leaf]
            S = X[m] @ C.T
            S[:, i] = -np.inf
            second = np.argmax(S, axis=1)
            for j in np.unique(second):
                extra[j].append(m[second == j])
        for j, leaf in enumerate(leaves):
            members[leaf] = np.concatenate([tree.members[leaf], *extra[j]])
    return Tree(tree.branching, tree.depth, True, tree.children, members, tree.centroid)


@dataclass
class View:
    """A tree as a query of one service sees it."""

    R: np.ndarray  # (nodes, dim) routing vectors; zero rows for ineligible nodes
    kids: list[np.ndarray]  # eligible children of each node
    leaf: np.ndarray  # bool per node
    leaf_pool: list[np.ndarray]  # pool positions of each leaf's tools of the service
    spill: bool

    @property
    def n_leaves(self) -> int:
        return sum(1 for i, p in enumerate(self.leaf_pool) if self.leaf[i] and len(p))


def service_view(tree: Tree, data: Data, service: str, pos: np.ndarray) -> View:
    """Routing vectors and eligibility for ``service`` (``pos``: tool → pool position)."""
    n = len(tree.children)
    R = np.zeros((n, data.X.shape[1]), dtype=np.float32)
    count = np.zeros(n, dtype=int)
    pool_of: list[np.ndarray] = []
    for node, m in enumerate(tree.members):
        mine = np.unique(m[data.svc[m] == service])
        count[node] = len(mine)
        if len(mine):
            R[node] = unit(data.X[mine].sum(axis=0))
        pool_of.append(pos[mine])
    kids = [np.array([c for c in ch if count[c]], dtype=int) for ch in tree.children]
    leaf = np.array([not ch for ch in tree.children])
    empty = np.zeros(0, dtype=int)
    leaf_pool = [p if leaf[i] else empty for i, p in enumerate(pool_of)]
    return View(R, kids, leaf, leaf_pool, tree.spill)


# ----------------------------------------------------------------------------- searches


def top_k(scores: np.ndarray, cand: np.ndarray, k: int = K) -> np.ndarray:
    """The (unordered) ``k`` best of the candidate positions."""
    if len(cand) <= k:
        return cand
    return cand[np.argpartition(-scores[cand], k - 1)[:k]]


def beam_search(view: View, route: np.ndarray, beam: int) -> tuple[np.ndarray, int]:
    """Level-wise global beam: pool positions reached and routing vectors scored."""
    frontier = np.zeros(1, dtype=int)
    reached: list[np.ndarray] = []
    routed = 0
    while frontier.size:
        at_leaf = view.leaf[frontier]
        reached.extend(view.leaf_pool[n] for n in frontier[at_leaf])
        inner = frontier[~at_leaf]
        if not inner.size:
            break
        cand = np.concatenate([view.kids[n] for n in inner])
        routed += cand.size
        frontier = cand if cand.size <= beam else top_k(route, cand, beam)
    found = np.concatenate(reached) if reached else np.zeros(0, dtype=int)
    return (np.unique(found) if view.spill else found), routed


@dataclass
class Trace:
    """The pops of one best-first search, in order."""

    before: np.ndarray  # cost spent before each pop
    routed: np.ndarray  # routing vectors scored after each pop
    tools: np.ndarray  # pool tools scored after each pop
    found: list[np.ndarray]  # new pool positions of each pop


def best_first(view: View, route: np.ndarray, pool_size: int, limit: float) -> Trace:
    """FLANN-style priority search until ``limit`` items are spent. A smaller budget's
    search is a prefix of this one: stop before the first pop with ``before >= budget``."""
    score = route.tolist()
    leaf = view.leaf.tolist()
    seen = np.zeros(pool_size, dtype=bool) if view.spill else None
    empty = np.zeros(0, dtype=int)
    heap: list[tuple[float, int]] = [(0.0, 0)]
    before: list[int] = []
    routed: list[int] = []
    tools: list[int] = []
    found: list[np.ndarray] = []
    n_routed = n_tools = 0
    while heap and n_routed + n_tools < limit:
        _, node = heapq.heappop(heap)
        before.append(n_routed + n_tools)
        if leaf[node]:
            new = view.leaf_pool[node]
            if seen is not None:
                new = new[~seen[new]]
                seen[new] = True
            n_tools += len(new)
            found.append(new)
        else:
            kids = view.kids[node].tolist()
            n_routed += len(kids)
            for c in kids:
                heapq.heappush(heap, (-score[c], c))
            found.append(empty)
        routed.append(n_routed)
        tools.append(n_tools)
    return Trace(np.array(before), np.array(routed), np.array(tools), found)


# ----------------------------------------------------------------------------- metrics


@dataclass
class Stats:
    recall: list[float] = field(default_factory=list)
    ann: list[float] = field(default_factory=list)
    routed: list[int] = field(default_factory=list)
    tools: list[int] = field(default_factory=list)
    pct: list[float] = field(default_factory=list)
    leaves: list[int] = field(default_factory=list)

    def add(self, top: np.ndarray, truth: Sequence[int], flat: set[int], routed: int,
            tools: int, pool_size: int, leaves: int) -> None:
        got = set(top.tolist())
        self.recall.append(len(got.intersection(truth)) / len(truth))
        self.ann.append(len(got & flat) / max(len(flat), 1))
        self.routed.append(routed)
        self.tools.append(tools)
        self.pct.append(100.0 * (routed + tools) / pool_size)
        self.leaves.append(leaves)


@dataclass(frozen=True)
class Config:
    tree: str  # flat | shared | per-service
    branching: int
    depth: int
    spill: bool
    strategy: str  # flat | beam | best-first
    param: float  # beam width or budget (% of pool)

    @property
    def label(self) -> str:
        if self.tree == "flat":
            return "flat dense"
        unit_ = "B=" if self.strategy == "beam" else "budget "
        tail = "" if self.strategy == "beam" else " %"
        return (f"{self.tree} {self.branching}x{self.depth}{' +spill' if self.spill else ''}"
                f" {self.strategy} {unit_}{self.param:g}{tail}")


def row(cfg: Config, st: Stats) -> dict:
    routed, tools = np.mean(st.routed), np.mean(st.tools)
    return {
        "tree": cfg.tree, "branching": cfg.branching, "depth": cfg.depth,
        "spill": int(cfg.spill), "strategy": cfg.strategy, "param": cfg.param,
        "leaves": round(float(np.mean(st.leaves)), 1), "queries": len(st.recall),
        "recall_at_10": round(float(np.mean(st.recall)), 4),
        "ann_recall_at_10": round(float(np.mean(st.ann)), 4),
        "cost_pct": round(float(np.mean(st.pct)), 3),
        "cost_pct_p95": round(float(np.percentile(st.pct, 95)), 3),
        "cost_items": round(float(routed + tools), 1),
        "routing_items": round(float(routed), 1), "tool_items": round(float(tools), 1),
        "label": cfg.label,
    }


# ----------------------------------------------------------------------------- the study


def build_trees(data: Data, services: Iterable[str], shapes: Sequence[tuple[int, int]],
                seed: int) -> dict[tuple[str, int, int, bool], dict[str, Tree]]:
    """Every tree, keyed by (kind, branching, depth, spill), then by service (the shared
    tree under every service). The spill variant is the same partition plus copies."""
    everyone = np.arange(len(data.X))
    trees: dict[tuple[str, int, int, bool], dict[str, Tree]] = {}
    for b, d in shapes:
        t0 = time.perf_counter()
        rng = np.random.default_rng([seed, b, d])
        shared = build_tree(data.X, everyone, b, d, rng)
        per: dict[str, Tree] = {}
        for i, s in enumerate(sorted(services)):
            rng = np.random.default_rng([seed, b, d, i + 1])
            per[s] = build_tree(data.X, np.flatnonzero(data.svc == s), b, d, rng)
        spilled = with_spill(shared, data.X)
        trees["shared", b, d, False] = dict.fromkeys(services, shared)
        trees["shared", b, d, True] = dict.fromkeys(services, spilled)
        trees["per-service", b, d, False] = per
        trees["per-service", b, d, True] = {s: with_spill(t, data.X) for s, t in per.items()}
        print(f"  trees {b}x{d}: {len(shared.children)} nodes shared "
              f"({time.perf_counter() - t0:.1f} s)", flush=True)
    return trees


def run(data: Data, shapes: Sequence[tuple[int, int]], beams: Sequence[int],
        budgets: Sequence[float], seed: int) -> list[dict]:
    services = sorted(set(data.qsvc.tolist()))
    trees = build_trees(data, services, shapes, seed)
    flat_cfg = Config("flat", 0, 0, False, "flat", 100.0)
    stats: dict[Config, Stats] = {flat_cfg: Stats()}
    for s in services:
        pool = np.flatnonzero(data.svc == s)
        P = len(pool)
        pos = np.full(len(data.X), -1)
        pos[pool] = np.arange(P)
        qi = np.flatnonzero(data.qsvc == s)
        scores = data.Q[qi] @ data.X[pool].T  # (queries, pool): the scorer of every search
        truth = [[int(pos[t]) if t >= 0 else -1 for t in data.truth[i]] for i in qi]
        everything = np.arange(P)
        flat_top = [top_k(row_, everything) for row_ in scores]
        flat = [set(top.tolist()) for top in flat_top]
        for j in range(len(qi)):
            stats[flat_cfg].add(flat_top[j], truth[j], flat[j], 0, P, P, 1)
        for (kind, b, d, spill), by_service in trees.items():
            view = service_view(by_service[s], data, s, pos)
            route = data.Q[qi] @ view.R.T
            n_leaves = view.n_leaves
            limit = max(budgets, default=0) / 100.0 * P
            for j in range(len(qi)):
                for B in beams:
                    cfg = Config(kind, b, d, spill, "beam", B)
                    found, routed = beam_search(view, route[j], B)
                    stats.setdefault(cfg, Stats()).add(
                        top_k(scores[j], found), truth[j], flat[j], routed, len(found), P,
                        n_leaves)
                if not budgets:
                    continue
                trace = best_first(view, route[j], P, limit)
                for pct in budgets:
                    n = int(np.searchsorted(trace.before, pct / 100.0 * P, side="left"))
                    found = (np.concatenate(trace.found[:n]) if n
                             else np.zeros(0, dtype=int))
                    routed = int(trace.routed[n - 1]) if n else 0
                    cfg = Config(kind, b, d, spill, "best-first", pct)
                    stats.setdefault(cfg, Stats()).add(
                        top_k(scores[j], found), truth[j], flat[j], routed, len(found), P,
                        n_leaves)
        print(f"  service {s}: {len(qi)} queries, pool {P}", flush=True)
    return [row(cfg, st) for cfg, st in stats.items()]


# ----------------------------------------------------------------------------- outputs


def write_csv(path: Path, rows: list[dict]) -> None:
    def write(tmp: str) -> None:
        with open(tmp, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)

    atomic_write(path, write)


def plot_frontier(path: Path, rows: list[dict], flat: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    strategies = ("beam", "best-first")
    fig, axes = plt.subplots(2, 2, figsize=(13, 9), sharex=True, sharey=True)
    shapes = sorted({(r["branching"], r["depth"]) for r in rows if r["tree"] != "flat"})
    colours = dict(zip(shapes, plt.get_cmap("tab10").colors, strict=False))
    for ax, (strategy, kind) in zip(axes.flat, [(s, k) for s in strategies for k in KINDS],
                                    strict=True):
        for (b, d), colour in colours.items():
            for spill in (0, 1):
                pts = sorted((r["cost_pct"], r["recall_at_10"]) for r in rows
                             if (r["tree"], r["strategy"], r["branching"], r["depth"],
                                 r["spill"]) == (kind, strategy, b, d, spill))
                if pts:
                    x, y = zip(*pts, strict=True)
                    ax.plot(x, y, color=colour, ls="--" if spill else "-", marker=".",
                            label=f"{b}x{d}{' +spill' if spill else ''}")
        ax.axhline(flat, color="black", lw=1.2, label=f"flat dense ({flat:.3f})")
        ax.axhline(flat - GAP, color="black", lw=1, ls=":", label="flat − 2 points")
        ax.axvline(TARGET_PCT, color="red", lw=1, ls=":", label=f"{TARGET_PCT:g} % of pool")
        ax.set_xscale("log")
        ax.set_title(f"{kind} trees, {strategy}")
        ax.grid(alpha=0.3, which="both")
    for ax in axes[-1]:
        ax.set_xlabel("mean C(q), % of the query's service pool (log)")
    for ax in axes[:, 0]:
        ax.set_ylabel("recall@10")
    axes[0, 1].legend(fontsize=8, loc="lower right", ncol=2)
    fig.suptitle("Partition routing: recall@10 vs share of the pool examined")
    fig.tight_layout()

    def write(tmp: str) -> None:
        fig.savefig(tmp, format="png", dpi=120)

    atomic_write(path, write)
    plt.close(fig)


def best_within(rows: Iterable[dict], pct: float) -> dict | None:
    ok = [r for r in rows if r["tree"] != "flat" and r["cost_pct"] <= pct]
    return max(ok, key=lambda r: (r["recall_at_10"], -r["cost_pct"]), default=None)


def summary(rows: list[dict], elapsed: float) -> str:
    flat = next(r for r in rows if r["tree"] == "flat")["recall_at_10"]
    trees = [r for r in rows if r["tree"] != "flat"]
    lines = [f"flat dense recall@10: {flat:.4f} ({trees[0]['queries'] if trees else 0} "
             f"queries per configuration, {len(trees)} configurations, {elapsed:.0f} s)"]
    best = best_within(trees, TARGET_PCT)
    lines.append(f"best recall@10 at ≤ {TARGET_PCT:g} % of the pool: " + (
        f"{best['recall_at_10']:.4f} (ANN recall {best['ann_recall_at_10']:.3f}, "
        f"{best['cost_pct']:.2f} % = {best['cost_items']:.0f} items) — {best['label']}"
        if best else "none"))
    reach = [r for r in trees if r["recall_at_10"] >= flat - GAP - 1e-12]
    if reach:
        first = min(reach, key=lambda r: (r["cost_pct"], -r["recall_at_10"]))
        lines.append(f"flat − 2 points ({flat - GAP:.4f}) first reached at "
                     f"{first['cost_pct']:.2f} % of the pool: {first['recall_at_10']:.4f} "
                     f"— {first['label']}")
    else:
        top = max(trees, key=lambda r: r["recall_at_10"]) if trees else None
        widest = max((r["cost_pct"] for r in trees), default=0.0)
        lines.append(f"flat − 2 points ({flat - GAP:.4f}) not reached up to {widest:.1f} % "
                     "of the pool" + (f" (best {top['recall_at_10']:.4f} at "
                                      f"{top['cost_pct']:.2f} %: {top['label']})" if top else ""))
    lines += ["", "Best recall@10 at a mean C(q) of at most … of the pool "
              f"(flat dense {flat:.3f}; cell: recall, tree shape, B or budget, mean C(q) %)", ""]
    head = "| tree | placement | search | " + " | ".join(f"≤ {t:g} %" for t in THRESHOLDS)
    lines += [head + " |", "|" + "---|" * (3 + len(THRESHOLDS))]
    for kind in KINDS:
        for spill in (0, 1):
            for strategy in ("beam", "best-first"):
                group = [r for r in trees if (r["tree"], r["spill"], r["strategy"])
                         == (kind, spill, strategy)]
                if not group:
                    continue
                cells = []
                for t in THRESHOLDS:
                    b = best_within(group, t)
                    cells.append("—" if b is None else
                                 f"{b['recall_at_10']:.3f} ({b['branching']}x{b['depth']}, "
                                 f"{'B=' if strategy == 'beam' else ''}{b['param']:g}"
                                 f"{' %' if strategy == 'best-first' else ''}, "
                                 f"{b['cost_pct']:.1f} %)")
                lines.append(f"| {kind} | {'spill' if spill else 'single'} | {strategy} | "
                             + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sample", type=int, default=1000, help="queries (seeded sample)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "bench-routing-ceiling")
    ap.add_argument("--quick", action="store_true",
                    help="200 queries, shapes 16x2 and 64x1, three beams and budgets")
    args = ap.parse_args(argv)
    if not CATALOG.exists():
        raise SystemExit(f"{CATALOG}: the shared catalogue is needed")
    sample = 200 if args.quick else args.sample
    shapes, beams, budgets = ((QUICK_SHAPES, QUICK_BEAMS, QUICK_BUDGETS) if args.quick
                              else (SHAPES, BEAMS, BUDGETS))
    t0 = time.perf_counter()
    data = load_data(sample, args.seed)
    print(f"data: {len(data.X)} tools, {len(data.Q)} queries "
          f"({time.perf_counter() - t0:.1f} s)", flush=True)
    rows = run(data, shapes, beams, budgets, args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    write_csv(args.out / "ceiling.csv", rows)
    flat = next(r for r in rows if r["tree"] == "flat")["recall_at_10"]
    plot_frontier(args.out / "frontier.png", rows, flat)
    print()
    print(summary(rows, time.perf_counter() - t0))
    print(f"\nwrote {args.out / 'ceiling.csv'} and {args.out / 'frontier.png'}")


if __name__ == "__main__":
    main()
