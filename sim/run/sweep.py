"""Parameter sweeps: one scenario run per point of a grid over dotted scenario fields.

A scenario's ``sweep:`` section (:class:`sim.scenario.SweepSpec`) maps dotted fields to
lists of values; the points are their cartesian product in file order (the last field
varies fastest). Each point is the scenario with those fields replaced, no sweep section
and no plots, run by :func:`sim.run.runner.run_scenario` into ``<out>/points/<point id>/`` in
a pool of spawned worker processes.

A point whose folder already holds ``summary.json`` (written atomically by the runner) is
not run again, so an interrupted sweep resumes where it stopped. The point id is the
point's index plus a short hash of its whole scenario, so changing the base scenario or
the grid never reuses results computed for something else. When all points are done,
``sweep.csv`` and ``sweep.parquet`` hold one row per (point, scheme): the grid values and
the scheme's summary metrics.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import itertools
import json
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from analysis.files import (
    OutputError,
    Staging,
    atomic_write,
    check_output_dir,
    estimated_output_bytes,
    make_dirs,
    remove_stale,
)
from analysis.intervals import SEED
from sim.errors import ScenarioError, shown
from sim.limits import check_scenario, check_sweep_size
from sim.loading import resolved_yaml
from sim.provenance import KEY as PROVENANCE
from sim.provenance import provenance, utc_now
from sim.scenario import Scenario, SweepSpec

SUMMARY = "summary.json"


@dataclass(frozen=True)
class SweepPoint:
    index: int
    id: str
    overrides: dict[str, Any]
    scenario: Scenario


@dataclass
class SweepResult:
    out_dir: Path
    points: list[SweepPoint]
    table: pd.DataFrame
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)


def expand_grid(grid: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """The cartesian product of the grid, in file order (the last field varies fastest)."""
    keys = list(grid)
    return [dict(zip(keys, combo, strict=True))
            for combo in itertools.product(*(grid[k] for k in keys))]


def _shown(overrides: dict[str, Any]) -> str:
    return ", ".join(f"{k}={shown(v)}" for k, v in overrides.items())


def grid_of(scenario: Scenario) -> dict[str, list[Any]]:
    """The grid the scenario's runs cover: its sweep grid, then (``seeds`` > 1) a ``seed``
    axis of ``seed, seed+1, …`` varying fastest. Empty: a single run."""
    grid: dict[str, list[Any]] = dict(scenario.sweep.grid) if scenario.sweep else {}
    if scenario.seeds > 1:
        grid[SEED] = [scenario.seed + i for i in range(scenario.seeds)]
    return grid


def sweep_points(scenario: Scenario) -> list[SweepPoint]:
    """Every point of the scenario's grid (:func:`grid_of`), validated and checked like a
    scenario file (:func:`sim.limits.check_scenario`), with a stable id."""
    grid = grid_of(scenario)
    if not grid:
        raise ScenarioError(f"sweep: scenario {scenario.name!r} has no sweep section")
    check_sweep_size(grid, "")  # before the grid is expanded
    points = []
    for index, overrides in enumerate(expand_grid(grid)):
        where = f"sweep.grid: point {index} ({_shown(overrides)})"
        try:
            sc = scenario.with_overrides({**overrides, "seeds": 1})
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(x) for x in err["loc"])
            raise ScenarioError(f"{where}: {loc}: {err['msg']} (got "
                                f"{shown(err.get('input'))})") from None
        except (ValueError, IndexError) as exc:
            raise ScenarioError(f"{where}: {exc}") from None
        check_scenario(sc.model_copy(update={"sweep": None}), where)
        sc = sc.model_copy(update={"sweep": None, "seeds": 1,
                                   "outputs": sc.outputs.model_copy(update={"dir": None,
                                                                            "plots": False})})
        # fields left at their defaults are not hashed, so a new scenario field (with a
        # default) keeps the ids of existing points, and a sweep resumes after an upgrade
        digest = hashlib.sha256(json.dumps(sc.model_dump(mode="json", exclude={"name"},
                                                         exclude_defaults=True),
                                           sort_keys=True).encode()).hexdigest()[:8]
        point_id = f"{index:03d}-{digest}"
        sc = sc.model_copy(update={"name": f"{scenario.name}-{point_id}"})
        points.append(SweepPoint(index, point_id, overrides, sc))
    return points


def _is_done(point_dir: Path) -> bool:
    """``summary.json`` marks a finished point (the runner writes ``scenario.yaml`` just after
    it, so both must be there)."""
    try:
        json.loads((point_dir / SUMMARY).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (point_dir / "scenario.yaml").exists()


class _Terminated(BaseException):
    """SIGTERM in a pool worker running a point: unwinds it (temporary files and the
    staging folder are removed on the way), then the worker exits."""


_IN_POINT = False  # a pool worker is inside _run_point
PR_SET_NAME, PR_SET_PDEATHSIG = 15, 1  # <linux/prctl.h>
WORKER_NAME = b"tooldns-sweep"  # a pool worker's name in ps/top (/proc/PID/comm), once armed
CLEANUP_S = 5  # a terminated worker's time to unwind before SIGALRM ends it


def _run_point(data: dict, out_dir: str) -> None:
    """Worker: run one point (imported lazily so the parent stays light)."""
    global _IN_POINT
    from sim.run.runner import run_scenario

    _IN_POINT = True
    try:
        run_scenario(Scenario.model_validate(data), out_dir=out_dir, write=True)
    except _Terminated:
        os._exit(128 + signal.SIGTERM)
    finally:
        _IN_POINT = False


def _on_sigterm(signum: int, _frame: object) -> None:
    """Pool worker: stop now (idle) or unwind the point first (bounded by SIGALRM)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends it at once
    if not _IN_POINT:
        os._exit(128 + signum)
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.alarm(CLEANUP_S)
    raise _Terminated


