"""Bad input to the simulator's public entry points (issue 12 §3): ClusterConfig, simulate, student
policies, leaderboard, SimResult methods, the prefix-cache and CPP functions the simulator uses.
Each must refuse with an error naming the field, the value and what is allowed — never hang,
allocate without bound, fail deep inside or return garbage."""
import inspect
import math
import os
import random
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import numpy as np
import pytest

from mooncake_lab import cpp, sim
from mooncake_lab import prefix_cache as pc
from mooncake_lab.hardware import NODES
from mooncake_lab.synthetic import synthetic_trace
from mooncake_lab.traces import Trace
from mooncake_lab.validate import InputError

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUSY = dict(n_prefill=4, n_decode=2, cache_capacity_blocks=150, decode_kv_capacity_tokens=150_000.0,
            preset="modern")


@pytest.fixture(scope="module")
def small():
    return synthetic_trace("conversation-like", seed=3).head(40)


# ------------------------------------------------------------------ ClusterConfig: every field bounded
BAD_FIELDS = [
    ("n_prefill", 10**18), ("n_prefill", 5000), ("n_prefill", 2**63), ("n_prefill", -(2**70)), ("n_prefill", "8"),
    ("n_prefill", None), ("n_prefill", [8]), ("n_prefill", math.inf), ("n_prefill", np.nan), ("n_prefill", 1 + 0j),
    ("n_decode", 10**9), ("n_decode", np.int64(2**40)), ("n_decode", False),
    ("n_coupled", 10**6), ("n_coupled", 0),
    ("cache_capacity_blocks", 10**12), ("cache_capacity_blocks", 2**63), ("cache_capacity_blocks", math.inf),
    ("prefill_chunk", 2**63), ("prefill_chunk", 2**64), ("prefill_chunk", 10**7), ("prefill_chunk", 0),
    ("cpp_chunk", 2**63), ("cpp_chunk", 10**9), ("cpp_chunk", -1),
    ("cpp_group_size", 2**63), ("cpp_group_size", 3),
    ("decode_kv_capacity_tokens", 1e308), ("decode_kv_capacity_tokens", 1e10), ("decode_kv_capacity_tokens", 0.0),
    ("decode_kv_capacity_tokens", "1e5"),
    ("network_gbps", 1e308), ("network_gbps", 1e6), ("network_gbps", 1e-300), ("network_gbps", 0.5),
    ("network_gbps", math.inf), ("network_gbps", -100.0),
    ("decode_time_s", 1e300), ("estimator_noise", 1e9), ("prediction_horizon", 1e9),
    ("seed", 2**64), ("seed", 1.5), ("seed", None),
    ("kvcache_balancing_threshold", 0.0), ("kvcache_balancing_threshold", "2"),
    ("ttft_slo_s", -math.inf), ("tbt_slo_s", 0.0), ("admission_threshold", -1.0),
    ("layerwise_kv_transfer", 1), ("chunked_prefill", "False"), ("cpp_overlap", None),
    ("admission", None), ("admission", ["none"]), ("engine_mode", "Coupled"), ("engine_mode", 0),
    ("prefill_policy", None), ("prefill_policy", ""), ("model", None), ("node", 3), ("preset", None),
]


@pytest.mark.parametrize("field, value", BAD_FIELDS, ids=[f"{f}={v!r:.20}" for f, v in BAD_FIELDS])
def test_config_refuses_out_of_range_fields_naming_the_field_and_the_limit(field, value):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow RuntimeWarning on the way
        with pytest.raises(ValueError, match=f"ClusterConfig.{field}: ") as e:
            sim.ClusterConfig(**{field: value})
    assert "allowed" in str(e.value) or "unknown" in str(e.value)


def test_config_bounds_say_the_limit():
    with pytest.raises(InputError, match=r"ClusterConfig.n_prefill: got ~10\*\*18; allowed: an integer in \[1, 64\]"):
        sim.ClusterConfig(n_prefill=10**18)
    with pytest.raises(InputError, match=r"prefill_chunk: got ~10\*\*18; allowed: an integer in \[1, 1048576\]"):
        sim.ClusterConfig(prefill_chunk=2**63)
    with pytest.raises(InputError, match=r"network_gbps: got 1e\+308; allowed: a finite number in \[1, 32000\]"):
        sim.ClusterConfig(network_gbps=1e308)


