"""Hand-worked scenarios: timings, routing, fetch/replication, KV-memory queueing, time series."""
import numpy as np
import pytest

from mooncake_lab import sim
from mooncake_lab.roofline import cm_decode_step_time, cm_kv_transfer_time, cm_prefill_time
from mooncake_lab.traces import trace_from_requests

IDEAL = dict(preset="ideal")


def make(arrival, inp, out, chains):
    """Trace whose request i has block ids ``chains[i]`` (raw ids; shared ids = shared prefix)."""
    return trace_from_requests(arrival, inp, out, [len(c) for c in chains], [b for c in chains for b in c])


def test_single_request_timeline_by_hand():
    # One 1,024-token request (2 blocks), 3 output tokens, ideal preset, LLaMA2-70B on 8×A800.
    # TTFT = prefill(1024 new, 0 cached); KV streams layer-wise: x = 1024 × 3.2768e-6 s = 3.3554 ms,
    # prefill p ≈ 64 ms ⇒ exposed = max(x/80, x − p·79/80) = x/80 = 41.9 µs.
    # The decode node then loads the 1,024 tokens' KV from DRAM into HBM: h = 1024 × 327,680 B /
    # 128 GB/s = 2.62 ms (dram_hbm_load). Decode: step 1 at context 1024+1 = 1025, step 2 at 1026
    # (batch 1); finish = ready + both.
    cfg = sim.ClusterConfig(n_prefill=1, n_decode=1, **IDEAL)
    c = cfg.resolve().cost
    tr = make([2.0], [1024], [3], [[7, 8]])
    r = sim.simulate(tr, cfg).requests.iloc[0]
    p = cm_prefill_time(c, 1024, 0)
    assert r.ttft_s == pytest.approx(p) and r.queue_wait_s == 0
    x = cm_kv_transfer_time(c, 1024)
    assert x == pytest.approx(1024 * 3.2768e-6)
    h = 1024 * 327_680 / 128e9
    assert c[16] * 1024 == pytest.approx(h)
    assert r.decode_ready_s - r.prefill_end_s == pytest.approx(x / 80 + h)
    s1, s2 = cm_decode_step_time(c, 1, 1025), cm_decode_step_time(c, 1, 1026)
    assert r.finish_s == pytest.approx(2.0 + p + x / 80 + h + s1 + s2)
    # intervals: [x/80 + h + s1, s2]; mean = their average, tail (ceil(10% of 2) = 1) = the larger
    assert r.tbt_mean_s == pytest.approx((x / 80 + h + s1 + s2) / 2)
    assert r.tbt_tail_s == pytest.approx(max(x / 80 + h + s1, s2))


def test_serialized_transfer_exposes_all_of_it():
    base = dict(n_prefill=1, n_decode=1, **IDEAL)
    tr = make([0.0], [4096], [2], [list(range(8))])
    lw = sim.simulate(tr, sim.ClusterConfig(**base)).requests.iloc[0]
    se = sim.simulate(tr, sim.ClusterConfig(layerwise_kv_transfer=False, **base)).requests.iloc[0]
    x = 4096 * 3.2768e-6  # 13.4 ms at 100 GB/s (ideal: 800 Gbps × efficiency 1)
    h = 4096 * 327_680 / 128e9  # then 10.5 ms from the decode node's DRAM into HBM, either way
    assert se.decode_ready_s - se.prefill_end_s == pytest.approx(x + h)
    assert lw.decode_ready_s - lw.prefill_end_s == pytest.approx(x / 80 + h)


def test_fifo_queue_wait():
    # Two identical requests at t=0 on one prefill instance: the second waits the first's prefill.
    cfg = sim.ClusterConfig(n_prefill=1, n_decode=1, cache_capacity_blocks=0, **IDEAL)
    tr = make([0.0, 0.0], [2048, 2048], [2, 2], [[1, 2, 3, 4], [5, 6, 7, 8]])
    df = sim.simulate(tr, cfg).requests
    p = cm_prefill_time(cfg.resolve().cost, 2048, 0)
    assert df.queue_wait_s.tolist() == pytest.approx([0.0, p])
    assert df.ttft_s.tolist() == pytest.approx([p, 2 * p])


def test_cache_hit_skips_the_cached_prefix_and_keeps_one_token():
    # Request 2 repeats request 1's 3 blocks exactly: 1,536 tokens cached but one is recomputed.
    cfg = sim.ClusterConfig(n_prefill=1, n_decode=1, cache_capacity_blocks=100, **IDEAL)
    tr = make([0.0, 100.0], [1536, 1536], [2, 2], [[1, 2, 3], [1, 2, 3]])
    df = sim.simulate(tr, cfg).requests
    assert df.cached_tokens.tolist() == [0, 1535]
    # it loads the 1,535 cached tokens from DRAM (15.7 µs of a 80-layer pipeline each layer) while it
    # computes one token: compute-bound, so only one layer's load shows (max + min / 80)
    compute, load = cm_prefill_time(cfg.resolve().cost, 1, 1535), 1535 * 327_680 / 128e9
    assert load < compute
    assert df.prefill_s[1] == pytest.approx(compute + load / 80)
    off = sim.simulate(tr, cfg.replace(dram_hbm_load=False)).requests
    assert off.prefill_s[1] == pytest.approx(compute)


