"""Lecture 02 figures: KV footprint, reload speedup per tier, the SSD crossover, TTFT parts,
FAST'25 Eq. 2 break-even bandwidth, and the layer-wise store (paper Fig. 7 shape).

Each function takes a DataFrame from :mod:`mooncake_lab.experiments.l02_storage` and returns a
:class:`matplotlib.figure.Figure`.
"""
from __future__ import annotations

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullLocator

from . import PALETTE, log_limits, new_figure, styled

__all__ = ["kv_footprint", "tier_speedup", "ssd_crossover", "ttft_components", "eq2_breakeven", "Eq2Chart",
           "layerwise_store", "ATTENTION_COLORS"]

#: One colour per attention design, used by every lecture-02 figure.
ATTENTION_COLORS = {"mha": PALETTE[3], "gqa": PALETTE[0], "mla": PALETTE[2]}
def _plain_log(axis) -> None:
    """Log axis with plain labels (1, 10, 100 …) and no minor ticks: mathtext labels (10⁰) and
    unlabelled minor ticks roughly double the time to render a figure."""
    axis.set_major_locator(LogLocator(base=10))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,g}"))
    axis.set_minor_locator(NullLocator())


def _tokens_log2(axis, lo: float, hi: float) -> None:
    """Log-2 token axis with ticks at powers of two labelled 512, 1k, 2k … 128k."""
    ticks = [2.0 ** k for k in range(int(np.floor(np.log2(lo))), int(np.ceil(np.log2(hi))) + 1)]
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / 1024:g}k" if v >= 1024 else f"{v:g}"))
    axis.set_minor_locator(NullLocator())


_TIER_LABELS = {"hbm": "HBM", "dram": "local DRAM", "remote_dram": "remote DRAM\n(RDMA)", "ssd": "local SSD"}


@styled
def kv_footprint(df: pd.DataFrame):
    """Two bar panels per model: KV KiB per token (what a reload moves) and GFLOP per token (what a
    recompute costs); colour = attention design."""
    fig, (ax1, ax2) = new_figure(1, 2, width=9, height=3.6, sharey=True)
    y = np.arange(len(df))
    colors = [ATTENTION_COLORS.get(a, PALETTE[7]) for a in df["attention"]]
    ax1.barh(y, df["kv_kib_per_token"], color=colors)
    ax2.barh(y, df["gflop_per_token"], color=colors)
    for yi, (kib, gf) in enumerate(zip(df["kv_kib_per_token"], df["gflop_per_token"])):
        ax1.annotate(f"{kib:,.0f}", (kib, yi), xytext=(3, 0), textcoords="offset points", va="center")
        ax2.annotate(f"{gf:,.0f}", (gf, yi), xytext=(3, 0), textcoords="offset points", va="center")
    ax1.set_yticks(y, [f"{m} ({a.upper()})" for m, a in zip(df["model"], df["attention"])])
    ax1.invert_yaxis()
    ax1.set_xlabel("KV cache per token (KiB, BF16)")
    ax2.set_xlabel("prefill compute per token (GFLOP)")
    ax1.set_title("what a reload moves")
    ax2.set_title("what a recompute costs")
    for ax in (ax1, ax2):
        ax.set_xlim(0, ax.get_xlim()[1] * 1.18)
    fig.suptitle("KV bytes vs FLOPs per token: MHA stores far more per FLOP than GQA or MLA")
    return fig


