"""Claims of lecture 01: every number its markdown and exercise strings state (see :mod:`mooncake_lab.claims`).

Values come from the package (models, hardware, roofline, calibration, the lecture's experiments module,
paper.py); nothing here depends on a trace. Claims are grouped by sentence or table row, in notebook order.
"""
from __future__ import annotations

import math
import re
from functools import lru_cache

from . import answer_of, claim, default_of, not_a_claim, notebook_arg, restate, when


@lru_cache(maxsize=None)
def _v() -> dict:
    """Every number lecture 01 states, computed once."""
    from .. import paper
    from .. import roofline as rf
    from ..calibration import CALIBRATED, FITTED, MODERN, NCCL_ALLREDUCE_EFFICIENCY
    from ..experiments import l01_roofline as ex
    from ..hardware import A100, A100_NODE, A800, A800_NODE, GIB, H800_NODE
    from ..models import DEEPSEEK_V3, LLAMA2_70B

    m, nd, ds = LLAMA2_70B, A800_NODE, DEEPSEEK_V3
    d, L = m.d_model, m.n_layers
    kv = m.kv_bytes_per_token()
    per_tok = m.linear_flops_per_token() + m.lm_head_flops_per_token()
    att = m.attention_flops_coefficient()
    br8 = m.prefill_flops_breakdown(8192)
    eq1 = ex.eq1_comparison(8192)
    meas = ex.measured_prefill_mfu()
    mfu = {(int(r.tp), int(r.prompt_tokens)): r.mfu for r in meas.itertuples()}
    cal = ex.calibration_table()
    ratio = cal["measured_s"] / cal["ideal_s"]
    pre = ex.prefill_vs_length(m, nd).set_index(["preset", "n_new"])
    ideal_comm = ex.with_tp_comm("ideal")
    c800, c100 = rf.cost_model(m, nd, ideal_comm), rf.cost_model(m, A100_NODE, ideal_comm)
    ridge, ridge_h800 = rf.ridge_point(nd), rf.ridge_point(H800_NODE)
    ds_key = ds.decode_attention_flops_coefficient()
    fit = FITTED
    lin_eff = sorted(fit["linear_efficiency"].values())
    att_eff = sorted(fit["attn_efficiency"].values())
    return dict(
        m=m, nd=nd, d=d, L=L, kv=kv, per_tok=per_tok, att=att, br8=br8, eq1=eq1, mfu=mfu, cal=cal,
        ratio=ratio, pre=pre, c800=c800, c100=c100, ridge=ridge, ridge_h800=ridge_h800, ds=ds, ds_key=ds_key,
        lin_eff=lin_eff, att_eff=att_eff, fit=fit, paper=paper, A100=A100, A800=A800, GIB=GIB, rf=rf, ex=ex,
        CALIBRATED=CALIBRATED, MODERN=MODERN, nccl=NCCL_ALLREDUCE_EFFICIENCY, nd100=A100_NODE,
        kv_frac=rf.IDEAL.kv_usable_fraction,
        ideal8k=rf.prefill_time(m, nd, 8192, preset="ideal"),
        cal8k_a800=rf.prefill_time(m, nd, 8192, preset="calibrated"),
        cal8k_a100=rf.prefill_time(m, A100_NODE, 8192, preset="calibrated"),
        modern8k=rf.prefill_time(m, nd, 8192, preset="modern"),
        dec1=rf.decode_step_time(m, nd, 1, 1024, preset="ideal"),
        dec1_512=rf.decode_step_time(m, nd, 1, 512, preset="ideal"),
        dec64=rf.decode_step_time(m, nd, 64, 64 * 1024, preset="ideal"),
        dec1_cal=rf.decode_step_time(m, nd, 1, 512, preset="calibrated"),
        meas8k=float(meas[(meas.tp == 8) & (meas.prompt_tokens == 8192)]["measured_s"].iloc[0]),
        meas_dec1=float(cal[(cal.phase == "decode") & (cal.tp == 8) & (cal.batch_size == 1)]["measured_s"].iloc[0]),
        penalty=ex.nvlink_penalty(8192),
        ar=rf.tp_allreduce_bytes_per_token(m, 8),
        cap=rf.decode_kv_capacity_tokens(m, nd),
        ridge_b=ex.decode_ridge_batch(m, nd, 1024),
        ds_ridge_b=ex.decode_ridge_batch(ds, nd, 32768),
        ds_ridge_b_h800=ex.decode_ridge_batch(ds, H800_NODE, 32768),
    )


def _llama3():
    from ..models import LLAMA3_70B
    return LLAMA3_70B


def v(key):
    return lambda: _v()[key]


def _sat_context() -> float:
    """Context per sequence above which decode's intensity (b → ∞) stays below the ridge."""
    x = _v()
    return x["per_tok"] / (x["ridge"] * x["kv"] - x["att"])


def _modern_exception() -> list:
    """The one measured point the modern preset is not between ideal and measured at (TP2's 2k prefill):
    [2 (k tokens), its MFU %, modern's MFU knob %, modern s, measured s]; zeros if that is not the only one."""
    x = _v()
    cal = x["cal"]
    lo, hi = cal[["ideal_s", "measured_s"]].min(axis=1), cal[["ideal_s", "measured_s"]].max(axis=1)
    out = cal[~cal["modern_s"].between(lo, hi)]
    if len(out) != 1 or (out["phase"].iloc[0], int(out["tp"].iloc[0]), int(out["prompt_tokens"].iloc[0])) != ("prefill", 2, 2048):
        return [0, 0, 0, 0, 0]
    r = out.iloc[0]
    return [2, 100 * x["mfu"][(2, 2048)], 100 * x["MODERN"].linear_efficiency_at(2), r["modern_s"], r["measured_s"]]


def _q():
    from ..exercises import lecture01 as q
    return q


def _pf_n() -> float:
    """Prompt of exercise 01.prefill_pflop_4k, tokens, if the exercise's answer is its prefill in PFLOP, else NaN."""
    n = _q().Q2_TOKENS
    return when(math.isclose(answer_of("01.prefill_pflop_4k") * 1e15, _v()["m"].prefill_flops(n)), n)


def _pf_unit() -> float:
    """FLOP per unit of exercise 01.prefill_pflop_4k's answer (1e15: it asks for PFLOP)."""
    return _v()["m"].prefill_flops(_pf_n()) / answer_of("01.prefill_pflop_4k")


def _kv_n() -> float:
    """Tokens of exercise 01.kv_bytes if its answer is that sequence's KV cache in MiB, else NaN."""
    n = _q().Q1_TOKENS
    return when(math.isclose(answer_of("01.kv_bytes"), n * _v()["kv"] / 2**20), n)


def _mfu_q() -> list:
    """[TP, prompt tokens, measured ms] of exercise 01.measured_mfu_2k, if its answer is that row's MFU."""
    q, x = _q(), _v()
    key = (q.Q3_TP, q.Q3_TOKENS)
    meas = x["ex"].measured_prefill_mfu()
    t = float(meas[(meas.tp == key[0]) & (meas.prompt_tokens == key[1])]["measured_s"].iloc[0])
    ok = math.isclose(answer_of("01.measured_mfu_2k"), x["mfu"][key])
    return [when(ok, key[0]), when(ok, key[1]), when(ok, 1e3 * t)]


