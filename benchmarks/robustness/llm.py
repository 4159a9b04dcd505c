"""The LLM client (``sim.retrieval.llm.LLMClient``) against hostile OpenAI-compatible
endpoints: redirects to another host, the key echoed back in errors, bodies that are not
JSON and answers, a reply trickled byte by byte; and ``tooldns eval``'s stderr on an
echoing 401. See bench_robustness.py."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.robustness.serving import ROOT
from benchmarks.robustness.table import table
from sim.retrieval.standin import StandIn

#: a made-up key: what the endpoints get, and what must never be shown
KEY = "sk-bench45-0123456789abcdefghijKLMN"
#: (case, the stand-in's fault); each case is one request, retries=0
CASES = [("redirect 301", "301"), ("redirect 302", "302"), ("redirect 303", "303"),
         ("redirect 307", "307"), ("401 echoing headers", "echo-401"),
         ("500 echoing headers", "echo-500"), ("non-JSON body echoing headers", "echo-text"),
         ("JSON error echoing headers", "echo-error"), ("answer echoing headers", "echo-answer"),
         ("trickled body", "trickle"), ("trickled status line and headers", "trickle-head")]

#: one exchange in a child process, from the tree given (its own sim.retrieval.llm)
CLIENT = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from nodes.llmreply import LLMError
from sim.retrieval.llm import LLMClient
url, timeout = sys.argv[2], float(sys.argv[3])
client = LLMClient(url, timeout=timeout, retries=0)  # the key from TOOLDNS_LLM_KEY
out = {"repr": repr(client)}
if sys.argv[4] == "call":
    start = time.monotonic()
    try:
        out["shown"] = json.dumps(client({"messages": [{"role": "user", "content": "hi"}]}))
        out["outcome"] = "reply"
    except LLMError as exc:
        out["shown"], out["outcome"] = str(exc), "LLMError"
    except Exception as exc:
        out["shown"], out["outcome"] = f"{type(exc).__name__}: {exc}", type(exc).__name__
    out["seconds"] = round(time.monotonic() - start, 2)
print(json.dumps(out))
"""


def _leaked(text: str) -> bool:
    """The key, or any 8-character piece of it, in ``text``."""
    return any(KEY[i:i + 8] in text for i in range(len(KEY) - 7))


def _excerpt(text: str, width: int = 90) -> str:
    flat = " ".join(text.replace(KEY, "<KEY>").split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _child(tree: Path, url: str, timeout: float, mode: str) -> dict:
    env = {**os.environ, "TOOLDNS_LLM_KEY": KEY}
    done = subprocess.run([sys.executable, "-c", CLIENT, str(tree), url, str(timeout), mode],
                          capture_output=True, text=True, cwd=tree, env=env, timeout=600)
    if done.returncode != 0:
        return {"outcome": f"exit {done.returncode}", "shown": done.stderr[-300:], "repr": ""}
    return json.loads(done.stdout)


def _eval(tree: Path, url: str) -> dict:
    """``tooldns eval`` from ``tree`` against an endpoint answering 401 with the headers."""
    with tempfile.TemporaryDirectory(prefix="bench-llm-") as tmp:
        doc = {"name": "bench-llm", "seed": 1,
               "dataset": {"source": "synthetic", "tools": 60, "branching": 3, "depth": 2,
                           "sample": 4},
               "taxonomy": {"kind": "categories"}, "methods": ["flat:llm"], "k": 3,
               "plots": False, "llm": {"url": url, "timeout": 5, "retries": 0}}
        path = Path(tmp, "eval.yaml")
        path.write_text(json.dumps(doc))
        start = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "sim.cli", "eval", str(path), "--out",
                               str(Path(tmp, "out"))], capture_output=True, text=True,
                              cwd=tree, env={**os.environ, "TOOLDNS_LLM_KEY": KEY},
                              timeout=600)
        return {"outcome": f"exit {done.returncode}", "seconds":
                round(time.monotonic() - start, 2),
                "shown": next((line for line in done.stderr.splitlines()
                               if "LLM endpoint" in line), done.stderr[-200:])}


def _side(args: argparse.Namespace, tree: Path | None) -> list[dict]:
    root = Path(tree or ROOT).resolve()
    name = "this tree" if tree is None else f"before ({tree})"
    rows = []
    with StandIn(host=args.other) as other, \
            StandIn(redirect_to=f"{other.url}/chat/completions",
                    trickle_seconds=args.trickle_seconds) as hostile:
        for case, fault in CASES:
            seen = len(other.seen)
            hostile.clear()
            hostile.fail(fault)
            got = _child(root, hostile.url, args.timeout, "call")
            to_other = other.seen[seen:]
            rows.append({"tree": name, "case": case, "outcome": got["outcome"],
                         "seconds": got.get("seconds"),
                         "key shown": _leaked(got["shown"]),
                         "other host got": f"{len(to_other)} req, key "
                         f"{'sent' if any(a and KEY in a for _, _, a in to_other) else 'not sent'}",
                         "shown": _excerpt(got["shown"])})
        got = _child(root, f"http://bench:{KEY}@127.0.0.1:9/v1?api_key={KEY}", args.timeout,
                     "repr")
        rows.append({"tree": name, "case": "repr (key in the URL too)", "outcome": "-",
                     "seconds": None, "key shown": _leaked(got["repr"]),
                     "other host got": "-", "shown": _excerpt(got["repr"])})
        hostile.clear()
        hostile.fail("echo-401")
        got = _eval(root, hostile.url)
        rows.append({"tree": name, "case": "tooldns eval stderr, 401 echoing headers",
                     "outcome": got["outcome"], "seconds": got["seconds"],
                     "key shown": _leaked(got["shown"]), "other host got": "-",
                     "shown": _excerpt(got["shown"])})
    return rows


def run(args: argparse.Namespace) -> dict:
    """Every case from this tree (and from ``--before TREE``), one request each."""
    rows = _side(args, None)
    if args.before:
        rows += _side(args, args.before)
    return {"kind": "llm", "timeout": args.timeout, "trickle_seconds": args.trickle_seconds,
            "rows": rows}


HELP = "the LLM client against hostile endpoints (redirects, echoed keys, trickled replies)"
USES_DNS = False


def add_options(p: argparse.ArgumentParser) -> None:
    """This probe's own options."""
    p.add_argument("--timeout", type=float, default=2.0, help="the client's timeout, s")
    p.add_argument("--trickle-seconds", type=float, default=0.1,
                   help="seconds per byte of a trickled reply (about 250 bytes)")
    p.add_argument("--other", default="127.0.0.2",
                   help="the loopback address of the other host a redirect points at")
    p.add_argument("--before", type=Path, metavar="TREE",
                   help="also run the client of TREE (a checkout of an earlier commit)")


def show(result: dict) -> None:
    """Print the figures."""
    print(result["machine"])
    print(f"client timeout {result['timeout']} s, retries 0; trickle "
          f"{result['trickle_seconds']} s per byte")
    table(result["rows"])
