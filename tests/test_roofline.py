"""Roofline times: hand-worked ideal numbers, kernel == plain-Python reference, monotonicity, errors."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from mooncake_lab import roofline as rf
from mooncake_lab.calibration import Preset
from mooncake_lab.hardware import A100_NODE, A800_NODE, A800, H800_NODE
from mooncake_lab.models import DEEPSEEK_V3, LLAMA2_70B, OPT_13B

PRESETS = ("ideal", "calibrated", "modern")


def reference_prefill(model, node, preset, n, c):
    """Plain-Python restatement from the model's counts (not from the CostModel)."""
    p = rf.get_preset(preset)
    tp = node.n_gpus
    br = model.prefill_flops_breakdown(n, c)
    compute = (br["linear"] + br["lm_head"]) / (node.peak_flops * p.linear_efficiency_at(tp)) \
        + br["attention"] / (node.peak_flops * p.attn_efficiency_at(tp)) + p.prefill_overhead_s
    if p.tp_comm:
        compute += n * 2 * model.n_layers * 2 * (tp - 1) / tp * model.d_model * 2 / (
            node.gpu.nvlink_bw / 2 * p.tp_comm_efficiency)
    bytes_ = (model.streamed_weight_bytes_dense() + model.expert_bytes() * model.expected_experts_touched(n)
              + model.kv_bytes_per_token() * (n + c))
    memory = bytes_ / (node.peak_hbm_bw * p.hbm_efficiency)
    return p.step_overhead_s + p.overhead_s_per_layer * model.n_layers + max(compute, memory)


def reference_decode(model, node, preset, b, ctx):
    p = rf.get_preset(preset)
    tp = node.n_gpus
    comm = 0.0
    if p.tp_comm:
        comm = b * 2 * model.n_layers * 2 * (tp - 1) / tp * model.d_model * 2 / (node.gpu.nvlink_bw / 2
                                                                                  * p.tp_comm_efficiency)
    compute = (b * (model.linear_flops_per_token() + model.lm_head_flops_per_token()) / p.linear_efficiency_at(tp)
               + model.decode_attention_flops_coefficient() * ctx / p.attn_efficiency_at(tp)) / node.peak_flops + comm
    memory = model.decode_bytes(b, ctx) / (node.peak_hbm_bw * p.hbm_efficiency)
    floor = p.decode_floor_s + p.decode_floor_s_per_seq * b
    return p.step_overhead_s + p.overhead_s_per_layer * model.n_layers + max(floor, memory, compute)


def test_ideal_prefill_8192_hand_checked():
    # 1,213,757,757,849,600 FLOP / (8 × 312e12) = 0.48628 s; weights would take only 8.4 ms
    assert rf.prefill_time(LLAMA2_70B, A800_NODE, 8192) == pytest.approx(1.2137577578496e15 / 2.496e15, rel=1e-9)
    assert rf.mfu(LLAMA2_70B, A800_NODE, 8192, preset="ideal") == pytest.approx(1.0)


def test_ideal_decode_b1_hand_checked():
    # (137,429,008,384 B weights + 512 × 327,680 B KV) / (8 × 2,039e9 B/s) = 8.4353 ms ("≈ 8.5 ms")
    t = rf.decode_step_time(LLAMA2_70B, A800_NODE, 1, 512)
    assert t == pytest.approx((137_429_008_384 + 512 * 327_680) / 16.312e12, rel=1e-9)
    assert t == pytest.approx(8.5e-3, rel=0.02)


def test_short_prefill_is_memory_bound_ideal():
    # n = 64: compute 64 × 137.4e9 / 2.496e15 = 3.5 ms < weights 137.4e9 / 16.312e12 = 8.4 ms
    t = rf.prefill_time(LLAMA2_70B, A800_NODE, 64)
    assert t == pytest.approx((137_429_008_384 + 64 * 327_680) / 16.312e12, rel=1e-9)


