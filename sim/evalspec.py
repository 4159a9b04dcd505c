"""Evaluation files (``scenarios/eval/*.yaml``): the typed models and their loader.

Kept apart from :mod:`sim.evaluate` (which imports the scorers, scikit-learn and pandas)
so that validating a file, ``tooldns schema`` and a network scenario's ``namespace.taxonomy``
do not pay for them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

DEFAULT_METHODS = (
    "flat:bm25", "flat:tfidf", "flat:dense", "context",
    "tooldns:bm25", "tooldns:bm25:3", "tooldns:tfidf", "tooldns:dense", "tooldns:dense:3",
    "a2x:bm25:get_one", "a2x:bm25:get_important", "a2x:bm25:get_all",
    "a2x:dense:get_one", "a2x:dense:get_important", "a2x:dense:get_all",
    "grail",
)


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DatasetSpec(_Spec):
    """Where tools and queries come from."""

    source: Literal["catalog", "synthetic", "tooldns-release"] = "synthetic"
    catalog: str | None = None  # catalogue JSONL, or the ToolDNS release file
    queries: str | None = None  # default: queries.jsonl beside the catalogue
    protocols: tuple[str, ...] | None = None
    limit: int | None = Field(None, ge=1)
    tools: int = Field(2000, ge=1)  # synthetic
    branching: int = Field(6, ge=1)
    depth: int = Field(2, ge=1, le=8)
    sample: int | None = Field(None, ge=1, description="evaluate a seeded sample of queries")
    test_fraction: float | None = Field(None, gt=0, le=1,
                                        description="stratified test split (paper: 0.4)")


class TaxonomySpec(_Spec):
    """The tree evaluated: the catalogue's own categories or a built one."""

    kind: Literal["categories", "cluster"] = "categories"
    min_size: int = Field(1, ge=1)
    branching: int = Field(16, ge=2)
    depth: int = Field(2, ge=1, le=6)
    leaf_size: int = Field(40, ge=1)
    multi_parent: float = Field(0.0, ge=0.0, le=1.0)
    vectors: Literal["tfidf", "dense"] = "tfidf"
    summary_terms: int = Field(24, ge=1)
    summary_examples: int = Field(0, ge=0)
    representatives: int = Field(0, ge=0, description="route by N representative tools "
                                 "per zone (MaxSim) instead of the summary; 0 = summary")
    representative_vectors: Literal["tfidf", "dense"] = "dense"
    centroids: bool = Field(False, description="route by each child's mean tool embedding "
                            "for the query's service (dense scorer only)")


class LLMSpec(_Spec):
    """An OpenAI-compatible endpoint for the llm scorer and the context method."""

    url: str | None = Field(None, description="base URL (the llm scorer needs one)")
    model: str = "default"


class EvalScenario(_Spec):
    """An evaluation file (``scenarios/eval/*.yaml``); see ``tooldns eval --help``."""

    name: str = Field("eval", min_length=1, pattern=r"^[A-Za-z0-9_.+-]+$")
    description: str = ""
    seed: int = Field(0, description="sampling, splits and clustering derive from it")
    dataset: DatasetSpec = DatasetSpec()
    taxonomy: TaxonomySpec = TaxonomySpec()
    methods: tuple[str, ...] = Field(DEFAULT_METHODS, description="flat:S, context, "
                                     "tooldns:S[:B[:score|global]], a2x:S:MODE, grail "
                                     "(S: bm25 tfidf dense maxsim llm)")
    k: int = Field(10, ge=1, description="K of hit@K and recall@K")
    llm: LLMSpec = LLMSpec()
    cache_dir: str | None = Field(None, description="keep sentence embeddings on disk here")
    out: str | None = Field(None, description="output folder (default results/<name>)")
    plots: bool = Field(True, description="write the figures")


def load_eval(path: str | Path) -> EvalScenario:
    """Read and validate an evaluation file; relative paths are taken from its folder."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        spec = EvalScenario.model_validate(data)
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"{path}: {exc}") from None
    except ValidationError as exc:
        lines = [f"{path}: {'.'.join(str(x) for x in e['loc'])}: {e['msg']}"
                 for e in exc.errors()]
        raise ValueError("\n".join(lines)) from None
    ds = spec.dataset
    fix = {k: str((path.parent / v).resolve()) for k, v in
           (("catalog", ds.catalog), ("queries", ds.queries)) if v and not Path(v).is_absolute()}
    return spec.model_copy(update={"dataset": ds.model_copy(update=fix)}) if fix else spec
