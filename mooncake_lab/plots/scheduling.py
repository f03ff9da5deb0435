"""Figures of lecture 04: KVCache-centric scheduling (arXiv v3 Fig. 8 and what explains it).

Each function takes data from :mod:`mooncake_lab.experiments.l04_scheduling` (DataFrames or
``SimResult``\\ s) and returns a :class:`matplotlib.figure.Figure` with a title and axis labels with
units. TTFT axes are logarithmic (TTFTs span 0.1 s … 20 min) with plain-text decade ticks (fast to
redraw in a dashboard); the 30 s TTFT SLO is drawn as a line.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.colors import to_rgb
from matplotlib.patches import Patch
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator, NullLocator

from . import PALETTE, SLO_COLOR, figure_style, new_figure, styled

__all__ = ["ttft_by_policy", "speed_sweep", "policy_metrics", "instance_queues_grid", "replica_bars",
           "PolicyView", "policy_view", "EstimateBars", "estimate_bars", "contention_ttft", "replicas_over_time",
           "POLICY_COLORS", "POLICY_LABELS", "NEUTRAL", "shades"]

#: One colour per policy, the same in every figure of the lecture (and its dashboards). Series that are
#: not policies (queue / fetch / prefill parts, computed / reused tokens, runs of one policy) use
#: :data:`NEUTRAL` colours, never a policy's.
POLICY_COLORS = {"random": PALETTE[4], "load": PALETTE[1], "cache_aware": PALETTE[0], "kvcentric": PALETTE[2]}
#: Colours of series that are not policies: light grey, dark grey, yellow, sky blue.
NEUTRAL = {"light": "#BBBBBB", "dark": "#555555", "yellow": PALETTE[6], "sky": PALETTE[5]}


def shades(color, n: int) -> list:
    """``n`` distinguishable shades of ``color`` (dark to light): one policy's instances in one panel."""
    r, g, b = to_rgb(color)
    if n <= 1:
        return [(r, g, b)]
    out = []
    for k in range(n):
        t = -0.45 + 0.9 * k / (n - 1)          # −0.45 (towards black) … +0.45 (towards white)
        out.append(tuple(c * (1 + t) if t < 0 else c + (1 - c) * t for c in (r, g, b)))
    return out
POLICY_LABELS = {"random": "random", "load": "load balancing", "cache_aware": "cache-aware",
                 "kvcentric": "KVCache-centric"}
_SHORT = {"random": "random", "load": "load\nbalancing", "cache_aware": "cache-\naware",
          "kvcentric": "KVCache-\ncentric"}
_SLO_S = 30.0  # arXiv v3 §8 TTFT SLO, s
_CDF_POINTS = 400


def _log_ticks(ax, lo: float, hi: float, axis: str = "y"):
    """Decade ticks labelled as plain numbers, no minor ticks."""
    lo, hi = max(lo, 1e-3), max(hi, lo * 10)
    ticks = [10.0 ** k for k in range(int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi))) + 1)]
    labels = [f"{t:g}" for t in ticks]
    if axis == "y":
        ax.set_yscale("log")
        ax.set_yticks(ticks, labels)
        ax.yaxis.set_minor_locator(NullLocator())
        ax.set_ylim(ticks[0], ticks[-1])
    else:
        ax.set_xscale("log")
        ax.set_xticks(ticks, labels)
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlim(ticks[0], ticks[-1])


#: Whisker percentiles of the TTFT boxes (the box is the 25th–75th percentile).
BOX_WHISKERS = (5, 95)


