"""A still picture of the timeline view (:mod:`mooncake_lab.timeline`): what a page without a kernel shows,
and a figure of its own for a lecture. Per lane and time bin: how busy each prefill instance was, the
decode batch, arrivals and rejections, over one window of a run."""
from __future__ import annotations

import numpy as np

from . import PALETTE, new_figure, styled

__all__ = ["plot_timeline", "busy_fraction", "step_mean"]


def busy_fraction(start: np.ndarray, end: np.ndarray, lane: np.ndarray, n_lanes: int, edges: np.ndarray) -> np.ndarray:
    """(lanes, bins): the share of each bin of ``edges`` (s) that intervals of each lane cover (may exceed 1
    where intervals overlap, as a CPP group's stages do)."""
    out = np.zeros((n_lanes, len(edges) - 1))
    for k in range(n_lanes):
        on = lane == k
        s, e = start[on], end[on]
        # covered length in [edges[j], edges[j+1]) = F(edges[j+1]) − F(edges[j]), F(t) = Σ clip(t − s, 0, e − s)
        F = np.array([np.clip(t - s, 0, e - s).sum() for t in edges])
        out[k] = np.diff(F) / np.diff(edges)
    return out


def step_mean(t: np.ndarray, level: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Time-weighted mean over each bin of ``edges`` of the step function (``t``, ``level``; 0 before ``t[0]``)."""
    def integral(x):
        j = np.searchsorted(t, x, side="right")
        seg = np.diff(np.concatenate([t, [np.inf]]))
        area = np.concatenate([[0.0], np.cumsum(level[:-1] * seg[:-1])]) if len(t) else np.zeros(1)
        out = np.zeros(len(x))
        ok = j > 0
        out[ok] = area[j[ok] - 1] + level[j[ok] - 1] * (x[ok] - t[j[ok] - 1])
        return out
    return np.diff(integral(edges)) / np.diff(edges)


@styled
def plot_timeline(ln, t0: float, t1: float, *, bins: int = 240, label: str = ""):
    """Lanes ``ln`` (:class:`~mooncake_lab.timeline.Lanes`) over [t0, t1] s: prefill busy share, decode batch,
    arrivals and rejections per bin."""
    edges = np.linspace(t0, max(t1, t0 + 1e-9), bins + 1)
    fig, ax = new_figure(3, 1, width=9.0, height=5.6, sharex=True,
                         gridspec_kw={"height_ratios": [1, max(2, ln.n_prefill / 4), max(2, ln.n_decode / 4)]})
    mid = (edges[:-1] + edges[1:]) / 2
    arr = np.histogram(ln.arrivals, edges)[0] / np.diff(edges)
    ax[0].plot(mid, arr, color="#777", lw=1.2, label="arrivals")
    for code, name, c in ((2, "rejected at arrival", PALETTE[3]), (3, "after prefill", "#CC3311"),
                          (4, "too large", "#882255")):
        r = np.histogram(ln.rej_t[ln.rej_reason == code], edges)[0] / np.diff(edges)
        if r.any():
            ax[0].plot(mid, r, color=c, lw=1.2, label=name)
    ax[0].set_ylabel("req/s")
    ax[0].legend(loc="upper left", fontsize="small", ncols=4)
    busy = busy_fraction(ln.pf_start, ln.pf_end, ln.pf_lane, ln.n_prefill, edges)
    im = ax[1].imshow(np.minimum(busy, 1), aspect="auto", interpolation="nearest", cmap="Oranges", vmin=0, vmax=1,
                      extent=(edges[0], edges[-1], ln.n_prefill - 0.5, -0.5))
    ax[1].set_ylabel(f"{ln.prefill_name}\ninstance")
    fig.colorbar(im, ax=ax[1], label="busy share")
    batch = np.array([step_mean(*ln.batch.lane(k), edges) for k in range(ln.n_decode)])
    im2 = ax[2].imshow(batch, aspect="auto", interpolation="nearest", cmap="Purples", vmin=0,
                       extent=(edges[0], edges[-1], ln.n_decode - 0.5, -0.5))
    ax[2].set_ylabel(f"{ln.decode_name}\ninstance")
    fig.colorbar(im2, ax=ax[2], label="batch (requests)")
    ax[2].set_xlabel(f"simulated time (s); trace replayed at {ln.replay_speed:g}× its recorded rate")
    for a in ax[1:]:
        a.grid(False)
    fig.suptitle(label or ln.title)
    return fig
