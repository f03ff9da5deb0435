"""The KV-aware routers of today's open-source serving stacks, as built-in policies of both engines.

Each rule is taken from its source code as the course's notes ``notebooks/routers.md`` gives it (repository,
file, commit); the version implemented is named per router below. A router picks the instance a
request is sent to: the prefill instance of the disaggregated pools (``pd=True``: the prefill-side
router; the decode node is then chosen by :data:`DECODE_CHOICES`) or the instance of the coupled
engine (``pd=False``). Routers never fetch a remote prefix (none of them has Mooncake's transfer
branch): the prefill reuses what the chosen instance's *true* cache holds, whatever the router
believed — except Dynamo with a shared tier (``dynamo_shared_multiplier`` > 0, below), whose chosen
worker fetches the pool's longest prefix as SGLang HiCache prefetches from its Mooncake storage tier.

What a router sees (:class:`RouterInputs`, one entry per instance i, at the request's arrival,
before it is placed; both engines fill it the same way)
---------------------------------------------------------------------------------------------
``matched_blocks``   leading 512-token blocks of the request the router thinks i holds: i's true
                     prefix cache (``knowledge="true"``: KV events, an LMCache controller) or the
                     router's own history of what it sent (``"belief"``, :class:`Belief`).
``tree_blocks``      blocks in that view of i's cache (Dynamo's tie-break).
``pending_tokens``   prompt tokens still to compute (prompt − cached) of the requests sent to i
                     whose prefill has not ended, each counted in full until its prefill ends
                     (Dynamo's ``P_i``: "full value from admission until the first output token").
``live_kv_tokens``   KV tokens held by i's live requests: a prefill instance holds the prompts it
                     is prefilling now; a coupled instance its decode batch (prompt + tokens so far)
                     and the prompt it is prefilling.
``inflight``         requests sent to i and not finished (a prefill instance: prefill not ended;
                     a coupled instance: not completed) — the gateways' in-flight counters.
``queued``           requests sent to i that have not started.
``recent_requests``  requests sent to i in the last ``window_s`` seconds (production-stack's QPS
                     × window; Preble's window).
``recent_prefill_s`` estimated prefill seconds of those requests (their computed tokens; Preble).
``deepest_entered``  s: when block m_i − 1 of the request (the deepest one matched on i) last entered
                     that view of i's cache — the arrival time of the request whose dispatch stored it
                     there while it was absent (belief: not believed, incl. expired; true: not cached);
                     0 if m_i = 0. Filled for ``sglang`` only (its ``last_tenant``), 0 otherwise.

Request scalars: ``L`` prompt tokens, ``n_blocks`` its blocks, ``bt`` tokens per block (512),
``u`` its U[0, 1) draw (random tie-breaks and sampling stay reproducible per seed), ``rr`` routing
decisions made so far (round robin), ``kv_cap`` KV tokens an instance holds (utilisation).
Hit tokens of a match of m blocks = min(m · bt, L).

**Random tie-breaks** (llm-d's shuffle, AIBrix's shuffle, production-stack's ``random.choice``,
Dynamo's last resort): among tied instances, the first at or after the start index
``floor(u · N)``, cyclically — one draw per request, deterministic per seed. A tie-break among the
decode nodes uses the draw's leftover fraction u2 = u · N − floor(u · N) (N prefill instances; uniform
and independent of the prefill start): the first tied node at or after floor(u2 · D).

The rules (codes :data:`ROUTERS`; parameters :class:`RouterConfig`, defaults from the reference)
----------------------------------------------------------------------------------------------
Written out in :mod:`.routers_reference` (plain Python) and compiled in :func:`route` (numba).
Per instance i: m_i matched blocks, h_i = min(m_i · bt, L) hit tokens, P_i pending, D_i live KV
tokens, n_i in flight, q_i queued. "Lowest index": plain argmin/argmax; "random": the tie-break above.
Everywhere left out: the gateways' char- or 16-token hashing (the traces give 512-token blocks, so
matches are whole 512-token blocks), tokenisers, health checks, LoRA / model identity in the hashes.

**dynamo** (5) — ai-dynamo/dynamo, classic ``lib/llm/src/kv_router/scheduler.rs``@db19bd2a, which is
the current ``lib/kv-router/src/scheduling/selector/default.rs``@07a6c9ce with κ = 1 and no lower
tiers; defaults ``config.rs``@07a6c9ce (κ = s = 1, ρ = 0, T = 0).
    cost_i = (s · max(0, P_i + L − κ · h_i) + [D_i + L, 0 if P/D]) / bt + ρ · n_i
    T = 0: argmin cost, ties → smaller ``tree_blocks``, then random; T > 0: sample
    w_i = exp(−((cost_i − min)/(max − min))/T) by the cumulative sum crossing u · Σw.
    The P/D prefill router runs with ``track_active_blocks=false`` (no decode term). Left out: host /
    disk credits, credit decay δ (0 by default), ``router_queue_threshold`` and the busy
    filters, KV-reuse deduplication of D_i (r's own blocks count as L), the ``lmetric`` policy,
    conditional disaggregation. Knowledge "true" = KV events (the default); "belief" = the
    ``--no-router-kv-events`` prediction with ``router_ttl_secs`` = 120 s.
    **Shared tier** (issue 26 §3 fact 2), off by default: the credit's ``m · c_shared`` term,
    m = ``dynamo_shared_multiplier`` (Dynamo's ``shared_cache_multiplier``: 0.0 by default, in [0, 1];
    "the CLI sets this to 0.5 when shared cache is enabled", ai-dynamo/dynamo@07a6c9ce
    ``lib/kv-router/src/scheduling/config.rs``), added to the credit of
    ``lib/kv-router/src/scheduling/selector/default.rs``@07a6c9ce ``worker_logit``:
        cost_i = (s · max(0, P_i + L − κ · h_i − m · (h_best − h_i)) + [D_i + L, 0 if P/D]) / bt + ρ · n_i,
        best = max_j m_j (the longest prefix any instance holds), h_best = min(best · bt, L).
    Dynamo's c_shared is ``shared_beyond_device_blocks`` = ``shared_cache_hits.hits_beyond(device
    overlap of i)`` (``selector/mod.rs``@07a6c9ce): the blocks of the request the shared pool holds at
    positions ≥ i's own prefix, from the pool's object events ("tracks Mooncake object events so it can
    discount prefill cost for blocks any worker can fetch, not just blocks the candidate holds locally",
    https://docs.nvidia.com/dynamo/v1.5.0/knowledge-base/modular-components/backends/sg-lang/hi-cache,
    "Using HiCache"). Here the pool is the prefill instances' true caches (Mooncake's store). Each LRU
    cache holds a prefix-closed part of every chain (a request touches its blocks last first, so a block
    outlives the ones after it), so the pool's blocks of the request are its first ``best`` and
    hits_beyond(m_i) = best − m_i, counted in tokens as the device credit is (h = min(m · bt, L),
    :func:`_hit`). (With ``lfu`` / ``length_aware`` eviction a pool block past a gap is not counted: only
    a contiguous prefix can be fetched and used.)
    The engines then fetch that prefix to the chosen instance (rule 2a of :mod:`.reference`). Needs
    knowledge "true" (Dynamo reads the pool's own events, not its routing history; "belief" is refused)
    and the disaggregated pools (the coupled engine has no pool to fetch from: refused).

**sglang** (6) — sgl-project/sglang ``sgl-model-gateway/src/policies/cache_aware.rs``@b93974f1
(miss → least load); defaults ``sgl-router/py_src/sglang_router/router_args.py``@e46dcd87.
    imbalanced = max n − min n > abs (64) ∧ max n > rel (1.5) · min n → argmin n;
    else b = among the deepest matches (m_b = max m) the one whose deepest matched block entered
    earliest (least ``deepest_entered``; ties lowest index): h_b / L > threshold (0.3) → b, else
    argmin n (lowest index).
    The tie-break is the tree's ``last_tenant``: the match returns the deepest node's cached tenant
    (sgl-project/sglang ``sgl-model-gateway/src/policies/tree.rs``@03744dbedc69f4db84d0a6ae6d4400ce252bb6d8
    ``prefix_match_with_counts``; the same in SMG ``crates/kv_index/src/string_tree.rs``@09b0a5c4e67fef4c2b8a98f722528db49e921690).
    ``last_tenant`` is written when ``insert`` *creates* a node (the inserting tenant) and copied to the
    upper half when a node is split; an insert that walks an existing node (another tenant attaching)
    and a match's 1-in-8 timestamp touch leave it alone. So the tenant returned is the first one to have
    stored that prefix, for as long as it holds the node — the instance whose view got the deepest block
    earliest. When that tenant has been evicted from the node the cache is stale and the match takes
    the first entry of the node's DashMap (hash order) and caches it; modelled as the next-earliest
    holder (deterministic). The old ``sgl-router/src/tree.rs`` (no cache) always took the DashMap's
    first entry. The router-side tree is the belief, capacity max_tree_size 2^26 chars ≈ 32,768 blocks
    at 4 chars per token. Left out: the eviction every 120 s (modelled as LRU at insert), the hash
    order of the stale-cache fallback, nodes at 512-token block granularity (a node boundary inside a
    block), the tie-break by processed count, SMG's token-usage imbalance terms (off by default), the
    event-driven mode.

**llmd** (7) — llm-d/llm-d-router@ebab6879: default profile ``pkg/epp/config/loader/defaults.go``
(prefix 3, queue 2, KV utilisation 2); P/D prefill profile ``deploy/config/pd-epp-config.yaml``
(prefix 2, queue 1).
    score_i = w_p · min(m_i, M)/M + w_q · (max q − q_i)/(max q − min q) [1 if all equal]
              + w_kv · (1 − min(1, D_i / kv_cap)),  M = min(n_blocks, 131,072 tokens / bt); argmax, random ties.
    The approx-prefix producer's per-pod LRU is the belief (capacity = the instance's cache). Left
    out: the prefill decider (``nonCachedTokens`` 0 = off in code), the other scorers and filters,
    the weighted-random picker, chars/4 token estimates.

**prodstack_rr / prodstack_prefix / prodstack_kv** (8, 9, 10) — vllm-project/production-stack@a6c01db0
``src/vllm_router/routers/routing_logic.py``, ``prefix/hashtrie.py``.
    rr: rr mod N.  prefix: random among argmax m (the HashTrie, no eviction, no load term;
    ``prefix_min_match_length`` 0 never falls back).  kv: b = argmax m (lowest index); k = 0 or
    h_b < L − 2000 (``kv_aware_threshold``) → lowest QPS (argmin ``recent_requests``, lowest index,
    window 60 s: ``--request-stats-window``) else b.
    Left out: session routing (needs session ids the traces lack; without one it is the lowest-QPS
    fallback used here), the 128-character trie chunks, the LMCache controller's own lookup.

**aibrix** (11), coupled engine — vllm-project/aibrix@e3e10f9e ``pkg/plugins/gateway/algorithms/prefix_cache.go``
``routeOriginal`` (code defaults: IMBALANCE_ABS 8, k_σ 1; the README's 16 / 2 are not the code's).
    C = {n_i = min n} if max n − min n > 8 else all; no m_i > 0 in C → argmin n (lowest index);
    else C ordered by (m desc, n asc, random), the first with n_i ≤ mean n + k_σ · σ(n) (population,
    all pods); none → argmin n (lowest index). (AIBrix orders the matched pods only and falls back
    to a random least-request pod: the same choice, since an unmatched pod reached in the order has
    the least n; ties in the no-match fallback go to the lowest index here, randomly in AIBrix.)
    The hash store is the belief: 200,000 blocks of 4 chars ≈ 390 blocks of 512, TTL 20 min. Left
    out: that store is global (one LRU over all pods), modelled per instance; the 1 s TTL sweep
    (expiry is checked at match); the KV-event-synced variant.

**aibrix** (11), disaggregated pools — the PD router (``routing-strategy=pd``), which picks the prefill
*and* the decode pod and does not use ``routeOriginal``: vllm-project/aibrix
``pkg/plugins/gateway/algorithms/pd_disaggregation.go``@0169276105b1cc2e144ac9d851531c25dc14c06e
(``loadImbalanceSelectPrefillPod``, ``scorePrefillPods``; the match percentage of
``pkg/utils/prefixcacheindexer/hash.go``, read @0871c212; k_σ of ``prefix_cache.go``).
    n_i in-flight prefills (its ``PrefillRequestTracker``). max n − min n > 32 (hard-coded) → the
    least-loaded pod, random among the ties (``rand.Intn``). Else skip every pod with
    n_i > mean n + k_σ · sd(n) (k_σ = ``standardDeviationFactor`` 1; sd is AIBrix's own
    ``standardDeviation``, the *sample* deviation Σ(n − mean)² / (N − 1), 0 for one pod); over the rest
    argmin (strict <, pod order = lowest index) of
        score_i = (100 − pct_i) · 0.1 + n_i / max(1, max n),   pct_i = ⌊100 · m_i / n_blocks⌋
    (``MatchPrefix``: (k + 1) · 100 / len(prefixHashes), integer division, k the last matched block;
    here blocks are the trace's 512-token blocks, so n_blocks counts the last, partial one too). The
    prefix store is the belief as for ``routeOriginal`` (inserted for the chosen prefill instance).
    The decode pod: ``decode_choice`` ``"aibrix_pd"`` below. AIBrix then takes, per roleset, the pair with
    the least normalised prefill + decode score; with one roleset (our pools) that pair is simply the
    two minima, so the two choices are made independently. ⚠ ``pd_readme.md`` / routers.md §5 give 16 for
    the prefill and decode fast-path spreads; the code at this commit says 32 (the code wins, as
    everywhere here); routers.md's drain-time fast path (ratio > 1.5) is not in this file.

**preble** (12) — WukLab/preble ``multi_node/global_scheduler_with_time.py``@0c962c4c (E2), with
AIBrix's port's constants (decode length 45, TPOT 0.15 s, window 3 min).
    k = max m, cached = min(k · bt, L); G = {m_i = k} if k > 0 and L − cached < cached (exploit)
    else all (explore); argmin over G (lowest index) of cost_i = windowed prefill s
    (``recent_prefill_s``) + [n_i · 45 · 0.15 s, 0 if P/D].
    Not copied: the subset-index bug (argmin over G returned as a GPU id). Left out: the rebalancing
    and TTFT-doubling overload detection (their call is commented out in the code), the eviction
    cost, per-node miss-rate weighting (the windowed sum stands for it), the radix tree's token
    granularity.

The decode node (disaggregated, :data:`DECODE_CHOICES`; chosen where ``decode_binding`` chooses it)
------------------------------------------------------------------------------------------------
Per decode node d (:class:`DecodeInputs`): r_d requests running (its batch), q_d queued, b_d bound to it
at arrival with their KV still in flight, thr_d tokens/s it generates now (r_d / the step time of its
batch at its context now, :func:`~mooncake_lab.roofline.cm_decode_step_time`; 0 idle; a pending
recompute stall is not counted), KV_d tokens its running requests hold (held, or reserved with known
output lengths), kv_cap its capacity.
    ``least_kv``: Mooncake's least KV held + queued (+ bound), in the engines (Algorithm 1 line 24;
    also Dynamo's load-only decode router). ``least_requests``: argmin r + q + b (lowest index).
    ``round_robin``: the k-th decode choice → k mod D (production-stack's orchestrated P/D).
    ``least_queued`` (llm-d, ``disagg-profile-handler`` runs the decode profile first;
    ``deploy/config/pd-epp-config.yaml``@ebab6879 decode profile = prefix-cache scorer 2 + queue scorer 1
    on the decode pods): our decode nodes keep no prefix cache, so the prefix score is 0 on every one
    (a simplification: llm-d's approximate prefix scorer reads the router's own LRU of what it sent to each
    decode pod, which would score them) and the pick is argmax of the queue score = the fewest waiting q_d;
    ties by the decode tie-break (the draw's leftover u2, above).
    ``aibrix_pd`` (AIBrix's ``loadImbalanceSelectDecodePod`` / ``scoreDecodePods``, same file):
    free_d = round(100 − 100 · KV_d / kv_cap) (half away from zero), ≤ 0 → 0.1; the maxima of r, thr
    and free start at 1. min r = 0 or max r − min r ≥ 32 (``AIBRIX_DECODE_MAX_REQUEST``) → the first
    node with the least r; else max thr − min thr > 2048 tok/s (``AIBRIX_DECODE_MAX_THROUGHPUT``) → the
    first with the least thr; else argmin (strict <, lowest index) of
        (r_d / max r + (1 − thr_d / max thr)) / (free_d / max free).
    (vLLM's metric is its average generation throughput over the last logging interval; the node's
    rate now stands for it.)
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numba.extending import overload

from ..jit import helper_njit
from ..prefix_cache import _touch_blocks
from ..validate import choice, fail, flag, int_array, integer, real, real_array

__all__ = ["ROUTERS", "ROUTER_CODES", "DECODE_CHOICES", "KNOWLEDGE", "RouterConfig", "RouterParams",
           "RouterInputs", "new_router_inputs", "route", "SYSTEM_DEFAULTS", "belief_match", "belief_insert",
           "note_entered", "deepest_entered", "router_args", "decode_args",
           "DecodeInputs", "new_decode_inputs", "route_decode", "decode_tie_start", "aibrix_free_pct",
           "aibrix_pd_prefill_score"]

#: Router name → kernel policy code (after the built-in Conductor policies 0–3 and a student's 4).
ROUTERS = {"dynamo": 5, "sglang": 6, "llmd": 7, "prodstack_rr": 8, "prodstack_prefix": 9,
           "prodstack_kv": 10, "aibrix": 11, "preble": 12}
ROUTER_CODES = {v: k for k, v in ROUTERS.items()}
#: How a disaggregated run picks the decode node (binding at arrival or when the KV is ready):
#: Mooncake's least KV (Algorithm 1 line 24; also Dynamo's load-only decode router), the fewest
#: requests (running + queued + bound in flight), round robin over the decode nodes, llm-d's decode
#: profile (the fewest waiting), or AIBrix's PD router (module docstring).
DECODE_CHOICES = {"least_kv": 0, "least_requests": 1, "round_robin": 2, "least_queued": 3, "aibrix_pd": 4}
#: What a router knows of the caches: the true per-instance caches, or its own history (belief).
KNOWLEDGE = {"true": 0, "belief": 1}


# Per router: (knowledge, belief capacity in 512-token blocks (None = the instance's own cache
# capacity, 0 = unbounded), belief TTL s (inf = none), QPS/statistics window s, decode choice in P/D).
# Decode choice: Dynamo's decode router is load-only on KV blocks (least_kv); production-stack's
# orchestrated P/D is round robin; SGLang's old pair selection takes the least-loaded pod
# (least_requests); llm-d's decode profile (prefix 2 + queue 1, no prefix on our decode nodes) is the
# fewest waiting (least_queued); AIBrix's PD router has its own decode rule (aibrix_pd); Preble has no
# P/D (least_kv).
SYSTEM_DEFAULTS = {
    # Dynamo: KV events on by default (true state); --no-router-kv-events predicts with router_ttl_secs=120.
    "dynamo": ("true", 0, 120.0, 60.0, "least_kv"),
    # SGLang gateway: router-side tree, max_tree_size 2^26 chars/tenant ≈ 2^26 / 4 chars per token / 512.
    "sglang": ("belief", 2 ** 26 // 4 // 512, math.inf, 60.0, "least_requests"),
    # llm-d approx-prefix producer: per-pod LRU, capacity = the pod's CacheNumBlocks (autoTune=true).
    "llmd": ("belief", None, math.inf, 60.0, "least_queued"),
    # production-stack: round robin needs no cache; --request-stats-window default 60 s
    # (src/vllm_router/parsers/parser.py, checked at 008a23bd; routers.md does not give it).
    "prodstack_rr": ("true", 0, math.inf, 60.0, "round_robin"),
    # prefixaware HashTrie: "assume that there is no eviction".
    "prodstack_prefix": ("belief", 0, math.inf, 60.0, "round_robin"),
    # kvaware: asks the LMCache controller (true state).
    "prodstack_kv": ("true", 0, math.inf, 60.0, "round_robin"),
    # AIBrix: LRU store of 200,000 blocks of 4 chars (≈ 200k tokens ≈ 390 blocks of 512), 20 min TTL.
    "aibrix": ("belief", 200_000 * 4 // 4 // 512, 1200.0, 60.0, "aibrix_pd"),
    # Preble: its global radix tree (router-side), 3 min window.
    "preble": ("belief", 0, math.inf, 180.0, "least_kv"),
}


class RouterParams(NamedTuple):
    """A run's router settings, kernel-ready (:meth:`RouterConfig.resolve`)."""
    code: int                # ROUTERS code
    pd: bool                 # prefill side of the disaggregated pools (False: the coupled engine)
    belief: bool             # the router matches against its own history (Belief), not the true caches
    belief_capacity: int     # blocks per instance in the belief (LRU); 0 = unbounded
    belief_ttl: float        # s; inf = none
    window_s: float          # recent_* statistics window, s
    decode_choice: int       # DECODE_CHOICES code (disaggregated)
    dynamo_credit: float     # κ overlap_score_credit
    dynamo_scale: float      # s prefill_load_scale
    dynamo_request_weight: float  # ρ decode_active_request_weight
    dynamo_temperature: float     # T router_temperature
    dynamo_shared: float     # m shared_cache_multiplier (0: no shared tier)
    sglang_threshold: float  # cache_threshold (match rate)
    sglang_abs: float        # balance_abs_threshold (requests)
    sglang_rel: float        # balance_rel_threshold
    llmd_w_prefix: float     # prefix-cache-scorer weight
    llmd_w_queue: float      # queue-scorer weight
    llmd_w_kv: float         # kv-cache-utilization-scorer weight
    llmd_max_blocks: int     # match cap (blocks of bt tokens)
    prodstack_threshold: float   # kv_aware_threshold (tokens)
    aibrix_abs: float        # IMBALANCE_ABS (running requests)
    aibrix_k: float          # std factor k_σ
    aibrix_pd_prefill_abs: float      # PD router: prefill in-flight spread beyond which the least loaded wins
    aibrix_decode_max_request: float  # PD router: decode running spread at which the least running wins
    aibrix_decode_max_throughput: float  # PD router: decode throughput spread (tok/s) beyond which the slowest wins
    preble_decode_len: float  # tokens
    preble_tpot: float       # s per token


