"""Figures of lecture 03 (cache part): hit ratio vs capacity, global pool vs local caches.

Each function takes tidy DataFrames from :mod:`mooncake_lab.experiments.l03_cache` and returns a
:class:`matplotlib.figure.Figure` with a title and axis labels with units.
Titles are placed at a fixed ``y=1.0`` and log axes get plain-text decade ticks: matplotlib's
automatic title placement and mathtext tick labels cost most of a redraw, and these figures are
redrawn on every slider move (budget 150 ms). Capacities are in 512-token blocks; ``block_bytes``
(bytes of KV per block, from ``l03_cache.kv_block_bytes``) adds the DRAM size in TB under each tick.
"""
from __future__ import annotations

import math

import numpy as np

from matplotlib.ticker import NullLocator

from . import PALETTE, new_figure, styled

__all__ = ["hit_ratio_curve", "pool_layout", "global_over_local"]

_TB = 1e12  # bytes per TB (decimal, as in FAST'25 §2.2)


def _log_block_ticks(ax, lo: float, hi: float, block_bytes: float | None):
    """Decade ticks in blocks, each with its DRAM size under it; no minor ticks (fast to redraw:
    a secondary axis or log minor labels triple the render time of a dashboard figure)."""
    ticks = [10.0 ** k for k in range(int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi))) + 1)]
    labels = [f"{c:,.0f}" + (f"\n{c * block_bytes / _TB:.2g} TB" if block_bytes else "") for c in ticks]
    ax.set_xticks(ticks, labels)
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlim(ticks[0] / 1.3, ticks[-1] * 1.3)


@styled
def hit_ratio_curve(curve, paper=None, capacity: float | None = None, block_bytes: float | None = None,
                    model_label: str = "LLaMA2-70B", trace_name: str | None = None, weight: str = "token"):
    """Global-LRU hit ratio vs capacity (log x) with the measured and paper points overlaid.

    Parameters
    ----------
    curve : ``l03_cache.hit_ratio_vs_capacity`` frame (an ``inf`` row draws the infinite-cache level).
    paper : optional ``l03_cache.paper_table1_points`` frame (arXiv v3 Table 1, another trace).
    capacity : optional capacity (blocks) to mark with its hit ratio.
    block_bytes : KV bytes per block; adds TB of DRAM under each tick and the 1 TB line.
    weight : ``"token"`` plots ``hit_ratio``, ``"block"`` plots ``block_hit_ratio``.
    """
    col = "hit_ratio" if weight == "token" else "block_hit_ratio"
    name = trace_name or (str(curve["trace"].iloc[0]) if "trace" in curve and len(curve) else "trace")
    fig, ax = new_figure(height=4.4)
    fin = curve[np.isfinite(curve["capacity_blocks"])]
    inf = curve[~np.isfinite(curve["capacity_blocks"])]
    ax.plot(fin["capacity_blocks"], fin[col], color=PALETTE[0], label=f"ours: global LRU, {name}")
    if len(inf):
        ax.axhline(float(inf[col].iloc[0]), color=PALETTE[0], ls="--", lw=1,
                   label=f"infinite cache: {float(inf[col].iloc[0]):.1%}")
    if "reference_hit_ratio" in curve and weight == "token":
        ref = fin.dropna(subset=["reference_hit_ratio"])
        if len(ref):
            ax.plot(ref["capacity_blocks"], ref["reference_hit_ratio"], "o", mfc="none", color=PALETTE[2], ms=8,
                    label="reference table (measured on this trace)")
    if paper is not None and len(paper):
        p = paper[np.isfinite(paper["capacity_blocks"])]
        ax.plot(p["capacity_blocks"], p["hit_ratio"], "s", color=PALETTE[3],
                label="paper: arXiv v3 Table 1 (arXiv trace, not this one)")
    if block_bytes:
        one_tb = _TB / block_bytes
        ax.axvline(one_tb, color=PALETTE[4], ls=":", lw=1.5,
                   label=f"1 TB of DRAM = {one_tb:,.0f} blocks ≈ {one_tb * 512 / 1e6:.2f}M tokens")
    if capacity is not None and math.isfinite(capacity) and len(fin):
        h = float(np.interp(np.log(capacity), np.log(fin["capacity_blocks"]), fin[col]))
        ax.plot([capacity], [h], "o", color=PALETTE[1], ms=9, zorder=5,
                label=f"{capacity:,.0f} blocks → {h:.1%} hit")
    ax.set_xscale("log")
    if len(fin):
        _log_block_ticks(ax, float(fin["capacity_blocks"].min()), float(fin["capacity_blocks"].max()), block_bytes)
    ax.set_ylim(0, 1 if len(fin) == 0 else max(0.7, float(fin[col].max()) + 0.1))
    dram = f"; under it: TB of {model_label} KV in DRAM" if block_bytes else ""
    ax.set_title(f"Prefix-cache hit ratio vs capacity ({weight}-weighted), {name}", y=1.0)
    ax.set(xlabel=f"cache capacity (512-token blocks, log scale{dram})", ylabel=f"hit ratio ({weight}-weighted)")
    ax.legend(loc="upper left", fontsize="small")
    return fig


