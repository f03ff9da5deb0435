"""Model shapes and FLOP/byte counting against hand-worked numbers and published figures."""
import dataclasses
import math
import re

import pytest
from hypothesis import given, settings, strategies as st

from mooncake_lab import models as M

L70 = M.LLAMA2_70B


def test_kv_bytes_per_token_hand_checked():
    # LLaMA2-70B: 2 (K,V) × 80 layers × 8 KV heads × 128 dims × 2 B = 327,680 B = 320 KiB
    assert L70.kv_bytes_per_token() == 2 * 80 * 8 * 128 * 2 == 327_680 == 320 * 1024
    # OPT-13B (MHA): 2 × 40 × 40 × 128 × 2 B = 819,200 B (≈ 819 KB, seed lecture)
    assert M.OPT_13B.kv_bytes_per_token() == 2 * 40 * 5120 * 2 == 819_200
    # LLaMA2-7B (MHA): 2 × 32 × 32 × 128 × 2 = 524,288
    assert M.LLAMA2_7B.kv_bytes_per_token() == 524_288
    # DeepSeek-V3 (MLA): 61 layers × (512 latent + 64 RoPE key) × 2 B = 70,272 B
    assert M.DEEPSEEK_V3.kv_bytes_per_token() == 61 * 576 * 2 == 70_272
    # per 512-token block: 160 MiB; 128k tokens: 40 GiB (FAST'25 "40 GB")
    assert 512 * L70.kv_bytes_per_token() == 160 * 2**20
    assert 131072 * L70.kv_bytes_per_token() == 40 * 2**30


def test_gqa_shrinks_kv_by_head_ratio():
    mha = dataclasses.replace(L70, n_kv_heads=64)
    assert mha.kv_bytes_per_token() / L70.kv_bytes_per_token() == L70.gqa_ratio == 8


def test_llama2_70b_parameters_and_flops_per_token():
    # per layer matmuls: q,o 2·8192² + k,v 2·8192·1024 + SwiGLU 3·8192·28672 = 855,638,016
    per_layer = 2 * 8192 * 8192 + 2 * 8192 * 1024 + 3 * 8192 * 28672
    assert per_layer == 855_638_016
    assert L70.layer_matmul_params() == 80 * per_layer == 68_451_041_280
    # + 2 untied embeddings 2·32000·8192 + RMSNorms 80·2·8192 + 8192 = 68,976,648,192 (≈ 69 B)
    assert L70.parameters() == 68_451_041_280 + 2 * 32000 * 8192 + 80 * 2 * 8192 + 8192
    assert L70.weight_bytes() == pytest.approx(137.95e9, rel=1e-4)   # ≈ 138 GB (mooncake_paper.md)
    # linear 2 × 68.45e9 + LM head 2×32000×8192 = 136.90 + 0.524 = 137.43 GFLOP per token
    assert L70.linear_flops_per_token() == 2 * 68_451_041_280
    assert L70.lm_head_flops_per_token() == 524_288_000
    per_tok = L70.prefill_flops(4096) / 4096                     # + attention ≈ 5.4 GFLOP at 4k
    assert 137e9 < per_tok < 145e9                               # seed lecture: "≈ 140 GFLOP"


def test_published_parameter_counts():
    assert M.LLAMA2_7B.parameters() == 6_738_415_616               # HF model card count
    assert M.OPT_13B.parameters() == pytest.approx(12.85e9, rel=5e-3)
    assert M.LLAMA3_70B.parameters() == pytest.approx(70.55e9, rel=5e-3)
    assert M.DEEPSEEK_V3.parameters() == pytest.approx(671e9, rel=1e-2)       # DeepSeek-V3 report
    assert M.DEEPSEEK_V3.active_parameters() == pytest.approx(37e9, rel=3e-2)  # "37B activated"


