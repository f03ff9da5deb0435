"""Routers in the disaggregated engine (sim/routers.py wired into sim/kernel.py and sim/reference.py):
kernel ≡ reference for every router × knowledge × belief TTL × decode choice × binding × output
lengths × contention; a hand-worked trace (loads, round robin, SGLang); a stale belief; the
routers' loads in a student policy's View."""
import textwrap
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_sim_engines import assert_invariants, assert_same, configs, prefix_traces

from mooncake_lab import sim
from mooncake_lab.roofline import cm_prefill_time
from mooncake_lab.sim.routers import DECODE_CHOICES, ROUTERS, RouterConfig
from mooncake_lab.traces import trace_from_requests

INF = float("inf")


def router_config(base, name, knowledge, capacity, ttl, window, decode_choice, binding, outputs, contention,
                  x, groups, tuning):
    """``base`` (test_sim_engines' strategy: sizes, caches, presets, admission, noise) run by router ``name``.
    Dynamo's shared tier needs the true caches: with knowledge "belief" it is left off."""
    if knowledge == "belief":
        tuning = {k: v for k, v in tuning.items() if k != "dynamo_shared_multiplier"}
    rc = RouterConfig(knowledge=knowledge, belief_capacity_blocks=capacity, belief_ttl_s=ttl, window_s=window,
                      decode_choice=decode_choice, **tuning)
    return base.replace(prefill_policy=name, router=rc, decode_binding=binding, output_lengths=outputs,
                        network_contention=contention, n_prefill=x * groups, cpp_group_size=x, cpp_chunk=1000)


# the parameters each rule reads, set so that both of its branches occur on a few requests
tunings = st.fixed_dictionaries({}, optional={
    "dynamo_temperature": st.sampled_from([0.0, 0.7]),
    "dynamo_request_weight": st.sampled_from([0.0, 2.0]),
    "dynamo_overlap_credit": st.sampled_from([1.0, 0.5]),
    "dynamo_shared_multiplier": st.sampled_from([0.0, 0.5, 1.0]),  # issue 26 §3 fact 2: the shared tier
    "sglang_cache_threshold": st.sampled_from([0.0, 0.3, 0.9]),
    "sglang_balance_abs": st.sampled_from([0, 1, 64]),
    "sglang_balance_rel": st.sampled_from([1.0, 1.5]),
    "llmd_kv_weight": st.sampled_from([None, 2.0]),
    "llmd_max_prefix_tokens": st.sampled_from([1024, 131_072]),
    "prodstack_kv_threshold": st.sampled_from([0, 2000]),
    "aibrix_imbalance_abs": st.sampled_from([0, 1, 8]),
    "aibrix_std_factor": st.sampled_from([0.0, 1.0]),
    "aibrix_pd_prefill_imbalance": st.sampled_from([0, 1, 32]),
    "aibrix_decode_max_request": st.sampled_from([1.0, 2.0, 32.0]),
    "aibrix_decode_max_throughput": st.sampled_from([10.0, 2048.0]),
    "preble_tpot_s": st.sampled_from([0.0, 0.15]),
})


def router_configs(name):
    return st.builds(router_config, configs, st.just(name), st.sampled_from([None, "true", "belief"]),
                     st.sampled_from([None, 0, 2, 12]), st.sampled_from([None, INF, 0.5, 4.0]),
                     st.sampled_from([None, 0.5, 3.0, 60.0]), st.sampled_from([None, *DECODE_CHOICES]),
                     st.sampled_from(list(sim.DECODE_BINDINGS)), st.sampled_from(list(sim.OUTPUT_LENGTHS)),
                     st.booleans(), st.sampled_from([1, 1, 2]), st.integers(1, 3), tunings)


