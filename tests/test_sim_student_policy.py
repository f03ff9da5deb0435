"""Student prefill policies (sim.student_policy): equivalences with the built-in policies, numba
path ≡ Python path ≡ reference engine, clear errors for bad policies, the leaderboard."""
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_sim_engines import assert_invariants, assert_same, configs, small_traces

from mooncake_lab import sim
from mooncake_lab.synthetic import synthetic_trace


# ---------------------------------------------------------------- policies used below (numba-compilable)
def least_ttft(req, view):
    return int(np.argmin(view.ttft_s))


def least_wait_no_fetch(req, view):
    view.fetch[:] = False
    return int(np.argmin(view.wait_s))


def least_local_ttft_no_fetch(req, view):  # queue + prefill with the local prefix: cache_aware's estimate
    view.fetch[:] = False
    return int(np.argmin(view.wait_s + view.prefill_s))


def uniform_pick_no_fetch(req, view):
    view.fetch[:] = False
    n = len(view.wait_s)
    return min(int(req.uniform * n), n - 1)


def least_ttft_always_fetch(req, view):  # force the fetch wherever the pool has more: threshold 1
    view.fetch[:] = True
    return int(np.argmin(view.ttft_s))


def mixed(req, view):
    """Not a built-in: the TTFT estimate plus a penalty on long queues, ties to the best prefix."""
    best, score = 0, np.inf
    for p in range(len(view.ttft_s)):
        s = view.ttft_s[p] + 0.5 * view.wait_s[p] - 1e-4 * view.prefix_tokens[p]
        if s < score:
            best, score = p, s
    return best


SEEN = {}


def mixed_in_python(req, view):  # uses a dict: numba cannot compile it
    SEEN[req.index] = True
    return mixed(req, view)


@pytest.fixture(scope="module")
def busy_trace():
    """300 shared-prefix requests on 4 prefill instances: queues build, caches hit, fetches happen."""
    return synthetic_trace("conversation-like", seed=3).head(300)


BUSY = dict(n_prefill=4, n_decode=2, cache_capacity_blocks=150, decode_kv_capacity_tokens=150_000.0,
            preset="modern")


def same_run(a, b):
    for k in ("prefill_inst", "fetch_src", "cached_tok", "fetched_tok", "outcome"):
        np.testing.assert_array_equal(a.arrays[k], b.arrays[k], err_msg=k)
    for k in ("prefill_end", "finish", "tbt_tail"):
        np.testing.assert_array_equal(a.arrays[k], b.arrays[k], err_msg=k)  # bit for bit


# ---------------------------------------------------------------- equivalences with the built-ins
@pytest.mark.parametrize("noise", [0.0, 0.3])
def test_min_ttft_is_kvcentric_and_python_mode_agrees(busy_trace, noise):
    cfg = sim.ClusterConfig(**BUSY, estimator_noise=noise, seed=2)
    ref = sim.simulate(busy_trace, cfg.replace(prefill_policy="kvcentric"))
    assert ref.arrays["fetched_tok"].max() > 0  # the fetch rule is exercised
    same_run(sim.simulate(busy_trace, cfg.replace(prefill_policy=least_ttft)), ref)


@pytest.mark.parametrize("engine", ["numba", "reference"])
@pytest.mark.parametrize("policy, builtin", [(least_wait_no_fetch, "load"),
                                             (least_local_ttft_no_fetch, "cache_aware"),
                                             (uniform_pick_no_fetch, "random")])
def test_vetoing_the_fetch_students_reproduce_builtins(busy_trace, policy, builtin, engine):
    tr = busy_trace if engine == "numba" else busy_trace.head(120)
    cfg = sim.ClusterConfig(**BUSY, seed=1)
    got = sim.simulate(tr, cfg.replace(prefill_policy=policy), engine=engine)
    want = sim.simulate(tr, cfg.replace(prefill_policy=builtin), engine=engine)
    same_run(got, want) if engine == "numba" else assert_same(got, want)
    np.testing.assert_array_equal(got.arrays["prefill_inst"], want.arrays["prefill_inst"])
    assert (got.arrays["queue_wait"] > 0).any() and got.arrays["cached_tok"].max() > 0
    assert got.arrays["fetched_tok"].max() == 0


