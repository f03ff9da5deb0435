"""Chunked pipeline parallelism (mooncake_lab.cpp): hand-worked pipelines, kernel ≡ reference,
monotonicity, the TP / SP / one-node comparisons, the VRAM S·T profile, and bad input."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mooncake_lab import cpp
from mooncake_lab.models import LLAMA2_70B
from mooncake_lab.roofline import CostModel, cost_model, prefill_time

N_FIELDS = len(CostModel.field_names())
ACT = 8192 * 2            # LLaMA2-70B activations per token: d_model × 2 B = 16,384 B
HUGE_BW = 1e30            # B/s: transfers take ~0 s


def linear_costs(s_per_token=1e-3, overhead=0.0):
    """A toy cost array: only linear compute (s per token) and a per-forward overhead."""
    c = np.zeros(N_FIELDS)
    c[0], c[1] = overhead, s_per_token
    return c


# --- per-stage coefficients and stage time ------------------------------------------------------
def test_stage_coefficients_divide_layer_terms_only():
    c = cost_model("llama2-70b", "a800x8", "calibrated").as_array()
    s = cpp.cm_stage_coefficients(c, 4)
    for i in (1, 2, 3, 4, 5, 8):           # per-token, comm, attention, weights, experts, KV: 1/4 each
        assert s[i] == pytest.approx(c[i] / 4)
    for i in (0, 9, 12, 13, 14):           # overheads paid whole by every stage; transfer fields untouched
        assert s[i] == c[i]
    assert np.array_equal(cpp.cm_stage_coefficients(c, 1), c)


def test_stage_time_hand_checked():
    c = linear_costs(1e-3, overhead=0.01)
    # 1000 tokens on 1/4 of the layers: 0.01 + 1000 × 1e-3 / 4 = 0.26 s
    assert cpp.cm_cpp_stage_time(c, 1000, 0, 4, ACT, HUGE_BW, True) == pytest.approx(0.26)
    # not overlapped: + 1000 × 16,384 B / 163.84 MB/s = 0.1 s of send
    assert cpp.cm_cpp_stage_time(c, 1000, 0, 4, ACT, 163.84e6, False) == pytest.approx(0.36)
    assert cpp.cm_cpp_link_time(1000, ACT, 163.84e6) == pytest.approx(0.1)


def test_activation_bytes_and_bandwidth():
    assert cpp.activation_bytes_per_token("llama2-70b") == 16_384
    # 4 × 200 Gbps = 100 GB/s line rate × 0.87 (transfer engine, FAST'25 §5.4.1) = 87 GB/s
    assert cpp.network_bandwidth("llama2-70b", "a800x8", "modern") == pytest.approx(87e9)
    assert cpp.n_chunks(131072, 4096) == 32 and cpp.n_chunks(5000, 4096) == 2


# --- hand-worked pipelines ------------------------------------------------------------------------
def test_equal_stages_give_chunks_plus_x_minus_one():
    # 4 chunks × 1000 tokens, 4 stages of 0.25 s, no transfer: (4 + 4 − 1) × 0.25 = 1.75 s
    r = cpp.simulate_pipeline([0.0], [4000], chunk=1000, x=4, bandwidth=HUGE_BW, costs=linear_costs())
    assert r.ttft[0] == pytest.approx(1.75)
    assert r.start.shape == (4, 4)
    # chunk j on stage s starts at (j + s) × 0.25
    j, s = np.meshgrid(np.arange(4), np.arange(4), indexing="ij")
    assert np.allclose(r.start, (j + s) * 0.25)


def test_transfer_overlapped_and_serialized_hand_checked():
    bw = ACT * 1000 / 0.1          # δ = 0.1 s per 1000-token boundary crossing; τ = 0.25 s
    ov = cpp.simulate_pipeline([0.0], [4000], chunk=1000, x=4, bandwidth=bw, overlap=True, costs=linear_costs())
    # overlapped: the send only delays: (4 + 4 − 1) × 0.25 + 3 × 0.1 = 2.05 s
    assert ov.ttft[0] == pytest.approx(2.05)
    se = cpp.simulate_pipeline([0.0], [4000], chunk=1000, x=4, bandwidth=bw, overlap=False, costs=linear_costs())
    # serialized: stages 0–2 busy τ + δ = 0.35 s per chunk: (4 + 4 − 2) × 0.35 + 0.25 = 2.35 s
    assert se.ttft[0] == pytest.approx(2.35)
    assert np.allclose(se.sent[:, :-1] - se.end[:, :-1], 0.1) and np.array_equal(se.sent[:, -1], se.end[:, -1])


def test_one_chunk_is_x_stages_plus_transfers():
    bw = ACT * 1000 / 0.1
    for overlap in (True, False):
        r = cpp.simulate_pipeline([2.0], [1000], chunk=4096, x=4, bandwidth=bw, overlap=overlap,
                                  costs=linear_costs())
        # one chunk: 4 × 0.25 + 3 × 0.1 = 1.3 s after its arrival at 2 s
        assert r.ttft[0] == pytest.approx(1.3) and r.finish[0] == pytest.approx(3.3)


def test_x1_is_chunked_prefill_on_one_node():
    # X = 1: sum over chunks of prefill(k new after o cached); chunk j of 4096 sits after 4096·j tokens
    n, chunk = 10_000, 4096
    expected = sum(prefill_time("llama2-70b", "a800x8", k, o, preset="modern")
                   for k, o in ((4096, 0), (4096, 4096), (1808, 8192)))
    r = cpp.simulate_pipeline([0.0], [n], chunk=chunk, x=1)
    assert r.ttft[0] == pytest.approx(expected)
    assert cpp.cpp_ttft(n_tokens=n, x=1, chunk=chunk) == pytest.approx(expected)
    # one chunk on one node is the plain prefill
    assert cpp.cpp_ttft(n_tokens=n, x=1, chunk=n) == pytest.approx(cpp.one_node_ttft(n_tokens=n))


def test_attention_makes_later_chunks_longer_and_cache_counts():
    r = cpp.simulate_pipeline([0.0], [32768], chunk=4096, x=2)
    d = r.end[:, 0] - r.start[:, 0]
    assert np.all(np.diff(d) > 0)                       # chunk at offset o attends to o + k/2 keys on average
    assert np.array_equal(r.chunk_offset, np.arange(8) * 4096.0)
    cached = cpp.simulate_pipeline([0.0], [4096], [65536], chunk=4096, x=2)
    assert cached.chunk_offset[0] == 65536 and cached.ttft[0] > cpp.cpp_ttft(n_tokens=4096, x=2)


def test_single_request_kernel_matches_pipeline():
    for x, overlap, bw in ((1, True, None), (4, True, None), (8, False, 5e9), (3, True, 1e9)):
        r = cpp.simulate_pipeline([0.0], [50_000], chunk=3000, x=x, overlap=overlap, bandwidth=bw)
        assert r.ttft[0] == pytest.approx(cpp.cpp_ttft(n_tokens=50_000, x=x, chunk=3000, overlap=overlap,
                                                       bandwidth=bw))


# --- several requests in one group ----------------------------------------------------------------
def test_interleaving_unblocks_short_requests():
    arr, lens = [0.0, 0.5, 1.0, 1.5], [131072, 2000, 4000, 1000]
    fifo = cpp.simulate_pipeline(arr, lens, x=4, order="fifo")
    inter = cpp.simulate_pipeline(arr, lens, x=4, order="interleave")
    # FIFO: the short ones wait behind all 32 chunks of the long one (TTFT ≈ 6–7 s); interleaved < 1 s
    assert np.all(fifo.ttft[1:] > 5.0) and np.all(inter.ttft[1:] < 1.0)
    # the long request pays only the short ones' chunk time, a few percent
    assert inter.ttft[0] > fifo.ttft[0] and inter.ttft[0] < 1.05 * fifo.ttft[0]


def test_idle_gap_and_stage_order_invariants():
    r = cpp.simulate_pipeline([0.0, 100.0], [5000, 5000], chunk=2048, x=3)
    # the second request arrives to an idle group: same TTFT as the first
    assert r.ttft[1] == pytest.approx(r.ttft[0])
    assert np.all(r.start[:, 0] >= r.arrival[r.chunk_request])
    assert np.all(r.start[:, 1:] >= r.sent[:, :-1] - 1e-12)          # needs chunk j from stage s − 1
    assert np.all(r.start[1:, :] >= r.end[:-1, :] - 1e-12)           # and chunk j − 1 on stage s


@st.composite
def workloads(draw):
    n = draw(st.integers(1, 5))
    arrival = draw(st.lists(st.floats(0, 5, allow_nan=False), min_size=n, max_size=n))
    n_new = draw(st.lists(st.integers(1, 20_000), min_size=n, max_size=n))
    n_cached = draw(st.lists(st.integers(0, 20_000), min_size=n, max_size=n))
    return arrival, n_new, n_cached, dict(
        chunk=draw(st.integers(256, 8192)), x=draw(st.integers(1, 8)),
        bandwidth=draw(st.sampled_from([None, 1e9, 25e9])), overlap=draw(st.booleans()),
        order=draw(st.sampled_from(cpp.ORDERS)), preset=draw(st.sampled_from(["modern", "calibrated", "ideal"])))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads())
def test_kernel_matches_reference(w):
    arrival, n_new, n_cached, kw = w
    a = cpp.simulate_pipeline(arrival, n_new, n_cached, **kw)
    b = cpp.pipeline_reference(arrival, n_new, n_cached, **kw)
    assert np.array_equal(a.chunk_request, b.chunk_request) and np.array_equal(a.chunk_index, b.chunk_index)
    for f in ("chunk_tokens", "chunk_offset", "start", "end", "sent", "finish"):
        assert np.allclose(getattr(a, f), getattr(b, f), rtol=1e-12, atol=1e-12), f
    assert np.all(np.isfinite(a.finish)) and np.all(a.ttft > 0)
    assert np.allclose(np.bincount(a.chunk_request, weights=a.chunk_tokens, minlength=len(n_new)), n_new)


# --- monotonicity -------------------------------------------------------------------------------------
def test_more_bandwidth_never_slower():
    for overlap in (True, False):
        t = [cpp.cpp_ttft(n_tokens=65536, x=4, chunk=2048, bandwidth=bw, overlap=overlap)
             for bw in np.geomspace(1e8, 1e12, 13)]
        assert np.all(np.diff(t) <= 1e-12)
    for f in (cpp.tp_ttft, cpp.sp_ttft):
        t = [f(n_tokens=65536, x=4, bandwidth=bw) for bw in np.geomspace(1e8, 1e12, 13)]
        assert np.all(np.diff(t) <= 1e-12)


def test_overlap_never_slower_and_more_nodes_help_long_prompts():
    for bw in (1e9, 12.5e9, 87e9):
        assert cpp.cpp_ttft(x=4, bandwidth=bw, overlap=True) <= cpp.cpp_ttft(x=4, bandwidth=bw, overlap=False)
    t = [cpp.cpp_ttft(n_tokens=131072, x=x) for x in (1, 2, 4, 8)]
    assert np.all(np.diff(t) < 0)
    longer = [cpp.cpp_ttft(n_tokens=n, x=4) for n in (8192, 32768, 131072)]
    assert np.all(np.diff(longer) > 0)


# --- TP, SP and the summary ------------------------------------------------------------------------
def test_tp_across_nodes_hand_checked():
    n, x, bw = 131072, 4, 87e9
    # all-reduce bytes per node per token: 2 per layer × 80 layers × 2(4−1)/4 × 8192 × 2 B = 3,932,160 B
    comm = n * 3_932_160 / bw                                     # ≈ 5.92 s
    compute = cpp.cpp_ttft(n_tokens=n, x=x, chunk=n, bandwidth=HUGE_BW)   # 1 chunk: X stages of 1/X each
    per_node = compute / x                                        # = one stage's compute
    assert cpp.tp_ttft(n_tokens=n, x=x, bandwidth=bw) == pytest.approx(per_node + comm)
    assert cpp.tp_ttft(n_tokens=n, x=1) == pytest.approx(cpp.one_node_ttft(n_tokens=n))


def test_sp_ring_hand_checked():
    n, x, bw = 131072, 4, 87e9
    ring = 0.75 * n * 327_680 / bw                                # (x−1)/x × n × KV bytes ≈ 0.37 s
    compute = cpp.tp_ttft(n_tokens=n, x=x, bandwidth=HUGE_BW)     # same compute split, no comm
    assert cpp.sp_ttft(n_tokens=n, x=x, bandwidth=bw, overlap=False) == pytest.approx(compute + ring)
    assert cpp.sp_ttft(n_tokens=n, x=x, bandwidth=bw) == pytest.approx(compute + ring / 80)


def test_scheme_summary_traffic_and_mfu():
    s = {k: cpp.scheme_summary(k, n_tokens=131072, x=4) for k in cpp.SCHEMES}
    assert s["cpp"]["net_bytes"] == 3 * 131072 * 16_384               # 3 boundaries × 2 GiB = 6.4 GB
    assert s["tp"]["net_bytes"] == pytest.approx(4 * 131072 * 3_932_160)   # ≈ 2.06 TB
    assert s["sp"]["net_bytes"] == 3 * 131072 * 327_680               # ≈ 129 GB
    assert s["one_node"]["net_bytes"] == 0
    # one node at "modern" runs at its MFU (0.65) minus the small overhead
    assert 0.6 < s["one_node"]["mfu"] <= 0.65
    assert s["tp"]["ttft_s"] > s["cpp"]["ttft_s"] and s["tp"]["mfu"] < s["cpp"]["mfu"]
    for k in cpp.SCHEMES:
        assert s[k]["mfu"] == pytest.approx(LLAMA2_70B.prefill_flops(131072) / (s[k]["ttft_s"] * s[k]["x"] * 2.496e15))


# --- VRAM occupation S·T ------------------------------------------------------------------------------
def test_vram_profile_hand_checked():
    n, L = 131072, 80
    S = n * 327_680                                   # 42.9 GB of KV
    T = cpp.one_node_ttft(n_tokens=n)
    sigma = S / 128e9 / L                             # store of one layer over 128 GB/s PCIe
    lw = cpp.kv_vram_profile(n_tokens=n, layerwise=True)
    # compute-bound: each layer's KV lives exactly one per-layer store time
    assert lw["gb_s"] == pytest.approx(S * sigma / 1e9)
    assert lw["peak_bytes"] == pytest.approx(S / L)
    ser = cpp.kv_vram_profile(n_tokens=n, layerwise=False)
    i = np.arange(1, L + 1)
    assert ser["gb_s"] == pytest.approx(np.sum(S / L * (T + i * sigma - i * T / L)) / 1e9)
    assert ser["peak_bytes"] == pytest.approx(S) and ser["done_s"] == pytest.approx(T + L * sigma)
    assert ser["gb_s"] > 1000 * lw["gb_s"]


# --- bad input ------------------------------------------------------------------------------------
@pytest.mark.parametrize("kw, word", [   # the message starts by naming the argument that is wrong
    (dict(chunk=0), "chunk: got 0;"), (dict(chunk=1.5), "chunk: got 1.5;"), (dict(x=0), "x: got 0;"),
    (dict(x=81), "x: got 81;"), (dict(bandwidth=-1.0), "bandwidth: got -1.0;"),
    (dict(bandwidth=float("nan")), "bandwidth: got nan;"), (dict(order="lifo"), "order must be one of"),
    (dict(n_new=[0]), r"n_new\[0\]: got 0;"), (dict(n_new=[1.5]), r"n_new\[0\]: got 1.5;"),
    (dict(arrival=[float("nan")]), r"arrival\[0\]: got nan;"),
    (dict(arrival=[0.0, 1.0]), "arrival, n_new and n_cached must have the same length, got 2, 1, 1"),
    (dict(n_cached=[-1]), r"n_cached\[0\]: got -1;"), (dict(costs=np.zeros(3)), "costs must be a CostModel"),
    (dict(preset="fast"), "preset: unknown preset 'fast'"),
])
def test_bad_input_raises_value_error(kw, word):
    args = dict(arrival=[0.0], n_new=[1000], n_cached=None)
    for k in list(args):
        if k in kw:
            args[k] = kw.pop(k)
    for f in (cpp.simulate_pipeline, cpp.pipeline_reference):
        with pytest.raises(ValueError, match="^" + word):
            f(args["arrival"], args["n_new"], args["n_cached"], **kw)


def test_scalar_api_bad_input():
    with pytest.raises(ValueError, match=r"^n_tokens: got 0; allowed: "):
        cpp.cpp_ttft(n_tokens=0)
    with pytest.raises(ValueError, match=r"^x: got 0; allowed: an integer in \[1, "):
        cpp.tp_ttft(x=0)
    with pytest.raises(ValueError, match=r"^scheme_summary\.scheme: got 'pp'; allowed: one of "):
        cpp.scheme_summary("pp")
    with pytest.raises(ValueError, match=r"^bandwidth: got 0; allowed: "):
        cpp.sp_ttft(bandwidth=0)


def test_frames():
    r = cpp.simulate_pipeline([0.0, 0.1], [5000, 100], chunk=2048, x=2)
    cf, rf = r.chunks_frame(), r.requests_frame()
    assert len(cf) == 4 * 2 and set(cf["stage"]) == {0, 1}
    assert list(rf.columns) == ["request", "arrival_s", "n_new", "n_cached", "finish_s", "ttft_s"]
    assert np.allclose(rf["ttft_s"], r.ttft)
