"""Figures of lecture 03 (cache part): hit ratio vs capacity, global pool vs local caches.

Each function takes tidy DataFrames from :mod:`mooncake_lab.experiments.l03_cache` and returns a
:class:`matplotlib.figure.Figure` with a title and axis labels with units; the dashboards' figures
are view classes (built once, ``update`` sets the data) that the functions wrap.
Titles are placed at a fixed ``y=1.0`` and log axes get plain-text decade ticks: matplotlib's
automatic title placement and mathtext tick labels cost most of a redraw, and these figures are
redrawn on every slider move (budget 150 ms). Capacities are in 512-token blocks; ``block_bytes``
(bytes of KV per block, from ``l03_cache.kv_block_bytes``) adds the DRAM size in TB under each tick.
"""
from __future__ import annotations

import math

import numpy as np

from matplotlib.patches import Patch
from matplotlib.ticker import NullLocator, PercentFormatter

from . import PALETTE, new_figure, styled

__all__ = ["hit_ratio_curve", "pool_layout", "global_over_local", "policy_curves", "HitRatioChart", "PoolLayoutChart"]

#: Legend names of the eviction policies (arXiv v3 Table 1's).
_POLICY_LABELS = {"lru": "LRU", "lfu": "LFU", "length_aware": "LengthAware"}

#: Legend names of the routings (as the prose writes them).
_ROUTING_LABELS = {"random": "random", "round_robin": "round-robin", "session": "session (sticky)"}

_TB = 1e12  # bytes per TB (decimal, as in FAST'25 §2.2)


def _tb(v: float) -> str:
    """A DRAM size in TB as a tick prints it: two significant digits, never in e-notation (170, not 1.7e+02)."""
    return f"{v:,.0f}" if v >= 100 else f"{v:.2g}"


def _log_block_ticks(ax, lo: float, hi: float, block_bytes: float | None):
    """Decade ticks in blocks, each with its DRAM size under it; no minor ticks (fast to redraw:
    a secondary axis or log minor labels triple the render time of a dashboard figure)."""
    ticks = [10.0 ** k for k in range(int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi))) + 1)]
    labels = [f"{c:,.0f}" + (f"\n{_tb(c * block_bytes / _TB)} TB" if block_bytes else "") for c in ticks]
    ax.set_xticks(ticks, labels)
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlim(ticks[0] / 1.3, ticks[-1] * 1.3)