def test_config_normalises_whole_numbers():
    cfg = sim.ClusterConfig(n_prefill=np.int64(4), n_decode=2.0, layerwise_kv_transfer=np.True_, seed=np.uint8(3))
    assert (type(cfg.n_prefill), type(cfg.n_decode), type(cfg.layerwise_kv_transfer), type(cfg.seed)) == (int, int, bool, int)
    assert cfg == sim.ClusterConfig(n_prefill=4, n_decode=2, seed=3)


def test_config_limits_cover_the_catalogue():
    """The bounds' reasons: every catalogue node's own numbers fit within them."""
    from mooncake_lab.sim import config as c

    for node in NODES.values():
        assert node.nic_bw * 8 / 1e9 <= c.NETWORK_GBPS_RANGE[1]
        for m in ("llama2-70b", "llama2-7b", "llama3-70b", "opt-13b"):
            rc = sim.ClusterConfig(model=m, node=node.name).resolve()
            assert 0 < rc.decode_kv_capacity <= c.MAX_KV_TOKENS
            assert rc.cache_capacity_blocks <= c.MAX_CACHE_BLOCKS


@pytest.mark.parametrize("node", list(NODES))
def test_a_model_that_does_not_fit_its_node_is_refused_saying_why(node):
    # DeepSeek-V3: 1,342 GB of BF16 weights; the largest catalogue node (8 × H20) has 768 GB of HBM
    with pytest.raises(InputError, match=r"ClusterConfig.model: got 'deepseek-v3'; allowed: a model that fits "
                                         r"one .* node: DeepSeek-V3's weights \(1,342 GB\) .* HBM"):
        sim.ClusterConfig(model="deepseek-v3", node=node)
    with pytest.raises(InputError, match=r"^ClusterConfig\.model: got 'deepseek-v3'; allowed: .*weights"):
        # an explicit KV capacity does not make the weights fit
        sim.ClusterConfig(model="deepseek-v3", node=node, decode_kv_capacity_tokens=1e6)


# ------------------------------------------------------------------ simulate: memory estimated first
def test_simulate_refuses_a_run_beyond_the_memory_budget_before_allocating():
    # one request whose block id is the largest a Trace holds (2**26 − 1): the id space of the per-instance
    # caches is 2**26 blocks, 64 instances × 8 B × 2**26 ≈ 32 GiB (the old code failed deep in prefix_cache)
    tr = Trace([0.0], [10], [2], [0, 1], [2**26 - 1])
    with pytest.raises(InputError, match=r"simulate: this run would allocate ≈ 3\d\.\d GiB, more than the 2\.0 GiB .*"
                                         r"prefix caches .* 64 instances \(n_prefill=64\)"):
        sim.simulate(tr, sim.ClusterConfig(n_prefill=64, network_contention=False))
    # shared links add when each block is complete on each instance: as much again
    with pytest.raises(InputError, match=r"≈ 6\d\.\d GiB.*block availability .*\(network_contention\)"):
        sim.simulate(tr, sim.ClusterConfig(n_prefill=64))
    with pytest.raises(InputError, match="n_coupled=64"):
        sim.simulate(tr, sim.ClusterConfig(engine_mode="coupled", n_coupled=64))


def test_memory_estimate_names_the_fields_that_drive_it(small, monkeypatch):
    from mooncake_lab.sim import run

    parts = run.memory_estimate(small, sim.ClusterConfig(n_prefill=64, estimator_noise=0.5))
    assert parts["estimator noise"][0] == 8 * len(small) * 64
    assert parts["prefix caches"][0] >= 8 * 64 * small.n_blocks
    assert parts["estimator noise"][0] > 0 and run.memory_estimate(small, sim.ClusterConfig())["estimator noise"][0] == 0
    monkeypatch.setattr(run, "MEMORY_BUDGET_BYTES", 2**20)
    with pytest.raises(InputError, match=r"estimator noise .*estimator_noise > 0"):
        sim.simulate(small, sim.ClusterConfig(n_prefill=64, estimator_noise=0.5))


