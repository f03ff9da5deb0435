"""Figures of lecture 06: continuous batching, TBT vs batch, SLO attainment and 90 % capacity."""
from __future__ import annotations

import matplotlib as mpl
import matplotlib.ticker  # noqa: F401 (mpl.ticker)

import numpy as np

from . import PALETTE, new_figure, styled

__all__ = ["BatchingPanels", "CapacityPlot", "PDSweepPlot", "plot_batching", "plot_tbt_vs_batch", "plot_capacity", "plot_pd_sweep",
           "plot_tbt_cdf", "plot_capacity_ratio"]

_NAMES = {"mooncake": "Mooncake (P/D disaggregated)", "coupled": "coupled (vLLM-like)",
          "coupled_chunked": "coupled + chunked prefill"}
#: Legend labels of FAST'25's clusters (:data:`mooncake_lab.experiments.l06_goodput.BASELINES`).
CLUSTER_NAMES = {"mooncake": "Mooncake 8P+8D", "vllm": "vLLM-like", "vllm + prefix caching": "vLLM-like + prefix caching",
                 "vllm + chunked prefill": "vLLM-like + chunked prefill",
                 "vllm + chunked + prefix caching": "vLLM-like + chunked + prefix caching"}
_COLORS = {"mooncake": PALETTE[0], "coupled": PALETTE[3], "coupled_chunked": PALETTE[1]}


def _top(y) -> float:
    """Upper y limit showing all of ``y`` with a 5% margin (matplotlib's default); 1 if empty or 0."""
    m = float(np.nanmax(y)) if len(y) and np.isfinite(y).any() else 0.0
    return m * 1.05 if m > 0 else 1.0


class BatchingPanels:
    """Three stacked panels over one time window: decode batch (requests), total context (k tokens)
    and step time (ms). Built once; :meth:`update` sets a
    :func:`~mooncake_lab.experiments.l06_goodput.batching_timeseries` frame, time measured from the
    window's start. ``live=True`` marks the changing artists for a dashboard."""

    @styled
    def __init__(self, live: bool = False):
        self.figure, ax = new_figure(3, 1, height=6.0, sharex=True)
        self.axes = ax
        (self.batch,) = ax[0].step([], [], where="post", color=PALETTE[0])
        (self.context,) = ax[1].plot([], [], color=PALETTE[2])
        (self.step,) = ax[2].plot([], [], color=PALETTE[3])
        ax[0].set_ylabel("batch (requests)")
        ax[1].set_ylabel("context (k tokens)")
        ax[2].set_ylabel("step time (ms)")
        ax[2].set_xlabel("time since the window start (s)")
        ax[0].set_title(" ")
        if live:
            for a in (self.batch, self.context, self.step, ax[0].title):
                a.set_animated(True)

    def update(self, ts, title: str = "Continuous batching on one decode node", tops=None):
        """Show ``ts`` (index: time, s); ``tops``: upper y limits of the three panels (default: the data's)."""
        t = ts.index.to_numpy(dtype=float)
        t = t - t[0] if len(t) else t
        ys = (ts.batch.to_numpy(dtype=float), ts.context_tokens.to_numpy(dtype=float) / 1e3,
              ts.step_s.to_numpy(dtype=float) * 1e3)
        if tops is None:
            tops = [_top(y) for y in ys]
        for line, ax, y, top in zip((self.batch, self.context, self.step), self.axes, ys, tops):
            line.set_data(t, y)
            ax.set_ylim(0, top)
        self.axes[0].set_xlim(0, float(t[-1]) if len(t) > 1 else 1.0)
        self.axes[0].set_title(title)
        return self


@styled  # update() sets titles (their size is read from the style then)
def plot_batching(ts, title="Continuous batching on one decode node"):
    """A figure of :class:`BatchingPanels` showing ``ts`` (from ``batching_timeseries``)."""
    return BatchingPanels().update(ts, title).figure


