"""The routers of :mod:`.routers` in plain Python: each rule written out as its source states it.

:func:`route_reference` takes the same :class:`~.routers.RouterParams` and per-instance inputs as
the numba :func:`~.routers.route` (lists or arrays) and must return the same instance;
:func:`rule_scores` gives the per-instance numbers each rule compares (the functions the rules use);
:func:`route_decode_reference` is the decode-node choice of :func:`~.routers.route_decode`;
:class:`ReferenceBelief` is the router-side history (:func:`~.routers.belief_match` /
:func:`~.routers.belief_insert`) over :class:`~mooncake_lab.prefix_cache.ReferenceCache` s.
"""
from __future__ import annotations

import math

from ..prefix_cache import ReferenceCache
from ..validate import integer, real
from .routers import decode_args, router_args

__all__ = ["route_reference", "rule_scores", "ReferenceBelief", "EntryTimes", "dynamo_cost", "match_rate", "sglang_imbalanced",
           "llmd_score", "prodstack_kv_uses_cache", "aibrix_bound", "aibrix_match_pct", "aibrix_pd_bound",
           "aibrix_pd_prefill_score", "preble_cost", "preble_exploits", "route_decode_reference",
           "decode_tie_start", "aibrix_free_pct", "aibrix_decode_score"]


class EntryTimes:
    """Per instance: when each block last entered a view of its cache (s) — what
    :func:`~.routers.note_entered` keeps, read as ``RouterInputs.deepest_entered`` (SGLang's last_tenant)."""

    def __init__(self, n_instances: int):
        self.at = [{} for _ in range(n_instances)]

    def note(self, inst: int, blocks, t: float, held) -> None:
        """Before ``blocks`` are stored on ``inst`` at ``t``: each one ``held(b)`` is false for enters at ``t``."""
        for b in blocks:
            if not held(b):
                self.at[inst][b] = t

    def deepest(self, inst: int, blocks, m: int) -> float:
        """When block ``m − 1`` (the deepest of a match of ``m``) entered ``inst``'s view (s); 0 if m = 0."""
        return self.at[inst][blocks[m - 1]] if m > 0 else 0.0


class ReferenceBelief:
    """Per instance: an LRU of the blocks the router sent there, when it last sent each (s) and when each
    entered the belief (``entered``, :class:`EntryTimes`).

    ``capacity_blocks`` 0 = unbounded (as ``RouterParams.belief_capacity``); ``ttl_s`` inf = none."""

    def __init__(self, n_instances: int, capacity_blocks: int, ttl_s: float):
        w = "ReferenceBelief"
        n_instances = integer(n_instances, "n_instances", lo=1, where=w)
        capacity_blocks = integer(capacity_blocks, "capacity_blocks", lo=0, where=w)
        ttl_s = real(ttl_s, "ttl_s", lo=0.0, lo_open=True, allow_inf=True, where=w)
        cap = capacity_blocks if capacity_blocks > 0 else math.inf
        self.caches = [ReferenceCache(cap, "lru") for _ in range(n_instances)]
        self.sent_at = [{} for _ in range(n_instances)]
        self.entered = EntryTimes(n_instances)
        self.ttl = ttl_s

    def holds(self, inst: int, b, t: float) -> bool:
        """Block ``b`` is believed held by ``inst`` at ``t``: in its LRU and sent within the TTL."""
        return b in self.caches[inst].entries and (self.ttl == math.inf or t - self.sent_at[inst][b] <= self.ttl)

    def match(self, inst: int, blocks, t: float) -> int:
        """Leading blocks believed held by ``inst`` at ``t``."""
        k = 0
        while k < len(blocks) and self.holds(inst, blocks[k], t):
            k += 1
        return k

    def insert(self, inst: int, blocks, t: float) -> None:
        """The router sent a request with ``blocks`` to ``inst`` at ``t``."""
        self.entered.note(inst, blocks, t, lambda b: self.holds(inst, b, t))
        self.caches[inst].touch(blocks)
        for b in blocks:
            self.sent_at[inst][b] = t

    def size(self, inst: int) -> int:
        """Blocks in the router's view of ``inst``."""
        return len(self.caches[inst].entries)


# ------------------------------------------------------------------ helpers of the rules
def _hit(m: int, bt: int, L: int) -> int:
    """Hit tokens of a match of ``m`` blocks."""
    return min(m * bt, L)