@styled
def tier_speedup(df: pd.DataFrame):
    """Grouped bars (log y): recompute time / reload time per tier and model, lines at 1× and 10×."""
    fig, ax = new_figure(width=8, height=4.2)
    tiers = list(dict.fromkeys(df["tier"]))
    models = list(dict.fromkeys(df["model"]))
    x = np.arange(len(tiers))
    w = 0.8 / len(models)
    for i, m in enumerate(models):
        sub = df[df["model"] == m].set_index("tier").loc[tiers]
        att = sub["attention"].iloc[0]
        bars = ax.bar(x - 0.4 + w * (i + 0.5), sub["speedup"], width=w, color=PALETTE[i % len(PALETTE)],
                      label=f"{m} ({att.upper()})")
        for rect, v in zip(bars, sub["speedup"]):
            ax.annotate(f"{v / 1e3:.1f}k×" if v >= 1e3 else f"{v:.3g}×", (rect.get_x() + rect.get_width() / 2, v), xytext=(0, 2),
                        textcoords="offset points", ha="center", fontsize="small")
    ax.axhline(1, color="k", lw=1, ls="--")
    ax.axhline(10, color="k", lw=1, ls=":")
    ax.annotate("break-even (1×)", (-0.45, 1), va="bottom", ha="left", fontsize="small")
    ax.annotate("10×", (-0.45, 10), va="bottom", ha="left", fontsize="small")
    bw = df.drop_duplicates("tier").set_index("tier")["bandwidth_gbs"]
    ax.set_xticks(x, [f"{_TIER_LABELS.get(t, t)}\n{bw[t]:,.0f} GB/s" for t in tiers])
    ax.set_yscale("log")
    _plain_log(ax.yaxis)
    ax.set_ylabel("recompute time / reload time (×, log)")
    ax.set_xlabel("tier the cached prefix is reloaded from (bandwidth into HBM per 8-GPU node)")
    ax.set_title("Reload vs recompute of a cached prefix, per tier (prefill at 60% of peak)")
    ax.legend(fontsize="small", ncol=2, loc="upper right")
    return fig


