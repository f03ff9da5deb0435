"""Speed of the trace loader and the synthetic generator, and the presets' calibration.

Run: ``.venv/bin/python benchmarks/bench_traces.py``. Prints numbers, no assertions. The real
traces are read from $MOONCAKE_LAB_DATA or ../shared/data/mooncake_traces when present.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

from mooncake_lab.experiments.l03_traces import preset_calibration
from mooncake_lab.synthetic import PRESETS, synthetic_trace
from mooncake_lab import trace_data
from mooncake_lab.traces import load_trace, read_jsonl

REPEATS = 5


def best_of(fn, repeats: int = REPEATS) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> int:
    root = Path(__file__).resolve().parent.parent
    folder = Path(os.environ.get("MOONCAKE_LAB_DATA") or root.parent / "shared" / "data" / "mooncake_traces")
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}; best of {REPEATS}")
    print("\nloading real traces (read_jsonl: parse + validate + dense remap)")
    for name in ("conversation", "synthetic"):
        p = folder / f"{name}_trace.jsonl"
        if not p.is_file():
            print(f"  {name:<13} not found in {folder}: skipped")
            continue
        dt, t = best_of(lambda: read_jsonl(p))
        mb = p.stat().st_size / 1e6
        print(f"  {name:<13} {len(t):>6,} requests {mb:5.2f} MB  {dt * 1e3:7.1f} ms  "
              f"({len(t) / dt / 1e3:,.0f} k requests/s, {mb / dt:,.1f} MB/s)")

    print("\nload_trace by name (read + parse + verify: sha256 once per file version, then cached)")
    os.environ.setdefault("MOONCAKE_LAB_DATA", str(folder))
    for name in ("conversation", "synthetic"):
        if not (folder / f"{name}_trace.jsonl").is_file():
            continue
        getattr(trace_data, "_VERIFIED", {}).clear()
        t0 = time.perf_counter()
        load_trace(name)
        first = time.perf_counter() - t0
        dt, t = best_of(lambda: load_trace(name))
        print(f"  {name:<13} first {first * 1e3:7.1f} ms, then {dt * 1e3:7.1f} ms  ({t.validate() and 'valid'})")
        dv, _ = best_of(t.validate)
        print(f"  {'':<13} Trace.validate() {dv * 1e3:6.2f} ms")

    print("\ngenerating synthetic presets (default size, seed 0)")
    for preset in PRESETS:
        dt, t = best_of(lambda: synthetic_trace(preset, seed=0))
        print(f"  {preset:<18} {len(t):>6,} requests  {len(t.block_ids):>8,} blocks  {dt * 1e3:7.1f} ms  "
              f"({len(t) / dt / 1e3:,.0f} k requests/s)")

    print("\ncalibration (seed 0): ours vs target")
    df = preset_calibration(seed=0)
    for r in df.itertuples():
        print(f"  {r.preset:<18} {r.statistic:<12} target {r.target:>10,.3f}  ours {r.ours:>10,.3f}  "
              f"{r.rel_error:+7.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
