"""Lecture 05 figures: CPP Gantt chart, TTFT vs prompt length per scheme, MFU and network traffic,
FIFO vs interleaved chunks, and the VRAM occupation S·T of serialized vs layer-wise KV store.

Inputs come from :mod:`mooncake_lab.experiments.l05_prefill` and :mod:`mooncake_lab.cpp`.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from . import PALETTE, SLO_COLOR, new_figure, styled

__all__ = ["gantt", "ttft_vs_length", "mfu_and_traffic", "interleave", "vram_profile", "SCHEME_STYLE"]

#: label and colour of each scheme, shared by every lecture-05 figure.
SCHEME_STYLE = {"one_node": ("one node", PALETTE[7]), "tp": ("TP across nodes", PALETTE[3]),
                "sp": ("SP (ring attention)", PALETTE[2]), "cpp": ("CPP (Mooncake)", PALETTE[0])}


def _tokens_axis(axis, lo: float, hi: float) -> None:
    ticks = [2.0 ** k for k in range(int(np.floor(np.log2(lo))), int(np.ceil(np.log2(hi))) + 1)]
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_major_formatter(FuncFormatter(
        lambda v, _: f"{v / 2 ** 20:g}M" if v >= 2 ** 20 else (f"{v / 1024:g}k" if v >= 1024 else f"{v:g}")))
    axis.set_minor_locator(NullLocator())


@styled
def gantt(result, title: str | None = None, request: int | None = None):
    """Chunks on stages: one row per stage, one bar per chunk (colour cycles by chunk; hatched: the
    activation send to the next stage, when it extends past the compute)."""
    fig, ax = new_figure(width=9, height=3.6)
    x = result.n_stages
    nc = result.start.shape[0]
    colors = [PALETTE[i % 6] for i in range(nc)] if request is None else \
        [PALETTE[0] if r == request else "#BBBBBB" for r in result.chunk_request]
    for s in range(x):
        spans = list(zip(result.start[:, s], result.end[:, s] - result.start[:, s]))
        ax.broken_barh(spans, (s - 0.4, 0.8), facecolors=colors, edgecolor="white", linewidth=0.3)
        if s < x - 1:
            send = np.maximum(result.sent[:, s] - result.end[:, s], 0.0)
            if np.any(send > 0):
                ax.broken_barh(list(zip(result.end[:, s], send)), (s + 0.25, 0.15), facecolors="none",
                               edgecolor=PALETTE[3], linewidth=0.5, hatch="////")
    if nc <= 16:
        for i in range(nc):
            ax.text(0.5 * (result.start[i, 0] + result.end[i, 0]), 0, str(int(result.chunk_index[i])),
                    ha="center", va="center", fontsize=7, color="white")
    ax.set_yticks(range(x), [f"node {s}\n(layers {s * 80 // x}–{(s + 1) * 80 // x - 1})" if x <= 8 else f"node {s}"
                             for s in range(x)] if x <= 8 else range(x))
    ax.invert_yaxis()
    ax.set_ylim(x - 0.5, -0.5)
    ax.set_xlim(0, float(np.nanmax(result.end)) * 1.01)
    ax.set_xlabel("time since arrival (s)")
    ax.set_ylabel("pipeline stage")
    ttft = float(np.nanmax(result.finish - result.arrival))
    ax.set_title(title or f"CPP over {x} node(s): {int(result.n_new.sum()):,} tokens in {nc} chunks, "
                          f"TTFT {ttft:.2f} s")
    return fig


@styled
def ttft_vs_length(df: pd.DataFrame, slo_s: float = 30.0, title: str | None = None):
    """TTFT (log) vs prompt length (log 2) per scheme, with the TTFT SLO line."""
    fig, ax = new_figure(width=7.5, height=4.4)
    for scheme, (label, color) in SCHEME_STYLE.items():
        d = df[df["scheme"] == scheme].sort_values("n_tokens")
        if d.empty:
            continue
        xs = int(d["x"].iloc[0])
        ax.plot(d["n_tokens"], d["ttft_s"], "o-", color=color, ms=4,
                label=label + ("" if scheme == "one_node" else f", X = {xs}"))
    ax.axhline(slo_s, color=SLO_COLOR, ls="--", lw=1.2, label=f"TTFT SLO {slo_s:g} s")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    _tokens_axis(ax.xaxis, df["n_tokens"].min(), df["n_tokens"].max())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("prompt length (tokens)")
    ax.set_ylabel("TTFT of one request on idle nodes (s, log)")
    ax.set_title(title or "Long-context prefill: which scheme meets the 30 s SLO?")
    ax.legend(fontsize="small")
    return fig


@styled
def mfu_and_traffic(df: pd.DataFrame, title: str | None = None):
    """Two bar panels per scheme at one prompt length: MFU (%) and RDMA traffic (GB, log)."""
    fig, (ax1, ax2) = new_figure(1, 2, width=9, height=3.6)
    d = df.set_index("scheme").loc[[s for s in SCHEME_STYLE if s in set(df["scheme"])]]
    short = {"one_node": "one node", "tp": "TP", "sp": "SP", "cpp": "CPP"}
    labels = [short[s] + ("" if s == "one_node" else f"\nX = {int(d.loc[s, 'x'])}") for s in d.index]
    colors = [SCHEME_STYLE[s][1] for s in d.index]
    pos = np.arange(len(d))
    ax1.bar(pos, d["mfu"] * 100, color=colors)
    for p, v in zip(pos, d["mfu"] * 100):
        ax1.annotate(f"{v:.0f}%", (p, v), xytext=(0, 2), textcoords="offset points", ha="center")
    ax1.set_xticks(pos, labels, fontsize="small")
    ax1.set_ylabel("MFU over all nodes (%)")
    ax1.set_xlabel("scheme (nodes)")
    ax1.set_title("compute efficiency")
    ax1.set_ylim(0, 100)
    gb = np.maximum(d["net_bytes"].to_numpy() / 1e9, 1e-3)
    ax2.bar(pos, gb, color=colors)
    for p, v, raw in zip(pos, gb, d["net_bytes"]):
        ax2.annotate("0" if raw == 0 else f"{v:,.3g}", (p, v), xytext=(0, 2), textcoords="offset points",
                     ha="center")
    ax2.set_yscale("log")
    ax2.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax2.yaxis.set_minor_locator(NullLocator())
    ax2.set_xticks(pos, labels, fontsize="small")
    ax2.set_ylabel("bytes sent over RDMA, all nodes (GB, log)")
    ax2.set_xlabel("scheme (nodes)")
    ax2.set_title("network traffic")
    n = int(d["n_tokens"].iloc[0])
    fig.suptitle(title or f"One {n:,}-token prefill: CPP keeps the MFU and sends the fewest bytes")
    return fig


@styled
def interleave(df: pd.DataFrame, title: str | None = None):
    """TTFT per request under FIFO-by-request vs chunk-interleaved order (grouped bars, log y)."""
    fig, ax = new_figure(width=7.5, height=3.8)
    reqs = sorted(df["request"].unique())
    pos = np.arange(len(reqs))
    for k, (order, color) in enumerate((("fifo", PALETTE[3]), ("interleave", PALETTE[0]))):
        d = df[df["order"] == order].set_index("request").loc[reqs]
        ax.bar(pos + (k - 0.5) * 0.38, d["ttft_s"], width=0.38, color=color,
               label="FIFO by request" if order == "fifo" else "chunks interleaved")
    base = df[df["order"] == "fifo"].set_index("request").loc[reqs]
    ax.set_xticks(pos, [f"{int(n) // 1000}k\nat {a:g} s" for n, a in zip(base["n_new"], base["arrival_s"])])
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("request (prompt tokens, arrival time)")
    ax.set_ylabel("TTFT (s, log)")
    ax.set_title(title or "Short requests behind a 128k prefill in one CPP group")
    ax.legend(fontsize="small")
    return fig


@styled
def vram_profile(serialized: dict, layerwise: dict, n_tokens: int | None = None, title: str | None = None):
    """KV bytes held in VRAM over time, serialized vs layer-wise store; the area is S·T (GB·s)."""
    fig, ax = new_figure(width=7.5, height=3.8)
    for prof, label, color in ((serialized, "serialized: store after the prefill", PALETTE[3]),
                               (layerwise, "layer-wise: store each layer at once", PALETTE[0])):
        ax.fill_between(prof["t_s"], prof["bytes"] / 1e9, step="post", alpha=0.35, color=color)
        ax.step(prof["t_s"], prof["bytes"] / 1e9, where="post", color=color,
                label=f"{label} (S·T = {prof['gb_s']:,.3g} GB·s)")
    ax.set_xlabel("time since the prefill started (s)")
    ax.set_ylabel("this request's KV in VRAM (GB)")
    ax.set_title(title or f"VRAM occupation of one {n_tokens or 0:,}-token prefill's KV")
    ax.legend(fontsize="small", loc="upper left")
    ax.set_ylim(0, max(serialized["peak_bytes"], layerwise["peak_bytes"]) / 1e9 * 1.25)
    return fig
