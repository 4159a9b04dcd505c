"""What a researcher sees on a terminal: the summary of ``tooldns run`` readable at 80
columns (no cell cut short), ``--format csv|json|markdown`` matching ``summary.json``, sweep
progress on stderr only, a closed pipe ending ``analysis.*`` and ``tooldns`` quietly, and
the project's warnings as one CLI line each."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from analysis.console import scheme_grid
from analysis.metrics import NOTE, SCHEME_TABLE, format_value, metrics
from analysis.pipes import CLOSED
from analysis.tables import Grid, layout, print_grid
from sim.cli import common
from sim.cli import main as cli

ROOT = Path(__file__).resolve().parents[3]
QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"
ELLIPSIS = "…"
TINY_SWEEP = {
    "name": "tiny-console-sweep", "seed": 2,
    "namespace": {"tools": 40, "branching": 2, "depth": 1, "orgs": 0},
    "network": {"topology": "star", "nodes": 4, "agents": 2,
                "link": {"delay": {"mean": 0.002}}},
    "schemes": [{"name": "k1", "k": 1}, {"name": "k3", "k": 3}],
    "workload": {"queries": 6, "pool": 6, "arrival": {"rate": 20.0}},
    "sweep": {"grid": {"namespace.branching": [2, 3]}, "workers": 1},
}


def _tooldns(*args: str, columns: int | None = None, **kw: object
             ) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns is not None:
        env["COLUMNS"] = str(columns)
    return subprocess.run([sys.executable, "-m", "sim.cli", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, check=False, **kw)  # type: ignore


def parse_tables(text: str) -> dict[tuple[str, str], str]:
    """Every cell of the rich tables in ``text`` by (row key, column header): headers
    wrapped over several lines joined again (no space after a hyphen)."""
    cells: dict[tuple[str, str], str] = {}
    head: list[list[str]] = []
    in_head = False
    for line in text.splitlines():
        if line.startswith("┏"):
            head, in_head = [], True
        elif line.startswith("┡"):
            in_head = False
        elif line.startswith("┃") and in_head:
            head.append([c.strip() for c in line.strip("┃").split("┃")])
        elif line.startswith("│") and head:
            row = [c.strip() for c in line.strip("│").split("│")]
            names = []
            for parts in zip(*head, strict=True):
                name = ""
                for part in (p for p in parts if p):
                    name += part if not name or name.endswith("-") else " " + part
                names.append(name)
            for name, cell in zip(names[1:], row[1:], strict=True):
                cells[(row[0], name)] = cell
    return cells


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, dict, Path]:
    out = tmp_path_factory.mktemp("quickstart")
    proc = _tooldns("run", str(QUICKSTART), "--out", str(out), columns=80)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, proc.stderr, json.loads((out / "summary.json").read_text()), out


def test_quickstart_at_80_columns_shows_every_number_in_full(
        quickstart: tuple[str, str, dict, Path]) -> None:
    stdout, _, summary, _ = quickstart
    assert ELLIPSIS not in stdout
    assert max(len(line) for line in stdout.splitlines() if line[:1] in "┏┃│┡└") <= 80
    headline = stdout[:stdout.index(NOTE.split()[0] + " " + NOTE.split()[1])]  # then phases
    cells = parse_tables(headline)
    assert cells
    for scheme, values in summary["schemes"].items():
        for m in metrics(SCHEME_TABLE):
            want = format_value(m.fmt, values.get(m.key))
            # schemes down or across, whichever fitted
            got = cells.get((scheme, m.label), cells.get((m.label, scheme)))
            assert got == want, (scheme, m.key, got, want)


def test_format_csv_and_json_are_summary_json_and_nothing_else(
        quickstart: tuple[str, str, dict, Path], tmp_path: Path) -> None:
    summary = quickstart[2]
    for fmt in ("csv", "json"):
        proc = _tooldns("run", str(QUICKSTART), "--out", str(tmp_path / fmt), "--format", fmt)
        assert proc.returncode == 0, proc.stderr
        assert "results written to" in proc.stderr
        if fmt == "json":
            got = json.loads(proc.stdout)  # the whole of stdout is one document
            assert got["schemes"] == summary["schemes"]
            assert (got["scenario"], got["seed"]) == (summary["scenario"], summary["seed"])
            continue
        rows = list(csv.DictReader(io.StringIO(proc.stdout)))
        assert [r["scheme"] for r in rows] == list(summary["schemes"])
        for row in rows:
            for key, value in summary["schemes"][row["scheme"]].items():
                assert row[key] == ("" if value is None else str(value)), (row["scheme"], key)


def test_format_markdown_has_every_cell_unshortened(quickstart: tuple[str, str, dict, Path]
                                                    ) -> None:
    summary = quickstart[2]
    from analysis.console import summary_text

    text = summary_text(summary, "markdown")
    grid = scheme_grid(summary)
    lines = text.splitlines()
    assert "| " + " | ".join(grid.header) + " |" in lines
    for row in grid.rows:
        assert "| " + " | ".join(row) + " |" in lines


@pytest.mark.parametrize("width", [40, 80, 120, 200])
def test_layout_never_cuts_a_cell(width: int) -> None:
    names = ["tooldns", "tooldns-k0-warmed", "unmodified-resolver", "agentdns", "ans"]
    header = ["scheme", *(f"metric number {i}" for i in range(15))]
    rows = [[n, *(f"{1000 * i + j:.2f}" for j in range(15))] for i, n in enumerate(names)]
    grid = Grid("t", header, rows)
    buf = io.StringIO()
    print_grid(grid, Console(file=buf, width=width))
    text = buf.getvalue()
    assert ELLIPSIS not in text
    cells = parse_tables(text)
    for row in rows:
        for name, value in zip(header[1:], row[1:], strict=True):
            assert cells.get((row[0], name), cells.get((name, row[0]))) == value
    lay = layout(grid, width)
    assert all(lay.width(part) <= width for part in lay.parts) or width == 40
    if width == 200:  # schemes down, headers wrapped, one table
        assert lay.grid is grid and len(lay.parts) == 1
    if width <= 80:  # transposed: schemes across (5 columns fit in 80, not in 40)
        assert lay.grid.header[1:] == names and len(lay.parts) == (1 if width == 80 else 5)


def test_a_table_that_fits_is_left_as_it_is() -> None:
    grid = Grid("t", ["scheme", "success", "median ms"], [["a", "100.0%", "20.66"]])
    lay = layout(grid, 80)
    assert lay.grid is grid and lay.parts == [[0, 1, 2]]


def test_sweep_progress_on_stderr_table_or_csv_on_stdout(tmp_path: Path) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(TINY_SWEEP))
    proc = _tooldns("sweep", str(path), "--out", str(tmp_path / "out"), "--format", "csv")
    assert proc.returncode == 0, proc.stderr
    assert "points on 1 workers" in proc.stderr and "points run" in proc.stderr
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    saved = list(csv.DictReader(io.StringIO((tmp_path / "out" / "sweep.csv").read_text())))
    assert rows == saved and len(rows) == 4
    again = _tooldns("sweep", str(path), "--out", str(tmp_path / "out"), columns=80)
    assert again.returncode == 0, again.stderr
    assert "workers" not in again.stdout and "already done" in again.stderr
    assert ELLIPSIS not in again.stdout and "k3" in again.stdout


def _closed_pipe(*args: str) -> subprocess.CompletedProcess[str]:
    """``args`` with stdout a pipe whose reader is already gone."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(args, stdout=write, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                              check=False)
    finally:
        os.close(write)


