"""Speed of the CPP pipeline simulator: numba kernel vs the plain-Python reference, and the
lecture-05 dashboards' slider-move latency (control change → PNG, ms; budget 150 ms).

Prints numbers and ratios; no assertions. Run: ``python benchmarks/bench_cpp.py``.
"""
from __future__ import annotations

import contextlib
import io
import statistics
import time

import numpy as np

from mooncake_lab import cpp


def _best(fn, repeat=5):
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return min(out)


def main() -> None:
    rng = np.random.default_rng(0)
    n_req = 200
    arrival = np.sort(rng.uniform(0, 60, n_req))
    lens = rng.integers(1000, 131072, n_req)
    kw = dict(chunk=2048, x=8, order="interleave")
    cpp.simulate_pipeline(arrival[:2], lens[:2], **kw)            # warm-up (compile or load the cache)
    chunks = sum(cpp.n_chunks(v, kw["chunk"]) for v in lens)
    t_nb = _best(lambda: cpp.simulate_pipeline(arrival, lens, **kw))
    t_py = _best(lambda: cpp.pipeline_reference(arrival, lens, **kw), repeat=1)
    print(f"pipeline, {n_req} requests, {chunks:,} chunks × 8 stages: numba {t_nb * 1e3:.1f} ms, "
          f"reference {t_py * 1e3:.0f} ms, ratio {t_py / t_nb:.0f}×")
    t1 = _best(lambda: cpp.cpp_ttft(n_tokens=131072, x=4), repeat=20)
    print(f"cpp_ttft (one 128k request, X = 4): {t1 * 1e6:.0f} µs per call")

    from mooncake_lab.dashboards.prefill import GanttDashboard, SchemesDashboard
    moves = {GanttDashboard: {"prompt_tokens": [65536, 131072], "chunk": [512, 8192], "x": [2, 8],
                              "bandwidth": [5.0, 200.0], "overlap": [False, True], "preset": ["ideal", "calibrated"]},
             SchemesDashboard: {"x": [8, 16], "bandwidth": [2.0, 50.0], "chunk": [1024, 16384],
                                "preset": ["ideal", "modern"]}}
    for cls, controls in moves.items():
        with contextlib.redirect_stdout(io.StringIO()):
            d = cls()
            times = []
            for name, values in controls.items():
                for v in values:
                    t = time.perf_counter()
                    d.controls[name].value = v
                    times.append((time.perf_counter() - t) * 1e3)
        print(f"{cls.__name__}: median {statistics.median(times):.0f} ms, worst {max(times):.0f} ms per move "
              f"(budget 150 ms)")


if __name__ == "__main__":
    main()
