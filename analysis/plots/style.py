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


def _tick_text(v: float, _pos: object = None) -> str:
    return f"{v:g}"


def value_axis(ax: Axes, values: Iterable[float], which: str = "y", share: bool = False,
               zero: bool = True) -> str:
    """Scale one axis of ``ax`` for ``values``: a share from 0 to 1 (shown as %), a
    log axis with labelled 1-2-5 ticks when the positive values span a decade or more,
    else linear, from 0 when ``zero`` (so a small change does not look dramatic). Returns
    the scale: ``share``, ``log`` or ``linear``."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter, PercentFormatter

    v = np.asarray([x for x in values if np.isfinite(x)], dtype=float)
    axis = ax.yaxis if which == "y" else ax.xaxis
    set_lim = ax.set_ylim if which == "y" else ax.set_xlim
    if share:
        hi = max(1.0, float(v.max()) if len(v) else 1.0)
        set_lim(min(0.0, float(v.min()) if len(v) else 0.0) - 0.02 * hi, 1.02 * hi)
        axis.set_major_formatter(PercentFormatter(1.0, decimals=0))
        return "share"
    if len(v) and v.min() > 0 and v.max() / v.min() >= 10:
        (ax.set_yscale if which == "y" else ax.set_xscale)("log")
        decades = np.log10(v.max() / v.min())
        subs = (1.0, 2.0, 5.0) if decades <= 3 else (1.0,)
        axis.set_major_locator(LogLocator(base=10, subs=subs))
        axis.set_major_formatter(FuncFormatter(_tick_text))
        axis.set_minor_formatter(NullFormatter())
        return "log"
    if zero:
        hi = float(v.max()) if len(v) else 1.0
        set_lim(min(0.0, float(v.min()) if len(v) else 0.0), (hi if hi > 0 else 1.0) * 1.05)
    return "linear"


def same_as(lines: dict[str, np.ndarray]) -> dict[str, str]:
    """For each named line (x and y stacked, or y alone) that coincides with an earlier
    one — same shape, equal to 1e-9 relative —, the name of the first such earlier line."""
    out: dict[str, str] = {}
    names = list(lines)
    for i, name in enumerate(names):
        a = np.asarray(lines[name], dtype=float)
        for other in names[:i]:
            if other in out:
                continue
            b = np.asarray(lines[other], dtype=float)
            if a.shape == b.shape and a.size and np.allclose(a, b, rtol=1e-9, atol=0,
                                                             equal_nan=True):
                out[name] = other
                break
    return out
