"""The shared run memo (experiments.common): hits, parallel runs, runs in flight, prefetch, errors."""
import threading
import time

import numpy as np
import pytest

from mooncake_lab import sim
from mooncake_lab.experiments import common
from mooncake_lab.synthetic import synthetic_trace

TRACE = synthetic_trace("conversation-like", seed=3).head(300)


@pytest.fixture(autouse=True)
def fresh_memo(monkeypatch):
    monkeypatch.setattr(common, "_RUNS", type(common._RUNS)())
    monkeypatch.setattr(common, "_PENDING", {})


def _configs(k):
    return [sim.ClusterConfig(n_prefill=2, n_decode=2, prefill_policy=p) for p in ("random", "load", "kvcentric")[:k]]


def _count_runs(monkeypatch, delay_s=0.0, fail=None):
    """Count the runs simulate_all starts (by policy); each sleeps ``delay_s`` first and raises
    while ``fail["now"]`` is true."""
    calls, real = [], sim.simulate

    def counted(trace, config):
        calls.append(config.prefill_policy)
        time.sleep(delay_s)
        if fail and fail["now"]:
            raise RuntimeError("boom")
        return real(trace, config)

    monkeypatch.setattr(common.sim, "simulate", counted)
    return calls


def test_a_second_ask_is_a_memo_hit_and_equals_a_direct_run(monkeypatch):
    cfg = _configs(1)[0]
    calls = _count_runs(monkeypatch)
    a = common.simulate_at_speed(TRACE, 2.0, cfg)
    b = common.simulate_at_speed(TRACE, 2.0, cfg)
    assert a is b and calls == ["random"]
    direct = sim.simulate(TRACE.replay(2.0), cfg)
    for k, v in direct.arrays.items():
        np.testing.assert_array_equal(a.arrays[k], v, err_msg=k)


def test_parallel_runs_equal_serial_ones_and_duplicates_run_once(monkeypatch):
    cfgs = _configs(3)
    calls = _count_runs(monkeypatch)
    par = common.simulate_all([(TRACE, 1.5, c) for c in cfgs + cfgs[:1]], workers=2)
    assert sorted(calls) == ["kvcentric", "load", "random"] and par[0] is par[3]
    monkeypatch.setattr(common, "_RUNS", type(common._RUNS)())
    ser = common.simulate_all([(TRACE, 1.5, c) for c in cfgs], workers=1)
    for p, s in zip(par, ser):
        assert p is not s
        np.testing.assert_array_equal(p.arrays["finish"], s.arrays["finish"])


def test_a_run_in_flight_is_waited_for_not_repeated(monkeypatch):
    cfg = _configs(1)[0]
    calls = _count_runs(monkeypatch, delay_s=0.3)
    pre = common.Prefetch([(TRACE, 1.0, cfg)])
    while not common._PENDING:   # the background run has started
        time.sleep(0.005)
    res = common.simulate_at_speed(TRACE, 1.0, cfg)
    assert pre.wait(10) and pre.n_done == 1 and calls == ["random"]
    assert common.simulate_at_speed(TRACE, 1.0, cfg) is res


def test_prefetch_memoises_its_jobs_and_can_be_cancelled(monkeypatch):
    cfgs = _configs(3)
    calls = _count_runs(monkeypatch, delay_s=0.05)
    pre = common.Prefetch([(TRACE, 1.0, c) for c in cfgs])
    assert pre.wait(20) and pre.n_done == 3
    common.simulate_all([(TRACE, 1.0, c) for c in cfgs])
    assert len(calls) == 3   # nothing ran again
    pre2 = common.Prefetch([(TRACE, 3.0, c) for c in cfgs])
    pre2.cancel()
    assert pre2.wait(20) and pre2.n_done < 3


def test_a_failed_run_raises_for_every_waiter_and_can_be_retried(monkeypatch):
    cfg = _configs(1)[0]
    fail = {"now": True}
    calls = _count_runs(monkeypatch, delay_s=0.2, fail=fail)
    errors = []
    t = threading.Thread(target=lambda: errors.append(pytest.raises(RuntimeError, common.simulate_at_speed,
                                                                    TRACE, 1.0, cfg)))
    t.start()
    while not common._PENDING:
        time.sleep(0.005)
    with pytest.raises(RuntimeError, match="boom"):
        common.simulate_at_speed(TRACE, 1.0, cfg)   # waits for the other thread's run, gets its error
    t.join()
    assert errors and not common._PENDING and calls == ["random"]   # one run, two errors
    fail["now"] = False
    assert len(common.simulate_at_speed(TRACE, 1.0, cfg).arrays["finish"]) == len(TRACE)
    assert calls == ["random", "random"]


def test_bad_speed_is_rejected_before_any_run_starts(monkeypatch):
    calls = _count_runs(monkeypatch)
    with pytest.raises(ValueError, match=r"^speed must be a replay factor > 0 \(×\), got -1\.0"):
        common.simulate_all([(TRACE, 1.0, _configs(1)[0]), (TRACE, -1.0, _configs(1)[0])])
    assert calls == [] and not common._PENDING


def test_the_memo_keeps_the_most_recent_runs_within_its_byte_budget(monkeypatch):
    cfgs = _configs(3)
    one = common.simulate_at_speed(TRACE, 1.0, cfgs[0])
    size = sum(a.nbytes for a in one.arrays.values())
    monkeypatch.setattr(common, "_MEMO_BYTES", int(2.5 * size))
    common.simulate_all([(TRACE, 1.0, c) for c in cfgs[1:]])
    assert len(common._RUNS) == 2
    calls = _count_runs(monkeypatch)
    common.simulate_all([(TRACE, 1.0, c) for c in cfgs[1:]])   # the two latest: still memoised
    assert calls == []
    common.simulate_at_speed(TRACE, 1.0, cfgs[0])              # the oldest was dropped
    assert calls == ["random"]