@pytest.mark.parametrize("name", list(ROUTERS))
def test_kernel_equals_reference_for_every_router(name):
    """Every rule, with its knowledge (true caches or belief, TTL finite or not), window, decode
    choice, binding, output lengths, links, CPP groups, admission and noise drawn at random."""
    @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(trace=prefix_traces(max_gap_s=1.0), config=router_configs(name))
    def check(trace, config):
        a = sim.simulate(trace, config, engine="numba")
        b = sim.simulate(trace, config, engine="reference")
        assert_same(a, b)
        assert (a.arrays["decode_inst"] == b.arrays["decode_inst"]).all()
        assert_invariants(a)
        assert_invariants(b)
        acc = a.requests[a.requests.prefill_instance >= 0]
        if config.router.dynamo_shared_multiplier == 0.0 or name != "dynamo":
            assert (acc.fetched_tokens == 0).all() and (acc.fetch_source == -1).all()  # routers never fetch
        else:  # Dynamo's shared tier: a fetch comes from another instance, never more than the prompt
            f = acc[acc.fetched_tokens > 0]
            assert (f.fetch_source >= 0).all() and (f.fetch_source != f.prefill_instance).all()
            assert (f.cached_tokens < f.input_len).all()
    check()


def test_heavier_trace_every_router_agrees():
    """300 requests, 3 prefill + 2 decode instances, small caches (evictions), belief and true state,
    each decode choice: both engines place every request on the same instances."""
    from mooncake_lab.synthetic import synthetic_trace

    tr = synthetic_trace("conversation-like", seed=3).head(300)
    for k, name in enumerate(ROUTERS):
        rc = RouterConfig(knowledge=("belief", "true")[k % 2], decode_choice=list(DECODE_CHOICES)[k % 5],
                          belief_ttl_s=(None, 30.0)[k // 4 % 2], window_s=20.0)
        cfg = sim.ClusterConfig(n_prefill=3, n_decode=2, prefill_policy=name, router=rc, cache_capacity_blocks=150,
                                decode_kv_capacity_tokens=150_000, preset="ideal", seed=k)
        a, b = sim.simulate(tr, cfg), sim.simulate(tr, cfg, engine="reference")
        assert_same(a, b)
        assert (a.arrays["decode_inst"] == b.arrays["decode_inst"]).all()
        assert_invariants(a)
        assert (a.requests.queue_wait_s > 0).any(), name
        # every prompt of this trace begins with block 0: production-stack's prefix router (longest match,
        # no load term) sends them all to the instance that got the first one — the hot spot it is known for
        assert (a.requests.prefill_instance.nunique() == 1) == (name == "prodstack_prefix"), name


# ---------------------------------------------------------------- a hand-worked trace
HAND = dict(n_prefill=2, n_decode=2, preset="ideal", cache_capacity_blocks=100, decode_kv_capacity_tokens=100_000,
            **sim.SIMPLE_SEMANTICS)


def hand_trace():
    """Four requests on 2 prefill instances. T(n, c) = prefill seconds of n new tokens after c cached.

    r0  a=0         2048 tok, blocks 0-3        rr → 0: start 0, end E0 = T(2048, 0)
    r1  a=E0/2      1024 tok, blocks 10-11      rr → 1: start a1, end E1 = a1 + T(1024, 0) > a3
    r2  a=0.75·E0   2560 tok, blocks 0-4        rr → 0: 4 blocks cached (2048), 512 computed;
                                                queued behind r0: start E0, end E0 + T(512, 2048)
    r3  a=0.8·E0    1536 tok, blocks 0-2        rr → 1: cached 0 (blocks 0-2 are on instance 0 only)

    The loads each arrival sees (pending = Σ prompt − cached of those not ended, live = Σ prompt of
    those started and not ended, inflight = not ended, queued = not started), instance 0 | 1:
      r0: all 0
      r1: pending 2048 | 0, live 2048 | 0, inflight 1 | 0, queued 0 | 0
      r2: pending 2048 | 1024, live 2048 | 1024, inflight 1 | 1, queued 0 | 0
      r3: pending 2048 + 512 = 2560 | 1024, live 2048 | 1024, inflight 2 | 1, queued 1 | 0
    """
    c = sim.ClusterConfig(**HAND).resolve().cost
    e0 = float(cm_prefill_time(c, 2048, 0))
    a = [0.0, 0.5 * e0, 0.75 * e0, 0.8 * e0]
    assert a[1] + float(cm_prefill_time(c, 1024, 0)) > a[3]  # r1 is still prefilling when r3 arrives
    tr = trace_from_requests(a, [2048, 1024, 2560, 1536], [3, 3, 3, 3], [4, 2, 5, 3],
                             [0, 1, 2, 3, 10, 11, 0, 1, 2, 3, 4, 0, 1, 2], name="hand")
    return tr, c, e0


HAND_LOADS = {  # request: (pending, live, inflight, queued) per instance
    0: ([0, 0], [0, 0], [0, 0], [0, 0]),
    1: ([2048, 0], [2048, 0], [1, 0], [0, 0]),
    2: ([2048, 1024], [2048, 1024], [1, 1], [0, 0]),
    3: ([2560, 1024], [2048, 1024], [2, 1], [1, 0]),
}


@pytest.mark.parametrize("engine", sim.ENGINES)
def test_hand_trace_round_robin_and_sglang(engine):
    tr, c, e0 = hand_trace()
    rr = sim.simulate(tr, sim.ClusterConfig(**HAND, prefill_policy="prodstack_rr"), engine=engine).requests
    assert rr.prefill_instance.tolist() == [0, 1, 0, 1]
    assert rr.cached_tokens.tolist() == [0, 0, 2048, 0]  # r3 is not sent where its prefix is; no fetch
    assert rr.fetched_tokens.tolist() == [0, 0, 0, 0]
    assert rr.prefill_start_s[2] == pytest.approx(e0, rel=1e-12)  # r2 waited for r0
    assert rr.prefill_s[2] == pytest.approx(float(cm_prefill_time(c, 512, 2048)), rel=1e-12)
    # SGLang (cache_aware: threshold 0.3, balance 64 / 1.5; loads = in flight): r0 → argmin load 0;
    # r1: no match → argmin load [1, 0] → 1; r2: instance 0 matches 4 of 5 blocks, 2048 / 2560 = 0.8
    # > 0.3 → 0; r3: instance 0 matches its 3 blocks, min(1536, L) / L = 1 > 0.3 → 0 (loads [2, 1] are
    # balanced); its belief of what it sent is what the true caches hold here (no eviction)
    for kn in ("belief", "true"):
        sg = sim.simulate(tr, sim.ClusterConfig(**HAND, prefill_policy="sglang", router=RouterConfig(knowledge=kn)),
                          engine=engine).requests
        assert sg.prefill_instance.tolist() == [0, 1, 0, 0]
        assert sg.cached_tokens.tolist() == [0, 0, 2048, 1535]  # one token is always computed


def last_tenant_trace(a_unit):
    """SGLang's tie among the deepest matches (routers.py, the tree's last_tenant): four requests on 2
    instances, arrivals 0, 0.1, 0.2, 0.3 × ``a_unit`` (a fraction of r0's prefill: all still in flight).

    r0  2048 tok, blocks 0-3          no match, loads 0 | 0 → least load: instance 0
    r1  1024 tok, blocks 10-11        no match, loads 1 | 0 → instance 1: block 10 enters 1's view at 0.1
    r2  2048 tok, blocks 10, 20-22    instance 1 matches 1 block: 512 / 2048 = 0.25 ≤ 0.3 → least load
                                      (1 | 1, lowest index) → instance 0: block 10 enters 0's view at 0.2
    r3  1024 tok, blocks 10, 30       both match 1 block (the deepest, shared), 512 / 1024 = 0.5 > 0.3:
                                      the tree's node for block 10 was created by instance 1's insert, so
                                      its last_tenant is 1 (0.1 < 0.2) → instance 1; the old lowest-index
                                      rule sent it to 0. Cached 512 either way.
    The same with the true caches (no eviction: they hold what was sent)."""
    a = [0.0, 0.1 * a_unit, 0.2 * a_unit, 0.3 * a_unit]
    return trace_from_requests(a, [2048, 1024, 2048, 1024], [3, 3, 3, 3], [4, 2, 4, 2],
                               [0, 1, 2, 3, 10, 11, 10, 20, 21, 22, 10, 30], name="last_tenant")


@pytest.mark.parametrize("engine", sim.ENGINES)
@pytest.mark.parametrize("knowledge", ["belief", "true"])
def test_sglang_tie_among_the_deepest_goes_to_the_last_tenant(engine, knowledge):
    _, c, e0 = hand_trace()
    cfg = sim.ClusterConfig(**HAND, prefill_policy="sglang", router=RouterConfig(knowledge=knowledge))
    df = sim.simulate(last_tenant_trace(e0), cfg, engine=engine).requests
    assert df.prefill_end_s[1] > df.arrival_s[3]  # r1 (and r0) still prefilling at r3: loads 2 | 1, balanced
    assert df.prefill_instance.tolist() == [0, 1, 0, 1]
    assert df.cached_tokens.tolist() == [0, 0, 0, 512]


def rr_no_fetch(req, view):
    """A student's round robin that never fetches."""
    view.fetch[:] = False
    return req.index % len(view.inflight)


@pytest.mark.parametrize("engine", sim.ENGINES)
def test_hand_trace_decode_choices(engine):
    """Late binding: every request with output > 1 gets a decode node when its KV is ready. Round
    robin: the k-th ready request → k mod 2 (ready order: by time). Least KV is the Conductor's rule
    (and a student's): the run equals a student policy sending round robin without fetching."""
    tr, _, _ = hand_trace()
    res = sim.simulate(tr, sim.ClusterConfig(**HAND, prefill_policy="prodstack_rr",
                                             router=RouterConfig(decode_choice="round_robin")), engine=engine)
    df = res.requests
    order = np.argsort(df.decode_ready_s.to_numpy(), kind="stable")
    assert df.decode_ready_s.is_unique
    assert df.decode_instance.to_numpy()[order].tolist() == [0, 1, 0, 1]
    kv = sim.simulate(tr, sim.ClusterConfig(**HAND, prefill_policy="prodstack_rr",
                                            router=RouterConfig(decode_choice="least_kv")), engine=engine)
    assert_same(kv, sim.simulate(tr, sim.ClusterConfig(**HAND, prefill_policy=rr_no_fetch), engine=engine))


@pytest.mark.parametrize("engine", sim.ENGINES)
def test_llmd_decode_ties_break_from_the_draws_leftover(engine):
    """llm-d's decode profile (default in P/D): the fewest waiting. Four requests 100 s apart find every decode
    queue empty, so all tie and the node is floor(u2 · 2), u2 = frac(2 · u) of the request's draw (2 prefill
    instances); the run's draws are default_rng(seed).random(n). (least_requests would take node 0 each time.)"""
    tr = trace_from_requests([0.0, 100.0, 200.0, 300.0], [1024] * 4, [3] * 4, [2] * 4, list(range(8)), name="q")
    for seed in (0, 2):
        u = np.random.default_rng(seed).random(4)
        res = sim.simulate(tr, sim.ClusterConfig(**HAND, seed=seed, prefill_policy="llmd"), engine=engine).requests
        expect = [int((2 * x - int(2 * x)) * 2) for x in u]
        assert res.decode_instance.tolist() == expect and 1 in expect
        assert res.prefill_instance.tolist() == [int(2 * x) for x in u]   # the prefill tie-break: floor(2u)


@pytest.mark.parametrize("engine", sim.ENGINES)
def test_aibrix_pd_decode_in_the_engine(engine):
    """AIBrix's PD router picks the decode node (default in P/D). r0 (2048 tokens, 400 out) is ready at 0.115 s:
    both nodes idle → min running 0 → the first, 0. r1 (1024, 400 out) ready at 0.557 s: node 1 idle → 1.
    r2 ready at 1.057 s: running [1, 1] (spread 0 < 32), rates 1 / step(context now) nearly equal (spread
    ≤ 2048 tok/s); free % = round(100 − 100 · reserved / 100,000) = [round(97.552), round(98.576)] = [98, 99]:
    score 0 = (1 + (1 − thr0 / thr1)) / (98 / 99) > 1 = score 1 → 1. The fewest requests (old rule) takes 0."""
    tr = trace_from_requests([0.0, 0.5, 1.0], [2048, 1024, 1024], [400, 400, 3], [4, 2, 2],
                             [0, 1, 2, 3, 10, 11, 20, 21], name="d")
    res = sim.simulate(tr, sim.ClusterConfig(**HAND, prefill_policy="aibrix"), engine=engine).requests
    assert res.decode_instance.tolist() == [0, 1, 1]
    assert res.decode_ready_s[2] < min(res.finish_s[0], res.finish_s[1])   # both still decoding at r2's ready
    old = sim.simulate(tr, sim.ClusterConfig(**HAND, prefill_policy="aibrix",
                                             router=RouterConfig(decode_choice="least_requests")), engine=engine)
    assert old.requests.decode_instance.tolist() == [0, 1, 0]


@pytest.mark.parametrize("engine", sim.ENGINES)
def test_student_view_shows_the_routers_loads(engine):
    """A student policy recording the View at each arrival of the hand trace sees HAND_LOADS (and
    kv_util = live / decode_kv_capacity_tokens); sending round robin without fetching it is prodstack_rr."""
    tr, _, _ = hand_trace()
    seen = {}

    def record(req, view):
        seen[req.index] = tuple(np.asarray(x).copy() for x in (view.pending_tokens, view.live_kv_tokens,
                                                               view.inflight, view.queued_requests, view.kv_util))
        view.fetch[:] = False
        return req.index % 2

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sim.PolicyCompileWarning)  # it keeps a dict: plain Python
        res = sim.simulate(tr, sim.ClusterConfig(**HAND, prefill_policy=record), engine=engine)
    rr = sim.simulate(tr, sim.ClusterConfig(**HAND, prefill_policy="prodstack_rr",
                                            router=RouterConfig(decode_choice="least_kv")), engine=engine)
    assert_same(res, rr)
    for i, (pend, live, infl, queued) in HAND_LOADS.items():
        p, lv, n, q, u = seen[i]
        assert p.tolist() == pend and lv.tolist() == live and n.tolist() == infl and q.tolist() == queued, i
        assert n.dtype == np.int64 and q.dtype == np.int64
        np.testing.assert_allclose(u, np.array(live) / 100_000, rtol=1e-15)


@pytest.mark.parametrize("engine", sim.ENGINES)
def test_kv_util_of_a_cpp_group_counts_its_nodes(engine):
    """kv_util = live KV / (X · decode_kv_capacity_tokens): a CPP group of X = 2 nodes holds twice a node's KV."""
    tr, _, _ = hand_trace()
    seen = []

    def record(req, view):
        seen.append((view.live_kv_tokens.copy(), view.kv_util.copy()))
        return req.index % 2

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sim.PolicyCompileWarning)  # it keeps a list: plain Python
        sim.simulate(tr, sim.ClusterConfig(**{**HAND, "n_prefill": 4}, cpp_group_size=2, prefill_policy=record),
                     engine=engine)
    assert len(seen) == 4 and any(live.max() > 0 for live, _ in seen)
    for live, util in seen:
        np.testing.assert_allclose(util, live / (2 * 100_000), rtol=1e-15)


