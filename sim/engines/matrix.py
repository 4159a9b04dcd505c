"""The feature × engine table of ``docs/engines.md``, rendered from the catalogue.

``python3 -m sim.engines.matrix`` prints it; ``--write`` replaces the section between
:data:`START` and :data:`END` in ``docs/engines.md``. The cells and notes are
:data:`sim.catalog.engines.ENGINES`' and :data:`~sim.catalog.engines.SHARDED`'s, so edit
those and regenerate; ``tests/sim/engines/test_catalog.py`` fails while the page and the
catalogue differ.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path

from sim.catalog.engines import ENGINES, FEATURES, SHARDED, Feature, Support

DOC = Path(__file__).resolve().parents[2] / "docs" / "engines.md"
START = "<!-- matrix:start -->"
END = "<!-- matrix:end -->"
SHARDED_COLUMN = "simpy, sharded"
CELL = {"exact": "exact", "statistical": "statistical", "no": "—"}


def columns() -> dict[str, Mapping[Feature, Support]]:
    """Column name -> that column's cells: every engine, then a sharded simpy run."""
    cols: dict[str, Mapping[Feature, Support]] = {n: e.features for n, e in ENGINES.items()}
    cols[SHARDED_COLUMN] = SHARDED
    return cols


def _escape(text: str) -> str:
    return text.replace("|", "\\|")


def render_markdown() -> str:
    """The table (features down, engines across) and its numbered notes, one per distinct
    note of the catalogue; no trailing newline."""
    cols = columns()
    numbers: dict[str, int] = {}  # note -> its number, in order of first appearance
    lines = ["| feature | asked for by | " + " | ".join(cols) + " |",
             "|---|---|" + "---|" * len(cols)]
    for feature, info in FEATURES.items():
        cells = []
        for cells_of in cols.values():
            support = cells_of.get(feature)
            if support is None:  # the sharded column has no "shards" cell
                cells.append("")
                continue
            n = numbers.setdefault(support.note, len(numbers) + 1)
            cells.append(f"{CELL[support.level]} [{n}]")
        lines.append(f"| {info.title} | `{_escape(info.asked_by)}` | " + " | ".join(cells)
                     + " |")
    lines += ["", *(f"{n}. {_escape(note)}" for note, n in numbers.items())]
    return "\n".join(lines)


def _split(doc: str) -> tuple[str, str, str]:
    """(up to and with the start marker, the section, from the end marker on)."""
    if doc.count(START) != 1 or doc.count(END) != 1 or doc.index(START) > doc.index(END):
        raise ValueError(f"{DOC.name}: need one {START} ... {END} section")
    head, rest = doc.split(START, 1)
    body, tail = rest.split(END, 1)
    return head + START, body, END + tail


def section(doc: str) -> str:
    """What lies between the markers of ``doc``, without the newlines next to them."""
    return _split(doc)[1].removeprefix("\n").removesuffix("\n")


def with_section(doc: str, body: str) -> str:
    """``doc`` with its section replaced by ``body`` (on lines of its own)."""
    head, _, tail = _split(doc)
    return f"{head}\n{body}\n{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m sim.engines.matrix",
        description="the feature x engine table of docs/engines.md, from sim/catalog/engines.py")
    parser.add_argument("--write", action="store_true",
                        help=f"replace the table in {DOC} (else print it)")
    args = parser.parse_args(argv)
    text = render_markdown()
    if not args.write:
        sys.stdout.write(text + "\n")
        return 0
    doc = DOC.read_text(encoding="utf-8")
    new = with_section(doc, text)
    if new != doc:
        DOC.write_text(new, encoding="utf-8")
        print(f"{DOC}: table rewritten", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
