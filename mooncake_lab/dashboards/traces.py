"""Dashboard of lecture 03 (trace part): look at a trace four ways.

The trace comes from :func:`mooncake_lab.traces.cached_trace` (parsed once per process); each view
is one experiment of :mod:`mooncake_lab.experiments.l03_traces` / ``l03_cache`` and one plot of
:mod:`mooncake_lab.plots.traces`.
"""
from __future__ import annotations

import ipywidgets as widgets

from ..experiments import l03_cache, l03_traces
from ..plots import traces as plots
from ..traces import as_trace
from . import Dashboard
from .cache import TRACE_CHOICES

__all__ = ["TraceDashboard", "VIEWS"]

#: The views: arrivals per bin, length CDFs, gaps between distinct timestamps, block popularity.
VIEWS = ("arrivals", "lengths", "gaps", "popularity")


class TraceDashboard(Dashboard):
    """Controls: ``trace``, ``view`` (one of :data:`VIEWS`), ``bin_s`` (arrival bin, 1 … 600 s)."""

    title = "Lecture 03 · the trace, four ways"

    def __init__(self, trace: str = "conversation", view: str = "arrivals", bin_s: int = 60,
                 traces=TRACE_CHOICES):
        self._init = (trace, view, bin_s, tuple(traces))
        self._popularity: dict = {}
        super().__init__()

    def _build_controls(self) -> dict:
        trace, view, bin_s, traces = self._init
        return {
            "trace": widgets.Dropdown(options=traces, value=trace, description="trace"),
            "view": widgets.ToggleButtons(options=VIEWS, value=view, description="view"),
            "bin_s": widgets.IntSlider(value=bin_s, min=1, max=600, description="bin (s)",
                                       continuous_update=False),
        }

    def _draw(self):
        t = as_trace(self.value("trace"))
        view = self.value("view")
        self.controls["bin_s"].disabled = view != "arrivals"
        if view == "arrivals":
            return plots.arrivals(l03_traces.arrivals_per_minute(t, float(self.value("bin_s"))), t.name)
        if view == "lengths":
            return plots.length_cdfs(l03_traces.length_cdf(t), t.name)
        if view == "gaps":
            return plots.timestamp_gaps(l03_traces.timestamp_gaps(t), t.name)
        if t not in self._popularity:  # ranks of 10^5 blocks: compute once per trace
            self._popularity[t] = l03_cache.block_popularity_table(t)
        return plots.block_popularity(self._popularity[t], t.name)
