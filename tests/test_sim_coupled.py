"""The coupled (vLLM-like) engine on hand-made traces: prefill stalls, chunking, KV memory, routing."""
import math

import pytest

from test_sim_engines import assert_runs_without_jit
from mooncake_lab import sim
from mooncake_lab.roofline import cm_decode_step_time, cm_prefill_time
from mooncake_lab.traces import trace_from_requests

ONE = dict(engine_mode="coupled", n_coupled=1, preset="ideal")


def make(arrival, inp, out, chains):
    return trace_from_requests(arrival, inp, out, [len(c) for c in chains], [b for c in chains for b in c])


def chain(L, base):
    return [base + j for j in range(-(-L // 512))]


@pytest.mark.parametrize("engine", sim.ENGINES)
def test_single_request_is_a_prefill_then_decode_steps(engine):
    # Alone on one node, coupled = prefill then a batch of one (no transfer):
    # TTFT = prefill(1024, 0); finish = TTFT + step(1, 1025) + step(1, 1026) (contexts L+1, L+2).
    cfg = sim.ClusterConfig(**ONE)
    c = cfg.resolve().cost
    r = sim.simulate(make([2.0], [1024], [3], [chain(1024, 0)]), cfg, engine=engine).requests.iloc[0]
    p = cm_prefill_time(c, 1024, 0)
    s1, s2 = cm_decode_step_time(c, 1, 1025), cm_decode_step_time(c, 1, 1026)
    assert r.ttft_s == pytest.approx(p) and r.prefill_s == pytest.approx(p) and r.queue_wait_s == 0
    assert r.finish_s == pytest.approx(2.0 + p + s1 + s2)
    assert r.tbt_mean_s == pytest.approx((s1 + s2) / 2) and r.tbt_tail_s == pytest.approx(max(s1, s2))


def stall_trace():
    # A: 1,000-token prompt, 11 output tokens (10 intervals → the tail is the single longest one),
    # arrives at 0. B: a 30,000-token prompt, 2 output tokens, arriving at 0.1 s while A decodes
    # ("ideal": A's prefill ends at ≈ 0.055 s, its 10 steps of ≈ 8.4 ms would end at ≈ 0.14 s).
    return make([0.0, 0.1], [1000, 30_000], [11, 2], [chain(1000, 0), chain(30_000, 100)])


@pytest.mark.parametrize("engine", sim.ENGINES)
def test_without_chunking_a_long_prefill_stalls_the_decode(engine):
    cfg = sim.ClusterConfig(**ONE)
    c = cfg.resolve().cost
    df = sim.simulate(stall_trace(), cfg, engine=engine).requests
    a, b = df.iloc[0], df.iloc[1]
    pB = cm_prefill_time(c, 30_000, 0)  # ≈ 2.4 s on 8×A800 at peak
    assert pB > 1.0
    assert a.prefill_end_s < 0.1 < a.finish_s  # B arrived while A was decoding
    # B starts at the end of A's current decode step (< one step after its arrival) and runs whole
    step_max = cm_decode_step_time(c, 1, 1010)
    assert 0 <= b.queue_wait_s <= step_max and b.prefill_s == pytest.approx(pB)
    # A's longest interval = B's whole prefill + the decode step after it, in which B (context
    # 30,000 + its first token) already joined A's batch: batch 2, context (1,001…1,010) + 30,001
    assert a.tbt_tail_s >= pB
    lo, hi = cm_decode_step_time(c, 2, 1001 + 30_001), cm_decode_step_time(c, 2, 1010 + 30_001)
    assert pB + lo <= a.tbt_tail_s + 1e-12 and a.tbt_tail_s <= pB + hi + 1e-12
    assert a.finish_s > b.prefill_end_s  # A could not finish until B's prefill was over


@pytest.mark.parametrize("engine", sim.ENGINES)
@pytest.mark.parametrize("chunk", [512, 2048])
def test_with_chunking_the_interval_is_bounded_by_chunk_plus_step(engine, chunk):
    cfg = sim.ClusterConfig(chunked_prefill=True, prefill_chunk=chunk, **ONE)
    c = cfg.resolve().cost
    res = sim.simulate(stall_trace(), cfg, engine=engine)
    df = res.requests
    a, b = df.iloc[0], df.iloc[1]
    # the worst iteration A can see: B's last full chunk (the most cached tokens before it) + a step
    # of batch 1 at A's largest context (1,000 + 10); or, once B's prompt is done, a plain step of
    # batch 2 with B's 30,001 tokens of context
    bound = max(cm_prefill_time(c, chunk, 30_000 - chunk) + cm_decode_step_time(c, 1, 1010),
                cm_decode_step_time(c, 2, 1010 + 30_001))
    assert a.tbt_tail_s <= bound + 1e-12
    assert a.tbt_tail_s < cm_prefill_time(c, 30_000, 0) / 5  # far below the unchunked stall
    # B's prefill is the sum of its chunks, chunk m computing min(chunk, rest) after m·chunk tokens:
    # ceil(30,000 / chunk) chunks (59 of 512, 15 of 2,048)
    ks = [min(chunk, 30_000 - m) for m in range(0, 30_000, chunk)]
    assert len(ks) == math.ceil(30_000 / chunk)
    assert b.prefill_s == pytest.approx(sum(cm_prefill_time(c, k, m * chunk) for m, k in enumerate(ks)))
    # A's prompt (1,000 tokens) took ceil(1000/chunk) chunks too
    assert res.diagnostics["prefill_iterations"] == len(ks) + math.ceil(1000 / chunk)
    # and B's TTFT includes every decode step A piggybacked on its chunks
    assert b.ttft_s > b.prefill_s


@pytest.mark.parametrize("engine", sim.ENGINES)
def test_kv_memory_holds_the_second_request_until_the_first_finishes(engine):
    # Capacity 1,000 tokens; two requests needing 600 each (500 in + 100 out): the second cannot
    # start its prefill until the first finishes (its KV is reserved for the whole request).
    cfg = sim.ClusterConfig(decode_kv_capacity_tokens=1000.0, **ONE)
    res = sim.simulate(make([0.0, 0.0], [500, 500], [100, 100], [[1], [2]]), cfg, engine=engine)
    df = res.requests
    assert df.prefill_start_s[1] == pytest.approx(df.finish_s[0])
    assert res.max_kv_tokens[0] == 600
    # a request that can never fit is rejected at arrival
    df2 = sim.simulate(make([0.0, 1.0], [950, 10], [100, 5], [[1, 2], [3]]), cfg, engine=engine).requests
    assert df2.outcome.tolist() == ["rejected_too_large", "completed"]


@pytest.mark.parametrize("engine", sim.ENGINES)
def test_routing_load_vs_cache_aware(engine):
    # Two idle instances. r0 (10 blocks) → 0 and r1 (10 other blocks, same time) → 1 under both
    # policies (r0's prefill is queued on 0). r2 at t = 100 s repeats r1's prefix + 1 block:
    # every queue is empty again, so "load" ties → instance 0 (nothing cached) while
    # "cache_aware" → instance 1, where 5,120 tokens are cached.
    chains = [list(range(10)), list(range(100, 110)), list(range(100, 110)) + [999]]
    tr = make([0.0, 0.0, 100.0], [5120, 5120, 5632], [2, 2, 2], chains)
    base = dict(engine_mode="coupled", n_coupled=2, preset="ideal")
    ld = sim.simulate(tr, sim.ClusterConfig(prefill_policy="load", **base), engine=engine).requests
    ca = sim.simulate(tr, sim.ClusterConfig(prefill_policy="cache_aware", **base), engine=engine).requests
    assert ld.prefill_instance.tolist() == [0, 1, 0] and ld.cached_tokens.tolist() == [0, 0, 0]
    assert ca.prefill_instance.tolist() == [0, 1, 1] and ca.cached_tokens.tolist() == [0, 0, 5120]
    kv = sim.simulate(tr, sim.ClusterConfig(prefill_policy="kvcentric", **base), engine=engine).requests
    assert kv.prefill_instance.tolist() == ca.prefill_instance.tolist()  # kvcentric = cache-aware here


@pytest.mark.parametrize("field, value", [
    ("engine_mode", "fused"), ("n_coupled", 0), ("n_coupled", 2.5), ("chunked_prefill", "yes"),
    ("prefill_chunk", 0), ("prefill_chunk", 1.5),
])
def test_bad_coupled_fields_raise_naming_the_field(field, value):
    with pytest.raises(ValueError, match=rf"^ClusterConfig\.{field}: got .*; allowed: "):
        sim.ClusterConfig(**{"engine_mode": "coupled", field: value})


def test_coupled_engine_refuses_admission_control():
    with pytest.raises(ValueError, match=r"^ClusterConfig\.admission: got 'early'; allowed: 'none' when "
                                         r"engine_mode='coupled'"):
        sim.ClusterConfig(engine_mode="coupled", admission="early")


def test_interference_ordering_on_a_synthetic_trace():
    """Same 8 nodes, 500 conversation-like requests: the tail TBT (p90 over requests) is worst
    coupled without chunking, better with chunks, best disaggregated (decode nodes never prefill)."""
    from mooncake_lab.synthetic import synthetic_trace

    tr = synthetic_trace("conversation-like", seed=1).head(500)
    base = dict(preset="modern", cache_capacity_blocks=2000)
    p90 = {}
    for name, cfg in {"coupled": dict(engine_mode="coupled", n_coupled=8),
                      "chunked": dict(engine_mode="coupled", n_coupled=8, chunked_prefill=True),
                      "mooncake": dict(n_prefill=4, n_decode=4)}.items():
        res = sim.simulate(tr, sim.ClusterConfig(**base, **cfg))
        assert res.summary()["unfinished"] == 0
        p90[name] = res.summary()["tbt_tail_p90_s"]
    assert p90["coupled"] > p90["chunked"] > p90["mooncake"]


def test_timeseries_and_labels_work_for_coupled():
    from mooncake_lab.synthetic import synthetic_trace

    tr = synthetic_trace("conversation-like", seed=2).head(200)
    cfg = sim.ClusterConfig(engine_mode="coupled", n_coupled=3, preset="modern")
    res = sim.simulate(tr, cfg)
    ts = res.timeseries(dt=5.0, per_instance=True)
    assert "decode_running[2]" in ts and "prefill_queue_s[2]" in ts and "decode_running[3]" not in ts
    df = res.requests
    total = (df.finish_s - df.decode_admit_s).sum()
    assert ts.decode_running.sum() * 5.0 == pytest.approx(total, rel=0.05)
    assert cfg.label == "3 coupled" and cfg.n_nodes == 3
    assert sim.ClusterConfig(n_prefill=5, n_decode=3).n_nodes == 8
    assert "3 coupled" in repr(res)


def test_coupled_kernel_python_path_with_jit_disabled():
    """NUMBA_DISABLE_JIT=1 runs the coupled kernel's own Python path; it must agree with the reference."""
    import os
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import numpy as np
        from mooncake_lab import sim
        from mooncake_lab.synthetic import synthetic_trace
        tr = synthetic_trace("conversation-like", seed=5).head(40)
        for chunked, pol in ((False, "load"), (True, "cache_aware"), (True, "random")):
            cfg = sim.ClusterConfig(engine_mode="coupled", n_coupled=2, chunked_prefill=chunked, prefill_policy=pol,
                                    cache_capacity_blocks=50, decode_kv_capacity_tokens=60000, estimator_noise=0.2)
            a, b = sim.simulate(tr, cfg), sim.simulate(tr, cfg, engine="reference")
            assert (a.arrays["outcome"] == b.arrays["outcome"]).all()
            for col in ("prefill_end_s", "finish_s", "tbt_tail_s", "cached_tokens", "queue_wait_s"):
                np.testing.assert_allclose(a.requests[col].to_numpy(float), b.requests[col].to_numpy(float),
                                           rtol=1e-9, err_msg=col)
        print("ok")
    """)
    assert_runs_without_jit(code)


# ---------------------------------------------------------------- decode-only stretches are jumped
def steps(c, batch, contexts):
    return [cm_decode_step_time(c, batch, x) for x in contexts]


@pytest.mark.parametrize("engine", sim.ENGINES)
def test_an_arrival_is_admitted_at_the_first_step_boundary_after_it(engine):
    # A (1,000-token prompt, 50 tokens) decodes alone after its prefill p: step m (m = 1, 2, …)
    # has batch 1 and context 1,000 + m, so its boundaries are p, p + s1, p + s1 + s2, … ("ideal":
    # s ≈ 8.4 ms). B arrives half-way through step 3 (p + s1 + s2 + s3/2): the numba kernel jumps
    # A's steps in closed form and must cut that jump where the step-by-step engine admits B, at
    # the end of step 3, and B's whole prefill starts there.
    cfg = sim.ClusterConfig(**ONE)
    c = cfg.resolve().cost
    p = cm_prefill_time(c, 1000, 0)
    s1, s2, s3 = steps(c, 1, [1001, 1002, 1003])
    a_b = p + s1 + s2 + 0.5 * s3
    df = sim.simulate(make([0.0, a_b], [1000, 600], [50, 2], [chain(1000, 0), chain(600, 100)]), cfg,
                      engine=engine).requests
    b = df.iloc[1]
    assert b.prefill_start_s == pytest.approx(p + s1 + s2 + s3, rel=1e-12)
    assert b.queue_wait_s == pytest.approx(0.5 * s3, rel=1e-9)
    assert b.prefill_end_s == pytest.approx(p + s1 + s2 + s3 + cm_prefill_time(c, 600, 0), rel=1e-12)


@pytest.mark.parametrize("engine", sim.ENGINES)
def test_tail_tbt_merges_a_stall_with_the_longest_jumped_steps(engine):
    # A: 1,000-token prompt, 101 tokens → 100 intervals, tail = mean of the longest 10. B (30,000-
    # token prompt, 2 tokens) arrives during A's 3rd step and stalls it: A's interval 4 = B's whole
    # prefill pB (≈ 2.4 s "ideal") + one step of batch 2 at context 1,004 + 30,001 (B finishes on
    # it). Every other interval m is a lone step at context 1,000 + m, longer as m grows, so the
    # longest 10 are the stall and steps m = 92…100: tail = (stall + Σ s(1, 1,092…1,100)) / 10.
    # Iterations: 2 prefills + 100 decode steps (B's only step is A's step 4) = 102.
    cfg = sim.ClusterConfig(**ONE)
    c = cfg.resolve().cost
    p = cm_prefill_time(c, 1000, 0)
    s1, s2, s3 = steps(c, 1, [1001, 1002, 1003])
    tr = make([0.0, p + s1 + s2 + 0.5 * s3], [1000, 30_000], [101, 2], [chain(1000, 0), chain(30_000, 100)])
    res = sim.simulate(tr, cfg, engine=engine)
    a = res.requests.iloc[0]
    stall = cm_prefill_time(c, 30_000, 0) + cm_decode_step_time(c, 2, 1004 + 30_001)
    lone = steps(c, 1, [1000 + m for m in range(1, 101) if m != 4])
    assert sorted(lone)[-9:] == lone[-9:]  # the lone steps grow with the context
    assert a.tbt_tail_s == pytest.approx((stall + sum(lone[-9:])) / 10, rel=1e-9)
    assert a.finish_s == pytest.approx(p + stall + sum(lone), rel=1e-12)
    assert a.tbt_mean_s == pytest.approx((stall + sum(lone)) / 100, rel=1e-9)
    assert res.diagnostics["iterations"] == 102 and res.diagnostics["prefill_iterations"] == 2


@pytest.mark.parametrize("chunked", [False, True])
def test_log_rows_slide_many_times_and_the_kernel_still_equals_the_reference(chunked):
    # The kernel's per-instance logs keep the last ~max(output) events (sim/coupled.py:log_widths);
    # 240 short requests on 2 nodes fill each row many times over, so every tail is taken after slides.
    import numpy as np
    from test_sim_engines import assert_same
    from mooncake_lab.sim.coupled import log_widths

    rng = np.random.default_rng(7)
    n = 240
    arrival = np.cumsum(rng.exponential(0.3, n))  # light load: completions spread out
    inp = rng.integers(200, 2000, n)
    out = rng.integers(2, 25, n)
    chains = [chain(int(L), 1000 * (i % 7)) for i, L in enumerate(inp)]  # 7 shared prefixes
    tr = make(arrival, inp, out, chains)
    cfg = sim.ClusterConfig(engine_mode="coupled", n_coupled=2, chunked_prefill=chunked, prefill_chunk=512)
    a, b = sim.simulate(tr, cfg), sim.simulate(tr, cfg, engine="reference")
    w_ev, w_run = log_widths(tr.input_len, tr.output_len, chunked, 512)
    assert w_ev == int(out.max()) + 1 and w_run == 3 * int(out.max()) + 3
    done = a.requests[a.requests.outcome == "completed"]
    for e in (0, 1):  # completions at distinct times are distinct events: more than a row holds
        assert done[done.decode_instance == e].finish_s.nunique() > 2 * w_ev
    assert_same(a, b)
