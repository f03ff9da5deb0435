"""The routers of sim/routers.py in the coupled engine: kernel ≡ reference, what a router sees, stale beliefs."""
import dataclasses
import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from test_sim_engines import assert_invariants, assert_same, prefix_traces
from mooncake_lab import sim
from mooncake_lab.roofline import cm_decode_step_time, cm_prefill_reuse_time, cm_prefill_time
from mooncake_lab.sim import coupled_reference
from mooncake_lab.sim.routers import ROUTERS, RouterConfig
from mooncake_lab.sim.run import memory_estimate
from mooncake_lab.traces import trace_from_requests


def make(arrival, inp, out, chains):
    return trace_from_requests(arrival, inp, out, [len(c) for c in chains], [b for c in chains for b in c])


# ------------------------------------------------------------------------------ kernel ≡ reference
def router_configs(knowledge, finite_ttl):
    """Router parameters that reach each rule's branches on traces of ≤ 25 requests: short windows and
    TTLs (they expire), small beliefs (they evict), low imbalance thresholds, a sampling temperature."""
    return st.builds(
        RouterConfig, knowledge=st.just(knowledge),
        belief_capacity_blocks=st.sampled_from([None, 0, 3, 12]),
        belief_ttl_s=st.sampled_from([0.5, 2.0, 10.0] if finite_ttl else [math.inf]),
        window_s=st.sampled_from([None, 0.5, 3.0]),
        dynamo_temperature=st.sampled_from([0.0, 0.0, 0.7]),
        dynamo_request_weight=st.sampled_from([0.0, 2.0]),
        sglang_balance_abs=st.sampled_from([64, 1, 0]),
        sglang_cache_threshold=st.sampled_from([0.3, 0.0, 0.9]),
        llmd_kv_weight=st.sampled_from([None, 5.0]),
        prodstack_kv_threshold=st.sampled_from([2000, 0]),
        aibrix_imbalance_abs=st.sampled_from([8, 1, 0]),
    )


def coupled_router_configs(router, knowledge, finite_ttl, chunked):
    return st.builds(
        sim.ClusterConfig, engine_mode=st.just("coupled"), prefill_policy=st.just(router),
        router=router_configs(knowledge, finite_ttl),
        n_coupled=st.integers(1, 4), chunked_prefill=st.just(chunked),
        prefill_chunk=st.sampled_from([100, 512, 2048]),
        cache_capacity_blocks=st.integers(0, 30),
        decode_kv_capacity_tokens=st.sampled_from([None, 3000.0, 6000.0, 12000.0]),
        preset=st.sampled_from(["ideal", "calibrated", "modern"]),
        seed=st.integers(0, 5),
    )


def check_runs(trace, config):
    a = sim.simulate(trace, config, engine="numba")
    b = sim.simulate(trace, config, engine="reference")
    assert_same(a, b)
    assert a.diagnostics == b.diagnostics
    for res in (a, b):
        assert_invariants(res)  # each request ends once, time never goes back, KV ≤ capacity
        df = res.requests
        sent = df[df.outcome != "rejected_too_large"]
        assert sent.prefill_instance.between(0, config.n_coupled - 1).all()
        assert (sent.prefill_instance == sent.decode_instance).all()
        assert (df.outcome == "completed").sum() == len(sent)  # no admission control: every routed one ends
    return a


@pytest.mark.parametrize("chunked", [False, True], ids=["whole", "chunked"])
@pytest.mark.parametrize("finite_ttl", [False, True], ids=["ttl_inf", "ttl"])
@pytest.mark.parametrize("knowledge", ["true", "belief"])
@pytest.mark.parametrize("router", list(ROUTERS))
def test_router_kernel_equals_reference_and_invariants_hold(router, knowledge, finite_ttl, chunked):
    @settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(trace=prefix_traces(max_gap_s=1.0), config=coupled_router_configs(router, knowledge, finite_ttl, chunked))
    def run(trace, config):
        check_runs(trace, config)
    run()


def test_routers_on_a_heavier_trace_agree():
    """300 conversation-like requests on 3 instances with queues and big batches, every router."""
    from mooncake_lab.synthetic import synthetic_trace

    tr = synthetic_trace("conversation-like", seed=3).head(300)
    for router in ROUTERS:
        for chunked in (False, True):
            cfg = sim.ClusterConfig(engine_mode="coupled", n_coupled=3, chunked_prefill=chunked, preset="modern",
                                    cache_capacity_blocks=300, decode_kv_capacity_tokens=150_000,
                                    prefill_policy=router, router=RouterConfig(window_s=5.0))
            a = check_runs(tr, cfg)
            assert a.diagnostics["max_decode_batch"] >= 3


