"""The guest kernel: a distribution kernel image with its modules, and the modules the
initramfs must load before the guest's root filesystem (host's root over 9p) exists."""

from __future__ import annotations

import gzip
import lzma
import re
import shutil
import subprocess
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

#: what the initramfs loads (with their dependencies) to mount the host's root: virtio PCI
#: transport, 9p over virtio, overlayfs
BOOT_MODULES = ("virtio_pci", "9pnet_virtio", "9p", "overlay")
#: what the Mininet engine needs in the guest (loaded on demand by modprobe from the root)
NETEM_MODULE = "sch_netem"
BUSYBOX_PATHS = ("/bin/busybox", "/usr/bin/busybox")


class KernelError(RuntimeError):
    """No usable guest kernel, module or busybox (the message says what to install)."""


@dataclass(frozen=True)
class GuestKernel:
    """A bootable kernel image and the module tree of the same version."""

    version: str
    image: Path  # /boot/vmlinuz-VERSION
    modules: Path  # /lib/modules/VERSION

    def module_file(self, name: str) -> Path | None:
        """The module file of ``name`` (``-`` and ``_`` alike), or None if it is built in or
        absent (see :meth:`builtin`)."""
        found = self._index.get(name.replace("-", "_"))
        return self.modules / found[0] if found else None

    def builtin(self, name: str) -> bool:
        return name.replace("-", "_") in self._builtins

    @cached_property
    def _builtins(self) -> frozenset[str]:
        """Names in ``modules.builtin`` (read once)."""
        builtin = self.modules / "modules.builtin"
        if not builtin.exists():
            return frozenset()
        return frozenset(_module_name(line) for line in builtin.read_text().split())

    def load_order(self, names: tuple[str, ...]) -> list[Path]:
        """Module files for ``names`` and everything they depend on, dependencies first
        (``modules.dep``); built-in modules are skipped, a missing one is an error."""
        index = self._index
        order: list[Path] = []
        seen: set[str] = set()

        def visit(name: str) -> None:
            if name in seen:
                return
            seen.add(name)
            if name not in index:
                if self.builtin(name):
                    return
                raise KernelError(f"kernel {self.version}: module {name} not found in "
                                  f"{self.modules}")
            path, deps = index[name]
            for dep in deps:
                visit(_module_name(dep))
            order.append(self.modules / path)

        for name in names:
            visit(name.replace("-", "_"))
        return order

    @cached_property
    def _index(self) -> dict[str, tuple[str, list[str]]]:
        """name -> (relative path, dependency paths) from ``modules.dep`` (read once)."""
        dep = self.modules / "modules.dep"
        if not dep.exists():
            raise KernelError(f"kernel {self.version}: {dep} is missing (run depmod "
                              f"{self.version})")
        index: dict[str, tuple[str, list[str]]] = {}
        for line in dep.read_text().splitlines():
            path, _, deps = line.partition(":")
            index[_module_name(path)] = (path, deps.split())
        return index


def _module_name(path: str) -> str:
    """``kernel/fs/9p/9p.ko.xz`` -> ``9p``."""
    return re.sub(r"\.ko(\.(xz|gz|zst))?$", "", path.rsplit("/", 1)[-1]).replace("-", "_")


def _version_key(version: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"[.\-+]", version))


def find_kernel(version: str | None = None, boot: Path = Path("/boot"),
                lib: Path = Path("/lib/modules")) -> GuestKernel:
    """The newest kernel under ``boot`` whose modules include netem and 9p (or ``version``).
    Raises :class:`KernelError` saying what to install if there is none."""
    found = []
    for image in boot.glob("vmlinuz-*"):
        v = image.name.removeprefix("vmlinuz-")
        if version and v != version:
            continue
        kernel = GuestKernel(v, image, lib / v)
        try:
            if all(kernel.module_file(m) or kernel.builtin(m)
                   for m in (NETEM_MODULE, "9p", "overlay")):
                found.append(kernel)
        except KernelError:
            continue
    if not found:
        which = f"kernel {version}" if version else "kernel"
        raise KernelError(f"no guest {which} with netem, 9p and overlay modules under {boot} "
                          f"and {lib} (Debian: apt-get install linux-image-amd64; Ubuntu: "
                          f"linux-image-generic; bash .ci/setup installs it)")
    return max(found, key=lambda k: _version_key(k.version))


def module_bytes(path: Path) -> bytes:
    """A module file's contents, uncompressed (busybox ``insmod`` loads plain ELF only)."""
    data = path.read_bytes()
    if path.name.endswith(".xz"):
        return lzma.decompress(data)
    if path.name.endswith(".gz"):
        return gzip.decompress(data)
    if path.name.endswith(".zst"):
        if shutil.which("zstd") is None:
            raise KernelError(f"{path} is zstd-compressed and zstd is not installed")
        return subprocess.run(["zstd", "-dc", str(path)], check=True,
                              capture_output=True).stdout
    return data


def static_busybox() -> Path:
    """A statically linked busybox (Debian's ``busybox-static``): the initramfs has no libc."""
    for candidate in BUSYBOX_PATHS:
        path = Path(candidate)
        if path.exists() and not _dynamic(path):
            return path
    raise KernelError("no statically linked busybox (apt-get install busybox-static)")


def _dynamic(path: Path) -> bool:
    """Whether an ELF executable names a program interpreter (is dynamically linked)."""
    head = path.read_bytes()[:4096]
    if head[:4] != b"\x7fELF" or head[4] != 2:  # not a 64-bit ELF: treat as unusable
        return True
    phoff = int.from_bytes(head[32:40], "little")
    size, count = int.from_bytes(head[54:56], "little"), int.from_bytes(head[56:58], "little")
    for i in range(count):
        at = phoff + i * size
        if at + 4 <= len(head) and int.from_bytes(head[at:at + 4], "little") == 3:  # PT_INTERP
            return True
    return False