class HitRatioChart:
    """Hit ratio of one global cache vs capacity (log x) with the measured and paper points overlaid.

    Built once (``paper``: ``l03_cache.paper_table1_points`` frame, LRU's unless :meth:`update` is
    given another; ``block_bytes``: KV bytes per block, adds TB of DRAM under each tick and the 1 TB
    line); :meth:`update` sets one trace's curve for one eviction policy. Numbers that change with a move (the infinite-cache level, the chosen capacity's hit
    ratio) are written next to their lines, not in the legend. ``live=True`` marks the changing
    artists as animated.
    """

    @styled
    def __init__(self, paper=None, block_bytes: float | None = None, model_label: str = "LLaMA2-70B", *,
                 live: bool = False):
        self.figure, ax = new_figure(width=10.0, height=4.4)
        self.ax, self.block_bytes, self.model_label = ax, block_bytes, model_label
        self.curve, = ax.plot([], [], color=PALETTE[0])
        self.inf = ax.axhline(0, color=PALETTE[0], ls="--", lw=1, label="infinite cache")
        self.inf_note = ax.annotate("", (1.0, 0.0), xycoords=("axes fraction", "data"), xytext=(-4, 3),
                                    textcoords="offset points", ha="right", va="bottom", color=PALETTE[0])
        self.ref, = ax.plot([], [], "o", mfc="none", color=PALETTE[2], ms=8,
                            label="check: values measured once on this trace (a regression test)")
        self.fixed = []                            # the 1 TB line: drawn once
        self.paper, = ax.plot([], [], "s", color=PALETTE[3], label="_paper")
        self._set_paper(paper)
        if block_bytes:
            one_tb = _TB / block_bytes
            label = f"1 TB of DRAM = {one_tb:,.0f} blocks ≈ {one_tb * 512 / 1e6:.2f}M tokens"
            self.fixed.append(ax.axvline(one_tb, color=PALETTE[4], ls=":", lw=1.5, label=label))
        self.marker, = ax.plot([], [], "o", color=PALETTE[1], ms=9, zorder=5, label="chosen capacity")
        self.note = ax.annotate("", (1, 0), xytext=(8, -14), textcoords="offset points", color="k", zorder=6,
                                bbox={"fc": "white", "ec": "none", "alpha": 0.8})
        ax.set_xscale("log")
        ax.set_title(" ", y=1.0)
        # two lines: on one, the label ran past the figure's edges on a projector
        dram = f"\nunder each: TB of {model_label} KV in DRAM" if block_bytes else ""
        ax.set(xlabel=f"cache capacity (512-token blocks, log scale){dram}", ylabel="hit ratio (%)")
        ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
        self._legend, self.static_state, self._xspan = None, None, None
        self.live = live
        if live:
            for a in (self.curve, self.inf, self.inf_note, self.ref, self.paper, self.marker, self.note, ax.title):
                a.set_animated(True)

    def _set_paper(self, paper) -> None:
        """The paper's points (a ``paper_table1_points`` frame of the curve's policy; None: none shown)."""
        p = paper[np.isfinite(paper["capacity_blocks"])] if paper is not None else None
        shown = p is not None and len(p) > 0
        self.paper.set_data(p["capacity_blocks"].to_numpy() if shown else [], p["hit_ratio"].to_numpy() if shown else [])
        self.paper.set_label("paper: arXiv v3 Table 1, same policy (arXiv trace)" if shown else "_paper")

    def update(self, curve, capacity: float | None = None, trace_name: str | None = None, weight: str = "token",
               ylim: tuple | None = None, policy: str = "lru", paper=None, hit: float | None = None):
        """Show ``curve`` (``l03_cache.eviction_curve`` of eviction ``policy``; an ``inf`` row draws the
        infinite-cache level) with ``weight`` ``"token"`` (column ``hit_ratio``) or ``"block"``
        (``block_hit_ratio``), and mark ``capacity`` (blocks). ``paper``: Table 1's points of
        ``policy`` (default: keep the ones shown). ``hit``: the hit ratio at ``capacity`` when known
        exactly (default: read off the curve, log-interpolated). ``ylim`` fixes the y axis (default: fit the curve)."""
        ax = self.ax
        if paper is not None:
            self._set_paper(paper)
        col = "hit_ratio" if weight == "token" else "block_hit_ratio"
        name = trace_name or (str(curve["trace"].iloc[0]) if "trace" in curve and len(curve) else "trace")
        fin = curve[np.isfinite(curve["capacity_blocks"])]
        inf = curve[~np.isfinite(curve["capacity_blocks"])]
        self.curve.set_data(fin["capacity_blocks"].to_numpy(), fin[col].to_numpy())
        self.curve.set_label(f"ours: global {_POLICY_LABELS[policy]} on this trace")     # the title names the trace
        level = float(inf[col].iloc[0]) if len(inf) else np.nan
        for a in (self.inf, self.inf_note):
            a.set_visible(len(inf) > 0)
        self.inf.set_ydata([level, level])
        self.inf_note.xy = (1.0, level)
        self.inf_note.set_text(f"infinite cache: {level:.1%}")
        ref = fin.dropna(subset=["reference_hit_ratio"]) if "reference_hit_ratio" in fin else fin.iloc[:0]
        self.ref.set_data(ref["capacity_blocks"].to_numpy(), ref["reference_hit_ratio"].to_numpy()
                          if len(ref) else [])
        self.ref.set_visible(weight == "token")
        # (a legend key copies its artist's visibility: a hidden one leaves the legend, so the legend
        # — drawn once into the background — changes whenever the points show or hide)
        shown = len(ref) > 0 and weight == "token"
        self.ref.set_label(self.ref.get_label().lstrip("_") if shown else "_" + self.ref.get_label().lstrip("_"))
        span = (float(fin["capacity_blocks"].min()), float(fin["capacity_blocks"].max())) if len(fin) else None
        if span is not None and span != self._xspan:     # (re-creating tick labels is slow)
            _log_block_ticks(ax, *span, self.block_bytes)
            self._xspan = span
        ax.set_ylim(*(ylim or (0, 1 if len(fin) == 0 else max(0.7, float(fin[col].max()) + 0.1))))
        show = capacity is not None and math.isfinite(capacity) and len(fin) > 0
        for a in (self.marker, self.note):
            a.set_visible(show)
        if show:
            h = float(hit) if hit is not None else float(np.interp(np.log(capacity), np.log(fin["capacity_blocks"]), fin[col]))
            self.marker.set_data([capacity], [h])
            self.note.xy = (capacity, h)
            self.note.set_text(f"{capacity:,.0f} blocks → {h:.1%} hit")
            # clear of the curve (it rises to the right) and inside the axes: above-left in the right
            # half of the axis, below-right in the left half (above-right when the point is near 0)
            lo, hi = (np.log(v) for v in ax.get_xlim())
            right = np.log(capacity) > (lo + hi) / 2
            self.note.set_position((-8, 8) if right else (8, 8) if h < 0.08 * ax.get_ylim()[1] else (8, -14))
            self.note.set_horizontalalignment("right" if right else "left")
        self.marker.set_label("chosen capacity" if show else "_chosen capacity")
        ax.set_title(f"Hit ratio vs cache capacity ({weight}-weighted), {name}", y=1.0)   # the legend names the policy
        handles = [a for a in (self.curve, self.inf, self.ref, self.paper, *self.fixed, self.marker)
                   if not a.get_label().startswith("_")]
        labels = tuple(h.get_label() for h in handles)
        if labels != self.static_state:           # the legend is static: rebuilt only when it changes
            # outside the axes, right: inside it covered the paper's Table 1 markers
            self._legend = ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
            self.static_state = labels
        return self


