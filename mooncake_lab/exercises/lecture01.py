"""Lecture 01 exercises: the roofline of LLaMA2-70B on 8×A800 (answers computed from the package)."""
from __future__ import annotations

from ..models import get_model
from . import Exercise, exercise


def _kv_bytes() -> float:
    return get_model("llama2-70b").kv_bytes_per_token()


def _prefill_pflop_8k() -> float:
    return get_model("llama2-70b").prefill_flops(8192) / 1e15


def _explain_pflop_8k(value: float, ok: bool) -> str:
    """Names the two counts a wrong answer most likely is: FAST'25 Eq. 1, or attention without the causal ½."""
    import math

    from ..models import fast25_eq1_prefill_flops

    if ok:
        return ""
    m = get_model("llama2-70b")
    eq1 = fast25_eq1_prefill_flops(8192, m.n_layers, m.d_model) / 1e15
    full = (m.prefill_flops(8192) + m.attention_flops_coefficient() * 8192 ** 2 / 2) / 1e15
    if math.isclose(value, eq1, rel_tol=0.01):
        return (f"That is FAST'25 Eq. 1's {eq1:.3g} PFLOP (linear coefficient b = 22, no causal ½, no LM head), "
                "not a count from the model's shapes.")
    if math.isclose(value, full, rel_tol=0.01):
        return f"That counts every query against every key ({full:.3g} PFLOP): a causal mask halves attention."
    return ""


def _measured_mfu_8k() -> float:
    from ..experiments.l01_roofline import measured_prefill_mfu
    df = measured_prefill_mfu()
    return float(df[(df["tp"] == 8) & (df["prompt_tokens"] == 8192)]["mfu"].iloc[0])


def _decode_ridge_batch() -> float:
    from ..experiments.l01_roofline import decode_ridge_batch
    return decode_ridge_batch("llama2-70b", "a800x8", context_per_seq=1024)


def _nvlink_penalty_ms() -> float:
    from ..experiments.l01_roofline import nvlink_penalty
    return nvlink_penalty(8192, "llama2-70b", "a800x8", "calibrated", nvlink_gbs=400, reference_gbs=600) * 1e3


exercise(Exercise(
    "01.kv_bytes", "Bytes of KV cache per token of LLaMA2-70B in BF16 (all 80 layers).",
    answer=_kv_bytes, unit="B", rel_tol=0.01,
    hint="K and V × layers × KV heads (not query heads: GQA) × head dim × 2 bytes.",
    why="2 × 80 × 8 × 128 × 2 B = 327,680 B = 320 KiB; with 64 KV heads (MHA) it would be 8× more."))

exercise(Exercise(
    "01.prefill_pflop_8k", "FLOPs of the prefill of one 8,192-token LLaMA2-70B prompt, in PFLOP (1e15).",
    answer=_prefill_pflop_8k, unit="PFLOP", rel_tol=0.02,
    hint="n × (linear + LM head FLOP per token) + causal attention 4·L·d·n²/2; or models.get_model(...).prefill_flops.",
    why="1.12 PFLOP in the matmuls + 0.09 in causal attention + 0.004 in the LM head ≈ 1.21 PFLOP "
        "(FAST'25 Eq. 1 says 1.14: smaller linear coefficient, no causal ½).",
    explain=_explain_pflop_8k))

exercise(Exercise(
    "01.measured_mfu_8k", "MFU of the measured TP8 8k prefill (1.55 s on 8 × A100, 312 TFLOP/s each), as a fraction.",
    answer=_measured_mfu_8k, unit="(fraction of peak)", rel_tol=0.03,
    hint="MFU = prefill FLOPs / (seconds × 8 × 312e12). Give a fraction (0.3), not a percentage (30).",
    why="1.21 PFLOP / (1.55 s × 2.496 PFLOP/s) ≈ 0.31: the 2023 stack used under a third of the GPUs' peak."))

exercise(Exercise(
    "01.decode_ridge_batch", "Batch size at which decode of LLaMA2-70B with 1,024-token contexts turns "
    "compute-bound on 8×A800 under the ideal preset.",
    answer=_decode_ridge_batch, unit="sequences", rel_tol=0.05,
    hint="Set the decode step's intensity b·(FLOP per token) / (weight bytes + b·1024·KV bytes per token) "
         "equal to the ridge point 312e12 / 2.039e12 ≈ 153 FLOP/B and solve for b.",
    why="b·140.1 GFLOP = 153 × (137.4 GB + b × 0.336 GB) → b ≈ 237. Without the KV reads it would be "
        "≈ 150 (weights shared, KV not); with 8k contexts decode never turns compute-bound."))

exercise(Exercise(
    "01.nvlink_penalty_ms", "Calibrated preset: how many milliseconds longer is an 8k LLaMA2-70B prefill on "
    "8×A800 (NVLink 400 GB/s) than on 8×A100 (600 GB/s)?",
    answer=_nvlink_penalty_ms, unit="ms", rel_tol=0.05,
    hint="Per token each GPU sends 2 all-reduces × 80 layers × 2·(7/8) × 8192 × 2 B over one NVLink "
         "direction (half the datasheet figure) at 67% efficiency; compare 200 and 300 GB/s.",
    why="4.59 MB per token: 34.2 µs at 200 GB/s × 0.67 vs 22.8 µs at 300 GB/s × 0.67 → 11.4 µs × 8192 ≈ 93 ms "
        "(≈ 6% of the prefill)."))
