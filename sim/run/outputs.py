"""A run's output folder: the complete run's files (staged, moved into place together,
``summary.json`` last), or on an interrupted or failed run the finished schemes'
(``partial.json``), and :class:`RunInterrupted` saying what was kept. The records come as
a frame or straight from the run's :class:`sim.run.spool.RecordSpool`, block by block."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from analysis.files import OutputError, Staging, finish_file
from sim.errors import ScenarioError
from sim.loading import resolved_yaml
from sim.run.spool import RecordSpool
from sim.run.summary import summarise
from sim.scenario import Scenario
from topologies.namespace import Namespace


class RunInterrupted(KeyboardInterrupt):
    """A run stopped by Ctrl-C (or SIGTERM, see ``tooldns run``): the schemes that had
    finished are in ``out`` (``results.*``, ``nodes.csv``, ``partial.json``), if any."""

    def __init__(self, out: Path | None, finished: list[str], unfinished: list[str],
                 files: list[str]) -> None:
        super().__init__(out, finished, unfinished, files)
        self.out, self.finished, self.unfinished, self.files = out, finished, unfinished, files

    def __str__(self) -> str:
        if not self.files:
            return "interrupted before any scheme finished; nothing written"
        return (f"interrupted: kept {len(self.finished)} finished scheme"
                f"{'s' if len(self.finished) != 1 else ''} of "
                f"{len(self.finished) + len(self.unfinished)} "
                f"({', '.join(self.finished)}) in {self.out}/ ({', '.join(self.files)}); "
                f"not finished: {', '.join(self.unfinished) or 'none'}")


SUMMARY, PARTIAL = "summary.json", "partial.json"
#: files of a complete run that an interrupted one does not rewrite (they would describe an
#: older run): removed when partial results are kept
PLOTS = ("latency_cdf.png", "bytes_per_query.png", "cache_hits_over_time.png",
         "success_over_time.png")
#: the record columns the standard figures read (analysis.plots.run, analysis.titles)
PLOT_COLUMNS = ["scenario", "engine", "seed", "scheme", "phase", "success", "latency_ms",
                "bytes_up", "bytes_down", "sent_s", "cache_hits", "round_trips"]


def _stage_tables(st: Staging, sc: Scenario, records: pd.DataFrame | RecordSpool,
                  load: pd.DataFrame) -> None:
    """The tables every run folder has, and the resolved scenario."""
    if isinstance(records, RecordSpool):  # one pass over the chunks writes both
        csv, parquet = st.dir / "results.csv", st.dir / "results.parquet"
        try:
            records.write(csv, parquet)
        except OSError as exc:
            raise OutputError.from_os(exc, exc.filename or parquet) from exc
        for path in (parquet, csv):  # on disk before the commit (as atomic_write does)
            try:
                finish_file(path)
            except OSError as exc:
                raise OutputError.from_os(exc, path) from exc
    else:
        df = records
        st.write("results.parquet", lambda p: df.to_parquet(p, index=False))
        st.write("results.csv", lambda p: df.to_csv(p, index=False))
    st.write("nodes.csv", lambda p: load.to_csv(p, index=False))
    st.write("scenario.yaml", lambda p: Path(p).write_text(resolved_yaml(sc), encoding="utf-8"))


def _csv(table: pd.DataFrame) -> Callable[[str], None]:
    def write(p: str) -> None:
        table.to_csv(p, index=False)

    return write


def _json(data: dict) -> Callable[[str], None]:
    def write(p: str) -> None:
        Path(p).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")

    return write


def write_outputs(out: Path, sc: Scenario, records: pd.DataFrame | RecordSpool,
                  load: pd.DataFrame, summary: dict, plots: bool = False,
                  committed: list[str] | None = None,
                  tables: dict[str, pd.DataFrame] | None = None) -> list[str]:
    """Write a complete run: every file (and, with ``plots``, the figures) is staged in a
    hidden folder inside ``out`` and moved into place together, ``summary.json`` last (its
    presence marks a finished run; sweeps resume on it); a ``partial.json`` of an earlier
    interrupted run is removed. On any failure nothing in ``out`` changes. Returns the
    names written (also appended to ``committed`` as they are moved into place).
    ``tables``: more CSV files by name (``churn.csv``), staged with the rest."""
    with Staging(out, committed) as st:
        _stage_tables(st, sc, records, load)
        for name, table in (tables or {}).items():
            st.write(name, _csv(table))
        st.write(SUMMARY, _json(summary))
        if plots:
            try:
                from analysis.plots.run import standard_plots

                standard_plots(records.frame(columns=PLOT_COLUMNS)
                               if isinstance(records, RecordSpool) else records, st.dir)
                if "faults" in summary:
                    from analysis.plots.faults import success_over_time

                    success_over_time(summary, st.dir)
            except OSError as exc:
                raise OutputError.from_os(exc, exc.filename or out) from exc
        return st.commit(last=[SUMMARY], remove=[PARTIAL])


def write_partial(out: Path, sc: Scenario, engine: str, ns: Namespace, records: RecordSpool,
                  load: list[dict], replay: dict, finished: list[str], reason: str
                  ) -> list[str]:
    """Keep the schemes that finished: their records and node load, the scenario and
    ``partial.json`` (the finished schemes' summary plus which schemes are missing and
    why), written together like :func:`write_outputs`. ``summary.json`` and plots of an
    earlier run in ``out`` are removed, so the folder never claims a complete run."""
    df = records.frame(finished)
    load_df = pd.DataFrame(load)
    if len(load_df):
        load_df = load_df[load_df["scheme"].isin(finished)].reset_index(drop=True)
    partial = {"complete": False, "reason": reason, "finished_schemes": list(finished),
               "unfinished_schemes": [s.name for s in sc.schemes if s.name not in finished],
               **summarise(sc, engine, _without_probes(sc, df), ns),
               "replay": {k: v for k, v in replay.items() if k in finished}}
    with Staging(out) as st:
        _stage_tables(st, sc, df, load_df)
        st.write(PARTIAL, _json(partial))
        return st.commit(last=[PARTIAL], remove=[SUMMARY, *PLOTS])


def _without_probes(sc: Scenario, df: pd.DataFrame) -> pd.DataFrame:
    """The records a scheme summary describes: churn probes (sim.build.churn) left out."""
    if sc.workload.churn is None:
        return df
    from sim.build.churn import ChurnSchedule

    return ChurnSchedule.workload_rows(df)


def keep_finished(exc: BaseException, write: bool, out: Path, sc: Scenario, engine: str,
                   ns: Namespace, records: RecordSpool, load: list[dict], replay: dict,
                   finished: list[str], written: list[str]) -> None:
    """A run stopped: on Ctrl-C (raises :class:`RunInterrupted`) or an unexpected error
    (adds a note to it), write the schemes that finished. Scenario and output errors, and
    runs that write nothing, are left as they are."""
    interrupted = isinstance(exc, KeyboardInterrupt)
    if isinstance(exc, RunInterrupted) or not write or not (interrupted or (
            isinstance(exc, Exception) and not isinstance(exc, (ScenarioError, OutputError)))):
        return
    unfinished = [s.name for s in sc.schemes if s.name not in finished]
    files = list(written)
    if finished and not written:
        reason = "interrupted" if interrupted else f"failed: {type(exc).__name__}: {exc}"
        try:
            files = write_partial(out, sc, engine, ns, records, load, replay, finished,
                                  reason.splitlines()[0])
        except OutputError as err:
            if not interrupted:
                exc.add_note(f"finished schemes not kept: {err}")
                return
            raise err from None
    if interrupted:
        raise RunInterrupted(out if files else None, list(finished), unfinished,
                             files) from None
    if files:
        exc.add_note(f"kept the {len(finished)} finished schemes ({', '.join(finished)}) in "
                     f"{out}/ ({', '.join(files)})")


