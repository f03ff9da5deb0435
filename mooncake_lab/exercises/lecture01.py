"""Lecture 01 exercises: the roofline of LLaMA2-70B on 8×A800 (answers computed from the package)."""
from __future__ import annotations

from ..models import get_model
from . import Exercise, exercise


#: What each question asks about: not the worked example of the lecture's main line, so that a student works it out.
Q1_TOKENS = 2048                 # KV cache of one sequence of this many tokens (the lecture works one token)
Q2_TOKENS = 4096                 # prefill FLOPs of this prompt (the lecture works 8,192)
Q3_TP, Q3_TOKENS = 8, 2048       # MFU of this measured prefill (the lecture works TP8's 8,192)
Q4_CONTEXT = 512                 # decode ridge batch at this context per sequence (the ridge table lists 256, 1,024, …)
Q5_GBS, Q5_REFERENCE_GBS = 900, 400   # NVLink (both directions) of H100 vs A800 (the lecture works A800 vs A100)


def _kv_bytes() -> float:
    """KV cache of one ``Q1_TOKENS``-token sequence of LLaMA2-70B, MiB."""
    return get_model("llama2-70b").kv_bytes_per_token() * Q1_TOKENS / 2**20


def _prefill_pflop_4k() -> float:
    return get_model("llama2-70b").prefill_flops(Q2_TOKENS) / 1e15


def _explain_pflop_4k(value: float, ok: bool) -> str:
    """Names the two counts a wrong answer most likely is: FAST'25 Eq. 1, or attention without the causal ½."""
    import math

    from ..models import fast25_eq1_prefill_flops

    if ok:
        return ""
    m, n = get_model("llama2-70b"), Q2_TOKENS
    eq1 = fast25_eq1_prefill_flops(n, m.n_layers, m.d_model) / 1e15
    full = (m.prefill_flops(n) + m.attention_flops_coefficient() * n ** 2 / 2) / 1e15
    if math.isclose(value, eq1, rel_tol=0.01):
        return (f"That is FAST'25 Eq. 1's {eq1:.3g} PFLOP (linear coefficient b = 22, no causal ½, no LM head), "
                "not a count from the model's shapes.")
    if math.isclose(value, full, rel_tol=0.01):
        return f"That counts every query against every key ({full:.3g} PFLOP): a causal mask halves attention."
    return ""


def _measured_mfu_2k() -> float:
    from ..experiments.l01_roofline import measured_prefill_mfu
    df = measured_prefill_mfu()
    return float(df[(df["tp"] == Q3_TP) & (df["prompt_tokens"] == Q3_TOKENS)]["mfu"].iloc[0])


def _decode_ridge_batch() -> float:
    from ..experiments.l01_roofline import decode_ridge_batch
    return decode_ridge_batch("llama2-70b", "a800x8", context_per_seq=Q4_CONTEXT)


def _nvlink_penalty_ms() -> float:
    """Milliseconds an 8k calibrated prefill saves on ``Q5_GBS`` NVLink against ``Q5_REFERENCE_GBS``."""
    from ..experiments.l01_roofline import nvlink_penalty
    return nvlink_penalty(8192, "llama2-70b", "a800x8", "calibrated", nvlink_gbs=Q5_REFERENCE_GBS,
                          reference_gbs=Q5_GBS) * 1e3


exercise(Exercise(
    "01.kv_bytes", "MiB of KV cache one 2,048-token sequence of LLaMA2-70B holds in BF16 (all 80 layers).",
    answer=_kv_bytes, unit="MiB", rel_tol=0.01,
    hint="Per token: K and V × layers × KV heads (not query heads: GQA) × head dim × 2 bytes. Then × tokens.",
    why="320 KiB per token × 2,048 tokens = 640 MiB; with 64 KV heads (MHA) it would be 8× more."))

exercise(Exercise(
    "01.prefill_pflop_4k", "FLOPs of the prefill of one 4,096-token LLaMA2-70B prompt, in PFLOP (1e15).",
    answer=_prefill_pflop_4k, unit="PFLOP", rel_tol=0.02,
    hint="n × 137.4 GFLOP (matmuls + LM head) + causal attention 2.62 MFLOP × n²/2.",
    why="0.563 PFLOP in the matmuls and LM head + 0.022 in causal attention ≈ 0.585 PFLOP: "
        "less than half the 8k prompt's 1.21, because attention grows as n².",
    explain=_explain_pflop_4k))

exercise(Exercise(
    "01.measured_mfu_2k", "MFU of the measured TP8 prefill of 2,048 tokens (274 ms on 8 × A100, 312 TFLOP/s "
    "each), as a fraction.",
    answer=_measured_mfu_2k, unit="(fraction of peak)", rel_tol=0.03,
    hint="MFU = prefill FLOPs / (seconds × 8 × 312e12). Give a fraction (0.4), not a percentage (40).",
    why="0.287 PFLOP / (0.274 s × 2.496 PFLOP/s) ≈ 0.42: better than the 8k prompt's 0.31."))

exercise(Exercise(
    "01.decode_ridge_batch", "Batch size at which decode of LLaMA2-70B with 512-token contexts turns "
    "compute-bound on 8×A800 under the ideal preset.",
    answer=_decode_ridge_batch, unit="sequences", rel_tol=0.05,
    hint="Set the decode step's intensity b·(FLOP per token) / (weight bytes + b·512·KV bytes per token) "
         "equal to the ridge point 312e12 / 2.039e12 ≈ 153 FLOP/B and solve for b.",
    why="b·138.8 GFLOP = 153 × (137.4 GB + b × 0.168 GB) → b ≈ 186, fewer than the 237 of 1,024-token "
        "contexts: shorter contexts read less KV per sequence."))

exercise(Exercise(
    "01.nvlink_penalty_ms", "Calibrated preset, all-reduce at 67% of one NVLink direction: how many "
    "milliseconds shorter is an 8k LLaMA2-70B prefill on 8 GPUs with NVLink 900 GB/s (H100) than with 400 "
    "GB/s (A800)? Both figures count both directions.",
    answer=_nvlink_penalty_ms, unit="ms", rel_tol=0.05,
    hint="Each GPU sends 4.59 MB per token over one direction: half the figure, here 450 and 200 GB/s. "
         "Multiply by 0.67, then by 8,192 tokens.",
    why="4.59 MB per token: 34.2 µs at 200 GB/s × 0.67 vs 15.2 µs at 450 GB/s × 0.67 → 19.0 µs × 8192 ≈ 156 ms."))
