"""The coupled (vLLM-like) engine as a numba kernel (semantics: :mod:`mooncake_lab.sim.coupled_reference`).

``n_coupled`` instances each prefill *and* decode. Every instance runs iterations back to back;
an iteration's content is fixed when it starts (which prefill chunk, whether the decode batch
takes part) and its effects happen at its end. Requests are handled in arrival order; before an
arrival every iteration ending at or before it is processed (lowest instance first on ties).

Iteration time (one place per formula: both terms come from :mod:`mooncake_lab.roofline`)::

    no chunking, prefill waiting : cm_prefill_time(rest of the prompt, tokens already in KV)
    no chunking, decode only     : cm_decode_step_time(batch, context)
    chunked                      : cm_prefill_time(k ≤ chunk, tokens already in KV)
                                   + cm_decode_step_time(batch, context)     (either term may be absent)

The chunked sum runs the chunk and the decode step back to back: an upper bound on a fused
iteration, which would stream the weights (and pay the per-step overhead) once instead of twice —
at most ``weights_s + overhead_s`` (≈ 14 ms on 8×A800, ``modern``) per iteration.

Decode-only stretches are jumped (:mod:`.decode_math`): while an instance has no prompt to work
on, its batch is constant until the next completion or until an arrival it can admit, so the step
times of that *segment* are a piecewise arithmetic series and its end is computed in closed form
(one loop turn per segment instead of per token). An arrival that fits cuts the segment at the
first step boundary strictly after it, where the iteration-by-iteration engine would admit it.

Token intervals of a request, without storing one per token: the first interval of each segment
(it may include a stall: prefills run while the batch waited, or the request's own first token)
and every interval of an iteration with a prefill chunk go to a min-heap of size
``ceil((output − 1)/10)`` (the number of intervals is known at arrival) keeping its largest ones;
the other steps of a segment are logged per instance as arithmetic runs (linked backwards). On
completion the mean of the longest 10% is taken over the heap and the runs logged since the
request joined the batch (:func:`~.decode_math.top_k_sum`).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..jit import helper_njit
from ..prefix_cache import _match_prefix, _touch_blocks
from ..roofline import cm_decode_step_time, cm_prefill_time
from .decode_math import cut_segment, segment_pieces, time_after, top_k_sum
from .kernel import _reusable_tokens

__all__ = ["tail_slots"]


def tail_slots(output_len: np.ndarray) -> np.ndarray:
    """Offsets (length n + 1) of each request's top-10% heap: ``ceil((out − 1)/10)`` slots each."""
    k = (np.maximum(np.asarray(output_len, dtype=np.int64) - 1, 0) + 9) // 10
    return np.concatenate([[0], np.cumsum(k)]).astype(np.int64)


@helper_njit
def _tail_mean(j, e, heap, hoff, hcnt, run_mark, last_run, log_a, log_d, log_m, log_prev,
               buf_a, buf_d, buf_m, hkey, hidx):
    """Mean of the longest ``ceil((output − 1)/10)`` token intervals of request ``j`` (on ``e``).

    Its intervals are the values kept in its heap plus the runs logged on ``e`` since it joined.
    When the heap is full its smallest value θ is a lower bound of the answer's values: a run
    whose largest value is ≤ θ cannot change the sum (a value equal to θ is interchangeable with
    the heap's), so it is skipped.
    """
    off = hoff[j]
    kk = hoff[j + 1] - off
    theta = heap[off] if hcnt[j] == kk else -math.inf
    nr = 0
    r = last_run[e]
    while r != run_mark[j]:
        if log_a[r] + log_d[r] * (log_m[r] - 1) > theta:  # its largest value (runs don't decrease)
            buf_a[nr] = log_a[r]
            buf_d[nr] = log_d[r]
            buf_m[nr] = log_m[r]
            nr += 1
        r = log_prev[r]
    for h in range(hcnt[j]):
        buf_a[nr] = heap[off + h]
        buf_d[nr] = 0.0
        buf_m[nr] = 1
        nr += 1
    return top_k_sum(buf_a, buf_d, buf_m, nr, kk, hkey, hidx) / kk


