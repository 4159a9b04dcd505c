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
    script = job_script(argv, odd / "out", odd, {"HOME": "/root", "COLUMNS": "80"})
    exec_line = next(line for line in script.splitlines() if line.startswith("exec "))
    assert shlex.split(exec_line)[1:] == argv
    assert shlex.quote(str(odd / "out")) in script
    for text in (script, GUEST_SH, INIT):  # every script parses
        subprocess.run(["sh", "-n"], input=text.encode(), check=True)