def _lowest_argmin(x) -> int:
    return min(range(len(x)), key=lambda i: x[i])   # min() keeps the first of equal keys


def _lowest_argmax(x) -> int:
    return max(range(len(x)), key=lambda i: x[i])   # max() keeps the first of equal keys


def _random_tie_break(tied, u: float, n: int) -> int:
    """Among the ``tied`` instances, the first at or after floor(u · n), going cyclically."""
    s = min(math.floor(u * n), n - 1)
    return next(i for i in list(range(s, n)) + list(range(s)) if i in tied)


def _total(xs) -> float:
    """Σ xs added left to right (as the kernel does; ``sum`` is the same on Python 3.11)."""
    t = 0.0
    for x in xs:
        t += x
    return t


# ------------------------------------------------------------------ the rules
# Each rule's per-instance numbers are one function (``*_cost`` / ``*_score`` ...), which the rule's
# choice below uses and :func:`rule_scores` shows (lecture 09's worked request): one place per formula.
def dynamo_cost(rp, r, L, bt) -> list:
    """Dynamo cost_i in blocks = (s·max(0, P_i + L − κ·h_i − m·(h_best − h_i)) + [D_i + L, 0 if P/D]) / bt
    + ρ·n_i (lower wins); m = ``dynamo_shared`` (shared_cache_multiplier, 0 = no shared tier), h_best the hit
    tokens of the longest prefix any instance holds: the shared pool's blocks beyond i's own (Dynamo's
    ``hits_beyond(device overlap)``; :mod:`.routers`)."""
    h_best = _hit(max(r.matched_blocks), bt, L)
    cost = []
    for i in range(len(r.inflight)):
        h = _hit(r.matched_blocks[i], bt, L)
        prefill = r.pending_tokens[i] + L - rp.dynamo_credit * h
        if rp.dynamo_shared > 0.0:
            prefill -= rp.dynamo_shared * (h_best - h)
        prefill = max(0.0, prefill)
        decode = 0.0 if rp.pd else r.live_kv_tokens[i] + L   # P/D prefill router: track_active_blocks=false
        cost.append((rp.dynamo_scale * prefill + decode) / bt + rp.dynamo_request_weight * r.inflight[i])
    return cost


def _dynamo(rp, r, L, bt, u):
    """Dynamo: argmin cost (ties: smaller tree, then random) or softmax over range-normalised costs at T > 0."""
    n = len(r.inflight)
    cost = dynamo_cost(rp, r, L, bt)
    if rp.dynamo_temperature == 0.0:
        cheapest = [i for i in range(n) if cost[i] == min(cost)]
        smallest_tree = min(r.tree_blocks[i] for i in cheapest)
        return _random_tie_break({i for i in cheapest if r.tree_blocks[i] == smallest_tree}, u, n)
    lo, hi = min(cost), max(cost)
    z = [(c - lo) / (hi - lo) if hi > lo else 0.0 for c in cost]
    w = [math.exp(-zi / rp.dynamo_temperature) for zi in z]
    target, acc = u * _total(w), 0.0
    for i in range(n):
        acc += w[i]
        if acc > target:
            return i
    return n - 1


def match_rate(r, L, bt) -> list:
    """h_i / L: the share of the prompt each instance is believed to hold (SGLang's match rate)."""
    return [_hit(m, bt, L) / L if L > 0 else 0.0 for m in r.matched_blocks]


def sglang_imbalanced(rp, load) -> bool:
    """SGLang's two-threshold test: max n − min n > abs and max n > rel · min n."""
    return max(load) - min(load) > rp.sglang_abs and max(load) > rp.sglang_rel * min(load)


def _sglang(rp, r, L, bt):
    """SGLang cache_aware: imbalanced → least load; else the deepest match (ties: the one whose deepest
    block entered its view first, then the lowest index) if its rate > threshold, else least."""
    load = r.inflight
    least = _lowest_argmin(load)
    if sglang_imbalanced(rp, load):
        return least
    k = max(r.matched_blocks)   # the tree's last_tenant: of the deepest, the earliest holder of block k − 1
    b = min((i for i in range(len(load)) if r.matched_blocks[i] == k), key=lambda i: (r.deepest_entered[i], i))
    return b if match_rate(r, L, bt)[b] > rp.sglang_threshold else least


