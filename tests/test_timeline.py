"""The timeline view (mooncake_lab.timeline): its lanes are the run's own numbers on every architecture
(checked against the per-request arrays by brute force), its counters obey the invariants (never negative,
KV never above capacity), the export reads the same lanes, and bad input is named. The view in a real
browser: tests/test_timeline_browser.py."""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mooncake_lab import trace_export as te
from mooncake_lab.sim import ClusterConfig, simulate
from mooncake_lab.synthetic import synthetic_trace
from mooncake_lab.timeline import lanes, steps, timeline
from mooncake_lab.timeline.widget import SPEEDS, WINDOWS_S, payload
from mooncake_lab.validate import InputError

TRACE = synthetic_trace("conversation-like", seed=5).head(600)

CONFIGS = {
    "mooncake": ClusterConfig(n_prefill=4, n_decode=4),
    "known outputs": ClusterConfig(n_prefill=4, n_decode=4, output_lengths="known"),
    "overloaded, early rejection": ClusterConfig(n_prefill=2, n_decode=2, admission="early"),
    "cache-aware, contention": ClusterConfig(n_prefill=4, n_decode=4, prefill_policy="cache_aware", network_gbps=25.0),
    "CPP groups of 2": ClusterConfig(n_prefill=4, n_decode=4, cpp_group_size=2),
    "router": ClusterConfig(n_prefill=4, n_decode=4, prefill_policy="dynamo"),
    "unknown outputs, preemption": ClusterConfig(n_prefill=3, n_decode=1, output_lengths="unknown",
                                                 decode_kv_capacity_tokens=60_000),
    "roles that switch": ClusterConfig(n_prefill=3, n_decode=3, role_switch_ratio=1.0, role_switch_interval_s=5.0),
    "coupled": ClusterConfig(engine_mode="coupled", n_coupled=4),
    "coupled, chunked": ClusterConfig(engine_mode="coupled", n_coupled=4, chunked_prefill=True),
}


@pytest.fixture(scope="module", params=list(CONFIGS))
def run(request):
    trace = TRACE.replay(8.0) if request.param in ("overloaded, early rejection", "unknown outputs, preemption",
                                                   "roles that switch") else TRACE
    res = simulate(trace, CONFIGS[request.param])
    return res, lanes(res)


def test_every_prefilled_request_is_one_interval_of_its_instance(run):
    res, ln = run
    a = res.arrays
    done = np.flatnonzero(a["prefill_inst"] >= 0)
    assert sorted(ln.pf_req) == list(done)
    i = ln.pf_req
    assert (ln.pf_lane == a["prefill_inst"][i]).all()
    assert np.array_equal(ln.pf_end, a["prefill_end"][i])
    assert (ln.pf_arrival <= ln.pf_start).all() and (ln.pf_start <= ln.pf_compute + 1e-12).all()
    assert (ln.pf_compute <= ln.pf_end + 1e-12).all()
    assert (ln.pf_cached + ln.pf_fetched + ln.pf_computed == res.trace.input_len[i]).all()
    assert (ln.pf_cached >= 0).all() and (ln.pf_fetched >= 0).all()


def test_intervals_of_one_row_never_overlap(run):
    _, ln = run
    for k in range(ln.n_prefill):
        for r in range(int(ln.rows[k])):
            on = (ln.pf_lane == k) & (ln.pf_row == r)
            s, e = ln.pf_start[on], ln.pf_end[on]
            o = np.argsort(s)
            assert (s[o][1:] >= e[o][:-1] - 1e-12).all(), (k, r)


