"""``tooldns run --vm``: the Mininet engine on netem links in a booted guest, against simpy;
and no qemu process left after a run, a failure, Ctrl-C or a SIGKILL; an output folder
with a comma in its name shared as itself.

Each test boots a real guest (qemu, Debian's kernel, the host's root over 9p). On this kind
of machine that is TCG emulation (about 5 s to boot, then Python ~15x slower than on the
host), so the scenario is ``scenarios/engines-vm.yaml``: a dozen queries over 50 ms links.
The tests are independent: each looks only at the guests its own processes started (qemu
is named after the process that runs it), and kills what is left of them however it ends.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
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


def _qemus(owner: int) -> list[int]:
    """The qemu processes started by process ``owner`` (named ``tooldns-vm-OWNER``)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if (state != "Z" and b"qemu-system" in argv[0]
                and f"tooldns-vm-{owner},".encode() in b" ".join(argv)):
            found.append(int(entry))
    return found


def _kill_guests(owner: int) -> None:
    """SIGKILL the qemu processes ``owner`` (a process of this test) started."""
    for pid in _qemus(owner):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _die_with_this_process() -> Callable[[], None]:
    """A preexec_fn: the child is killed if the test process dies (a CI job's timeout)."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    return lambda: prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG


@pytest.fixture
def tooldns() -> Iterator[Callable[..., subprocess.Popen]]:
    """Starts ``tooldns`` commands; whatever the test did (passed, failed, timed out), each
    is killed, with any guest it left, and the guest folders of the dead are swept."""
    started: list[subprocess.Popen] = []

    def start(*args: str) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-m", "sim.cli", *args], cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=_die_with_this_process())
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        _kill_guests(proc.pid)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    try:
        from sim.vm.machine import sweep_stale
    except ImportError:  # a tree without the sweep
        return
    sweep_stale()


def _until_up(proc: subprocess.Popen, seconds: float = 120) -> list[str]:
    """stderr lines until the guest's job has started (its "up" line)."""
    assert proc.stderr is not None
    deadline = time.monotonic() + seconds
    seen = []
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        seen.append(line)
        if "tooldns-vm: up" in line or not line:
            break
    return seen


