"""``tooldns run --vm``: the Mininet engine on netem links in a booted guest, against simpy;
and no qemu process left after a run, a failure or Ctrl-C.

Each test boots a real guest (qemu, Debian's kernel, the host's root over 9p). On this kind
of machine that is TCG emulation (about 5 s to boot, then Python ~15x slower than on the
host), so the scenario is ``scenarios/engines-vm.yaml``: a dozen queries over 50 ms links.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from sim.run.runner import run_scenario
from sim.vm.job import unavailable
from tests.factories import scenario
from tests.sim.engines.cases import SAME

ROOT = Path(__file__).resolve().parents[3]
SCENARIO = ROOT / "scenarios" / "engines-vm.yaml"
pytestmark = [pytest.mark.vm, pytest.mark.mininet]


@pytest.fixture(scope="module")
def vm_ok() -> None:
    reason = unavailable() or (None if os.geteuid() == 0 else "the guest's Mininet needs root")
    if reason is not None:
        if os.environ.get("CI"):  # .ci/setup installs qemu, the kernel and busybox-static
            pytest.fail(f"the VM must boot in CI: {reason}")
        pytest.skip(reason)


def _tooldns(*args: str, **kwargs: object) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "sim.cli", *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            **kwargs)  # type: ignore[call-overload]


def _qemus() -> list[str]:
    """Every qemu process on the machine (none may outlive a run)."""
    out = subprocess.run(["pgrep", "-a", "-f", "qemu-system"], capture_output=True, text=True)
    return [line for line in out.stdout.splitlines() if "pgrep" not in line]


def test_netem_in_the_vm_agrees_with_simpy(vm_ok, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    proc = _tooldns("run", str(SCENARIO), "--vm", "--out", str(tmp_path / "vm"))
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    assert "by the kernel's netem qdisc" in out
    summary = json.loads((tmp_path / "vm" / "summary.json").read_text())
    assert summary["engine"] == "mininet"
    assert {r["link_emulation"] for r in summary["replay"].values()} == {"netem"}
    facts = json.loads((tmp_path / "vm" / "vm.json").read_text())
    assert facts["status"] == 0 and facts["boot_s"] is not None
    vm = pd.read_csv(tmp_path / "vm" / "results.csv").sort_values("job")
    sim = run_scenario(scenario("engines-vm"), engine="simpy", write=False).records
    sim = sim.sort_values("job")
    assert vm["success"].all() and sim["success"].all()
    for column in SAME:  # the same exchanges, query by query: round trips, bytes, packets
        assert vm[column].tolist() == sim[column].tolist(), column
    # netem holds every packet for its link's delay: no query is faster than simpy's model
    # of its links (without netem the guest would answer in a few ms; user-space delays are
    # refused by netem=require). Queries answered from the resolver's cache cross the
    # agent's link only: their excess over the model is the guest's node code, which an
    # emulated CPU (TCG) runs ~15x slower (about 9 ms a query here), never a second link
    # delay (50 ms each way)
    ratio = vm.latency_ms.to_numpy() / sim.latency_ms.to_numpy()
    assert (ratio >= 0.99).all(), ratio
    cached = (sim.round_trips == 0).to_numpy()
    excess = vm.latency_ms.to_numpy()[cached] - sim.latency_ms.to_numpy()[cached]
    assert cached.any() and pd.Series(excess).median() < 30.0, excess
    assert not _qemus()


def test_ctrl_c_stops_the_guest(vm_ok, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    proc = _tooldns("run", str(SCENARIO), "--vm", "--out", str(tmp_path / "vm"))
    assert proc.stderr is not None
    deadline = time.monotonic() + 120
    seen = []
    while time.monotonic() < deadline:  # the guest is up: its job has started
        line = proc.stderr.readline()
        seen.append(line)
        if "tooldns-vm: up" in line or not line:
            break
    assert any("tooldns-vm: up" in s for s in seen), seen
    assert _qemus()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    assert "interrupted" in err
    assert not _qemus()
    left = sorted(p.name for p in (tmp_path / "vm").iterdir())
    assert left == [], left  # no results, no staging folder of the stopped guest


def test_a_guest_that_overruns_is_stopped(vm_ok, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    proc = _tooldns("run", str(SCENARIO), "--vm", "--vm-timeout", "3", "--out",
                    str(tmp_path / "vm"))
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1
    assert "did not finish within 3 s" in err
    assert not _qemus()


GUEST_TC = """
import subprocess, sys, tempfile
from pathlib import Path
from sim.engines.netemtable import set_distribution
from topologies.links import DelayModel, LinkSpec
subprocess.run(["ip", "link", "add", "tdns0", "type", "dummy"], check=True)
subprocess.run(["tc", "qdisc", "add", "dev", "tdns0", "root", "netem", "delay", "50ms", "10ms"],
               check=True)
set_distribution("tdns0", LinkSpec(DelayModel("normal", 0.05, 0.01), loss=0.01),
                 Path(tempfile.mkdtemp()))
print(subprocess.run(["tc", "qdisc", "show", "dev", "tdns0"], capture_output=True,
                     text=True, check=True).stdout)
"""


def test_the_guest_kernel_takes_the_models_delay_table(vm_ok, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """netem in the guest accepts the table made from the simulation's delay model (this
    machine's kernel has no netem, so only the guest can say)."""
    from sim.vm.job import VMOptions, run_in_vm

    lines: list[str] = []
    got = run_in_vm([sys.executable, "-c", GUEST_TC], tmp_path / "out",
                    VMOptions(timeout_s=240), console=lines.append, progress=lines.append)
    assert got.status == 0, lines[-20:]
    assert "qdisc netem" in got.stdout and "delay 50ms  10ms" in got.stdout, got.stdout
    assert "loss 1%" in got.stdout, got.stdout
    assert not _qemus()
