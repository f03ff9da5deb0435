"""The coupled (vLLM-like) engine in plain Python: the semantics, written to be read.

Same results as :mod:`mooncake_lab.sim.coupled` (tests check it); every request keeps the list
of its token intervals.

The rules (``engine_mode="coupled"``)
-------------------------------------
``n_coupled`` instances (one 8-GPU node each). Each has a FIFO *waiting* queue, a FIFO *prefill*
queue, a running decode batch, ``decode_kv_capacity_tokens`` of KV memory and its own LRU prefix
cache of ``cache_capacity_blocks`` (the same cache a Mooncake prefill node has, so a comparison
isolates prefill/decode interference, not caching).

 1. Requests are handled in arrival order. A request with input + output > the KV capacity is
    rejected at arrival (``rejected_too_large``). Admission control is not modelled (``none``).
 2. Routing (the load balancer in front of the instances): ``random`` draws the instance;
    ``load`` picks the least *queued prefill work* = Σ prefill time of its requests whose prefill
    has not ended (each counted in full until it ends); ``cache_aware`` and ``kvcentric`` add the
    request's own prefill time with that instance's local prefix (no global pool: nothing is
    fetched). Estimates × (1 + noise·z); ties go to the lowest index. A *router* (a name of
    :data:`.routers.ROUTERS`) picks by its rule from what it sees of each instance at the arrival,
    after every event up to it (:class:`~.routers.RouterInputs`):

    * ``matched_blocks`` / ``tree_blocks``: the instance's true cache (``knowledge="true"``) or the
      router's belief (``"belief"``: what it sent there, LRU of ``belief_capacity`` blocks, 0 =
      unbounded, entries older than the TTL absent; updated after each dispatch);
    * ``deepest_entered`` (SGLang only): when block m − 1 of the request entered that view, s (the
      arrival of the request whose dispatch stored it there while absent; 0 if m = 0);
    * ``pending_tokens``: Σ (L − cached) of its requests whose last prompt token is not computed yet;
    * ``live_kv_tokens``: KV it *holds* (not the reservations of rule 4): the decode batch's prompts
      + tokens so far, + the whole prompt of the request being prefilled (the prefill queue's head);
    * ``inflight``: its requests not completed; ``queued``: its requests whose prefill has not started;
    * ``recent_requests`` / ``recent_prefill_s``: its requests that arrived within the last
      ``window_s`` (arrival > now − window) and the sum of their prefill estimates (rule 3's
      ``prefill_time(L − cached, cached)``), a running sum (+ at dispatch, − when the request leaves
      the window, in arrival order; 0 when the window is empty), as the kernel keeps it.

    ``rr`` = requests routed so far; ``u`` = the request's uniform draw (random tie-breaks). The
    prefill reuses the chosen instance's *true* cache whatever the router believed.
 3. At routing the local prefix is matched (cached = min(512·blocks, L − 1)), all the request's
    blocks are touched in that instance's cache, and the request joins the waiting queue.
 4. Waiting requests move to the prefill queue in FIFO order while reserved + (L + out) ≤ capacity
    (the KV of the whole request is reserved, as on a Mooncake decode node); this happens at every
    iteration end, and at an arrival to an idle instance.
 5. An instance runs iterations back to back; an idle one starts at the arrival. Contents are fixed
    at the start of an iteration; its effects happen at its end:

    * no chunking: if the prefill queue is not empty, the iteration is the *whole* prefill of its
      head (``cm_prefill_time(L − cached, cached)``) and the decode batch waits (gets no token);
      otherwise it is a decode step of the batch (``cm_decode_step_time(b, Σ context)``);
    * chunked: the iteration is the decode step of the batch (if any) plus the next
      ``k = min(remaining, prefill_chunk)`` prompt tokens of the head of the prefill queue (if
      any), timed ``cm_prefill_time(k, cached + already prefilled) + cm_decode_step_time(b, ctx)``.

 6. At an iteration's end: every request of its decode batch gets a token (interval = now − its
    previous token) and finishes when it has ``out`` tokens, freeing L + out of KV; then, if the
    iteration's chunk completes its request's prompt, that request emits its first token
    (TTFT = now − arrival, ``ready`` = ``decode admit`` = now) and joins the batch (context L + 1),
    or finishes if ``out == 1``; then step 4; then the next iteration is planned.
 7. Token intervals: first = first decode token − end of prefill; then one per iteration the
    request decodes in, *including the time of any prefill that stalled it*. TBT mean = their mean;
    TBT tail = mean of the longest ceil(10%) (FAST'25). ``prefill_start`` = start of the first
    iteration that works on its prompt; ``prefill_s`` = Σ of its chunks' prefill terms.
Events at equal times: iteration ends (lowest instance first) before the arrival.
"""
from __future__ import annotations

import math
from collections import deque

