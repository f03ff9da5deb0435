"""Lecture 05 figures: CPP Gantt chart, TTFT vs prompt length per scheme, MFU and network traffic,
FIFO vs interleaved chunks, and the VRAM occupation S·T of serialized vs layer-wise KV store.

Inputs come from :mod:`mooncake_lab.experiments.l05_prefill` and :mod:`mooncake_lab.cpp`.
"""
from __future__ import annotations

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.patches import PathPatch
from matplotlib.path import Path
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from . import PALETTE, figure_style, log_limits, new_figure, styled

__all__ = ["Gantt", "gantt", "TTFTVsLength", "ttft_vs_length", "mfu_and_traffic", "interleave", "vram_profile",
           "fig7_comparison",
           "SCHEME_STYLE"]

#: label and colour of each scheme, shared by every lecture-05 figure.
SCHEME_STYLE = {"one_node": ("one node", PALETTE[7]), "tp": ("TP across nodes", PALETTE[3]),
                "sp": ("SP (ring attention)", PALETTE[2]), "cpp": ("CPP (Mooncake)", PALETTE[0])}


def _k(n) -> str:
    """A prompt length as the lecture says it: 131,072 → "128k" (a power-of-two multiple of 1,024), 2,000 → "2k"."""
    n = int(n)
    return f"{n // 1024}k" if n % 1024 == 0 else f"{n / 1000:g}k"


def _tokens_axis(axis, lo: float, hi: float) -> None:
    ticks = [2.0 ** k for k in range(int(np.floor(np.log2(lo))), int(np.ceil(np.log2(hi))) + 1)]
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_major_formatter(FuncFormatter(
        lambda v, _: f"{v / 2 ** 20:g}M" if v >= 2 ** 20 else (f"{v / 1024:g}k" if v >= 1024 else f"{v:g}")))
    axis.set_minor_locator(NullLocator())


_MAX_CHUNK_LABELS = 16  # chunk numbers are written in stage 0's bars up to this many chunks
_MAX_EDGED_BARS = 512   # white edges between bars up to this many (stroking 2,048 took 20-50 ms here)
_GREY = "#BBBBBB"       # chunks of the requests not highlighted
_THRESHOLD = "#555555"  # a threshold line (the TTFT SLO): neutral, no scheme's colour


def _rects(x0: np.ndarray, width: np.ndarray, y0, height: float) -> Path:
    """Axis-aligned rectangles as one compound path (one Agg draw, however many bars)."""
    x1, y1 = x0 + width, y0 + height
    corners = np.stack([np.stack(np.broadcast_arrays(x, y), -1) for x, y in ((x0, y0), (x0, y1), (x1, y1), (x1, y0))],
                       axis=-2)
    return Path.make_compound_path_from_polys(corners.reshape(-1, 4, 2))


