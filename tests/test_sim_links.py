"""The network as a shared resource (``ClusterConfig.network_contention``, :mod:`mooncake_lab.sim.links`):
kernel ≡ reference with contention on (decode bound at arrival or when the KV is ready), hand-worked
examples (a hot holder's send link; a decode node's receive link), link reservations never overlap,
and contention off is today's simulator."""
import textwrap
import warnings
from collections import defaultdict

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_sim_engines import (NUM_COLS, assert_invariants, assert_runs_without_jit, configs, cpp_configs, prefix_traces,
                              small_traces)

from mooncake_lab import sim
from mooncake_lab.roofline import cm_kv_transfer_time, cm_prefill_time
from mooncake_lab.sim.links import LinkCalendar, fit_all
from mooncake_lab.sim.reference import run_reference
from mooncake_lab.sim.run import _draws, _new_outputs
from mooncake_lab.synthetic import synthetic_trace
from mooncake_lab.traces import trace_from_requests

LINK_COLS = NUM_COLS + ["fetch_wait_s", "stream_wait_s"]


def assert_same(a, b):
    assert (a.requests["outcome"] == b.requests["outcome"]).all()
    for col in LINK_COLS:
        np.testing.assert_allclose(a.requests[col].to_numpy(float), b.requests[col].to_numpy(float),
                                   rtol=1e-9, atol=1e-9, err_msg=col)
    np.testing.assert_allclose(a.max_kv_tokens, b.max_kv_tokens)


def reference_with_log(trace, config):
    """The reference engine's outputs and every link reservation ``(link, begin, end, request)``."""
    rc = config.resolve()
    u, z = _draws(config.seed, len(trace), config.n_prefill_instances, config.estimator_noise)
    out, log = _new_outputs(len(trace)), []
    run_reference(trace, config, rc, u, z, out, np.zeros(config.n_decode), np.zeros(7, dtype=np.int64),
                  link_log=log)
    return out, log


def assert_links_never_overbooked(trace, config):
    """On every link — prefill send / receive links and decode receive links — the reservations
    never overlap (so no link carries more than capacity × time: each transfer runs at the link's
    full rate), and they are what the per-request times say: a stream holds its prefill nodes' send
    links and, bound at arrival, its decode node's receive link, over the same interval."""
    out, log = reference_with_log(trace, config)
    by_link, by_req = defaultdict(list), defaultdict(list)
    for link, b, e, i in log:
        assert e >= b >= trace.arrival_s[i]
        by_link[link].append((b, e))
        by_req[i].append((link, b, e))
    for link, iv in by_link.items():
        iv.sort()
        for (b0, e0), (b1, e1) in zip(iv, iv[1:]):
            assert b1 >= e0, (link, (b0, e0), (b1, e1))
    x = config.cpp_group_size
    c = config.resolve().cost
    for i, res in by_req.items():
        fetch = [r for r in res if r[0][0] == "recv"]  # only fetches use receive links
        stream = [r for r in res if r[0][0] == "send" and r[0][1] == out["prefill_inst"][i]]
        if out["fetched_tok"][i] > 0:
            assert len(fetch) == x and all(r[0][1] == out["prefill_inst"][i] for r in fetch)
            begin = out["prefill_start"][i] + out["fetch_wait"][i]
            assert max(r[1] for r in fetch) == pytest.approx(begin, abs=1e-9)
            assert all(r[2] - r[1] == pytest.approx(out["fetch_time"][i], abs=1e-12) for r in fetch)
        if trace.output_len[i] > 1:  # the stream: x s on each of its instance's send links, ending by ready
            assert len(stream) == x
            xs = cm_kv_transfer_time(c, int(trace.input_len[i]))
            assert all(r[2] - r[1] == pytest.approx(xs, rel=1e-12) for r in stream)
            assert all(r[2] <= out["ready"][i] + 1e-9 for r in stream)
            drecv = [r for r in res if r[0][0] == "decode_recv"]
            if config.decode_binding == "arrival":  # the bound decode node's receive link, with the stream
                assert [r[0] for r in drecv] == [("decode_recv", out["decode_inst"][i], 0)]
                assert (drecv[0][1], drecv[0][2]) == (stream[0][1], stream[0][2])
            else:  # late binding: no decode receive link (links.py says why)
                assert drecv == []
        else:
            assert not [r for r in res if r[0][0] == "decode_recv"]


