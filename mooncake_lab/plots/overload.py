"""Figures of lecture 07 (overload-oriented scheduling): per-policy results, loads over time, sweeps.

Inputs are the DataFrames of :mod:`mooncake_lab.experiments.l07_overload`. Loads are dimensionless
(1 = at the SLO or full KV memory, :mod:`mooncake_lab.sim.admission`).
"""
from __future__ import annotations

import matplotlib as mpl

import numpy as np
import pandas as pd

from . import PALETTE, new_figure, styled

__all__ = ["PolicyResults", "LoadOverTime", "policy_results", "load_over_time", "rejection_sweep",
           "POLICY_COLORS", "POLICY_LABELS", "QUANTITY_COLORS"]

#: One colour per policy across the lecture's figures; a quantity (where a request was rejected, a load, the
#: threshold) never takes one of them (:data:`QUANTITY_COLORS`).
POLICY_COLORS = {"baseline": PALETTE[3], "early": PALETTE[0], "predicted": PALETTE[2], "none": PALETTE[7]}
#: Colours of the quantities the figures show, none of them a policy's.
QUANTITY_COLORS = {"at_arrival": PALETTE[4], "after_prefill": PALETTE[6], "too_large": "#999999",
                   "decode_load": PALETTE[4], "prefill_load": PALETTE[1], "threshold": "#444444"}
POLICY_LABELS = {"baseline": "baseline (reject after prefill)", "early": "early (reject at arrival)",
                 "predicted": "predicted (reject at arrival, on a prediction)", "none": "no admission control"}
_WHERE = (("rejected_at_arrival", "at arrival", QUANTITY_COLORS["at_arrival"]),
          ("rejected_after_prefill", "after prefill (wasted)", QUANTITY_COLORS["after_prefill"]),
          ("rejected_too_large", "too large for a decode node", QUANTITY_COLORS["too_large"]))


