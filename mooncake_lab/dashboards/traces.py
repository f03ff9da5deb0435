"""Dashboard of lecture 03 (trace part): look at a trace four ways.

The trace comes from :func:`mooncake_lab.traces.cached_trace` (parsed once per process); each view
is one experiment of :mod:`mooncake_lab.experiments.l03_traces` / ``l03_cache`` and one view class
of :mod:`mooncake_lab.plots.traces`. The four views share one figure (one axes each, in the same
place, one shown at a time): the bin slider only blits; switching view or trace redraws the axes.
"""
from __future__ import annotations

from functools import partial

import ipywidgets as widgets

from ..experiments import l03_cache, l03_traces
from ..plots import traces as plots
from ..traces import as_trace
from ..plots import figure_style, new_figure
from . import Dashboard, on_this_machine, sticky_limit
from .cache import TRACE_CHOICES, trace_options

__all__ = ["TraceDashboard", "VIEWS"]

#: The views: arrivals per bin, length CDFs, gaps between distinct timestamps, block popularity.
VIEWS = ("arrivals", "lengths", "gaps", "popularity")


class TraceDashboard(Dashboard):
    """Controls: ``trace``, ``view`` (one of :data:`VIEWS`), ``bin_s`` (arrival bin, 1 … 600 s)."""

    title = "Lecture 03 · the trace, four ways"

    def __init__(self, trace: str = "conversation", view: str = "arrivals", bin_s: int = 60,
                 traces=TRACE_CHOICES):
        self._traces = trace_options(traces, type(self).__name__)
        self._popularity: dict = {}
        super().__init__(trace=trace, view=view, bin_s=bin_s)

    def _build_controls(self) -> dict:
        return {
            "trace": widgets.Dropdown(options=self._traces, description="trace"),
            "view": widgets.ToggleButtons(options=VIEWS, description="view"),
            "bin_s": widgets.IntSlider(min=1, max=600, description="bin (s)", continuous_update=False),
        }

    def _setup(self):
        # One figure, one axes per view stacked in the same place; a move shows one of them.
        fig, ax = new_figure(height=3.8)
        with figure_style(fig):
            axes = [ax] + [fig.add_subplot(ax.get_subplotspec()) for _ in VIEWS[1:]]
            classes = (plots.ArrivalsView, plots.LengthCDFView, plots.GapsView, plots.PopularityView)
            self.views = {v: cls(a, live=True) for v, cls, a in zip(VIEWS, classes, axes)}
            self._ymax: dict = {}
            for view in VIEWS:                   # lay out with every view's labels once, then freeze
                self._show(view)
            fig.get_layout_engine().execute(fig)
            fig.set_layout_engine("none")
        return fig

    def _static_key(self):
        return self.value("view")

    def _prefetch_jobs(self, v: dict) -> list:
        """The other traces that are on this machine: load each (≈ 0.1 s) and rank its blocks (≈ 0.2 s)."""
        return [partial(self._popularity_of, t) for t in self.controls["trace"].options
                if t != v["trace"] and on_this_machine(t)]

    def _popularity_of(self, name: str):
        """The block popularity table of trace ``name``, computed once."""
        t = as_trace(name)
        if t not in self._popularity:  # ranks of 10^5 blocks
            self._popularity[t] = l03_cache.block_popularity_table(t)
        return self._popularity[t]

    def _show(self, view: str) -> None:
        t = as_trace(self.value("trace"))
        if view == "arrivals":
            per_bin = l03_traces.arrivals_per_minute(t, float(self.value("bin_s")))
            rate = float(per_bin["requests"].max()) * 60.0 / float(self.value("bin_s")) if len(per_bin) else 1.0
            span = (float(t.arrival_s[-1] - t.arrival_s[0]) if len(t) else 60.0) / 60.0
            # a y scale per trace that moves with the bin only when it must (narrow bins peak higher)
            self._ymax[t.name] = sticky_limit(self._ymax.get(t.name), rate)
            self.views[view].update(per_bin, t.name, ymax=self._ymax[t.name], span_min=span)
        elif view == "lengths":
            self.views[view].update(l03_traces.length_cdf(t), t.name)
        elif view == "gaps":
            self.views[view].update(l03_traces.timestamp_gaps(t), t.name)
        else:
            self.views[view].update(self._popularity_of(self.value("trace")), t.name)

    def _update(self):
        view = self.value("view")
        self.controls["bin_s"].disabled = view != "arrivals"
        for name, v in self.views.items():
            # the base class draws every animated artist that is visible, even on a hidden axes
            for a in (v.ax, *(a for a in v.ax.get_children() if a.get_animated())):
                a.set_visible(name == view)
        self._show(view)                         # (re-hides the view's optional texts if it must)
