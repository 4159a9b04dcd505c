"""The guest's parts without booting it: the initramfs archive, the module order, the
accelerator choice, the job script."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sim.vm.initramfs import INIT, cpio_newc
from sim.vm.job import GUEST_SH, job_script
from sim.vm.kernel import GuestKernel, KernelError, _dynamic, find_kernel
from sim.vm.machine import choose_accel


def _read_newc(data: bytes) -> dict[str, tuple[int, bytes]]:
    """(mode, data) per name of a newc archive, read independently of the writer."""
    out, at = {}, 0
    while True:
        assert data[at:at + 6] == b"070701", at
        fields = [int(data[at + 6 + 8 * i: at + 14 + 8 * i], 16) for i in range(13)]
        mode, size, namesize = fields[1], fields[6], fields[11]
        name_at = at + 110
        name = data[name_at:name_at + namesize - 1].decode()
        body_at = name_at + namesize + (-(110 + namesize) % 4)
        if name == "TRAILER!!!":
            return out
        out[name] = (mode, data[body_at:body_at + size])
        at = body_at + size + (-size % 4)


def test_newc_archive_round_trips() -> None:
    entries = [("bin", 0o040755, b""), ("bin/x", 0o100755, b"abc"), ("init", 0o100755, b"12345")]
    archive = cpio_newc(entries)
    assert len(archive) % 4 == 0
    assert _read_newc(archive) == {n: (m, d) for n, m, d in entries}


@pytest.mark.skipif(shutil.which("cpio") is None, reason="GNU cpio is not installed")
def test_gnu_cpio_lists_the_archive(tmp_path: Path) -> None:
    archive = cpio_newc([("a", 0o040755, b""), ("a/b.ko", 0o100644, b"\x7fELF" + b"\0" * 9)])
    listed = subprocess.run(["cpio", "-it", "--quiet"], input=archive, capture_output=True,
                            check=True).stdout.decode().split()
    assert listed == ["a", "a/b.ko"]


def _kernel(tmp_path: Path, dep: str, builtin: str = "") -> GuestKernel:
    modules = tmp_path / "lib" / "6.1.0-test"
    modules.mkdir(parents=True)
    (modules / "modules.dep").write_text(dep)
    (modules / "modules.builtin").write_text(builtin)
    (tmp_path / "boot").mkdir()
    (tmp_path / "boot" / "vmlinuz-6.1.0-test").write_bytes(b"")
    return GuestKernel("6.1.0-test", tmp_path / "boot" / "vmlinuz-6.1.0-test", modules)


def test_modules_load_after_their_dependencies(tmp_path: Path) -> None:
    dep = ("kernel/fs/9p/9p.ko: kernel/fs/netfs/netfs.ko kernel/net/9p/9pnet.ko\n"
           "kernel/fs/netfs/netfs.ko:\n"
           "kernel/net/9p/9pnet.ko:\n"
           "kernel/net/9p/9pnet_virtio.ko: kernel/net/9p/9pnet.ko kernel/drivers/virtio/virtio.ko\n"
           "kernel/net/sched/sch_netem.ko.xz:\n"
           "kernel/fs/overlayfs/overlay.ko:\n")
    kernel = _kernel(tmp_path, dep, builtin="kernel/drivers/virtio/virtio.ko\n")
    order = [p.name for p in kernel.load_order(("9pnet_virtio", "9p", "overlay"))]
    assert order == ["9pnet.ko", "9pnet_virtio.ko", "netfs.ko", "9p.ko", "overlay.ko"]
    assert kernel.builtin("virtio") and kernel.module_file("sch_netem") is not None
    with pytest.raises(KernelError, match="module virtio_pci not found"):
        kernel.load_order(("virtio_pci",))
    assert find_kernel(boot=tmp_path / "boot", lib=tmp_path / "lib").version == "6.1.0-test"


def test_a_kernel_without_netem_is_refused(tmp_path: Path) -> None:
    _kernel(tmp_path, "kernel/fs/9p/9p.ko:\nkernel/fs/overlayfs/overlay.ko:\n")
    with pytest.raises(KernelError, match="linux-image-amd64"):
        find_kernel(boot=tmp_path / "boot", lib=tmp_path / "lib")


def test_accelerator_choice(tmp_path: Path) -> None:
    sysfs, kvm = tmp_path / "module", tmp_path / "kvm"
    sysfs.mkdir()
    assert choose_accel("auto", sysfs, kvm).name == "tcg"  # no /dev/kvm
    kvm.write_bytes(b"")
    assert choose_accel("auto", sysfs, kvm).name == "tcg"  # no hardware KVM module
    (sysfs / "kvm_pvm").mkdir()
    assert "PVM" in choose_accel("auto", sysfs, kvm).reason
    (sysfs / "kvm_amd").mkdir()
    assert choose_accel("auto", sysfs, kvm).name == "kvm"
    assert choose_accel("tcg", sysfs, kvm).name == "tcg"
    assert choose_accel("kvm", sysfs, kvm).qemu_args()[:2] == ["-accel", "kvm"]


def test_static_busybox_is_told_from_a_dynamic_executable() -> None:
    assert _dynamic(Path(sys.executable))
    busybox = Path("/bin/busybox")
    if busybox.exists() and shutil.which("file"):
        described = subprocess.run(["file", "-L", str(busybox)], capture_output=True,
                                   text=True).stdout
        assert _dynamic(busybox) == ("statically linked" not in described)


def test_job_script_quotes_every_path_and_argument(tmp_path: Path) -> None:
    odd = tmp_path / "it's a $dir"
    argv = [sys.executable, "-m", "sim.cli", "run", str(odd / "s.yaml"), "--set", "a.b='x y'"]
    script = job_script(argv, odd / "out", odd, {"HOME": "/root", "COLUMNS": "80"}, "tcg")
    exec_line = next(line for line in script.splitlines() if line.startswith("exec "))
    assert shlex.split(exec_line)[1:] == argv
    assert shlex.quote(str(odd / "out")) in script
    for text in (script, GUEST_SH, INIT):  # every script parses
        subprocess.run(["sh", "-n"], input=text.encode(), check=True)


def test_an_emulated_cpu_gets_longer_mininet_phases(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The guest's command knows its accelerator; on TCG (Python ~15x slower, more when the
    host is busy) the Mininet engine's per-phase timeout grows by the same factor, so a host
    agent's start is not mistaken for a hang (a CI failure beside stress-ng)."""
    from sim.engines import mininet

    for accel in ("kvm", "tcg"):
        script = job_script(["true"], tmp_path / "out", tmp_path, {}, accel)
        assert f"export TOOLDNS_VM={accel}" in script.splitlines()
    monkeypatch.delenv("TOOLDNS_VM", raising=False)
    assert mininet.command_timeout() == mininet.COMMAND_TIMEOUT
    monkeypatch.setenv("TOOLDNS_VM", "kvm")
    assert mininet.command_timeout() == mininet.COMMAND_TIMEOUT
    monkeypatch.setenv("TOOLDNS_VM", "tcg")
    assert mininet.command_timeout() == mininet.COMMAND_TIMEOUT * mininet.EMULATED_CPU_FACTOR


