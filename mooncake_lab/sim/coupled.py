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

A request's first chunk (or its whole prompt) is timed ``cm_prefill_reuse_time`` instead: its cached
prefix is loaded from the node's DRAM while it computes (``dram_hbm_load``; the same as
``cm_prefill_time`` when that is off or nothing is cached).

The chunked sum runs the chunk and the decode step back to back: an upper bound on a fused
iteration, which would stream the weights (and pay the per-step overhead) once instead of twice —
at most ``weights_s + overhead_s`` (≈ 14 ms on 8×A800, ``modern``) per iteration.

Decode-only stretches are jumped (:mod:`.decode_math`): while an instance has no prompt to work
on, its batch is constant until the next completion or until an arrival it can admit, so the step
times of that *segment* are a piecewise arithmetic series and its end is computed in closed form
(one loop turn per segment instead of per token). An arrival that fits cuts the segment at the
first step boundary strictly after it, where the iteration-by-iteration engine would admit it.

The batch advances in lockstep: every request in it gets a token at each decode step, so an
instance counts its decode steps (``steps[e]``) and keeps its batch as a min-heap (:mod:`.heaps`) on the step at
which each request completes (joined at step s with ``output`` tokens to make, one of them out:
``s + output − 1``). An event (a segment or an iteration with a decode step) is O(1) in the batch
size, plus O(log b) per completion — no loop over the batch.