def die_with_parent(parent: int, sig: int = signal.SIGTERM) -> None:
    """Have the kernel send ``sig`` to this process when its parent dies (Linux
    ``prctl(PR_SET_PDEATHSIG)``), so a killed sweep (even SIGKILL) takes its workers with
    it; exit at once if the parent is already gone."""
    _prctl(PR_SET_PDEATHSIG, int(sig))
    if os.getppid() != parent:  # died before the request was in place
        os._exit(128 + sig)


def _prctl(option: int, arg: object) -> None:
    """Linux ``prctl(option, arg)`` through libc; nothing elsewhere."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(option, arg, 0, 0, 0)


def _grid_column(values: list[Any]) -> list[Any]:
    """Scalars of one type stay as they are; anything else becomes JSON text."""
    kinds = {type(v) for v in values if v is not None}
    if kinds <= {int, float} or (len(kinds) == 1 and kinds <= {str, bool}):
        return values
    return [json.dumps(v, sort_keys=True) for v in values]


def collect(points: list[SweepPoint], out_dir: Path) -> pd.DataFrame:
    """One row per (point, scheme) of the finished points: grid values and summary metrics."""
    rows: list[dict[str, Any]] = []
    keys = list(points[0].overrides) if points else []
    for p in points:
        path = out_dir / "points" / p.id / SUMMARY
        if not path.exists():
            continue
        summary = json.loads(path.read_text(encoding="utf-8"))
        for scheme, metrics in summary["schemes"].items():
            rows.append({"point": p.id, **p.overrides, "scheme": scheme, **metrics})
    df = pd.DataFrame(rows, columns=None if rows else ["point", *keys, "scheme"])
    for key in keys:
        if len(df):
            df[key] = _grid_column(df[key].tolist())
    return df


def run_sweep(scenario: Scenario, out_dir: str | Path, workers: int | None = None,
              use_ray: bool = False, console: Console | None = None,
              ray_address: str | None = None) -> SweepResult:
    """Run every point not finished yet, then write ``sweep.csv`` and ``sweep.parquet``.

    Progress bars and notes go to ``console`` (default: stderr); the table of results is
    the caller's to print (:func:`analysis.console.sweep_grid`).

    ``workers`` defaults to the scenario's ``sweep.workers``. Points that fail are reported
    in :attr:`SweepResult.failed` (the others still run and are tabulated). With ``use_ray``
    the points are Ray tasks (:func:`_run_ray`) on a local instance or the cluster at
    ``ray_address``; the files and the table are the same.
    """
    grid = grid_of(scenario)
    if not grid:
        raise ScenarioError(f"sweep: scenario {scenario.name!r} has no sweep section")
    if workers is None:
        workers = (scenario.sweep.workers if scenario.sweep is not None
                   else SweepSpec.model_fields["workers"].default)
    if workers < 1:
        raise ValueError("workers must be at least 1")
    console = console or Console(stderr=True)
    started = utc_now()
    out = Path(out_dir)
    points = sweep_points(scenario)  # validate every point before creating anything
    result = SweepResult(out, points, pd.DataFrame())
    todo = []
    for p in points:
        if _is_done(out / "points" / p.id):
            result.skipped.append(p.id)
        else:
            todo.append(p)
    # the output folder is tried before anything runs (writable, free space for the rest)
    warning = check_output_dir(out, sum(estimated_output_bytes(p.scenario) for p in todo))
    if warning:
        console.print(f"warning: {warning}", style="yellow", markup=False, highlight=False)
    make_dirs(out)
    for folder in (out, *(out / "points" / p.id for p in todo)):
        remove_stale(folder)  # left by workers killed mid-write
    atomic_write(out / "scenario.yaml",
                  lambda p: Path(p).write_text(resolved_yaml(scenario), encoding="utf-8"))
    if result.skipped:
        console.print(f"{len(result.skipped)} of {len(points)} points already done in "
                      f"{out}/points/", style="dim")
    if todo and use_ray:
        _run_ray(todo, out, workers, console, result, ray_address)
    elif todo:
        _run_pool(todo, out, min(workers, len(todo)), console, result)
    table = collect(points, out)
    atomic_write(out / "sweep.csv", lambda p: table.to_csv(p, index=False))
    atomic_write(out / "sweep.parquet", lambda p: table.to_parquet(p, index=False))
    meta = {"scenario": scenario.name, "seed": scenario.seed, "grid": grid,
            "points": [p.id for p in points], "ran": result.ran, "skipped": result.skipped,
            "failed": result.failed}
    if SEED in grid and len(table):  # replications: mean ± CI, paired differences
        meta["intervals"] = _write_intervals(table, list(grid), out)
    meta[PROVENANCE] = provenance(started)
    atomic_write(out / "sweep.json", lambda p: Path(p).write_text(
        json.dumps(meta, indent=2) + "\n", encoding="utf-8"))
    if len(table):  # every metric against each grid axis, per scheme (sweep_<axis>.png)
        from analysis.plots.sweep import plot_sweep
        from analysis.titles import sweep_title

        plot_sweep(table, grid, out, sweep_title(meta))
        if SEED in grid:  # replications: each scheme's mean with its interval
            from analysis.plots.intervals import FILE, interval_figure
            from analysis.plots.style import save_figure

            save_figure(interval_figure(table, list(grid), title=sweep_title(meta)), out / FILE)
    result.table = table
    return result


def _write_intervals(table: pd.DataFrame, axes: list[str], out: Path) -> dict:
    """``intervals.csv`` (mean and 95 % CI per scheme over the seeds), ``paired.csv`` (each
    scheme minus the first, seed by seed) and the block ``sweep.json`` keeps."""
    from analysis.intervals import interval_block, interval_table, paired_table
    from analysis.metrics import SCHEME_TABLE

    means = interval_table(table, axes, SCHEME_TABLE)
    atomic_write(out / "intervals.csv", lambda p: means.to_csv(p, index=False))
    schemes = list(dict.fromkeys(table.scheme))
    paired = paired_table(table, axes, SCHEME_TABLE, schemes[0])
    atomic_write(out / "paired.csv", lambda p: paired.to_csv(p, index=False))
    return interval_block(table, axes, SCHEME_TABLE)


def _init_worker(parent: int) -> None:
    """Worker initializer: Ctrl-C is the parent's to handle (it stops the workers);
    SIGTERM unwinds a running point (no temporary files left); the worker dies with its
    parent, however the parent ends."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _on_sigterm)
    die_with_parent(parent)
    _prctl(PR_SET_NAME, ctypes.c_char_p(WORKER_NAME))


