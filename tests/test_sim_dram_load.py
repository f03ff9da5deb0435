"""Host DRAM ↔ HBM loads (``ClusterConfig.dram_hbm_load``): hand-worked values and what the switch moves.

A prefill reusing a cached prefix first loads its KV from DRAM, overlapped layer by layer with the
compute (lecture 02: max(load, compute) + min(load, compute) / layers); a decode node loads the
received prompt's KV from its DRAM into HBM before the request joins the batch (arXiv v3 §3). The
kernel and the reference agree with the switch on and off in the property tests of
``test_sim_engines.py``; here the numbers are worked by hand from the API's own pieces.
"""
import numpy as np
import pytest

from mooncake_lab import roofline as rf
from mooncake_lab.cpp import cm_stage_coefficients
from mooncake_lab import sim
from mooncake_lab.traces import cached_trace, trace_from_requests

M, NODE = "llama2-70b", "a800x8"
KV = 327_680                  # B per token of LLaMA2-70B (80 layers × 8 KV heads × 128 × 2 × 2 B)
H2D = 128e9                   # B/s host-to-device per node (FAST'25 Table 1)
LAYERS = 80


def two_requests(n_blocks=24, later=1000.0):
    """Request 0 (n_blocks × 512 tokens) at t = 0; request 1 with the same blocks at ``later`` s."""
    ids = list(range(n_blocks))
    L = 512 * n_blocks
    return trace_from_requests([0.0, later], [L, L], [20, 20], [n_blocks, n_blocks], ids + ids, name="two")


def run(trace, engine="numba", **kw):
    cfg = sim.ClusterConfig(n_prefill=1, n_decode=1, preset="ideal", network_contention=False, **kw)
    return sim.simulate(trace, cfg, engine=engine).requests


def test_the_switch_is_on_by_default_and_off_in_the_simple_semantics():
    assert sim.ClusterConfig().dram_hbm_load is True
    assert sim.SIMPLE_SEMANTICS["dram_hbm_load"] is False
    assert sim.ClusterConfig().resolve().cost[16] == pytest.approx(KV / H2D)
    assert sim.ClusterConfig(dram_hbm_load=False).resolve().cost[16] == 0.0


def test_a_12k_prompt_is_3_9_gb_and_31_ms_from_dram():  # the numbers, worked by hand
    assert 12_000 * KV / 1e9 == pytest.approx(3.93, abs=0.005)
    assert rf.kv_load_time(M, NODE, 12_000, "dram") == pytest.approx(12_000 * KV / H2D)
    assert 12_000 * KV / H2D == pytest.approx(0.0307, abs=5e-4)


@pytest.mark.parametrize("engine", ["numba", "reference"])
def test_decode_joins_after_loading_the_prompt_and_the_reuse_overlaps_the_load(engine):
    tr = two_requests()
    on, off = run(tr, engine), run(tr, engine, dram_hbm_load=False)
    L = 24 * 512
    load_L = L * KV / H2D                                        # 31.5 ms
    # request 0 caches nothing: the same prefill; its KV reaches decode HBM 31.5 ms later
    assert on.prefill_s[0] == off.prefill_s[0] == rf.prefill_time(M, NODE, L, 0)
    assert on.decode_ready_s[0] - off.decode_ready_s[0] == pytest.approx(load_L, rel=1e-12)
    assert on.decode_admit_s[0] - off.decode_admit_s[0] == pytest.approx(load_L, rel=1e-12)
    assert on.ttft_s[0] == off.ttft_s[0]                        # the prefill made the first token
    # request 1 reuses L − 1 tokens (one is always computed): compute 1 token, load L − 1 from DRAM
    cached = L - 1
    assert on.cached_tokens[1] == off.cached_tokens[1] == cached
    compute = rf.prefill_time(M, NODE, 1, cached)
    load = rf.kv_load_time(M, NODE, cached, "dram")
    assert off.prefill_s[1] == pytest.approx(compute, rel=1e-12)
    assert load > compute                                       # a load-bound prefill: the load shows
    assert on.prefill_s[1] == pytest.approx(load + compute / LAYERS, rel=1e-12)
    assert on.ttft_s[1] - off.ttft_s[1] == pytest.approx(load + compute / LAYERS - compute, rel=1e-9)


