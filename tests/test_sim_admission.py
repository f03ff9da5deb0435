"""Admission control (arXiv §7) on hand-made traces: who is rejected, where, and what is wasted."""
import math

import numpy as np
import pytest

from mooncake_lab import sim
from mooncake_lab.roofline import cm_decode_step_time, cm_prefill_time
from mooncake_lab.sim.admission import decode_load, prefill_load
from mooncake_lab.traces import trace_from_requests

#: The hand-worked cases here are the earlier semantics (memory-based decode load, output lengths known,
#: decode chosen when the KV is ready, free links: sim.SIMPLE_SEMANTICS); the paper's are worked by hand in
#: test_sim_decode_binding, test_sim_preemption and test_sim_links.
IDEAL = dict(preset="ideal", **sim.SIMPLE_SEMANTICS)


def make(arrival, inp, out, chains):
    return trace_from_requests(arrival, inp, out, [len(c) for c in chains], [b for c in chains for b in c])


def test_load_formulas_by_hand():
    c = sim.ClusterConfig(**IDEAL).resolve().cost
    # prefill: a 12 s TTFT against a 30 s SLO = 0.4
    assert prefill_load(12.0, 30.0) == pytest.approx(0.4)
    # decode, memory binds: 600 of 1,000 tokens; one step at batch 1 is ≈ 8.4 ms ≪ 0.1 s → 0.6
    assert decode_load(c, 1.0, 600.0, 1000.0, 0.1) == pytest.approx(0.6)
    # decode, TBT binds: same request against a 5 ms TBT SLO → step / 0.005 > 1 > 0.6
    step = cm_decode_step_time(c, 1.0, 600.0)
    assert decode_load(c, 1.0, 600.0, 1000.0, 0.005) == pytest.approx(step / 0.005)
    assert step / 0.005 > 1.0
    assert decode_load(c, 0.0, 0.0, 1000.0, 0.1) == 0.0


# Two requests of 500 in + 100 out (600 tokens of KV each) at t = 0 on two idle prefill instances:
# identical prefills, so both KV arrive at the decode node (capacity 1,000 tokens) at the same
# time. Only one fits at a time.
TWO = dict(arrival=[0.0, 0.0], inp=[500, 500], out=[100, 100], chains=[[1], [2]])
CFG = dict(n_prefill=2, n_decode=1, decode_kv_capacity_tokens=1000.0, **IDEAL)


def test_baseline_rejects_after_prefill_and_counts_the_prefill_as_wasted():
    tr = make(**TWO)
    res = sim.simulate(tr, sim.ClusterConfig(admission="baseline", **CFG))
    df = res.requests
    # r0's KV is ready first (tie → lower index) and is admitted (load 600/1000 = 0.6); for r1 the
    # node would hold 1,200 tokens: load 1.2 > 1 → rejected after its prefill
    assert df.outcome.tolist() == ["completed", "rejected_after_prefill"]
    p = cm_prefill_time(sim.ClusterConfig(**CFG).resolve().cost, 500, 0)
    assert df.prefill_s[1] == pytest.approx(p)
    assert df.wasted_prefill_s.tolist() == pytest.approx([0.0, p])
    assert res.summary()["wasted_prefill_s"] == pytest.approx(p)
    assert res.summary()["rejected_after_prefill"] == 1 and res.summary()["rejected"] == 1
    # without admission control the same request simply waits for r0 to finish
    none = sim.simulate(tr, sim.ClusterConfig(**CFG)).requests
    assert none.outcome.tolist() == ["completed", "completed"]
    assert none.decode_admit_s[1] == pytest.approx(none.finish_s[0])


def test_early_decides_on_stale_decode_load_and_never_wastes_a_prefill():
    # At both arrivals the decode node is empty (r0 is still in prefill): decode load with the
    # request = 600/1000 = 0.6 ≤ 1 → both accepted; r1 then waits in the decode queue (no
    # decode-side check under early), so nothing is rejected after prefill and nothing is wasted.
    res = sim.simulate(make(**TWO), sim.ClusterConfig(admission="early", **CFG))
    df = res.requests
    assert df.outcome.tolist() == ["completed", "completed"]
    assert df.decode_load.tolist() == pytest.approx([0.6, 0.6])
    assert res.summary()["wasted_prefill_s"] == 0.0
    assert df.decode_admit_s[1] == pytest.approx(df.finish_s[0])


