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


def _longest_pause_of_this_thread(work) -> tuple[float, float]:
    """Run ``work`` once alone, then in a background thread while this one keeps looping:
    (seconds alone, longest gap between two of this thread's loop steps)."""
    import threading
    import time

    t0 = time.perf_counter()
    work()
    alone = time.perf_counter() - t0
    th = threading.Thread(target=work)
    th.start()
    gap, last = 0.0, time.perf_counter()
    while th.is_alive():
        now = time.perf_counter()
        gap, last = max(gap, now - last), now
    th.join()
    return alone, gap


def test_runs_computed_ahead_leave_the_gil_to_the_students_move():
    """Dashboards compute runs ahead in a background thread (LFU / LengthAware curves, hit curves):
    their compiled kernels release the GIL, so a slider move in the main thread is not held up for
    the length of a kernel call (with the GIL held, this thread paused as long as the call)."""
    from mooncake_lab import prefix_cache as pc
    from mooncake_lab.synthetic import synthetic_trace

    t = synthetic_trace("toolagent-like", n_requests=150_000)
    pc.simulate_cache(t.head(100), 100, "lfu")   # compiled before timing
    pc.stack_distances(t.head(100))
    for work in (lambda: pc.simulate_cache(t, 2_000, "lfu"), lambda: pc.stack_distances(t)):
        alone, gap = _longest_pause_of_this_thread(work)
        assert alone > 0.02, "the kernel call is too short to tell"
        assert gap < alone / 3, f"this thread paused {gap * 1e3:.0f} ms during a {alone * 1e3:.0f} ms call"
