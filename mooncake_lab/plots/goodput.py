"""Figures of lecture 06: continuous batching, TBT vs batch, SLO attainment and effective capacity."""
from __future__ import annotations

import numpy as np

from . import PALETTE, new_figure, styled

__all__ = ["plot_batching", "plot_tbt_vs_batch", "plot_capacity", "plot_pd_sweep", "plot_tbt_cdf"]

_NAMES = {"mooncake": "Mooncake (P/D disaggregated)", "coupled": "coupled (vLLM-like)",
          "coupled_chunked": "coupled + chunked prefill"}
_COLORS = {"mooncake": PALETTE[0], "coupled": PALETTE[3], "coupled_chunked": PALETTE[1]}


@styled
def plot_batching(ts, title="Continuous batching on one decode node"):
    """Three stacked panels from :func:`~mooncake_lab.experiments.l06_goodput.batching_timeseries`."""
    fig, ax = new_figure(3, 1, height=6.0, sharex=True)
    t = ts.index.to_numpy()
    ax[0].step(t, ts.batch, where="post", color=PALETTE[0])
    ax[0].set_ylabel("batch (requests)")
    ax[1].plot(t, ts.context_tokens / 1e3, color=PALETTE[2])
    ax[1].set_ylabel("context (k tokens)")
    ax[2].plot(t, ts.step_s * 1e3, color=PALETTE[3])
    ax[2].set_ylabel("step time (ms)")
    ax[2].set_xlabel("time (s)")
    ax[0].set_title(title)
    return fig


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
    ax.legend(fontsize="small")
    return fig


@styled
def plot_capacity(curve, tbt_slo_ms=100, target=0.9, mark_rate=None):
    """SLO attainment vs request rate, one line per system (rows of ``attainment_curve``)."""
    fig, ax = new_figure()
    c = curve[curve.tbt_slo_ms == tbt_slo_ms]
    for s, g in c.groupby("system", sort=False):
        g = g.sort_values("rate_rps")
        ax.plot(g.rate_rps, g.attainment * 100, "o-", color=_COLORS.get(s, "k"), label=_NAMES.get(s, s))
    ax.axhline(target * 100, color="k", ls="--", lw=1, label=f"{target:.0%} of requests")
    if mark_rate is not None:
        ax.axvline(mark_rate, color="0.5", lw=1)
    ax.set_ylim(-2, 102)
    ax.set_xlabel("request rate (req/s)")
    ax.set_ylabel("requests meeting both SLOs (%)")
    ax.set_title(f"SLO attainment (TTFT ≤ 30 s, TBT ≤ {tbt_slo_ms:g} ms), 16 nodes")
    ax.legend(fontsize="small")
    return fig


@styled
def plot_pd_sweep(df, highlight=None):
    """Effective capacity (req/s) vs number of prefill nodes (rows of ``pd_sweep``)."""
    fig, ax = new_figure()
    ax.bar(df.n_prefill.astype(str) + "P:" + df.n_decode.astype(str) + "D", df.effective_capacity_rps,
           color=[PALETTE[1] if p == highlight else PALETTE[0] for p in df.n_prefill])
    ax.set_xlabel("P:D split of 16 nodes")
    ax.set_ylabel("effective capacity (req/s)")
    ax.set_title("Mooncake's effective capacity vs P:D split (TBT ≤ 100 ms)")
    return fig


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
    ax.legend(fontsize="small")
    return fig
