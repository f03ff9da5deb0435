"""Lecture 03 (cache part): hit ratio vs capacity, local caches vs a global pool, hot blocks.

Every function takes a :class:`~mooncake_lab.traces.Trace` or a trace name for
:func:`~mooncake_lab.traces.load_trace_or_synthetic` and returns a tidy DataFrame. Capacities are in 512-token
blocks; hit ratios are fractions 0..1 (token-weighted unless said otherwise).
"""
from __future__ import annotations

from .. import paper

import functools
import math

import numpy as np
import pandas as pd

from .. import prefix_cache as pc
from ..reproduce import Metric, figure_group, metric_group
from ..traces import Trace, as_trace

__all__ = ["hit_ratio_vs_capacity", "paper_table1_points", "local_vs_global", "block_popularity_table",
           "popularity_summary", "replica_distribution", "DEFAULT_CAPACITIES", "REFERENCE_HIT",
           "LOCAL_CAPACITY_BLOCKS", "N_LOCAL_INSTANCES", "ROUTINGS", "DRAM_BYTES_PER_TB", "KV_MODEL",
           "kv_block_bytes", "blocks_to_dram_bytes", "dram_bytes_to_blocks", "HitCurve", "hit_curve",
           "route", "pool_breakdown", "trace_banner", "local_vs_global_sweep", "curve_capacities",
           "EVICTION_POLICIES", "POLICY_LABELS", "eviction_curve", "PAPER_TABLE1_POLICIES", "TABLE1_CAPACITIES",
           "POLICY_CAPACITIES", "arxiv_trace", "policy_curves", "table1_comparison", "table1_side_by_side",
           "policy_facts", "popularity_view", "capacity_table", "pool_table", "table1_view", "paper_comparison"]

#: Capacities (blocks) of the default curve: the reference table's four plus the paper's 50k and a few more.
DEFAULT_CAPACITIES = (1_000, 3_000, 10_000, 30_000, 50_000, 100_000, 300_000, math.inf)

_REF_SOURCE = "measured once on the released trace (l03_cache.REFERENCE_HIT): a regression check, not a paper value"
#: Token-weighted global-LRU hit ratio measured once on the released traces (trace_data.PINNED_COMMIT)
#: with prefix_cache; keys are capacities in blocks, math.inf = infinite cache.
REFERENCE_HIT = {
    "conversation": {math.inf: 0.374, 1_000: 0.045, 10_000: 0.216, 30_000: 0.332, 100_000: 0.371},
    "synthetic": {math.inf: 0.651, 1_000: 0.086, 10_000: 0.432, 30_000: 0.636, 100_000: 0.651},
}
#: arXiv v3 Table 1 (arXiv trace, arxiv-trace/mooncake_trace.jsonl, which we do not ship): LRU hit
#: ratio at ∞ / 100k / 50k / 30k / 10k / 1k blocks.
PAPER_TABLE1 = {(math.inf if k == float('inf') else k): v for k, v in paper.ARXIV_TABLE1_HIT.items()}

#: Eviction policies of the caches (one place: :data:`mooncake_lab.prefix_cache.EVICTION_POLICIES`) and
#: the names arXiv v3 Table 1 gives them.
EVICTION_POLICIES = pc.EVICTION_POLICIES
POLICY_LABELS = {"lru": "LRU", "lfu": "LFU", "length_aware": "LengthAware"}
#: arXiv v3 Table 1 per policy: capacity (blocks, math.inf = ∞) → hit rate (paper.ARXIV_TABLE1).
PAPER_TABLE1_POLICIES = {pol: {(math.inf if k == float("inf") else k): v for k, v in row.items()}
                         for pol, row in paper.ARXIV_TABLE1.items()}
#: Table 1's capacities (blocks), in its column order.
TABLE1_CAPACITIES = tuple(PAPER_TABLE1_POLICIES["lru"])
#: Capacities (blocks) of the policy curves: 13 log-spaced from 1,000 to 300,000, Table 1's, and ∞.
#: LFU and LengthAware replay the trace once per finite capacity (benchmarks/bench_prefix_cache.py).
POLICY_CAPACITIES = tuple(sorted({float(round(c, -2)) for c in np.geomspace(1_000, 300_000, 13)}
                                 | {float(c) for c in TABLE1_CAPACITIES if math.isfinite(c)})) + (math.inf,)

#: The "10 instances of 1 TB each vs one pool of 10 TB" comparison of cache.*.global_vs_local_ratio.
N_LOCAL_INSTANCES = 10
#: FAST'25 Fig. 10: global pool / local caches hit ratio on the conversation trace.
PAPER_GLOBAL_VS_LOCAL = paper.FAST25_FIG10_GLOBAL_OVER_LOCAL


# The real trace if available, else its calibrated synthetic stand-in (named "synthetic:<preset>");
# parsed once per process and shared with notebooks, dashboards and the other l03 module.
_trace = as_trace


# ----------------------------------------------------------------------------------------------
# cache size in DRAM: blocks ↔ bytes (one place for the formula)
# ----------------------------------------------------------------------------------------------
#: 1 TB of DRAM in bytes (decimal tera, as in FAST'25 §2.2 "1 TB of DRAM holds ≈ 3M tokens").
DRAM_BYTES_PER_TB = 1e12
#: Model whose KV fills the cache: the paper's dummy LLaMA2-70B (320 KiB of KV per token, FAST'25 §2.2).
KV_MODEL = "llama2-70b"