from ..roofline import cm_decode_step_time, cm_prefill_reuse_time, cm_prefill_time
from .config import COMPLETED, REJECTED_TOO_LARGE
from .reference import _LRU, _reusable_tokens
from .routers import ROUTERS, RouterInputs
from .routers_reference import EntryTimes, ReferenceBelief, route_reference


class _Instance:
    def __init__(self):
        self.waiting = deque()
        self.prefill = deque()
        self.batch = []
        self.reserved = 0
        self.max_reserved = 0
        self.pend = 0.0
        self.end = math.inf       # end of the current iteration (inf: idle)
        self.chunk_of = -1        # request whose prompt tokens this iteration computes
        self.chunk_k = 0
        self.chunk_s = 0.0
        self.decodes = False      # does the batch take part in this iteration?


def run_coupled_reference(trace, config, resolved, u_random, z_noise, out: dict, max_kv, diag) -> None:
    """Fill ``out`` (the per-request arrays of :func:`mooncake_lab.sim.run.simulate`) the slow way."""
    c = resolved.cost
    cap = resolved.decode_kv_capacity
    E = config.n_coupled
    chunked, chunk = bool(config.chunked_prefill), int(config.prefill_chunk)
    policy = config.prefill_policy
    noise_sd = float(config.estimator_noise)
    bt = trace.block_tokens
    n = len(trace)
    L_in, L_out = trace.input_len.tolist(), trace.output_len.tolist()
    arrival = trace.arrival_s.tolist()
    caches = [_LRU(resolved.cache_capacity_blocks, config.cache_eviction) for _ in range(E)]
    inst = [_Instance() for _ in range(E)]
    gen, last_tok, done_pref, full_pt = [0] * n, [0.0] * n, [0] * n, [0.0] * n
    intervals = [[] for _ in range(n)]
    clock = [-math.inf]
    rp = resolved.router if resolved.policy >= 5 else None  # a router (sim/routers.py)
    if rp is not None:
        belief = (ReferenceBelief(E, rp.belief_capacity or trace.n_blocks, rp.belief_ttl) if rp.belief
                  else None)
        sglang = rp.code == ROUTERS["sglang"]  # it reads when its deepest block entered the view
        entered = belief.entered if belief is not None else EntryTimes(E)  # the view it matches
        window = deque()             # (arrival, instance, prefill estimate s) of the routed requests in it
        recent_n, recent_s = [0] * E, [0.0] * E
        rr = 0

    def context(x):
        return sum(L_in[j] + gen[j] for j in x.batch)

    def admit(e):
        x = inst[e]
        while x.waiting and x.reserved + L_in[x.waiting[0]] + L_out[x.waiting[0]] <= cap:
            j = x.waiting.popleft()
            x.reserved += L_in[j] + L_out[j]
            x.max_reserved = max(x.max_reserved, x.reserved)
            x.prefill.append(j)

    def start(e, t):
        x = inst[e]
        j = x.prefill[0] if x.prefill else -1
        k = 0
        if j >= 0:
            if math.isnan(out["prefill_start"][j]):
                out["prefill_start"][j] = t
                out["queue_wait"][j] = t - arrival[j]
            k = int(out["computed_tok"][j]) - done_pref[j]
            if chunked:
                k = min(k, chunk)
        done_before = int(out["cached_tok"][j]) + done_pref[j] if j >= 0 else 0
        # the first chunk loads the cached prefix from DRAM (rule 3b); later ones find it in HBM
        prefill = cm_prefill_reuse_time if j >= 0 and done_pref[j] == 0 else cm_prefill_time
        b = len(x.batch)
        if chunked and (k > 0 or b > 0):
            pt = float(prefill(c, k, done_before)) if k > 0 else 0.0
            ds = float(cm_decode_step_time(c, b, context(x))) if b > 0 else 0.0
            x.chunk_of, x.chunk_k, x.chunk_s, x.decodes = (j if k > 0 else -1), k, pt, b > 0
            x.end = t + (pt + ds)
        elif not chunked and k > 0:   # the whole prompt; the batch waits
            pt = float(prefill(c, k, done_before))
            x.chunk_of, x.chunk_k, x.chunk_s, x.decodes = j, k, pt, False
            x.end = t + pt
        elif not chunked and b > 0:
            x.chunk_of, x.chunk_k, x.chunk_s, x.decodes = -1, 0, 0.0, True
            x.end = t + float(cm_decode_step_time(c, b, context(x)))
        else:
            x.chunk_of, x.end = -1, math.inf

    def iteration_end(e):
        x = inst[e]
        t = x.end
        diag[0] += 1
        if t < clock[0]:
            diag[1] += 1
        clock[0] = t
        if x.decodes:
            still = []
            for j in x.batch:
                gen[j] += 1
                intervals[j].append(t - last_tok[j])
                last_tok[j] = t
                if gen[j] == L_out[j]:
                    iv = intervals[j]
                    k = (len(iv) + 9) // 10
                    out["finish"][j] = t
                    out["outcome"][j] = COMPLETED
                    out["tbt_mean"][j] = sum(iv) / len(iv)
                    out["tbt_tail"][j] = sum(sorted(iv)[-k:]) / k
                    x.reserved -= L_in[j] + L_out[j]
                else:
                    still.append(j)
            x.batch = still
        j = x.chunk_of
        if j >= 0:
            diag[2] += 1
            done_pref[j] += x.chunk_k
            out["prefill_time"][j] += x.chunk_s
            if done_pref[j] == out["computed_tok"][j]:
                x.prefill.popleft()
                x.pend -= full_pt[j]
                out["prefill_end"][j] = out["ready"][j] = out["decode_admit"][j] = t
                if L_out[j] == 1:
                    out["finish"][j] = t
                    out["outcome"][j] = COMPLETED
                    x.reserved -= L_in[j] + L_out[j]
                else:
                    gen[j] = 1
                    last_tok[j] = t
                    x.batch.append(j)
                    diag[3] = max(diag[3], len(x.batch))
        admit(e)
        start(e, t)

    def router_inputs(i, a, blocks):
        """What the router sees of each instance at arrival ``a`` of request ``i`` (rule 2)."""
        while window and window[0][0] <= a - rp.window_s:
            _, f, pt = window.popleft()
            recent_n[f] -= 1
            recent_s[f] = recent_s[f] - pt if recent_n[f] else 0.0
        if belief is None:
            matched = [caches[f].match(blocks) for f in range(E)]
            tree = [len(caches[f].entries) for f in range(E)]
        else:
            matched = [belief.match(f, blocks, a) for f in range(E)]
            tree = [belief.size(f) for f in range(E)]
        pending, inflight, queued = [0.0] * E, [0] * E, [0] * E
        for j in range(i):
            f = int(out["prefill_inst"][j])
            if f < 0:  # rejected at arrival
                continue
            if math.isnan(out["prefill_end"][j]):    # its last prompt token is not computed yet
                pending[f] += float(out["computed_tok"][j])
            if math.isnan(out["finish"][j]):         # not completed
                inflight[f] += 1
            if math.isnan(out["prefill_start"][j]):  # no prefill iteration has started on it
                queued[f] += 1
        live = [float(context(x) + (L_in[x.prefill[0]] if x.prefill else 0)) for x in inst]
        deepest = [entered.deepest(f, blocks, matched[f]) if sglang else 0.0 for f in range(E)]
        return RouterInputs(matched, tree, pending, live, inflight, queued, list(recent_n), list(recent_s), deepest)

    def advance(t_now):
        while True:
            e = min(range(E), key=lambda f: (inst[f].end, f))
            if inst[e].end == math.inf or inst[e].end > t_now:
                return
            iteration_end(e)

    for i in range(n):
        a = arrival[i]
        advance(a)
        L = L_in[i]
        if L + L_out[i] > cap:
            out["outcome"][i] = REJECTED_TOO_LARGE
            continue
        blocks = trace.blocks_of(i).tolist()
        if rp is not None:
            ei = route_reference(rp, router_inputs(i, a, blocks), L, len(blocks), bt, float(u_random[i]), rr, cap)
            rr += 1
        elif policy == "random":
            ei = min(int(u_random[i] * E), E - 1)
        else:
            est = []
            for f in range(E):
                v = inst[f].pend
                if policy in ("cache_aware", "kvcentric"):
                    cl = _reusable_tokens(caches[f].match(blocks), L, bt)
                    v += float(cm_prefill_reuse_time(c, L - cl, cl))
                if noise_sd > 0:
                    v *= max(0.0, 1.0 + noise_sd * z_noise[i, f])
                est.append(v)
            ei = min(range(E), key=lambda f: (est[f], f))
        cached = _reusable_tokens(caches[ei].match(blocks), L, bt)
        if rp is not None and sglang and belief is None:  # SGLang matching the true caches: entry times
            entered.note(ei, blocks, a, caches[ei].entries.__contains__)
        caches[ei].touch(blocks)
        out["prefill_inst"][i] = out["decode_inst"][i] = ei
        out["cached_tok"][i] = cached
        out["computed_tok"][i] = L - cached
        out["fetched_tok"][i] = 0
        out["fetch_time"][i] = 0.0
        out["prefill_time"][i] = 0.0
        full_pt[i] = float(cm_prefill_reuse_time(c, L - cached, cached))
        x = inst[ei]
        x.pend += full_pt[i]
        if rp is not None:
            window.append((a, ei, full_pt[i]))
            recent_n[ei] += 1
            recent_s[ei] += full_pt[i]
            if belief is not None:
                belief.insert(ei, blocks, a)
        x.waiting.append(i)
        if x.end == math.inf:
            admit(ei)
            start(ei, a)
    advance(math.inf)
    for e in range(E):
        max_kv[e] = inst[e].max_reserved