@styled
def ttft_by_policy(samples: dict, paper: dict | None = None, slo_s: float = _SLO_S):
    """arXiv Fig. 8 style: one box per policy (whiskers 5–95%), mean as a diamond with its value,
    the paper's mean as ×, the TTFT SLO as a line. ``samples``: ``{panel title: ttft_samples frame}``."""
    n = len(samples)
    fig, axes = new_figure(1, n, width=5.2 * n, height=4.4, sharey=True)
    axes = np.atleast_1d(axes)
    allv = np.concatenate([d["ttft_s"].to_numpy() for d in samples.values()])
    for ax, (name, df) in zip(axes, samples.items()):
        pols = list(dict.fromkeys(df["policy"]))
        data = [df.loc[df["policy"] == p, "ttft_s"].to_numpy() for p in pols]
        bp = ax.boxplot(data, whis=BOX_WHISKERS, showfliers=False, patch_artist=True, widths=0.55,
                        medianprops={"color": "black", "lw": 1.2})
        for patch, p in zip(bp["boxes"], pols):
            patch.set_facecolor(POLICY_COLORS.get(p, PALETTE[0]))
            patch.set_alpha(0.45)
        for k, (p, v) in enumerate(zip(pols, data), start=1):
            m = float(np.mean(v))
            ax.plot(k, m, "D", color=POLICY_COLORS.get(p, PALETTE[0]), mec="black", ms=8)
            ax.annotate(f"{m:.3g} s", (k, m), xytext=(8, 4), textcoords="offset points")
            if paper and p in paper:
                ax.plot(k, paper[p], "x", color="black", ms=9, mew=2)
        ax.axhline(slo_s, color=SLO_COLOR, ls="--", lw=1.2)
        ax.set_xticks(range(1, len(pols) + 1), [POLICY_LABELS.get(p, p) for p in pols])
        _log_ticks(ax, np.percentile(allv, 1), np.max(allv))
        ax.set_title(f"TTFT per policy — {name}", y=1.0)
        ax.set_xlabel("Conductor policy (8 prefill + 8 decode)")
    axes[0].set_ylabel("TTFT (s, log scale)")
    # the legend's marks are drawn in no policy's colour: each box and diamond has its policy's
    handles = [Line2D([], [], marker="D", ls="", color="white", mec="black", ms=8, label="our mean (box colour)"),
               Line2D([], [], marker="x", ls="", color="black", ms=9, mew=2, label="paper's mean (Fig. 8)"),
               Line2D([], [], color="black", lw=1.2, label="our median"),
               Line2D([], [], color=SLO_COLOR, ls="--", lw=1.2, label=f"TTFT SLO {slo_s:g} s")]
    axes[0].legend(handles=handles, loc="upper right")
    return fig


@styled
def speed_sweep(sweep: pd.DataFrame, paper: dict | None = None, chosen_speed: float | None = None,
                slo_s: float = _SLO_S):
    """Mean TTFT vs replay speed per policy (log y), the offered load under each tick, the paper's
    Fig. 8 means as dashed levels, and the chosen speed marked."""
    fig, ax = new_figure(width=7.6, height=4.6)
    for p, g in sweep.groupby("policy", sort=False):
        c = POLICY_COLORS.get(p, PALETTE[0])
        ax.plot(g["speed"], g["ttft_mean_s"], "o-", color=c, label=POLICY_LABELS.get(p, p))
        if paper and p in paper:
            ax.axhline(paper[p], color=c, ls=":", lw=1.2)
    ax.axhline(slo_s, color=SLO_COLOR, ls="--", lw=1.2, label=f"TTFT SLO {slo_s:g} s")
    if chosen_speed is not None:
        ax.axvline(chosen_speed, color="black", lw=1, alpha=0.6)
        ax.annotate(f"chosen: {chosen_speed:g}×", (chosen_speed, 0.98), xycoords=("data", "axes fraction"),
                    xytext=(4, -12), textcoords="offset points")
    sp = sorted(sweep["speed"].unique())
    load = sweep.drop_duplicates("speed").set_index("speed")["offered_load"]
    ax.set_xticks(sp, [f"{s:g}×\n{load[s]:.2f}" for s in sp])
    _log_ticks(ax, max(sweep["ttft_mean_s"].min(), 0.5), sweep["ttft_mean_s"].max())
    ax.set_xlabel("replay speed (×) / offered prefill load without cache (fraction of the pool's capacity)")
    ax.set_ylabel("mean TTFT (s, log scale)")
    ax.set_title("Mean TTFT vs replay speed (dotted: the paper's Fig. 8 means)", y=1.0)
    ax.legend(loc="upper left")
    return fig


