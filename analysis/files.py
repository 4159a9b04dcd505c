"""Safe output files: nothing half-written, readable modes, one-line disk errors.

* :func:`atomic_write` writes one file to a temporary name beside its target (same
  directory, so the final rename is atomic), gives it the mode normal file creation would
  (``0o666 & ~umask``, not :func:`tempfile.mkstemp`'s 0600), flushes it to disk and renames
  it into place. On any failure the temporary file is removed.
* :class:`Staging` writes a *set* of files into a hidden folder inside the output folder
  and moves them into place together, a marker file last (``summary.json``), or not at all:
  a failed or interrupted write leaves the folder as it was.
* :func:`check_output_dir` tries the output location before a run (exists or creatable,
  writable: a probe file is created and removed; free space against an estimate).
* Every ``OSError`` met while writing results becomes an :class:`OutputError` whose message
  is one line naming the path and the problem (no space left on device, read-only file
  system, permission denied, ...).
* Temporary names carry this host and process id (``.tooldns-<host>-<pid>-…``), so
  :func:`remove_stale` can delete what a killed process left behind without touching the
  files of a run still in progress.
* :class:`OutputLock` holds an output folder for one run: a second run into it is refused
  (naming the holder's pid) instead of both writing and the last silently winning.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import re
import shutil
import signal
import socket
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

#: what a failed write says, by errno (anything else: the OS's own words)
REASONS = {
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENOTDIR: "a parent is not a directory",
    errno.EISDIR: "is a directory",
    errno.EEXIST: "exists and is not a directory",
    errno.EFBIG: "file too large",
    errno.EIO: "input/output error",
    errno.ENAMETOOLONG: "file name too long",
    errno.ENOENT: "no such file or directory",
}

_HOST = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:6]
_STALE = re.compile(r"^\..*tooldns-([0-9a-f]{6})-(\d+)-")


def _tag() -> str:
    """This process's mark in temporary names (read at call time: workers fork/spawn)."""
    return f"tooldns-{_HOST}-{os.getpid()}-"


class OutputError(Exception):
    """Results could not be written: one line, naming the path and the problem."""

    def __init__(self, message: str, path: str = "", code: int | None = None) -> None:
        super().__init__(message, path, code)  # all in args: survives pickling (workers)
        self.path = path
        self.errno = code

    def __str__(self) -> str:
        return str(self.args[0])

    @classmethod
    def from_os(cls, exc: OSError, path: str | Path) -> OutputError:
        code = disk_errno(exc)
        reason = REASONS.get(code) if code is not None else None
        if reason is None:
            reason = (exc.strerror or str(exc) or type(exc).__name__).splitlines()[0]
        where = shown_path(exc.filename if code in (errno.ENOTDIR, errno.EEXIST) and
                           exc.filename else path)
        return cls(f"cannot write {where}: {reason}", where, code)


def disk_errno(exc: BaseException) -> int | None:
    """The errno of an OS error, also when a library (pyarrow) only puts it in the text."""
    code = getattr(exc, "errno", None)
    if isinstance(code, int) and code:
        return code
    text = str(exc)
    for code in REASONS:
        if os.strerror(code) in text:
            return code
    return None


def shown_path(path: str | Path) -> str:
    """``path`` as the user should see it: without our hidden staging folder."""
    parts = [p for p in Path(path).parts if not (p.startswith(".") and "tooldns-" in p)]
    return str(Path(*parts)) if parts else str(path)


# ------------------------------------------------------------------------ modes


_UMASK_LOCK = threading.Lock()


def umask() -> int:
    """The process umask (Linux: read, not set; elsewhere set and restored)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def file_mode() -> int:
    """The mode ``open(path, "w")`` would give a new file (0644 under the usual umask)."""
    return 0o666 & ~umask()


def make_dirs(path: Path) -> None:
    """``mkdir -p`` (modes from the umask: 0755 usually); OS errors as :class:`OutputError`."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError as exc:  # a file is in the way
        raise OutputError.from_os(OSError(errno.EEXIST, os.strerror(errno.EEXIST),
                                          exc.filename), path) from exc
    except OSError as exc:
        raise OutputError.from_os(exc, path) from exc


# ------------------------------------------------------------------------ writing


def finish_file(tmp: str | Path) -> None:
    """Give a freshly written file its normal mode and flush it to disk (a full disk on a
    file system that allocates late, NFS, ... shows up here, not in the write)."""
    os.chmod(tmp, file_mode())
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, write: Callable[[str], object]) -> None:
    """Call ``write(tmp_path)`` and move the result to ``path`` in one rename.

    The temporary file sits beside ``path`` and is removed on any failure (also an
    interrupt); ``OSError`` becomes :class:`OutputError` (one line).
    """
    path = Path(path)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{_tag()}")
        os.close(fd)
        write(tmp)
        finish_file(tmp)
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise OutputError.from_os(exc, path) from exc
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


