"""ClusterConfig.cache_eviction: every prefix cache of the simulator evicts by LRU, LFU or LengthAware
(arXiv v3 Table 1); the numba kernel equals the plain-Python reference for each, alone and combined
with the other switches (prefill policies, admission, layer-wise, CPP groups, the coupled engine)."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mooncake_lab import prefix_cache as pc
from mooncake_lab import sim
from mooncake_lab.traces import trace_from_requests
from test_sim_engines import assert_invariants, assert_same, configs, coupled_configs, cpp_configs, small_traces

policies = st.sampled_from(pc.EVICTION_POLICIES)
SETTINGS = dict(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@settings(**SETTINGS)
@given(trace=small_traces(), config=configs, policy=policies)
def test_kernel_equals_reference_with_each_eviction_policy(trace, config, policy):
    config = config.replace(cache_eviction=policy)
    a, b = sim.simulate(trace, config), sim.simulate(trace, config, engine="reference")
    assert_same(a, b)
    assert_invariants(a)


@settings(**SETTINGS)
@given(trace=small_traces(), config=cpp_configs, policy=policies)
def test_cpp_groups_kernel_equals_reference_with_each_eviction_policy(trace, config, policy):
    config = config.replace(cache_eviction=policy)
    a, b = sim.simulate(trace, config), sim.simulate(trace, config, engine="reference")
    assert_same(a, b)
    assert_invariants(a)


@settings(**SETTINGS)
@given(trace=small_traces(), config=coupled_configs, policy=policies)
def test_coupled_kernel_equals_reference_with_each_eviction_policy(trace, config, policy):
    config = config.replace(cache_eviction=policy)
    a, b = sim.simulate(trace, config), sim.simulate(trace, config, engine="reference")
    assert_same(a, b)
    assert a.diagnostics == b.diagnostics


def test_heavier_trace_agrees_under_each_policy():
    """300 requests, 2 prefill instances of 60 blocks: many evictions, fetches and heap compactions."""
    from mooncake_lab.synthetic import synthetic_trace

    tr = synthetic_trace("conversation-like", seed=2).head(300)
    hits = {}
    for policy in pc.EVICTION_POLICIES:
        cfg = sim.ClusterConfig(n_prefill=2, n_decode=2, cache_capacity_blocks=60, cache_eviction=policy,
                                preset="modern", network_contention=False)
        a, b = sim.simulate(tr, cfg), sim.simulate(tr, cfg, engine="reference")
        assert_same(a, b)
        hits[policy] = a.requests.cached_tokens.sum()
    assert len(set(hits.values())) == 3  # the policies keep different blocks on this trace


def _hand_trace():
    # 6 requests of 1,024 tokens (2 blocks), 100 s apart (each is done before the next arrives), one
    # prefill instance of 4 blocks: r0 [0, 1], r1 [0, 1], r2 [2, 3], r3 [4, 5], r4 [0, 1], r5 [2, 3].
    # Touches go last block first; (touches, position, stamp) after r2: 1 (2, 1, s2), 0 (2, 0, s3),
    # 3 (1, 1, s4), 2 (1, 0, s5) — full. A hit of both blocks reuses L − 1 = 1,023 tokens, one 512.
    #   LRU: r3 stores 5 evicting 1 (s2), 4 evicting 0 (s3) → r4 hits nothing; r4 stores 1, 0
    #        evicting 3, 2 → r5 hits nothing.
    #   LFU: 5 evicts the least recent once-touched block, 3; 4 evicts 2 → {0, 1, 4, 5}: r4 hits
    #        [0, 1]; r5 misses.
    #   LengthAware: 5 evicts the once-touched block at the larger position, 3 (pos 1 > 2's 0); 4 then
    #        evicts 5 (pos 1 > 2's 0) → {0, 1, 2, 4}: r4 hits [0, 1], r5 hits block 2 (512 tokens).
    n = 6
    ids = [0, 1, 0, 1, 2, 3, 4, 5, 0, 1, 2, 3]
    return trace_from_requests(np.arange(n) * 100.0, [1024] * n, [2] * n, [2] * n, ids, name="hand")


@pytest.mark.parametrize("engine", ["numba", "reference"])
@pytest.mark.parametrize("policy, r4_r5", [("lru", [0, 0]), ("lfu", [1023, 0]), ("length_aware", [1023, 512])])
def test_hand_worked_eviction_in_the_simulator(engine, policy, r4_r5):
    cfg = sim.ClusterConfig(n_prefill=1, n_decode=1, cache_capacity_blocks=4, cache_eviction=policy)
    df = sim.simulate(_hand_trace(), cfg, engine=engine).requests
    assert df.cached_tokens.tolist() == [0, 1023, 0, 0] + r4_r5


def test_default_is_lru_and_the_field_is_validated():
    assert sim.ClusterConfig().cache_eviction == "lru"
    for bad in ("LRU", "fifo", 1, None):
        with pytest.raises(ValueError, match=r"^ClusterConfig\.cache_eviction: "):
            sim.ClusterConfig(cache_eviction=bad)
