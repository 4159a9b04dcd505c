"""One evaluation (``tooldns eval``): load the dataset, build the tree, run every method,
write the outputs (per_query.csv, summary.csv, by_category.csv, by_seen.csv with a
training log, summary.json, table.md and the figures of :mod:`analysis.plots.retrieval`)."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

from analysis.files import atomic_write
from nodes.llmreply import ChatTransport
from nodes.scoring import Encoder
from sim.evalspec import EvalScenario, check_method, preflight, variant
from sim.provenance import KEY as PROVENANCE
from sim.provenance import provenance, utc_now
from sim.retrieval.dataset import category_map, load_split, sample_queries
from sim.retrieval.evaluator import EvalConfig, Evaluator
from sim.retrieval.llm import LLMClient
from sim.retrieval.summary import markdown_table, paired_methods, summarise
from topologies.datasets import Row, canonical_id
from topologies.encoders import disk_cached_encoder
from topologies.learned import log_coverage, without_held_out
from topologies.namespace import Namespace
from topologies.taxonomy import balance_stats
from topologies.taxonomy_namespace import taxonomy_namespace


def _csv(frame: pd.DataFrame) -> Callable[[str], None]:
    def write(tmp: str) -> None:
        frame.to_csv(tmp, index=False)
    return write


def _text(text: str) -> Callable[[str], None]:
    def write(tmp: str) -> None:
        Path(tmp).write_text(text, encoding="utf-8")
    return write


def write_outputs(out: Path, per_query: pd.DataFrame, k: int, meta: dict,
                  plots: bool = True, origin: dict | None = None) -> dict[str, pd.DataFrame]:
    """per_query.csv, summary.csv (with 95 % intervals over the queries), by_category.csv,
    by_seen.csv (with a training log: queries whose tool some log query names, and the
    others), paired.csv (each method minus the first, query by query), summary.json (ending with
    ``origin``, the provenance block, when given), table.md (+ plots)."""
    out.mkdir(parents=True, exist_ok=True)
    summary = summarise(per_query)
    by_cat = summarise(per_query, ("method", "category"))
    paired = paired_methods(per_query)
    frames = {"per_query.csv": per_query, "summary.csv": summary, "by_category.csv": by_cat,
              "paired.csv": paired}
    if "seen" in per_query.columns:  # a training log: its tools apart from the others
        frames["by_seen.csv"] = summarise(per_query, ("method", "seen"))
    for name, frame in frames.items():
        atomic_write(out / name, _csv(frame))
    doc = {**meta, "k": k, "methods": json.loads(summary.to_json(orient="records"))}
    if origin is not None:
        doc[PROVENANCE] = origin
    atomic_write(out / "summary.json", _text(json.dumps(doc, indent=2)))
    atomic_write(out / "table.md", _text(markdown_table(summary, k)))
    if plots:
        from analysis.plots.retrieval import plot_all
        from analysis.titles import eval_title

        plot_all(per_query, out, eval_title(meta))  # titled with the evaluation and seed
    result = {"summary": summary, "by_category": by_cat, "paired": paired}
    if "by_seen.csv" in frames:
        result["by_seen"] = frames["by_seen.csv"]
    return result


def build_namespace(spec: EvalScenario, rows: Sequence[Row], queries: Sequence[Row],
                    encoder: Encoder | None = None, log: Sequence[Row] = (),
                    chat: ChatTransport | None = None) -> tuple[Namespace, dict]:
    """The evaluated tree over the catalogue (learned routing reads ``log``, the training
    queries; ``taxonomy.labels: llm`` asks ``chat``), and its balance statistics."""
    ns = taxonomy_namespace(spec.taxonomy, rows, queries, spec.seed,
                            f"{spec.name}:{spec.taxonomy.kind}", encoder, log, chat)
    return ns, balance_stats(ns)


def run_eval(spec: EvalScenario, out: Path | None = None,
             progress: Callable[[str], None] | None = None,
             tick: Callable[[str, int, int], None] | None = None) -> dict:
    """Load, build the tree, run every method, write the outputs; returns the summary.
    ``summary.json`` ends with a ``provenance`` block (sim.provenance)."""
    started = utc_now()
    for method in spec.methods:  # reject bad method names before anything loads
        check_method(method)
    preflight(spec)
    rows, train, queries = load_split(spec)
    if not rows:
        raise ValueError("the dataset has no tools")
    log = spec.taxonomy.routing_log
    llm = spec.llm  # one client (and its counters) for the labelling and every method
    chat = LLMClient(llm.url, llm.model, None, llm.timeout, llm.retries,
                     key_env=llm.key_env) if llm.url else None
    config = EvalConfig(methods=spec.methods, k=spec.k, llm_url=spec.llm.url,
                        llm_model=spec.llm.model, llm_client=chat, cache_dir=spec.cache_dir,
                        log_per_tool=log.per_tool if log is not None else 10)
    ev_encoder = disk_cached_encoder(spec.cache_dir) if spec.cache_dir else None
    # a training query whose text is also a held-out one (the catalogue's queries repeat
    # 21 texts) stays out of GRAIL's pseudo-documents and learned routing's log: no
    # evaluated text reaches an index
    train = without_held_out(train, queries)
    ns, balance = build_namespace(spec, rows, queries, ev_encoder, train, chat)
    qs = sample_queries(ns.queries, spec.dataset.sample, spec.seed)
    if not qs:
        raise ValueError("no query has a ground-truth tool in the catalogue")
    ev = Evaluator(ns, category_map(rows), config, ev_encoder, train)
    plain = plain_evaluator(spec, rows, queries, ev_encoder, train, chat, config)
    out = out or Path(spec.out or f"results/{spec.name}")
    kept = MethodStore(out, spec, [q.id for q in qs])
    done = {m: kept.load(m) for m in spec.methods if kept.has(m)}
    if done and progress:
        progress(f"{len(done)} of {len(spec.methods)} methods already done in "
                 f"{kept.folder}: {', '.join(done)}")
    todo = [m for m in spec.methods if m not in done]
    by_method: dict[str, pd.DataFrame] = dict(done)
    for method in todo:  # in the file's order, each on its tree
        base, on_plain = variant(method)
        evaluator = plain if on_plain and plain is not None else ev
        ran = evaluator.run(qs, _named(progress, method), _named(tick, method),
                            methods=[base], finished=_named(kept.save, method))
        by_method[method] = ran.assign(method=method)  # the name with its variant
    df = pd.concat([by_method[m] for m in spec.methods if m in by_method], ignore_index=True)
    if train:  # whether a ground-truth tool of the query has logged queries
        logged = log_coverage(ns, train)
        seen = {q.id: any(canonical_id(t) in logged for t in q.truth) for q in qs}
        df["seen"] = df["query"].map(seen)
    meta = {"name": spec.name, "tools": len(rows), "queries_evaluated": len(qs),
            "queries_available": len(ns.queries), "namespace": ns.origin, "balance": balance,
            "spec": spec.model_dump(mode="json")}
    if any(m.startswith("grail") for m in spec.methods):  # what the pseudo-documents read
        meta["grail_train_queries"] = len(train)
    if train:
        first = df[df.method == spec.methods[0]]
        meta["split"] = {"kind": spec.dataset.split, "train_queries": len(train),
                         "evaluated_unseen": int((~first.seen.astype(bool)).sum()),
                         **({"unseen_tools_share": spec.dataset.unseen_tools}
                            if spec.dataset.split == "by-tool" else {})}
    if spec.taxonomy.routing_log is not None:  # what learned routing read
        meta["routing_log_queries"] = len(train)
        meta["routing_log_tools"] = len(log_coverage(ns, train))
    if chat is not None:  # endpoint (no key), model and exchanges
        meta["llm"] = chat.stats()
    frames = write_outputs(out, df, spec.k, meta, spec.plots, provenance(started))
    kept.clear()  # complete: the next run measures every method again
    return {"out": out, "balance": balance, **frames}


def _named(call: Callable[..., None] | None, method: str) -> Callable[..., None] | None:
    """``call`` with its first argument (the method the evaluator ran) replaced by the
    file's name for it (a plain variant's ``…@plain``); a frame argument is renamed too."""
    if call is None:
        return None

    def named(_: str, *rest: object) -> None:
        call(method, *(r.assign(method=method) if isinstance(r, pd.DataFrame) else r
                       for r in rest))

    return named


def plain_evaluator(spec: EvalScenario, rows: Sequence[Row], queries: Sequence[Row],
                    encoder: Encoder | None, train: list[Row], chat: ChatTransport | None,
                    config: EvalConfig) -> Evaluator | None:
    """The evaluator of the ``…@plain`` walks: the same split's tree with centroids of the
    descriptions alone (``routing_log.per_tool: 0``), so learned and plain routing are
    compared in one file, query by query; None when no method asks for it."""
    log = spec.taxonomy.routing_log
    if log is None or not any(variant(m)[1] for m in spec.methods):
        return None
    bare = spec.model_copy(update={"taxonomy": spec.taxonomy.model_copy(
        update={"routing_log": log.model_copy(update={"per_tool": 0})})})
    ns, _ = build_namespace(bare, rows, queries, encoder, train, chat)
    return Evaluator(ns, category_map(rows), config, encoder, train)


class MethodStore:
    """Each method's per-query rows kept as it finishes (``<out>/.methods/``, Parquet,
    written atomically), so an interrupted evaluation resumes with the finished methods.
    A file is keyed on the method and on everything that decides its rows (the file's
    settings but its method list, output and plots, and the queries sampled), so a changed
    evaluation never reuses rows computed for another; the folder is removed once the
    outputs are written."""

    def __init__(self, out: Path, spec: EvalScenario, queries: Sequence[str]) -> None:
        self.folder = out / ".methods"
        settings = spec.model_dump(mode="json", exclude={"methods", "out", "plots",
                                                         "description", "name"})
        self._base = json.dumps({"spec": settings, "queries": list(queries)},
                                sort_keys=True)

    def _path(self, method: str) -> Path:
        digest = hashlib.sha256(f"{self._base}\n{method}".encode()).hexdigest()[:16]
        return self.folder / f"{digest}.parquet"

    def has(self, method: str) -> bool:
        return self._path(method).exists()

    def load(self, method: str) -> pd.DataFrame:
        return pd.read_parquet(self._path(method))

    def save(self, method: str, rows: pd.DataFrame) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic_write(self._path(method), lambda tmp: rows.to_parquet(tmp, index=False))

    def clear(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
