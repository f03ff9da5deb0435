"""Prefix caches of KV blocks: prefix-chain matching, LRU / LFU / LengthAware caches in numba, hit-ratio curves.

A request's prompt is a chain of 512-token blocks (dense ids, see :class:`~mooncake_lab.traces.Trace`).
Block ``j`` of a request can be reused only if blocks ``0..j`` are all cached (its KV depends on the
whole prefix), so a lookup returns the number of *leading* cached blocks.

Semantics (they reproduce the hit ratios measured on the released traces, ``l03_cache.REFERENCE_HIT``, to ±0.1 point)
-----------------------------------------------------------------------------------------------------------------------
1. Requests are served in trace order. For each request: **lookup first** (count the leading
   blocks present), **then touch every block of the request** whether it hit or not (the prefill
   computed the missing ones, and they are stored), evicting blocks by the cache's policy so the
   cache never holds more than ``capacity`` blocks.
2. Blocks are touched **last block first, root last**, so the shared root of a chain is the most
   recently used and the leaves are evicted before their prefix. (Touching root first gives the
   same numbers to within 0.2 point; last-first matches the table exactly after rounding.)
3. Token-weighted hit ratio = Σ hit tokens / Σ input tokens, where ``n`` leading hit blocks of a
   request of ``L`` tokens are worth ``min(512·n, L)`` tokens (the last block holds only
   ``L − 512·(k−1)`` tokens). Block-weighted = Σ hit blocks / Σ blocks.

Eviction policies (:data:`EVICTION_POLICIES`)
---------------------------------------------
arXiv 2407.00079 v3 §4.2 and Table 1 compare "three cache strategies: LRU, LFU, and
LengthAwareCache (similar to LFU but prioritizing cache blocks occurring later in requests)"; the
paper says nothing more about them. Our reading, exactly:

* ``"lru"``: evict the block touched least recently.
* ``"lfu"``: evict the block with the fewest touches since it entered the cache (its count starts
  at 1 when stored and is forgotten when it is evicted: in-cache LFU); among equally frequent blocks
  the least recently touched.
* ``"length_aware"``: LFU whose ties go to position: among equally frequent blocks, evict the one at
  the **largest position** in its prompt's block list (block ``j`` of the request that touched it
  last; with prefix-chained ids a block has one position); among equal positions the least recently
  touched. "Prioritizing blocks occurring later in requests" is read as *for eviction*.

A touch stores or refreshes one block: its count grows by one (a block repeated inside one prompt is
touched twice) and its recency becomes the newest. A block that is not cached and arrives in a full
cache first evicts one victim, so it is never its own victim. For LRU this equals plain LRU.
In the kernel a block's rank is one int64, ``count·2^43 + (2^13 − 1 − position)·2^30 + stamp``
(the position term is 0 for LFU), so counts saturate at 2^20 − 1 = 1,048,575 touches, positions at 8,191
blocks (4.2M tokens) and a cache may see fewer than 2^30 touches (checked); the reference does the same.

Because every block of every request is touched, the cache contents at capacity ``C`` are those of
plain LRU on the access sequence, and LRU is a stack algorithm: one pass computing each access's
*stack distance* (distinct blocks used since its last use, measured at lookup time) gives the LRU
hit ratio at every capacity at once (:func:`hit_ratio_curve`). LFU and LengthAware are not stack
algorithms (a larger cache may hold a different set), so their curves replay the trace once per
capacity. :func:`simulate_cache` runs the caches directly (several instances, with routing), which
the cluster simulator reuses.

State layout of ``n`` caches (see :func:`new_cache_state`), all int64
---------------------------------------------------------------------
``last_use[n, n_blocks]``
    the block's rank in that cache (larger = kept longer), −1 if absent. LRU: the stamp of its last
    touch; LFU / LengthAware: the packed rank above.
``q_block[n, qcap]``, ``q_stamp[n, qcap]``
    per cache the ``(block, rank)`` entries of its touches. LRU: an append-only queue in stamp order
    (stamps come from the cache's own clock, so they only grow: a lazy-deletion min-heap on stamps
    degenerates into this queue, O(1) per operation). LFU / LengthAware: a lazy-deletion binary
    min-heap on the rank (O(log n) per operation). An entry is live iff ``last_use[c, block] ==
    rank``; stale entries are skipped on eviction and dropped by compaction when the array is full.
    ``qcap = 2·min(capacity, n_blocks) + 64``.
``meta[n, 6]``
    columns ``0`` capacity (blocks), ``1`` count of cached blocks, ``2`` queue head (0 for a heap),
    ``3`` queue tail / heap size, ``4`` clock (next stamp), ``5`` policy code (index in
    :data:`EVICTION_POLICIES`).

The ``@njit`` helpers take these arrays plus an instance index and can be called from other numba
kernels (the cluster simulator)::

    st = new_cache_state(n_prefill, trace.n_blocks, capacity_blocks, policy="lru")   # outside numba
    # inside an @njit kernel, for request i routed to instance p:
    blocks = block_ids[offsets[i]:offsets[i + 1]]
    n_local = _match_prefix(st.last_use, p, blocks)          # leading blocks cached on p (no side effect)
    ...                                                       # (fetch a longer prefix from instance q?)
    _touch_blocks(last_use, q_block, q_stamp, meta, p, blocks)  # after the prefill: store/refresh all
    _touch_blocks(last_use, q_block, q_stamp, meta, p, blocks[:n_fetched])  # hot-spot replication only

``blocks`` must be a prefix of a prompt's block list (its index is the block's position). Stamps come
from each cache's own clock (``meta[c, 4]``), not from the caller, so they are strictly increasing per
cache whatever the simulator's time does.

The helpers are compiled with :data:`~mooncake_lab.jit.helper_njit` (no reference counting): they only index arrays their
caller owns, and numba would otherwise pay an atomic increment and decrement per array argument per
call — most of the cost of a touch (see :mod:`mooncake_lab.sim.kernel`, "Speed").
"""
from __future__ import annotations

