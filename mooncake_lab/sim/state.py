"""What the disaggregated simulator's state is: the groups :func:`.kernel._kernel` reads and changes.

Each group is a named tuple of arrays (or, :class:`Params`, of numbers); numba compiles one to a
struct of its members, and a helper takes the groups it changes. (A call passes a group's members one by one: the
hottest helpers take small groups or single arrays, ``benchmarks/bench_sim.py``.) Built by :func:`.run.simulate` and passed in: :class:`TraceArrays`,
:class:`Params` (with :class:`CppParams`), :class:`Outputs` (and :class:`mooncake_lab.prefix_cache.CacheState`, the prefill
instances' prefix caches). Allocated by the kernel, one run long: :class:`Prefill`, :class:`Conductor`,
:class:`Links`, :class:`DecodeNodes`, :class:`DecodeQueues`, :class:`DecodeRequests`, :class:`RunLog`, :class:`Stints`, :class:`Intervals`,
:class:`ReadyHeap`; for a router or a student policy also :class:`Dispatched` (and a router's
:class:`RouterBelief`, built by :func:`.run.simulate`). Units: seconds, tokens; "instance" = a prefill node or
CPP group, or a decode node.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["TraceArrays", "CppParams", "Params", "Outputs", "Prefill", "Conductor", "Links", "DecodeNodes",
           "DecodeQueues", "DecodeRequests", "Roles", "RunLog", "Stints", "Intervals", "ReadyHeap", "Dispatched",
           "RouterBelief"]


class TraceArrays(NamedTuple):
    """The requests, in arrival order (:class:`mooncake_lab.traces.Trace`)."""
    arrival: np.ndarray     # s
    input_len: np.ndarray   # prompt tokens
    output_len: np.ndarray  # output tokens (with output_lengths="unknown" decode learns it only at the end)
    offsets: np.ndarray     # request i's prefix blocks: block_ids[offsets[i]:offsets[i + 1]]
    block_ids: np.ndarray


class CppParams(NamedTuple):
    """A prefill instance's chunked pipeline parallelism (:mod:`.cpp_group`; one node: group_size 1)."""
    group_size: int         # CPP nodes per prefill instance X
    chunk: int              # tokens per CPP chunk
    act_bytes: float        # B per token between CPP stages
    bandwidth: float        # B/s between CPP stages
    overlap: bool           # stage sends overlap the next chunk's compute


class Params(NamedTuple):
    """The run's settings (:meth:`.config.ClusterConfig.resolve`); codes as in :mod:`.config`."""
    block_tokens: int       # tokens per KV block
    n_prefill: int          # prefill instances P (CPP groups of cpp.group_size nodes when > 1)
    n_decode: int           # decode instances D
    policy: int             # 0 random, 1 load, 2 cache-aware, 3 kvcentric, 4 a student's function
    threshold: float        # kvcentric's kvcache_balancing_threshold
    noise_sd: float         # estimator noise (relative)
    layerwise: bool         # layer-wise KV transfer to decode
    n_layers: int
    decode_cap: float       # KV tokens a decode node holds
    admission: int          # 0 none, 1 baseline, 2 early, 3 predicted (config.ADMISSIONS)
    cpp: CppParams
    ttft_slo: float         # s
    tbt_slo: float          # s per token
    adm_threshold: float    # load above which a request is rejected
    t_decode: float         # s: the uniform decode time of the predicted load
    horizon: float          # predicted load: × the request's own prefill time ahead
    binding: int            # 0 decode instance chosen when the KV is ready, 1 at arrival
    load_metric: int        # 0 max(TBT, memory) of the average instance, 1 mean per-instance TBT ratio
    output_unknown: bool    # decode sees prompts only; KV grows a token per step; preemption
    spare: int              # room for this many preemptions (more: the kernel stops, the caller doubles it)
    inline: bool            # short prefills inlined into a decode batch (arXiv v3 §5; reference rule 2c)
    n_prefill0: int         # nodes that start as prefill nodes (n_prefill unless roles switch)
    switch_ratio: float     # rule 14's ρ (0: fixed roles)
    switch_interval: float  # s between two load checks
    switch_cost: float      # s a switching node reloads after draining
    probe: int              # sim.explain: the request whose view the kernel records in Outputs.probe (−1: none)