Token intervals of a request, without storing one per token. Each instance logs per event the time
of its first token (``ev_t1``) and that token's interval for the requests that had a token at the
previous event (``ev_v``: it may include a stall, prefills run while the batch waited), and a
segment's steps 2… as arithmetic runs (``log_*``, ≤ 3 per event). A request's intervals are its
first one (from its prompt's end to the first event after it joined), ``ev_v`` of the later events
and the runs logged since it joined. On completion the ``ceil((output − 1)/10)`` largest of the
first two kinds go to a min-heap (a sequential pass over the instance's log), and the mean of the
longest 10% is taken over the heap and the runs (:func:`~.decode_math.top_k_sum`). It sums the
same values in the same (non-increasing) order however they were collected: the result does not
depend on the order of offering.

Each log is a row per instance of fixed width (:func:`log_widths`), slid when full: a request's
entries lie within its last ``output − 1`` events, so a row keeps the newest of them. (Speed: rows
allocated once — a row reassigned in the loop makes numba count references at every use.)

Routers (``prefill_policy`` a name of :data:`.routers.ROUTERS`, codes ≥ 5): at each arrival, after
every event up to it, the kernel fills a :class:`~.routers.RouterInputs` per instance and calls
:func:`~.routers.route`. Kept as counters, O(1) per event: ``pending_tokens`` (+ prompt − cached at
dispatch, − at the iteration that computes its last prompt token), ``inflight`` (− at completion),
``queued`` (− at the start of its first prefill iteration), ``recent_*`` (a running count and sum,
+ at dispatch, − when the request's arrival leaves the window, in arrival order; the sum is reset to
0 when the count is). Read at the arrival, O(1) per instance (plus the prefix match):
``matched_blocks`` / ``tree_blocks`` (the true cache, or the router's belief), and
``live_kv_tokens`` = KV *held*, not reserved: the batch's context (prompt + tokens so far; inside
a jumped segment, the steps whose boundary is ≤ the arrival counted) + the whole prompt of the
request being prefilled (the head of the prefill queue). The router arguments are ``None`` for the
other policies: numba prunes that code, their results and speed are unchanged.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..jit import helper_njit
from ..prefix_cache import _match_prefix, _touch_blocks
from ..roofline import cm_decode_step_time, cm_prefill_reuse_time, cm_prefill_time
from .decode_math import cut_segment, segment_pieces, steps_until_after, time_after, top_k_sum
from .heaps import heap_pop, heap_push
from .kernel import _reusable_tokens
from .routers import ROUTERS, belief_insert, belief_match, deepest_entered, note_entered, route

SGLANG = ROUTERS["sglang"]  # its rule reads RouterInputs.deepest_entered

__all__ = ["tail_slots", "log_widths"]


def tail_slots(output_len: np.ndarray) -> np.ndarray:
    """Offsets (length n + 1): request i takes the mean of its ``ceil((out − 1)/10)`` longest intervals."""
    k = (np.maximum(np.asarray(output_len, dtype=np.int64) - 1, 0) + 9) // 10
    return np.concatenate([[0], np.cumsum(k)]).astype(np.int64)


def log_widths(input_len: np.ndarray, output_len: np.ndarray, chunked: bool, chunk: int) -> tuple:
    """Entries a coupled instance's event log and run log keep (``(w_ev, w_run)``; rows are twice as wide).

    A request's events are ≤ ``output − 1`` and each logs ≤ 3 runs; no row needs more than every
    event of the run: ≤ 2n decode-only segments (each ends at a completion or is cut by an arrival)
    plus the iterations with a prefill chunk (``ceil(prompt / chunk)`` per request at most, one
    without chunking).
    """
    out = np.asarray(output_len, dtype=np.int64)
    n = len(out)
    top = int(out.max()) if n else 1
    chunks = int(((np.asarray(input_len, dtype=np.int64) + chunk - 1) // chunk).sum()) if chunked else n
    return min(top + 1, 2 * n + chunks + 1), min(3 * top + 3, 6 * n + 8)


@helper_njit
def _slide(a, e, keep):
    """Move the last ``keep`` columns of row ``e`` of ``a`` to its front (a full log row)."""
    w = a.shape[1]
    for c in range(keep):
        a[e, c] = a[e, w - keep + c]


@helper_njit
def _offer(heap, kk, v):
    """Offer ``v`` (s) to ``heap[:kk]``, the ``kk`` largest values so far in ascending order (−inf while
    fewer were offered): a min-heap, ``heap[0]`` the smallest.

    A larger value drops ``heap[0]``: slot ``j`` takes ``min(heap[j + 1], max(heap[j], v))`` (the values
    below ``v`` move down one, ``v`` lands between). Branch-free, so vectorised: at the conversation
    trace's kk ≈ 35 cheaper than a binary heap's hard-to-predict sift, and the values come out sorted.
    """
    if v > heap[0]:
        for j in range(kk - 1):
            heap[j] = min(heap[j + 1], max(heap[j], v))
        heap[kk - 1] = max(heap[kk - 1], v)


@helper_njit
def _tail_mean(e, kk, first, ev_v, lo, hi, heap, r0, r1, log_a, log_d, log_m, buf_a, buf_d, buf_m, hkey, hidx):
    """Mean (s) of the longest ``kk`` token intervals of a request completing on ``e``.

    Its intervals are ``first`` (its first one), ``ev_v[e, lo:hi]`` (the events after its first)
    and the runs ``log_*[e, r0:r1]``. The ``kk`` largest of the first two kinds go to ``heap``
    (:func:`_offer`), newest first (intervals grow along a prompt's chunks: fewer insertions); its
    smallest value θ is then a lower bound of the answer's values: a run whose largest value is ≤ θ
    cannot change the sum (a value equal to θ is interchangeable with the heap's), so it is skipped.
    :func:`~.decode_math.top_k_sum` takes the heap largest first (each value lands at the end of its
    list), then the runs.
    """
    for j in range(kk):
        heap[j] = -math.inf
    for i in range(hi - 1, lo - 2, -1):  # i = lo − 1: first
        _offer(heap, kk, first if i < lo else ev_v[e, i])
    theta = heap[0]  # −inf if fewer than kk were offered
    nr = 0
    for h in range(kk - 1, kk - 1 - min(kk, hi - lo + 1), -1):
        buf_a[nr] = heap[h]
        buf_d[nr] = 0.0
        buf_m[nr] = 1
        nr += 1
    for r in range(r0, r1):
        if log_a[e, r] + log_d[e, r] * (log_m[e, r] - 1) > theta:  # its largest value (runs don't decrease)
            buf_a[nr] = log_a[e, r]
            buf_d[nr] = log_d[e, r]
            buf_m[nr] = log_m[e, r]
            nr += 1
    return top_k_sum(buf_a, buf_d, buf_m, nr, kk, hkey, hidx) / kk


@helper_njit
def _read_router_inputs(rp, ri, a, blocks, input_len, last_use, meta, b_last_use, b_meta, b_touched, b_entered,
                        dctx, run_cnt, seg_n, seg_t0, pa, pd, pm, pn, phead):
    """The :class:`~.routers.RouterInputs` read at arrival ``a`` (s) rather than kept as counters: the
    prefix match and cache size (true caches, or the belief) and the KV each instance holds."""
    for f in range(len(dctx)):
        if rp.belief:
            ri.matched_blocks[f] = belief_match(b_last_use, b_touched, f, blocks, a, rp.belief_ttl)
            ri.tree_blocks[f] = b_meta[f, 1]
        else:
            ri.matched_blocks[f] = _match_prefix(last_use, f, blocks)
            ri.tree_blocks[f] = meta[f, 1]
        if rp.code == SGLANG:  # when the deepest matched block entered that view (its last_tenant)
            ri.deepest_entered[f] = deepest_entered(b_entered, f, blocks, ri.matched_blocks[f])
        kv = dctx[f]
        if seg_n[f] > 0:  # a jumped decode-only segment: its steps ending at or before a are done
            kv += run_cnt[f] * (steps_until_after(seg_t0[f], a, pa[f], pd[f], pm[f], pn[f]) - 1)
        if phead[f] >= 0:  # the prompt being prefilled
            kv += input_len[phead[f]]
        ri.live_kv_tokens[f] = kv


@helper_njit
def _leave_window(ri, arrival, prefill_inst, full_pt, lo, i, lim):
    """Requests ``lo`` … ``i − 1`` that arrived at or before ``lim`` (s) leave the routers' window;
    returns the first one still in it."""
    while lo < i and arrival[lo] <= lim:
        f = prefill_inst[lo]
        if f >= 0:
            ri.recent_requests[f] -= 1
            ri.recent_prefill_s[f] -= full_pt[lo]
            if ri.recent_requests[f] == 0:
                ri.recent_prefill_s[f] = 0.0  # no rounding residue
        lo += 1
    return lo


@njit(cache=True, nogil=True)  # nogil: independent runs can go in parallel threads
def _coupled_kernel(arrival, input_len, output_len, offsets, block_ids, block_tokens,
                    c, E, policy, noise_sd, u_random, z_noise, decode_cap, chunked, chunk,
                    last_use, q_block, q_stamp, meta, hoff, w_ev, w_run,
                    prefill_inst, decode_inst, outcome, cached_tok, fetched_tok, computed_tok,
                    queue_wait, fetch_time, prefill_start, prefill_time, prefill_end,
                    ready, decode_admit, finish, tbt_mean, tbt_tail, max_kv, diag,
                    rp, ri, b_last_use, b_q_block, b_q_stamp, b_meta, b_touched, b_entered):
    """Simulate the trace on ``E`` coupled instances (outputs pre-set to NaN / −1 / 0).

    ``policy``: 0 random, 1 load (least queued prefill work), 2/3 cache-aware (queued work + own
    prefill with the local prefix), ≥ 5 a router: ``rp`` its :class:`~.routers.RouterParams`, ``ri``
    zeroed :class:`~.routers.RouterInputs`, ``b_*`` the belief's cache arrays and ``touched_at``
    (:func:`~.routers.belief_match`; dummies unless ``rp.belief``) and ``entered_at``
    (:func:`~.routers.note_entered`; SGLang only); all ``None`` for policies < 5.
    ``diag``: [0] iterations ended (a jumped segment counts each of its steps), [1] time reversals
    (must be 0), [2] prefill iterations, [3] max decode batch.
    ``hoff``: :func:`tail_slots`; ``w_ev``, ``w_run``: :func:`log_widths`.
    """
    n = len(arrival)
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
    run_cnt = np.zeros(E, dtype=np.int64)  # decode batch size
    steps = np.zeros(E, dtype=np.int64)    # decode steps run so far
    min_need = 1
    if n > 0:
        min_need = np.min(input_len + output_len)
    maxb = min(n, int(decode_cap // max(min_need, 1)) + 1) + 1
    bkey = np.empty((E, maxb), dtype=np.int64)  # the batch as a min-heap: step at which each completes
    bidx = np.empty((E, maxb), dtype=np.int64)  # … and its request
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
    # logs, a row per instance of twice their width, slid when full (absolute entry counts n, the
    # first column's entry base; a request's entries start at its marks)
    ev_t1 = np.empty((E, 2 * w_ev))    # an event's first token, s
    ev_v = np.empty_like(ev_t1)        # … its interval for the requests that had a token before, s
    ev_n = np.zeros(E, dtype=np.int64)
    ev_base = np.zeros(E, dtype=np.int64)
    mark = np.zeros(n, dtype=np.int64)
    last_dec = np.full(E, -math.inf)   # time of the last event, s
    log_a = np.empty((E, 2 * w_run))   # runs: first value, s
    log_d = np.empty_like(log_a)       # … increment, s
    log_m = np.empty(log_a.shape, dtype=np.int64)  # … values
    log_n = np.zeros(E, dtype=np.int64)
    log_base = np.zeros(E, dtype=np.int64)
    run_mark = np.zeros(n, dtype=np.int64)
    kmax = 1
    if n > 0:
        kmax = max(1, (max(np.max(output_len) - 1, 0) + 9) // 10)
    buf_a = np.empty(2 * w_run + kmax + 1)  # scratch of _tail_mean: the heap and a row's runs
    buf_d = np.empty_like(buf_a)
    buf_m = np.empty(len(buf_a), dtype=np.int64)
    hkey = np.empty_like(buf_a)
    hidx = np.empty_like(buf_m)
    heap = np.empty(kmax)  # the largest intervals of a completing request (min-heap)
    rr = 0        # routing decisions so far (routers)
    win_lo = 0    # first request still in the routers' statistics window

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
                            r = log_n[e] - log_base[e]
                            if r == log_a.shape[1]:
                                _slide(log_a, e, w_run)
                                _slide(log_d, e, w_run)
                                _slide(log_m, e, w_run)
                                log_base[e] += r - w_run
                                r = w_run
                            log_a[e, r] = a0
                            log_d[e, r] = pd[e, p]
                            log_m[e, r] = m
                            log_n[e] += 1
                elif it_dec[e]:  # an iteration with a prefill chunk and a decode step
                    nd = 1
                if nd > 0:
                    # every request of the batch gets nd tokens; the event is logged, then the
                    # requests whose last token this was complete
                    dctx[e] += run_cnt[e] * nd
                    steps[e] += nd
                    r = ev_n[e] - ev_base[e]
                    if r == ev_t1.shape[1]:
                        _slide(ev_t1, e, w_ev)
                        _slide(ev_v, e, w_ev)
                        ev_base[e] += r - w_ev
                        r = w_ev
                    ev_t1[e, r] = t1
                    ev_v[e, r] = t1 - last_dec[e]  # read only by requests that had a token then
                    ev_n[e] += 1
                    last_dec[e] = t
                    while run_cnt[e] > 0 and bkey[e, 0] == steps[e]:
                        j = bidx[e, 0]
                        run_cnt[e] = heap_pop(bkey, bidx, e, run_cnt[e])
                        finish[j] = t
                        outcome[j] = 1
                        reserved[e] -= input_len[j] + output_len[j]
                        dctx[e] -= input_len[j] + output_len[j]
                        if rp is not None:
                            ri.inflight[e] -= 1
                        tbt_mean[j] = (t - prefill_end[j]) / (output_len[j] - 1)
                        r = mark[j] - ev_base[e]
                        tbt_tail[j] = _tail_mean(e, hoff[j + 1] - hoff[j], ev_t1[e, r] - prefill_end[j], ev_v,
                                                 r + 1, ev_n[e] - ev_base[e], heap, run_mark[j] - log_base[e],
                                                 log_n[e] - log_base[e], log_a, log_d, log_m, buf_a, buf_d, buf_m,
                                                 hkey, hidx)
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
                        if rp is not None:
                            ri.pending_tokens[e] -= computed_tok[j]
                        prefill_end[j] = t
                        ready[j] = t
                        decode_admit[j] = t
                        if output_len[j] == 1:
                            finish[j] = t
                            outcome[j] = 1
                            reserved[e] -= input_len[j] + output_len[j]
                            if rp is not None:
                                ri.inflight[e] -= 1
                        else:  # one token out, output − 1 steps to go
                            mark[j] = ev_n[e]
                            run_mark[j] = log_n[e]
                            run_cnt[e] = heap_push(bkey, bidx, e, run_cnt[e], steps[e] + output_len[j] - 1, j)
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
                        if rp is not None:
                            ri.queued[e] -= 1
                    k = computed_tok[j] - done_pref[j]
                    if chunked and k > chunk:
                        k = chunk
                if k == 0 and b > 0:  # decode only: one segment up to the next completion
                    nmin = bkey[e, 0] - steps[e]
                    pn[e] = segment_pieces(c, b, dctx[e], nmin, pa[e], pd[e], pm[e])
                    seg_n[e] = nmin
                    seg_t0[e] = t
                    it_end[e] = time_after(t, pa[e], pd[e], pm[e], pn[e], nmin)
                elif k == 0:
                    it_end[e] = math.inf  # idle
                else:
                    if done_pref[j] == 0:  # the first chunk loads the cached prefix from DRAM (rule 3b)
                        pt = cm_prefill_reuse_time(c, k, cached_tok[j])
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
        if rp is not None:  # a router (policy ≥ 5)
            win_lo = _leave_window(ri, arrival, prefill_inst, full_pt, win_lo, i, a - rp.window_s)
            _read_router_inputs(rp, ri, a, blocks, input_len, last_use, meta, b_last_use, b_meta, b_touched,
                                b_entered, dctx, run_cnt, seg_n, seg_t0, pa, pd, pm, pn, phead)
            ei = route(rp, ri, Lin, len(blocks), block_tokens, u_random[i], rr, decode_cap)
            rr += 1
            if ei < 0 or ei >= E:
                raise ValueError("sim/routers.py: route() gave no instance for this router code")
        elif policy == 0:
            ei = min(int(u_random[i] * E), E - 1)
        else:
            for f in range(E):
                est[f] = pend[f]
                if policy >= 2:
                    local[f] = _match_prefix(last_use, f, blocks)
                    cl = _reusable_tokens(local[f], Lin, block_tokens)
                    est[f] += cm_prefill_reuse_time(c, Lin - cl, cl)
            if noise_sd > 0.0:
                for f in range(E):
                    est[f] *= max(0.0, 1.0 + noise_sd * z_noise[i, f])
            ei = 0
            for f in range(1, E):
                if est[f] < est[ei]:
                    ei = f
        cached = _reusable_tokens(_match_prefix(last_use, ei, blocks), Lin, block_tokens)
        if rp is not None:
            if rp.code == SGLANG and not rp.belief:  # SGLang matching the true caches: entry times
                note_entered(last_use, b_entered, b_entered, ei, blocks, a, math.inf)
        _touch_blocks(last_use, q_block, q_stamp, meta, ei, blocks)
        prefill_inst[i] = ei
        decode_inst[i] = ei
        cached_tok[i] = cached
        computed_tok[i] = Lin - cached
        fetched_tok[i] = 0
        fetch_time[i] = 0.0
        prefill_time[i] = 0.0
        full_pt[i] = cm_prefill_reuse_time(c, Lin - cached, cached)
        pend[ei] += full_pt[i]
        if rp is not None:
            ri.pending_tokens[ei] += Lin - cached
            ri.inflight[ei] += 1
            ri.queued[ei] += 1
            ri.recent_requests[ei] += 1
            ri.recent_prefill_s[ei] += full_pt[i]
            if rp.belief:
                if rp.code == SGLANG:
                    note_entered(b_last_use, b_touched, b_entered, ei, blocks, a, rp.belief_ttl)
                belief_insert(b_last_use, b_q_block, b_q_stamp, b_meta, b_touched, ei, blocks, a, rp.belief_ttl)
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