@pytest.mark.parametrize("engine", ["numba", "reference"])
def test_compute_bound_reuse_hides_the_load_but_for_one_layer(engine):
    # request 1 shares 4 of its 24 blocks: 2,048 tokens to load, 10,240 to compute (compute-bound)
    ids0, ids1 = list(range(24)), list(range(4)) + list(range(100, 120))
    tr = trace_from_requests([0.0, 1000.0], [12_288, 12_288], [20, 20], [24, 24], ids0 + ids1, name="part")
    on = run(tr, engine)
    compute = rf.prefill_time(M, NODE, 12_288 - 2048, 2048)
    load = rf.kv_load_time(M, NODE, 2048, "dram")
    assert load < compute
    assert on.prefill_s[1] == pytest.approx(compute + load / LAYERS, rel=1e-12)


@pytest.mark.parametrize("engine", ["numba", "reference"])
def test_coupled_node_loads_the_prefix_with_the_first_chunk_and_nothing_for_decode(engine):
    tr = two_requests()
    kw = dict(engine_mode="coupled", n_coupled=1, chunked_prefill=True, prefill_chunk=512)
    cfg = sim.ClusterConfig(preset="ideal", **kw)
    on = sim.simulate(tr, cfg, engine=engine).requests
    off = sim.simulate(tr, cfg.replace(dram_hbm_load=False), engine=engine).requests
    assert on.decode_ready_s[0] == off.decode_ready_s[0]            # its KV is in HBM already
    cached = 24 * 512 - 1
    extra = (rf.kv_load_time(M, NODE, cached, "dram") + rf.prefill_time(M, NODE, 1, cached) / LAYERS
             - rf.prefill_time(M, NODE, 1, cached))
    assert on.ttft_s[1] - off.ttft_s[1] == pytest.approx(extra, rel=1e-9)


def test_cpp_group_stages_load_their_layers_share():
    tr = two_requests()
    kw = dict(n_prefill=2, n_decode=1, cpp_group_size=2, preset="ideal", network_contention=False)
    on = sim.simulate(tr, sim.ClusterConfig(**kw)).requests
    off = sim.simulate(tr, sim.ClusterConfig(**kw, dram_hbm_load=False)).requests
    # one token computed after L − 1 cached: two stages of 40 layers, each loading half the bytes
    # over its own PCIe while computing its half (one chunk: the stages run one after the other)
    cached = 24 * 512 - 1
    stage = cm_stage_coefficients(rf.cost_model(M, NODE, "ideal").as_array(), 2)
    comp = rf.cm_prefill_time(stage, 1, cached)
    half_load = rf.kv_load_time(M, NODE, cached, "dram") / 2
    per_stage = max(half_load, comp) + min(half_load, comp) / (LAYERS / 2)
    assert on.prefill_s[1] - off.prefill_s[1] == pytest.approx(2 * (per_stage - comp), rel=1e-9)


@pytest.mark.parametrize("trace_setup", ["released", "no-traces"], indirect=True)
def test_decode_pcie_link_stays_nearly_idle_on_the_conversation_trace(trace_setup):
    # the load is charged without queueing for the decode node's PCIe link; this bounds what that leaves out
    tr = cached_trace("conversation")
    q = sim.simulate(tr, sim.ClusterConfig(preset="modern")).requests
    d = q[q.decode_instance >= 0]
    busy = ((d.cached_tokens + d.computed_tokens) * KV / H2D).groupby(d.decode_instance).sum()
    share = busy / float(np.nanmax(q.finish_s.to_numpy(float)))
    assert 0 < share.max() < 0.05