def test_cache_aware_follows_the_prefix_and_load_does_not():
    # All at t = 0 on 2 idle instances (ideal preset; p(n) = prefill time of n new tokens):
    #   r0: 10 blocks (5,120 tokens) → instance 0 under both policies (tie → lowest index).
    #   r1: 1,024 unrelated tokens → instance 1 (instance 0 has p(5120) ≈ 0.30 s queued).
    #   r2: r0's 10 blocks + 1 (5,632 tokens). load: queues 0.30 s vs p(1024) ≈ 0.06 s → instance 1,
    #       nothing cached. cache_aware: instance 0 = 0.30 + p(512 after 5,120 cached) ≈ 0.33 s,
    #       instance 1 = 0.06 + p(5632) ≈ 0.06 + 0.34 = 0.40 s → instance 0, 5,120 tokens cached.
    chains = [list(range(10)), [100, 101], list(range(10)) + [50]]
    tr = make([0.0, 0.0, 0.0], [5120, 1024, 5632], [2, 2, 2], chains)
    ca = sim.simulate(tr, sim.ClusterConfig(n_prefill=2, n_decode=1, prefill_policy="cache_aware", **IDEAL))
    ld = sim.simulate(tr, sim.ClusterConfig(n_prefill=2, n_decode=1, prefill_policy="load", **IDEAL))
    assert ld.requests.prefill_instance.tolist() == [0, 1, 1]
    assert ld.requests.cached_tokens.tolist() == [0, 0, 0]
    assert ca.requests.prefill_instance.tolist() == [0, 1, 0]
    assert ca.requests.cached_tokens.tolist() == [0, 0, 5120]


def test_kvcentric_fetches_the_remote_prefix_and_replicates_it():
    # Request 0 (20 blocks) → instance 0. Request 1 (same 20 blocks + 1) arrives while instance 0 is
    # still busy with request 0: kvcentric runs it on idle instance 1 after fetching 20 blocks
    # (10,240 tokens) from instance 0; request 2 (same prefix) then finds it on both.
    chains = [list(range(20)), list(range(20)) + [99], list(range(20)) + [98]]
    tr = make([0.0, 0.01, 10.0], [10240, 10752, 10752], [2, 2, 2], chains)
    cfg = sim.ClusterConfig(n_prefill=2, n_decode=1, prefill_policy="kvcentric", network_contention=False, **IDEAL)
    df = sim.simulate(tr, cfg).requests
    c = cfg.resolve().cost
    assert df.prefill_instance[1] == 1 and df.fetch_source[1] == 0
    assert df.fetched_tokens[1] == 10240 and df.cached_tokens[1] == 10240
    assert df.fetch_s[1] == pytest.approx(cm_kv_transfer_time(c, 10240))
    # the fetched 10,240 tokens are loaded from DRAM while the 512 new ones compute (layer by layer)
    compute, load = cm_prefill_time(c, 512, 10240), 10240 * 327_680 / 128e9
    assert df.prefill_end_s[1] == pytest.approx(df.prefill_start_s[1] + df.fetch_s[1]
                                                + max(compute, load) + min(compute, load) / 80)
    assert df.fetched_tokens[2] == 0 and df.cached_tokens[2] == 10240  # local on either instance now
    # cache_aware never fetches
    ca = sim.simulate(tr, cfg.replace(prefill_policy="cache_aware")).requests
    assert (ca.fetched_tokens == 0).all()


def test_decode_kv_memory_queues_then_admits_at_completion():
    # Capacity 1,000 tokens; two requests needing 600 each (500 in + 100 out) → the second
    # waits until the first finishes and is admitted at exactly that boundary.
    cfg = sim.ClusterConfig(n_prefill=2, n_decode=1, decode_kv_capacity_tokens=1000.0, output_lengths="known", **IDEAL)
    tr = make([0.0, 0.0], [500, 500], [100, 100], [[1], [2]])
    res = sim.simulate(tr, cfg)
    df = res.requests
    assert df.decode_admit_s[1] == pytest.approx(df.finish_s[0])
    assert df.decode_wait_s[1] > 0 and res.max_kv_tokens[0] == 600
    # a request needing more than the capacity is rejected at arrival, nothing else is
    tr2 = make([0.0, 1.0], [950, 10], [100, 5], [[1, 2], [3]])
    df2 = sim.simulate(tr2, cfg).requests
    assert df2.outcome.tolist() == ["rejected_too_large", "completed"]
    assert np.isnan(df2.ttft_s[0]) and df2.prefill_instance[0] == -1