def kv_block_bytes(model=KV_MODEL, block_tokens: int = 512) -> float:
    """Bytes of KV in one ``block_tokens``-token block (LLaMA2-70B: 512 × 327,680 B = 160 MiB)."""
    from ..models import get_model

    pc._check_positive_int(block_tokens, "block_tokens")
    return float(block_tokens * get_model(model).kv_bytes_per_token())


def blocks_to_dram_bytes(blocks, model=KV_MODEL, block_tokens: int = 512) -> float:
    """DRAM bytes needed to hold ``blocks`` KV blocks (``math.inf`` stays inf)."""
    b = pc._check_capacity(blocks, "blocks", allow_inf=True)
    return float(b) * kv_block_bytes(model, block_tokens)


def dram_bytes_to_blocks(dram_bytes, model=KV_MODEL, block_tokens: int = 512) -> int:
    """Whole KV blocks that fit in ``dram_bytes`` bytes (1 TB of LLaMA2-70B KV → 5,960 blocks)."""
    if isinstance(dram_bytes, bool) or not isinstance(dram_bytes, (int, float)) or not (
            math.isfinite(dram_bytes) and dram_bytes >= 0):
        raise ValueError(f"dram_bytes must be a finite number of bytes >= 0, got {dram_bytes!r}")
    return int(dram_bytes // kv_block_bytes(model, block_tokens))


#: One node's cache: 1 TB of DRAM (FAST'25 §2.2, "≈ 3M tokens") = 10¹² // (512 × 327,680 B) = 5,960 blocks
#: of LLaMA2-70B KV (3.05M tokens). The lecture uses this one definition of "1 TB" throughout.
LOCAL_CAPACITY_BLOCKS = dram_bytes_to_blocks(DRAM_BYTES_PER_TB)


# ----------------------------------------------------------------------------------------------
# the whole LRU curve of a trace, computed once and cached (what dashboards query per slider move)
# ----------------------------------------------------------------------------------------------
class HitCurve:
    """Global-LRU hit ratio at any capacity from one stack-distance pass (see :func:`hit_curve`).

    Holds the per-access stack distances sorted once with cumulative token and block weights, so
    :meth:`hit_ratio` is a ``searchsorted`` (microseconds) and :meth:`n_hit_blocks` a ``reduceat``.
    Same numbers as :func:`mooncake_lab.prefix_cache.hit_ratio_curve`.
    """

    def __init__(self, trace: Trace):
        self.trace = trace
        self.distances = pc.stack_distances(trace)
        order = np.argsort(self.distances, kind="stable")
        self._sorted = self.distances[order]
        self._cum = {w: np.concatenate([[0], np.cumsum(pc._access_weights(trace, w)[order])])
                     for w in ("token", "block")}
        self._total = {"token": int(trace.input_len.sum()), "block": len(self.distances)}

    def hit_ratio(self, capacities, weight: str = "token") -> np.ndarray:
        """Hit ratio (0..1) at each capacity in blocks (``math.inf`` allowed)."""
        weight = pc._check_weight(weight)
        caps = [pc._check_capacity(c, "capacities", allow_inf=True) for c in np.atleast_1d(capacities).tolist()]
        keys = [pc.NEVER if c == math.inf else c for c in caps]
        n_below = np.searchsorted(self._sorted, np.array(keys, dtype=np.int64), side="left")
        total = self._total[weight]
        return self._cum[weight][n_below] / total if total else np.zeros(len(caps))

    def n_hit_blocks(self, capacity) -> np.ndarray:
        """Leading hit blocks per request in one global LRU pool of ``capacity`` blocks (int64)."""
        c = pc._check_capacity(capacity, allow_inf=True)
        hit = (self.distances < (pc.NEVER if c == math.inf else c)).astype(np.int64)
        return np.add.reduceat(np.append(hit, 0), self.trace.block_offsets[:-1]) * (
            self.trace.blocks_per_request > 0)


@functools.lru_cache(maxsize=8)
def _hit_curve(trace: Trace) -> HitCurve:
    return HitCurve(trace)


def hit_curve(trace="conversation") -> HitCurve:
    """The cached :class:`HitCurve` of a trace (or trace name): one stack-distance pass per trace."""
    return _hit_curve(_trace(trace))


# ----------------------------------------------------------------------------------------------
# routing requests to local caches
# ----------------------------------------------------------------------------------------------
#: Routings of requests to local caches: the two of :data:`prefix_cache.ROUTINGS` plus ``"session"``.
ROUTINGS = pc.ROUTINGS + ("session",)
#: Block position whose id keys ``"session"`` routing: the 2nd block, the first one after the shared
#: 512-token system prompt that every conversation request starts with (block 0).
SESSION_KEY_BLOCK = 1


def route(trace, n_instances: int, routing: str = "random", seed: int = 0,
          key_block: int = SESSION_KEY_BLOCK) -> np.ndarray:
    """Instance (int64) per request: ``"random"``, ``"round_robin"`` or sticky ``"session"`` routing.

    ``"session"`` hashes the id of block ``key_block`` of the prompt (or its last block if shorter):
    requests sharing their first ``key_block + 1`` blocks — the turns of one chat, readers of one
    document — land on the same instance. It knows nothing of cache contents or load.
    ``key_block=0`` hashes the shared system prompt, sending every conversation request to one instance.
    """
    t = _trace(trace)
    if routing not in ROUTINGS:
        raise ValueError(f"routing must be one of {ROUTINGS}, got {routing!r}")
    n_instances = pc._check_positive_int(n_instances, "n_instances")
    if routing != "session":
        return pc.route_requests(len(t), n_instances, routing, seed)
    if isinstance(key_block, bool) or not isinstance(key_block, int) or key_block < 0:
        raise ValueError(f"key_block must be an integer >= 0, got {key_block!r}")
    nb = t.blocks_per_request
    if len(t) and nb.min() < 1:
        raise ValueError("session routing needs every request to have at least one block")
    keys = t.block_ids[t.block_offsets[:-1] + np.minimum(key_block, nb - 1)]
    salt = np.random.default_rng(seed).integers(0, n_instances, size=max(t.n_blocks, 1))
    return salt[keys].astype(np.int64)


def pool_breakdown(trace="conversation", total_capacity_blocks: int = N_LOCAL_INSTANCES * LOCAL_CAPACITY_BLOCKS,
                   n_instances: int = N_LOCAL_INSTANCES, layout: str = "local", routing: str = "random",
                   seed: int = 0) -> pd.DataFrame:
    """Per-instance hit ratio and load for one pool layout of a fixed total DRAM.

    ``layout="global"``: one LRU pool of ``total_capacity_blocks`` (one row; from the cached
    stack-distance curve). ``"local"``: ``n_instances`` LRU caches of ``total // n_instances`` blocks
    each, requests routed by ``routing``. Columns: instance, capacity_blocks, requests, input_tokens,
    hit_tokens, hit_ratio (token-weighted), load_share (share of input tokens).
    """
    t = _trace(trace)
    total = pc._check_capacity(total_capacity_blocks, "total_capacity_blocks")
    if layout not in ("global", "local"):
        raise ValueError(f"layout must be 'global' or 'local', got {layout!r}")
    if layout == "global":
        n, per, assign = 1, total, np.zeros(len(t), dtype=np.int64)
        n_hit = hit_curve(t).n_hit_blocks(total)
    else:
        n = pc._check_positive_int(n_instances, "n_instances")
        per = total // n
        assign = route(t, n, routing, seed)
        n_hit = pc.simulate_lru(t, per, n, assignment=assign).n_hit_blocks
    hit_tok = pc.prefix_hit_tokens(n_hit, t.input_len, t.block_tokens)
    req = np.bincount(assign, minlength=n)
    tok = np.bincount(assign, weights=t.input_len, minlength=n)
    hit = np.bincount(assign, weights=hit_tok, minlength=n)
    return pd.DataFrame({"instance": np.arange(n), "capacity_blocks": per, "requests": req,
                         "input_tokens": tok, "hit_tokens": hit,
                         "hit_ratio": np.divide(hit, tok, out=np.zeros(n), where=tok > 0),
                         "load_share": tok / tok.sum() if tok.sum() else np.zeros(n)})


def trace_banner(trace) -> str:
    """One markdown line saying which trace a notebook is using: the real one, or a synthetic stand-in."""
    t = _trace(trace)
    if t.name.startswith("synthetic:"):
        return (f"⚠️ **Using the SYNTHETIC stand-in `{t.name}`** ({len(t):,} requests) — the real trace was not "
                f"available: {t.source}. Numbers will differ from the paper's; run "
                f"`python -m mooncake_lab doctor` to see how to get the real file.")
    return f"✅ **Using the real Mooncake `{t.name}` trace** ({len(t):,} requests) from `{t.source}`."


def _label(trace: Trace) -> str:
    return trace.name


def hit_ratio_vs_capacity(trace="conversation", capacities=DEFAULT_CAPACITIES) -> pd.DataFrame:
    """Global-LRU hit ratio at each capacity (one stack-distance pass), token- and block-weighted.

    Columns: trace, capacity_blocks (inf = infinite), capacity_tokens, hit_ratio (token-weighted),
    block_hit_ratio, reference_hit_ratio (the measured table where it has this capacity, else NaN).
    """
    t = _trace(trace)
    caps = [float(c) for c in np.atleast_1d(capacities)]
    curve = hit_curve(t)
    tok, blk = curve.hit_ratio(caps, "token"), curve.hit_ratio(caps, "block")
    ref = REFERENCE_HIT.get(t.name, {})
    return pd.DataFrame({
        "trace": _label(t),
        "capacity_blocks": caps,
        "capacity_tokens": [c * t.block_tokens for c in caps],
        "hit_ratio": tok,
        "block_hit_ratio": blk,
        "reference_hit_ratio": [ref.get(c, np.nan) for c in caps],
    })


def curve_capacities(lo: float = 100, hi: float = 1_000_000, n: int = 80) -> list:
    """A log-spaced grid of capacities (blocks) for drawing curves, plus the reference ones and inf."""
    grid = np.round(np.geomspace(lo, hi, n)).tolist() + [c for c in DEFAULT_CAPACITIES if math.isfinite(c)]
    return sorted(set(float(c) for c in grid)) + [math.inf]


def paper_table1_points(policy: str = "lru") -> pd.DataFrame:
    """arXiv v3 Table 1's row of eviction ``policy`` (hit ratio vs capacity on the arXiv trace), for
    overlay on a curve."""
    row = PAPER_TABLE1_POLICIES[pc.check_policy(policy, "paper_table1_points")]
    return pd.DataFrame({"capacity_blocks": list(row), "hit_ratio": list(row.values()),
                         "source": "arXiv 2407.00079 v3 Table 1 (arXiv trace)"})


@functools.lru_cache(maxsize=32)
def _policy_curve(trace: Trace, policy: str, capacities: tuple) -> tuple:
    """(token, block) hit ratios of one global ``policy`` cache at each capacity (cached per trace)."""
    if policy == "lru":
        curve = hit_curve(trace)
        return curve.hit_ratio(list(capacities), "token"), curve.hit_ratio(list(capacities), "block")
    # a cache of ≥ n_blocks blocks never evicts: every such capacity (and ∞) is one replay
    runs = {}
    for c in capacities:
        c = min(c, trace.n_blocks)
        if c not in runs:
            n_hit = pc.simulate_cache(trace, c, policy).n_hit_blocks
            runs[c] = (pc.hit_ratio(trace, n_hit, "token"), pc.hit_ratio(trace, n_hit, "block"))
    tok, blk = zip(*(runs[min(c, trace.n_blocks)] for c in capacities))
    return np.array(tok), np.array(blk)


def policy_curves(trace="conversation", capacities=POLICY_CAPACITIES, policies=EVICTION_POLICIES) -> pd.DataFrame:
    """Hit ratio of one global cache per eviction policy and capacity (blocks; ``math.inf`` = ∞).

    LRU from the cached stack-distance curve; LFU and LengthAware by one replay per capacity
    (results cached per trace). Columns: trace, policy, capacity_blocks, hit_ratio (token-weighted),
    block_hit_ratio.
    """
    t = _trace(trace)
    caps = tuple(float(pc._check_capacity(c, "capacities", allow_inf=True)) for c in np.atleast_1d(capacities).tolist())
    pols = [pc.check_policy(p, "policy_curves") for p in np.atleast_1d(policies).tolist()]
    frames = []
    for pol in pols:
        tok, blk = _policy_curve(t, pol, caps)
        frames.append(pd.DataFrame({"trace": _label(t), "policy": pol, "capacity_blocks": caps,
                                    "hit_ratio": tok, "block_hit_ratio": blk}))
    return pd.concat(frames, ignore_index=True)


def eviction_curve(trace="conversation", policy: str = "lru", capacities=DEFAULT_CAPACITIES) -> pd.DataFrame:
    """:func:`hit_ratio_vs_capacity`'s frame for one global cache evicting by ``policy`` (one of
    :data:`EVICTION_POLICIES`): LRU is that function; LFU and LengthAware replay the trace once per
    capacity below the trace's block count (≈ 20–90 ms each; :func:`policy_curves`), and their
    ``reference_hit_ratio`` is NaN (the reference table measured LRU)."""
    policy = pc.check_policy(policy, "eviction_curve")
    if policy == "lru":
        return hit_ratio_vs_capacity(trace, capacities)
    t = _trace(trace)
    df = policy_curves(t, capacities, [policy]).drop(columns="policy")
    df.insert(2, "capacity_tokens", df["capacity_blocks"] * t.block_tokens)
    df["reference_hit_ratio"] = np.nan
    return df


def arxiv_trace() -> Trace:
    """The arXiv experiments' trace (Table 1's) if a local copy is found, else its synthetic stand-in,
    the ``toolagent-like`` preset (named so). Never downloads: the file is over 4 MiB."""
    from .. import trace_data

    return _trace("arxiv" if trace_data.find_local("arxiv") is not None else "toolagent-like")


def table1_comparison(trace=None) -> pd.DataFrame:
    """arXiv v3 Table 1 beside ours: one row per policy and Table 1 capacity (blocks).

    Columns: trace, policy, capacity_blocks, paper (the paper's hit rate), ours (token-weighted),
    ours_block (block-weighted), diff (ours − paper). The paper measured the arXiv trace; ``None`` =
    :func:`arxiv_trace` (its synthetic stand-in unless a copy is found: ``trace`` says which; only the
    shapes are comparable then).
    """
    t = arxiv_trace() if trace is None else _trace(trace)
    df = policy_curves(t, TABLE1_CAPACITIES)
    df["paper"] = [PAPER_TABLE1_POLICIES[p][c] for p, c in zip(df["policy"], df["capacity_blocks"])]
    df = df.rename(columns={"hit_ratio": "ours", "block_hit_ratio": "ours_block"})
    df["diff"] = df["ours"] - df["paper"]
    return df[["trace", "policy", "capacity_blocks", "paper", "ours", "ours_block", "diff"]]


def table1_side_by_side(*comparisons) -> pd.DataFrame:
    """arXiv v3 Table 1 and ours in one small table: rows (policy, source), columns Table 1's capacities.

    ``comparisons``: :func:`table1_comparison` frames (e.g. the arXiv trace's and the lecture's); the
    paper's row is taken from the first. Values: hit ratio (fraction; ours token-weighted).
    """
    if not comparisons:
        raise ValueError("table1_side_by_side needs at least one table1_comparison frame")
    rows = {}
    for pol in EVICTION_POLICIES:
        first = comparisons[0][comparisons[0]["policy"] == pol]
        rows[(POLICY_LABELS[pol], "paper (arXiv trace)")] = first["paper"].to_numpy()
        for df in comparisons:
            d = df[df["policy"] == pol]
            rows[(POLICY_LABELS[pol], f"ours ({trace_label(d['trace'].iloc[0])})")] = d["ours"].to_numpy()
    cols = ["∞" if c == math.inf else f"{c:,.0f}" for c in TABLE1_CAPACITIES]
    out = pd.DataFrame.from_dict(rows, orient="index", columns=cols)
    out.index = pd.MultiIndex.from_tuples(out.index, names=["policy", "hit ratio"])
    out.columns.name = "capacity (blocks)"
    return out


def policy_facts(trace="conversation") -> dict:
    """The policy numbers lecture 03's prose reads (token-weighted %, at Table 1's capacities):
    ``{policy: {capacity: %}}`` plus ``"best"``: the policy with the highest hit ratio per capacity."""
    df = policy_curves(trace, TABLE1_CAPACITIES)
    out = {p: {c: 100.0 * h for c, h in zip(g["capacity_blocks"], g["hit_ratio"])} for p, g in df.groupby("policy")}
    out["best"] = {c: str(g.loc[g["hit_ratio"].idxmax(), "policy"]) for c, g in df.groupby("capacity_blocks")}
    return out


def local_vs_global(trace="conversation", n_instances: int = N_LOCAL_INSTANCES,
                    total_capacity_blocks: int = N_LOCAL_INSTANCES * LOCAL_CAPACITY_BLOCKS,
                    routings=("random", "round_robin"), seed: int = 0) -> pd.DataFrame:
    """One global LRU pool vs ``n_instances`` local LRU caches sharing the same total capacity.

    Each local cache holds ``total_capacity_blocks // n_instances`` blocks; requests reach them by each
    routing in ``routings`` (see :func:`route`). Columns: layout, routing, n_instances, capacity_per_instance_blocks,
    hit_ratio, block_hit_ratio, global_over_this (global pool's token hit ratio / this row's).
    """
    t = _trace(trace)
    n_instances = pc._check_positive_int(n_instances, "n_instances")
    total = pc._check_capacity(total_capacity_blocks, "total_capacity_blocks")
    per = total // n_instances
    rows = []
    g = pc.simulate_lru(t, total, 1)
    rows.append(("global pool", "—", 1, total, g.n_hit_blocks))
    for r in routings:
        res = pc.simulate_lru(t, per, n_instances, assignment=route(t, n_instances, r, seed))
        rows.append((f"{n_instances} local caches", r, n_instances, per, res.n_hit_blocks))
    out = pd.DataFrame([{"layout": lay, "routing": r, "n_instances": n, "capacity_per_instance_blocks": c,
                         "hit_ratio": pc.hit_ratio(t, h, "token"), "block_hit_ratio": pc.hit_ratio(t, h, "block")}
                        for lay, r, n, c, h in rows])
    out["global_over_this"] = out["hit_ratio"].iloc[0] / out["hit_ratio"]
    out.insert(0, "trace", _label(t))
    return out


def local_vs_global_sweep(trace="conversation", n_instances=(2, 4, 8, 10, 16, 32),
                          total_capacity_blocks: int = N_LOCAL_INSTANCES * LOCAL_CAPACITY_BLOCKS,
                          routings=ROUTINGS, seed: int = 0) -> pd.DataFrame:
    """:func:`local_vs_global` for each number of instances (same total capacity), concatenated."""
    t = _trace(trace)
    return pd.concat([local_vs_global(t, n, total_capacity_blocks, routings, seed) for n in n_instances],
                     ignore_index=True)


def block_popularity_table(trace="conversation") -> pd.DataFrame:
    """Rank-frequency of blocks: rank (1 = most requested), block_id, requests (requests using it)."""
    t = _trace(trace)
    pop = pc.block_popularity(t)
    order = np.argsort(-pop, kind="stable")
    return pd.DataFrame({"rank": np.arange(1, len(pop) + 1), "block_id": order, "requests": pop[order]})


def popularity_summary(trace="conversation") -> pd.DataFrame:
    """One row: unique blocks, share used by a single request, most requests on one block, infinite-cache hit."""
    t = _trace(trace)
    pop = pc.block_popularity(t)
    return pd.DataFrame([{"trace": _label(t), "unique_blocks": len(pop),
                          "share_used_once": float((pop == 1).mean()) if len(pop) else 0.0,
                          "max_requests_per_block": int(pop.max()) if len(pop) else 0,
                          "infinite_cache_hit_ratio": pc.infinite_cache_hit_ratio(t)}])


def replica_distribution(trace="conversation", n_instances: int = N_LOCAL_INSTANCES,
                         capacity_blocks: int = LOCAL_CAPACITY_BLOCKS, routing: str = "random",
                         seed: int = 0) -> pd.DataFrame:
    """After replaying the trace through local caches: how many blocks are held by 1, 2, … instances.

    Columns: replicas (1..n_instances), blocks (held by exactly that many instances at the end),
    share (of the distinct blocks held anywhere).
    """
    t = _trace(trace)
    res = pc.simulate_lru(t, capacity_blocks, n_instances, routing=routing, seed=seed)
    rc = pc.replica_counts(res.state)
    counts = np.bincount(rc, minlength=n_instances + 1)[1:]
    held = counts.sum()
    return pd.DataFrame({"replicas": np.arange(1, n_instances + 1), "blocks": counts,
                         "share": counts / held if held else np.zeros(n_instances)})


def _is_fallback(t: Trace, wanted: str) -> bool:
    return t.name != wanted


@metric_group("cache")
def cache_metrics() -> list[Metric]:
    """Headline cache numbers on the conversation trace (synthetic stand-in if it is unavailable)."""
    t = _trace("conversation")
    fallback = _is_fallback(t, "conversation")
    note = (f"; computed on the synthetic stand-in {t.name!r} (real conversation trace unavailable), "
            "so no paper value applies" if fallback else "")
    caps = (1_000, 10_000, 30_000, 100_000)
    curve = pc.hit_ratio_curve(t, caps)
    out = []
    for c, h in zip(caps, curve):
        paper = None if fallback else REFERENCE_HIT["conversation"][c]
        out.append(Metric(f"cache.conversation.lru_hit.b{c}", float(h), "fraction", paper,
                          "global LRU, token-weighted" + (note or "; paper column: " + _REF_SOURCE)))
    lvg = local_vs_global(t, routings=("random",))
    out.append(Metric("cache.conversation.global_vs_local_ratio", float(lvg["global_over_this"].iloc[1]), "×",
                      None if fallback else PAPER_GLOBAL_VS_LOCAL,
                      f"one LRU pool of {N_LOCAL_INSTANCES} TB ({N_LOCAL_INSTANCES * LOCAL_CAPACITY_BLOCKS} blocks) vs "
                      f"{N_LOCAL_INSTANCES} local LRU caches of 1 TB ({LOCAL_CAPACITY_BLOCKS} blocks), "
                      "requests routed uniformly at random (seed 0); paper: FAST'25 Fig. 10" + note))
    return out


@metric_group("cache_eviction")
def eviction_metrics() -> list[Metric]:
    """arXiv v3 Table 1: hit ratio per eviction policy and capacity, one global pool, on the arXiv
    trace (its synthetic stand-in if unavailable: then no paper value applies)."""
    t = arxiv_trace()
    fallback = _is_fallback(t, "arxiv")
    note = (f"; computed on the synthetic stand-in {t.name!r} (real arXiv trace unavailable), so no paper "
            "value applies" if fallback else "; paper column: " + paper.ARXIV_TABLE1_SOURCE)
    out = []
    for r in table1_comparison(t).itertuples():
        cap = "inf" if r.capacity_blocks == math.inf else f"b{int(r.capacity_blocks)}"
        out.append(Metric(f"cache_eviction.arxiv.{r.policy}_hit.{cap}", float(r.ours), "fraction",
                          None if fallback else float(r.paper),
                          f"one global {POLICY_LABELS[r.policy]} cache, token-weighted" + note))
    return out


@figure_group("cache")
def cache_figures() -> dict:
    """Headline figures of lecture 03's cache part: hit-ratio curve, global vs local sweep."""
    from ..plots import cache as plots

    t = _trace("conversation")
    curve = hit_ratio_vs_capacity(t, curve_capacities())
    paper = None if _is_fallback(t, "conversation") else paper_table1_points()
    arxiv = arxiv_trace()
    return {
        "l03_hit_ratio_vs_capacity": plots.hit_ratio_curve(curve, paper, block_bytes=kv_block_bytes()),
        "l03_eviction_policies": plots.policy_curves(
            pd.concat([policy_curves(t), policy_curves(arxiv)], ignore_index=True),
            table1_comparison(arxiv), paper_trace=arxiv.name, block_bytes=kv_block_bytes()),
        "l03_global_over_local": plots.global_over_local(local_vs_global_sweep(t), PAPER_GLOBAL_VS_LOCAL,
                                                         N_LOCAL_INSTANCES, trace_name=t.name),
    }


# ------------------------------------------------------------------------------- the lecture's facts
#: The small capacity the lecture reads the curve at ("a few hundred blocks").
FEW_HUNDRED_BLOCKS = 300


def trace_facts(trace="conversation") -> dict:
    """The numbers lecture 03's prose reads off a trace (computed, so a sentence can be checked on the
    released trace and printed for this run): lengths (tokens), timestamp buckets, block reuse (%),
    hit ratios (%) at a few hundred blocks, at 1 TB of DRAM and unbounded, and global ÷ local ratios."""
    t = _trace(trace)
    inp, out = np.asarray(t.input_len), np.asarray(t.output_len)
    arr = np.asarray(t.arrival_s)
    distinct = np.unique(arr)
    gaps = np.round(np.diff(distinct), 3)
    vals, counts = np.unique(gaps, return_counts=True) if len(gaps) else (np.array([np.nan]), np.array([0]))
    pop = popularity_summary(t).iloc[0]
    curve = hit_curve(t)
    tb = dram_bytes_to_blocks(1e12)
    lvg = local_vs_global(t, routings=ROUTINGS).set_index("routing")["global_over_this"]
    return {"median_input": float(np.median(inp)), "p99_input": float(np.percentile(inp, 99)),
            "mean_input": float(inp.mean()), "max_output": float(out.max()),
            "bucket_s": float(vals[np.argmax(counts)]), "per_timestamp": len(arr) / len(distinct),
            "first_block_0_pct": 100.0 * float(np.mean([t.blocks_of(i)[0] == 0 for i in range(len(t))])),
            "used_once_pct": 100.0 * float(pop["share_used_once"]),
            "hit_few_hundred_pct": 100.0 * float(curve.hit_ratio([FEW_HUNDRED_BLOCKS])[0]),
            "hit_1tb_pct": 100.0 * float(curve.hit_ratio([tb])[0]),
            "hit_inf_pct": 100.0 * float(curve.hit_ratio([math.inf])[0]),
            "blocks_to_ceiling": float(_blocks_to_ceiling(curve)),
            "random_over_local": float(lvg["random"]), "round_robin_over_local": float(lvg["round_robin"]),
            "session_over_local": float(lvg["session"])}


def _blocks_to_ceiling(curve: HitCurve, within: float = 0.01) -> float:
    """Smallest capacity (blocks, on a log grid) whose hit ratio is within ``within`` (absolute) of the
    infinite-cache one."""
    grid = np.unique(np.round(np.geomspace(100, 1e7, 201)))
    h = curve.hit_ratio(grid.tolist())
    top = curve.hit_ratio([math.inf])[0]
    return float(grid[np.argmax(h >= top - within)])


def _sig2(x: float) -> float:
    """``x`` rounded to two significant digits (53,088 → 53,000): a value read off a grid, not exact."""
    return float(round(x, 1 - int(math.floor(math.log10(abs(x)))))) if x else 0.0


def this_run_note(trace, part: str) -> str:
    """One line (markdown) with this run's numbers for a paragraph of lecture 03: ``part`` is
    ``"lengths"``, ``"curve"`` or ``"pool"``."""
    f = trace_facts(trace)
    name = _trace(trace).name
    if part == "lengths":
        body = (f"median prompt {f['median_input']:,.0f} tokens, p99 {f['p99_input']:,.0f}, mean "
                f"{f['mean_input']:,.0f}; longest answer {f['max_output']:,.0f} tokens")
    elif part == "curve":
        body = (f"{FEW_HUNDRED_BLOCKS} blocks → {f['hit_few_hundred_pct']:.1f}%, 1 TB ({dram_bytes_to_blocks(1e12):,} "
                f"blocks) → {f['hit_1tb_pct']:.1f}%, unbounded → {f['hit_inf_pct']:.1f}% (within 1 point of it "
                f"from ≈ {_sig2(f['blocks_to_ceiling']):,.0f} blocks)")
    elif part == "pool":
        body = (f"global ÷ local = ×{f['random_over_local']:.2f} random, ×{f['round_robin_over_local']:.2f} "
                f"round-robin, ×{f['session_over_local']:.2f} session")
    else:
        raise ValueError(f"part must be 'lengths', 'curve' or 'pool', got {part!r}")
    return f"*This run ({name}):* {body}."


# ------------------------------------------------------------------------------- tables for reading
def _pct(x) -> str:
    """A fraction as a percentage with one decimal ("37.4"), "—" for NaN."""
    return f"{100.0 * float(x):.1f}" if math.isfinite(float(x)) else "—"


def _cap(c) -> str:
    return "∞" if c == math.inf else f"{float(c):,.0f}"


def popularity_view(trace="conversation") -> pd.DataFrame:
    """:func:`popularity_summary` for reading: one row, labelled columns (shares in %)."""
    s = popularity_summary(trace).iloc[0]
    return pd.DataFrame({"distinct blocks": [f"{int(s['unique_blocks']):,}"],
                         "used by one request only (%)": [_pct(s["share_used_once"])],
                         "most requests on one block": [f"{int(s['max_requests_per_block']):,}"],
                         "infinite-cache hit ratio (%)": [_pct(s["infinite_cache_hit_ratio"])]},
                        index=pd.Index([s["trace"]], name="trace"))


def trace_label(name) -> str:
    """A trace's name for a table row or legend: ``synthetic:toolagent-like`` → "tool & agent preset"."""
    name = name.name if isinstance(name, Trace) else str(name)
    if name.startswith("synthetic:"):
        base = name.split(":", 1)[1].removesuffix("-like")
        return {"toolagent": "tool & agent", "arxiv": "arXiv trace"}.get(base, base) + " preset"
    return {"toolagent": "tool & agent", "arxiv": "arXiv trace"}.get(name, name)


def markdown_table(df: pd.DataFrame) -> str:
    """A small DataFrame as a markdown table (index as the first column)."""
    head = [str(df.index.name or "")] + [str(c) for c in df.columns]
    rows = [[str(i)] + [str(v) for v in r] for i, r in zip(df.index, df.to_numpy().tolist())]
    return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
                     + ["| " + " | ".join(r) + " |" for r in rows])


