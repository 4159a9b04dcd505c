"""A private network namespace for the calling thread: a run whose stock recursors query
the servers on port 53 at their glue addresses (``schemes[].resolver``).

:func:`private_network` moves the calling thread into a fresh network namespace
(``unshare(CLONE_NEWNET)``: only loopback, brought up; nothing leaves the machine and port
53 is free on every 127.0.0.0/8 address), and back into the one it came from when the
block ends (``setns``). Namespaces are per thread: sockets, threads and processes made
inside the block belong to the new one; the process's other threads stay where they were.
Needs root (CAP_SYS_ADMIN).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import subprocess
from collections.abc import Iterator

CLONE_NEWNET = 0x40000000


class NamespaceError(OSError):
    """The namespace could not be made (not root, no unshare, no ``ip``)."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


@contextlib.contextmanager
def private_network() -> Iterator[None]:
    """The block runs in a fresh network namespace with loopback up (see the module)."""
    if os.geteuid() != 0:
        raise NamespaceError("a private network namespace needs root (CAP_SYS_ADMIN)")
    libc = _libc()
    with open("/proc/thread-self/ns/net", "rb") as old:
        if libc.unshare(CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise NamespaceError(err, f"unshare(CLONE_NEWNET): {os.strerror(err)}")
        try:
            up = subprocess.run(["ip", "link", "set", "lo", "up"], capture_output=True,
                                text=True)
            if up.returncode != 0:
                raise NamespaceError(f"ip link set lo up: {up.stderr.strip()}")
            yield
        finally:
            if libc.setns(old.fileno(), CLONE_NEWNET) != 0:  # back where the thread was
                err = ctypes.get_errno()
                raise NamespaceError(err, f"setns back: {os.strerror(err)}")