@styled
def hit_ratio_curve(curve, paper=None, capacity: float | None = None, block_bytes: float | None = None,
                    model_label: str = "LLaMA2-70B", trace_name: str | None = None, weight: str = "token"):
    """A figure of :class:`HitRatioChart` (arguments as there and in :meth:`HitRatioChart.update`)."""
    return HitRatioChart(paper, block_bytes, model_label).update(curve, capacity, trace_name, weight).figure


class PoolLayoutChart:
    """Global pool vs local caches of the same total capacity (``l03_cache.pool_breakdown`` frames).

    Left: overall token hit ratio of both layouts, the selected one highlighted, with their ratio.
    Right: per-instance hit ratio (bars) and share of input tokens (dots) of the selected layout,
    both fractions on one axis (no twin axis: it would double the redraw time). Built once for up
    to ``max_instances`` instances (bars beyond the shown count are hidden); :meth:`update` sets the
    data. ``live=True`` marks the changing artists as animated.
    """

    @styled
    def __init__(self, max_instances: int = 32, *, live: bool = False):
        self.figure, (ax, ax2) = new_figure(1, 2, width=10.0, height=4.2, gridspec_kw={"width_ratios": [1, 2]})
        self.ax, self.ax2 = ax, ax2
        self.totals = ax.bar([0, 1], [0, 0], color=PALETTE[:2])
        self.values = [ax.text(i, 0, "", ha="center", va="bottom") for i in (0, 1)]
        self.note = ax.text(0.5, 0.97, "", transform=ax.transAxes, ha="center", va="top")
        ax.set_xticks([0, 1], ["global pool", "local caches"])
        ax.set_title(" ", y=1.0)
        ax.set(xlabel="cache layout (same total DRAM)", ylabel="hit ratio (token-weighted, %)")
        ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
        self.bars = ax2.bar(np.arange(max(1, max_instances)), 0.0, color=PALETTE[1])
        self.load, = ax2.plot([], [], "o", color="black", label="share of all input tokens (load)")
        self.even = ax2.axhline(0, color="black", ls=":", lw=1, label="even load share (1 / instances)")
        ax2.set_title(" \n ", y=1.0)                # two lines, as update writes
        ax2.set(xlabel="instance (index)", ylabel="hit ratio; load share (%)")
        ax2.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
        # bars change colour with the layout shown: the legend's bar key is neutral grey
        key = Patch(color="0.6", label="hit ratio per instance (token-weighted)")
        ax2.legend(handles=[key, self.load, self.even], loc="upper right")
        self._n_slots = None
        if live:
            for a in (*self.totals, *self.values, self.note, ax.title, *self.bars, self.load, self.even,
                      ax2.title):
                a.set_animated(True)

    def update(self, global_df, local_df, selected: str = "local", routing: str = "random",
               paper_ratio: float | None = None, trace_name: str = "trace", block_bytes: float | None = None,
               ylims: tuple | None = None, n_slots: int | None = None):
        """``selected``: which layout the right panel details; ``paper_ratio``: FAST'25's global/local
        ratio to quote; ``ylims=(left, right)`` fix the y axes' tops and ``n_slots`` (≥ instances)
        the right x axis (default: fit the data)."""
        ax, ax2 = self.ax, self.ax2
        g = float(global_df["hit_tokens"].sum() / global_df["input_tokens"].sum())
        loc = float(local_df["hit_tokens"].sum() / local_df["input_tokens"].sum())
        n = len(local_df)
        for bar, text, v, a in zip(self.totals, self.values, (g, loc),
                                   (1.0, 0.35) if selected == "global" else (0.35, 1.0)):
            bar.set_height(v)
            bar.set_alpha(a)
            text.set_y(v)
            text.set_text(f"{v:.1%}")
        ratio = g / loc if loc > 0 else math.inf
        note = f"global / local = ×{ratio:.2f}\n({n} local caches, {_ROUTING_LABELS.get(routing, routing)} routing)"
        if paper_ratio is not None:
            note += f"\nFAST'25 Fig. 10: ×{paper_ratio:.2f}"
        self.note.set_text(note)
        total = int(global_df["capacity_blocks"].iloc[0])
        size = f"{total:,} blocks" + (f" = {total * block_bytes / _TB:.2f} TB" if block_bytes else "")
        ax.set_title(f"Same total DRAM: {size}", y=1.0)
        df = global_df if selected == "global" else local_df
        color = PALETTE[0] if selected == "global" else PALETTE[1]
        k = len(df)
        for i, bar in enumerate(self.bars):
            bar.set_visible(i < k)
            if i < k:
                bar.set_height(float(df["hit_ratio"].iloc[i]))
                bar.set_color(color)
        self.load.set_data(df["instance"].to_numpy(), df["load_share"].to_numpy())
        self.even.set_visible(k > 1)
        self.even.set_ydata([1 / k] * 2)
        per = int(df["capacity_blocks"].iloc[0])
        what = "one global pool" if selected == "global" else f"{k} local caches, {_ROUTING_LABELS.get(routing, routing)} routing"
        ax2.set_title(f"Per instance: {what}\n{per:,} blocks each ({trace_name})", y=1.0)
        if ylims is None:
            top = max(0.5, float(df["hit_ratio"].max()), float(df["load_share"].max())) * 1.3
            ylims = (max(0.5, g, loc) * 1.3, min(top, 1.35))
        ax.set_ylim(0, ylims[0])
        ax2.set_ylim(0, ylims[1])
        slots = max(n_slots or k, k)
        if slots != self._n_slots:                # (re-creating tick labels is slow)
            ax2.set_xlim(-0.6, slots - 0.4)
            ax2.set_xticks(np.arange(0, slots, 1 if slots <= 16 else 4))
            self._n_slots = slots
        return self