def _ridge_ctx() -> float:
    """Context per sequence of exercise 01.decode_ridge_batch, tokens, if the exercise's answer is that call's."""
    c = _q().Q4_CONTEXT
    return when(answer_of("01.decode_ridge_batch") == _v()["ex"].decode_ridge_batch(_v()["m"], _v()["nd"], c), c)


def _nv_q() -> list:
    """[prompt k tokens, NVLink GB/s asked, reference GB/s] of exercise 01.nvlink_penalty_ms, if its answer is
    that saving in ms."""
    q = _q()
    ok = math.isclose(answer_of("01.nvlink_penalty_ms"),
                      1e3 * _v()["ex"].nvlink_penalty(8192, nvlink_gbs=q.Q5_REFERENCE_GBS, reference_gbs=q.Q5_GBS))
    return [when(ok, 8), when(ok, q.Q5_GBS), when(ok, q.Q5_REFERENCE_GBS)]


def _ar_us_at(gbs: float) -> float:
    """All-reduce µs per token at ``gbs`` NVLink (both directions), one direction at the nccl efficiency."""
    return 1e6 * _v()["ar"] / (gbs / 2 * 1e9 * _v()["nccl"])


def _dash():
    from ..dashboards import roofline
    return roofline


def _fit_max_k() -> float:
    """Longest measured prefill the calibrated preset is fitted to, k tokens (8)."""
    from ..calibration import load_measured
    df = load_measured()
    return float(df.loc[df["phase"] == "prefill", "prompt_tokens"].max()) / 1024


_NB = "notebook"
_FORMULA = "a constant of a formula, not a quantity"

# --- title and learning goals ------------------------------------------------------------------
claim("01.title_gpus", "8×A800", lambda: _v()["nd"].n_gpus)
claim("01.node", "**8 × A800-SXM4-80GB**. The 8 GPUs split",
      lambda: [_v()["nd"].n_gpus, _v()["nd"].n_gpus])
claim("01.assume_hw", "nodes of 8 × A800-SXM4-80GB | one such node, TP over its 8",
      lambda: [_v()["nd"].n_gpus, _v()["nd"].n_gpus])
claim("01.assume_bf16", "2 bytes per value", lambda: _v()["m"].bytes_per_param)
claim("01.assume_eq1", "a = 4, b = 22, no LM head | from the shapes: 25.5·d²",
      lambda: [_v()["paper"].EQ1_A, _v()["paper"].EQ1_B, _v()["eq1"].loc["linear", "ours_coef"]])
claim("01.assume_comm", "exposed at 67% of NVLink; modern: inside its 65% MFU",
      lambda: [100 * _v()["nccl"], 100 * _v()["MODERN"].linear_efficiency_at(8)])
claim("01.assume_kv", "90% of HBM usable (vLLM's default), minus the weights | 90%",
      lambda: [100 * _v()["kv_frac"], 100 * _v()["kv_frac"]])

# --- 1 · the machine ---------------------------------------------------------------------------
claim("01.section1_gpus", "what 8 × A800 can deliver", lambda: _v()["nd"].n_gpus)
claim("01.nvlink_cut", "600 to 400", lambda: [_v()["A100"].nvlink_bw / 1e9, _v()["A800"].nvlink_bw / 1e9])
claim("01.peak_gpu", "**312 TFLOP/s** of dense BF16", lambda: _v()["A800"].flops_bf16 / 1e12)
claim("01.peak_sparse", "datasheet's 624 TFLOP/s\nassumes 2:4", lambda: [2 * _v()["A800"].flops_bf16 / 1e12, 2, 4])
claim("01.hbm_gpu", "at **2,039 GB/s**", lambda: _v()["A800"].hbm_bw / 1e9)
claim("01.hbm_label", '"80GB" of HBM, which is 80', lambda: [_v()["A800"].hbm_bytes / _v()["GIB"]] * 2)
claim("01.hbm_summary", 'why "80GB" is 80 GiB', lambda: [_v()["A800"].hbm_bytes / _v()["GIB"]] * 2)
claim("01.hbm_gib", "(80 × 2³⁰ B: memory comes in powers of two; `nvidia-smi` shows 81920MiB).",
      lambda: [_v()["A800"].hbm_bytes / _v()["GIB"], _v()["GIB"], _v()["A800"].hbm_bytes / 2**20])
claim("01.peak_node", "8 × 312 = **2,496 TFLOP/s** ≈ 2.5",
      lambda: [_v()["nd"].n_gpus, _v()["A800"].flops_bf16 / 1e12, _v()["nd"].peak_flops / 1e12,
               _v()["nd"].peak_flops / 1e15])
claim("01.hbm_node", "8 × 2.039 = **16.3",
      lambda: [_v()["nd"].n_gpus, _v()["A800"].hbm_bw / 1e12, _v()["nd"].peak_hbm_bw / 1e12])
claim("01.ridge", "312e12 / 2.039e12 ≈ **153",
      lambda: [_v()["A800"].flops_bf16, _v()["A800"].hbm_bw, _v()["ridge"]])
claim("01.ridge_again", "than 153 FLOPs per byte", v("ridge"))

# --- 2 · counting ------------------------------------------------------------------------------
claim("01.shapes", "80 layers, d = 8,192, 64 query heads and **8",
      lambda: [_v()["L"], _v()["d"], _v()["m"].n_heads, _v()["m"].n_kv_heads])
claim("01.shapes2", "128, SwiGLU FFN width 28,672, vocabulary 32,000.",
      lambda: [_v()["m"].d_head, _v()["m"].d_ff, _v()["m"].vocab])
claim("01.matmul_rule", "costs 2·k·m FLOPs per token",
      lambda: _v()["m"].linear_flops_per_token() / _v()["m"].layer_matmul_params())
claim("01.table_q", "| Q | 8192 × 8192 | 67.1", lambda: [_v()["d"], _v()["d"], _v()["d"] ** 2 / 1e6])
claim("01.table_kv", "8192 × (8 × 128) each | 2 × 8.4",
      lambda: [_v()["d"], _v()["m"].n_kv_heads, _v()["m"].d_head, 2,
               _v()["d"] * _v()["m"].n_kv_heads * _v()["m"].d_head / 1e6])
claim("01.table_o", "| O | 8192 × 8192 | 67.1", lambda: [_v()["d"], _v()["d"], _v()["d"] ** 2 / 1e6])
claim("01.table_ffn", "3 × 8192 × 28672 | 704.6",
      lambda: [3, _v()["d"], _v()["m"].d_ff, 3 * _v()["d"] * _v()["m"].d_ff / 1e6])
claim("01.table_layer", "12.75 · d² | **855.6",
      lambda: [_v()["m"].layer_matmul_params() / _v()["L"] / _v()["d"] ** 2,
               _v()["m"].layer_matmul_params() / _v()["L"] / 1e6])
