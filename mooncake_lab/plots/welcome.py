"""Lecture 00 figures: one request's timeline; the coupled-engine stall."""
from __future__ import annotations

import numpy as np
import pandas as pd

from . import PALETTE, SLO_COLOR, new_figure, styled


@styled
def request_timeline(one: pd.Series):
    """Gantt bar of one request (from ``experiments.l00_welcome.one_request``), seconds."""
    fig, ax = new_figure(width=8, height=3.9)
    t_pre, t_tx, t_dec = one["prefill_s"], one["kv_transfer_s"], one["decode_s"]
    ax.barh(0, t_pre, left=0, color=PALETTE[0], label=f"prefill {t_pre:.2f} s (compute-bound)")
    ax.barh(0, t_tx, left=t_pre, color=PALETTE[1], label=f"KV transfer {t_tx:.2f} s (RDMA)")
    ax.barh(0, t_dec, left=t_pre + t_tx, color=PALETTE[2],
            label=f"decode {int(one['output_tokens']) - 1} tokens × {one['tbt_mean_s'] * 1e3:.1f} ms (memory-bound)")
    ax.axvline(one["ttft_s"], color="k", ls="--", lw=1)
    ax.annotate("first token (TTFT)", (one["ttft_s"], 0.6), xytext=(4, 0), textcoords="offset points", va="center")
    ax.set_yticks([])
    ax.set_ylim(-0.6, 0.8)
    ax.set_xlabel("time since arrival (s)")
    ax.set_title(f"One request: {int(one['prompt_tokens']):,}-token prompt, {int(one['output_tokens'])} output "
                 f"tokens ({one.name})")
    fig.legend(loc="outside lower center", ncol=1, frameon=False)
    return fig


@styled
def coupled_stall(df: pd.DataFrame, tbt_slo_s: float = 0.1):
    """Bars of the token gap during a co-located prefill vs the normal TBT, log scale, with the SLO."""
    fig, ax = new_figure(width=7, height=4)
    x = np.arange(len(df))
    ax.bar(x - 0.2, df["normal_tbt_s"], width=0.4, color=PALETTE[2], label="normal TBT (decode step)")
    ax.bar(x + 0.2, df["stalled_gap_s"], width=0.4, color=PALETTE[3], label="gap while a prompt is prefilled")
    ax.axhline(tbt_slo_s, color=SLO_COLOR, ls="--", label=f"TBT SLO {tbt_slo_s * 1e3:.0f} ms")
    ax.set_yscale("log")
    ax.set_xticks(x, [f"{p // 1000}k" for p in df["prompt_tokens"]])
    ax.set_xlabel("length of the prompt prefilled on the same GPUs (tokens)")
    ax.set_ylabel("time between two output tokens (s, log)")
    ax.set_title("Coupled engine: one long prefill stalls every decoding request")
    ax.legend()
    return fig
