"""Retrieval-quality evaluation: discovery methods compared on the same queries.

Methods (``--methods``; ``SCORER`` is one of ``bm25 tfidf dense maxsim llm llm-router``,
the LLM ones through one :class:`sim.retrieval.llm.LLMClient`), each built by
:data:`BUILDERS` from its name:

* ``flat:SCORER`` — one index over every tool of the query's service (ToolLLM-style;
  :mod:`sim.retrieval.flat`).
* ``flat-log:dense`` — the same over each tool's pseudo-document (description plus up to
  ``log_per_tool`` training queries naming it): flat retrieval that may also use the log,
  the reference for learned routing (:mod:`topologies.learned`).
* ``context`` — all descriptions in one prompt (OpenClaw-style context injection): its
  token cost always, its accuracy only when an LLM endpoint is configured.
* ``tooldns:SCORER[:B[:score|global]]`` and ``a2x:SCORER:POLICY`` — the ToolDNS walk and
  A2X's descent over the evaluated tree (:mod:`sim.retrieval.hierarchy`).
* ``grail[:OPT…]`` and ``grail-intersect`` — GRAIL and its ablations
  (:mod:`sim.retrieval.grail`).
* ``tiered[:OPT…]`` — seed 003's expert → system → vector tiers, merged by priority, with
  per-tier times (:mod:`sim.retrieval.tiered`); ``flat:dense-adapter`` — flat dense with a
  query adapter fitted on the training split (:mod:`sim.retrieval.adapter`).

Metrics per query (:meth:`Evaluator.run`, one tidy row per method and query): hit@1 /
hit@K by category (a returned tool in the ground truth's leaf category of the catalogue,
the paper's definition) and by exact tool, recall@K, reciprocal rank, C(q) = items scored
(children + tools; also as a share of the query's service pool and of all tools, the
paper's N), tokens an LLM scorer would read (≈ chars/4 of everything scored), scoring time,
seed 003's discovery accuracy (Eq. 4, ``disc_acc``) and a method's own columns
(:attr:`Ranked.extra`).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pandas as pd

from analysis.files import atomic_write
from nodes.llmrouter import LLMRouter
from nodes.scoring import (
    CachedEncoder,
    Encoder,
    LLMScorer,
    Scorer,
    approx_tokens,
    default_encoder,
    make_scorer,
)
from sim.evalspec import DEFAULT_METHODS, POLICIES, grail_options, walk_settings
from sim.retrieval.adapter import AdapterIndex
from sim.retrieval.flat import FlatIndex
from sim.retrieval.grail import GrailIndex
from sim.retrieval.hierarchy import InProcessHierarchy
from sim.retrieval.llm import LLMClient
from sim.retrieval.ranked import Ranked
from sim.retrieval.tiered import TieredIndex
from sim.tierspec import tiered_options
from topologies.datasets import Row, canonical_id
from topologies.encoders import disk_cached_encoder, save_encoder_cache
from topologies.learned import pseudo_vectors
from topologies.namespace import Namespace, Query

#: a method ready to run: ``run(query, k)``
Runner = Callable[[Query, int], Ranked]


@dataclass
class EvalConfig:
    """What an evaluation runs: its methods, K, and the LLM endpoint and embedding cache."""

    methods: tuple[str, ...] = DEFAULT_METHODS
    k: int = 10
    llm_url: str | None = None
    llm_model: str = "default"
    llm_key: str | None = None  # else read from the environment (TOOLDNS_LLM_KEY)
    llm_timeout: float = 60.0  # seconds per attempt
    llm_retries: int = 2  # further attempts after a 429, 5xx or connection failure
    llm_client: LLMClient | None = None  # a ready client instead (shared with labelling)
    cache_dir: str | None = None
    log_per_tool: int = 10  # training queries per tool in flat-log's pseudo-documents


class Evaluator:
    """Runs methods over a namespace's queries; one tidy row per (method, query)."""

    def __init__(self, ns: Namespace, category: dict[str, str], config: EvalConfig,
                 encoder: Encoder | None = None, train: Sequence[Row] = ()) -> None:
        self.ns = ns
        self.category = category  # catalogue id -> leaf category label path
        self.config = config
        self.train = list(train)  # training-split query rows (GRAIL's pseudo-documents)
        self._encoder = encoder
        self._scorers: dict[str, Scorer] = {}
        self._llm: LLMClient | None = None
        self._hier: dict[str, InProcessHierarchy] = {}
        self._flat: dict[str, FlatIndex] = {}
        self._grail: GrailIndex | None = None
        self._tiered: TieredIndex | None = None  # seed 003's tiers (sim.retrieval.tiered)
        self._adapter: AdapterIndex | None = None  # flat:dense-adapter
        self.n_tools = sum(canonical_id(t) == t for t in ns.tools)  # copies are one tool
        self.zones_of: dict[str, set[str]] = defaultdict(set)
        for tid, tool in ns.tools.items():
            self.zones_of[canonical_id(tid)].add(tool.zone)

    @property
    def encoder(self) -> Encoder:
        if self._encoder is None:
            self._encoder = (disk_cached_encoder(self.config.cache_dir) if self.config.cache_dir
                             else default_encoder())
        return self._encoder

    def llm_client(self) -> LLMClient:
        """The one client every LLM step of this evaluation uses (docs/llm.md)."""
        if self._llm is None:
            c = self.config
            if c.llm_client is not None:
                self._llm = c.llm_client
                return self._llm
            if not c.llm_url:
                raise ValueError("the llm scorers need --llm-url (an OpenAI-compatible "
                                 "endpoint; docs/llm.md)")
            self._llm = LLMClient(c.llm_url, c.llm_model, c.llm_key, c.llm_timeout,
                                  c.llm_retries)
        return self._llm

    def scorer(self, name: str) -> Scorer:
        if name not in self._scorers:
            if name in ("dense", "maxsim"):
                self._scorers[name] = make_scorer(name, encoder=self.encoder)
            elif name in ("llm", "llm-router"):
                client = self.llm_client()
                self._scorers[name] = (
                    LLMScorer(client, model=client.model, top=self.config.k) if name == "llm"
                    else LLMRouter(client, model=client.model, top=self.config.k))
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

    def flat_log(self, scorer: str) -> FlatIndex:
        """Flat retrieval over the tools' pseudo-documents (description + training queries,
        as learned routing builds them)."""
        key = f"{scorer}+log"
        if key not in self._flat:
            ids, vecs = pseudo_vectors(self.ns, self.encoder, self.train,
                                       self.config.log_per_tool)
            self._flat[key] = FlatIndex(self.ns, self.scorer(scorer),
                                        dict(zip(ids, vecs, strict=True)))
        return self._flat[key]

    def grail(self) -> GrailIndex:
        """The GRAIL index, built once and shared by every GRAIL variant."""
        if self._grail is None:
            self._grail = GrailIndex(self.ns, self.encoder, self.category, self.train)
        return self._grail

    def tiered(self) -> TieredIndex:
        """Seed 003's three tiers, built once (expert tools from the training split)."""
        if self._tiered is None:
            self._tiered = TieredIndex(self.ns, self.encoder, self.train)
        return self._tiered

    def adapter(self) -> AdapterIndex:
        """Flat dense retrieval with a query adapter fitted on the training split."""
        if self._adapter is None:
            self._adapter = AdapterIndex(self.ns, self.encoder, self.train, k=self.config.k)
        return self._adapter

    def runner(self, method: str) -> Runner:
        """``run(query, k) -> Ranked`` for a method spec."""
        parts = method.split(":")
        build = BUILDERS.get(parts[0])
        run = build(self, method, parts) if build is not None else None
        if run is None:
            raise ValueError(f"unknown method {method!r} (flat:S, flat-log:dense, context, "
                             f"tooldns:S[:B[:score|global]], a2x:S:POLICY, grail[:OPT…], "
                             f"grail-intersect, tiered[:OPT…])")
        return run

    def run(self, queries: Sequence[Query], progress: Callable[[str], None] | None = None,
            tick: Callable[[str, int, int], None] | None = None,
            methods: Sequence[str] | None = None,
            finished: Callable[[str, pd.DataFrame], None] | None = None) -> pd.DataFrame:
        """``methods`` (default: every method of the config) over every query;
        ``progress(method)`` as each starts, ``tick(method, done, total)`` after each query
        (progress bars) and ``finished(method, rows)`` when a method is done (kept, so an
        interrupted evaluation resumes after it)."""
        k = self.config.k
        rows: list[dict] = []
        pool = {s: sum(1 for t, tool in self.ns.tools.items()
                       if tool.service == s and canonical_id(t) == t)
                for s in {q.service for q in queries}}
        for method in self.config.methods if methods is None else methods:
            run = self.runner(method)
            if progress:
                progress(method)
            first = len(rows)
            for i, q in enumerate(queries, 1):
                t0 = time.perf_counter()
                ranked = run(q, k)
                elapsed = time.perf_counter() - t0
                rows.append(self._row(method, q, ranked, elapsed, pool[q.service], k))
                if tick is not None:
                    tick(method, i, len(queries))
            if isinstance(self._encoder, CachedEncoder):
                save_encoder_cache(self._encoder, atomic_write)
            if finished is not None:
                finished(method, pd.DataFrame(rows[first:]))
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
            "returned": " ".join(got[:k]),  # query-by-query comparisons (over the wire)
            # seed 003's Eq. 4: |discovered ∩ used| / |discovered|, the ground truth standing
            # in for the tools the agent then uses
            "disc_acc": (nan if ranked or not got[:k]
                         else len(truth & set(got[:k])) / len(got[:k])),
            **r.extra,  # method-specific columns (e.g. the tiered method's per-tier times)
        }