@styled
def plot_tbt_vs_batch(df, tbt_slo_ms=100):
    """Step time (ms) vs batch per context; dotted where the batch's KV no longer fits one node."""
    fig, ax = new_figure()
    for k, (x, g) in enumerate(df.groupby("context_per_seq")):
        fit = g[g.fits]
        ax.plot(fit.batch, fit.step_s * 1e3, "o-", color=PALETTE[k], label=f"{x / 1e3:g}k tokens / sequence")
        over = g[~g.fits]
        if len(over):
            ax.plot(over.batch, over.step_s * 1e3, "x:", color=PALETTE[k])
    ax.axhline(tbt_slo_ms, color="k", ls="--", lw=1, label=f"TBT SLO {tbt_slo_ms} ms")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("decode batch (sequences)")
    ax.set_ylabel("step time = TBT (ms)")
    ax.set_title("Decode is memory-bound: step time grows slowly with batch (× = KV does not fit)")
    ax.legend(fontsize=mpl.rcParams["legend.fontsize"])
    return fig


class CapacityPlot:
    """SLO attainment (%) vs request rate (req/s), one line per system, the target as a dashed line
    and optionally the current rate as a vertical line. Built once with room for ``n_systems``
    lines; :meth:`update` sets rows of ``attainment_curve``. The legend sits below the axes.
    ``live=True`` marks the changing artists (lines, rate marker, title, legend) for a dashboard."""

    @styled
    def __init__(self, n_systems: int = 3, target: float = 0.9, live: bool = False):
        self.figure, ax = new_figure()
        self.ax = ax
        self.lines = [ax.plot([], [], "o-", label=" ")[0] for _ in range(n_systems)]
        self.target = ax.axhline(target * 100, color="k", ls="--", lw=1, label=f"{target:.0%} of requests")
        self.mark = ax.axvline(0.0, color="0.5", lw=1, visible=False)
        ax.set_ylim(-2, 102)
        ax.set_xlabel("request rate (req/s)")
        ax.set_ylabel("requests meeting both SLOs (%)")
        ax.set_title(" ")
        # one row holds up to three entries; four ran past the figure's edges (two rows of two then)
        self.legend = self.figure.legend(handles=[*self.lines, self.target], loc="outside lower center",
                                         ncol=n_systems + 1 if n_systems < 3 else 2, frameon=False)
        if live:
            for a in (*self.lines, self.mark, ax.title, self.legend):  # the legend names the systems shown
                a.set_animated(True)

    def update(self, curve, tbt_slo_ms=100, mark_rate=None):
        """Show the rows of ``curve`` at ``tbt_slo_ms`` (one line per system, in order of appearance);
        ``mark_rate`` (req/s): a vertical line there. Unused lines are hidden (their legend entry blank)."""
        c = curve[curve.tbt_slo_ms == tbt_slo_ms]
        groups = list(c.groupby("system", sort=False))
        if len(groups) > len(self.lines):
            raise ValueError(f"curve: {len(groups)} systems, but this plot was built for {len(self.lines)}")
        for k, line in enumerate(self.lines):
            s, g = groups[k] if k < len(groups) else (None, c.iloc[:0])
            g = g.sort_values("rate_rps")
            line.set_data(g.rate_rps.to_numpy(), g.attainment.to_numpy() * 100)
            line.set_color(_COLORS.get(s, "k"))
            line.set_label(_NAMES.get(s, s or " "))
            line.set_visible(s is not None)
        for text, handle, line in zip(self.legend.texts, self.legend.legend_handles, [*self.lines, self.target]):
            text.set_text(line.get_label())
            handle.set_color(line.get_color())
            handle.set_visible(line.get_visible())
        r = c.rate_rps.to_numpy(dtype=float)
        if len(r):
            pad = 0.05 * max(float(r.max() - r.min()), float(r.max()), 1e-9)
            self.ax.set_xlim(float(r.min()) - pad, float(r.max()) + pad)
        self.mark.set_visible(mark_rate is not None)
        if mark_rate is not None:
            self.mark.set_xdata([mark_rate, mark_rate])
        self.ax.set_title(f"SLO attainment (TTFT ≤ 30 s, TBT ≤ {tbt_slo_ms:g} ms), 16 nodes")
        return self


