"""The README's two commands stay true: the main job runs and the test command is CI's."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _commands() -> list[str]:
    block = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert block, "README must open with a bash block"
    return [line.split("#")[0].strip() for line in block.group(1).splitlines() if line.strip()]


def test_readme_test_command_is_what_ci_runs() -> None:
    main, tests = _commands()[:2]
    test_cmd = tests.split("&&")[-1].strip()
    assert test_cmd in (ROOT / ".ci" / "run").read_text()
    assert main.startswith("bash .ci/setup && tooldns run scenarios/")


def test_readme_main_job_runs(tmp_path: Path) -> None:
    main = _commands()[0].split("&&")[-1].strip()
    argv = shlex.split(main)
    assert argv[:2] == ["tooldns", "run"]
    out = subprocess.run([sys.executable, "-m", "sim.cli", *argv[1:], "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "hit@1" in out.stdout and "median ms" in out.stdout
    summary = json.loads((tmp_path / "summary.json").read_text())
    for name in ("results.parquet", "results.csv", "nodes.csv", "scenario.yaml",
                 "latency_cdf.png", "bytes_per_query.png", "cache_hits_over_time.png"):
        assert (tmp_path / name).stat().st_size > 0, name
    schemes = summary["schemes"]
    assert schemes["tooldns"]["success"] == 1.0
    assert schemes["unmodified-resolver"]["success"] == 0.0  # strips the option: no walk
    # the HTTP registry baselines: one search over a fresh TCP connection (AgentDNS)
    assert schemes["agentdns"]["success"] == 1.0
    assert schemes["agentdns"]["mean_round_trips"] == 2.0
    assert schemes["agentdns"]["mean_packets"] == 10.0
    # warming with K = 0 saves round trips against the same resolver without it
    assert schemes["tooldns-k0-warmed"]["mean_round_trips"] < schemes["tooldns"][
        "mean_round_trips"]
