"""How long a slider move (this thread) pauses while a dashboard's run-ahead kernel computes in a
background thread: the longest gap between two steps of a loop here, beside the kernel call's length.
A kernel that held the GIL would pause this thread for the whole call (ratio ≈ 1); the kernels release
it (tests/test_jit.py checks they are compiled ``nogil``), so the ratio should be small. Prints numbers,
asserts nothing: the ratio depends on how busy the machine is.

    python benchmarks/bench_gil.py
"""
from __future__ import annotations

import statistics
import threading
import time

from mooncake_lab import prefix_cache as pc
from mooncake_lab.synthetic import synthetic_trace


def longest_pause(work) -> tuple[float, float]:
    """(seconds of ``work`` alone, longest gap between two loop steps of this thread meanwhile)."""
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


def main(rounds: int = 5) -> None:
    t = synthetic_trace("toolagent-like", n_requests=150_000)
    pc.simulate_cache(t.head(100), 100, "lfu")   # compiled before timing
    pc.stack_distances(t.head(100))
    for name, work in (("LFU curve point (2,000 blocks)", lambda: pc.simulate_cache(t, 2_000, "lfu")),
                       ("stack distances", lambda: pc.stack_distances(t))):
        runs = [longest_pause(work) for _ in range(rounds)]
        alone = statistics.median(a for a, _ in runs)
        gap = statistics.median(g for _, g in runs)
        print(f"{name:32s} call {alone * 1e3:7.1f} ms   longest pause {gap * 1e3:6.1f} ms   "
              f"ratio {gap / alone:.2f} (median of {rounds}; 1.00 = GIL held throughout)")


if __name__ == "__main__":
    main()
