"""Safe outputs: the output folder is tried before a run, disk errors are one line and leave
nothing half-written, Ctrl-C keeps finished schemes, sweep workers die with their parent,
files are created 0644.

Root ignores permission bits, so a 0500 folder only stops writes for other users: as root
the read-only case is a real read-only tmpfs (mounted in a private mount namespace with
``unshare -m``) and, everywhere, EROFS/ENOSPC simulated in the writes themselves.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

from analysis import files as atomic
from analysis.files import OutputError, Staging, atomic_write, check_output_dir, remove_stale
from sim.cli import main as cli
from sim.run.sweep import WORKER_NAME

ROOT = Path(__file__).resolve().parents[3]

TINY = """\
name: tiny-out
engine: simpy
seed: 2
namespace: {tools: 40, branching: 2, depth: 1, orgs: 0}
network: {topology: star, nodes: 4, agents: 2, link: {delay: {mean: 0.002}}}
schemes:
  - {name: k1, k: 1}
  - {name: k3, k: 3}
workload: {queries: 10, pool: 10, arrival: {rate: 20.0}}
outputs: {plots: false}
"""

# three schemes of most of a second each (CPU): Ctrl-C lands in the second
SLOW = """\
name: slow-out
engine: simpy
seed: 3
namespace: {tools: 200, branching: 4, depth: 2, orgs: 0}
network: {topology: star, nodes: 4, agents: 4, link: {delay: {mean: 0.002}}}
schemes:
  - {name: s1, k: 2, cache: false}
  - {name: s2, k: 2, cache: false}
  - {name: s3, k: 2, cache: false}
workload: {queries: 500, pool: 50, arrival: {rate: 50.0}}
outputs: {plots: false}
"""

# two points of ~30 s CPU each: workers that outlived their parent would be seen
LONG_SWEEP = """\
name: long-sweep
engine: simpy
seed: 4
namespace: {tools: 60, branching: 3, depth: 1, orgs: 0}
network: {topology: star, nodes: 4, agents: 2, link: {delay: {mean: 0.002}}}
schemes:
  - {name: a, k: 2, cache: false}
workload: {queries: 20000, pool: 50, arrival: {rate: 100.0}}
sweep:
  grid:
    seed: [4, 5]
  workers: 2