def busy_traces():
    """Like ``small_traces`` but denser and sharing more (two root chains of 2–10 blocks), so prefixes
    are fetched often and transfers meet on the links."""
    return prefix_traces(max_gap_s=0.1, n_roots=2, min_shared=2, name="hyp-busy")


GBPS = st.sampled_from([None, 2.0, 5.0, 10.0, 25.0])
POLICY = st.sampled_from(["kvcentric", "kvcentric", "kvcentric", "cache_aware", "load", "random"])
#: arrival: streams also reserve the bound decode node's receive link; ready: they do not (links.py)
BINDING = st.sampled_from(["arrival", "ready"])
contention_configs = st.builds(
    lambda base, gbps, policy, binding: base.replace(network_contention=True, network_gbps=gbps,
                                                     prefill_policy=policy, decode_binding=binding),
    configs, GBPS, POLICY, BINDING)
cpp_contention_configs = st.builds(
    lambda base, gbps, policy, binding: base.replace(network_contention=True, network_gbps=gbps,
                                                     prefill_policy=policy, decode_binding=binding),
    cpp_configs, GBPS, POLICY, BINDING)
traces = st.one_of(small_traces(), busy_traces())
#: Contention with the other issue-14 fields (decode binding, TBT load, unknown outputs, eviction) drawn together.
fidelity_configs = st.builds(
    lambda base, binding, metric, outputs, eviction, cap: base.replace(
        decode_binding=binding, decode_load_metric=metric, output_lengths=outputs, cache_eviction=eviction,
        decode_kv_capacity_tokens=cap),
    contention_configs, st.sampled_from(["ready", "arrival"]), st.sampled_from(["tbt_or_memory", "tbt"]),
    st.sampled_from(["known", "unknown"]), st.sampled_from(["lru", "lfu", "length_aware"]),
    st.sampled_from([None, 3000.0, 8000.0]))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=traces, config=contention_configs)
def test_contention_kernel_equals_reference_and_invariants_hold(trace, config):
    a = sim.simulate(trace, config, engine="numba")
    b = sim.simulate(trace, config, engine="reference")
    assert_same(a, b)
    assert_invariants(a)
    assert_invariants(b)
    assert_links_never_overbooked(trace, config)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=traces, config=cpp_contention_configs)
def test_contention_with_cpp_groups_kernel_equals_reference(trace, config):
    a = sim.simulate(trace, config, engine="numba")
    b = sim.simulate(trace, config, engine="reference")
    assert_same(a, b)
    assert_invariants(a)
    assert_links_never_overbooked(trace, config)


@pytest.mark.parametrize("admission", ["none", "baseline", "early", "predicted"])
@pytest.mark.parametrize("layerwise", [True, False])
def test_heavier_contended_trace_agrees(admission, layerwise):
    """400 conversation-like requests on 8P+2D at 50 Gbps: fetches and streams queue on the links
    (the waits are not all 0), and both engines still agree, under every admission rule."""
    tr = synthetic_trace("conversation-like").head(400)
    cfg = sim.ClusterConfig(n_prefill=8, n_decode=2, network_gbps=50.0, network_contention=True, admission=admission,
                            layerwise_kv_transfer=layerwise, decode_kv_capacity_tokens=60_000.0,
                            admission_threshold=1.5)
    a = sim.simulate(tr, cfg)
    b = sim.simulate(tr, cfg, engine="reference")
    assert_same(a, b)
    assert_invariants(a)
    df = a.requests
    assert (df.fetch_wait_s.dropna() >= 0).all() and (df.stream_wait_s.dropna() >= 0).all()
    if admission == "none":  # (the others reject much of this overload: fewer transfers meet)
        assert df.fetch_wait_s.max() > 0 and df.stream_wait_s.max() > 0
    assert df.fetch_wait_s.max() > 0 or df.stream_wait_s.max() > 0
    assert_links_never_overbooked(tr, cfg)


# ---------------------------------------------------------------- a hand-worked example
EPS = 0.01
# The hand-worked examples time the links; DRAM ↔ HBM loads (tests/test_sim_dram_load.py) are switched off.
HOT = dict(n_prefill=4, n_decode=1, network_gbps=60.0, cache_capacity_blocks=100, network_contention=True,
           dram_hbm_load=False)


