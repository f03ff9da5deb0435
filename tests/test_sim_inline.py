"""The paper's hybrid (``ClusterConfig.inline_prefill``, arXiv v3 §5): a short prefill inlined into a
decode batch "only when it can be forwarded without chunking and without compromising the TBT SLO".
Rule 2c of :mod:`mooncake_lab.sim.reference`; worked by hand, engines against each other, bad input."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mooncake_lab import sim
from mooncake_lab.roofline import cm_decode_step_time, cm_prefill_time
from mooncake_lab.traces import trace_from_requests
from mooncake_lab.validate import InputError

from test_sim_engines import assert_invariants, assert_same, configs, small_traces

SIMPLE = dict(n_prefill=1, n_decode=1, preset="ideal", network_contention=False)


def one(L, out=3, at=0.0, **kw):
    k = -(-L // 512)
    tr = trace_from_requests([at], [L], [out], [k], list(range(k)), name="one")
    return tr, sim.ClusterConfig(**SIMPLE, inline_prefill=True, **kw)


@pytest.mark.parametrize("engine", sim.ENGINES)
def test_a_short_prompt_on_an_idle_node_is_prefilled_by_the_decode_batch(engine):
    tr, cfg = one(600)
    c = cfg.resolve().cost
    p, s1, s2 = cm_prefill_time(c, 600, 0), cm_decode_step_time(c, 1, 601), cm_decode_step_time(c, 1, 602)
    assert p + s1 <= cfg.tbt_slo_s  # the condition it is inlined under
    r = sim.simulate(tr, cfg, engine=engine).requests.iloc[0]
    assert r.prefill_instance == -1 and r.decode_instance == 0 and r.cached_tokens == 0
    assert r.decode_ready_s == r.decode_admit_s == 0.0
    # the idle node's first step runs the prefill (its first token at p), then decodes twice
    assert r.ttft_s == pytest.approx(p, rel=1e-12)
    assert r.finish_s == pytest.approx(p + s1 + s2, rel=1e-12)
    assert r.tbt_mean_s == pytest.approx((s1 + s2) / 2, rel=1e-12)
    assert r.tbt_tail_s == pytest.approx(max(s1, s2), rel=1e-12)
    # in the prefill pool: the same TTFT, then the KV's transfer and DRAM → HBM load before decoding
    off = sim.simulate(tr, cfg.replace(inline_prefill=False), engine=engine).requests.iloc[0]
    assert off.prefill_instance == 0 and off.ttft_s == pytest.approx(r.ttft_s, rel=1e-12)
    assert off.finish_s - r.finish_s == pytest.approx(off.decode_ready_s - off.prefill_end_s, rel=1e-9)


@pytest.mark.parametrize("engine", sim.ENGINES)
def test_what_needs_chunking_or_breaks_the_tbt_slo_goes_to_the_prefill_pool(engine):
    tr, cfg = one(600, cpp_chunk=512)          # 600 tokens would need two chunks
    assert sim.simulate(tr, cfg, engine=engine).requests.prefill_instance[0] == 0
    tr, cfg = one(4000)                         # one chunk, but its prefill alone is over 100 ms
    assert cm_prefill_time(cfg.resolve().cost, 4000, 0) > cfg.tbt_slo_s
    assert sim.simulate(tr, cfg, engine=engine).requests.prefill_instance[0] == 0
    tr, cfg = one(600, out=1)                   # nothing to decode: nothing to inline into
    assert sim.simulate(tr, cfg, engine=engine).requests.prefill_instance[0] == 0


@pytest.mark.parametrize("engine", sim.ENGINES)
def test_the_running_batch_waits_for_the_inlined_prefill(engine):
    # r0 (2,000 tokens, long answer) decodes alone; r1 (600 tokens) arrives at 1 s and is inlined: the
    # step r0 is in then takes p1 longer, so r0's longest interval grows by that much.
    tr = trace_from_requests([0.0, 1.0], [2000, 600], [200, 3], [4, 2], [0, 1, 2, 3, 10, 11], name="two")
    cfg = sim.ClusterConfig(**SIMPLE, inline_prefill=True)
    c = cfg.resolve().cost
    on = sim.simulate(tr, cfg, engine=engine).requests
    off = sim.simulate(tr, cfg.replace(inline_prefill=False), engine=engine).requests
    assert on.prefill_instance.tolist() == [0, -1]
    p1 = cm_prefill_time(c, 600, 0)
    longest_on = on.tbt_tail_s[0] * np.ceil(199 / 10)  # the tail mean × its count: the sum of the longest
    assert on.finish_s[0] > off.finish_s[0] + p1 * 0.99
    assert on.tbt_tail_s[0] > off.tbt_tail_s[0] and longest_on > p1


inline_configs = configs.map(lambda c: c.replace(inline_prefill=True, admission="none",
                                                  tbt_slo_s=max(c.tbt_slo_s, 0.1)))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=small_traces(), config=inline_configs)
def test_kernel_equals_reference_with_inlined_prefills(trace, config):
    a = sim.simulate(trace, config, engine="numba")
    b = sim.simulate(trace, config, engine="reference")
    assert_same(a, b)
    assert_invariants(a)
    assert_invariants(b)


def test_some_requests_are_inlined_in_the_property_runs_setting():
    # the strategy above reaches the rule: short prompts, a 100 ms SLO, an ideal node
    tr = trace_from_requests(np.arange(20) * 0.5, [300] * 20, [5] * 20, [1] * 20, list(range(20)), name="short")
    res = sim.simulate(tr, sim.ClusterConfig(n_prefill=2, n_decode=2, preset="ideal", inline_prefill=True))
    assert (res.requests.prefill_instance == -1).sum() == 20


@pytest.mark.parametrize("kw, field", [(dict(engine_mode="coupled"), "engine_mode='coupled'"),
                                       (dict(prefill_policy="dynamo"), "Conductor"),
                                       (dict(admission="early"), "admission='none'")])
def test_unsupported_combinations_are_named(kw, field):
    with pytest.raises(InputError, match=rf"inline_prefill.*{field}"):
        sim.ClusterConfig(inline_prefill=True, **kw)