def details(summary: str, body: str) -> str:
    """A collapsible ``<details>`` box (markdown) with ``body`` inside, rendered by JupyterLab."""
    return f"<details><summary>{summary}</summary>\n\n{body}\n\n</details>"


def capacity_table(trace="conversation", capacities=DEFAULT_CAPACITIES, blocks: bool = False) -> pd.DataFrame:
    """:func:`hit_ratio_vs_capacity` for reading: per capacity (blocks), tokens, TB of LLaMA2-70B KV
    and the token-weighted hit ratio (%); ``blocks=True`` adds the block-weighted one."""
    df = hit_ratio_vs_capacity(trace, capacities)
    tb = [blocks_to_dram_bytes(c) / DRAM_BYTES_PER_TB for c in df["capacity_blocks"]]
    out = pd.DataFrame({"tokens (millions)": ["∞" if c == math.inf else f"{c / 1e6:,.1f}" for c in df["capacity_tokens"]],
                        "DRAM (TB)": ["∞" if x == math.inf else f"{x:,.2f}" for x in tb],
                        "hit ratio (%)": [_pct(h) for h in df["hit_ratio"]]},
                       index=pd.Index([_cap(c) for c in df["capacity_blocks"]], name="capacity (blocks)"))
    if blocks:
        out = out.rename(columns={"hit ratio (%)": "hit ratio, tokens (%)"})
        out["hit ratio, blocks (%)"] = [_pct(h) for h in df["block_hit_ratio"]]
    return out


