"""Roles that switch (``ClusterConfig.role_switch_ratio``, FAST'25 §5.5; rule 14 of
:mod:`mooncake_lab.sim.reference`): worked by hand, the engines against each other, invariants, bad input."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mooncake_lab import sim
from mooncake_lab.models import get_model
from mooncake_lab.hardware import get_node
from mooncake_lab.roofline import cm_prefill_time
from mooncake_lab.traces import trace_from_requests
from mooncake_lab.validate import InputError

from test_sim_engines import assert_invariants, assert_same, configs, prefix_traces

SIMPLE = dict(preset="ideal", network_contention=False, output_lengths="known", decode_binding="ready",
              dram_hbm_load=False, prefill_policy="load")


def trace(arrivals, inputs, outputs):
    counts = [-(-L // 512) for L in inputs]
    ids = list(range(sum(counts)))  # no shared prefix
    return trace_from_requests(arrivals, inputs, outputs, counts, ids, name="roles")


@pytest.mark.parametrize("engine", sim.ENGINES)
def test_a_decode_node_moves_to_a_backed_up_prefill_pool(engine):
    # 1P+2D. Four long prompts (one output token: decode stays idle) at 0 s back up node 0 for 4p s.
    # The check at 1 s sees a queue of 4p − 1 s ≥ the 1 s TTFT SLO against an idle decode pool: decode
    # node 1 (the least KV, ties lowest) is idle, so drained at once, and a prefill node after 0.5 s.
    L = 16_000
    tr = trace([0, 0, 0, 0, 1.0], [L] * 5, [1] * 5)
    cfg = sim.ClusterConfig(**SIMPLE, n_prefill=1, n_decode=2, ttft_slo_s=1.0, role_switch_ratio=2.0,
                            role_switch_interval_s=1.0, role_switch_s=0.5)
    p = float(cm_prefill_time(cfg.resolve().cost, L, 0))
    assert (4 * p - 1.0) / 1.0 >= 1.0 and 4 * p - 1.0 > 0.5  # the loads and the choice the test relies on
    res = sim.simulate(tr, cfg, engine=engine)
    sw = res.role_switches
    assert len(sw) == 1
    row = sw.iloc[0]
    assert (row.decided_s, row.node, row.left, row.joined) == (1.0, 1, "decode", "prefill")
    assert row.drained_s == 1.0 and row.serving_from_s == 1.5
    r = res.requests
    assert r.prefill_instance.tolist() == [0, 0, 0, 0, 1]  # the Conductor's least work: 0.5 s < 4p − 1 s
    assert r.prefill_start_s[4] == 1.5 and r.ttft_s[4] == pytest.approx(0.5 + p, rel=1e-12)


@pytest.mark.parametrize("engine", sim.ENGINES)
def test_a_prefill_node_moves_to_a_full_decode_pool_after_its_last_kv_left(engine):
    # 2P+1D, 10,000 tokens of decode KV. r0 and r1 (3,000 + 2,000 tokens each) fill it: decode load
    # max(TBT, KV / capacity) = 1 at the check when r2 arrives (5 s), the prefill pool idle. The
    # prefill node with the least queued work (both idle: ties lowest, node 0) leaves; it is drained at
    # once and takes decode requests from 5 s + 2 s. r2 is prefilled on node 1 and decoded on node 0.
    tr = trace([0, 0, 5.0], [3000, 3000, 1000], [2000, 2000, 5])
    cfg = sim.ClusterConfig(**SIMPLE, n_prefill=2, n_decode=1, decode_kv_capacity_tokens=10_000,
                            role_switch_ratio=2.0, role_switch_interval_s=4.0, role_switch_s=2.0)
    res = sim.simulate(tr, cfg, engine=engine)
    r = res.requests
    assert r.prefill_instance.tolist() == [0, 1, 1]
    assert r.decode_instance.tolist()[:2] == [2, 2]  # node numbers: nodes 0, 1 start as prefill nodes
    assert r.finish_s[0] > 5.0  # still decoding at the check: the pool is full
    sw = res.role_switches
    assert len(sw) == 1 and sw.node[0] == 0 and sw.joined[0] == "decode"
    assert sw.decided_s[0] == sw.drained_s[0] == 5.0 and sw.serving_from_s[0] == 7.0
    assert r.decode_ready_s[2] < 7.0  # its KV came before node 0 served: it waits in node 2's queue …
    assert r.decode_instance[2] == 2
    late = sim.simulate(trace([0, 0, 5.0, 7.5], [3000, 3000, 1000, 1000], [2000, 2000, 5, 5]), cfg,
                        engine=engine).requests
    assert late.decode_ready_s[3] >= 7.0 and late.decode_instance[3] == 0  # … a later one goes to node 0
    assert late.decode_admit_s[3] == late.decode_ready_s[3]


@pytest.mark.parametrize("engine", sim.ENGINES)
def test_a_draining_decode_node_finishes_its_batch_before_it_prefills(engine):
    # 1P+2D: r0 decodes a long answer on node 1; at the check the prefill queue is over its SLO. Node 2
    # holds nothing and leaves (least KV); had node 1 been chosen it would drain at r0's end.
    tr = trace([0, 0.5, 0.5, 0.5, 0.5, 2.0], [1000, 16_000, 16_000, 16_000, 16_000, 1000], [400, 1, 1, 1, 1, 2])
    cfg = sim.ClusterConfig(**SIMPLE, n_prefill=1, n_decode=2, ttft_slo_s=1.0, role_switch_ratio=1.0,
                            role_switch_interval_s=1.5, role_switch_s=0.0)
    res = sim.simulate(tr, cfg, engine=engine)
    sw = res.role_switches
    assert res.requests.decode_instance[0] == 1 and len(sw) == 1 and sw.node[0] == 2
    busy = sim.ClusterConfig(**{**SIMPLE, "prefill_policy": "load"}, n_prefill=1, n_decode=2, ttft_slo_s=1.0,
                             role_switch_ratio=1.0, role_switch_interval_s=1.5, role_switch_s=0.0,
                             decode_kv_capacity_tokens=16_500)  # r0 is on node 1; node 2 …
    tr2 = trace([0, 0.01, 0.5, 0.5, 0.5, 0.5, 2.0], [1000, 1000, 16_000, 16_000, 16_000, 16_000, 1000],
                [400, 400, 1, 1, 1, 1, 2])
    res2 = sim.simulate(tr2, busy, engine=engine)
    r2 = res2.requests
    assert sorted(r2.decode_instance[:2].tolist()) == [1, 2]  # … takes r1: both decode nodes busy
    sw2 = res2.role_switches
    assert len(sw2) == 1 and sw2.joined[0] == "prefill"
    k = int(sw2.node[0])
    mine = r2[r2.decode_instance == k]
    assert sw2.drained_s[0] == pytest.approx(mine.finish_s.max(), rel=1e-12) and sw2.drained_s[0] > sw2.decided_s[0]
    assert (r2[r2.prefill_instance == k].prefill_start_s >= sw2.serving_from_s[0]).all()


def test_the_default_reload_is_the_weights_from_host_dram():
    cfg = sim.ClusterConfig(role_switch_ratio=2.0)
    m, nd = get_model("llama2-70b"), get_node("a800x8")
    assert cfg.resolve().role_switch_s == pytest.approx(m.weight_bytes() / nd.h2d_bw, rel=1e-12)
    assert nd.h2d_bw == 128e9 and round(cfg.resolve().role_switch_s, 1) == 1.1  # the docstring's 138 GB, 1.1 s
    assert round(m.weight_bytes() / 1e9) == 138


def test_fixed_roles_and_a_switch_that_never_fires_give_the_same_run():
    # ρ = 1000 never fires here: the same run, decode instances numbered as nodes (+ n_prefill)
    tr = trace(list(np.arange(30) * 0.7), [3000 + 100 * i for i in range(30)], [20] * 30)
    for kw in (dict(), dict(decode_binding="arrival", network_contention=True, output_lengths="unknown")):
        base = sim.ClusterConfig(**{**SIMPLE, **kw}, n_prefill=2, n_decode=3)
        a = sim.simulate(tr, base).requests
        b = sim.simulate(tr, base.replace(role_switch_ratio=1000.0)).requests
        assert (b.decode_instance == a.decode_instance + 2).all()
        for col in ("prefill_instance", "ttft_s", "finish_s", "tbt_tail_s", "decode_admit_s"):
            np.testing.assert_array_equal(a[col].to_numpy(), b[col].to_numpy(), err_msg=col)


def assert_roles_respected(res):
    """Every request ran where the pools were: its prefill on a prefill node, its decode on one serving."""
    r = res.requests
    in_p, _ = res.roles_at(r.arrival_s.to_numpy())
    pre = r.prefill_instance.to_numpy()
    done = pre >= 0
    assert in_p[np.flatnonzero(done), pre[done]].all()
    dec = r[(r.decode_instance >= 0) & r.decode_admit_s.notna()]
    _, in_d = res.roles_at(dec.decode_admit_s.to_numpy())
    assert in_d[np.arange(len(dec)), dec.decode_instance.to_numpy()].all()
    sw = res.role_switches
    for q in r[done].itertuples():  # a node back in prefill prefills nothing before its reload ended
        last = sw[(sw.node == q.prefill_instance) & (sw.decided_s <= q.arrival_s)]
        if len(last) and last.joined.iloc[-1] == "prefill":
            assert q.prefill_start_s >= last.serving_from_s.iloc[-1]
    # one switch at a time
    assert (sw.decided_s.to_numpy()[1:] >= sw.serving_from_s.to_numpy()[:-1]).all()


# loads that reach 1 on these short traces: tight TTFT SLOs, small decode nodes
role_configs = configs.flatmap(lambda c: st.builds(
    lambda r, i, s, slo, kv, k: c.replace(role_switch_ratio=r, role_switch_interval_s=i, role_switch_s=s,
                                          n_prefill=max(c.n_prefill, 2), n_decode=max(c.n_decode, 2),
                                          ttft_slo_s=slo, decode_kv_capacity_tokens=kv, **k),
    st.sampled_from([1.0, 1.5, 3.0]), st.sampled_from([0.2, 0.5, 2.0]), st.sampled_from([0.0, 0.4, 3.0]),
    st.sampled_from([0.05, 0.2, 0.5]), st.sampled_from([None, 6000.0, 12000.0]),
    st.sampled_from([{}, dict(decode_binding="ready"), dict(output_lengths="known"),
                     dict(network_contention=False)])))

@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=prefix_traces(max_gap_s=1.0), config=role_configs)
def test_kernel_equals_reference_when_roles_switch(trace, config):
    a = sim.simulate(trace, config, engine="numba")
    b = sim.simulate(trace, config, engine="reference")
    assert_same(a, b)
    np.testing.assert_allclose(a.switch_log, b.switch_log, rtol=1e-9, atol=1e-9)
    assert_invariants(a)
    assert_roles_respected(a)


@pytest.mark.parametrize("seed", range(6))
def test_kernel_equals_reference_on_loaded_clusters_that_switch_both_ways(seed):
    # hypothesis favours small, light examples, most of which never switch: here 25 requests 0–0.3 s
    # apart on 2P+2D at tight SLOs, where most runs switch
    rng = np.random.default_rng(seed)
    joined, switched = set(), 0
    for k in range(8):
        n = 25
        inp = rng.integers(1, 5000, n)
        counts = [-(-int(L) // 512) for L in inp]
        roots = rng.integers(0, 3, n)
        ids = [1000 * int(roots[i]) + j if j < 3 else 10_000 + 100 * i + j for i in range(n) for j in range(counts[i])]
        tr = trace_from_requests(np.cumsum(rng.uniform(0, 0.3, n)), inp, rng.integers(1, 40, n), counts, ids,
                                 name="loaded")
        cfg = sim.ClusterConfig(n_prefill=2, n_decode=2, preset=["calibrated", "modern"][k % 2],
                                prefill_policy=list(sim.PREFILL_POLICIES)[k % 4], ttft_slo_s=0.2,
                                tbt_slo_s=[0.01, 0.03][k // 4], role_switch_ratio=[1.0, 2.0][k % 2],
                                role_switch_interval_s=0.5, role_switch_s=[0.0, 0.3][(k // 2) % 2],
                                decode_binding=["arrival", "ready"][(k // 2) % 2])
        a = sim.simulate(tr, cfg, engine="numba")
        b = sim.simulate(tr, cfg, engine="reference")
        assert_same(a, b)
        np.testing.assert_allclose(a.switch_log, b.switch_log, rtol=1e-9, atol=1e-9)
        assert_invariants(a)
        assert_roles_respected(a)
        switched += len(a.role_switches) > 0
        joined |= set(a.role_switches.joined)
    assert switched >= 4 and joined == {"prefill", "decode"}, (switched, joined)


@pytest.mark.parametrize("kw, says", [
    (dict(role_switch_ratio=0.5), "0 (fixed roles) or a ratio"),
    (dict(role_switch_ratio=2.0, prefill_policy="dynamo"), "prefill_policy one of the Conductor's"),
    (dict(role_switch_ratio=2.0, n_prefill=4, cpp_group_size=2), "cpp_group_size=1"),
    (dict(role_switch_ratio=2.0, inline_prefill=True), "inline_prefill=False"),
    (dict(role_switch_ratio=2.0, engine_mode="coupled"), "engine_mode='disaggregated'"),
    (dict(role_switch_ratio=2.0, role_switch_interval_s=0), "role_switch_interval_s"),
    (dict(role_switch_ratio=2.0, role_switch_s=-1), "role_switch_s"),
    (dict(role_switch_ratio=float("nan")), "role_switch_ratio"),
])
def test_bad_role_settings_are_named(kw, says):
    with pytest.raises(InputError, match="role_switch|prefill_policy"):
        try:
            sim.ClusterConfig(**kw)
        except InputError as e:
            assert says in str(e), str(e)
            raise