def test_predicted_sees_the_request_still_in_prefill():
    # At r1's arrival, r0 is still in prefill but its KV will be ready at T (= r1's own ready time,
    # the same prefill) and it will decode for t_d = 10 s > 0 past T: predicted batch 2 holding
    # 1,200 tokens → load 1.2 > 1 → r1 rejected at arrival (no prefill spent on it).
    res = sim.simulate(make(**TWO), sim.ClusterConfig(admission="predicted", decode_time_s=10.0, **CFG))
    df = res.requests
    assert df.outcome.tolist() == ["completed", "rejected_at_arrival"]
    assert df.decode_load.tolist() == pytest.approx([0.6, 1.2])
    assert np.isnan(df.prefill_s[1]) and df.prefill_instance[1] == -1
    assert res.summary()["wasted_prefill_s"] == 0.0
    # horizon 0 predicts at the arrival itself, when r0 has not reached decode: accepted, like early
    h0 = sim.simulate(make(**TWO), sim.ClusterConfig(admission="predicted", prediction_horizon=0.0, **CFG))
    assert h0.requests.outcome.tolist() == ["completed", "completed"]


def test_predicted_uses_the_uniform_decode_time():
    # r0 (500 + 400 = 900 tokens) decodes ≈ 400 steps × 8.4 ms ≈ 3.4 s; r1 (50 + 100 = 150) arrives
    # 0.5 s into r0's decode. Current load with r1 = 1,050/1,000 > 1: early rejects it. predicted
    # with t_d = 0.01 s expects r0 gone by then: load 150/1000 = 0.15 → accepted (and r1 waits for
    # r0 in the decode queue); with t_d = 100 s it expects r0 still there: 1.05 → rejected.
    cfg = dict(n_prefill=1, n_decode=1, decode_kv_capacity_tokens=1000.0, **IDEAL)
    first = sim.simulate(make([0.0], [500], [400], [[1]]), sim.ClusterConfig(**cfg)).requests
    t1 = float(first.decode_admit_s[0]) + 0.5
    assert t1 < first.finish_s[0]
    tr = make([0.0, t1], [500, 50], [400, 100], [[1], [2]])
    early = sim.simulate(tr, sim.ClusterConfig(admission="early", **cfg)).requests
    assert early.outcome.tolist() == ["completed", "rejected_at_arrival"]
    assert early.decode_load[1] == pytest.approx(1.05)
    short = sim.simulate(tr, sim.ClusterConfig(admission="predicted", decode_time_s=0.01, **cfg)).requests
    assert short.outcome.tolist() == ["completed", "completed"]
    assert short.decode_load[1] == pytest.approx(0.15)
    assert short.decode_admit_s[1] == pytest.approx(short.finish_s[0])
    long = sim.simulate(tr, sim.ClusterConfig(admission="predicted", decode_time_s=100.0, **cfg)).requests
    assert long.outcome.tolist() == ["completed", "rejected_at_arrival"]


def test_ttft_check_at_arrival_and_none_never_rejects():
    # One prefill instance, two 2,048-token requests at t = 0: TTFTs p and 2p. TTFT SLO = 1.5 p →
    # prefill loads 1/1.5 = 0.667 and 2/1.5 = 1.333 → the second is rejected at arrival by every
    # policy that checks the prefill (baseline = Algorithm 1's TTFT check, early, predicted).
    base = dict(n_prefill=1, n_decode=1, cache_capacity_blocks=0, **IDEAL)
    p = cm_prefill_time(sim.ClusterConfig(**base).resolve().cost, 2048, 0)
    tr = make([0.0, 0.0], [2048, 2048], [2, 2], [[1, 2, 3, 4], [5, 6, 7, 8]])
    for adm in ("baseline", "early", "predicted"):
        df = sim.simulate(tr, sim.ClusterConfig(admission=adm, ttft_slo_s=1.5 * p, **base)).requests
        assert df.outcome.tolist() == ["completed", "rejected_at_arrival"], adm
        assert df.prefill_load.tolist() == pytest.approx([1 / 1.5, 2 / 1.5])
    # none: the loads are recorded but nobody is turned away, however tiny the threshold
    df = sim.simulate(tr, sim.ClusterConfig(ttft_slo_s=1.5 * p, admission_threshold=1e-9, **base)).requests
    assert df.outcome.tolist() == ["completed", "completed"]
    assert df.prefill_load.tolist() == pytest.approx([1 / 1.5, 2 / 1.5])
    # too large is still rejected under none, with no load computed
    big = make([0.0], [900], [200], [[1, 2]])
    r = sim.simulate(big, sim.ClusterConfig(decode_kv_capacity_tokens=1000.0, **base)).requests
    assert r.outcome.tolist() == ["rejected_too_large"] and math.isnan(r.prefill_load[0])