@pytest.mark.parametrize("engine", ["gpu", None, 0, "Numba"])
def test_simulate_refuses_bad_engines(small, engine):
    with pytest.raises(InputError, match="simulate.engine: got"):
        sim.simulate(small, sim.ClusterConfig(), engine=engine)


# ------------------------------------------------------------------ SimResult.timeseries: bounded rows
@pytest.fixture(scope="module")
def result(small):
    return sim.simulate(small, sim.ClusterConfig(**BUSY))


@pytest.mark.parametrize("dt", [1e-4, 1e-9, 5e-324, 0.0, -1.0, math.nan, math.inf, -math.inf, "10", None, True,
                                np.array([1.0, 2.0])])
def test_timeseries_refuses_bad_or_too_fine_steps(result, dt):
    for method in (result.timeseries, result.prefill_queues, result.load_correlation):
        with pytest.raises(InputError, match=r"SimResult\.(timeseries|prefill_queues)\.dt: got"):
            method(dt)


def test_timeseries_at_the_finest_allowed_step(result):
    end = float(np.nanmax(result.arrays["finish"]))
    dt = end / (sim.result.MAX_SAMPLES - 1) * 1.001
    assert len(result.timeseries(dt)) <= sim.result.MAX_SAMPLES
    with pytest.raises(InputError, match=r"at most 100,000 samples .* dt >= "):
        result.timeseries(end / sim.result.MAX_SAMPLES / 2)
    with pytest.raises(InputError, match=r"^SimResult\.timeseries\.per_instance: "):
        result.timeseries(10.0, per_instance="yes")


# ------------------------------------------------------------------ student policies: the same errors in both engines
def nan_to_int(req, view):
    return int(view.ttft_s[0] * np.nan)


def inf_to_int(req, view):
    return int(view.ttft_s[0] + np.inf)


def nan_rounded(req, view):
    return round(view.wait_s[0] + np.nan)


def nan_floored(req, view):
    return math.floor(view.wait_s[0] - np.inf)


def two_to_the_70(req, view):
    return 2**70


def minus_two_to_the_64(req, view):
    return -(2**64) + req.index * 0


def uint64_max(req, view):
    return np.uint64(2**64 - 1)


def negative(req, view):
    return -1


def n_instances(req, view):
    return len(view.wait_s)


def a_float(req, view):
    return 1.0


def a_fraction(req, view):
    return 0.5


def nan(req, view):
    return np.nan


def none_at_3(req, view):
    if req.index == 3:
        return None
    return 0


def a_bool(req, view):
    return True


def a_numpy_bool(req, view):
    return view.fetch[0] | True


def a_string(req, view):
    return "0"


def an_array(req, view):
    return np.argsort(view.ttft_s)


def a_tuple(req, view):
    return (0, 1)


def raises_at_2(req, view):
    if req.index == 2:
        raise RuntimeError("no instance for you")
    return 0


async def a_coroutine(req, view):
    return 0


def a_generator(req, view):
    yield 0


BAD_RETURNS = [nan_to_int, inf_to_int, nan_rounded, nan_floored, two_to_the_70, minus_two_to_the_64, uint64_max,
               negative, n_instances, a_float, a_fraction, nan, none_at_3, a_bool, a_numpy_bool, a_string, an_array,
               a_tuple, raises_at_2]