# ------------------------------------------------------------------------------ what a router sees
# Two "ideal" instances, round robin, no chunking. Prefill p(L, cached) = cm_prefill_time, decode step
# s(b, ctx) = cm_decode_step_time.
#   r0 t=0       1,024 tokens, blocks [0, 1],      10 out → instance 0 (rr 0); prefill 0 … p0 = p(1024, 0)
#   r1 t=0       2,048 tokens, blocks [10 … 13],   10 out → instance 1 (rr 1); prefill 0 … p1 = p(2048, 0)
#   r2 t2 = p0 + s(1, 1025) + s(1, 1026)/2 (r0 decoded 1 step: context 1,024 + 2; r1 still prefilling)
#                1,536 tokens, blocks [0, 1, 20],  2 out  → instance 0 (rr 2); 1,024 cached, 512 computed;
#                it fits, so it waits for r0's step boundary p0 + s1 + s2 (> t3)
#   r3 t3 = t2 + s(1, 1026)/4, 1,536 tokens, blocks [10, 11, 30] → instance 1 (rr 3)
# At each arrival (instance 0, instance 1):
#          pending        live KV            inflight queued recent  recent_prefill_s    tree   matched
#   r0     0, 0           0, 0               0, 0     0, 0   0, 0    0, 0                0, 0   0, 0
#   r1     1024, 0        1024, 0            1, 0     0, 0   1, 0    p0, 0               2, 0   0, 0
#   r2     0, 2048        1025+1, 2048       1, 1     0, 0   1, 1    p0, p1              2, 4   2, 0
#   r3     512, 2048      1026, 2048         2, 1     1, 0   2, 1    p0 + p(512,1024), p1  3, 4   0, 2
# (live KV: r0's prompt + its tokens so far, 1 + 1 at r2 — a step inside the kernel's jumped segment —
# and r1's whole prompt while it is prefilled; pending counts r1 in full until its prefill ends.)
# With window_s = t3 the window at r3 is (0, t3]: r0 and r1 (arrival 0) have left it: recent 1, 0 and
# recent_prefill_s p(512, 1024) (a running sum: (p0 + p2) − p0) and 0 exactly (the window is empty).
def hand_trace():
    cfg = sim.ClusterConfig(engine_mode="coupled", n_coupled=2, preset="ideal", prefill_policy="prodstack_rr")
    c = cfg.resolve().cost
    p0, p1 = cm_prefill_time(c, 1024, 0), cm_prefill_time(c, 2048, 0)
    s1, s2 = cm_decode_step_time(c, 1, 1025), cm_decode_step_time(c, 1, 1026)
    t2 = p0 + s1 + 0.5 * s2
    t3 = t2 + 0.25 * s2
    assert t3 < p1 and t3 < p0 + s1 + s2
    tr = make([0.0, 0.0, t2, t3], [1024, 2048, 1536, 1536], [10, 10, 2, 2],
              [[0, 1], [10, 11, 12, 13], [0, 1, 20], [10, 11, 30]])
    p2 = cm_prefill_reuse_time(c, 512, 1024)  # the 1,024 cached tokens come from DRAM while it computes
    compute, load = cm_prefill_time(c, 512, 1024), 1024 * 327_680 / 128e9
    assert p2 == pytest.approx(max(compute, load) + min(compute, load) / 80, rel=1e-12)
    expect = {"pending_tokens": [[0, 0], [1024, 0], [0, 2048], [512, 2048]],
              "live_kv_tokens": [[0, 0], [1024, 0], [1026, 2048], [1026, 2048]],
              "inflight": [[0, 0], [1, 0], [1, 1], [2, 1]],
              "queued": [[0, 0], [0, 0], [0, 0], [1, 0]],
              "recent_requests": [[0, 0], [1, 0], [1, 1], [2, 1]],
              "recent_prefill_s": [[0, 0], [p0, 0], [p0, p1], [p0 + p2, p1]],
              "tree_blocks": [[0, 0], [2, 0], [2, 4], [3, 4]],
              "matched_blocks": [[0, 0], [0, 0], [2, 0], [0, 2]]}
    return tr, cfg, t3, p2, expect


def assert_inputs(seen, expect):
    for field, rows in expect.items():
        np.testing.assert_allclose([r[field] for r in seen], rows, rtol=1e-12, atol=0, err_msg=field)