claim("01.linear_per_token", "80 layers hold 68.45 B weights in the matmuls → **2 × 68.45 B = 136.9",
      lambda: [_v()["L"], _v()["m"].layer_matmul_params() / 1e9, 2, _v()["m"].layer_matmul_params() / 1e9,
               _v()["m"].linear_flops_per_token() / 1e9])
claim("01.layer_weights", "Each layer's matmuls hold 12.75 · d² = **855.6 M**",
      lambda: [_v()["m"].layer_matmul_params() / _v()["L"] / _v()["d"] ** 2,
               _v()["m"].layer_matmul_params() / _v()["L"] / 1e6])
claim("01.lm_head_shape", "The LM head is 8192 × 32000", lambda: [_v()["d"], _v()["m"].vocab])
claim("01.lm_head", "2 × 262 M = **0.52 GFLOP**, for a total of **137.4 GFLOP per token** — about 2",
      lambda: [2, _v()["d"] * _v()["m"].vocab / 1e6,
               _v()["m"].lm_head_flops_per_token() / 1e9, _v()["per_tok"] / 1e9,
               _v()["per_tok"] / _v()["m"].parameters()])
claim("01.params", "69 B parameters", lambda: _v()["m"].parameters() / 1e9)
claim("01.attention_rule", "costs 2·d_head FLOPs per head, and the weighted sum of the values another\n"
      "2·d_head: 4 · 128 · 64 heads · 80 layers = 2,621,440",
      lambda: [2, 2, _v()["att"] / (_v()["L"] * _v()["m"].n_heads * _v()["m"].d_head), _v()["m"].d_head,
               _v()["m"].n_heads, _v()["L"], _v()["att"]])
claim("01.attention_per_key", "That costs **2.62 MFLOP per attended key**. At a 1k-token context it adds 2.7",
      lambda: [_v()["att"] / 1e6, 1, _v()["att"] * 1024 / 1e9])
claim("01.attention_box", "Where 2.62 MFLOP per key", lambda: _v()["att"] / 1e6)
claim("01.per_token_140", "costs **≈ 140 GFLOP**",
      lambda: (_v()["per_tok"] + _v()["att"] * 1024) / 1e9, rel_tol=0.01)
not_a_claim("01.causal_pairs", "*n*²/2 pairs", _FORMULA + " (the causal half of n² pairs)")
claim("01.prefill_formula", "137.4 G · *n* + 2.62 M · *n*²/2",
      lambda: [_v()["per_tok"] / 1e9, _v()["att"] / 1e6, 2])
claim("01.kv_formula", "2 (K and V) × 80 layers × 8",
      lambda: [2, _v()["L"], _v()["m"].n_kv_heads])
claim("01.kv_total", "128 × 2 bytes (BF16) = **327,680 B = 320 KiB per token**. With 64",
      lambda: [_v()["m"].d_head, _v()["m"].kv_bytes_per_elem, _v()["kv"], _v()["kv"] / 1024, _v()["m"].n_heads])
claim("01.kv_mha_factor", "it would be\n8× more", lambda: _v()["m"].gqa_ratio)

# --- Eq. 1 ---------------------------------------------------------------------------------------
claim("01.eq1_coef", "a = 4, b = 22: **1.14",
      lambda: [_v()["paper"].EQ1_A, _v()["paper"].EQ1_B, _v()["eq1"].loc["total", "eq1_flops"] / 1e15],
      source="FAST'25 Eq. 1")
claim("01.eq1_ours", "8,192. We count **1.21", lambda: [8192, _v()["br8"]["total"] / 1e15])
claim("01.eq1_linear", "(+0.15 PFLOP).** The shapes above give 2 × 12.75 d² = **25.5·d²**",
      lambda: [_v()["eq1"].loc["linear", "ours_minus_eq1"] / 1e15, 2,
               _v()["m"].layer_matmul_params() / _v()["L"] / _v()["d"] ** 2, _v()["eq1"].loc["linear", "ours_coef"]])
claim("01.eq1_b", "Eq. 1 uses b = 22", lambda: _v()["paper"].EQ1_B)
claim("01.eq1_b2", "how it got 22;", lambda: _v()["paper"].EQ1_B)
claim("01.eq1_attention", "(−0.09 PFLOP).** Eq. 1's a = 4",
      lambda: [_v()["eq1"].loc["attention", "ours_minus_eq1"] / 1e15, _v()["paper"].EQ1_A])
claim("01.eq1_causal", "(our effective a is 2).", lambda: _v()["eq1"].loc["attention", "ours_coef"])
claim("01.eq1_head", "(+0.004 PFLOP).** Eq. 1 leaves it out. It is tiny for a 32k",
      lambda: [_v()["eq1"].loc["lm_head", "ours_minus_eq1"] / 1e15, _v()["m"].vocab / 1000])
claim("01.eq1_head_rule", "The LM head costs 2·vocab·d per",
      lambda: _v()["m"].lm_head_flops_per_token() / (_v()["m"].vocab * _v()["d"]))
claim("01.eq1_llama3_vocab", "LLaMA3's 128k vocabulary makes it four times larger",
      lambda: _llama3().vocab / 1000 if round(_llama3().vocab / _v()["m"].vocab) == 4 else 0, rel_tol=0.01)
claim("01.eq1_net", "Net: +6%.", lambda: (_v()["br8"]["total"] / _v()["eq1"].loc["total", "eq1_flops"] - 1) * 100)

# --- 3 · intensity -----------------------------------------------------------------------------
claim("01.weights_gb", "whatever the number of tokens in it: 137 GB",
      lambda: _v()["m"].streamed_weight_bytes_dense() / 1e9)
claim("01.weight_flops", "(2 bytes in BF16) does 2", lambda: [_v()["m"].bytes_per_param, 2])
claim("01.prefill_8k_intensity", "8k prompt: T = 8,192 ≫ 153", lambda: [8, 8192, _v()["ridge"]])
claim("01.prefill_8k_pkg", "8,663", lambda: _v()["rf"].prefill_intensity(_v()["m"], 8192))
claim("01.decode_b1", "At *b* = 1 the intensity is ≈ 1", lambda: [1, _v()["rf"].decode_intensity(_v()["m"], 1, 1024)],
      rel_tol=0.05)
claim("01.idle", "idle 99% of the time",
      lambda: 100 * (1 - _v()["rf"].decode_intensity(_v()["m"], 1, 1024) / _v()["ridge"]), rel_tol=0.01)
claim("01.intensity_box", "Why the 8k prefill's intensity is 8,663, not 8,192",
      lambda: [8, _v()["rf"].prefill_intensity(_v()["m"], 8192), 8192])
claim("01.chart_contexts", "(1k-token contexts) on",
      lambda: notebook_arg("01", "ex.roofline_points", "context_per_seq") / 1024)
claim("01.gqa_intensity", "2.62 MFLOP per 320 KiB key/value pair read: **8",
      lambda: [_v()["att"] / 1e6, _v()["kv"] / 1024, _v()["att"] / _v()["kv"]])