def test_calibrated_a800_pays_for_slower_nvlink():
    # same GPU die; A800's 400 GB/s NVLink makes TP all-reduce 1.5× slower than the A100's 600
    a800 = rf.prefill_time(LLAMA2_70B, A800_NODE, 8192, preset="calibrated")
    a100 = rf.prefill_time(LLAMA2_70B, A100_NODE, 8192, preset="calibrated")
    comm_a100 = 8192 * rf.tp_allreduce_bytes_per_token(LLAMA2_70B, 8) / (300e9 * 0.67)
    assert a800 - a100 == pytest.approx(comm_a100 * 0.5, rel=1e-9)
    assert rf.prefill_time(LLAMA2_70B, A800_NODE, 8192) == rf.prefill_time(LLAMA2_70B, A100_NODE, 8192)


def test_tp_allreduce_bytes_hand_checked():
    # 2 all-reduces × 80 layers × 2·7/8 × 8192 × 2 B = 4,587,520 B per token at TP8; 0 at TP1
    assert rf.tp_allreduce_bytes_per_token(LLAMA2_70B, 8) == 2 * 80 * 1.75 * 8192 * 2 == 4_587_520
    assert rf.tp_allreduce_bytes_per_token(LLAMA2_70B, 1) == 0


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("model", [LLAMA2_70B, OPT_13B, DEEPSEEK_V3])
@pytest.mark.parametrize("node", [A800_NODE, H800_NODE, A100_NODE.with_gpus(4)])
def test_kernels_match_plain_python_reference(preset, model, node):
    for n, c in [(1, 0), (128, 0), (3000, 5000), (8192, 0), (100_000, 20_000)]:
        assert rf.prefill_time(model, node, n, c, preset) == pytest.approx(
            reference_prefill(model, node, preset, n, c), rel=1e-9)
    for b, ctx in [(1, 0), (1, 512), (32, 32 * 2000), (256, 256 * 8000)]:
        assert rf.decode_step_time(model, node, b, ctx, preset) == pytest.approx(
            reference_decode(model, node, preset, b, ctx), rel=1e-9)


def _py(f):
    return getattr(f, "py_func", f)  # under NUMBA_DISABLE_JIT=1 the function is already plain Python


def test_njit_equals_python_path():
    cm = rf.cost_model(LLAMA2_70B, A800_NODE, "calibrated").as_array()
    for n, c in [(1, 0), (5000, 3000)]:
        assert rf.cm_prefill_time(cm, n, c) == pytest.approx(_py(rf.cm_prefill_time)(cm, n, c), rel=1e-14)
        assert rf.cm_prefill_time(cm, n, c) == rf.prefill_time(LLAMA2_70B, A800_NODE, n, c, "calibrated")
    assert rf.cm_decode_step_time(cm, 16, 9000) == pytest.approx(_py(rf.cm_decode_step_time)(cm, 16, 9000), rel=1e-14)
    assert rf.cm_kv_transfer_time(cm, 512) == pytest.approx(_py(rf.cm_kv_transfer_time)(cm, 512), rel=1e-14)


def test_total_prefill_time_is_the_sum_of_single_prefills():
    cm = rf.cost_model(LLAMA2_70B, A800_NODE, "calibrated").as_array()
    lens = np.array([1, 512, 8192, 8192, 100_000], dtype=np.int64)
    expected = sum(rf.prefill_time(LLAMA2_70B, A800_NODE, int(n), 0, "calibrated") for n in lens)
    assert rf.cm_total_prefill_time(cm, lens) == pytest.approx(expected, rel=1e-12)
    assert rf.cm_total_prefill_time(cm, lens[:0]) == 0.0


def test_cost_model_array_layout():
    cm = rf.cost_model("llama2-70b", "a800x8", "calibrated")
    arr = cm.as_array()
    assert arr.dtype == np.float64 and arr.shape == (len(rf.CostModel.field_names()),)
    for i, name in enumerate(rf.CostModel.field_names()):
        assert arr[i] == getattr(cm, name)
    assert cm.kv_bytes_per_token == 327_680


