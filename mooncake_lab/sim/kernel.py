"""The cluster simulator as numba kernels over flat arrays (semantics: :mod:`mooncake_lab.sim.reference`).

One pass over the requests in arrival order:

* **prefill side** (no event queue needed): each prefill instance keeps ``gfree[p, s]``, the time
  stage s of its FIFO pipeline is free (one stage for a single node: its "busy until"), and
  ``glink[p, s]``, when stage s's NIC is free (CPP, :mod:`.cpp_group`); a request dispatched at
  ``a`` to ``p`` starts at ``max(a, gfree[p, 0])``, fetches a remote prefix if the policy chose
  to, and its chunks go through the stages (:func:`.cpp_group.group_prefill`), advancing them. Its
  KV then reaches decode at ``ready`` (a heap of ready events, since prefill ends are not in
  arrival order). Its decode instance is chosen at ``ready`` (late binding) or, with
  ``decode_binding="arrival"``, here at the arrival (``dbound``: each instance's KV in flight).
* **network links** (``network_contention``, :mod:`.links`): per prefill node a send and a receive
  link, and per decode node a receive link (rows 2·P·X + d, used when the decode instance is chosen
  at arrival), each a calendar of reserved intervals (``lb``, ``le``; live slots ``lc``), that
  fetches and KV streams reserve when their request is committed; ``bavail[p, b]``: when block b is
  complete on p.
* **decode side** (discrete events): before each arrival the decode pool is advanced to that time
  (hook for arrival-time admission), processing ready events and decode-instance events in time
  order. A decode instance jumps from event to event (:mod:`.decode_math`): its next event is the
  next completion, or the first step boundary after a ready request that fits was queued — and,
  with unknown output lengths (KV growing ``b`` tokens per step from ``dctx``), the first step
  whose KV would exceed the capacity: ``n = ⌊(capacity − dctx) / b⌋ + 1`` steps on, where the
  node preempts its newest-admitted request (to the front of its queue; a recompute stall is
  folded into the first step after its re-admission, a piece of its own).

Every step of a decode segment is logged as an arithmetic run (per instance, linked backwards), so
on completion a request's token intervals are exactly its runs since admission: the mean and the
mean of the longest 10% follow without storing one interval per token. A preempted request's
earlier *stints* (admission → preemption) are kept as records of their first and last run.

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
from ..roofline import cm_kv_transfer_time, cm_prefill_time
from .admission import decode_load, instance_decode_load, pool_tbt_load, prefill_load
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
def _fit_group(lb, le, lc, l0, n, ld, t, d):
    """Earliest ``b ≥ t`` with ``[b, b + d]`` free on every link ``l0 … l0 + n − 1`` and on link
    ``ld`` (a decode node's receive link; none if ``ld < 0``). (The earliest common gap does not
    depend on the order the links are tried in; the decode link, the busier, goes first.)"""
    while True:
        b = t
        if ld >= 0:
            b = _fit(lb, le, lc, ld, b, d)
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
    a free slot: ``lc[l, 1] − lc[l, 0] < lb.shape[1]``. Sorted by begin, then end, so the ends are
    sorted too (a zero-second transfer at the begin of another sorts before it: :func:`_fit`'s
    binary search needs it)."""
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
    while j > h and (lb[l, j - 1] > b or (lb[l, j - 1] == b and le[l, j - 1] > e)):
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
def _fetch_begin(lb, le, lc, src, p, t, d, X, nl):
    """When a ``d``-second fetch from instance ``src`` to ``p`` requested at ``t`` has all its X
    node pairs started (pair s: the send link of ``src``'s node s, the receive link of ``p``'s
    node s; links 0 … P·X − 1 send, ``nl`` = P·X … 2·P·X − 1 receive, node (p, s) = p·X + s;
    then the decode nodes' receive links, 2·P·X + d)."""
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
            b = _fetch_begin(lb, le, lc, q, p, max(t, srcav[q]), d, X, len(local) * X)
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
def _start_segment(d, c, dT, dnext_t, dnext_n, dctx, dk, run_list, run_cnt, done_step, pa, pd, pm, pn,
                   grow, cap_i, stall):
    """After an event at ``dT[d]``: plan the segment up to the next completion (or go idle).

    ``grow`` (unknown output lengths): also up to the first step whose context (= KV held,
    ``dctx + b·n`` at step n) would exceed ``cap_i`` tokens, where the node must preempt. A pending
    recompute ``stall[d]`` (s) is folded into the segment's first step.
    """
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
    if grow:
        n_o = (cap_i - dctx[d]) // b + 1  # dctx ≤ cap_i here: n_o ≥ 1
        if n_o < n_c:
            n_c = n_o
    npc = segment_pieces(c, b, dctx[d], n_c, pa[d], pd[d], pm[d])
    if stall[d] > 0.0:
        npc = _stall_first_step(stall[d], pa[d], pd[d], pm[d], npc)
        stall[d] = 0.0
    pn[d] = npc
    dnext_n[d] = n_c
    dnext_t[d] = time_after(dT[d], pa[d], pd[d], pm[d], pn[d], n_c)