@pytest.mark.parametrize("policy", BAD_RETURNS, ids=[p.__name__ for p in BAD_RETURNS])
def test_both_engines_reject_a_bad_return_with_the_same_named_error(small, policy):
    cfg = sim.ClusterConfig(**BUSY, prefill_policy=policy)
    errors = []
    for engine in sim.ENGINES:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", sim.PolicyCompileWarning)
            with pytest.raises((sim.PolicyReturnTypeError, sim.PolicyChoiceError)) as e:
                sim.simulate(small, cfg, engine=engine)
        errors.append(e.value)
    numba_err, ref_err = errors
    assert type(numba_err) is type(ref_err)
    assert str(numba_err) == str(ref_err)
    assert f"prefill policy {policy.__name__!r}" in str(numba_err) and "for request " in str(numba_err)


@pytest.mark.parametrize("policy", [a_coroutine, a_generator])
def test_async_and_generator_policies_are_refused_when_the_config_is_built(policy):
    with pytest.raises(TypeError, match=r"(async def|generator function).*plain def that returns"):
        sim.ClusterConfig(prefill_policy=policy)


def wide_but_fine(req, view):
    return np.int32(len(view.wait_s) - 1) * 0 + np.int16(1)


def test_narrow_integer_returns_still_run_compiled_and_agree(small):
    assert sim.compile_policy(wide_but_fine).mode == "numba"
    cfg = sim.ClusterConfig(**BUSY, prefill_policy=wide_but_fine)
    a, b = sim.simulate(small, cfg), sim.simulate(small, cfg, engine="reference")
    assert set(a.arrays["prefill_inst"]) == set(b.arrays["prefill_inst"]) == {1}


# ------------------------------------------------------------------ Ctrl-C stops a compiled policy's infinite loop
_INTERRUPT_SCRIPT = textwrap.dedent("""
    import os, signal, threading, time, warnings
    from mooncake_lab import sim
    from mooncake_lab.synthetic import synthetic_trace

    def spins(req, view):            # compiles (returns an int) and never returns
        x = 0
        while view.wait_s[0] >= 0.0:
            for p in range(len(view.wait_s)):
                x += p
        return x

    def spins_in_python(req, view, seen={}):   # a dict: plain-Python mode
        while True:
            seen[req.index] = 1
        return 0

    tr = synthetic_trace("conversation-like", seed=3).head(30)
    for policy, mode in ((spins, "numba"), (spins_in_python, "python")):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert sim.compile_policy(policy).mode == mode
        sim.simulate(tr, sim.ClusterConfig(n_prefill=4, n_decode=2, prefill_policy=lambda req, view: 0))
        threads = threading.active_count()
        for engine in ("numba", "reference"):
            threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
            t = time.perf_counter()
            try:
                sim.simulate(tr, sim.ClusterConfig(n_prefill=4, n_decode=2, prefill_policy=policy), engine=engine)
                print("NOT INTERRUPTED")
            except KeyboardInterrupt as e:
                waited = time.perf_counter() - t
                time.sleep(0.2)
                c = time.process_time(); time.sleep(0.5); spin = time.process_time() - c
                print(f"{mode} {engine} stopped {waited:.2f} threads {threading.active_count() - threads} "
                      f"cpu {spin:.2f} | {e}")
""")


def test_ctrl_c_stops_an_infinite_loop_in_a_compiled_or_python_policy(tmp_path):
    script = tmp_path / "spin.py"  # a file: the policy's source is readable (as in a notebook cell)
    script.write_text(_INTERRUPT_SCRIPT)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "PYTHONPATH": REPO})
    lines = [ln for ln in r.stdout.splitlines() if "stopped" in ln or "NOT" in ln]
    assert r.returncode == 0 and len(lines) == 4, r.stdout + r.stderr
    for ln in lines:
        head, message = ln.split(" | ")
        mode, engine, _, waited, _, threads, _, cpu = head.split()
        assert float(waited) < 5.0, ln               # SIGINT at 0.5 s: stopped within a few seconds
        assert int(threads) <= 0 and float(cpu) < 0.2, ln  # no thread keeps spinning
        assert "simulation interrupted while prefill policy" in message and "for request 0 " in message


