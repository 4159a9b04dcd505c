"""A deterministic stand-in for an OpenAI-compatible chat server, on 127.0.0.1.

**It is not a model and nothing it says measures one.** It exists so that the LLM steps'
transport, prompts, parsing and error handling (:mod:`sim.retrieval.llm`) are exercised
over real HTTP where no model can run. It answers ``POST …/chat/completions`` by rules
read off the testbed's own prompts:

* a candidate list (``1. text`` lines, or ``- name: text`` lines) under a ``User task:``
  or ``User query:`` line: the candidates sharing the most words with the task, best
  first, at most the prompt's ``top **k**``, as numbers or names; ``other`` when none
  shares a word;
* a group-naming prompt (``topologies.llmlabels``): ``label:`` the two most frequent
  words of the listed tools, ``summary:`` the most frequent ones;
* anything else: ``other``.

It can be told to misbehave, once per queued fault, in order (``--fail`` or
:meth:`StandIn.fail`, or ``POST /stand-in/faults {"faults": [...]}``): see :data:`FAULTS`.

``python3 -m sim.retrieval.standin --port 8089`` serves until interrupted; tests use
:class:`StandIn` as a context manager (port 0: any free one).
"""

from __future__ import annotations

import argparse
import json
import re
import threading
from collections import Counter, deque
from collections.abc import Iterable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sim.retrieval.llm import is_loopback

#: what a queued fault does to the next request
FAULTS: dict[str, str] = {
    "500": "HTTP 500 with a JSON error body",
    "503": "HTTP 503",
    "429": "HTTP 429 Too Many Requests with Retry-After: 0",
    "400": "HTTP 400 (not worth a retry)",
    "malformed": "HTTP 200 with a body that is not JSON",
    "not-object": "HTTP 200 with a JSON list",
    "empty": "a reply with no choices",
    "no-content": "a choice without message content",
    "prose": "the answer wrapped in prose with junk: an out-of-range number and a repeat",
    "think": "the answer after a <think> block",
    "junk": "an answer naming no candidate",
    "slow": "the reply after --slow-seconds",
    "huge": "a reply larger than --huge-bytes, with its Content-Length",
    "huge-stream": "a reply larger than --huge-bytes, without a Content-Length",
    "drop": "the connection closed without a reply",
    # hostile endpoints (a client must not leak its key to them, nor wait on them forever)
    **{code: f"HTTP {code} to --redirect-to (another host)"
       for code in ("301", "302", "303", "307", "308")},
    "echo-401": "HTTP 401 whose text body echoes the request's headers (Authorization too)",
    "echo-500": "HTTP 500 whose JSON error echoes the request's headers",
    "echo-text": "HTTP 200 with a body that is not JSON and echoes the request's headers",
    "echo-error": "HTTP 200 with a JSON error echoing the request's headers",
    "echo-answer": "an answer that echoes the request's headers",
    "trickle": "a quick status line and headers, then the body one byte per --trickle-seconds",
    "trickle-head": "the whole reply, status line first, one byte per --trickle-seconds",
}
REDIRECTS = frozenset({"301", "302", "303", "307", "308"})

NAME = "stand-in"
LABEL_MARKER = "Name this group of tools"  # topologies.llmlabels.LABEL_PROMPT starts so

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset((
    "and", "are", "can", "for", "from", "has", "have", "into", "its", "that", "the", "this",
    "tool", "tools", "use", "used", "uses", "using", "via", "when", "which", "with", "you",
    "your"))
_TASK = re.compile(r"^User (?:task|query):\s*(.*)$", re.MULTILINE)
_TOP = re.compile(r"top \*\*(\d+)\*\*")
_NUMBERED = re.compile(r"^(\d+)\.\s+(.*)$")
_NAMED = re.compile(r"^- ([^:\s][^:]*):\s*(.*)$")


def words(text: str) -> list[str]:
    """Lower-case words of three or more characters, without common English ones."""
    return [w for w in _WORD.findall(text.lower()) if len(w) > 2 and w not in _STOP]


