"""CPP prefill groups in the cluster simulator (``cpp_group_size``, ``cpp_chunk``, ``cpp_overlap``),
and the ``SimResult.timeseries`` fix for prefill instances that received no request."""
import numpy as np
import pytest

from mooncake_lab import sim
from mooncake_lab.cpp import (activation_bytes_per_token, cm_cpp_advance, cm_cpp_request_time, cm_stage_coefficients,
                               network_bandwidth, simulate_pipeline)
from mooncake_lab.roofline import CostModel, cm_kv_transfer_time, cm_prefill_time
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


def test_groups_are_instances_and_pipeline_consecutive_requests():
    # 8 nodes in 2 groups of 4; three equal 16,384-token requests arrive together (4 chunks of 4,096
    # each, offsets 0, 4,096, 8,192, 12,288). "load" (est = wait until stage 0 is free): request 0 →
    # group 0, request 1 → group 1, request 2 → group 0 (both stage 0s free at the same time; ties →
    # lowest index). Request 2 starts when request 0's last chunk has left stage 0 (overlapped sends:
    # stage 0 is busy for its 4 compute times only): queue wait = Σ_j S(4,096, 4,096·j), S = one
    # stage's time (1/4 of the layers); well before request 0 is done (T), so its TTFT < 2T.
    n = 16_384
    tr = trace_from_requests([0.0, 0.0, 0.0], [n] * 3, [2] * 3, [32] * 3, list(range(96)), name="three")
    for engine in sim.ENGINES:
        res = sim.simulate(tr, sim.ClusterConfig(n_prefill=8, n_decode=2, cpp_group_size=4, prefill_policy="load",
                                                 cache_capacity_blocks=0), engine=engine)
        df = res.requests
        c = res.config.resolve().cost
        sc = cm_stage_coefficients(c, 4)
        T = df.prefill_s[0]
        stage0 = sum(cm_prefill_time(sc, 4096, 4096 * j) for j in range(4))
        assert list(df.prefill_instance) == [0, 1, 0]
        assert df.queue_wait_s.tolist() == [0.0, 0.0, pytest.approx(stage0, rel=1e-12)]
        assert stage0 < T
        # its chunks then follow request 0's: exactly two cm_cpp_advance calls on one group
        bw = network_bandwidth("llama2-70b", "a800x8", "calibrated")
        free, link = np.zeros(4), np.zeros(4)
        cm_cpp_advance(c, free, link, 0.0, n, 0, 4096, 4, 16_384.0, bw, True)
        assert free[0] == pytest.approx(stage0, rel=1e-12)
        fin2 = cm_cpp_advance(c, free, link, free[0], n, 0, 4096, 4, 16_384.0, bw, True)
        assert df.ttft_s[2] == pytest.approx(fin2, rel=1e-12)
        assert T < df.ttft_s[2] < 2 * T  # pipelined: better than one request at a time
        assert res.config.label == "8P+2D, CPP 2×4"


def test_cm_cpp_advance_two_requests_by_hand():
    # Toy cost: only the linear term, c[1] = 1 ms per token on the whole model, so a stage of a
    # 2-stage group takes 0.5 ms per token: a 100-token chunk 0.05 s, a 50-token chunk 0.025 s
    # (no attention, overhead or memory terms: offsets do not matter). Activations 1 B/token at
    # 10,000 B/s: sending 100 tokens takes 0.01 s, 50 tokens 0.005 s. Overlapped sends.
    c = np.zeros(len(CostModel.field_names()))
    c[1] = 1e-3
    free, link = np.zeros(2), np.zeros(2)
    # Request A, ready at 0, 200 tokens = 2 chunks of 100:
    #   chunk 0: stage 0 [0, 0.05], sent at 0.06; stage 1 [0.06, 0.11]
    #   chunk 1: stage 0 [0.05, 0.10], NIC free since 0.06 → sent at 0.11; stage 1 [0.11, 0.16]
    fa = cm_cpp_advance(c, free, link, 0.0, 200, 0, 100, 2, 1.0, 10_000.0, True)
    assert fa == pytest.approx(0.16, abs=1e-12)
    assert free == pytest.approx([0.10, 0.16], abs=1e-12) and link[0] == pytest.approx(0.11, abs=1e-12)
    # Request B, also ready at 0, 50 tokens = 1 chunk: it enters stage 0 when A's last chunk has
    # left it, at 0.10 (not at A's finish, 0.16): stage 0 [0.10, 0.125], sent at 0.13, then waits
    # for stage 1 to finish A's last chunk: stage 1 [0.16, 0.185].
    fb = cm_cpp_advance(c, free, link, 0.0, 50, 0, 100, 2, 1.0, 10_000.0, True)
    assert fb == pytest.approx(0.185, abs=1e-12)
    # one request at a time it would have finished at 0.16 + 0.025 + 0.005 + 0.025 = 0.215
    idle_b = cm_cpp_request_time(c, 50, 0, 100, 2, 1.0, 10_000.0, True)
    assert idle_b == pytest.approx(0.055, abs=1e-12) and fb < fa + idle_b
    # Not overlapped: a stage is busy until its send is done. A: chunk 0 stage 0 [0, 0.05] + send →
    # 0.06, stage 1 [0.06, 0.11]; chunk 1 stage 0 [0.06, 0.11] + send → 0.12, stage 1 [0.12, 0.17].
    # B: stage 0 [0.12, 0.145] + send → 0.15, stage 1 [0.17, 0.195].
    free, link = np.zeros(2), np.zeros(2)
    assert cm_cpp_advance(c, free, link, 0.0, 200, 0, 100, 2, 1.0, 10_000.0, False) == pytest.approx(0.17)
    assert free[0] == pytest.approx(0.12)
    assert cm_cpp_advance(c, free, link, 0.0, 50, 0, 100, 2, 1.0, 10_000.0, False) == pytest.approx(0.195)


