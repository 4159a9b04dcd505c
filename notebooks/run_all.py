"""Execute the notebooks in this folder and save them with their outputs, so they read well
on GitHub (``tests/analysis/test_notebooks.py`` executes them too, without saving).

    python3 -m notebooks.run_all                 # all of them, in place
    python3 -m notebooks.run_all 02 04           # those whose name starts with 02 or 04
    python3 -m notebooks.run_all --check         # execute only; fail on any error

Each notebook runs in a fresh ``python3`` kernel with this folder as working directory
and writes its run under ``results/notebooks/``. Saved notebooks carry no execution
timestamps or timing metadata, and the kernel's version details are reduced to the
language name, so re-running them changes the files only where results change.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TIMEOUT = 180  # seconds per cell


def notebooks(prefixes: list[str] | None = None) -> list[Path]:
    """The numbered notebooks here (``NN-name.ipynb``), optionally by name prefix."""
    found = sorted(HERE.glob("[0-9][0-9]-*.ipynb"))
    return [p for p in found if not prefixes or any(p.name.startswith(x) for x in prefixes)]


def execute(path: Path, save: bool = False, timeout: int = TIMEOUT) -> float:
    """Run every cell of ``path`` (raises ``nbclient.exceptions.CellExecutionError`` on the
    first error); with ``save``, write the executed notebook back. Returns seconds taken."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                            resources={"metadata": {"path": str(HERE)}})
    start = time.perf_counter()
    client.execute()
    elapsed = time.perf_counter() - start
    if save:
        normalise(nb)
        nbformat.write(nb, path)
    return elapsed


def normalise(nb: object) -> None:
    """Drop what changes from run to run or machine to machine without the results
    changing: execution metadata, the kernel's version details."""
    meta = nb.metadata  # type: ignore[attr-defined]
    meta["language_info"] = {"name": "python"}
    meta.pop("widgets", None)
    for cell in nb.cells:  # type: ignore[attr-defined]
        cell.metadata.pop("execution", None)
        cell.metadata.pop("ExecuteTime", None)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Execute the notebooks and save their outputs.")
    p.add_argument("names", nargs="*", help="name prefixes (default: every notebook)")
    p.add_argument("--check", action="store_true", help="execute only, do not save")
    args = p.parse_args(argv)
    paths = notebooks(args.names)
    if not paths:
        print(f"no notebook matches {args.names}", file=sys.stderr)
        return 2
    for path in paths:
        seconds = execute(path, save=not args.check)
        print(f"{path.name}: {seconds:.1f} s{'' if args.check else ', saved'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
