"""Figures of lecture 03 (trace part): arrivals, length CDFs, timestamp gaps, block popularity.

Each figure is a view class (built once, on a given axes or a new figure; ``update`` sets the data,
``live=True`` marks what changes for a dashboard's blitting) and a function that takes the tidy
DataFrame of the matching experiment in :mod:`mooncake_lab.experiments.l03_traces` /
:mod:`~mooncake_lab.experiments.l03_cache` and returns a :class:`matplotlib.figure.Figure` with a
title and axis labels with units. Titles are placed at a fixed ``y=1.0`` and log axes get
plain-text decade ticks: matplotlib's automatic title placement and mathtext tick labels cost most
of a redraw (dashboard budget: 150 ms per move).
"""
from __future__ import annotations

import numpy as np

from . import PALETTE, log_limits, new_figure, styled

__all__ = ["arrivals", "length_cdfs", "timestamp_gaps", "block_popularity", "plain_log_ticks", "ArrivalsView",
           "LengthCDFView", "GapsView", "PopularityView"]


def plain_log_ticks(axis) -> None:
    """Decade ticks labelled in plain text (1, 10, 1,000, 0.01) and no minor ticks on a log ``axis``.

    Matplotlib's default log labels are mathtext (10^k), which triples the time to redraw a small
    figure — too slow for a slider (lecture 03 budget: 150 ms per move).
    """
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

    axis.set_major_locator(LogLocator(base=10, numticks=12))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.0f}" if v >= 1 else f"{v:g}"))
    axis.set_minor_locator(NullLocator())


def _axes(ax, height: float):
    """``ax`` and its figure, or a new course-style figure of ``height`` inches with one axes."""
    if ax is None:
        fig, ax = new_figure(height=height)
        return fig, ax
    return ax.figure, ax


def _animate(live: bool, *artists) -> None:
    if live:
        for a in artists:
            a.set_animated(True)


class ArrivalsView:
    """Arrival rate per time bin (requests per minute, so bins of any width share one scale), with
    the mean rate as a labelled line. Built once, on ``ax`` or a new figure; :meth:`update` sets a
    ``l03_traces.arrivals_per_minute`` frame. ``live=True`` marks the changing artists as animated."""

    @styled
    def __init__(self, ax=None, *, live: bool = False):
        self.figure, self.ax = _axes(ax, 3.6)
        self.step, = self.ax.step([], [], where="post", color=PALETTE[0])
        self.mean = self.ax.axhline(0, color=PALETTE[1], ls="--", zorder=3)
        self.mean_note = self.ax.text(0.01, 0.98, "", transform=self.ax.transAxes, ha="left", va="top",
                                      color=PALETTE[1], zorder=5, bbox={"fc": "white", "ec": "none", "alpha": 0.85})
        self.ax.set_title(" ", y=1.0)
        self.ax.set(xlabel="time since trace start (min)", ylabel="arrival rate (requests per minute)")
        _animate(live, self.step, self.mean, self.mean_note, self.ax.title)

    def update(self, per_bin, trace_name: str = "trace", ymax: float | None = None,
               span_min: float | None = None):
        """``ymax`` (requests/min) and ``span_min`` (x extent, min) fix the axes (default: fit the data)."""
        bin_s = float(per_bin["start_s"].diff().median()) if len(per_bin) > 1 else 60.0
        x, rate = per_bin["start_s"].to_numpy() / 60.0, per_bin["requests"].to_numpy() * 60.0 / bin_s
        self.step.set_data(x, rate)
        mean = float(rate.mean()) if len(rate) else 0.0
        self.mean.set_ydata([mean, mean])
        self.mean_note.set_text(f"dashed: mean {mean:,.1f} per minute ({mean / 60:.2f} req/s)")
        self.ax.set_title(f"Arrivals of the {trace_name} trace ({bin_s:g}-s bins)", y=1.0)
        x0 = float(x[0]) if len(x) else 0.0
        self.ax.set_xlim(x0, span_min if span_min is not None else (float(x[-1]) + bin_s / 60 if len(x) else 1.0))
        top = max(1.0, float(rate.max(initial=0)) * 1.15)   # room for the mean's note above the curve
        self.ax.set_ylim(0, ymax if ymax is not None else top)
        return self


