"""HTTP/1.1 messages as real bytes, sans-IO, through h11.

* :class:`ServerConnection` — one server side of a TCP connection: feed it received bytes
  (in pieces of any size: one ``h11.Connection`` and the request being read live as long
  as the TCP connection), it calls the application for each complete request and returns
  the response bytes. It enforces :class:`Limits`: header bytes (431, h11's
  ``max_incomplete_event_size``), body bytes (413, from ``Content-Length`` before the body
  is read, or while reading a chunked body), chunks in a body (413: each costs the parser
  an event), a per-request deadline from the request's first byte (408; slowloris) and an
  idle keep-alive deadline (quiet close). A request framed both by ``Content-Length`` and
  ``Transfer-Encoding`` gets a 400 and the connection is closed (RFC 9112 §6.3: what
  follows it could be a smuggled request). Pipelined requests are answered at most
  ``max_pipelined`` per call; the rest wait (unparsed, :attr:`ServerConnection.backlog`)
  for :meth:`ServerConnection.resume`, so an engine can answer one per turn and read no
  more while any wait. A peer's protocol error gets a 400; any exception of the
  application gets a 500 and the connection stays usable. Every rejection is counted in
  ``counts``.
* :class:`ClientConnection` — one client side: ``request(...)`` gives the bytes to write,
  ``receive(data)`` returns the :class:`Response` once it is complete; keep-alive cycles.

No sockets and no clock: the engines move the bytes (and add TLS) around these objects and
pass the time in (``now``); :meth:`ServerConnection.deadline` says when to call
:meth:`ServerConnection.on_timer`.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import h11

Headers = list[tuple[str, str]]

#: Reason phrases of the statuses the connection itself produces.
REASONS = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
           408: "Request Timeout", 409: "Conflict", 413: "Content Too Large",
           431: "Request Header Fields Too Large", 500: "Internal Server Error",
           503: "Service Unavailable", 505: "HTTP Version Not Supported"}


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400 parses to inf
        raise ValueError(f"number out of range: {text[:40]}")
    return value


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not valid JSON")


def parse_json(data: bytes) -> object:
    """Strict JSON: UTF-8, finite numbers only (no ``NaN``/``Infinity``, no ``1e400``), and
    nesting too deep for the decoder is a :class:`ValueError` like any other bad body."""
    try:
        return json.loads(data.decode("utf-8"), parse_float=_finite_float,
                          parse_constant=_no_constant)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    target: str
    headers: Headers
    body: bytes

    def header(self, name: str) -> str | None:
        name = name.lower()
        return next((v for k, v in self.headers if k.lower() == name), None)

    def json(self) -> object:
        """The body as JSON (:func:`parse_json`); ``ValueError`` when it is not."""
        return parse_json(self.body)


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    headers: Headers
    body: bytes

    def json(self) -> object:
        return json.loads(self.body.decode("utf-8"))


def json_response(status: int, obj: object, server: str,
                  headers: Sequence[tuple[str, str]] = ()) -> Response:
    body = json.dumps(obj, separators=(",", ":")).encode()
    return Response(status, [("Content-Type", "application/json"), ("Server", server),
                             *headers], body)


def error_bytes(status: int, message: str, headers: Sequence[tuple[str, str]] = ()) -> bytes:
    """A complete ``Connection: close`` error response, written without h11 (the
    connection is being given up, whatever state its parser is in)."""
    body = json.dumps({"error": message}, separators=(",", ":")).encode()
    lines = [f"HTTP/1.1 {status} {REASONS.get(status, '')}",
             "Content-Type: application/json", f"Content-Length: {len(body)}",
             "Connection: close", *(f"{k}: {v}" for k, v in headers)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


App = Callable[[Request, float], Response]


def _head_size(request: h11.Request) -> int:
    """Bytes of a request line and headers as sent (give or take whitespace)."""
    return (len(request.method) + len(request.target) + 12
            + sum(len(k) + len(v) + 4 for k, v in request.headers) + 2)


def _pairs(headers: h11._headers.Headers) -> Headers:
    return [(k.decode("latin-1"), v.decode("latin-1")) for k, v in headers]


@dataclass(frozen=True, slots=True)
class Limits:
    """What one server connection accepts. Times are in seconds of node time."""

    max_header: int = 16 * 1024  # request line + headers (h11 max_incomplete_event_size)
    max_body: int = 64 * 1024  # request body bytes (Content-Length or chunked total)
    max_chunks: int = 256  # chunks in one chunked body (1-byte chunks: an event per byte)
    max_pipelined: int = 16  # requests one receive (or resume) answers; the rest wait
    request_timeout: float = 10.0  # a whole request, from its first byte (or the accept)
    idle_timeout: float = 75.0  # keep-alive: quiet between requests (nginx's default)

    def __post_init__(self) -> None:
        if self.max_header < 1 or self.max_body < 0:
            raise ValueError("max_header must be >= 1 and max_body >= 0")
        if self.max_chunks < 1 or self.max_pipelined < 1:
            raise ValueError("max_chunks and max_pipelined must be >= 1")
        if not (self.request_timeout > 0 and self.idle_timeout > 0):
            raise ValueError("timeouts must be > 0")


class ServerConnection:
    """Server side of one HTTP/1.1 connection (keep-alive, one request at a time).

    ``now`` is the node time the connection was accepted: a connection that sends nothing
    is closed when ``request_timeout`` has passed. Counters (in ``counts``, created only
    when something happens): ``malformed`` (400 from the parser, 505), ``headers_too_large``
    (431), ``body_too_large`` (413), ``request_timeout`` (408), ``idle_timeout`` (quiet
    close), ``aborted`` (EOF in the middle of a request), ``handler_error`` (500),
    ``ambiguous_framing`` (400: Content-Length and Transfer-Encoding), ``too_many_chunks``
    (413). The owner may take them (and clear ``counts``) at any time.
    """

    def __init__(self, app: App, limits: Limits | None = None, now: float = 0.0) -> None:
        self.app = app
        self.limits = limits or Limits()
        self.conn = h11.Connection(h11.SERVER,
                                   max_incomplete_event_size=self.limits.max_header)
        self.counts: Counter[str] = Counter()
        self.requests = 0
        self.closed = False
        self._request: h11.Request | None = None  # the request being read, across reads
        self._body = bytearray()
        self._chunks = 0  # chunks of the body being read
        self._stopped = False  # answered as many as one call may, with more received
        self._idle = False  # between requests with nothing received (else a request runs)
        self._deadline: float | None = now + self.limits.request_timeout

    def deadline(self) -> float | None:
        """Node time at which :meth:`on_timer` has something to do (None: nothing)."""
        return None if self.closed else self._deadline

    def on_timer(self, now: float) -> bytes:
        """The deadline passed: a half-received request gets a 408, an idle connection is
        closed quietly. Returns the bytes to write (``closed`` is then set)."""
        if self.closed or self._deadline is None or now < self._deadline:
            return b""
        self.closed = True
        started = (self._request is not None or bool(self.conn.trailing_data[0])
                   or self.conn.their_state is not h11.IDLE)
        if self._idle or not started:
            self.counts["idle_timeout"] += 1
            return b""
        self.counts["request_timeout"] += 1
        return error_bytes(408, "request not received in time")

    @property
    def backlog(self) -> int:
        """Bytes received and not yet parsed, after a call answered as many requests as it
        may: :meth:`resume` answers the next (0: nothing waits for it)."""
        return len(self.conn.trailing_data[0]) if self._stopped and not self.closed else 0

    def receive(self, data: bytes, now: float, most: int | None = None) -> bytes:
        """Bytes received (``b""`` = EOF) → bytes to write back (maybe empty): the answers
        to at most ``most`` requests (default ``limits.max_pipelined``)."""
        if self.closed:
            return b""
        if not data and (self._request is not None or self.conn.trailing_data[0]):
            self.counts["aborted"] += 1  # the peer gave up half-way through a request
            self.closed = True
            return b""
        if data and self._idle:  # the first byte of the next request starts its clock
            self._idle = False
            self._deadline = now + self.limits.request_timeout
        self.conn.receive_data(data)
        return self._process(now, most)

    def resume(self, now: float, most: int | None = None) -> bytes:
        """Answer the next pipelined requests already received (see :attr:`backlog`)."""
        if self.closed or not self._stopped:
            return b""
        return self._process(now, most)

    def overflow(self) -> bytes:
        """Give the connection up: its peer has too many pipelined requests waiting (503,
        counted as ``pipeline_overflow``)."""
        self.counts["pipeline_overflow"] += 1
        self.closed = True
        self._request = None
        return error_bytes(503, "too many pipelined requests", [("Retry-After", "1")])

    def _process(self, now: float, most: int | None) -> bytes:
        """Parse what was received; answer at most ``most`` requests."""
        most = most or self.limits.max_pipelined
        self._stopped = False
        answered = 0
        out = bytearray()
        while not self.closed:
            if answered >= most:
                self._stopped = bool(self.conn.trailing_data[0])
                break
            try:
                event = self.conn.next_event()
            except h11.RemoteProtocolError as exc:
                status = exc.error_status_hint
                self.counts["headers_too_large" if status == 431 else "malformed"] += 1
                out += self._fail(status, "request header fields too large" if status == 431
                                  else "bad request")
                break
            if event is h11.NEED_DATA or event is h11.PAUSED:
                break
            if isinstance(event, h11.ConnectionClosed):
                self.closed = True
            elif isinstance(event, h11.Request):
                self._request, self._body, self._chunks = event, bytearray(), 0
                length = next((v for k, v in event.headers if k == b"content-length"), None)
                if event.http_version not in (b"1.0", b"1.1"):
                    self.counts["malformed"] += 1
                    out += self._fail(505, "HTTP/1.0 and HTTP/1.1 only")
                elif length is not None and any(k == b"transfer-encoding"
                                                for k, _ in event.headers):
                    self.counts["ambiguous_framing"] += 1  # RFC 9112 §6.3: maybe smuggling
                    out += self._fail(400, "both Content-Length and Transfer-Encoding")
                elif _head_size(event) > self.limits.max_header:
                    # h11 enforces the limit only on a head still incomplete; a head that
                    # arrived whole in one read is measured here
                    self.counts["headers_too_large"] += 1
                    out += self._fail(431, "request header fields too large")
                elif length is not None and int(length) > self.limits.max_body:
                    self.counts["body_too_large"] += 1  # refused before reading the body
                    out += self._fail(413, f"body over {self.limits.max_body} bytes")
            elif isinstance(event, h11.Data):
                self._chunks += event.chunk_start
                if self._chunks > self.limits.max_chunks:
                    self.counts["too_many_chunks"] += 1
                    out += self._fail(413, f"body in over {self.limits.max_chunks} chunks")
                elif len(self._body) + len(event.data) > self.limits.max_body:
                    self.counts["body_too_large"] += 1  # chunked: counted while reading
                    out += self._fail(413, f"body over {self.limits.max_body} bytes")
                else:
                    self._body += event.data
            elif isinstance(event, h11.EndOfMessage) and self._request is not None:
                out += self._respond(now)
                answered += 1
        if not self.closed and not self._idle and self._deadline is not None \
                and now >= self._deadline:  # bytes keep coming, the request never ends
            out += self.on_timer(now)
        return bytes(out)

    def _respond(self, now: float) -> bytes:
        assert self._request is not None
        request, body = self._request, bytes(self._body)
        self._request, self._body = None, bytearray()
        self.requests += 1
        req = Request(request.method.decode("latin-1"), request.target.decode("latin-1"),
                      _pairs(request.headers), body)
        try:
            data = self._send(self.app(req, now))
        except Exception:  # the application's bug is contained: 500, keep serving
            self.counts["handler_error"] += 1
            if self.conn.our_state is not h11.SEND_RESPONSE:
                self.closed = True  # half a response went out: nothing else can follow
                return b""
            data = self._send(Response(500, [("Content-Type", "application/json")],
                                       b'{"error":"internal error"}'))
        if self.conn.our_state is h11.MUST_CLOSE:
            self.closed = True
            return data
        self.conn.start_next_cycle()
        self._idle = not self.conn.trailing_data[0]  # a pipelined request may be waiting
        self._deadline = now + (self.limits.idle_timeout if self._idle
                                else self.limits.request_timeout)
        return data

    def _send(self, resp: Response) -> bytes:
        headers = [*resp.headers, ("Content-Length", str(len(resp.body)))]
        return (self.conn.send(h11.Response(status_code=resp.status, headers=headers))
                + self.conn.send(h11.Data(data=resp.body)) + self.conn.send(h11.EndOfMessage()))

    def _fail(self, status: int, message: str) -> bytes:
        """Give the connection up with an error response (whatever the parser's state)."""
        self.closed = True
        self._request = None
        return error_bytes(status, message)


class ClientConnection:
    """Client side of one HTTP/1.1 connection; requests go one after another."""

    def __init__(self, host: str) -> None:
        self.host = host
        self.conn = h11.Connection(h11.CLIENT)
        self._response: h11.Response | None = None
        self._body = bytearray()

    def request(self, method: str, target: str, headers: Headers, body: bytes = b"") -> bytes:
        if self.conn.our_state is h11.DONE and self.conn.their_state is h11.DONE:
            self.conn.start_next_cycle()
        all_headers = [("Host", self.host), *headers]
        if body or method in ("POST", "PUT"):
            all_headers.append(("Content-Length", str(len(body))))
        data = self.conn.send(h11.Request(method=method, target=target, headers=all_headers))
        if body:
            data += self.conn.send(h11.Data(data=body))
        return data + self.conn.send(h11.EndOfMessage())

    def receive(self, data: bytes) -> Response | None:
        """Feed bytes; the complete response once it has arrived. Raises on bad bytes."""
        self.conn.receive_data(data)
        while True:
            event = self.conn.next_event()
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return None
            if isinstance(event, h11.Response):
                self._response, self._body = event, bytearray()
            elif isinstance(event, h11.Data):
                self._body += event.data
            elif isinstance(event, h11.EndOfMessage) and self._response is not None:
                resp = Response(self._response.status_code, _pairs(self._response.headers),
                                bytes(self._body))
                self._response = None
                return resp
            elif isinstance(event, h11.ConnectionClosed):
                raise h11.RemoteProtocolError("connection closed before the response ended")

    @property
    def reusable(self) -> bool:
        return self.conn.our_state is h11.DONE and self.conn.their_state is h11.DONE
