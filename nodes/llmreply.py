"""The answer of one OpenAI-style chat exchange, or an :class:`LLMError` saying what is wrong.

Transport-free: every LLM step (the ``llm`` scorer, the LLM router, taxonomy labelling)
reads a reply through :func:`answer_text`, whatever transport produced it
(``sim.retrieval.llm.LLMClient`` over HTTP, or a test's function).
"""

from __future__ import annotations

import re
from collections.abc import Callable

#: ``chat(request_body) -> response_body``: one OpenAI ``/chat/completions`` exchange.
ChatTransport = Callable[[dict], dict]

#: a reasoning model's hidden thoughts (llama.cpp, vLLM and Ollama pass them on for
#: DeepSeek-R1- and Qwen3-style models): never part of the answer
_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)


class LLMError(RuntimeError):
    """An LLM endpoint could not be used: it was unreachable, answered with an HTTP error,
    with a body that is not a chat completion, or with an answer that cannot be read.

    ``endpoint`` names the server (never a key); the message says what went wrong."""

    def __init__(self, endpoint: str, problem: str) -> None:
        super().__init__(f"LLM endpoint {endpoint or '(unnamed)'}: {problem}")
        self.endpoint = endpoint
        self.problem = problem


def snippet(text: str, limit: int = 120) -> str:
    """``text`` shortened to ``limit`` characters on one line, for error messages."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def answer_text(reply: object, endpoint: str = "") -> str:
    """The assistant's answer in a chat-completions reply (``choices[0].message.content``),
    without a reasoning model's ``<think>`` block; LLMError when the reply has none."""
    if not isinstance(reply, dict):
        raise LLMError(endpoint, f"reply is a JSON {type(reply).__name__}, not an object")
    error = reply.get("error")
    if error:
        message = error.get("message", error) if isinstance(error, dict) else error
        raise LLMError(endpoint, f"reply is an error: {snippet(str(message))}")
    choices = reply.get("choices")
    if not isinstance(choices, list) or not choices:
        raise LLMError(endpoint, "reply has no choices")
    first = choices[0]
    message = first.get("message") if isinstance(first, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str):
        raise LLMError(endpoint, "reply's first choice has no message content")
    return _THINK.sub("", content).strip()


def prompt_tokens(reply: dict, fallback: int) -> int:
    """The reply's ``usage.prompt_tokens`` when it is a number, else ``fallback``."""
    usage = reply.get("usage")
    value = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 \
        else fallback