@styled
def arrivals(per_bin, trace_name: str = "trace"):
    """A figure of :class:`ArrivalsView` (``per_bin``: ``l03_traces.arrivals_per_minute``)."""
    return ArrivalsView().update(per_bin, trace_name).figure


class LengthCDFView:
    """Empirical CDFs of input and output lengths on a log axis, on ``ax`` or a new figure;
    ``paper_means``: optional ``{"input": tokens, "output": tokens}`` drawn as dotted verticals.
    :meth:`update` sets a ``l03_traces.length_cdf`` frame."""

    KINDS = ("input", "output")

    @styled
    def __init__(self, ax=None, *, paper_means: dict | None = None, live: bool = False):
        self.figure, self.ax = _axes(ax, 3.8)
        ax = self.ax
        self.lines = {}
        for i, kind in enumerate(self.KINDS):
            self.lines[kind], = ax.step([], [], where="post", color=PALETTE[i], label=f"{kind} length")
            if paper_means and kind in paper_means:
                ax.axvline(paper_means[kind], color=PALETTE[i], ls=":", lw=1.2,
                           label=f"paper mean {kind}: {paper_means[kind]:,} (FAST'25 Table 2)")
        ax.set_xscale("log")
        plain_log_ticks(ax.xaxis)
        ax.set_title(" ", y=1.0)
        ax.set(xlabel="length (tokens, log scale)", ylabel="share of requests ≤ length", ylim=(0, 1.02))
        # below the axes: inside, any corner covers one of the two CDFs or the paper's mean lines
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2, frameon=False)
        _animate(live, *self.lines.values(), ax.title)

    def update(self, cdfs, trace_name: str = "trace"):
        lo, hi = np.inf, 0.0
        for kind, line in self.lines.items():
            g = cdfs[cdfs["kind"] == kind]
            line.set_data(g["tokens"].to_numpy(), g["cdf"].to_numpy())
            if len(g):
                lo, hi = min(lo, float(g["tokens"].min())), max(hi, float(g["tokens"].max()))
        if hi > 0:
            self.ax.set_xlim(*log_limits(max(lo, 1.0), hi))
        self.ax.set_title(f"Prompt and answer lengths, {trace_name} trace", y=1.0)
        return self


@styled
def length_cdfs(cdfs, trace_name: str = "trace", paper_means: dict | None = None):
    """A figure of :class:`LengthCDFView` (``cdfs``: ``l03_traces.length_cdf``)."""
    return LengthCDFView(paper_means=paper_means).update(cdfs, trace_name).figure


class GapsView:
    """Histogram of gaps between consecutive distinct arrival times, log-spaced bins from ``lo_s`` to
    ``hi_s`` seconds (40 per 5 decades); y is the share of gaps per bin. A note says when one gap
    dominates (bucketed timestamps). :meth:`update` sets a ``l03_traces.timestamp_gaps`` frame."""

    @styled
    def __init__(self, ax=None, *, lo_s: float = 1e-3, hi_s: float = 100.0, live: bool = False):
        self.figure, self.ax = _axes(ax, 3.6)
        self.edges = np.geomspace(lo_s, hi_s, 41)
        self.bars = self.ax.stairs(np.zeros(40), self.edges, fill=True, color=PALETTE[0], alpha=0.85,
                                   label="gaps (log-spaced bins)")
        self.note = self.ax.text(0.03, 0.92, "", transform=self.ax.transAxes, va="top")
        self.ax.set_xscale("log")
        plain_log_ticks(self.ax.xaxis)
        self.ax.set_title(" ", y=1.0)
        self.ax.set(xlabel="gap between distinct arrival times (s, log scale)", ylabel="share of gaps per bin")
        _animate(live, self.bars, self.note, self.ax.title)

    def update(self, gaps, trace_name: str = "trace"):
        g = gaps[gaps["gap_s"] > 0]
        share, _ = np.histogram(np.clip(g["gap_s"], self.edges[0], self.edges[-1]), bins=self.edges,
                                weights=g["share"])
        self.bars.set_data(share, self.edges)
        top = g.nlargest(1, "share")
        bucketed = len(top) > 0 and float(top["share"].iloc[0]) >= 0.2   # a bucketed trace: one gap dominates
        self.note.set_visible(bucketed)
        if bucketed:
            gx, gy = float(top["gap_s"].iloc[0]), float(top["share"].iloc[0])
            self.note.set_text(f"{gy:.0%} of gaps are exactly {gx:g} s: timestamps are bucketed")
        self.ax.set_title(f"Gaps between distinct timestamps, {trace_name} trace", y=1.0)
        self.ax.set_xlim(self.edges[0], self.edges[-1])
        self.ax.set_ylim(0, max(0.05, float(share.max()) * 1.15))
        return self


