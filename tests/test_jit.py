"""The simulator's helper decorator: no reference counting where numba allows it, same results."""
from __future__ import annotations

import numpy as np
from numba import njit

from mooncake_lab.jit import NO_REFCOUNT, helper_njit


def test_helper_without_refcount_gives_the_same_results():
    @helper_njit
    def add_at(a, i, x):
        a[i] += x

    @njit
    def caller(n):
        a = np.zeros(n)
        for i in range(n):
            add_at(a, i, i * 0.5)
        return a

    assert NO_REFCOUNT  # numba ≥ 0.59, as pyproject requires
    assert caller(5).tolist() == [0.0, 0.5, 1.0, 1.5, 2.0]


#: The compiled kernels a dashboard runs ahead in a background thread (LFU / LengthAware curves, hit
#: curves, the pool's buffers, CPP pipeline, the trace's chain check): each must release the GIL, so a
#: slider move in the main thread is not held up for the length of a kernel call.
RUN_AHEAD = ("mooncake_lab.prefix_cache:_replay_kernel", "mooncake_lab.prefix_cache:_stack_distance_kernel",
             "mooncake_lab.prefix_cache:_fill_minus_one", "mooncake_lab.cpp:_pipeline_kernel",
             "mooncake_lab.traces:_chains_consistent")


def test_runs_computed_ahead_leave_the_gil_to_the_students_move(monkeypatch):
    """Behaviour, not speed: each kernel is compiled to release the GIL (numba's ``nogil``), and the
    replay a dashboard runs ahead goes through such a kernel. How long the main thread still pauses
    on this machine is measured by benchmarks/bench_gil.py (a duration depends on the machine's load)."""
    import importlib

    from numba.core.registry import CPUDispatcher

    from mooncake_lab import prefix_cache as pc
    from mooncake_lab.synthetic import synthetic_trace

    for name in RUN_AHEAD:
        mod, fn = name.split(":")
        k = getattr(importlib.import_module(mod), fn)
        assert isinstance(k, CPUDispatcher), f"{name} is not a compiled kernel"
        assert k.targetoptions.get("nogil") is True, f"{name} holds the GIL while it runs"
    t = synthetic_trace("toolagent-like", n_requests=200)
    calls, kernel = [], pc._replay_kernel
    monkeypatch.setattr(pc, "_replay_kernel", lambda *a: calls.append(1) or kernel(*a))
    pc.simulate_cache(t, 100, "lfu")
    assert calls, "the LFU curve no longer runs through the nogil replay kernel"
