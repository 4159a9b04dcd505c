"""One qemu guest: the command line, the accelerator, the console, and its end.

:class:`GuestVM` boots :mod:`sim.vm.initramfs`'s initramfs on a :class:`GuestKernel` with the
host's root and the job folder shared over 9p (virtio), no network device (the guest's only
links are the ones Mininet makes inside it), and the serial console on a pipe. It waits for
the guest to power off, at most ``timeout`` seconds; whatever happens (a timeout, a crash,
Ctrl-C or SIGTERM in the caller) the qemu process group is killed and reaped before
:meth:`GuestVM.run` returns or raises. If the caller is killed outright (SIGKILL), the kernel
kills qemu too (``PR_SET_PDEATHSIG``); its folder under :func:`guest_base` is left, and
:func:`sweep_stale` removes it (and, should one be left, the guest it recorded) at the
next start. Shared paths reach qemu escaped for its option syntax (``,`` as ``,,``).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from sim.vm.initramfs import JOB_TAG, ROOT_TAG
from sim.vm.kernel import GuestKernel

QEMU = "qemu-system-x86_64"
STOP_GRACE = 3.0  # seconds between SIGTERM and SIGKILL of qemu
_ESCAPES = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1bc|\r")  # SeaBIOS screen codes
OWNER_FILE = "owner.json"  # in each guest's folder: who made it, which qemu it started
_PR_SET_PDEATHSIG = 1  # linux/prctl.h
_UNMARKED_AGE = 600.0  # seconds after which a guest folder without its owner file is stale


class VMError(RuntimeError):
    """The guest could not be started or did not finish (the message says why)."""


@dataclass(frozen=True)
class Accel:
    """The accelerator chosen and why (for the records and the console)."""

    name: str  # "kvm" | "tcg"
    reason: str

    def qemu_args(self) -> list[str]:
        if self.name == "kvm":
            return ["-accel", "kvm", "-cpu", "host"]
        return ["-accel", "tcg,thread=multi", "-cpu", "max"]


def choose_accel(requested: str = "auto", sysfs: Path = Path("/sys/module"),
                 kvm_device: Path = Path("/dev/kvm")) -> Accel:
    """KVM when asked or when ``/dev/kvm`` is usable with a hardware KVM module (kvm_intel,
    kvm_amd); TCG (emulation) otherwise. ``kvm_pvm`` (pagetable-based KVM, the nested KVM
    of some cloud VMs) boots only kernels built as PVM guests, not distribution kernels."""
    if requested == "tcg":
        return Accel("tcg", "asked for (--vm-accel tcg)")
    usable = kvm_device.exists() and os.access(kvm_device, os.R_OK | os.W_OK)
    hardware = [m for m in ("kvm_intel", "kvm_amd") if (sysfs / m).exists()]
    if requested == "kvm":
        if not usable:
            raise VMError(f"--vm-accel kvm: {kvm_device} is missing or not writable")
        return Accel("kvm", "asked for (--vm-accel kvm)")
    if usable and hardware:
        return Accel("kvm", f"{kvm_device} with {hardware[0]}")
    if usable and (sysfs / "kvm_pvm").exists():
        return Accel("tcg", f"{kvm_device} is PVM (kvm_pvm), which boots only PVM-built "
                            "guest kernels: emulating the CPU (TCG)")
    return Accel("tcg", f"no usable {kvm_device} with kvm_intel/kvm_amd: emulating the CPU "
                        "(TCG)")


def qemu_value(text: str) -> str:
    """``text`` as one value of a qemu option list (``-virtfs local,path=…``): a comma ends
    a value there, ``,,`` is a comma within it."""
    return text.replace(",", ",,")


def tie_to_parent() -> Callable[[], None]:
    """A ``preexec_fn``: the child is sent SIGKILL when the thread that starts it ends (the
    whole process, on a SIGKILL), and exits at once if that happened before the call."""
    parent = os.getpid()
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before the fork

    def child() -> None:
        if prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
        if os.getppid() != parent:
            os._exit(1)

    return child


def qemu_unavailable() -> str | None:
    """Why qemu cannot be started here, or None."""
    if shutil.which(QEMU) is None:
        return f"{QEMU} is not installed (apt-get install qemu-system-x86)"
    return None


@dataclass
class GuestVM:
    """A guest to boot once (see the module docstring)."""

    kernel: GuestKernel
    initramfs: Path
    job_dir: Path  # shared read-write at sim.vm.initramfs.JOB_DIR
    accel: Accel
    memory_mib: int = 3072
    cpus: int = 2
    upper: str = "1g"  # tmpfs size of the overlay's writable layer
    shares: list[tuple[str, Path]] = field(default_factory=list)  # (tag, host dir) read-write
    boot_s: float | None = None  # wall seconds until the guest's job started (its "up" line)
    owner_file: Path | None = None  # guest_folder's OWNER_FILE: qemu's pid is recorded there

    def command(self) -> list[str]:
        name = f"tooldns-vm-{os.getpid()}"
        cmd = [QEMU, "-name", f"{name},process={name}", *self.accel.qemu_args(),
               "-m", str(self.memory_mib), "-smp", str(self.cpus),
               "-display", "none", "-monitor", "none", "-serial", "stdio", "-no-reboot",
               "-nic", "none", "-kernel", str(self.kernel.image), "-initrd", str(self.initramfs),
               "-append", f"console=ttyS0 quiet panic=-1 tooldns.upper={self.upper}",
               "-virtfs", f"local,path=/,mount_tag={ROOT_TAG},security_model=none,"
                          "readonly=on,multidevs=remap",
               "-virtfs", f"local,path={qemu_value(str(self.job_dir))},mount_tag={JOB_TAG},"
                          "security_model=none"]
        for tag, path in self.shares:
            cmd += ["-virtfs", f"local,path={qemu_value(str(path))},mount_tag={tag},"
                               "security_model=none,multidevs=remap"]
        return cmd

    def run(self, timeout: float, console: Callable[[str], None]) -> float:
        """Boot, pass every console line to ``console``, wait for the guest to power off;
        returns the wall seconds it ran. Raises :class:`VMError` on a timeout or if qemu
        fails; the qemu process is gone whenever this returns or raises."""
        started = time.monotonic()
        proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True, preexec_fn=tie_to_parent())
        if self.owner_file is not None:
            try:
                _record_guest(self.owner_file, proc.pid)
            except BaseException:
                stop(proc)
                raise
        errors: list[bytes] = []
        reader = threading.Thread(target=self._read, args=(proc, console, started),
                                  daemon=True)
        err_reader = threading.Thread(
            target=lambda: errors.append(proc.stderr.read() if proc.stderr else b""),
            daemon=True)
        reader.start()
        err_reader.start()
        try:
            try:
                code = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                raise VMError(f"the guest did not finish within {timeout:.0f} s "
                              f"(--vm-timeout); it was stopped") from None
            reader.join(timeout=5)
            err_reader.join(timeout=5)
            if code != 0:
                text = b"".join(errors).decode(errors="replace").strip()[-2000:]
                raise VMError(f"qemu exited with status {code}: {text or 'no message'}")
            return time.monotonic() - started
        finally:
            stop(proc)

    def _read(self, proc: subprocess.Popen, console: Callable[[str], None],
              started: float) -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = _ESCAPES.sub(b"", raw).decode(errors="replace").rstrip("\n")
            if self.boot_s is None and line.startswith("tooldns-vm: up"):
                self.boot_s = time.monotonic() - started
            if line.strip():
                console(line)


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM the process group of ``proc`` (qemu, started in its own session), SIGKILL it
    after :data:`STOP_GRACE` seconds if it is still there, and reap it."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_GRACE)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()


# ---------------------------------------------------------------- guest folders and the sweep


def guest_base(root: Path | None = None, name: str | None = None) -> Path:
    """The folder every guest's temporary folder lives in: ``tooldns-vm.UID`` in the
    temporary directory, made mode 0700; refused unless it is a real folder of this user
    that nobody else can write (another user could otherwise plant guest folders)."""
    path = Path(root or tempfile.gettempdir()) / (name or f"tooldns-vm.{os.geteuid()}")
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    info = os.lstat(path)
    if (not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid()
            or info.st_mode & 0o022):
        raise VMError(f"{path} is not a private folder of this user (a real folder, mode "
                      f"0700): refusing to keep guests there; remove it")
    return path


@contextlib.contextmanager
def guest_folder(base: Path | None = None) -> Iterator[Path]:
    """A new folder for one guest under :func:`guest_base`, with its owner file (this
    process); removed on the way out. One left by a killed process is :func:`sweep_stale`'s."""
    folder = Path(tempfile.mkdtemp(prefix="run-", dir=base or guest_base()))
    try:
        _write_owner(folder / OWNER_FILE, {"pid": os.getpid(),
                                           "start": process_start(os.getpid())})
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def process_start(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot), or None if there is none; with
    the pid it names one process, whatever pids are reused afterwards."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in ("Z", "X") else int(fields[19])