@contextlib.contextmanager
def deferred_signals() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back for a few renames (main thread only; elsewhere a
    no-op): they are handled as usual right after the block."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    old: dict[int, Callable[[int, FrameType | None], Any] | int | None] = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        handler = signal.getsignal(sig)
        if handler in (signal.SIG_IGN, None):
            continue
        old[sig] = handler
        signal.signal(sig, lambda s, _f: caught.append(s))
    try:
        yield
    finally:
        for num, handler in old.items():
            signal.signal(num, handler)
        for num in caught:
            handler = old[num]
            if callable(handler):
                handler(num, None)
            else:  # SIG_DFL: let the OS act as it would have
                os.kill(os.getpid(), num)


class Staging:
    """A set of files that appears in ``out`` together or not at all.

    ``with Staging(out) as st:`` makes ``out`` and a hidden folder inside it; files are
    written there (:meth:`write`, or anything writing into :attr:`dir`); :meth:`commit`
    removes ``remove`` from ``out`` and moves every staged file into ``out``, the ``last``
    names last, with SIGINT/SIGTERM held back (:func:`deferred_signals`). Leaving the block
    removes the hidden folder and whatever it still holds.
    """

    def __init__(self, out: Path, committed: list[str] | None = None) -> None:
        self.out = Path(out)
        self.dir = self.out
        #: names moved into ``out`` so far (a caller's list: it sees them even when a
        #: held-back Ctrl-C is raised right after the commit)
        self.committed: list[str] = [] if committed is None else committed
        self._created = False

    def __enter__(self) -> Staging:
        self._created = not self.out.exists()
        make_dirs(self.out)
        remove_stale(self.out)
        try:
            self.dir = Path(tempfile.mkdtemp(dir=self.out, prefix=f".{_tag()}"))
        except OSError as exc:
            raise OutputError.from_os(exc, self.out) from exc
        return self

    def __exit__(self, *exc: object) -> None:
        if self.dir != self.out:
            shutil.rmtree(self.dir, ignore_errors=True)
        if self._created and not self.committed:  # a failed first write leaves no folder
            with contextlib.suppress(OSError):
                self.out.rmdir()

    def write(self, name: str, write: Callable[[str], object]) -> None:
        atomic_write(self.dir / name, write)

    def names(self) -> list[str]:
        return sorted(p.name for p in self.dir.iterdir() if not p.name.startswith("."))

    def commit(self, last: Iterable[str] = (), remove: Iterable[str] = ()) -> list[str]:
        """Move the staged files into ``out``; returns their names in the order moved."""
        last = list(last)
        names = [n for n in self.names() if n not in last] + [n for n in last
                                                               if (self.dir / n).exists()]
        with deferred_signals():
            try:
                for name in remove:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(self.out / name)
                for name in names:
                    os.replace(self.dir / name, self.out / name)
                    self.committed.append(name)
            except OSError as exc:
                raise OutputError.from_os(exc, self.out) from exc
        return names


LOCK = ".tooldns.lock"  # inside an output folder while a run writes it: the holder's pid


class OutputLock:
    """An output folder held by one run, from before it builds to its last file.

    ``with OutputLock(out):`` makes ``out`` if needed and takes an exclusive ``flock`` on
    ``out/.tooldns.lock``, writing this process's id into it; a run into a folder another
    process (or another run in this one) holds gets :class:`OutputError` naming the folder
    and the holder's pid. The kernel releases the lock with its process, so a killed run
    leaves at most the file, which the next run takes. Leaving the block removes the file,
    and ``out`` if it was made here and is empty. A file system without locks (some
    network mounts) leaves the run unlocked, as before.
    """

    def __init__(self, out: Path) -> None:
        self.out = Path(out)
        self.path = self.out / LOCK
        self._fd: int | None = None
        self._created = False

    def __enter__(self) -> OutputLock:
        self._created = not self.out.exists()
        make_dirs(self.out)
        while self._fd is None:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, file_mode())
            except OSError as exc:
                self._remove_dir()
                raise OutputError.from_os(exc, self.path) from exc
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
                os.close(fd)
                self._remove_dir()
                pid = f" (pid {holder})" if holder.isdigit() else ""
                raise OutputError(f"cannot write {shown_path(self.out)}: another run{pid} is "
                                  f"writing there; wait for it, or write elsewhere (--out)",
                                  str(self.out), errno.EBUSY) from None
            except OSError:  # no locks here (ENOLCK, EOPNOTSUPP): unlocked
                self._fd = fd
                return self
            try:  # the holder before us may have removed the file between open and lock
                current = os.stat(self.path).st_ino
            except FileNotFoundError:
                current = -1
            if current != os.fstat(fd).st_ino:
                os.close(fd)
                continue
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
            self._fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.path)  # while held: the next run locks a file of its own
            os.close(self._fd)
            self._fd = None
        self._remove_dir()

    def _remove_dir(self) -> None:
        if self._created:
            with contextlib.suppress(OSError):
                self.out.rmdir()  # only if empty