_ROUTING_LABELS = {"random": "random", "round_robin": "round-robin", "session": "session (sticky)"}


def routing_label(routing: str) -> str:
    """A routing's name as the prose writes it ("round_robin" → "round-robin")."""
    return _ROUTING_LABELS.get(routing, routing)


def pool_table(lvg: pd.DataFrame, blocks: bool = False) -> pd.DataFrame:
    """:func:`local_vs_global` for reading: one row per layout and routing (``blocks=True`` adds the
    block-weighted hit ratio)."""
    labels = ["one global pool" if r == "—" else f"{lay}, {routing_label(r)} routing"
              for lay, r in zip(lvg["layout"], lvg["routing"])]
    out = pd.DataFrame({"blocks per cache": [f"{int(c):,}" for c in lvg["capacity_per_instance_blocks"]],
                        "hit ratio (%)": [_pct(h) for h in lvg["hit_ratio"]]},
                       index=pd.Index(labels, name="layout"))
    if blocks:
        out["hit ratio, blocks (%)"] = [_pct(h) for h in lvg["block_hit_ratio"]]
    out["global pool ÷ this (×)"] = [f"{g:.2f}" for g in lvg["global_over_this"]]
    return out


def table1_view(*comparisons) -> pd.DataFrame:
    """:func:`table1_side_by_side` in percent (whole numbers) for reading: capacities from small to ∞,
    rows "LRU, paper (arXiv trace)", "LRU, ours (conversation)", …"""
    wide = table1_side_by_side(*comparisons)
    out = wide.map(lambda v: f"{100.0 * v:.0f}")
    out = out[list(reversed(out.columns))] if out.columns[0] == "∞" else out
    out.index = pd.Index([f"{pol}, {src}" for pol, src in out.index], name="hit ratio (%) at capacity (blocks) →")
    out.columns.name = None
    return out


