"""One qemu guest: the command line, the accelerator, the console, and its end.

:class:`GuestVM` boots :mod:`sim.vm.initramfs`'s initramfs on a :class:`GuestKernel` with the
host's root and the job folder shared over 9p (virtio), no network device (the guest's only
links are the ones Mininet makes inside it), and the serial console on a pipe. It waits for
the guest to power off, at most ``timeout`` seconds; whatever happens (a timeout, a crash,
Ctrl-C or SIGTERM in the caller) the qemu process group is killed and reaped before
:meth:`GuestVM.run` returns or raises.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sim.vm.initramfs import JOB_TAG, ROOT_TAG
from sim.vm.kernel import GuestKernel

QEMU = "qemu-system-x86_64"
STOP_GRACE = 3.0  # seconds between SIGTERM and SIGKILL of qemu
_ESCAPES = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1bc|\r")  # SeaBIOS screen codes


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

    def command(self) -> list[str]:
        name = f"tooldns-vm-{os.getpid()}"
        cmd = [QEMU, "-name", f"{name},process={name}", *self.accel.qemu_args(),
               "-m", str(self.memory_mib), "-smp", str(self.cpus),
               "-display", "none", "-monitor", "none", "-serial", "stdio", "-no-reboot",
               "-nic", "none", "-kernel", str(self.kernel.image), "-initrd", str(self.initramfs),
               "-append", f"console=ttyS0 quiet panic=-1 tooldns.upper={self.upper}",
               "-virtfs", f"local,path=/,mount_tag={ROOT_TAG},security_model=none,"
                          "readonly=on,multidevs=remap",
               "-virtfs", f"local,path={self.job_dir},mount_tag={JOB_TAG},security_model=none"]
        for tag, path in self.shares:
            cmd += ["-virtfs", f"local,path={path},mount_tag={tag},security_model=none,"
                               "multidevs=remap"]
        return cmd

    def run(self, timeout: float, console: Callable[[str], None]) -> float:
        """Boot, pass every console line to ``console``, wait for the guest to power off;
        returns the wall seconds it ran. Raises :class:`VMError` on a timeout or if qemu
        fails; the qemu process is gone whenever this returns or raises."""
        started = time.monotonic()
        proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
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
