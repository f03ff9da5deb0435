"""Closed forms behind the decode jump: they must reproduce step-by-step sums of cm_decode_step_time."""

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from mooncake_lab.roofline import cm_decode_step_time, cost_model
from mooncake_lab.sim.coupled import _tail_mean
from mooncake_lab.sim.decode_math import (decode_lines, segment_pieces, steps_until_after, time_after,
                                          top_k_sum)

COSTS = {(m, p): cost_model(m, "a800x8", p).as_array()
         for m in ("llama2-70b", "llama2-7b", "deepseek-v3") for p in ("ideal", "calibrated", "modern")}


@pytest.mark.parametrize("key", list(COSTS))
def test_decode_lines_equal_the_cost_model(key):
    c = COSTS[key]
    for b in (1, 2, 7, 32, 128, 700):
        base, k0, a1, s1, a2, s2 = decode_lines(c, b)
        for ctx in (0, 1_000, 50_000, 400_000, 5_000_000):
            want = cm_decode_step_time(c, b, ctx)
            got = base + max(k0, a1 + s1 * ctx, a2 + s2 * ctx)
            assert got == pytest.approx(want, rel=1e-14)


def test_hand_worked_jump_in_the_memory_bound_regime():
    # ideal preset, LLaMA2-70B on 8×A800: a step streams the weights (0.0084250 s) plus the KV
    # (2.0088e-8 s per token). Batch 32 at 400,000 context tokens: 0.0084250 + 0.0080353 =
    # 0.0164603 s; each step adds 32 tokens → +32 × 2.0088e-8 = 6.428e-7 s per step.
    # 100 steps: 100 × 0.0164603 + 6.428e-7 × 100·99/2 = 1.64603 + 0.0031820 = 1.64921 s.
    c = COSTS[("llama2-70b", "ideal")]
    pa, pd, pm = np.zeros(3), np.zeros(3), np.zeros(3, dtype=np.int64)
    npc = segment_pieces(c, 32, 400_000, 100, pa, pd, pm)
    assert npc == 1 and pm[0] == 100
    assert pa[0] == pytest.approx(0.0164603, rel=1e-5)
    assert pd[0] == pytest.approx(6.428e-7, rel=1e-3)
    assert time_after(0.0, pa, pd, pm, npc, 100) == pytest.approx(1.64921, rel=1e-5)


def _steps(c, b, ctx0, n):
    return np.array([cm_decode_step_time(c, b, ctx0 + b * j) for j in range(n)])


@settings(max_examples=150, deadline=None)
@given(key=st.sampled_from(list(COSTS)), b=st.integers(1, 400), ctx0=st.integers(0, 3_000_000),
       n=st.integers(1, 3000))
