"""Closed forms for jumping a decode batch from event to event (numba helpers of the kernel).

Between two events (an admission or a completion) a decode instance runs a constant batch of
``b`` sequences whose total context grows by ``b`` tokens per step. For a fixed ``b``,
:func:`~mooncake_lab.roofline.cm_decode_step_time` is

    step(ctx) = base + max(k0, a1 + s1·ctx, a2 + s2·ctx)          (slopes s1, s2 ≥ 0)

(:func:`decode_lines` returns these numbers; ``tests/test_sim_decode_math.py`` checks them against
``cm_decode_step_time`` on a grid, for every preset and model, so the formula still lives in one
place: roofline.py). With ``ctx = C + b·j`` at step ``j`` the step times are the upper envelope of
three arithmetic sequences in ``j``: at most three *pieces*, each an arithmetic run ``a, a+d, a+2d,
…`` (``d ≥ 0``), non-decreasing overall. Sums of a piece are ``m·a + d·m(m−1)/2``, so the time
after ``n`` steps and the first step boundary after a given time are O(1) per piece.
"""
from __future__ import annotations

import math

from ..jit import helper_njit
from ..roofline import _experts_touched

__all__ = ["decode_lines", "segment_pieces", "time_after", "steps_until_after", "cut_segment", "top_k_sum"]


@helper_njit
def decode_lines(c, batch):
    """``(base, k0, a1, s1, a2, s2)`` with step(ctx) = base + max(k0, a1 + s1·ctx, a2 + s2·ctx).

    Mirrors :func:`~mooncake_lab.roofline.cm_decode_step_time` term by term (floor, HBM traffic,
    compute) for a fixed ``batch``.
    """
    b = float(batch)
    return (c[0], c[10] + c[11] * b, c[4] + c[5] * _experts_touched(c, b), c[8],
            b * (c[1] + c[2]), c[15])


@helper_njit
def segment_pieces(c, batch, ctx0, n_steps, pa, pd, pm):
    """Split ``n_steps`` decode steps (batch ``batch``, context ``ctx0`` at step 0) into pieces.

    Fills ``pa`` (first step time, s), ``pd`` (increment per step, s) and ``pm`` (steps) and returns
    the number of pieces (≤ 3; arrays need room for 3).
    """
    base, k0, a1, s1, a2, s2 = decode_lines(c, batch)
    b = float(batch)
    x0 = float(ctx0)
    al = (k0, a1 + s1 * x0, a2 + s2 * x0)  # step j: base + max_k(al[k] + be[k]·j)
    be = (0.0, s1 * b, s2 * b)
    j = 0
    npc = 0
    cur = -1
    while j < n_steps:
        # the line on top at step j; the envelope is convex, so only lines at least as steep as
        # the current one are candidates; ties go to the steeper line (it stays on top longer)
        nc = -1
        best = -math.inf
        for k in range(3):
            if cur >= 0 and be[k] < be[cur]:
                continue
            v = al[k] + be[k] * j
            if nc < 0 or v > best or (v == best and be[k] > be[nc]):
                best = v
                nc = k
        # first step where a steeper line overtakes it
        nxt = n_steps
        for k in range(3):
            if be[k] > be[nc]:
                x = (al[nc] - al[k]) / (be[k] - be[nc])  # line k is above for j > x
                if x < nxt:
                    jj = int(math.floor(x)) + 1 if x >= 0.0 else 0
                    if jj <= j:
                        jj = j + 1
                    if jj < nxt:
                        nxt = jj
        if npc > 0 and nc == cur:  # the same line again (rounding at a crossing): extend
            pm[npc - 1] += nxt - j
        else:
            pa[npc] = base + best
            pd[npc] = be[nc]
            pm[npc] = nxt - j
            npc += 1
        cur = nc
        j = nxt
    return npc


@helper_njit
def time_after(t0, pa, pd, pm, npc, n):
    """Time (s) of the boundary ``n`` steps after ``t0`` (``n`` ≤ total steps of the pieces)."""
    t = t0
    left = n
    for p in range(npc):
        if left <= 0:
            break
        m = pm[p] if pm[p] < left else left
        t = t + (m * pa[p] + pd[p] * (m * (m - 1) / 2.0))
        left -= m
    return t