def candidate_lines(prompt: str) -> list[str]:
    """The lines between the prompt's ``Candidate …`` header and its ``Ranking rules``."""
    out: list[str] = []
    inside = False
    for line in prompt.splitlines():
        if line.startswith("Candidate"):
            inside = True
        elif line.startswith("Ranking rules") or line.startswith("- Ranking rules"):
            inside = False
        elif inside:
            out.append(line)
    return out


def rank_answer(prompt: str) -> str:
    """The stand-in's answer to a candidate-list prompt (see the module docstring)."""
    task = set(words(m.group(1))) if (m := _TASK.search(prompt)) else set()
    top = int(m.group(1)) if (m := _TOP.search(prompt)) else 5
    scored: list[tuple[int, int, str]] = []
    for position, line in enumerate(candidate_lines(prompt)):
        numbered, named = _NUMBERED.match(line), _NAMED.match(line)
        if numbered:
            token, text = numbered.group(1), numbered.group(2)
        elif named:
            token, text = named.group(1).strip(), named.group(2)
        else:
            continue
        shared = len(task & set(words(text)) | task & set(words(token)))
        if shared:
            scored.append((-shared, position, token))
    picks = [token for _, _, token in sorted(scored)[: max(top, 1)]]
    return ", ".join(picks) or "other"


def label_answer(prompt: str) -> str:
    """The stand-in's answer to a group-naming prompt: the most frequent words."""
    body = prompt.split("\n", 1)[1] if "\n" in prompt else prompt
    tool_lines = [line for line in body.splitlines() if line.startswith("- ")]
    counts = Counter(w for line in tool_lines for w in words(line))
    common = [w for w, _ in sorted(counts.items(), key=lambda x: (-x[1], x[0]))]
    if not common:
        return "label: misc\nsummary: miscellaneous tools"
    return f"label: {'-'.join(common[:2])}\nsummary: tools for {', '.join(common[:8])}"


def answer(prompt: str) -> str:
    """What the stand-in answers to one user message."""
    if prompt.startswith(LABEL_MARKER):
        return label_answer(prompt)
    if _TASK.search(prompt):
        return rank_answer(prompt)
    return "other"