def test_compiled_student_sees_the_loads():
    """The same through a numba-compiled policy (no dict): it routes to the fewest in flight (ties:
    lowest) — the loads of HAND_LOADS decide: r0 → 0, r1 → 1, r2 → 0 ([1, 1]), r3 → 1 ([2, 1])."""
    def fewest_inflight(req, view):
        view.fetch[:] = False
        return int(np.argmin(view.inflight))

    tr, _, _ = hand_trace()
    res = sim.simulate(tr, sim.ClusterConfig(**HAND, prefill_policy=fewest_inflight))
    assert sim.compile_policy(fewest_inflight).mode == "numba"
    assert res.requests.prefill_instance.tolist() == [0, 1, 0, 1]
    assert_same(res, sim.simulate(tr, sim.ClusterConfig(**HAND, prefill_policy=fewest_inflight), engine="reference"))


def by_load(req, view):
    """A compiled student policy deciding on the loads alone (and fetching only to an idle instance)."""
    score = (view.pending_tokens + 1000.0 * view.kv_util + 100.0 * view.inflight + 10.0 * view.queued_requests
             + 1e-3 * view.live_kv_tokens)
    view.fetch[:] = view.fetch & (view.inflight == 0)
    return int(np.argmin(score))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=prefix_traces(max_gap_s=1.0), config=configs, x=st.sampled_from([1, 2]), groups=st.integers(1, 3),
       contention=st.booleans(), binding=st.sampled_from(list(sim.DECODE_BINDINGS)))
