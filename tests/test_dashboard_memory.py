"""A long class session's memory is bounded: many moves of the lecture-07 comparison dashboard
(three simulations a move, memoised up to the run cache's cap) do not grow the resident set
past the cap plus a margin, and the memory of evicted runs goes back to the OS (issue 12 §4;
the full 1,000 moves: ``benchmarks/bench_dashboard_memory.py``)."""
from __future__ import annotations

import ctypes
import ctypes.util
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_dashboard_memory as bench  # noqa: E402

from mooncake_lab.experiments import common  # noqa: E402


_LIBC_NAME = ctypes.util.find_library("c")


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux") or not _LIBC_NAME, reason="Linux RSS, glibc's malloc_trim")
def test_many_moves_keep_resident_memory_bounded(monkeypatch):
    monkeypatch.setenv("MOONCAKE_LAB_PREFETCH", "1")   # runs ahead in other threads: what fragments the heap
    common._RUNS.clear()
    libc = ctypes.CDLL(_LIBC_NAME)
    libc.malloc_trim(0)   # what earlier tests in this process freed is not this test's
    samples = dict(bench.session(200, seed=1, every=50))
    before_trim = bench.rss_mb()
    libc.malloc_trim(0)   # what the allocator held of the memory freed so far
    freed_by_trim = before_trim - bench.rss_mb()
    cap = common._MEMO_BYTES / 2**20
    # the first moves fill the run cache and load what the dashboard needs (how much depends on what the
    # process already holds: 280 MB alone, 900 MB late in the suite); after that the resident set must level
    grown = samples[200] - samples[50]
    assert sum(e[2] for e in common._RUNS.values()) <= common._MEMO_BYTES
    # evicted runs' memory was handed back as it was freed: little left for a trim to return (before
    # the fix: 176 MB of 785 after 200 moves; after: 10 MB of 735)
    assert freed_by_trim < 60, f"{freed_by_trim:.0f} MB of freed memory held by the allocator ({samples})"
    assert grown < cap / 2, f"resident memory grew {grown:.0f} MB from move 50 to 200 (run cache cap {cap:.0f} MB): {samples}"
    common._RUNS.clear()
