"""Dense (MiniLM, offline), MaxSim and LLM scorers; the LLM client talks to a local stub."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import ClassVar

import numpy as np
import pytest

from nodes.bm25 import bm25_postings
from nodes.scoring import (
    SCORERS,
    BM25Scorer,
    CachedEncoder,
    DenseScorer,
    LLMScorer,
    MaxSimScorer,
    facets,
    group_max_index,
    make_scorer,
    parse_ranking,
    tokenize,
    top_k,
)
from sim.retrieval.llm import openai_transport

TEXTS = [
    "Stock quotes and historical share prices for listed companies",
    "Weather forecast: rain, temperature and wind predictions for any city",
    "Translate text between English and Chinese",
    "Send an email message to a contact",
]


def bag_encoder(dim: int = 64):
    """A deterministic toy encoder: hashed bag of words, L2-normalised (counts calls)."""
    calls: list[int] = []

    def encode(texts):
        calls.append(len(texts))
        out = np.zeros((len(texts), dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().split():
                out[i, sum(map(ord, w)) % dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)

    encode.calls = calls  # type: ignore[attr-defined]
    return encode


def test_minilm_dense_scorer_runs_offline_and_ranks_by_meaning(monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    scorer = make_scorer("dense")
    index = scorer.index([str(i) for i in range(len(TEXTS))], TEXTS)
    # no word in common with the weather text: only the embedding can find it
    assert top_k(index.scores("will it be sunny in Paris tomorrow"), 1) == [1]
    assert top_k(index.scores("convert this paragraph into Mandarin"), 1) == [2]
    assert top_k(index.scores("how much is an Apple share worth"), 1) == [0]
    vec = scorer.encoder(["hello"])  # type: ignore[attr-defined]
    assert vec.shape == (1, 384) and abs(float(np.linalg.norm(vec)) - 1.0) < 1e-4


def test_cached_encoder_embeds_each_text_once() -> None:
    enc = bag_encoder()
    cached = CachedEncoder(enc)
    a = cached(["x y", "y z", "x y"])
    b = cached(["y z", "x y"])
    assert enc.calls == [2]  # type: ignore[attr-defined]
    assert np.allclose(a[0], b[1]) and np.allclose(a[1], b[0])


def test_dense_scorer_cosine_with_injected_encoder() -> None:
    enc = bag_encoder()
    index = DenseScorer(enc).index(["a", "b"], ["red apple", "blue sky"])
    s = index.scores("apple")
    assert s[0] > s[1] and s[1] == pytest.approx(0.0)


def test_facets_split_lines_and_sentences() -> None:
    assert facets("Get weather. Also wind!\nexample: rain in Oslo") == [
        "Get weather.", "Also wind!", "example: rain in Oslo"]
    assert facets("") == [""]


def test_maxsim_takes_the_best_facet_not_the_mean() -> None:
    enc = bag_encoder()
    # item 0: one facet matches the intent exactly among unrelated ones; item 1 is a mix
    texts = ["alpha beta.\ngamma delta.\nweather oslo", "weather cats dogs oslo mice"]
    ms = MaxSimScorer(enc).index(["0", "1"], texts).scores("weather oslo")
    dense = DenseScorer(enc).index(["0", "1"], texts).scores("weather oslo")
    assert ms[0] == pytest.approx(1.0, abs=1e-6) and ms[0] > ms[1]
    assert dense[1] > dense[0]  # a single mean-pooled vector prefers the other


def test_parse_ranking() -> None:
    assert parse_ranking("3, 1, 3, 9, 2", 4) == [2, 0, 1]
    assert parse_ranking("other", 4) == []


class _ChatStub(BaseHTTPRequestHandler):
    """A local OpenAI-shaped chat/completions endpoint (a test of the client, not an LLM)."""

    seen: ClassVar[list[dict]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _ChatStub.seen.append({"path": self.path, "auth": self.headers.get("Authorization"),
                               "body": body})
        prompt = body["messages"][0]["content"]
        # answer: every numbered candidate line mentioning "weather", in order
        picks = [line.split(".")[0] for line in prompt.splitlines()
                 if line[:1].isdigit() and "weather" in line.lower()]
        reply = {"id": "x", "object": "chat.completion",
                 "choices": [{"index": 0, "finish_reason": "stop",
                              "message": {"role": "assistant", "content": ", ".join(picks)}}],
                 "usage": {"prompt_tokens": 123, "completion_tokens": 3}}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def test_llm_scorer_client_against_local_openai_shaped_server() -> None:
    server = HTTPServer(("127.0.0.1", 0), _ChatStub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/v1"
        scorer = LLMScorer(openai_transport(url, api_key="k"), model="m", top=2)
        texts = ["Stock prices", "Weather forecast", "Translate", "Weather alerts by SMS"]
        scores = scorer.index(["a", "b", "c", "d"], texts).scores("rain tomorrow?")
        assert top_k(scores, 2) == [1, 3] and scores[0] == 0.0
        req = _ChatStub.seen[-1]
        assert req["path"] == "/v1/chat/completions" and req["auth"] == "Bearer k"
        assert req["body"]["model"] == "m" and req["body"]["temperature"] == 0
        assert "rain tomorrow?" in req["body"]["messages"][0]["content"]
        assert scorer.calls == 1 and scorer.prompt_tokens == 123
    finally:
        server.shutdown()
        server.server_close()


def test_llm_scorer_names_a_malformed_reply() -> None:
    from nodes.llmreply import LLMError

    scorer = LLMScorer(lambda body: {"choices": []})
    with pytest.raises(LLMError, match="no choices"):
        scorer.index(["a", "b"], ["x", "y"]).scores("q")


def test_registry_names() -> None:
    assert {"bm25", "tfidf", "oracle", "dense", "maxsim", "llm"} <= set(SCORERS)


def test_disk_cached_encoder_persists_vectors_by_digest(tmp_path) -> None:
    from analysis.files import atomic_write
    from topologies.encoders import disk_cached_encoder, save_encoder_cache

    enc = bag_encoder()
    first = disk_cached_encoder(tmp_path, enc, model="toy")
    a = first(["red apple", "blue sky"])
    save_encoder_cache(first, atomic_write)
    again = disk_cached_encoder(tmp_path, enc, model="toy")
    b = again(["blue sky", "red apple"])
    assert enc.calls == [2]  # type: ignore[attr-defined]  # the second came from disk
    assert np.allclose(a[::-1], b)
    assert "red apple" in again.store and "green" not in again.store


def test_group_max_index_scores_each_item_by_its_best_text() -> None:
    scorer = make_scorer("bm25")
    index = group_max_index(scorer, ["a", "b", "c"],
                            [[TEXTS[0], TEXTS[1]], [TEXTS[2]], []])
    s = index.scores("weather forecast for rain")
    flat = scorer.index(["a", "a", "b"], TEXTS[:3]).scores("weather forecast for rain")
    assert s[0] == max(flat[0], flat[1]) == flat[1] > s[1] == flat[2]
    assert s[2] == -np.inf


def test_bm25_weights_are_bm25s_bit_for_bit() -> None:
    """bm25_postings gives exactly the float32 weights bm25s stores (Lucene variant), for
    corpora with repeated tokens, ties, empty texts and a corpus of one text."""
    import random

    import bm25s

    rng = random.Random(3)
    words = [f"w{i}" for i in range(60)] + ["weather", "city", "forecast"]
    corpora = [[["solo"]], [["same", "words"]] * 4 + [["x0"]]]
    for _ in range(150):
        corpora.append([[rng.choice(words[: rng.choice((3, 63))])
                         for _ in range(rng.choice((1, 2, 7, 40)))]
                        for _ in range(rng.choice((1, 2, 5, 30, 200)))])
    for docs in corpora:
        model = bm25s.BM25()
        model.index(docs, show_progress=False)
        sc = model.scores
        want = {}
        for token, tid in model.vocab_dict.items():
            if tid + 1 < len(sc["indptr"]):
                lo, hi = sc["indptr"][tid], sc["indptr"][tid + 1]
                want[token] = list(zip(sc["indices"][lo:hi].tolist(),
                                       sc["data"][lo:hi].astype(float).tolist(), strict=True))
        got = bm25_postings(docs)
        assert {t: list(p) for t, p in got.items()} == want
        assert all(w1.hex() == w2.hex() for t in got for (_, w1), (_, w2)
                   in zip(got[t], want[t], strict=True))


def test_tokenize_drops_stop_words_and_single_characters() -> None:
    assert tokenize("The 3 Weather-APIs of a City, x2 i") == ["weather", "apis", "city", "x2"]
    index = BM25Scorer().index(["a", "b"], ["the weather", "of a"])
    assert index.scores("weather the").tolist()[0] > 0.0 == index.scores("of").tolist()[0]