def test_kv_transfer_and_capacity_hand_checked():
    # 1 token = 327,680 B over 4 × 200 Gbps = 100 GB/s → 3.2768 µs; calibrated at 87 GB/s
    assert rf.kv_transfer_time(LLAMA2_70B, A800_NODE, 1) == pytest.approx(3.2768e-6)
    assert rf.kv_transfer_time(LLAMA2_70B, A800_NODE, 1, "calibrated") == pytest.approx(327_680 / 87e9)
    # (8 × 80 GiB × 0.9 − 137,953,296,384) / 327,680 = 1,466,436.75 tokens ("80GB" of HBM is 80 GiB)
    assert rf.decode_kv_capacity_tokens(LLAMA2_70B, A800_NODE) == pytest.approx(
        (8 * 80 * 2**30 * 0.9 - 137_953_296_384) / 327_680)
    assert rf.cost_model(LLAMA2_70B, A800_NODE).kv_capacity_tokens == pytest.approx(1_466_436.75, rel=1e-8)
    assert rf.decode_kv_capacity_tokens(DEEPSEEK_V3, A800_NODE) == 0.0     # 1.34 TB of BF16 weights
    assert rf.kv_load_time(LLAMA2_70B, A800_NODE, 1000, "dram") == pytest.approx(1000 * 327_680 / 128e9)


def test_roofline_helpers():
    # ridge of the A800: 312e12 / 2039e9 = 153.0 FLOP/B (same for the node: both scale by 8)
    assert rf.ridge_point(A800) == pytest.approx(153.02, rel=1e-3)
    assert rf.ridge_point("a800x8") == pytest.approx(rf.ridge_point(A800))
    assert rf.attainable_flops(10.0, A800) == pytest.approx(10 * 2039e9)
    assert rf.attainable_flops(1000.0, "a800") == 312e12
    np.testing.assert_allclose(rf.attainable_flops([1, 1e4], A800_NODE), [16.312e12, 2.496e15])
    assert rf.decode_intensity(LLAMA2_70B, 1, 512) < 2 < rf.ridge_point(A800) < rf.prefill_intensity(LLAMA2_70B, 2048)
    assert rf.arithmetic_intensity(10.0, 4.0) == 2.5
    with pytest.raises(ValueError, match=r"^attainable_flops\.intensity: "):
        rf.attainable_flops(-1, A800)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 150_000), extra=st.integers(1, 5000), c=st.integers(0, 100_000),
       preset=st.sampled_from(PRESETS))
def test_prefill_more_tokens_never_faster(n, extra, c, preset):
    t = rf.prefill_time(LLAMA2_70B, A800_NODE, n, c, preset)
    assert rf.prefill_time(LLAMA2_70B, A800_NODE, n + extra, c, preset) >= t
    assert rf.prefill_time(LLAMA2_70B, A800_NODE, n, c + extra, preset) >= t


@settings(max_examples=40, deadline=None)
@given(b=st.integers(1, 512), db=st.integers(1, 64), ctx=st.integers(0, 2_000_000),
       dctx=st.integers(1, 100_000), preset=st.sampled_from(PRESETS))
def test_decode_monotone(b, db, ctx, dctx, preset):
    t = rf.decode_step_time(DEEPSEEK_V3, H800_NODE, b, ctx, preset)
    assert rf.decode_step_time(DEEPSEEK_V3, H800_NODE, b + db, ctx, preset) >= t
    assert rf.decode_step_time(DEEPSEEK_V3, H800_NODE, b, ctx + dctx, preset) >= t


