"""The OpenAI-compatible chat client (sim.retrieval.llm): what it sends, and every error path,
over real HTTP on loopback against the deterministic stand-in (not a model)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from nodes.llmreply import LLMError, answer_text, prompt_tokens
from sim.retrieval.llm import LLMClient, _public, _retry_after, chat_endpoint, openai_transport
from sim.retrieval.standin import StandIn

BODY = {"messages": [{"role": "user", "content": "hello"}]}


@pytest.fixture(scope="module")
def standin() -> Iterator[StandIn]:
    with StandIn(slow_seconds=1.0, huge_bytes=64 * 1024) as server:
        yield server


def client(url: str, **kw: object) -> LLMClient:
    waits: list[float] = []
    options: dict = {"timeout": 2.0, "retries": 2, "sleep": waits.append, "key_env": ""}
    options.update(kw)
    made = LLMClient(url, **options)
    made.waits = waits  # type: ignore[attr-defined]
    return made


# ------------------------------------------------------------------ without sockets


def test_endpoint_urls_and_what_errors_show() -> None:
    assert chat_endpoint("http://h:8080/v1/") == "http://h:8080/v1/chat/completions"
    assert chat_endpoint("http://h/v1/chat/completions") == "http://h/v1/chat/completions"
    assert _public("http://user:secret@h:1/v1/chat/completions?key=s") == \
        "http://h:1/v1/chat/completions"
    assert _retry_after("2") == 2.0 and _retry_after("Wed, 21 Oct 2015") is None
    with pytest.raises(ValueError, match="http:// and https://"):
        LLMClient("ftp://h/v1")
    with pytest.raises(ValueError, match="needs a URL"):
        LLMClient(" ")


def test_answer_text_names_what_is_missing() -> None:
    ok = {"choices": [{"message": {"content": "<think>hmm 1, 2</think> 3, 1"}}]}
    assert answer_text(ok) == "3, 1"
    for reply, problem in (([], "JSON list"), ({}, "no choices"), ({"choices": []}, "no choices"),
                           ({"choices": ["x"]}, "no message content"),
                           ({"choices": [{"message": {"content": None}}]}, "no message content"),
                           ({"error": {"message": "model not loaded"}}, "model not loaded")):
        with pytest.raises(LLMError, match=problem) as err:
            answer_text(reply, "http://h/v1/chat/completions")
        assert str(err.value).startswith("LLM endpoint http://h/v1/chat/completions: ")
    assert prompt_tokens({"usage": {"prompt_tokens": 7}}, 1) == 7
    assert prompt_tokens({"usage": {"prompt_tokens": "7"}}, 1) == 1


def test_the_key_comes_from_the_environment_and_is_never_shown(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLDNS_LLM_KEY", "sk-secret")
    made = LLMClient("http://127.0.0.1:9/v1")
    assert made.api_key == "sk-secret"
    assert "sk-secret" not in repr(made) and "sk-secret" not in str(made.stats())
    assert LLMClient("http://127.0.0.1:9/v1", api_key="given").api_key == "given"


# ------------------------------------------------------------------ over loopback HTTP


def test_a_good_exchange_sends_model_key_and_body(standin: StandIn) -> None:
    made = client(standin.url, model="qwen", api_key="k1")
    reply = made(BODY)
    assert answer_text(reply) == "other" and reply["model"] == "stand-in"
    assert standin.requests[-1]["model"] == "qwen"  # filled in: the body named none
    assert standin.auth[-1] == "Bearer k1"
    made({**BODY, "model": "explicit"})
    assert standin.requests[-1]["model"] == "explicit"
    assert made.complete("User task: rain\nCandidates:\n1. sun\n2. rain today\n") == "2"
    assert made.stats()["calls"] == 3 and made.stats()["attempts"] == 3
    assert openai_transport(standin.url)(BODY)["choices"]


@pytest.mark.parametrize("fault", ["500", "503", "429", "drop"])
def test_a_transient_failure_is_retried_then_succeeds(standin: StandIn, fault: str) -> None:
    made = client(standin.url, backoff=0.25)
    standin.fail(fault)
    assert answer_text(made(BODY)) == "other"
    assert (made.calls, made.attempts, made.failures) == (1, 2, 0)
    assert made.waits == [0.0 if fault == "429" else 0.25]  # type: ignore[attr-defined]


def test_retries_back_off_exponentially_then_give_up(standin: StandIn) -> None:
    made = client(standin.url, retries=2, backoff=0.5)
    standin.fail("500", "503", "500")
    with pytest.raises(LLMError, match=r"HTTP 500 .*stand-in fault 500.*gave up after 3 "
                       r"attempts") as err:
        made(BODY)
    assert made.waits == [0.5, 1.0]  # type: ignore[attr-defined]
    assert made.failures == 1 and standin.url in str(err.value)
    assert not standin.pending()


def test_a_client_error_is_not_retried(standin: StandIn) -> None:
    made = client(standin.url)
    standin.fail("400")
    with pytest.raises(LLMError, match=r"HTTP 400.*stand-in fault 400"):
        made(BODY)
    assert made.attempts == 1


@pytest.mark.parametrize(("fault", "problem"), [
    ("malformed", "reply is not JSON"), ("not-object", "JSON list, not an object"),
    ("empty", "reply has no choices"), ("no-content", "no message content"),
    ("huge", "65536-byte limit"), ("huge-stream", "larger than the 65536-byte limit")])
def test_a_bad_reply_is_a_clear_error(standin: StandIn, fault: str, problem: str) -> None:
    made = client(standin.url, max_bytes=64 * 1024)
    standin.fail(fault)
    with pytest.raises(LLMError, match=problem) as err:
        made(BODY)
    assert str(err.value).startswith(f"LLM endpoint {standin.url}/chat/completions: ")
    assert made.attempts == 1  # a malformed reply is not worth another attempt


def test_a_slow_reply_times_out_each_attempt(standin: StandIn) -> None:
    made = client(standin.url, timeout=0.15, retries=1)
    standin.fail("slow", "slow")
    with pytest.raises(LLMError, match=r"no reply within 0.15 s \(gave up after 2 attempts"):
        made(BODY)
    standin.fail("slow")  # and a slow first reply, then a quick one, succeeds
    assert answer_text(made(BODY)) == "other"


def test_a_closed_port_is_a_clear_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    made = client(f"http://127.0.0.1:{port}/v1", retries=1)
    with pytest.raises(LLMError, match=r"cannot connect: .*gave up after 2 attempts"):
        made(BODY)