@pytest.mark.parametrize("engine", sim.ENGINES)
def test_two_requests_on_a_2_stage_group_in_the_cluster(engine):
    # One group of 2 nodes, real (modern) costs, nothing cached, overlapped sends. A = 8,192 tokens
    # (chunks of 4,096 at offsets 0 and 4,096), B = 4,096 tokens, both arrive at 0. With
    # a = S(4,096, 0) and b = S(4,096, 4,096) one stage's times (b > a: longer attention) and
    # l = 4,096 × 16,384 B / bandwidth one send (l < a):
    #   A chunk 0: stage 0 [0, a], stage 1 [a + l, 2a + l];
    #   A chunk 1: stage 0 [a, a + b], sent at a + b + l, stage 1 [a + b + l, a + 2b + l] → A = a + 2b + l
    #   B: stage 0 [a + b, 2a + b] — right after A's last chunk left stage 0 —, sent at 2a + b + l,
    #      stage 1 waits for A until a + 2b + l → B = 2a + 2b + l, its prefill time b + l + a
    #      (vs 2a + l alone), queue wait a + b.
    tr = trace_from_requests([0.0, 0.0], [8192, 4096], [2, 2], [16, 8], list(range(24)), name="two")
    res = sim.simulate(tr, sim.ClusterConfig(n_prefill=2, n_decode=1, cpp_group_size=2, cache_capacity_blocks=0,
                                             preset="modern", prefill_policy="load"), engine=engine)
    df = res.requests
    c = res.config.resolve().cost
    sc = cm_stage_coefficients(c, 2)
    a, b = cm_prefill_time(sc, 4096, 0), cm_prefill_time(sc, 4096, 4096)
    bw = network_bandwidth("llama2-70b", "a800x8", "modern")
    l = 4096 * 16_384 / bw
    assert l < a < b
    assert df.ttft_s.tolist() == [pytest.approx(a + 2 * b + l, rel=1e-12), pytest.approx(2 * a + 2 * b + l, rel=1e-12)]
    assert df.queue_wait_s[1] == pytest.approx(a + b, rel=1e-12)
    assert df.prefill_s[1] == pytest.approx(b + l + a, rel=1e-12)
    idle = cm_cpp_request_time(c, 4096, 0, 4096, 2, 16_384.0, bw, True)
    assert idle == pytest.approx(2 * a + l, rel=1e-12) and df.prefill_s[1] > idle