# ------------------------------------------------------------------ threads: each run keeps its own policy
def test_two_threads_with_plain_python_policies_never_call_each_others(small):
    started = set()

    def make(k):
        def policy(req, view, calls={}):  # a dict: runs as plain Python
            calls[req.index] = k
            started.add(k)
            t0 = time.perf_counter()
            while len(started) < 2 and time.perf_counter() - t0 < 5:  # both runs are under way
                time.sleep(0.001)
            return k
        policy.__name__ = f"always_{k}"
        return policy

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sim.PolicyCompileWarning)
        pols = [make(k) for k in (1, 3)]
        for p in pols:
            assert sim.compile_policy(p).mode == "python"
    trace = synthetic_trace("conversation-like", seed=3).head(400)
    barrier, out = threading.Barrier(2), {}

    def run(k, p):
        barrier.wait()
        for _ in range(3):
            res = sim.simulate(trace, sim.ClusterConfig(**BUSY, prefill_policy=p))
            out.setdefault(k, set()).update(res.arrays["prefill_inst"][res.arrays["prefill_inst"] >= 0].tolist())

    ts = [threading.Thread(target=run, args=(k, p)) for k, p in zip((1, 3), pols)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert out == {1: {1}, 3: {3}}


# ------------------------------------------------------------------ randomness: warned
def draws_np_random(req, view):
    return np.random.randint(len(view.wait_s))


def draws_random(req, view, memo={}):
    return random.randrange(len(view.wait_s))


def seeded_from_the_request(req, view):
    rng = np.random.default_rng(req.index)
    return int(rng.integers(len(view.wait_s)))


def uses_req_uniform(req, view):
    return min(int(req.uniform * len(view.wait_s)), len(view.wait_s) - 1)


@pytest.mark.parametrize("policy", [draws_np_random, draws_random])
def test_a_policy_drawing_its_own_random_numbers_is_warned(policy):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sim.PolicyCompileWarning)
        with pytest.warns(sim.PolicyRandomWarning, match=r"draws random numbers .* not reproducible.*req\.uniform"):
            sim.compile_policy(policy)


@pytest.mark.parametrize("policy", [seeded_from_the_request, uses_req_uniform, wide_but_fine])
def test_seeded_or_req_uniform_policies_are_not_warned(policy):
    with warnings.catch_warnings():
        warnings.simplefilter("error", sim.PolicyRandomWarning)
        warnings.simplefilter("ignore", sim.PolicyCompileWarning)
        sim.compile_policy(policy)


# ------------------------------------------------------------------ leaderboard
def least_ttft(req, view):
    return int(np.argmin(view.ttft_s))


def least_ttft_again(req, view):
    return int(np.argmin(view.ttft_s))


def kvcentric(req, view):  # a student's function named like the built-in row
    return 0


def test_leaderboard_takes_one_baseline_name(small):
    board = sim.leaderboard(small, least_ttft, config=sim.ClusterConfig(**BUSY), baselines="kvcentric")
    assert set(board.index) == {"least_ttft", "kvcentric"}
    assert sim.leaderboard(small, least_ttft, config=sim.ClusterConfig(**BUSY), baselines=()).index.tolist() == ["least_ttft"]


@pytest.mark.parametrize("policies, message", [
    (None, r"leaderboard.policies: got None; allowed: a function"),
    ([], r"leaderboard.policies: got \[\]; allowed: at least one policy"),
    ({}, r"leaderboard.policies: got \{\}; allowed: at least one policy"),
    (3, r"leaderboard.policies: got 3"),
    ([least_ttft, 3], r"leaderboard.policies\['int'\]: got 3"),      # a list's rows are named by type
    ({"mine": 3}, r"leaderboard.policies\['mine'\]: got 3"),
    ({"": least_ttft}, r"leaderboard.policies: got ''; allowed: dict keys that are row names"),
    ({1: least_ttft}, r"leaderboard.policies: got 1; allowed: dict keys that are row names"),
    ("fastest", r"leaderboard.policies\['fastest'\]: got 'fastest'; allowed: one of 'random'"),
    ([least_ttft, least_ttft], r"leaderboard.policies: got .*; allowed: .*two are named 'least_ttft'; pass a dict"),
    ([lambda r, v: 0, lambda r, v: 1], r"leaderboard.policies: got .*; allowed: .*two are named '<lambda>'"),
    ([kvcentric], r"leaderboard.policies: your policy is named 'kvcentric', the name of a built-in row; rename it"),
    ({"load": least_ttft}, r"leaderboard.policies: your policy is named 'load', the name of a built-in row"),
    ({"mine": lambda req: 0}, r"leaderboard.policies\['mine'\]: <lambda>\(req\) must take two arguments"),
])
def test_leaderboard_refuses_bad_policies(small, policies, message):
    with pytest.raises((InputError, TypeError), match="^" + message):
        sim.leaderboard(small, policies, config=sim.ClusterConfig(**BUSY))