"""

TABLES = ("results.parquet", "results.csv", "nodes.csv", "scenario.yaml")


def _scenario(tmp_path: Path, text: str = TINY, name: str = "tiny.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _hidden(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob(".*"))


def _digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.iterdir()) if p.is_file()}


PROGRESS = re.compile(r"\d+/\d+ \d+:\d\d:\d\d\s*$")  # the sweep's progress bar (stderr)


def _one_line(text: str) -> str:
    """The one line a failed or interrupted command leaves on stderr (progress lines, also
    on stderr, are left out)."""
    lines = [line for line in text.splitlines() if line.strip() and ": scheme " not in line
             and not PROGRESS.search(line)]
    assert len(lines) == 1, text
    assert "Traceback" not in text
    return lines[0]


def _python(code: str) -> list[str]:
    """A Python child with Ctrl-C as usual even if this process ignores SIGINT."""
    return [sys.executable, "-c",
            "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n" + code]


def _cli(*args: str) -> list[str]:
    return _python(f"import sys; from sim.cli.main import main; sys.exit(main({list(args)!r}))")


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(entry.name))
    return out


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")  # a zombie is gone, only not reaped yet


def _wait(predicate, timeout: float, step: float = 0.05) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


# ---------------------------------------------------------------------------- atomic writes


def test_files_are_created_with_the_umask_not_0600(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        atomic_write(tmp_path / "a.txt", lambda p: Path(p).write_text("x"))
        with Staging(tmp_path / "run") as st:
            st.write("b.txt", lambda p: Path(p).write_text("y"))
            st.commit()
        os.umask(0o027)
        atomic_write(tmp_path / "c.txt", lambda p: Path(p).write_text("z"))
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a.txt").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "run" / "b.txt").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "run").stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / "c.txt").stat().st_mode) == 0o640
    assert _hidden(tmp_path) == []


def test_a_failed_write_removes_its_temporary_file(tmp_path: Path) -> None:
    (tmp_path / "keep.csv").write_text("old\n")

    def half(p: str) -> None:
        Path(p).write_text("half")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with pytest.raises(OutputError) as info:
        atomic_write(tmp_path / "keep.csv", half)
    assert str(info.value) == f"cannot write {tmp_path / 'keep.csv'}: no space left on device"
    assert (tmp_path / "keep.csv").read_text() == "old\n"
    assert _hidden(tmp_path) == []
    with pytest.raises(KeyboardInterrupt):  # interrupted mid-write: same
        atomic_write(tmp_path / "new.csv", lambda p: (_ for _ in ()).throw(KeyboardInterrupt))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.csv"]


def test_library_errors_without_errno_are_recognised(tmp_path: Path) -> None:
    exc = OSError("Error writing bytes to file. Detail: [errno 30] Read-only file system")
    err = OutputError.from_os(exc, tmp_path / "x.parquet")
    assert err.errno == errno.EROFS and str(err).endswith(": read-only file system")


def test_stale_temporary_files_of_dead_processes_are_removed(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    tag = f"tooldns-{atomic._HOST}"
    (tmp_path / f".results.csv.{tag}-{dead.pid}-abc").write_text("x")
    (tmp_path / f".{tag}-{dead.pid}-dir").mkdir()
    (tmp_path / f".results.csv.{tag}-{os.getpid()}-abc").write_text("mine")  # alive
    (tmp_path / "results.csv").write_text("data")
    removed = remove_stale(tmp_path)
    assert len(removed) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f".results.csv.{tag}-{os.getpid()}-abc", "results.csv"]


# ---------------------------------------------------------------------------- before a run


def test_check_output_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert check_output_dir(tmp_path / "a" / "b") is None
    assert not (tmp_path / "a").exists()  # tried, not created
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputError, match="is not a directory"):
        check_output_dir(tmp_path / "file" / "out")
    free = shutil.disk_usage(tmp_path).free
    with pytest.raises(OutputError, match="not enough free space"):
        check_output_dir(tmp_path, need=free * 10)
    assert "little free space" in (check_output_dir(tmp_path, need=free * 2 // 3) or "")
    assert _hidden(tmp_path) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores permission bits (0500 folders "
                    "stay writable); the read-only cases below use a read-only mount and "
                    "simulated EROFS instead")
def test_mode_0500_folder_is_refused_before_running(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        assert cli.main(["run", str(_scenario(tmp_path)), "--out", str(locked / "out")]) == 1
    finally:
        locked.chmod(0o700)
    line = _one_line(capsys.readouterr().err)
    assert str(locked / "out") in line and "permission denied" in line


def test_read_only_output_is_refused_before_anything_is_built(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """EROFS simulated where the probe file is created (see the tmpfs test for a real one)."""
    import sim.run.runner

    def erofs(*a, **k):  # type: ignore[no-untyped-def]
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    def never(*a, **k):  # type: ignore[no-untyped-def]
        raise AssertionError("the run started")

    monkeypatch.setattr(atomic.tempfile, "mkstemp", erofs)
    monkeypatch.setattr(sim.run.runner, "build_namespace", never)
    out = tmp_path / "out"
    assert cli.main(["run", str(_scenario(tmp_path)), "--out", str(out)]) == 1
    captured = capsys.readouterr()
    assert _one_line(captured.err) == (f"tooldns run: error: cannot write {out}: read-only "
                                       f"file system")
    assert not out.exists()


# ---------------------------------------------------------------------------- during a run


def test_full_disk_mid_write_keeps_the_previous_run_intact(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    path = _scenario(tmp_path)
    out = tmp_path / "out"
    assert cli.main(["run", str(path), "--out", str(out)]) == 0
    before = _digests(out)
    assert set(before) == {*TABLES, "summary.json"}
    assert {stat.S_IMODE((out / n).stat().st_mode) for n in before} == {
        0o666 & ~atomic.umask()}
    capsys.readouterr()
    real = pd.DataFrame.to_csv

    def full(self, p, *a, **k):  # type: ignore[no-untyped-def]
        if "nodes.csv" in str(p):  # results.* are written, nodes.csv half
            Path(p).write_text("node,rx_pack")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(self, p, *a, **k)

    monkeypatch.setattr(pd.DataFrame, "to_csv", full)
    assert cli.main(["run", str(path), "--out", str(out)]) == 1
    captured = capsys.readouterr()
    assert _one_line(captured.err) == (f"tooldns run: error: cannot write {out / 'nodes.csv'}: "
                                       f"no space left on device")
    assert _digests(out) == before  # the earlier complete run, untouched
    assert _hidden(out) == []
    # a first run into a new folder leaves no folder at all
    assert cli.main(["run", str(path), "--out", str(tmp_path / "new")]) == 1
    assert not (tmp_path / "new").exists()


def test_full_disk_at_fsync_is_one_error_and_no_files(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A file system that reports the full disk only when the data is flushed."""
    from sim.loading import load_scenario
    from sim.run.runner import run_scenario

    def fsync(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    out = tmp_path / "out"
    sc = load_scenario(_scenario(tmp_path))
    monkeypatch.setattr(atomic.os, "fsync", fsync)
    with pytest.raises(OutputError, match="no space left on device"):  # the probe, first
        run_scenario(sc, out_dir=out)
    with pytest.raises(OutputError) as info:
        run_scenario(sc, out_dir=out, check=False)
    assert str(info.value) == f"cannot write {out / 'results.parquet'}: no space left on device"
    assert not out.exists() and _hidden(tmp_path) == []


def test_real_tmpfs_read_only_and_full(tmp_path: Path) -> None:
    """A read-only tmpfs and a 16 KiB tmpfs, mounted in a private mount namespace."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (unshare -m); covered by the simulated "
                    "EROFS/ENOSPC tests")
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        pytest.skip("no unshare/mount on this machine")
    path = _scenario(tmp_path)
    helper = tmp_path / "helper.py"
    helper.write_text(textwrap.dedent(f"""\
        import json, os, subprocess, sys, time
        from pathlib import Path
        sys.path.insert(0, {str(ROOT)!r})
        base = Path({str(tmp_path)!r})
        ro, small = base / "ro", base / "small"
        for folder, opts in ((ro, "ro,size=1m"), (small, "size=16k")):
            folder.mkdir()
            if subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(folder)]
                              ).returncode:
                sys.exit(77)
        from analysis.files import OutputError
        from sim.cli.main import main
        from sim.run.runner import run_scenario
        from sim.loading import load_scenario
        sc = load_scenario({str(path)!r})
        res = {{}}
        t = time.perf_counter()
        try:
            run_scenario(sc, out_dir=ro / "out")
        except OutputError as exc:
            res["ro"] = [str(exc), time.perf_counter() - t]
        try:
            run_scenario(sc, out_dir=small / "out")
        except OutputError as exc:
            res["small_check"] = str(exc)
        try:  # past the free-space check: the disk really fills up mid-write
            run_scenario(sc, out_dir=small / "out", check=False)
        except OutputError as exc:
            res["small_write"] = str(exc)
        res["small_left"] = sorted(str(p.relative_to(small)) for p in small.rglob("*"))
        res["small_empty"] = os.statvfs(small).f_bfree == os.statvfs(small).f_blocks
        res["cli"] = main(["run", {str(path)!r}, "--out", str(ro / "out")])
        print(json.dumps(res))
        """), encoding="utf-8")
    proc = subprocess.run(["unshare", "-m", "--propagation", "private", sys.executable,
                           str(helper)], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)
    if proc.returncode == 77 or "unshare failed" in proc.stderr:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()[:200]}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    ro = tmp_path / "ro" / "out"
    assert res["ro"][0] == f"cannot write {ro}: read-only file system"
    assert res["ro"][1] < 2.0  # refused before anything was built
    assert res["small_check"].startswith(f"cannot write {tmp_path / 'small' / 'out'}: not "
                                         f"enough free space")
    assert res["small_write"].endswith(": no space left on device")
    assert res["small_left"] == [] and res["small_empty"]  # no file, no temp file, no folder
    assert res["cli"] == 1
    assert _one_line(proc.stderr) == f"tooldns run: error: cannot write {ro}: read-only file system"


# ---------------------------------------------------------------------------- interrupted


def test_a_crash_keeps_finished_schemes_and_a_complete_rerun_replaces_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sim.run.runner
    from sim.catalog.engines import EngineInfo, engine_info
    from sim.loading import load_scenario

    real = engine_info("simpy").load()
    calls = []

    def crash_second(plan, sink=None):  # type: ignore[no-untyped-def]
        calls.append(plan.scheme)
        if len(calls) == 2:
            raise RuntimeError("engine bug")
        return real(plan, sink)

    sc = load_scenario(_scenario(tmp_path))
    out = tmp_path / "out"
    out.mkdir()
    (out / "latency_cdf.png").write_bytes(b"an older run's plot")
    monkeypatch.setattr(EngineInfo, "load", lambda self: crash_second)
    with pytest.raises(RuntimeError, match="engine bug") as info:
        sim.run.runner.run_scenario(sc, out_dir=out)
    assert any("kept the 1 finished schemes (k1)" in n for n in info.value.__notes__)
    partial = json.loads((out / "partial.json").read_text())
    assert partial["finished_schemes"] == ["k1"] and partial["unfinished_schemes"] == ["k3"]
    assert partial["reason"] == "failed: RuntimeError: engine bug"
    assert sorted(p.name for p in out.iterdir()) == sorted([*TABLES, "partial.json"])
    assert set(pd.read_csv(out / "results.csv")["scheme"]) == {"k1"}
    monkeypatch.undo()
    sim.run.runner.run_scenario(sc, out_dir=out)  # complete: partial.json goes, summary.json comes
    assert sorted(p.name for p in out.iterdir()) == sorted([*TABLES, "summary.json"])


def test_ctrl_c_keeps_the_finished_schemes(tmp_path: Path) -> None:
    path = _scenario(tmp_path, SLOW)
    out = tmp_path / "out"
    (out).mkdir()
    (out / "summary.json").write_text("{}")  # an older complete run's marker
    proc = subprocess.Popen(_cli("run", str(path), "--out", str(out)), cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for line in proc.stderr:  # type: ignore[union-attr]  (progress lines)
            if "scheme s2" in line:  # s1 finished: its records are complete
                break
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    line = _one_line(err)
    partial = json.loads((out / "partial.json").read_text())
    kept = partial["finished_schemes"]
    assert kept[0] == "s1" and kept == ["s1", "s2", "s3"][:len(kept)] and len(kept) < 3
    assert line.startswith(f"tooldns run: interrupted: kept {len(kept)} finished scheme")
    assert str(out) in line and "partial.json" in line and "not finished: " in line
    assert partial["complete"] is False and partial["reason"] == "interrupted"
    assert partial["unfinished_schemes"] == ["s1", "s2", "s3"][len(kept):]
    assert list(partial["schemes"]) == kept
    assert not (out / "summary.json").exists()  # the folder no longer claims a complete run
    df = pd.read_csv(out / "results.csv")
    assert df["scheme"].drop_duplicates().tolist() == kept
    assert (df.groupby("scheme").size() == 500).all()
    cols = ["scheme", "job", "query_id", "latency_ms", "bytes_down"]
    pd.testing.assert_frame_equal(pd.read_parquet(out / "results.parquet")[cols], df[cols],
                                  check_dtype=False)
    assert set(pd.read_csv(out / "nodes.csv")["scheme"]) == set(kept)
    for name in (*TABLES, "partial.json"):
        assert stat.S_IMODE((out / name).stat().st_mode) & 0o444 == 0o444, name
    assert _hidden(out) == []


def _armed_workers(parent: int, n: int, timeout: float) -> list[int]:
    """The sweep's pool workers once they run as ``tooldns-sweep`` (named after their
    parent-death signal is set; without it they would then run their ~30 s point)."""
    workers: list[int] = []

    def found() -> bool:
        named = []
        for pid in _children(parent):
            with contextlib.suppress(OSError):
                if Path(f"/proc/{pid}/comm").read_text().strip() == WORKER_NAME.decode():
                    named.append(pid)
        workers[:] = named
        return len(workers) >= n

    assert _wait(found, timeout, 0.1), "the sweep's workers did not start"
    return workers


@pytest.mark.parametrize(("sig", "n"), [(signal.SIGKILL, 2), (signal.SIGTERM, 1)],
                         ids=["SIGKILL", "SIGTERM"])
def test_sweep_workers_die_with_their_parent(tmp_path: Path, sig: int, n: int) -> None:
    path = _scenario(tmp_path, LONG_SWEEP)
    out = tmp_path / "out"
    proc = subprocess.Popen(_cli("sweep", str(path), "--out", str(out), "--workers", str(n)),
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    workers: list[int] = []
    try:
        workers = _armed_workers(proc.pid, n, 120)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
        gone = _wait(lambda: not any(_running(p) for p in workers), 10)
        assert gone, f"workers still running after the parent's {sig.name}: {workers}"
    finally:
        proc.kill()
        for pid in workers:
            if _running(pid):
                os.kill(pid, signal.SIGKILL)
    if sig == signal.SIGTERM:  # stopped like Ctrl-C: one line, 143, nothing half-written
        assert proc.returncode == 143
        assert "interrupted; finished points are kept" in _one_line(err)
        assert _hidden(out) == []
    else:
        assert proc.returncode == -signal.SIGKILL