def test_forcing_the_fetch(busy_trace):
    """Forcing is a no-op where the rule already fetches (threshold 1: it *is* kvcentric); at
    threshold 4 it fetches more often than kvcentric does, the same in both engines."""
    cfg = sim.ClusterConfig(**BUSY, prefill_policy=least_ttft_always_fetch)
    same_run(sim.simulate(busy_trace, cfg), sim.simulate(busy_trace, cfg.replace(prefill_policy="kvcentric")))
    cfg4 = cfg.replace(kvcache_balancing_threshold=4.0)
    forced = sim.simulate(busy_trace, cfg4)
    kv4 = sim.simulate(busy_trace, cfg4.replace(prefill_policy="kvcentric"))
    assert (forced.arrays["fetched_tok"] > 0).sum() > (kv4.arrays["fetched_tok"] > 0).sum() > 0
    assert_same(sim.simulate(busy_trace.head(120), cfg4), sim.simulate(busy_trace.head(120), cfg4, engine="reference"))


def test_policy_decides_the_instance_and_fetch_follows_algorithm_1(busy_trace):
    """A policy sending everything to instance 2: every prefill runs there; the pool's best prefix
    is fetched only from elsewhere (it can only live on 2) — so never, and the queue grows."""
    res = sim.simulate(busy_trace, sim.ClusterConfig(**BUSY, prefill_policy=lambda req, view: 2))
    pre = res.arrays["prefill_inst"][res.arrays["prefill_inst"] >= 0]
    assert set(pre) == {2}
    assert res.arrays["fetched_tok"].max() == 0
    assert res.arrays["queue_wait"].max() > sim.simulate(busy_trace, sim.ClusterConfig(**BUSY)).arrays[
        "queue_wait"].max()


def test_view_matches_what_happens(busy_trace):
    """The view's promise, checked on the run: for the chosen instance, wait / fetch / prefill /
    TTFT estimates (noise 0) equal the simulated queue wait, fetch, prefill time and TTFT."""
    seen = {}

    def record(req, view):
        p = int(np.argmin(view.ttft_s))
        seen[req.index] = (p, view.wait_s[p], view.fetch_s[p], view.fetch_prefill_s[p], view.ttft_s[p],
                           view.fetch[p], req.best_prefix_tokens, req.best_instance)
        return p

    with pytest.warns(sim.PolicyCompileWarning):
        res = sim.simulate(busy_trace, sim.ClusterConfig(**BUSY, prefill_policy=record))
    a, tr = res.arrays, busy_trace
    assert len(seen) == len(tr)
    assert any(s[5] for s in seen.values()), "no request fetched: the fetch branch below would check nothing"
    for i, (p, w, f, pre, ttft, fetch, best_tok, best_p) in seen.items():
        assert a["prefill_inst"][i] == p
        assert a["queue_wait"][i] == pytest.approx(w, abs=1e-12)
        assert a["fetch_wait"][i] + a["fetch_time"][i] == pytest.approx(f, abs=1e-12)  # links' wait included
        assert a["prefill_time"][i] == pytest.approx(pre, rel=1e-12)
        assert a["prefill_end"][i] - tr.arrival_s[i] == pytest.approx(ttft, rel=1e-9)
        assert (a["fetched_tok"][i] > 0) == bool(fetch)
        if fetch:
            assert a["cached_tok"][i] == best_tok
            # the lowest-index holder, or (links shared) the holder whose links let the fetch begin first
            assert a["fetch_src"][i] == best_p or (res.config.network_contention and a["fetch_src"][i] != p)


# ---------------------------------------------------------------- numba ≡ Python mode ≡ reference
def test_compiled_and_python_modes_and_reference_agree(busy_trace):
    cfg = sim.ClusterConfig(**BUSY, estimator_noise=0.2)
    assert sim.compile_policy(mixed).mode == "numba"
    with pytest.warns(sim.PolicyCompileWarning, match="plain Python.*dict"):
        assert sim.compile_policy(mixed_in_python).mode == "python"
    a = sim.simulate(busy_trace, cfg.replace(prefill_policy=mixed))
    b = sim.simulate(busy_trace, cfg.replace(prefill_policy=mixed_in_python))
    c = sim.simulate(busy_trace, cfg.replace(prefill_policy=mixed), engine="reference")
    same_run(a, b)
    assert_same(a, c)
    assert_invariants(a)
    # it is not a built-in in disguise
    assert not all((a.arrays["prefill_inst"] == sim.simulate(busy_trace, cfg.replace(prefill_policy=p))
                    .arrays["prefill_inst"]).all() for p in sim.PREFILL_POLICIES)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=small_traces(), config=configs, policy=st.sampled_from([mixed, least_ttft, uniform_pick_no_fetch, least_ttft_always_fetch]),
       cpp=st.sampled_from([1, 2]))
