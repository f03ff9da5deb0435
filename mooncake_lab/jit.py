"""The numba decorator for the simulator's small kernel helpers, in one place.

``helper_njit`` = ``njit(cache=True)`` without reference counting (numba's ``_nrt=False``). Numba
increments and decrements an atomic reference count for every array a compiled function passes to
another and for every view like ``a[i]``; in the simulator's inner loops that was ≈ 45% of a run
(benchmarks/bench_sim.py: toolagent-like 8P+8D kvcentric 84 → 46 ms). Such a helper may only index
arrays its caller keeps alive and cannot allocate (numba refuses at compile time), so allocation
stays in the top-level kernels. ``_nrt`` is a private numba option (numba's own tests use it): where
a numba version no longer knows it, helpers fall back to plain ``njit(cache=True)`` — slower, same
results.
"""
from __future__ import annotations

from numba import njit
from numba.core.cpu import CPUTargetOptions

__all__ = ["helper_njit", "NO_REFCOUNT"]

#: Whether this numba accepts ``_nrt=False`` (numba 0.59 … 0.68 do).
NO_REFCOUNT = hasattr(CPUTargetOptions, "_nrt")

helper_njit = njit(cache=True, _nrt=False) if NO_REFCOUNT else njit(cache=True)
