"""The one OpenAI-compatible chat client every LLM step uses (the ``llm`` scorer, the LLM
router, LLM taxonomy labelling, LLM-judged ``context``).

:class:`LLMClient` POSTs chat-completions request bodies to ``<base URL>/chat/completions``
over HTTP(S) with the standard library: a model name, an optional API key (given, or read
from the environment variable ``TOOLDNS_LLM_KEY``; sent only as the ``Authorization``
header, never logged or shown), a timeout per attempt, bounded retries with exponential
backoff on 429, 5xx and connection errors or timeouts (``Retry-After`` honoured up to a
cap), and a bounded reply size. Every failure is an :class:`nodes.llmreply.LLMError`
naming the endpoint and the problem; nothing else escapes a bad reply. See docs/llm.md.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field

from nodes.llmreply import ChatTransport, LLMError, answer_text, snippet

__all__ = ["KEY_ENV", "LLMClient", "LLMError", "chat_endpoint", "openai_transport"]

#: the environment variable an API key is read from when none is given
KEY_ENV = "TOOLDNS_LLM_KEY"

#: HTTP statuses worth another attempt: rate limited, or the server's own trouble
RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})


def chat_endpoint(url: str) -> str:
    """``…/chat/completions`` for a base URL (``http://127.0.0.1:8080/v1``) or the full one."""
    endpoint = url.strip().rstrip("/")
    if not endpoint.endswith("/chat/completions"):
        endpoint += "/chat/completions"
    return endpoint


def _public(endpoint: str) -> str:
    """The endpoint as errors name it: no user, password or query string (keys hide there)."""
    parts = urllib.parse.urlsplit(endpoint)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))