def hot_holder_trace():
    """Blocks 0–7 become hot on instance 0; then three requests want them. Every output is 1 token
    (no KV stream to decode), so only fetches use links (times: see the test below)."""
    c = sim.ClusterConfig(**HOT).resolve().cost
    f, P0, p1 = cm_kv_transfer_time(c, 2048), cm_prefill_time(c, 4096, 0), cm_prefill_time(c, 512, 2048)
    t1 = P0 + EPS
    ids = (list(range(8)) + list(range(8)) + list(range(300, 308)) + [0, 1, 2, 3, 100] + list(range(8)) + [200]
           + [0, 1, 2, 3, 400])
    return trace_from_requests([0.0, EPS, t1, t1 + EPS, t1 + f + EPS], [4096, 8192, 2560, 4608, 2560],
                               [1] * 5, [8, 16, 5, 9, 5], ids, name="hot")


def test_two_fetches_from_one_hot_holder_queue_on_its_send_link_and_a_replica_relieves_it():
    """By hand (4 instances, calibrated preset, 60 Gbps, ε = 0.01 s; f = cm_kv_transfer_time(2,048
    tokens) = 0.103 s, P0 = prefill(4,096 | 0) = 0.664 s, pL = prefill(4,096 | 4,096), p1 =
    prefill(512 | 2,048) = 0.128 s, p2 = prefill(512 | 4,096)):

    * r0 (t = 0, blocks 0–7) → instance 0 (all idle: a tie), prefill [0, P0]: the blocks are complete
      there at P0.
    * rL (ε, blocks 0–7 + 8 own): instance 0 waits P0 − ε then prefills pL with 8 blocks cached; a
      fetch elsewhere could not begin before P0 either (+ 2f) → instance 0, busy until P0 + pL.
    * r1 (t1 = P0 + ε, blocks 0–3 + 1 own): instance 0 is busy (pL − ε); instances 1–3 fetch 4 blocks
      from instance 0 (f) then prefill p1: f + p1 wins → instance 1 (the lowest); the fetch holds
      instance 0's send link and instance 1's receive link over [t1, t1 + f].
    * r2 (t1 + ε, blocks 0–7 + 1 own): only instance 0 holds all 8. Instance 2 fetches 4,096 tokens
      (2f) from it, but its send link carries r1's fetch until t1 + f: wait f − ε, fetch [t1 + f,
      t1 + 3f], estimate 3f − ε + p2. Instance 1 would wait for r1 (f + p1 − ε), fetch blocks 4–7
      (f) and prefill p2: longer since f < p1. → instance 2 (3 ties with it), TTFT 3f − ε + p2.
    * r3 (t3 = t1 + f + ε, blocks 0–3 + 1 own): holders of blocks 0–3: instance 0 (send link busy
      with r2's fetch until t1 + 3f), instance 1 (its copy complete at t1 + f, send link idle) and
      instance 2 (copy complete only at t1 + 3f). Instance 3 fetches from the replica on instance 1
      at once: TTFT f + p1 — the replica relieves the hot holder.
    """
    tr = hot_holder_trace()
    c = sim.ClusterConfig(**HOT).resolve().cost
    f, P0 = cm_kv_transfer_time(c, 2048), cm_prefill_time(c, 4096, 0)
    pL, p1, p2 = cm_prefill_time(c, 4096, 4096), cm_prefill_time(c, 512, 2048), cm_prefill_time(c, 512, 4096)
    assert f < p1 - EPS and 3 * f < pL - 2 * EPS  # the conditions the choices above rely on
    t1 = P0 + EPS
    for engine in sim.ENGINES:
        df = sim.simulate(tr, sim.ClusterConfig(**HOT), engine=engine).requests
        assert df.prefill_instance.tolist() == [0, 0, 1, 2, 3]
        assert df.fetch_source.tolist() == [-1, -1, 0, 0, 1]
        assert df.fetched_tokens.tolist() == [0, 0, 2048, 4096, 2048]
        assert df.fetch_wait_s.tolist() == pytest.approx([0.0, 0.0, 0.0, f - EPS, 0.0], abs=1e-12)
        assert df.ttft_s.tolist() == pytest.approx([P0, P0 - EPS + pL, f + p1, 3 * f - EPS + p2, f + p1], rel=1e-12)
    _, log = reference_with_log(tr, sim.ClusterConfig(**HOT))
    assert [(lk, pytest.approx(b), pytest.approx(e), i) for lk, b, e, i in log] == [
        (("send", 0, 0), t1, t1 + f, 2), (("recv", 1, 0), t1, t1 + f, 2),
        (("send", 0, 0), t1 + f, t1 + 3 * f, 3), (("recv", 2, 0), t1 + f, t1 + 3 * f, 3),
        (("send", 1, 0), t1 + f + EPS, t1 + 2 * f + EPS, 4), (("recv", 3, 0), t1 + f + EPS, t1 + 2 * f + EPS, 4)]
    off = sim.simulate(tr, sim.ClusterConfig(**HOT).replace(network_contention=False)).requests
    assert (off.fetch_wait_s == 0).all() and (off.fetch_source[off.fetched_tokens > 0] == 0).all()