@pytest.mark.parametrize("module", ["analysis.results", "analysis.columns", "sim.cli"])
def test_closed_pipe_is_quiet(quickstart: tuple[str, str, dict, Path], module: str) -> None:
    folder = quickstart[3]
    args = {"analysis.results": [str(folder)], "analysis.columns": [], "sim.cli": ["schema"]}
    proc = _closed_pipe(sys.executable, "-m", module, *args[module])
    assert (proc.returncode, proc.stderr) == (CLOSED, "")
    # `| head -1`: nothing on stderr, the pipeline's status 0 (without pipefail)
    shell = subprocess.run(["bash", "-c", f"{sys.executable} -m {module} "
                            f"{' '.join(args[module])} | head -1"],
                           capture_output=True, text=True, cwd=ROOT, check=False)
    assert (shell.returncode, shell.stderr) == (0, "")
    assert shell.stdout.count("\n") == 1


def test_project_warnings_are_one_cli_line(monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    from sim.engines.mininet import NetemWarning

    def schema_run(_args: object) -> int:
        for _ in range(3):  # as once per scheme
            warnings.warn("mininet engine: no netem qdisc on this kernel", NetemWarning,
                          stacklevel=1)
        return 0

    monkeypatch.setattr(cli.COMMANDS["schema"], "run", schema_run)
    monkeypatch.setattr(common.consoles, "_err", None)
    assert cli.main(["schema"]) == 0
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "netem" in line]
    assert lines == ["warning: mininet engine: no netem qdisc on this kernel"], err
    assert "NetemWarning" not in err
