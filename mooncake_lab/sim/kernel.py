"""The cluster simulator as numba kernels over flat arrays (semantics: :mod:`mooncake_lab.sim.reference`).

One pass over the requests in arrival order:

* **prefill side** (no event queue needed): each prefill instance keeps ``pre.free[p, s]``, the time
  stage s of its FIFO pipeline is free (one stage for a single node: its "busy until"), and
  ``pre.link[p, s]``, when stage s's NIC is free (CPP, :mod:`.cpp_group`); a request dispatched at
  ``a`` to ``p`` starts at ``max(a, pre.free[p, 0])``, fetches a remote prefix if the policy chose
  to, and its chunks go through the stages (:func:`.cpp_group.group_prefill`), advancing them. Its
  KV then reaches decode at ``ready`` (a heap of ready events, since prefill ends are not in
  arrival order). Its decode instance is chosen at ``ready`` (late binding) or, with
  ``decode_binding="arrival"``, here at the arrival (``dq.bound_kv``: each instance's KV in flight).
* **routers** (``prefill_policy`` a :data:`.routers.ROUTERS` name): the prefill instance comes from
  :func:`.routers.route` on per-instance loads kept as pointers into each instance's FIFO list of
  dispatched requests (:class:`~.state.Dispatched`; also shown to student policies), matches from the
  true caches or the router's belief; no remote prefix is fetched (but Dynamo's shared tier fetches the
  pool's best, ``router.dynamo_shared`` > 0: reference rule 2a). The Conductor's policies pass
  ``router=None`` and numba drops that code.
* **network links** (``network_contention``, :mod:`.links`): per prefill node a send and a receive
  link, and per decode node a receive link (used when the decode instance is chosen at arrival),
  each a calendar of reserved intervals (:class:`~.state.Links`) that fetches and KV streams reserve
  when their request is committed.
* **decode side** (discrete events): before each arrival the decode pool is advanced to that time
  (hook for arrival-time admission), processing ready events and decode-instance events in time
  order. A decode instance jumps from event to event (:mod:`.decode_math`): its next event is the
  next completion, or the first step boundary after a ready request that fits was queued — and,
  with unknown output lengths (KV growing ``b`` tokens per step from ``dec.ctx``), the first step
  whose KV would exceed the capacity: ``n = ⌊(capacity − ctx) / b⌋ + 1`` steps on, where the
  node preempts its newest-admitted request (to the front of its queue; a recompute stall is
  folded into the first step after its re-admission, a piece of its own).

The state is grouped (:mod:`.state`): the inputs :class:`~.state.TraceArrays`, :class:`~.state.Params`,
:class:`~.state.Outputs` and the prefix caches; the kernel's own :class:`~.state.Prefill` (``pre``),
:class:`~.state.Conductor` (``cond``), :class:`~.state.Links` (``net``), :class:`~.state.DecodeNodes` (``dec``),
:class:`~.state.DecodeQueues` (``dq``), :class:`~.state.DecodeRequests` (``dr``), the run log, stints,
interval buffers and ready heap. Each helper takes the groups it reads or changes.

Every step of a decode segment is logged as an arithmetic run (per instance, linked backwards), so
on completion a request's token intervals are exactly its runs since admission: the mean and the
mean of the longest 10% follow without storing one interval per token. A preempted request's
earlier *stints* (admission → preemption) are kept as records of their first and last run.

Speed
-----
Numba reference-counts arrays: a function that takes an array increments its count on entry and
decrements it on exit, and so does every view (``pa[d]``, a slice) and every array taken out of a
group (``dec.next_t``), each an atomic operation that LLVM cannot remove across a call (and that keeps
it from holding values in registers across one). In the helpers that was ~45% of a run; in the loop
itself, which takes arrays out of the state's groups at every step, about half of what remained. So only
:func:`_kernel` allocates (the state, once per run); the pass over the arrivals, :func:`_run`, and the
helpers below, in :mod:`.decode_math` and :mod:`mooncake_lab.prefix_cache` compile with
:data:`mooncake_lab.jit.helper_njit` (no reference counting, hence no allocation): they only index
arrays that :func:`_kernel` or its caller keeps alive (conversation 8P+8D kvcentric 87 → 46 ms when
:func:`_run` was split off, results bit-identical). A call passes each array as ~7 words, so a helper
called per block or per event takes only the arrays it uses (a cache touch per block was most of a
touch's cost: :func:`mooncake_lab.prefix_cache._touch_blocks` is one loop). Big per-run tables come
from a pool (:func:`mooncake_lab.prefix_cache.pooled_array`): a new one costs a page fault per 4 KiB
written. ``benchmarks/bench_sim.py`` measures it; ``benchmarks/check_identical.py`` checks a change
leaves every result bit-identical.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..cpp import cm_stage_coefficients
from ..jit import helper_njit
from ..prefix_cache import _empty_cache, _match_prefix, _touch_blocks
from ..roofline import cm_decode_step_time, cm_kv_transfer_time, cm_prefill_time
from .admission import decode_load, instance_decode_load, pool_tbt_load, prefill_load
from .conductor_view import Request, View
from .config import ROLE_SWITCH_AT_LOAD
from .cpp_group import group_fetch_time, group_prefill
from .decode_math import cut_segment, segment_pieces, steps_until_after, time_after, top_k_sum
from .heaps import heap_pop, heap_push
from .routers import (ROUTERS, DecodeInputs, RouterInputs, aibrix_least_running, belief_insert, belief_match,
                      deepest_entered, note_entered, route, route_decode)

SGLANG = ROUTERS["sglang"]  # its rule reads RouterInputs.deepest_entered
DYNAMO = ROUTERS["dynamo"]  # with a shared tier (router.dynamo_shared > 0) its choice fetches the pool's best
from .state import (Conductor, DecodeNodes, DecodeQueues, DecodeRequests, Dispatched, Intervals, Links, Prefill, Roles,
                    ReadyHeap, RunLog, Stints)

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


# ---------------------------------------------------------------------------- network links
@helper_njit
def _fit(net, l, t, d):
    """Earliest ``b ≥ t`` (s) with ``[b, b + d]`` free on link ``l``: its reservations
    ``[net.begin[l, k], net.end[l, k]]``, ``net.live[l, 0]`` ≤ k < ``net.live[l, 1]``, are disjoint and
    sorted (:mod:`.links`)."""
    lo = net.live[l, 0]  # the first reservation ending after t (ends are sorted too): binary search
    hi = net.live[l, 1]
    while lo < hi:
        m = (lo + hi) // 2
        if net.end[l, m] <= t:
            lo = m + 1
        else:
            hi = m
    for k in range(lo, net.live[l, 1]):
        if net.begin[l, k] >= t + d:
            break
        t = net.end[l, k]
    return t


@helper_njit
def _fit_pair(net, l1, l2, t, d):
    """Earliest ``b ≥ t`` with ``[b, b + d]`` free on both links ``l1`` and ``l2``."""
    while True:
        b = _fit(net, l2, _fit(net, l1, t, d), d)
        if b == t:
            return b
        t = b


@helper_njit
def _fit_group(net, l0, n, ld, t, d):
    """Earliest ``b ≥ t`` with ``[b, b + d]`` free on every link ``l0 … l0 + n − 1`` and on link
    ``ld`` (a decode node's receive link; none if ``ld < 0``). (The earliest common gap does not
    depend on the order the links are tried in; the decode link, the busier, goes first.)"""
    while True:
        b = t
        if ld >= 0:
            b = _fit(net, ld, b, d)
        for l in range(l0, l0 + n):
            b = _fit(net, l, b, d)
        if b == t:
            return b
        t = b


@helper_njit
def _book(net, l, b, e, now):
    """Reserve ``[b, e]`` on link ``l`` (a gap :func:`_fit` found), first dropping reservations
    that ended by ``now`` (no later transfer can start before the current arrival: the row's live
    part moves right). A row has a slot per request (a request books each link at most once), so it
    never fills. Sorted by begin, then end, so the ends are sorted too (a zero-second transfer at the
    begin of another sorts before it: :func:`_fit`'s binary search needs it)."""
    lb = net.begin
    le = net.end
    h = net.live[l, 0]
    m = net.live[l, 1]
    while h < m and le[l, h] <= now:
        h += 1
    lo = h  # where it goes: the first reservation after (b, e), by binary search (an overloaded link has
    hi = m  # thousands booked ahead: the KV streams of every request still queued for prefill)
    while lo < hi:
        k = (lo + hi) // 2
        if lb[l, k] > b or (lb[l, k] == b and le[l, k] > e):
            hi = k
        else:
            lo = k + 1
    j = lo
    for k in range(m, j, -1):  # the later ones move one slot right (a plain copy loop: vectorised)
        lb[l, k] = lb[l, k - 1]
        le[l, k] = le[l, k - 1]
    lb[l, j] = b
    le[l, j] = e
    net.live[l, 0] = h
    net.live[l, 1] = m + 1


@helper_njit
def _backlog(net, l0, n, a):
    """Backlog of an instance's links ``l0 … l0 + n − 1`` at ``a`` (s): the most seconds of
    transfers any of them has reserved after ``a``."""
    w = 0.0
    for l in range(l0, l0 + n):
        s = 0.0
        for k in range(net.live[l, 0], net.live[l, 1]):
            if net.end[l, k] > a:
                s += net.end[l, k] - max(net.begin[l, k], a)
        w = max(w, s)
    return w


@helper_njit
def _fetch_begin(net, src, p, t, d, X, nl):
    """When a ``d``-second fetch from instance ``src`` to ``p`` requested at ``t`` has all its X
    node pairs started (pair s: the send link of ``src``'s node s, the receive link of ``p``'s
    node s; links 0 … P·X − 1 send, ``nl`` = P·X … 2·P·X − 1 receive, node (p, s) = p·X + s)."""
    b = t
    for s in range(X):
        b = max(b, _fit_pair(net, src * X + s, nl + p * X + s, t, d))
    return b


@helper_njit
def _best_source(net, cond, best, p, t, d, X):
    """``(source, begin)`` of a ``d``-s fetch to ``p`` requested at ``t``: of the instances holding
    the pool's best prefix (``cond.local[q] == best``), the one it can begin from first (ties: lowest);
    not before the prefix is complete there (``cond.src_ready[q]``)."""
    q_best = -1
    b_best = math.inf
    P = len(cond.local)
    for q in range(P):
        if cond.local[q] == best and q != p:
            lo = max(t, cond.src_ready[q])
            if lo >= b_best:  # it cannot begin before the best so far (the usual case: links free, b = t)
                continue
            b = _fetch_begin(net, q, p, lo, d, X, P * X)
            if b < b_best:
                b_best = b
                q_best = q
    return q_best, b_best


# ---------------------------------------------------------------------------- prefill instances
@helper_njit
def _prefill_on(c, sc, pre, cpp, p, ready, n_new, n_cached):
    """:func:`.cpp_group.group_prefill` on instance ``p``: ``(finish, span)`` in s; ``p``'s state after
    the request goes to ``pre.new_free`` / ``pre.new_link``. (A call here, not inlined: see "Speed".)"""
    return group_prefill(c, sc, pre.free, pre.link, p, pre.new_free, pre.new_link, ready, n_new, n_cached,
                         cpp.group_size, cpp.chunk, cpp.act_bytes, cpp.bandwidth, cpp.overlap)


@helper_njit
def _fetches(prm, local, best):
    """Algorithm 1's fetch rule for an instance holding ``local`` blocks of the prefix when the pool's
    best holds ``best``: best > local and best / local ≥ the threshold (local 0 ⇒ ∞). By prefix ratio,
    not by comparing times: it fetches even where recomputing would be faster."""
    return best > local and (local == 0 or best >= prm.threshold * local)


# ---------------------------------------------------------------------------- routers' inputs
@helper_njit
def _advance_loads(fl, ri, prefill_start, prefill_end, input_len, computed_tok, prefill_time, arrival, a, window_s):
    """The per-instance loads of :class:`~.routers.RouterInputs` at ``a`` (s): move each instance's
    pointers (:class:`~.state.Dispatched`) past the requests that started (→ live), ended (→ neither
    pending, in flight nor live) and left the window (arrival ≤ a − ``window_s``). An event at
    exactly ``a`` has happened. ``recent_prefill_s`` is a running sum (+ at dispatch, − when a
    request leaves the window, exactly 0 when the window is empty)."""
    for p in range(len(fl.tail)):
        j = fl.started[p]
        while j >= 0 and prefill_start[j] <= a:
            ri.live_kv_tokens[p] += input_len[j]
            ri.queued[p] -= 1
            j = fl.nxt[j]
        fl.started[p] = j
        j = fl.ended[p]  # never past ``started``: a request ends after it starts
        while j >= 0 and prefill_end[j] <= a:
            ri.pending_tokens[p] -= computed_tok[j]
            ri.live_kv_tokens[p] -= input_len[j]
            ri.inflight[p] -= 1
            j = fl.nxt[j]
        fl.ended[p] = j
        j = fl.window[p]
        while j >= 0 and arrival[j] <= a - window_s:
            ri.recent_requests[p] -= 1
            ri.recent_prefill_s[p] -= prefill_time[j]
            j = fl.nxt[j]
        fl.window[p] = j
        if ri.recent_requests[p] == 0:
            ri.recent_prefill_s[p] = 0.0


@helper_njit
def _dispatch(fl, ri, j, p, computed, prefill_s):
    """Request ``j`` (``computed`` prompt tokens, ``prefill_s`` s) was sent to prefill instance ``p``."""
    if fl.tail[p] >= 0:
        fl.nxt[fl.tail[p]] = j
    fl.tail[p] = j
    if fl.started[p] < 0:
        fl.started[p] = j
    if fl.ended[p] < 0:
        fl.ended[p] = j
    if fl.window[p] < 0:
        fl.window[p] = j
    ri.pending_tokens[p] += computed
    ri.inflight[p] += 1
    ri.queued[p] += 1
    ri.recent_requests[p] += 1
    ri.recent_prefill_s[p] += prefill_s


@helper_njit
def _decode_by_choice(choice, di, c, t, dec, dq, bound_n, kvh, u, P, k, cap, max_req, max_thr):
    """A router's decode node at ``t`` (``RouterParams.decode_choice`` 1–4, :func:`.routers.route_decode`)
    from each node's :class:`~.routers.DecodeInputs`: running, queued, bound in flight, tokens/s now
    (:func:`_decode_rate`, for ``aibrix_pd`` only, and only when its running-requests fast path does not
    decide: the rates are what that rule reads next) and KV ``kvh`` (held now, or reserved)."""
    for d in range(len(di.running)):
        di.running[d] = dec.batch[d]
        di.queued[d] = dq.queued[d]
        di.bound[d] = bound_n[d]
        di.kv_used[d] = kvh[d]
    if choice == 4 and aibrix_least_running(di.running, max_req) < 0:  # no running-requests fast path:
        for d in range(len(di.running)):                                # AIBrix reads the rates too
            di.rate[d] = _decode_rate(c, d, t, dec)
    return route_decode(choice, di, u, P, k, cap, max_req, max_thr)


# ---------------------------------------------------------------------------- decode instances
@helper_njit
def _start_segment(d, c, dec, done_step, grow, cap_i):
    """After an event at ``dec.at[d]``: plan the segment up to the next completion (or go idle).

    ``grow`` (unknown output lengths): also up to the first step whose context (= KV held,
    ``ctx + b·n`` at step n) would exceed ``cap_i`` tokens, where the node must preempt. A pending
    recompute ``dec.stall[d]`` (s) is folded into the segment's first step.
    """
    b = dec.batch[d]
    if b == 0:
        dec.next_t[d] = math.inf
        dec.next_n[d] = 0
        dec.pn[d] = 0
        return
    nmin = done_step[dec.running[d, 0]]
    for q in range(1, b):
        s = done_step[dec.running[d, q]]
        if s < nmin:
            nmin = s
    n_c = nmin - dec.steps[d]
    if grow:
        n_o = (cap_i - dec.ctx[d]) // b + 1  # ctx ≤ cap_i here: n_o ≥ 1
        if n_o < n_c:
            n_c = n_o
    npc = segment_pieces(c, b, dec.ctx[d], n_c, dec.pa[d], dec.pd[d], dec.pm[d])
    if dec.stall[d] > 0.0:
        npc = _stall_first_step(dec.stall[d], dec.pa[d], dec.pd[d], dec.pm[d], npc)
        dec.stall[d] = 0.0
    dec.pn[d] = npc
    dec.next_n[d] = n_c
    dec.next_t[d] = time_after(dec.at[d], dec.pa[d], dec.pd[d], dec.pm[d], npc, n_c)


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
def _steps_done(d, t, dec):
    """Step boundaries of instance ``d``'s current segment at or before ``t`` (< its next event)."""
    if dec.batch[d] == 0:
        return 0
    return steps_until_after(dec.at[d], t, dec.pa[d], dec.pd[d], dec.pm[d], dec.pn[d]) - 1


@helper_njit
def _held_now(d, t, dec):
    """KV tokens instance ``d``'s running requests hold at ``t`` (prompt + tokens so far; unknown outputs)."""
    return dec.ctx[d] + dec.batch[d] * _steps_done(d, t, dec)


@helper_njit
def _decode_rate(c, d, t, dec):
    """Tokens/s instance ``d`` generates at ``t``: its batch / the step time at its context now (0 idle)."""
    b = dec.batch[d]
    if b == 0:
        return 0.0
    return b / cm_decode_step_time(c, b, _held_now(d, t, dec))


@helper_njit
def _kv_now(t, dec, held):
    """``held[d]`` = :func:`_held_now` for every instance d."""
    for d in range(len(held)):
        held[d] = _held_now(d, t, dec)


@helper_njit
def _cut_segment(d, t, dec):
    """:func:`.decode_math.cut_segment` on decode instance ``d`` at ``t``."""
    cut_segment(d, t, dec.at, dec.next_t, dec.next_n, dec.pa, dec.pd, dec.pm, dec.pn)


@helper_njit
def _enqueue(d, j, dq, qnext, need, front):
    """Queue request ``j`` (needing ``need`` KV tokens) on instance ``d``: at the back, or at the
    ``front`` (a preempted request)."""
    if front:
        qnext[j] = dq.qhead[d]
        if dq.qhead[d] < 0:
            dq.qtail[d] = j
        dq.qhead[d] = j
    else:
        if dq.qhead[d] < 0:
            dq.qhead[d] = j
        else:
            qnext[dq.qtail[d]] = j
        dq.qtail[d] = j
    dq.queued_kv[d] += need
    dq.queued[d] += 1


@helper_njit
def _admit(d, t, c, input_len, output_len, decode_admit, prefill_end, dec, dq, dr, cap, grow):
    """Admit queued requests of instance ``d`` at boundary ``t`` in FIFO order while KV fits.

    Known output lengths: a request reserves input + output. ``grow``: it needs its current KV,
    input + ``gen`` (tokens so far: 1, or more for a preempted one, whose recompute, a prefill of
    input + gen tokens, is added to ``dec.stall[d]``); ``dec.ctx`` is then the KV held.
    """
    while dq.qhead[d] >= 0:
        i = dq.qhead[d]
        g = dr.gen[i]
        if grow:
            need = input_len[i] + g
            if dec.ctx[d] + need > cap:
                break
        else:
            need = input_len[i] + output_len[i]
            if dq.reserved[d] + need > cap:
                break
        dq.qhead[d] = dr.qnext[i]
        if dq.qhead[d] < 0:
            dq.qtail[d] = -1
        dq.queued_kv[d] -= need
        dq.queued[d] -= 1
        if not grow:
            dq.reserved[d] += need
            if dq.reserved[d] > dq.max_kv[d]:
                dq.max_kv[d] = dq.reserved[d]
        if dr.st_head[i] < 0:  # first admission (never preempted)
            decode_admit[i] = t
            if math.isnan(prefill_end[i]):  # inlined (rule 2c): the batch's next step runs its prefill first
                dec.stall[d] += cm_prefill_time(c, float(input_len[i]), 0.0)
                prefill_end[i] = t + dec.stall[d]  # its first token
            dr.cur_gap[i] = prefill_end[i]  # its first interval starts at the prefill's end
        else:  # re-admitted after a preemption: recompute its KV before the next step
            dec.stall[d] += cm_prefill_time(c, float(input_len[i] + g), 0.0)
        dr.cur_adm[i] = t
        dr.adm_seq[i] = dr.seq[0]
        dr.seq[0] += 1
        dr.done_step[i] = dec.steps[d] + output_len[i] - g
        dr.run_mark[i] = dec.last_run[d]
        dec.ctx[d] += input_len[i] + g  # context of its next decode step: prompt + tokens so far
        dec.running[d, dec.batch[d]] = i
        dec.batch[d] += 1


@helper_njit
def _collect_stint(e, mark, adm, gap, log, buf, nr):
    """Append to ``buf`` (from ``nr``) one stint's token intervals as runs: the logged runs from
    ``e`` back to ``mark`` (exclusive), newest first, then its first interval, gap start → first
    token = ``adm − gap`` + its first step; returns the new count."""
    while e != mark:
        buf.a[nr] = log.a[e]
        buf.d[nr] = log.d[e]
        buf.m[nr] = log.m[e]
        nr += 1
        e = log.prev[e]
    o = nr - 1  # the oldest run: its first step is part of the first interval
    first = adm + buf.a[o] - gap
    buf.a[o] = buf.a[o] + buf.d[o]
    buf.m[o] -= 1
    buf.a[nr] = first
    buf.d[nr] = 0.0
    buf.m[nr] = 1
    return nr + 1


@helper_njit
def _finish_tbt(last_run, mark, adm, gap, head, log, st, buf, n_intervals):
    """Mean of the longest 10% of a request's token intervals, from its logged runs.

    A *stint* runs from an admission to a preemption or the finish. Its first interval starts at
    the prefill's end (first stint: admission wait + exposed transfer + first step) or at the
    preemption's boundary (wait in the queue + recompute stall + first step); then one interval per
    step. The current stint: from run ``mark`` (exclusive) to its instance's ``last_run``, admitted at
    ``adm``, its first interval from ``gap``; earlier ones are :class:`~.state.Stints` linked from
    ``head`` (none with known output lengths).
    """
    nr = _collect_stint(last_run, mark, adm, gap, log, buf, 0)
    r = head
    while r >= 0:
        nr = _collect_stint(st.end[r], st.mark[r], st.adm[r], st.gap[r], log, buf, nr)
        r = st.prev[r]
    k = (n_intervals + 9) // 10  # ceil(10%), at least one interval
    return top_k_sum(buf.a, buf.d, buf.m, nr, k, buf.key, buf.idx) / k


@helper_njit
def _inline_target(a, c, Lin, o_len, prm, dec, dq, kvh, grow, binding, cap):
    """Rule 2c: the decode instance a short prefill arriving at ``a`` is inlined into, or −1. The
    instance rule 7 would choose now (least KV + queued [+ bound in flight, binding at arrival]) must
    have an empty queue, room for the request, and run the prefill plus its next step within the TBT
    SLO: ``cm_prefill_time(L) + cm_decode_step_time(b + 1, context + L + 1) ≤ tbt_slo``."""
    D = len(kvh)
    if grow:
        _kv_now(a, dec, kvh)
    db = 0
    best = kvh[0] + dq.queued_kv[0] + (dq.bound_kv[0] if binding == 1 else 0.0)
    for e in range(1, D):
        v = kvh[e] + dq.queued_kv[e] + (dq.bound_kv[e] if binding == 1 else 0.0)
        if v < best:
            best = v
            db = e
    need = Lin + 1 if grow else Lin + o_len
    if dq.qhead[db] >= 0 or kvh[db] + need > cap:
        return -1
    step = cm_prefill_time(c, float(Lin), 0.0) + cm_decode_step_time(c, dec.batch[db] + 1,
                                                                      _held_now(db, a, dec) + Lin + 1)
    return db if step <= prm.tbt_slo else -1


@helper_njit
def _place_candidate(db, need, load_b, load_kv):
    """Start a decode load's per-instance count (``load_b`` requests holding ``load_kv`` KV tokens:
    :class:`~.state.DecodeQueues`) with the arriving request alone (``need`` tokens) on ``db``; returns
    ``(b, kv)`` of the requests not bound to an instance (the candidate when ``db`` < 0: a request still
    in prefill under late binding)."""
    for d in range(len(load_b)):
        load_b[d] = 0.0
        load_kv[d] = 0.0
    if db >= 0:
        load_b[db] = 1.0
        load_kv[db] = float(need)
        return 0.0, 0.0
    return 1.0, float(need)


@helper_njit
def _predicted_population(T, t_decode, a, db, need, inl, outl, decode_admit, ready, decode_inst, dec, dq, dr,
                          heap, hsize, grow):
    """``admission="predicted"``: the requests decoding at ``T``, per instance (:func:`_place_candidate`); those whose
    decode start s (admission, or KV ready if not yet admitted) has s ≤ ``T`` < s + ``t_decode``, over
    every accepted unfinished request, + the candidate; returns the unbound ``(b, kv)``. KV per request
    as the decode side counts it (``grow``: prompt + tokens so far at ``a``; else prompt + output)."""
    sb, sk = _place_candidate(db, need, dq.load_b, dq.load_kv)
    for d in range(len(dq.load_b)):
        k_now = dec.steps[d] + _steps_done(d, a, dec) if grow else 0
        for q in range(dec.batch[d]):
            j = dec.running[d, q]
            if decode_admit[j] <= T and decode_admit[j] + t_decode > T:
                dq.load_b[d] += 1.0
                if grow:  # prompt + tokens so far
                    dq.load_kv[d] += inl[j] + outl[j] - (dr.done_step[j] - k_now)
                else:
                    dq.load_kv[d] += inl[j] + outl[j]
        j = dq.qhead[d]
        while j >= 0:
            s_j = decode_admit[j] if grow and dr.gen[j] > 1 else ready[j]  # preempted: started
            if s_j <= T and s_j + t_decode > T:
                dq.load_b[d] += 1.0
                dq.load_kv[d] += inl[j] + dr.gen[j] if grow else inl[j] + outl[j]
            j = dr.qnext[j]
    for q in range(hsize):
        j = heap.i[0, q]
        if heap.t[0, q] <= T and heap.t[0, q] + t_decode > T:
            k_j = inl[j] + 1 if grow else inl[j] + outl[j]
            e = decode_inst[j]
            if e >= 0:
                dq.load_b[e] += 1.0
                dq.load_kv[e] += k_j
            else:
                sb += 1.0
                sk += k_j
    return sb, sk


# ---------------------------------------------------------------------------- roles that switch (rule 14)
@helper_njit
def _drained(d, t, dec, dq, rl, pre, log, cost):
    """Decode node ``d``, leaving decode, has drained at ``t`` if its batch, queue and bound requests are
    done: then a prefill node, busy until ``t`` + the reload, logged."""
    if rl.draining[d] == 1 and dec.batch[d] == 0 and dq.qhead[d] < 0 and dq.bound_kv[d] == 0.0:
        rl.draining[d] = 0
        rl.serve[d] = 0.0
        rl.pre_on[d] = 1
        pre.free[d, 0] = t + cost
        r = int(rl.sw[0])
        log[r, 3] = t
        log[r, 4] = t + cost


@helper_njit
def _role_step(a, c, prm, pre, dec, dq, kvh, rl, log, cache):
    """Rule 14 at the arrival ``a``: end the switch in progress once its node serves, bring nodes that
    now take decode requests into the loads, and at a check start a switch when one pool is loaded."""
    P = len(rl.pre_on)
    D = len(rl.dec_from)
    for d in range(D):
        if rl.dec_from[d] <= a:
            rl.serve[d] = 1.0
    r = int(rl.sw[0])
    if r >= 0:
        if log[r, 4] <= a:  # NaN (not drained yet) compares False
            rl.sw[0] = -1.0
    if a < rl.sw[1]:
        return
    rl.sw[1] = a + prm.switch_interval
    if rl.sw[0] >= 0:
        return
    n_pre = 0
    q = 0.0
    for p in range(P):
        if rl.pre_on[p] == 1:
            n_pre += 1
            q += max(0.0, pre.free[p, 0] - a)
    lp = q / n_pre / prm.ttft_slo
    n_take = 0
    nd = 0.0
    nb = 0.0
    kt = 0.0
    for d in range(D):
        if rl.dec_from[d] <= a:
            n_take += 1
        if rl.serve[d] > 0.0:
            nd += 1.0
            nb += dec.batch[d] + dq.queued[d]
            kt += kvh[d] + dq.queued_kv[d]
    ld = decode_load(c, nb / nd, kt / nd, prm.decode_cap, prm.tbt_slo)
    rho = prm.switch_ratio
    k = -1
    row = int(rl.sw[2])
    if lp >= ROLE_SWITCH_AT_LOAD and lp >= rho * ld and n_take >= 2:  # a decode node leaves for prefill
        best = math.inf
        for d in range(D):
            if rl.dec_from[d] <= a:
                v = kvh[d] + dq.queued_kv[d] + dq.bound_kv[d]
                if v < best:
                    best = v
                    k = d
        rl.dec_from[k] = math.inf
        rl.draining[k] = 1
        log[row, 0] = a
        log[row, 1] = k
        log[row, 2] = 0.0
        rl.sw[0] = row
        rl.sw[2] = row + 1
        _drained(k, a, dec, dq, rl, pre, log, prm.switch_cost)
    elif ld >= ROLE_SWITCH_AT_LOAD and ld >= rho * lp and n_pre >= 2:  # a prefill node leaves for decode
        best = math.inf
        for p in range(P):
            if rl.pre_on[p] == 1 and pre.free[p, 0] < best:
                best = pre.free[p, 0]
                k = p
        rl.pre_on[k] = 0
        _empty_cache(cache.last_use, cache.q_block, cache.meta, k)
        t_d = max(a, max(pre.free[k, 0], rl.out_until[k]))
        rl.dec_from[k] = t_d + prm.switch_cost
        if rl.dec_from[k] <= a:  # drained and reloaded at once: in the decode pool for this arrival's loads
            rl.serve[k] = 1.0
        log[row, 0] = a
        log[row, 1] = k
        log[row, 2] = 1.0
        log[row, 3] = t_d
        log[row, 4] = t_d + prm.switch_cost
        rl.sw[0] = row
        rl.sw[2] = row + 1


# ---------------------------------------------------------------------------- student policies
@njit(cache=True)
def _fill_view(view, i, a, Lin, best, c, sc, prm, z_noise, pre, cond, links, net, ri, kv_cap):
    """The Conductor's view of request ``i`` arriving at ``a`` (s), per instance p: wait, local
    prefix and prefill, Algorithm 1's fetch decision, fetch (with ``links`` not None: + the wait
    for the links) and prefill after it, and the TTFT estimate with the same arithmetic (and noise) as
    ``kvcentric``'s; the backlog of p's send and receive links; the loads of ``ri`` (the routers'
    inputs, :func:`_advance_loads`; left 0 where ``ri`` is empty) and ``kv_util`` = live KV / ``kv_cap`` tokens."""
    X = prm.cpp.group_size
    P = len(cond.local)
    loads = len(ri.pending_tokens) == P  # tracked for routers and student policies only
    for p in range(P):
        if loads:
            view.pending_tokens[p] = ri.pending_tokens[p]
            view.live_kv_tokens[p] = ri.live_kv_tokens[p]
            view.kv_util[p] = ri.live_kv_tokens[p] / kv_cap
            view.inflight[p] = ri.inflight[p]
            view.queued_requests[p] = ri.queued[p]
        view.send_backlog_s[p] = 0.0
        view.recv_backlog_s[p] = 0.0
        if links is not None:
            view.send_backlog_s[p] = _backlog(net, p * X, X, a)
            view.recv_backlog_s[p] = _backlog(net, (P + p) * X, X, a)
        w = max(0.0, pre.free[p, 0] - a)
        r0 = max(a, pre.free[p, 0])
        cl = _reusable_tokens(cond.local[p], Lin, prm.block_tokens)
        pf = _prefill_on(c, sc, pre, prm.cpp, p, r0, Lin - cl, cl)[1]
        fetch = _fetches(prm, cond.local[p], best)
        f_e = 0.0
        f_pre = pf
        if fetch:
            cb = _reusable_tokens(best, Lin, prm.block_tokens)
            f_e = group_fetch_time(c, cb - cl, X)
            if links is not None:
                f_e += _best_source(net, cond, best, p, r0, f_e, X)[1] - r0
            f_pre = _prefill_on(c, sc, pre, prm.cpp, p, r0 + f_e, Lin - cb, cb)[1]
            t = w + (f_e + f_pre)
        else:
            t = w + pf
        if prm.noise_sd > 0.0:
            k = max(0.0, 1.0 + prm.noise_sd * z_noise[i, p])
            w *= k
            pf *= k
            f_e *= k
            f_pre *= k
            t *= k
        view.wait_s[p] = w
        view.prefix_tokens[p] = cl
        view.prefill_s[p] = pf
        view.fetch[p] = fetch
        view.fetch_s[p] = f_e
        view.fetch_prefill_s[p] = f_pre
        view.ttft_s[p] = t


@helper_njit
def _probe(rows, diag, i, a, Lin, blocks, c, sc, prm, z_noise, pre, cache, links, net, ri, kv_cap, pre_on, v, cd,
           pi):
    """``sim.explain``'s numbers for request ``i`` arriving at ``a``, whatever the policy: the Conductor's
    view (:func:`_fill_view` on every prefill node's true cache, :data:`.conductor_view.PROBE_ROWS` rows 0–8),
    the router's inputs as the run filled them (rows 9–17; 0 where it tracks none) and which nodes take
    prefill requests now (row 18); ``diag[9]`` / ``diag[10]`` = the best prefix (blocks) and its holder,
    ``diag[11]`` = ``pi``, the instance chosen (before admission, which may still reject the request).
    ``v`` / ``cd``: a :class:`~.conductor_view.View` and a :class:`~.state.Conductor` to work in (allocated by
    :func:`_kernel`: this runs inside :func:`_run`, which allocates nothing). Reads the run's state, changes nothing."""
    P = len(pre_on)
    cd.local[:] = 0
    cd.src_ready[:] = 0.0
    best = 0
    src = -1
    for p in range(P):
        if pre_on[p] == 1:
            cd.local[p] = _match_prefix(cache.last_use, p, blocks)
            if cd.local[p] > best:
                best = cd.local[p]
                src = p
    if links is not None:
        for q in range(P if best > 0 else 0):
            if cd.local[q] == best:
                for k in range(best):
                    cd.src_ready[q] = max(cd.src_ready[q], net.block_ready[q, blocks[k]])
    _fill_view(v, i, a, Lin, best, c, sc, prm, z_noise, pre, cd, links, net, ri, kv_cap)
    for p in range(P):
        rows[0, p] = v.wait_s[p]
        rows[1, p] = v.prefix_tokens[p]
        rows[2, p] = v.prefill_s[p]
        rows[3, p] = 1.0 if v.fetch[p] else 0.0
        rows[4, p] = v.fetch_s[p]
        rows[5, p] = v.fetch_prefill_s[p]
        rows[6, p] = v.ttft_s[p]
        rows[7, p] = v.send_backlog_s[p]
        rows[8, p] = v.recv_backlog_s[p]
        if len(ri.pending_tokens) == P:
            rows[9, p] = ri.matched_blocks[p]
            rows[10, p] = ri.tree_blocks[p]
            rows[11, p] = ri.pending_tokens[p]
            rows[12, p] = ri.live_kv_tokens[p]
            rows[13, p] = ri.inflight[p]
            rows[14, p] = ri.queued[p]
            rows[15, p] = ri.recent_requests[p]
            rows[16, p] = ri.recent_prefill_s[p]
            rows[17, p] = ri.deepest_entered[p]
        else:
            for r in range(9, 18):
                rows[r, p] = 0.0
        rows[18, p] = pre_on[p]
    diag[9] = best
    diag[10] = src
    diag[11] = pi


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
def _kernel(tr, c, prm, u_random, z_noise, cache, out, max_kv, diag, switch_log, links, router, belief, policy_fn=None,
            view=None):
    """Simulate the whole trace ``tr`` (:class:`~.state.TraceArrays`) on cost coefficients ``c`` with
    settings ``prm`` (:class:`~.state.Params`); fills ``out`` (:class:`~.state.Outputs`, pre-set to
    NaN / −1 / 0), ``max_kv`` (per decode instance, tokens) and ``diag``. ``cache``: the prefill
    instances' prefix caches (:class:`mooncake_lab.prefix_cache.CacheState`); ``u_random`` /
    ``z_noise``: the run's draws (``random`` policy, estimator noise).

    ``prm.policy == 4``: ``policy_fn(req, view) -> instance`` chooses the prefill instance (a student
    policy, :mod:`.student_policy`, called as a numba first-class function; ``view``: the
    :class:`~.conductor_view.View` arrays it reads, refilled here at each arrival). Without it
    (the built-in policies) numba prunes that branch, so it costs them nothing.

    ``out.prefill_load`` / ``out.decode_load``: the loads the Conductor computed at each arrival
    (:mod:`.admission`; decode: the current pool load, or the predicted one under ``predicted``).

    ``prm.n_prefill`` counts prefill *instances* (CPP groups of ``group_size`` nodes when > 1, pipelined
    FIFO; their prefill and fetch times come from :mod:`.cpp_group`).

    ``prm.binding``: 0 = the decode instance is chosen when the KV is ready, 1 = at arrival (then
    ``out.decode_inst`` is set at arrival and ``dq.bound_kv`` holds each instance's bound-in-flight
    KV); ``prm.load_metric``: 0 = max(TBT, memory) of the average instance, 1 = the mean per-instance
    TBT ratio (:mod:`.admission`; config.DECODE_BINDINGS / DECODE_LOAD_METRICS).
    ``links``: None (every transfer gets a whole NIC; numba then drops the link code, as for
    ``policy_fn``) or, with ``ClusterConfig.network_contention``, a (P, block ids) float array for
    :attr:`~.state.Links.block_ready` (uninitialised: read only where a block is cached, so written when it
    was stored; pooled by the caller, :func:`mooncake_lab.prefix_cache.pooled_array`): fetches and KV streams reserve
    the prefill nodes' send / receive links, a stream bound at arrival also its decode node's
    receive link, :mod:`.links`); ``out.fetch_wait`` / ``out.stream_wait``: the seconds each
    request's fetch / KV stream waited for them (0 without contention).

    ``router``: None (the Conductor's policies: numba drops the code below, as for ``policy_fn``) or
    the :class:`~.routers.RouterParams` of a router (``prm.policy`` ≥ 5) or, unused but for its
    window, of a student policy. Then the kernel keeps what :class:`~.routers.RouterInputs` counts per
    prefill instance (:class:`~.state.Dispatched`: pointers into per-instance FIFO lists, O(1)
    amortised per arrival and instance) and shows the loads to a student policy (``view``). A router
    sees them, with ``matched_blocks`` / ``tree_blocks`` from the true caches or from ``belief``
    (:class:`~.state.RouterBelief`, touched after each dispatch), and :func:`.routers.route` picks the
    instance; it never fetches a remote prefix (the prefill reuses the chosen instance's true cache);
    ``kv_cap`` = the KV a node holds × the CPP group's nodes. The decode node then follows
    ``router.decode_choice`` (least KV, or :func:`.routers.route_decode`: fewest requests, round robin,
    llm-d's fewest waiting, AIBrix's PD rule) where it is chosen.

    ``switch_log``: (requests, 5), rule 14's switches, a row each ([decided, node, new role, drained, serving
    from]; ``diag[8]`` rows written; fixed roles: none).

    ``diag``: [0] events processed, [1] times an event ran earlier than the previous one (must be
    0), [2] runs logged, [3] max decode batch; [4]–[6] for a student policy (:func:`_student_choice`);
    [5] = 2, [6] = the value: a router chose no prefill instance (not 0 … P − 1; the caller raises); [9]–[11]: the best prefix, its holder and the choice at ``prm.probe``'s arrival
    (:func:`_probe`, which fills ``out.probe``).

    ``prm.output_unknown`` (``grow``): decode sees prompts only; KV grows a token per step, a node that
    would overflow preempts its newest-admitted request (``out.preemptions[i]`` counts them; rules
    8b–8d of :mod:`.reference`). Then ``dec.ctx[d]`` is also the KV held and ``max_kv`` the largest
    step context; with known lengths ``dq.reserved`` is the KV reserved. The run log and the stint
    records have room for ``prm.spare`` preemptions; with more, the kernel stops with ``diag[7]`` = 1
    and the caller runs it again with more room (growing arrays inside the loop would cost every
    run ~70%: numba then reference-counts them on every iteration).
    """
    input_len = tr.input_len
    output_len = tr.output_len
    n = len(tr.arrival)
    P = prm.n_prefill
    D = prm.n_decode
    X = prm.cpp.group_size
    decode_cap = prm.decode_cap
    grow = prm.output_unknown
    sc = cm_stage_coefficients(c, X)  # one stage's cost coefficients (allocated here, once)
    pre = Prefill(np.zeros((P, X)), np.zeros((P, X)), np.empty(X), np.empty(X))
    cond = Conductor(np.zeros(P, dtype=np.int64), np.zeros(P), np.zeros(P))
    if links is not None:  # rows: P·X prefill send links, P·X prefill receive links, D decode receive links
        rows = 2 * P * X + D
        slots = n + 1  # a request books each link at most once (a fetch's source is never its destination)
        net = Links(np.empty((rows, slots)), np.empty((rows, slots)), np.zeros((rows, 2), dtype=np.int64), links)
    else:
        net = Links(np.empty((0, 4)), np.empty((0, 4)), np.zeros((0, 2), dtype=np.int64), np.zeros((0, 1)))
    heap = ReadyHeap(np.empty((1, n + 1)), np.empty((1, n + 1), dtype=np.int64))  # one heap: row 0 (.heaps)
    min_need = 1
    if n > 0:
        min_need = np.min(input_len + 1) if grow else np.min(input_len + output_len)
    maxb = min(n, int(decode_cap // max(min_need, 1)) + 1) + 1
    i64 = np.int64
    dec = DecodeNodes(np.zeros(D), np.full(D, math.inf), np.zeros(D, dtype=i64), np.zeros(D, dtype=i64),
                      np.zeros(D, dtype=i64), np.zeros(D, dtype=i64), np.empty((D, maxb), dtype=i64),
                      np.zeros((D, 4)), np.zeros((D, 4)), np.zeros((D, 4), dtype=i64), np.zeros(D, dtype=i64),
                      np.zeros(D), np.full(D, -1, dtype=i64))
    dq = DecodeQueues(np.full(D, -1, dtype=i64), np.full(D, -1, dtype=i64), np.zeros(D, dtype=i64), np.zeros(D),
                      np.zeros(D), np.zeros(D), np.zeros(D), max_kv, np.zeros(D), np.zeros(D))
    dr = DecodeRequests(np.full(n, -1, dtype=np.int64), np.zeros(n, dtype=np.int64), np.full(n, -1, dtype=np.int64),
                        np.ones(n, dtype=np.int64), np.zeros(n, dtype=np.int64), np.zeros(n), np.zeros(n),
                        np.full(n, -1, dtype=np.int64), np.zeros(1, dtype=np.int64))
    SN = prm.spare + 1 if grow else 1  # stint records
    st = Stints(np.empty(SN, dtype=np.int64), np.empty(SN, dtype=np.int64), np.empty(SN, dtype=np.int64),
                np.empty(SN), np.empty(SN))
    # run log: every closed segment appends ≤ 3 runs; ≤ 2 events per request (known output
    # lengths). Unknown: ≤ 4 runs (a stall) per event; ≤ 2 events per request + 1 per preemption
    L = 4 * (2 * n + prm.spare) + 8 if grow else 6 * n + 8
    log = RunLog(np.empty(L), np.empty(L), np.empty(L, dtype=np.int64), np.empty(L, dtype=np.int64))
    B = L + SN + 1  # a request's runs + one first interval per stint
    buf = Intervals(np.empty(B), np.empty(B), np.empty(B, dtype=np.int64), np.empty(B), np.empty(B, dtype=np.int64))
    di = DecodeInputs(np.zeros(D, dtype=i64), np.zeros(D, dtype=i64), np.zeros(D, dtype=i64), np.zeros(D),
                      np.zeros(D))
    if router is not None:  # routers and student policies: the per-instance loads (RouterInputs)
        fl = Dispatched(np.full(n, -1, dtype=i64), np.full(P, -1, dtype=i64), np.full(P, -1, dtype=i64),
                        np.full(P, -1, dtype=i64), np.full(P, -1, dtype=i64), np.zeros(D, dtype=i64),
                        np.zeros(2, dtype=i64))
        ri = RouterInputs(np.zeros(P, dtype=i64), np.zeros(P, dtype=i64), np.zeros(P), np.zeros(P),
                          np.zeros(P, dtype=i64), np.zeros(P, dtype=i64), np.zeros(P, dtype=i64), np.zeros(P),
                          np.zeros(P))
    else:
        fl = Dispatched(np.full(0, -1, dtype=i64), np.full(0, -1, dtype=i64), np.full(0, -1, dtype=i64),
                        np.full(0, -1, dtype=i64), np.full(0, -1, dtype=i64), np.zeros(D, dtype=i64),
                        np.zeros(2, dtype=i64))
        ri = RouterInputs(np.zeros(0, dtype=i64), np.zeros(0, dtype=i64), np.zeros(0), np.zeros(0),
                          np.zeros(0, dtype=i64), np.zeros(0, dtype=i64), np.zeros(0, dtype=i64), np.zeros(0),
                          np.zeros(0))

    on = np.zeros(P, dtype=i64)
    on[:prm.n_prefill0] = 1
    dfrom = np.zeros(D)
    if prm.switch_ratio > 0.0:  # rule 14: nodes 0 … n_prefill0 − 1 start as prefill nodes, the rest decode
        dfrom[:prm.n_prefill0] = math.inf
    rl = Roles(on, dfrom, np.zeros(D, dtype=i64), np.zeros(P), (dfrom == 0.0).astype(np.float64),
               np.array([-1.0, -math.inf, 0.0]))
    # sim.explain's scratch (_probe): one request's view and matches
    pv = View(np.zeros(P), np.zeros(P, dtype=i64), np.zeros(P), np.zeros(P, dtype=np.bool_), np.zeros(P),
              np.zeros(P), np.zeros(P), np.zeros(P), np.zeros(P), np.zeros(P), np.zeros(P), np.zeros(P),
              np.zeros(P, dtype=i64), np.zeros(P, dtype=i64))
    pc = Conductor(np.zeros(P, dtype=i64), np.zeros(P), np.zeros(P))
    _run(tr, c, prm, u_random, z_noise, cache, out, max_kv, diag, links, router, belief, policy_fn, view,
         sc, pre, cond, net, heap, dec, dq, dr, st, log, buf, di, fl, ri, rl, switch_log, pv, pc)
    diag[8] = int(rl.sw[2])


@helper_njit
def _run(tr, c, prm, u_random, z_noise, cache, out, max_kv, diag, links, router, belief, policy_fn, view,
         sc, pre, cond, net, heap, dec, dq, dr, st, log, buf, di, fl, ri, rl, switch_log, pv, pc):
    """:func:`_kernel`'s pass over the arrivals, on the state it allocated (:mod:`.state`). Without reference
    counting (:data:`mooncake_lab.jit.helper_njit`): every array here is kept alive by :func:`_kernel`, and
    the loop's views of its groups' members (``dec.next_t``, ``net.block_ready``, a request's ``blocks``)
    cost no atomic increments (they were 11 % of a run's samples, and splitting this loop off took the
    conversation trace's kernel from 87 to 46 ms: "Speed" above)."""
    arrival = tr.arrival
    input_len = tr.input_len
    output_len = tr.output_len
    n = len(arrival)
    P = prm.n_prefill
    D = prm.n_decode
    X = prm.cpp.group_size
    policy = prm.policy
    admission = prm.admission
    binding = prm.binding
    decode_cap = prm.decode_cap
    grow = prm.output_unknown
    cap_i = int(math.floor(decode_cap))  # KV tokens a node holds (token counts are integers)
    SN = len(st.mark)  # stint records
    L = len(log.a)  # run log slots
    hsize = 0
    nrec = 0
    nlog = 0
    t_last = -math.inf
    kvh = dq.held if grow else dq.reserved  # the decode nodes' KV: held now (refreshed by _kv_now), or reserved
    dchoice = 0  # the decode node: 0 least KV (the Conductor's and a student's), else a router's decode_choice
    d_req, d_thr = 0.0, 0.0  # AIBrix's decode spreads (decode_choice "aibrix_pd")
    kv_cap = decode_cap * X  # KV tokens a prefill instance holds (its nodes')
    true_match = policy >= 2  # every instance's true cache matched at each arrival (cond.local)
    if router is not None and policy >= 5:
        dchoice = router.decode_choice
        d_req, d_thr = router.aibrix_decode_max_request, router.aibrix_decode_max_throughput
        if router.belief:
            true_match = False  # it matches its belief; only the chosen instance's true cache is read

    for i in range(n + 1):
        # ---------------- advance the decode pool to this arrival (to the end after the last)
        t_now = arrival[i] if i < n else math.inf
        while True:
            # next thing to happen: a decode-instance event or a ready event (ties: instances first)
            dmin = -1
            tmin = math.inf
            for d in range(D):
                if dec.next_t[d] < tmin:
                    tmin = dec.next_t[d]
                    dmin = d
            tready = heap.t[0, 0] if hsize > 0 else math.inf
            if dmin >= 0 and tmin <= tready and tmin <= t_now:
                # ---- decode event at instance dmin: close the segment, complete, admit
                d = dmin
                t = tmin
                nst = dec.next_n[d]
                if nlog + 4 > L:  # only with more than ``spare`` preemptions: run again with more room
                    diag[7] = 1
                    return
                left = nst
                for p in range(dec.pn[d]):
                    if left <= 0:
                        break
                    m = dec.pm[d, p] if dec.pm[d, p] < left else left
                    log.a[nlog] = dec.pa[d, p]
                    log.d[nlog] = dec.pd[d, p]
                    log.m[nlog] = m
                    log.prev[nlog] = dec.last_run[d]
                    dec.last_run[d] = nlog
                    nlog += 1
                    left -= m
                dec.at[d] = t
                dec.ctx[d] += dec.batch[d] * nst
                dec.steps[d] += nst
                if grow and dec.ctx[d] - dec.batch[d] > max_kv[d]:
                    max_kv[d] = dec.ctx[d] - dec.batch[d]  # the step just ended held the segment's most KV
                q = 0
                while q < dec.batch[d]:
                    j = dec.running[d, q]
                    if dr.done_step[j] == dec.steps[d]:
                        out.finish[j] = t
                        out.outcome[j] = 1
                        dq.reserved[d] -= input_len[j] + output_len[j]
                        dec.ctx[d] -= input_len[j] + output_len[j]
                        m_int = output_len[j] - 1
                        out.tbt_mean[j] = (t - out.prefill_end[j]) / m_int
                        out.tbt_tail[j] = _finish_tbt(dec.last_run[d], dr.run_mark[j], dr.cur_adm[j], dr.cur_gap[j],
                                                      dr.st_head[j], log, st, buf, m_int)
                        dec.batch[d] -= 1
                        dec.running[d, q] = dec.running[d, dec.batch[d]]
                    else:
                        q += 1
                # unknown output lengths: the next step would overflow → preempt the newest-admitted
                while grow and dec.ctx[d] > cap_i:
                    qv = 0
                    for q in range(1, dec.batch[d]):
                        if dr.adm_seq[dec.running[d, q]] > dr.adm_seq[dec.running[d, qv]]:
                            qv = q
                    v = dec.running[d, qv]
                    g = output_len[v] - (dr.done_step[v] - dec.steps[d])  # tokens so far
                    dec.ctx[d] -= input_len[v] + g
                    dec.batch[d] -= 1
                    dec.running[d, qv] = dec.running[d, dec.batch[d]]
                    if input_len[v] + g > cap_i:
                        out.outcome[v] = 4  # its KV alone outgrows a decode node: too large after all
                        continue
                    if nrec == SN:
                        diag[7] = 1
                        return
                    st.mark[nrec] = dr.run_mark[v]  # close its stint
                    st.end[nrec] = dec.last_run[d]
                    st.adm[nrec] = dr.cur_adm[v]
                    st.gap[nrec] = dr.cur_gap[v]
                    st.prev[nrec] = dr.st_head[v]
                    dr.st_head[v] = nrec
                    nrec += 1
                    out.preemptions[v] += 1
                    dr.gen[v] = g
                    dr.cur_gap[v] = t  # its last token came now
                    _enqueue(d, v, dq, dr.qnext, input_len[v] + g, True)  # back to the front of the queue
                _admit(d, t, c, input_len, output_len, out.decode_admit, out.prefill_end, dec, dq, dr, decode_cap, grow)
                if dec.batch[d] > diag[3]:
                    diag[3] = dec.batch[d]
                _start_segment(d, c, dec, dr.done_step, grow, cap_i)
                if rl.draining[d] == 1:
                    _drained(d, t, dec, dq, rl, pre, switch_log, prm.switch_cost)
            elif hsize > 0 and tready <= t_now:
                # ---- ready event: KV of request j has reached the decode pool
                t = tready
                j = heap.i[0, 0]
                hsize = heap_pop(heap.t, heap.i, 0, hsize)
                need = input_len[j] + 1 if grow else input_len[j] + output_len[j]
                if binding == 1:  # bound at arrival: its KV is no longer in flight
                    d = out.decode_inst[j]
                    dq.bound_kv[d] -= need
                    if router is not None:
                        fl.bound_n[d] -= 1
                    kv_d = _held_now(d, t, dec) if grow else dq.reserved[d]
                else:  # late binding, Algorithm 1 line 24: least KV reserved (held) + KV queued (tokens)
                    if grow:  # KV held now: prompt + tokens so far of the running requests
                        _kv_now(t, dec, kvh)
                    if dchoice == 0:  # among the nodes taking decode requests (all but under rule 14)
                        d = -1
                        for e in range(D):
                            if rl.dec_from[e] <= t and (d < 0 or kvh[e] + dq.queued_kv[e] < kvh[d] + dq.queued_kv[d]):
                                d = e
                    else:  # a router's decode_choice
                        d = _decode_by_choice(dchoice, di, c, t, dec, dq, fl.bound_n, kvh, u_random[j], P,
                                              fl.count[1], decode_cap, d_req, d_thr)
                        fl.count[1] += 1
                    out.decode_inst[j] = d
                    kv_d = kvh[d]
                if admission == 1 and instance_decode_load(c, float(dec.batch[d] + dq.queued[d] + 1),
                                                           kv_d + dq.queued_kv[d] + need, decode_cap,
                                                           prm.tbt_slo, prm.load_metric) > prm.adm_threshold:
                    out.outcome[j] = 3  # rejected after prefill: its prefill was wasted
                    if rl.draining[d] == 1:
                        _drained(d, t, dec, dq, rl, pre, switch_log, prm.switch_cost)
                    diag[0] += 1
                    if t < t_last:
                        diag[1] += 1
                    t_last = t
                    continue
                was_empty = dq.qhead[d] < 0
                _enqueue(d, j, dq, dr.qnext, need, False)
                if dec.batch[d] == 0:
                    # idle instance: a boundary right now
                    dec.at[d] = t
                    _admit(d, t, c, input_len, output_len, out.decode_admit, out.prefill_end, dec, dq, dr, decode_cap, grow)
                    _start_segment(d, c, dec, dr.done_step, grow, cap_i)
                elif was_empty and kv_d + need <= decode_cap:
                    # it fits: admitted at the first step boundary strictly after t
                    _cut_segment(d, t, dec)
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
        o_len = output_len[i]
        if prm.switch_ratio > 0.0:  # rule 14
            if grow:
                _kv_now(a, dec, kvh)
            _role_step(a, c, prm, pre, dec, dq, kvh, rl, switch_log, cache)
        if (Lin + 1 if grow else Lin + o_len) > decode_cap:  # can never fit a decode instance's KV memory
            out.outcome[i] = 4
            continue
        if prm.inline and o_len > 1 and Lin <= prm.cpp.chunk:  # rule 2c: inline it into a decode batch?
            db = _inline_target(a, c, Lin, o_len, prm, dec, dq, kvh, grow, binding, decode_cap)
            if db >= 0:
                need = Lin + 1 if grow else Lin + o_len
                out.prefill_start[i] = a  # prefill_end stays NaN until admission: that marks it inlined
                out.queue_wait[i] = 0.0
                out.prefill_time[i] = cm_prefill_time(c, float(Lin), 0.0)
                out.computed_tok[i] = Lin
                out.cached_tok[i] = 0
                out.fetched_tok[i] = 0
                out.fetch_time[i] = 0.0
                out.fetch_wait[i] = 0.0
                out.stream_wait[i] = 0.0
                out.ready[i] = a
                if binding == 1:  # bound now; the ready event below (at a) takes it to db's queue
                    out.decode_inst[i] = db
                    dq.bound_kv[db] += need
                hsize = heap_push(heap.t, heap.i, 0, hsize, a, i)
                continue
        blocks = tr.block_ids[tr.offsets[i]:tr.offsets[i + 1]]
        if router is not None:  # the per-instance loads at a (routers, student policies)
            _advance_loads(fl, ri, out.prefill_start, out.prefill_end, input_len, out.computed_tok, out.prefill_time,
                           arrival, a, router.window_s)
        best = 0
        src = -1
        if policy >= 1:
            for p in range(P):
                if rl.pre_on[p] == 0:  # rule 14: not a prefill node now (its cache is empty)
                    cond.local[p] = 0
                    cond.est[p] = math.inf
                    continue
                if true_match:
                    cond.local[p] = _match_prefix(cache.last_use, p, blocks)
                    if cond.local[p] > best:
                        best = cond.local[p]
                        src = p
                cond.est[p] = max(0.0, pre.free[p, 0] - a)  # wait until stage 0 is free, s
                if policy == 2:
                    cached = _reusable_tokens(cond.local[p], Lin, prm.block_tokens)
                    cond.est[p] += _prefill_on(c, sc, pre, prm.cpp, p, max(a, pre.free[p, 0]), Lin - cached, cached)[1]
        if links is not None:
            for q in range(P if best > 0 else 0):
                cond.src_ready[q] = 0.0
                if cond.local[q] == best:
                    for k in range(best):
                        cond.src_ready[q] = max(cond.src_ready[q], net.block_ready[q, blocks[k]])
        if policy == 3:
            for p in range(P):
                if rl.pre_on[p] == 0:
                    continue
                cl = _reusable_tokens(cond.local[p], Lin, prm.block_tokens)
                r0 = max(a, pre.free[p, 0])
                if _fetches(prm, cond.local[p], best):
                    cb = _reusable_tokens(best, Lin, prm.block_tokens)
                    f_e = group_fetch_time(c, cb - cl, X)
                    if links is not None:  # + the wait for the source's send and p's receive links
                        f_e += _best_source(net, cond, best, p, r0, f_e, X)[1] - r0
                    cond.est[p] += f_e + _prefill_on(c, sc, pre, prm.cpp, p, r0 + f_e, Lin - cb, cb)[1]
                else:
                    cond.est[p] += _prefill_on(c, sc, pre, prm.cpp, p, r0, Lin - cl, cl)[1]
        if policy == 0:
            n_on = 0
            for p in range(P):
                n_on += rl.pre_on[p]
            k_on = min(int(u_random[i] * n_on), n_on - 1)  # the k-th prefill node now (all: instance k)
            pi = -1
            while k_on >= 0:
                pi += 1
                k_on -= rl.pre_on[pi]
        elif policy == 4:  # a student's function: it may also veto / force the fetch (view.fetch)
            pi = -1
            if policy_fn is not None:
                _fill_view(view, i, a, Lin, best, c, sc, prm, z_noise, pre, cond, links, net, ri, kv_cap)
                pi = _student_choice(policy_fn, view, i, a, Lin, o_len, u_random[i], best, src, prm.block_tokens,
                                     diag)
            if pi < 0:
                break  # a bad choice: the caller raises from diag[4:7]
        elif policy >= 5:  # a router (sim/routers.py): no remote prefix but Dynamo's shared tier (use_remote below)
            pi = -1
            if router is not None:
                for p in range(P):
                    if router.belief:  # its own history of what it sent
                        ri.matched_blocks[p] = belief_match(belief.last_use, belief.touched_at, p, blocks, a,
                                                            router.belief_ttl)
                        ri.tree_blocks[p] = belief.meta[p, 1]
                    else:  # the true caches (cond.local: matched above)
                        ri.matched_blocks[p] = cond.local[p]
                        ri.tree_blocks[p] = cache.meta[p, 1]
                    if router.code == SGLANG:  # when the deepest matched block entered that view
                        ri.deepest_entered[p] = deepest_entered(belief.entered_at, p, blocks, ri.matched_blocks[p])
                pi = route(router, ri, Lin, len(blocks), prm.block_tokens, u_random[i], fl.count[0], kv_cap)
                fl.count[0] += 1
            if pi < 0 or pi >= P:
                diag[5] = 2
                diag[6] = pi
                break
        else:
            if prm.noise_sd > 0.0:
                for p in range(P):
                    cond.est[p] *= max(0.0, 1.0 + prm.noise_sd * z_noise[i, p])
            pi = -1
            for p in range(P):
                if rl.pre_on[p] == 1 and (pi < 0 or cond.est[p] < cond.est[pi]):
                    pi = p
        if i == prm.probe:  # sim.explain: what the Conductor (or the router) saw of this request
            _probe(out.probe, diag, i, a, Lin, blocks, c, sc, prm, z_noise, pre, cache, links, net, ri, kv_cap,
                   rl.pre_on, pv, pc, pi)
        # ---------------- the prefill on pi, predicted (nothing is committed before admission)
        n_local = cond.local[pi] if true_match else _match_prefix(cache.last_use, pi, blocks)
        cl = _reusable_tokens(n_local, Lin, prm.block_tokens)
        use_remote = policy == 3 and _fetches(prm, n_local, best)
        if policy == 4:
            if policy_fn is not None:  # the fetch the view proposed, as the policy left it
                use_remote = best > n_local and view.fetch[pi]
        elif policy == DYNAMO:
            if router is not None:  # rule 2a: with a shared tier it fetches the pool's best prefix
                if router.dynamo_shared > 0.0:
                    use_remote = best > n_local
        cached = cl
        f_t = 0.0
        if use_remote:
            cached = _reusable_tokens(best, Lin, prm.block_tokens)
            f_t = group_fetch_time(c, cached - cl, X)
        start = max(a, pre.free[pi, 0])
        f_w = 0.0
        f_src = src
        if links is not None:
            if use_remote:  # from the holder the fetch can begin from first
                f_src, f_b = _best_source(net, cond, best, pi, start, f_t, X)
                f_w = f_b - start
        r0 = start + f_w + f_t
        end, pt = _prefill_on(c, sc, pre, prm.cpp, pi, r0, Lin - cached, cached)  # new_free / new_link: pi's state after it
        r_i = end + _exposed_transfer(c, Lin, pt, prm.n_layers, prm.layerwise)
        r_free = r_i
        cand = Lin + 1 if grow else Lin + o_len  # what this request counts / needs on decode (rule 8b)
        if grow:  # KV held now: prompt + tokens so far of the running requests
            _kv_now(a, dec, kvh)
        # ---------------- Algorithm 1 line 24: the decode instance, chosen now (binding 1)
        db = -1
        if binding == 1 and o_len > 1:  # least KV reserved (held) + queued + bound in flight (tokens)
            if dchoice == 0:  # among the nodes taking decode requests (all but under rule 14)
                db = -1
                for e in range(D):
                    if rl.dec_from[e] <= a and (db < 0 or kvh[e] + dq.queued_kv[e] + dq.bound_kv[e]
                                                < kvh[db] + dq.queued_kv[db] + dq.bound_kv[db]):
                        db = e
            else:  # a router's decode_choice
                db = _decode_by_choice(dchoice, di, c, a, dec, dq, fl.bound_n, kvh, u_random[i], P, fl.count[1],
                                       decode_cap, d_req, d_thr)
                fl.count[1] += 1
        x_s = 0.0
        b_s = 0.0
        if links is not None:
            if o_len > 1:  # the stream: x s on all pi's send links (+ db's receive link), ideally ending at r_free
                x_s = cm_kv_transfer_time(c, Lin)
                b_s = _fit_group(net, pi * X, X, 2 * P * X + db if db >= 0 else -1, r_free - x_s, x_s)
                if b_s > r_free - x_s:
                    r_i = max(r_free, b_s + x_s)
        if o_len > 1:  # rule 6c: decode loads the received KV from its DRAM into HBM (c[16] = 0: switched off)
            h_s = c[16] * Lin
            r_i += h_s
            r_free += h_s
        # ---------------- admission at arrival (arXiv §7): loads as SLO satisfaction
        pl = prefill_load(end - a, prm.ttft_slo)
        # the requests the decode load counts, per instance (+ those not bound yet: sb, sk)
        if admission == 3:
            sb, sk = _predicted_population(a + prm.horizon * (r_i - a), prm.t_decode, a, db, cand, input_len,
                                           output_len, out.decode_admit, out.ready, out.decode_inst, dec, dq, dr,
                                           heap, hsize, grow)
        else:  # now: running + queued (KV held or reserved, + queued)
            sb, sk = _place_candidate(db, cand, dq.load_b, dq.load_kv)
            for d in range(D):
                dq.load_b[d] += dec.batch[d] + dq.queued[d]
                dq.load_kv[d] += kvh[d] + dq.queued_kv[d]
        if prm.load_metric == 1:  # the mean per-instance TBT ratio (over the decode pool now)
            dl = pool_tbt_load(c, dq.load_b, dq.load_kv, sb, sk, prm.tbt_slo, rl.serve)
        else:  # the average instance's max(TBT, memory): the pool's totals / D
            nd = 0.0
            for d in range(D):
                sb += dq.load_b[d]
                sk += dq.load_kv[d]
                nd += rl.serve[d]
            dl = decode_load(c, sb / nd, sk / nd, decode_cap, prm.tbt_slo)
        out.prefill_load[i] = pl
        out.decode_load[i] = dl
        if (admission == 1 and pl > prm.adm_threshold) or (admission >= 2 and max(pl, dl) > prm.adm_threshold):
            out.outcome[i] = 2  # rejected at arrival: nothing queued, no cache touched
            continue
        # ---------------- commit: run the prefill on pi
        if use_remote:
            out.fetched_tok[i] = cached - cl
            out.fetch_src[i] = f_src
            _touch_blocks(cache.last_use, cache.q_block, cache.q_stamp, cache.meta, f_src, blocks[:best])  # read at the source
            if links is not None:
                for s in range(X):  # pair s: f_src's node s sends, pi's node s receives
                    l1 = f_src * X + s
                    l2 = P * X + pi * X + s
                    b = _fit_pair(net, l1, l2, max(start, cond.src_ready[f_src]), f_t)
                    _book(net, l1, b, b + f_t, a)
                    _book(net, l2, b, b + f_t, a)
        else:
            out.fetched_tok[i] = 0
        for s in range(X):
            pre.free[pi, s] = pre.new_free[s]
            pre.link[pi, s] = pre.new_link[s]
        if router is not None:
            if policy == SGLANG and not router.belief:  # SGLang matching the true caches: entry times
                note_entered(cache.last_use, belief.entered_at, belief.entered_at, pi, blocks, a, math.inf)
        _touch_blocks(cache.last_use, cache.q_block, cache.q_stamp, cache.meta, pi, blocks)  # store / refresh (and replicate)
        if links is not None:  # blocks fetched are complete on pi when the fetch ends, computed ones at the end
            for k in range(n_local, len(blocks)):
                net.block_ready[pi, blocks[k]] = r0 if (use_remote and k < best) else end
        out.prefill_inst[i] = pi
        if db >= 0:  # bound at arrival: its KV is in flight to db until its ready event
            out.decode_inst[i] = db
            dq.bound_kv[db] += cand
            if router is not None:
                fl.bound_n[db] += 1
        out.cached_tok[i] = cached
        out.computed_tok[i] = Lin - cached
        out.queue_wait[i] = start - a
        out.fetch_time[i] = f_t
        out.fetch_wait[i] = f_w
        out.prefill_start[i] = start
        out.prefill_time[i] = pt
        out.prefill_end[i] = end
        if router is not None:  # routers / student policies: i joins pi's dispatched requests
            _dispatch(fl, ri, i, pi, Lin - cached, pt)
            if policy >= 5:
                if router.belief:  # the router remembers what it sent
                    if router.code == SGLANG:
                        note_entered(belief.last_use, belief.touched_at, belief.entered_at, pi, blocks, a,
                                     router.belief_ttl)
                    belief_insert(belief.last_use, belief.q_block, belief.q_stamp, belief.meta, belief.touched_at,
                                  pi, blocks, a, router.belief_ttl)
        rl.out_until[pi] = max(rl.out_until[pi], end if o_len == 1 else r_i - c[16] * Lin)  # rule 14's drain
        if o_len == 1:  # the prefill made the only output token: nothing to decode
            out.finish[i] = end
            out.outcome[i] = 1
            continue
        out.ready[i] = r_i
        out.stream_wait[i] = r_i - r_free
        if links is not None:  # the stream holds pi's send links (and db's receive link) for x_s s
            for s in range(X):
                _book(net, pi * X + s, b_s, b_s + x_s, a)
            if db >= 0:
                ld = 2 * P * X + db
                _book(net, ld, b_s, b_s + x_s, a)
        hsize = heap_push(heap.t, heap.i, 0, hsize, out.ready[i], i)
    diag[2] = nlog
