"""HTTP/1.1 messages as real bytes, sans-IO, through h11.

* :class:`ServerConnection` — one server side of a TCP connection: feed it received bytes,
  it calls the application for each complete request and returns the response bytes.
  A peer's protocol error gets a 400 and the connection closes (counted by the caller).
* :class:`ClientConnection` — one client side: ``request(...)`` gives the bytes to write,
  ``receive(data)`` returns the :class:`Response` once it is complete; keep-alive cycles.

No sockets: the engines move the bytes (and add TLS) around these objects.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import h11

Headers = list[tuple[str, str]]


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
        return json.loads(self.body.decode("utf-8"))


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    headers: Headers
    body: bytes

    def json(self) -> object:
        return json.loads(self.body.decode("utf-8"))


def json_response(status: int, obj: object, server: str) -> Response:
    body = json.dumps(obj, separators=(",", ":")).encode()
    return Response(status, [("Content-Type", "application/json"), ("Server", server)], body)


App = Callable[[Request, float], Response]


def _pairs(headers: h11._headers.Headers) -> Headers:  # type: ignore[name-defined]
    return [(k.decode("latin-1"), v.decode("latin-1")) for k, v in headers]


class ServerConnection:
    """Server side of one HTTP/1.1 connection (keep-alive, one request at a time)."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.conn = h11.Connection(h11.SERVER)
        self.errors = 0
        self.requests = 0
        self.closed = False

    def receive(self, data: bytes, now: float) -> bytes:
        """Bytes received (``b""`` = EOF) → bytes to write back (maybe empty)."""
        if self.closed:
            return b""
        self.conn.receive_data(data)
        out = bytearray()
        request: h11.Request | None = None
        body = bytearray()
        while True:
            try:
                event = self.conn.next_event()
            except h11.RemoteProtocolError as exc:
                self.errors += 1
                out += self._error(exc.error_status_hint)
                break
            if event is h11.NEED_DATA or event is h11.PAUSED:
                if (event is h11.PAUSED and self.conn.our_state is h11.DONE
                        and self.conn.their_state is h11.DONE):
                    self.conn.start_next_cycle()
                    continue
                break
            if isinstance(event, h11.ConnectionClosed):
                self.closed = True
                break
            if isinstance(event, h11.Request):
                request, body = event, bytearray()
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage) and request is not None:
                self.requests += 1
                req = Request(request.method.decode(), request.target.decode("latin-1"),
                              _pairs(request.headers), bytes(body))
                out += self._send(self.app(req, now))
                request = None
                if self.conn.our_state is h11.MUST_CLOSE:
                    self.closed = True
                    break
                self.conn.start_next_cycle()
        return bytes(out)

    def _send(self, resp: Response) -> bytes:
        headers = [*resp.headers, ("Content-Length", str(len(resp.body)))]
        return (self.conn.send(h11.Response(status_code=resp.status, headers=headers))
                + self.conn.send(h11.Data(data=resp.body)) + self.conn.send(h11.EndOfMessage()))

    def _error(self, status: int) -> bytes:
        self.closed = True
        if self.conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return b""
        body = json.dumps({"error": "bad request"}).encode()
        return (self.conn.send(h11.Response(status_code=status, headers=[
            ("Content-Type", "application/json"), ("Content-Length", str(len(body))),
            ("Connection", "close")])) + self.conn.send(h11.Data(data=body))
            + self.conn.send(h11.EndOfMessage()))


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