def _write_owner(path: Path, doc: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc))
    os.replace(tmp, path)


def _record_guest(owner_file: Path, pid: int) -> None:
    doc = json.loads(owner_file.read_text())
    _write_owner(owner_file, doc | {"qemu": pid, "qemu_start": process_start(pid)})


def sweep_stale(base: Path | None = None) -> list[str]:
    """Remove the guest folders under :func:`guest_base` whose owner process is gone, first
    killing the guest one recorded if that very process (same pid and start time, its
    folder on its command line) still runs; folders of live owners and anything not made
    by :func:`guest_folder` are left alone. Returns one line per folder removed."""
    base = base or guest_base()
    done = []
    for folder in sorted(base.glob("run-*")):
        if not folder.is_dir() or folder.is_symlink():
            continue
        try:
            doc = json.loads((folder / OWNER_FILE).read_text())
            owner, owner_start = int(doc["pid"]), doc.get("start")
        except (OSError, ValueError, KeyError, TypeError):
            if time.time() - folder.stat().st_mtime < _UNMARKED_AGE:
                continue  # being made right now, perhaps
            shutil.rmtree(folder, ignore_errors=True)
            done.append(f"removed the stale guest folder {folder} (no owner file)")
            continue
        if owner_start is not None and process_start(owner) == owner_start:
            continue  # its run is still going
        note = ""
        qemu = doc.get("qemu")
        if isinstance(qemu, int) and _is_guest(qemu, doc.get("qemu_start"), folder):
            with contextlib.suppress(ProcessLookupError):
                os.kill(qemu, signal.SIGKILL)
            _wait_gone(qemu)
            note = f" and killed its stale guest (qemu, pid {qemu})"
        shutil.rmtree(folder, ignore_errors=True)
        done.append(f"removed the stale guest folder {folder} of process {owner}{note}")
    return done


def _is_guest(pid: int, start: object, folder: Path) -> bool:
    """Whether ``pid`` is still the guest recorded: same start time, ``folder`` in its
    command line (a reused pid is another process, never killed)."""
    if not isinstance(start, int) or process_start(pid) != start:
        return False
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return str(folder).encode() in argv


def _wait_gone(pid: int, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while process_start(pid) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
