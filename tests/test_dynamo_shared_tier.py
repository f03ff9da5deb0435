"""Dynamo's shared-tier credit (issue 26 §3 fact 2): ``RouterConfig.dynamo_shared_multiplier`` m.

cost_i = (s · max(0, P_i + L − κ·h_i − m·(h_best − h_i)) + [D_i + L, 0 if P/D]) / bt + ρ·n_i, h_best the hit
tokens of the longest prefix any prefill instance holds (Dynamo's ``shared_cache_hits.hits_beyond(device
overlap)`` on Mooncake's pool, ai-dynamo/dynamo@07a6c9ce ``lib/kv-router/src/scheduling/selector/{default,mod}.rs``;
m = ``shared_cache_multiplier``, 0.0 by default, 0.5 from the CLI with a shared cache, ``config.rs``); with m > 0
the chosen instance fetches the pool's best prefix (reference rule 2a). A hand-worked trace in both engines,
the cost by hand, and the refused inputs. kernel ≡ reference over random configs with the option:
tests/test_sim_routers.py (``tunings``) and tests/test_routers.py (``router_case``)."""
import dataclasses
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_sim_engines import assert_invariants, assert_same, prefix_traces
from test_sim_routers import router_configs

from mooncake_lab import sim
from mooncake_lab.roofline import cm_kv_transfer_time, cm_prefill_time
from mooncake_lab.sim import routers_reference as ref
from mooncake_lab.sim.routers import RouterConfig, new_router_inputs, route
from mooncake_lab.traces import trace_from_requests
from mooncake_lab.validate import InputError

BT = 512
HAND = dict(n_prefill=2, n_decode=2, preset="ideal", cache_capacity_blocks=100, decode_kv_capacity_tokens=100_000,
            **sim.SIMPLE_SEMANTICS)


def shared_trace():
    """Four requests on 2 prefill instances (A = r0's instance, by the tie-break's draw; B the other).

    r0  a=0              4096 tok, blocks 0-7                   both idle, no match: → A; A holds 0-7
    r1  a=1.1·E0         7168 tok, blocks 0-7 + 100-105         A: (0 + 7168 − 4096)/512 = 6 < B: 14 (m = 0.5:
                                                                B (7168 − 0.5·4096)/512 = 10) → A, pending 3072
    r2  a=a1 + T1/2      5120 tok, blocks 0-7 + 300-301         while r1 prefills on A:
        m = 0:   A (3072 + 5120 − 4096)/512 = 8 < B 5120/512 = 10 → A (locality: no fetch)
        m = 0.5: A 8 (its prefix is the pool's best: no shared credit); B (5120 − 0.5·8·512)/512 = 6:
                 the credit lowers B's cost by 0.5 × 8 shared blocks = 4 → B, which fetches blocks 0-7
                 (4096 tokens) from A and replicates them
    r3  a=a1 + 100 s     5120 tok, blocks 0-7 + 300-301         all idle; m = 0: only A holds any → A, cached
        5119 (one token is always computed); m = 0.5: B holds all 10 (r2's, with the fetched 0-7), A 8:
        A (5120 − 4096 − 0.5·1024)/512 = 1 > B 0 → B, cached 5119, nothing to fetch.
    """
    c = sim.ClusterConfig(**HAND).resolve().cost
    e0, t1 = float(cm_prefill_time(c, 4096, 0)), float(cm_prefill_time(c, 3072, 4096))
    a1 = 1.1 * e0
    blocks = [list(range(8)), list(range(8)) + list(range(100, 106)), list(range(8)) + [300, 301],
              list(range(8)) + [300, 301]]
    tr = trace_from_requests([0.0, a1, a1 + 0.5 * t1, a1 + 100.0], [4096, 7168, 5120, 5120], [3] * 4,
                             [len(b) for b in blocks], sum(blocks, []), name="shared tier")
    return tr, c


@pytest.mark.parametrize("engine", sim.ENGINES)
def test_hand_trace_the_credit_flips_the_choice_and_the_request_is_fetched(engine):
    tr, c = shared_trace()
    runs = {m: sim.simulate(tr, sim.ClusterConfig(**HAND, prefill_policy="dynamo",
                                                  router=RouterConfig(dynamo_shared_multiplier=m)),
                            engine=engine).requests for m in (0.0, 0.5)}
    off, on = runs[0.0], runs[0.5]
    A = int(off.prefill_instance[0])
    B = 1 - A
    assert off.prefill_instance.tolist() == [A, A, A, A]  # m = 0: as without the option
    assert off.fetched_tokens.tolist() == [0, 0, 0, 0] and (off.fetch_source == -1).all()
    assert off.cached_tokens.tolist() == [0, 4096, 4096, 5119]
    assert on.prefill_instance[0] == A  # the same draw
    assert on.prefill_instance.tolist() == [A, A, B, B]
    assert on.fetched_tokens.tolist() == [0, 0, 4096, 0]
    assert on.fetch_source.tolist() == [-1, -1, A, -1]
    assert on.cached_tokens.tolist() == [0, 4096, 4096, 5119]  # r3: B holds r2's blocks, the fetched ones too
    # r2 on the idle B: no queue, fetch 4096 tokens, then the prefill of 1024 after 4096 cached
    f = float(cm_kv_transfer_time(c, 4096))
    assert on.queue_wait_s[2] == 0.0
    assert on.fetch_s[2] == pytest.approx(f, rel=1e-12)
    assert on.prefill_s[2] == pytest.approx(float(cm_prefill_time(c, 1024, 4096)), rel=1e-12)
    assert on.ttft_s[2] == pytest.approx(f + float(cm_prefill_time(c, 1024, 4096)), rel=1e-12)
    assert on.ttft_s[2] < off.ttft_s[2]  # off: r2 waits behind r1 on A


