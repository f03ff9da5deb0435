"""Lecture 00: one request through prefill and decode; the stall a coupled engine causes.

Times come from :mod:`mooncake_lab.roofline` (LLaMA2-70B on one 8×A800 node by default).
"""
from __future__ import annotations

import pandas as pd

from .. import roofline
from ..hardware import A800_NODE
from ..models import get_model
from ..reproduce import Metric, figure_group, metric_group
from ..validate import integer, items

#: Most prompt or output tokens of one request: 2**17 = 131,072, the longest context of the catalogue
#: models (DeepSeek-V3: 128k); decode is summed step by step, so this also bounds the loop.
MAX_TOKENS = 2**17

DEFAULT_MODEL = "llama2-70b"

#: Levels of prefill/decode disaggregation, the ladder lecture 00 uses: level → where prefill and decode run.
DISAGGREGATION_LEVELS = {
    -1: "fused in the same kernels on one GPU",
    0: "separate phases, scheduled on the same GPUs",
    1: "separate GPUs of one node",
    2: "separate nodes on one network",
    3: "heterogeneous devices and networks",
}
#: Mooncake: prefill and decode on separate same-type nodes over RDMA.
MOONCAKE_LEVEL = 2


def one_request(n_prompt: int = 12_035, n_output: int = 343, *, model=DEFAULT_MODEL, node=A800_NODE,
                preset: str = "ideal") -> pd.Series:
    """Timeline of one request alone on a prefill node and a decode node (seconds).

    The first token comes out of the prefill (TTFT = prefill time, no queueing); the KV cache then
    moves to the decode node over RDMA (serialized here; lecture 02 overlaps it layer by layer) and
    decode produces the other ``n_output - 1`` tokens at batch size 1, context growing by one per step.
    """
    m = get_model(model)
    n_prompt = integer(n_prompt, "n_prompt", lo=1, hi=MAX_TOKENS, where="one_request")
    n_output = integer(n_output, "n_output", lo=1, hi=MAX_TOKENS, where="one_request")  # one step each
    prefill = roofline.prefill_time(m, node, n_prompt, preset=preset)
    transfer = roofline.kv_transfer_time(m, node, n_prompt, preset=preset)
    steps = [roofline.decode_step_time(m, node, 1, n_prompt + k, preset=preset) for k in range(1, int(n_output))]
    decode = float(sum(steps))
    return pd.Series({
        "prompt_tokens": int(n_prompt), "output_tokens": int(n_output),
        "prefill_s": prefill, "kv_transfer_s": transfer,
        "ttft_s": prefill,
        "tbt_mean_s": decode / max(1, len(steps)),
        "decode_s": decode,
        "end_to_end_s": prefill + transfer + decode,
    }, name=f"{m.name}, {preset}")


def coupled_stall(prompt_lengths=(2_000, 8_000, 32_000, 128_000), *, batch_size: int = 32, context: int = 12_035,
                  model=DEFAULT_MODEL, node=A800_NODE, preset: str = "ideal") -> pd.DataFrame:
    """Token gap seen by a request being decoded when a prompt is prefilled on the same GPUs.

    ``batch_size`` requests of ``context`` tokens each are being decoded; one prefill of each
    length runs unchunked between two decode steps, so the gap = prefill time + one decode step.
    """
    prompt_lengths = items(prompt_lengths, "prompt_lengths", where="coupled_stall")
    batch_size = integer(batch_size, "batch_size", lo=1, hi=10**6, where="coupled_stall")
    context = integer(context, "context", lo=0, hi=10**7, where="coupled_stall")   # 10M: the longest windows
    m = get_model(model)
    step = roofline.decode_step_time(m, node, batch_size, batch_size * context, preset=preset)
    rows = []
    for p in prompt_lengths:
        gap = roofline.prefill_time(m, node, p, preset=preset) + step
        rows.append({"prompt_tokens": int(p), "normal_tbt_s": step, "stalled_gap_s": gap})
    df = pd.DataFrame(rows)
    df["gap_over_normal"] = df["stalled_gap_s"] / df["normal_tbt_s"]
    return df


def request_table(one: pd.Series) -> pd.DataFrame:
    """:func:`one_request` for people: token counts as integers, times rounded, units in the labels."""
    rows = [("prompt (tokens)", f"{int(one['prompt_tokens']):,}"),
            ("output (tokens)", f"{int(one['output_tokens']):,}"),
            ("prefill = TTFT (s)", f"{one['prefill_s']:.2f}"),
            ("KV transfer to the decode node (ms)", f"{one['kv_transfer_s'] * 1e3:.0f}"),
            ("mean time between tokens (ms)", f"{one['tbt_mean_s'] * 1e3:.1f}"),
            ("decode, all output tokens (s)", f"{one['decode_s']:.2f}"),
            ("end to end (s)", f"{one['end_to_end_s']:.2f}")]
    return pd.DataFrame({one.name: [t for _, t in rows]}, index=pd.Index([k for k, _ in rows]))


def stall_table(stall: pd.DataFrame, tbt_slo_s: float = 0.1):
    """:func:`coupled_stall` for people: the normal token gap, the gap with a prefill in it, and the ratios."""
    out = pd.DataFrame({
        "prompt prefilled (tokens)": stall["prompt_tokens"].astype(int),
        "normal gap (ms)": stall["normal_tbt_s"] * 1e3,
        "gap with the prefill (s)": stall["stalled_gap_s"],
        "× the normal gap": stall["gap_over_normal"],
        f"× the {tbt_slo_s:g} s TBT SLO": stall["stalled_gap_s"] / tbt_slo_s,
    })
    return out.style.hide(axis="index").format({
        "prompt prefilled (tokens)": "{:,}", "normal gap (ms)": "{:.1f}", "gap with the prefill (s)": "{:.2f}",
        "× the normal gap": "{:,.0f}", f"× the {tbt_slo_s:g} s TBT SLO": "{:,.1f}"})


@metric_group("welcome")
def metrics() -> list[Metric]:
    """Lecture 00's two numbers (ours only: the paper states the SLOs, not these times)."""
    one = one_request()
    gap = coupled_stall([32_000]).loc[0, "stalled_gap_s"]
    where = "ours: LLaMA2-70B, one 8×A800 node, ideal preset (lecture 00)"
    return [
        Metric("welcome.one_request_ttft_s", float(one["ttft_s"]), "s", None,
               f"{where}; 12,035-token prompt alone, TTFT SLO 30 s (arXiv 2407.00079, real-workload run)"),
        Metric("welcome.coupled_stall_32k_gap_s", float(gap), "s", None,
               f"{where}; 32k prefill between two decode steps of 32 × 12,035-token contexts, "
               "TBT SLO 0.1 s (arXiv 2407.00079, real-workload run)"),
    ]


@figure_group("welcome")
def figures() -> dict:
    """Headline figures of lecture 00 (LLaMA2-70B on one 8×A800 node, ideal preset), as in the notebook."""
    from ..plots import welcome as plots

    return {
        "l00_request_timeline": plots.request_timeline(one_request()),
        "l00_coupled_stall": plots.coupled_stall(coupled_stall()),
    }
