"""The set-up the README names works: the notebook runner's command line, and the
Vagrantfile validates (``vagrant validate --ignore-provider``; .ci/setup installs vagrant)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_readme_names_the_notebook_command_and_it_parses() -> None:
    assert "python3 -m notebooks.run_all" in README
    ok = subprocess.run([sys.executable, "-m", "notebooks.run_all", "--help"], cwd=ROOT,
                        capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and "--check" in ok.stdout
    none = subprocess.run([sys.executable, "-m", "notebooks.run_all", "--check", "99"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert none.returncode == 2 and "no notebook matches" in none.stderr


def test_readme_says_which_vagrant_provider() -> None:
    assert "--provider=libvirt" in README and "VirtualBox" in README
    assert "VAGRANT_DEFAULT_PROVIDER" in README


def test_vagrantfile_validates() -> None:
    if shutil.which("vagrant") is None:
        if os.environ.get("CI"):
            pytest.fail("vagrant missing: .ci/setup installs it")
        pytest.skip("vagrant is not installed (.ci/setup installs it: apt-get install vagrant)")
    out = subprocess.run(["vagrant", "validate", "--ignore-provider"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "VAGRANT_CHECKPOINT_DISABLE": "1"})
    assert out.returncode == 0, out.stdout + out.stderr
    assert "validated successfully" in out.stdout


def test_vm_installs_the_cpu_build_of_torch_and_checks_netem() -> None:
    vagrantfile = (ROOT / "Vagrantfile").read_text(encoding="utf-8")
    pin = "torch==2.13.0"
    assert pin in (ROOT / ".ci" / "setup").read_text(encoding="utf-8")  # the same pin
    cpu = vagrantfile.index("--index-url https://download.pytorch.org/whl/cpu " + pin)
    assert cpu < vagrantfile.index("bash .ci/setup")  # before anything pulls torch
    assert vagrantfile.index("netem delay 1ms") < cpu  # netem checked first, exit 1 if absent