class PolicyResults:
    """Three panels per admission policy: rejected requests by where (stacked; the paper's Table 3
    counts as ×), completed requests, and prefill seconds wasted on requests rejected after it.
    Built once for ``policies`` (bar positions); :meth:`update` sets a table with those rows
    (:func:`~mooncake_lab.experiments.l07_overload.overload_comparison` or ``policy_counts``).
    ``live=True`` marks the changing artists (bars, numbers on them, paper marks, y axes) for a dashboard;
    the legend changes only when the paper's marks appear or go (a dashboard's background key)."""

    @styled
    def __init__(self, policies, live: bool = False):
        self.figure, axes = new_figure(1, 3, width=12.0, height=4.0)
        self.axes = a1, a2, a3 = axes
        self.policies = list(policies)
        x = np.arange(len(self.policies))
        zero = np.zeros(len(x))
        colors = [POLICY_COLORS.get(p, PALETTE[0]) for p in self.policies]
        # a quantity's colour is none of the policies': the wasted (after prefill) part is yellow, edged
        self.rejected = [a1.bar(x, zero, color=color, label=label, width=0.6, edgecolor="#444444", linewidth=0.6)
                         for _, label, color in _WHERE]
        self.completed = a2.bar(x, zero, color=colors, width=0.6)
        self.wasted = a3.bar(x, zero, color=colors, width=0.6)
        self.notes = [[ax.annotate("", (k, 0), xytext=(0, 0), textcoords="offset points", ha="center", va="bottom",
                                   fontsize=mpl.rcParams["legend.fontsize"]) for k in x] for ax in axes]  # the text follows .xy
        (self.paper,) = a1.plot([], [], "x", color="black", ms=10, mew=2, label="paper (Table 3)")
        a1.set_ylabel("rejected requests")
        a1.set_title("Rejected, by where", y=1.0)
        a2.set_ylabel("completed requests (axis starts above 0)")
        a2.set_title("Completed", y=1.0)
        a3.set_ylabel("wasted prefill (s of one prefill node)")
        a3.set_title("Prefill spent on rejected requests", y=1.0)
        for ax in axes:
            ax.set_xticks(x, self.policies)
            ax.set_xlabel("admission policy")
        self._legend_paper, self._live = None, live
        if live:
            for a in (*(b for bars in (*self.rejected, self.completed, self.wasted) for b in bars),
                      *(n for row in self.notes for n in row), self.paper, *(ax.yaxis for ax in axes)):
                a.set_animated(True)

    def fitted_ylims(self, table: pd.DataFrame, paper: dict | None = None) -> list:
        """The three panels' (bottom, top) that show ``table`` with room for the numbers and the legend."""
        table = table.loc[self.policies]
        top = max(float(sum(table[col] for col, _, _ in _WHERE).max()),
                  max((paper[p] for p in self.policies if paper and p in paper), default=0.0))
        comp = table["completed"].to_numpy(dtype=float)
        lo = comp.min() * 0.9
        return [(0.0, max(top, 1.0) * 1.15),  # room for the bar labels; ≥ 1: no rejection at all
                (lo, max(comp.max() + (comp.max() - lo) * 0.15, lo + 1.0)),
                (0.0, max(float(table["wasted_prefill_s"].max()), 1.0) * 1.18)]

    def update(self, table: pd.DataFrame, paper: dict | None = None, title: str = "", ylims=None):
        """Show ``table`` (rows: this plot's policies); ``paper``: ``{policy: rejected}`` marked ×;
        ``ylims``: the three panels' (bottom, top) (default: fitted to the data)."""
        table = table.loc[self.policies]
        bottom = np.zeros(len(self.policies))
        for bars, (col, _, _) in zip(self.rejected, _WHERE):
            v = table[col].to_numpy(dtype=float)
            for b, h, y0 in zip(bars, v, bottom):
                b.set_height(h)
                b.set_y(y0)
            bottom += v
        comp = table["completed"].to_numpy(dtype=float)
        waste = table["wasted_prefill_s"].to_numpy(dtype=float)
        for bars, v in ((self.completed, comp), (self.wasted, waste)):
            for b, h in zip(bars, v):
                b.set_height(h)
        for row, v, unit in zip(self.notes, (bottom, comp, waste), ("", "", " s")):
            for k, (note, y) in enumerate(zip(row, v)):
                note.set_text(f"{y:,.0f}{unit}")
                note.xy = (k, y)
        px = [k for k, p in enumerate(self.policies) if paper and p in paper]
        self.paper.set_data([k + 0.3 for k in px], [paper[self.policies[k]] for k in px])
        if bool(px) != self._legend_paper:  # the legend lists the paper's marks only when they are shown
            handles = [bars for bars in self.rejected] + ([self.paper] if px else [])
            if getattr(self, "_legend", None) is not None:
                self._legend.remove()
            # below the panels: in the projector style an in-axes legend is wider than the panel
            self._legend = self.figure.legend(handles=handles, loc="outside lower center", ncol=len(handles))
            self._legend_paper = bool(px)
        for ax, lim in zip(self.axes, self.fitted_ylims(table, paper) if ylims is None else ylims):
            ax.set_ylim(*lim)
        if title:
            self.figure.suptitle(title)
        return self


@styled  # update() sets titles (their size is read from the style then)
def policy_results(table: pd.DataFrame, paper: dict | None = None, title: str = ""):
    """A figure of :class:`PolicyResults`: ``table`` from
    :func:`~mooncake_lab.experiments.l07_overload.overload_comparison`, ``paper`` the Table 3 counts."""
    return PolicyResults(table.index).update(table, paper, title).figure


