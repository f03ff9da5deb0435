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