@styled
def policy_metrics(table: pd.DataFrame):
    """Three panels per policy: TTFT-SLO attainment, hit ratio (local + fetched), and prompt tokens
    computed vs reused (millions). ``table``: :func:`~...l04_scheduling.policy_comparison`."""
    fig, (a1, a2, a3) = new_figure(1, 3, width=12.0, height=4.0)
    pols = list(table.index)
    x = np.arange(len(pols))
    colors = [POLICY_COLORS.get(p, PALETTE[0]) for p in pols]
    labels = [_SHORT.get(p, p) for p in pols]
    a1.bar(x, table["ttft_slo_attainment"], color=colors)
    for k, v in enumerate(table["ttft_slo_attainment"]):
        a1.annotate(f"{v:.0%}", (k, v), ha="center", va="bottom")
    a1.set_ylim(0, 1.08)
    a1.set_ylabel("share of requests with TTFT ≤ 30 s")
    a1.set_title("TTFT SLO attainment", y=1.0)
    local = table["hit_ratio"] - table["fetched_ratio"]
    a2.bar(x, local, color=colors)
    a2.bar(x, table["fetched_ratio"], bottom=local, color=colors, alpha=0.45, hatch="//")
    a2.set_ylim(0, max(float(table["hit_ratio"].max()), 1e-3) * 1.3)   # headroom: the legend above the bars
    a2.set_ylabel("reused prompt tokens (fraction)")
    a2.set_title("Prefix-cache hit ratio", y=1.0)
    # the bars wear their policy's colour; the legend says only solid vs hatched, in no policy's colour
    a2.legend(handles=[Patch(facecolor=NEUTRAL["dark"], label="local prefix (solid)"),
                       Patch(facecolor=NEUTRAL["light"], hatch="//", label="fetched over RDMA (hatched)")],
              loc="upper left")
    g = 1e6
    comp, hit, fet = (table[k].to_numpy(dtype=float) / g for k in ("computed_tokens", "local_hit_tokens",
                                                                    "fetched_tokens"))
    a3.bar(x, comp, color=NEUTRAL["light"], label="computed")
    a3.bar(x, hit, bottom=comp, color=NEUTRAL["dark"], label="local hit")
    a3.bar(x, fet, bottom=comp + hit, color=NEUTRAL["yellow"], hatch="//", edgecolor=NEUTRAL["dark"], lw=0.5,
           label="fetched")
    # every policy sees the same prompts, so the stacks are equally tall: the legend goes in a row
    # above them (headroom of one legend row), not on them
    a3.set_ylim(0, float((comp + hit + fet).max()) * 1.25)
    a3.set_ylabel("prompt tokens (millions)")
    a3.set_title("Computed vs reused tokens", y=1.0)
    a3.legend(loc="upper center", ncol=3, columnspacing=1.0, handlelength=1.5, borderaxespad=0.3)
    for ax in (a1, a2, a3):
        ax.set_xticks(x, labels)
        ax.set_xlabel("policy")
    return fig