claim("01.saturation", "below 153 once contexts\nexceed ≈ 3k", lambda: [_v()["ridge"], _sat_context() / 1000], rel_tol=0.05)
claim("01.capacity", "holds ≈ 1.47 M tokens: 90% of its 640 GiB\nof HBM (vLLM's default share, which lecture 06 "
      "uses), minus the 138 GB of weights, at 320 KiB",
      lambda: [_v()["cap"] / 1e6, 100 * _v()["kv_frac"], _v()["nd"].hbm_bytes / _v()["GIB"],
               _v()["m"].weight_bytes() / 1e9, _v()["kv"] / 1024])
claim("01.weights_00", "Lecture 00's 138 GB is all the weights: 68.98 B parameters × 2 B = 137.95 GB",
      lambda: [_v()["m"].weight_bytes() / 1e9, _v()["m"].parameters() / 1e9, _v()["m"].bytes_per_param,
               _v()["m"].weight_bytes() / 1e9])
claim("01.weights_embed", "(32,000 × 8,192 × 2 B = 0.52 GB)",
      lambda: [_v()["m"].vocab, _v()["d"], _v()["m"].bytes_per_param,
               (_v()["m"].weight_bytes() - _v()["m"].streamed_weight_bytes_dense()) / 1e9])
claim("01.weights_rest", "The rest, 137.43 GB, streams", lambda: _v()["m"].streamed_weight_bytes_dense() / 1e9)
claim("01.weights_gib", "decimal GB (10⁹ B); in GiB they are 128.5 and 128.0",
      lambda: [1e9, _v()["m"].weight_bytes() / _v()["GIB"], _v()["m"].streamed_weight_bytes_dense() / _v()["GIB"]])
claim("01.weights_title", "Why 137.4 GB here, and 138 GB",
      lambda: [_v()["m"].streamed_weight_bytes_dense() / 1e9, _v()["m"].weight_bytes() / 1e9])

# --- MLA ------------------------------------------------------------------------------------------
claim("01.mla_latent", "(70,272 B per token)", lambda: _v()["ds"].kv_bytes_per_token())
claim("01.mla_heads", "128 heads scores against the 576-value",
      lambda: [_v()["ds"].n_heads, _v()["ds"].kv_lora_rank + _v()["ds"].d_rope])
claim("01.mla_flops", "512-value latent directly,\n2 × 61 × 128 × (576 + 512) = **17.0 MFLOP per attended key**, ≈ **242",
      lambda: [_v()["ds"].kv_lora_rank, 2, _v()["ds"].n_layers, _v()["ds"].n_heads,
               _v()["ds"].kv_lora_rank + _v()["ds"].d_rope, _v()["ds"].kv_lora_rank, _v()["ds_key"] / 1e6,
               _v()["ds_key"] / _v()["ds"].kv_bytes_per_token()])
claim("01.mla_vs_gqa", "30× GQA's 8, above the A800's ridge and near the H800's (295).",
      lambda: [(_v()["ds_key"] / _v()["ds"].kv_bytes_per_token()) / (_v()["att"] / _v()["kv"]),
               _v()["att"] / _v()["kv"], _v()["ridge_h800"]], rel_tol=0.02)
claim("01.mla_ridge_batch", "32k-token contexts its decode turns compute-bound on 8 × A800 from batch ≈ 740",
      lambda: [32, 8, _v()["ds_ridge_b"]], rel_tol=0.01)
claim("01.mla_h800", "8 × H800, never: 242 < 295)",
      lambda: [8, _v()["ds_key"] / _v()["ds"].kv_bytes_per_token(), _v()["ridge_h800"]]
      if _v()["ds_ridge_b_h800"] == float("inf") else [0, 0, 0, 0])

def _fp8() -> dict:
    """DeepSeek-V3-FP8 on one 8-GPU H20 and H800 node: weights, HBM, KV room (tokens) under the 90% share."""
    from ..hardware import GIB, H20_NODE, H800_NODE
    from ..models import DEEPSEEK_V3_FP8 as f
    rf = _v()["rf"]
    return dict(f=f, h20=H20_NODE, h800=H800_NODE, GIB=GIB, w=f.weight_bytes(),
                cap_h20=rf.decode_kv_capacity_tokens(f, H20_NODE), cap_h800=rf.decode_kv_capacity_tokens(f, H800_NODE))


claim("01.fp8_weights", "DeepSeek released the weights in FP8, one byte each: 671 GB",
      lambda: _fp8()["w"] / 1e9 if _fp8()["f"].bytes_per_param == 1 else 0, source="Hugging Face deepseek-ai/DeepSeek-V3 config.json")
claim("01.fp8_h20", "On 8 × H20 (768 GiB of HBM) these weights leave room\nfor ≈ 1.01 M tokens of KV.",
      lambda: [_fp8()["h20"].n_gpus, _fp8()["h20"].hbm_bytes / _fp8()["GIB"], _fp8()["cap_h20"] / 1e6])
claim("01.fp8_h800", "On 8 × H800 (640 GiB) they fill 98% of HBM, above the 90% an engine may use:\nno room for KV.",
      lambda: [_fp8()["h800"].n_gpus, _fp8()["h800"].hbm_bytes / _fp8()["GIB"],
               100 * _fp8()["w"] / _fp8()["h800"].hbm_bytes, 100 * _v()["kv_frac"]]
      if _fp8()["cap_h800"] == 0 else [0, 0, 0, 0])

# --- dashboard 1 ---------------------------------------------------------------------------------
claim("01.dash1_h800", "H800\n(ridge 295 FLOP/B); DeepSeek-V3 with 32k",
      lambda: [_v()["ridge_h800"], 32])
claim("01.dash1_batch", "a batch of 1,024", lambda: max(_dash().BATCH_CHOICES))  # the largest it offers

# --- 4 · times on the ideal roofline ---------------------------------------------------------------
claim("01.ideal_8k", "8k: 1.214 PFLOP / 2.496 PFLOP/s = **0.49",
      lambda: [8, _v()["br8"]["total"] / 1e15, _v()["nd"].peak_flops / 1e15, _v()["ideal8k"]])
claim("01.ideal_128k", "128k takes 16 s: 33× the 8k time for 16×",
      lambda: [128, _v()["pre"].loc[("ideal", 131072), "time_s"],
               _v()["pre"].loc[("ideal", 131072), "time_s"] / _v()["ideal8k"], 8, 131072 / 8192], rel_tol=0.02)
claim("01.ideal_decode", "1: 137.4 GB of weights / 16.3 TB/s = **8.4 ms** per token. At batch 64 (1k-token",
      lambda: [1, _v()["m"].streamed_weight_bytes_dense() / 1e9, _v()["nd"].peak_hbm_bw / 1e12, _v()["dec1"] * 1e3,
               64, 1])
claim("01.ideal_decode64", "15% longer, yet it makes 64",
      lambda: [(_v()["dec64"] / _v()["dec1"] - 1) * 100, 64])

# --- 5 · MFU ---------------------------------------------------------------------------------------
claim("01.mfu_tp", "TP over 2, 4 and 8 GPUs",
      lambda: sorted({k[0] for k in _v()["mfu"]}))