def test_counters_are_the_brute_force_counts_and_obey_the_invariants(run):
    res, ln = run
    a, tr = res.arrays, res.trace
    rng = np.random.default_rng(0)
    probes = np.concatenate([rng.uniform(0, ln.end_s, 40), ln.pf_start[:20], ln.dc_admit[:20]])
    for t in probes:
        for k in range(ln.n_prefill):
            on = ln.pf_lane == k
            want = int(((ln.pf_arrival[on] <= t) & (t < ln.pf_start[on])).sum())
            assert ln.queue.at(k, t) == want, (k, t)
        for d in range(ln.n_decode):
            on = ln.dc_lane == d
            live = (ln.dc_admit[on] <= t) & (t < ln.dc_finish[on])
            assert ln.batch.at(d, t) == live.sum()
            i = ln.dc_req[on]
            if res.config.output_lengths == "unknown" and not res.config.coupled:   # prompt + tokens so far
                f = (t - ln.dc_admit[on]) / (ln.dc_finish[on] - ln.dc_admit[on])
                need = tr.input_len[i] + tr.output_len[i] * f
            else:                                                                   # reserved whole
                need = (tr.input_len + tr.output_len)[i]
            assert ln.kv.at(d, t) == pytest.approx(float(need[live].sum()), rel=1e-9, abs=1e-6)
    for s in (ln.queue, ln.batch, ln.kv):
        assert (s.lane(0)[1] >= -1e-6).all() and (s.level + s.slope * s.t >= -1e-6).all()
        for k in range(len(s.offsets) - 1):
            t = s.t[s.offsets[k]:s.offsets[k + 1]]
            assert (np.diff(t) > 0).all()   # one step per distinct time, time never runs backwards
    if not a["preemptions"].any():   # a preempted request is counted while it waits (the view marks it)
        assert ln.kv.peak() <= ln.kv_capacity + 1e-6   # KV never above what a decode node holds
    if a["preemptions"].any():
        pass
    elif res.config.output_lengths == "known" or res.config.coupled:
        assert ln.kv.peak() == pytest.approx(float(res.max_kv_tokens.max()), abs=1e-6) or res.config.coupled
    else:   # tokens interpolated between admission and the last token: within one token a request
        assert ln.kv.peak() == pytest.approx(float(res.max_kv_tokens.max()), abs=ln.batch.peak() + 1)


def test_transfers_and_rejections_are_the_runs(run):
    res, ln = run
    a = res.arrays
    assert (ln.net_start <= ln.net_end).all() and np.isfinite(ln.net_start).all()
    fetches = ln.net_kind == 1
    assert sorted(ln.net_req[fetches]) == list(np.flatnonzero(a["fetch_time"] > 0))
    assert (ln.net_src[fetches] == a["fetch_src"][ln.net_req[fetches]]).all()
    if res.config.coupled:
        assert not (ln.net_kind == 0).any()   # coupled nodes stream no KV
    else:
        streamed = ln.net_req[ln.net_kind == 0]
        assert (a["ready"][streamed] >= ln.net_end[ln.net_kind == 0] - 1e-9).all()
    rej = np.flatnonzero(np.isin(a["outcome"], [2, 3, 4]))
    assert sorted(ln.rej_req) == list(rej)
    every = np.concatenate([ln.pf_req, ln.rej_req[ln.rej_reason != 3]])
    assert len(set(every)) == len(every) == len(res.trace)   # every request ends exactly once: served or refused


def test_the_export_reads_the_same_lanes(run):
    res, ln = run
    back = te.read_prefills(te.chrome_trace(res))
    order = np.argsort(ln.pf_req)
    assert np.allclose(back.start_s.to_numpy(), ln.pf_compute[order], atol=2e-9)
    assert np.allclose(back.end_s.to_numpy(), ln.pf_end[order], atol=2e-9)


def test_payload_buffers_have_the_lengths_the_script_reads(run):
    _, ln = run
    p = payload(ln, "x")
    assert json.loads(json.dumps(p["meta"]))["n_prefill"] == ln.n_prefill
    n = len(ln.pf_req)
    for k in ("pf_req", "pf_lane", "pf_row", "pf_outcome"):
        assert p[k].format in ("<i", "i") and len(p[k]) == n
    for k in ("pf_start", "pf_end", "pf_cached", "pf_computed"):
        assert p[k].format in ("<d", "d") and len(p[k]) == n
    assert len(p["queue_offsets"]) == ln.n_prefill + 1 and p["queue_offsets"][-1] == len(p["queue_t"])
    assert len(p["switches"]) == ln.switches.size