@styled
def instance_queues_grid(queues: dict):
    """Queued prefill work (s) per instance over time, one panel per policy (own linear y scale).
    ``queues``: ``{policy: instance_queues frame}``."""
    n = len(queues)
    ncols = 2 if n > 1 else 1
    nrows = int(np.ceil(n / ncols))
    fig, axes = new_figure(nrows, ncols, width=11.0, height=3.0 * nrows + 0.6, sharex=True)
    axes = np.atleast_1d(axes).ravel()
    for ax, (p, q) in zip(axes, queues.items()):
        t_min = q.index.to_numpy() / 60.0
        for col, c in zip(q.columns, shades(POLICY_COLORS.get(p, PALETTE[0]), q.shape[1])):
            ax.plot(t_min, q[col].to_numpy(), lw=0.7, color=c, alpha=0.8)
        ax.axhline(_SLO_S, color=SLO_COLOR, ls="--", lw=1)
        ax.set_title(f"{POLICY_LABELS.get(p, p)}: max {q.to_numpy().max():,.0f} s", y=1.0)
        ax.set_ylim(0, None)
        ax.set_ylabel("queued work (s)")
    for ax in axes[-ncols:]:
        ax.set_xlabel("time (min)")
    for ax in axes[n:]:
        ax.set_visible(False)
    fig.suptitle("Prefill queue of each instance over time\n(a line per instance; dashed: 30 s; "
                 "each panel has its own scale)")
    return fig


@styled
def replica_bars(summary: pd.DataFrame, n_instances: int | None = None):
    """Mean cached copies of a block, by popularity-rank bin (groups) and policy (bars).
    ``summary``: :func:`~...l04_scheduling.replica_summary`."""
    fig, ax = new_figure(width=8.0, height=4.2)
    pols = list(summary.columns)
    x = np.arange(len(summary.index))
    w = 0.8 / len(pols)
    for k, p in enumerate(pols):
        ax.bar(x + (k - (len(pols) - 1) / 2) * w, summary[p], w, color=POLICY_COLORS.get(p, PALETTE[k]),
               label=POLICY_LABELS.get(p, p))
    if n_instances:
        ax.axhline(n_instances, color="black", lw=1, ls=":", label=f"all {n_instances} instances")
    ax.set_xticks(x, [str(i) for i in summary.index])
    ax.set_xlabel("popularity rank of the block (1 = used by the most requests)")
    ax.set_ylabel("instances holding it at the end (mean)")
    ax.set_title("Hot-block replicas in the prefill instances' caches", y=1.0)
    ax.legend()
    return fig


@styled
def contention_ttft(table: pd.DataFrame):
    """Mean TTFT (s) per NIC speed (groups) for each policy without (solid) and with (hatched) link
    contention. ``table``: :func:`~...l04_scheduling.contention_comparison`."""
    fig, ax = new_figure(width=8.0, height=4.4)
    gbps = sorted(table.index.get_level_values("gbps").unique())
    pols = list(table.index.get_level_values("policy").unique())
    x = np.arange(len(gbps))
    bars = [(p, on) for p in pols for on in (False, True)]
    w = 0.8 / len(bars)
    top = 0.0
    for k, (p, on) in enumerate(bars):
        v = np.array([table.loc[(g, on, p), "ttft_mean_s"] for g in gbps], dtype=float)
        top = max(top, float(np.nanmax(v)))
        ax.bar(x + (k - (len(bars) - 1) / 2) * w, v, w, color=POLICY_COLORS.get(p, PALETTE[k]),
               alpha=0.5 if on else 1.0, hatch="//" if on else None,
               label=f"{POLICY_LABELS.get(p, p)}, {'shared links' if on else 'free network'}")
    ax.set_ylim(0, top * 1.45)  # headroom: the legend sits above the bars, not on them
    ax.set_xticks(x, [f"{g:g}" for g in gbps])
    ax.set_xlabel("RDMA bandwidth per prefill node (Gbit/s)")
    ax.set_ylabel("mean TTFT (s)")
    ax.set_title("Mean TTFT with and without network contention", y=1.0)
    ax.legend(loc="upper center", ncol=2, columnspacing=1.0, handlelength=1.5, borderaxespad=0.3)
    return fig


