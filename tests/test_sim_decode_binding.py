"""Decode instance chosen at arrival (``decode_binding``, arXiv v3 Algorithm 1 line 24) and the paper's
TBT-based decode load (``decode_load_metric``, §7.1 / §7.4): kernel ≡ reference for both fields and
both values combined with every admission, prefill policy, layer-wise on/off and CPP groups of 1 and
2 nodes; the binding rule re-derived from the result table; two hand-worked examples; bad values."""
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_sim_engines import assert_invariants, assert_runs_without_jit, assert_same, configs, small_traces

from mooncake_lab import sim
from mooncake_lab.roofline import cm_decode_step_time
from mooncake_lab.sim.admission import pool_tbt_load, tbt_load
from mooncake_lab.traces import trace_from_requests
from mooncake_lab.validate import InputError

# the base strategy draws admission, prefill policy, layer-wise, presets, capacities, SLOs, noise; here
# on top: CPP groups of X = 1 or 2 nodes and both values of both new fields
#: Output lengths known (the binding rule re-derived below counts input + output tokens); unknown ones with
#: both fields: test_sim_preemption's and test_sim_links' property tests.
dbind_configs = st.builds(
    lambda base, x, groups, binding, metric: base.replace(
        n_prefill=x * groups, cpp_group_size=x, cpp_chunk=1000, decode_binding=binding, decode_load_metric=metric,
        output_lengths="known"),
    configs, st.sampled_from([1, 2]), st.integers(1, 3), st.sampled_from(list(sim.DECODE_BINDINGS)),
    st.sampled_from(list(sim.DECODE_LOAD_METRICS)))


def _load_by_instance(df, i, t, D, at_arrival):
    """KV tokens (input + output) each decode instance holds or expects just before request ``i`` is
    bound at time ``t``: re-derived from the result table alone, by the rules of sim.reference rule 7
    (events at equal times: decode steps, then ready events by request index, then the arrival)."""
    need = (df.input_len + df.output_len).to_numpy()
    load = np.zeros(D)
    for j in range(len(df)):
        e = df.decode_instance.iat[j]
        if j == i or e < 0:
            continue
        fin, rdy, out = df.finish_s.iat[j], df.decode_ready_s.iat[j], df.outcome.iat[j]
        if at_arrival:  # bound before i (earlier in arrival order) and not done by t
            if j > i:
                continue
            if (out == "completed" and fin > t) or (out == "rejected_after_prefill" and rdy > t):
                load[e] += need[j]
        else:  # its ready event came before i's, and it has not finished by t
            if (rdy < t or (rdy == t and j < i)) and out == "completed" and fin > t:
                load[e] += need[j]
    return load


def assert_binding_rule(res):
    """Every request got the least-loaded decode instance (ties: lowest) at the moment it was bound."""
    df, cfg = res.requests, res.config
    at_arrival = cfg.decode_binding == "arrival"
    # exactly the requests that were prefilled and have tokens left to decode have a decode instance
    has = df.decode_instance >= 0
    assert (has == ((df.prefill_instance >= 0) & (df.output_len > 1))).all()
    assert (df.decode_instance < cfg.n_decode).all()
    for i in np.flatnonzero(has.to_numpy()):
        t = df.arrival_s.iat[i] if at_arrival else df.decode_ready_s.iat[i]
        load = _load_by_instance(df, i, t, cfg.n_decode, at_arrival)
        assert df.decode_instance.iat[i] == int(np.argmin(load)), (i, load)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=small_traces(), config=dbind_configs)
def test_kernel_equals_reference_with_binding_and_load_metric(trace, config):
    a = sim.simulate(trace, config, engine="numba")
    b = sim.simulate(trace, config, engine="reference")
    assert_same(a, b)
    for res in (a, b):
        assert_invariants(res)
        assert_binding_rule(res)
        df = res.requests
        assert df.decode_load[df.outcome != "rejected_too_large"].ge(0).all()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=small_traces(), config=dbind_configs)