def test_idle_group_gives_exactly_cm_cpp_request_time():
    c = sim.ClusterConfig(preset="modern").resolve().cost
    bw = network_bandwidth("llama2-70b", "a800x8", "modern")
    for x, overlap in ((2, True), (4, False), (8, True)):
        free, link = np.zeros(x), np.zeros(x)
        # from time 0 on an all-free group: the same arithmetic, bit for bit
        assert cm_cpp_advance(c, free, link, 0.0, 30_000, 2048, 4096, x, 16_384.0, bw, overlap) == \
            cm_cpp_request_time(c, 30_000, 2048, 4096, x, 16_384.0, bw, overlap)
    # in the cluster: a request arriving after the group has drained takes the idle time again
    ids = list(range(20)) + list(range(100, 120))
    tr = trace_from_requests([0.0, 500.0], [10_000, 10_000], [2, 2], [20, 20], ids, name="apart")
    for engine in sim.ENGINES:
        res = sim.simulate(tr, sim.ClusterConfig(n_prefill=4, n_decode=1, cpp_group_size=4, preset="modern",
                                                 cpp_chunk=2048), engine=engine)
        idle = cm_cpp_request_time(c, 10_000, 0, 2048, 4, 16_384.0, bw, True)
        assert res.requests.prefill_s.tolist() == [pytest.approx(idle, rel=1e-12)] * 2
        assert res.requests.queue_wait_s.tolist() == [0.0, 0.0]


@pytest.mark.parametrize("x,overlap", [(2, True), (4, False), (4, True)])
def test_one_group_matches_the_lecture_05_fifo_pipeline(x, overlap):
    # one group, no cache, no fetch: the cluster's group is lecture 05's simulate_pipeline(order="fifo")
    # on the same arrivals and prompts (same costs and bandwidth)
    from mooncake_lab.synthetic import synthetic_trace
    tr = synthetic_trace("conversation-like", seed=2).head(60)
    cfg = sim.ClusterConfig(n_prefill=x, n_decode=2, cpp_group_size=x, cpp_chunk=1500, cpp_overlap=overlap,
                            cache_capacity_blocks=0, preset="modern", decode_kv_capacity_tokens=1e9,
                            prefill_policy="cache_aware")
    rc = cfg.resolve()
    pipe = simulate_pipeline(tr.arrival_s, tr.input_len, chunk=1500, x=x, bandwidth=rc.cpp_bandwidth,
                             overlap=overlap, order="fifo", costs=rc.cost, preset="modern")
    for engine in sim.ENGINES:
        df = sim.simulate(tr, cfg, engine=engine).requests
        assert (df.outcome == "completed").all() and (df.cached_tokens == 0).all()
        np.testing.assert_allclose(df.prefill_end_s, pipe.finish, rtol=1e-12)
        first = pipe.chunk_index == 0  # when each request's first chunk entered stage 0
        np.testing.assert_allclose(df.prefill_start_s, pipe.start[first, 0][np.argsort(pipe.chunk_request[first])],
                                   rtol=1e-12)
        assert (df.queue_wait_s > 0).sum() > 5  # requests did queue: the case is not trivial


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
    cfg = sim.ClusterConfig(n_prefill=4, n_decode=1, cpp_group_size=2, prefill_policy="kvcentric",
                            network_contention=False)   # free links (shared ones: test_sim_links)
    df = sim.simulate(tr, cfg, engine=engine).requests
    c = cfg.resolve().cost
    assert df.prefill_instance.tolist() == [0, 1] and df.fetch_source[1] == 0
    assert df.fetched_tokens[1] == 4096
    assert df.fetch_s[1] == pytest.approx(cm_kv_transfer_time(c, 4096) / 2, rel=1e-12)


def test_cpp_fields_are_validated_naming_the_field():
    with pytest.raises(ValueError, match=r"^ClusterConfig\.cpp_group_size: got 4; allowed: a divisor of "
                                         r"n_prefill=6"):
        sim.ClusterConfig(n_prefill=6, cpp_group_size=4)
    for field, value in (("cpp_group_size", 0), ("cpp_group_size", 2.5), ("cpp_chunk", 0),  # 2.0 = 2 (validate.integer)
                         ("cpp_overlap", "yes")):
        with pytest.raises(ValueError, match=rf"^ClusterConfig\.{field}: got .*; allowed: "):
            sim.ClusterConfig(**{field: value})
    with pytest.raises(ValueError, match=r"^ClusterConfig\.cpp_group_size: got 2; allowed: 1 when "
                                         r"engine_mode='coupled'"):
        sim.ClusterConfig(engine_mode="coupled", n_prefill=8, cpp_group_size=2)
    with pytest.raises(ValueError, match=r"^ClusterConfig\.cpp_group_size: got 64; allowed: at most the "
                                         r"model's 32 layers"):  # LLaMA2-7B has 32 layers
        sim.ClusterConfig(model="llama2-7b", n_prefill=64, cpp_group_size=64)  # (≤ 64 nodes per pool)
    assert sim.ClusterConfig(model="llama2-7b", n_prefill=32, cpp_group_size=32).n_prefill_instances == 1


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