def _stop(pool: ProcessPoolExecutor, grace: float = CLEANUP_S + 1) -> None:
    """Drop queued points and stop running ones (SIGTERM: they remove their temporary
    files; SIGKILL after ``grace`` seconds); return when every worker is gone. Finished
    points are already on disk."""
    procs = list((getattr(pool, "_processes", None) or {}).values())  # gone after shutdown
    if not procs and hasattr(pool, "terminate_workers"):  # Python 3.14+, other internals
        pool.terminate_workers()
        return
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in procs:
        with contextlib.suppress(OSError, ValueError):
            proc.terminate()
    for attempt in (grace, 2.0):
        deadline = time.monotonic() + attempt
        alive = procs
        while alive and time.monotonic() < deadline:
            multiprocessing.connection.wait([p.sentinel for p in alive],
                                            timeout=deadline - time.monotonic())
            alive = [p for p in alive if p.exitcode is None and _running(p.pid)]
        for proc in alive:
            with contextlib.suppress(OSError, ValueError):
                proc.kill()
        procs = alive


def _running(pid: int | None) -> bool:
    """Whether ``pid`` still runs (a zombie waiting to be reaped does not)."""
    if pid is None:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def _run_pool(todo: list[SweepPoint], out: Path, workers: int, console: Console,
              result: SweepResult) -> None:
    columns = (TextColumn("[progress.description]{task.description}"), BarColumn(),
               MofNCompleteColumn(), TimeElapsedColumn())
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_init_worker, initargs=(os.getpid(),))
    try:
        with Progress(*columns, console=console) as progress:
            task = progress.add_task(f"{len(todo)} points on {workers} workers",
                                     total=len(todo))
            # workers start during the submits; they inherit an ignored SIGINT, so Ctrl-C
            # reaches only this process, which stops them
            previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
            try:
                pending: dict[Future, SweepPoint] = {
                    pool.submit(_run_point, p.scenario.model_dump(mode="json"),
                                str(out / "points" / p.id)): p
                    for p in todo
                }
            finally:
                signal.signal(signal.SIGINT, previous)
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    p = pending.pop(fut)
                    exc = fut.exception()
                    if isinstance(exc, OutputError):  # the disk, not the point: stop here
                        raise exc
                    if exc is None:
                        result.ran.append(p.id)
                    else:
                        result.failed[p.id] = f"{type(exc).__name__}: {exc}"
                        progress.console.print(f"[red]point {p.id} failed:[/red] "
                                               f"{escape(result.failed[p.id])}",
                                               highlight=False)
                    progress.advance(task)
    except BaseException:  # interrupted, or the disk is full: stop now; finished points
        _stop(pool)        # stay for a resume
        raise
    pool.shutdown(wait=True)
    result.ran.sort()


