"""Unknown output lengths (``output_lengths="unknown"``): KV grows, decode nodes preempt (recompute).

Kernel ≡ reference for both settings with every admission mode, prefill policy, layer-wise on/off,
CPP groups of 1/2 and decode capacities small enough to force preemptions; invariants; a
hand-worked example. Rules: 8b–8d of :mod:`mooncake_lab.sim.reference`.
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mooncake_lab import sim
from mooncake_lab.roofline import cm_decode_step_time, cm_prefill_time
from mooncake_lab.traces import trace_from_requests
from test_sim_engines import assert_invariants, assert_same, configs


@st.composite
def growing_traces(draw):
    """A few requests close together, prompts of 1–1,500 tokens and outputs up to 800: on
    1,500–6,000-token decode nodes their KV outgrows the node while they decode."""
    n = draw(st.integers(1, 16))
    arrival = np.cumsum(draw(st.lists(st.floats(0.0, 0.5), min_size=n, max_size=n)))
    inp = draw(st.lists(st.integers(1, 1500), min_size=n, max_size=n))
    out = draw(st.lists(st.integers(1, 800), min_size=n, max_size=n))
    counts = [-(-x // 512) for x in inp]
    ids = [10_000 * (i % 3) + j for i, k in enumerate(counts) for j in range(k)]  # shared prefixes
    return trace_from_requests(arrival, inp, out, counts, ids, name="grow")


growing_configs = st.builds(
    lambda base, unknown, x, cap, layerwise, binding, metric: base.replace(
        n_prefill=x * base.n_prefill, cpp_group_size=x, cpp_chunk=1000, decode_kv_capacity_tokens=cap,
        layerwise_kv_transfer=layerwise, output_lengths="unknown" if unknown else "known",
        decode_binding=binding, decode_load_metric=metric),
    configs, st.booleans(), st.sampled_from([1, 2]), st.sampled_from([None, 1500.0, 2500.0, 4000.5, 6000.0]),
    st.booleans(), st.sampled_from(list(sim.DECODE_BINDINGS)), st.sampled_from(list(sim.DECODE_LOAD_METRICS)))


def assert_same_all(a, b):
    assert_same(a, b)
    np.testing.assert_array_equal(a.requests["preemptions"], b.requests["preemptions"])
    assert a.summary()["preemptions"] == b.summary()["preemptions"]


def assert_growing_invariants(res):
    """Invariants with unknown output lengths (the known ones: test_sim_engines.assert_invariants)."""
    df, cap = res.requests, res.decode_kv_capacity
    assert (df.outcome != "unfinished").all()  # every request, preempted or not, ends exactly once
    big = df[df.outcome == "rejected_too_large"]
    # too large at arrival exactly when the prompt + 1 cannot fit; later only if its KV outgrew a node
    assert ((df.input_len + 1 > cap) <= (df.outcome == "rejected_too_large")).all()
    assert ((big.input_len + 1 > cap) | (big.input_len + big.output_len - 1 > cap)).all()
    late = big[big.input_len + 1 <= cap]  # ended during decode: admitted, no finish
    assert late.decode_admit_s.notna().all() and late.finish_s.isna().all() and late.tbt_tail_s.isna().all()
    done = df[df.outcome == "completed"]
    dec = done[done.output_len > 1]
    assert (dec.input_len + dec.output_len - 1 <= cap).all()
    for col in ("decode_admit_s", "finish_s", "tbt_mean_s", "tbt_tail_s"):
        assert dec[col].notna().all(), col
    assert (dec.decode_ready_s >= dec.prefill_end_s).all() and (dec.decode_admit_s >= dec.decode_ready_s).all()
    assert (dec.finish_s > dec.decode_admit_s).all()
    # intervals telescope: mean × (out − 1) = finish − prefill end, also across preemptions
    np.testing.assert_allclose(dec.tbt_mean_s * (dec.output_len - 1), dec.finish_s - dec.prefill_end_s, rtol=1e-9)
    assert (dec.tbt_tail_s >= dec.tbt_mean_s * (1 - 1e-12)).all()
    # only requests that decoded are preempted; the count is in the summary
    assert (df.preemptions[df.decode_admit_s.isna()] == 0).all()
    assert res.summary()["preemptions"] == df.preemptions.sum()
    assert res.diagnostics["time_reversals"] == 0
    assert (res.max_kv_tokens <= cap).all()  # KV held never above capacity while it grows


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=growing_traces(), config=growing_configs)
def test_kernel_equals_reference_with_growing_kv(trace, config):
    a = sim.simulate(trace, config, engine="numba")
    b = sim.simulate(trace, config, engine="reference")  # asserts KV ≤ capacity at every step
    assert_same_all(a, b)
    if config.output_lengths == "unknown":
        assert_growing_invariants(a)
        assert_growing_invariants(b)
    else:
        assert_invariants(a)
        assert (a.requests.preemptions == 0).all()


def test_preemptions_happen_and_engines_agree_on_a_heavier_trace():
    """300 requests at 3× on 3P+2D with 60k-token decode nodes: the property test's trace sizes
    are small; here many requests are preempted (some more than once) and the engines agree."""
    from mooncake_lab.synthetic import synthetic_trace

    tr = synthetic_trace("conversation-like", seed=3).head(300).replay(3.0)
    for adm in sim.ADMISSIONS:
        cfg = sim.ClusterConfig(n_prefill=3, n_decode=2, cache_capacity_blocks=300, decode_kv_capacity_tokens=60_000,
                                preset="modern", admission=adm, admission_threshold=1.5,
                                **{**sim.SIMPLE_SEMANTICS, "output_lengths": "unknown"})
        a, b = sim.simulate(tr, cfg), sim.simulate(tr, cfg, engine="reference")
        assert_same_all(a, b)
        assert_growing_invariants(a)
        assert a.summary()["preemptions"] > 0, adm
        if adm == "none":  # 16 preemptions; one request twice
            assert a.summary()["preemptions"] > 10 and a.requests.preemptions.max() >= 2


def _two_requests(out_b=10, cap=2010.0, unknown=True):
    # A and B: 1,000-token prompts (2 blocks each, nothing shared), both arrive at 0 on 2 prefill
    # nodes and 1 decode node; an uncontended network, so both KV are ready at the same time (with
    # shared links B's stream would queue behind A's on the decode node's receive link: sim/links.py)
    tr = trace_from_requests([0.0, 0.0], [1000, 1000], [10, out_b], [2, 2], [1, 2, 3, 4], name="hand")
    cfg = sim.ClusterConfig(n_prefill=2, n_decode=1, decode_kv_capacity_tokens=cap,
                            output_lengths="unknown" if unknown else "known", network_contention=False)
    return tr, cfg


@pytest.mark.parametrize("engine", sim.ENGINES)
def test_hand_worked_preemption(engine):
    """Worked by hand (capacity 2,010 tokens; KV of a request = prompt + tokens so far):

    * r: A's KV is ready, the node is idle: A is admitted (KV 1,001). B's KV is ready at r too;
      it fits (1,001 + 1,001) and is admitted at the next boundary t1 = r + S(1, 1,001), when A
      holds 1,002: together 2,003.
    * Four steps of both: S(2, 2,003) + S(2, 2,005) + S(2, 2,007) + S(2, 2,009) → t2. Now A has 6
      tokens, B 5; the next step would hold 2,011 > 2,010: B, the newest, is preempted (KV freed,
      front of the queue). It cannot come back at once (1,006 + 1,005 > 2,010).
    * A alone: S(1, 1,006) … S(1, 1,009) → t3, A's 10th token: A finishes, B is admitted again and
      its 1,005 tokens are recomputed: a stall R = prefill(1,005 tokens) before the next step.
    * B alone: R + S(1, 1,005), then S(1, 1,006) … S(1, 1,009) → t4: B's 10th token, B finishes.
    * B's 9 intervals: t1 + S(2, 2,003) − prefill end; S(2, 2,005), S(2, 2,007), S(2, 2,009);
      (t3 − t2) + R + S(1, 1,005) (the wait and the recompute); S(1, 1,006) … S(1, 1,009). Its tail
      (the longest ceil(10%) = 1 interval) is the one after the preemption.
    * Peak KV: 2,009 tokens (the last step of both).
    S(b, ctx) = cm_decode_step_time, summed step by step here (the kernel uses closed forms).
    """
    tr, cfg = _two_requests()
    res = sim.simulate(tr, cfg, engine=engine)
    df = res.requests
    c = cfg.resolve().cost

    def S(b, ctx):
        return float(cm_decode_step_time(c, b, ctx))

    r = df.decode_ready_s[0]
    assert df.decode_ready_s[1] == r  # same prompt, same prefill on its own node
    t1 = r + S(1, 1001)
    t2 = t1 + sum(S(2, x) for x in (2003, 2005, 2007, 2009))
    t3 = t2 + sum(S(1, x) for x in (1006, 1007, 1008, 1009))
    R = float(cm_prefill_time(c, 1005, 0))
    t4 = t3 + R + sum(S(1, x) for x in (1005, 1006, 1007, 1008, 1009))
    assert list(df.preemptions) == [0, 1] and res.summary()["preemptions"] == 1
    np.testing.assert_allclose(df.decode_admit_s, [r, t1], rtol=1e-12)  # the first admission
    np.testing.assert_allclose(df.finish_s, [t3, t4], rtol=1e-12)
    pe = df.prefill_end_s[1]
    iv = [t1 + S(2, 2003) - pe, S(2, 2005), S(2, 2007), S(2, 2009), (t3 - t2) + R + S(1, 1005),
          S(1, 1006), S(1, 1007), S(1, 1008), S(1, 1009)]
    np.testing.assert_allclose(df.tbt_mean_s[1], sum(iv) / 9, rtol=1e-12)
    np.testing.assert_allclose(df.tbt_tail_s[1], (t3 - t2) + R + S(1, 1005), rtol=1e-12)
    assert res.max_kv_tokens[0] == 2009
    # with known output lengths B (1,010 reserved) waits for A: no preemption, admitted at t3'
    known = sim.simulate(tr, cfg.replace(output_lengths="known"), engine=engine).requests
    assert list(known.preemptions) == [0, 0]
    np.testing.assert_allclose(known.decode_admit_s[1], known.finish_s[0], rtol=1e-12)


@pytest.mark.parametrize("engine", sim.ENGINES)
def test_a_request_whose_kv_outgrows_a_node_ends_as_too_large(engine):
    """B: prompt 1,000 + 1,100 output tokens on a 2,010-token node. Unknown lengths: admitted (1,001
    fits), preempted at t2 as in :func:`test_hand_worked_preemption`, admitted again when A
    finishes, and when, alone, its KV would reach 2,011 (1,000 + 1,011 tokens) it ends as
    ``rejected_too_large``. Known: rejected at arrival (1,000 + 1,100 > 2,010)."""
    tr, cfg = _two_requests(out_b=1100)
    df = sim.simulate(tr, cfg, engine=engine).requests
    assert list(df.outcome) == ["completed", "rejected_too_large"]
    assert df.decode_admit_s.notna().all() and np.isnan(df.finish_s[1]) and df.preemptions[1] == 1
    known = sim.simulate(tr, cfg.replace(output_lengths="known"), engine=engine).requests
    assert list(known.outcome) == ["completed", "rejected_too_large"] and np.isnan(known.decode_admit_s[1])


def test_output_lengths_field_is_checked():
    with pytest.raises(ValueError, match="output_lengths.*'known', 'unknown'"):
        sim.ClusterConfig(output_lengths="guess")
    with pytest.raises(ValueError, match=r"^ClusterConfig\.output_lengths: "):
        sim.ClusterConfig(output_lengths=1)
    assert sim.ClusterConfig().output_lengths == "unknown"   # the paper's (arXiv v3 §7.4)
    # the coupled engine reserves prompt + output at admission whatever the field says (documented)
    from mooncake_lab.synthetic import synthetic_trace
    tr = synthetic_trace("conversation-like").head(60)
    a = sim.simulate(tr, sim.ClusterConfig(engine_mode="coupled", n_coupled=2, output_lengths="unknown")).requests
    b = sim.simulate(tr, sim.ClusterConfig(engine_mode="coupled", n_coupled=2, output_lengths="known")).requests
    assert a.equals(b)


def _thrashing():
    # 6 requests of 200 prompt tokens, 1,500 output tokens each, on one 2,000-token decode node:
    # they are admitted together and preempt one another again and again (11 times)
    n = 6
    tr = trace_from_requests([0.0] * n, [200] * n, [1500] * n, [1] * n, list(range(n)), name="thrash")
    return tr, sim.ClusterConfig(n_prefill=2, n_decode=1, decode_kv_capacity_tokens=2000.0, output_lengths="unknown")


def test_more_preemptions_than_requests_run_again_with_more_room(monkeypatch):
    from mooncake_lab.sim import run

    calls = []
    more = run._more_room
    monkeypatch.setattr(run, "_more_room", lambda *a: calls.append(a[-1]) or more(*a))
    tr, cfg = _thrashing()
    a, b = sim.simulate(tr, cfg), sim.simulate(tr, cfg, engine="reference")
    assert a.summary()["preemptions"] == 11 and calls == [6]  # room for 6, then 12
    assert_same_all(a, b)
    assert_growing_invariants(a)


def test_room_for_preemptions_is_bounded_by_the_memory_budget(monkeypatch):
    from mooncake_lab.sim import run

    tr, cfg = _thrashing()
    monkeypatch.setattr(run, "MEMORY_BUDGET_BYTES", sum(b for b, _ in run.memory_estimate(tr, cfg).values()) + 100)
    with pytest.raises(ValueError, match="output_lengths='unknown' this run preempts more than 6 times"):
        sim.simulate(tr, cfg)


def _queue_penalised(req, view):
    """A student policy: the TTFT estimate plus a penalty on long queues."""
    return int(np.argmin(view.ttft_s + 0.5 * view.wait_s))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=growing_traces(), config=growing_configs)
def test_student_policy_kernel_equals_reference_with_growing_kv(trace, config):
    """The student-policy kernel variant gets the same new arguments (compiled once per types)."""
    config = config.replace(prefill_policy=_queue_penalised)
    a, b = sim.simulate(trace, config), sim.simulate(trace, config, engine="reference")
    assert_same_all(a, b)