def test_roles_that_switch_are_shown():
    res = simulate(TRACE.replay(8.0), CONFIGS["roles that switch"])
    ln = lanes(res)
    assert ln.n_prefill == ln.n_decode == 6   # every node has a lane in both pools
    assert ln.switches.shape == res.switch_log.shape


@given(st.lists(st.tuples(st.integers(0, 2), st.floats(0, 100), st.floats(0, 50), st.floats(0.5, 3)), max_size=40))
@settings(max_examples=150, deadline=None)
def test_steps_sum_the_intervals_of_each_lane(iv):
    lane = np.array([x[0] for x in iv], dtype=np.int64)
    on = np.array([x[1] for x in iv])
    off = on + np.array([x[2] for x in iv])
    w = np.array([x[3] for x in iv])
    s = steps(lane, on, off, w, 3)
    for t in list(on) + list(off) + [0.0, 33.3, 200.0]:
        for k in range(3):
            m = (lane == k) & (on <= t) & (t < off)
            assert s.at(k, t) == pytest.approx(float(w[m].sum()), abs=1e-6)


def test_steps_hand_worked():
    # lane 0: [0, 2) weight 1 and [1, 3) weight 2 → 1 from 0, 3 from 1, 2 from 2, 0 from 3
    s = steps(np.array([0, 0]), np.array([0.0, 1.0]), np.array([2.0, 3.0]), np.array([1.0, 2.0]), 2)
    assert list(s.lane(0)[0]) == [0.0, 1.0, 2.0, 3.0]
    assert list(s.lane(0)[1]) == [1.0, 3.0, 2.0, 0.0]
    assert len(s.lane(1)[0]) == 0 and s.at(1, 5.0) == 0.0
    # a KV that grows: 100 tokens at admission (t = 1) plus 10 a second until t = 4 → 130 just before
    g = steps(np.array([0]), np.array([1.0]), np.array([4.0]), np.array([100.0]), 1, rate=np.array([10.0]))
    assert g.at(0, 0.5) == 0.0 and g.at(0, 1.0) == 100.0 and g.at(0, 2.5) == pytest.approx(115.0)
    assert g.at(0, 4.0) == 0.0 and g.peak() == pytest.approx(130.0)


def test_timeline_refuses_what_it_cannot_show():
    res = simulate(TRACE.head(100), CONFIGS["mooncake"])
    with pytest.raises(InputError, match="results"):
        timeline()
    with pytest.raises(InputError, match="at most 4"):
        timeline(res, res, res, res, res)
    with pytest.raises(InputError, match="SimResult"):
        timeline(res.requests)
    with pytest.raises(InputError, match="window"):
        timeline(res, window=7)
    with pytest.raises(InputError, match="speed"):
        timeline(res, speed=0)
    with pytest.raises(InputError, match="labels"):
        timeline(res, res, labels=["only one"])
    with pytest.raises(InputError, match="now"):
        timeline(res, now=float("nan"))
    with pytest.raises(InputError, match="now"):
        timeline(res, now=1e9)
    with pytest.raises(InputError, match="style"):
        timeline(res, style="poster")
    w = timeline(res)
    for trait, bad in (("window", 7.0), ("speed", 3.0), ("now", float("inf"))):
        with pytest.raises(Exception, match=f"Timeline.{trait}"):
            setattr(w, trait, bad)
    w.now = -5.0
    assert w.now == 0.0   # a clock before the start shows the start
    with pytest.raises(InputError, match=r"\.html"):
        w.save_html("/tmp/x.png")


def test_the_view_says_what_it_shows_without_a_kernel(tmp_path):
    a = simulate(TRACE, CONFIGS["mooncake"])
    b = simulate(TRACE, CONFIGS["cache-aware, contention"])
    w = timeline(a, b, labels=["A", "B"], window=30, now=60.0)
    assert w.shown() == (30.0, 60.0)
    bundle = w._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle and bundle["image/png"]
    assert "A; B" in bundle["text/plain"] and "30.0–60.0 s" in bundle["text/plain"]
    page = w.save_html(tmp_path / "view.html").read_text()
    assert page.count('"meta": {"title"') == 2 and "timelineModel" in page
    assert set(WINDOWS_S) >= {0} and 10 in SPEEDS