@pytest.mark.parametrize("kw, message", [
    (dict(baselines="kv"), r"leaderboard.baselines: got 'kv'; allowed: one of 'random'"),
    (dict(baselines=3), r"leaderboard.baselines: got 3"),
    (dict(baselines=["load", None]), r"leaderboard.baselines: got None"),
    (dict(sort_by="speed"), r"leaderboard.sort_by: got 'speed'"),
    (dict(engine="gpu"), r"leaderboard.engine: got 'gpu'"),
    (dict(config={"n_prefill": 2}), r"leaderboard.config: got"),
])
def test_leaderboard_refuses_bad_arguments(small, kw, message):
    with pytest.raises(InputError, match="^" + message):
        sim.leaderboard(small, least_ttft, **kw)


def test_leaderboard_ties_share_a_rank_and_the_order_is_documented_and_shared(small):
    from mooncake_lab.experiments import l08_capstone

    board = sim.leaderboard(small, {"a": least_ttft, "b": least_ttft_again},
                            config=sim.ClusterConfig(**BUSY, network_contention=False))
    # least_ttft ≡ kvcentric (Algorithm 1; on free links it is the best here): three equal rows share rank 1,
    # the next row is 4th
    assert board.loc[["a", "b", "kvcentric"], "rank"].tolist() == [1, 1, 1]
    assert sorted(board["rank"]) == [1, 1, 1, 4, 5, 6][:len(board)] or board["rank"].min() == 1
    assert list(board["rank"]) == sorted(board["rank"])
    assert board["slo_attainment"].is_monotonic_decreasing
    default = inspect.signature(sim.leaderboard).parameters["sort_by"].default
    assert default == "slo_attainment" == sim.LEADERBOARD_SORT_BY
    assert inspect.signature(l08_capstone.policy_leaderboard).parameters["sort_by"].default == default