class Gantt:
    """Chunks on stages: one row per stage, one bar per chunk (colour cycles by chunk; hatched: the
    activation send to the next stage, when it extends past the compute). Built once; :meth:`update`
    shows a :class:`~mooncake_lab.cpp.PipelineResult`. ``live=True`` marks the changing artists
    for a dashboard. (Bars of one colour are one path: 256 chunks × 8 stages draw in a few ms, and
    the hatch is rendered once, not once per bar.)"""

    @styled
    def __init__(self, live: bool = False):
        self.figure, ax = new_figure(width=9, height=3.6)
        self.ax = ax
        self.compute = {c: ax.add_patch(PathPatch(_rects(np.zeros(1), np.zeros(1), 0.0, 0.0), facecolor=c,
                                                  edgecolor="white", linewidth=0.3, visible=False))
                        for c in PALETTE[:6] + [_GREY]}
        self.sends = ax.add_patch(PathPatch(_rects(np.zeros(1), np.zeros(1), 0.0, 0.0), facecolor="none",
                                            edgecolor=PALETTE[3], linewidth=0.5, hatch="////", visible=False))
        with figure_style(self.figure):   # chunk numbers at the style's smallest readable size
            self.labels = [ax.text(0, 0, "", ha="center", va="center", color="white", visible=False,
                                   fontsize=mpl.rcParams["legend.fontsize"])
                           for _ in range(_MAX_CHUNK_LABELS)]
        ax.set_xlabel("time since arrival (s)")
        ax.set_ylabel("pipeline stage")
        ax.set_title(" ")
        from matplotlib.patches import Patch
        self.figure.legend(handles=[Patch(facecolor=PALETTE[0], label="compute of one chunk (colour: chunk number)"),
                                    Patch(facecolor="none", edgecolor=PALETTE[3], hatch="////",
                                          label="send to the next node, after the compute ends")],
                           loc="outside lower center", ncol=2, frameon=False)
        self._stages = None
        if live:
            for a in (*self.compute.values(), self.sends, *self.labels, ax.title):
                a.set_animated(True)

    def _set_stages(self, x: int) -> None:
        with figure_style(self.figure):  # tick labels are created here: in the figure's style
            labels = [f"node {s}\n(layers {s * 80 // x}–{(s + 1) * 80 // x - 1})" for s in range(x)] if x <= 8 \
                else None
            self.ax.set_yticks(range(x), labels)
            self.ax.set_ylim(x - 0.5, -0.5)  # stage 0 on top
        self._stages = x

    def update(self, result, title: str | None = None, request: int | None = None, xmax: float | None = None):
        """Show ``result``; ``request`` greys every other request's chunks; ``xmax`` (s) fixes the x axis."""
        nc, x = result.start.shape
        if x != self._stages:
            self._set_stages(x)
        colors = np.array([PALETTE[i % 6] for i in range(nc)] if request is None else
                          [PALETTE[0] if r == request else _GREY for r in result.chunk_request])
        stage = np.arange(x, dtype=float)
        for c, patch in self.compute.items():
            on = colors == c
            patch.set_visible(bool(on.any()))
            if on.any():
                patch.set_path(_rects(result.start[on], (result.end - result.start)[on], stage - 0.4, 0.8))
                patch.set_linewidth(0.3 if nc * x <= _MAX_EDGED_BARS else 0.0)  # colours alternate anyway
        send = np.maximum(result.sent[:, :-1] - result.end[:, :-1], 0.0)
        on = send > 0
        self.sends.set_visible(bool(on.any()))
        if on.any():
            self.sends.set_path(_rects(result.end[:, :-1][on], send[on],
                                       np.broadcast_to(stage[:-1], send.shape)[on] + 0.25, 0.15))
        for i, t in enumerate(self.labels):
            t.set_visible(nc <= _MAX_CHUNK_LABELS and i < nc)
            if t.get_visible():
                t.set_position((0.5 * (result.start[i, 0] + result.end[i, 0]), 0))
                t.set_text(str(int(result.chunk_index[i])))
        self.ax.set_xlim(0, xmax if xmax is not None else float(np.nanmax(result.end)) * 1.01)
        ttft = float(np.nanmax(result.finish - result.arrival))
        self.ax.set_title(title or f"CPP over {x} node{'s' if x > 1 else ''}: {int(result.n_new.sum()):,} tokens in {nc} chunks, "
                                   f"TTFT {ttft:.2f} s")
        return self


def gantt(result, title: str | None = None, request: int | None = None):
    """A figure of :class:`Gantt` showing ``result`` (a :class:`~mooncake_lab.cpp.PipelineResult`)."""
    return Gantt().update(result, title, request).figure


class TTFTVsLength:
    """TTFT (log) vs prompt length (log 2) per scheme, with the TTFT SLO line; the legend sits under
    the axes (the curves never hide it). Built once for ``schemes``; :meth:`update` shows a
    :func:`~mooncake_lab.experiments.l05_prefill.schemes_vs_length` frame. ``live=True`` marks the
    changing artists for a dashboard."""

    @styled
    def __init__(self, schemes=tuple(SCHEME_STYLE), slo_s: float = 30.0, live: bool = False):
        self.figure, ax = new_figure(width=7.5, height=4.4)
        self.ax, self.slo_s = ax, float(slo_s)
        self.lines = {s: ax.plot([], [], "o-", color=SCHEME_STYLE[s][1], ms=4, label=SCHEME_STYLE[s][0])[0]
                      for s in schemes}
        ax.axhline(slo_s, color=_THRESHOLD, ls="--", lw=1.2, label=f"TTFT SLO {slo_s:g} s")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_locator(NullLocator())
        ax.set_xlabel("prompt length (tokens)")
        ax.set_ylabel("TTFT of one request on idle nodes (s, log)")
        ax.set_title(" ")
        self.figure.legend(loc="outside lower center", ncol=3, frameon=False)
        self._tokens = None
        if live:
            for a in (*self.lines.values(), ax.title):
                a.set_animated(True)

    def update(self, df: pd.DataFrame, title: str | None = None, ylim: tuple | None = None):
        """Show ``df`` (columns scheme, x, n_tokens, ttft_s); ``ylim`` (s) fixes the y axis (default:
        the whole decades around the data and the SLO)."""
        scheme, n, t = (df[c].to_numpy() for c in ("scheme", "n_tokens", "ttft_s"))
        n = n.astype(float)
        for s, line in self.lines.items():
            on = np.flatnonzero(scheme == s)
            on = on[np.argsort(n[on], kind="stable")]
            line.set_data(n[on], t[on])
            line.set_visible(len(on) > 0)
        tokens = (float(n.min()), float(n.max()))
        if tokens != self._tokens:
            _tokens_axis(self.ax.xaxis, *tokens)
            self.ax.set_xlim(*log_limits(*tokens))
            self._tokens = tokens
        if ylim is None:
            lo, hi = self.y_range(df)
            ylim = (10.0 ** np.floor(np.log10(lo)), 10.0 ** np.ceil(np.log10(hi)))
        self.ax.set_ylim(*ylim)
        if title is None:
            others = df.loc[df["scheme"] != "one_node", "x"]
            nodes = f" on X = {int(others.iloc[0])} nodes" if len(others) else ""
            title = f"Long-context prefill{nodes}: which scheme meets the {self.slo_s:g} s SLO?"
        self.ax.set_title(title)
        return self

    def y_range(self, df: pd.DataFrame) -> tuple:
        """The TTFT range (s) to show: ``df``'s and the SLO, with a 25% margin (markers stay inside)."""
        t = np.append(df["ttft_s"].to_numpy(dtype=float), self.slo_s)
        t = t[np.isfinite(t) & (t > 0)]
        return float(t.min()) / 1.25, float(t.max()) * 1.25


