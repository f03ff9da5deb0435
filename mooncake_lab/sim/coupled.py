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

Per request the mean of the longest 10% of its token intervals is kept in a min-heap of size
``ceil((output − 1)/10)`` (the number of intervals is known at arrival), so no interval is stored.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..prefix_cache import _match_prefix, _touch_blocks
from ..roofline import cm_decode_step_time, cm_prefill_time
from .kernel import _reusable_tokens

__all__ = ["tail_slots"]


def tail_slots(output_len: np.ndarray) -> np.ndarray:
    """Offsets (length n + 1) of each request's top-10% heap: ``ceil((out − 1)/10)`` slots each."""
    k = (np.maximum(np.asarray(output_len, dtype=np.int64) - 1, 0) + 9) // 10
    return np.concatenate([[0], np.cumsum(k)]).astype(np.int64)


@njit(cache=True)
def _keep_largest(heap, off, cnt, k, v):
    """Offer ``v`` to the min-heap ``heap[off:off+k]`` holding the ``k`` largest values; returns count."""
    if cnt < k:
        j = cnt
        heap[off + j] = v
        while j > 0:
            p = (j - 1) // 2
            if heap[off + p] <= heap[off + j]:
                break
            heap[off + p], heap[off + j] = heap[off + j], heap[off + p]
            j = p
        return cnt + 1
    if v <= heap[off]:
        return cnt
    heap[off] = v
    j = 0
    while True:
        l = 2 * j + 1
        if l >= k:
            break
        m = l
        if l + 1 < k and heap[off + l + 1] < heap[off + l]:
            m = l + 1
        if heap[off + j] <= heap[off + m]:
            break
        heap[off + m], heap[off + j] = heap[off + j], heap[off + m]
        j = m
    return cnt


@njit(cache=True)
def _start_iteration(e, t, c, chunked, chunk, phead, run_cnt, dctx, computed_tok, cached_tok, done_pref,
                     arrival, prefill_start, queue_wait, it_end, it_req, it_k, it_pt, it_dec):
    """Plan instance ``e``'s next iteration starting at ``t`` (or mark it idle)."""
    j = phead[e]
    b = run_cnt[e]
    k = 0
    if j >= 0:
        if math.isnan(prefill_start[j]):
            prefill_start[j] = t
            queue_wait[j] = t - arrival[j]
        k = computed_tok[j] - done_pref[j]
        if chunked and k > chunk:
            k = chunk
    if chunked:
        if k == 0 and b == 0:
            it_end[e] = math.inf
            it_req[e] = -1
            return
        pt = cm_prefill_time(c, k, cached_tok[j] + done_pref[j]) if k > 0 else 0.0
        ds = cm_decode_step_time(c, b, dctx[e]) if b > 0 else 0.0
        it_req[e] = j if k > 0 else -1
        it_k[e] = k
        it_pt[e] = pt
        it_dec[e] = b > 0
        it_end[e] = t + (pt + ds)
    elif k > 0:  # a whole prefill; the decode batch waits
        pt = cm_prefill_time(c, k, cached_tok[j] + done_pref[j])
        it_req[e] = j
        it_k[e] = k
        it_pt[e] = pt
        it_dec[e] = False
        it_end[e] = t + pt
    elif b > 0:
        it_req[e] = -1
        it_k[e] = 0
        it_pt[e] = 0.0
        it_dec[e] = True
        it_end[e] = t + cm_decode_step_time(c, b, dctx[e])
    else:
        it_end[e] = math.inf
        it_req[e] = -1


@njit(cache=True)
def _admit(e, cap, input_len, output_len, reserved, max_kv, qhead, qtail, qnext, phead, ptail, pnext):
    """Move waiting requests of ``e`` (FIFO) into its prefill queue while their KV fits."""
    while qhead[e] >= 0:
        i = qhead[e]
        need = input_len[i] + output_len[i]
        if reserved[e] + need > cap:
            break
        qhead[e] = qnext[i]
        if qhead[e] < 0:
            qtail[e] = -1
        reserved[e] += need
        if reserved[e] > max_kv[e]:
            max_kv[e] = reserved[e]
        if phead[e] < 0:
            phead[e] = i
        else:
            pnext[ptail[e]] = i
        ptail[e] = i


@njit(cache=True)
def _coupled_kernel(arrival, input_len, output_len, offsets, block_ids, block_tokens,
                    c, E, policy, noise_sd, u_random, z_noise, decode_cap, chunked, chunk,
                    last_use, q_block, q_stamp, meta, hoff,
                    prefill_inst, decode_inst, outcome, cached_tok, fetched_tok, computed_tok,
                    queue_wait, fetch_time, prefill_start, prefill_time, prefill_end,
                    ready, decode_admit, finish, tbt_mean, tbt_tail, max_kv, diag):
    """Simulate the trace on ``E`` coupled instances (outputs pre-set to NaN / −1 / 0).

    ``policy``: 0 random, 1 load (least queued prefill work), 2/3 cache-aware (queued work + own
    prefill with the local prefix). ``diag``: [0] iterations ended, [1] time reversals (must be 0),
    [2] prefill iterations, [3] max decode batch.
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

    for i in range(n + 1):
        t_now = arrival[i] if i < n else math.inf
        # ---------------- every iteration ending at or before this arrival. Instances interact only
        # through arrivals (routing reads their queues and caches), so each is advanced on its own.
        for e in range(E):
            while it_end[e] <= t_now and it_end[e] < math.inf:
                t = it_end[e]
                diag[0] += 1
                if t < t_last[e]:
                    diag[1] += 1
                t_last[e] = t
                # the decode batch of this iteration: one token each
                if it_dec[e]:
                    q = 0
                    while q < run_cnt[e]:
                        j = run_list[e, q]
                        gen[j] += 1
                        hcnt[j] = _keep_largest(heap, hoff[j], hcnt[j], hoff[j + 1] - hoff[j], t - last_tok[j])
                        last_tok[j] = t
                        dctx[e] += 1
                        if gen[j] == output_len[j]:
                            finish[j] = t
                            outcome[j] = 1
                            reserved[e] -= input_len[j] + output_len[j]
                            dctx[e] -= input_len[j] + output_len[j]
                            tbt_mean[j] = (t - prefill_end[j]) / (output_len[j] - 1)
                            kk = hoff[j + 1] - hoff[j]
                            s = 0.0
                            for h in range(kk):
                                s += heap[hoff[j] + h]
                            tbt_tail[j] = s / kk
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
                            run_list[e, run_cnt[e]] = j
                            run_cnt[e] += 1
                            dctx[e] += input_len[j] + 1
                            if run_cnt[e] > diag[3]:
                                diag[3] = run_cnt[e]
                _admit(e, decode_cap, input_len, output_len, reserved, max_kv, qhead, qtail, qnext, phead, ptail, pnext)
                _start_iteration(e, t, c, chunked, chunk, phead, run_cnt, dctx, computed_tok, cached_tok, done_pref,
                                 arrival, prefill_start, queue_wait, it_end, it_req, it_k, it_pt, it_dec)
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
        if qhead[ei] < 0:
            qhead[ei] = i
        else:
            qnext[qtail[ei]] = i
        qtail[ei] = i
        if it_end[ei] == math.inf:  # idle: admit and start right away
            _admit(ei, decode_cap, input_len, output_len, reserved, max_kv, qhead, qtail, qnext, phead, ptail,
                   pnext)
            _start_iteration(ei, a, c, chunked, chunk, phead, run_cnt, dctx, computed_tok, cached_tok, done_pref,
                             arrival, prefill_start, queue_wait, it_end, it_req, it_k, it_pt, it_dec)