# ------------------------------------------------------------------------ method builders
# each takes the evaluator, the method spec and its ``:``-separated parts, and returns the
# method's runner, or None when the parts do not fit (an unknown method)


def _flat(ev: Evaluator, method: str, parts: list[str]) -> Runner | None:
    if len(parts) != 2:
        return None
    if parts[1] == "dense-adapter":  # a least-squares query adapter (sim.retrieval.adapter)
        adapter = ev.adapter()
        return lambda q, k: adapter.rank(q.text, q.service, k)
    flat = ev.flat(parts[1])
    return lambda q, k: flat.rank(q.text, q.service, k)


def _flat_log(ev: Evaluator, method: str, parts: list[str]) -> Runner | None:
    if len(parts) != 2 or parts[1] != "dense":
        return None
    flat = ev.flat_log(parts[1])
    return lambda q, k: flat.rank(q.text, q.service, k)


def _tooldns(ev: Evaluator, method: str, parts: list[str]) -> Runner | None:
    """``tooldns:S[:B[:WAY]]``: the resolver's walk, WAY a search or merge policy it names
    (:func:`sim.evalspec.walk_settings`)."""
    if len(parts) not in (2, 3, 4):
        return None
    beam = int(parts[2]) if len(parts) >= 3 else 1
    way = walk_settings(parts[3] if len(parts) == 4 else "auto")
    hier = ev.hierarchy(parts[1])
    return lambda q, k: hier.walk(q.text, q.service, k, beam, **way)


