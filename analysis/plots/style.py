"""What every figure shares: a figure with its own Agg canvas (matplotlib's object API: no
pyplot, no global backend, so figures work the same headless, in workers and in
notebooks), one colour per scheme, headings, and deterministic PNG output (fixed dpi, no
software/date metadata: the same data give byte-identical files)."""

from __future__ import annotations

import io
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from analysis.files import atomic_write

# fixed metadata so the same data give byte-identical PNG files
META = {"Software": None}
DPI = 110


def new_figure(figsize: tuple[float, float] = (6, 4)) -> tuple[Figure, Axes]:
    """A figure with its own Agg canvas (not registered with pyplot) and its one axes."""
    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    return fig, fig.subplots()


def new_grid(figsize: tuple[float, float], nrows: int, ncols: int, **kw: Any
             ) -> tuple[Figure, np.ndarray]:
    """Like :func:`new_figure` with an ``nrows`` x ``ncols`` array of axes (never squeezed);
    ``kw`` as for :meth:`Figure.subplots` (``sharey`` ...)."""
    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    return fig, fig.subplots(nrows, ncols, squeeze=False, **kw)


def png_bytes(fig: Figure) -> bytes:
    """The figure as PNG, exactly as :func:`save_figure` writes it."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight", metadata=META)
    return buf.getvalue()


def save_figure(fig: Figure, path: Path) -> None:
    """Write the figure as PNG atomically (analysis.files: a temporary file beside ``path``,
    removed on failure; mode from the umask; disk errors as one-line OutputError)."""
    try:
        atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=DPI,
                                                   bbox_inches="tight", metadata=META))
    finally:
        if (plt := sys.modules.get("matplotlib.pyplot")) is not None:
            plt.close(fig)  # a pyplot figure (older callers); a no-op for ours


def heading(target: Axes | Figure, what: str, title: str) -> None:
    """``what`` over ``title`` (when there is one) as the axes' title or figure's suptitle."""
    text = f"{what}\n{title}" if title else what
    if isinstance(target, Figure):
        target.suptitle(text, fontsize=10)
    else:
        target.set_title(text, fontsize=10)


def scheme_colors(schemes: Iterable[object]) -> dict[str, str]:
    """One colour per scheme, in order of first appearance (the same in every figure)."""
    names = list(dict.fromkeys(str(s) for s in schemes))
    palette = [f"C{i % 10}" for i in range(len(names))]
    return dict(zip(names, palette, strict=True))


def schemes_of(df: pd.DataFrame) -> list[str]:
    """The schemes of a run's records, in order of first appearance."""
    return list(dict.fromkeys(str(s) for s in df.scheme))
