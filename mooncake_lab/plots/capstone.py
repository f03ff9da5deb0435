"""Figures of lecture 08: capacity per system, where the gain comes from, outcome shares, fleet cost."""
from __future__ import annotations

import matplotlib as mpl

import numpy as np

from . import PALETTE, new_figure, styled

__all__ = ["OutcomeBars", "capacity_bars", "gain_waterfall", "outcome_bars", "fleet_costs"]

_OUTCOME_COLORS = {"met both": PALETTE[2], "rejected": "0.55", "missed TTFT": PALETTE[3], "missed TBT": PALETTE[1]}


@styled
def capacity_bars(caps: dict, labels: dict, tbt_slo_ms: float = 100, top_rates: dict | None = None):
    """90 % capacity (req/s) per system, one panel per trace. ``caps``: ``{trace: capacity_table}``;
    ``labels``: ``{system: display name}``; ``top_rates``: ``{trace: highest swept rate}`` (a bar
    that reaches it is a lower bound, marked "≥")."""
    if not caps:
        raise ValueError("caps: got no traces; allowed: {trace name: capacity table}")
    fig, axes = new_figure(1, len(caps), width=3.2 + 3.4 * len(caps), height=4.6, sharey=True)
    for k, (ax, (trace, cap)) in enumerate(zip(np.atleast_1d(axes), caps.items())):
        systems = list(cap.index)[::-1]
        vals = cap.loc[systems, tbt_slo_ms].to_numpy(dtype=float)
        colors = [PALETTE[0] if s == "mooncake" else PALETTE[3] if s.startswith("coupled") else PALETTE[5]
                  for s in systems]
        ax.barh([labels.get(s, s) for s in systems], vals, color=colors)
        top = (top_rates or {}).get(trace)
        for y, v in enumerate(vals):
            mark = "≥ " if top is not None and v >= top - 1e-9 else ""
            ax.text(v, y, f" {mark}{v:.1f}", va="center", fontsize=mpl.rcParams["legend.fontsize"])
        ax.set_xlim(0, max(float(np.nanmax(vals)), 1e-9) * 1.2)
        ax.set_xlabel("90 % capacity (req/s)")
        ax.set_ylabel("system (16 nodes)" if k == 0 else "")
        ax.set_title(f"{trace}: TBT ≤ {tbt_slo_ms:g} ms", fontsize="medium")
    fig.suptitle("90 % capacity: highest rate with ≥ 90% of requests within TTFT ≤ 30 s and the TBT SLO")
    return fig


#: Short names of the parts of :func:`~mooncake_lab.experiments.l08_capstone.gain_shares` (x axis).
_SHORT = {"disaggregation": "P/D split\n(8P+8D)", "cpp": "CPP\ngroups", "kvcentric": "KVCache-\ncentric",
          "layerwise": "layer-wise\ntransfer", "early_rejection": "early\nrejection", "interaction": "inter-\naction"}


@styled
def gain_waterfall(shares, coupled_rps: float, title: str = "Where Mooncake's gain comes from"):
    """Waterfall from the coupled cluster's capacity to Mooncake's: one step per row of
    :func:`~mooncake_lab.experiments.l08_capstone.gain_shares` (steps that cost capacity in red)."""
    fig, ax = new_figure(width=8.0, height=4.6)
    names = ["coupled\n(vLLM-like)"] + [_SHORT.get(str(p), str(p)) for p in shares.index] + ["Mooncake"]
    level = float(coupled_rps)
    ax.bar(0, level, color=PALETTE[3])
    ax.text(0, level, f"{level:.1f}", ha="center", va="bottom", fontsize=mpl.rcParams["legend.fontsize"])
    top = level
    for k, (_, r) in enumerate(shares.iterrows(), start=1):
        step = float(r.gain_rps)
        ax.bar(k, step, bottom=level, color=PALETTE[2] if step >= 0 else PALETTE[3])
        txt = f"{step:+.1f}" + (f" ({r.share:+.0%})" if np.isfinite(r.share) else "")
        ax.text(k, max(level, level + step), txt, ha="center", va="bottom", fontsize=mpl.rcParams["legend.fontsize"])
        level += step
        top = max(top, level, level - step)
    ax.bar(len(names) - 1, level, color=PALETTE[0])
    ax.text(len(names) - 1, level, f"{level:.1f}", ha="center", va="bottom", fontsize=mpl.rcParams["legend.fontsize"])
    ax.set_xticks(range(len(names)), names, fontsize=mpl.rcParams["legend.fontsize"])
    ax.set_ylim(0, top * 1.12)
    ax.set_ylabel("90 % capacity (req/s)")
    ax.set_xlabel("step added on the way from the coupled cluster to Mooncake (leave-one-out, share of the gain)")
    ax.set_title(title)
    return fig