@styled
def pool_layout(global_df, local_df, selected: str = "local", routing: str = "random",
                paper_ratio: float | None = None, trace_name: str = "trace", block_bytes: float | None = None):
    """A figure of :class:`PoolLayoutChart` (arguments as in :meth:`PoolLayoutChart.update`)."""
    return PoolLayoutChart(max(len(local_df), len(global_df))).update(
        global_df, local_df, selected, routing, paper_ratio, trace_name, block_bytes).figure


@styled
def global_over_local(sweep, paper_ratio: float | None = None, paper_n: int | None = None,
                      trace_name: str = "trace"):
    """Global pool's hit ratio ÷ local caches' vs number of instances, one line per routing.

    ``sweep``: concatenated ``l03_cache.local_vs_global`` frames (local rows only are plotted).
    """
    fig, ax = new_figure(height=4.0)
    loc = sweep[sweep["layout"] != "global pool"]
    for i, (r, g) in enumerate(loc.groupby("routing", sort=False)):
        ax.plot(g["n_instances"], g["global_over_this"], "o-", color=PALETTE[i], label=f"{_ROUTING_LABELS.get(r, r)} routing")
    if paper_ratio is not None:
        ax.plot([paper_n], [paper_ratio], "*", ms=14, color=PALETTE[3],
                label=f"paper: ×{paper_ratio} (FAST'25 Fig. 10, behind its scheduler)")
    ax.axhline(1, color="0.5", lw=1)
    ax.set_xscale("log", base=2)
    ns = sorted(set(loc["n_instances"].tolist()))
    ax.set_xticks(ns, [str(n) for n in ns])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_title(f"How much a global pool beats local caches of the same total size\n({trace_name})", y=1.0)
    ax.set(xlabel="number of instances (local caches)", ylabel="hit ratio: global ÷ local (×)")
    ax.legend()
    return fig