@styled
def pool_layout(global_df, local_df, selected: str = "local", routing: str = "random",
                paper_ratio: float | None = None, trace_name: str = "trace", block_bytes: float | None = None):
    """Global pool vs local caches of the same total capacity (``l03_cache.pool_breakdown`` frames).

    Left: overall token hit ratio of both layouts, ``selected`` one highlighted, with the ratio.
    Right: per-instance hit ratio (bars) and share of input tokens (dots) of the selected layout,
    both fractions on one axis (no twin axis: it would double the redraw time).
    """
    fig, (ax, ax2) = new_figure(1, 2, width=10.0, height=4.2, gridspec_kw={"width_ratios": [1, 2]})
    g = float(global_df["hit_tokens"].sum() / global_df["input_tokens"].sum())
    loc = float(local_df["hit_tokens"].sum() / local_df["input_tokens"].sum())
    n = len(local_df)
    labels = ["global pool", f"{n} local\n({routing})"]
    alphas = (1.0, 0.35) if selected == "global" else (0.35, 1.0)
    for i, (v, a) in enumerate(zip((g, loc), alphas)):
        ax.bar(i, v, color=PALETTE[i], alpha=a)
        ax.text(i, v, f"{v:.1%}", ha="center", va="bottom")
    ratio = g / loc if loc > 0 else math.inf
    note = f"global / local = ×{ratio:.2f}"
    if paper_ratio is not None:
        note += f"\n(FAST'25 Fig. 10: ×{paper_ratio:.2f})"
    ax.text(0.5, 0.97, note, transform=ax.transAxes, ha="center", va="top")
    ax.set_xticks([0, 1], labels)
    total = int(global_df["capacity_blocks"].iloc[0])
    size = f"{total:,} blocks" + (f" = {total * block_bytes / _TB:.2f} TB" if block_bytes else "")
    ax.set_title(f"Same total DRAM: {size}", y=1.0)
    ax.set(xlabel="cache layout (same total DRAM)", ylabel="hit ratio (token-weighted)",
           ylim=(0, max(0.5, g, loc) * 1.3))
    df = global_df if selected == "global" else local_df
    color = PALETTE[0] if selected == "global" else PALETTE[1]
    ax2.bar(df["instance"], df["hit_ratio"], color=color, label="hit ratio (token-weighted)")
    ax2.plot(df["instance"], df["load_share"], "o", color="black", label="share of all input tokens (load)")
    if len(df) > 1:
        ax2.axhline(1 / len(df), color="black", ls=":", lw=1, label=f"even load share (1/{len(df)})")
    top = max(0.5, float(df["hit_ratio"].max()), float(df["load_share"].max())) * 1.3
    ax2.set(xlabel="instance (index)", ylabel="fraction (hit ratio; load share)", ylim=(0, min(top, 1.35)))
    per = int(df["capacity_blocks"].iloc[0])
    what = "one global pool" if selected == "global" else f"{len(df)} local caches, {routing} routing"
    ax2.set_title(f"Per instance: {what}, {per:,} blocks each ({trace_name})", y=1.0)
    if len(df) <= 16:
        ax2.set_xticks(df["instance"])
    ax2.legend(loc="upper right", fontsize="small")
    return fig


@styled
def global_over_local(sweep, paper_ratio: float | None = None, paper_n: int | None = None,
                      trace_name: str = "trace"):
    """Global pool's hit ratio ÷ local caches' vs number of instances, one line per routing.

    ``sweep``: concatenated ``l03_cache.local_vs_global`` frames (local rows only are plotted).
    """
    fig, ax = new_figure(height=4.0)
    loc = sweep[sweep["layout"] != "global pool"]
    for i, (r, g) in enumerate(loc.groupby("routing", sort=False)):
        ax.plot(g["n_instances"], g["global_over_this"], "o-", color=PALETTE[i], label=f"{r} routing")
    if paper_ratio is not None:
        ax.plot([paper_n], [paper_ratio], "*", ms=14, color=PALETTE[3],
                label=f"paper: ×{paper_ratio} (FAST'25 Fig. 10, behind its scheduler)")
    ax.axhline(1, color="0.5", lw=1)
    ax.set_xscale("log", base=2)
    ns = sorted(set(loc["n_instances"].tolist()))
    ax.set_xticks(ns, [str(n) for n in ns])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_title(f"How much a global pool beats local caches of the same total size, {trace_name}", y=1.0)
    ax.set(xlabel="number of instances (local caches)", ylabel="hit ratio: global ÷ local (×)")
    ax.legend(fontsize="small")
    return fig
