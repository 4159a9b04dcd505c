"""Evaluation files (``scenarios/eval/*.yaml``): the typed models and their loader.

Kept apart from :mod:`sim.retrieval.evaluator` (which imports the scorers, scikit-learn and pandas)
so that validating a file, ``tooldns schema`` and a network scenario's ``namespace.taxonomy``
do not pay for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypedDict

from pydantic import Field, ValidationError, field_validator, model_validator

from sim.spec import Seed, Spec
from sim.yamlfile import read_yaml

DEFAULT_METHODS = (
    "flat:bm25", "flat:tfidf", "flat:dense", "context",
    "tooldns:bm25", "tooldns:bm25:3", "tooldns:tfidf", "tooldns:dense", "tooldns:dense:3",
    "a2x:bm25:get_one", "a2x:bm25:get_important", "a2x:bm25:get_all",
    "a2x:dense:get_one", "a2x:dense:get_important", "a2x:dense:get_all",
    "grail",
)
SCORERS = ("bm25", "tfidf", "dense", "maxsim", "llm", "llm-router")
POLICIES = ("get_one", "get_important", "get_all")

# ------------------------------------------------------------------ GRAIL variants (seed 002)

GRAIL_DENSE_TOP = 50  # the paper's Algorithm 1: I_ctx.search(v_q, top_k=50)
GRAIL_ALPHA = 0.5  # the paper gives no value for α (eq. 5); an even split of the two scores
GRAIL_PSEUDO_QUERIES = 10  # training queries appended per tool's pseudo-document


@dataclass(frozen=True)
class GrailOptions:
    """One GRAIL variant (method ``grail[:OPT…]``; ``grail-intersect`` = the old reading).

    ``recall`` — ``union`` (the paper: C = C_sparse ∪ C_dense) or ``intersect`` (the
    testbed's earlier reading: the dense top-50 *within* the tag candidates, all tools when
    fewer than 50 match); ``tags`` — the sparse path on (``no-tags`` = the paper's "w/o
    SLM"); ``tag_source`` — ``catalog`` (each tool's own category path and name words)
    or ``zone`` (the labels of the evaluated tree's zones: the earlier reading);
    ``synonyms`` — expand the tag index with mined synonyms; ``pseudo`` — training queries
    per pseudo-document (0 = name + description alone); ``maxsim`` — the resonance score
    (``no-maxsim`` = cosine with the mean of the example vectors, the paper's "w/o
    MaxSim"); ``alpha`` — α of eq. 5; ``sparse_only`` — the sparse path alone, no dense
    path and no re-rank: ``random`` (``sparse-only``: the tag candidates in a random order
    seeded by the query, the paper's SLM-Sort baseline) or ``count`` (``sparse-count``:
    ranked by how many of the query's tags a tool holds, ties by tool id).
    """

    recall: str = "union"
    tags: bool = True
    tag_source: str = "catalog"
    synonyms: bool = True
    pseudo: int = GRAIL_PSEUDO_QUERIES
    maxsim: bool = True
    alpha: float = GRAIL_ALPHA
    sparse_only: str = ""


class _GrailChanges(TypedDict, total=False):
    """Fields of :class:`GrailOptions` a method's options set."""

    recall: str
    tags: bool
    synonyms: bool
    pseudo: int
    maxsim: bool
    alpha: float
    sparse_only: str


GRAIL_FLAGS: dict[str, _GrailChanges] = {
    "no-maxsim": {"maxsim": False}, "no-tags": {"tags": False}, "no-pseudo": {"pseudo": 0},
    "no-synonyms": {"synonyms": False}, "intersect": {"recall": "intersect"},
    "sparse-only": {"sparse_only": "random"}, "sparse-count": {"sparse_only": "count"}}
GRAIL_PAPER = GrailOptions()  # ``grail``
GRAIL_INTERSECT = GrailOptions(recall="intersect", tag_source="zone", synonyms=False, pseudo=0)


def grail_options(method: str) -> GrailOptions:
    """Parse ``grail[:no-maxsim][:no-tags][:no-pseudo][:no-synonyms][:intersect]
    [:alpha=X][:pseudo=N]`` or ``grail-intersect``; ValueError naming the bad part."""
    if method == "grail-intersect":
        return GRAIL_INTERSECT
    parts = method.split(":")
    if parts[0] != "grail":
        raise ValueError(f"not a GRAIL method: {method!r}")
    opts: _GrailChanges = {}
    for part in parts[1:]:
        key, _, value = part.partition("=")
        try:
            if part in GRAIL_FLAGS:
                opts.update(GRAIL_FLAGS[part])
            elif key == "alpha" and 0.0 <= float(value) <= 1.0:
                opts["alpha"] = float(value)
            elif key == "pseudo" and value.isdigit():
                opts["pseudo"] = int(value)
            else:
                raise ValueError
        except ValueError:
            raise ValueError(f"{method!r}: unknown GRAIL option {part!r} (no-maxsim, no-tags, "
                             f"no-pseudo, no-synonyms, intersect, sparse-only, "
                             f"sparse-count, alpha=X in [0, 1], pseudo=N)") from None
    return GrailOptions(**opts)


def walk_settings(way: str) -> dict[str, str]:
    """The resolver settings a ``tooldns:S:B:WAY`` method names: WAY is a merge policy of
    ``nodes.resolver.merge.MERGES`` (``auto``, ``score``, ``round-robin``; ``rr`` is the
    older spelling of round-robin) or a search of ``ResolverConfig.search`` (``global``,
    ``a2x-…``); ValueError otherwise."""
    from nodes.resolver.merge import MERGES, SEARCHES  # here: they load numpy

    if way == "rr":
        way = "round-robin"
    if way in MERGES:
        return {"merge": way}
    if way in SEARCHES and way != "split":
        return {"search": way}
    raise ValueError(f"{way!r}: not a merge policy ({', '.join(MERGES)}) nor a search "
                     f"({', '.join(s for s in SEARCHES if s != 'split')})")


#: a walk's suffix: run it on the same split's tree routed without the log (plain centroids)
PLAIN = "@plain"


def variant(method: str) -> tuple[str, bool]:
    """(the method without :data:`PLAIN`, whether it had it)."""
    return (method[:-len(PLAIN)], True) if method.endswith(PLAIN) else (method, False)


def check_method(method: str) -> None:
    """Raise ValueError unless ``method`` is a method spec :mod:`sim.retrieval.evaluator` runs
    (a walk may end in :data:`PLAIN`)."""
    method, plain = variant(method)
    if plain and method.split(":")[0] not in ("tooldns", "a2x"):
        raise ValueError(f"{method}{PLAIN}: only walks (tooldns:…, a2x:…) have a plain "
                         f"variant (the tree without the query log)")
    parts = method.split(":")
    if parts[0] in ("grail", "grail-intersect"):
        grail_options(method)  # raises naming the bad option
        return
    if parts[0] == "tiered":
        from sim.tierspec import tiered_options

        tiered_options(method)  # seed 003's multi-tier retrieval; raises naming the option
        return
    ok = ((parts[0] == "flat" and len(parts) == 2 and parts[1] in SCORERS)
          or method == "flat-log:dense"
          or method == "flat:dense-adapter"
          or (parts[0] == "tooldns" and len(parts) in (2, 3, 4) and parts[1] in SCORERS
              and (len(parts) == 2 or parts[2].isdigit())
              and (len(parts) < 4 or _walk_way(parts[3])))
          or (parts[0] == "a2x" and len(parts) == 3 and parts[1] in SCORERS
              and parts[2] in POLICIES)
          or method == "context")
    if not ok:
        raise ValueError(f"unknown method {method!r} (flat:S, flat-log:dense, "
                         f"flat:dense-adapter, context, tooldns:S[:B[:MERGE|SEARCH]], "
                         f"a2x:S:POLICY, grail[:OPT…], grail-intersect, tiered[:OPT…]; "
                         f"S in {sorted(SCORERS)})")


def _walk_way(way: str) -> bool:
    try:
        walk_settings(way)
    except ValueError:
        return False
    return True


class DatasetSpec(Spec):
    """Where tools and queries come from."""

    source: Literal["catalog", "synthetic", "tooldns-release"] = "synthetic"
    catalog: str | None = None  # catalogue JSONL, or the ToolDNS release file
    queries: str | None = None  # default: queries.jsonl beside the catalogue
    protocols: tuple[str, ...] | None = None
    limit: int | None = Field(default=None, ge=1)
    tools: int = Field(default=2000, ge=1)  # synthetic
    branching: int = Field(default=6, ge=1)
    depth: int = Field(default=2, ge=1, le=8)
    sample: int | None = Field(
        default=None, ge=1, description="evaluate a seeded sample of queries")
    test_fraction: float | None = Field(default=None, gt=0, le=1,
                                        description="stratified test split (paper: 0.4); "
                                        "GRAIL's pseudo-documents read the rest")
    split: Literal["by-query", "by-tool"] = Field(
        default="by-query", description="by-query: the queries are split (almost every "
        "held-out query asks for a tool with logged ones); by-tool: first a share of the "
        "tools (unseen_tools) is held out with every query that asks for one, then the "
        "other queries are split by test_fraction (a new tool's visibility)")
    unseen_tools: float = Field(default=0.2, gt=0, lt=1, description="split: by-tool: the "
                                "share of the tools with queries (per leaf category) that "
                                "no training query names")


class RoutingLogSpec(Spec):
    """Learned routing (:mod:`topologies.learned`): centroids of pseudo-documents built
    from the training part of a seeded query split; only the test part is evaluated."""

    per_tool: int = Field(default=10, ge=0, description="training queries per tool in its "
                          "pseudo-document (beside its description); 0: descriptions only, "
                          "i.e. plain centroids on the same split")
    test_fraction: float = Field(default=0.4, gt=0, lt=1, description="share of the queries "
                                 "held out (stratified by leaf category); the rest is the log")


class TaxonomySpec(Spec):
    """The tree evaluated: the catalogue's own categories or a built one."""

    kind: Literal["categories", "cluster"] = "categories"
    min_size: int = Field(default=1, ge=1)
    branching: int = Field(default=16, ge=2)
    depth: int = Field(default=2, ge=1, le=6)
    leaf_size: int = Field(default=40, ge=1)
    multi_parent: float = Field(default=0.0, ge=0.0, le=1.0)
    vectors: Literal["tfidf", "dense"] = "tfidf"
    summary_terms: int = Field(default=24, ge=1)
    summary_examples: int = Field(default=0, ge=0)
    representatives: int = Field(default=0, ge=0, description="route by N representative tools "
                                 "per zone (MaxSim) instead of the summary; 0 = summary")
    representative_vectors: Literal["tfidf", "dense"] = "dense"
    centroids: bool = Field(default=False, description="route by each child's mean tool embedding "
                            "for the query's service (dense scorer only)")
    labels: Literal["terms", "llm"] = Field(
        default="terms", description="zone labels and summaries: the clustering's distinctive "
        "terms, or named by the eval file's llm endpoint (docs/llm.md)")
    routing_log: RoutingLogSpec | None = Field(
        default=None, description="learned routing: centroids from a training query log "
        "(needs centroids: true)")

    @model_validator(mode="after")
    def _log_needs_centroids(self) -> TaxonomySpec:
        if self.routing_log is not None and not self.centroids:
            raise ValueError("routing_log: learned routing builds centroids (set centroids: "
                             "true)")
        return self


class LLMSpec(Spec):
    """An OpenAI-compatible endpoint for the llm scorer and the context method."""

    url: str | None = Field(default=None, description="base URL (the llm scorer needs one)")
    model: str = "default"
    timeout: float = Field(default=60.0, gt=0, description="seconds per attempt")
    retries: int = Field(default=2, ge=0, le=10, description="further attempts after a 429, "
                         "5xx, refused connection or timeout (exponential backoff)")
    key_env: str = Field(default="TOOLDNS_LLM_KEY", description="environment variable holding "
                         "the API key, if one is needed (never written to results)")


class EvalScenario(Spec):
    """An evaluation file (``scenarios/eval/*.yaml``); see ``tooldns eval --help``."""

    name: str = Field(default="eval", min_length=1, pattern=r"^[A-Za-z0-9_.+-]+$")
    description: str = ""
    seed: Seed = Field(default=0, description="sampling, splits and clustering derive from it")
    dataset: DatasetSpec = DatasetSpec()
    taxonomy: TaxonomySpec = TaxonomySpec()
    methods: tuple[str, ...] = Field(default=DEFAULT_METHODS, description="flat:S, flat-log:dense, "
                                     "context, tooldns:S[:B[:score|global]], a2x:S:MODE "
                                     "(a walk + '@plain': the same split's tree without the "
                                     "query log, with taxonomy.routing_log), "
                                     "grail[:OPT…] (the paper's GRAIL; OPT: no-maxsim, "
                                     "no-tags, no-pseudo, no-synonyms, intersect, "
                                     "sparse-only, sparse-count, alpha=X, pseudo=N), "
                                     "grail-intersect (the earlier reading), "
                                     "flat:dense-adapter (a least-squares query adapter), "
                                     "tiered[:OPT…] (seed 003's tiers; OPT: t1=X, t2=X, "
                                     "t3=X, limit=N, only=123, lazy) "
                                     "(S: bm25 tfidf dense maxsim llm)")
    k: int = Field(default=10, ge=1, description="K of hit@K and recall@K")
    llm: LLMSpec = LLMSpec()
    cache_dir: str | None = Field(default=None, description="keep sentence embeddings on disk here")
    out: str | None = Field(default=None, description="output folder (default results/<name>)")
    plots: bool = Field(default=True, description="write the figures")

    @field_validator("methods")
    @classmethod
    def _methods(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for method in value:
            check_method(method)
        return value

    @model_validator(mode="after")
    def _centroids_need_vectors(self) -> EvalScenario:
        """Routing by centroids scores vectors, which only the dense scorer does: a walk
        with another scorer would fail when it is built (after every method before it)."""
        if not self.taxonomy.centroids:
            return self
        for named in self.methods:
            method = variant(named)[0]
            parts = method.split(":")
            if parts[0] in ("tooldns", "a2x") and len(parts) > 1 and parts[1] != "dense":
                raise ValueError(f"methods: {named}: the {parts[1]!r} scorer cannot score "
                                 f"vectors, and taxonomy.centroids routes by vectors (use "
                                 f"{parts[0]}:dense{method[len(parts[0]) + len(parts[1]) + 1:]}"
                                 f", or centroids: false)")
        return self

    @model_validator(mode="after")
    def _one_split(self) -> EvalScenario:
        log, frac = self.taxonomy.routing_log, self.dataset.test_fraction
        if log is not None and frac is not None and frac != log.test_fraction:
            raise ValueError(f"dataset.test_fraction ({frac}) differs from "
                             f"taxonomy.routing_log.test_fraction ({log.test_fraction}): "
                             f"the log is the split's training part; give one value")
        if self.dataset.split == "by-tool" and log is None and frac is None:
            raise ValueError("dataset.split: by-tool holds tools out of a training log; set "
                             "dataset.test_fraction or taxonomy.routing_log")
        if log is None and frac is None and "flat-log:dense" in self.methods:
            raise ValueError("methods: flat-log:dense reads a training query log; set "
                             "dataset.test_fraction or taxonomy.routing_log")
        plain = [m for m in self.methods if variant(m)[1]]
        if plain and (log is None or log.per_tool == 0):
            raise ValueError(f"methods: {plain[0]}: the plain variant compares a walk with "
                             f"learned routing's; set taxonomy.routing_log (per_tool > 0)")
        return self


def needs_llm(spec: EvalScenario) -> list[str]:
    """What in ``spec`` calls a language model (methods with the ``llm`` or ``llm-router``
    scorer, LLM zone labels); ``context`` without an endpoint only counts its cost."""
    uses = [m for m in spec.methods
            if any(p in ("llm", "llm-router") for p in variant(m)[0].split(":")[1:])]
    if spec.taxonomy.labels == "llm":
        uses.append("taxonomy.labels: llm")
    return uses


def preflight(spec: EvalScenario, llm: bool = True) -> None:
    """The refusals an evaluation would otherwise meet after loading its weights and data
    (``tooldns validate`` and ``eval`` run them first); ValueError naming the field.
    ``llm=False`` leaves out the endpoint (``eval --llm-url`` may still give one)."""
    ds = spec.dataset
    if ds.source != "synthetic":
        if not ds.catalog:
            raise ValueError(f"dataset.catalog: {ds.source!r} needs a catalogue file")
        for field, value in (("catalog", ds.catalog), ("queries", ds.queries)):
            if value and not Path(value).is_file():
                raise ValueError(f"dataset.{field}: no such file: {value}")
        beside = Path(ds.catalog).parent / "queries.jsonl"
        if ds.source == "catalog" and not ds.queries and not beside.is_file():
            raise ValueError(f"dataset.queries: not given, and no {beside} beside the "
                             f"catalogue: nothing to evaluate")
    if llm and (uses := needs_llm(spec)) and not spec.llm.url:
        raise ValueError(f"methods: {', '.join(uses)} need a language model: set llm.url "
                         f"or give --llm-url (docs/llm.md)")


def load_eval(path: str | Path) -> EvalScenario:
    """Read and validate an evaluation file; relative paths are taken from its folder."""
    path = Path(path)
    data = read_yaml(path) or {}  # ScenarioError (a ValueError) naming the file
    try:
        spec = EvalScenario.model_validate(data)
    except ValidationError as exc:
        lines = [f"{path}: " + "".join(f"{'.'.join(str(x) for x in e['loc'])}: "
                                        for _ in (0,) if e["loc"])
                 + e["msg"].removeprefix("Value error, ") for e in exc.errors()]
        raise ValueError("\n".join(lines)) from None
    ds = spec.dataset
    fix = {k: str((path.parent / v).resolve()) for k, v in
           (("catalog", ds.catalog), ("queries", ds.queries)) if v and not Path(v).is_absolute()}
    return spec.model_copy(update={"dataset": ds.model_copy(update=fix)}) if fix else spec
