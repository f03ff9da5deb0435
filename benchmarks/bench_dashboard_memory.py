"""Resident memory of a long class session: ``N`` moves of :class:`PolicyComparisonDashboard`.

Each move sets one control (replay speed, decode KV, or trace; seeded random, on the sliders' grids,
as a browser sends them) and waits for the runs computed ahead, as a student who looks at each
picture. Prints the process's resident set size (``VmRSS`` of ``/proc/self/status``, MB) every
``N / 10`` moves; not an assertion (``tests/test_dashboard_inputs.py`` bounds a shorter session).
Run: ``python benchmarks/bench_dashboard_memory.py [N=1000]`` (``MOONCAKE_LAB_PREFETCH=0``: no runs ahead).

Measured on the 2-core course VM (2026-12-01, both at once): without handing evicted runs' memory back
(:func:`mooncake_lab.experiments.common.release_memory`) 278 → 820 MB after 100 moves → 977 MB after
1,000 (peak 983, still growing); with it 278 → 680 → 675 MB (peak 737, flat). The run memo's cap
is 256 MB of per-request arrays.
"""
from __future__ import annotations

import contextlib
import io
import random
import sys
import time


def rss_mb() -> float:
    """Resident set size of this process, MB (Linux)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def grid(w) -> list:
    """Every value of a control's grid (option values, or slider steps from min to max)."""
    import numpy as np

    if hasattr(w, "options"):
        return [o[1] if isinstance(o, tuple) else o for o in w.options]
    vals = np.round(np.arange(w.min, w.max + w.step / 2, w.step), 6)
    return [float(w.base ** v) for v in vals] if hasattr(w, "base") else [float(v) for v in vals]


def session(n_moves: int, seed: int = 0, every: int = 0, wait: bool = True):
    """Build the dashboard, make ``n_moves`` moves; yields ``(moves done, RSS MB)`` every ``every`` moves."""
    from mooncake_lab.dashboards.overload import PolicyComparisonDashboard

    rng = random.Random(seed)
    with contextlib.redirect_stdout(io.StringIO()):  # outside a kernel, display() prints
        d = PolicyComparisonDashboard()
    grids = {k: grid(w) for k, w in d.controls.items()}
    yield 0, rss_mb()
    for i in range(1, n_moves + 1):
        name = rng.choice(["speed", "speed", "kv", "kv", "trace"])
        with contextlib.redirect_stdout(io.StringIO()):
            d.controls[name].value = rng.choice(grids[name])
        if wait and d.prefetch is not None:
            d.prefetch.wait(0.05)   # a glance: the runs ahead keep going between moves
        if every and i % every == 0:
            yield i, rss_mb()
    if d.prefetch is not None:
        d.prefetch.cancel()
        d.prefetch.wait()


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    t0 = time.perf_counter()
    print(f"{'moves':>6}{'RSS MB':>10}{'s':>8}")
    for i, mb in session(n, every=max(1, n // 10)):
        print(f"{i:>6}{mb:>10.0f}{time.perf_counter() - t0:>8.0f}", flush=True)


if __name__ == "__main__":
    main()