claim("01.mfu_ideal", "MFU = 100%",
      lambda: 100 * _v()["pre"].loc[("ideal", 8192), "mfu"])
claim("01.mfu_8k", "8k prefill on 8 GPUs took 1.55 s: 1.21 PFLOP / (1.55 s × 2.496 PFLOP/s) ≈ **31%",
      lambda: [8, 8, _v()["meas8k"], _v()["br8"]["total"] / 1e15, _v()["meas8k"], _v()["nd"].peak_flops / 1e15,
               100 * _v()["mfu"][(8, 8192)]])
claim("01.mfu_peak", "MFU is higher on 4 GPUs (57% at 2k) than on 8:",
      lambda: [4, 100 * _v()["mfu"][(4, 2048)], 2 if _v()["mfu"][(4, 2048)] > _v()["mfu"][(8, 2048)] else 0, 8])
claim("01.decode_measured", "at batch 1 is 45 ms, five times the 8.4",
      lambda: [1, _v()["meas_dec1"] * 1e3, _v()["dec1_512"] * 1e3])

# --- 6 · calibrated ------------------------------------------------------------------------------
claim("01.fit_linear", "linear layers at 82–94%",
      lambda: [100 * _v()["lin_eff"][0], 100 * _v()["lin_eff"][-1]])
claim("01.fit_rest", "4–7% and a fixed 48 ms\non each prefill. Decode streams HBM at 56%",
      lambda: [100 * _v()["att_eff"][0], 100 * _v()["att_eff"][-1], _v()["fit"]["prefill_overhead_s"] * 1e3,
               100 * _v()["fit"]["hbm_efficiency"]])
claim("01.fit_floor", "43 ms per-step floor (+0.4 ms per\nsequence). TP all-reduces are taken at 67%",
      lambda: [_v()["fit"]["decode_floor_s"] * 1e3, _v()["fit"]["decode_floor_s_per_seq"] * 1e3, 100 * _v()["nccl"]])
claim("01.fit_range", "128–8,192",
      lambda: [min(_v()["ex"].measured_prefill_mfu()["prompt_tokens"]),
               max(_v()["ex"].measured_prefill_mfu()["prompt_tokens"])])
claim("01.fit_quality", "21 measurements within ±9%. The ideal preset is 1.5–8×",
      lambda: [len(_v()["cal"]), 100 * _v()["cal"]["calibrated_rel_err"].abs().max(), _v()["ratio"].min(),
               _v()["ratio"].max()], rel_tol=0.08)
claim("01.modern", "MFU 0.65, HBM efficiency 0.72,\n0.5 ms + 20",
      lambda: [_v()["MODERN"].linear_efficiency_at(8), _v()["MODERN"].hbm_efficiency,
               _v()["MODERN"].step_overhead_s * 1e3, _v()["MODERN"].overhead_s_per_layer * 1e6])
claim("01.fig_points", "lists all 21 points", lambda: len(_v()["cal"]))
claim("01.modern_exception", "TP2's 2k prefill, which", lambda: _modern_exception()[:1])
claim("01.modern_exception_mfu", "67% MFU, above modern's 65% (0.71 s modern vs 0.69 s measured)",
      lambda: _modern_exception()[1:])
claim("01.past_8k", "calibrated preset past 8k", _fit_max_k)
claim("01.fit_growth", "growth between 2k and 8k\non a slow attention, 4–7%",
      lambda: [2, 8, 100 * _v()["att_eff"][0], 100 * _v()["att_eff"][-1]])
claim("01.flash", "kernels reach 50–70%", lambda: [100 * x for x in _v()["paper"].FLASH_ATTENTION_PEAK_SHARE],
      source="FlashAttention-2 (Dao 2023) §4.1")
claim("01.extrapolate", "128k tokens the calibrated prefill takes 220 s (MFU 7%), against 16",
      lambda: [128, _v()["pre"].loc[("calibrated", 131072), "time_s"], 100 * _v()["pre"].loc[("calibrated", 131072), "mfu"],
               _v()["pre"].loc[("ideal", 131072), "time_s"]])
claim("01.extrapolate_modern", "ideal and 25 s modern", lambda: _v()["pre"].loc[("modern", 131072), "time_s"])

# --- 7 · TP and NVLink -------------------------------------------------------------------------------
claim("01.tp_split", "With TP over 8 GPUs each layer's matrices are split 8",
      lambda: [_v()["nd"].n_gpus, _v()["nd"].n_gpus])
claim("01.ring", "2·(p−1)/p · d · 2", lambda: [2, -1, _v()["m"].bytes_per_param])
claim("01.ar_sends", "sends **4.59 MB**", lambda: _v()["ar"] / 1e6)
claim("01.ring_p", "With p = 8", lambda: _v()["nd"].n_gpus)
claim("01.ar_bytes", "2 × 80 layers × 2 × 7/8 × 8,192 × 2 B = 4.59",
      lambda: [2, _v()["L"], 2, 7, 8, _v()["d"], _v()["m"].bytes_per_param, _v()["ar"] / 1e6])
claim("01.ar_time", "half of the A800's 400 GB/s. At full speed that\ntakes 23 µs per token, against 55",
      lambda: [_v()["A800"].nvlink_bw / 1e9, _v()["c800"].tp_comm_s_per_token * 1e6,
               _v()["c800"].prefill_s_per_token * 1e6])
claim("01.ar_compute", "55 µs\nper token is 137.4 GFLOP / 2.496",
      lambda: [_v()["c800"].prefill_s_per_token * 1e6, _v()["per_tok"] / 1e9, _v()["nd"].peak_flops / 1e15])
claim("01.ar_share", "the all-reduce takes 34%\nof the per-token time (matmuls plus all-reduce) on the A800, and 25% on an A100.",
      lambda: [100 * _v()["ex"].tp_comm_share(_v()["m"], _v()["nd"], "calibrated"),
               100 * _v()["ex"].tp_comm_share(_v()["m"], _v()["nd100"], "calibrated")])
claim("01.ar_share_peak", "the all-reduce at full speed\nadds ~40% on the A800 and ~28% on an A100 (600 GB/s).",
      lambda: [100 * _v()["c800"].tp_comm_s_per_token / _v()["c800"].prefill_s_per_token,
               100 * _v()["c100"].tp_comm_s_per_token / _v()["c100"].prefill_s_per_token,
               _v()["A100"].nvlink_bw / 1e9], rel_tol=0.06)
claim("01.cal_penalty", "The A800's slower NVLink costs ≈ 93 ms.", lambda: _v()["penalty"] * 1e3)
claim("01.mfu_peak_8", "For 8 GPUs\nthat peak is 2.496 PFLOP/s", lambda: [8, _v()["nd100"].peak_flops / 1e15])
claim("01.repro_8k", "so the calibrated 8k prefill is compared", lambda: [
    int(re.search(r"\.n(\d+)\.", mt.name).group(1)) / 1024 for mt in _v()["ex"].metrics()
    if mt.name.startswith("roofline.prefill_s") and mt.paper is not None])