@styled
def timestamp_gaps(gaps, trace_name: str = "trace", lo_s: float = 1e-3, hi_s: float = 100.0):
    """A figure of :class:`GapsView` (``gaps``: ``l03_traces.timestamp_gaps``)."""
    return GapsView(lo_s=lo_s, hi_s=hi_s).update(gaps, trace_name).figure


class PopularityView:
    """Rank-frequency of blocks on log-log axes, with the share of blocks used once and the most
    used block labelled. :meth:`update` sets a ``l03_cache.block_popularity_table`` frame."""

    @styled
    def __init__(self, ax=None, *, live: bool = False):
        self.figure, self.ax = _axes(ax, 3.8)
        ax = self.ax
        self.line, = ax.plot([], [], color=PALETTE[0], label="blocks")
        self.once_line = ax.axhline(1, color=PALETTE[3], ls=":", lw=1)
        self.once = ax.text(1, 1.15, "", color=PALETTE[3], ha="center", va="bottom")
        self.top = ax.annotate("", (1, 1), xytext=(12, -4), textcoords="offset points",
                               arrowprops={"arrowstyle": "-", "color": "0.4"})
        ax.set_xscale("log")
        ax.set_yscale("log")
        plain_log_ticks(ax.xaxis)
        plain_log_ticks(ax.yaxis)
        ax.set_title(" ", y=1.0)
        ax.set(xlabel="block rank (1 = most used, log scale)", ylabel="requests using the block (log scale)")
        _animate(live, self.line, self.once, self.top, ax.title)

    def update(self, table, trace_name: str = "trace"):
        r, rank = table["requests"].to_numpy(), table["rank"].to_numpy()
        change = r[1:] != r[:-1]
        keep = np.r_[True, change] | np.r_[change, True]  # both ends of each plateau: same picture, few points
        self.line.set_data(rank[keep], r[keep])
        n = len(table)
        for a in (self.once_line, self.once, self.top):
            a.set_visible(n > 0)
        if n:
            once = int((r == 1).sum())
            self.once.set_position((n ** 0.5, 1.15))
            self.once.set_text(f"{once:,} of {n:,} blocks ({once / n:.0%}) used by one request only")
            first = table.iloc[0]
            self.top.xy = (float(first["rank"]), float(first["requests"]))
            self.top.set_text(f"block {int(first['block_id'])}: {int(first['requests']):,} requests")
            self.ax.set_xlim(*log_limits(1.0, float(rank.max())))
            self.ax.set_ylim(*log_limits(1.0, float(r.max())))
        self.ax.set_title(f"Block popularity, {trace_name} trace", y=1.0)
        return self


@styled
def block_popularity(table, trace_name: str = "trace"):
    """A figure of :class:`PopularityView` (``table``: ``l03_cache.block_popularity_table``)."""
    return PopularityView().update(table, trace_name).figure