def test_summary_and_timeseries_are_consistent():
    from mooncake_lab.synthetic import synthetic_trace

    tr = synthetic_trace("conversation-like", seed=2).head(400)
    res = sim.simulate(tr, sim.ClusterConfig(n_prefill=2, n_decode=2, decode_kv_capacity_tokens=200_000))
    s = res.summary()
    df = res.requests
    assert s["completed"] + s["rejected"] == s["requests"] == 400 and s["unfinished"] == 0
    assert s["ttft_mean_s"] == pytest.approx(df.ttft_s[df.outcome == "completed"].mean())
    assert s["hit_ratio"] == pytest.approx(df.cached_tokens.clip(lower=0).sum()
                                           / df.input_len[df.prefill_instance >= 0].sum())
    assert 0 <= s["slo_attainment"] <= min(s["ttft_slo_attainment"], s["tbt_slo_attainment"])
    ts = res.timeseries(dt=5.0, per_instance=True)
    assert ts.index[0] == 0 and ts.index[-1] >= df.finish_s.max()
    # the decode running count integrates to the total decode residence time (within one dt)
    total = (df.finish_s - df.decode_admit_s).sum()
    assert ts.decode_running.sum() * 5.0 == pytest.approx(total, rel=0.05)
    assert (ts.decode_kv_fraction <= 1.0).all() and (ts.prefill_queue_s >= 0).all()
    with pytest.raises(ValueError, match=r"^SimResult\.timeseries\.dt: got 0; allowed: "):
        res.timeseries(dt=0)
    q = res.prefill_queues(dt=5.0)   # the prefill-only path a dashboard uses: same numbers
    np.testing.assert_array_equal(q.to_numpy(), ts[[f"prefill_queue_s[{p}]" for p in range(2)]].to_numpy())
    np.testing.assert_array_equal(q.index, ts.index)
    with pytest.raises(ValueError, match=r"^SimResult\.prefill_queues\.dt: got nan; allowed: "):
        res.prefill_queues(dt=float("nan"))


def test_prefill_queues_by_hand_with_idle_instances():
    """One request of 2 blocks on 3 instances (load policy → instance 0): its queue is the prefill
    time left, falling by 1 s per s to 0; the two idle instances stay at 0."""
    tr = trace_from_requests([0.0], [1024], [4], [2], [0, 1])
    res = sim.simulate(tr, sim.ClusterConfig(n_prefill=3, n_decode=1, prefill_policy="load"))
    p = float(res.requests.prefill_s.iloc[0])
    q = res.prefill_queues(dt=p / 4)
    assert list(q.columns) == [0, 1, 2] and (q[[1, 2]].to_numpy() == 0).all()
    np.testing.assert_allclose(q[0].to_numpy()[:5], [p, 0.75 * p, 0.5 * p, 0.25 * p, 0.0], atol=1e-12)


def test_policy_order_on_the_real_conversation_trace(real_trace_dir, monkeypatch):
    """arXiv Fig. 8's order of mean TTFT (random > load > cache_aware > kvcentric), 8P+8D,
    conversation trace replayed at 0.4× (offered prefill work ≈ the pool's capacity without cache
    under the calibrated preset: 72,278 s of work / (3,537 s / 0.4) / 8 instances ≈ 1.0)."""
    from mooncake_lab.traces import load_trace

    monkeypatch.setenv("MOONCAKE_LAB_DATA", str(real_trace_dir))
    tr = load_trace("conversation").replay(0.4)
    ttft = {p: sim.simulate(tr, sim.ClusterConfig(prefill_policy=p)).summary()["ttft_mean_s"]
            for p in sim.PREFILL_POLICIES}
    assert ttft["random"] > ttft["load"] > ttft["cache_aware"] > ttft["kvcentric"]


def test_l04_policy_comparison_table_and_metrics():
    from mooncake_lab.experiments import l04_scheduling as l04
    from mooncake_lab.reproduce import _GROUPS
    from mooncake_lab.synthetic import synthetic_trace

    tr = synthetic_trace("conversation-like", seed=4).head(600)
    df = l04.policy_comparison(tr, speed=1.0, n_prefill=2, n_decode=2)
    assert list(df.index) == list(sim.PREFILL_POLICIES)
    assert (df.fetched_ratio.drop("kvcentric") == 0).all()
    assert df.paper_ttft_mean_s.tolist() == [92.07, 60.41, 14.36, 6.26]
    assert "scheduling" in _GROUPS