@styled
def replicas_over_time(frames: dict, n_instances: int | None = None, speed: float | None = None):
    """Replica counts of hot blocks over time (FAST'25 Fig. 11's shape): per run of ``frames``
    (``{label: replicas_over_time frame}``), the mean over ranks 2 … top (line) with their min–max
    (band); rank 1 (the system prompt) dotted. ``speed``: the runs' replay speed, named on the time
    axis (their clock is the replay's: at 0.4× the trace's hour lasts 2.5)."""
    fig, ax = new_figure(width=8.0, height=4.4)
    for k, (label, f) in enumerate(frames.items()):
        t = f.index.to_numpy() / 60.0
        rest = f.iloc[:, 1:].to_numpy(dtype=float) if f.shape[1] > 1 else f.to_numpy(dtype=float)
        # both runs are KVCache-centric's: its colour, the second (and any further) darker and dashed
        c = POLICY_COLORS["kvcentric"] if k == 0 else shades(POLICY_COLORS["kvcentric"], 2 + k)[0]
        ax.plot(t, rest.mean(axis=1), "-" if k == 0 else "--", color=c, lw=2,
                label=f"{label}: ranks 2–{f.shape[1]}" if f.shape[1] > 1 else label)
        ax.fill_between(t, rest.min(axis=1), rest.max(axis=1), color=c, alpha=0.2, lw=0,
                        hatch=None if k == 0 else "//")
        if k == 0 and f.shape[1] > 1:
            ax.plot(t, f.iloc[:, 0].to_numpy(dtype=float), ":", color="black", lw=1.2, label="rank 1 (both runs)")
    hi = n_instances or max(int(f.to_numpy().max()) for f in frames.values())
    ax.set_ylim(0, hi * 1.5)  # headroom for the legend above the curves
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("time since the first arrival (min" + (f", trace replayed at {speed:g}×)" if speed else ")"))
    ax.set_ylabel("prefill instances holding the block")
    ax.set_title("Hot-block replicas over time (KVCache-centric)", y=1.0)
    ax.legend(loc="upper center", ncol=1, borderaxespad=0.3)
    return fig