def test_pieces_reproduce_every_step(key, b, ctx0, n):
    c = COSTS[key]
    pa, pd, pm = np.zeros(3), np.zeros(3), np.zeros(3, dtype=np.int64)
    npc = segment_pieces(c, b, ctx0, n, pa, pd, pm)
    assert 1 <= npc <= 3 and pm[:npc].sum() == n and (pd[:npc] >= 0).all()
    vals = np.concatenate([pa[p] + pd[p] * np.arange(pm[p]) for p in range(npc)])
    steps = _steps(c, b, ctx0, n)
    np.testing.assert_allclose(vals, steps, rtol=1e-12)
    cum = np.cumsum(steps)
    for k in {1, n // 3 + 1, n}:
        assert time_after(5.0, pa, pd, pm, npc, k) == pytest.approx(5.0 + cum[k - 1], rel=1e-12)


@settings(max_examples=150, deadline=None)
@given(key=st.sampled_from(list(COSTS)), b=st.integers(1, 300), ctx0=st.integers(0, 2_000_000),
       n=st.integers(1, 2000), frac=st.floats(0.0, 1.2))
def test_first_boundary_after(key, b, ctx0, n, frac):
    c = COSTS[key]
    pa, pd, pm = np.zeros(3), np.zeros(3), np.zeros(3, dtype=np.int64)
    npc = segment_pieces(c, b, ctx0, n, pa, pd, pm)
    total = time_after(2.0, pa, pd, pm, npc, n)
    r = 2.0 + frac * (total - 2.0)
    k = steps_until_after(2.0, r, pa, pd, pm, npc)
    bounds = np.array([time_after(2.0, pa, pd, pm, npc, j) for j in range(1, n + 1)])
    after = np.flatnonzero(bounds > r)
    assert k == (after[0] + 1 if len(after) else n)


def _top_k_reference(runs, k):
    """Plain Python: every value of every run, sorted descending, the first ``k`` added in that order."""
    values = sorted((a + d * i for a, d, m in runs for i in range(m)), reverse=True)
    total = 0.0
    for v in values[:k]:
        total += v
    return total


# values on a coarse grid tie within runs (d = 0) and across them (a grid step of d); others are arbitrary
_A = st.one_of(st.sampled_from([0.25, 0.5, 1.0, 1.5]), st.floats(0.001, 5.0))
_D = st.one_of(st.just(0.0), st.sampled_from([0.25, 0.5]), st.floats(0.0, 0.1))
_RUNS = st.lists(st.tuples(_A, _D, st.integers(0, 40)), max_size=14)
_K = st.one_of(st.just(1), st.integers(1, 40), st.integers(1, 600))  # up to more than all the values


@settings(max_examples=400, deadline=None)
@given(runs=_RUNS, k=_K)
@example(runs=[(1.0, 0.0, 5), (1.0, 0.0, 3), (0.5, 0.25, 4)], k=6)  # ties within and across runs
@example(runs=[(1.0, 0.5, 0), (2.0, 0.0, 0), (0.5, 0.0, 2)], k=1)   # runs of length 0
@example(runs=[(0.5, 0.25, 3), (1.0, 0.0, 2)], k=50)                # k above the number of values
@example(runs=[], k=3)
def test_top_k_sum_is_the_sorted_sum_exactly(runs, k):
    # the simulator's results are bit-identical across implementations only if the same values are
    # added in the same (descending) order: == on the float, not approx
    ra = np.array([r[0] for r in runs], dtype=float)
    rd = np.array([r[1] for r in runs], dtype=float)
    rm = np.array([r[2] for r in runs], dtype=np.int64)
    n = len(runs)
    got = top_k_sum(ra, rd, rm, n, k, np.empty(n), np.empty(n, dtype=np.int64))
    assert got == _top_k_reference(runs, k)


@settings(max_examples=300, deadline=None)
@given(first=_A, events=st.lists(_A, max_size=120), runs=_RUNS, kk=st.integers(1, 40))
@example(first=1.0, events=[1.0] * 30, runs=[(1.0, 0.0, 10)], kk=20)
def test_coupled_tail_mean_is_the_sorted_sum_exactly(first, events, runs, kk):
    # the coupled engine's user of top_k_sum: the first interval and the events' go through its sorted
    # heap, the runs are screened by its smallest; row 1 of two logs, at an offset, as in the kernel
    ev_v = np.full((2, len(events) + 7), np.nan)
    ev_v[1, 3:3 + len(events)] = events
    la, ld = np.full((2, len(runs) + 5), np.nan), np.full((2, len(runs) + 5), np.nan)
    lm = np.zeros((2, len(runs) + 5), dtype=np.int64)
    for r, (a, d, m) in enumerate(runs):
        la[1, 2 + r], ld[1, 2 + r], lm[1, 2 + r] = a, d, m
    n = kk + len(runs) + 1
    got = _tail_mean(1, kk, first, ev_v, 3, 3 + len(events), np.empty(kk), 2, 2 + len(runs), la, ld, lm,
                     np.empty(n), np.empty(n), np.empty(n, dtype=np.int64), np.empty(n), np.empty(n, dtype=np.int64))
    assert got == _top_k_reference([(first, 0.0, 1)] + [(v, 0.0, 1) for v in events] + list(runs), kk) / kk


def test_top_k_hand_example():
    # runs [1, 2, 3] and [2.5]: the 2 largest are 3 + 2.5 = 5.5
    got = top_k_sum(np.array([1.0, 2.5]), np.array([1.0, 0.0]), np.array([3, 1]), 2, 2,
                    np.empty(2), np.empty(2, dtype=np.int64))
    assert got == 5.5
