"""Figures of lecture 03 (trace part): arrivals, length CDFs, timestamp gaps, block popularity.

Each function takes the tidy DataFrame of the matching experiment in
:mod:`mooncake_lab.experiments.l03_traces` / :mod:`~mooncake_lab.experiments.l03_cache` and returns
a :class:`matplotlib.figure.Figure` with a title and axis labels with units.
Titles are placed at a fixed ``y=1.0`` and log axes get plain-text decade ticks: matplotlib's
automatic title placement and mathtext tick labels cost most of a redraw, and these figures are
redrawn on every slider move (budget 150 ms).
"""
from __future__ import annotations

import numpy as np

from . import PALETTE, new_figure, styled

__all__ = ["arrivals", "length_cdfs", "timestamp_gaps", "block_popularity", "plain_log_ticks"]


def plain_log_ticks(axis) -> None:
    """Decade ticks labelled in plain text (1, 10, 1,000, 0.01) and no minor ticks on a log ``axis``.

    Matplotlib's default log labels are mathtext (10^k), which triples the time to redraw a small
    figure — too slow for a slider (lecture 03 budget: 150 ms per move).
    """
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

    axis.set_major_locator(LogLocator(base=10, numticks=12))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.0f}" if v >= 1 else f"{v:g}"))
    axis.set_minor_locator(NullLocator())


@styled
def arrivals(per_bin, trace_name: str = "trace"):
    """Requests per time bin (``l03_traces.arrivals_per_minute``), with the mean rate as a line."""
    fig, ax = new_figure(height=3.6)
    bin_s = float(per_bin["start_s"].diff().median()) if len(per_bin) > 1 else 60.0
    ax.step(per_bin["start_s"] / 60.0, per_bin["requests"], where="post", color=PALETTE[0],
            label=f"requests per {bin_s:g} s")
    if len(per_bin):
        mean = per_bin["requests"].mean()
        ax.axhline(mean, color=PALETTE[1], ls="--", label=f"mean {mean:,.1f} ({mean / bin_s:.2f} req/s)")
    ax.set_title(f"Arrivals of the {trace_name} trace ({bin_s:g}-s bins)", y=1.0)
    ax.set(xlabel="time since trace start (min)",
           ylabel=f"requests per {bin_s:g} s")
    ax.set_ylim(bottom=0)
    ax.legend(loc="lower right")
    return fig


@styled
def length_cdfs(cdfs, trace_name: str = "trace", paper_means: dict | None = None):
    """Empirical CDFs of input and output lengths (``l03_traces.length_cdf``) on a log axis.

    ``paper_means``: optional ``{"input": tokens, "output": tokens}`` drawn as dotted verticals.
    """
    fig, ax = new_figure(height=3.8)
    for i, (kind, g) in enumerate(cdfs.groupby("kind", sort=False)):
        ax.step(g["tokens"], g["cdf"], where="post", color=PALETTE[i], label=f"{kind} length")
        if paper_means and kind in paper_means:
            ax.axvline(paper_means[kind], color=PALETTE[i], ls=":", lw=1.2,
                       label=f"paper mean {kind}: {paper_means[kind]:,} (FAST'25 Table 2)")
    ax.set_xscale("log")
    plain_log_ticks(ax.xaxis)
    ax.set_title(f"Prompt and answer lengths, {trace_name} trace", y=1.0)
    ax.set(xlabel="length (tokens, log scale)",
           ylabel="share of requests ≤ length", ylim=(0, 1.02))
    ax.legend(loc="lower right")
    return fig


@styled
def timestamp_gaps(gaps, trace_name: str = "trace", lo_s: float = 1e-3, hi_s: float = 100.0):
    """Histogram of gaps between consecutive distinct arrival times (``l03_traces.timestamp_gaps``).

    Log-spaced bins from ``lo_s`` to ``hi_s`` seconds (40 per 5 decades); y is the share of gaps per bin.
    """
    fig, ax = new_figure(height=3.6)
    g = gaps[gaps["gap_s"] > 0]
    edges = np.geomspace(lo_s, hi_s, 41)
    share, _ = np.histogram(np.clip(g["gap_s"], lo_s, hi_s), bins=edges, weights=g["share"])
    ax.stairs(share, edges, fill=True, color=PALETTE[0], alpha=0.85, label="gaps (log-spaced bins)")
    ax.set_xscale("log")
    plain_log_ticks(ax.xaxis)
    top = g.nlargest(1, "share")
    if len(top) and float(top["share"].iloc[0]) >= 0.2:  # a bucketed trace: one gap dominates
        gx, gy = float(top["gap_s"].iloc[0]), float(top["share"].iloc[0])
        ax.text(0.03, 0.92, f"{gy:.0%} of gaps are exactly {gx:g} s: timestamps are bucketed",
                transform=ax.transAxes, va="top")
    ax.set_title(f"Gaps between distinct timestamps, {trace_name} trace", y=1.0)
    ax.set(xlabel="gap between distinct arrival times (s, log scale)", ylabel="share of gaps per bin",
           ylim=(0, max(0.05, float(share.max()) * 1.15)))
    return fig


@styled
def block_popularity(table, trace_name: str = "trace", top_label: int = 1):
    """Rank-frequency of blocks on log-log axes (``l03_cache.block_popularity_table``)."""
    fig, ax = new_figure(height=3.8)
    r, rank = table["requests"].to_numpy(), table["rank"].to_numpy()
    change = r[1:] != r[:-1]
    keep = np.r_[True, change] | np.r_[change, True]  # both ends of each plateau: same picture, few points
    ax.loglog(rank[keep], r[keep], color=PALETTE[0], label="blocks")
    once = int((table["requests"] == 1).sum())
    n = len(table)
    if n:
        ax.axhline(1, color=PALETTE[3], ls=":", lw=1)
        ax.text(n ** 0.5, 1.15, f"{once:,} of {n:,} blocks ({once / n:.0%}) used by one request only",
                color=PALETTE[3], ha="center", va="bottom")
        for _, r in table.head(top_label).iterrows():
            ax.annotate(f"block {int(r['block_id'])}: {int(r['requests']):,} requests",
                        (r["rank"], r["requests"]), xytext=(12, -4), textcoords="offset points",
                        arrowprops={"arrowstyle": "-", "color": "0.4"})
    plain_log_ticks(ax.xaxis)
    plain_log_ticks(ax.yaxis)
    ax.set_title(f"Block popularity, {trace_name} trace", y=1.0)
    ax.set(xlabel="block rank (1 = most used, log scale)",
           ylabel="requests using the block (log scale)")
    return fig