class PolicyView:
    """The main dashboard's figure: the TTFT CDF of one run (vertical lines: its mean dash-dotted,
    the paper's mean dotted, the SLO dashed; no legend, the title says which is which) and its
    per-instance prefill queues over time. Built once; :meth:`update` shows a run. ``live=True``
    marks the changing artists for a dashboard."""

    @styled
    def __init__(self, slo_s: float = _SLO_S, live: bool = False):
        self.figure, (a1, a2) = new_figure(1, 2, width=10.0, height=3.6)
        self.figure.set_dpi(85)  # redrawn on every slider move: fewer pixels keep it within budget
        self.a1, self.a2, self.live = a1, a2, live
        self.cdf = a1.plot([], [])[0]
        self.mean_line = a1.axvline(1.0, ls="-.", lw=1.2)
        self.paper_line = a1.axvline(1.0, color="black", ls=":", lw=1.2)
        a1.axvline(slo_s, color=SLO_COLOR, ls="--", lw=1.2)
        self._ttft_max = None
        a1.set_ylim(0, 1.02)
        a1.set_xlabel("TTFT (s, log scale)")
        a1.set_ylabel("fraction of requests")
        a1.yaxis.set_major_locator(MaxNLocator(4))
        self.slo_line = a2.axhline(slo_s, color=SLO_COLOR, ls="--", lw=1)
        a2.set_xlabel("time (min)")
        a2.set_ylabel("queued prefill work (s)")
        a2.xaxis.set_major_locator(MaxNLocator(5))
        a2.yaxis.set_major_locator(MaxNLocator(4))
        for ax in (a1, a2):
            ax.set_title(" ", y=1.0)
        self.queues: list = []  # one line per instance, added as needed (extras hidden)
        self.slo_s = float(slo_s)
        if live:  # the queue scale changes with most moves: its axis is drawn per move, not redrawn whole
            for a in (self.cdf, self.mean_line, self.paper_line, a1.title, a2.title, a2.yaxis, self.slo_line):
                a.set_animated(True)

    @staticmethod
    def completed_ttfts(result) -> np.ndarray:
        """TTFTs (s) of the requests ``result`` completed, sorted."""
        df = result.requests
        return np.sort(df.loc[df["outcome"] == "completed", "ttft_s"].to_numpy())

    def update(self, result, queues: pd.DataFrame, paper_mean: float | None = None, ttft_max: float | None = None,
               minutes: float | None = None, queue_max: float | None = None, ttfts: np.ndarray | None = None):
        """Show ``result`` (a ``SimResult``) and its ``queues`` (``instance_queues``); the limits fix the
        axes: ``ttft_max`` (s, rounded up to a decade), ``minutes`` (time axis), ``queue_max`` (s).
        ``ttfts``: :meth:`completed_ttfts` of ``result``, if the caller has it already."""
        t = self.completed_ttfts(result) if ttfts is None else ttfts
        p = result.config.prefill_policy
        c = POLICY_COLORS.get(p, PALETTE[0])
        if len(t):  # the CDF at 400 quantiles (a 12k-point step line triples the render time)
            qs = np.linspace(0.0, 1.0, min(len(t), _CDF_POINTS))
            self.cdf.set_data(np.maximum(np.quantile(t, qs), 1e-2), qs * len(t) / len(result.requests))
            self.mean_line.set_xdata([float(t.mean())] * 2)
        for a in (self.cdf, self.mean_line):
            a.set_color(c)
            a.set_visible(bool(len(t)))
        self.paper_line.set_visible(paper_mean is not None)
        if paper_mean is not None:
            self.paper_line.set_xdata([paper_mean] * 2)
        hi = ttft_max if ttft_max is not None else max(float(t.max()) if len(t) else 10.0, self.slo_s * 2)
        if hi != self._ttft_max:
            with figure_style(self.figure):  # tick labels are created here: in the figure's style
                _log_ticks(self.a1, 0.1, hi, axis="x")
            self._ttft_max = hi
        self.a1.set_title(f"TTFT CDF, {POLICY_LABELS.get(p, p)} (-·- mean, ··· paper, -- SLO)", y=1.0)
        tm = queues.index.to_numpy() / 60.0
        while len(self.queues) < queues.shape[1]:
            with figure_style(self.figure):
                k = len(self.queues)
                self.queues.append(self.a2.plot([], [], lw=0.8, alpha=0.8, animated=self.live)[0])
        values = queues.to_numpy()
        for line, sh in zip(self.queues, shades(c, len(self.queues))):   # shades of the policy's colour
            line.set_color(sh)
        for k, line in enumerate(self.queues):
            line.set_visible(k < values.shape[1])
            if k < values.shape[1]:
                line.set_data(tm, values[:, k])
        self.a2.set_xlim(0, minutes if minutes is not None else max(float(tm.max()) if len(tm) else 1.0, 1e-3))
        top = max(float(values.max()) if values.size else 0.0, self.slo_s) * 1.05
        self.a2.set_ylim(0, queue_max if queue_max is not None else top)
        self.a2.set_title(f"Queue of each of the {values.shape[1]} prefill instances", y=1.0)
        return self


def policy_view(result, queues: pd.DataFrame, paper_mean: float | None = None, slo_s: float = _SLO_S):
    """A figure of :class:`PolicyView` showing ``result`` and its ``queues`` (``instance_queues``)."""
    return PolicyView(slo_s).update(result, queues, paper_mean).figure