@helper_njit
def steps_until_after(t0, r, pa, pd, pm, npc):
    """Smallest ``n ≥ 1`` whose boundary ``time_after(t0, …, n)`` is strictly after ``r``.

    Returns the total number of steps of the pieces if no boundary lies after ``r``.
    """
    done = 0
    tp = t0  # time at the start of piece p, accumulated exactly as time_after does
    for p in range(npc):
        a, d, m = pa[p], pd[p], pm[p]
        t_end = tp + (m * a + d * (m * (m - 1) / 2.0))
        if t_end > r:
            rem = r - tp
            # root of (d/2)·i² + (a − d/2)·i = rem, in the form without cancellation for small d
            bq = a - 0.5 * d
            den = bq + math.sqrt(bq * bq + 2.0 * d * max(rem, 0.0))
            x = 2.0 * max(rem, 0.0) / den if den > 0.0 else 0.0
            i = int(math.floor(x)) + 1 if x < m else m
            if i < 1:
                i = 1
            while i > 1 and time_after(t0, pa, pd, pm, npc, done + i - 1) > r:
                i -= 1
            while i < m and time_after(t0, pa, pd, pm, npc, done + i) <= r:
                i += 1
            return done + i
        tp = t_end
        done += m
    return done


@helper_njit
def cut_segment(d, t, at, next_t, next_n, pa, pd, pm, pn):
    """End instance ``d``'s segment (its last boundary at ``at[d]``, pieces ``pa[d]`` … ``pn[d]``) at
    its first step boundary strictly after ``t`` if that is before its planned next event
    (``next_t[d]``, ``next_n[d]`` steps on): a queued request that fits is admitted there."""
    ns = steps_until_after(at[d], t, pa[d], pd[d], pm[d], pn[d])
    if ns < next_n[d]:
        next_n[d] = ns
        next_t[d] = time_after(at[d], pa[d], pd[d], pm[d], pn[d], ns)


@helper_njit
def top_k_sum(ra, rd, rm, nruns, k, hkey, hidx):
    """Sum of the ``k`` largest values in non-decreasing arithmetic runs ``(ra, rd, rm)``, largest first.

    Run ``q`` holds ``ra[q] + rd[q]·i`` for ``i < rm[q]`` (``rm`` is consumed; values in s). A float sum
    depends on the order of its terms, so the values are added in non-increasing order whatever the
    method (equal values are interchangeable: the same bits).

    ``hkey``/``hidx`` (scratch of length ≥ ``nruns``) list the runs that can reach the top ``k`` by their
    largest remaining value, descending. A run is dropped when the runs ahead of it hold ``k`` values at
    least as large as all of its own (:func:`_held`), so the list is about as long as the answer needs
    (conversation trace, 8P+8D: about 4 of 12 runs). The head run's values are added while they stay ≥
    the next run's largest (a ``d = 0`` run all at once), then it moves back to its place.
    """
    if k <= 0:
        return 0.0
    n = 0     # runs listed
    held = 0  # values ≥ hkey[n − 1] the listed runs hold (a lower bound)
    for q in range(nruns):
        if rm[q] <= 0:
            continue
        v = _run_top(ra, rd, q, rm[q])
        if held >= k and v <= hkey[n - 1]:
            continue  # k listed values are ≥ all of this run's
        j = n
        while j > 0 and hkey[j - 1] < v:
            hkey[j] = hkey[j - 1]
            hidx[j] = hidx[j - 1]
            j -= 1
        hkey[j] = v
        hidx[j] = q
        n += 1
        held += _held(rd, rm, q)
        while held > k:  # the last run is not needed if the others hold k values ≥ its largest
            last = _held(rd, rm, hidx[n - 1])
            if held - last < k:
                break
            held -= last
            n -= 1
    total = 0.0
    taken = 0
    i = 0  # the head of the list
    while i < n:
        q = hidx[i]
        v = hkey[i]
        m = rm[q]
        nxt = hkey[i + 1] if i + 1 < n else -math.inf
        while True:
            total += v
            taken += 1
            m -= 1
            if taken == k:
                return total
            if m == 0:
                break
            v = _run_top(ra, rd, q, m)
            if v < nxt:
                break
        rm[q] = m
        if m == 0:
            i += 1
        else:  # back to its place: after the runs whose largest is above v
            j = i
            while j + 1 < n and hkey[j + 1] > v:
                hkey[j] = hkey[j + 1]
                hidx[j] = hidx[j + 1]
                j += 1
            hkey[j] = v
            hidx[j] = q
    return total


@helper_njit
def _run_top(ra, rd, q, m):
    """The largest of the first ``m`` values of run ``q`` (s)."""
    return ra[q] + rd[q] * (m - 1)


@helper_njit
def _held(rd, rm, q):
    """Values of run ``q`` equal to its largest: all of them if ``d = 0``, else (at least) one."""
    return rm[q] if rd[q] == 0.0 else 1
