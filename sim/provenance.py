"""Where a result came from: version, git commit, compiled modules, machine, time and
command line.

Written as the last key (``provenance``) of a run's ``summary.json`` and a sweep's
``sweep.json``. Everything else in those files depends only on the scenario and seed (on
the simulation engine), so results are compared with this block left out:
:func:`without_provenance`, or ``jq 'del(.provenance)'``.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import sys
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from sim.compiled import loaded

KEY = "provenance"
REPO = Path(__file__).resolve().parents[1]


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True,
                              timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def version() -> str:
    """This package's version ("unknown" when it is not installed)."""
    try:
        return metadata.version("tooldns-testbed")
    except metadata.PackageNotFoundError:
        return "unknown"


def utc_now() -> datetime:
    return datetime.now(UTC)


def provenance(started: datetime, argv: list[str] | None = None) -> dict:
    """The provenance block of a run or sweep that began at ``started`` and ends now."""
    finished = utc_now()
    commit = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=no") if commit else None
    return {
        "tooldns": version(),
        "git_commit": commit,
        "git_dirty": None if status is None else bool(status),
        "python": platform.python_version(),
        "compiled": loaded(),  # hot modules that ran compiled (sim.compiled), else []
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "hostname": socket.gethostname(),
        "started_utc": started.isoformat(timespec="seconds"),
        "finished_utc": finished.isoformat(timespec="seconds"),
        "wall_s": round((finished - started).total_seconds(), 3),
        "argv": list(sys.argv if argv is None else argv),
    }


def without_provenance(summary: dict) -> dict:
    """The deterministic part of a summary (what the same scenario and seed reproduce)."""
    return {k: v for k, v in summary.items() if k != KEY}


def deterministic_summary(folder: str | Path, name: str = "summary.json") -> bytes:
    """A run folder's summary without the provenance block, serialised as the runner
    writes summaries: equal bytes for the same scenario and seed (simulation engine)."""
    summary = json.loads((Path(folder) / name).read_text(encoding="utf-8"))
    return (json.dumps(without_provenance(summary), indent=2) + "\n").encode("utf-8")