class EstimateBars:
    """The worked example: per instance, stacked queue / transfer / prefill estimate (s), one panel
    per policy, the chosen instance starred; the legend sits under the panels. Built once for
    ``policies`` × ``instances``; :meth:`update` shows ``{policy: estimate_table}``. ``live=True``
    marks the changing artists for a dashboard."""

    @styled
    def __init__(self, policies=("cache_aware", "kvcentric"), instances=(0, 1, 2), live: bool = False):
        n, k = len(policies), len(instances)
        self.figure, axes = new_figure(1, n, width=5.0 * n, height=3.6, sharex=True)
        self.axes = dict(zip(policies, np.atleast_1d(axes)))
        self.instances = tuple(instances)
        y, zero = np.arange(k), np.zeros(k)
        self.bars, self.notes = {}, {}
        for pol, ax in self.axes.items():
            self.bars[pol] = (ax.barh(y, zero, color=NEUTRAL["light"], label="queue"),
                              ax.barh(y, zero, color=NEUTRAL["yellow"], edgecolor=NEUTRAL["dark"], lw=0.5,
                                      label="transfer (RDMA)"),
                              ax.barh(y, zero, color=NEUTRAL["dark"], label="prefill"))
            self.notes[pol] = [ax.annotate("", (0, yi), xytext=(4, 0), textcoords="offset points", va="center")
                               for yi in y]
            ax.set_yticks(y, [f"instance {i}" for i in instances])
            ax.set_ylim(k - 0.5, -0.5)  # instance 0 on top
            ax.set_xlabel("estimated TTFT (s)")
            ax.set_title(f"{POLICY_LABELS.get(pol, pol)}", y=1.0)
        self.axes[policies[0]].set_ylabel("prefill instance")
        handles = self.bars[policies[0]]
        self.figure.legend(handles, [h.get_label() for h in handles], loc="outside lower center",
                           ncol=3, frameon=False)
        if live:
            for pol in policies:
                for a in [p for bars in self.bars[pol] for p in bars] + self.notes[pol] + [self.axes[pol].title]:
                    a.set_animated(True)

    def update(self, tables: dict, xmax: float | None = None, threshold: float | None = None):
        """Show ``tables`` (``{policy: estimate_table}``, the policies and instances built for); ``xmax``
        (s) fixes the shared x axis (default: 1.6 × the longest estimate, room for the notes);
        ``threshold``: the balancing threshold, stated in the KVCache-centric panel's title."""
        if threshold is not None and "kvcentric" in self.axes:
            self.axes["kvcentric"].set_title(f"{POLICY_LABELS['kvcentric']}: fetch if best ≥ {threshold:g} × local",
                                             y=1.0)
        longest = 0.0
        for pol, t in tables.items():
            if tuple(t.index) != self.instances:
                raise ValueError(f"tables[{pol!r}] has instances {list(t.index)}, the figure was built for "
                                 f"{list(self.instances)}")
            kv = pol == "kvcentric"
            q = t["queue_s"].to_numpy()
            tr = t["transfer_s"].to_numpy() if kv else np.zeros(len(t))
            pf = t["prefill_s"].to_numpy() if kv else (t["cache_aware_s"] - t["queue_s"]).to_numpy()
            tot = q + tr + pf
            longest = max(longest, float(tot.max()))
            best = int(np.argmin(tot))
            for k, (bq, bt, bp) in enumerate(zip(*self.bars[pol])):
                bq.set_width(q[k])
                bt.set_x(q[k])
                bt.set_width(tr[k])
                bp.set_x(q[k] + tr[k])
                bp.set_width(pf[k])
                lb = int(t["local_blocks"].iloc[k])
                nb = int(t["best_blocks"].iloc[k]) if (kv and bool(t["remote"].iloc[k])) else lb
                note = self.notes[pol][k]
                note.set_text(f"{tot[k]:.2f} s{'  ★ chosen' if k == best else ''}  (prefix {nb} blocks"
                              + (f", {nb - lb} fetched)" if nb > lb else ")"))
                note.xy = (tot[k], k)
        for ax in self.axes.values():
            ax.set_xlim(0, xmax if xmax is not None else longest * 1.6)
        return self


def estimate_bars(tables: dict):
    """A figure of :class:`EstimateBars` showing ``tables`` (``{policy: estimate_table}``)."""
    first = next(iter(tables.values()))
    return EstimateBars(tuple(tables), tuple(first.index)).update(tables).figure