class RouterInputs(NamedTuple):
    """Per-instance arrays the engines fill at each arrival (fields: module docstring)."""
    matched_blocks: np.ndarray    # int64
    tree_blocks: np.ndarray       # int64
    pending_tokens: np.ndarray    # float64, tokens
    live_kv_tokens: np.ndarray    # float64, tokens
    inflight: np.ndarray          # int64
    queued: np.ndarray            # int64
    recent_requests: np.ndarray   # int64
    recent_prefill_s: np.ndarray  # float64, s
    deepest_entered: np.ndarray   # float64, s (sglang only)


def new_router_inputs(n: int) -> RouterInputs:
    """Zeroed :class:`RouterInputs` for ``n`` instances."""
    i, f = np.int64, np.float64
    return RouterInputs(np.zeros(n, i), np.zeros(n, i), np.zeros(n, f), np.zeros(n, f), np.zeros(n, i),
                        np.zeros(n, i), np.zeros(n, i), np.zeros(n, f), np.zeros(n, f))


class DecodeInputs(NamedTuple):
    """Per-decode-node arrays the engines fill where a decode node is chosen (module docstring)."""
    running: np.ndarray   # int64, requests in its batch
    queued: np.ndarray    # int64, requests waiting in its queue
    bound: np.ndarray     # int64, requests bound to it at arrival whose KV is in flight
    rate: np.ndarray      # float64, tokens/s it generates now (filled for "aibrix_pd" only)
    kv_used: np.ndarray   # float64, KV tokens its running requests hold (or reserve)


