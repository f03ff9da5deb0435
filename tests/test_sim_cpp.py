"""CPP prefill groups in the cluster simulator (``cpp_group_size``, ``cpp_chunk``, ``cpp_overlap``),
and the ``SimResult.timeseries`` fix for prefill instances that received no request."""
import numpy as np
import pytest

from mooncake_lab import sim
from mooncake_lab.cpp import activation_bytes_per_token, cm_cpp_request_time, cm_stage_coefficients, network_bandwidth
from mooncake_lab.roofline import cm_kv_transfer_time, cm_prefill_time
from mooncake_lab.traces import trace_from_requests


def one_request(n_tokens, arrival=0.0, out=2):
    k = -(-n_tokens // 512)
    return trace_from_requests([arrival], [n_tokens], [out], [k], list(range(k)), name="one")


def ttft(trace, engine="numba", **cfg):
    res = sim.simulate(trace, sim.ClusterConfig(**cfg), engine=engine)
    return res.requests.ttft_s.to_numpy(), res


@pytest.mark.parametrize("engine", sim.ENGINES)
def test_long_request_on_a_4_node_group_takes_cm_cpp_request_time(engine):
    # 32,768 uncached tokens on one idle group of 4 nodes: 8 chunks of 4,096 through 4 stages,
    # activations 8,192 × 2 B = 16,384 B per token at the node's RDMA bandwidth, overlapped
    cfg = dict(n_prefill=4, n_decode=1, cpp_group_size=4, cache_capacity_blocks=0, preset="modern")
    t, res = ttft(one_request(32_768), engine, **cfg)
    c = res.config.resolve().cost
    bw = network_bandwidth("llama2-70b", "a800x8", "modern")
    # nothing is cached, so all 32,768 tokens are computed
    expected = cm_cpp_request_time(c, 32_768, 0, 4096, 4, 16_384.0, bw, True)
    assert activation_bytes_per_token("llama2-70b") == 16_384.0
    assert t[0] == pytest.approx(expected, rel=1e-12)
    assert res.requests.prefill_s[0] == pytest.approx(expected, rel=1e-12)
    assert res.requests.prefill_instance[0] == 0 and res.config.n_prefill_instances == 1
    # and CPP over 4 nodes beats one node on a long prompt (the point of CPP)
    assert t[0] < cm_prefill_time(c, 32_768, 0)


def test_single_chunk_request_is_x_stage_times_plus_x_minus_1_sends():
    # 2,000 uncached tokens ≤ cpp_chunk 4,096: one chunk, unchunked. Through X = 4 stages it takes
    # 4 × stage(2,000) + 3 × send(2,000): each send = 2,000 × 16,384 B = 32,768,000 B / bandwidth
    # (overlap does not help a single chunk: the next stage waits for the send)
    t, res = ttft(one_request(2000), n_prefill=4, n_decode=1, cpp_group_size=4, cache_capacity_blocks=0,
                  preset="modern")
    c = res.config.resolve().cost
    bw = network_bandwidth("llama2-70b", "a800x8", "modern")
    stage = cm_prefill_time(cm_stage_coefficients(c, 4), 2000, 0)
    assert t[0] == pytest.approx(4 * stage + 3 * 32_768_000 / bw, rel=1e-12)
    # a short prompt gains nothing from the pipeline: at least the one-node time (the per-forward
    # overhead is paid by every stage, and the sends come on top)
    assert t[0] >= cm_prefill_time(c, 2000, 0)
    # a longer chunk limit leaves it unchanged (it was already one chunk) …
    t2, _ = ttft(one_request(2000), n_prefill=4, n_decode=1, cpp_group_size=4, cache_capacity_blocks=0,
                 preset="modern", cpp_chunk=100_000)
    assert t2[0] == t[0]
    # … a shorter one cuts it into chunks of 500 (4 chunks), which pipelines it: a different time
    t3, _ = ttft(one_request(2000), n_prefill=4, n_decode=1, cpp_group_size=4, cache_capacity_blocks=0,
                 preset="modern", cpp_chunk=500)
    assert t3[0] == pytest.approx(cm_cpp_request_time(c, 2000, 0, 500, 4, 16_384.0, bw, True), rel=1e-12)
    assert t3[0] != t[0]


def test_group_size_1_never_chunks_and_ignores_cpp_fields():
    # X = 1 is one node prefilling the whole prompt at once: cm_prefill_time(c, 20,000, 0),
    # whatever cpp_chunk and cpp_overlap say
    tr = one_request(20_000)
    base, res = ttft(tr, n_prefill=2, n_decode=1, cache_capacity_blocks=0)
    assert base[0] == pytest.approx(cm_prefill_time(res.config.resolve().cost, 20_000, 0), rel=1e-15)
    for kw in (dict(cpp_chunk=1), dict(cpp_chunk=512, cpp_overlap=False)):
        t, _ = ttft(tr, n_prefill=2, n_decode=1, cache_capacity_blocks=0, **kw)
        assert t[0] == base[0]


def test_serialized_sends_are_slower_than_overlapped_ones():
    # not overlapping the activation send adds it to every stage's busy time: 8 chunks × 3 sends
    kw = dict(n_prefill=4, n_decode=1, cpp_group_size=4, cache_capacity_blocks=0, preset="modern")
    t_ov, res = ttft(one_request(32_768), **kw)
    t_ser, _ = ttft(one_request(32_768), cpp_overlap=False, **kw)
    c = res.config.resolve().cost
    bw = network_bandwidth("llama2-70b", "a800x8", "modern")
    assert t_ser[0] == pytest.approx(cm_cpp_request_time(c, 32_768, 0, 4096, 4, 16_384.0, bw, False), rel=1e-12)
    assert t_ser[0] > t_ov[0]


def test_groups_are_instances_one_request_at_a_time():
    # 8 nodes in 2 groups of 4; three equal requests arrive together. "load": request 0 → group 0,
    # request 1 → group 1, request 2 waits for group 0 (ties → lowest index) until request 0 is
    # done: queue wait = one group prefill time T, TTFT = 2T.
    n = 16_384
    tr = trace_from_requests([0.0, 0.0, 0.0], [n] * 3, [2] * 3, [32] * 3, list(range(96)), name="three")
    res = sim.simulate(tr, sim.ClusterConfig(n_prefill=8, n_decode=2, cpp_group_size=4, prefill_policy="load",
                                             cache_capacity_blocks=0))
    df = res.requests
    T = df.prefill_s[0]
    assert list(df.prefill_instance) == [0, 1, 0]
    assert df.queue_wait_s.tolist() == [0.0, 0.0, pytest.approx(T, rel=1e-12)]
    assert df.ttft_s[2] == pytest.approx(2 * T, rel=1e-12)
    assert res.config.label == "8P+2D, CPP 2×4"


def test_a_group_caches_x_times_the_blocks_of_one_node():
    # capacity 3 blocks per node. A 10-block prompt, then the same prompt + 1 token … on one node
    # only 3 blocks stay (LRU, the root kept), so the second request reuses 3 × 512 = 1,536 tokens;
    # a group of 4 nodes holds 4 × 3 = 12 blocks: all 10 blocks = 5,120 tokens are reused.
    ids = list(range(10)) + list(range(10)) + [99]
    tr = trace_from_requests([0.0, 100.0], [5120, 5121], [2, 2], [10, 11], ids, name="reuse")
    for x, cached in ((1, 1536), (4, 5120)):
        cfg = sim.ClusterConfig(n_prefill=4, n_decode=1, cpp_group_size=x, cache_capacity_blocks=3,
                                prefill_policy="cache_aware")
        assert cfg.resolve().cache_capacity_blocks == 3 * x
        for engine in sim.ENGINES:
            assert sim.simulate(tr, cfg, engine=engine).requests.cached_tokens[1] == cached


@pytest.mark.parametrize("engine", sim.ENGINES)
def test_fetch_between_groups_uses_x_links_in_parallel(engine):
    # 2 groups of 2. Request 0 (8 blocks = 4,096 tokens) goes to group 0 and keeps it busy; request 1
    # (same 8 blocks + 4 more, 6,144 tokens) arrives 1 ms later: kvcentric fetches the 4,096-token
    # prefix from group 0 into idle group 1, over 2 node pairs at once: transfer(4,096) / 2.
    ids = list(range(8)) + list(range(8)) + [50, 51, 52, 53]
    tr = trace_from_requests([0.0, 0.001], [4096, 6144], [2, 2], [8, 12], ids, name="fetch")
    cfg = sim.ClusterConfig(n_prefill=4, n_decode=1, cpp_group_size=2, prefill_policy="kvcentric")
    df = sim.simulate(tr, cfg, engine=engine).requests
    c = cfg.resolve().cost
    assert df.prefill_instance.tolist() == [0, 1] and df.fetch_source[1] == 0
    assert df.fetched_tokens[1] == 4096
    assert df.fetch_s[1] == pytest.approx(cm_kv_transfer_time(c, 4096) / 2, rel=1e-12)


def test_cpp_fields_are_validated_naming_the_field():
    with pytest.raises(ValueError, match=r"cpp_group_size.*n_prefill=6"):
        sim.ClusterConfig(n_prefill=6, cpp_group_size=4)
    for field, value in (("cpp_group_size", 0), ("cpp_group_size", 2.0), ("cpp_chunk", 0),
                         ("cpp_overlap", "yes")):
        with pytest.raises(ValueError, match=field):
            sim.ClusterConfig(**{field: value})
    with pytest.raises(ValueError, match="cpp_group_size.*coupled"):
        sim.ClusterConfig(engine_mode="coupled", n_prefill=8, cpp_group_size=2)
    with pytest.raises(ValueError, match="cpp_group_size.*80 layers"):  # LLaMA2-70B has 80 layers
        sim.ClusterConfig(n_prefill=81, cpp_group_size=81)
    assert sim.ClusterConfig(n_prefill=80, cpp_group_size=80).n_prefill_instances == 1


# ------------------------------------------------------------------ timeseries with idle instances
@pytest.mark.parametrize("x", [1, 2])
def test_timeseries_with_prefill_instances_that_received_nothing(x):
    # 2 requests on 8 prefill nodes: most instances never get a request (was an IndexError)
    tr = trace_from_requests([0.0, 5.0], [3000, 3000], [3, 3], [6, 6], list(range(12)), name="two")
    res = sim.simulate(tr, sim.ClusterConfig(n_prefill=8, n_decode=2, cpp_group_size=x, prefill_policy="load"))
    ts = res.timeseries(dt=0.5, per_instance=True)
    G = 8 // x
    cols = [f"prefill_queue_s[{p}]" for p in range(G)]
    assert f"prefill_queue_s[{G}]" not in ts.columns
    used = set(res.requests.prefill_instance)
    assert used == {0}  # "load" sends both to instance 0 (idle again at t = 5 s)
    for p in range(1, G):
        assert (ts[cols[p]] == 0.0).all()
    # instance 0 has queued work right after each arrival: the request's own prefill
    T0 = res.requests.prefill_s[0]
    assert ts[cols[0]].iloc[0] == pytest.approx(T0)
    assert ts.prefill_queue_max_s.iloc[0] == pytest.approx(T0)
    assert ts.prefill_queue_s.iloc[0] == pytest.approx(T0 / G)


def test_timeseries_on_the_real_trace_with_32_prefill_instances(real_trace_dir, monkeypatch):
    # the reported case: 32 prefill instances at 0.1× replay on the conversation trace
    from mooncake_lab.traces import load_trace_or_synthetic
    monkeypatch.setenv("MOONCAKE_LAB_DATA", str(real_trace_dir))
    tr = load_trace_or_synthetic("conversation", download=False).replay(0.1)
    res = sim.simulate(tr, sim.ClusterConfig(n_prefill=32))
    counts = np.bincount(res.arrays["prefill_inst"][res.arrays["prefill_inst"] >= 0], minlength=32)
    assert (counts == 0).any()  # the situation of the bug
    ts = res.timeseries(dt=60.0, per_instance=True)
    for p in np.flatnonzero(counts == 0):
        assert (ts[f"prefill_queue_s[{p}]"] == 0.0).all()
    assert ts.prefill_queue_s.notna().all() and (ts.prefill_queue_max_s > 0).any()
