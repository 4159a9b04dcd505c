"""A started resolver process, and the signal plumbing that keeps none alive after an
interrupted run."""

from __future__ import annotations

import contextlib
import signal
import subprocess
from pathlib import Path

from sim.interop.resolvers import Setup, Spec


def _die_with_parent(sig: int = signal.SIGKILL) -> None:
    """preexec_fn: send this child ``sig`` when the process that started it dies (Linux
    PR_SET_PDEATHSIG), so no resolver outlives an interrupted run."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, sig)


def term_with_parent() -> None:
    """preexec_fn: SIGTERM this child when its parent dies."""
    _die_with_parent(signal.SIGTERM)  # the namespace child cleans up on SIGTERM


def raise_interrupt(signum: int, frame: object) -> None:
    """A signal handler: SIGTERM in the namespace child becomes KeyboardInterrupt."""
    raise KeyboardInterrupt  # asyncio.run cancels, the finally blocks stop every process


class Running:
    """One started resolver process; its output goes to ``log``."""

    def __init__(self, spec: Spec, setup: Setup, log: Path) -> None:
        exe = spec.executable()
        if exe is None:
            raise FileNotFoundError(spec.binary)
        setup.workdir.mkdir(parents=True, exist_ok=True)
        argv = [exe, *spec.configure(setup)]
        self.spec, self.setup, self.log, self.argv = spec, setup, log, argv
        self._log = log.open("ab")
        self._log.write(f"### {' '.join(argv)}\n".encode())
        self._log.flush()
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self._log,
                                     stderr=subprocess.STDOUT, cwd=setup.workdir,
                                     preexec_fn=_die_with_parent)

    def tail(self, lines: int = 25) -> str:
        with contextlib.suppress(OSError):
            text = self.log.read_text(encoding="utf-8", errors="replace")
            return "\n".join(text.splitlines()[-lines:])
        return ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._log.close()

