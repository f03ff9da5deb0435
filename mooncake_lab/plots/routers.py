"""Figures of lecture 09 (KV-aware routers after Mooncake): leaderboards, belief sweep, Dynamo's weight.

Inputs are the DataFrames of :mod:`mooncake_lab.experiments.l09_routers`.
"""
from __future__ import annotations

import numpy as np

from . import PALETTE, new_figure, styled

__all__ = ["leaderboard_bars", "belief_sweep", "dynamo_weight", "KIND_COLORS", "bar_value"]

KIND_COLORS = {"router": PALETTE[0], "Conductor": PALETTE[1]}


def bar_value(v: float) -> str:
    """A bar's value label: "0" for an exact zero, else three decimals ("0.001" stays visibly not zero)."""
    return "0" if v == 0 else f"{v:.3f}"


@styled
def leaderboard_bars(boards: dict, metric: str = "slo_attainment", label: str = "SLO attainment (fraction of requests)"):
    """One panel per ``(trace, arch, stress)`` leaderboard: ``metric`` per policy, routers blue, the
    Conductor's policies orange, best first."""
    keys = list(boards)
    ncols = 2 if len(keys) > 1 else 1
    nrows = int(np.ceil(len(keys) / ncols))
    fig, axes = new_figure(nrows, ncols, width=6.5 * ncols, height=4.2 * nrows)
    axes = np.atleast_1d(axes).ravel()
    for ax, key in zip(axes, keys):
        df = boards[key]
        y = np.arange(len(df))[::-1]
        bars = ax.barh(y, df[metric], color=[KIND_COLORS.get(k, PALETTE[7]) for k in df.kind], height=0.7)
        # every bar carries its value, a zero-length one too ("0"), so no policy seems to be missing
        ax.bar_label(bars, labels=[bar_value(v) for v in df[metric]], padding=3, fontsize="small")   # legible in both styles (8.3 pt; 12.5 on a projector)
        ax.set_yticks(y, df.index)
        ax.set_xlim(0, 1.15 if metric == "slo_attainment" else float(np.nanmax(df[metric])) * 1.15 or 1.0)
        ax.set_xlabel(label)
        from ..experiments.l09_routers import board_label
        ax.set_title(f"{board_label(key)} stress")
    for ax in axes[len(keys):]:
        ax.set_visible(False)
    handles = [axes[0].bar([0], [0], color=c, label=k) for k, c in KIND_COLORS.items()]
    fig.legend(handles=handles, loc="outside lower center", ncols=2)
    fig.suptitle("Routers of today's stacks vs Mooncake's Conductor")
    return fig


@styled
def belief_sweep(df, title: str = "SGLang's router tree vs the true cache (coupled nodes, conversation)"):
    """Hit ratio and SLO attainment (left) and the share of requests sent to blocks the instance no
    longer held (right) against the belief's capacity (blocks per instance, log; 0 = unbounded shown
    at the right end); dashed: the true-cache run."""
    fig, (a1, a2) = new_figure(1, 2, width=12.0, height=4.4)
    caps = [c for c in df.index if c != "true"]
    top = max(int(c) for c in caps) * 4
    x = np.array([int(c) if int(c) > 0 else top for c in caps], dtype=float)
    belief = df.loc[caps]
    a1.plot(x, belief.hit_ratio, "o-", color=PALETTE[0], label="hit ratio, belief")
    a1.plot(x, belief.slo_attainment, "s-", color=PALETTE[2], label="SLO attainment, belief")
    if "true" in df.index:
        a1.axhline(df.loc["true", "hit_ratio"], ls="--", color=PALETTE[0], label="hit ratio, true cache")
        a1.axhline(df.loc["true", "slo_attainment"], ls="--", color=PALETTE[2], label="SLO attainment, true cache")
    a2.plot(x, 100 * belief.stale_share, "o-", color=PALETTE[3], label="requests sent to evicted blocks")
    a2.plot(x, 100 * belief.missed_tokens_share, "s-", color=PALETTE[4], label="prompt tokens believed, not cached")
    cache = float(df.cache_blocks.iloc[0])
    for ax in (a1, a2):
        ax.set_xscale("log")
        ax.axvline(cache, color="#777777", ls=":", label="true cache size")
        ax.set_xlabel("belief capacity (512-token blocks per instance; right end: unbounded)")
    a1.set_ylabel("fraction")
    a1.set_ylim(0, 1.05)
    a2.set_ylabel("% of requests / % of prompt tokens")
    a1.set_title("What the router achieves")
    a2.set_title("Where its belief is stale")
    a1.legend(loc="upper left", ncols=2)
    a2.legend(loc="center right")
    fig.suptitle(title)
    return fig


@styled
def dynamo_weight(df, title: str = "Dynamo's overlap_score_weight (coupled nodes, conversation)"):
    """Mean TTFT (s, left axis) and mean TBT (ms, right axis) against the weight."""
    fig, ax = new_figure(1, 1, width=7.5, height=4.4)
    w = df.index.to_numpy(dtype=float)
    ax.plot(w, df.ttft_mean_s, "o-", color=PALETTE[0], label="mean TTFT (s)")
    ax.set_xlabel("overlap_score_weight (0 = load only; 1 = default)")
    ax.set_ylabel("mean TTFT (s)", color=PALETTE[0])
    ax2 = ax.twinx()
    ax2.plot(w, df.tbt_mean_ms, "s--", color=PALETTE[3], label="mean TBT (ms)")
    ax2.set_ylabel("mean TBT (ms)", color=PALETTE[3])
    ax2.grid(False)
    ax.set_title(title)
    lines = ax.get_lines() + ax2.get_lines()
    ax.legend(lines, [ln.get_label() for ln in lines], loc="upper center")
    return fig
