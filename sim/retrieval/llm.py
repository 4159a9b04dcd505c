"""The one OpenAI-compatible chat client every LLM step uses (the ``llm`` scorer, the LLM
router, LLM taxonomy labelling, LLM-judged ``context``).

:class:`LLMClient` POSTs chat-completions request bodies to ``<base URL>/chat/completions``
over HTTP(S) with the standard library: a model name, an optional API key (given, or read
from the environment variable ``TOOLDNS_LLM_KEY``; sent only as the ``Authorization``
header to the endpoint itself: redirects are not followed, and the key is redacted from
whatever a server sends back before any of it is shown or returned), one total deadline
per attempt (connect, send, status, headers and body: a reply trickled byte by byte is cut
off), bounded retries with exponential backoff on 429, 5xx and connection errors or
timeouts (``Retry-After`` honoured up to a cap), and a bounded reply size. Every failure is
an :class:`nodes.llmreply.LLMError` naming the endpoint and the problem; nothing else
escapes a bad reply. See docs/llm.md.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import json
import os
import re
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nodes.llmreply import ChatTransport, LLMError, answer_text, snippet

__all__ = ["KEY_ENV", "LLMClient", "LLMError", "chat_endpoint", "openai_transport"]

#: the environment variable an API key is read from when none is given
KEY_ENV = "TOOLDNS_LLM_KEY"

#: HTTP statuses worth another attempt: rate limited, or the server's own trouble
RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})

#: not followed: the 3xx becomes an LLMError naming where it pointed
REDIRECTS = frozenset({301, 302, 303, 307, 308})

REDACTED = "[redacted]"
#: a credential in an echoed header, whatever key it is (``Authorization: Bearer x``,
#: ``Bearer x``, ``api-key: x``)
_CREDENTIAL = re.compile(
    r"(?i)(?>(\b(?:authorization|x-api-key|api[-_]?key)\s*[:=]\s*(?:(?:bearer|basic|token)\s+)?"
    r"|\bbearer\s+))(?!\[redacted\])[^\s,;\"'&<>]{4,}")
#: a key shorter than this is not scrubbed from answers (it would hit ordinary words)
MIN_SCRUBBED_KEY = 8


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


class _Watchdog:
    """One attempt's total deadline: ``seconds`` after entering, it shuts the attempt's
    socket down (through a duplicate, so a closed and reused descriptor is never touched),
    which ends whatever connect, read or write is blocked on it. Name resolution is not
    covered (the standard library's ``getaddrinfo`` cannot be interrupted)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.fired = False
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True

    def watch(self, sock: socket.socket) -> None:
        """Shut ``sock`` down at the deadline (at once if it has passed)."""
        dup = sock.dup()
        with self._lock:
            self._socks.append(dup)
            if not self.fired:
                return
        _shutdown(dup)

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            socks = list(self._socks)
        for sock in socks:
            _shutdown(sock)

    def __enter__(self) -> _Watchdog:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()
        with self._lock:
            socks, self._socks = self._socks, []
        for sock in socks:
            sock.close()


def _shutdown(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


class _Request(urllib.request.Request):
    """A request carrying its attempt's :class:`_Watchdog` to the connection it opens."""

    watchdog: _Watchdog | None = None


def _watched(cls: type[http.client.HTTPConnection], req: urllib.request.Request
             ) -> Callable[..., http.client.HTTPConnection]:
    """``cls`` whose sockets (to the server, or to a proxy) the request's watchdog holds."""
    watchdog = getattr(req, "watchdog", None)

    def make(host: str, **kw: Any) -> http.client.HTTPConnection:
        conn = cls(host, **kw)
        if watchdog is not None:
            def connect(address: tuple[str, int], *args: Any, **kwargs: Any
                        ) -> socket.socket:
                sock = socket.create_connection(address, *args, **kwargs)
                watchdog.watch(sock)
                return sock

            conn._create_connection = connect  # type: ignore[attr-defined]
        return conn

    return make


class _HTTPHandler(urllib.request.HTTPHandler):
    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_watched(http.client.HTTPConnection, req), req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_watched(http.client.HTTPSConnection, req), req)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Redirects are not followed: the 3xx reaches the client as an HTTP error (a redirect
    would carry the key, or the request, to wherever the server points)."""

    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str,
                         headers: Any, newurl: str) -> None:
        return None


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

    url: str = field(repr=False)  # may hold credentials (user:password@, ?key=)
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
        handlers: list[urllib.request.BaseHandler] = [_HTTPHandler(), _HTTPSHandler(),
                                                      _NoRedirect()]
        if is_loopback(host):
            handlers.append(urllib.request.ProxyHandler({}))
        self._opener = urllib.request.build_opener(*handlers)

    def __repr__(self) -> str:
        return (f"LLMClient(endpoint={self.endpoint!r}, model={self.model!r}, "
                f"timeout={self.timeout!r}, retries={self.retries!r}, "
                f"key={'set' if self.api_key else 'none'})")

    def redact(self, text: str) -> str:
        """``text`` without the key (and without any credential an echoed header shows)."""
        text = _CREDENTIAL.sub(lambda m: f"{m.group(1)}{REDACTED}", text)
        return text.replace(self.api_key, REDACTED) if self.api_key else text

    def _scrub(self, value: Any) -> Any:
        """A decoded reply with the key replaced in every string (an answer that echoes
        it must not carry it into results or messages)."""
        key = self.api_key
        if not key or len(key) < MIN_SCRUBBED_KEY:
            return value
        if isinstance(value, str):
            return value.replace(key, REDACTED)
        if isinstance(value, dict):
            return {self._scrub(k): self._scrub(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._scrub(v) for v in value]
        return value

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
                reply = self._scrub(self._exchange(data))
                answer_text(reply, self.endpoint)  # LLMError when there is no answer
            except _Retry as failed:
                if attempt == self.retries:
                    self.failures += 1
                    tries = "1 attempt" if attempt == 0 else f"{attempt + 1} attempts"
                    raise LLMError(self.endpoint, self.redact(
                        f"{failed.problem} (gave up after {tries})")) from None
                wait = failed.wait if failed.wait is not None else self.backoff * 2 ** attempt
                self.sleep(min(max(wait, 0.0), self.max_wait))
                continue
            except LLMError as exc:
                self.failures += 1
                raise LLMError(self.endpoint, self.redact(exc.problem)) from None
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
        """One attempt under one total deadline (:class:`_Watchdog`)."""
        late = f"no reply within {self.timeout:g} s"  # as a socket timeout says it
        with _Watchdog(self.timeout) as watchdog:
            try:
                reply = self._attempt(data, watchdog)
            except (_Retry, LLMError):
                if watchdog.fired:  # the deadline cut the exchange short, whatever broke
                    raise _Retry(late) from None
                raise
            if watchdog.fired:  # a body cut short may still have parsed
                raise _Retry(late)
            return reply

    def _attempt(self, data: bytes, watchdog: _Watchdog) -> dict:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = _Request(self.full_url, data, headers, method="POST")
        request.watchdog = watchdog
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
            if status in REDIRECTS:
                location = exc.headers.get("Location") or ""
                target = _public(urllib.parse.urljoin(self.full_url, location)) \
                    if location else "nowhere"
                raise LLMError(self.endpoint, f"{problem} to {target}: redirects are not "
                               f"followed (the key stays with the endpoint given; give the "
                               f"final URL if it moved)") from None
            text = snippet(self.redact(detail.decode("utf-8", "replace"))) if detail else ""
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
                           f"{snippet(self.redact(raw.decode('utf-8', 'replace')))!r}"
                           ) from None
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


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine (``localhost`` or a loopback address)."""
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