def test_the_load_metric_changes_only_the_recorded_load_when_nothing_is_rejected(trace, config):
    """Under admission "none" the loads are only recorded: both metrics give the same run. On one
    decode instance the TBT load is the TBT term of max(TBT, memory), so never above it."""
    cfg = config.replace(admission="none", n_decode=1)
    old = sim.simulate(trace, cfg.replace(decode_load_metric="tbt_or_memory"))
    new = sim.simulate(trace, cfg.replace(decode_load_metric="tbt"))
    for col in ("outcome", "decode_instance", "decode_admit_s", "finish_s", "prefill_load"):
        np.testing.assert_array_equal(old.requests[col].to_numpy(), new.requests[col].to_numpy(), err_msg=col)
    dn, do = new.requests.decode_load.to_numpy(), old.requests.decode_load.to_numpy()
    ok = ~np.isnan(do)
    assert (dn[ok] <= do[ok] * (1 + 1e-12)).all()
    tn, to = new.timeseries(1.0).decode_load.to_numpy(), old.timeseries(1.0).decode_load.to_numpy()
    assert (tn <= to * (1 + 1e-12) + 1e-15).all()


#: Requests of the heavier trace: 200 keep every admission rejecting and requests waiting for KV memory, in
#: 9 s (300 took 38 s in the suite: the reference engine slows with the decode queues).
N_HEAVY = 200


def test_heavier_overloaded_trace_agrees_with_both_fields_on():
    """200 requests at 3× on 3P+2D: every admission with binding at arrival and the TBT load;
    long decode queues, rejections, and the binding rule re-derived for every request."""
    from mooncake_lab.synthetic import synthetic_trace

    tr = synthetic_trace("conversation-like", seed=3).head(N_HEAVY).replay(3.0)
    for adm in sim.ADMISSIONS:
        cfg = sim.ClusterConfig(n_prefill=3, n_decode=2, cache_capacity_blocks=300, decode_kv_capacity_tokens=150_000,
                                preset="modern", admission=adm, admission_threshold=0.8, decode_time_s=5.0,
                                ttft_slo_s=5.0, tbt_slo_s=0.02, decode_binding="arrival", decode_load_metric="tbt",
                                output_lengths="known", network_contention=False)  # the rule below counts input + output
        a, b = sim.simulate(tr, cfg), sim.simulate(tr, cfg, engine="reference")
        assert_same(a, b)
        assert_invariants(a)
        assert_binding_rule(a)
        assert (a.requests.decode_wait_s > 0).any()  # KV memory still binds: requests wait for it
        s = a.summary()
        assert (s["rejected_at_arrival"] > 0) == (adm != "none")
        assert (s["rejected_after_prefill"] > 0) == (adm == "baseline")  # the TBT check after prefill


# ---------------------------------------------------------------------------- hand-worked examples
def test_hand_worked_binding_at_arrival_differs_from_late_binding():
    """Two requests arrive together at t = 0 on 2P+2D (``load`` policy, preset ``ideal``, no cache):
    r0 = 8,000-token prompt, 3 output tokens; r1 = 100-token prompt, 200 output tokens.

    Prefill (both engines, either binding): r0 → p0 (both idle, tie → lowest); r1 → p1 (p0 is busy
    until r0's end). r1's 100-token prefill ends long before r0's 8,000-token one.

    Late binding (``"ready"``): r1's KV is ready first, both decode instances are empty → d0 (tie →
    lowest). r1 then decodes for 199 steps (≈ 1.7 s); r0's KV is ready at ≈ 0.47 s while d0 still
    holds r1's 300 tokens and d1 holds 0 → r0 → d1.

    Binding at arrival (``"arrival"``): at t = 0 r0 is bound first: both instances hold 0 → d0, and
    d0 now has 8,003 tokens bound in flight; r1 (same time, next in order) sees d0 = 8,003 > d1 = 0
    → d1. The ready events only queue them there: r0 → d0, r1 → d1 — the opposite of late binding.
    Each instance is idle when its request's KV arrives, so both start decoding at their ready time.
    """
    tr = trace_from_requests([0.0, 0.0], [8000, 100], [3, 200], [16, 1], list(range(17)), name="hand")
    cfg = sim.ClusterConfig(n_prefill=2, n_decode=2, prefill_policy="load", preset="ideal", cache_capacity_blocks=0,
                            **sim.SIMPLE_SEMANTICS)   # late binding, known outputs (tokens as counted above), free links
    for engine in sim.ENGINES:
        late = sim.simulate(tr, cfg, engine=engine).requests
        early = sim.simulate(tr, cfg.replace(decode_binding="arrival"), engine=engine).requests
        for df in (late, early):
            assert df.prefill_instance.tolist() == [0, 1]
            assert df.outcome.tolist() == ["completed", "completed"]
            assert df.decode_ready_s[1] < df.decode_ready_s[0] < df.finish_s[1]  # r1 still decodes then
            np.testing.assert_array_equal(df.decode_admit_s, df.decode_ready_s)
        assert late.decode_instance.tolist() == [1, 0]
        assert early.decode_instance.tolist() == [0, 1]


