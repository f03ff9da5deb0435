"""Figures of the Mooncake Store lab, from the dict of :func:`mooncake_lab.experiments.lab_store.results`.

The same functions draw a live run and the committed recording. Rates in GB/s (10^9 B/s), sizes in
KiB/MiB, times in seconds, hit ratios as fractions.
"""
from __future__ import annotations

import numpy as np

from . import PALETTE, new_figure, styled

__all__ = ["transfer_chart", "EvictionChart", "eviction_chart", "FailureChart", "failure_chart",
           "failure_outcomes", "OUTCOMES"]


def _size_label(b: int) -> str:
    from ..experiments.lab_store import size_label

    return size_label(b)


@styled
def transfer_chart(res: dict, rdma_gbps: dict | None = None):
    """GB/s of each put and get API per value size over TCP loopback, with FAST'25's RDMA figures."""
    rows = res["transfer"]
    sizes = sorted({r["value_bytes"] for r in rows})
    fig, axes = new_figure(1, 2, width=9.5, height=4.6, sharey=True)
    for ax, kind in zip(axes, ("put", "get")):
        apis = list(dict.fromkeys(r[f"{kind}_api"] for r in rows))
        w = 0.8 / len(apis)
        for j, api in enumerate(apis):
            y = [next(r[f"{kind}_gbps"] for r in rows if r["value_bytes"] == s and r[f"{kind}_api"] == api)
                 for s in sizes]
            ax.bar(np.arange(len(sizes)) + (j - (len(apis) - 1) / 2) * w, y, w, label=api, color=PALETTE[j])
        for k, (label, g) in enumerate((rdma_gbps or {}).items()):
            ax.axhline(g, color=PALETTE[3 + k], ls="--", lw=1.2, label=f"FAST'25 {label}: {g:g} GB/s")
        ax.set_yscale("log")
        ax.set_xticks(range(len(sizes)), [_size_label(s) for s in sizes])
        ax.set_xlabel("value size (bytes per value)")
        ax.set_title(f"{kind}: {'writer → memory nodes' if kind == 'put' else 'memory nodes → reader'}", y=1.0)
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)  # below: bars stay visible
    axes[0].set_ylabel("throughput (GB/s, log)")
    fig.suptitle(f"Mooncake Store over TCP loopback ({res['version']}, {res['date']}) vs RDMA")
    return fig


def _eviction_row(res: dict, lease: str, capacity: int) -> dict:
    for r in res["eviction"]:
        if r["lease"] == lease and r["capacity_blocks"] == capacity:
            return r
    raise ValueError(f"no eviction run with lease={lease!r} and capacity={capacity!r}; have "
                     f"{[(r['lease'], r['capacity_blocks']) for r in res['eviction']]}")