class Outputs(NamedTuple):
    """Per request, filled by the kernel (pre-set to NaN / −1 / 0: :func:`.run._new_outputs`)."""
    queue_wait: np.ndarray      # s from arrival to prefill start
    fetch_time: np.ndarray      # s of the prefix fetch (0: none)
    prefill_start: np.ndarray   # s
    prefill_time: np.ndarray    # s
    prefill_end: np.ndarray     # s (= the first token)
    ready: np.ndarray           # s: its KV has reached decode
    decode_admit: np.ndarray    # s: first admitted to a decode batch
    finish: np.ndarray          # s: its last token
    tbt_mean: np.ndarray        # s per token
    tbt_tail: np.ndarray        # s: mean of its longest 10% token intervals
    prefill_load: np.ndarray    # the Conductor's prefill load at its arrival
    decode_load: np.ndarray     # and its decode load (current, or predicted)
    fetch_wait: np.ndarray      # s its fetch waited for links (contention)
    stream_wait: np.ndarray     # s its KV stream waited for links
    prefill_inst: np.ndarray
    decode_inst: np.ndarray
    fetch_src: np.ndarray       # the instance its prefix was fetched from (−1: none)
    cached_tok: np.ndarray      # prompt tokens not computed (local + fetched prefix)
    fetched_tok: np.ndarray
    computed_tok: np.ndarray
    outcome: np.ndarray         # config.COMPLETED 1, REJECTED_AT_ARRIVAL 2, _AFTER_PREFILL 3, _TOO_LARGE 4
    preemptions: np.ndarray     # times it was preempted on decode
    probe: np.ndarray           # (conductor_view.PROBE_ROWS, P): what Params.probe's request saw (sim.explain)


class Roles(NamedTuple):
    """Rule 14 of :mod:`.reference`: which pool each node is in (fixed roles: every instance in its own)."""
    pre_on: np.ndarray      # (P,) int64: 1 = takes prefill requests
    dec_from: np.ndarray    # (D,) s from which it takes decode requests (inf: not)
    draining: np.ndarray    # (D,) int64: 1 = leaving decode, not drained yet
    out_until: np.ndarray   # (P,) s: when its last prefill's KV has left (its last prefill's end for output 1)
    serve: np.ndarray       # (D,) 1.0 = in the decode pool now (takes requests or drains), for the loads
    sw: np.ndarray          # (3,) the switch in progress: [log row (−1: none), next check (s), rows logged]


class Prefill(NamedTuple):
    """Per prefill instance p (stage s of a CPP group): a FIFO pipeline, no event queue needed."""
    free: np.ndarray        # (P, X) when stage s is free, s
    link: np.ndarray        # (P, X) when stage s's NIC is free (overlapped CPP sends), s
    new_free: np.ndarray    # (X,) a group's stages after a candidate request
    new_link: np.ndarray    # (X,)


class Conductor(NamedTuple):
    """The Conductor's numbers for the arriving request, per prefill instance p."""
    local: np.ndarray       # (P,) blocks of its prefix cached on p
    est: np.ndarray         # (P,) its TTFT estimate on p, s
    src_ready: np.ndarray   # (P,) when its best prefix is complete on p (links), s


class Links(NamedTuple):
    """Network links (``network_contention``, :mod:`.links`): rows 0 … P·X − 1 the prefill nodes' send
    links, P·X … 2·P·X − 1 their receive links, 2·P·X + d decode node d's receive link; each a
    calendar of disjoint reserved intervals sorted by begin (then end)."""
    begin: np.ndarray       # (rows, slots) s
    end: np.ndarray         # (rows, slots) s
    live: np.ndarray        # (rows, 2) a row's first live slot and one past its last
    block_ready: np.ndarray  # (P, block ids) when block b is complete on p, s


class DecodeNodes(NamedTuple):
    """Per decode instance d, its batch: it jumps from event to event (:mod:`.decode_math`)."""
    at: np.ndarray          # time of the last processed step boundary, s
    next_t: np.ndarray      # time of its next event (inf: idle), s
    next_n: np.ndarray      # steps from ``at`` to that event
    ctx: np.ndarray         # total context of the step starting at ``at`` (unknown outputs: = KV held), tokens
    steps: np.ndarray       # steps run since the start
    batch: np.ndarray       # requests running
    running: np.ndarray     # (D, max batch) the running requests
    pa: np.ndarray          # (D, 4) the current segment's step pieces: first step's time, s,
    pd: np.ndarray          # (D, 4) … increment per step, s,
    pm: np.ndarray          # (D, 4) … and steps (≤ 3 pieces + 1 for a recompute stall)
    pn: np.ndarray          # pieces
    stall: np.ndarray       # pending recompute stall, folded into the next segment's first step, s
    last_run: np.ndarray    # its newest logged run (RunLog), −1: none