def test_a_fetch_uses_the_gap_before_a_stream():
    """Serialized transfer. rA (t = 0, blocks 0–3, 1 output token) leaves its blocks on instance 0
    at PA. r0 (PA + ε, 8 own blocks, 2 output tokens) → instance 0 (both idle: a tie); its KV stream
    is reserved at once, over [E0, E0 + x0] on instance 0's send link (E0 = its prefill end). r1
    (PA + 2ε, blocks 0–3 + 1 own) → instance 1, fetching blocks 0–3 from instance 0 over [PA + 2ε,
    PA + 2ε + f]: in the gap before r0's stream, so nothing waits and every time equals the
    uncontended run's."""
    ids = [0, 1, 2, 3] + list(range(10, 18)) + [0, 1, 2, 3, 100]
    cfg = sim.ClusterConfig(n_prefill=2, n_decode=1, network_gbps=60.0, layerwise_kv_transfer=False,
                            dram_hbm_load=False)
    c = cfg.resolve().cost
    PA, P0, f = cm_prefill_time(c, 2048, 0), cm_prefill_time(c, 4096, 0), cm_kv_transfer_time(c, 2048)
    tr = trace_from_requests([0.0, PA + EPS, PA + 2 * EPS], [2048, 4096, 2560], [1, 2, 2], [4, 8, 5], ids, name="gap")
    for engine in sim.ENGINES:
        on = sim.simulate(tr, cfg.replace(network_contention=True), engine=engine).requests
        off = sim.simulate(tr, cfg, engine=engine).requests
        assert on.prefill_instance.tolist() == [0, 0, 1] and on.fetched_tokens.tolist() == [0, 0, 2048]
        assert on.fetch_wait_s.tolist() == [0.0, 0.0, 0.0] and on.stream_wait_s[1:].tolist() == [0.0, 0.0]
        assert on.decode_ready_s[1] == pytest.approx(PA + EPS + P0 + cm_kv_transfer_time(c, 4096), rel=1e-12)
        for col in ("ttft_s", "decode_ready_s", "finish_s"):
            np.testing.assert_array_equal(on[col], off[col])
    _, log = reference_with_log(tr, cfg.replace(network_contention=True))
    first = [(lk, b) for lk, b, e, i in log if lk == ("send", 0, 0)]
    assert [b for _, b in first] == pytest.approx([PA + EPS + P0, PA + 2 * EPS])  # stream booked first, fetch before it


def test_a_busy_send_link_delays_the_stream():
    """Two requests on one prefill node, serialized transfer, link as slow as the prefill: r1's
    stream (wanted over [end1, end1 + x1]) finds the link busy with r0's stream until end0 + x0 >
    end1 and waits: stream wait = end0 + x0 − end1, KV ready at end0 + x0 + x1."""
    ids = list(range(8)) + list(range(100, 101))
    tr = trace_from_requests([0.0, 0.0], [4096, 512], [2, 2], [8, 1], ids, name="stream")
    cfg = sim.ClusterConfig(n_prefill=1, n_decode=1, network_gbps=2.0, layerwise_kv_transfer=False,
                            network_contention=True, dram_hbm_load=False)
    c = cfg.resolve().cost
    x0, x1 = cm_kv_transfer_time(c, 4096), cm_kv_transfer_time(c, 512)
    end0 = cm_prefill_time(c, 4096, 0)
    end1 = end0 + cm_prefill_time(c, 512, 0)
    assert end0 + x0 > end1
    for engine in sim.ENGINES:
        df = sim.simulate(tr, cfg, engine=engine).requests
        assert df.stream_wait_s.tolist() == pytest.approx([0.0, end0 + x0 - end1], abs=1e-9)
        assert df.decode_ready_s.tolist() == pytest.approx([end0 + x0, end0 + x0 + x1], rel=1e-12)