def completion(content: str, prompt: str) -> dict[str, Any]:
    """A chat-completions reply carrying ``content``."""
    return {"id": "stand-in-0", "object": "chat.completion", "model": NAME,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": (len(prompt) + 3) // 4,
                      "completion_tokens": (len(content) + 3) // 4}}


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "tooldns-stand-in/1"

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.owner.verbose:
            super().log_message(format, *args)

    def _send(self, status: int, body: bytes, headers: Sequence[tuple[str, str]] = (),
              length: bool = True) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        if length:
            self.send_header("Content-Length", str(len(body)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, doc: object, headers: Sequence[tuple[str, str]] = ()) -> None:
        self._send(status, json.dumps(doc).encode(), headers)

    def _echo(self) -> str:
        """The request's headers, one per line, as a careless server would echo them (the
        credential it objects to first)."""
        items = sorted(self.headers.items(), key=lambda kv: kv[0].lower() != "authorization")
        return "".join(f"{k}: {v}\n" for k, v in items)

    def _trickle(self, status: int, body: bytes, head_too: bool) -> None:
        """A reply written one byte per ``trickle_seconds`` (the head at once unless
        ``head_too``); stops when the client goes away or the server stops."""
        owner = self.server.owner
        head = (f"HTTP/1.1 {status} OK\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
        self.close_connection = True
        try:
            if not head_too:
                self.wfile.write(head)
                self.wfile.flush()
            for byte in (head + body if head_too else body):
                if owner.stopping.wait(owner.trickle_seconds):
                    return
                self.wfile.write(bytes((byte,)))
                self.wfile.flush()
        except OSError:  # the client gave up
            return

    def do_GET(self) -> None:
        self.server.owner.saw(self)
        if self.path.rstrip("/").endswith("/models"):
            self._json(200, {"object": "list", "data": [{"id": NAME, "object": "model",
                                                         "owned_by": "tooldns-testbed"}]})
        else:
            self._json(404, {"error": {"message": f"no such path: {self.path}"}})

    def do_POST(self) -> None:
        owner = self.server.owner
        owner.saw(self)
        try:
            size = int(self.headers.get("Content-Length") or 0)
            doc = json.loads(self.rfile.read(size) or b"null")
        except ValueError:
            self._json(400, {"error": {"message": "request body is not JSON"}})
            return
        if self.path.rstrip("/") == "/stand-in/faults":
            faults = doc.get("faults") if isinstance(doc, dict) else None
            try:
                owner.fail(*(faults or ()))
            except ValueError as exc:
                self._json(400, {"error": {"message": str(exc)}})
                return
            self._json(200, {"queued": list(owner.pending())})
            return
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._json(404, {"error": {"message": f"no such path: {self.path}"}})
            return
        messages = doc.get("messages") if isinstance(doc, dict) else None
        if not isinstance(messages, list) or not messages:
            self._json(400, {"error": {"message": "messages: a non-empty list is needed"}})
            return
        prompt = "\n".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
        owner.record(doc, self.headers.get("Authorization"))
        self._reply(owner.next_fault(), prompt)

    def _reply(self, fault: str | None, prompt: str) -> None:
        owner = self.server.owner
        if fault == "drop":
            self.close_connection = True
            self.connection.close()
            return
        if fault in REDIRECTS:
            self.close_connection = True
            self._send(int(fault), b"", [("Location", owner.redirect_to or "/")])
            return
        if fault == "echo-401":
            self._send(401, f"unauthorized; you sent:\n{self._echo()}".encode())
            return
        if fault in ("echo-500", "echo-error"):
            doc = {"error": {"message": f"cannot serve a request with headers {self._echo()}"}}
            self._json(500 if fault == "echo-500" else 200, doc)
            return
        if fault == "echo-text":
            self._send(200, f"<html>request headers:\n{self._echo()}</html>".encode())
            return
        if fault in ("trickle", "trickle-head"):
            body = json.dumps(completion(answer(prompt), prompt)).encode()
            self._trickle(200, body, head_too=fault == "trickle-head")
            return
        if fault in ("500", "503", "400"):
            self._json(int(fault), {"error": {"message": f"stand-in fault {fault}"}})
            return
        if fault == "429":
            self._json(429, {"error": {"message": "stand-in: rate limited"}},
                       [("Retry-After", "0")])
            return
        if fault == "malformed":
            self._send(200, b'{"choices": [{"message": ')
            return
        if fault == "not-object":
            self._json(200, ["stand-in"])
            return
        if fault == "empty":
            self._json(200, {"id": "stand-in-0", "object": "chat.completion", "choices": []})
            return
        if fault == "no-content":
            self._json(200, {"choices": [{"index": 0, "message": {"role": "assistant"}}]})
            return
        if fault in ("huge", "huge-stream"):
            pad = "x" * owner.huge_bytes
            body = json.dumps(completion(answer(prompt), prompt) | {"pad": pad}).encode()
            self._send(200, body, length=fault == "huge")
            return
        if fault == "slow":
            owner.stopping.wait(owner.slow_seconds)
        content = answer(prompt)
        if fault == "prose":
            first = content.split(",")[0].strip()
            content = f"Sure! Ranking (best first): 999, {content}, {first}. Hope this helps."
        elif fault == "think":
            content = f"<think>The user wants 1, 2 and 3.</think>\n{content}"
        elif fault == "junk":
            content = "I am not able to help with that request."
        elif fault == "echo-answer":
            content = f"{content}\n(you sent {self._echo()})"
        self._json(200, completion(content, prompt))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: StandIn


class StandIn:
    """The stand-in server (not a model): ``url`` is its ``…/v1`` base URL once started.

    ``requests`` keeps every chat request body received and ``auth`` each one's
    Authorization header (tests check what the client sends); ``seen`` every request's
    method, path and Authorization header, whatever it asked for. ``host`` may be any loopback
    address (127.0.0.2 is "another host" for a redirect)."""

    def __init__(self, port: int = 0, faults: Iterable[str] = (), slow_seconds: float = 2.0,
                 huge_bytes: int = 8 * 1024 * 1024, host: str = "127.0.0.1",
                 verbose: bool = False, redirect_to: str | None = None,
                 trickle_seconds: float = 1.0) -> None:
        if not is_loopback(host):
            raise ValueError("the stand-in listens on loopback only (127.0.0.1)")
        self.host = host
        self.port = port
        self.slow_seconds = slow_seconds
        self.huge_bytes = huge_bytes
        self.redirect_to = redirect_to
        self.trickle_seconds = trickle_seconds
        self.verbose = verbose
        self.requests: list[dict] = []
        self.auth: list[str | None] = []
        self.seen: list[tuple[str, str, str | None]] = []
        self.stopping = threading.Event()
        self._faults: deque[str] = deque()
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.fail(*faults)

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the stand-in is not started")
        return f"http://{self.host}:{self._server.server_address[1]}/v1"

    def fail(self, *faults: str) -> None:
        """Queue faults, one per coming chat request, in order (see :data:`FAULTS`)."""
        unknown = [f for f in faults if f not in FAULTS]
        if unknown:
            raise ValueError(f"unknown stand-in faults {unknown}; choose from {list(FAULTS)}")
        with self._lock:
            self._faults.extend(faults)

    def clear(self) -> None:
        """Drop the faults still queued."""
        with self._lock:
            self._faults.clear()

    def pending(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(self._faults)

    def next_fault(self) -> str | None:
        with self._lock:
            return self._faults.popleft() if self._faults else None

    def saw(self, handler: BaseHTTPRequestHandler) -> None:
        with self._lock:
            self.seen.append((handler.command, handler.path,
                              handler.headers.get("Authorization")))

    def record(self, body: dict, auth: str | None) -> None:
        with self._lock:
            self.requests.append(body)
            self.auth.append(auth)

    def start(self) -> StandIn:
        server = _Server((self.host, self.port), _Handler)
        server.owner = self
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="stand-in",
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> StandIn:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python3 -m sim.retrieval.standin",
        description="A deterministic stand-in for an OpenAI-compatible chat server on "
        "127.0.0.1 (NOT a model: it ranks candidates by words shared with the task and "
        "names groups by their most frequent words), for testing the LLM client and "
        "prompts. Faults: " + "; ".join(f"{k}: {v}" for k, v in FAULTS.items()))
    p.add_argument("--port", type=int, default=8089, help="port on 127.0.0.1 (0: any free)")
    p.add_argument("--fail", default="", help="comma-separated faults for the first requests")
    p.add_argument("--slow-seconds", type=float, default=2.0, help="delay of a slow fault")
    p.add_argument("--huge-bytes", type=int, default=8 * 1024 * 1024,
                   help="padding of a huge fault")
    p.add_argument("--redirect-to", metavar="URL", help="where a redirect fault points")
    p.add_argument("--trickle-seconds", type=float, default=1.0,
                   help="seconds per byte of a trickle fault")
    p.add_argument("--host", default="127.0.0.1", help="a loopback address to listen on")
    p.add_argument("--verbose", action="store_true", help="log every request")
    args = p.parse_args(argv)
    faults = [f for f in args.fail.split(",") if f]
    try:
        server = StandIn(args.port, faults, args.slow_seconds, args.huge_bytes, args.host,
                         verbose=args.verbose, redirect_to=args.redirect_to,
                         trickle_seconds=args.trickle_seconds).start()
    except (ValueError, OSError) as exc:
        p.error(str(exc))
    print(f"stand-in (not a model) serving {server.url}/chat/completions", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