claim("01.ar_share_again", "less than the ~40% and ~28% added", lambda: [
    100 * _v()["c800"].tp_comm_s_per_token / _v()["c800"].prefill_s_per_token,
    100 * _v()["c100"].tp_comm_s_per_token / _v()["c100"].prefill_s_per_token], rel_tol=0.06)
claim("01.ar_share_box", "Why the table's shares are not ~40% and ~28%", lambda: [
    100 * _v()["c800"].tp_comm_s_per_token / _v()["c800"].prefill_s_per_token,
    100 * _v()["c100"].tp_comm_s_per_token / _v()["c100"].prefill_s_per_token], rel_tol=0.06)
claim("01.dash2_readout", "Watch the 8k prefill", lambda: _dash().READOUT_PROMPT / 1024)
claim("01.nccl", "Calibrated takes the all-reduce at 67%", lambda: 100 * _v()["nccl"])
claim("01.modern_folds", "its 65% MFU", lambda: 100 * _v()["MODERN"].linear_efficiency_at(8))
claim("01.cal_a800", "≈ 1.68 s instead\nof 1.59 s for an 8k", lambda: [_v()["cal8k_a800"], _v()["cal8k_a100"], 8])
claim("01.dash2_nvlink", "(400 = A800, 600 = A100, 900",
      lambda: [_v()["A800"].nvlink_bw / 1e9, _v()["A100"].nvlink_bw / 1e9,
               _v()["rf"].get_gpu("h100").nvlink_bw / 1e9])

# --- what the paper says ---------------------------------------------------------------------------
claim("01.box_kv", "| 327,680 B = 320 KiB | same", lambda: [_v()["kv"], _v()["kv"] / 1024])
claim("01.box_kv_paper", '| "320 KB" (', lambda: _v()["paper"].KV_PER_TOKEN_KB, source="FAST'25 §2.2")
claim("01.box_compute", "137.4 GFLOP + 2.62 MFLOP per key attended | ≈ 140 GFLOP with a 1k-token context",
      lambda: [_v()["per_tok"] / 1e9, _v()["att"] / 1e6, (_v()["per_tok"] + _v()["att"] * 1024) / 1e9, 1])
claim("01.box_eq1", "| 8k prefill FLOPs | 1.14 PFLOP (",
      lambda: [8, _v()["eq1"].loc["total", "eq1_flops"] / 1e15])
claim("01.box_eq1_coef", "a=4, b=22) | 1.21 PFLOP | our linear coefficient is 25.5 (from the shapes), not 22;",
      lambda: [_v()["paper"].EQ1_A, _v()["paper"].EQ1_B, _v()["br8"]["total"] / 1e15,
               _v()["eq1"].loc["linear", "ours_coef"], _v()["paper"].EQ1_B])
claim("01.box_tp8", "8k prefill | 1.55 s measured (A100, SplitwiseSim) | ideal 0.49 s; calibrated 1.68 s on A800 (1.59 s on A100); modern 0.75 s",
      lambda: [8, _v()["meas8k"], _v()["ideal8k"], _v()["cal8k_a800"], _v()["cal8k_a100"], _v()["modern8k"]])
claim("01.box_tp8_why", "stack ran at 31% MFU; the A800's NVLink costs ≈ 93",
      lambda: [100 * _v()["mfu"][(8, 8192)], _v()["penalty"] * 1e3])
claim("01.box_decode", "1 | 45 ms measured (A100, SplitwiseSim) | ideal 8.4 ms; calibrated 43.5 ms | the measured stack is bound by a ≈ 43",
      lambda: [1, _v()["meas_dec1"] * 1e3, _v()["dec1_512"] * 1e3, _v()["dec1_cal"] * 1e3,
               _v()["fit"]["decode_floor_s"] * 1e3])

# --- questions (markdown) -------------------------------------------------------------------------
claim("01.q1_text", "one 2,048-token sequence", _kv_n)
claim("01.q2_text", "(10¹⁵ FLOP) does the prefill of one 4,096-token", lambda: [_pf_unit(), _pf_n()])
claim("01.q3_text", "2,048 tokens took 274 ms on 8 × A100 (312",
      lambda: [_mfu_q()[1], _mfu_q()[2], _mfu_q()[0], _v()["A100"].flops_bf16 / 1e12])
claim("01.q4_text", "512-token context", _ridge_ctx)
claim("01.q4_text2", "runs on 8 × A800 under", lambda: _v()["nd"].n_gpus)
claim("01.q5_text", "runs at 67% of one NVLink", lambda: 100 * _v()["nccl"])
claim("01.q5_text2", "an 8k prefill on 8 GPUs with\n900 GB/s NVLink (H100) than with 400 GB/s (A800)? Start from the 4.59",
      lambda: [_nv_q()[0], 8, _nv_q()[1], _nv_q()[2], _v()["ar"] / 1e6])

# --- summary -----------------------------------------------------------------------------------------
claim("01.sum_flops", "137 GFLOP in the matmuls plus 2.6", lambda: [_v()["per_tok"] / 1e9, _v()["att"] / 1e6])
claim("01.sum_kv", "**320 KiB** of KV cache.", lambda: _v()["kv"] / 1024)
claim("01.sum_ridge", "the A800's ridge is 153.", lambda: _v()["ridge"])
claim("01.sum_measured", "8k prefill at 31% MFU. The calibrated preset fits it within 9%",
      lambda: [8, 100 * _v()["mfu"][(8, 8192)], 100 * _v()["cal"]["calibrated_rel_err"].abs().max()], rel_tol=0.08)
claim("01.sum_past_8k", "extrapolates badly past 8k", _fit_max_k)
claim("01.sum_penalty", "400 GB/s NVLink makes an 8k prefill ≈ 93 ms slower",
      lambda: [_v()["A800"].nvlink_bw / 1e9, 8, _v()["penalty"] * 1e3])
claim("01.sum_next", "320 KiB of KV is cheaper to *reload* than 140",
      lambda: [_v()["kv"] / 1024, (_v()["per_tok"] + _v()["att"] * 1024) / 1e9])

# --- exercises ---------------------------------------------------------------------------------------
claim("01.x_kv_q", "one 2,048-token sequence of LLaMA2-70B holds in BF16 (all 80 layers)",
      lambda: [_kv_n(), _v()["L"]], where="01.kv_bytes")
claim("01.x_kv_hint", "head dim × 2 bytes", lambda: _v()["m"].kv_bytes_per_elem, where="01.kv_bytes")
claim("01.x_kv_why", "320 KiB per token × 2,048 tokens = 640 MiB; with 64 KV heads (MHA) it would be 8×",
      lambda: [_v()["kv"] / 1024, _kv_n(), answer_of("01.kv_bytes"), _v()["m"].n_heads, _v()["m"].gqa_ratio],
      where="01.kv_bytes")
claim("01.x_pf_q", "one 4,096-token", _pf_n, where="01.prefill_pflop_4k")
claim("01.x_pf_q2", "in PFLOP (1e15).", _pf_unit, where="01.prefill_pflop_4k")
claim("01.x_pf_hint", "n × 137.4 GFLOP (matmuls + LM head) + causal attention 2.62 MFLOP × n²/2.",
      lambda: [_v()["per_tok"] / 1e9, _v()["att"] / 1e6, 2], where="01.prefill_pflop_4k")
