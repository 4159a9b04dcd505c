"""Printing a probe's figures: the machine line and Markdown tables of dicts."""

from __future__ import annotations

import json
import os
import platform


def machine() -> str:
    """The machine the figures were measured on."""
    return (f"{platform.node()} {platform.machine()} {os.cpu_count()} CPUs, "
            f"Python {platform.python_version()}")


def table(rows: list[dict]) -> None:
    """A Markdown table of dicts (same keys)."""
    if not rows:
        return
    head = list(rows[0])
    table = [[json.dumps(r[h]) if isinstance(r[h], dict | list) else str(r[h]) for h in head]
             for r in rows]
    widths = [max(len(x) for x in col) for col in zip(head, *table, strict=True)]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in table:
        print("| " + " | ".join(x.ljust(w) for x, w in zip(row, widths, strict=True)) + " |")