@helper_njit
def _stall_first_step(r, pa, pd, pm, npc):
    """Add a stall of ``r`` s to the first step of the pieces: it becomes its own piece ``(a + r, 0, 1)``
    (≤ 4 pieces); returns the number of pieces."""
    if pm[0] == 1:
        pa[0] += r
        return npc
    for p in range(npc, 0, -1):
        pa[p] = pa[p - 1]
        pd[p] = pd[p - 1]
        pm[p] = pm[p - 1]
    pa[0] = pa[1] + r
    pd[0] = 0.0
    pm[0] = 1
    pa[1] += pd[1]
    pm[1] -= 1
    return npc + 1


@helper_njit
def _steps_done(d, t, dT, run_cnt, pa, pd, pm, pn):
    """Step boundaries of instance ``d``'s current segment at or before ``t`` (< its next event)."""
    if run_cnt[d] == 0:
        return 0
    return steps_until_after(dT[d], t, pa[d], pd[d], pm[d], pn[d]) - 1


@helper_njit
def _kv_now(t, dT, dctx, run_cnt, pa, pd, pm, pn, held):
    """``held[d]`` = KV tokens instance d's running requests hold at ``t`` (prompt + tokens so far)."""
    for d in range(len(held)):
        held[d] = dctx[d] + run_cnt[d] * _steps_done(d, t, dT, run_cnt, pa, pd, pm, pn)


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
           qnext, run_list, run_cnt, done_step, run_mark, last_run, decode_admit,
           grow, c, gen, stall, seq, adm_seq, cur_adm, cur_gap, prefill_end):
    """Admit queued requests of instance ``d`` at boundary ``t`` in FIFO order while KV fits.

    Known output lengths: a request reserves input + output. ``grow``: it needs its current KV,
    input + ``gen`` (tokens so far: 1, or more for a preempted one, whose recompute, a prefill of
    input + gen tokens, is added to ``stall[d]``); ``dctx`` is then the KV held.
    """
    while qhead[d] >= 0:
        i = qhead[d]
        g = gen[i]
        if grow:
            need = input_len[i] + g
            if dctx[d] + need > cap:
                break
        else:
            need = input_len[i] + output_len[i]
            if reserved[d] + need > cap:
                break
        qhead[d] = qnext[i]
        if qhead[d] < 0:
            qtail[d] = -1
        waitneed[d] -= need
        wcnt[d] -= 1
        if not grow:
            reserved[d] += need
            if reserved[d] > max_kv[d]:
                max_kv[d] = reserved[d]
        if g == 1:
            decode_admit[i] = t
            cur_gap[i] = prefill_end[i]  # its first interval starts at the prefill's end
        else:  # re-admitted after a preemption: recompute its KV before the next step
            stall[d] += cm_prefill_time(c, float(input_len[i] + g), 0.0)
        cur_adm[i] = t
        adm_seq[i] = seq[0]
        seq[0] += 1
        done_step[i] = dk[d] + output_len[i] - g
        run_mark[i] = last_run[d]
        dctx[d] += input_len[i] + g  # context of its next decode step: prompt + tokens so far
        run_list[d, run_cnt[d]] = i
        run_cnt[d] += 1