class EvictionChart:
    """Moving hit ratio of the store vs the course's exact LRU along the replayed stream (one run)."""

    window = 200  # accesses per point of the moving hit ratio

    def __init__(self, live: bool = False):
        self.figure, self.ax = new_figure(width=7.5, height=3.8)
        ax = self.ax
        (self.store_line,) = ax.plot([], [], color=PALETTE[0], label="Mooncake Store (is_exist → put)")
        (self.lru_line,) = ax.plot([], [], color=PALETTE[1], ls="--", label="exact LRU (course)")
        self.shift = ax.axvline(0, color="grey", lw=1, ls=":")
        ax.text(0.5, 0.02, "popularity shifts →", transform=ax.transAxes, fontsize=8, color="grey", ha="center")
        ax.set_xlabel("accesses replayed")
        ax.set_ylabel(f"hit ratio, last {self.window} accesses")
        ax.set_ylim(0, 1)
        ax.legend(loc="upper right")
        self.title = ax.set_title("", y=1.0)
        if live:
            for a in (self.store_line, self.lru_line, self.title):
                a.set_animated(True)

    def update(self, row: dict):
        from ..experiments.lab_store import hits_array

        s, l = hits_array(row["store_hits"]), hits_array(row["lru_hits"])
        k = self.window
        x = np.arange(k, len(s) + 1)
        self.store_line.set_data(x, np.convolve(s, np.ones(k), "valid") / k)
        self.lru_line.set_data(x, np.convolve(l, np.ones(k), "valid") / k)
        self.shift.set_xdata([len(s) // 2])
        self.ax.set_xlim(0, len(s))
        from ..experiments.lab_store import lease_label

        self.title.set_text(f"lease {lease_label(row['lease'])}, pool {row['capacity_blocks']} × "
                            f"{_size_label(row['value_bytes'])}: hit {row['store_hit']:.3f} vs "
                            f"{row['lru_hit']:.3f} (LRU), same on {row['agreement']:.1%}")
        return self.figure


@styled
def eviction_chart(res: dict, lease: str, capacity: int):
    return EvictionChart().update(_eviction_row(res, lease, capacity))


#: What a read can end in (the store's return codes, see mooncake's error codes).
OUTCOMES = ("served", "-800 transfer failed", "-704 not found")
_PHASES = ("before the kill", "after the kill, before client_ttl", "after client_ttl")


def failure_outcomes(res: dict, replicas: int, phase: str) -> dict:
    """Share of the reads in each outcome for keys with ``replicas`` replicas in ``phase`` (every key of
    that kind is read once per phase); ``n`` is the number of reads."""
    rep = res["replication"]
    if phase not in _PHASES:
        raise ValueError(f"phase={phase!r}: allowed {_PHASES}")
    if replicas not in (1, 2):
        raise ValueError(f"replicas={replicas!r}: allowed 1 or 2")
    if phase == _PHASES[0]:  # every key of both kinds was read once before the kill
        rcs = rep["before_kill"]["one" if replicas == 1 else "two"]
    else:
        t = rep["timeline"][0 if phase == _PHASES[1] else 1]
        rcs = t["one"] if replicas == 1 else t["two_first_on_killed"] + t["two_first_on_survivor"]
    n = max(1, len(rcs))
    return {"served": sum(r > 0 for r in rcs) / n, OUTCOMES[1]: sum(r == -800 for r in rcs) / n,
            OUTCOMES[2]: sum(r == -704 for r in rcs) / n,
            "other": sum(r <= 0 and r not in (-800, -704) for r in rcs) / n, "n": len(rcs)}


class FailureChart:
    """Outcome of reads after a memory node is SIGKILLed, by replica count and phase."""

    def __init__(self, live: bool = False):
        self.figure, self.ax = new_figure(width=6.5, height=3.4)
        ax = self.ax
        self.bars = ax.bar(range(3), [0, 0, 0], color=[PALETTE[2], PALETTE[3], PALETTE[7]])
        ax.set_xticks(range(3), [o.replace("-", "\u2212") for o in OUTCOMES])   # −800 as the tables print it
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("share of the keys' reads (fraction)")
        ax.set_xlabel("outcome of get_into")
        self.title = ax.set_title("", y=1.0)
        # each bar says how many keys it is, so an empty bar reads "0 of 8" rather than nothing
        self.labels = [ax.text(i, 0, "", ha="center", va="bottom", fontsize=10) for i in range(3)]
        if live:
            for a in (*self.bars, self.title, *self.labels):
                a.set_animated(True)

    def update(self, res: dict, replicas: int, phase: str):
        out = failure_outcomes(res, replicas, phase)
        for b, k, label in zip(self.bars, OUTCOMES, self.labels):
            b.set_height(out.get(k, 0.0))
            label.set_y(out.get(k, 0.0) + 0.02)
            label.set_text(f"{round(out.get(k, 0.0) * out['n'])} of {out['n']}")
        self.title.set_text(f"{replicas} replica{'s' if replicas > 1 else ''}, {phase} "
                            f"({out['n']} key{'s' if out['n'] != 1 else ''}, one read each)")
        return self.figure


@styled
def failure_chart(res: dict, replicas: int, phase: str):
    return FailureChart().update(res, replicas, phase)