# ------------------------------------------------------------------ issue 45: the VM boundary


def _qemu_opts(text: str, implied: str) -> list[tuple[str, str]]:
    """(name, value) pairs of a QemuOpts string as qemu reads it (its opts_do_parse): a
    value runs to the next single comma, ``,,`` is a comma in it; a first element without
    ``=`` is the value of the ``implied`` option. Written from qemu's rules, not ours."""
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(text):
        j = i
        while j < len(text) and text[j] not in "=,":
            j += 1
        name = text[i:j]
        if j < len(text) and text[j] == "=":
            j += 1
            value = []
            while j < len(text):
                if text[j] == ",":
                    if text[j + 1:j + 2] != ",":
                        break
                    j += 1
                value.append(text[j])
                j += 1
            out.append((name, "".join(value)))
        else:
            out.append((implied, name) if not out else (name, "on"))
        i = j + 1
    return out


def test_every_shared_path_reaches_qemu_as_given(tmp_path: Path) -> None:
    """A comma in a shared folder's path must not end qemu's path= value: before, an output
    folder ``results/x,path=/another/folder`` made qemu share /another/folder read-write."""
    from sim.vm.machine import Accel, GuestVM

    other = tmp_path / "another" / "folder"
    job = tmp_path / "job,s"
    out = tmp_path / f"results/x,path={other},readonly=off"
    kernel = GuestKernel("6.1.0-test", tmp_path / "vmlinuz", tmp_path / "modules")
    vm = GuestVM(kernel, tmp_path / "initramfs.cpio", job, Accel("tcg", "test"),
                 shares=[("out", out)])
    cmd = vm.command()
    virtfs = [cmd[i + 1] for i, arg in enumerate(cmd) if arg == "-virtfs"]
    shared = {}
    for spec in virtfs:
        opts = _qemu_opts(spec, "fsdriver")
        names = [name for name, _ in opts]
        assert len(names) == len(set(names)), opts  # no option given twice
        shared[dict(opts)["mount_tag"]] = dict(opts)["path"]
    assert shared == {"hostroot": "/", "job": str(job), "out": str(out)}


