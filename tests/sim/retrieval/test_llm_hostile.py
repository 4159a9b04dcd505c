"""The LLM client against hostile endpoints (issue 45): a redirect to another host gets
neither the key nor the request, a key echoed back never reaches an error, a repr or
``tooldns eval``'s stderr, and a reply trickled byte by byte meets the attempt's deadline.
The endpoints are the stand-in's hostile faults, threads on 127.0.0.1 (and 127.0.0.2 as
the other host)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodes.llmreply import LLMError, answer_text
from sim.cli.main import main
from sim.retrieval.llm import LLMClient
from sim.retrieval.standin import StandIn

KEY = "sk-issue45-0123456789abcdefXYZ"
BODY = {"messages": [{"role": "user", "content": "hello"}]}


@pytest.fixture(scope="module")
def elsewhere() -> Iterator[StandIn]:
    """The other host a redirect points at (it records any Authorization it gets)."""
    with StandIn(host="127.0.0.2") as server:
        yield server


@pytest.fixture(scope="module")
def hostile(elsewhere: StandIn) -> Iterator[StandIn]:
    with StandIn(redirect_to=f"{elsewhere.url}/chat/completions",
                 trickle_seconds=0.05) as server:
        yield server


@pytest.fixture(autouse=True)
def no_faults_left(hostile: StandIn) -> Iterator[None]:
    yield
    hostile.clear()


def client(url: str, **kw: object) -> LLMClient:
    options: dict = {"api_key": KEY, "timeout": 2.0, "retries": 1, "sleep": lambda s: None,
                     "key_env": ""}
    return LLMClient(url, **(options | kw))


def _leaks(text: str) -> bool:
    """Whether ``text`` shows the key or any 8-character piece of it."""
    return any(KEY[i:i + 8] in text for i in range(len(KEY) - 7))


@pytest.mark.parametrize("code", ["301", "302", "303", "307", "308"])
def test_a_redirect_is_not_followed(hostile: StandIn, elsewhere: StandIn, code: str) -> None:
    before = len(elsewhere.seen)
    hostile.fail(code)
    with pytest.raises(LLMError, match=rf"HTTP {code}.*redirects are not followed") as err:
        client(hostile.url)(BODY)
    assert "127.0.0.2" in str(err.value)  # where it pointed, so the user can check
    assert elsewhere.seen[before:] == []  # the other host got no request, no key
    assert not _leaks(str(err.value))


@pytest.mark.parametrize("fault", ["echo-401", "echo-500", "echo-text", "echo-error"])
def test_an_echoed_key_never_reaches_an_error(hostile: StandIn, fault: str) -> None:
    hostile.fail(fault, fault)  # echo-500 is retried once
    with pytest.raises(LLMError) as err:
        client(hostile.url)(BODY)
    assert hostile.auth[-1] == f"Bearer {KEY}"  # it was sent, and echoed back
    assert not _leaks(str(err.value)) and not _leaks(repr(err.value)), str(err.value)
    assert "[redacted]" in str(err.value)


def test_an_echoed_key_never_reaches_an_answer(hostile: StandIn) -> None:
    hostile.fail("echo-answer")
    reply = client(hostile.url)(BODY)
    assert not _leaks(json.dumps(reply)) and "[redacted]" in answer_text(reply)


def test_no_repr_shows_a_credential() -> None:
    made = LLMClient(f"http://user:pw-{KEY}@127.0.0.1:9/v1?key={KEY}", api_key=KEY)
    assert not _leaks(repr(made)) and not _leaks(str(made.stats()))
    assert "127.0.0.1:9" in repr(made)


@pytest.mark.parametrize("fault", ["trickle", "trickle-head"])
def test_a_trickled_reply_meets_the_attempt_deadline(hostile: StandIn, fault: str) -> None:
    """About 250 bytes at 20 bytes/s: no read waits 1 s, the whole reply would take 12 s."""
    hostile.fail(fault)
    start = time.monotonic()
    with pytest.raises(LLMError, match=r"no reply within 1 s"):
        client(hostile.url, timeout=1.0, retries=0)(BODY)
    assert time.monotonic() - start < 2.5
    made = client(hostile.url, timeout=1.0, retries=1)  # a trickle, then a quick reply
    hostile.fail(fault)
    assert answer_text(made(BODY)) == "other" and made.attempts == 2


def test_tooldns_eval_never_prints_an_echoed_key(hostile: StandIn, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("TOOLDNS_LLM_KEY", KEY)
    doc = {"name": "llm-hostile", "seed": 1,
           "dataset": {"source": "synthetic", "tools": 60, "branching": 3, "depth": 2,
                       "sample": 4},
           "taxonomy": {"kind": "categories"}, "methods": ["flat:llm"], "k": 3,
           "plots": False, "llm": {"url": hostile.url, "timeout": 5, "retries": 0}}
    path = tmp_path / "eval.yaml"
    path.write_text(json.dumps(doc))
    for fault in ("echo-401", "echo-text", "302"):
        hostile.fail(fault)
        code = main(["eval", str(path), "--out", str(tmp_path / "out")])
        captured = capsys.readouterr()
        assert code == 2, captured.err
        assert "LLM endpoint" in captured.err
        assert not _leaks(captured.err + captured.out), captured.err
        hostile.clear()
