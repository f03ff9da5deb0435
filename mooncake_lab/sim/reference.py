"""The cluster simulator in plain Python: the semantics, written to be read (and to test the kernel).

Same results as :mod:`mooncake_lab.sim.kernel`, computed the slow, literal way: the decode pool
runs **one step at a time** and every request keeps the list of its token intervals; prefix caches
are :class:`~mooncake_lab.prefix_cache.ReferenceCache` s (``OrderedDict`` s); a CPP group pushes a request's chunks through lists of stage times
(:class:`_Group`). Only the scalar cost functions are shared with the kernel (stage and link
times of :mod:`mooncake_lab.cpp`, fetch times of :mod:`.cpp_group`).

The rules (both engines)
------------------------
Requests are handled in arrival order. Before request ``i`` is dispatched, the decode pool is
advanced to its arrival time (every event at or before it happens first).

Prefill (per instance: FIFO queue, prefix cache of 512-token blocks evicting by ``cache_eviction``)
    0. An instance is one node, or with ``cpp_group_size`` X > 1 a CPP group of X nodes
       (``n_prefill / X`` instances; capacity X × ``cache_capacity_blocks``), a pipelined FIFO
       (:mod:`.cpp_group`): ``busy_until`` below is the time its stage 0 is free (X = 1: the
       node is free); a started request's chunks (``cpp_chunk`` tokens) follow the previous
       request's through the X stages. "Prefill" time = the request's own pipeline time from
       ``start + fetch`` until its last chunk leaves the last stage on the instance's current state
       (X = 1: ``cm_prefill_time``; an idle group: ``cm_cpp_request_time``); "fetch" =
       :func:`.cpp_group.group_fetch_time` (``cm_kv_transfer_time`` / X).
    1. A request needing more KV than a decode instance holds (input + output tokens) is rejected
       at arrival (``rejected_too_large``).
    2. Each instance's *estimated TTFT* = queued work (``busy_until − now``) [+ prefill time with
       its local prefix (``cache_aware``)] — ``kvcentric`` (Algorithm 1): if the pool's longest
       prefix ``best`` beats the local one (``best/local ≥ threshold``, local 0 ⇒ ∞), queue +
       fetch(best − local tokens) + prefill with ``best`` cached. Estimates × (1 + noise·z).
       ``random`` draws the instance from a pre-drawn uniform. The minimum wins (ties: lowest).
   2a. A router (``prefill_policy`` one of :data:`.routers.ROUTERS`) gets, per instance, the
       :class:`~.routers.RouterInputs` at the arrival (an event at exactly then has happened),
       counted over the requests dispatched to it: ``pending_tokens`` Σ (L − cached) of those whose
       prefill has not ended, ``live_kv_tokens`` Σ L of those started and not ended, ``inflight``
       / ``queued`` those not ended / not started, ``recent_requests`` those that arrived after
       arrival − ``window_s`` and ``recent_prefill_s`` their prefill seconds (a running sum: + at
       dispatch, − when one leaves the window, 0 when none is left); ``matched_blocks`` /
       ``tree_blocks`` from the true caches or (``knowledge="belief"``) from its own history
       (:class:`~.routers_reference.ReferenceBelief`, given every block of each request when it is
       dispatched); SGLang also ``deepest_entered``, when block m − 1 of the request entered that
       view (:class:`~.routers_reference.EntryTimes`: noted before each store, at the arrival of the
       request that stored it while absent); ``rr`` = routing decisions so far; ``kv_cap`` = decode KV capacity × X. It
       returns the instance (:func:`~.routers_reference.route_reference`) and never fetches: the
       prefill reuses the chosen instance's true cache — except Dynamo with a shared tier
       (``dynamo_shared_multiplier`` m > 0; knowledge "true", disaggregated only): its cost credits
       m × the pool's blocks beyond each instance's prefix, and the chosen instance p fetches the
       pool's best prefix iff best > p's local one (no threshold), as ``kvcentric``'s fetch: fetch
       time, the source's links (6b), the blocks touched at the source and replicated on p (rule 4)
       — SGLang HiCache prefetching from its Mooncake storage tier.
   2c. ``inline_prefill`` (arXiv v3 §5's hybrid; before rule 2): a request with output > 1 and
       L ≤ ``cpp_chunk`` goes to the decode instance d rule 7 would choose now (its formula for the
       binding, at this arrival) when d's queue is empty, its KV fits (L, or L + out when known) and
       ``cm_prefill_time(L, 0) + cm_decode_step_time(b + 1, ctx + L + 1) ≤ tbt_slo`` (b, ctx: d's
       running batch and its context now). It touches no prefill instance or cache
       (``prefill_instance`` −1, nothing cached, queue / fetch / stream 0, prefill time
       ``cm_prefill_time(L, 0)``), is bound to d under ``"arrival"``, and is ready at its arrival (a
       ready event at ``a``: rule 7 then takes it to d). When admitted at a boundary t, d's next step
       first runs its prefill (a stall, as rule 8d's recompute, after any earlier at t), which makes
       its first token: ``prefill_end`` = t + the stalls so far, TTFT = it − arrival. From there on it
       decodes like any request (rule 10: its first interval ends at that step's end).
   2b. A student policy (``prefill_policy`` is a function, :mod:`.student_policy`) instead gets the
       request and the per-instance view of :mod:`.conductor_view` (queue, local prefix and
       prefill, ``kvcentric``'s fetch decision, fetch + prefill after it, TTFT estimate; noise as
       above) and returns the instance p; the best prefix is fetched to p iff ``view.fetch[p]``
       (pre-set by ``kvcentric``'s rule; the policy may change it) and the pool has more than p.
       The view also holds rule 2a's loads (pending, live KV, its share of X × decode KV capacity,
       in flight, queued).
   2d. ``sim.explain`` (``probe``): at one request's arrival, after the choice, the engine records the view
       of rule 2b with ``kvcentric``'s fetch rule whatever the policy (true caches of the prefill nodes;
       loads 0 unless rule 2a tracks them), the router's inputs as rule 2a filled them, which nodes take
       prefill requests, and the best prefix with its holder. It changes nothing in the run.
    3. Cached tokens = min(512·blocks, L) but at most L − 1 (one token is always computed).
       start = max(arrival, busy_until); end = start + fetch + prefill; the instance's stages
       advance past the request (X = 1: busy_until = end).
   3b. ``dram_hbm_load``: every "prefill time" above (rule 0's, the estimates' and the committed one)
       includes loading the cached tokens' KV (local and fetched) from host DRAM into HBM, layer by
       layer while the previous layer computes: ``cm_prefill_reuse_time`` (max(load, compute) +
       min(load, compute) / layers, load = cached × KV bytes / host-to-device bandwidth); a CPP group
       loads with each request's first chunk, each stage its layers' share. Off: ``cm_prefill_time``.
    4. Caches: a fetched prefix is touched at its source; then every block of the request is
       touched on the chosen instance (stored/refreshed, last block first; fetched ones replicate).
    5. TTFT = end − arrival (the prefill produces the first token). ``output_len == 1``: done.
    6. The KV reaches decode at ``ready = end + exposed transfer`` (layer-wise: max(x/l,
       x − p(1 − 1/l)); serialized: x; x = transfer of all L tokens).
   6b. ``network_contention``: fetches and KV streams reserve the prefill nodes' send / receive
       links (a stream under ``decode_binding="arrival"`` also its decode node's receive link) in
       commit order, each in the earliest gap (:mod:`.links`): a fetch comes from the
       holder of the best prefix it can begin from first (not before the prefix is complete
       there) and begins after a wait for the links (the prefill starts at start + wait +
       fetch), and ``ready`` may come later than rule 6 says. The Conductor's fetch estimates
       (rule 2, 2b) include that wait.
   6c. ``dram_hbm_load``: the decode node then loads the prompt's KV from its DRAM into HBM,
       ``L × KV bytes / host-to-device bandwidth``: ``ready`` (and the time the stream would have
       ended uncontended) come that much later. The load runs beside the decode batch (no step
       waits for it) and loads do not queue for the node's PCIe link.

Decode (per instance: continuous batching)
    7. ``decode_binding="ready"`` (late binding): at ``ready`` the request goes to the decode
       instance with the least KV reserved + queued (ties: lowest index) and joins its FIFO queue.
       ``"arrival"`` (Algorithm 1 line 24): the instance is chosen at the arrival, after the
       Conductor's prefill choice and before the admission check — the least KV reserved + queued
       + *bound in flight* (input + output tokens of every request already bound to it whose KV
       is not ready yet), ties lowest — and the request is bound to it (``decode_inst``) when
       admitted; at ``ready`` it leaves the in-flight set and joins that instance's queue. A
       request with output 1 never reaches decode and is bound to none. A router's run chooses
       by ``decode_choice`` instead (where rule 7 chooses): ``least_kv`` as above, ``least_requests``
       the fewest running + queued + bound in flight (ties lowest), ``round_robin`` the k-th
       choice (every one made, also of a request then rejected) → k mod D, ``least_queued`` the
       fewest queued (ties: from the request's draw, :func:`~.routers_reference.decode_tie_start`),
       ``aibrix_pd`` AIBrix's rule on running, tokens/s now (running / ``cm_decode_step_time`` of
       the running batch at its context now) and KV held (or reserved) — :mod:`.routers`.
    8. An idle instance admits immediately. Otherwise admission happens at step boundaries: at a
       boundary, running requests that received their last token finish (freeing ``L + out``
       tokens of KV), then queued requests are admitted in FIFO order while
       reserved + (L + out) ≤ capacity (the head blocks the queue), then the next step starts.
       A request ready exactly at a boundary's time waits for the next one.
   8b. ``output_lengths="unknown"`` (arXiv v3 §7.4): nothing reserves ``out``. A request's KV is
       its context, L + tokens so far (1 when it arrives: the prefill's token); a queued request
       needs that much free (Σ KV of the running + it ≤ capacity) — everywhere below where L + out
       counts (rules 1, 7, 11, 13), L + 1 counts for a request not yet decoding, and L + tokens so
       far for a running or preempted one. Too large at arrival only if L + 1 > capacity.
   8c. Preemption (vLLM v0.4–0.6 scheduler ``_preempt``, ``PreemptionMode.RECOMPUTE``): at a
       boundary, after the completions, while the running requests' KV for the next step exceeds
       the capacity, the newest-admitted running request is preempted: its KV is freed and it goes
       to the front of the instance's queue (several at one boundary: the oldest-admitted first),
       keeping its tokens; its ``preemptions`` count + 1. A victim whose own KV exceeds the
       capacity can never run on a node: it ends as ``rejected_too_large`` (vLLM marks such a
       sequence FINISHED_IGNORED). Then admission (rule 8) runs as usual.
   8d. Recompute: when a preempted request with g tokens is admitted again, its KV is rebuilt by a
       prefill of its L + g tokens on the decode node, ``cm_prefill_time(L + g, 0)``; the
       instance's next step starts that much later (the stalls of several re-admissions add up).
       The recompute produces no token of its own (a simplification: vLLM samples one with it),
       so the request's next token comes at the end of that step: its interval after a preemption
       runs from the preemption's boundary (its last token) over the wait in the queue, the stall
       and the step; every request running there gets the stall in that step's interval too.
    9. A step of batch ``b`` takes ``cm_decode_step_time(b, Σ context)``; a request's context is
       L + tokens generated so far; every running request gets one token at the step's end.
   10. Token intervals: first = (first decode token − end of prefill); then one per step.
       TBT mean = their mean; TBT tail = mean of the longest ceil(10%) (FAST'25).
Roles that switch (``role_switch_ratio`` ρ > 0; FAST'25 §5.5 states the idea, the rule is the course's)
   14. The N = ``n_prefill + n_decode`` nodes are numbered 0 … N − 1; node k starts as a prefill node if
       k < ``n_prefill``, else as a decode node; prefill and decode instance numbers are node numbers
       (noise draws: one per node). Each arrival, after the decode pool is advanced to it and before
       rule 1: (a) a node whose switch has ended (it is serving in its new role) ends the switch;
       (b) at the first arrival a, and then at the first arrival ≥ the previous check +
       ``role_switch_interval_s``, the Conductor checks the loads — unless a switch is in progress (at
       most one at a time). Prefill load ℓ_P = the mean over the prefill nodes of max(0, busy_until − a)
       / TTFT SLO; decode load ℓ_D = ``decode_load(B / D, K / D)`` over the D nodes serving decode (those
       taking requests and the one draining out of the pool), B the requests running or queued there, K
       their KV held (reserved) + queued. If ℓ_P ≥ 1 (``config.ROLE_SWITCH_AT_LOAD``), ℓ_P ≥ ρ · ℓ_D and ≥ 2 nodes take decode requests,
       the one of them with the least KV held + queued (+ bound in flight under ``"arrival"``; ties lowest)
       leaves decode: it takes no new request (rule 7 skips it) and drains — its batch, its queue and the
       requests bound to it run to their end; it is drained when all are done (now, if it is idle), then
       a prefill node from drained + ``role_switch_s`` (busy until then, an empty prefix cache; the
       Conductor sees it from the first arrival after it drained). Else if ℓ_D ≥ 1, ℓ_D ≥ ρ · ℓ_P and ≥ 2
       nodes are prefill nodes, the one with the least queued work (busy_until; ties lowest) leaves
       prefill: the Conductor skips it from now, its prefix cache is dropped now (nothing is fetched
       from it), and it is drained when its last prefill has ended and its last KV stream has left
       (the stream's end before rule 6c's load; its last prefill's end for output 1); it takes decode
       requests from drained + ``role_switch_s`` (rule 7, at any time ≥ then). Every switch is logged
       (decided, node, new role, drained, serving from).
Events at equal times: decode steps (lowest instance first) before ready events (lowest request
first) before the arrival.

Admission (arXiv §7; loads from :mod:`.admission`, threshold θ = ``admission_threshold``)
   11. At every arrival (after the too-large check and the Conductor's choice, before anything is
       committed) the Conductor computes the request's *prefill load* = predicted TTFT / TTFT SLO
       (queue + fetch + its prefill on the chosen instance) and a *decode load* of the pool with
       this request added, ``decode_load(B / D, K / D)`` (B requests holding K KV tokens = their
       input + output): under ``none``/``baseline``/``early`` B, K count the requests running or
       queued in decode now; under ``predicted`` they count the requests predicted to be decoding
       at T = arrival + horizon × (KV ready − arrival): every accepted unfinished request whose
       decode start s (its admission if admitted, else its KV-ready time, even while still in
       prefill) has s ≤ T < s + t_d (uniform decode time t_d, §7.4). Both are recorded.
       ``decode_load_metric="tbt"``: the same requests, each on its decode instance (the one it
       runs or queues on, or is bound to at arrival; the candidate on the instance rule 7 chose
       for it under ``"arrival"``); one without an instance yet counts 1/D on every instance; the
       decode load is then ``pool_tbt_load`` = the mean over instances of TBT / TBT SLO.
   12. ``none`` admits everything. ``baseline`` rejects at arrival when prefill load > θ
       (Algorithm 1's TTFT check). ``early`` and ``predicted`` reject at arrival when
       max(prefill load, decode load) > θ. A request rejected at arrival is ``rejected_at_arrival``:
       no queue, no cache touched, no prefill.
   13. ``baseline`` only: when the KV is ready, the chosen (or bound) decode instance's load with
       the request added, ``decode_load(running + queued + 1, reserved + queued + L + out)``
       (``"tbt"``: ``tbt_load`` of the same), > θ ⇒
       ``rejected_after_prefill``: its prefill (and fetch) time is wasted. ``early`` and
       ``predicted`` keep no decode-side check (a request that does not fit waits in the queue),
       so they never reject after prefill.
"""
from __future__ import annotations

