"""The cluster simulator as numba kernels over flat arrays (semantics: :mod:`mooncake_lab.sim.reference`).

One pass over the requests in arrival order:

* **prefill side** (no event queue needed): each prefill instance keeps ``gfree[p, s]``, the time
  stage s of its FIFO pipeline is free (one stage for a single node: its "busy until"), and
  ``glink[p, s]``, when stage s's NIC is free (CPP, :mod:`.cpp_group`); a request dispatched at
  ``a`` to ``p`` starts at ``max(a, gfree[p, 0])``, fetches a remote prefix if the policy chose
  to, and its chunks go through the stages (:func:`.cpp_group.group_prefill`), advancing them. Its
  KV then reaches decode at ``ready`` (a heap of ready events, since prefill ends are not in
  arrival order).
* **network links** (``network_contention``, :mod:`.links`): per prefill node a send and a receive
  link, each a calendar of reserved intervals (``lb``, ``le``; live slots ``lc``), that fetches and
  KV streams reserve when their request is committed; ``bavail[p, b]``: when block b is complete on p.
* **decode side** (discrete events): before each arrival the decode pool is advanced to that time
  (hook for arrival-time admission), processing ready events and decode-instance events in time
  order. A decode instance jumps from event to event (:mod:`.decode_math`): its next event is the
  next completion, or the first step boundary after a ready request that fits was queued.

Every step of a decode segment is logged as an arithmetic run (per instance, linked backwards), so
on completion a request's token intervals are exactly its runs since admission: the mean and the
mean of the longest 10% follow without storing one interval per token.

Speed
-----
Numba reference-counts arrays: a function that takes an array increments its count on entry and
decrements it on exit, and so does every view (``pa[d]``, a slice), each an atomic operation that
LLVM cannot remove across a call. In this loop that was ~45% of the run time. The helpers below,
in :mod:`.decode_math` and :mod:`mooncake_lab.prefix_cache` therefore compile with
:data:`mooncake_lab.jit.helper_njit` (no reference counting, hence no allocation): they only index arrays that :func:`_kernel`'s caller
or :func:`_kernel` itself keeps alive; only :func:`_kernel` allocates. Views are taken inside such
helpers, not in the kernel's loop. ``benchmarks/bench_sim.py`` measures it.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..cpp import cm_stage_coefficients
from ..jit import helper_njit
from ..prefix_cache import _match_prefix, _touch_blocks
from ..roofline import cm_kv_transfer_time
from .admission import decode_load, prefill_load
from .conductor_view import Request
from .cpp_group import group_fetch_time, group_prefill
from .decode_math import segment_pieces, steps_until_after, time_after, top_k_sum

# Outcome codes are literals inside the kernels (numba freezes globals); they must equal
# config.COMPLETED (1), REJECTED_AT_ARRIVAL (2), REJECTED_AFTER_PREFILL (3) and
# REJECTED_TOO_LARGE (4) — tests/test_sim_config.py checks it. Admission codes likewise:
# none 0, baseline 1, early 2, predicted 3 (config.ADMISSIONS).


@helper_njit
def _reusable_tokens(n_blocks, input_len, block_tokens):
    """Prompt tokens a prefix of ``n_blocks`` cached blocks saves: min(bt·n, L), but at least one
    token is always computed (the first output token needs a forward pass): ≤ L − 1."""
    t = min(block_tokens * n_blocks, input_len)
    return min(t, input_len - 1)


@helper_njit
def _exposed_transfer(c, n_tokens, prefill_s, n_layers, layerwise):
    """Seconds the prefill→decode KV transfer adds after the prefill ends.

    Serialized: the whole transfer ``x``. Layer-wise: a 2-stage pipeline over ``l`` layers
    (compute ``p/l`` then send ``x/l`` per layer) ends ``max(x/l, x − p·(1 − 1/l))`` after the
    prefill — only the last layer's share when sending is faster than computing.
    """
    x = cm_kv_transfer_time(c, n_tokens)
    if not layerwise:
        return x
    nl = float(n_layers)
    return max(x / nl, x - prefill_s * (1.0 - 1.0 / nl))


@helper_njit
def _fit(lb, le, lc, l, t, d):
    """Earliest ``b ≥ t`` (s) with ``[b, b + d]`` free on link ``l``: its reservations
    ``[lb[l, k], le[l, k]]``, ``lc[l, 0]`` ≤ k < ``lc[l, 1]``, are disjoint and sorted (:mod:`.links`)."""
    lo = lc[l, 0]  # the first reservation ending after t (ends are sorted too): binary search
    hi = lc[l, 1]
    while lo < hi:
        m = (lo + hi) // 2
        if le[l, m] <= t:
            lo = m + 1
        else:
            hi = m
    for k in range(lo, lc[l, 1]):
        if lb[l, k] >= t + d:
            break
        t = le[l, k]
    return t


@helper_njit
def _fit_pair(lb, le, lc, l1, l2, t, d):
    """Earliest ``b ≥ t`` with ``[b, b + d]`` free on both links ``l1`` and ``l2``."""
    while True:
        b = _fit(lb, le, lc, l2, _fit(lb, le, lc, l1, t, d), d)
        if b == t:
            return b
        t = b


@helper_njit
def _fit_group(lb, le, lc, l0, n, t, d):
    """Earliest ``b ≥ t`` with ``[b, b + d]`` free on every link ``l0 … l0 + n − 1``."""
    while True:
        b = t
        for l in range(l0, l0 + n):
            b = _fit(lb, le, lc, l, b, d)
        if b == t:
            return b
        t = b


@helper_njit
def _book(lb, le, lc, l, b, e, now):
    """Reserve ``[b, e]`` on link ``l`` (a gap :func:`_fit` found), first dropping reservations
    that ended by ``now`` (no later transfer can start before the current arrival: the row's live
    part ``lc[l, 0] … lc[l, 1]`` moves right, and back to 0 when it reaches the row's end). Needs
    a free slot: ``lc[l, 1] − lc[l, 0] < lb.shape[1]``."""
    h = lc[l, 0]
    m = lc[l, 1]
    while h < m and le[l, h] <= now:
        h += 1
    if m == lb.shape[1]:
        for k in range(h, m):
            lb[l, k - h] = lb[l, k]
            le[l, k - h] = le[l, k]
        m -= h
        h = 0
    j = m
    while j > h and lb[l, j - 1] > b:
        lb[l, j] = lb[l, j - 1]
        le[l, j] = le[l, j - 1]
        j -= 1
    lb[l, j] = b
    le[l, j] = e
    lc[l, 0] = h
    lc[l, 1] = m + 1


@helper_njit
def _backlog(lb, le, lc, l0, n, a):
    """Backlog of an instance's links ``l0 … l0 + n − 1`` at ``a`` (s): the most seconds of
    transfers any of them has reserved after ``a``."""
    w = 0.0
    for l in range(l0, l0 + n):
        s = 0.0
        for k in range(lc[l, 0], lc[l, 1]):
            if le[l, k] > a:
                s += le[l, k] - max(lb[l, k], a)
        w = max(w, s)
    return w


@helper_njit
def _fetch_begin(lb, le, lc, src, p, t, d, X):
    """When a ``d``-second fetch from instance ``src`` to ``p`` requested at ``t`` has all its X
    node pairs started (pair s: the send link of ``src``'s node s, the receive link of ``p``'s
    node s; links 0 … P·X − 1 send, P·X … 2·P·X − 1 receive, node (p, s) = p·X + s)."""
    nl = lc.shape[0] // 2
    b = t
    for s in range(X):
        b = max(b, _fit_pair(lb, le, lc, src * X + s, nl + p * X + s, t, d))
    return b


@helper_njit
def _best_source(lb, le, lc, local, best, srcav, p, t, d, X):
    """``(source, begin)`` of a ``d``-s fetch to ``p`` requested at ``t``: of the instances holding
    the pool's best prefix (``local[q] == best``), the one it can begin from first (ties: lowest);
    not before the prefix is complete there (``srcav[q]``)."""
    q_best = -1
    b_best = math.inf
    for q in range(len(local)):
        if local[q] == best and q != p:
            b = _fetch_begin(lb, le, lc, q, p, max(t, srcav[q]), d, X)
            if b < b_best:
                b_best = b
                q_best = q
    return q_best, b_best


@njit(cache=True)
def _more_slots(lb, le):
    """The link calendars with twice the slots (a link filled its row)."""
    m = lb.shape[1]
    nb = np.empty((lb.shape[0], 2 * m))
    ne = np.empty((lb.shape[0], 2 * m))
    nb[:, :m] = lb
    ne[:, :m] = le
    return nb, ne


@helper_njit
def _prefill_on(c, sc, gfree, glink, p, nfree, nlink, ready, n_new, n_cached, group_size, chunk, act_bytes, bw,
                overlap):
    """:func:`.cpp_group.group_prefill` on instance ``p``: ``(finish, span)`` in s; ``p``'s state after
    the request goes to ``nfree`` / ``nlink``. (A call here, not inlined: see "Speed".)"""
    return group_prefill(c, sc, gfree, glink, p, nfree, nlink, ready, n_new, n_cached, group_size, chunk, act_bytes,
                         bw, overlap)


# ---------------------------------------------------------------------------- ready-event heap
@helper_njit
def _heap_push(ht, hi, size, t, i):
    k = size
    ht[k] = t
    hi[k] = i
    while k > 0:
        p = (k - 1) // 2
        if ht[p] < ht[k] or (ht[p] == ht[k] and hi[p] < hi[k]):
            break
        ht[p], ht[k] = ht[k], ht[p]
        hi[p], hi[k] = hi[k], hi[p]
        k = p
    return size + 1


@helper_njit
def _heap_pop(ht, hi, size):
    """Remove the (time, index)-smallest entry (read it at [0] before calling); returns new size."""
    size -= 1
    ht[0] = ht[size]
    hi[0] = hi[size]
    k = 0
    while True:
        l = 2 * k + 1
        if l >= size:
            break
        m = l
        r = l + 1
        if r < size and (ht[r] < ht[l] or (ht[r] == ht[l] and hi[r] < hi[l])):
            m = r
        if ht[k] < ht[m] or (ht[k] == ht[m] and hi[k] < hi[m]):
            break
        ht[m], ht[k] = ht[k], ht[m]
        hi[m], hi[k] = hi[k], hi[m]
        k = m
    return size


# ---------------------------------------------------------------------------- decode instances
@helper_njit
def _start_segment(d, c, dT, dnext_t, dnext_n, dctx, dk, run_list, run_cnt, done_step, pa, pd, pm, pn):
    """After an event at ``dT[d]``: plan the segment up to the next completion (or go idle)."""
    b = run_cnt[d]
    if b == 0:
        dnext_t[d] = math.inf
        dnext_n[d] = 0
        pn[d] = 0
        return
    nmin = done_step[run_list[d, 0]]
    for q in range(1, b):
        s = done_step[run_list[d, q]]
        if s < nmin:
            nmin = s
    n_c = nmin - dk[d]
    pn[d] = segment_pieces(c, b, dctx[d], n_c, pa[d], pd[d], pm[d])
    dnext_n[d] = n_c
    dnext_t[d] = time_after(dT[d], pa[d], pd[d], pm[d], pn[d], n_c)


@helper_njit
def _cut_segment(d, t, dT, dnext_t, dnext_n, pa, pd, pm, pn):
    """End instance ``d``'s segment at its first step boundary strictly after ``t`` if that is
    before its planned next event (a queued request that fits is admitted there)."""
    ns = steps_until_after(dT[d], t, pa[d], pd[d], pm[d], pn[d])
    if ns < dnext_n[d]:
        dnext_n[d] = ns
        dnext_t[d] = time_after(dT[d], pa[d], pd[d], pm[d], pn[d], ns)


@helper_njit
def _admit(d, t, cap, input_len, output_len, dT, dctx, dk, reserved, waitneed, wcnt, max_kv, qhead, qtail,
           qnext, run_list, run_cnt, done_step, run_mark, last_run, decode_admit):
    """Admit queued requests of instance ``d`` at boundary ``t`` in FIFO order while KV fits."""
    while qhead[d] >= 0:
        i = qhead[d]
        need = input_len[i] + output_len[i]
        if reserved[d] + need > cap:
            break
        qhead[d] = qnext[i]
        if qhead[d] < 0:
            qtail[d] = -1
        waitneed[d] -= need
        wcnt[d] -= 1
        reserved[d] += need
        if reserved[d] > max_kv[d]:
            max_kv[d] = reserved[d]
        decode_admit[i] = t
        done_step[i] = dk[d] + output_len[i] - 1
        run_mark[i] = last_run[d]
        dctx[d] += input_len[i] + 1  # context of its first decode step: prompt + first token
        run_list[d, run_cnt[d]] = i
        run_cnt[d] += 1


@helper_njit
def _finish_tbt(i, d, last_run, run_mark, log_a, log_d, log_m, log_prev, decode_admit, prefill_end,
                n_intervals, buf_a, buf_d, buf_m, hkey, hidx):
    """Mean of the longest 10% of request ``i``'s token intervals, from its logged runs.

    Interval 1 (prefill end → first decode token) = admission wait + exposed transfer + first step;
    then one interval per step. Runs are collected newest first; the oldest run starts at admission.
    """
    nr = 0
    e = last_run[d]
    while e != run_mark[i]:
        buf_a[nr] = log_a[e]
        buf_d[nr] = log_d[e]
        buf_m[nr] = log_m[e]
        nr += 1
        e = log_prev[e]
    o = nr - 1  # the oldest run: its first step is part of interval 1
    first = decode_admit[i] + buf_a[o] - prefill_end[i]
    buf_a[o] = buf_a[o] + buf_d[o]
    buf_m[o] -= 1
    buf_a[nr] = first
    buf_d[nr] = 0.0
    buf_m[nr] = 1
    nr += 1
    k = (n_intervals + 9) // 10  # ceil(10%), at least one interval
    return top_k_sum(buf_a, buf_d, buf_m, nr, k, hkey, hidx) / k


# ---------------------------------------------------------------------------- student policies
@njit(cache=True)
def _fill_view(view, i, a, Lin, best, local, c, sc, block_tokens, threshold, noise_sd, z_noise,
               gfree, glink, nfree, nlink, group_size, cpp_chunk, act_bytes, cpp_bw, cpp_overlap,
               links, lb, le, lc, srcav, src):
    """The Conductor's view of request ``i`` arriving at ``a`` (s), per instance p: wait, local
    prefix and prefill, Algorithm 1's fetch decision, fetch (with ``links`` not None: + the wait
    for the links) and prefill after it, and the TTFT estimate with the same arithmetic (and noise) as
    ``kvcentric``'s; the backlog of p's send and receive links."""
    for p in range(len(local)):
        view.send_backlog_s[p] = 0.0
        view.recv_backlog_s[p] = 0.0
        if links is not None:
            view.send_backlog_s[p] = _backlog(lb, le, lc, p * group_size, group_size, a)
            view.recv_backlog_s[p] = _backlog(lb, le, lc, lc.shape[0] // 2 + p * group_size, group_size, a)
        w = max(0.0, gfree[p, 0] - a)
        r0 = max(a, gfree[p, 0])
        cl = _reusable_tokens(local[p], Lin, block_tokens)
        pre = group_prefill(c, sc, gfree, glink, p, nfree, nlink, r0, Lin - cl, cl, group_size, cpp_chunk,
                            act_bytes, cpp_bw, cpp_overlap)[1]
        fetch = best > local[p] and (local[p] == 0 or best >= threshold * local[p])
        f_e = 0.0
        f_pre = pre
        if fetch:
            cb = _reusable_tokens(best, Lin, block_tokens)
            f_e = group_fetch_time(c, cb - cl, group_size)
            if links is not None:
                f_e += _best_source(lb, le, lc, local, best, srcav, p, r0, f_e, group_size)[1] - r0
            f_pre = group_prefill(c, sc, gfree, glink, p, nfree, nlink, r0 + f_e, Lin - cb, cb, group_size,
                                  cpp_chunk, act_bytes, cpp_bw, cpp_overlap)[1]
            t = w + (f_e + f_pre)
        else:
            t = w + pre
        if noise_sd > 0.0:
            k = max(0.0, 1.0 + noise_sd * z_noise[i, p])
            w *= k
            pre *= k
            f_e *= k
            f_pre *= k
            t *= k
        view.wait_s[p] = w
        view.prefix_tokens[p] = cl
        view.prefill_s[p] = pre
        view.fetch[p] = fetch
        view.fetch_s[p] = f_e
        view.fetch_prefill_s[p] = f_pre
        view.ttft_s[p] = t


@njit(cache=True)
def _student_choice(policy_fn, view, i, a, Lin, out, u, best, src, block_tokens, diag):
    """Call the student's ``policy_fn(req, view)`` (view already filled) for request ``i``.

    ``diag[4]`` = the request being decided (read when the policy raises); a returned value
    outside 0 … P − 1 sets ``diag[5]`` = 1, ``diag[6]`` = the value and returns −1 (the kernel stops).
    """
    req = Request(i, a, Lin, out, _reusable_tokens(best, Lin, block_tokens), src if best > 0 else -1, u)
    diag[4] = i
    pi = policy_fn(req, view)
    if pi < 0 or pi >= len(view.wait_s):
        diag[5] = 1
        diag[6] = pi
        return -1
    return pi


@njit(cache=True, nogil=True)  # nogil: independent runs can go in parallel threads
def _kernel(arrival, input_len, output_len, offsets, block_ids, block_tokens,
            c, n_prefill, n_decode, policy, threshold, noise_sd, u_random, z_noise,
            layerwise, n_layers, decode_cap, admission,
            group_size, cpp_chunk, act_bytes, cpp_bw, cpp_overlap,
            ttft_slo, tbt_slo, adm_threshold, t_decode, horizon,
            last_use, q_block, q_stamp, meta,
            prefill_inst, decode_inst, outcome, fetch_src,
            cached_tok, fetched_tok, computed_tok,
            queue_wait, fetch_time, prefill_start, prefill_time, prefill_end,
            ready, decode_admit, finish, tbt_mean, tbt_tail,
            p_load, d_load, max_kv, diag, fetch_wait, stream_wait, links, policy_fn=None, view=None):
    """Simulate the whole trace; fills the per-request output arrays (pre-set to NaN / −1 / 0).

    ``policy == 4``: ``policy_fn(req, view) -> instance`` chooses the prefill instance (a student
    policy, :mod:`.student_policy`, called as a numba first-class function; ``view``: the
    :class:`~.conductor_view.View` arrays it reads, refilled here at each arrival). Without it
    (the built-in policies) numba prunes that branch, so it costs them nothing.

    ``p_load`` / ``d_load``: the prefill and decode loads the Conductor computed at each arrival
    (:mod:`.admission`; decode: the current pool load, or the predicted one under ``predicted``).

    ``n_prefill`` counts prefill *instances* (CPP groups of ``group_size`` nodes when > 1, pipelined
    FIFO; their prefill and fetch times come from :mod:`.cpp_group`, with ``cpp_chunk`` tokens per
    chunk, ``act_bytes`` B per token between stages at ``cpp_bw`` B/s, ``cpp_overlap``).

    ``links``: None (every transfer gets a whole NIC; numba then drops the link code, as for
    ``policy_fn``) or True (``ClusterConfig.network_contention``: fetches and KV streams reserve
    the prefill nodes' send / receive links, :mod:`.links`); ``fetch_wait`` / ``stream_wait``:
    the seconds each request's fetch / KV stream waited for them (0 without contention).

    ``diag``: [0] events processed, [1] times an event ran earlier than the previous one (must be
    0), [2] runs logged, [3] max decode batch; [4]–[6] for a student policy (:func:`_student_choice`).
    """
    n = len(arrival)
    P = n_prefill
    D = n_decode
    X = group_size
    sc = cm_stage_coefficients(c, X)            # one stage's cost coefficients (allocated here, once)
    gfree = np.zeros((P, X), dtype=np.float64)  # when stage s of instance p is free (s)
    glink = np.zeros((P, X), dtype=np.float64)  # when stage s's NIC is free (overlapped sends)
    nfree = np.empty(X, dtype=np.float64)       # a group's state after a candidate request
    nlink = np.empty(X, dtype=np.float64)
    # network links (contention): per link, its reserved intervals [lb, le], sorted (.links)
    if links is not None:
        lb = np.empty((2 * P * X, 4))               # (rows double when one is full: _more_slots)
        le = np.empty((2 * P * X, 4))
        lc = np.zeros((2 * P * X, 2), dtype=np.int64)  # per link: its first live and one-past-last slot
        bavail = np.zeros((P, last_use.shape[1]))   # when block b is complete on p
    else:
        lb = np.empty((0, 4))
        le = np.empty((0, 4))
        lc = np.zeros((0, 2), dtype=np.int64)
        bavail = np.zeros((0, 1))
    srcav = np.zeros(P)                         # when the arriving request's best prefix is complete on q
    local = np.zeros(P, dtype=np.int64)
    est = np.zeros(P, dtype=np.float64)
    # ready-event heap
    ht = np.empty(n + 1, dtype=np.float64)
    hi = np.empty(n + 1, dtype=np.int64)
    hsize = 0
    # decode instances
    dT = np.zeros(D, dtype=np.float64)          # time of the last processed boundary
    dnext_t = np.full(D, math.inf)              # time of the next event (inf: idle)
    dnext_n = np.zeros(D, dtype=np.int64)       # steps from dT to that event
    dctx = np.zeros(D, dtype=np.int64)          # total context of the step starting at dT
    dk = np.zeros(D, dtype=np.int64)            # steps run since the start
    reserved = np.zeros(D, dtype=np.float64)    # KV tokens reserved by running requests
    waitneed = np.zeros(D, dtype=np.float64)    # KV tokens needed by queued requests
    wcnt = np.zeros(D, dtype=np.int64)          # requests queued
    qhead = np.full(D, -1, dtype=np.int64)
    qtail = np.full(D, -1, dtype=np.int64)
    qnext = np.full(n, -1, dtype=np.int64)
    run_cnt = np.zeros(D, dtype=np.int64)
    min_need = 1
    if n > 0:
        min_need = np.min(input_len + output_len)
    maxb = min(n, int(decode_cap // max(min_need, 1)) + 1) + 1
    run_list = np.empty((D, maxb), dtype=np.int64)
    done_step = np.zeros(n, dtype=np.int64)
    run_mark = np.full(n, -1, dtype=np.int64)
    pa = np.zeros((D, 3))
    pd = np.zeros((D, 3))
    pm = np.zeros((D, 3), dtype=np.int64)
    pn = np.zeros(D, dtype=np.int64)
    # run log: every closed segment appends ≤ 3 runs; ≤ 2 events per request
    L = 6 * n + 8
    log_a = np.empty(L)
    log_d = np.empty(L)
    log_m = np.empty(L, dtype=np.int64)
    log_prev = np.empty(L, dtype=np.int64)
    last_run = np.full(D, -1, dtype=np.int64)
    nlog = 0
    buf_a = np.empty(L + 1)
    buf_d = np.empty(L + 1)
    buf_m = np.empty(L + 1, dtype=np.int64)
    hkey = np.empty(L + 1)
    hidx = np.empty(L + 1, dtype=np.int64)
    t_last = -math.inf

    for i in range(n + 1):
        # ---------------- advance the decode pool to this arrival (to the end after the last)
        t_now = arrival[i] if i < n else math.inf
        while True:
            # next thing to happen: a decode-instance event or a ready event (ties: instances first)
            dmin = -1
            tmin = math.inf
            for d in range(D):
                if dnext_t[d] < tmin:
                    tmin = dnext_t[d]
                    dmin = d
            tready = ht[0] if hsize > 0 else math.inf
            if dmin >= 0 and tmin <= tready and tmin <= t_now:
                # ---- decode event at instance dmin: close the segment, complete, admit
                d = dmin
                t = tmin
                nst = dnext_n[d]
                left = nst
                for p in range(pn[d]):
                    if left <= 0:
                        break
                    m = pm[d, p] if pm[d, p] < left else left
                    log_a[nlog] = pa[d, p]
                    log_d[nlog] = pd[d, p]
                    log_m[nlog] = m
                    log_prev[nlog] = last_run[d]
                    last_run[d] = nlog
                    nlog += 1
                    left -= m
                dT[d] = t
                dctx[d] += run_cnt[d] * nst
                dk[d] += nst
                q = 0
                while q < run_cnt[d]:
                    j = run_list[d, q]
                    if done_step[j] == dk[d]:
                        finish[j] = t
                        outcome[j] = 1
                        reserved[d] -= input_len[j] + output_len[j]
                        dctx[d] -= input_len[j] + output_len[j]
                        m_int = output_len[j] - 1
                        tbt_mean[j] = (t - prefill_end[j]) / m_int
                        tbt_tail[j] = _finish_tbt(j, d, last_run, run_mark, log_a, log_d, log_m, log_prev,
                                                  decode_admit, prefill_end, m_int, buf_a, buf_d, buf_m,
                                                  hkey, hidx)
                        run_cnt[d] -= 1
                        run_list[d, q] = run_list[d, run_cnt[d]]
                    else:
                        q += 1
                _admit(d, t, decode_cap, input_len, output_len, dT, dctx, dk, reserved, waitneed, wcnt, max_kv,
                       qhead, qtail, qnext, run_list, run_cnt, done_step, run_mark, last_run, decode_admit)
                if run_cnt[d] > diag[3]:
                    diag[3] = run_cnt[d]
                _start_segment(d, c, dT, dnext_t, dnext_n, dctx, dk, run_list, run_cnt, done_step,
                               pa, pd, pm, pn)
            elif hsize > 0 and tready <= t_now:
                # ---- ready event: KV of request j has reached the decode pool
                t = tready
                j = hi[0]
                hsize = _heap_pop(ht, hi, hsize)
                need = input_len[j] + output_len[j]
                # Algorithm 1 line 24: decode instance by load = KV reserved + KV queued (tokens)
                d = 0
                for e in range(1, D):
                    if reserved[e] + waitneed[e] < reserved[d] + waitneed[d]:
                        d = e
                decode_inst[j] = d
                if admission == 1 and decode_load(c, float(run_cnt[d] + wcnt[d] + 1),
                                                  reserved[d] + waitneed[d] + need, decode_cap,
                                                  tbt_slo) > adm_threshold:
                    outcome[j] = 3  # rejected after prefill: its prefill was wasted
                    diag[0] += 1
                    if t < t_last:
                        diag[1] += 1
                    t_last = t
                    continue
                was_empty = qhead[d] < 0
                if was_empty:
                    qhead[d] = j
                else:
                    qnext[qtail[d]] = j
                qtail[d] = j
                waitneed[d] += need
                wcnt[d] += 1
                if run_cnt[d] == 0:
                    # idle instance: a boundary right now
                    dT[d] = t
                    _admit(d, t, decode_cap, input_len, output_len, dT, dctx, dk, reserved, waitneed, wcnt, max_kv,
                           qhead, qtail, qnext, run_list, run_cnt, done_step, run_mark, last_run, decode_admit)
                    _start_segment(d, c, dT, dnext_t, dnext_n, dctx, dk, run_list, run_cnt, done_step,
                                   pa, pd, pm, pn)
                elif was_empty and reserved[d] + need <= decode_cap:
                    # it fits: admitted at the first step boundary strictly after t
                    _cut_segment(d, t, dT, dnext_t, dnext_n, pa, pd, pm, pn)
            else:
                break
            diag[0] += 1
            if t < t_last:
                diag[1] += 1
            t_last = t
        if i == n:
            break

        # ---------------- the arrival of request i: Conductor picks a prefill instance
        a = arrival[i]
        Lin = input_len[i]
        out = output_len[i]
        if Lin + out > decode_cap:  # can never fit a decode instance's KV memory
            outcome[i] = 4
            continue
        blocks = block_ids[offsets[i]:offsets[i + 1]]
        best = 0
        src = -1
        if policy >= 1:
            for p in range(P):
                if policy >= 2:
                    local[p] = _match_prefix(last_use, p, blocks)
                    if local[p] > best:
                        best = local[p]
                        src = p
                est[p] = max(0.0, gfree[p, 0] - a)  # wait until stage 0 is free, s
                if policy == 2:
                    cached = _reusable_tokens(local[p], Lin, block_tokens)
                    r0 = max(a, gfree[p, 0])
                    span = _prefill_on(c, sc, gfree, glink, p, nfree, nlink, r0, Lin - cached, cached, group_size,
                                      cpp_chunk, act_bytes, cpp_bw, cpp_overlap)[1]
                    est[p] += span
        if links is not None:
            for q in range(P if best > 0 else 0):
                srcav[q] = 0.0
                if local[q] == best:
                    for k in range(best):
                        srcav[q] = max(srcav[q], bavail[q, blocks[k]])
        if policy == 3:
            for p in range(P):
                cl = _reusable_tokens(local[p], Lin, block_tokens)
                if best > local[p] and (local[p] == 0 or best >= threshold * local[p]):
                    cb = _reusable_tokens(best, Lin, block_tokens)
                    f_e = group_fetch_time(c, cb - cl, group_size)
                    if links is not None:  # + the wait for the source's send and p's receive links
                        r0 = max(a, gfree[p, 0])
                        f_e += _best_source(lb, le, lc, local, best, srcav, p, r0, f_e, group_size)[1] - r0
                    r0 = max(a, gfree[p, 0]) + f_e
                    span = _prefill_on(c, sc, gfree, glink, p, nfree, nlink, r0, Lin - cb, cb, group_size,
                                      cpp_chunk, act_bytes, cpp_bw, cpp_overlap)[1]
                    est[p] += f_e + span
                else:
                    r0 = max(a, gfree[p, 0])
                    span = _prefill_on(c, sc, gfree, glink, p, nfree, nlink, r0, Lin - cl, cl, group_size,
                                      cpp_chunk, act_bytes, cpp_bw, cpp_overlap)[1]
                    est[p] += span
        if policy == 0:
            pi = min(int(u_random[i] * P), P - 1)
        elif policy == 4:  # a student's function: it may also veto / force the fetch (view.fetch)
            pi = -1
            if policy_fn is not None:
                _fill_view(view, i, a, Lin, best, local, c, sc, block_tokens, threshold, noise_sd, z_noise,
                           gfree, glink, nfree, nlink, group_size, cpp_chunk, act_bytes, cpp_bw, cpp_overlap,
                           links, lb, le, lc, srcav, src)
                pi = _student_choice(policy_fn, view, i, a, Lin, out, u_random[i], best, src, block_tokens, diag)
            if pi < 0:
                break  # a bad choice: the caller raises from diag[4:7]
        else:
            if noise_sd > 0.0:
                for p in range(P):
                    est[p] *= max(0.0, 1.0 + noise_sd * z_noise[i, p])
            pi = 0
            for p in range(1, P):
                if est[p] < est[pi]:
                    pi = p
        # ---------------- the prefill on pi, predicted (nothing is committed before admission)
        n_local = local[pi] if policy >= 2 else _match_prefix(last_use, pi, blocks)
        cl = _reusable_tokens(n_local, Lin, block_tokens)
        use_remote = policy == 3 and best > n_local and (n_local == 0 or best >= threshold * n_local)
        if policy == 4:
            if policy_fn is not None:  # the fetch the view proposed, as the policy left it
                use_remote = best > n_local and view.fetch[pi]
        cached = cl
        f_t = 0.0
        if use_remote:
            cached = _reusable_tokens(best, Lin, block_tokens)
            f_t = group_fetch_time(c, cached - cl, group_size)
        start = max(a, gfree[pi, 0])
        f_w = 0.0
        f_src = src
        if links is not None:
            if use_remote:  # from the holder the fetch can begin from first
                f_src, f_b = _best_source(lb, le, lc, local, best, srcav, pi, start, f_t, group_size)
                f_w = f_b - start
        r0 = start + f_w + f_t
        end, pt = _prefill_on(c, sc, gfree, glink, pi, nfree, nlink, r0, Lin - cached, cached, group_size,
                              cpp_chunk, act_bytes, cpp_bw, cpp_overlap)  # nfree / nlink: pi's state after it
        r_i = end + _exposed_transfer(c, Lin, pt, n_layers, layerwise)
        r_free = r_i
        x_s = 0.0
        b_s = 0.0
        if links is not None:
            if out > 1:  # the stream: x s on all pi's send links, ideally ending at r_free
                x_s = cm_kv_transfer_time(c, Lin)
                b_s = _fit_group(lb, le, lc, pi * X, X, r_free - x_s, x_s)
                if b_s > r_free - x_s:
                    r_i = max(r_free, b_s + x_s)
        # ---------------- admission at arrival (arXiv §7): loads as SLO satisfaction
        pl = prefill_load(end - a, ttft_slo)
        nb = 1.0
        kv = float(Lin + out)
        if admission == 3:
            # decode population predicted at T: decode start s (admission, or KV ready if not yet
            # admitted) with s ≤ T < s + t_d, over every accepted unfinished request, + this one
            T = a + horizon * (r_i - a)
            for d in range(D):
                for q in range(run_cnt[d]):
                    j = run_list[d, q]
                    if decode_admit[j] <= T and decode_admit[j] + t_decode > T:
                        nb += 1.0
                        kv += input_len[j] + output_len[j]
                j = qhead[d]
                while j >= 0:
                    if ready[j] <= T and ready[j] + t_decode > T:
                        nb += 1.0
                        kv += input_len[j] + output_len[j]
                    j = qnext[j]
            for q in range(hsize):
                j = hi[q]
                if ht[q] <= T and ht[q] + t_decode > T:
                    nb += 1.0
                    kv += input_len[j] + output_len[j]
        else:  # the pool's current load with this request added
            for d in range(D):
                nb += run_cnt[d] + wcnt[d]
                kv += reserved[d] + waitneed[d]
        dl = decode_load(c, nb / D, kv / D, decode_cap, tbt_slo)
        p_load[i] = pl
        d_load[i] = dl
        if (admission == 1 and pl > adm_threshold) or (admission >= 2 and max(pl, dl) > adm_threshold):
            outcome[i] = 2  # rejected at arrival: nothing queued, no cache touched
            continue
        # ---------------- commit: run the prefill on pi
        if use_remote:
            fetched_tok[i] = cached - cl
            fetch_src[i] = f_src
            _touch_blocks(last_use, q_block, q_stamp, meta, f_src, blocks[:best])  # read at the source
            if links is not None:
                for s in range(X):  # pair s: f_src's node s sends, pi's node s receives
                    l1 = f_src * X + s
                    l2 = P * X + pi * X + s
                    if max(lc[l1, 1] - lc[l1, 0], lc[l2, 1] - lc[l2, 0]) >= lb.shape[1]:
                        lb, le = _more_slots(lb, le)
                    b = _fit_pair(lb, le, lc, l1, l2, max(start, srcav[f_src]), f_t)
                    _book(lb, le, lc, l1, b, b + f_t, a)
                    _book(lb, le, lc, l2, b, b + f_t, a)
        else:
            fetched_tok[i] = 0
        for s in range(X):
            gfree[pi, s] = nfree[s]
            glink[pi, s] = nlink[s]
        _touch_blocks(last_use, q_block, q_stamp, meta, pi, blocks)  # store / refresh (and replicate)
        if links is not None:  # blocks fetched are complete on pi when the fetch ends, computed ones at the end
            for k in range(n_local, len(blocks)):
                bavail[pi, blocks[k]] = r0 if (use_remote and k < best) else end
        prefill_inst[i] = pi
        cached_tok[i] = cached
        computed_tok[i] = Lin - cached
        queue_wait[i] = start - a
        fetch_time[i] = f_t
        fetch_wait[i] = f_w
        prefill_start[i] = start
        prefill_time[i] = pt
        prefill_end[i] = end
        if out == 1:  # the prefill made the only output token: nothing to decode
            finish[i] = end
            outcome[i] = 1
            continue
        ready[i] = r_i
        stream_wait[i] = r_i - r_free
        if links is not None:  # the stream holds pi's send links for x_s s, until its KV has arrived
            for s in range(X):
                if lc[pi * X + s, 1] - lc[pi * X + s, 0] >= lb.shape[1]:
                    lb, le = _more_slots(lb, le)
                _book(lb, le, lc, pi * X + s, b_s, b_s + x_s, a)
        hsize = _heap_push(ht, hi, hsize, ready[i], i)
    diag[2] = nlog