def test_student_on_the_loads_kernel_equals_reference(trace, config, x, groups, contention, binding):
    config = config.replace(prefill_policy=by_load, n_prefill=x * groups, cpp_group_size=x, cpp_chunk=1000,
                            network_contention=contention, decode_binding=binding)
    a = sim.simulate(trace, config, engine="numba")
    b = sim.simulate(trace, config, engine="reference")
    assert_same(a, b)
    assert_invariants(a)


# ---------------------------------------------------------------- a stale belief
@pytest.mark.parametrize("engine", sim.ENGINES)
def test_stale_belief_routes_to_an_evicted_prefix(engine):
    """True caches of 3 blocks per instance; SGLang's belief (its own tree, 32,768 blocks) forgets nothing.

    r0  a=0          1536 tok, blocks 0-2     → 0 (loads [0, 0])
    r1  a=E0 + 1     1536 tok, blocks 10-12   → 0 (r0 ended: loads [0, 0]); instance 0's true cache
                                                 now holds 10-12 only (0-2 evicted), its belief both
    r2  a=a1 + 1 ms  2048 tok, blocks 0-2, 20 loads [1, 0] (r1 prefilling).
        belief: instance 0 "holds" 0-2, 1536 / 2048 = 0.75 > 0.3 → 0, where cached is 0, not 1536,
        and it queues behind r1.  True caches: no match anywhere → least loaded → 1.
    """
    base = dict(HAND, cache_capacity_blocks=3)
    c = sim.ClusterConfig(**base).resolve().cost
    e0 = float(cm_prefill_time(c, 1536, 0))
    a1 = e0 + 1.0
    tr = trace_from_requests([0.0, a1, a1 + 1e-3], [1536, 1536, 2048], [3, 3, 3], [3, 3, 4],
                             [0, 1, 2, 10, 11, 12, 0, 1, 2, 20], name="stale")
    bel = sim.simulate(tr, sim.ClusterConfig(**base, prefill_policy="sglang"), engine=engine).requests
    assert bel.prefill_instance.tolist() == [0, 0, 0]
    assert bel.cached_tokens[2] == 0 and bel.queue_wait_s[2] > 0  # believed 1536 tokens; true cache evicted them
    true = sim.simulate(tr, sim.ClusterConfig(**base, prefill_policy="sglang", router=RouterConfig(knowledge="true")),
                        engine=engine).requests
    assert true.prefill_instance.tolist() == [0, 0, 1] and true.queue_wait_s[2] == 0
    # a belief no larger than the true cache (3 blocks, LRU) has forgotten 0-2 too
    small = sim.simulate(tr, sim.ClusterConfig(**base, prefill_policy="sglang",
                                               router=RouterConfig(belief_capacity_blocks=3)), engine=engine).requests
    assert small.prefill_instance.tolist() == [0, 0, 1]