import math
from collections import deque

import numpy as np

from ..roofline import cm_decode_step_time, cm_kv_transfer_time, cm_prefill_time
from .admission import decode_load, instance_decode_load, pool_tbt_load, prefill_load
from ..cpp import cm_cpp_link_time, cm_stage_coefficients
from ..prefix_cache import ReferenceCache
from ..roofline import cm_prefill_reuse_time, cm_prefill_time
from .conductor_view import PROBE_ROWS, Request, new_view
from .links import LinkCalendar, fit_all
from .cpp_group import group_fetch_time
from .routers import ROUTERS, DecodeInputs, new_router_inputs
from .routers_reference import EntryTimes, ReferenceBelief, route_decode_reference, route_reference
from .config import (ROLE_SWITCH_AT_LOAD, ADMISSIONS, COMPLETED, REJECTED_AFTER_PREFILL, REJECTED_AT_ARRIVAL,
                     REJECTED_TOO_LARGE)


def _reusable_tokens(n_blocks, L, block_tokens):
    return min(block_tokens * n_blocks, L, L - 1)


def _exposed_transfer(c, n_tokens, prefill_s, n_layers, layerwise):
    x = float(cm_kv_transfer_time(c, n_tokens))
    if not layerwise:
        return x
    return max(x / n_layers, x - prefill_s * (1.0 - 1.0 / n_layers))