def test_netem_in_the_vm_agrees_with_simpy(vm_ok, tooldns, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    proc = tooldns("run", str(SCENARIO), "--vm", "--out", str(tmp_path / "vm"))
    # ~3 min idle on TCG; beside stress-ng --cpu 2 on 2 cores, ~8 min (the guest's own
    # bound, --vm-timeout, is 30 min)
    out, err = proc.communicate(timeout=1500)
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
    # emulated CPU (TCG) runs ~15x slower (about 9 ms a query idle, more on a busy host),
    # never a second link delay (another 100 ms a round trip)
    ratio = vm.latency_ms.to_numpy() / sim.latency_ms.to_numpy()
    assert (ratio >= 0.99).all(), ratio
    cached = (sim.round_trips == 0).to_numpy()
    excess = vm.latency_ms.to_numpy()[cached] - sim.latency_ms.to_numpy()[cached]
    assert cached.any() and pd.Series(excess).median() < 50.0, excess
    assert not _qemus(proc.pid)


def test_a_stock_recursor_on_netem_links_in_the_vm(vm_ok, tooldns, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Unbound as the scheme's resolver on the guest's netem links (``schemes[].resolver``),
    against its model on simpy (``resolver_model``): one closed-loop agent, so the same
    walks, query by query (a binary that times out on a slow guest may only add
    exchanges), each no faster than the model of its links (the kernel delays the
    binary's packets here; nothing is held where they arrive), and every exchange the
    binary made claimed by a query."""
    from sim.interop.calibration import model_twin

    sc = scenario("engines-vm", **{
        "workload.queries": 4, "workload.pool": 4,
        "schemes": [{"name": "q", "k": 3, "mode": "qname", "resolver": "unbound",
                     "timeout": 5.0}]})
    file = tmp_path / "stock-vm.yaml"
    file.write_text(sc.model_dump_json())
    proc = tooldns("run", str(file), "--vm", "--out", str(tmp_path / "vm"))
    _, err = proc.communicate(timeout=1500)  # ~4 min idle on TCG
    assert proc.returncode == 0, err[-3000:]
    summary = json.loads((tmp_path / "vm" / "summary.json").read_text())
    replay = summary["replay"]["q"]
    assert replay["link_emulation"] == "netem"
    report = replay["stock_resolver"]
    assert report["binary"] == "unbound" and report["unattributed_exchanges"] == 0, report
    vm = pd.read_csv(tmp_path / "vm" / "results.csv").sort_values("job")
    assert vm.success.all() and report["exchanges"] == vm.exchanges.sum() > 0, report
    sim = run_scenario(model_twin(sc), write=False).records.sort_values("job")
    assert vm.returned.tolist() == sim.returned.tolist()
    for column in ("exchanges", "round_trips"):
        assert (vm[column].to_numpy() >= sim[column].to_numpy()).all(), column
    ratio = vm.latency_ms.to_numpy() / sim.latency_ms.to_numpy()
    assert (ratio >= 0.99).all(), ratio
    assert not _qemus(proc.pid)


def test_ctrl_c_stops_the_guest(vm_ok, tooldns, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    proc = tooldns("run", str(SCENARIO), "--vm", "--out", str(tmp_path / "vm"))
    seen = _until_up(proc)
    assert any("tooldns-vm: up" in s for s in seen), seen
    assert _qemus(proc.pid)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    assert "interrupted" in err
    assert not _qemus(proc.pid)
    left = sorted(p.name for p in (tmp_path / "vm").iterdir())
    assert left == [], left  # no results, no staging folder of the stopped guest


def test_a_guest_that_overruns_is_stopped(vm_ok, tooldns, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    proc = tooldns("run", str(SCENARIO), "--vm", "--vm-timeout", "3", "--out",
                   str(tmp_path / "vm"))
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1
    assert "did not finish within 3 s" in err
    assert not _qemus(proc.pid)


def _guest_folder(qemu: int) -> Path:
    """The temporary folder of a running guest: where its initramfs is."""
    argv = Path(f"/proc/{qemu}/cmdline").read_bytes().decode().split("\0")
    return Path(argv[argv.index("-initrd") + 1]).parent


def test_sigkill_takes_the_guest_along_and_the_next_start_sweeps(  # type: ignore[no-untyped-def]
        vm_ok, tooldns, tmp_path: Path) -> None:
    """SIGKILL of ``tooldns run --vm`` (no handler runs): its qemu goes within seconds, not
    minutes; its temporary folder is removed when the next guest starts."""
    proc = tooldns("run", str(SCENARIO), "--vm", "--out", str(tmp_path / "vm"))
    seen = _until_up(proc)
    assert any("tooldns-vm: up" in s for s in seen), seen
    (qemu,) = _qemus(proc.pid)
    folder = _guest_folder(qemu)
    assert folder.is_dir()
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 10
    while _qemus(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _qemus(proc.pid), "qemu outlived the tooldns run --vm that started it"
    assert folder.is_dir()  # nothing ran to remove it
    again = tooldns("run", str(SCENARIO), "--vm", "--vm-timeout", "1", "--out",
                    str(tmp_path / "vm2"))
    _, err = again.communicate(timeout=120)
    assert again.returncode == 1 and "did not finish within 1 s" in err, err[-2000:]
    assert not folder.exists(), err[-2000:]
    assert "stale guest" in err


WRITE_MARKER = """
import sys
from pathlib import Path
Path(sys.argv[1], "marker").write_text("written in the guest")
"""


def test_an_output_folder_with_a_comma_is_shared_as_itself(vm_ok, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Before, qemu read ``x,path=OTHER`` as two path options and shared OTHER read-write
    (as root) instead; now the guest's writes land in the folder named, and only there."""
    from sim.vm.job import VMOptions, run_in_vm

    other = tmp_path / "another"
    other.mkdir()
    out = tmp_path / "results" / f"x,path={other}"
    lines: list[str] = []
    try:
        got = run_in_vm([sys.executable, "-c", WRITE_MARKER, str(out)], out,
                        VMOptions(timeout_s=240), console=lines.append, progress=lines.append)
    finally:
        _kill_guests(os.getpid())
    assert got.status == 0, lines[-20:]
    assert (out / "marker").read_text() == "written in the guest"
    assert sorted(p.name for p in other.iterdir()) == []


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
    try:
        got = run_in_vm([sys.executable, "-c", GUEST_TC], tmp_path / "out",
                        VMOptions(timeout_s=240), console=lines.append, progress=lines.append)
        assert not _qemus(os.getpid())
    finally:
        _kill_guests(os.getpid())
    assert got.status == 0, lines[-20:]
    assert "qdisc netem" in got.stdout and "delay 50ms  10ms" in got.stdout, got.stdout
    assert "loss 1%" in got.stdout, got.stdout