@styled
def ssd_crossover(curve: pd.DataFrame, window: dict):
    """Reload speedup vs SSD bandwidth (log-log) per model, lines at 1× and 10×, and the window
    ``[lo_gbs, hi_gbs)`` where both of the lecture's SSD statements hold shaded; one drive and the default array marked."""
    fig, ax = new_figure(width=8, height=4.6)
    for i, (m, sub) in enumerate(curve.groupby("model", sort=False)):
        ax.plot(sub["bandwidth_gbs"], sub["speedup"], color=PALETTE[i % len(PALETTE)], label=m)
        for key, ls in (("one_drive_gbs", ":"), ("default_gbs", "--")):
            bw = window[key]
            v = float(np.interp(np.log(bw), np.log(sub["bandwidth_gbs"]), sub["speedup"]))
            ax.plot([bw], [v], "o", color=PALETTE[i % len(PALETTE)])
            ax.annotate(f"{v:.3g}×", (bw, v), xytext=(5, -10 if i else 4), textcoords="offset points",
                        fontsize="small", color=PALETTE[i % len(PALETTE)])
    ax.axhline(1, color="k", lw=1, ls="--")
    ax.axhline(10, color="k", lw=1, ls=":")
    ax.annotate("1×: reload = recompute", (curve["bandwidth_gbs"].min(), 1), xytext=(2, 2),
                textcoords="offset points", fontsize="small")
    ax.annotate("10×", (curve["bandwidth_gbs"].min(), 10), xytext=(2, 2), textcoords="offset points",
                fontsize="small")
    lo, hi = window["lo_gbs"], window["hi_gbs"]
    if hi > lo:
        ax.axvspan(lo, hi, color=PALETTE[1], alpha=0.25,
                   label=f"both SSD statements (A and B) hold: {lo:.0f}–{hi:.0f} GB/s")
    ax.axvline(window["one_drive_gbs"], color="0.4", ls=":", lw=1,
               label=f"one NVMe drive ({window['one_drive_gbs']:g} GB/s)")
    ax.axvline(window["default_gbs"], color="0.4", ls="--", lw=1,
               label=f"our default SSD array ({window['default_gbs']:g} GB/s)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    _plain_log(ax.xaxis)
    _plain_log(ax.yaxis)
    ax.set_xlabel("SSD read bandwidth into HBM per node (GB/s, log)")
    ax.set_ylabel("reload speedup over recompute (×, log)")
    ax.set_title("The SSD verdict depends on the SSD: speedup vs bandwidth (4,096-token prefix)")
    ax.legend(fontsize="small", loc="upper left")
    return fig


class TTFTComponents:
    """Horizontal stacked bars per scenario: prefill compute + load time not hidden; total and
    speedup over recomputing annotated. Built once for ``scenarios`` (row labels); :meth:`update`
    sets a ``request_breakdown`` frame. ``live=True`` marks the changing artists for a dashboard."""

    @styled
    def __init__(self, scenarios, live: bool = False):
        n = len(scenarios)
        self.figure, ax = new_figure(width=8.5, height=1.4 + 0.42 * n)
        self.ax = ax
        y = np.arange(n)
        zero = np.zeros(n)
        self.compute = ax.barh(y, zero, color=PALETTE[0], label="prefill compute")
        self.exposed = ax.barh(y, zero, color=PALETTE[1], label="KV load not hidden")
        self.hidden = ax.barh(y, zero, facecolor="none", edgecolor=PALETTE[1], hatch="///", lw=0.8,
                              label="KV load hidden under compute (drawn, not waited for)")
        self.notes = [ax.annotate("", (0, yi), xytext=(4, 0), textcoords="offset points", va="center",
                                  fontsize="small") for yi in y]
        ax.set_yticks(y, list(scenarios))
        self.static_state = tuple(scenarios)
        ax.invert_yaxis()
        ax.set_xlabel("time to first token, no queueing (s)")
        ax.set_title(" ")
        self.figure.legend(fontsize="small", loc="outside lower center", ncol=3, frameon=False)
        if live:
            for bars in (self.compute, self.exposed, self.hidden):
                for b in bars:
                    b.set_animated(True)
            for a in (*self.notes, ax.title):
                a.set_animated(True)

    def update(self, df: pd.DataFrame, title: str | None = None, xmax: float | None = None):
        """Show ``df`` (from ``request_breakdown``, same scenarios); ``xmax`` (s) fixes the x axis."""
        hidden = (df["load_s"] - df["exposed_load_s"]).clip(lower=0).to_numpy()
        compute, exposed = df["compute_s"].to_numpy(), df["exposed_load_s"].to_numpy()
        # the row labels name the tier's bandwidth: set them from this frame, never keep the first ones
        labels = list(df["scenario"])
        if [t.get_text() for t in self.ax.get_yticklabels()] != labels:
            self.ax.set_yticks(np.arange(len(labels)), labels)
        self.static_state = tuple(labels)
        for yi in range(len(df)):
            self.compute[yi].set_width(compute[yi])
            self.exposed[yi].set_x(compute[yi])
            self.exposed[yi].set_width(exposed[yi])
            self.hidden[yi].set_x(compute[yi] + exposed[yi])
            self.hidden[yi].set_width(hidden[yi])
            t, s = df["total_s"].iloc[yi], df["speedup"].iloc[yi]
            self.notes[yi].set_text(f"{t * 1e3:,.0f} ms ({s:.2f}×)")
            self.notes[yi].xy = (t + hidden[yi], yi)
        self.ax.set_xlim(0, xmax if xmax is not None else float((df["total_s"] + hidden).max()) * 1.3)
        n_cached = int(df["n_cached"].max())
        self.ax.set_title(title or f"TTFT of one request with {n_cached:,} cached tokens:\nreload + compute the rest")
        return self


@styled
def ttft_components(df: pd.DataFrame, title: str | None = None):
    """A figure of :class:`TTFTComponents` showing ``df`` (from ``request_breakdown``)."""
    return TTFTComponents(df["scenario"]).update(df, title).figure


class Eq2Chart:
    """FAST'25 Eq. 2 minimum bandwidth vs prefix length, one line per node (log-log), storage tiers
    as horizontal lines, one highlighted point.

    Built once for ``nodes`` (one colour each, in order; ``labels`` may rename them in the legend)
    and the ``paper`` values (node → (prefix_len, GB/s), drawn as crosses); :meth:`update` sets the
    curves. The legend sits under the axes, clear of the data. ``live=True`` marks the changing
    artists as animated.
    """

    @styled
    def __init__(self, nodes, paper: dict | None = None, *, labels: dict | None = None, live: bool = False):
        self.figure, ax = new_figure(width=8, height=4.9)
        self.ax = ax
        self.colors = {node: PALETTE[i % len(PALETTE)] for i, node in enumerate(nodes)}
        labels = labels or {}
        self.curves = {node: ax.plot([], [], color=c, label=labels.get(node, f"8 × {node.split('x')[0].upper()}"))[0]
                       for node, c in self.colors.items()}
        self.paper = []
        for k, (node, (p, g)) in enumerate((paper or {}).items()):
            label = f"FAST'25 Eq. 2 values, LLaMA3-70B ({', '.join(f'{v:g}' for _, v in paper.values())} GB/s)"
            self.paper += ax.plot([p], [g], "x", ms=9, mew=2, color=self.colors.get(node, "k"),
                                  label=label if k == 0 else None)
        self.point, = ax.plot([], [], "o", ms=9, mec="k")
        self.note = ax.annotate("", (1, 1), xytext=(6, 6), textcoords="offset points", fontsize="small")
        self.tiers: list = []
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        _plain_log(ax.yaxis)
        ax.set_xlabel("cached prefix length p (tokens, log)")
        ax.set_ylabel("break-even bandwidth B (GB/s, log)")
        ax.set_title(" ")
        self.figure.legend(loc="outside lower center", ncol=min(len(self.curves) + bool(paper), 3),
                           fontsize="small", frameon=False)
        self.live, self.static_state = live, None
        if live:
            for a in (*self.curves.values(), *self.paper, self.point, self.note, ax.title):
                a.set_animated(True)

    def update(self, df: pd.DataFrame, tiers: pd.DataFrame | None = None, highlight: tuple | None = None,
               model_name: str = "LLaMA3-70B", show_paper: bool = True, ylim: tuple | None = None):
        """Show ``df`` (``eq2_curves``: node, prefix_len, min_gbs), the ``tiers`` (``tier_bandwidths``)
        and ``highlight=(node, prefix_len, gbs)``; ``show_paper``: the paper's crosses;
        ``ylim`` (GB/s) fixes the y axis (default: fit the data)."""
        ax = self.ax
        chosen = highlight[0] if highlight is not None else None
        for node, sub in df.groupby("node", sort=False):
            self.curves[node].set_data(sub["prefix_len"].to_numpy(), sub["min_gbs"].to_numpy())
            self.curves[node].set_linewidth(2.6 if node == chosen else mpl.rcParams["lines.linewidth"])
        for a in self.paper:
            a.set_visible(show_paper)
        self.point.set_visible(highlight is not None)
        self.note.set_visible(highlight is not None)
        if highlight is not None:
            node, p, g = highlight
            self.point.set_data([p], [g])
            self.point.set_color(self.colors.get(node, "k"))
            self.point.set_markeredgecolor("k")
            self.note.xy = (p, g)
            self.note.set_text(f"{g:.1f} GB/s at p = {int(p):,}")
        self._show_tiers(tiers, float(df["prefix_len"].min()))
        lo, hi = float(df["prefix_len"].min()), float(df["prefix_len"].max())
        _tokens_log2(ax.xaxis, lo, hi)
        ax.set_xlim(*log_limits(lo, hi))
        if ylim is None:
            ys = np.r_[df["min_gbs"].to_numpy(), [] if tiers is None else tiers["bandwidth_gbs"].to_numpy()]
            ylim = log_limits(ys.min(), ys.max())
        ax.set_ylim(*ylim)
        ax.set_title(f"FAST'25 Eq. 2: prefix reuse beats recompute above this bandwidth ({model_name})")
        return self

    def _show_tiers(self, tiers: pd.DataFrame | None, x: float) -> None:
        """Dotted lines with a label per storage tier (static: part of :attr:`static_state`)."""
        state = None if tiers is None else (tuple(tiers["label"]), tuple(tiers["bandwidth_gbs"]), x)
        if state == self.static_state:
            return
        for a in self.tiers:
            a.remove()
        self.tiers = []
        for j, row in enumerate(() if tiers is None else tiers.itertuples()):
            self.tiers.append(self.ax.axhline(row.bandwidth_gbs, color="0.35", ls=(0, (1 + j, 2)), lw=1))
            self.tiers.append(self.ax.annotate(f"{row.label} {row.bandwidth_gbs:g} GB/s", (x, row.bandwidth_gbs),
                                               xytext=(2, 2), textcoords="offset points", fontsize="small",
                                               color="0.25"))
        self.static_state = state


@styled
def eq2_breakeven(df: pd.DataFrame, tiers: pd.DataFrame | None = None, highlight: tuple | None = None,
                  paper: dict | None = None, model_name: str = "LLaMA3-70B"):
    """A figure of :class:`Eq2Chart` for the nodes of ``df`` (``eq2_curves``); ``tiers``,
    ``highlight=(node, prefix_len, gbs)`` and ``paper`` (node → (prefix_len, GB/s)) as there."""
    return Eq2Chart(list(dict.fromkeys(df["node"])), paper).update(df, tiers, highlight, model_name).figure


#: Fig. 7's bars, in the order drawn: column, label, colour index, hatched (the paper's, read from the figure).
_FIG7_BARS = (("paper_serialized_s", "paper Fig. 7, serialized", 3, True),
              ("ours_serialized_s", "ours, serialized", 3, False),
              ("paper_layerwise_s", "paper Fig. 7, layer-wise", 0, True),
              ("ours_layerwise_s", "ours, layer-wise", 0, False))


def store_latency_bars(ax, df: pd.DataFrame) -> None:
    """Store latency added to a prefill (ms, log y) per prompt length: the bars of ``df``'s columns among
    :data:`_FIG7_BARS` (``l02_storage.fig7_comparison``'s; the paper's hatched), grouped by length. The
    one drawing of Fig. 7's comparison (lectures 02 and 05)."""
    bars = [b for b in _FIG7_BARS if b[0] in df]
    pos = np.arange(len(df))
    w = 0.8 / len(bars)
    for k, (col, label, color, hatched) in enumerate(bars):
        style = (dict(facecolor="white", edgecolor=PALETTE[color], hatch="///", lw=1) if hatched
                 else dict(color=PALETTE[color]))
        ax.bar(pos + (k - (len(bars) - 1) / 2) * w, df[col].to_numpy() * 1e3, width=w, label=label, **style)
    ax.set_yscale("log")
    _plain_log(ax.yaxis)
    ax.set_xticks(pos, [f"{n // 1024}k" for n in df["n_tokens"]])
    ax.set_xlabel("prompt length (tokens)")
    ax.set_ylabel("store latency added to the prefill (ms, log)")
    ax.set_ylim(top=ax.get_ylim()[1] * 8)          # room for the legend above the bars
    ax.legend(fontsize="small", ncol=2, loc="upper left")


@styled
def layerwise_store(df: pd.DataFrame, paper: pd.DataFrame | None = None):
    """Paper Fig. 7's experiment: left, prefill + KV store time, serialized vs layer-wise (ours); right,
    the store latency added to the prefill (log y), ours beside the paper's bars when ``paper``
    (``l02_storage.fig7_comparison``) is given. The left title names ``df.attrs["preset"]`` (set by
    ``l02_storage.layerwise_store``; "ideal" if absent)."""
    fig, (ax1, ax2) = new_figure(1, 2, width=11, height=4.4)
    x = df["n_tokens"]
    ax1.plot(x, df["serialized_s"], "o-", color=PALETTE[3], label="prefill, then store (serialized)")
    ax1.plot(x, df["layerwise_s"], "s-", color=PALETTE[0], label="store layer by layer (layer-wise)")
    ax1.plot(x, df["prefill_s"], ":", color="k", lw=1, label="prefill alone")
    ax1.set_xscale("log", base=2)
    _tokens_log2(ax1.xaxis, x.min(), x.max())
    ax1.set_xlabel("prompt length (tokens)")
    ax1.set_ylabel("prefill + KV store (s)")
    ax1.set_title(f"ours: total time ({df.attrs.get('preset', 'ideal')} preset, 128 GB/s)")
    ax1.legend(fontsize="small", loc="upper left")
    if paper is not None:
        store_latency_bars(ax2, paper)
        ax2.set_title("store latency: ours vs the paper")
    else:
        store_latency_bars(ax2, df.rename(columns={"exposed_serialized_s": "ours_serialized_s",
                                                   "exposed_layerwise_s": "ours_layerwise_s"}))
        ax2.set_title("store latency")
    fig.suptitle("Storing KV to CPU DRAM layer by layer (Mooncake Fig. 7)")
    return fig