#: One instance's prefix cache, ``_LRU(capacity, policy)``: match / touch (last block first, so the
#: root ends most recent), evicting by ``config.cache_eviction`` (the name is historical).
_LRU = ReferenceCache


class _Group:
    """One prefill instance as a pipeline of X stages (X = 1: one node, unchunked).

    ``free[s]``: when stage s's GPUs are free; ``link[s]``: when its NIC is free (overlapped sends).
    """

    def __init__(self, c, x, chunk, act_bytes, bandwidth, overlap):
        self.c, self.x, self.chunk = c, x, chunk
        self.stage_c = cm_stage_coefficients(c, x)
        self.act, self.bw, self.overlap = act_bytes, bandwidth, overlap
        self.free = [0.0] * x
        self.link = [0.0] * x

    @property
    def busy_until(self):
        """When stage 0 is free: the next request may start."""
        return self.free[0]

    def run(self, ready, n_new, n_cached, commit):
        """(finish, prefill seconds) of a request whose chunks may enter stage 0 from ``ready``;
        the stages advance only if ``commit``."""
        if self.x == 1:  # one node, the whole prompt at once
            pt = float(cm_prefill_reuse_time(self.c, n_new, n_cached))
            end = max(ready, self.free[0]) + pt
            if commit:
                self.free[0] = end
            return end, pt
        free, link = list(self.free), list(self.link)
        done_tok, finish = 0, ready
        while done_tok < n_new:
            k = min(self.chunk, n_new - done_tok)
            load = done_tok == 0  # the first chunk loads the cached prefix from DRAM (rule 3b)
            compute = float((cm_prefill_reuse_time if load else cm_prefill_time)(
                self.stage_c, float(k), float(n_cached + done_tok)))
            send = float(cm_cpp_link_time(float(k), self.act, self.bw))
            arrives = ready                      # when the chunk's input is at stage s
            for s in range(self.x):
                end = max(arrives, free[s]) + compute
                if s == self.x - 1:              # last stage: nothing to send
                    free[s] = finish = end
                elif self.overlap:               # the NIC sends while the GPUs go on
                    free[s] = end
                    link[s] = max(end, link[s]) + send
                    arrives = link[s]
                else:                            # the stage is busy until its send is done
                    free[s] = arrives = end + send
            done_tok += k
        if commit:
            self.free, self.link = free, link
        return finish, finish - ready