@styled  # update() sets titles (their size is read from the style then)
def plot_capacity(curve, tbt_slo_ms=100, target=0.9, mark_rate=None):
    """A figure of :class:`CapacityPlot` showing ``curve`` (rows of ``attainment_curve``) at ``tbt_slo_ms``."""
    n = curve.loc[curve.tbt_slo_ms == tbt_slo_ms, "system"].nunique()
    return CapacityPlot(max(n, 1), target).update(curve, tbt_slo_ms, mark_rate).figure


class PDSweepPlot:
    """90 % capacity (req/s) vs P:D split, one bar per split (``labels``, e.g. ``"12P:4D"``), the best one
    highlighted; a capacity still ≥ 90 % at the top of the sweep is labelled "≥ value" (a lower bound).
    Built once; :meth:`update` sets rows of ``pd_sweep``. ``live=True`` marks the changing artists (bars,
    their labels, the title) for a dashboard."""

    @styled
    def __init__(self, labels, live: bool = False):
        self.figure, ax = new_figure()
        self.ax, self.live = ax, live
        self.bars = list(ax.bar(list(labels), np.zeros(len(labels)), color=PALETTE[0]))
        self.notes = [ax.annotate("", (k, 0.0), ha="center", va="bottom", fontsize=mpl.rcParams["font.size"])
                      for k in range(len(self.bars))]
        ax.set_xlabel("P:D split of 16 nodes")
        ax.set_ylabel("90 % capacity (req/s)")
        ax.set_title(" ")
        if live:
            for a in (*self.bars, *self.notes, ax.title):
                a.set_animated(True)

    def update(self, df, highlight=None, tbt_slo_ms=100, top=None):
        """Show ``df`` (rows of ``pd_sweep``, one per bar, in order); ``highlight``: the split (prefill
        nodes) to colour; ``top``: the upper y limit (default 1.12 × the largest capacity)."""
        if len(df) != len(self.bars):
            raise ValueError(f"df: {len(df)} splits, but this plot was built for {len(self.bars)}")
        caps = df.effective_capacity_rps.to_numpy(dtype=float)
        bounds = df.lower_bound.to_numpy(dtype=bool) if "lower_bound" in df else np.zeros(len(df), bool)
        for k, (bar, note, p, v, lb) in enumerate(zip(self.bars, self.notes, df.n_prefill, caps, bounds)):
            bar.set_height(v)
            bar.set_color(PALETTE[1] if p == highlight else PALETTE[0])
            note.set_text(f"≥ {v:.1f}" if lb else "")  # at the top of the replay-speed sweep: a lower bound
            note.xy = note.xyann = (k, v)   # the point and the text (annotate put both at 0)
        self.ax.set_ylim(0, top if top is not None else 1.12 * float(np.nanmax(caps, initial=0.0)) or 1.0)
        self.ax.set_title(f"Mooncake's 90 % capacity vs P:D split (TBT ≤ {tbt_slo_ms:g} ms)"
                          + ("\n≥: a lower bound (still ≥ 90 % at the fastest replay speed)" if bounds.any()
                             else "\n " if self.live else ""))  # live: two lines always (the layout is frozen)
        return self


@styled  # update() sets the title (its size is read from the style then)
def plot_pd_sweep(df, highlight=None, tbt_slo_ms=100):
    """A figure of :class:`PDSweepPlot` showing ``df`` (rows of ``pd_sweep``) at ``tbt_slo_ms``."""
    names = df.n_prefill.astype(str) + "P:" + df.n_decode.astype(str) + "D"
    return PDSweepPlot(names).update(df, highlight, tbt_slo_ms).figure


@styled
def plot_tbt_cdf(results: dict, tbt_slo_ms=100):
    """CDF over requests of the TBT tail (ms), one line per ``{name: SimResult}``."""
    fig, ax = new_figure()
    for k, (name, res) in enumerate(results.items()):
        x = np.sort(res.requests.tbt_tail_s.dropna().to_numpy() * 1e3)
        y = np.arange(1, len(x) + 1) / max(len(x), 1) * 100
        ax.plot(x, y, color=_COLORS.get(name, PALETTE[k % len(PALETTE)]), label=_NAMES.get(name, name))
    ax.axvline(tbt_slo_ms, color="k", ls="--", lw=1, label=f"TBT SLO {tbt_slo_ms:g} ms")
    ax.set_xscale("log")
    ax.set_xlabel("TBT = mean of the longest 10% token intervals (ms)")
    ax.set_ylabel("requests at or below (%)")
    ax.set_title("Per-request TBT: who stalls?")
    ax.legend(fontsize=mpl.rcParams["legend.fontsize"])
    return fig