def test_causal_attention_hand_checked():
    # 4·L·d_head·H·n·(c + n/2) with n = c = 8192: 4·80·128·64 = 2,621,440 per (token×key)
    br = L70.prefill_flops_breakdown(8192)
    assert br["attention"] == 2_621_440 * 8192 * 4096 == 87_960_930_222_080
    assert L70.prefill_flops_breakdown(8192, 8192)["attention"] == 2_621_440 * 8192 * (8192 + 4096)
    assert br["lm_head"] == 8192 * 524_288_000
    assert br["total"] == pytest.approx(br["linear"] + br["attention"] + br["lm_head"])


def test_eq1_and_ours():
    # FAST'25 Eq.1: 80·(4·8192²·8192 + 22·8192·8192²) = 80·26·8192³ = 1.1435e15 ("1.14 PFLOP")
    assert M.fast25_eq1_prefill_flops(8192) == 80 * 26 * 8192**3
    assert M.fast25_eq1_prefill_flops(8192) == pytest.approx(1.14e15, rel=5e-3)
    # ours: 8192 × 137.43 GFLOP + 88.0 TFLOP attention = 1.2138e15 (Eq.1 has no LM head, b=22 ≈ 21.9
    # linear coefficient, and a=4 without the causal ½ — different n² term)
    assert L70.prefill_flops(8192) == pytest.approx(1.2138e15, rel=1e-4)


@settings(max_examples=60, deadline=None)
@given(a=st.integers(1, 50_000), b=st.integers(1, 50_000), c=st.integers(0, 50_000))
def test_prefill_in_chunks_adds_up(a, b, c):
    # causal counting is exact: prefilling a then b tokens == prefilling a+b at once
    whole = L70.prefill_flops(a + b, c)
    parts = L70.prefill_flops(a, c) + L70.prefill_flops(b, c + a)
    assert parts == pytest.approx(whole, rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 200_000), extra=st.integers(1, 1000), c=st.integers(0, 100_000))
def test_more_tokens_more_flops(n, extra, c):
    assert L70.prefill_flops(n + extra, c) > L70.prefill_flops(n, c)
    assert L70.prefill_flops(n, c + extra) > L70.prefill_flops(n, c)


def test_decode_flops_and_bytes():
    # b=1, ctx=512: flops = 137.43e9 + 2,621,440 × 512
    assert L70.decode_flops(1, 512) == 137_426_370_560 + 2_621_440 * 512
    # bytes = weights minus the input embedding table (137,953,296,384 − 524,288,000) + KV of 512 tokens
    assert L70.decode_bytes(1, 512) == 137_429_008_384 + 512 * 327_680
    assert L70.decode_bytes(8, 512) == L70.decode_bytes(1, 512)   # dense: weights read once per step


def test_mla_decode_attends_in_the_absorbed_form():
    # Issue 13 §6: decode reads only the 576-value latent per layer, so each of the 128 heads scores
    # against it (2·576) and sums the 512-value latent (2·512): 2·61·128·1088 = 16,990,208 FLOP per key
    # (the un-absorbed 2·61·128·(192 + 128) = 4,997,120 is what a prefill that decompresses K/V costs).
    ds = M.DEEPSEEK_V3
    assert ds.decode_attention_flops_coefficient() == 2 * 61 * 128 * (576 + 512) == 16_990_208
    assert ds.attention_flops_coefficient() == 2 * 61 * 128 * (192 + 128) == 4_997_120
    per_key = ds.decode_flops(1, 1000) - ds.decode_flops(1, 0)
    assert per_key == pytest.approx(1000 * 16_990_208)
    assert per_key / (ds.decode_bytes(1, 1000) - ds.decode_bytes(1, 0)) == pytest.approx(241.8, abs=0.05)
    # MHA/GQA: the same per-key count in both phases
    assert L70.decode_attention_flops_coefficient() == L70.attention_flops_coefficient() == 2_621_440


