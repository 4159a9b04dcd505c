"""A ``tooldns run`` inside the guest: the job's scripts, the boot, the results folder.

The host writes two scripts into the job share: ``guest.sh`` (PID 1 after the initramfs:
mounts, loopback, then the job, then power-off) and ``job.sh`` (the output folder's share
mounted at the host's own path, a check that the kernel has netem, then the command). The
guest writes the command's stdout and exit status into the share; its stderr (progress,
warnings, errors) goes to the serial console, which the host streams. The results land in
the host's output folder through its share, written by the run's own atomic commit; the
host adds ``vm.json`` (kernel, accelerator, boot and run times). The scripts and the
initramfs live in a folder of :func:`sim.vm.machine.guest_folder`; before a guest boots,
the folders (and guests) of runs killed outright are swept (:func:`sim.vm.machine.sweep_stale`).
"""

from __future__ import annotations

import json
import os
import shlex
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from sim.vm.initramfs import JOB_DIR, MSIZE, build_initramfs
from sim.vm.kernel import NETEM_MODULE, find_kernel
from sim.vm.machine import (
    OWNER_FILE,
    GuestVM,
    VMError,
    choose_accel,
    guest_folder,
    qemu_unavailable,
    sweep_stale,
)

OUT_TAG = "out"
#: host variables the guest's command sees (nothing else of the host's environment)
PASSED_ENV = ("PATH", "HOME", "PYTHONPATH", "LANG", "LC_ALL", "COLUMNS", "NO_COLOR",
              "FORCE_COLOR", "CI", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
EXIT_NO_OUT, EXIT_NO_NETEM = 70, 71  # job.sh's own failures
MAX_STDOUT = 16 << 20  # bytes of the guest command's stdout printed here

GUEST_SH = f"""#!/bin/sh
# tooldns guest: PID 1 after the initramfs (the host's root, read-only, under a tmpfs overlay)
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
mount -t tmpfs -o mode=755 tmpfs /run
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
hostname tooldns-vm
ip link set lo up
echo "tooldns-vm: up at $(cut -d' ' -f1 /proc/uptime) s of guest time" > /dev/console
# stderr through a pipe, not the console's tty: progress bars are for terminals only
mkfifo /run/stderr
cat /run/stderr > /dev/console &
/bin/sh {JOB_DIR}/job.sh > {JOB_DIR}/stdout 2> /run/stderr
echo $? > {JOB_DIR}/status
wait
sync
echo o > /proc/sysrq-trigger
while :; do :; done  # PID 1 must not exit (the power-off is asynchronous)
"""


@dataclass(frozen=True)
class VMOptions:
    """How to boot the guest (``tooldns run --vm-*``)."""

    accel: str = "auto"  # auto | kvm | tcg
    memory_mib: int = 3072
    cpus: int = 2
    timeout_s: float = 1800.0


@dataclass(frozen=True)
class VMRun:
    """What one guest run gave: the command's status and stdout, and the VM's facts."""

    status: int
    stdout: str
    kernel: str
    accel: str
    accel_reason: str
    boot_s: float | None  # wall seconds from qemu's start to the guest's "up" line
    wall_s: float  # wall seconds from qemu's start to its exit

    def facts(self) -> dict:
        return {k: v for k, v in asdict(self).items() if k != "stdout"}


def unavailable() -> str | None:
    """Why a guest cannot be booted here (qemu, kernel or busybox missing), or None."""
    from sim.vm.kernel import KernelError, static_busybox

    if (reason := qemu_unavailable()) is not None:
        return reason
    try:
        find_kernel()
        static_busybox()
    except KernelError as exc:
        return str(exc)
    return None


def job_script(argv: list[str], out_dir: Path, cwd: Path, env: dict[str, str],
               accel: str) -> str:
    """``job.sh``: the output share at ``out_dir``, netem checked, then ``argv`` in ``cwd``
    with ``TOOLDNS_VM`` set to the accelerator (``kvm`` or ``tcg``: the Mininet engine gives
    an emulated CPU longer phases)."""
    out = shlex.quote(str(out_dir))
    lines = [
        f"mkdir -p {out} && mount -t 9p -o trans=virtio,version=9p2000.L,msize={MSIZE} "
        f"{OUT_TAG} {out} || {{ echo 'tooldns-vm: cannot mount the output folder' >&2; "
        f"exit {EXIT_NO_OUT}; }}",
        f"modprobe {NETEM_MODULE} || {{ echo \"tooldns-vm: the guest kernel $(uname -r) has no "
        f"netem qdisc ({NETEM_MODULE})\" >&2; exit {EXIT_NO_NETEM}; }}",
        f"cd {shlex.quote(str(cwd))} || exit {EXIT_NO_OUT}",
        *(f"export {k}={shlex.quote(v)}" for k, v in sorted(env.items())),
        f"export TOOLDNS_VM={shlex.quote(accel)}",
        "exec " + shlex.join(argv),
    ]
    return "set -u\n" + "\n".join(lines) + "\n"


def run_in_vm(argv: list[str], out_dir: Path, options: VMOptions,
              console: Callable[[str], None], progress: Callable[[str], None]) -> VMRun:
    """Boot a guest, run ``argv`` there (in this process's working directory, with its
    output folder ``out_dir`` shared), power it off; ``vm.json`` is written into
    ``out_dir``. Raises :class:`VMError` (or ``KeyboardInterrupt``) with no qemu left."""
    if (reason := unavailable()) is not None:
        raise VMError(reason)
    for line in sweep_stale():
        progress(f"vm: {line}")
    kernel = find_kernel()
    accel = choose_accel(options.accel)
    out_dir = out_dir.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    before = set(os.listdir(out_dir))
    env = {k: os.environ[k] for k in PASSED_ENV if k in os.environ}
    progress(f"vm: booting kernel {kernel.version} on {accel.name} ({accel.reason}), "
             f"{options.cpus} CPUs, {options.memory_mib} MiB")
    with guest_folder() as tmp:
        job = tmp / "job"
        job.mkdir()
        (job / "guest.sh").write_text(GUEST_SH)
        (job / "job.sh").write_text(job_script(argv, out_dir, Path.cwd(), env,
                                                         accel.name))
        vm = GuestVM(kernel, build_initramfs(kernel, tmp / "initramfs.cpio"), job, accel,
                     memory_mib=options.memory_mib, cpus=options.cpus,
                     shares=[(OUT_TAG, out_dir)], owner_file=tmp / OWNER_FILE)
        try:
            wall = vm.run(options.timeout_s, console)
        except BaseException:
            _remove_staging(out_dir, before)
            raise
        status_file = job / "status"
        if not status_file.exists():
            _remove_staging(out_dir, before)
            raise VMError("the guest powered off before its job finished (see the console "
                          "lines above)")
        text = status_file.read_text(errors="replace").strip()
        if not text.isdigit():
            raise VMError(f"the guest wrote an unreadable exit status: {text[:40]!r}")
        with open(job / "stdout", "rb") as fh:  # the command's table; bounded all the same
            stdout = fh.read(MAX_STDOUT).decode(errors="replace")
        result = VMRun(int(text), stdout, kernel.version,
                       accel.name, accel.reason, vm.boot_s, wall)
    if result.status == EXIT_NO_NETEM:
        raise VMError(f"the guest kernel {kernel.version} has no netem qdisc")
    if result.status == 0:
        from analysis.files import atomic_write

        facts = {**result.facts(), "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        atomic_write(out_dir / "vm.json",
                     lambda tmp: Path(tmp).write_text(json.dumps(facts, indent=2) + "\n"))
    return result


def _remove_staging(out_dir: Path, before: set[str]) -> None:
    """Hidden staging folders and files a stopped guest left in ``out_dir`` (its run commits
    atomically, so nothing else of it can be there)."""
    import shutil

    for name in set(os.listdir(out_dir)) - before:
        if name.startswith("."):
            path = out_dir / name
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