class _Decode:
    """One decode instance, stepped one iteration at a time."""

    def __init__(self):
        self.running = []          # request indices, in admission order
        self.queue = deque()
        self.next_boundary = math.inf
        self.reserved = 0          # known output lengths: Σ L + out of the running
        self.waiting = 0
        self.bound = 0             # KV tokens of requests bound here at arrival, KV not ready yet
        self.bound_n = 0           # and how many
        self.max_reserved = 0      # known: most KV reserved; unknown: largest step context
        self.stall = 0.0           # unknown: recompute time before the next step (s)


def run_reference(trace, config, resolved, u_random, z_noise, out: dict, max_kv: np.ndarray,
                  diag: np.ndarray, student=None, link_log: list | None = None,
                  switch_log: list | None = None, probe: tuple = (-1, None)) -> None:
    """Fill ``out`` (the per-request arrays of :func:`mooncake_lab.sim.run.simulate`) the slow way.

    ``student``: a :class:`~.student_policy.StudentPolicy` choosing the prefill instance (rule 2b).
    ``link_log``: with ``network_contention``, every reservation is appended to it as
    ``(link, begin, end, request)``, link = ``("send" | "recv", prefill instance, stage)`` or
    ``("decode_recv", decode instance, 0)``.
    ``switch_log``: with ``role_switch_ratio`` > 0, every switch (rule 14) is appended to it as
    ``[decided, node, new role (0 prefill, 1 decode), drained, serving from]`` (s; NaN until known).
    ``probe``: (request index, rows): at that request's arrival, rule 2d's numbers go into ``rows``
    (:data:`.conductor_view.PROBE_ROWS` × P); the best prefix, its holder and the choice into ``diag[9:12]``.
    """
    c = resolved.cost
    cap = resolved.decode_kv_capacity
    P, D = config.prefill_slots, config.decode_slots  # rule 14: every node has both when roles switch
    X = resolved.cpp_group_size
    assert config.switches_roles or P * X == config.n_prefill
    roles = config.switches_roles
    N0 = config.n_prefill if roles else P
    pre_on = [p < N0 for p in range(P)]             # takes prefill requests
    dec_from = [0.0 if (d >= N0 or not roles) else math.inf for d in range(D)]  # takes decode requests from
    draining = [False] * D                          # leaving decode, not drained yet
    out_until = [0.0] * P                           # rule 14: when its last prefill's KV has left
    sw = []                                         # the switch in progress: its log row
    check_at = [-math.inf]
    rho, sw_interval, sw_cost = float(config.role_switch_ratio), float(config.role_switch_interval_s), \
        float(resolved.role_switch_s)
    log_sw = switch_log if switch_log is not None else []

    def fetch_s(n_tokens):
        return float(group_fetch_time(c, n_tokens, X))
    contention = bool(config.network_contention)
    send = [[LinkCalendar() for _ in range(X)] for _ in range(P)]  # rule 6b: per node (p, s)
    recv = [[LinkCalendar() for _ in range(X)] for _ in range(P)]
    drecv = [[LinkCalendar()] for _ in range(D)]  # decode nodes' receive links (decode_binding="arrival")

    def fetch_begin(src, p, t, d):
        """When a ``d``-s fetch from ``src`` to ``p`` requested at ``t`` has all X pairs started."""
        return max([t] + [fit_all([send[src][s], recv[p][s]], t, d) for s in range(X)])

    avail = [dict() for _ in range(P)]  # block → when it is complete on that instance (rule 6b)

    def complete_on(q):
        """When the best prefix is complete on holder ``q``."""
        return max([0.0] + [avail[q][b] for b in blocks[:best]])

    def fetch_from(p, t, d):
        """(source, begin) of a fetch to ``p``: without contention the first holder of the best
        prefix, at ``t``; with it the holder whose links let the fetch begin first (ties: lowest),
        not before the prefix is complete there."""
        if not contention:
            return src, t
        return min((fetch_begin(q, p, max(t, complete_on(q)), d), q)
                   for q in range(P) if local[q] == best and q != p)[::-1]

    def backlog(links, p, a):
        return max(lk.backlog(a) for lk in links[p]) if contention else 0.0

    def book(kind, p, s, b, e, i):
        {"send": send, "recv": recv, "decode_recv": drecv}[kind][p][s].book(b, e)
        if link_log is not None:
            link_log.append(((kind, p, s), b, e, i))

    policy_name = config.prefill_policy
    fetches = policy_name == "kvcentric" or student is not None  # Algorithm 1's remote-prefix rule
    threshold = float(config.kvcache_balancing_threshold)
    noise_sd = float(config.estimator_noise)
    layerwise = bool(config.layerwise_kv_transfer)
    adm = config.admission
    theta = float(config.admission_threshold)
    ttft_slo, tbt_slo = float(config.ttft_slo_s), float(config.tbt_slo_s)
    t_d, horizon = float(config.decode_time_s), float(config.prediction_horizon)
    assert ADMISSIONS[adm] == resolved.admission
    at_arrival = config.decode_binding == "arrival"
    tbt_metric = config.decode_load_metric == "tbt"
    metric = resolved.decode_load_metric
    grow = bool(resolved.output_unknown)  # rules 8b-8d
    caches = [_LRU(resolved.cache_capacity_blocks, config.cache_eviction) for _ in range(P)]
    n = len(trace)
    bt = trace.block_tokens
    L_in = trace.input_len.tolist()
    L_out = trace.output_len.tolist()
    groups = [_Group(c, X, int(resolved.cpp_chunk), float(resolved.cpp_act_bytes), float(resolved.cpp_bandwidth),
                     bool(resolved.cpp_overlap)) for _ in range(P)]
    dec = [_Decode() for _ in range(D)]
    ready_events = []              # (time, request); kept sorted
    gen = [0] * n                  # tokens generated so far
    inlined = [False] * n          # rule 2c: prefilled inside a decode batch
    inline = bool(config.inline_prefill)
    preempted_wait = [False] * n   # preempted, waiting to be admitted again
    last_token = [0.0] * n
    intervals = [[] for _ in range(n)]
    clock = [-math.inf]
    rp = resolved.router  # rule 2a
    router = isinstance(policy_name, str) and policy_name in ROUTERS
    track = router or student is not None  # the per-instance loads (routers, and a student's view)
    sent = [[] for _ in range(P)]          # the requests dispatched to each prefill instance
    recent = [deque() for _ in range(P)]   # (arrival, prefill s) of those inside the window
    recent_s = [0.0] * P
    belief = (ReferenceBelief(P, rp.belief_capacity, rp.belief_ttl)
              if router and rp.belief else None)
    sglang = router and rp.code == ROUTERS["sglang"]  # it reads when its deepest block entered the view
    entered = belief.entered if belief is not None else EntryTimes(P)  # the view it matches: belief or true
    kv_cap = cap * X
    dchoice = rp.decode_choice if router else 0  # rule 7: 0 least KV, else routers.DECODE_CHOICES
    count = [0, 0]                         # routing decisions, decode choices so far

    def loads(a):
        """Rule 2a's per-instance loads at ``a``."""
        ri = new_router_inputs(P)
        for p in range(P):
            for j in sent[p]:
                if out["prefill_end"][j] > a:
                    ri.pending_tokens[p] += L_in[j] - out["cached_tok"][j]
                    ri.inflight[p] += 1
                    if out["prefill_start"][j] <= a:
                        ri.live_kv_tokens[p] += L_in[j]
                    else:
                        ri.queued[p] += 1
            while recent[p] and recent[p][0][0] <= a - rp.window_s:
                recent_s[p] -= recent[p].popleft()[1]
            if not recent[p]:
                recent_s[p] = 0.0
            ri.recent_requests[p] = len(recent[p])
            ri.recent_prefill_s[p] = recent_s[p]
        return ri

    def decode_by_choice(t, j, at_arrival_now):
        """Rule 7 for a router whose ``decode_choice`` is not least KV, at ``t`` for request ``j``."""
        di = DecodeInputs([len(x.running) for x in dec], [len(x.queue) for x in dec],
                          [x.bound_n if at_arrival_now else 0 for x in dec],
                          [decode_rate(e) if dchoice == 4 else 0.0 for e in range(D)],
                          [float(held(e)) for e in range(D)])
        count[1] += 1
        return route_decode_reference(dchoice, di, float(u_random[j]), P, count[1] - 1, cap,
                                      rp.aibrix_decode_max_request, rp.aibrix_decode_max_throughput)

    def decode_rate(d):
        """Tokens/s instance d generates now: its batch / the step time at its context now (0 idle)."""
        b = len(dec[d].running)
        return b / float(cm_decode_step_time(c, b, sum(L_in[j] + gen[j] for j in dec[d].running))) if b else 0.0

    def tick(t):
        diag[0] += 1
        if t < clock[0]:
            diag[1] += 1
        clock[0] = t

    def kv(j):  # rule 8b: what a request counts / needs: L + tokens so far, or L + out
        return L_in[j] + gen[j] if grow else L_in[j] + L_out[j]

    def held(d):  # KV held by the running requests of instance d
        return sum(L_in[j] + gen[j] for j in dec[d].running) if grow else dec[d].reserved

    def admit(d, t):
        inst = dec[d]
        while inst.queue:
            j = inst.queue[0]
            need = kv(j)
            if held(d) + need > cap:
                break
            inst.queue.popleft()
            inst.waiting -= need
            if not grow:
                inst.reserved += need
                inst.max_reserved = max(inst.max_reserved, inst.reserved)
            if preempted_wait[j]:  # rule 8d: rebuild its KV first
                inst.stall += float(cm_prefill_time(c, L_in[j] + gen[j], 0))
                preempted_wait[j] = False
            else:
                out["decode_admit"][j] = t
                if inlined[j]:  # rule 2c: the next step runs its prefill first; it makes its first token
                    inst.stall += float(cm_prefill_time(c, L_in[j], 0))
                    out["prefill_end"][j] = last_token[j] = t + inst.stall
            inst.running.append(j)
        diag[3] = max(diag[3], len(inst.running))
        if inst.running:
            ctx = sum(L_in[j] + gen[j] for j in inst.running)
            if grow:
                assert ctx <= cap  # KV memory never exceeds the capacity while it grows
                inst.max_reserved = max(inst.max_reserved, ctx)
            inst.next_boundary = t + inst.stall + float(cm_decode_step_time(c, len(inst.running), ctx))
            inst.stall = 0.0
        else:
            inst.next_boundary = math.inf

    def boundary(d):
        inst = dec[d]
        t = inst.next_boundary
        tick(t)
        still = []
        for j in inst.running:  # the step that ends now gave every running request a token
            gen[j] += 1
            intervals[j].append(t - last_token[j])
            last_token[j] = t
            if gen[j] == L_out[j]:
                assert out["outcome"][j] == 0  # a request (also a preempted one) ends exactly once
                out["finish"][j] = t
                out["outcome"][j] = COMPLETED
                inst.reserved -= L_in[j] + L_out[j]
                iv = intervals[j]
                k = (len(iv) + 9) // 10
                out["tbt_mean"][j] = sum(iv) / len(iv)
                out["tbt_tail"][j] = sum(sorted(iv)[-k:]) / k
            else:
                still.append(j)
        inst.running = still
        while grow and held(d) > cap:  # rule 8c
            v = inst.running.pop()     # the newest-admitted
            if L_in[v] + gen[v] > cap:
                assert out["outcome"][v] == 0
                out["outcome"][v] = REJECTED_TOO_LARGE
                continue
            out["preemptions"][v] += 1
            preempted_wait[v] = True
            inst.queue.appendleft(v)
            inst.waiting += kv(v)
        admit(d, t)

    def on_ready(t, j):
        tick(t)
        need = kv(j)
        if at_arrival:  # rule 7: bound at arrival
            d = int(out["decode_inst"][j])
            dec[d].bound -= need
            dec[d].bound_n -= 1
        elif dchoice:
            d = decode_by_choice(t, j, False)
            out["decode_inst"][j] = d
        else:
            d = min((e for e in range(D) if dec_from[e] <= t), key=lambda e: (held(e) + dec[e].waiting, e))
            out["decode_inst"][j] = d
        inst = dec[d]
        if adm == "baseline" and instance_decode_load(c, float(len(inst.running) + len(inst.queue) + 1),
                                                      float(held(d) + inst.waiting + need), cap,
                                                      tbt_slo, metric) > theta:
            out["outcome"][j] = REJECTED_AFTER_PREFILL
            drained(d, t)
            return
        dec[d].queue.append(j)
        dec[d].waiting += need
        if not dec[d].running:  # idle: starts right away
            admit(d, t)

    def drained(d, t):
        """Rule 14: decode node d, leaving decode, has drained at t: a prefill node after the reload."""
        if draining[d] and not dec[d].running and not dec[d].queue and dec[d].bound_n == 0:
            draining[d] = False
            pre_on[d] = True
            groups[d].free = [t + sw_cost] * X
            sw[0][3], sw[0][4] = t, t + sw_cost

    def role_step(a):
        """Rule 14 at the arrival ``a``: end the switch in progress, or check the loads and start one."""
        if sw and not math.isnan(sw[0][4]) and a >= sw[0][4]:
            sw.clear()
        if a < check_at[0]:
            return
        check_at[0] = a + sw_interval
        if sw:
            return
        pre_nodes = [p for p in range(P) if pre_on[p]]
        takes = [d for d in range(D) if dec_from[d] <= a]
        serving = takes + [d for d in range(D) if draining[d]]
        lp = sum(max(0.0, groups[p].busy_until - a) for p in pre_nodes) / len(pre_nodes) / ttft_slo
        nb = sum(len(dec[d].running) + len(dec[d].queue) for d in serving)
        kt = sum(held(d) + dec[d].waiting for d in serving)
        ld = float(decode_load(c, nb / len(serving), float(kt) / len(serving), cap, tbt_slo))
        if lp >= ROLE_SWITCH_AT_LOAD and lp >= rho * ld and len(takes) >= 2:  # a decode node leaves for prefill
            k = min(takes, key=lambda e: (held(e) + dec[e].waiting + dec[e].bound, e))
            dec_from[k] = math.inf
            draining[k] = True
            sw.append([a, k, 0, math.nan, math.nan])
            log_sw.append(sw[0])
            drained(k, a)
        elif ld >= ROLE_SWITCH_AT_LOAD and ld >= rho * lp and len(pre_nodes) >= 2:  # a prefill node leaves for decode
            k = min(pre_nodes, key=lambda p: (groups[p].busy_until, p))
            pre_on[k] = False
            caches[k] = _LRU(resolved.cache_capacity_blocks, config.cache_eviction)
            t_d = max(a, groups[k].busy_until, out_until[k])
            dec_from[k] = t_d + sw_cost
            sw.append([a, k, 1, t_d, t_d + sw_cost])
            log_sw.append(sw[0])

    def advance(t_now):
        while True:
            d = min(range(D), key=lambda e: (dec[e].next_boundary, e))
            tb = dec[d].next_boundary
            tr = ready_events[0][0] if ready_events else math.inf
            if tb <= tr and tb <= t_now and tb < math.inf:
                boundary(d)
                drained(d, tb)
            elif ready_events and tr <= t_now:
                t, j = ready_events.pop(0)
                on_ready(t, j)
            else:
                return

    def conductor_view(i, a, L, remote_ok, ri):
        """Rule 2b's view of request ``i`` (length ``L``) arriving at ``a``: ``local`` / ``best`` as matched
        for it; ``ri``: rule 2a's loads, or None (then they stay 0)."""
        view = new_view(P)
        for p in range(P):
            g = groups[p]
            start_p = max(a, g.busy_until)
            w = max(0.0, g.busy_until - a)
            cl = _reusable_tokens(local[p], L, bt)
            pre = g.run(start_p, L - cl, cl, commit=False)[1]
            f, f_pre, t = 0.0, pre, w + pre
            if remote_ok(p):
                cb = _reusable_tokens(best, L, bt)
                f = fetch_s(cb - cl)
                f += fetch_from(p, start_p, f)[1] - start_p
                f_pre = g.run(start_p + f, L - cb, cb, commit=False)[1]
                t = w + (f + f_pre)
            k = max(0.0, 1.0 + noise_sd * z_noise[i, p]) if noise_sd > 0 else 1.0
            view.wait_s[p], view.prefill_s[p], view.fetch_s[p] = w * k, pre * k, f * k
            view.fetch_prefill_s[p], view.ttft_s[p] = f_pre * k, t * k
            view.prefix_tokens[p], view.fetch[p] = cl, remote_ok(p)
            view.send_backlog_s[p], view.recv_backlog_s[p] = backlog(send, p, a), backlog(recv, p, a)
            if ri is not None:
                view.pending_tokens[p], view.live_kv_tokens[p] = ri.pending_tokens[p], ri.live_kv_tokens[p]
                view.kv_util[p] = ri.live_kv_tokens[p] / kv_cap
                view.inflight[p], view.queued_requests[p] = ri.inflight[p], ri.queued[p]
        return view

    def record_probe(i, a, L, ri, pi):
        """Rule 2d: what request ``i`` saw (the view, with ``kvcentric``'s fetch rule; the router's inputs)."""
        rows = probe[1]
        v = conductor_view(i, a, L, lambda p: best > local[p] and (local[p] == 0 or best >= threshold * local[p]),
                           ri)
        for r, name in enumerate(PROBE_ROWS[:9]):
            rows[r] = np.asarray(getattr(v, name), dtype=np.float64)
        if ri is not None:
            for r, name in enumerate(("matched_blocks", "tree_blocks", "pending_tokens", "live_kv_tokens", "inflight",
                                      "queued", "recent_requests", "recent_prefill_s", "deepest_entered")):
                rows[9 + r] = np.asarray(getattr(ri, name), dtype=np.float64)
        else:
            rows[9:18] = 0.0
        rows[18] = [1.0 if pre_on[p] else 0.0 for p in range(P)]
        diag[9], diag[10], diag[11] = best, (src if best > 0 else -1), pi

    for i in range(n):
        a = float(trace.arrival_s[i])
        advance(a)
        if roles:
            role_step(a)
        L, o = L_in[i], L_out[i]
        if (L + 1 if grow else L + o) > cap:
            out["outcome"][i] = REJECTED_TOO_LARGE
            continue
        if inline and o > 1 and L <= resolved.cpp_chunk:  # rule 2c
            key = ((lambda e: (held(e) + dec[e].waiting + dec[e].bound, e)) if at_arrival
                   else (lambda e: (held(e) + dec[e].waiting, e)))
            d = min(range(D), key=key)
            need = L + 1 if grow else L + o
            ctx = sum(L_in[j] + gen[j] for j in dec[d].running)
            step = float(cm_prefill_time(c, L, 0)) + float(cm_decode_step_time(c, len(dec[d].running) + 1,
                                                                                 ctx + L + 1))
            if not dec[d].queue and held(d) + need <= cap and step <= tbt_slo:
                inlined[i] = True
                gen[i] = 1  # its prefill's token, made when it is admitted (prefill_end: then)
                out["prefill_start"][i] = out["ready"][i] = a
                out["queue_wait"][i] = out["fetch_time"][i] = out["fetch_wait"][i] = out["stream_wait"][i] = 0.0
                out["prefill_time"][i] = float(cm_prefill_time(c, L, 0))
                out["computed_tok"][i], out["cached_tok"][i], out["fetched_tok"][i] = L, 0, 0
                if at_arrival:
                    out["decode_inst"][i] = d
                    dec[d].bound += need
                    dec[d].bound_n += 1
                ready_events.append((a, i))
                ready_events.sort()
                continue
        blocks = trace.blocks_of(i).tolist()
        ri = loads(a) if track else None
        local = [caches[p].match(blocks) for p in range(P)]
        best = max(local)
        src = local.index(best)

        def remote_ok(p):
            return fetches and best > local[p] and (local[p] == 0 or best >= threshold * local[p])

        on = [p for p in range(P) if pre_on[p]]  # rule 14: the prefill nodes now
        if policy_name == "random":
            pi = on[min(int(u_random[i] * len(on)), len(on) - 1)]
        elif student is not None:  # rule 2b
            view = conductor_view(i, a, L, remote_ok, ri)
            diag[4] = i
            pi = student.choose(Request(i, a, L, o, _reusable_tokens(best, L, bt), src if best > 0 else -1,
                                        float(u_random[i])), view)
            student_fetch = bool(view.fetch[pi]) and best > local[pi]  # the policy may have changed it
        elif router:  # rule 2a
            for p in range(P):
                ri.matched_blocks[p] = belief.match(p, blocks, a) if belief else local[p]
                ri.tree_blocks[p] = belief.size(p) if belief else len(caches[p].entries)
                if sglang:
                    ri.deepest_entered[p] = entered.deepest(p, blocks, int(ri.matched_blocks[p]))
            pi = route_reference(rp, ri, L, len(blocks), bt, float(u_random[i]), count[0], kv_cap)
            count[0] += 1
            if not 0 <= pi < P:
                raise RuntimeError(f"router {policy_name!r} chose instance {pi} of {P}")
        else:
            est = [math.inf] * P
            for p in on:
                g = groups[p]
                e = max(0.0, g.busy_until - a)  # wait until (stage 0 of) the instance is free
                if policy_name in ("cache_aware", "kvcentric"):
                    cl = _reusable_tokens(local[p], L, bt)
                    if remote_ok(p):
                        cb = _reusable_tokens(best, L, bt)
                        f = fetch_s(cb - cl)
                        r0 = max(a, g.busy_until)
                        f += fetch_from(p, r0, f)[1] - r0  # rule 6b: + the wait for the links
                        e += f + g.run(max(a, g.busy_until) + f, L - cb, cb, commit=False)[1]
                    else:
                        e += g.run(max(a, g.busy_until), L - cl, cl, commit=False)[1]
                if noise_sd > 0:
                    e *= max(0.0, 1.0 + noise_sd * z_noise[i, p])
                est[p] = e
            pi = min(on, key=lambda p: (est[p], p))
        if i == probe[0]:  # rule 2d
            record_probe(i, a, L, ri, pi)
        cached = _reusable_tokens(local[pi], L, bt)
        cl = cached
        fetch_t = 0.0
        use_remote = student_fetch if student is not None else remote_ok(pi)
        if router and rp.code == ROUTERS["dynamo"] and rp.dynamo_shared > 0.0:  # rule 2a: Dynamo's shared tier
            use_remote = best > local[pi]
        if use_remote:
            cached = _reusable_tokens(best, L, bt)
            fetch_t = fetch_s(cached - cl)
        start = max(a, groups[pi].busy_until)
        f_src, f_wait = src, 0.0
        if use_remote:
            f_src, f_begin = fetch_from(pi, start, fetch_t)
            f_wait = f_begin - start
        end, pt = groups[pi].run(start + f_wait + fetch_t, L - cached, cached, commit=False)
        r = r_free = end + _exposed_transfer(c, L, pt, resolved.n_layers, layerwise)
        cand = L + 1 if grow else L + o  # what this request counts / needs on decode (rule 8b)
        bind = None  # rule 7, "arrival": the decode instance chosen now
        if at_arrival and o > 1:
            if dchoice:
                bind = decode_by_choice(a, i, True)
            else:
                bind = min((e for e in range(D) if dec_from[e] <= a),
                           key=lambda e: (held(e) + dec[e].waiting + dec[e].bound, e))
        if contention and o > 1:  # rule 6b: the stream wants [r − x, r] on all pi's send links
            x = float(cm_kv_transfer_time(c, L))  # (+ the bound decode node's receive link)
            b_s = fit_all(send[pi] + ([] if bind is None else drecv[bind]), r_free - x, x)
            if b_s > r_free - x:
                r = max(r_free, b_s + x)
        if o > 1:  # rule 6c: the decode node loads the received KV from DRAM into HBM
            r += float(c[16]) * L
            r_free += float(c[16]) * L
        # admission at arrival (rules 11-12)
        pl = float(prefill_load(end - a, ttft_slo))
        if adm == "predicted":
            T = a + horizon * (r - a)
            members = [j for d in range(D) for j in dec[d].running] + \
                      [j for d in range(D) for j in dec[d].queue] + [j for _, j in ready_events]
            starts = {j: (out["decode_admit"][j] if not math.isnan(out["decode_admit"][j])
                          else out["ready"][j]) for j in members}
            counted = [j for j, s_ in starts.items() if s_ <= T and s_ + t_d > T]
        else:
            counted = [j for d in range(D) for j in dec[d].running + list(dec[d].queue)]
        nb = 1 + len(counted)
        k_tok = cand + sum(kv(j) for j in counted)
        serve = [1.0 if (dec_from[d] <= a or draining[d]) else 0.0 for d in range(D)]  # rule 14
        Dn = sum(serve)
        dl = float(decode_load(c, nb / Dn, float(k_tok) / Dn, cap, tbt_slo))
        if tbt_metric:  # rule 11, "tbt": each counted request on its instance, one without an instance spread
            b_d, k_d = np.zeros(D), np.zeros(D)
            spread_b = spread_k = 0.0
            # running, queued and bound requests have decode_inst set; in flight under late binding: −1
            placed = [(int(out["decode_inst"][j]), kv(j)) for j in counted]
            placed.append((-1 if bind is None else bind, cand))
            for d, need_j in placed:
                if d >= 0:
                    b_d[d] += 1
                    k_d[d] += need_j
                else:
                    spread_b += 1
                    spread_k += need_j
            dl = float(pool_tbt_load(c, b_d, k_d, spread_b, spread_k, tbt_slo, np.array(serve)))
        out["prefill_load"][i] = pl
        out["decode_load"][i] = dl
        if (adm == "baseline" and pl > theta) or (adm in ("early", "predicted") and max(pl, dl) > theta):
            out["outcome"][i] = REJECTED_AT_ARRIVAL
            continue
        out["fetched_tok"][i] = 0
        if use_remote:
            out["fetched_tok"][i] = cached - cl
            out["fetch_src"][i] = f_src
            caches[f_src].touch(blocks[:best])
            if contention:
                for s in range(X):  # pair s: f_src's node s → pi's node s
                    b = fit_all([send[f_src][s], recv[pi][s]], max(start, complete_on(f_src)), fetch_t)
                    book("send", f_src, s, b, b + fetch_t, i)
                    book("recv", pi, s, b, b + fetch_t, i)
        groups[pi].run(start + f_wait + fetch_t, L - cached, cached, commit=True)
        if sglang and belief is None:  # SGLang matching the true caches: entry times
            entered.note(pi, blocks, a, caches[pi].entries.__contains__)
        caches[pi].touch(blocks)
        if contention:  # fetched blocks are complete on pi when the fetch ends, computed ones at the end
            r0 = start + f_wait + fetch_t
            for k in range(local[pi], len(blocks)):
                avail[pi][blocks[k]] = r0 if (use_remote and k < best) else end
        out["prefill_inst"][i] = pi
        if bind is not None:  # rule 7: bound now, its KV in flight to ``bind`` until it is ready
            out["decode_inst"][i] = bind
            dec[bind].bound += cand
            dec[bind].bound_n += 1
        out["cached_tok"][i] = cached
        out["computed_tok"][i] = L - cached
        out["queue_wait"][i] = start - a
        out["fetch_time"][i] = fetch_t
        out["fetch_wait"][i] = f_wait
        out["prefill_start"][i] = start
        out["prefill_time"][i] = pt
        out["prefill_end"][i] = end
        if track:  # rule 2a: i is dispatched to pi
            sent[pi].append(i)
            recent[pi].append((a, pt))
            recent_s[pi] += pt
            if belief is not None:
                belief.insert(pi, blocks, a)
        out_until[pi] = max(out_until[pi], end if o == 1 else r - float(c[16]) * L)  # rule 14's drain
        if o == 1:
            out["finish"][i] = end
            out["outcome"][i] = COMPLETED
            continue
        out["ready"][i] = r
        out["stream_wait"][i] = r - r_free
        if contention:
            for s in range(X):
                book("send", pi, s, b_s, b_s + x, i)
            if bind is not None:
                book("decode_recv", bind, 0, b_s, b_s + x, i)
        gen[i] = 1
        last_token[i] = end
        ready_events.append((r, i))
        ready_events.sort()
    advance(math.inf)
    for d in range(D):
        max_kv[d] = dec[d].max_reserved