def test_hand_worked_tbt_load_admits_what_the_memory_load_rejects():
    """1P+1D, preset ``ideal``, decode KV 10,000 tokens, admission ``early`` (θ = 1), SLOs 30 s / 0.1 s.
    r0 at 0 s: 5,000-token prompt, 500 output tokens (needs 5,500 tokens); r1 at 2 s: 4,000 + 600
    (needs 4,600; 5,500 + 4,600 = 10,100 > 10,000, so both cannot be in decode at once).

    At r1's arrival r0 is decoding (its prefill ends at 0.288 s, it decodes 499 steps of ≈ 8.5 ms
    until ≈ 4.55 s). The decode load with r1 added, B = 2 requests, K = 10,100 tokens on D = 1 node:

    * ``tbt_or_memory``: max(TBT / 0.1, 10,100 / 10,000) — memory binds: 1.01 > 1 → rejected at arrival.
    * ``tbt``: step(2, 10,100) / 0.1. Preset ``ideal`` LLaMA2-70B on 8×A800 is memory-bound there:
      step = c4 + c8·K = 8.4250 ms (weights) + 20.088 ns × 10,100 (KV reads) = 8.6279 ms, so the load
      is 0.0863 ≤ 1 → admitted. Its prefill ends at 2 + 0.2286 s; its KV does not fit while r0 runs,
      so it waits in the decode queue and is admitted at the step boundary where r0 finishes.
    """
    tr = trace_from_requests([0.0, 2.0], [5000, 4000], [500, 600], [10, 8], list(range(18)), name="hand")
    cfg = sim.ClusterConfig(n_prefill=1, n_decode=1, preset="ideal", cache_capacity_blocks=0,
                            decode_kv_capacity_tokens=10_000.0, admission="early", **sim.SIMPLE_SEMANTICS)
    c = cfg.resolve().cost
    assert cm_decode_step_time(c, 2, 10_100) == pytest.approx(8.4250e-3 + 20.088e-9 * 10_100, rel=1e-4)
    for engine in sim.ENGINES:
        old = sim.simulate(tr, cfg, engine=engine).requests
        new = sim.simulate(tr, cfg.replace(decode_load_metric="tbt"), engine=engine).requests
        assert old.outcome.tolist() == ["completed", "rejected_at_arrival"]
        assert old.decode_load[1] == pytest.approx(1.01, rel=1e-12)
        assert new.outcome.tolist() == ["completed", "completed"]
        assert new.decode_load[1] == pytest.approx(0.086279, rel=1e-4)
        assert new.decode_ready_s[1] < new.finish_s[0]         # its KV is there while r0 still runs …
        assert new.decode_admit_s[1] == new.finish_s[0]        # … and it is admitted when r0 frees its KV
        assert new.finish_s[0] == pytest.approx(4.55, abs=0.01)


def test_tbt_pool_load_is_the_mean_of_the_instances_ratios():
    """§7.4's "average TBT ratio of all decoding instances": one busy and one idle instance average to
    half the busy one's ratio; requests not bound yet count 1/D on every instance."""
    c = sim.ClusterConfig(preset="modern").resolve().cost
    busy = tbt_load(c, 4.0, 40_000.0, 0.1)
    assert busy > 0 and tbt_load(c, 0.0, 0.0, 0.1) == 0.0
    assert pool_tbt_load(c, np.array([4.0, 0.0]), np.array([40_000.0, 0.0]), 0.0, 0.0, 0.1, np.ones(2)) == pytest.approx(busy / 2)
    # all spread = the TBT term of today's pool formula, tbt_load(B / D, K / D)
    assert pool_tbt_load(c, np.zeros(2), np.zeros(2), 8.0, 80_000.0, 0.1, np.ones(2)) == pytest.approx(busy)
    # the pool formula of an average instance is not the average of the instances (the step has a floor)
    assert tbt_load(c, 2.0, 20_000.0, 0.1) > busy / 2