@pytest.mark.parametrize("engine", sim.ENGINES)
def test_belief_ttl_forgets(engine):
    """prodstack_prefix's belief with a TTL: r1 (same prefix as r0, on an idle cluster) goes where r0 went
    while the TTL holds; after it, no instance is believed to match and the random tie-break decides
    (from floor(2·u) of r1's draw; seed 0 makes it the other instance)."""
    tr0 = trace_from_requests([0.0, 50.0], [1024, 1024], [2, 2], [2, 2], [0, 1, 0, 1], name="ttl")
    u = np.random.default_rng(0).random(2)  # the run's draws (seed 0): r0 → floor(2·u0), r1 ties from floor(2·u1)
    first = int(2 * u[0])
    for ttl, expect in ((100.0, first), (10.0, int(2 * u[1]))):
        res = sim.simulate(tr0, sim.ClusterConfig(**HAND, seed=0, prefill_policy="prodstack_prefix",
                                                  router=RouterConfig(belief_ttl_s=ttl)), engine=engine).requests
        assert res.prefill_instance.tolist() == [first, expect]
    assert int(2 * u[1]) != first  # seed 0 makes the two outcomes differ


def test_routers_allowed_in_the_disaggregated_engine_only_for_now():
    tr, _, _ = hand_trace()
    assert sim.simulate(tr, sim.ClusterConfig(**HAND, prefill_policy="preble")).summary()["completed"] == 4
    mem = sim.run.memory_estimate(tr, sim.ClusterConfig(**HAND, prefill_policy="aibrix"))
    assert mem["router belief"][0] > 0  # AIBrix keeps a belief (with a TTL: its send times count too)
    assert "router belief" not in sim.run.memory_estimate(tr, sim.ClusterConfig(**HAND, prefill_policy="dynamo"))