def record_reference(monkeypatch, tr, cfg):
    seen = []
    original = coupled_reference.route_reference

    def spy(rp, ri, *args):
        seen.append({k: [float(x) for x in v] for k, v in ri._asdict().items()})
        return original(rp, ri, *args)

    monkeypatch.setattr(coupled_reference, "route_reference", spy)
    res = sim.simulate(tr, cfg, engine="reference")
    return seen, res


def test_router_inputs_worked_by_hand_reference(monkeypatch):
    tr, cfg, t3, p2, expect = hand_trace()
    seen, res = record_reference(monkeypatch, tr, cfg)
    assert_inputs(seen, expect)
    assert res.requests.prefill_instance.tolist() == [0, 1, 0, 1]
    assert res.requests.cached_tokens.tolist() == [0, 0, 1024, 1024]
    # the window's boundary: arrival > now − window_s
    seen, _ = record_reference(monkeypatch, tr, dataclasses.replace(cfg, router=RouterConfig(window_s=t3)))
    assert seen[3]["recent_requests"] == [1, 0] and seen[3]["recent_prefill_s"] == [pytest.approx(p2, rel=1e-12), 0.0]
    assert seen[2]["recent_requests"] == [1, 1]


def test_router_inputs_worked_by_hand_kernel():
    """The kernel's own code path (numba off, so route can be spied on) fills the same inputs."""
    tr, cfg, t3, p2, expect = hand_trace()
    code = f"""
import dataclasses, json, sys
sys.path.insert(0, {str(__import__('pathlib').Path(__file__).parent)!r})
from mooncake_lab import sim
from mooncake_lab.sim import coupled
from mooncake_lab.sim.routers import RouterConfig
from test_sim_coupled_routers import hand_trace
tr, cfg, t3, p2, expect = hand_trace()
out = []
for c in (cfg, dataclasses.replace(cfg, router=RouterConfig(window_s=t3))):
    seen, original = [], coupled.route
    def spy(rp, ri, *args):
        seen.append({{k: [float(x) for x in v] for k, v in ri._asdict().items()}})
        return original(rp, ri, *args)
    coupled.route = spy
    res = sim.simulate(tr, c)
    coupled.route = original
    out.append(dict(seen=seen, inst=res.requests.prefill_instance.tolist()))
print(json.dumps(out))
print("ok")
"""
    import os
    import subprocess
    import sys
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    plain, windowed = json.loads(r.stdout.strip().splitlines()[-2])
    assert_inputs(plain["seen"], expect)
    assert plain["inst"] == [0, 1, 0, 1]
    w3 = windowed["seen"][3]
    assert w3["recent_requests"] == [1, 0] and w3["recent_prefill_s"] == [pytest.approx(p2, rel=1e-12), 0.0]


@pytest.mark.parametrize("engine", sim.ENGINES)
def test_dynamo_on_the_worked_trace(engine):
    # Dynamo (true caches, κ = s = 1, T = 0): cost_i = (max(0, P_i + L − hit_i) + D_i + L) / 512 + ρ·n_i.
    # r0: all 0, a tie (trees 0, 0) → the random tie-break from floor(u·2): instance 0 for a seed with u < ½.
    # r1 (L 2,048): (1024 + 2048 + 1024 + 2048)/512 = 12 vs (2048 + 2048)/512 = 8 → 1.
    # r2 (L 1,536, hit 1,024 on 0): (0 + 512 + 1026 + 1536)/512 = 6.0 vs (2048 + 1536 + 2048 + 1536)/512 = 14 → 0.
    # r3 (L 1,536, hit 1,024 on 1): (512 + 1536 + 1026 + 1536)/512 = 9.0 vs (2048 + 512 + 2048 + 1536)/512 = 12
    #     → 0; with ρ = 100 requests: 9.0 + 200 vs 12 + 100 → 1. (Round robin: 0, 1, 0, 1.)
    tr, cfg, *_ = hand_trace()
    seed = next(s for s in range(20) if np.random.default_rng(s).random(4)[0] < 0.5)
    dyn = dataclasses.replace(cfg, prefill_policy="dynamo", seed=seed)
    df = sim.simulate(tr, dyn, engine=engine).requests
    assert df.prefill_instance.tolist() == [0, 1, 0, 0]
    assert df.cached_tokens.tolist() == [0, 0, 1024, 0]
    df = sim.simulate(tr, dataclasses.replace(dyn, router=RouterConfig(dynamo_request_weight=100.0)),
                      engine=engine).requests
    assert df.prefill_instance.tolist() == [0, 1, 0, 1]
    assert df.cached_tokens.tolist() == [0, 0, 1024, 1024]