def table1_box(*comparisons) -> str:
    """:func:`table1_view` as a markdown table inside a collapsible box."""
    return details("arXiv v3 Table 1 beside ours, cell by cell (hit ratio, %)", markdown_table(table1_view(*comparisons)))


def popularity_box(trace="conversation") -> str:
    """:func:`popularity_view` as a markdown table inside a collapsible box."""
    v = popularity_view(trace)
    v.index = [trace_label(i) for i in v.index]
    v.index.name = "trace"
    return details("This run's block popularity, in numbers", markdown_table(v))


def paper_comparison(trace="conversation") -> str:
    """The lecture's "paper says / we get" table (markdown) for ``trace``, computed, with the reasons
    they differ in a collapsible box below it."""
    from ..models import get_model
    from ..traces import cached_trace
    from .l03_traces import PAPER_TABLE2 as t2

    t = _trace(trace)
    syn, tool = cached_trace("synthetic"), cached_trace("toolagent-like")
    ours = {n: pc.infinite_cache_hit_ratio(x) for n, x in (("conversation", t), ("synthetic", syn), ("toolagent", tool))}
    caps = [1_000, 10_000, 30_000, 100_000]
    lru = hit_curve(t).hit_ratio(caps)
    pol30 = policy_curves(t, [30_000])["hit_ratio"]
    lvg = local_vs_global(t, routings=ROUTINGS).set_index("routing")["global_over_this"]
    kv = get_model(KV_MODEL).kv_bytes_per_token()
    pct = lambda xs: " / ".join(f"{100 * x:.0f}%" for x in xs)  # noqa: E731
    name = trace_label(t)
    p_inf, o_inf = PAPER_TABLE1[math.inf], ours["conversation"]
    p_1k, o_1k = PAPER_TABLE1[1_000], float(lru[0])
    p_100k, o_100k = PAPER_TABLE1[100_000], float(lru[-1])
    rows = [
        ("FAST'25 Table 2: cache ratio, conversation", f"{t2['conversation']['cache_ratio']:.0%}",
         f"{ours['conversation']:.1%} ({name})"),
        ("FAST'25 Table 2: cache ratio, tool & agent", f"{t2['toolagent']['cache_ratio']:.0%}",
         f"{ours['toolagent']:.1%} ({trace_label(tool)})"),
        ("FAST'25 Table 2: cache ratio, synthetic", f"{t2['synthetic']['cache_ratio']:.0%}",
         f"{ours['synthetic']:.1%} ({trace_label(syn)})"),
        ("arXiv v3 Table 1: LRU at 1k / 10k / 30k / 100k blocks", pct(PAPER_TABLE1[c] for c in caps), f"{pct(lru)} ({name})"),
        ("arXiv v3 Table 1: LRU / LFU / LengthAware at 30k blocks",
         pct(PAPER_TABLE1_POLICIES[p][30_000] for p in EVICTION_POLICIES), f"{pct(pol30)} ({name})"),
        ("FAST'25 §2.2: 1 TB of DRAM holds", f"≈ {paper.TOKENS_PER_TB_M:g}M tokens", f"{DRAM_BYTES_PER_TB / kv / 1e6:.2f}M tokens"),
        ("FAST'25 Fig. 10: global ÷ local hit ratio", f"×{PAPER_GLOBAL_VS_LOCAL}",
         f"×{lvg['random']:.2f} random, ×{lvg['session']:.2f} session"),
    ]
    table = ("| | paper says | we get |\n|---|---|---|\n" + "\n".join(f"| {a} | {b} | {c} |" for a, b, c in rows))
    gap = max(p_inf - p_100k, o_inf - o_100k)
    flat = f"within {math.ceil(100 * gap - 1e-9):.0f} point{'s' if gap > 0.01 else ''}"
    why = [
        "**Cache ratio.** Ours is token-weighted and prefix-chained; the paper does not define its ratio "
        "exactly. The tool & agent trace is not shipped: our preset was fitted to the paper's number.",
        f"**LRU curve.** Table 1 was measured on another trace. The same: at 100k blocks both curves are "
        f"{flat} of their ceilings. Not the same: the level, and the "
        f"start. At 1k blocks the paper's LRU has {p_1k / p_inf:.0%} of its ceiling ({p_1k:.0%} of {p_inf:.0%}), "
        f"ours {o_1k / o_inf:.0%} ({o_1k:.1%} of {o_inf:.1%}).",
        "**Eviction policies.** The same order. Our LFU never ages its counts; the paper gives no details.",
        f"**1 TB.** 10¹² B / {kv:,.0f} B per token of LLaMA2-70B KV.",
        "**Global ÷ local.** Routing: the paper's local caches sat behind a cache-aware scheduler, between our "
        "two extremes.",
    ]
    return table + "\n\n" + details("Why they differ", "\n".join(f"* {w}" for w in why))