class DecodeQueues(NamedTuple):
    """Per decode instance d, its queue and KV accounting."""
    qhead: np.ndarray       # its FIFO queue (linked through DecodeRequests.qnext; −1: empty)
    qtail: np.ndarray
    queued: np.ndarray      # requests queued
    queued_kv: np.ndarray   # KV tokens the queued requests need
    reserved: np.ndarray    # known outputs: KV reserved by running requests, tokens
    held: np.ndarray        # unknown outputs: KV held now (scratch, :func:`.kernel._kv_now`), tokens
    bound_kv: np.ndarray    # KV tokens of requests bound at arrival whose KV is not ready yet
    max_kv: np.ndarray      # most KV it held (an output), tokens
    load_b: np.ndarray      # scratch: per-instance batch of a decode load (:func:`.kernel._place_candidate`)
    load_kv: np.ndarray     # and its KV, tokens


class DecodeRequests(NamedTuple):
    """Per request j, on decode; and ``seq`` ([0]: the next admission's number)."""
    qnext: np.ndarray       # the next request in its queue (−1: last)
    done_step: np.ndarray   # its instance's step count when it finishes
    run_mark: np.ndarray    # its instance's last run when its current stint began
    gen: np.ndarray         # tokens generated when (re)queued: 1, more after a preemption
    adm_seq: np.ndarray     # its admission's number (the newest-admitted is preempted first)
    cur_adm: np.ndarray     # its current stint's admission, s
    cur_gap: np.ndarray     # the start of its current stint's first interval, s
    st_head: np.ndarray     # its newest closed stint (Stints), −1: none
    seq: np.ndarray         # (1,)


class RunLog(NamedTuple):
    """Every step of a decode segment, as arithmetic runs linked backwards per instance."""
    a: np.ndarray           # first step's duration, s
    d: np.ndarray           # increment per step, s
    m: np.ndarray           # steps
    prev: np.ndarray        # the instance's previous run (−1: none)


class Stints(NamedTuple):
    """Closed stints (admission → preemption) of preempted requests, linked per request, newest first."""
    mark: np.ndarray        # the instance's last run before it (exclusive)
    end: np.ndarray         # its last run
    prev: np.ndarray        # the request's previous stint (−1: none)
    adm: np.ndarray         # its admission, s
    gap: np.ndarray         # its first interval's start, s


class Intervals(NamedTuple):
    """Scratch: one request's token intervals as runs, and a heap for their top 10%."""
    a: np.ndarray
    d: np.ndarray
    m: np.ndarray
    key: np.ndarray
    idx: np.ndarray


class ReadyHeap(NamedTuple):
    """Requests whose KV will reach decode, by (time, index) (prefill ends are not in arrival order):
    a :mod:`.heaps` heap in row 0."""
    t: np.ndarray           # (1, n + 1) s
    i: np.ndarray           # (1, n + 1)


class Dispatched(NamedTuple):
    """Routers and student policies: the requests sent to each prefill instance p, a FIFO list in
    dispatch (= arrival) order linked through ``nxt``. A prefill instance starts and ends its requests
    in that order, so what :class:`~.routers.RouterInputs` counts (pending, live, in flight, queued,
    recent) changes only at three pointers moving forward through the list (:func:`.kernel._advance_loads`)."""
    nxt: np.ndarray         # (n,) the next request sent to the same instance (−1: none yet)
    tail: np.ndarray        # (P,) the newest request sent to p (−1: none)
    ended: np.ndarray       # (P,) the oldest whose prefill has not ended (−1: none)
    started: np.ndarray     # (P,) the oldest that has not started (−1: none)
    window: np.ndarray      # (P,) the oldest inside the recent window (−1: none)
    bound_n: np.ndarray     # (D,) requests bound to decode node d at arrival whose KV is not ready yet
    count: np.ndarray       # (2,) [0] routing decisions so far (``rr``), [1] decode choices so far (round robin)


class RouterBelief(NamedTuple):
    """A router's own history of what it sent (``RouterParams.belief``; :func:`.routers.belief_match`):
    LRU prefix caches (:class:`mooncake_lab.prefix_cache.CacheState`'s arrays) and when each block was
    last sent to each instance (s; (P, 1) unused when the TTL is infinite). A dummy of (P, 0) caches
    when the router uses the true caches. ``entered_at`` (P, n_blocks), SGLang only (else (P, 1) unused):
    when each block last entered the view the router matches — this belief, or the true caches —
    (s; :func:`.routers.note_entered`; read only where written)."""
    last_use: np.ndarray
    q_block: np.ndarray
    q_stamp: np.ndarray
    meta: np.ndarray
    touched_at: np.ndarray
    entered_at: np.ndarray