class LoadOverTime:
    """Prefill and decode load over time, one panel per policy (arXiv Fig. 9–10 style).

    Decode load on the left axis, prefill load on the right (their scales differ), the admission
    threshold dashed; each panel's title gives the policy, ``context`` and the Pearson correlation r of the
    two (< 0: anti-phase),
    also kept in :attr:`correlations`. Built once with ``n_panels``; :meth:`update` sets
    :func:`~mooncake_lab.experiments.l07_overload.load_timeseries` frames (index ``time_s``).
    ``live=True`` marks the changing artists (lines, titles, legends) for a dashboard.
    """

    @styled
    def __init__(self, n_panels: int, title: str = "", live: bool = False):
        n = int(n_panels)
        if n <= 0:
            raise ValueError(f"n_panels: got {n_panels!r}; allowed: an integer ≥ 1")
        self.figure, axes = new_figure(n, 1, width=9.0, height=2.7 * n + 0.6, sharex=True)
        self.axes = list(np.atleast_1d(axes))
        self.twins, self.decode, self.prefill, self.thresholds, self.legends = [], [], [], [], []
        for ax in self.axes:
            (d,) = ax.plot([], [], color=QUANTITY_COLORS["decode_load"], label="decode load (left)")
            th = ax.axhline(1.0, color=QUANTITY_COLORS["threshold"], ls="--", lw=1, label="threshold")
            ax.set_ylabel("decode load")
            ax2 = ax.twinx()
            (p,) = ax2.plot([], [], color=QUANTITY_COLORS["prefill_load"], label="prefill load (right)")
            ax2.set_ylabel("prefill load")
            ax2.grid(False)
            ax.set_title(" ", y=1.0)
            leg = ax2.legend([d, th, p], [d.get_label(), th.get_label(), p.get_label()],
                             loc="upper left", ncol=3)
            self.twins.append(ax2)
            self.decode.append(d)
            self.prefill.append(p)
            self.thresholds.append(th)
            self.legends.append(leg)
            if live:
                for a in (d, th, p, ax.title, leg):
                    a.set_animated(True)
        self.axes[-1].set_xlabel("time since the trace start (s, replayed)")
        self.figure.suptitle(title or "Prefill and decode load over time (load 1 = at the SLO / KV memory full)")
        self.correlations: list[float] = []

    @staticmethod
    def fitted_tops(ts: pd.DataFrame, threshold: float = 1.0) -> tuple[float, float]:
        """Upper limits (decode, prefill load) showing ``ts``, the threshold and room for the legend."""
        d, p = ts["decode_load"].to_numpy(), ts["prefill_load"].to_numpy()
        return (1.4 * max(threshold, np.nanmax(d) if len(d) else 1.0),
                1.4 * max(np.nanmax(p) if len(p) else 0.0, 1e-3))

    def update(self, series: dict, threshold: float = 1.0, xmax: float | None = None, tops=None,
               context: str = ""):
        """Show ``{policy: DataFrame}``, one per panel in order; ``xmax`` (s) and ``tops`` (per panel:
        decode, prefill upper limits) fix the axes (default: fitted to the data); ``context`` (e.g.
        the trace and speed) goes in each panel's title after the policy."""
        if len(series) != len(self.axes):
            raise ValueError(f"series: got {len(series)} policies; this plot has {len(self.axes)} panels")
        self.correlations = []
        for k, (pol, ts) in enumerate(series.items()):
            t = ts.index.to_numpy()
            d, p = ts["decode_load"].to_numpy(), ts["prefill_load"].to_numpy()
            self.decode[k].set_data(t, d)
            self.prefill[k].set_data(t, p)
            self.thresholds[k].set_ydata([threshold, threshold])
            self.legends[k].texts[1].set_text(f"threshold {threshold:g}")
            top_d, top_p = tops[k] if tops is not None else self.fitted_tops(ts, threshold)
            self.axes[k].set_ylim(0, top_d)
            self.twins[k].set_ylim(0, top_p)
            ok = len(d) > 2 and np.std(d) > 0 and np.std(p) > 0
            r = float(np.corrcoef(p, d)[0, 1]) if ok else float("nan")
            self.correlations.append(r)
            where = f", {context}" if context else ""   # keep ``context`` short: the title is one line
            self.axes[k].set_title(f"{POLICY_LABELS.get(pol, pol)}{where}: r = {r:+.2f}", y=1.0)
        ends = [float(ts.index.max()) for ts in series.values() if len(ts)]
        self.axes[0].set_xlim(0, xmax if xmax is not None else max(ends, default=1.0) * 1.02)
        return self