claim("01.x_pf_why", "0.563 PFLOP in the matmuls and LM head + 0.022 in causal attention ≈ 0.585 PFLOP",
      lambda: [(_v()["m"].prefill_flops_breakdown(_pf_n())["linear"] + _v()["m"].prefill_flops_breakdown(_pf_n())["lm_head"]) / 1e15,
               _v()["m"].prefill_flops_breakdown(_pf_n())["attention"] / 1e15, answer_of("01.prefill_pflop_4k")],
      where="01.prefill_pflop_4k")
claim("01.x_pf_why2", "less than half the 8k prompt's 1.21, because attention grows as n².",
      lambda: [8 if answer_of("01.prefill_pflop_4k") < 0.5 * _v()["br8"]["total"] / 1e15 else 0,
               _v()["br8"]["total"] / 1e15], where="01.prefill_pflop_4k")
claim("01.x_mfu_q", "TP8 prefill of 2,048 tokens (274 ms on 8 × A100, 312",
      lambda: [_mfu_q()[1], _mfu_q()[2], 8, _v()["A100"].flops_bf16 / 1e12] if _mfu_q()[0] == 8 else [0] * 4,
      where="01.measured_mfu_2k")
claim("01.x_mfu_hint", "8 × 312e12). Give a fraction (0.4), not a percentage (40).",
      lambda: [8, _v()["A100"].flops_bf16, round(answer_of("01.measured_mfu_2k"), 1),
               round(100 * answer_of("01.measured_mfu_2k"), -1)], where="01.measured_mfu_2k")
claim("01.x_mfu_why", "0.287 PFLOP / (0.274 s × 2.496 PFLOP/s) ≈ 0.42: better than the 8k prompt's 0.31.",
      lambda: [_v()["m"].prefill_flops(_mfu_q()[1]) / 1e15, _mfu_q()[2] / 1e3, _v()["nd100"].peak_flops / 1e15,
               answer_of("01.measured_mfu_2k"), 8, _v()["mfu"][(8, 8192)]], where="01.measured_mfu_2k")
claim("01.x_ridge_q", "512-token contexts turns compute-bound on 8×A800", lambda: [_ridge_ctx(), _v()["nd"].n_gpus],
      where="01.decode_ridge_batch")
claim("01.x_ridge_hint", "b·512·KV bytes per token) equal to the ridge point 312e12 / 2.039e12 ≈ 153",
      lambda: [_ridge_ctx(), _v()["A800"].flops_bf16, _v()["A800"].hbm_bw, _v()["ridge"]], where="01.decode_ridge_batch")
claim("01.x_ridge_why", "b·138.8 GFLOP = 153 × (137.4 GB + b × 0.168 GB) → b ≈ 186, fewer than the 237 of 1,024-token",
      lambda: [(_v()["per_tok"] + _v()["att"] * _ridge_ctx()) / 1e9, _v()["ridge"],
               _v()["m"].streamed_weight_bytes_dense() / 1e9, _ridge_ctx() * _v()["kv"] / 1e9,
               answer_of("01.decode_ridge_batch"), _v()["ridge_b"], 1024], where="01.decode_ridge_batch", rel_tol=0.01)
claim("01.x_nv_q", "all-reduce at 67% of one NVLink direction", lambda: 100 * _v()["nccl"], where="01.nvlink_penalty_ms")
claim("01.x_nv_q2", "8k LLaMA2-70B prefill on 8 GPUs with NVLink 900 GB/s (H100) than with 400",
      lambda: [_nv_q()[0], 8, _nv_q()[1], _nv_q()[2]], where="01.nvlink_penalty_ms")
claim("01.x_nv_hint", "Each GPU sends 4.59 MB per token over one direction: half the figure, here 450 and 200 GB/s. "
      "Multiply by 0.67, then by 8,192 tokens.",
      lambda: [_v()["ar"] / 1e6, _nv_q()[1] / 2, _nv_q()[2] / 2, _v()["nccl"], 8192], where="01.nvlink_penalty_ms")
claim("01.x_nv_why", "4.59 MB per token: 34.2 µs at 200 GB/s × 0.67 vs 15.2 µs at 450 GB/s × 0.67 → 19.0 µs × 8192 ≈ 156 ms.",
      lambda: [_v()["ar"] / 1e6, _ar_us_at(_nv_q()[2]), _nv_q()[2] / 2, _v()["nccl"], _ar_us_at(_nv_q()[1]),
               _nv_q()[1] / 2, _v()["nccl"], _ar_us_at(_nv_q()[2]) - _ar_us_at(_nv_q()[1]), 8192,
               answer_of("01.nvlink_penalty_ms")], where="01.nvlink_penalty_ms")


# --- solutions notebook: the worked answers -------------------------------------------------------
_S = "solutions"
restate(_S, "01.kv_formula", "01.title_gpus")


def _w(key):
    return _v()[key]


def _per_seq(ctx: int) -> float:
    """FLOPs per sequence per decode step at ``ctx`` tokens of context."""
    return _w("per_tok") + _w("att") * ctx


def _nv(gpu) -> float:
    """One NVLink direction at the all-reduce efficiency, B/s."""
    return gpu.nvlink_bw / 2 * _w("nccl")


def _ar_us(gpu) -> float:
    return 1e6 * _w("ar") / _nv(gpu)


claim("01.sol_q1", "(GQA: 8 of them, not the 64 query\nheads), each of head dimension 128, at 2 bytes per element",
      lambda: [_w("m").n_kv_heads, _w("m").n_heads, _w("m").d_head, _w("m").kv_bytes_per_elem], where=_S)
claim("01.sol_q1_kv", "× 128 × 2 B = **327,680 B = 320 KiB** per token.\nFor 2,048 tokens: 320 KiB × 2,048 = 655,360 KiB = **640 MiB**.",
      lambda: [_w("m").d_head, _w("m").kv_bytes_per_elem, _w("kv"), _w("kv") / 1024, _kv_n(), _w("kv") / 1024, _kv_n(),
               _kv_n() * _w("kv") / 1024, answer_of("01.kv_bytes")], where=_S)
claim("01.sol_q1_q", "MiB of KV cache in one 2,048-token sequence?", _kv_n, where=_S)
claim("01.sol_q1_block", "A 512-token block is therefore 160 MiB, and 1 TB of DRAM holds about 3 M tokens", lambda: [
    512, 512 * _w("kv") / 2**20, 1, _w("paper").TOKENS_PER_TB_M], where=_S, source="FAST'25 §2.2")


def _br(key):
    return _w("m").prefill_flops_breakdown(_pf_n())[key] / 1e15


claim("01.sol_q2", "one 4,096-token prompt?", _pf_n, where=_S)
claim("01.sol_q2_lin", "855.6 M matmul weights per layer × 80 = 68.45 B; × 2 FLOP × 4,096 tokens\n  = 0.5608 PFLOP",
      lambda: [_w("m").layer_matmul_params() / _w("L") / 1e6, _w("L"), _w("m").layer_matmul_params() / 1e9, 2, _pf_n(),
               _br("linear")], where=_S)
