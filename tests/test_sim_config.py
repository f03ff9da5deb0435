"""ClusterConfig validation and the numbers it resolves to."""
import math

import numpy as np
import pytest

from mooncake_lab import sim
from mooncake_lab.sim import config as cfgmod
from mooncake_lab.traces import Trace


@pytest.mark.parametrize("field, value", [
    ("n_prefill", 0), ("n_decode", 0), ("n_prefill", 2.5), ("n_decode", True),
    ("cache_capacity_blocks", -1), ("cache_capacity_blocks", 1.5),
    ("prefill_policy", "round_robin"), ("kvcache_balancing_threshold", 0.5),
    ("kvcache_balancing_threshold", math.nan), ("estimator_noise", -0.1), ("estimator_noise", math.nan),
    ("ttft_slo_s", 0.0), ("tbt_slo_s", -1.0), ("ttft_slo_s", math.nan), ("network_gbps", 0.0),
    ("decode_kv_capacity_tokens", -5.0), ("decode_kv_capacity_tokens", math.inf),
    ("admission", "sometimes"), ("seed", -1), ("layerwise_kv_transfer", "yes"),
    ("model", "gpt-9"), ("node", "tpu"), ("preset", "fastest"),
    ("admission_threshold", 0.0), ("admission_threshold", math.nan), ("admission_threshold", "1"),
    ("decode_time_s", 0.0), ("decode_time_s", math.inf), ("prediction_horizon", -0.5),
    ("prediction_horizon", 11.0),
])
def test_invalid_fields_raise_naming_the_field(field, value):
    # "ClusterConfig.<field>: ", not the bare name: "admission" is also in "admission_threshold"
    with pytest.raises(ValueError, match=rf"^ClusterConfig\.{field}: (got .*; allowed: |{field}: unknown )"):
        sim.ClusterConfig(**{field: value})


def test_every_admission_policy_is_accepted():
    for name, code in sim.ADMISSIONS.items():
        assert sim.ClusterConfig(admission=name).resolve().admission == code


def test_default_cache_capacity_is_node_dram_over_block_bytes():
    # 2e12 B of DRAM per A800 node / (512 tokens × 327,680 B of LLaMA2-70B KV per token)
    # = 2e12 / 167,772,160 = 11,920.9 → 11,920 blocks
    assert sim.ClusterConfig().resolve().cache_capacity_blocks == 11_920
    assert sim.ClusterConfig(cache_capacity_blocks=7).resolve().cache_capacity_blocks == 7


def test_network_bandwidth_sets_the_transfer_coefficient():
    # 100 Gbps = 12.5 GB/s at the calibrated preset's RDMA efficiency 0.87 → 327,680 B per token
    # / (12.5e9 × 0.87) = 3.0131e-5 s per token
    rc = sim.ClusterConfig(network_gbps=100.0).resolve()
    assert rc.cost[12] == pytest.approx(327_680 / (12.5e9 * 0.87), rel=1e-9)


def test_outcome_literals_in_the_kernel_match_the_table():
    # kernel.py writes 1 completed, 2 at arrival, 3 after prefill, 4 too large (numba freezes globals)
    assert cfgmod.COMPLETED == 1 and cfgmod.REJECTED_TOO_LARGE == 4 and cfgmod.UNFINISHED == 0
    assert cfgmod.REJECTED_AT_ARRIVAL == 2 and cfgmod.REJECTED_AFTER_PREFILL == 3
    assert cfgmod.ADMISSIONS == {"none": 0, "baseline": 1, "early": 2, "predicted": 3}


def test_simulate_rejects_bad_arguments():
    tr = Trace([0.0], [10], [2], [0, 1], [0])
    with pytest.raises(ValueError, match=r"^simulate\.engine: "):
        sim.simulate(tr, sim.ClusterConfig(), engine="gpu")
    with pytest.raises(ValueError, match=r"^simulate\.trace: "):
        sim.simulate([1, 2, 3], sim.ClusterConfig())
    with pytest.raises(ValueError, match=r"^simulate\.config: "):
        sim.simulate(tr, {"n_prefill": 2})


@pytest.mark.parametrize("engine", sim.ENGINES)
def test_empty_trace_gives_an_empty_result(engine):
    tr = Trace(np.zeros(0), np.zeros(0), np.zeros(0), [0], np.zeros(0))
    res = sim.simulate(tr, sim.ClusterConfig(), engine=engine)
    assert len(res.requests) == 0
    s = res.summary()
    assert s["requests"] == 0 and s["completed"] == 0 and math.isnan(s["ttft_mean_s"])