@styled  # update() sets titles (their size is read from the style then)
def load_over_time(series: dict, threshold: float = 1.0, title: str = ""):
    """A figure of :class:`LoadOverTime` showing ``series`` (``{policy: load_timeseries frame}``)."""
    if not series:
        raise ValueError("series: got no policies; allowed: a dict policy → load_timeseries DataFrame")
    return LoadOverTime(len(series), title).update(series, threshold).figure


@styled
def rejection_sweep(sweep: pd.DataFrame, chosen_speed: float | None = None, title: str = ""):
    """Left: rejected share of requests vs replay speed per policy, with the speeds where the paper's
    ordering (baseline > early > predicted) holds shaded. Right: mean size (input + output tokens)
    of a rejected request — how size-selective each policy is.
    ``sweep``: :func:`~mooncake_lab.experiments.l07_overload.speed_sweep`."""
    fig, (a1, a2) = new_figure(1, 2, width=12.0, height=4.2)
    piv = sweep.pivot(index="speed", columns="policy", values="rejected").sort_index()
    speeds = piv.index.to_numpy(dtype=float)
    step = float(np.min(np.diff(speeds))) if len(speeds) > 1 else 0.25
    holds = [bool(r["baseline"] > r["early"] > r["predicted"]) for _, r in piv.iterrows()] \
        if {"baseline", "early", "predicted"} <= set(piv.columns) else [False] * len(speeds)
    for s, h in zip(speeds, holds):
        if h:
            a1.axvspan(s - step / 2, s + step / 2, color="#DDDDDD", alpha=0.6, lw=0)
    for pol, g in sweep.groupby("policy", sort=False):
        g = g.sort_values("speed")
        c = POLICY_COLORS.get(pol, PALETTE[0])
        a1.plot(g["speed"], 100 * g["rejected_share"], "o-", color=c, label=POLICY_LABELS.get(pol, pol))
        a2.plot(g["speed"], g["rejected_kv_mean"] / 1e3, "o-", color=c, label=POLICY_LABELS.get(pol, pol))
    a1.plot([], [], "s", color="#DDDDDD", ms=10, label="paper's ordering holds")
    if chosen_speed is not None:
        for ax in (a1, a2):
            ax.axvline(chosen_speed, color="black", lw=1, alpha=0.5,
                       label=f"the lecture's {chosen_speed:g}× run" if ax is a1 else None)
    # a policy that rejects only too-large requests at a speed has no mean size there: say so on the panel
    for pol, g in sweep.groupby("policy", sort=False):
        for s_ in g.loc[~np.isfinite(g["rejected_kv_mean"].to_numpy(dtype=float)), "speed"]:
            a2.annotate(f"{pol}: only too-large\nrejected at {float(s_):g}×", (float(s_), 0.0), xytext=(4, 6),
                        textcoords="offset points", color=POLICY_COLORS.get(pol, PALETTE[0]),
                        fontsize=mpl.rcParams["legend.fontsize"], va="bottom")
    a1.set_xlabel("replay speed (× the trace's arrival rate)")
    a1.set_ylabel("rejected requests (% of the trace)")
    a1.set_title("Rejections vs overload depth", y=1.0)
    # one legend for both panels, under them: inside, it sat on the shaded speeds and on the curves
    fig.legend(*a1.get_legend_handles_labels(), loc="outside lower center", ncol=3, frameon=False)
    a2.set_xlabel("replay speed (× the trace's arrival rate)")
    a2.set_ylabel("mean size of a rejected request\n(k tokens; too-large excluded)")
    a2.set_title("Who gets rejected: size of the rejected", y=1.0)
    a2.set_ylim(0, None)
    if title:
        fig.suptitle(title)
    return fig