def test_moe_experts_touched():
    ds = M.DEEPSEEK_V3
    assert ds.expected_experts_touched(1) == pytest.approx(8)      # top-8 of 256
    assert ds.expected_experts_touched(10_000) == pytest.approx(256)
    assert ds.decode_bytes(64, 0) > ds.decode_bytes(1, 0)
    assert L70.expected_experts_touched(64) == 0.0


def test_lookup_and_frozen():
    assert M.get_model("llama2-70b") is L70 and M.get_model("LLaMA2_70B") is L70
    assert M.get_model("opt-13b") is M.OPT_13B
    with pytest.raises(ValueError, match=r"model: unknown model 'gpt-5'; allowed: LLaMA2-70B"):
        M.get_model("gpt-5")
    with pytest.raises(dataclasses.FrozenInstanceError):
        L70.n_layers = 3


@pytest.mark.parametrize("args,param", [((0,), "n_new"), ((-5,), "n_new"), ((math.nan,), "n_new"),
                                        (("many",), "n_new"), ((10, -1), "n_cached"),
                                        ((10, math.inf), "n_cached"), ((True,), "n_new")])
def test_bad_prefill_input(args, param):
    with pytest.raises(ValueError, match=rf"(^|\.){re.escape(param)}(\[[^\]]*\])?(: | must | values )"):
        L70.prefill_flops(*args)


def test_bad_decode_input():
    with pytest.raises(ValueError, match=r"batch_size must be a finite number >= 1, got 0"):
        L70.decode_flops(0, 100)
    with pytest.raises(ValueError, match=r"^context_tokens must "):
        L70.decode_bytes(1, float("nan"))


def test_deepseek_v3_fp8_hand_checked():
    # FP8 release: same shapes and parameters, 1 byte per weight → 671,026,279,424 B ≈ 671 GB (half of BF16)
    fp8, bf16 = M.DEEPSEEK_V3_FP8, M.DEEPSEEK_V3
    assert fp8.parameters() == bf16.parameters() == 671_026_279_424
    assert fp8.weight_bytes() == fp8.parameters() * 1 == bf16.weight_bytes() / 2
    assert round(fp8.weight_bytes() / 1e9) == 671
    # KV stays BF16 (DeepSeek's inference code): 61 × (512 + 64) × 2 B = 70,272 B, as in BF16
    assert fp8.kv_bytes_per_token() == bf16.kv_bytes_per_token() == 61 * 576 * 2 == 70_272
    # FLOPs do not depend on the storage format
    assert fp8.prefill_flops(4096) == bf16.prefill_flops(4096)
    assert M.get_model("deepseek-v3-fp8") is fp8 and M.get_model("DSV3_FP8") is fp8


def test_deepseek_v3_fp8_fits_h20_node_not_h800():
    from mooncake_lab import hardware as H, roofline as rf
    fp8 = M.DEEPSEEK_V3_FP8
    # 8 × H20: 8 × 96 GiB = 768 GiB; 90% usable = 742,170,348,748.8 B; minus 671,026,279,424 B of weights
    # = 71,144,069,324.8 B of KV / 70,272 B per token ≈ 1,012,410 tokens
    h20_kv = 0.9 * 8 * 96 * 2**30 - 671_026_279_424
    assert H.H20_NODE.hbm_bytes == 768 * 2**30
    assert rf.decode_kv_capacity_tokens(fp8, H.H20_NODE) == pytest.approx(h20_kv / 70_272, rel=1e-12)
    assert 1.01e6 < h20_kv / 70_272 < 1.02e6
    # 8 × H800: 640 GiB = 687.19 GB; the weights are 97.6% of it, above the 90% share → no KV room
    assert H.H800_NODE.hbm_bytes == 640 * 2**30
    assert 0.97 < 671_026_279_424 / (640 * 2**30) < 0.98
    assert rf.decode_kv_capacity_tokens(fp8, H.H800_NODE) == 0.0
    # BF16 weights (1.34 TB) fit neither node
    assert rf.decode_kv_capacity_tokens(M.DEEPSEEK_V3, H.H20_NODE) == 0.0