def _start_time(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[19])


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_stale_guests_and_folders_are_swept_and_nothing_else(tmp_path: Path) -> None:
    """The sweep kills a guest only if its owner is gone and the process is the one
    recorded (pid, start time, its folder on the command line); it keeps a live run's."""
    import json
    import os

    from sim.vm.machine import OWNER_FILE, sweep_stale

    base = tmp_path / "guests"
    base.mkdir(mode=0o700)
    dead = subprocess.Popen(["true"])
    dead.wait()
    sleepers: list[subprocess.Popen] = []

    def guest(folder: Path, *, named: bool = True) -> subprocess.Popen:
        argv = [sys.executable, "-c", "import time; time.sleep(600)"]
        sleepers.append(subprocess.Popen(argv + ([str(folder)] if named else [])))
        return sleepers[-1]

    def run_folder(name: str, owner: tuple[int, int], qemu: subprocess.Popen | None) -> Path:
        folder = base / name
        (folder / "job").mkdir(parents=True)
        doc = {"pid": owner[0], "start": owner[1]}
        if qemu is not None:
            doc |= {"qemu": qemu.pid, "qemu_start": _start_time(qemu.pid)}
        (folder / OWNER_FILE).write_text(json.dumps(doc))
        return folder

    try:
        stale = base / "run-stale"
        stale_guest = guest(stale)
        run_folder("run-stale", (dead.pid, 1), stale_guest)
        reused = base / "run-reused"  # the recorded pid now belongs to another process
        bystander = guest(reused, named=False)
        run_folder("run-reused", (dead.pid, 1), bystander)
        live = base / "run-live"  # a run in progress (this process) keeps its guest
        live_guest = guest(live)
        run_folder("run-live", (os.getpid(), _start_time(os.getpid())), live_guest)
        (base / "not-ours.txt").write_text("left alone")

        swept = sweep_stale(base)
        stale_guest.wait(timeout=10)
        assert stale_guest.returncode == -9  # SIGKILL
        assert not stale.exists() and not reused.exists()
        assert _alive(bystander.pid) and _alive(live_guest.pid) and live.exists()
        assert (base / "not-ours.txt").exists()
        assert len(swept) == 2 and any(str(stale_guest.pid) in line for line in swept)
    finally:
        for p in sleepers:
            p.kill()
            p.wait()


def test_the_guest_folder_must_be_private(tmp_path: Path) -> None:
    from sim.vm.machine import VMError, guest_base

    assert guest_base(tmp_path).stat().st_mode & 0o777 == 0o700
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(VMError, match="private"):
        guest_base(tmp_path, name="shared")
    (tmp_path / "link").symlink_to(shared)
    with pytest.raises(VMError, match="private"):
        guest_base(tmp_path, name="link")


FAKE_QEMU = """#!/bin/sh
echo $$ > "$FAKE_QEMU_PID"
exec sleep 600
"""

RUN_FAKE_GUEST = """
import sys
from pathlib import Path
import sim.vm.machine as machine
from sim.vm.kernel import GuestKernel
machine.QEMU = sys.argv[1]
none = Path("/nonexistent")
vm = machine.GuestVM(GuestKernel("x", none, none), none, Path(sys.argv[2]),
                     machine.Accel("tcg", "test"))
vm.run(600, print)
"""


def test_a_killed_parent_takes_its_guest_with_it(tmp_path: Path) -> None:
    """SIGKILL of the process running the guest (no handler runs) must not leave qemu
    running: a fake qemu (a shell that sleeps) stands in for it, no boot needed."""
    import os
    import signal
    import time

    fake = tmp_path / "qemu"
    fake.write_text(FAKE_QEMU)
    fake.chmod(0o755)
    pidfile = tmp_path / "qemu.pid"
    root = Path(__file__).resolve().parents[3]
    runner = subprocess.Popen([sys.executable, "-c", RUN_FAKE_GUEST, str(fake), str(tmp_path)],
                              cwd=root, env={**os.environ, "FAKE_QEMU_PID": str(pidfile)},
                              stdout=subprocess.DEVNULL)
    qemu = None
    try:
        deadline = time.monotonic() + 30
        while not (pidfile.exists() and pidfile.read_text().strip()):
            assert time.monotonic() < deadline and runner.poll() is None
            time.sleep(0.05)
        qemu = int(pidfile.read_text())
        assert _alive(qemu)
        runner.send_signal(signal.SIGKILL)
        runner.wait()
        deadline = time.monotonic() + 5
        while _alive(qemu) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(qemu), "the guest outlived the process that started it"
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
        if qemu is not None and _alive(qemu):  # the fake this test started
            os.kill(qemu, signal.SIGKILL)