def _point_files(data: dict) -> dict[str, bytes]:
    """Ray task: run one point into a scratch folder on whichever machine runs the task and
    return its files, so a cluster needs no shared file system."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="tooldns-point-") as tmp:
        _run_point(data, tmp)
        return {p.name: p.read_bytes() for p in sorted(Path(tmp).iterdir()) if p.is_file()}


def _bytes_writer(data: bytes) -> Callable[[str], None]:
    def write(p: str) -> None:
        Path(p).write_bytes(data)

    return write


def _write_point(folder: Path, files: dict[str, bytes]) -> None:
    """Write a point's files together (or none of them), ``summary.json`` last (it marks
    the point done)."""
    with Staging(folder) as st:
        for name in sorted(files):
            st.write(name, _bytes_writer(files[name]))
        st.commit(last=[SUMMARY], remove=["partial.json"])


def _run_ray(todo: list[SweepPoint], out: Path, workers: int, console: Console,
             result: SweepResult, address: str | None) -> None:
    """Every point as a Ray task (one CPU each); results are written here as they arrive.

    Locally Ray gets ``workers`` CPUs (unless it is already running); on a cluster
    (``address``) as many tasks run at once as the cluster has CPUs. Every machine of a
    cluster needs the project installed (``bash .ci/setup``); input files named by the
    scenario (catalogue, topology, trace) must be at the same paths there.
    """
    from sim.engines.ray import ensure_ray

    ray = ensure_ray(address, num_cpus=workers)
    task = ray.remote(num_cpus=1, max_retries=0)(_point_files)
    columns = (TextColumn("[progress.description]{task.description}"), BarColumn(),
               MofNCompleteColumn(), TimeElapsedColumn())
    pending = {task.remote(p.scenario.model_dump(mode="json")): p for p in todo}
    try:
        with Progress(*columns, console=console) as progress:
            bar = progress.add_task(f"{len(todo)} points as Ray tasks", total=len(todo))
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    p = pending.pop(ref)
                    try:
                        _write_point(out / "points" / p.id, ray.get(ref))
                        result.ran.append(p.id)
                    except OutputError:  # the disk here, not the point: stop
                        raise
                    except Exception as exc:  # a failed point: reported, the others go on
                        cause = getattr(exc, "cause", None) or exc
                        result.failed[p.id] = f"{type(cause).__name__}: {cause}"
                        progress.console.print(f"[red]point {p.id} failed:[/red] "
                                               f"{escape(result.failed[p.id])}",
                                               highlight=False)
                    progress.advance(bar)
    except BaseException:  # interrupted: cancel the rest; finished points stay for a resume
        for ref in pending:  # not forced: the task unwinds and removes its scratch folder
            with contextlib.suppress(Exception):
                ray.cancel(ref)
        with contextlib.suppress(BaseException):
            ray.wait(list(pending), num_returns=len(pending), timeout=CLEANUP_S)
        with contextlib.suppress(BaseException):
            ray.shutdown()  # no Ray workers left behind (a cluster: just disconnects)
        raise
    result.ran.sort()
