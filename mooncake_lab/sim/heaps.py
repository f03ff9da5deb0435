"""Binary min-heaps of (key, index) pairs, one per row of two 2-D arrays, for the simulator's kernels.

Row ``r`` of ``key`` / ``idx`` holds a heap of ``size`` entries ordered by (key, index): the ready
events of the disaggregated kernel (one row: time, request) and each coupled instance's batch (a
row per instance: the step at which a request completes, the request). The smallest entry is at
``[r, 0]``. Compiled without reference counting (:data:`mooncake_lab.jit.helper_njit`), taking the
whole arrays and a row number: a row view taken in a kernel's loop would cost two atomic updates.
"""
from __future__ import annotations

from ..jit import helper_njit

__all__ = ["heap_push", "heap_pop"]


@helper_njit
def _before(key, idx, r, a, b):
    """Whether entry ``a`` of row ``r`` orders before entry ``b``: smaller key, then smaller index."""
    return key[r, a] < key[r, b] or (key[r, a] == key[r, b] and idx[r, a] < idx[r, b])


@helper_njit
def _swap(key, idx, r, a, b):
    key[r, a], key[r, b] = key[r, b], key[r, a]
    idx[r, a], idx[r, b] = idx[r, b], idx[r, a]


@helper_njit
def heap_push(key, idx, r, size, k, i):
    """Add ``(k, i)`` to the heap of row ``r`` (``size`` entries); returns the new size."""
    h = size
    key[r, h] = k
    idx[r, h] = i
    while h > 0:
        p = (h - 1) // 2
        if not _before(key, idx, r, h, p):
            break
        _swap(key, idx, r, h, p)
        h = p
    return size + 1


@helper_njit
def heap_pop(key, idx, r, size):
    """Remove the smallest entry of row ``r``'s heap (read it at ``[r, 0]`` first); returns the new size."""
    size -= 1
    key[r, 0] = key[r, size]
    idx[r, 0] = idx[r, size]
    h = 0
    while True:
        l = 2 * h + 1
        if l >= size:
            break
        m = l
        if l + 1 < size and _before(key, idx, r, l + 1, l):
            m = l + 1
        if not _before(key, idx, r, m, h):
            break
        _swap(key, idx, r, m, h)
        h = m
    return size