def llmd_score(rp, r, n_blocks, kv_cap) -> list:
    """llm-d S_i = w_prefix·min(m_i, M)/M + w_queue·queue score + w_kv·(1 − utilisation) (higher wins)."""
    M = min(n_blocks, rp.llmd_max_blocks)
    qmax, qmin = max(r.queued), min(r.queued)
    score = []
    for i in range(len(r.queued)):
        prefix = min(r.matched_blocks[i], M) / M if M > 0 else 0.0
        queue = (qmax - r.queued[i]) / (qmax - qmin) if qmax > qmin else 1.0
        kv = 1.0 - min(1.0, r.live_kv_tokens[i] / kv_cap) if kv_cap > 0 else 0.0
        score.append(rp.llmd_w_prefix * prefix + rp.llmd_w_queue * queue + rp.llmd_w_kv * kv)
    return score


def _llmd(rp, r, n_blocks, u, kv_cap):
    """llm-d: argmax of :func:`llmd_score`; random ties."""
    score = llmd_score(rp, r, n_blocks, kv_cap)
    n = len(score)
    return _random_tie_break({i for i in range(n) if score[i] == max(score)}, u, n)


def _prodstack_prefix(r, u):
    """production-stack prefixaware: random.choice among the longest matches (no load term)."""
    k = max(r.matched_blocks)
    return _random_tie_break({i for i, m in enumerate(r.matched_blocks) if m == k}, u, len(r.matched_blocks))


def prodstack_kv_uses_cache(rp, r, L, bt) -> bool:
    """production-stack kvaware routes by cache iff some match exists and it misses ≤ threshold tokens."""
    k = max(r.matched_blocks)
    return not (k == 0 or _hit(k, bt, L) < L - rp.prodstack_threshold)


def _prodstack_kv(rp, r, L, bt):
    """production-stack kvaware: the longest match unless it misses > threshold tokens; else the lowest QPS."""
    if not prodstack_kv_uses_cache(rp, r, L, bt):
        return _lowest_argmin(r.recent_requests)   # session routing without session ids: lowest QPS
    return r.matched_blocks.index(max(r.matched_blocks))


def aibrix_bound(rp, load) -> float:
    """AIBrix's load bound mean(n) + k_σ · σ(n) (population std over all pods), requests."""
    n = len(load)
    mu = sum(load) / n
    return mu + rp.aibrix_k * math.sqrt(_total((x - mu) * (x - mu) for x in load) / n)


def _aibrix(rp, r, u):
    """AIBrix routeOriginal: the best match within mean + k·σ among the candidates, else least requests."""
    load, n = r.inflight, len(r.inflight)
    bound = aibrix_bound(rp, load)
    if max(load) - min(load) > rp.aibrix_abs:
        candidates = [i for i in range(n) if load[i] == min(load)]
    else:
        candidates = list(range(n))
    if not any(r.matched_blocks[i] > 0 for i in candidates):
        return _lowest_argmin(load)
    s = min(math.floor(u * n), n - 1)
    candidates.sort(key=lambda i: (-r.matched_blocks[i], load[i], (i - s) % n))   # shuffle, then stable sort
    for i in candidates:
        if load[i] <= bound:
            return i
    return _lowest_argmin(load)