def test_two_streams_to_one_decode_node_queue_on_its_receive_link():
    """By hand (2 prefill instances, 1 decode node, calibrated preset, 10 Gbps, serialized transfer,
    ε = 0.01 s; both prompts L = 4,096 tokens of their own blocks, 2 output tokens; P = prefill(4,096
    | 0), x = cm_kv_transfer_time(4,096 tokens) > ε):

    * r0 (t = 0) → prefill instance 0 (both idle: a tie), prefill [0, P]; bound at arrival to decode
      node 0 (the only one). Its stream wants [P, P + x] on instance 0's send link and decode node
      0's receive link: both free, so it gets it; KV ready at P + x, no wait.
    * r1 (t = ε) → prefill instance 1 (instance 0 is busy until P), prefill [ε, ε + P], also bound to
      decode node 0. Its stream wants [ε + P, ε + P + x]: instance 1's send link is free, but decode
      node 0's receive link carries r0's stream until P + x, so it begins at P + x and ends at
      P + 2x: stream wait = P + 2x − (ε + P + x) = x − ε, KV ready at P + 2x.

    Today's code (no decode receive link) gave r1 no wait (ready at ε + P + x). With late binding
    (``decode_binding="ready"``) there is still no decode receive link: both wait 0. With 2 decode
    nodes, r1 is bound to node 1 (node 0 has r0's KV in flight): different receive links, no wait."""
    eps, L = 0.01, 4096
    cfg = sim.ClusterConfig(n_prefill=2, n_decode=1, network_gbps=10.0, layerwise_kv_transfer=False,
                            network_contention=True, decode_binding="arrival", dram_hbm_load=False)
    c = cfg.resolve().cost
    P, x = cm_prefill_time(c, L, 0), cm_kv_transfer_time(c, L)
    assert x > eps
    tr = trace_from_requests([0.0, eps], [L, L], [2, 2], [8, 8], list(range(8)) + list(range(100, 108)),
                             name="two streams")
    for engine in sim.ENGINES:
        df = sim.simulate(tr, cfg, engine=engine).requests
        assert df.prefill_instance.tolist() == [0, 1] and df.decode_instance.tolist() == [0, 0]
        assert df.ttft_s.tolist() == pytest.approx([P, P], rel=1e-12)
        assert df.stream_wait_s.tolist() == pytest.approx([0.0, x - eps], abs=1e-12)
        assert df.decode_ready_s.tolist() == pytest.approx([P + x, P + 2 * x], rel=1e-12)
        late = sim.simulate(tr, cfg.replace(decode_binding="ready"), engine=engine).requests
        assert late.stream_wait_s.tolist() == [0.0, 0.0]
        assert late.decode_ready_s.tolist() == pytest.approx([P + x, eps + P + x], rel=1e-12)
        two = sim.simulate(tr, cfg.replace(n_decode=2), engine=engine).requests
        assert two.decode_instance.tolist() == [0, 1] and two.stream_wait_s.tolist() == [0.0, 0.0]
    _, log = reference_with_log(tr, cfg)
    assert [(lk, pytest.approx(b, rel=1e-12), pytest.approx(e, rel=1e-12), i) for lk, b, e, i in log] == [
        (("send", 0, 0), P, P + x, 0), (("decode_recv", 0, 0), P, P + x, 0),
        (("send", 1, 0), P + x, P + 2 * x, 1), (("decode_recv", 0, 0), P + x, P + 2 * x, 1)]
    assert_links_never_overbooked(tr, cfg)


# ---------------------------------------------------------------- the view, the calendar, the switch
def test_link_calendar_fits_the_earliest_gap():
    cal = LinkCalendar()
    cal.book(1.0, 2.0)
    cal.book(4.0, 5.0)
    assert cal.slots == [(1.0, 2.0), (4.0, 5.0)]
    assert cal.fit(0.0, 1.0) == 0.0        # before the first
    assert cal.fit(0.5, 1.0) == 2.0        # does not fit before it
    assert cal.fit(2.0, 2.0) == 2.0        # exactly the gap
    assert cal.fit(2.5, 2.0) == 5.0        # too long for what is left of the gap
    other = LinkCalendar()
    other.book(2.0, 3.0)
    assert fit_all([cal, other], 0.5, 1.0) == 3.0  # free on both
    assert cal.backlog(1.5) == pytest.approx(1.5)