import math
import numbers
import threading
from collections import OrderedDict
from contextlib import contextmanager
from typing import NamedTuple

import numpy as np
from numba import njit

from .jit import helper_njit
from .traces import BLOCK_TOKENS, Trace
from .validate import InputError, choice, describe, int_array, integer, memory

__all__ = [
    "CacheState", "new_cache_state", "pooled_cache_state", "pooled_array", "prefault_pool", "route_requests", "simulate_lru", "LRUResult",
    "simulate_cache", "CacheResult", "cache_hit_ratio", "ReferenceCache", "check_policy",
    "prefix_hit_tokens", "hit_ratio", "lru_hit_ratio", "stack_distances", "hit_ratio_curve",
    "infinite_cache_hit_ratio", "block_popularity", "replica_counts", "ROUTINGS", "EVICTION_POLICIES",
]

#: Request-to-instance routings understood by :func:`route_requests`.
ROUTINGS = ("round_robin", "random")

#: Eviction policies of a cache (semantics in the module docstring); the kernel code is the index.
EVICTION_POLICIES = ("lru", "lfu", "length_aware")

#: Packed rank of an LFU / LengthAware block: count · 2^FREQ_SHIFT + (POS_MAX − position) · 2^STAMP_BITS
#: + stamp, as one non-negative int64 (1 + 20 + 13 + 30 = 63 bits ≤ 63).
STAMP_BITS, POS_BITS, FREQ_BITS = 30, 13, 20
FREQ_SHIFT = STAMP_BITS + POS_BITS
#: Largest stamp, position (blocks) and count the packed rank holds (larger positions / counts saturate).
STAMP_MAX, POS_MAX, FREQ_MAX = 2**STAMP_BITS - 1, 2**POS_BITS - 1, 2**FREQ_BITS - 1

#: Sentinel stack distance of a block never seen before (a miss at any finite capacity).
NEVER = np.iinfo(np.int64).max


# ----------------------------------------------------------------------------------------------
# validation helpers
# ----------------------------------------------------------------------------------------------
#: Caches a cache-state may hold: 4,096 instances, 64× the largest cluster a lecture simulates; the
#: arrays' memory is bounded separately (:data:`~mooncake_lab.validate.MEMORY_BUDGET_BYTES`).
MAX_INSTANCES = 4096


