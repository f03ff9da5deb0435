"""Property tests: the numba kernel and the plain-Python reference agree, and invariants hold."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mooncake_lab import sim
from mooncake_lab.traces import trace_from_requests

NUM_COLS = ["prefill_instance", "decode_instance", "queue_wait_s", "fetch_s", "fetch_source",
            "prefill_start_s", "prefill_s", "prefill_end_s", "cached_tokens", "fetched_tokens",
            "computed_tokens", "ttft_s", "decode_ready_s", "decode_admit_s", "finish_s", "tbt_mean_s",
            "tbt_tail_s", "prefill_load", "decode_load", "wasted_prefill_s"]


def prefix_traces(max_gap_s=3.0, n_roots=3, min_shared=0, name="hyp"):
    """A strategy: 1–25 requests (≥ 2 when dense); prompts share prefixes of ``n_roots`` root chains of
    ``min_shared``–10 blocks (so caches hit and fetch), arrivals up to ``max_gap_s`` apart."""
    @st.composite
    def traces(draw):
        n = draw(st.integers(1 if min_shared == 0 else 2, 25))
        arrival = np.cumsum(draw(st.lists(st.floats(0.0, max_gap_s), min_size=n, max_size=n)))
        inp = draw(st.lists(st.integers(1, 5000), min_size=n, max_size=n))
        out = draw(st.lists(st.integers(1, 40), min_size=n, max_size=n))
        roots = draw(st.lists(st.integers(0, n_roots - 1), min_size=n, max_size=n))
        shared = draw(st.lists(st.integers(min_shared, 10), min_size=n, max_size=n))
        counts, ids = [], []
        for i in range(n):
            k = -(-inp[i] // 512)
            s = min(shared[i], k)
            ids += [1000 * roots[i] + j for j in range(s)] + [10_000 + 100 * i + j for j in range(k - s)]
            counts.append(k)
        return trace_from_requests(arrival, inp, out, counts, ids, name=name)
    return traces()


def small_traces():
    """A few requests; prompts share prefixes of a few root chains (so caches hit and fetch)."""
    return prefix_traces()


def assert_runs_without_jit(code: str) -> None:
    """Run ``code`` (it prints "ok" at the end) in a fresh interpreter with numba's JIT disabled: the
    kernels' Python path, which numba's compiled one must equal."""
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().endswith("ok")


configs = st.builds(
    sim.ClusterConfig,
    n_prefill=st.integers(1, 4), n_decode=st.integers(1, 3),
    cache_capacity_blocks=st.integers(0, 30),
    prefill_policy=st.sampled_from(list(sim.PREFILL_POLICIES)),
    kvcache_balancing_threshold=st.sampled_from([1.0, 1.5, 3.0, float("inf")]),
    estimator_noise=st.sampled_from([0.0, 0.0, 0.3]),
    layerwise_kv_transfer=st.booleans(),
    dram_hbm_load=st.booleans(),
    decode_kv_capacity_tokens=st.sampled_from([None, 3000.0, 6000.0, 12000.0]),
    preset=st.sampled_from(["ideal", "calibrated", "modern"]),
    seed=st.integers(0, 5),
    # admission control: every policy, thresholds and SLOs tight enough to reject some requests
    admission=st.sampled_from(list(sim.ADMISSIONS)),
    admission_threshold=st.sampled_from([0.05, 0.3, 1.0, 2.0, float("inf")]),
    decode_time_s=st.sampled_from([0.05, 0.5, 5.0, 30.0]),
    prediction_horizon=st.sampled_from([0.0, 0.5, 1.0, 2.0]),
    ttft_slo_s=st.sampled_from([0.5, 2.0, 30.0]),
    tbt_slo_s=st.sampled_from([0.01, 0.03, 0.1]),
)


def assert_same(a, b):
    assert (a.requests["outcome"] == b.requests["outcome"]).all()
    for col in NUM_COLS:
        np.testing.assert_allclose(a.requests[col].to_numpy(float), b.requests[col].to_numpy(float),
                                   rtol=1e-9, atol=1e-9, err_msg=col)
    np.testing.assert_allclose(a.max_kv_tokens, b.max_kv_tokens)


def assert_invariants(res):
    df, cap = res.requests, res.decode_kv_capacity
    # every request ends exactly once, and only in a known final state
    assert (df["outcome"] != "unfinished").all()
    need = df.input_len + df.output_len
    big = df["outcome"] == "rejected_too_large"
    if res.config.output_lengths == "unknown" and res.config.engine_mode == "disaggregated":
        # decode sees prompts only: too large at arrival exactly when prompt + 1 cannot fit, later only
        # when the KV a request grew to (prompt + output − 1) outgrew a node
        assert ((df.input_len + 1 > cap) <= big).all()
        assert ((df.input_len + 1 > cap) | (need - 1 > cap))[big].all()
    else:
        assert (big == (need > cap)).all()
    done = df[df["outcome"] == "completed"]
    # no NaN hides in a completed request
    for col in ("prefill_start_s", "prefill_end_s", "ttft_s", "finish_s", "queue_wait_s", "prefill_s"):
        assert done[col].notna().all(), col
    dec = done[done.output_len > 1]
    for col in ("decode_ready_s", "decode_admit_s", "tbt_mean_s", "tbt_tail_s"):
        assert dec[col].notna().all(), col
    inlined = done.prefill_instance < 0  # prefilled inside a decode batch (inline_prefill, rule 2c)
    assert (dec.decode_instance >= 0).all() and (not inlined.any() or res.config.inline_prefill)
    assert (df.prefill_instance < res.config.prefill_slots).all()  # a CPP group is one instance; roles: nodes
    inl = done[inlined]  # ready at arrival, admitted, then the first token at the end of that step
    assert (inl.output_len > 1).all() and (inl.input_len <= res.config.cpp_chunk).all()
    assert (inl.cached_tokens == 0).all() and (inl.decode_ready_s == inl.arrival_s).all()
    assert (inl.decode_admit_s >= inl.arrival_s).all() and (inl.prefill_end_s > inl.decode_admit_s).all()
    assert (inl.fetched_tokens == 0).all() and (inl.queue_wait_s == 0).all()
    # time never runs backwards for a request
    assert (done.prefill_start_s >= done.arrival_s).all()
    assert (done.prefill_end_s >= done.prefill_start_s).all()
    pre = dec[dec.prefill_instance >= 0]
    assert (pre.decode_ready_s >= pre.prefill_end_s).all()
    assert (dec.decode_admit_s >= dec.decode_ready_s).all()
    assert (dec.finish_s > dec.decode_admit_s).all()
    # the tail mean is at least the mean, and mean × intervals = finish − prefill end
    assert (dec.tbt_tail_s >= dec.tbt_mean_s * (1 - 1e-12)).all()
    np.testing.assert_allclose(dec.tbt_mean_s * (dec.output_len - 1), dec.finish_s - dec.prefill_end_s,
                               rtol=1e-9)
    # token accounting
    assert (done.cached_tokens + done.computed_tokens == done.input_len).all()
    assert (done.computed_tokens >= 1).all() and (done.fetched_tokens <= done.cached_tokens).all()
    # admission: where a request was rejected decides which stages it went through
    at = df[df.outcome == "rejected_at_arrival"]
    assert (at.prefill_instance == -1).all() and at.prefill_end_s.isna().all() and at.prefill_load.notna().all()
    after = df[df.outcome == "rejected_after_prefill"]
    assert after.prefill_end_s.notna().all() and after.decode_ready_s.notna().all()
    assert after.decode_admit_s.isna().all() and after.finish_s.isna().all() and (after.output_len > 1).all()
    np.testing.assert_allclose(after.wasted_prefill_s, after.prefill_s + after.fetch_s)
    assert (df.wasted_prefill_s[df.outcome != "rejected_after_prefill"] == 0).all()
    adm = res.config.admission
    if adm == "none":
        assert df.outcome.isin(["completed", "rejected_too_large"]).all()
    if adm != "baseline":  # only the baseline decides on the decode side, after the prefill
        assert len(after) == 0
    theta = res.config.admission_threshold
    if adm == "baseline":
        assert (at.prefill_load > theta).all()
    if adm in ("early", "predicted"):
        assert (np.maximum(at.prefill_load, at.decode_load) > theta).all()
        acc = df[df.prefill_instance >= 0]
        assert (np.maximum(acc.prefill_load, acc.decode_load) <= theta).all()
    # events in time order, and decode KV memory never above capacity
    assert res.diagnostics["time_reversals"] == 0
    assert (res.max_kv_tokens <= cap).all()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=small_traces(), config=configs)
def test_kernel_equals_reference_and_invariants_hold(trace, config):
    a = sim.simulate(trace, config, engine="numba")
    b = sim.simulate(trace, config, engine="reference")
    assert_same(a, b)
    assert_invariants(a)
    assert_invariants(b)


# CPP prefill groups (pipelined FIFO, :mod:`mooncake_lab.sim.cpp_group`): X ∈ {1, 2, 4} nodes per
# instance, 1–3 instances, chunks small enough that prompts of ≤ 5,000 tokens are cut into several
# (100) or stay whole (4,096)
cpp_configs = st.builds(
    lambda base, x, groups, chunk, overlap, gbps: base.replace(
        n_prefill=x * groups, cpp_group_size=x, cpp_chunk=chunk, cpp_overlap=overlap, network_gbps=gbps),
    configs, st.sampled_from([1, 2, 4]), st.integers(1, 3), st.sampled_from([100, 1000, 4096]), st.booleans(),
    st.sampled_from([None, 25.0]))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=small_traces(), config=cpp_configs)
def test_cpp_groups_kernel_equals_reference_and_invariants_hold(trace, config):
    a = sim.simulate(trace, config, engine="numba")
    b = sim.simulate(trace, config, engine="reference")
    assert_same(a, b)
    assert_invariants(a)
    assert_invariants(b)


def test_heavier_trace_with_cpp_groups_agrees():
    """300 requests on 2 CPP groups of 2 nodes (chunks of 1,000 tokens): queues, fetches, batches."""
    from mooncake_lab.synthetic import synthetic_trace

    tr = synthetic_trace("conversation-like", seed=3).head(300)
    for policy in sim.PREFILL_POLICIES:
        cfg = sim.ClusterConfig(n_prefill=4, n_decode=2, cpp_group_size=2, cpp_chunk=1000, prefill_policy=policy,
                                cache_capacity_blocks=150, decode_kv_capacity_tokens=150_000, preset="modern")
        a, b = sim.simulate(tr, cfg), sim.simulate(tr, cfg, engine="reference")
        assert_same(a, b)
        assert_invariants(a)
        df = a.requests
        assert (df.queue_wait_s > 0).any() and set(df.prefill_instance) <= {0, 1}
        # pipelined FIFO is exercised: on a group, a request starts before the previous one has
        # finished (its chunks follow the previous ones through the stages), ends after it
        for p in (0, 1):
            g = df[df.prefill_instance == p].sort_values("prefill_start_s")
            prev_end = g.prefill_end_s.shift(1)
            assert (g.prefill_start_s < prev_end).any()
            assert (g.prefill_end_s.iloc[1:] >= prev_end.iloc[1:]).all()
        if policy == "kvcentric":
            assert (a.requests.fetched_tokens > 0).any()


@settings(max_examples=30, deadline=None)
@given(trace=small_traces(), config=configs)
def test_same_seed_same_result(trace, config):
    a = sim.simulate(trace, config)
    b = sim.simulate(trace, config)
    for col in NUM_COLS:
        np.testing.assert_array_equal(a.requests[col].to_numpy(float), b.requests[col].to_numpy(float))


def test_heavier_trace_with_queueing_agrees():
    """A few hundred requests on a tight cluster: long decode queues, big batches, fetches."""
    from mooncake_lab.synthetic import synthetic_trace

    tr = synthetic_trace("conversation-like", seed=3).head(300)
    for policy in sim.PREFILL_POLICIES:
        cfg = sim.ClusterConfig(n_prefill=3, n_decode=2, prefill_policy=policy, cache_capacity_blocks=300,
                                decode_kv_capacity_tokens=150_000, preset="ideal")
        a, b = sim.simulate(tr, cfg), sim.simulate(tr, cfg, engine="reference")
        assert_same(a, b)
        assert_invariants(a)
        assert a.diagnostics["max_decode_batch"] >= 5  # batches really formed
        assert (a.requests.decode_wait_s > 0).any()   # and some requests waited for KV memory


@pytest.mark.parametrize("admission", list(sim.ADMISSIONS))
def test_heavier_overloaded_trace_agrees_under_each_admission(admission):
    """300 requests at 3× on 3P+2D with 150k tokens of decode KV: every admission policy rejects
    (none excepted), both engines agree on who and where, and the invariants hold."""
    from mooncake_lab.synthetic import synthetic_trace

    tr = synthetic_trace("conversation-like", seed=3).head(300).replay(3.0)
    cfg = sim.ClusterConfig(n_prefill=3, n_decode=2, cache_capacity_blocks=300, decode_kv_capacity_tokens=150_000,
                            preset="ideal", admission=admission, admission_threshold=0.8, decode_time_s=5.0,
                            ttft_slo_s=5.0, **sim.SIMPLE_SEMANTICS)   # the memory load makes the decode side bind
    a, b = sim.simulate(tr, cfg), sim.simulate(tr, cfg, engine="reference")
    assert_same(a, b)
    assert_invariants(a)
    assert_invariants(b)
    s = a.summary()
    if admission == "none":
        assert s["rejected"] == 0
    else:
        assert s["rejected_at_arrival"] > 0
    assert (s["rejected_after_prefill"] > 0) == (admission == "baseline")


def test_kernel_python_path_with_jit_disabled():
    """NUMBA_DISABLE_JIT=1 runs the kernel's own Python path; it must agree with the reference."""
    code = textwrap.dedent("""
        import numpy as np
        from mooncake_lab import sim
        from mooncake_lab.synthetic import synthetic_trace
        tr = synthetic_trace("conversation-like", seed=5).head(40)
        for pol, adm in zip(sim.PREFILL_POLICIES, sim.ADMISSIONS):
            cfg = sim.ClusterConfig(n_prefill=4, n_decode=2, prefill_policy=pol, cache_capacity_blocks=50,
                                    decode_kv_capacity_tokens=60000, estimator_noise=0.2, admission=adm,
                                    admission_threshold=0.5, ttft_slo_s=5.0,
                                    cpp_group_size=2 if pol in ("load", "kvcentric") else 1, cpp_chunk=1000)
            a, b = sim.simulate(tr, cfg), sim.simulate(tr, cfg, engine="reference")
            assert (a.arrays["outcome"] == b.arrays["outcome"]).all(), adm
            for col in ("prefill_end_s", "finish_s", "tbt_tail_s", "cached_tokens", "decode_load"):
                np.testing.assert_allclose(a.requests[col].to_numpy(float), b.requests[col].to_numpy(float),
                                           rtol=1e-9, err_msg=col)
        print("ok")
    """)
    assert_runs_without_jit(code)