def test_view_shows_link_backlogs():
    """A student policy sees each instance's link backlog: the reservations' seconds after the
    arrival (the hand example: when r2 arrives, instance 0's send link and instance 1's receive
    link hold r1's fetch, f − ε of it still to come), and the wait in ``fetch_s``. Both engines."""
    seen = {}

    def record(req, view):
        seen[req.index] = (view.send_backlog_s.copy(), view.recv_backlog_s.copy(), view.fetch_s.copy())
        return int(np.argmin(view.ttft_s))

    tr = hot_holder_trace()
    c = sim.ClusterConfig(**HOT).resolve().cost
    f = cm_kv_transfer_time(c, 2048)
    for engine in sim.ENGINES:
        seen.clear()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", sim.PolicyCompileWarning)  # it keeps a dict: plain Python
            res = sim.simulate(tr, sim.ClusterConfig(**HOT, prefill_policy=record), engine=engine)
        assert res.requests.prefill_instance.tolist() == [0, 0, 1, 2, 3]  # = kvcentric
        send, recv, fetch = seen[3]
        np.testing.assert_allclose(send, [f - EPS, 0.0, 0.0, 0.0], atol=1e-12)
        np.testing.assert_allclose(recv, [0.0, f - EPS, 0.0, 0.0], atol=1e-12)
        assert fetch[2] == pytest.approx(f - EPS + 2 * f, rel=1e-12)  # the wait is in the fetch estimate
        assert (seen[0][0] == 0).all() and (seen[0][1] == 0).all()


def test_contention_is_validated_and_disaggregated_only():
    with pytest.raises(ValueError, match=r"^ClusterConfig\.network_contention: "):
        sim.ClusterConfig(network_contention="yes")
    with pytest.raises(ValueError, match=r"^ClusterConfig\.network_contention: "):
        sim.ClusterConfig(network_contention=2)
    assert sim.ClusterConfig().network_contention is True   # the paper's: links are shared
    # a coupled node moves no KV between nodes: the switch does not apply there
    tr = synthetic_trace("conversation-like").head(60)
    cpl = dict(engine_mode="coupled", n_coupled=2)
    a = sim.simulate(tr, sim.ClusterConfig(**cpl, network_contention=True)).requests
    b = sim.simulate(tr, sim.ClusterConfig(**cpl, network_contention=False)).requests
    assert a.drop(columns=[]).equals(b)


#: Σ prefill end, Σ KV ready, Σ finish, Σ TBT tail (s), Σ fetched tokens, completed requests of the
#: first 2,000 conversation-like requests (8P+8D, modern preset, 50 Gbps, early admission, 40k-token
#: decode nodes), computed with the simulator before network contention existed (commit a8b867a).
BEFORE = {
    "kvcentric-True-1": [535201.5393260672, 532150.6156640768, 544809.5619067771, 67.7310911960966, 696198, 1878],
    "kvcentric-True-2": [539724.0356640851, 536679.9204859925, 549376.472237317, 64.74597287847155, 829842, 1890],
    "kvcentric-False-1": [537818.377374724, 535571.8205191413, 548262.802098193, 182.08434483354407, 726404, 1876],
    "kvcentric-False-2": [537910.9051043643, 535658.3002199685, 548310.2248958419, 172.06562443271216, 774534, 1878],
    "cache_aware-True-1": [537421.9416430091, 534347.1929957689, 546861.7564814263, 74.19615800527174, -127, 1873],
    "cache_aware-False-2": [531209.0405527959, 528952.414372469, 541618.9239426043, 194.07104948650766, -145, 1855],
}


@pytest.mark.parametrize("key", list(BEFORE))
def test_contention_off_is_the_simulator_before_it(key):
    pol, lw, x = key.split("-")
    tr = synthetic_trace("conversation-like").head(2000)
    cfg = sim.ClusterConfig(prefill_policy=pol, layerwise_kv_transfer=lw == "True", cpp_group_size=int(x),
                            network_gbps=50.0, admission="early", preset="modern", decode_kv_capacity_tokens=40000.0,
                            **sim.SIMPLE_SEMANTICS)
    a = sim.simulate(tr, cfg).arrays
    got = [float(np.nansum(a[k])) for k in ("prefill_end", "ready", "finish", "tbt_tail")]
    np.testing.assert_allclose(got, BEFORE[key][:4], rtol=1e-12)
    assert [int(a["fetched_tok"].sum()), int((a["outcome"] == 1).sum())] == BEFORE[key][4:]
    assert np.nanmax(a["fetch_wait"]) == 0.0 and np.nanmax(a["stream_wait"]) == 0.0
    if pol == "kvcentric":  # at 50 Gbps the links do bind (a test of this test's config)
        on = sim.simulate(tr, cfg.replace(network_contention=True)).arrays
        assert np.nanmax(on["fetch_wait"]) > 0 or np.nanmax(on["stream_wait"]) > 0