@njit(cache=True, nogil=True)  # nogil: independent runs can go in parallel threads
def _coupled_kernel(arrival, input_len, output_len, offsets, block_ids, block_tokens,
                    c, E, policy, noise_sd, u_random, z_noise, decode_cap, chunked, chunk,
                    last_use, q_block, q_stamp, meta, hoff,
                    prefill_inst, decode_inst, outcome, cached_tok, fetched_tok, computed_tok,
                    queue_wait, fetch_time, prefill_start, prefill_time, prefill_end,
                    ready, decode_admit, finish, tbt_mean, tbt_tail, max_kv, diag):
    """Simulate the trace on ``E`` coupled instances (outputs pre-set to NaN / −1 / 0).

    ``policy``: 0 random, 1 load (least queued prefill work), 2/3 cache-aware (queued work + own
    prefill with the local prefix). ``diag``: [0] iterations ended (a jumped segment counts each of
    its steps), [1] time reversals (must be 0), [2] prefill iterations, [3] max decode batch.
    """
    n = len(arrival)
    heap = np.empty(max(hoff[n], 1))
    hcnt = np.zeros(n, dtype=np.int64)
    gen = np.zeros(n, dtype=np.int64)
    last_tok = np.zeros(n)
    done_pref = np.zeros(n, dtype=np.int64)
    full_pt = np.zeros(n)
    qnext = np.full(n, -1, dtype=np.int64)
    pnext = np.full(n, -1, dtype=np.int64)
    qhead = np.full(E, -1, dtype=np.int64)
    qtail = np.full(E, -1, dtype=np.int64)
    phead = np.full(E, -1, dtype=np.int64)
    ptail = np.full(E, -1, dtype=np.int64)
    reserved = np.zeros(E)
    pend = np.zeros(E)                    # queued prefill work, s (each request counted in full)
    dctx = np.zeros(E, dtype=np.int64)    # total context of the decode batch
    run_cnt = np.zeros(E, dtype=np.int64)
    min_need = 1
    if n > 0:
        min_need = np.min(input_len + output_len)
    maxb = min(n, int(decode_cap // max(min_need, 1)) + 1) + 1
    run_list = np.empty((E, maxb), dtype=np.int64)
    it_end = np.full(E, math.inf)
    it_req = np.full(E, -1, dtype=np.int64)
    it_k = np.zeros(E, dtype=np.int64)
    it_pt = np.zeros(E)
    it_dec = np.zeros(E, dtype=np.bool_)
    local = np.zeros(E, dtype=np.int64)
    est = np.zeros(E)
    t_last = np.full(E, -math.inf)
    # decode-only segments: steps (0: the current iteration is a single one; −1: the idle instance
    # wakes at it_end to admit an arrival), start time, pieces of the step times
    seg_n = np.zeros(E, dtype=np.int64)
    seg_t0 = np.zeros(E)
    pa = np.zeros((E, 3))
    pd = np.zeros((E, 3))
    pm = np.zeros((E, 3), dtype=np.int64)
    pn = np.zeros(E, dtype=np.int64)
    # run log (steps 2… of each closed segment, ≤ 3 runs; a segment ends at a completion or is
    # cut by an arrival, so ≤ 2n segments); a request's runs are those after its mark
    nlog_max = 6 * n + 8
    log_a = np.empty(nlog_max)
    log_d = np.empty(nlog_max)
    log_m = np.empty(nlog_max, dtype=np.int64)
    log_prev = np.empty(nlog_max, dtype=np.int64)
    last_run = np.full(E, -1, dtype=np.int64)
    run_mark = np.full(n, -1, dtype=np.int64)
    nlog = 0
    kmax = 1
    if n > 0:
        kmax = max(1, (max(np.max(output_len) - 1, 0) + 9) // 10)
    buf_a = np.empty(nlog_max + kmax + 1)
    buf_d = np.empty(nlog_max + kmax + 1)
    buf_m = np.empty(nlog_max + kmax + 1, dtype=np.int64)
    hkey = np.empty(nlog_max + kmax + 1)
    hidx = np.empty(nlog_max + kmax + 1, dtype=np.int64)

    for i in range(n + 1):
        t_now = arrival[i] if i < n else math.inf
        # ---------------- every iteration ending at or before this arrival. Instances interact only
        # through arrivals (routing reads their queues and caches), so each is advanced on its own.
        for e in range(E):
            while it_end[e] <= t_now and it_end[e] < math.inf:
                t = it_end[e]
                ns = seg_n[e]  # steps of a decode-only segment; 0: one iteration; −1: a wake-up
                if ns >= 0:
                    diag[0] += max(ns, 1)
                    if t < t_last[e]:
                        diag[1] += 1
                    t_last[e] = t
                nd = 0  # decode steps ending now
                t1 = t  # end of the first of them
                if ns > 0:
                    # ---- a decode-only segment of ns steps: steps 2…ns are logged as runs
                    nd = ns
                    t1 = seg_t0[e] + pa[e, 0]  # (= time_after(…, 1))
                    left = ns
                    for p in range(pn[e]):
                        if left <= 0:
                            break
                        m = pm[e, p] if pm[e, p] < left else left
                        left -= m
                        a0 = pa[e, p]
                        if p == 0:  # the first step is an interval of its own (below)
                            a0 = a0 + pd[e, p]
                            m -= 1
                        if m > 0:
                            log_a[nlog] = a0
                            log_d[nlog] = pd[e, p]
                            log_m[nlog] = m
                            log_prev[nlog] = last_run[e]
                            last_run[e] = nlog
                            nlog += 1
                elif it_dec[e]:  # an iteration with a prefill chunk and a decode step
                    nd = 1
                if nd > 0:
                    # every request of the batch gets nd tokens; its first interval (now − its previous
                    # token: may include stalls) goes to its heap
                    dctx[e] += run_cnt[e] * nd
                    q = 0
                    while q < run_cnt[e]:
                        j = run_list[e, q]
                        gen[j] += nd
                        # offer the interval to j's min-heap of its k largest (inlined: a call per token
                        # would cost two atomic reference-count updates)
                        v = t1 - last_tok[j]
                        off = hoff[j]
                        kk = hoff[j + 1] - off
                        cnt = hcnt[j]
                        if cnt < kk:
                            h = cnt
                            heap[off + h] = v
                            while h > 0:
                                par = (h - 1) // 2
                                if heap[off + par] <= heap[off + h]:
                                    break
                                heap[off + par], heap[off + h] = heap[off + h], heap[off + par]
                                h = par
                            hcnt[j] = cnt + 1
                        elif v > heap[off]:
                            heap[off] = v
                            h = 0
                            while True:
                                l = 2 * h + 1
                                if l >= kk:
                                    break
                                mm = l
                                if l + 1 < kk and heap[off + l + 1] < heap[off + l]:
                                    mm = l + 1
                                if heap[off + h] <= heap[off + mm]:
                                    break
                                heap[off + mm], heap[off + h] = heap[off + h], heap[off + mm]
                                h = mm
                        last_tok[j] = t
                        if gen[j] == output_len[j]:
                            finish[j] = t
                            outcome[j] = 1
                            reserved[e] -= input_len[j] + output_len[j]
                            dctx[e] -= input_len[j] + output_len[j]
                            tbt_mean[j] = (t - prefill_end[j]) / (output_len[j] - 1)
                            tbt_tail[j] = _tail_mean(j, e, heap, hoff, hcnt, run_mark, last_run, log_a, log_d,
                                                     log_m, log_prev, buf_a, buf_d, buf_m, hkey, hidx)
                            run_cnt[e] -= 1
                            run_list[e, q] = run_list[e, run_cnt[e]]
                        else:
                            q += 1
                # the prefill chunk of this iteration
                j = it_req[e]
                if j >= 0:
                    diag[2] += 1
                    done_pref[j] += it_k[e]
                    prefill_time[j] += it_pt[e]
                    if done_pref[j] == computed_tok[j]:  # prompt done: the first token is out
                        phead[e] = pnext[j]
                        if phead[e] < 0:
                            ptail[e] = -1
                        pend[e] -= full_pt[j]
                        prefill_end[j] = t
                        ready[j] = t
                        decode_admit[j] = t
                        if output_len[j] == 1:
                            finish[j] = t
                            outcome[j] = 1
                            reserved[e] -= input_len[j] + output_len[j]
                        else:
                            gen[j] = 1
                            last_tok[j] = t
                            run_mark[j] = last_run[e]
                            run_list[e, run_cnt[e]] = j
                            run_cnt[e] += 1
                            dctx[e] += input_len[j] + 1
                            if run_cnt[e] > diag[3]:
                                diag[3] = run_cnt[e]
                # waiting requests enter the prefill queue (FIFO) while their whole KV fits
                while qhead[e] >= 0:
                    j = qhead[e]
                    need = input_len[j] + output_len[j]
                    if reserved[e] + need > decode_cap:
                        break
                    qhead[e] = qnext[j]
                    if qhead[e] < 0:
                        qtail[e] = -1
                    reserved[e] += need
                    if reserved[e] > max_kv[e]:
                        max_kv[e] = reserved[e]
                    if phead[e] < 0:
                        phead[e] = j
                    else:
                        pnext[ptail[e]] = j
                    ptail[e] = j
                # ---- plan the next iteration from t (contents fixed now, effects at its end)
                j = phead[e]
                b = run_cnt[e]
                k = 0
                seg_n[e] = 0
                it_req[e] = -1
                it_dec[e] = False
                if j >= 0:
                    if math.isnan(prefill_start[j]):
                        prefill_start[j] = t
                        queue_wait[j] = t - arrival[j]
                    k = computed_tok[j] - done_pref[j]
                    if chunked and k > chunk:
                        k = chunk
                if k == 0 and b > 0:  # decode only: one segment up to the next completion
                    nmin = output_len[run_list[e, 0]] - gen[run_list[e, 0]]
                    for q in range(1, b):
                        r = output_len[run_list[e, q]] - gen[run_list[e, q]]
                        if r < nmin:
                            nmin = r
                    pn[e] = segment_pieces(c, b, dctx[e], nmin, pa[e], pd[e], pm[e])
                    seg_n[e] = nmin
                    seg_t0[e] = t
                    it_end[e] = time_after(t, pa[e], pd[e], pm[e], pn[e], nmin)
                elif k == 0:
                    it_end[e] = math.inf  # idle
                else:
                    pt = cm_prefill_time(c, k, cached_tok[j] + done_pref[j])
                    it_req[e] = j
                    it_k[e] = k
                    it_pt[e] = pt
                    if chunked:  # the chunk and, if any, a decode step of the batch
                        it_dec[e] = b > 0
                        it_end[e] = t + (pt + (cm_decode_step_time(c, b, dctx[e]) if b > 0 else 0.0))
                    else:  # the whole prompt; the batch waits
                        it_end[e] = t + pt
        if i == n:
            break
        # ---------------- the arrival of request i: route it to an instance
        a = arrival[i]
        Lin = input_len[i]
        if Lin + output_len[i] > decode_cap:
            outcome[i] = 4
            continue
        blocks = block_ids[offsets[i]:offsets[i + 1]]
        if policy == 0:
            ei = min(int(u_random[i] * E), E - 1)
        else:
            for f in range(E):
                est[f] = pend[f]
                if policy >= 2:
                    local[f] = _match_prefix(last_use, f, blocks)
                    cl = _reusable_tokens(local[f], Lin, block_tokens)
                    est[f] += cm_prefill_time(c, Lin - cl, cl)
            if noise_sd > 0.0:
                for f in range(E):
                    est[f] *= max(0.0, 1.0 + noise_sd * z_noise[i, f])
            ei = 0
            for f in range(1, E):
                if est[f] < est[ei]:
                    ei = f
        cached = _reusable_tokens(_match_prefix(last_use, ei, blocks), Lin, block_tokens)
        _touch_blocks(last_use, q_block, q_stamp, meta, ei, blocks)
        prefill_inst[i] = ei
        decode_inst[i] = ei
        cached_tok[i] = cached
        computed_tok[i] = Lin - cached
        fetched_tok[i] = 0
        fetch_time[i] = 0.0
        prefill_time[i] = 0.0
        full_pt[i] = cm_prefill_time(c, Lin - cached, cached)
        pend[ei] += full_pt[i]
        was_empty = qhead[ei] < 0
        if was_empty:
            qhead[ei] = i
        else:
            qnext[qtail[ei]] = i
        qtail[ei] = i
        if it_end[ei] == math.inf:  # idle: it wakes now (admits and plans before the next arrival)
            it_end[ei] = a
            seg_n[ei] = -1
        elif seg_n[ei] > 0 and was_empty and reserved[ei] + (Lin + output_len[i]) <= decode_cap:
            # decoding only, and it fits: admitted at the first step boundary strictly after a
            cut_segment(ei, a, seg_t0, it_end, seg_n, pa, pd, pm, pn)