# ---------------------------------------------------------------------------------------- coupled engine
coupled_configs = st.builds(
    sim.ClusterConfig,
    engine_mode=st.just("coupled"),
    n_coupled=st.integers(1, 4),
    chunked_prefill=st.booleans(),
    prefill_chunk=st.sampled_from([1, 100, 512, 2048]),
    dram_hbm_load=st.booleans(),
    cache_capacity_blocks=st.integers(0, 30),
    prefill_policy=st.sampled_from(list(sim.PREFILL_POLICIES)),
    estimator_noise=st.sampled_from([0.0, 0.0, 0.3]),
    decode_kv_capacity_tokens=st.sampled_from([None, 3000.0, 6000.0, 12000.0]),
    preset=st.sampled_from(["ideal", "calibrated", "modern"]),
    seed=st.integers(0, 5),
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=small_traces(), config=coupled_configs)
def test_coupled_kernel_equals_reference_and_invariants_hold(trace, config):
    a = sim.simulate(trace, config, engine="numba")
    b = sim.simulate(trace, config, engine="reference")
    assert_same(a, b)
    assert a.diagnostics == b.diagnostics
    for res in (a, b):
        assert_invariants(res)
        df = res.requests
        done = df[df.outcome == "completed"]
        # one node does both: same instance, no transfer, decoding starts when the prefill ends
        assert (done.prefill_instance == done.decode_instance).all()
        assert (done.decode_ready_s == done.prefill_end_s).all() and (done.fetched_tokens == 0).all()
        # the prefill's own compute never exceeds its wall time (decodes and other prompts share it)
        assert (done.prefill_s <= done.prefill_end_s - done.prefill_start_s + 1e-9).all()


def test_heavier_coupled_trace_agrees():
    """300 requests on 3 coupled instances with 150k tokens of KV each: queues, big batches."""
    from mooncake_lab.synthetic import synthetic_trace

    tr = synthetic_trace("conversation-like", seed=3).head(300)
    for chunked in (False, True):
        cfg = sim.ClusterConfig(engine_mode="coupled", n_coupled=3, chunked_prefill=chunked, preset="modern",
                                cache_capacity_blocks=300, decode_kv_capacity_tokens=150_000)
        a, b = sim.simulate(tr, cfg), sim.simulate(tr, cfg, engine="reference")
        assert_same(a, b)
        assert_invariants(a)
        assert a.diagnostics["max_decode_batch"] >= 5
        assert (a.requests.queue_wait_s > 1.0).any()  # some requests waited for the instance
