"""The stand-in chat server (sim.retrieval.standin): deterministic rules, not a model; its
fault queue, control endpoint and command line."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from nodes.llmrouter import TLD_PROMPT
from nodes.scoring import LLM_PROMPT
from sim.retrieval import standin
from sim.retrieval.standin import FAULTS, StandIn, answer, label_answer, rank_answer
from topologies.llmlabels import LABEL_PROMPT

ROOT = Path(__file__).resolve().parents[3]


def test_it_ranks_numbered_candidates_by_shared_words() -> None:
    prompt = LLM_PROMPT.format(domain="tools", k=2, task="convert currency rates today",
                               candidates="1. weather forecast\n2. currency rates api\n"
                               "3. convert units\n4. currency converter rates")
    assert rank_answer(prompt) == "2, 4"  # two shared words each, in list order; top 2
    assert answer(prompt.replace("convert currency rates today", "quantum physics")) == "other"


def test_it_ranks_named_candidates_and_ignores_the_rules() -> None:
    prompt = TLD_PROMPT.format(k=3, task="identify the core service",
                               candidates="- maps: route planning\n- core-db: core service")
    assert rank_answer(prompt) == "core-db"  # the numbered rule lines are not candidates


def test_it_names_a_group_by_its_most_frequent_words() -> None:
    prompt = LABEL_PROMPT.format(within="", terms="x", size=2, shown=2,
                                 tools="- a: invoice payment\n- b: payment refund invoice")
    assert prompt.startswith(standin.LABEL_MARKER)
    assert label_answer(prompt) == "label: invoice-payment\nsummary: tools for invoice, " \
        "payment, refund"
    assert answer(prompt) == label_answer(prompt)
    assert answer("anything else") == "other"


def test_faults_are_checked_and_the_server_stays_on_loopback() -> None:
    with pytest.raises(ValueError, match="unknown stand-in faults"):
        StandIn(faults=["explode"])
    with pytest.raises(ValueError, match="loopback only"):
        StandIn(host="0.0.0.0")
    with pytest.raises(RuntimeError, match="not started"):
        _ = StandIn().url
    assert {"500", "429", "malformed", "slow", "huge", "drop"} <= set(FAULTS)


def test_control_endpoint_and_model_list() -> None:
    with StandIn() as server:
        base = server.url
        with urllib.request.urlopen(f"{base}/models", timeout=2) as resp:
            assert json.load(resp)["data"][0]["id"] == "stand-in"
        req = urllib.request.Request(
            base.removesuffix("/v1") + "/stand-in/faults",
            json.dumps({"faults": ["429", "prose"]}).encode(), method="POST")
        with urllib.request.urlopen(req, timeout=2) as resp:
            assert json.load(resp) == {"queued": ["429", "prose"]}
        assert server.pending() == ("429", "prose")


def test_command_line_serves_until_stopped() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "sim.retrieval.standin", "--port", "0",
                             "--fail", "500"], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("stand-in (not a model) serving http://127.0.0.1:")
        url = line.split()[-1]
        body = json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode()
        req = urllib.request.Request(url, body, {"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError, match="500"):
            urllib.request.urlopen(req, timeout=2)
        with urllib.request.urlopen(req, timeout=2) as resp:
            assert json.load(resp)["choices"][0]["message"]["content"] == "other"
    finally:
        proc.terminate()
        proc.wait(timeout=5)
    help_text = subprocess.run([sys.executable, "-m", "sim.retrieval.standin", "--help"],
                               cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert "NOT a model" in help_text
