"""Speed of the cost model: njit scalar kernels vs the validated Python API (prints, no asserts)."""
from __future__ import annotations

import time

from mooncake_lab import roofline as rf


def _per_call(fn, n=20_000) -> float:
    fn()  # warm-up (compilation / cache load)
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n


def main() -> None:
    cm = rf.cost_model("llama2-70b", "a800x8", "calibrated").as_array()
    k_pre = _per_call(lambda: rf.cm_prefill_time(cm, 8192, 4096))
    k_dec = _per_call(lambda: rf.cm_decode_step_time(cm, 32, 32 * 4096))
    api_pre = _per_call(lambda: rf.prefill_time("llama2-70b", "a800x8", 8192, 4096, "calibrated"), 2000)
    build = _per_call(lambda: rf.cost_model("llama2-70b", "a800x8", "calibrated"), 2000)
    print(f"cm_prefill_time (njit, from Python)   {k_pre * 1e6:8.2f} µs/call")
    print(f"cm_decode_step_time (njit, from Python){k_dec * 1e6:8.2f} µs/call")
    print(f"cost_model(...) build                  {build * 1e6:8.2f} µs/call")
    print(f"prefill_time(...) public API           {api_pre * 1e6:8.2f} µs/call  "
          f"(= {api_pre / k_pre:.0f}× the bare kernel; simulators should pass as_array() once)")


if __name__ == "__main__":
    main()