@helper_njit
def _collect_stint(e, mark, adm, gap, log_a, log_d, log_m, log_prev, buf_a, buf_d, buf_m, nr):
    """Append to ``buf_*`` (from ``nr``) one stint's token intervals as runs: the logged runs from
    ``e`` back to ``mark`` (exclusive), newest first, then its first interval, gap start → first
    token = ``adm − gap`` + its first step; returns the new count."""
    while e != mark:
        buf_a[nr] = log_a[e]
        buf_d[nr] = log_d[e]
        buf_m[nr] = log_m[e]
        nr += 1
        e = log_prev[e]
    o = nr - 1  # the oldest run: its first step is part of the first interval
    first = adm + buf_a[o] - gap
    buf_a[o] = buf_a[o] + buf_d[o]
    buf_m[o] -= 1
    buf_a[nr] = first
    buf_d[nr] = 0.0
    buf_m[nr] = 1
    return nr + 1


@helper_njit
def _finish_tbt(i, d, last_run, run_mark, log_a, log_d, log_m, log_prev, cur_adm, cur_gap,
                st_head, st_mark, st_end, st_adm, st_gap, st_prev,
                n_intervals, buf_a, buf_d, buf_m, hkey, hidx):
    """Mean of the longest 10% of request ``i``'s token intervals, from its logged runs.

    A *stint* runs from an admission to a preemption or the finish. Its first interval starts at
    the prefill's end (first stint: admission wait + exposed transfer + first step) or at the
    preemption's boundary (wait in the queue + recompute stall + first step); then one interval per
    step. The current stint starts at ``run_mark[i]``; earlier ones are records ``st_*`` linked from
    ``st_head[i]`` (none with known output lengths).
    """
    nr = _collect_stint(last_run[d], run_mark[i], cur_adm[i], cur_gap[i], log_a, log_d, log_m, log_prev,
                        buf_a, buf_d, buf_m, 0)
    r = st_head[i]
    while r >= 0:
        nr = _collect_stint(st_end[r], st_mark[r], st_adm[r], st_gap[r], log_a, log_d, log_m, log_prev,
                            buf_a, buf_d, buf_m, nr)
        r = st_prev[r]
    k = (n_intervals + 9) // 10  # ceil(10%), at least one interval
    return top_k_sum(buf_a, buf_d, buf_m, nr, k, hkey, hidx) / k


