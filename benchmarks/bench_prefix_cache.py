"""Benchmark of the prefix cache on the conversation trace: cold vs warm numba, and vs plain Python;
then the eviction policies (LRU, LFU, LengthAware) on the arXiv trace or its stand-in (23,608 requests).

    python benchmarks/bench_prefix_cache.py            # first call may load compiled kernels from numba's cache
    python benchmarks/bench_prefix_cache.py --cold     # compile from scratch (empty temporary numba cache)

Uses the real conversation trace if :func:`load_trace_or_synthetic` finds it (set MOONCAKE_LAB_DATA to
a folder holding it), else the calibrated synthetic stand-in (said in the output). Prints numbers,
asserts nothing.
"""
from __future__ import annotations

import os
import sys
import tempfile
import time

if "--cold" in sys.argv:  # must happen before numba is imported
    os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="numba-cold-")

import numpy as np  # noqa: E402

from mooncake_lab import prefix_cache as pc  # noqa: E402
from mooncake_lab.traces import load_trace_or_synthetic  # noqa: E402

#: The 8 capacities (blocks) of the "≤ 1 s for a curve" budget.
CAPS = [1_000, 3_000, 10_000, 30_000, 50_000, 100_000, 300_000, 1_000_000]


def timed(fn, *args, repeat: int = 1, **kw):
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn(*args, **kw)
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    t_load, trace = timed(load_trace_or_synthetic, "conversation")
    print(f"trace: {trace!r} (loaded in {t_load:.2f} s)")
    if trace.name != "conversation":
        print("NOTE: real conversation trace unavailable; timing the synthetic stand-in. "
              "Set MOONCAKE_LAB_DATA to the folder holding conversation_trace.jsonl.")
    print(f"accesses (blocks over all requests): {len(trace.block_ids):,}\n")
    mode = "compile from scratch" if "--cold" in sys.argv else "incl. compile or numba-cache load"

    def curve():
        return pc.hit_ratio_curve(trace, CAPS)

    cold, _ = timed(curve)
    warm, hits = timed(curve, repeat=5)
    print(f"hit-ratio curve, {len(CAPS)} capacities (stack distances): first {cold * 1e3:8.1f} ms ({mode}), "
          f"warm {warm * 1e3:6.1f} ms")
    print("   " + "  ".join(f"{c:>9,}: {h:.3f}" for c, h in zip(CAPS, hits)))

    cold, _ = timed(pc.simulate_lru, trace, 30_000)
    warm, _ = timed(pc.simulate_lru, trace, 30_000, repeat=5)
    print(f"direct LRU, global pool of 30,000 blocks:             first {cold * 1e3:8.1f} ms, "
          f"warm {warm * 1e3:6.1f} ms")
    warm_loc, _ = timed(pc.simulate_lru, trace, 5_859, 10, "random", repeat=5)
    print(f"direct LRU, 10 local caches of 5,859 blocks (random):  warm {warm_loc * 1e3:6.1f} ms")
    warm_direct8 = sum(timed(pc.simulate_lru, trace, c, repeat=3)[0] for c in CAPS)
    print(f"direct LRU at the {len(CAPS)} capacities, one run each:      warm {warm_direct8 * 1e3:6.1f} ms\n")

    assign = np.zeros(len(trace), dtype=np.int64)
    t_py, _ = timed(pc._lru_reference, trace.block_offsets, trace.block_ids, assign, [30_000])
    print(f"plain-Python OrderedDict LRU, 30,000 blocks: {t_py:.2f} s → numba direct is {t_py / warm:,.0f}× faster")
    print(f"plain-Python curve ({len(CAPS)} OrderedDict runs) ≈ {t_py * len(CAPS):.1f} s → "
          f"stack-distance curve is {t_py * len(CAPS) / pc_curve_warm(trace):,.0f}× faster")

    n_small = 400
    sub_off = trace.block_offsets[:n_small + 1]
    sub_ids = trace.block_ids[:sub_off[-1]]
    t_ref, _ = timed(pc._stack_distances_reference, sub_off, sub_ids)
    t_nb, _ = timed(pc._stack_distance_kernel, sub_off, sub_ids, trace.n_blocks, pc.NEVER, repeat=5)
    print(f"stack distances, first {n_small} requests ({sub_off[-1]:,} accesses): plain Python (list stack) "
          f"{t_ref * 1e3:.0f} ms, numba (Fenwick) {t_nb * 1e3:.2f} ms → {t_ref / t_nb:,.0f}×")


def policies() -> None:
    """LRU / LFU / LengthAware curves of lecture 03 on the arXiv trace (its stand-in unless a copy is found)."""
    import math

    from mooncake_lab.experiments import l03_cache

    trace = l03_cache.arxiv_trace()
    print(f"\neviction policies on {trace.name} ({len(trace):,} requests, {len(trace.block_ids):,} accesses)")
    table1 = [c for c in l03_cache.TABLE1_CAPACITIES if math.isfinite(c)]
    lecture = [c for c in l03_cache.POLICY_CAPACITIES if math.isfinite(c)]
    for pol in pc.EVICTION_POLICIES:
        cold, _ = timed(pc.simulate_cache, trace, 30_000, pol)
        warm, _ = timed(pc.simulate_cache, trace, 30_000, pol, repeat=5)
        t1, _ = timed(pc.hit_ratio_curve, trace, table1, policy=pol, repeat=3)
        tl, _ = timed(pc.hit_ratio_curve, trace, lecture, policy=pol, repeat=3)
        print(f"  {pol:13s} one replay at 30,000 blocks: first {cold * 1e3:7.1f} ms, warm {warm * 1e3:6.1f} ms; "
              f"curve at Table 1's {len(table1)} capacities {t1 * 1e3:6.0f} ms, at the lecture's {len(lecture)} "
              f"{tl * 1e3:6.0f} ms")
    n_small = 500   # the reference scans the whole cache for each LFU / LengthAware victim: O(capacity)
    off = trace.block_offsets[:n_small + 1]
    ids = trace.block_ids[:off[-1]]
    z = np.zeros(n_small, dtype=np.int64)
    for pol in ("lfu", "length_aware"):
        t_ref, _ = timed(pc._replay_reference, off, ids, z, [1_000], pol)
        t_nb, _ = timed(lambda: pc._replay_kernel(off, ids, z, *pc.new_cache_state(1, trace.n_blocks, 1_000,
                                                                                    policy=pol)), repeat=5)
        print(f"  {pol:13s} first {n_small:,} requests, 1,000 blocks: plain Python {t_ref * 1e3:7.0f} ms, "
              f"numba {t_nb * 1e3:5.1f} ms → {t_ref / t_nb:,.0f}×")


def pc_curve_warm(trace) -> float:
    return timed(pc.hit_ratio_curve, trace, CAPS, repeat=3)[0]


if __name__ == "__main__":
    main()
    policies()