# ---------------------------------------------------------------- the experiment functions
def test_contention_comparison_and_replicas_over_time():
    from mooncake_lab.experiments import l04_scheduling

    tr = synthetic_trace("conversation-like").head(400)
    tab = l04_scheduling.contention_comparison(tr, 1.0, gbps=[50.0], n_prefill=8, n_decode=2,
                                        decode_kv_capacity_tokens=60_000.0)
    assert list(tab.index) == [(50.0, on, p) for on in (False, True) for p in ("kvcentric", "cache_aware")]
    assert (tab.xs("cache_aware", level="policy").fetches == 0).all()
    off, on = tab.loc[(50.0, False, "kvcentric")], tab.loc[(50.0, True, "kvcentric")]
    assert off.fetch_wait_max_s == 0 and on.fetch_wait_max_s > 0 and off.fetches > 0
    res = sim.simulate(tr, sim.ClusterConfig(n_prefill=8, n_decode=2, network_gbps=50.0, network_contention=True,
                                             decode_kv_capacity_tokens=60_000.0))
    rep = l04_scheduling.replicas_over_time(res, top=20, n_samples=5)
    assert rep.shape == (5, 20) and rep.index[-1] == tr.arrival_s[-1]
    assert ((rep >= 0) & (rep <= 8)).all().all()
    final = l04_scheduling.hot_block_replicas(res, top=20)  # the last sample: every request placed
    np.testing.assert_array_equal(rep.iloc[-1].to_numpy(), final.replicas.to_numpy())


_RES = sim.simulate(trace_from_requests([0.0], [10], [2], [1], [0], name="one"), sim.ClusterConfig())


@pytest.mark.parametrize("call, field", [
    (lambda n: n.contention_comparison(gbps=[0.5]), r"contention_comparison\.gbps\[0\]"),
    (lambda n: n.contention_comparison(gbps="fast"), r"contention_comparison\.gbps"),
    (lambda n: n.contention_comparison(gbps=[float("nan")]), r"contention_comparison\.gbps\[0\]"),
    (lambda n: n.replicas_over_time(_RES, top=0), r"replicas_over_time\.top"),
    (lambda n: n.replicas_over_time(_RES, n_samples=0), r"replicas_over_time\.n_samples"),
    (lambda n: n.replicas_over_time(_RES, top=2.5), r"replicas_over_time\.top"),
    (lambda n: n.replicas_over_time("a result"), r"replicas_over_time\.result")])
def test_experiment_inputs_are_checked(call, field):
    from mooncake_lab.experiments import l04_scheduling as network

    with pytest.raises(ValueError, match=rf"^{field}: got .*; allowed: "):
        call(network)


def test_kernel_python_path_with_contention_and_jit_disabled():
    """NUMBA_DISABLE_JIT=1 runs the kernel's link code as plain Python (its calendars grow and
    compact there too); it must agree with the reference."""
    code = textwrap.dedent("""
        import numpy as np
        from mooncake_lab import sim
        from mooncake_lab.synthetic import synthetic_trace
        tr = synthetic_trace("conversation-like", seed=5).head(120)
        for x in (1, 2):
            cfg = sim.ClusterConfig(n_prefill=4, n_decode=2, network_gbps=50.0, network_contention=True,
                                    decode_kv_capacity_tokens=60000, cpp_group_size=x, cpp_chunk=1000)
            a, b = sim.simulate(tr, cfg), sim.simulate(tr, cfg, engine="reference")
            assert (a.arrays["outcome"] == b.arrays["outcome"]).all()
            assert np.nanmax(a.arrays["fetch_wait"]) > 0 or np.nanmax(a.arrays["stream_wait"]) > 0
            for col in ("prefill_end", "ready", "finish", "fetch_wait", "stream_wait", "fetch_src"):
                np.testing.assert_allclose(a.arrays[col].astype(float), b.arrays[col].astype(float),
                                           rtol=1e-9, atol=1e-12, err_msg=col)
        print("ok")
    """)
    assert_runs_without_jit(code)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=traces, config=fidelity_configs)
def test_contention_with_every_fidelity_switch_kernel_equals_reference(trace, config):
    a = sim.simulate(trace, config, engine="numba")
    b = sim.simulate(trace, config, engine="reference")
    assert_same(a, b)
    np.testing.assert_array_equal(a.requests["preemptions"], b.requests["preemptions"])
    assert (a.requests.outcome != "unfinished").all()
    assert a.diagnostics["time_reversals"] == 0