def _check_capacity(capacity, name: str = "capacity", allow_inf: bool = False) -> float | int:
    """An integer number of blocks ≥ 0 (integer-valued floats accepted; ``math.inf`` if allowed)."""
    if allow_inf and isinstance(capacity, numbers.Real) and not isinstance(capacity, bool) and capacity == math.inf:
        return math.inf
    return integer(capacity, name, lo=0, hi=np.iinfo(np.int64).max // 4)  # blocks (qcap = 2·capacity + 64)


def _check_positive_int(value, name: str) -> int:
    return integer(value, name, lo=1, hi=MAX_INSTANCES)


def _check_trace(trace) -> Trace:
    if not isinstance(trace, Trace):
        raise InputError(f"trace: got {type(trace).__name__}; allowed: a mooncake_lab.traces.Trace")
    return trace


def _check_weight(weight: str) -> str:
    return choice(weight, "weight", ("token", "block"))


def check_policy(policy, where: str = "") -> str:
    """An eviction policy name of :data:`EVICTION_POLICIES` (InputError naming the allowed ones)."""
    return choice(policy, "policy", EVICTION_POLICIES, where)


def check_touch_budget(n_touches: int, policy: str, where: str = "") -> None:
    """LFU / LengthAware pack a stamp of 30 bits: refuse a run that could touch one cache more often."""
    if policy != "lru" and n_touches > STAMP_MAX:
        raise InputError(f"{where + ': ' if where else ''}a {policy!r} cache may see up to {n_touches:,} block "
                         f"touches; allowed: at most {STAMP_MAX:,} (2^30 − 1, the stamp bits of its packed rank)")


# ----------------------------------------------------------------------------------------------
# one formula: tokens of the first n blocks of a request
# ----------------------------------------------------------------------------------------------
@njit(cache=True)
def _hit_tokens(n_hit_blocks, input_len, block_tokens):
    """Tokens in the first ``n_hit_blocks`` blocks of an ``input_len``-token prompt: min(bt·n, L)."""
    return min(block_tokens * n_hit_blocks, input_len)


@njit(cache=True)
def _hit_tokens_array(n_hit_blocks, input_len, block_tokens):
    out = np.empty(len(n_hit_blocks), dtype=np.int64)
    for i in range(len(n_hit_blocks)):
        out[i] = _hit_tokens(n_hit_blocks[i], input_len[i], block_tokens)
    return out


def prefix_hit_tokens(n_hit_blocks, input_len, block_tokens: int = BLOCK_TOKENS) -> np.ndarray:
    """Tokens served from cache per request (int64, tokens) given its leading hit blocks.

    ``min(block_tokens · n, L)``: a request of ``k`` blocks has ``L − block_tokens·(k−1)`` tokens in
    its last block. Example: L = 1,300 tokens (3 blocks), n = 3 → 1,300, n = 2 → 1,024.
    """
    n = int_array(np.atleast_1d(n_hit_blocks), "n_hit_blocks", lo=0, hi=2**62, where="prefix_hit_tokens")
    L = int_array(np.atleast_1d(input_len), "input_len", lo=0, hi=2**62, where="prefix_hit_tokens")
    bt = integer(block_tokens, "block_tokens", lo=1, hi=2**20, where="prefix_hit_tokens")
    if n.shape != L.shape:
        raise InputError(f"prefix_hit_tokens: n_hit_blocks has {n.shape[0]} values, input_len {L.shape[0]}; "
                         f"allowed: the same number")
    return _hit_tokens_array(np.minimum(n, 2**62 // bt), L, bt)  # min(bt·n, L) without int64 overflow


def hit_ratio(trace: Trace, n_hit_blocks, weight: str = "token") -> float:
    """Hit ratio (fraction 0..1) of a trace given each request's number of leading hit blocks.

    ``weight="token"``: Σ hit tokens / Σ input tokens; ``"block"``: Σ hit blocks / Σ blocks.
    """
    trace = _check_trace(trace)
    weight = _check_weight(weight)
    n = int_array(np.atleast_1d(n_hit_blocks), "n_hit_blocks", lo=0, hi=2**62, where="hit_ratio")
    if n.shape != (len(trace),):
        raise InputError(f"hit_ratio.n_hit_blocks: got {n.shape[0]} values; allowed: one per request ({len(trace)})")
    if weight == "block":
        total = trace.block_offsets[-1]
        return float(n.sum() / total) if total else 0.0
    total = trace.input_len.sum()
    hit = prefix_hit_tokens(n, trace.input_len, trace.block_tokens).sum()
    return float(hit / total) if total else 0.0


# ----------------------------------------------------------------------------------------------
# LRU / LFU / LengthAware caches on flat arrays (reusable from other njit kernels)
# ----------------------------------------------------------------------------------------------
class CacheState(NamedTuple):
    """The arrays of ``n`` prefix caches (layout in the module docstring)."""

    last_use: np.ndarray
    q_block: np.ndarray
    q_stamp: np.ndarray
    meta: np.ndarray

    @property
    def n_instances(self) -> int:
        return self.last_use.shape[0]

    @property
    def count(self) -> np.ndarray:
        """Cached blocks per instance."""
        return self.meta[:, 1].copy()

    @property
    def policy(self) -> str:
        """The eviction policy of the caches (one for all)."""
        return EVICTION_POLICIES[int(self.meta[0, 5])]


def new_cache_state(n_instances: int, n_blocks: int, capacity, *, alloc=None, policy: str = "lru") -> CacheState:
    """Empty caches: ``n_instances`` caches over block ids ``0..n_blocks-1`` evicting by ``policy``.

    ``capacity`` (blocks) is one number for all instances or one per instance; ``policy`` one of
    :data:`EVICTION_POLICIES`. ``alloc(k, fill)``: where
    the arrays live — a flat int64 array of at least ``k`` elements, its first ``k`` set to ``fill``
    (``None``: left as they are; default: new arrays; see :func:`pooled_cache_state`).
    """
    n_instances = _check_positive_int(n_instances, "n_instances")
    n_blocks = integer(n_blocks, "n_blocks", lo=0)
    policy = check_policy(policy, "new_cache_state")
    if alloc is not None and not callable(alloc):
        raise InputError(f"new_cache_state.alloc: got {describe(alloc)}; allowed: None or a function (k, fill) -> "
                         f"int64 array")
    caps = np.atleast_1d(np.asarray(capacity, dtype=object))
    if caps.ndim != 1 or caps.shape not in ((1,), (n_instances,)):
        raise InputError(f"capacity: got {caps.size} numbers; allowed: one number or {n_instances} numbers")
    caps = np.array([_check_capacity(c) for c in caps], dtype=np.int64)
    caps = np.broadcast_to(caps, (n_instances,)).copy()
    qcap = 2 * int(min(caps.max(), n_blocks)) + 64
    memory(8 * n_instances * (n_blocks + 2 * qcap),
           f"{n_instances:,} caches (n_instances) × ({describe(n_blocks)} block ids (n_blocks) + 2 × {qcap:,} queue "
           f"slots) × 8 B", "new_cache_state")
    meta = np.zeros((n_instances, 6), dtype=np.int64)
    meta[:, 0] = caps
    meta[:, 5] = EVICTION_POLICIES.index(policy)
    if alloc is None:
        return CacheState(last_use=np.full((n_instances, n_blocks), -1, dtype=np.int64),
                          q_block=np.zeros((n_instances, qcap), dtype=np.int64),
                          q_stamp=np.zeros((n_instances, qcap), dtype=np.int64),
                          meta=meta)
    last_use = alloc(n_instances * n_blocks, -1)[:n_instances * n_blocks].reshape(n_instances, n_blocks)
    qs = alloc(2 * n_instances * qcap, None)[:2 * n_instances * qcap].reshape(2, n_instances, qcap)
    return CacheState(last_use=last_use, q_block=qs[0], q_stamp=qs[1], meta=meta)  # queues: read only once written


#: Flat int64 buffers free for reuse, as ``[buffer, clean]``: ``clean`` = how many of its first elements are
#: known to be −1. At most _POOL_MAX (the largest) are kept: two runs in parallel (simulate_all), up to six
#: buffers each (a router's belief).
_POOL: list = []
_POOL_MAX = 12
_POOL_LOCK = threading.Lock()


def _take(need: int) -> list:
    """A pooled ``[buffer, clean]`` of ≥ ``need`` elements, else a new one with room for 4× as many
    (np.empty reserves address space, not memory: only the part a run fills is ever touched)."""
    with _POOL_LOCK:
        fits = [e for e in _POOL if e[0].size >= need]
        entry = min(fits, key=lambda e: e[0].size) if fits else None
        _POOL[:] = [e for e in _POOL if e is not entry]
    return entry if entry is not None else [np.empty(max(4 * need, 1), dtype=np.int64), 0]


def _give(entries: list) -> None:
    """Back to the pool (the largest :data:`_POOL_MAX` buffers are kept)."""
    with _POOL_LOCK:
        _POOL.extend(entries)
        _POOL.sort(key=lambda e: e[0].size)
        del _POOL[:-_POOL_MAX]


@helper_njit
def _clear_cached(last_use, q_block, meta):
    """Every block back to −1 (absent) in every cache, by its queue or heap: a cached block has an entry
    in ``q_block[c, meta[c, 2]:meta[c, 3]]`` (an evicted one is −1 already)."""
    for c in range(meta.shape[0]):
        for r in range(meta[c, 2], meta[c, 3]):
            last_use[c, q_block[c, r]] = -1


@helper_njit
def _empty_cache(last_use, q_block, meta, inst):
    """Cache ``inst`` emptied (a node leaving the prefill pool, rule 14 of :mod:`mooncake_lab.sim.reference`):
    its blocks back to −1 and its queue or heap emptied; its stamp clock goes on."""
    for r in range(meta[inst, 2], meta[inst, 3]):
        last_use[inst, q_block[inst, r]] = -1
    meta[inst, 1] = 0
    meta[inst, 2] = 0
    meta[inst, 3] = 0


@njit(cache=True, nogil=True)  # nogil: prefault_pool runs in a dashboard's background thread
def _fill_minus_one(a, lo, hi):
    for k in range(lo, hi):
        a[k] = -1


def _make_clean(entry: list, k: int) -> None:
    """A pooled ``[buffer, clean]``'s first ``k`` elements −1: only those beyond the part known clean are
    written; marks them clean."""
    if entry[1] < k:
        _fill_minus_one(entry[0], entry[1], k)
        entry[1] = k


@contextmanager
def pooled_cache_state(n_instances: int, n_blocks: int, capacity, policy: str = "lru"):
    """:func:`new_cache_state` for one simulation, its arrays taken from (and given back to) a small
    pool of buffers: a fresh ``last_use`` of 32 × 183k (47 MB, the conversation trace at 32
    instances) costs 10–50 ms of page faults, refilling a used one 2–7 ms. So a state given back
    after a run that ended normally is cleared through its queues (only the blocks still cached are set
    back to −1: ≈ 0.3 ms for 8 × 11,920 blocks instead of ≈ 3 ms to fill 8 × 183k) and the next run on
    it needs no fill; a run on more instances fills only the part beyond what is known clean (a move from
    8 to 24 prefill instances filled all 24 × 183k); the queues need no clearing at all. Thread-safe; do
    not keep the state past the ``with`` block (nor change ``last_use`` except by the cache helpers)."""
    taken: list = []
    clean_before = [0]

    def alloc(k: int, fill) -> np.ndarray:
        entry = _take(k)
        taken.append(entry)
        if fill == -1:
            _make_clean(entry, k)
            clean_before[0] = entry[1]
        elif fill is not None:
            entry[0][:k].fill(fill)
        entry[1] = 0  # in use: no longer known to be clean
        return entry[0]

    try:
        st = new_cache_state(n_instances, n_blocks, capacity, alloc=alloc, policy=policy)
        yield st
        k = st.last_use.size
        if k and int((st.meta[:, 3] - st.meta[:, 2]).sum()) <= k // 4:  # few queue entries: cheaper than a fill
            _clear_cached(st.last_use, st.q_block, st.meta)
            taken[0][1] = clean_before[0]   # the run wrote only its first k; the rest is as it was
    finally:
        _give(taken)


def prefault_pool(n_elements: int, n_buffers: int = 2) -> None:
    """Make sure the pool holds ``n_buffers`` buffers whose first ``n_elements`` are written (−1, clean),
    so a later run with tables that big (a cache's ``last_use`` and the block availability: instances ×
    the trace's block ids) pays no page faults: a first run at 24 or 32 instances after runs at 8 spent
    ≈ 100 ms of its 140 ms faulting in new memory. For a dashboard's background thread (it releases the
    GIL while it writes); a run that needs a buffer meanwhile takes another."""
    n_elements = integer(n_elements, "n_elements", lo=0)
    n_buffers = integer(n_buffers, "n_buffers", lo=1, hi=_POOL_MAX)
    memory(8 * n_elements * n_buffers, f"{n_buffers} buffers × {n_elements:,} elements × 8 B", "prefault_pool")
    taken = [_take(n_elements) for _ in range(n_buffers)]
    try:
        for entry in taken:
            _make_clean(entry, n_elements)
    finally:
        _give(taken)


@contextmanager
def pooled_array(shape: tuple, dtype=np.float64):
    """An uninitialised array of ``shape`` (an 8-byte ``dtype``) for one run, from the pool of
    :func:`pooled_cache_state`: a big array a run writes all over (the simulator's block availability, 8 ×
    183k floats) costs ≈ 3,000 page faults each time it is new (≈ 3 ms). Do not keep it past the block."""
    k = int(np.prod(shape, dtype=np.int64))
    entry = _take(k)
    entry[1] = 0
    try:
        yield entry[0][:k].view(dtype).reshape(shape)
    finally:
        _give([entry])


@helper_njit
def _match_prefix(last_use, inst, blocks):
    """Number of leading ``blocks`` present in cache ``inst`` (prefix-chain match). No side effect."""
    n = 0
    while n < len(blocks) and last_use[inst, blocks[n]] >= 0:
        n += 1
    return n


@helper_njit
def _compact_queue(last_use, q_block, q_stamp, meta, inst):
    """Drop stale queue entries of cache ``inst``, keeping live ones in stamp order at the front."""
    w = 0
    for r in range(meta[inst, 2], meta[inst, 3]):
        b = q_block[inst, r]
        if last_use[inst, b] == q_stamp[inst, r]:
            q_block[inst, w] = b
            q_stamp[inst, w] = q_stamp[inst, r]
            w += 1
    meta[inst, 2] = 0
    meta[inst, 3] = w


@helper_njit
def _sift_down(q_block, q_stamp, inst, i, size):
    """Restore the min-heap on ``q_stamp[inst, :size]`` below slot ``i``."""
    b, k = q_block[inst, i], q_stamp[inst, i]
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        if c + 1 < size and q_stamp[inst, c + 1] < q_stamp[inst, c]:
            c += 1
        if q_stamp[inst, c] >= k:
            break
        q_block[inst, i], q_stamp[inst, i] = q_block[inst, c], q_stamp[inst, c]
        i = c
    q_block[inst, i], q_stamp[inst, i] = b, k


@helper_njit
def _heap_push(q_block, q_stamp, meta, inst, b, k):
    """Add entry ``(b, k)`` to cache ``inst``'s heap (room is the caller's: see :func:`_touch_ranked`)."""
    i = meta[inst, 3]
    meta[inst, 3] = i + 1
    while i > 0:
        parent = (i - 1) // 2
        if q_stamp[inst, parent] <= k:
            break
        q_block[inst, i], q_stamp[inst, i] = q_block[inst, parent], q_stamp[inst, parent]
        i = parent
    q_block[inst, i], q_stamp[inst, i] = b, k


@helper_njit
def _compact_heap(last_use, q_block, q_stamp, meta, inst):
    """Drop stale heap entries of cache ``inst`` and heapify the live ones."""
    w = 0
    for r in range(meta[inst, 3]):
        b = q_block[inst, r]
        if last_use[inst, b] == q_stamp[inst, r]:
            q_block[inst, w] = b
            q_stamp[inst, w] = q_stamp[inst, r]
            w += 1
    meta[inst, 3] = w
    for i in range(w // 2 - 1, -1, -1):
        _sift_down(q_block, q_stamp, inst, i, w)


@helper_njit
def _evict_lowest(last_use, q_block, q_stamp, meta, inst):
    """Evict the live block of lowest rank from cache ``inst`` (popping stale entries on the way)."""
    while meta[inst, 3] > 0:
        b, k = q_block[inst, 0], q_stamp[inst, 0]
        size = meta[inst, 3] - 1
        meta[inst, 3] = size
        if size > 0:
            q_block[inst, 0], q_stamp[inst, 0] = q_block[inst, size], q_stamp[inst, size]
            _sift_down(q_block, q_stamp, inst, 0, size)
        if last_use[inst, b] == k:
            last_use[inst, b] = -1
            meta[inst, 1] -= 1
            return


@helper_njit
def _touch_ranked(last_use, q_block, q_stamp, meta, inst, b, pos):
    """LFU / LengthAware touch of block ``b`` at prompt position ``pos`` (rank layout: module docstring)."""
    cap = meta[inst, 0]
    if cap <= 0:
        return
    old = last_use[inst, b]
    if old < 0:
        if meta[inst, 1] >= cap:  # full: evict first, so the new block is never its own victim
            _evict_lowest(last_use, q_block, q_stamp, meta, inst)
        meta[inst, 1] += 1
        freq = 1
    else:
        freq = min((old >> FREQ_SHIFT) + 1, FREQ_MAX)
    stamp = meta[inst, 4]
    meta[inst, 4] = stamp + 1
    rank = (freq << FREQ_SHIFT) | stamp
    if meta[inst, 5] == 2:  # length_aware: among equal counts, later positions go first
        rank |= (POS_MAX - min(pos, POS_MAX)) << STAMP_BITS
    last_use[inst, b] = rank
    if meta[inst, 3] == q_block.shape[1]:
        _compact_heap(last_use, q_block, q_stamp, meta, inst)
    _heap_push(q_block, q_stamp, meta, inst, b, rank)


@helper_njit
def _touch_blocks(last_use, q_block, q_stamp, meta, inst, blocks):
    """Touch a request's ``blocks`` in cache ``inst``, last block first (root ends most recent).

    LRU: each touch stores or refreshes its block with the cache's next stamp, appends ``(block, stamp)``
    to the queue and evicts least-recently-used blocks (the queue's oldest live entries) while the cache
    holds more than its capacity. One loop with the cache's counters in locals (``meta`` is written
    back at the end): a call per block passed ~40 words of array arguments, most of a touch's cost.
    """
    if meta[inst, 5] != 0:
        for j in range(len(blocks) - 1, -1, -1):
            _touch_ranked(last_use, q_block, q_stamp, meta, inst, blocks[j], j)
        return
    cap = meta[inst, 0]
    if cap <= 0:
        return
    qcap = q_block.shape[1]
    count = meta[inst, 1]  # cached blocks
    head = meta[inst, 2]   # the queue's oldest entry
    tail = meta[inst, 3]   # one past its newest
    clock = meta[inst, 4]  # the next stamp
    for j in range(len(blocks) - 1, -1, -1):
        b = blocks[j]
        if tail == qcap:  # full: drop the stale entries
            meta[inst, 1] = count
            meta[inst, 2] = head
            meta[inst, 3] = tail
            _compact_queue(last_use, q_block, q_stamp, meta, inst)
            head = meta[inst, 2]
            tail = meta[inst, 3]
        if last_use[inst, b] < 0:
            count += 1
        last_use[inst, b] = clock
        q_block[inst, tail] = b
        q_stamp[inst, tail] = clock
        tail += 1
        clock += 1
        while count > cap:  # evict the least recently used (stale entries: refreshed since)
            v = q_block[inst, head]
            if last_use[inst, v] == q_stamp[inst, head]:
                last_use[inst, v] = -1
                count -= 1
            head += 1
    meta[inst, 1] = count
    meta[inst, 2] = head
    meta[inst, 3] = tail
    meta[inst, 4] = clock


@njit(cache=True, nogil=True)  # nogil: work computed ahead leaves the GIL to the student's move
def _replay_kernel(offsets, block_ids, assignment, last_use, q_block, q_stamp, meta):
    """Replay requests in order through per-instance caches (each evicting by its ``meta[:, 5]``
    policy); leading hit blocks per request."""
    n = len(offsets) - 1
    n_hit = np.empty(n, dtype=np.int64)
    for i in range(n):
        blocks = block_ids[offsets[i]:offsets[i + 1]]
        inst = assignment[i]
        n_hit[i] = _match_prefix(last_use, inst, blocks)
        _touch_blocks(last_use, q_block, q_stamp, meta, inst, blocks)
    return n_hit


def _lru_reference(offsets, block_ids, assignment, capacities) -> np.ndarray:
    """Plain-Python LRU (one OrderedDict per instance), same semantics as :func:`_lru_kernel`."""
    caches = [OrderedDict() for _ in capacities]
    n_hit = []
    for i in range(len(offsets) - 1):
        blocks = [int(b) for b in block_ids[offsets[i]:offsets[i + 1]]]
        cache, cap = caches[assignment[i]], capacities[assignment[i]]
        n = 0
        while n < len(blocks) and blocks[n] in cache:  # lookup: leading cached blocks
            n += 1
        n_hit.append(n)
        if cap == 0:
            continue
        for b in reversed(blocks):                        # then store all blocks, root last
            cache[b] = True
            cache.move_to_end(b)
            if len(cache) > cap:
                cache.popitem(last=False)                 # evict the least recently used
    return np.array(n_hit, dtype=np.int64)


#: The LRU replay (the same kernel: the state says which policy evicts).
_lru_kernel = _replay_kernel


class ReferenceCache:
    """One prefix cache in plain Python, the readable statement of the kernel's semantics.

    ``entries`` maps block → (touches, position, stamp), least recently touched first. The victim is
    the block of smallest key: LRU (stamp,), LFU (touches, stamp), LengthAware (touches, −position,
    stamp); counts and positions saturate as in the kernel (:data:`FREQ_MAX`, :data:`POS_MAX`).
    """

    def __init__(self, capacity: int, policy: str = "lru"):
        self.capacity, self.policy = capacity, check_policy(policy, "ReferenceCache")
        self.entries: OrderedDict = OrderedDict()
        self.clock = 0

    def match(self, blocks) -> int:
        """Leading ``blocks`` cached (no side effect)."""
        n = 0
        while n < len(blocks) and blocks[n] in self.entries:
            n += 1
        return n

    def _key(self, b):
        touches, pos, stamp = self.entries[b]
        return {"lru": (stamp,), "lfu": (touches, stamp), "length_aware": (touches, -pos, stamp)}[self.policy]

    def touch(self, blocks) -> None:
        """Store / refresh ``blocks`` (a prefix of a prompt's block list), last block first."""
        if self.capacity <= 0:
            return
        for j in range(len(blocks) - 1, -1, -1):
            b = blocks[j]
            if b not in self.entries and len(self.entries) >= self.capacity:
                victim = next(iter(self.entries)) if self.policy == "lru" else min(self.entries, key=self._key)
                del self.entries[victim]
            touches = min(self.entries[b][0] + 1, FREQ_MAX) if b in self.entries else 1
            self.entries[b] = (touches, min(j, POS_MAX), self.clock)
            self.entries.move_to_end(b)
            self.clock += 1


def _replay_reference(offsets, block_ids, assignment, capacities, policy: str = "lru") -> np.ndarray:
    """Plain-Python replay through :class:`ReferenceCache` s, same semantics as :func:`_replay_kernel`."""
    caches = [ReferenceCache(c, policy) for c in capacities]
    n_hit = []
    for i in range(len(offsets) - 1):
        blocks = [int(b) for b in block_ids[offsets[i]:offsets[i + 1]]]
        cache = caches[assignment[i]]
        n_hit.append(cache.match(blocks))
        cache.touch(blocks)
    return np.array(n_hit, dtype=np.int64)


def route_requests(n_requests: int, n_instances: int, routing: str = "random", seed: int = 0) -> np.ndarray:
    """Instance index (int64) per request: ``"round_robin"`` (i mod n) or seeded uniform ``"random"``."""
    choice(routing, "routing", ROUTINGS, "route_requests")
    n_instances = _check_positive_int(n_instances, "n_instances")
    n_requests = integer(n_requests, "n_requests", lo=0, where="route_requests")
    memory(8 * n_requests, f"{n_requests:,} requests (n_requests) × 8 B", "route_requests")
    seed = integer(seed, "seed", lo=0, where="route_requests")
    if routing == "round_robin":
        return np.arange(n_requests, dtype=np.int64) % n_instances
    return np.random.default_rng(seed).integers(0, n_instances, size=n_requests).astype(np.int64)


class CacheResult(NamedTuple):
    """Output of :func:`simulate_cache`: leading hit blocks and instance per request, final caches."""

    n_hit_blocks: np.ndarray
    assignment: np.ndarray
    state: CacheState


#: The name :func:`simulate_lru` has always returned.
LRUResult = CacheResult


def simulate_cache(trace: Trace, capacity, policy: str = "lru", n_instances: int = 1, routing: str = "random",
                   seed: int = 0, assignment=None) -> CacheResult:
    """Replay ``trace`` through ``n_instances`` caches of ``capacity`` blocks each, evicting by ``policy``.

    ``policy``: one of :data:`EVICTION_POLICIES`. Requests go to instances by ``assignment`` (int
    array, one instance per request) if given, else by ``routing`` (see :func:`route_requests`). With
    one instance this is a global pool.
    """
    policy = check_policy(policy, "simulate_cache")
    return _simulate(trace, capacity, n_instances, routing, seed, assignment, policy, "simulate_cache")


def simulate_lru(trace: Trace, capacity, n_instances: int = 1, routing: str = "random",
                 seed: int = 0, assignment=None) -> CacheResult:
    """Replay ``trace`` through ``n_instances`` LRU caches of ``capacity`` blocks each.

    Requests go to instances by ``assignment`` (int array, one instance per request) if given, else
    by ``routing`` (see :func:`route_requests`). With one instance this is a global pool.
    """
    return _simulate(trace, capacity, n_instances, routing, seed, assignment, "lru", "simulate_lru")


def _simulate(trace, capacity, n_instances, routing, seed, assignment, policy, where) -> CacheResult:
    trace = _check_trace(trace)
    n_instances = _check_positive_int(n_instances, "n_instances")
    capacity = _check_capacity(capacity, allow_inf=True)
    if capacity == math.inf:
        capacity = trace.n_blocks
    if assignment is None:
        assignment = route_requests(len(trace), n_instances, routing, seed)
    else:
        assignment = int_array(assignment, "assignment", lo=0, hi=n_instances - 1, where=where)
        if assignment.shape != (len(trace),):
            raise InputError(f"{where}.assignment: got {len(assignment)} values; allowed: one instance "
                             f"per request ({len(trace)}), each in 0..{n_instances - 1} (n_instances={n_instances})")
    check_touch_budget(len(trace.block_ids), policy, where)
    st = new_cache_state(n_instances, trace.n_blocks, capacity, policy=policy)
    n_hit = _replay_kernel(trace.block_offsets, trace.block_ids, assignment, *st)
    return CacheResult(n_hit, assignment, st)


def lru_hit_ratio(trace: Trace, capacity, n_instances: int = 1, routing: str = "random",
                  seed: int = 0, weight: str = "token") -> float:
    """Hit ratio (0..1) of LRU caches of ``capacity`` blocks each, simulated directly."""
    weight = _check_weight(weight)
    res = simulate_lru(trace, capacity, n_instances, routing, seed)
    return hit_ratio(trace, res.n_hit_blocks, weight)


def cache_hit_ratio(trace: Trace, capacity, policy: str = "lru", n_instances: int = 1, routing: str = "random",
                    seed: int = 0, weight: str = "token") -> float:
    """Hit ratio (0..1) of ``policy`` caches of ``capacity`` blocks each, simulated directly."""
    weight = _check_weight(weight)
    res = simulate_cache(trace, capacity, policy, n_instances, routing, seed)
    return hit_ratio(trace, res.n_hit_blocks, weight)


def replica_counts(state: CacheState) -> np.ndarray:
    """Per block id, how many instances currently hold it (int64, 0..n_instances)."""
    if not isinstance(state, CacheState):
        raise InputError(f"replica_counts.state: got {describe(state)}; allowed: a CacheState "
                         "(from new_cache_state or simulate_lru(...).state)")
    return (state.last_use >= 0).sum(axis=0).astype(np.int64)


# ----------------------------------------------------------------------------------------------
# stack distances: the whole LRU curve in one pass
# ----------------------------------------------------------------------------------------------
@njit(cache=True)
def _fenwick_add(tree, i, v):
    i += 1
    while i < len(tree):
        tree[i] += v
        i += i & (-i)


@njit(cache=True)
def _fenwick_prefix(tree, i):
    """Sum of entries 0..i-1."""
    s = 0
    while i > 0:
        s += tree[i]
        i -= i & (-i)
    return s


@njit(cache=True, nogil=True)  # nogil: work computed ahead leaves the GIL to the student's move
def _stack_distance_kernel(offsets, block_ids, n_blocks, never):
    """Per access: running max over the request's leading blocks of the LRU stack distance.

    A Fenwick tree over access times holds a 1 at each block's latest access; the stack distance of
    block b at lookup = number of ones after ``last[b]`` (distinct blocks used since). Block j of a
    request hits at capacity C iff the returned value is < C.
    """
    n_acc = len(block_ids)
    tree = np.zeros(n_acc + 1, dtype=np.int64)
    last = np.full(n_blocks, -1, dtype=np.int64)
    out = np.empty(n_acc, dtype=np.int64)
    t = 0
    for i in range(len(offsets) - 1):
        s, e = offsets[i], offsets[i + 1]
        m = -1
        total = _fenwick_prefix(tree, t)
        for j in range(s, e):  # lookup, before this request's own touches
            lb = last[block_ids[j]]
            d = never if lb < 0 else total - _fenwick_prefix(tree, lb + 1)
            if d > m:
                m = d
            out[j] = m
        for j in range(e - 1, s - 1, -1):  # touch, last block first
            b = block_ids[j]
            if last[b] >= 0:
                _fenwick_add(tree, last[b], -1)
            _fenwick_add(tree, t, 1)
            last[b] = t
            t += 1
    return out


def _stack_distances_reference(offsets, block_ids) -> np.ndarray:
    """Plain-Python stack distances with an explicit recency list (most recent first)."""
    stack: list[int] = []
    out = []
    for i in range(len(offsets) - 1):
        blocks = [int(b) for b in block_ids[offsets[i]:offsets[i + 1]]]
        m = -1
        for b in blocks:
            d = stack.index(b) if b in stack else NEVER
            m = max(m, d)
            out.append(m)
        for b in reversed(blocks):
            if b in stack:
                stack.remove(b)
            stack.insert(0, b)
    return np.array(out, dtype=np.int64)


def stack_distances(trace: Trace) -> np.ndarray:
    """Per access (aligned with ``trace.block_ids``): max LRU stack distance over the leading blocks.

    The block hits in a global LRU cache of ``C`` blocks iff this value is < C; a block never seen
    before has :data:`NEVER`.
    """
    trace = _check_trace(trace)
    return _stack_distance_kernel(trace.block_offsets, trace.block_ids, trace.n_blocks, NEVER)


def _access_weights(trace: Trace, weight: str) -> np.ndarray:
    """Weight of each access: 1 (block) or its tokens (token; the last block only the remainder)."""
    if weight == "block":
        return np.ones(len(trace.block_ids), dtype=np.int64)
    k = np.diff(trace.block_offsets)
    req = np.repeat(np.arange(len(trace)), k)
    j = np.arange(len(trace.block_ids)) - trace.block_offsets[req]
    L = trace.input_len[req]
    return (prefix_hit_tokens(j + 1, L, trace.block_tokens) - prefix_hit_tokens(j, L, trace.block_tokens))


def hit_ratio_curve(trace: Trace, capacities, weight: str = "token", distances=None,
                    policy: str = "lru") -> np.ndarray:
    """Hit ratio (0..1) of one global cache at each capacity (blocks; ``math.inf`` = infinite cache).

    ``policy="lru"``: one stack-distance pass for all capacities (``distances`` may pass a
    precomputed :func:`stack_distances` to skip it). ``"lfu"`` / ``"length_aware"``: one direct
    replay per finite capacity (not stack algorithms; timings in benchmarks/bench_prefix_cache.py);
    an infinite cache never evicts, so every policy gives
    :func:`infinite_cache_hit_ratio` there.
    """
    trace = _check_trace(trace)
    weight = _check_weight(weight)
    policy = check_policy(policy, "hit_ratio_curve")
    try:
        raw = np.atleast_1d(np.asarray(capacities, dtype=object))
    except (TypeError, ValueError):
        raise InputError(f"hit_ratio_curve.capacities: got {capacities!r:.60}; allowed: numbers of blocks") from None
    if raw.ndim != 1:
        raise InputError(f"hit_ratio_curve.capacities: got shape {raw.shape}; allowed: a 1-D list of numbers of blocks")
    memory(8 * len(raw), f"{len(raw):,} capacities", "hit_ratio_curve")
    caps = [_check_capacity(c, "capacities", allow_inf=True) for c in raw.tolist()]
    if policy != "lru":
        if distances is not None:
            raise InputError(f"hit_ratio_curve.distances: got an array with policy={policy!r}; allowed: "
                             "None (stack distances give LRU curves only)")
        finite = [c for c in caps if c != math.inf]
        fin = iter([hit_ratio(trace, simulate_cache(trace, c, policy).n_hit_blocks, weight) for c in finite])
        top = infinite_cache_hit_ratio(trace, weight) if len(finite) < len(caps) else None
        return np.array([top if c == math.inf else next(fin) for c in caps], dtype=float)
    m = (stack_distances(trace) if distances is None
         else int_array(distances, "distances", lo=0, where="hit_ratio_curve"))
    if m.shape != trace.block_ids.shape:
        raise InputError(f"hit_ratio_curve.distances: got {m.shape[0]} values; allowed: one per access "
                         f"({len(trace.block_ids)}), from stack_distances(trace)")
    w = _access_weights(trace, weight)
    total = trace.input_len.sum() if weight == "token" else len(w)
    if total == 0:
        return np.zeros(len(caps))
    order = np.argsort(m, kind="stable")
    ms, cw = m[order], np.concatenate([[0], np.cumsum(w[order])])
    out = np.empty(len(caps))
    for i, c in enumerate(caps):
        n_below = np.searchsorted(ms, NEVER if c == math.inf else c, side="left")
        out[i] = cw[n_below] / total
    return out


def infinite_cache_hit_ratio(trace: Trace, weight: str = "token") -> float:
    """Hit ratio (0..1) with an unbounded cache: every block seen before (with its prefix) hits."""
    return float(hit_ratio_curve(trace, [math.inf], weight)[0])


# ----------------------------------------------------------------------------------------------
# popularity
# ----------------------------------------------------------------------------------------------
def block_popularity(trace: Trace) -> np.ndarray:
    """Requests per block id (int64, length ``n_blocks``); a block repeated inside one prompt counts once."""
    trace = _check_trace(trace)
    req = np.repeat(np.arange(len(trace), dtype=np.int64), np.diff(trace.block_offsets))
    pairs = np.unique(req * max(trace.n_blocks, 1) + trace.block_ids)
    return np.bincount(pairs % max(trace.n_blocks, 1), minlength=trace.n_blocks).astype(np.int64)