def aibrix_match_pct(r, n_blocks) -> list:
    """AIBrix's prefix match %, integer: (matched blocks) · 100 // blocks of the prompt (``MatchPrefix``)."""
    return [m * 100 // n_blocks if n_blocks > 0 else 0 for m in r.matched_blocks]


def aibrix_pd_bound(rp, load) -> float:
    """The PD router's load bound mean(n) + k_σ · sd(n), sd AIBrix's ``standardDeviation``: the sample
    deviation, Σ(n − mean)² / (N − 1) (0 for one pod), requests."""
    n = len(load)
    mu = sum(load) / n
    return mu + rp.aibrix_k * (math.sqrt(_total((x - mu) * (x - mu) for x in load) / (n - 1)) if n > 1 else 0.0)


def aibrix_pd_prefill_score(r, n_blocks) -> list:
    """AIBrix's PD prefill score_i = (100 − match %_i) · 0.1 + n_i / max(1, max n) (lower wins)."""
    mx = max(1, max(r.inflight))
    return [(100.0 - pct) * 0.1 + n / mx for pct, n in zip(aibrix_match_pct(r, n_blocks), r.inflight)]


def _aibrix_pd(rp, r, n_blocks, u):
    """AIBrix's PD router, prefill: spread > 32 → random among the least loaded; else the lowest score
    among the pods within the bound (strict <: the first in pod order)."""
    load, n = r.inflight, len(r.inflight)
    if max(load) - min(load) > rp.aibrix_pd_prefill_abs:   # loadImbalanceSelectPrefillPod
        return _random_tie_break({i for i in range(n) if load[i] == min(load)}, u, n)
    bound = aibrix_pd_bound(rp, load)
    score = aibrix_pd_prefill_score(r, n_blocks)
    return min((i for i in range(n) if load[i] <= bound), key=lambda i: score[i])


def preble_cost(rp, r) -> list:
    """Preble cost_i = windowed prefill s + [n_i · decode length · TPOT, 0 if P/D], s (lower wins)."""
    return [r.recent_prefill_s[i] + (0.0 if rp.pd else r.inflight[i] * rp.preble_decode_len * rp.preble_tpot)
            for i in range(len(r.inflight))]


def preble_exploits(r, L, bt) -> bool:
    """Preble exploits (the deepest-match group) iff something matches and the cached part exceeds the new."""
    k = max(r.matched_blocks)
    cached = _hit(k, bt, L)
    return k > 0 and L - cached < cached


def _preble(rp, r, L, bt):
    """Preble E2: exploit (the deepest-match instances) if more is cached than new, else explore; argmin cost."""
    n = len(r.matched_blocks)
    k = max(r.matched_blocks)
    group = [i for i in range(n) if r.matched_blocks[i] == k] if preble_exploits(r, L, bt) else list(range(n))
    cost = preble_cost(rp, r)
    return min(group, key=lambda i: cost[i])


def _as_lists(ri):
    """The inputs as Python lists of Python numbers (ri may hold lists or numpy arrays)."""
    return type(ri)(*([x.item() if hasattr(x, "item") else x for x in field] for field in ri))


def rule_scores(rp, ri, L, n_blocks, bt, kv_cap) -> dict:
    """The per-instance numbers the router ``rp.code`` compares, by the functions its rule uses:
    name → list (one entry per instance). Dynamo: ``cost_blocks`` (lower wins); SGLang: ``match_rate``,
    ``inflight`` and ``deepest_entered`` (s; among the deepest matches the least wins); llm-d: ``score`` (higher wins); production-stack: ``matched_blocks`` (prefix, kv)
    and ``recent_requests`` (kv); AIBrix: ``matched_blocks``, ``inflight`` and ``bound`` (mean + k_σ·σ);
    Preble: ``matched_blocks`` and ``cost_s`` (lower wins)."""
    rp, ri, L, n_blocks, bt, _, _, kv_cap = router_args(rp, ri, L, n_blocks, bt, 0.0, 0, kv_cap, "rule_scores")
    r = _as_lists(ri)
    n = len(r.inflight)
    if rp.code == 5:
        return {"cost_blocks": dynamo_cost(rp, r, L, bt)}
    if rp.code == 6:
        return {"match_rate": match_rate(r, L, bt), "inflight": list(r.inflight),
                "deepest_entered": list(r.deepest_entered)}
    if rp.code == 7:
        return {"score": llmd_score(rp, r, n_blocks, kv_cap)}
    if rp.code == 8:
        return {}
    if rp.code == 9:
        return {"matched_blocks": list(r.matched_blocks)}
    if rp.code == 10:
        return {"matched_blocks": list(r.matched_blocks), "recent_requests": list(r.recent_requests)}
    if rp.code == 11 and rp.pd:
        return {"match_pct": aibrix_match_pct(r, n_blocks), "inflight": list(r.inflight),
                "bound": [aibrix_pd_bound(rp, r.inflight)] * n, "score": aibrix_pd_prefill_score(r, n_blocks)}
    if rp.code == 11:
        return {"matched_blocks": list(r.matched_blocks), "inflight": list(r.inflight),
                "bound": [aibrix_bound(rp, r.inflight)] * n}
    if rp.code == 12:
        return {"matched_blocks": list(r.matched_blocks), "cost_s": preble_cost(rp, r)}
    raise NotImplementedError(f"router code {rp.code}")


def route_reference(rp, ri, L, n_blocks, bt, u, rr, kv_cap) -> int:
    """The instance the router ``rp.code`` sends the request to (see :mod:`.routers`); arguments checked as
    :func:`~.routers.route`'s (:func:`~.routers.router_args`)."""
    rp, ri, L, n_blocks, bt, u, rr, kv_cap = router_args(rp, ri, L, n_blocks, bt, u, rr, kv_cap, "route_reference")
    r = _as_lists(ri)
    if rp.code == 5:
        return _dynamo(rp, r, L, bt, u)
    if rp.code == 6:
        return _sglang(rp, r, L, bt)
    if rp.code == 7:
        return _llmd(rp, r, n_blocks, u, kv_cap)
    if rp.code == 8:  # production-stack roundrobin: sorted(urls)[idx++ % n]
        return rr % len(r.inflight)
    if rp.code == 9:
        return _prodstack_prefix(r, u)
    if rp.code == 10:
        return _prodstack_kv(rp, r, L, bt)
    if rp.code == 11:
        return _aibrix_pd(rp, r, n_blocks, u) if rp.pd else _aibrix(rp, r, u)
    if rp.code == 12:
        return _preble(rp, r, L, bt)
    raise NotImplementedError(f"router code {rp.code}")


# ------------------------------------------------------------------ the decode node
def decode_tie_start(u: float, n_prefill: int, n_decode: int) -> int:
    """floor(u2 · D), u2 = u · N − floor(u · N): the draw's leftover after the prefill start."""
    x = u * n_prefill
    return min(math.floor((x - math.floor(x)) * n_decode), n_decode - 1)


def aibrix_free_pct(kv_used: float, kv_cap: float) -> float:
    """AIBrix's free GPU %: Go's math.Round(100 − 100 · used / capacity) (half away from zero); ≤ 0 → 0.1."""
    v = 100.0 - kv_used / kv_cap * 100.0
    r = math.copysign(math.floor(abs(v) + 0.5), v)
    return r if r > 0.0 else 0.1


def aibrix_decode_score(di, kv_cap) -> list:
    """AIBrix's decode score (r/max r + (1 − thr/max thr)) / (free/max free), maxima from 1 (lower wins)."""
    free = [aibrix_free_pct(k, kv_cap) for k in di.kv_used]
    r_max, t_max, f_max = max(1.0, *map(float, di.running)), max(1.0, *di.rate), max(1.0, *free)
    return [(r / r_max + (1.0 - t / t_max)) / (f / f_max) for r, t, f in zip(di.running, di.rate, free)]


def _aibrix_decode(di, kv_cap, max_req, max_thr) -> int:
    """AIBrix's decode pod: min r = 0 or spread ≥ max_req → the first least-running; throughput spread
    > max_thr → the first slowest; else the first lowest score."""
    D = len(di.running)
    r, t = [float(x) for x in di.running], list(di.rate)
    if min(r) == 0.0 or max(1.0, *r) - min(r) >= max_req:
        return _lowest_argmin(r)
    if max(1.0, *t) - min(t) > max_thr:
        return _lowest_argmin(t)
    score = aibrix_decode_score(di, kv_cap)
    return min(range(D), key=lambda d: score[d])


def route_decode_reference(choice, di, u, n_prefill, k, kv_cap, max_req, max_thr) -> int:
    """The decode node (:func:`~.routers.route_decode`, same arguments, checked the same way: ``di`` a
    DecodeInputs of lists or arrays)."""
    choice, di, u, n_prefill, k, kv_cap, max_req, max_thr = decode_args(choice, di, u, n_prefill, k, kv_cap, max_req,
                                                                        max_thr, "route_decode_reference")
    di = _as_lists(di)
    D = len(di.running)
    if choice == 1:   # the fewest running + queued + bound in flight
        return _lowest_argmin([a + b + c for a, b, c in zip(di.running, di.queued, di.bound)])
    if choice == 2:   # round robin
        return int(k) % D
    if choice == 3:   # llm-d: the fewest waiting, random ties from the draw's leftover
        s = decode_tie_start(float(u), int(n_prefill), D)
        q = min(di.queued)
        return next(d for d in list(range(s, D)) + list(range(s)) if di.queued[d] == q)
    if choice == 4:
        return _aibrix_decode(di, float(kv_cap), float(max_req), float(max_thr))
    raise NotImplementedError(f"decode choice {choice}")