def test_with_network_contention_the_engines_agree():
    """With ``network_contention`` the shared tier's fetch books the source's send and the receiver's links."""
    tr, _ = shared_trace()
    cfg = sim.ClusterConfig(**{**HAND, "network_contention": True}, prefill_policy="dynamo",
                            router=RouterConfig(dynamo_shared_multiplier=0.5))
    a, b = sim.simulate(tr, cfg, engine="numba"), sim.simulate(tr, cfg, engine="reference")
    assert a.requests.fetched_tokens.tolist() == b.requests.fetched_tokens.tolist() == [0, 0, 4096, 0]
    assert a.requests.ttft_s.tolist() == pytest.approx(b.requests.ttft_s.tolist(), rel=1e-12)


def _shared_on(cfg, m):
    return cfg.replace(router=dataclasses.replace(cfg.router, knowledge="true", dynamo_shared_multiplier=m))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=prefix_traces(max_gap_s=1.0), config=router_configs("dynamo"), m=st.sampled_from([0.5, 1.0, 0.25]))
def test_kernel_equals_reference_with_the_shared_tier(trace, config, m):
    """test_sim_routers' random configs (sizes, caches, links, CPP groups, bindings, admission, noise) with the
    shared tier on: both engines place, fetch and time every request alike; a fetch comes from another instance."""
    config = _shared_on(config, m)
    a, b = sim.simulate(trace, config, engine="numba"), sim.simulate(trace, config, engine="reference")
    assert_same(a, b)
    assert (a.arrays["decode_inst"] == b.arrays["decode_inst"]).all()
    assert_invariants(a)
    f = a.requests[a.requests.fetched_tokens > 0]
    assert (f.fetch_source >= 0).all() and (f.fetch_source != f.prefill_instance).all()


def test_the_cost_by_hand():
    """The r2 state of :func:`shared_trace` as RouterInputs (P/D): the credit changes B's cost by m × the shared
    blocks, A's (the pool's best) not at all; both routes agree; m = 0 is the cost without the option."""
    ri = new_router_inputs(2)
    ri.matched_blocks[:] = [8, 0]
    ri.pending_tokens[:] = [3072.0, 0.0]
    ri.inflight[:] = [1, 0]
    ri.tree_blocks[:] = [14, 0]
    for m, cost, pick in ((0.0, [8.0, 10.0], 0), (0.5, [8.0, 6.0], 1), (1.0, [8.0, 2.0], 1)):
        rp = RouterConfig(dynamo_shared_multiplier=m).resolve("dynamo", True, 100, BT)
        assert ref.dynamo_cost(rp, ri, 5120, BT) == pytest.approx(cost, rel=1e-15)
        assert ref.route_reference(rp, ri, 5120, 10, BT, 0.0, 0, math.inf) == route(rp, ri, 5120, 10, BT, 0.0, 0,
                                                                                    math.inf) == pick
    # the partial last block counts as the device credit does: h = min(m · bt, L)
    rp = RouterConfig(dynamo_shared_multiplier=0.5).resolve("dynamo", True, 100, BT)
    ri.matched_blocks[:] = [3, 1]
    ri.pending_tokens[:] = 0.0
    assert ref.dynamo_cost(rp, ri, 1300, BT) == pytest.approx([0.0, (1300 - 512 - 0.5 * (1300 - 512)) / BT])


def test_other_routers_and_the_conductor_ignore_it():
    rc = RouterConfig(dynamo_shared_multiplier=0.5)
    assert rc.resolve("sglang", True, 100, BT).dynamo_shared == 0.0
    assert rc.resolve("sglang", False, 100, BT).dynamo_shared == 0.0  # the coupled engine: only Dynamo is refused
    assert rc.resolve("dynamo", True, 100, BT).dynamo_shared == 0.5
    assert RouterConfig().resolve("dynamo", True, 100, BT).dynamo_shared == 0.0
    sim.ClusterConfig(**HAND, prefill_policy="kvcentric", router=rc)  # not a router: unused


@pytest.mark.parametrize("value", [-0.1, 1.5, math.nan, math.inf, "0.5", None])
def test_bad_values_are_refused(value):
    with pytest.raises(InputError, match=r"RouterConfig\.dynamo_shared_multiplier"):
        RouterConfig(dynamo_shared_multiplier=value)


def test_coupled_engine_and_belief_are_refused():
    rc = RouterConfig(dynamo_shared_multiplier=0.5)
    with pytest.raises(InputError, match=r"RouterConfig\.dynamo_shared_multiplier: got 0\.5; allowed: 0\.0 with "
                                         r"engine_mode='coupled'"):
        sim.ClusterConfig(n_coupled=2, engine_mode="coupled", prefill_policy="dynamo", router=rc)
    with pytest.raises(InputError, match=r"RouterConfig\.dynamo_shared_multiplier.*knowledge='belief'"):
        sim.ClusterConfig(**HAND, prefill_policy="dynamo",
                          router=RouterConfig(dynamo_shared_multiplier=0.5, knowledge="belief"))
    with pytest.raises(InputError, match="engine_mode='coupled'"):
        rc.resolve("dynamo", False, 100, BT)