def test_a_zero_second_transfer_keeps_the_link_calendar_sorted():
    """A 1-token prompt fetches 0 tokens (at least one token is computed), a 0-second reservation at the
    begin of a long stream on the same send link. Booked after it, it must sort first, or the kernel's
    binary search over the reservations' ends skips the stream (found by hypothesis: request 18 was
    ready at 0.338 s in the kernel, inside request 6's stream [0.193, 0.465] s; the reference: 0.465 s)."""
    inp = [1, 1, 1, 1, 1, 477, 901] + [1] * 11 + [1]
    out = [1, 1, 1, 1, 1, 2, 2] + [1] * 11 + [2]
    counts = [1, 1, 1, 1, 1, 1, 2] + [1] * 12
    ids = [0, 1, 2, 3, 4, 5, 5, 6, 7, 8, 9, 10, 11, 5, 12, 13, 14, 15, 16, 17]
    tr = trace_from_requests(np.zeros(19), inp, out, counts, ids, name="zero-second")
    cfg = sim.ClusterConfig(n_prefill=3, n_decode=1, cache_capacity_blocks=1, network_gbps=10.0,
                            network_contention=True)
    a = sim.simulate(tr, cfg, engine="numba")
    b = sim.simulate(tr, cfg, engine="reference")
    assert_same(a, b)
    _, log = reference_with_log(tr, cfg)
    send2 = sorted((bg, e) for lk, bg, e, i in log if lk == ("send", 2, 0))
    stream6 = [(bg, e) for lk, bg, e, i in log if lk == ("send", 2, 0) and i == 6][0]
    assert a.requests.decode_ready_s[18] >= stream6[1]   # it waits for request 6's stream
    assert all(e1 <= b2 for (_, e1), (b2, _) in zip(send2, send2[1:]))   # never overbooked


def test_memory_estimate_counts_the_link_calendars_with_decode_rows():
    """With contention the estimate has the link calendars: 2 × n_prefill prefill links + n_decode
    decode receive links, each n + 1 slots (a request books each link at most once) of a begin and an
    end, + 2 live-slot counters (8 B each); none without contention."""
    from mooncake_lab.sim.run import memory_estimate

    tr = synthetic_trace("conversation-like").head(100)
    for p, d in ((8, 8), (4, 12)):
        parts = memory_estimate(tr, sim.ClusterConfig(n_prefill=p, n_decode=d))
        assert parts["link calendars"][0] == 8 * (2 * p + d) * (2 * 101 + 2)
        assert f"n_decode={d}" in parts["link calendars"][1]
    assert "link calendars" not in memory_estimate(tr, sim.ClusterConfig(network_contention=False))


@pytest.mark.parametrize("fill", [np.nan, -1e300, 1e300])
def test_block_availability_is_read_only_where_written(monkeypatch, fill):
    """The kernel's per-block availability (Links.block_ready) comes uninitialised from a pool (no fill, no
    page faults): a run whose table starts full of garbage gives the same results bit for bit."""
    from contextlib import contextmanager

    import mooncake_lab.sim.run as run_mod

    tr = synthetic_trace("conversation-like", n_requests=1500, seed=5).replay(2.0)
    cfgs = [sim.ClusterConfig(), sim.ClusterConfig(cpp_group_size=2, cache_capacity_blocks=300),
            sim.ClusterConfig(prefill_policy="cache_aware", decode_binding="ready")]
    want = [sim.simulate(tr, c).arrays for c in cfgs]

    @contextmanager
    def garbage(shape, dtype=np.float64):
        yield np.full(shape, fill, dtype=dtype)

    monkeypatch.setattr(run_mod, "pooled_array", garbage)
    for c, w in zip(cfgs, want):
        got = sim.simulate(tr, c).arrays
        for k in w:
            assert np.array_equal(got[k], w[k], equal_nan=True), k


def test_pooled_array_is_reused_across_runs(monkeypatch):
    import mooncake_lab.prefix_cache as pc
    from mooncake_lab.prefix_cache import pooled_array

    monkeypatch.setattr(pc, "_POOL", [])  # the pool keeps its largest buffers: start from an empty one
    with pooled_array((3, 5)) as a:
        assert a.shape == (3, 5) and a.dtype == np.float64
        a[:] = 7.0
        ptr = a.__array_interface__["data"][0]
    with pooled_array((3, 5)) as b:  # the same buffer again (its old values: uninitialised by contract)
        assert b.__array_interface__["data"][0] == ptr
