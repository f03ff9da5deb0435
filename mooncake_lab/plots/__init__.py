"""Matplotlib figures of the course, one module per lecture; this module holds the shared style.

Every plotting function builds a :class:`matplotlib.figure.Figure` directly (not through pyplot),
so a dashboard can redraw inside a widget callback without a figure being displayed twice, and
returns it; notebooks display it with ``display(fig)`` or by leaving it last in a cell.
Every figure has a title and axis labels with units.
"""
from __future__ import annotations

from contextlib import contextmanager

import matplotlib as mpl
from matplotlib.figure import Figure

__all__ = ["new_figure", "style", "current_style", "figure_style", "log_limits", "PALETTE", "SLO_COLOR",
           "MIN_FONT_SIZE"]

#: Colour-blind-safe palette (Okabe & Ito 2008), used in this order by every plot.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
SLO_COLOR = "#D55E00"

_STYLES = {
    # Readable in a notebook on a laptop.
    "notebook": {"font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10, "lines.linewidth": 1.8,
                 "legend.fontsize": 9, "figure.dpi": 100},
    # Readable from the back of a lecture hall.
    "projector": {"font.size": 15, "axes.titlesize": 17, "axes.labelsize": 15, "lines.linewidth": 3.0,
                  "legend.fontsize": 13, "xtick.labelsize": 13, "ytick.labelsize": 13, "figure.dpi": 110},
}
#: Smallest text (points) a figure of each style may show: 8 pt on a laptop (the notebook style's
#: "small" is 8.3 pt; its "x-small", 6.9 pt, is not legible at 100 dpi), 12 pt on a projector.
#: ``tests/test_legibility.py`` checks every headline figure against it.
MIN_FONT_SIZE = {"notebook": 8.0, "projector": 12.0}
_BASE = {"axes.grid": True, "grid.alpha": 0.3, "axes.spines.top": False, "axes.spines.right": False,
         "axes.prop_cycle": mpl.cycler(color=PALETTE), "figure.constrained_layout.use": True}
_current = "notebook"


def style(name: str = "notebook") -> None:
    """Switch every later figure to a style: ``"notebook"`` (default) or ``"projector"`` (big text)."""
    global _current
    if name not in _STYLES:
        raise ValueError(f"style must be one of {sorted(_STYLES)}, got {name!r}")
    _current = name


def current_style() -> str:
    return _current


@contextmanager
def _rc():
    with mpl.rc_context({**_BASE, **_STYLES[_current]}):
        yield


@contextmanager
def figure_style(fig):
    """The style ``fig`` was made in (for artists a dashboard creates or draws later)."""
    with mpl.rc_context({**_BASE, **_STYLES[getattr(fig, "_mooncake_style", _current)]}):
        yield


def new_figure(nrows: int = 1, ncols: int = 1, *, width: float = 7.0, height: float = 4.2, **kw):
    """A ``(Figure, axes)`` pair in the course style; sizes in inches (scaled up for the projector)."""
    scale = 1.35 if _current == "projector" else 1.0
    with _rc():
        fig = Figure(figsize=(width * scale, height * scale))
        axes = fig.subplots(nrows, ncols, squeeze=True, **kw)
        # rcParams are read at artist creation; keep the style for later artists too.
        fig._mooncake_style = _current  # noqa: SLF001 (used by tests and dashboards)
    return fig, axes


def styled(fn):
    """Decorator for plotting functions: artists created inside use the current course style."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with _rc():
            return fn(*args, **kwargs)
    return wrapper


def log_limits(lo: float, hi: float, margin: float = 0.05) -> tuple[float, float]:
    """Axis limits spanning ``lo`` … ``hi`` (> 0) on a log axis with ``margin`` of the log range on
    each side: matplotlib's default autoscale margin, set explicitly so that a figure updated in
    place does not depend on what it showed before."""
    f = (hi / lo) ** margin if hi > lo else 2.0
    return lo / f, hi * f
