"""A run's per-discovery records on disk while it runs (:class:`RecordSpool`).

Rows arrive as discoveries finish (not in job order). They are buffered a few thousand at a
time and written as chunk files (Parquet, each sorted by job), and for every job the spool
remembers which chunk holds its record (2 bytes a job, 4 past 32,767 chunks); its row there
is the number of that chunk's jobs before it. Reading back goes in job
order, a block of jobs at a time through a small cache of chunks, so writing
``results.csv``/``results.parquet`` or loading a frame never holds more than a few chunks.

The table's column types are those pandas would give the whole run's rows at once
(``pd.DataFrame(rows)``): for each column the spool keeps one value of each Python type it
saw, and the final dtype is pandas' inference over those (an int column that also holds
floats is float64 in every block, as in one big frame), so the CSV is byte for byte what
one frame would write.
"""

from __future__ import annotations

import contextlib
import pickle
import shutil
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from mypy_extensions import mypyc_attr

from analysis.files import OutputError

CHUNK_ROWS = 4096  # rows buffered before a chunk is written
BLOCK_ROWS = 8192  # rows per block read back in job order
CACHED_CHUNKS = 4  # chunks held while reading back (rows arrive nearly in job order)


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass
class _Scheme:
    """Where one scheme's rows are: the chunk number per job (-1: none yet)."""

    name: str
    chunk: np.ndarray
    reps: dict[str, dict[type, Any]] = field(default_factory=dict)  # column -> type -> value
    missing: set[str] = field(default_factory=set)  # columns some row lacks
    rows: int = 0
    ended: bool = False


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class RecordSpool:
    """Records of one run, scheme after scheme, in chunk files under ``folder`` (created;
    :meth:`close` removes it). Disk errors are :class:`analysis.files.OutputError`."""

    def __init__(self, folder: Path, chunk_rows: int | None = None) -> None:
        self.folder = Path(folder)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputError.from_os(exc, self.folder) from exc
        self.chunk_rows = chunk_rows or CHUNK_ROWS
        self.schemes: list[_Scheme] = []
        self.columns: dict[str, None] = {}  # every column, in order of first appearance
        self._buffer: list[tuple[int, dict]] = []
        self._chunks: list[Path] = []
        self._cache: OrderedDict[int, pd.DataFrame] = OrderedDict()

    # ------------------------------------------------------------------ writing

    def begin(self, scheme: str, jobs: int) -> None:
        """Rows of ``scheme`` follow, one per job ``0 .. jobs-1``."""
        if self.schemes and not self.schemes[-1].ended:
            self._flush()  # an unfinished scheme's rows stay on disk, never read
        # the scheme's chunks: one per chunk_rows rows, and the last, partial one
        last = len(self._chunks) + -(-jobs // self.chunk_rows) + 1
        self.schemes.append(_Scheme(scheme, np.full(
            jobs, -1, dtype=np.int16 if last < 2**15 else np.int32)))

    def add(self, job: int, row: dict) -> None:
        """The record of job ``job`` of the current scheme."""
        s = self.schemes[-1]
        reps, columns = s.reps, self.columns
        for key, value in row.items():
            seen = reps.get(key)
            if seen is None:
                reps[key] = {type(value): value}
                columns.setdefault(key, None)
                if s.rows:
                    s.missing.add(key)
            elif type(value) not in seen:
                seen[type(value)] = value
        if len(row) != len(reps):
            s.missing.update(k for k in reps if k not in row)
        s.rows += 1
        self._buffer.append((job, row))
        if len(self._buffer) >= self.chunk_rows:
            self._flush()

    def end(self) -> None:
        """The current scheme is complete: every job has its row."""
        self._flush()
        s = self.schemes[-1]
        if (s.chunk < 0).any():
            raise RuntimeError(f"records of scheme {s.name}: jobs without a record "
                               f"({int((s.chunk < 0).sum())})")
        s.ended = True

    def _flush(self) -> None:
        if not self._buffer:
            return
        s = self.schemes[-1]
        self._buffer.sort(key=lambda jr: jr[0])
        number = len(self._chunks)
        jobs = np.fromiter((j for j, _ in self._buffer), dtype=np.int64,
                           count=len(self._buffer))
        if (s.chunk[jobs] >= 0).any() or len(np.unique(jobs)) != len(jobs):
            raise RuntimeError(f"records of scheme {s.name}: a job recorded twice")
        s.chunk[jobs] = number
        frame = pd.DataFrame([r for _, r in self._buffer])
        self._buffer = []
        try:
            self._chunks.append(_save(frame, self.folder / f"chunk-{number:06d}"))
        except OSError as exc:  # a full disk, a removed folder …: one line
            raise OutputError.from_os(exc, self.folder) from exc

    # ------------------------------------------------------------------ reading

    def ended(self, schemes: Iterable[str] | None = None) -> list[_Scheme]:
        """The complete schemes (of ``schemes``, if given), in run order."""
        wanted = None if schemes is None else set(schemes)
        return [s for s in self.schemes if s.ended and (wanted is None or s.name in wanted)]

    def dtypes(self, schemes: list[_Scheme]) -> dict[str, Any]:
        """Each column's dtype, as one frame of all these schemes' rows would have it."""
        out: dict[str, Any] = {}
        for col in self.columns:
            values: dict[type, Any] = {}
            missing = False
            for s in schemes:
                values.update({t: v for t, v in s.reps.get(col, {}).items() if t not in values})
                missing = missing or col in s.missing or col not in s.reps
            if not values:
                continue
            sample = [{col: v} for v in values.values()] + ([{}] if missing else [])
            out[col] = pd.DataFrame(sample, columns=[col]).dtypes[col]
        return out

    def blocks(self, schemes: Iterable[str] | None = None, columns: list[str] | None = None,
               size: int = BLOCK_ROWS) -> Iterator[pd.DataFrame]:
        """The rows of the complete schemes in run and job order, ``size`` at a time, with
        the whole table's dtypes (``columns``: only those)."""
        chosen = self.ended(schemes)
        dtypes = self.dtypes(chosen)
        order = [c for c in dtypes if columns is None or c in columns]
        for s in chosen:
            before: dict[int, int] = {}  # chunk -> its rows in the blocks read so far
            for lo in range(0, len(s.chunk), size):
                yield self._block(s.chunk[lo:lo + size], before, order, dtypes)

    def _block(self, chunks: np.ndarray, before: dict[int, int], order: list[str],
               dtypes: dict[str, Any]) -> pd.DataFrame:
        """The rows of a block of consecutive jobs (``chunks``: each one's chunk). A chunk
        holds its jobs in job order, so a job's row is the count of the chunk's jobs before
        it: in earlier blocks (``before``, updated here) and earlier in this one."""
        perm = np.argsort(chunks, kind="stable")  # grouped by chunk, job order within
        by_chunk, starts = np.unique(chunks[perm], return_index=True)
        parts = []
        for number, start, stop in zip(by_chunk.tolist(), starts.tolist(),
                                       [*starts[1:].tolist(), len(perm)], strict=True):
            first = before.get(number, 0)
            before[number] = first + stop - start
            frame = self._chunk(number).reindex(columns=order)
            # taken (a copy): a slice's view would keep the whole reindexed chunk until the
            # block is built (measured: a higher peak when results are written)
            parts.append(frame.iloc[np.arange(first, first + stop - start)])
        block = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
        block = block.iloc[np.argsort(perm, kind="stable")].reset_index(drop=True)
        return block.astype({c: dtypes[c] for c in order})

    def _chunk(self, number: int) -> pd.DataFrame:
        cached = self._cache.get(number)
        if cached is not None:
            self._cache.move_to_end(number)
            return cached
        frame = _load(self._chunks[number])
        self._cache[number] = frame
        if len(self._cache) > CACHED_CHUNKS:
            self._cache.popitem(last=False)
        return frame

    def frame(self, schemes: Iterable[str] | None = None,
              columns: list[str] | None = None) -> pd.DataFrame:
        """The complete schemes' records as one frame (as ``pd.DataFrame(rows)`` in job
        order would be); ``columns``: only those."""
        parts = list(self.blocks(schemes, columns))
        if not parts:
            return pd.DataFrame()
        out = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
        self._cache.clear()
        return out

    def write(self, csv: Path | None = None, parquet: Path | None = None) -> None:
        """``results.csv`` and/or ``results.parquet`` of the complete schemes, block by
        block (the CSV as ``frame().to_csv(csv, index=False)`` would write it)."""
        with contextlib.ExitStack() as stack:
            fh = (stack.enter_context(open(csv, "w", encoding="utf-8", newline=""))
                  if csv is not None else None)
            writer = None
            if parquet is not None and not self.columns:  # no rows at all
                pd.DataFrame().to_parquet(parquet, index=False)
            elif parquet is not None:
                schema = pa.Schema.from_pandas(self._sample(), preserve_index=False)
                writer = stack.enter_context(pq.ParquetWriter(parquet, schema))
            stack.callback(self._cache.clear)
            for i, block in enumerate(self.blocks()):
                if fh is not None:
                    block.to_csv(fh, index=False, header=i == 0)
                if writer is not None:
                    writer.write_table(pa.Table.from_pandas(block, schema=writer.schema,
                                                            preserve_index=False))
            if fh is not None and not self.columns:  # no rows at all: what to_csv writes
                fh.write("\n")

    def _sample(self) -> pd.DataFrame:
        """A few rows holding each column's kinds of values (the Parquet schema's source)."""
        chosen = self.ended()
        dtypes = self.dtypes(chosen)
        cols: dict[str, list[Any]] = {}
        for col in dtypes:
            kinds: dict[type, Any] = {}
            for s in chosen:
                kinds.update({t: v for t, v in s.reps.get(col, {}).items() if t not in kinds})
            values = list(kinds.values())
            if any(col in s.missing or col not in s.reps for s in chosen):
                values.append(None)
            cols[col] = values
        n = max(map(len, cols.values()), default=0)
        return pd.DataFrame({c: v + [v[-1]] * (n - len(v)) for c, v in cols.items()}
                            ).astype(dtypes)

    def close(self) -> None:
        """Remove the chunk files and the folder."""
        self._cache.clear()
        shutil.rmtree(self.folder, ignore_errors=True)


def _save(frame: pd.DataFrame, stem: Path) -> Path:
    """A chunk as Parquet; as a pickle when Arrow cannot type a column (mixed objects)."""
    path = stem.with_suffix(".parquet")
    try:
        frame.to_parquet(path, index=False)
        return path
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        path.unlink(missing_ok=True)
    path = stem.with_suffix(".pickle")
    with open(path, "wb") as fh:
        pickle.dump(frame, fh, protocol=pickle.HIGHEST_PROTOCOL)
    return path


def _load(path: Path) -> pd.DataFrame:
    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    with open(path, "rb") as fh:  # a chunk this process wrote
        frame: pd.DataFrame = pickle.load(fh)
    return frame