class _Retry(Exception):
    """One failed attempt that another may fix (``wait``: the server's Retry-After)."""

    def __init__(self, problem: str, wait: float | None = None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.wait = wait


@dataclass
class LLMClient:
    """An OpenAI-compatible chat-completions endpoint; calling it is a
    :data:`nodes.llmreply.ChatTransport` (request body in, checked reply out).

    ``url`` is the base URL (``…/v1``) or the full ``…/chat/completions`` one; ``model``
    fills request bodies that name none (or name ``default``); ``timeout`` is seconds per
    attempt; ``retries`` further attempts after a 408/429/5xx, a refused or reset
    connection or a timeout, waiting ``backoff · 2^attempt`` seconds (or the server's
    ``Retry-After``, at most ``max_wait``); ``max_bytes`` the largest reply body read
    (larger ones are refused). ``calls``, ``attempts`` and ``failures`` count exchanges.
    """

    url: str
    model: str = "default"
    api_key: str | None = field(default=None, repr=False)
    timeout: float = 60.0
    retries: int = 2
    backoff: float = 0.5
    max_wait: float = 30.0
    max_bytes: int = 4 * 1024 * 1024
    key_env: str = KEY_ENV
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)
    calls: int = field(default=0, init=False)
    attempts: int = field(default=0, init=False)
    failures: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        if not self.url or not self.url.strip():
            raise ValueError("an LLM endpoint needs a URL (e.g. http://127.0.0.1:8080/v1)")
        scheme = urllib.parse.urlsplit(self.url.strip()).scheme
        if scheme not in ("http", "https"):
            raise ValueError(f"LLM endpoint {_public(self.url)!r}: only http:// and https:// "
                             f"URLs are supported")
        if self.timeout <= 0 or self.retries < 0 or self.max_bytes < 1:
            raise ValueError("LLM client: timeout > 0, retries >= 0 and max_bytes >= 1")
        if self.api_key is None and self.key_env:
            self.api_key = os.environ.get(self.key_env) or None
        self.full_url = chat_endpoint(self.url)
        #: the endpoint as messages name it (without credentials)
        self.endpoint = _public(self.full_url)
        host = urllib.parse.urlsplit(self.full_url).hostname or ""
        # a local server is reached directly, whatever http_proxy says
        handlers = [urllib.request.ProxyHandler({})] if _loopback(host) else []
        self._opener = urllib.request.build_opener(*handlers)

    # ---------------------------------------------------------------- ChatTransport

    def __call__(self, body: dict) -> dict:
        """POST one request body; the decoded reply, checked to carry an answer
        (``choices[0].message.content``). LLMError on any failure, after the retries."""
        if body.get("model") in (None, "", "default"):
            body = {**body, "model": self.model}
        try:
            data = json.dumps(body).encode("utf-8")
        except (TypeError, ValueError) as exc:
            raise LLMError(self.endpoint, f"request body is not JSON: {exc}") from None
        self.calls += 1
        for attempt in range(self.retries + 1):
            self.attempts += 1
            try:
                reply = self._exchange(data)
            except _Retry as failed:
                if attempt == self.retries:
                    self.failures += 1
                    tries = "1 attempt" if attempt == 0 else f"{attempt + 1} attempts"
                    raise LLMError(self.endpoint, f"{failed.problem} (gave up after "
                                   f"{tries})") from None
                wait = failed.wait if failed.wait is not None else self.backoff * 2 ** attempt
                self.sleep(min(max(wait, 0.0), self.max_wait))
                continue
            except LLMError:
                self.failures += 1
                raise
            answer_text(reply, self.endpoint)  # LLMError when there is no answer
            return reply
        raise AssertionError("unreachable")  # pragma: no cover

    def complete(self, prompt: str, **options: object) -> str:
        """The answer to one user message (``options``: more request fields, e.g.
        ``max_tokens``), without a reasoning model's ``<think>`` block."""
        body = {"model": self.model, "temperature": 0,
                "messages": [{"role": "user", "content": prompt}], **options}
        return answer_text(self(body), self.endpoint)

    def stats(self) -> dict[str, object]:
        """The endpoint (without credentials), model and counters, for result files."""
        return {"endpoint": self.endpoint, "model": self.model, "calls": self.calls,
                "attempts": self.attempts, "failures": self.failures}

    # ---------------------------------------------------------------- one attempt

    def _exchange(self, data: bytes) -> dict:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.full_url, data, headers, method="POST")
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                raw = self._read(response)
        except urllib.error.HTTPError as exc:
            status = exc.code
            try:
                detail = self._read(exc)
            except (LLMError, OSError, http.client.HTTPException):
                detail = b""
            finally:
                exc.close()
            problem = f"HTTP {status} {exc.reason}".rstrip()
            text = snippet(detail.decode("utf-8", "replace")) if detail else ""
            if text:
                problem += f": {text}"
            if status in RETRY_STATUS:
                raise _Retry(problem, _retry_after(exc.headers.get("Retry-After"))) from None
            raise LLMError(self.endpoint, problem) from None
        except TimeoutError:
            raise _Retry(f"no reply within {self.timeout:g} s") from None
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, TimeoutError):
                raise _Retry(f"no reply within {self.timeout:g} s") from None
            raise _Retry(f"cannot connect: {reason}") from None
        except (ConnectionError, http.client.HTTPException, OSError) as exc:
            raise _Retry(f"connection failed: {type(exc).__name__}: {exc}") from None
        except ValueError as exc:  # a URL urllib cannot use
            raise LLMError(self.endpoint, f"bad URL: {exc}") from None
        try:
            reply = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise LLMError(self.endpoint, f"reply is not JSON: "
                           f"{snippet(raw.decode('utf-8', 'replace'))!r}") from None
        if not isinstance(reply, dict):
            raise LLMError(self.endpoint, f"reply is a JSON {type(reply).__name__}, "
                           f"not an object")
        return reply

    def _read(self, response: http.client.HTTPResponse | urllib.error.HTTPError) -> bytes:
        """The body, refusing one larger than ``max_bytes`` (by its Content-Length when it
        gives one, else by reading one byte more than allowed)."""
        length = response.headers.get("Content-Length")
        if length is not None and length.strip().isdigit() and int(length) > self.max_bytes:
            raise LLMError(self.endpoint, f"reply of {int(length)} bytes is larger than the "
                           f"{self.max_bytes}-byte limit")
        raw = response.read(self.max_bytes + 1)
        if len(raw) > self.max_bytes:
            raise LLMError(self.endpoint, f"reply is larger than the {self.max_bytes}-byte "
                           f"limit")
        return raw


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header given in seconds (dates are ignored)."""
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def openai_transport(url: str, api_key: str | None = None, timeout: float = 60.0
                     ) -> ChatTransport:
    """An :class:`LLMClient` for ``url`` (kept for callers of the earlier bare transport)."""
    return LLMClient(url, api_key=api_key, timeout=timeout)