def new_decode_inputs(n: int) -> DecodeInputs:
    """Zeroed :class:`DecodeInputs` for ``n`` decode nodes."""
    i, f = np.int64, np.float64
    return DecodeInputs(np.zeros(n, i), np.zeros(n, i), np.zeros(n, i), np.zeros(n, f), np.zeros(n, f))


@dataclass(frozen=True)
class RouterConfig:
    """Parameters of the routers (``ClusterConfig.router``); ``None`` = the system's default
    (:data:`SYSTEM_DEFAULTS`). Units: tokens, requests, seconds; blocks are the trace's 512-token blocks."""

    knowledge: str | None = None
    belief_capacity_blocks: int | None = None
    belief_ttl_s: float | None = None
    window_s: float | None = None
    decode_choice: str | None = None
    dynamo_overlap_credit: float = 1.0         # config.rs@07a6c9ce overlap_score_credit
    dynamo_prefill_scale: float = 1.0          # prefill_load_scale
    dynamo_request_weight: float = 0.0         # decode_active_request_weight
    dynamo_temperature: float = 0.0            # router_temperature
    # shared_cache_multiplier: credit per block of the request the shared pool holds beyond the candidate's
    # own prefix (module docstring). config.rs@07a6c9ce: "Default: 0.0 (shared cache scoring disabled); the
    # CLI sets this to 0.5 when shared cache is enabled"; validated in [0, 1] there. > 0 also makes the
    # chosen instance fetch that prefix (disaggregated pools, knowledge "true" only).
    dynamo_shared_multiplier: float = 0.0
    sglang_cache_threshold: float = 0.3        # router_args.py@e46dcd87
    sglang_balance_abs: int = 64
    sglang_balance_rel: float = 1.5
    llmd_prefix_weight: float | None = None    # None: 3 / 2 / 2 (defaults.go) coupled; 2 / 1 / 0 in P/D
    llmd_queue_weight: float | None = None     # (pd-epp-config.yaml: prefix 2 + queue 1)
    llmd_kv_weight: float | None = None
    llmd_max_prefix_tokens: int = 131_072      # defaultMaxPrefixTokens, llm-d-router@ebab6879
    prodstack_kv_threshold: int = 2000         # kv_aware_threshold (tokens)
    aibrix_imbalance_abs: int = 8              # IMBALANCE_ABS (code; the README says 16)
    aibrix_std_factor: float = 1.0             # k_σ (code; the README says 2)
    # AIBrix's PD router, pd_disaggregation.go@01692761 (pd_readme.md and routers.md say 16 for both spreads):
    aibrix_pd_prefill_imbalance: int = 32      # loadImbalanceSelectPrefillPod: maxValue-minValue > 32 (hard-coded)
    aibrix_decode_max_request: float = 32.0    # AIBRIX_DECODE_MAX_REQUEST default (defaultMaxRequest; a float env)
    aibrix_decode_max_throughput: float = 2048.0  # AIBRIX_DECODE_MAX_THROUGHPUT default, tokens/s
    preble_decode_len: float = 45.0            # AIBrix's port of Preble E2
    preble_tpot_s: float = 0.15

    def __post_init__(self):
        w = "RouterConfig"
        if self.knowledge is not None:
            choice(self.knowledge, "knowledge", KNOWLEDGE, w)
        if self.decode_choice is not None:
            choice(self.decode_choice, "decode_choice", DECODE_CHOICES, w)
        if self.belief_capacity_blocks is not None:
            integer(self.belief_capacity_blocks, "belief_capacity_blocks", lo=0, hi=2 ** 40, where=w)
        if self.belief_ttl_s is not None:
            real(self.belief_ttl_s, "belief_ttl_s", lo=0.0, lo_open=True, allow_inf=True, where=w)
        if self.window_s is not None:
            real(self.window_s, "window_s", lo=0.0, lo_open=True, hi=1e7, where=w)
        for name, lo, hi in (("dynamo_overlap_credit", 0.0, 1e6), ("dynamo_prefill_scale", 0.0, 1e6),
                             ("dynamo_request_weight", 0.0, 1e9), ("dynamo_temperature", 0.0, 1e6),
                             ("dynamo_shared_multiplier", 0.0, 1.0),
                             ("sglang_cache_threshold", 0.0, 1.0), ("sglang_balance_rel", 1.0, 1e6),
                             ("aibrix_std_factor", 0.0, 1e6), ("aibrix_decode_max_request", 0.0, 1e9),
                             ("aibrix_decode_max_throughput", 0.0, 1e9),
                             ("preble_decode_len", 0.0, 1e7),
                             ("preble_tpot_s", 0.0, 1e3)):
            real(getattr(self, name), name, lo=lo, hi=hi, where=w)
        for name in ("llmd_prefix_weight", "llmd_queue_weight", "llmd_kv_weight"):
            if getattr(self, name) is not None:
                real(getattr(self, name), name, lo=0.0, hi=1e6, where=w)
        for name, lo, hi in (("sglang_balance_abs", 0, 10 ** 9), ("llmd_max_prefix_tokens", 1, 10 ** 9),
                             ("prodstack_kv_threshold", 0, 10 ** 9), ("aibrix_imbalance_abs", 0, 10 ** 9),
                             ("aibrix_pd_prefill_imbalance", 0, 10 ** 9)):
            integer(getattr(self, name), name, lo=lo, hi=hi, where=w)

    def resolve(self, router: str, pd: bool, cache_capacity_blocks: int, block_tokens: int) -> RouterParams:
        """Kernel-ready :class:`RouterParams` for ``router`` (a :data:`ROUTERS` name) on this cluster."""
        w = "RouterConfig.resolve"
        router = choice(router, "router", ROUTERS, w)
        pd = flag(pd, "pd", w)
        cache_capacity_blocks = integer(cache_capacity_blocks, "cache_capacity_blocks", lo=0, where=w)
        block_tokens = integer(block_tokens, "block_tokens", lo=1, where=w)
        kn, cap, ttl, win, dc = SYSTEM_DEFAULTS[router]
        kn = self.knowledge if self.knowledge is not None else kn
        cap = self.belief_capacity_blocks if self.belief_capacity_blocks is not None else cap
        cap = int(cache_capacity_blocks) if cap is None else int(cap)
        ttl = float(self.belief_ttl_s) if self.belief_ttl_s is not None else float(ttl)
        if kn == "belief" and router == "dynamo" and self.belief_ttl_s is None:
            ttl = 120.0  # --no-router-kv-events: router_ttl_secs
        win = float(self.window_s) if self.window_s is not None else float(win)
        dc = self.decode_choice if self.decode_choice is not None else dc
        m_shared = float(self.dynamo_shared_multiplier)
        if router == "dynamo" and m_shared > 0.0 and not pd:
            raise fail("dynamo_shared_multiplier", m_shared,
                       "0.0 with engine_mode='coupled' (a shared tier needs the disaggregated pools: the coupled "
                       "engine has no pool to fetch the credited blocks from)", "RouterConfig")
        if router == "dynamo" and m_shared > 0.0 and kn == "belief":
            raise fail("dynamo_shared_multiplier", m_shared,
                       "0.0 with knowledge='belief' (Dynamo learns the shared pool from its object events, "
                       "i.e. the true caches; use knowledge='true')", "RouterConfig")
        wp, wq, wk = (2.0, 1.0, 0.0) if pd else (3.0, 2.0, 2.0)
        wp = wp if self.llmd_prefix_weight is None else float(self.llmd_prefix_weight)
        wq = wq if self.llmd_queue_weight is None else float(self.llmd_queue_weight)
        wk = wk if self.llmd_kv_weight is None else float(self.llmd_kv_weight)
        m_shared = m_shared if router == "dynamo" else 0.0  # only Dynamo has the shared tier (its engine fetch too)
        return RouterParams(ROUTERS[router], bool(pd), kn == "belief", cap, ttl, win, DECODE_CHOICES[dc],
                            float(self.dynamo_overlap_credit), float(self.dynamo_prefill_scale),
                            float(self.dynamo_request_weight), float(self.dynamo_temperature), m_shared,
                            float(self.sglang_cache_threshold), float(self.sglang_balance_abs),
                            float(self.sglang_balance_rel), wp, wq, wk,
                            max(1, int(self.llmd_max_prefix_tokens) // int(block_tokens)),
                            float(self.prodstack_kv_threshold), float(self.aibrix_imbalance_abs),
                            float(self.aibrix_std_factor), float(self.aibrix_pd_prefill_imbalance),
                            float(self.aibrix_decode_max_request), float(self.aibrix_decode_max_throughput),
                            float(self.preble_decode_len),
                            float(self.preble_tpot_s))


# ------------------------------------------------------------------ the router's belief
# A router-side history of what it sent: per instance an LRU of the request's blocks (the
# prefix_cache arrays, ``CacheState``), touched when a request is sent there (optimistic: as if
# the instance stored the whole prompt), with ``touched_at[i, b]`` the last time (s) block b was
# sent to i; a block older than the TTL counts as absent (``touched_at`` is (N, 1) when TTL = inf).
# Capacity 0 (unbounded) is stored as the trace's block count. Gateways count 16-token blocks or
# characters; the traces give 512-token blocks only, so the belief is kept at that granularity.

@helper_njit
def belief_match(last_use, touched_at, inst, blocks, t, ttl):
    """Leading ``blocks`` the router believes ``inst`` holds at time ``t`` (s); no side effect."""
    k = 0
    if ttl == math.inf:
        while k < len(blocks) and last_use[inst, blocks[k]] >= 0:
            k += 1
    else:
        while k < len(blocks) and last_use[inst, blocks[k]] >= 0 and t - touched_at[inst, blocks[k]] <= ttl:
            k += 1
    return k


@helper_njit
def belief_insert(last_use, q_block, q_stamp, meta, touched_at, inst, blocks, t, ttl):
    """The router sent a request with ``blocks`` to ``inst`` at ``t``: remember them (LRU)."""
    _touch_blocks(last_use, q_block, q_stamp, meta, inst, blocks)
    if ttl != math.inf:
        for b in blocks:
            touched_at[inst, b] = t


@helper_njit
def note_entered(last_use, touched_at, entered_at, inst, blocks, t, ttl):
    """Before ``blocks`` are stored on ``inst`` at ``t`` (s): the ones that view does not hold now enter
    it at ``t`` (``entered_at[inst, b]``; with a TTL an expired block counts as absent). Called for the
    view SGLang matches (the belief, or the true cache with ``ttl`` = inf and any ``touched_at``)."""
    for b in blocks:
        if last_use[inst, b] < 0 or (ttl != math.inf and t - touched_at[inst, b] > ttl):
            entered_at[inst, b] = t


@helper_njit
def deepest_entered(entered_at, inst, blocks, m):
    """``RouterInputs.deepest_entered`` of ``inst``: when block ``m − 1`` entered its view (s); 0 if m = 0."""
    return entered_at[inst, blocks[m - 1]] if m > 0 else 0.0


@helper_njit
def _tie_start(u, n):
    """The random tie-break's start index: floor(u · n), in 0 … n − 1."""
    s = int(u * n)
    return s if s < n else n - 1


@helper_njit
def _hit(m, bt, L):
    """Hit tokens of a match of ``m`` blocks: min(m · bt, L)."""
    h = m * bt
    return h if h < L else L


@helper_njit
def _argmin_lowest(x):
    """Index of the smallest ``x[i]`` (the lowest index among ties)."""
    b = 0
    for i in range(1, len(x)):
        if x[i] < x[b]:
            b = i
    return b


@helper_njit
def _argmax_lowest(x):
    """Index of the largest ``x[i]`` (the lowest index among ties)."""
    b = 0
    for i in range(1, len(x)):
        if x[i] > x[b]:
            b = i
    return b


@helper_njit
def _round_robin(rr, n):
    """production-stack ``roundrobin``: ``sorted(urls)[idx++ % n]``."""
    return rr % n


@helper_njit
def _dynamo_cost(rp, ri, i, L, bt, h_best):
    """Dynamo's cost of instance ``i`` in blocks: (s · prefill + decode) / bt + ρ · n_i; ``h_best`` the hit
    tokens of the pool's longest prefix (the shared-tier credit m · (h_best − h_i); m = 0: none)."""
    h = _hit(ri.matched_blocks[i], bt, L)
    prefill = ri.pending_tokens[i] + L - rp.dynamo_credit * h
    if rp.dynamo_shared > 0.0:
        prefill -= rp.dynamo_shared * (h_best - h)
    if prefill < 0.0:
        prefill = 0.0
    decode = 0.0 if rp.pd else ri.live_kv_tokens[i] + L
    return (rp.dynamo_scale * prefill + decode) / bt + rp.dynamo_request_weight * ri.inflight[i]


@helper_njit
def _dynamo(rp, ri, L, bt, u):
    """Dynamo: argmin cost (ties: smaller tree, then random), or softmax sampling at T > 0."""
    n = len(ri.inflight)
    hb = _hit(ri.matched_blocks[_argmax_lowest(ri.matched_blocks)], bt, L)  # the pool's longest prefix
    if rp.dynamo_temperature == 0.0:
        s = _tie_start(u, n)
        best, best_c, best_t = -1, 0.0, 0
        for j in range(n):
            i = (s + j) % n
            c, t = _dynamo_cost(rp, ri, i, L, bt, hb), ri.tree_blocks[i]
            if best < 0 or c < best_c or (c == best_c and t < best_t):
                best, best_c, best_t = i, c, t
        return best
    lo = hi = _dynamo_cost(rp, ri, 0, L, bt, hb)
    for i in range(1, n):
        c = _dynamo_cost(rp, ri, i, L, bt, hb)
        lo, hi = min(lo, c), max(hi, c)
    total = 0.0
    for i in range(n):
        z = (_dynamo_cost(rp, ri, i, L, bt, hb) - lo) / (hi - lo) if hi > lo else 0.0
        total += math.exp(-z / rp.dynamo_temperature)
    target, acc = u * total, 0.0
    for i in range(n):
        z = (_dynamo_cost(rp, ri, i, L, bt, hb) - lo) / (hi - lo) if hi > lo else 0.0
        acc += math.exp(-z / rp.dynamo_temperature)
        if acc > target:
            return i
    return n - 1


@helper_njit
def _sglang(rp, ri, L, bt):
    """SGLang cache_aware: least load if imbalanced, else the deepest match if its rate > threshold."""
    load = ri.inflight
    lo, hi = load[_argmin_lowest(load)], load[_argmax_lowest(load)]
    least = _argmin_lowest(load)
    if hi - lo > rp.sglang_abs and hi > rp.sglang_rel * lo:
        return least
    b = _argmax_lowest(ri.matched_blocks)
    for i in range(b + 1, len(load)):  # the tree's last_tenant: the deepest block's earliest holder
        if ri.matched_blocks[i] == ri.matched_blocks[b] and ri.deepest_entered[i] < ri.deepest_entered[b]:
            b = i
    rate = _hit(ri.matched_blocks[b], bt, L) / L if L > 0 else 0.0
    return b if rate > rp.sglang_threshold else least


@helper_njit
def _llmd_score(rp, ri, i, M, qlo, qhi, kv_cap):
    """llm-d's weighted score of instance ``i`` (prefix, queue, KV utilisation scorers)."""
    m = ri.matched_blocks[i]
    pm = (m if m < M else M) / M if M > 0 else 0.0
    qs = (qhi - ri.queued[i]) / (qhi - qlo) if qhi > qlo else 1.0
    ku = 1.0 - min(1.0, ri.live_kv_tokens[i] / kv_cap) if kv_cap > 0 else 0.0
    return rp.llmd_w_prefix * pm + rp.llmd_w_queue * qs + rp.llmd_w_kv * ku


@helper_njit
def _llmd(rp, ri, n_blocks, u, kv_cap):
    """llm-d: argmax of the weighted scores; random tie-break (max-score-picker's shuffle)."""
    n = len(ri.queued)
    M = n_blocks if n_blocks < rp.llmd_max_blocks else rp.llmd_max_blocks
    qlo, qhi = ri.queued[_argmin_lowest(ri.queued)], ri.queued[_argmax_lowest(ri.queued)]
    s = _tie_start(u, n)
    best, best_sc = -1, 0.0
    for j in range(n):
        i = (s + j) % n
        sc = _llmd_score(rp, ri, i, M, qlo, qhi, kv_cap)
        if best < 0 or sc > best_sc:
            best, best_sc = i, sc
    return best


@helper_njit
def _prodstack_prefix(ri, u):
    """production-stack prefixaware: random choice among the longest matches."""
    n = len(ri.matched_blocks)
    k = ri.matched_blocks[_argmax_lowest(ri.matched_blocks)]
    s = _tie_start(u, n)
    for j in range(n):
        i = (s + j) % n
        if ri.matched_blocks[i] == k:
            return i
    return s


@helper_njit
def _prodstack_kv(rp, ri, L, bt):
    """production-stack kvaware: the longest match unless > threshold tokens miss; else lowest QPS."""
    b = _argmax_lowest(ri.matched_blocks)
    k = ri.matched_blocks[b]
    if k == 0 or _hit(k, bt, L) < L - rp.prodstack_threshold:
        return _argmin_lowest(ri.recent_requests)
    return b


@helper_njit
def _aibrix(rp, ri, u):
    """AIBrix routeOriginal: the best match (m desc, n asc, random) within mean + kσ, else least requests."""
    load = ri.inflight
    n = len(load)
    lo, hi = load[_argmin_lowest(load)], load[_argmax_lowest(load)]
    bound = _mean_plus_k_sd(load, rp.aibrix_k, 0)
    restrict = hi - lo > rp.aibrix_abs
    matched = False
    for i in range(n):
        if ri.matched_blocks[i] > 0 and not (restrict and load[i] != lo):
            matched = True
    if not matched:
        return _argmin_lowest(load)
    s = _tie_start(u, n)
    best = -1
    for j in range(n):
        i = (s + j) % n
        m = ri.matched_blocks[i]
        if (restrict and load[i] != lo) or load[i] > bound:
            continue
        if best < 0 or m > ri.matched_blocks[best] or (m == ri.matched_blocks[best] and load[i] < load[best]):
            best = i
    return best if best >= 0 else _argmin_lowest(load)


@helper_njit
def _aibrix_pd(rp, ri, n_blocks, u):
    """AIBrix's PD router, prefill side: least loaded if the spread > 32, else argmin of
    (100 − match %) · 0.1 + n / max n over the pods within mean + k_σ · sd (sample)."""
    load = ri.inflight
    n = len(load)
    lo, hi = load[_argmin_lowest(load)], load[_argmax_lowest(load)]
    if hi - lo > rp.aibrix_pd_prefill_abs:
        s = _tie_start(u, n)
        for j in range(n):
            i = (s + j) % n
            if load[i] == lo:
                return i
    bound = _mean_plus_k_sd(load, rp.aibrix_k, 1)   # AIBrix's standardDeviation: the sample one
    mx = hi if hi > 1 else 1
    best, best_sc = -1, 0.0
    for i in range(n):
        if load[i] > bound:
            continue
        sc = aibrix_pd_prefill_score(ri.matched_blocks[i], n_blocks, load[i], mx)
        if best < 0 or sc < best_sc:
            best, best_sc = i, sc
    return best if best >= 0 else _argmin_lowest(load)


@helper_njit
def _mean_plus_k_sd(load, k, ddof):
    """mean n + k · sd(n) with sd = √(Σ(n − mean)² / (N − ddof)): ddof 0 the population deviation
    (``routeOriginal``), 1 the sample one (the PD router's ``standardDeviation``; 0 for one pod)."""
    n = len(load)
    total = 0
    for i in range(n):
        total += load[i]
    mu = total / n
    var = 0.0
    for i in range(n):
        d = load[i] - mu
        var += d * d
    return mu + k * (math.sqrt(var / (n - ddof)) if n > ddof else 0.0)


@helper_njit
def aibrix_pd_prefill_score(m, n_blocks, n, max_n):
    """AIBrix's PD prefill score (lower wins): (100 − ⌊100 · m / n_blocks⌋) · 0.1 + n / max_n."""
    pct = (m * 100) // n_blocks if n_blocks > 0 else 0
    return (100.0 - pct) * 0.1 + n / max_n


@helper_njit
def _preble_cost(rp, ri, i):
    """Preble's windowed cost of instance ``i``, s: prefill seconds (+ decode n · len · TPOT if coupled)."""
    return ri.recent_prefill_s[i] + (0.0 if rp.pd else ri.inflight[i] * rp.preble_decode_len * rp.preble_tpot)


@helper_njit
def _preble(rp, ri, L, bt):
    """Preble E2: exploit (the deepest-match instances) if more is cached than new, else explore (all)."""
    n = len(ri.matched_blocks)
    k = ri.matched_blocks[_argmax_lowest(ri.matched_blocks)]
    cached = _hit(k, bt, L)
    exploit = k > 0 and L - cached < cached
    best, best_c = -1, 0.0
    for i in range(n):
        if exploit and ri.matched_blocks[i] != k:
            continue
        c = _preble_cost(rp, ri, i)
        if best < 0 or c < best_c:
            best, best_c = i, c
    return best


@helper_njit
def _route(rp, ri, L, n_blocks, bt, u, rr, kv_cap):
    """:func:`route` compiled, on arguments as :func:`router_args` returns them."""
    code = rp.code
    if code == 5:
        return _dynamo(rp, ri, L, bt, u)
    if code == 6:
        return _sglang(rp, ri, L, bt)
    if code == 7:
        return _llmd(rp, ri, n_blocks, u, kv_cap)
    if code == 8:
        return _round_robin(rr, len(ri.inflight))
    if code == 9:
        return _prodstack_prefix(ri, u)
    if code == 10:
        return _prodstack_kv(rp, ri, L, bt)
    if code == 11:
        return _aibrix_pd(rp, ri, n_blocks, u) if rp.pd else _aibrix(rp, ri, u)
    if code == 12:
        return _preble(rp, ri, L, bt)
    return -1


#: RouterInputs fields that count (blocks, requests): whole numbers ≥ 0; the others are float64. Of those,
#: ``recent_prefill_s`` is a running sum (+ at dispatch, − when a request leaves the window) that may round
#: a hair below 0, so it need only be finite.
_COUNTS = ("matched_blocks", "tree_blocks", "inflight", "queued", "recent_requests")


def _per_instance(nt, fields: dict, where: str) -> tuple:
    """The arrays of the NamedTuple ``nt`` (``fields``: name → (whole numbers?, lower bound)), typed as the
    kernels take them (int64 / float64; lists accepted), all of one length ≥ 1 (one entry per instance or node)."""
    name = type(nt).__name__
    unit, make = ("instance", "new_router_inputs") if name == "RouterInputs" else ("decode node", "new_decode_inputs")
    arrays = tuple((int_array if whole else real_array)(getattr(nt, f), f"{name}.{f}", lo=lo, where=where)
                   for f, (whole, lo) in fields.items())
    first = next(iter(fields))
    if not len(arrays[0]):
        raise fail(f"{name}.{first}", getattr(nt, first), f"one entry per {unit}, at least one (nothing to choose "
                   f"from without): e.g. {make}(n)", where)
    for f, a in zip(fields, arrays):
        if len(a) != len(arrays[0]):
            raise fail(f"{name}.{f}", getattr(nt, f), f"{len(arrays[0])} entries, one per {unit} as in "
                       f"{name}.{first}", where)
    return type(nt)(*arrays)


def router_args(rp, ri, L, n_blocks, bt, u, rr, kv_cap, where: str = "route") -> tuple:
    """:func:`route`'s arguments checked and typed as the kernel takes them (an :class:`InputError` naming the
    first bad one): ``rp`` a :class:`RouterParams`, ``ri`` a :class:`RouterInputs` of N ≥ 1 instances (lists or
    arrays; counts whole ≥ 0, tokens and times finite, ≥ 0 but for ``recent_prefill_s``; ``matched_blocks`` ≤
    ``n_blocks``), ``L`` ≥ 1 and ``n_blocks`` ≥ 0 the request's tokens and blocks, ``bt`` ≥ 1 tokens per
    block, ``u`` in [0, 1), ``rr`` ≥ 0, ``kv_cap`` > 0 (inf allowed)."""
    if not isinstance(rp, RouterParams):
        raise fail("rp", rp, "a RouterParams: RouterConfig().resolve(router, pd, cache_blocks, block_tokens)", where)
    if not isinstance(ri, RouterInputs):
        raise fail("ri", ri, "a RouterInputs: new_router_inputs(n), one entry per instance in each field", where)
    n_blocks = integer(n_blocks, "n_blocks", lo=0, where=where)
    lows = {f: -math.inf if f == "recent_prefill_s" else 0 for f in RouterInputs._fields}
    ri = _per_instance(ri, {f: (f in _COUNTS, lo) for f, lo in lows.items()}, where)
    if ri.matched_blocks.max() > n_blocks:
        i = int(ri.matched_blocks.argmax())
        raise fail(f"RouterInputs.matched_blocks[{i}]", int(ri.matched_blocks[i]),
                   f"at most n_blocks = {n_blocks} (the request's blocks)", where, index=i)
    return (rp, ri, integer(L, "L", lo=1, where=where), n_blocks, integer(bt, "bt", lo=1, where=where),
            real(u, "u", lo=0.0, hi=1.0, hi_open=True, where=where), integer(rr, "rr", lo=0, where=where),
            real(kv_cap, "kv_cap", lo=0.0, lo_open=True, allow_inf=True, where=where))


def route(rp, ri, L, n_blocks, bt, u, rr, kv_cap) -> int:
    """The instance router ``rp.code`` sends the request to (rules: module docstring); −1 if the code is unknown.
    Arguments checked by :func:`router_args` (lists become arrays); the engines' compiled code calls the
    kernel directly (the overload below), on arrays they keep right."""
    return int(_route(*router_args(rp, ri, L, n_blocks, bt, u, rr, kv_cap)))


# Compiled code (the engines' kernels: kernel.py, coupled.py) calling ``route`` gets the kernel itself, inlined
# and unchecked (numba's overload of the Python function), so the checks cost the engines nothing.
@overload(route, inline="always")
def _route_compiled(rp, ri, L, n_blocks, bt, u, rr, kv_cap):
    return lambda rp, ri, L, n_blocks, bt, u, rr, kv_cap: _route(rp, ri, L, n_blocks, bt, u, rr, kv_cap)


# ------------------------------------------------------------------ the decode node
@helper_njit
def decode_tie_start(u, n_prefill, n_decode):
    """The decode tie-break's start: floor(u2 · D) with u2 = u · N − floor(u · N), the draw's leftover
    fraction after the prefill start floor(u · N) (uniform, independent of it)."""
    x = u * n_prefill
    return _tie_start(x - math.floor(x), n_decode)


@helper_njit
def aibrix_free_pct(kv_used, kv_cap):
    """AIBrix's free GPU %: math.Round(100 − 100 · used / capacity) (half away from zero), ≤ 0 → 0.1."""
    v = 100.0 - kv_used / kv_cap * 100.0
    r = math.floor(v + 0.5) if v >= 0.0 else -math.floor(-v + 0.5)
    return r if r > 0.0 else 0.1


@helper_njit
def aibrix_least_running(running, max_req):
    """AIBrix's first decode fast path: the first node with the fewest running requests when one is idle
    or the spread (max, at least 1, − min) is ≥ ``max_req``; else −1 (the rates decide next)."""
    at, lo, hi = 0, math.inf, 1.0
    for d in range(len(running)):
        r = float(running[d])
        if r < lo:
            at, lo = d, r
        hi = max(hi, r)
    return at if lo == 0.0 or hi - lo >= max_req else -1


@helper_njit
def _aibrix_decode(di, kv_cap, max_req, max_thr):
    """AIBrix's PD router, decode side: the fast paths (least running, least throughput), else the score."""
    fast = aibrix_least_running(di.running, max_req)
    if fast >= 0:
        return fast
    D = len(di.running)
    r_max = 1.0
    t_at, t_min, t_max = 0, math.inf, 1.0
    f_max = 1.0
    for d in range(D):
        r, t, f = float(di.running[d]), di.rate[d], aibrix_free_pct(di.kv_used[d], kv_cap)
        if t < t_min:
            t_at, t_min = d, t
        r_max, t_max, f_max = max(r_max, r), max(t_max, t), max(f_max, f)
    if t_max - t_min > max_thr:
        return t_at
    best, best_sc = -1, 0.0
    for d in range(D):
        sc = (float(di.running[d]) / r_max + (1.0 - di.rate[d] / t_max)) / (aibrix_free_pct(di.kv_used[d], kv_cap)
                                                                          / f_max)
        if best < 0 or sc < best_sc:
            best, best_sc = d, sc
    return best


@helper_njit
def _route_decode(choice, di, u, n_prefill, k, kv_cap, max_req, max_thr):
    """:func:`route_decode` compiled, on arguments as :func:`decode_args` returns them."""
    D = len(di.running)
    if choice == 1:
        d = 0
        for e in range(1, D):
            if di.running[e] + di.queued[e] + di.bound[e] < di.running[d] + di.queued[d] + di.bound[d]:
                d = e
        return d
    if choice == 2:
        return k % D
    if choice == 3:
        q = di.queued[_argmin_lowest(di.queued)]
        s = decode_tie_start(u, n_prefill, D)
        for j in range(D):
            d = (s + j) % D
            if di.queued[d] == q:
                return d
    if choice == 4:
        return _aibrix_decode(di, kv_cap, max_req, max_thr)
    return -1


def decode_args(choice, di, u, n_prefill, k, kv_cap, max_req, max_thr, where: str = "route_decode") -> tuple:
    """:func:`route_decode`'s arguments checked and typed as the kernel takes them: ``choice`` an integer,
    ``di`` a :class:`DecodeInputs` of D ≥ 1 nodes (lists or arrays; counts whole ≥ 0, rates and KV finite ≥ 0),
    ``u`` in [0, 1), ``n_prefill`` ≥ 1, ``k`` ≥ 0, ``kv_cap`` > 0, ``max_req`` and ``max_thr`` ≥ 0."""
    if not isinstance(di, DecodeInputs):
        raise fail("di", di, "a DecodeInputs: new_decode_inputs(n), one entry per decode node in each field", where)
    di = _per_instance(di, {f: (f not in ("rate", "kv_used"), 0) for f in DecodeInputs._fields}, where)
    return (integer(choice, "choice", where=where), di, real(u, "u", lo=0.0, hi=1.0, hi_open=True, where=where),
            integer(n_prefill, "n_prefill", lo=1, where=where), integer(k, "k", lo=0, where=where),
            real(kv_cap, "kv_cap", lo=0.0, lo_open=True, allow_inf=True, where=where),
            real(max_req, "max_req", lo=0.0, allow_inf=True, where=where),
            real(max_thr, "max_thr", lo=0.0, allow_inf=True, where=where))


def route_decode(choice, di, u, n_prefill, k, kv_cap, max_req, max_thr) -> int:
    """The decode node of a router's ``decode_choice`` 1–4 (module docstring): ``u`` the request's draw,
    ``n_prefill`` prefill instances, ``k`` decode choices made so far, ``kv_cap`` a decode node's KV
    tokens, ``max_req`` / ``max_thr`` AIBrix's decode spreads (requests, tokens/s); −1 if unknown.
    Arguments checked by :func:`decode_args`; compiled code calls the kernel directly."""
    return int(_route_decode(*decode_args(choice, di, u, n_prefill, k, kv_cap, max_req, max_thr)))


@overload(route_decode, inline="always")
def _route_decode_compiled(choice, di, u, n_prefill, k, kv_cap, max_req, max_thr):
    return lambda choice, di, u, n_prefill, k, kv_cap, max_req, max_thr: _route_decode(
        choice, di, u, n_prefill, k, kv_cap, max_req, max_thr)