@styled
def plot_capacity_ratio(ratio, paper: dict | None = None, speed: float = 1.0):
    """FAST'25 Fig. 1's axes: % of requests meeting both SLOs (``ratio``: clusters × TBT thresholds in ms,
    :func:`~mooncake_lab.experiments.l06_goodput.request_capacity_ratio`) against the TBT threshold, one
    line per cluster; ``paper``: ``{cluster: %}`` read from the paper's figure at 100 ms (black marks)."""
    fig, ax = new_figure(width=8.0, height=4.4)
    x = np.asarray(ratio.columns, dtype=float)
    for k, (name, row) in enumerate(ratio.iterrows()):
        ax.plot(x, row.to_numpy(dtype=float), "o-", ms=4, color=PALETTE[k % len(PALETTE)],
                label=CLUSTER_NAMES.get(name, str(name)))
    for k, (name, pct) in enumerate((paper or {}).items()):
        ax.plot([100.0], [pct], marker="x^v"[k % 3], ms=9, mew=2, ls="none", color="black",
                label=f"paper, {name.replace('vllm', 'vLLM').replace('mooncake', 'Mooncake')} (read from its Fig. 1)")
    ax.set_ylim(0, 105)
    ax.set_xlabel("TBT threshold (ms)")
    ax.set_ylabel("requests meeting both SLOs (%)")
    ax.set_title(f"Request capacity ratio vs TBT threshold ({speed:g}× the trace's load; FAST'25 Fig. 1)")
    ax.legend(fontsize=mpl.rcParams["legend.fontsize"], loc="lower right")
    return fig


@styled
def plot_role_switching(rs: dict, window_s: float = 300.0):
    """§8 of lecture 06 (:func:`~mooncake_lab.experiments.l06_goodput.role_switching`): left, the nodes in the
    prefill pool over time for each cluster; right, the share of requests meeting both SLOs per
    ``window_s`` of arrivals. The dashed line marks when the answers grow."""
    fig, (ax, bx) = new_figure(1, 2, width=11.0, height=4.2)
    shift = rs["shift_s"] / 60
    for k, (name, res) in enumerate(rs["runs"].items()):
        color = PALETTE[k % len(PALETTE)]
        a = res.requests
        end = float(a.arrival_s.max())
        t = np.linspace(0.0, end, 600)
        in_p, _ = res.roles_at(t)
        ax.step(t / 60, in_p.sum(axis=1), where="post", color=color, label=name, lw=2.0 - 0.3 * k)
        ok = ((a.outcome == "completed") & (a.ttft_s <= res.config.ttft_slo_s)
              & (a.tbt_tail_s.fillna(0.0) <= res.config.tbt_slo_s)).to_numpy()
        edges = np.arange(0.0, end + window_s, window_s)
        idx = np.digitize(a.arrival_s.to_numpy(), edges) - 1
        share = [100 * ok[idx == w].mean() if (idx == w).any() else np.nan for w in range(len(edges) - 1)]
        bx.plot((edges[:-1] + window_s / 2) / 60, share, "o-", color=color, label=name, ms=4)
    for x in (ax, bx):
        x.axvline(shift, color="k", ls="--", lw=1)
        x.set_xlabel("time (min, replayed)")
    ax.set_ylabel("nodes in the prefill pool")
    ax.yaxis.set_major_locator(mpl.ticker.MaxNLocator(integer=True))
    ax.set_title("Where the nodes are")
    ax.legend(fontsize=mpl.rcParams["legend.fontsize"] * 0.85)
    bx.set_ylabel(f"both SLOs met (%, per {window_s / 60:g} min)")
    bx.set_title("What each cluster serves")
    bx.set_ylim(0, 102)
    fig.suptitle("The answers grow ×4 at the dashed line")
    return fig