def _trace_label(name: str) -> str:
    from ..experiments.l03_cache import trace_label
    return trace_label(name)


@styled
def policy_curves(curves, paper=None, paper_trace: str | None = None, block_bytes: float | None = None,
                  weight: str = "token"):
    """Hit ratio vs capacity of one global cache per eviction policy, one panel per trace.

    ``curves``: ``l03_cache.policy_curves`` frames (concatenated for several traces); ``paper``: a
    ``l03_cache.table1_comparison`` frame (columns policy, capacity_blocks, paper), drawn as squares
    in each policy's colour on the panel of ``paper_trace`` (default: the last). ``weight``:
    ``"token"`` (column ``hit_ratio``) or ``"block"`` (``block_hit_ratio``).
    """
    col = "hit_ratio" if weight == "token" else "block_hit_ratio"
    names = list(dict.fromkeys(curves["trace"]))
    fig, axes = new_figure(1, len(names), width=5.2 * len(names), height=4.4, sharey=True)
    axes = np.atleast_1d(axes)
    paper_trace = paper_trace if paper_trace is not None else names[-1]
    top = 0.0
    for ax, name in zip(axes, names):
        df = curves[curves["trace"] == name]
        fin = df[np.isfinite(df["capacity_blocks"])]
        for i, (pol, g) in enumerate(fin.groupby("policy", sort=False)):
            ax.plot(g["capacity_blocks"], g[col], "-", color=PALETTE[i], label=f"ours: {_POLICY_LABELS.get(pol, pol)}")
            if paper is not None and name == paper_trace:
                p = paper[(paper["policy"] == pol) & np.isfinite(paper["capacity_blocks"])]
                ax.plot(p["capacity_blocks"], p["paper"], "s", mfc="none", ms=8, color=PALETTE[i],
                        label=f"paper: {_POLICY_LABELS.get(pol, pol)} (Table 1)")
            top = max(top, float(g[col].max()))
        inf = df[~np.isfinite(df["capacity_blocks"])]
        if len(inf):
            ax.axhline(float(inf[col].iloc[0]), color="0.4", ls="--", lw=1, label="infinite cache (any policy)")
        ax.set_xscale("log")
        _log_block_ticks(ax, float(fin["capacity_blocks"].min()), float(fin["capacity_blocks"].max()), block_bytes)
        with_paper = paper is not None and name == paper_trace   # two lines: one ran past a projector's edge
        ax.set_title(f"{_trace_label(name)}\n" + ("squares: arXiv v3 Table 1 (arXiv trace)" if with_paper else "ours only"), y=1.0)
        ax.set(xlabel="cache capacity (512-token blocks, log scale)" + ("\nunder each: TB of KV in DRAM"
                                                                         if block_bytes else ""))
        ax.legend(loc="lower right")   # the curves rise to the right: the lower right is free
    if paper is not None:
        top = max(top, float(paper["paper"].max()))
    axes[0].set_ylim(0, max(0.7, top + 0.15))
    for ax in axes:
        ax.set_ylabel(f"hit ratio ({weight}-weighted, %)")
        ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    fig.suptitle("Eviction policy vs cache capacity: one global pool")
    return fig