def test_student_kernel_equals_reference_and_invariants_hold(trace, config, policy, cpp):
    config = config.replace(prefill_policy=policy, n_prefill=config.n_prefill * cpp, cpp_group_size=cpp,
                            cpp_chunk=1000)
    a = sim.simulate(trace, config)
    b = sim.simulate(trace, config, engine="reference")
    assert_same(a, b)
    assert_invariants(a)
    assert_same(a, sim.simulate(trace, config))  # deterministic


def test_jit_disabled_runs_student_policies():
    """NUMBA_DISABLE_JIT=1: the kernel's Python path calls the policy directly; same results."""
    code = textwrap.dedent("""
        import numpy as np
        from mooncake_lab import sim
        from mooncake_lab.synthetic import synthetic_trace
        tr = synthetic_trace("conversation-like", seed=3).head(40)
        def least_ttft(req, view):
            return int(np.argmin(view.ttft_s))
        cfg = sim.ClusterConfig(n_prefill=3, n_decode=2, cache_capacity_blocks=100, prefill_policy=least_ttft)
        a = sim.simulate(tr, cfg)
        b = sim.simulate(tr, cfg.replace(prefill_policy="kvcentric"))
        assert (a.arrays["prefill_inst"] == b.arrays["prefill_inst"]).all()
        assert np.array_equal(a.arrays["finish"], b.arrays["finish"], equal_nan=True)
        try:
            sim.simulate(tr, cfg.replace(prefill_policy=lambda req, view: 7))
        except ValueError as e:
            print(e)
    """)
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    r = subprocess.run([sys.executable, "-W", "ignore", "-c", code], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "chose instance 7 for request 0" in r.stdout


# ---------------------------------------------------------------- bad policies: clear errors
def returns_float(req, view):
    return view.ttft_s.min()


def returns_none_at_7(req, view):
    if req.index == 7:
        return None
    return 0


def too_large_at_5(req, view):
    return len(view.wait_s) if req.index == 5 else 0


def negative(req, view):
    return -1


def returns_bool(req, view):
    return view.fetch[0]


def divides_by_zero_at_3(req, view):
    x = req.index - 3
    return 0 * (10 // x)


def reads_past_the_end_at_4(req, view):
    return int(view.wait_s[req.index]) * 0  # 4 instances: index 4 is out of bounds


BAD = [
    (returns_float, sim.PolicyReturnTypeError, r"returned np\.float64\(.*\) \(float64\) for request 0 "),
    (returns_none_at_7, sim.PolicyReturnTypeError, r"returned None \(NoneType\) for request 7 "),
    (too_large_at_5, sim.PolicyChoiceError, r"chose instance 4 for request 5 .*there are 4 prefill instances"),
    (negative, sim.PolicyChoiceError, r"chose instance -1 for request 0 "),
    (returns_bool, sim.PolicyReturnTypeError, r"returned np\.False_ \(bool_?\) for request 0 "),
    (divides_by_zero_at_3, sim.PolicyChoiceError, r"raised ZeroDivisionError: .* for request 3 "),
    (reads_past_the_end_at_4, sim.PolicyChoiceError, r"raised IndexError: .* for request 4 "),
]


@pytest.mark.parametrize("engine", ["numba", "reference"])
@pytest.mark.parametrize("policy, error, message", BAD, ids=[b[0].__name__ for b in BAD])
def test_bad_policy_names_the_request_and_the_value(busy_trace, engine, policy, error, message):
    cfg = sim.ClusterConfig(**BUSY, prefill_policy=policy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sim.PolicyCompileWarning)
        with pytest.raises(error, match=message) as e:
            sim.simulate(busy_trace.head(30), cfg, engine=engine)
    assert f"'{policy.__name__}'" in str(e.value)
    assert isinstance(e.value, TypeError if error is sim.PolicyReturnTypeError else ValueError)
    if "raised" in message:  # the student's own exception is chained
        assert type(e.value.__cause__).__name__ in message


def test_python_mode_policy_exception_is_chained(busy_trace):
    def raises_key_error(req, view, table={}):
        return table[req.index]

    with pytest.warns(sim.PolicyCompileWarning):
        with pytest.raises(sim.PolicyChoiceError, match=r"raised KeyError: 0 .* for request 0 ") as e:
            sim.simulate(busy_trace.head(5), sim.ClusterConfig(**BUSY, prefill_policy=raises_key_error))
    assert isinstance(e.value.__cause__, KeyError)


@pytest.mark.parametrize("policy, error, message", [
    (3, ValueError, r"prefill_policy: got 3; allowed: .* or a function policy\(req, view\)"),
    ("fastest", ValueError, r"prefill_policy: got 'fastest'"),
    (lambda req: 0, TypeError, r"<lambda>\(req\) must take two arguments \(req, view\)"),
    (lambda req, view, extra: 0, TypeError, r"must take two arguments"),
])
def test_config_rejects_non_policies(policy, error, message):
    with pytest.raises(error, match=message):
        sim.ClusterConfig(prefill_policy=policy)


def test_coupled_engine_rejects_student_policies():
    with pytest.raises(ValueError, match="student policies run on the disaggregated cluster"):
        sim.ClusterConfig(engine_mode="coupled", prefill_policy=least_ttft)


# ---------------------------------------------------------------- compiling and the leaderboard
def test_compile_memo_follows_global_numbers():
    """numba freezes global numbers: changing one must give a freshly compiled policy."""
    ns = {"np": np, "K": 0}
    exec("def pick_k(req, view):\n    return K\n", ns)
    first = sim.compile_policy(ns["pick_k"])
    assert sim.compile_policy(ns["pick_k"]) is first and first.mode == "numba"
    tr = synthetic_trace("conversation-like", seed=3).head(20)
    cfg = sim.ClusterConfig(n_prefill=3, n_decode=1, prefill_policy=ns["pick_k"])
    assert set(sim.simulate(tr, cfg).arrays["prefill_inst"]) == {0}
    ns["K"] = 2
    assert sim.compile_policy(ns["pick_k"]) is not first
    assert set(sim.simulate(tr, cfg).arrays["prefill_inst"]) == {2}


def test_a_narrower_integer_return_is_compiled_and_widened(busy_trace):
    def int32_ttft(req, view):
        return np.int32(np.argmin(view.ttft_s))

    assert sim.compile_policy(int32_ttft).mode == "numba"
    res = sim.simulate(busy_trace, sim.ClusterConfig(**BUSY, prefill_policy=int32_ttft))
    same_run(res, sim.simulate(busy_trace, sim.ClusterConfig(**BUSY)))


def test_an_njit_decorated_policy_is_accepted(busy_trace):
    from numba import njit

    res = sim.simulate(busy_trace, sim.ClusterConfig(**BUSY, prefill_policy=njit(least_ttft)))
    same_run(res, sim.simulate(busy_trace, sim.ClusterConfig(**BUSY)))
    assert res.config.policy_name == "least_ttft"


def test_leaderboard_ranks_students_against_builtins(busy_trace):
    board = sim.leaderboard(busy_trace, {"mine": mixed, "slow": lambda req, view: 0},
                            config=sim.ClusterConfig(**BUSY), sort_by="ttft_mean_s")
    assert set(board.index) == {"mine", "slow", *sim.BASELINES}
    assert list(board["rank"]) == list(range(1, 7))
    assert board["ttft_mean_s"].is_monotonic_increasing
    assert board.loc["slow", "rank"] == 6  # one instance for everything: the worst TTFT
    assert board.loc["mine", "kind"] == "yours" and board.loc["mine", "mode"] == "numba"
    assert board.loc["kvcentric", "mode"] == "built-in"
    kv = sim.simulate(busy_trace, sim.ClusterConfig(**BUSY)).summary()
    assert board.loc["kvcentric", "ttft_mean_s"] == kv["ttft_mean_s"]
    by_attainment = sim.leaderboard(busy_trace, least_ttft, config=sim.ClusterConfig(**BUSY),
                                    baselines=("load",), sort_by="slo_attainment")
    assert list(by_attainment.index) == sorted(["least_ttft", "load"],
                                               key=lambda k: -by_attainment.loc[k, "slo_attainment"])
    with pytest.raises(ValueError, match="leaderboard.sort_by: got 'speed'; allowed: one of 'ttft_mean_s'"):
        sim.leaderboard(busy_trace, least_ttft, sort_by="speed")