@settings(max_examples=30, deadline=None)
@given(eff=st.floats(0.05, 0.99), gain=st.floats(1.001, 5.0), n=st.integers(1, 50_000))
def test_more_bandwidth_never_slower(eff, gain, n):
    slow = Preset("slow", hbm_efficiency=eff, tp_comm=True, tp_comm_efficiency=eff / 1.0, rdma_efficiency=eff)
    fast = Preset("fast", hbm_efficiency=min(1.0, eff * gain), tp_comm=True,
                  tp_comm_efficiency=min(1.0, eff * gain), rdma_efficiency=min(1.0, eff * gain))
    assert rf.prefill_time(LLAMA2_70B, A800_NODE, n, 0, fast) <= rf.prefill_time(LLAMA2_70B, A800_NODE, n, 0, slow)
    assert rf.decode_step_time(LLAMA2_70B, A800_NODE, 8, n, fast) <= rf.decode_step_time(LLAMA2_70B, A800_NODE, 8, n, slow)
    assert rf.kv_transfer_time(LLAMA2_70B, A800_NODE, n, fast) < rf.kv_transfer_time(LLAMA2_70B, A800_NODE, n, slow)


@pytest.mark.parametrize("call,match", [
    (lambda: rf.prefill_time("llama2-70b", "a800x8", 0), r"n_new must be a finite number >= 1, got 0"),
    (lambda: rf.prefill_time("llama2-70b", "a800x8", float("nan")), "n_new"),
    (lambda: rf.prefill_time("llama2-70b", "a800x8", 10, -3), "n_cached"),
    (lambda: rf.prefill_time("llama2-70b", "a800x8", 10, preset="fast"), r"preset: unknown preset 'fast'; allowed: ideal"),
    (lambda: rf.prefill_time("gpt-5", "a800x8", 10), r"model: unknown model 'gpt-5'"),
    (lambda: rf.prefill_time("llama2-70b", "tpu-v5", 10), r"node: unknown node 'tpu-v5'"),
    (lambda: rf.decode_step_time("llama2-70b", "a800x8", 0, 10), r"batch_size must be a finite number >= 1"),
    (lambda: rf.decode_step_time("llama2-70b", "a800x8", 1, -1), "context_tokens"),
    (lambda: rf.kv_transfer_time("llama2-70b", "a800x8", math.inf), "n_tokens"),
    (lambda: rf.kv_load_time("llama2-70b", "a800x8", 10, "tape"), "tier"),
    (lambda: rf.kv_load_time("llama2-70b", "a800x8", 10, "ssd", bandwidth=0), "bandwidth"),
    (lambda: rf.decode_kv_capacity_tokens("llama2-70b", "a800x8", 1.5), "usable_fraction"),
])
def test_bad_input_raises_valueerror(call, match):
    if match.isidentifier():    # a bare field: named as the wrong one, not merely its letters anywhere
        match = rf"(^|\.){match}(\[[^\]]*\])?(: | must )"
    elif not match.startswith("^"):
        match = "^" + match
    with pytest.raises(ValueError, match=match):
        call()


def test_metric_names_exact():
    from mooncake_lab.reproduce import collect
    names = [m.name for m in collect("roofline")]
    assert names == [
        "roofline.kv_bytes_per_token.llama2_70b", "roofline.prefill_flops.llama2_70b.n8192",
        "roofline.prefill_s.llama2_70b.a800x8.n8192.ideal", "roofline.prefill_s.llama2_70b.a800x8.n8192.calibrated",
        "roofline.decode_step_s.llama2_70b.a800x8.b1.ideal", "roofline.decode_step_s.llama2_70b.a800x8.b1.calibrated",
    ]


def test_experiment_tables_shape():
    from mooncake_lab.experiments import l01_roofline as ex
    df = ex.prefill_vs_length(lengths=(512, 8192))
    assert set(df["preset"]) == set(PRESETS) and len(df) == 6
    # the calibrated MFU is below the ideal one at every length
    piv = df.pivot(index="n_new", columns="preset", values="mfu")
    assert (piv["calibrated"] < piv["ideal"]).all()
    dec = ex.decode_vs_batch(batches=(1, 64))
    ideal = dec[dec.preset == "ideal"].set_index("batch_size")["tokens_per_s"]
    assert ideal[64] > 40 * ideal[1]       # decode is memory-bound: batching is almost free
    pts = ex.roofline_points()
    assert (pts["achieved_flops"] <= pts["attainable_flops"] * (1 + 1e-9)).all()