def ttft_vs_length(df: pd.DataFrame, slo_s: float = 30.0, title: str | None = None):
    """A figure of :class:`TTFTVsLength` showing ``df`` (from ``schemes_vs_length``)."""
    schemes = [s for s in SCHEME_STYLE if s in set(df["scheme"])]
    return TTFTVsLength(schemes, slo_s).update(df, title).figure


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
    ax1.set_xticks(pos, labels)
    ax1.set_ylabel("MFU over all nodes (%)")
    ax1.set_xlabel("scheme (nodes)")
    ax1.set_title("compute efficiency")
    ax1.set_ylim(0, 100)
    gb = d["net_bytes"].to_numpy() / 1e9
    sent = gb > 0                             # a log axis has no 0: one node's 0 bytes get a label, no bar
    floor = float(gb[sent].min()) / 10 if sent.any() else 1e-3
    ax2.bar(pos[sent], gb[sent], color=[c for c, on in zip(colors, sent) if on])
    for p, v in zip(pos, gb):
        ax2.annotate(f"{v:,.0f}" if v >= 100 else f"{v:.3g}", (p, v), xytext=(0, 2), textcoords="offset points",
                     ha="center") if v > 0 else ax2.annotate("0", (p, floor), xytext=(0, 2),
                                                             textcoords="offset points", ha="center")
    ax2.set_xlim(-0.6, len(pos) - 0.4)       # the 0-byte scheme keeps its place without a bar
    ax2.set_yscale("log")
    ax2.set_ylim(floor, float(gb.max()) * 6 if sent.any() else 1.0)   # room for the top bar's label
    ax2.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax2.yaxis.set_minor_locator(NullLocator())
    ax2.set_xticks(pos, labels)
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
    ax.set_xticks(pos, [f"{_k(n)}\nat {a:g} s" for n, a in zip(base["n_new"], base["arrival_s"])])
    ax.set_yscale("log")
    lo, hi = float(df["ttft_s"].min()), float(df["ttft_s"].max())
    ax.set_ylim(lo / 1.5, hi * 4)          # headroom above the bars for the legend
    ticks = [v for v in (0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100) if lo / 1.5 <= v <= hi * 4]
    ax.yaxis.set_major_locator(FixedLocator(ticks))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("request (prompt tokens, arrival time)")
    ax.set_ylabel("TTFT (s, log)")
    ax.set_title(title or "Short requests behind a 128k prefill in one CPP group")
    ax.legend(loc="upper right", ncol=2)
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
    ax.legend(loc="upper left")
    ax.set_ylim(0, max(serialized["peak_bytes"], layerwise["peak_bytes"]) / 1e9 * 1.3)
    # the layer-wise line is one layer high, too thin to see on this scale: a label points at it
    t_end = float(np.max(layerwise["t_s"]))
    ax.annotate(f"layer-wise: at most {layerwise['peak_bytes'] / 1e9:.2f} GB (one layer),\n"
                "a thin line on this scale", xy=(0.03 * t_end, layerwise["peak_bytes"] / 1e9),
                xytext=(0.06 * t_end, 0.45 * ax.get_ylim()[1]), color=PALETTE[0],
                arrowprops={"arrowstyle": "->", "color": PALETTE[0]})
    return fig


@styled
def fig7_comparison(df: pd.DataFrame, title: str | None = None):
    """Paper Fig. 7 beside ours (:func:`~mooncake_lab.experiments.l05_prefill.fig7_comparison`): store
    latency added to a prefill (ms, log), serialized and layer-wise, per prompt length
    (:func:`.storage.store_latency_bars`, as lecture 02 draws it)."""
    from .storage import store_latency_bars

    fig, ax = new_figure(width=8.5, height=4.4)
    store_latency_bars(ax, df)
    ax.set_title(title or "KV store latency: arXiv Fig. 7 (hatched, read from the figure) vs ours")
    return fig