def _a2x(ev: Evaluator, method: str, parts: list[str]) -> Runner | None:
    if len(parts) != 3 or parts[2] not in POLICIES:
        return None
    hier = ev.hierarchy(parts[1])
    return lambda q, k: hier.walk(q.text, q.service, k, search=f"a2x-{parts[2]}")


def _grail(ev: Evaluator, method: str, parts: list[str]) -> Runner | None:
    opts = grail_options(method)
    grail = ev.grail()
    return lambda q, k: grail.rank(q.text, q.service, k, opts)


def _tiered(ev: Evaluator, method: str, parts: list[str]) -> Runner | None:
    opts = tiered_options(method)
    tiers = ev.tiered()
    return lambda q, k: tiers.rank(q.text, q.service, k, opts)


def _context(ev: Evaluator, method: str, parts: list[str]) -> Runner | None:
    """Context injection: an LLM ranks all descriptions at once when an endpoint is set;
    else only its cost (every tool of the service read) is recorded."""
    if len(parts) != 1:
        return None
    if ev.config.llm_url:
        flat = ev.flat("llm")
        return lambda q, k: flat.rank(q.text, q.service, k)
    counts: dict[str, tuple[int, int]] = defaultdict(lambda: (0, 0))
    for tid, tool in ev.ns.tools.items():
        if canonical_id(tid) == tid:
            n, tok = counts[tool.service]
            counts[tool.service] = (n + 1, tok + approx_tokens(
                f"{tool.name} {tool.description}"))

    def context(q: Query, k: int) -> Ranked:
        n, tok = counts[q.service]
        return Ranked([], n, n, tok + approx_tokens(q.text))

    return context


#: method kind (the spec up to its first ``:``) -> builder
BUILDERS: dict[str, Callable[[Evaluator, str, list[str]], Runner | None]] = {
    "flat": _flat, "flat-log": _flat_log, "tooldns": _tooldns, "a2x": _a2x, "grail": _grail,
    "grail-intersect": _grail, "context": _context, "tiered": _tiered,
}