# ---------------------------------------------------------------------------- bad values
BAD = [("decode_binding", None), ("decode_binding", "Arrival"), ("decode_binding", "late"),
       ("decode_binding", 1), ("decode_binding", ["arrival"]),
       ("decode_load_metric", None), ("decode_load_metric", "TBT"), ("decode_load_metric", "memory"),
       ("decode_load_metric", 0), ("decode_load_metric", math.nan)]


@pytest.mark.parametrize("field, value", BAD, ids=[f"{f}={v!r}" for f, v in BAD])
def test_bad_values_are_named(field, value):
    with pytest.raises(InputError, match=f"ClusterConfig.{field}: got .*; allowed: one of "):
        sim.ClusterConfig(**{field: value})


def test_defaults_are_the_papers_and_simple_semantics_the_earlier_ones():
    cfg = sim.ClusterConfig()
    assert (cfg.decode_binding, cfg.decode_load_metric) == ("arrival", "tbt")   # Algorithm 1 line 24; §7.4
    cfg = sim.ClusterConfig(**sim.SIMPLE_SEMANTICS)
    assert (cfg.decode_binding, cfg.decode_load_metric) == ("ready", "tbt_or_memory")
    rc = cfg.resolve()
    assert (rc.decode_binding, rc.decode_load_metric) == (0, 0)
    assert sim.ClusterConfig(decode_binding="arrival", decode_load_metric="tbt").resolve().decode_binding == 1


def test_kernel_python_path_with_jit_disabled_and_both_fields_on():
    """NUMBA_DISABLE_JIT=1 runs the kernel's own Python path with both fields on; it must agree with the reference."""
    import os
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import numpy as np
        from mooncake_lab import sim
        from mooncake_lab.synthetic import synthetic_trace
        tr = synthetic_trace("conversation-like", seed=5).head(30).replay(4.0)
        for adm in ("baseline", "predicted"):
            cfg = sim.ClusterConfig(n_prefill=2, n_decode=2, cache_capacity_blocks=50, decode_kv_capacity_tokens=60000,
                                    admission=adm, admission_threshold=0.5, ttft_slo_s=5.0, tbt_slo_s=0.03,
                                    decode_binding="arrival", decode_load_metric="tbt")
            a, b = sim.simulate(tr, cfg), sim.simulate(tr, cfg, engine="reference")
            assert (a.arrays["outcome"] == b.arrays["outcome"]).all(), adm
            for col in ("decode_instance", "finish_s", "decode_load"):
                np.testing.assert_allclose(a.requests[col].to_numpy(float), b.requests[col].to_numpy(float),
                                           rtol=1e-9, err_msg=col)
        print("ok")
    """)
    assert_runs_without_jit(code)


def test_paper_decode_semantics_are_one_override_away():
    """Lecture 07's runs take the paper's decode semantics in one keyword set (the real KV capacity)."""
    from mooncake_lab.experiments import l07_overload as ov

    cfg = ov._config("toolagent-like", admission="early", **ov.PAPER_DECODE)  # noqa: SLF001
    assert (cfg.decode_binding, cfg.decode_load_metric, cfg.decode_kv_capacity_tokens) == ("arrival", "tbt", None)
    assert cfg.resolve().decode_kv_capacity == ov.real_kv_capacity_tokens() > 1e6  # ≈ 1.47 M, not 40k


def test_coupled_engine_ignores_the_decode_fields():
    """A coupled instance decodes what it prefilled: the binding does not apply there (documented)."""
    from mooncake_lab.synthetic import synthetic_trace

    tr = synthetic_trace("conversation-like", seed=3).head(60)
    cfg = sim.ClusterConfig(engine_mode="coupled", n_coupled=3, preset="modern", cache_capacity_blocks=50)
    a = sim.simulate(tr, cfg)
    b = sim.simulate(tr, cfg.replace(decode_binding="arrival", decode_load_metric="tbt"))
    assert_same(a, b)