@pytest.mark.parametrize("engine", sim.ENGINES)
@pytest.mark.parametrize("knowledge", ["belief", "true"])
def test_sglang_tie_among_the_deepest_goes_to_the_last_tenant(engine, knowledge):
    """test_sim_routers.last_tenant_trace on 2 coupled instances (in flight = not finished; all four are):
    r0 → 0, r1 → 1 (block 10 enters 1's view), r2 → 0 (a miss at 0.25; block 10 enters 0's view later),
    r3: both hold block 10, its deepest — SGLang's last_tenant is instance 1, not the lowest index."""
    from test_sim_routers import last_tenant_trace

    cfg = sim.ClusterConfig(engine_mode="coupled", n_coupled=2, preset="ideal", prefill_policy="sglang",
                            router=RouterConfig(knowledge=knowledge))
    p0 = cm_prefill_time(cfg.resolve().cost, 2048, 0)
    df = sim.simulate(last_tenant_trace(p0), cfg, engine=engine).requests
    assert df.prefill_instance.tolist() == [0, 1, 0, 1]
    assert df.cached_tokens.tolist() == [0, 0, 0, 512]
    assert df.finish_s[0] > df.arrival_s[3]  # nothing finished: loads 1 | 0, 1 | 1, 2 | 1


# ------------------------------------------------------------------------------ a stale belief
# Two instances, SGLang cache_aware (a router-side tree: the belief), true caches of 4 blocks.
#   r0 t=0   blocks A = [0 … 3] (2,048 tokens), 2 out   → loads 0, 0, no match → least load: instance 0
#   r1 t=10  blocks B = [10 … 13], 2,000 out (decodes ≈ 17 s) → loads 0, 0 (r0 done), no match → 0;
#            instance 0's true cache (4 blocks) now holds B only: A is evicted
#   r2 t=11  blocks A + [99] (2,560 tokens), 2 out       → loads 1, 0 (balanced: 1 ≤ 64)
#      belief: instance 0 holds A: match 4 blocks, rate 2048 / 2560 = 0.8 > 0.3 → instance 0, where the
#              true cache has 0 of them: cached 0 (believed 2,048)
#      true knowledge: match 0, 0 → least load → instance 1 (cached 0 too)
#      belief with a 5 s TTL (A sent at 0 s, 11 s ago) or 4 blocks of belief (A pushed out by B): no
#              match → instance 1; with a true cache of 100 blocks the belief is right: cached 2,048.
def stale_trace():
    return make([0.0, 10.0, 11.0], [2048, 2048, 2560], [2, 2000, 2],
                [[0, 1, 2, 3], [10, 11, 12, 13], [0, 1, 2, 3, 99]])


@pytest.mark.parametrize("engine", sim.ENGINES)
@pytest.mark.parametrize("router, cache, inst, cached", [
    (RouterConfig(), 4, 0, 0),                                  # the stale belief
    (RouterConfig(knowledge="true"), 4, 1, 0),
    (RouterConfig(belief_ttl_s=5.0), 4, 1, 0),
    (RouterConfig(belief_capacity_blocks=4), 4, 1, 0),
    (RouterConfig(), 100, 0, 2048),                             # the belief is right
])
def test_a_stale_belief_sends_the_request_where_its_prefix_was_evicted(engine, router, cache, inst, cached):
    cfg = sim.ClusterConfig(engine_mode="coupled", n_coupled=2, preset="ideal", prefill_policy="sglang",
                            router=router, cache_capacity_blocks=cache)
    df = sim.simulate(stale_trace(), cfg, engine=engine).requests
    assert df.prefill_instance.tolist() == [0, 0, inst]
    assert df.cached_tokens.tolist() == [0, 0, cached]
    assert df.finish_s[0] < 10.0 < 11.0 < df.finish_s[1]  # r0 was done, r1 still decoding at r2


def test_belief_memory_is_counted_only_with_a_belief():
    tr = stale_trace()
    parts = memory_estimate(tr, sim.ClusterConfig(engine_mode="coupled", n_coupled=2, prefill_policy="sglang"))
    nb = int(tr.n_blocks)
    assert parts["router belief"][0] == 8 * 2 * (nb + 2 * (2 * nb + 64))  # unbounded TTL: no send times
    ttl = sim.ClusterConfig(engine_mode="coupled", n_coupled=2, prefill_policy="aibrix")  # 390 blocks, 20 min
    assert memory_estimate(tr, ttl)["router belief"][0] == 8 * 2 * (2 * nb + 2 * (2 * nb + 64))
    for cfg in (sim.ClusterConfig(engine_mode="coupled", prefill_policy="dynamo"),
                sim.ClusterConfig(engine_mode="coupled")):
        assert "router belief" not in memory_estimate(tr, cfg)