def remove_stale(folder: Path) -> list[Path]:
    """Delete temporary files and staging folders in ``folder`` left by processes of this
    host that no longer run (killed mid-write); those of live processes stay."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        m = _STALE.match(entry.name)
        if m is None or m.group(1) != _HOST or _alive(int(m.group(2))):
            continue
        path = Path(entry.path)
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                path.unlink()
        removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


# ------------------------------------------------------------------------ before a run


def human(size: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if size < 1000 or unit == "TB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} TB"  # pragma: no cover


def check_output_dir(path: str | Path, need: int = 0) -> str | None:
    """Make sure results can be written to ``path`` before anything is computed.

    ``path`` must be a folder or creatable (its nearest existing ancestor is a writable
    folder); a probe file is created, written, flushed and removed there (nothing else is
    created). Raises :class:`OutputError` when that fails or when the file system has less
    than ``need`` bytes free; returns a warning when it has less than twice that (its text:
    the caller prints it as a warning).
    """
    path = Path(path)
    base = path
    while not base.exists():
        if base.is_symlink():
            raise OutputError(f"cannot write {path}: {base} is a broken symbolic link",
                              str(path))
        if base.parent == base:
            break
        base = base.parent
    if not base.is_dir():
        raise OutputError(f"cannot write {path}: {base} exists and is not a directory",
                          str(path), errno.ENOTDIR)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=base, prefix=f".probe.{_tag()}")
        try:
            os.write(fd, b"\0" * 4096)  # a block: creating an empty file needs no space
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise OutputError.from_os(exc, path) from exc
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    if need <= 0:
        return None
    free = shutil.disk_usage(base).free
    if free < need:
        raise OutputError(f"cannot write {path}: not enough free space (about {human(need)} "
                          f"needed, {human(free)} free)", str(path), errno.ENOSPC)
    if free < 2 * need:
        return (f"{path}: little free space ({human(free)} free, the results need "
                f"about {human(need)})")
    return None


# ------------------------------------------------------------------------ a run's outputs
# (here rather than in sim.run.runner so `tooldns run` can refuse a bad folder before importing
# the simulation)

#: bytes of results per query and scheme (results.csv + results.parquet: about 240 on the
#: synthetic quickstart; catalogue intents are longer), per query and scheme with a packet
#: capture, and per run (plots, nodes.csv, summary): a generous estimate
ROW_BYTES, CAPTURE_ROW_BYTES, RUN_BYTES = 600, 4_000, 2_000_000


def output_dir(sc: Any, out_dir: str | Path | None = None) -> Path:
    """Where a run of scenario ``sc`` writes: ``out_dir``, the file's ``outputs.dir`` or
    ``results/<name>``."""
    return Path(out_dir or sc.outputs.dir or Path("results") / sc.name)


def estimated_output_bytes(sc: Any, capture: bool = False) -> int:
    """A rough upper estimate of what a run of scenario ``sc`` writes, from its queries,
    phases and schemes (before anything is built)."""
    queries = sc.workload.queries
    arrival = sc.workload.arrival
    if arrival.process == "trace" and arrival.trace:
        try:
            with open(arrival.trace, "rb") as fh:
                queries = sum(1 for _ in fh)
        except OSError:
            pass
    rows = queries * sc.workload.phases * len(sc.schemes)
    return rows * (ROW_BYTES + (CAPTURE_ROW_BYTES if capture else 0)) + RUN_BYTES


def check_output(sc: Any, out_dir: str | Path | None = None,
                 capture: bool = False) -> str | None:
    """:func:`check_output_dir` for a run of scenario ``sc``: refuse
    (:class:`OutputError`) a folder it could not write; a warning if space is tight."""
    return check_output_dir(output_dir(sc, out_dir), estimated_output_bytes(sc, capture))