def test_rejected_at_arrival_leaves_no_trace_in_the_caches():
    # r1 (same 4 blocks as r0 + 1) is rejected at arrival by its TTFT; r2 (only r1's last block
    # chain) arrives later: had r1 been stored, r2 would hit 5 blocks; it hits r0's 4.
    base = dict(n_prefill=1, n_decode=1, cache_capacity_blocks=100, **IDEAL)
    c = sim.ClusterConfig(**base).resolve().cost
    p0 = cm_prefill_time(c, 2048, 0)
    tr = make([0.0, 0.0, 100.0], [2048, 2560, 2560], [2, 2, 2],
              [[1, 2, 3, 4], [1, 2, 3, 4, 5], [1, 2, 3, 4, 5]])
    df = sim.simulate(tr, sim.ClusterConfig(admission="baseline", ttft_slo_s=1.01 * p0, **base)).requests
    assert df.outcome.tolist() == ["completed", "rejected_at_arrival", "completed"]
    assert df.cached_tokens[2] == 2048


def test_timeseries_gives_the_loads_and_their_correlation():
    # One request 500 + 400 on a 1,000-token node: while it decodes, decode_load = 900/1000 = 0.9
    # (memory binds; TBT ≈ 8.4 ms / 0.1 s), and prefill_load = 0 (no queue).
    cfg = sim.ClusterConfig(n_prefill=1, n_decode=1, decode_kv_capacity_tokens=1000.0, **IDEAL)
    res = sim.simulate(make([0.0], [500], [400], [[1]]), cfg)
    df = res.requests
    ts = res.timeseries(dt=0.5)
    mid = ts[(ts.index > df.decode_admit_s[0]) & (ts.index < df.finish_s[0])]
    assert len(mid) >= 3
    assert mid.decode_load.to_numpy() == pytest.approx(0.9)
    assert (mid.prefill_load == 0).all()
    assert ts.decode_load.iloc[-1] == 0.0
    assert math.isnan(res.load_correlation(dt=0.5))  # one arrival: no window to correlate over


def test_load_correlation_is_pearson_over_the_arrival_window():
    from mooncake_lab.synthetic import synthetic_trace

    tr = synthetic_trace("conversation-like", seed=1).head(500).replay(4.0)
    res = sim.simulate(tr, sim.ClusterConfig(n_prefill=2, n_decode=2, admission="early",
                                             decode_kv_capacity_tokens=200_000))
    r = res.load_correlation(dt=5.0)
    assert -1.0 <= r <= 1.0
    ts = res.timeseries(dt=5.0)
    w = ts[ts.index <= tr.arrival_s.max()]
    assert r == pytest.approx(np.corrcoef(w.prefill_load, w.decode_load)[0, 1])


def test_l07_overload_comparison_table_and_metrics():
    from mooncake_lab.experiments import l07_overload as l07
    from mooncake_lab.reproduce import _GROUPS
    from mooncake_lab.synthetic import synthetic_trace

    tr = synthetic_trace("toolagent-like", seed=4).head(800)
    df = l07.overload_comparison(tr, speed=8.0, n_prefill=2, n_decode=2)
    assert list(df.index) == ["baseline", "early", "predicted"]
    assert (df.completed + df.rejected == 800).all()
    assert df.loc["baseline", "rejected_after_prefill"] > 0 and df.loc["baseline", "wasted_prefill_s"] > 0
    assert (df.loc[["early", "predicted"], ["rejected_after_prefill", "wasted_prefill_s"]] == 0).all().all()
    assert df.paper_rejected.tolist() == [4183, 3771, 3589]
    assert "overload" in _GROUPS
