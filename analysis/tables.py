"""Tables of formatted cells that fit the terminal: :class:`Grid` (title, header, rows, the
leading key columns) and its renderings: rich at any width (headers wrapped, then the table
transposed or split into narrower tables that repeat the key columns, never a cell cut
short), GitHub markdown, and the layout chosen for a width (:func:`layout`).

Only the standard library is imported at module level; rich where a table is printed.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

#: columns of a rich table beside its cells: a border and one space of padding each side
PAD = 3
_BREAKS = re.compile(r"\s+|(?<=-)")  # where a header may wrap: spaces, after hyphens


@dataclass(frozen=True)
class Grid:
    """Formatted cells: ``header`` names every column, the first ``keys`` of which say what
    a row is (repeated in every part of a split table)."""

    title: str
    header: list[str]
    rows: list[list[str]]
    keys: int = 1
    note: str = ""
    across: str = "metric"  # what the columns beside the keys are (heads them transposed)

    def transposed(self) -> Grid:
        """Columns as rows (one key column only): the metrics down, the schemes across."""
        if self.keys != 1:
            raise ValueError("only a grid with one key column can be transposed")
        header = [self.across, *(row[0] for row in self.rows)]
        rows = [[name, *(row[i] for row in self.rows)] for i, name in
                enumerate(self.header[1:], start=1)]
        return Grid(self.title, header, rows, 1, self.note, self.header[0])


def cell_width(text: str) -> int:
    """Terminal columns of ``text``'s longest line (wide East Asian characters count 2)."""
    return max((sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line)
                for line in text.split("\n")), default=0)


def _shortest_header(text: str) -> int:
    """The width of ``text`` wrapped at every space and after every hyphen."""
    return max((cell_width(w) for w in _BREAKS.split(text) if w), default=0)


def wrap_header(text: str, width: int) -> str:
    """``text`` in lines of at most ``width`` columns, wrapped at spaces and after hyphens
    (a piece longer than ``width`` stays whole)."""
    lines: list[str] = []
    line = ""
    for word in text.split():
        for n, piece in enumerate(p for p in re.split(r"(?<=-)", word) if p):
            joined = line + (" " if line and n == 0 else "") + piece
            if line and cell_width(joined) > width:
                lines.append(line)
                joined = piece
            line = joined
    return "\n".join([*lines, line]) if line else text


@dataclass(frozen=True)
class Layout:
    """How a grid is shown: possibly transposed, its headers at ``widths``, and the column
    indices of each table (the key columns first in every one)."""

    grid: Grid
    widths: list[int]
    parts: list[list[int]]

    def width(self, part: list[int]) -> int:
        return sum(self.widths[i] + PAD for i in part) + 1


def _widths(grid: Grid, wrap: bool) -> list[int]:
    cells = [max((cell_width(row[i]) for row in grid.rows), default=0)
             for i in range(len(grid.header))]
    heads = [(_shortest_header if wrap else cell_width)(h) for h in grid.header]
    return [max(c, h, 1) for c, h in zip(cells, heads, strict=True)]


def _split(grid: Grid, widths: list[int], width: int) -> list[list[int]]:
    """Consecutive columns packed greedily into tables of at most ``width`` columns (at
    least one column beside the keys in each, however narrow the terminal)."""
    keys = list(range(grid.keys))
    used = sum(widths[i] + PAD for i in keys) + 1
    parts: list[list[int]] = []
    current: list[int] = []
    room = width - used
    for i in range(grid.keys, len(grid.header)):
        need = widths[i] + PAD
        if current and need > room:
            parts.append(keys + current)
            current, room = [], width - used
        current.append(i)
        room -= need
    if current or not parts:
        parts.append(keys + current)
    return parts


def layout(grid: Grid, width: int) -> Layout:
    """The layout of ``grid`` in ``width`` columns: as it is with one-line headers, else
    with wrapped headers, else transposed, else split into the fewest tables (as it is when
    transposing gives no fewer)."""
    candidates = [grid] + ([grid.transposed()] if grid.keys == 1 and grid.rows else [])
    for g in candidates:
        for wrap in (False, True):
            widths = _widths(g, wrap)
            one = Layout(g, widths, [list(range(len(g.header)))])
            if one.width(one.parts[0]) <= width:
                return one
    split = [Layout(g, w, _split(g, w, width)) for g in candidates for w in [_widths(g, True)]]
    return min(split, key=lambda lay: len(lay.parts))  # min keeps the first of a tie


def print_grid(grid: Grid, console: Console) -> None:
    """``grid`` as rich tables that fit ``console.width``; then its note (dim)."""
    from rich.table import Table

    lay = layout(grid, console.width)
    g = lay.grid
    for n, part in enumerate(lay.parts, start=1):
        title = g.title if len(lay.parts) == 1 else f"{g.title} ({n} of {len(lay.parts)})"
        table = Table(title=title)
        for i in part:
            # fold, never an ellipsis, should a cell still not fit
            table.add_column(wrap_header(g.header[i], lay.widths[i]), overflow="fold",
                             justify="left" if i < g.keys else "right")
        for row in g.rows:
            table.add_row(*(row[i] for i in part))
        console.print(table)
    if grid.note:
        console.print(grid.note, style="dim")


def markdown(grid: Grid) -> str:
    """``grid`` as a GitHub markdown table under its title (bold), with its note."""
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |"

    rule = "|" + "|".join(":---" if i < grid.keys else "---:" for i in range(len(grid.header)))
    out = [f"**{grid.title}**", "", line(grid.header), rule + "|",
           *(line(row) for row in grid.rows)]
    if grid.note:
        out += ["", grid.note]
    return "\n".join(out) + "\n"