class OutcomeBars:
    """Stacked horizontal bars (% of requests): met both SLOs / rejected / missed TTFT / missed TBT,
    one bar per system in ``names`` (top to bottom), a dashed line at 90 %. Built once;
    :meth:`update` sets ``{name: outcome_breakdown(...)}`` and a caption. ``live=True`` marks the
    changing artists (bar segments, the "met both" numbers, the caption) for a dashboard."""

    @styled
    def __init__(self, names, title: str = "What happened to each request", live: bool = False):
        self.names = list(names)
        if not self.names:
            raise ValueError("names: got no systems; allowed: a list of system labels")
        self.figure, ax = new_figure(width=7.5, height=3.6)
        self.ax = ax
        y = np.arange(len(self.names))[::-1]
        zero = np.zeros(len(y))
        self.segments = {key: ax.barh(y, zero, color=color, label=key) for key, color in _OUTCOME_COLORS.items()}
        self.notes = [ax.text(0, yy, "", va="center", ha="left", fontsize=mpl.rcParams["legend.fontsize"], color="white") for yy in y]
        self.caption = ax.text(0.5, 1.02, "", transform=ax.transAxes, ha="center", va="bottom", fontsize=mpl.rcParams["legend.fontsize"])
        ax.set_yticks(y, self.names)
        ax.set_xlim(0, 100)
        ax.axvline(90, color="k", ls="--", lw=1)
        ax.set_xlabel("requests (%)")
        ax.set_ylabel("system (16 nodes)")
        ax.set_title(title, pad=18)
        self.figure.legend(*ax.get_legend_handles_labels(), ncol=4, loc="outside lower center",
                           frameon=False)
        if live:
            for a in (*(b for bars in self.segments.values() for b in bars), *self.notes, self.caption):
                a.set_animated(True)

    def update(self, outcomes: dict, caption: str = ""):
        """Show ``{name: outcome shares}`` (every name of the plot; shares as fractions summing to 1)."""
        missing = [n for n in self.names if n not in outcomes]
        if missing:
            raise ValueError(f"outcomes: no shares for {missing}; allowed: a dict with every system of the plot")
        left = np.zeros(len(self.names))
        for key, bars in self.segments.items():
            v = np.array([outcomes[n][key] for n in self.names]) * 100
            for b, x0, w in zip(bars, left, v):
                b.set_x(x0)
                b.set_width(w)
            left += v
        for note, n in zip(self.notes, self.names):
            met = outcomes[n]["met both"] * 100
            note.set_text(f" {met:.0f}%" if met >= 8 else "")
        self.caption.set_text(caption)
        return self


def outcome_bars(outcomes: dict, title: str = "What happened to each request", caption: str = ""):
    """A figure of :class:`OutcomeBars`: ``{system label: outcome_breakdown(...)}``."""
    if not outcomes:
        raise ValueError("outcomes: got no systems; allowed: {label: outcome shares}")
    return OutcomeBars(list(outcomes), title).update(outcomes, caption).figure


@styled
def fleet_costs(table, title: str | None = None, rate_rps: float | None = None):
    """Stacked bars of USD per million requests (prefill GPUs, decode GPUs, KV transfer), one panel
    per network price, one bar per fleet (rows of :func:`~mooncake_lab.experiments.l08_capstone.hetero_table`).
    The default title names the load the fleets were sized for, ``rate_rps`` (req/s of the conversation trace)."""
    if title is None:
        title = ("Cost of serving " + (f"{rate_rps:g} req/s of the conversation trace" if rate_rps else "the same load")
                 + ": homogeneous vs heterogeneous fleets")
    nets = list(dict.fromkeys(table.network))
    if not nets:
        raise ValueError("table: got no rows; allowed: the rows of hetero_table()")
    fig, axes = new_figure(1, len(nets), width=3.0 + 3.6 * len(nets), height=4.6)
    for k, (ax, net) in enumerate(zip(np.atleast_1d(axes), nets)):
        t = table[table.network == net]
        hours_per_m = (t.usd_per_million_requests / t.usd_per_hour).to_numpy(dtype=float)  # h per 1M requests
        bottom = np.zeros(len(t))
        for col, name, color in (("prefill_usd_per_hour", "prefill GPUs", PALETTE[0]),
                                 ("decode_usd_per_hour", "decode GPUs", PALETTE[2]),
                                 ("network_usd_per_hour", "KV transfer", PALETTE[3])):
            v = t[col].to_numpy(dtype=float) * hours_per_m
            ax.bar(range(len(t)), v, bottom=bottom, color=color, label=name)
            bottom += v
        for j, (tot, p, d) in enumerate(zip(bottom, t.n_prefill, t.n_decode)):
            ax.text(j, tot, f"${tot:,.0f}\n{p}P+{d}D", ha="center", va="bottom", fontsize=mpl.rcParams["legend.fontsize"])
        ax.set_xticks(range(len(t)), [f.replace(" + ", "\n+ ") for f in t.fleet], fontsize=mpl.rcParams["legend.fontsize"])
        ax.set_ylim(0, float(bottom.max()) * 1.25)
        ax.set_ylabel("USD per million requests" if k == 0 else "")
        ax.set_xlabel("fleet: prefill + decode nodes")
        ax.set_title(f"KV travels {net}", fontsize="medium")
        if k == 0:
            ax.legend(fontsize=mpl.rcParams["legend.fontsize"], loc="upper left")
    fig.suptitle(title)
    return fig