# ------------------------------------------------------------------ prefix-cache and CPP functions the simulator uses
@pytest.mark.parametrize("call, message", [   # each message starts by naming what is wrong
    (lambda: pc.new_cache_state(10**6, 10**9, 5), r"n_instances: got 1000000; allowed: "),
    (lambda: pc.new_cache_state(4096, 10**9, 5), r"new_cache_state: would allocate ≈ 30,5\d\d\.\d GiB for 4,096 caches "
                                                 r"\(n_instances\) × \(1000000000 block ids \(n_blocks\)"),
    (lambda: pc.new_cache_state(2, -1, 5), r"n_blocks: got -1; allowed: "),
    (lambda: pc.new_cache_state(2, 10, [[1, 2]]), r"capacity: got 2 numbers; allowed: "),
    (lambda: pc.new_cache_state(2, 10, np.nan), r"capacity: got nan; allowed: "),
    (lambda: pc.new_cache_state(2, 10, 2**80), r"capacity: got ~10\*\*24; allowed: "),
    (lambda: pc.route_requests(10**12, 4), r"route_requests: would allocate ≈ .* for 1,000,000,000,000 requests \(n_requests\)"),
    (lambda: pc.route_requests(-1, 4), r"route_requests\.n_requests: got -1; allowed: "),
    (lambda: pc.route_requests(10, 4, seed=-1), r"route_requests\.seed: got -1; allowed: "),
    (lambda: pc.route_requests(10, 4, routing=None), r"route_requests\.routing: got None; allowed: "),
    (lambda: pc.prefix_hit_tokens([np.nan], [5]), r"prefix_hit_tokens\.n_hit_blocks\[0\]: got nan; allowed: "),
    (lambda: pc.prefix_hit_tokens([2**70], [5]), r"prefix_hit_tokens\.n_hit_blocks\[0\]: got .*; allowed: "),
    (lambda: pc.prefix_hit_tokens([1], [5], block_tokens=0), r"prefix_hit_tokens\.block_tokens: got 0; allowed: "),
    (lambda: pc.prefix_hit_tokens([1, 2], [5]), r"prefix_hit_tokens: n_hit_blocks has 2 values, input_len 1; "
                                                r"allowed: the same number"),
    (lambda: pc.hit_ratio_curve(Trace([0.0], [10], [2], [0, 1], [0]), [[1, 2], [3, 4]]),
     r"hit_ratio_curve\.capacities: got shape \(2, 2\); allowed: "),
    (lambda: pc.hit_ratio_curve(Trace([0.0], [10], [2], [0, 1], [0]), ["x"]), r"capacities: got 'x'; allowed: "),
    (lambda: pc.simulate_lru(Trace([0.0], [10], [2], [0, 1], [0]), 5, assignment=[np.nan]),
     r"simulate_lru\.assignment\[0\]: got nan; allowed: "),
    (lambda: cpp.simulate_pipeline([0.0], [10**12], chunk=1), r"n_new\[0\]: got 1000000000000; allowed: "),
    (lambda: cpp.simulate_pipeline([0.0], [2**24], chunk=1, x=80),
     r"simulate_pipeline: would allocate ≈ .* for 16,777,216 chunks \(n_new / chunk\) × 80 stages"),
    (lambda: cpp.pipeline_reference([0.0], [10**6], chunk=1), r"pipeline_reference: got 1,000,000 chunks \(n_new / chunk\)"),
    (lambda: cpp.simulate_pipeline([0.0], [1000], chunk=2**63), r"chunk: got ~10\*\*18; allowed: "),
    (lambda: cpp.simulate_pipeline([0.0], [1000], bandwidth=1e308), r"bandwidth: got 1e\+308; allowed: "),
    (lambda: cpp.simulate_pipeline([0.0], [1000], n_cached=[2**70]), r"n_cached\[0\]: got .*; allowed: "),
    (lambda: cpp.cpp_ttft(n_tokens=1e300), r"n_tokens: got 1e\+300; allowed: "),
    (lambda: cpp.cpp_ttft(chunk=0.5), r"chunk: got 0.5; allowed: "),
    (lambda: cpp.tp_ttft(n_cached=math.inf), r"n_cached: got inf; allowed: "),
    (lambda: cpp.scheme_summary("cpp", n_tokens=10**30), r"n_tokens: got ~10\*\*30; allowed: "),
])
def test_cache_and_cpp_functions_refuse_unbounded_inputs(call, message):
    with pytest.raises(ValueError, match="^" + message):
        call()


def test_the_number_of_bad_inputs_tried():
    """The issue asks for the count (printed with ``-s``): each bad value × each entry point it is sent to."""
    counts = {
        "ClusterConfig fields": len(BAD_FIELDS) + 3,
        "a model that does not fit, per node (with / without a KV capacity)": 2 * len(NODES),
        "simulate: memory budget, engines": 3 + 4,
        "timeseries / prefill_queues / load_correlation dt": 12 * 3 + 2,
        "policy returns × 2 engines": 2 * len(BAD_RETURNS),
        "async / generator policies, random draws": 2 + 2,
        "Ctrl-C (2 policies × 2 engines), two threads": 4 + 1,
        "leaderboard policies and arguments": 14 + 6,
        "prefix-cache and CPP functions": 27,
    }
    n = sum(counts.values())
    print(f"\nbad inputs tried by tests/test_sim_inputs.py: {n} ({counts})")
    assert n == 60 + 3 + 12 + 7 + 38 + 38 + 4 + 5 + 20 + 27