@helper_njit
def _tbt_pool_load(c, D, predicted, T, t_decode, tbt_slo, db, need, run_list, run_cnt, qhead, qnext, ht, hi, hsize,
                   decode_inst, decode_admit, ready, input_len, output_len, kvh, waitneed, wcnt, lb, lk,
                   grow, gen, done_step, dk, a, dT, pa, pd, pm, pn):
    """``decode_load_metric="tbt"`` at an arrival (time ``a``): :func:`.admission.pool_tbt_load` over the
    same requests as the pool load (current: running + queued; ``predicted``: those decoding at ``T``),
    each on its decode instance, and the candidate (``need`` tokens) on ``db`` — or, not bound yet
    (``db`` < 0, a request still in prefill under late binding), spread over the instances. KV counted
    per request as the pool load counts it (``grow``: prompt + tokens so far; ``kvh``: KV held now)."""
    for d in range(D):
        lb[d] = 0.0
        lk[d] = 0.0
    sb = 0.0
    sk = 0.0
    if db >= 0:
        lb[db] = 1.0
        lk[db] = float(need)
    else:
        sb = 1.0
        sk = float(need)
    if not predicted:
        for d in range(D):
            lb[d] += run_cnt[d] + wcnt[d]
            lk[d] += kvh[d] + waitneed[d]
        return pool_tbt_load(c, lb, lk, sb, sk, tbt_slo)
    for d in range(D):
        k_now = dk[d] + _steps_done(d, a, dT, run_cnt, pa, pd, pm, pn) if grow else 0
        for q in range(run_cnt[d]):
            j = run_list[d, q]
            if decode_admit[j] <= T and decode_admit[j] + t_decode > T:
                lb[d] += 1.0
                if grow:  # prompt + tokens so far
                    lk[d] += input_len[j] + output_len[j] - (done_step[j] - k_now)
                else:
                    lk[d] += input_len[j] + output_len[j]
        j = qhead[d]
        while j >= 0:
            s_j = decode_admit[j] if grow and gen[j] > 1 else ready[j]  # preempted: started
            if s_j <= T and s_j + t_decode > T:
                lb[d] += 1.0
                lk[d] += input_len[j] + gen[j] if grow else input_len[j] + output_len[j]
            j = qnext[j]
    for q in range(hsize):
        j = hi[q]
        if ht[q] <= T and ht[q] + t_decode > T:
            k_j = input_len[j] + 1 if grow else input_len[j] + output_len[j]
            e = decode_inst[j]
            if e >= 0:
                lb[e] += 1.0
                lk[e] += k_j
            else:
                sb += 1.0
                sk += k_j
    return pool_tbt_load(c, lb, lk, sb, sk, tbt_slo)


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
            view.recv_backlog_s[p] = _backlog(lb, le, lc, (len(local) + p) * group_size, group_size, a)
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
            p_load, d_load, max_kv, diag, binding, load_metric, output_unknown, preemptions, spare,
            fetch_wait, stream_wait, links, policy_fn=None, view=None):
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

    ``binding``: 0 = the decode instance is chosen when the KV is ready, 1 = at arrival (then
    ``decode_inst`` is set at arrival and ``dbound`` holds each instance's bound-in-flight KV);
    ``load_metric``: 0 = max(TBT, memory) of the average instance, 1 = the mean per-instance TBT
    ratio (:mod:`.admission`; config.DECODE_BINDINGS / DECODE_LOAD_METRICS).
    ``links``: None (every transfer gets a whole NIC; numba then drops the link code, as for
    ``policy_fn``) or True (``ClusterConfig.network_contention``: fetches and KV streams reserve
    the prefill nodes' send / receive links, a stream bound at arrival also its decode node's
    receive link, :mod:`.links`); ``fetch_wait`` / ``stream_wait``:
    the seconds each request's fetch / KV stream waited for them (0 without contention).

    ``diag``: [0] events processed, [1] times an event ran earlier than the previous one (must be
    0), [2] runs logged, [3] max decode batch; [4]–[6] for a student policy (:func:`_student_choice`).

    ``output_unknown`` (``grow``): decode sees prompts only; KV grows a token per step, a node that
    would overflow preempts its newest-admitted request (``preemptions[i]`` counts them; rules
    8b–8d of :mod:`.reference`). Then ``dctx[d]`` is also the KV held and ``max_kv`` the largest
    step context; with known lengths ``reserved`` is the KV reserved. The run log and the stint
    records have room for ``spare`` preemptions; with more, the kernel stops with ``diag[7]`` = 1
    and the caller runs it again with more room (growing arrays inside the loop would cost every
    run ~70%: numba then reference-counts them on every iteration).
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
    # network links (contention): per link, its reserved intervals [lb, le], sorted (.links);
    # rows: P·X prefill send links, P·X prefill receive links, D decode receive links
    if links is not None:
        lb = np.empty((2 * P * X + D, 4))           # (rows double when one is full: _more_slots)
        le = np.empty((2 * P * X + D, 4))
        lc = np.zeros((2 * P * X + D, 2), dtype=np.int64)  # per link: its first live and one-past-last slot
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
    dbound = np.zeros(D, dtype=np.float64)      # KV tokens of requests bound at arrival, KV not ready yet
    tbt_b = np.zeros(D, dtype=np.float64)       # per-instance batch / KV of the "tbt" decode load
    tbt_k = np.zeros(D, dtype=np.float64)
    wcnt = np.zeros(D, dtype=np.int64)          # requests queued
    qhead = np.full(D, -1, dtype=np.int64)
    qtail = np.full(D, -1, dtype=np.int64)
    qnext = np.full(n, -1, dtype=np.int64)
    run_cnt = np.zeros(D, dtype=np.int64)
    grow = output_unknown
    cap_i = int(math.floor(decode_cap))         # KV tokens a node holds (token counts are integers)
    min_need = 1
    if n > 0:
        min_need = np.min(input_len + 1) if grow else np.min(input_len + output_len)
    maxb = min(n, int(decode_cap // max(min_need, 1)) + 1) + 1
    run_list = np.empty((D, maxb), dtype=np.int64)
    done_step = np.zeros(n, dtype=np.int64)
    run_mark = np.full(n, -1, dtype=np.int64)
    pa = np.zeros((D, 4))                       # ≤ 3 pieces, + 1 for a recompute stall
    pd = np.zeros((D, 4))
    pm = np.zeros((D, 4), dtype=np.int64)
    pn = np.zeros(D, dtype=np.int64)
    # per request: tokens so far when queued, admission order, the current stint's admission and
    # gap start (for the token intervals); per instance: pending recompute stall (s)
    gen = np.ones(n, dtype=np.int64)
    adm_seq = np.zeros(n, dtype=np.int64)
    seq = np.zeros(1, dtype=np.int64)
    cur_adm = np.zeros(n)
    cur_gap = np.zeros(n)
    stall = np.zeros(D)
    held = np.zeros(D)                          # grow: KV held now, per instance
    # closed stints of preempted requests (records linked per request, newest first; grown as needed)
    st_head = np.full(n, -1, dtype=np.int64)
    SN = spare + 1 if grow else 1
    st_mark = np.empty(SN, dtype=np.int64)
    st_end = np.empty(SN, dtype=np.int64)
    st_prev = np.empty(SN, dtype=np.int64)
    st_adm = np.empty(SN)
    st_gap = np.empty(SN)
    nrec = 0
    # run log: every closed segment appends ≤ 3 runs; ≤ 2 events per request (known output
    # lengths). Unknown: ≤ 4 runs (a stall) per event; ≤ 2 events per request + 1 per preemption
    L = 4 * (2 * n + spare) + 8 if grow else 6 * n + 8
    log_a = np.empty(L)
    log_d = np.empty(L)
    log_m = np.empty(L, dtype=np.int64)
    log_prev = np.empty(L, dtype=np.int64)
    last_run = np.full(D, -1, dtype=np.int64)
    nlog = 0
    B = L + SN + 1                              # a request's runs + one first interval per stint
    buf_a = np.empty(B)
    buf_d = np.empty(B)
    buf_m = np.empty(B, dtype=np.int64)
    hkey = np.empty(B)
    hidx = np.empty(B, dtype=np.int64)
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
                if nlog + 4 > L:  # only with more than ``spare`` preemptions: run again with more room
                    diag[7] = 1
                    return
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
                if grow and dctx[d] - run_cnt[d] > max_kv[d]:
                    max_kv[d] = dctx[d] - run_cnt[d]  # the step just ended held the segment's most KV
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
                                                  cur_adm, cur_gap, st_head, st_mark, st_end, st_adm, st_gap,
                                                  st_prev, m_int, buf_a, buf_d, buf_m, hkey, hidx)
                        run_cnt[d] -= 1
                        run_list[d, q] = run_list[d, run_cnt[d]]
                    else:
                        q += 1
                # unknown output lengths: the next step would overflow → preempt the newest-admitted
                while grow and dctx[d] > cap_i:
                    qv = 0
                    for q in range(1, run_cnt[d]):
                        if adm_seq[run_list[d, q]] > adm_seq[run_list[d, qv]]:
                            qv = q
                    v = run_list[d, qv]
                    g = output_len[v] - (done_step[v] - dk[d])  # tokens so far
                    dctx[d] -= input_len[v] + g
                    run_cnt[d] -= 1
                    run_list[d, qv] = run_list[d, run_cnt[d]]
                    if input_len[v] + g > cap_i:
                        outcome[v] = 4  # its KV alone outgrows a decode node: too large after all
                        continue
                    if nrec == SN:
                        diag[7] = 1
                        return
                    st_mark[nrec] = run_mark[v]
                    st_end[nrec] = last_run[d]
                    st_adm[nrec] = cur_adm[v]
                    st_gap[nrec] = cur_gap[v]
                    st_prev[nrec] = st_head[v]
                    st_head[v] = nrec
                    nrec += 1
                    preemptions[v] += 1
                    gen[v] = g
                    cur_gap[v] = t  # its last token came now
                    qnext[v] = qhead[d]  # back to the front of the queue
                    if qhead[d] < 0:
                        qtail[d] = v
                    qhead[d] = v
                    waitneed[d] += input_len[v] + g
                    wcnt[d] += 1
                _admit(d, t, decode_cap, input_len, output_len, dT, dctx, dk, reserved, waitneed, wcnt, max_kv,
                       qhead, qtail, qnext, run_list, run_cnt, done_step, run_mark, last_run, decode_admit,
                       grow, c, gen, stall, seq, adm_seq, cur_adm, cur_gap, prefill_end)
                if run_cnt[d] > diag[3]:
                    diag[3] = run_cnt[d]
                _start_segment(d, c, dT, dnext_t, dnext_n, dctx, dk, run_list, run_cnt, done_step,
                               pa, pd, pm, pn, grow, cap_i, stall)
            elif hsize > 0 and tready <= t_now:
                # ---- ready event: KV of request j has reached the decode pool
                t = tready
                j = hi[0]
                hsize = _heap_pop(ht, hi, hsize)
                need = input_len[j] + 1 if grow else input_len[j] + output_len[j]
                kvh = reserved
                if grow:  # KV held now: prompt + tokens so far of the running requests
                    _kv_now(t, dT, dctx, run_cnt, pa, pd, pm, pn, held)
                    kvh = held
                if binding == 1:  # bound at arrival: its KV is no longer in flight
                    d = decode_inst[j]
                    dbound[d] -= need
                else:  # late binding, Algorithm 1 line 24: least KV reserved (held) + KV queued (tokens)
                    d = 0
                    for e in range(1, D):
                        if kvh[e] + waitneed[e] < kvh[d] + waitneed[d]:
                            d = e
                    decode_inst[j] = d
                if admission == 1 and instance_decode_load(c, float(run_cnt[d] + wcnt[d] + 1),
                                                           kvh[d] + waitneed[d] + need, decode_cap,
                                                           tbt_slo, load_metric) > adm_threshold:
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
                           qhead, qtail, qnext, run_list, run_cnt, done_step, run_mark, last_run, decode_admit,
                           grow, c, gen, stall, seq, adm_seq, cur_adm, cur_gap, prefill_end)
                    _start_segment(d, c, dT, dnext_t, dnext_n, dctx, dk, run_list, run_cnt, done_step,
                                   pa, pd, pm, pn, grow, cap_i, stall)
                elif was_empty and kvh[d] + need <= decode_cap:
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
        if (Lin + 1 if grow else Lin + out) > decode_cap:  # can never fit a decode instance's KV memory
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
        cand = Lin + 1 if grow else Lin + out  # what this request counts / needs on decode (rule 8b)
        kvh = reserved
        if grow:  # KV held now: prompt + tokens so far of the running requests
            _kv_now(a, dT, dctx, run_cnt, pa, pd, pm, pn, held)
            kvh = held
        # ---------------- Algorithm 1 line 24: the decode instance, chosen now (binding 1)
        db = -1
        if binding == 1 and out > 1:  # least KV reserved (held) + queued + bound in flight (tokens)
            db = 0
            for e in range(1, D):
                if kvh[e] + waitneed[e] + dbound[e] < kvh[db] + waitneed[db] + dbound[db]:
                    db = e
        x_s = 0.0
        b_s = 0.0
        if links is not None:
            if out > 1:  # the stream: x s on all pi's send links (+ db's receive link), ideally ending at r_free
                x_s = cm_kv_transfer_time(c, Lin)
                b_s = _fit_group(lb, le, lc, pi * X, X, 2 * P * X + db if db >= 0 else -1, r_free - x_s, x_s)
                if b_s > r_free - x_s:
                    r_i = max(r_free, b_s + x_s)
        # ---------------- admission at arrival (arXiv §7): loads as SLO satisfaction
        pl = prefill_load(end - a, ttft_slo)
        nb = 1.0
        kv = float(cand)
        if load_metric == 1:  # the mean per-instance TBT ratio over the same requests as below
            dl = _tbt_pool_load(c, D, admission == 3, a + horizon * (r_i - a), t_decode, tbt_slo, db, cand,
                                run_list, run_cnt, qhead, qnext, ht, hi, hsize, decode_inst, decode_admit, ready,
                                input_len, output_len, kvh, waitneed, wcnt, tbt_b, tbt_k,
                                grow, gen, done_step, dk, a, dT, pa, pd, pm, pn)
        elif admission == 3:
            # decode population predicted at T: decode start s (admission, or KV ready if not yet
            # admitted) with s ≤ T < s + t_d, over every accepted unfinished request, + this one
            T = a + horizon * (r_i - a)
            for d in range(D):
                k_now = dk[d] + _steps_done(d, a, dT, run_cnt, pa, pd, pm, pn) if grow else 0
                for q in range(run_cnt[d]):
                    j = run_list[d, q]
                    if decode_admit[j] <= T and decode_admit[j] + t_decode > T:
                        nb += 1.0
                        if grow:  # prompt + tokens so far
                            kv += input_len[j] + output_len[j] - (done_step[j] - k_now)
                        else:
                            kv += input_len[j] + output_len[j]
                j = qhead[d]
                while j >= 0:
                    s_j = decode_admit[j] if grow and gen[j] > 1 else ready[j]  # preempted: started
                    if s_j <= T and s_j + t_decode > T:
                        nb += 1.0
                        kv += input_len[j] + gen[j] if grow else input_len[j] + output_len[j]
                    j = qnext[j]
            for q in range(hsize):
                j = hi[q]
                if ht[q] <= T and ht[q] + t_decode > T:
                    nb += 1.0
                    kv += input_len[j] + 1 if grow else input_len[j] + output_len[j]
        else:  # the pool's current load with this request added
            for d in range(D):
                nb += run_cnt[d] + wcnt[d]
                kv += kvh[d] + waitneed[d]
        if load_metric == 0:
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
        if db >= 0:  # bound at arrival: its KV is in flight to db until its ready event
            decode_inst[i] = db
            dbound[db] += cand
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
        if links is not None:  # the stream holds pi's send links (and db's receive link) for x_s s
            for s in range(X):
                if lc[pi * X + s, 1] - lc[pi * X + s, 0] >= lb.shape[1]:
                    lb, le = _more_slots(lb, le)
                _book(lb, le, lc, pi * X + s, b_s, b_s + x_s, a)
            if db >= 0:
                ld = 2 * P * X + db
                if lc[ld, 1] - lc[ld, 0] >= lb.shape[1]:
                    lb, le = _more_slots(lb, le)
                _book(lb, le, lc, ld, b_s, b_s + x_s, a)
        hsize = _heap_push(ht, hi, hsize, ready[i], i)
    diag[2] = nlog
