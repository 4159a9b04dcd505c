"""The guest's initramfs: a static busybox, the modules that mount the host's root, and an
``/init`` that mounts it read-only over 9p under a tmpfs overlay, mounts the job share and
hands over to the job's script (``/tooldns-vm/guest.sh``, running from the host's root).

Written as a ``newc`` cpio archive (the format the kernel unpacks), uncompressed: it is a few
MiB, built in well under a second, and never leaves the run's temporary folder.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from sim.vm.kernel import BOOT_MODULES, GuestKernel, module_bytes, static_busybox

ROOT_TAG = "hostroot"  # 9p mount tags (at most 31 bytes)
JOB_TAG = "job"
JOB_DIR = "/tooldns-vm"  # where the job share appears in the guest
MSIZE = 512 * 1024  # 9p message size: fewer round trips to the host per file read

INIT = f"""#!/bin/busybox sh
# tooldns guest /init: the host's root (read-only, 9p) under a tmpfs overlay, then the job
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
fail() {{
  echo "tooldns-vm: initramfs: $*" > /dev/console
  echo o > /proc/sysrq-trigger
  sleep 60
}}
for m in $(cat /modules); do insmod "/lib/modules/$m" || fail "insmod $m failed"; done
upper=$(sed -n 's/.*tooldns.upper=\\([0-9]*[kmgKMG]\\).*/\\1/p' /proc/cmdline)
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize={MSIZE},cache=loose {ROOT_TAG} /lower \\
  || fail "cannot mount the host's root over 9p"
mount -t tmpfs -o size=${{upper:-1g}},mode=755 tmpfs /upper || fail "tmpfs"
mkdir -p /upper/u /upper/w
mount -t overlay overlay -o lowerdir=/lower,upperdir=/upper/u,workdir=/upper/w /newroot \\
  || fail "cannot mount the overlay root"
mkdir -p /newroot{JOB_DIR}
mount -t 9p -o trans=virtio,version=9p2000.L,msize={MSIZE} {JOB_TAG} /newroot{JOB_DIR} \\
  || fail "cannot mount the job share"
mount --move /proc /newroot/proc
mount --move /sys /newroot/sys
mount --move /dev /newroot/dev
exec switch_root /newroot /bin/sh {JOB_DIR}/guest.sh
"""


def cpio_newc(entries: Iterable[tuple[str, int, bytes]]) -> bytes:
    """A ``newc`` cpio archive of (path, mode, data) entries, directories before their
    contents; ends with the ``TRAILER!!!`` entry."""
    out = bytearray()
    for ino, (name, mode, data) in enumerate([*entries, ("TRAILER!!!", 0, b"")], start=1):
        encoded = name.encode() + b"\0"
        fields = (ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(encoded), 0)
        out += b"070701" + b"".join(b"%08X" % f for f in fields) + encoded
        out += b"\0" * (-len(out) % 4) + data
        out += b"\0" * (-len(out) % 4)
    return bytes(out)


def build_initramfs(kernel: GuestKernel, dest: Path) -> Path:
    """Write the initramfs for ``kernel`` to ``dest`` and return it."""
    modules = kernel.load_order(BOOT_MODULES)
    names = [m.name.split(".ko")[0] + ".ko" for m in modules]
    entries: list[tuple[str, int, bytes]] = [
        (d, 0o040755, b"") for d in ("bin", "dev", "proc", "sys", "lower", "upper", "newroot",
                                     "lib", "lib/modules")]
    entries.append(("bin/busybox", 0o100755, static_busybox().read_bytes()))
    entries += [(f"lib/modules/{n}", 0o100644, module_bytes(m))
                for n, m in zip(names, modules, strict=True)]
    entries.append(("modules", 0o100644, "".join(f"{n}\n" for n in names).encode()))
    entries.append(("init", 0o100755, INIT.encode()))
    dest.write_bytes(cpio_newc(entries))
    return dest
