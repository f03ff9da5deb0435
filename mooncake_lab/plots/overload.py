"""Figures of lecture 07 (overload-oriented scheduling): per-policy results, loads over time, sweeps.

Inputs are the DataFrames of :mod:`mooncake_lab.experiments.l07_overload`. Loads are dimensionless
(1 = at the SLO or full KV memory, :mod:`mooncake_lab.sim.admission`).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from . import PALETTE, SLO_COLOR, new_figure, styled

__all__ = ["policy_results", "load_over_time", "rejection_sweep", "POLICY_COLORS", "POLICY_LABELS"]

POLICY_COLORS = {"baseline": PALETTE[3], "early": PALETTE[0], "predicted": PALETTE[2], "none": PALETTE[7]}
POLICY_LABELS = {"baseline": "baseline (reject after prefill)", "early": "early rejection",
                 "predicted": "early rejection, predicted", "none": "no admission control"}
_WHERE = (("rejected_at_arrival", "at arrival", PALETTE[0]),
          ("rejected_after_prefill", "after prefill (wasted)", PALETTE[3]),
          ("rejected_too_large", "too large for a decode node", "#999999"))


@styled
def policy_results(table: pd.DataFrame, paper: dict | None = None, title: str = ""):
    """Three panels per admission policy: rejected requests by where (stacked; the paper's Table 3
    counts as ×), completed requests, and prefill seconds wasted on requests rejected after it.
    ``table``: :func:`~mooncake_lab.experiments.l07_overload.overload_comparison`."""
    fig, (a1, a2, a3) = new_figure(1, 3, width=12.0, height=4.0)
    pols = list(table.index)
    x = np.arange(len(pols))
    bottom = np.zeros(len(pols))
    for col, label, color in _WHERE:
        v = table[col].to_numpy(dtype=float)
        a1.bar(x, v, bottom=bottom, color=color, label=label, width=0.6)
        bottom += v
    for k, v in enumerate(bottom):
        a1.annotate(f"{v:,.0f}", (k, v), ha="center", va="bottom", fontsize=9)
    if paper:
        px = [k for k, p in enumerate(pols) if p in paper]
        a1.plot([k + 0.3 for k in px], [paper[pols[k]] for k in px], "x", color="black", ms=10, mew=2, label="paper (Table 3)")
    a1.set_ylim(0, max(bottom.max(), max(paper.values()) if paper else 0) * 1.45)
    a1.set_ylabel("rejected requests")
    a1.set_title("Rejected, by where", y=1.0)
    a1.legend(fontsize=7.5, loc="upper center", ncol=2)
    colors = [POLICY_COLORS.get(p, PALETTE[0]) for p in pols]
    comp = table["completed"].to_numpy(dtype=float)
    a2.bar(x, comp, color=colors, width=0.6)
    for k, v in enumerate(comp):
        a2.annotate(f"{v:,.0f}", (k, v), ha="center", va="bottom", fontsize=9)
    lo = comp.min() * 0.9
    a2.set_ylim(lo, comp.max() + (comp.max() - lo) * 0.15)
    a2.set_ylabel("completed requests (axis starts above 0)")
    a2.set_title("Completed", y=1.0)
    waste = table["wasted_prefill_s"].to_numpy(dtype=float)
    a3.bar(x, waste, color=colors, width=0.6)
    for k, v in enumerate(waste):
        a3.annotate(f"{v:,.0f} s", (k, v), ha="center", va="bottom", fontsize=9)
    a3.set_ylim(0, max(waste.max(), 1.0) * 1.18)
    a3.set_ylabel("wasted prefill (s of one prefill node)")
    a3.set_title("Prefill spent on rejected requests", y=1.0)
    for ax in (a1, a2, a3):
        ax.set_xticks(x, pols)
        ax.set_xlabel("admission policy")
    if title:
        fig.suptitle(title)
    return fig


@styled
def load_over_time(series: dict, threshold: float = 1.0, title: str = ""):
    """Prefill and decode load over time, one panel per policy (arXiv Fig. 9–10 style).

    ``series``: ``{policy: DataFrame}`` from :func:`~...l07_overload.load_timeseries` (index
    ``time_s``). Decode load on the left axis, prefill load on the right (their scales differ);
    each panel's title gives the Pearson correlation r of the two (< 0: anti-phase).
    """
    n = len(series)
    if n == 0:
        raise ValueError("series: got no policies; allowed: a dict policy → load_timeseries DataFrame")
    fig, axes = new_figure(n, 1, width=9.0, height=2.7 * n + 0.6, sharex=True)
    axes = np.atleast_1d(axes)
    for ax, (pol, ts) in zip(axes, series.items()):
        t = ts.index.to_numpy()
        d, p = ts["decode_load"].to_numpy(), ts["prefill_load"].to_numpy()
        ax.plot(t, d, color=PALETTE[0], label="decode load (left)")
        ax.axhline(threshold, color=SLO_COLOR, ls="--", lw=1, label=f"threshold {threshold:g}")
        ax.set_ylabel("decode load")
        ax.set_ylim(0, 1.4 * max(threshold, np.nanmax(d) if len(d) else 1.0))
        ax2 = ax.twinx()
        ax2.plot(t, p, color=PALETTE[1], label="prefill load (right)")
        ax2.set_ylabel("prefill load")
        ax2.set_ylim(0, 1.4 * max(np.nanmax(p) if len(p) else 0.0, 1e-3))
        ax2.grid(False)
        ok = len(d) > 2 and np.std(d) > 0 and np.std(p) > 0
        r = float(np.corrcoef(p, d)[0, 1]) if ok else float("nan")
        ax.set_title(f"{POLICY_LABELS.get(pol, pol)}: correlation r = {r:+.2f}", y=1.0)
        h1, l1 = ax.get_legend_handles_labels()
        h2, l2 = ax2.get_legend_handles_labels()
        ax.legend(h1 + h2, l1 + l2, fontsize=8, loc="upper left", ncol=3)
    axes[-1].set_xlabel("time since the trace start (s, replayed)")
    fig.suptitle(title or "Prefill and decode load over time (load 1 = at the SLO / KV memory full)")
    return fig


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
            ax.axvline(chosen_speed, color="black", lw=1, alpha=0.5)
    a1.set_xlabel("replay speed (× the trace's arrival rate)")
    a1.set_ylabel("rejected requests (% of the trace)")
    a1.set_title("Rejections vs overload depth", y=1.0)
    a1.legend(fontsize=8, loc="upper left")
    a2.set_xlabel("replay speed (× the trace's arrival rate)")
    a2.set_ylabel("mean size of a rejected request (k tokens)")
    a2.set_title("Who gets rejected: size of the rejected", y=1.0)
    a2.set_ylim(0, None)
    if title:
        fig.suptitle(title)
    return fig