claim("01.sol_q2_att", "4 × 128 × 64 × 80 = 2.62 MFLOP per (token, key) pair; 4,096²/2 = 8.4 M pairs\n  → 0.0220 PFLOP",
      lambda: [4, _w("m").d_head, _w("m").n_heads, _w("L"), _w("att") / 1e6, _pf_n() ** 2, 2, _pf_n() ** 2 / 2 / 1e6,
               _br("attention")], where=_S)
claim("01.sol_q2_lm", "2 × 32,000 × 8,192 = 0.524 GFLOP per token × 4,096 = 0.0021 PFLOP", lambda: [
    2, _w("m").vocab, _w("d"), _w("m").lm_head_flops_per_token() / 1e9, _pf_n(), _br("lm_head")], where=_S)
claim("01.sol_q2_total", "Total **≈ 0.585 PFLOP**: less than half the 8k prompt's 1.214, because attention grows as n²",
      lambda: [_br("total"), 8 if _br("total") < 0.5 * _w("br8")["total"] / 1e15 else 0, _w("br8")["total"] / 1e15],
      where=_S)
claim("01.sol_q3", "TP8 prefill of 2,048 tokens (274 ms on 8 × A100)?", lambda: [*_mfu_q()[1:], 8], where=_S)
claim("01.sol_q3_mfu", "= 0.2869 PFLOP / (0.274 s × 8 × 312 TFLOP/s)\n= 0.2869 / (0.274 × 2.496) = 0.2869 / 0.684 ≈ **0.42**.",
      lambda: [_w("m").prefill_flops(_mfu_q()[1]) / 1e15, _mfu_q()[2] / 1e3, 8, _w("A100").flops_bf16 / 1e12,
               _w("m").prefill_flops(_mfu_q()[1]) / 1e15, _mfu_q()[2] / 1e3, 8 * _w("A100").flops_bf16 / 1e15,
               _w("m").prefill_flops(_mfu_q()[1]) / 1e15, _mfu_q()[2] / 1e3 * 8 * _w("A100").flops_bf16 / 1e15,
               answer_of("01.measured_mfu_2k")], where=_S)
claim("01.sol_q3_8k", "Better than the 8k prompt's 0.31.", lambda: [8, _w("mfu")[(8, 8192)]], where=_S)
claim("01.sol_q3_tp4", "reached 0.43 on 8k and 0.57 on 2k prompts", lambda: [
    _w("mfu")[(4, 8192)], 8, _w("mfu")[(4, 2048)], 2], where=_S)
claim("01.sol_q4", "(512-token contexts, 8 × A800,\nideal preset)", lambda: [_ridge_ctx(), _w("nd").n_gpus], where=_S)
claim("01.sol_q4_flops", "FLOPs = 137.43 G (matmuls + LM head) + 2.62 M × 512 (attention)\n= 138.77 GFLOP; "
      "KV read = 512 × 327,680 B = 0.1678 GB. Shared by the batch: 137.43 GB of weights", lambda: [
          _w("per_tok") / 1e9, _w("att") / 1e6, _ridge_ctx(), _per_seq(_ridge_ctx()) / 1e9, _ridge_ctx(), _w("kv"),
          _ridge_ctx() * _w("kv") / 1e9, _w("m").streamed_weight_bytes_dense() / 1e9], where=_S)
claim("01.sol_q4_ridge", "312 / 2.039 = 153.0 FLOP/B:\n\nb × 138.77 = 153.0 × (137.43 + 0.1678 b)  →  "
      "b × (138.77 − 25.67) = 21,029  →  **b ≈ 186**", lambda: [
          _w("A800").flops_bf16 / 1e12, _w("A800").hbm_bw / 1e12, _w("ridge"), _per_seq(_ridge_ctx()) / 1e9, _w("ridge"),
          _w("m").streamed_weight_bytes_dense() / 1e9, _ridge_ctx() * _w("kv") / 1e9, _per_seq(_ridge_ctx()) / 1e9,
          _w("ridge") * _ridge_ctx() * _w("kv") / 1e9,
          _w("ridge") * _w("m").streamed_weight_bytes_dense() / 1e9, answer_of("01.decode_ridge_batch")], where=_S,
      rel_tol=0.001)
claim("01.sol_q4_nokv", "Without the KV term the answer would be ≈ 152", lambda:
      _w("ridge") * _w("m").streamed_weight_bytes_dense() / _per_seq(_ridge_ctx()), where=_S, rel_tol=0.01)
claim("01.sol_q4_1024", "With 1,024-token contexts the answer is 237, and at b = 410 there the KV reads equal the weight reads.",
      lambda: [1024, _w("ridge_b"), _w("m").streamed_weight_bytes_dense() / (1024 * _w("kv"))], where=_S)
claim("01.sol_q4_equal", "For 4k-token contexts the asymptotic intensity, 148.2 G / 1.342 GB = 110 FLOP/B", lambda: [
          4, _per_seq(4096) / 1e9, 4096 * _w("kv") / 1e9, _per_seq(4096) / (4096 * _w("kv"))], where=_S)
claim("01.sol_q4_cap", "capped by KV capacity, 1.47 M tokens", lambda: _w("cap") / 1e6, where=_S)
claim("01.sol_q5", "milliseconds saved on an 8k prefill with 900 GB/s NVLink\ninstead of 400 GB/s?", lambda: [
    _nv_q()[0], _nv_q()[1], _nv_q()[2]], where=_S)
claim("01.sol_q5_ar", "2 per layer × 80 layers × 2 × (7/8) × 8,192 × 2 B = 4.59 MB", lambda: [
    2, _w("L"), 2, 7, 8, _w("d"), 2, _w("ar") / 1e6], where=_S)
claim("01.sol_q5_nv", "at 67% efficiency (nccl-tests): 400 GB/s → 200 GB/s × 0.67 =\n134 GB/s → 34.2 µs per token; "
      "900 GB/s → 450 GB/s × 0.67 = 301.5 GB/s → 15.2 µs. Difference\n19.0 µs × 8,192 tokens ≈ **156 ms**, about 9% "
      "of the A800's 1.68 s prefill. (A100's 600 GB/s would\nsave 93 ms.)", lambda: [
          100 * _w("nccl"), _nv_q()[2], _nv_q()[2] / 2, _w("nccl"), _nv_q()[2] / 2 * _w("nccl"), _ar_us_at(_nv_q()[2]),
          _nv_q()[1], _nv_q()[1] / 2, _w("nccl"), _nv_q()[1] / 2 * _w("nccl"), _ar_us_at(_nv_q()[1]),
          _ar_us_at(_nv_q()[2]) - _ar_us_at(_nv_q()[1]), 8192, answer_of("01.nvlink_penalty_ms"),
          100 * answer_of("01.nvlink_penalty_ms") / 1e3 / _w("cal8k_a800"), _w("cal8k_a800"),
          _w("A100").nvlink_bw / 1e9, _w("penalty") * 1e3], where=_S)