def test_kernel_python_path_with_jit_disabled():
    """NUMBA_DISABLE_JIT=1 runs the kernel's router code as Python; it must agree with the reference."""
    from test_sim_engines import assert_runs_without_jit

    assert_runs_without_jit(textwrap.dedent("""
        import numpy as np
        from mooncake_lab import sim
        from mooncake_lab.sim.routers import ROUTERS, RouterConfig
        from mooncake_lab.synthetic import synthetic_trace
        tr = synthetic_trace("conversation-like", seed=5).head(40)
        for k, name in enumerate(ROUTERS):
            rc = RouterConfig(knowledge=("belief", "true")[k % 2],
                              decode_choice=("least_requests", "round_robin", "least_queued", "aibrix_pd")[k % 4],
                              belief_ttl_s=5.0, window_s=3.0)
            cfg = sim.ClusterConfig(n_prefill=4, n_decode=2, prefill_policy=name, router=rc, cache_capacity_blocks=50,
                                    decode_kv_capacity_tokens=60000, cpp_group_size=2 if k % 3 == 0 else 1)
            a, b = sim.simulate(tr, cfg), sim.simulate(tr, cfg, engine="reference")
            assert (a.arrays["prefill_inst"] == b.arrays["prefill_inst"]).all(), name
            assert (a.arrays["decode_inst"] == b.arrays["decode_inst"]).all(), name
            np.testing.assert_allclose(a.requests.finish_s.to_numpy(float), b.requests.finish_s.to_numpy(float),
                                       rtol=1e-9, err_msg=name)
        print("ok")
    """))


def test_leaderboard_ranks_routers_beside_the_conductor():
    """sim.leaderboard takes router names as rows and baselines; their kind is "router"."""
    from mooncake_lab.synthetic import synthetic_trace
    tr = synthetic_trace("conversation-like", seed=3).head(300)
    board = sim.leaderboard(tr, ["dynamo", "sglang"], baselines=("kvcentric", "prodstack_rr"))
    assert set(board.index) == {"dynamo", "sglang", "kvcentric", "prodstack_rr"}
    assert board.loc["kvcentric", "kind"] == "built-in"
    assert (board.loc[["dynamo", "sglang", "prodstack_rr"], "kind"] == "router").all()
    one = sim.simulate(tr, sim.ClusterConfig(prefill_policy="sglang")).summary()
    assert board.loc["sglang", "slo_attainment"] == one["slo_attainment"]
    with pytest.raises(ValueError, match=r"^leaderboard\.baselines: "):
        sim.leaderboard(tr, ["dynamo"], baselines=("sglang_v2",))
