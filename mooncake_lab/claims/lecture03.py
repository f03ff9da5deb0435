"""Claims of lecture 03: every number its markdown and exercise strings state (see :mod:`mooncake_lab.claims`).

Trace facts are stated for the released conversation trace (``trace="released"``); the notebook prints
this run's beside them (:func:`mooncake_lab.experiments.l03_cache.this_run_note`).
"""
from __future__ import annotations

import math
from functools import lru_cache

from . import claim, not_a_claim, restate
from .. import paper
from .lecture00 import at_least, at_most


def _c():
    from ..experiments import l03_cache
    return l03_cache


@lru_cache(maxsize=None)
def _facts(name: str = "conversation") -> dict:
    return _c().trace_facts(name)


def _f(key: str) -> float:
    return _facts()[key]


def _kv() -> float:
    from ..models import get_model
    return get_model("llama2-70b").kv_bytes_per_token()


def _bt() -> int:
    from ..traces import cached_trace
    return int(cached_trace("conversation").block_tokens)


def _summary():
    from ..experiments.l03_traces import trace_summary
    return trace_summary(["conversation", "synthetic", "toolagent-like"])


def _calibration_tol_pct() -> float:
    """10 when every calibrated statistic of the conversation stand-in is within 10% of its target."""
    from ..experiments.l03_traces import preset_calibration
    from .lecture00 import at_most
    df = preset_calibration()
    return at_most(10, 100.0 * float(df.loc[df["preset"] == "conversation-like", "rel_error"].abs().max()))


def _ratio_inf(name: str) -> float:
    from .. import prefix_cache as pc
    from ..traces import cached_trace
    return 100.0 * pc.infinite_cache_hit_ratio(cached_trace(name))


def _popular() -> list:
    """[blocks used by ≥ 10 requests besides block 0, 10, the most requests on one block besides block 0]."""
    import numpy as np
    from .. import prefix_cache as pc
    from ..traces import cached_trace
    pop = np.sort(pc.block_popularity(cached_trace("conversation")))[::-1]
    return [int((pop[1:] >= 10).sum()), 10, int(pop[1])]


def _f_hit(blocks) -> float:
    """Global-LRU token hit ratio (%) of the conversation trace at ``blocks``."""
    return 100.0 * float(_c().hit_curve("conversation").hit_ratio([blocks])[0])


def _flat_from_k() -> float:
    """Smallest Table 1 capacity (thousands of blocks) from which both the paper's LRU row and ours are
    within 1 point of their ceilings ("both curves are flat by 100k blocks")."""
    caps = [c for c in paper.ARXIV_TABLE1_HIT if c != float("inf")]
    top_p, top_o = paper.ARXIV_TABLE1_HIT[float("inf")], _f_hit(math.inf) / 100
    ok = [c for c in sorted(caps) if top_p - paper.ARXIV_TABLE1_HIT[c] <= 0.01 and top_o - _f_hit(int(c)) / 100 <= 0.01]
    return min(ok) / 1000 if ok else math.inf


def _ex_tb() -> float:
    """The DRAM of lecture 03's exercises ("1 TB"), in TB: their bytes over l03_cache.DRAM_BYTES_PER_TB."""
    from ..exercises.lecture03 import _TB as ex_bytes
    return ex_bytes / _c().DRAM_BYTES_PER_TB


_BLOCK0 = "block 0 names a block (the first of every chain: the system prompt), not a quantity"
_TURN = "turn numbers name the turns of a chat (turn k), not a quantity"
_T2 = paper.FAST25_TABLE2
_TB = 1e12
_N = 10           # instances of the pool comparison (l03_cache.N_LOCAL_INSTANCES)
R = "released"

claim("03.blocks_intro", "cut into 512-token blocks", _bt)

# ---- the assumptions table (introduction)
def _sim_block_tokens() -> int:
    """The block the simulator's caches use: ClusterConfig's cache size is DRAM over the bytes of one
    traces.BLOCK_TOKENS-token block (sim/config.py)."""
    from ..traces import BLOCK_TOKENS
    return int(BLOCK_TOKENS)


def _traces_block_tokens() -> int:
    from ..traces import BLOCK_TOKENS
    return int(BLOCK_TOKENS)


claim("03.as_block", "| block | 512 tokens | 512 tokens | 512 tokens |",
      lambda: [_traces_block_tokens(), _bt(), _sim_block_tokens()], source="FAST'25 §3 (the trace format)")
claim("03.as_kv", "| 320 KB for a LLaMA2-70B-sized model (FAST'25 §2.2) | 327,680 B = 320 KiB of LLaMA2-70B, so 160 MiB per block",
      lambda: [paper.KV_PER_TOKEN_KB, _kv(), _kv() / 1024, _bt() * _kv() / 2**20], source="FAST'25 §2.2")
claim("03.as_tb", "| ≈ 3M tokens (FAST'25 §2.2) | 10¹² B = 5,960 blocks = 3.05M tokens: one node's cache",
      lambda: [paper.TOKENS_PER_TB_M, _TB, _c().dram_bytes_to_blocks(_TB), _TB / _kv() / 1e6]
      if _c().LOCAL_CAPACITY_BLOCKS == _c().dram_bytes_to_blocks(_TB) else math.nan, source="FAST'25 §2.2")
claim("03.as_tb_label", '| "1 TB of DRAM" |', lambda: _TB / 1e12)
claim("03.as_pool", "one global pool of 10 TB, or 10 local caches of 1 TB each", lambda: [
    _c().N_LOCAL_INSTANCES * _c().LOCAL_CAPACITY_BLOCKS * _c().kv_block_bytes() / _TB, _c().N_LOCAL_INSTANCES,
    _c().LOCAL_CAPACITY_BLOCKS * _c().kv_block_bytes() / _TB], rel_tol=0.05)
claim("03.as_bucket", "rounded them into ~3 s buckets", lambda: _f("bucket_s"), trace="released")
not_a_claim("03.session_block0", "(block 0). The turns of one chat", "block 0 names a block (the system prompt), not a quantity")

claim("03.standin_tol", "cache ratio (within 10%)", _calibration_tol_pct)
claim("03.blocks_frame", "the number of 512-token blocks of the\nprompt", _bt)
claim("03.means", "means of 8–15k tokens, the longest\npast 100k", lambda: [
    _summary()["mean_input"].min() / 1000, _summary()["mean_input"].max() / 1000,
    at_least(100, _summary()["max_input"].min() / 1000)], rel_tol=0.05, trace=R)
claim("03.bucket_head", "the 3-second buckets", lambda: _f("bucket_s"), trace=R)
claim("03.bucket", "**rounded into ~3-second buckets**", lambda: _f("bucket_s"), trace=R)
claim("03.burst", "a burst of ten simultaneous arrivals every 3 s", lambda: _f("bucket_s"), trace=R)
claim("03.lengths", "half the prompts are under ~7k tokens\nand 1% are over ~85k. The mean (12k)", lambda: [
    _f("median_input") / 1000, 1, _f("p99_input") / 1000, _f("mean_input") / 1000], trace=R)
claim("03.max_out", "capped at 2,000", lambda: _f("max_output"), trace=R)
claim("03.block0", "starts with block 0 (the cell prints the share): a 512-token system\nprompt",
      lambda: [0, _bt()], trace=R)
not_a_claim("03.block0_b", "Beyond block 0", _BLOCK0)
not_a_claim("03.turns", "re-sends turns 1…*k*−1", _TURN)
not_a_claim("03.block0_c", "one block (block 0)", _BLOCK0)
claim("03.popular", "1,340 blocks are used\nby 10 to 43 requests", _popular, trace=R)
claim("03.once", "And 76% of the blocks are used", lambda: _f("used_once_pct"), trace=R)
claim("03.sum_once", "76% are used once (released trace)", lambda: _f("used_once_pct"), trace=R)
claim("03.hit_block", "A hit block is worth\n512 tokens", _bt)
claim("03.kv", "keeps 320 KiB of KV per token", lambda: _kv() / 1024)
claim("03.few_hundred", "holds little more than block 0: ~4% of tokens", lambda: [0, _f("hit_few_hundred_pct")],
      trace=R)
claim("03.one_tb", "One node's 1 TB (5,960 blocks) reaches about **14%**", lambda: [
    1, _c().dram_bytes_to_blocks(_TB), _f("hit_1tb_pct")], trace=R)
claim("03.tb_tokens", "So 1 TB of DRAM holds 3.05M tokens, or 5,960 blocks", lambda: [
    1, _TB / _kv() / 1e6, _c().dram_bytes_to_blocks(_TB)])
claim("03.tb_paper", 'FAST\'25 rounds it to "about 3M tokens"', lambda: paper.TOKENS_PER_TB_M, source="FAST'25 §2.2")
claim("03.answers", "on average 343 tokens in conversation, 149 in\nsynthetic and 183 in tool & agent", lambda: [
    float(_summary().set_index("trace").loc[n, "mean_output"]) for n in ("conversation", "synthetic", "synthetic:toolagent-like")],
      trace=R)
claim("03.arxiv_1k", "30% at 1k\n  blocks, against our 4.5%", lambda: [100 * paper.ARXIV_TABLE1_HIT[1_000], 1,
      _f_hit(1_000)], trace=R, source="arXiv v3 Table 1")
claim("03.arxiv_flat", "Both\n  curves are flat by 100k blocks", lambda: [at_most(100, _flat_from_k())], trace=R,
      source="arXiv v3 Table 1")
claim("03.fast_3m", "a local 3M-token cache", lambda: paper.TOKENS_PER_TB_M, source="FAST'25 §2.2")
claim("03.ceiling", "Around 100k blocks (≈ 17 TB, 50M tokens)", lambda: [
    100, _c().blocks_to_dram_bytes(100_000) / 1e12, 100_000 * _bt() / 1e6], rel_tol=0.03)
claim("03.inf", "ratio**: ≈ 37% here", lambda: _f("hit_inf_pct"), trace=R)
claim("03.table2", "reports 40% for this trace", lambda: 100 * _T2["conversation"]["cache_ratio"], source="FAST'25 Table 2")
claim("03.arxiv_ceiling", "(cache ratio ≈ 50%)", lambda: 100 * paper.ARXIV_TABLE1_HIT[float("inf")], rel_tol=0.05,
      source="arXiv v3 Table 1")
claim("03.pool_sizes", "10 nodes × 1 TB vs one pool of 10 TB", lambda: [
    _N, _c().LOCAL_CAPACITY_BLOCKS * _c().kv_block_bytes() / _TB,
    _N * _c().LOCAL_CAPACITY_BLOCKS * _c().kv_block_bytes() / _TB], rel_tol=0.05)
claim("03.random_gain", "the global pool hits about **3.4×** more than ten local caches", lambda: _f("random_over_local"),
      trace=R)
not_a_claim("03.turn2", "turn 2 of a chat", _TURN)
not_a_claim("03.turn1", "where turn 1", _TURN)
not_a_claim("03.head4", "block 0, and popularity", _BLOCK0)
claim("03.fig10", "reports **×2.22**", lambda: paper.FAST25_FIG10_GLOBAL_OVER_LOCAL, source="FAST'25 Fig. 10")
claim("03.sweep_total", "with the same 10 TB in total", lambda: _N * _c().LOCAL_CAPACITY_BLOCKS * _c().kv_block_bytes() / _TB,
      rel_tol=0.05)
claim("03.sticky", "it stays near 1×. The paper's ×2.22", lambda: [_f("session_over_local"),
                                                                   paper.FAST25_FIG10_GLOBAL_OVER_LOCAL], trace=R)
claim("03.q1", "fit in 1 TB (10¹² bytes)", lambda: [_TB / 1e12, _TB])
claim("03.q2", "How many whole 512-token blocks", _bt)
claim("03.q2b", "fit in 1 TB of DRAM?", lambda: _TB / 1e12)
claim("03.q3", "pool of 1 TB (your", lambda: _TB / 1e12)
claim("03.q4", "each cache 1 TB (5,960 blocks) locally", lambda: [_ex_tb(), _c().LOCAL_CAPACITY_BLOCKS])
claim("03.q4b", "one global pool of 10 TB?", lambda: _N * _ex_tb())
claim("03.sum_blocks", "a chain of 512-token block ids", _bt)
claim("03.sum_bucket", "bucketed in ~3 s steps, and every conversation starts with block 0", lambda: [_f("bucket_s"), 0],
      trace=R)
claim("03.sum_inf", "ratio (≈ 37% conversation, ≈ 65% synthetic)", lambda: [_ratio_inf("conversation"), _ratio_inf("synthetic")],
      trace=R)
claim("03.sum_tb", "1 TB of DRAM = 5,960 blocks = 3.05M tokens", lambda: [1, _c().dram_bytes_to_blocks(_TB), _TB / _kv() / 1e6])
claim("03.sum_local", "Ten local caches of 1 TB each", lambda: _c().LOCAL_CAPACITY_BLOCKS * _c().kv_block_bytes() / _TB,
      rel_tol=0.05)
claim("03.sum_hit", "It reaches ~14% on the released\n  conversation trace; ~100k blocks (≈ 17 TB)", lambda: [
    _f("hit_1tb_pct"), 100, _c().blocks_to_dram_bytes(100_000) / 1e12], trace=R, rel_tol=0.05)
claim("03.sum_pool", "lose ×3.4 with random routing and ≈ ×1 with sticky routing\n  (released trace). The paper's ×2.22",
      lambda: [_f("random_over_local"), _f("session_over_local"), paper.FAST25_FIG10_GLOBAL_OVER_LOCAL], trace=R)
# ---- eviction policies (arXiv v3 Table 1)
_T1 = paper.ARXIV_TABLE1
S = "stand-in"


@lru_cache(maxsize=None)
def _pol(name: str = "conversation") -> dict:
    """{policy: {capacity: %}} at Table 1's capacities (l03_cache.policy_facts)."""
    return _c().policy_facts(name)


def _p(policy: str, cap, name: str = "conversation") -> float:
    return _pol(name)[policy][float(cap)]


def _ordered_from_k() -> float:
    """Smallest Table 1 capacity (thousands of blocks) from which LRU ≥ LFU ≥ LengthAware holds at every
    larger finite one on the conversation trace (the prose says "from 10k blocks up")."""
    caps = sorted(c for c in _pol()["lru"] if c != float("inf"))
    ok = [_p("lru", c) >= _p("lfu", c) >= _p("length_aware", c) for c in caps]
    first = next(i for i in range(len(caps)) if all(ok[i:]))
    return caps[first] / 1000


def _token_vs_block_points() -> float:
    """Largest |token − block| hit ratio gap (points) over Table 1's cells, conversation and the arXiv stand-in."""
    from ..traces import cached_trace
    gaps = [(df["ours"] - df["ours_block"]).abs().max() for df in (
        _c().table1_comparison(cached_trace("conversation")), _c().table1_comparison(cached_trace("toolagent-like")))]
    return 100.0 * float(max(gaps))


claim("03.pol_order", "From 10k blocks up, LRU ≥ LFU ≥ LengthAware", _ordered_from_k, trace=R)
claim("03.pol_30k", "At 30k blocks: 33% / 28% / 21% of tokens (paper: 48% / 43% / 42%)", lambda: [
    30, _p("lru", 30_000), _p("lfu", 30_000), _p("length_aware", 30_000),
    100 * _T1["lru"][30_000], 100 * _T1["lfu"][30_000], 100 * _T1["length_aware"][30_000]], trace=R,
      source="arXiv v3 Table 1")
claim("03.pol_gap", "The gap at 30k blocks.** LFU trails LRU by 5 points there (paper: 5)", lambda: [30, 
    _p("lru", 30_000) - _p("lfu", 30_000), 100 * (_T1["lru"][30_000] - _T1["lfu"][30_000])], trace=R,
      source="arXiv v3 Table 1")
claim("03.pol_gap10", "at 10k blocks (8 points; paper 5)", lambda: [
    10, _p("lru", 10_000) - _p("lfu", 10_000), 100 * (_T1["lru"][10_000] - _T1["lfu"][10_000])], trace=R,
      source="arXiv v3 Table 1")
claim("03.pol_inf", "(Table 1's ∞ column is\n  one number, 51%)", lambda: 100 * _T1["lru"][float("inf")]
      if len({row[float("inf")] for row in _T1.values()}) == 1 else math.nan, source="arXiv v3 Table 1")
claim("03.pol_1k", "At 1k blocks the paper's three policies tie (30%) and ours nearly do (4.5–5.1%)", lambda: [
    1, 100 * _T1["lru"][1_000] if len({row[1_000] for row in _T1.values()}) == 1 else math.nan,
    min(_p(p, 1_000) for p in _c().EVICTION_POLICIES), max(_p(p, 1_000) for p in _c().EVICTION_POLICIES)],
      trace=R, source="arXiv v3 Table 1")
not_a_claim("03.pol_block0", "each keeps the hottest blocks, block 0 first", _BLOCK0)
claim("03.pol_levels", "Table 1's trace reaches 51%, conversation 37%", lambda: [
    100 * _T1["lru"][float("inf")], _p("lru", float("inf"))], trace=R, source="arXiv v3 Table 1")
claim("03.pol_standin", "(≈ 46% already at\n  1k blocks; paper 30%), while our LFU falls to 18% there", lambda: [
    _p("lru", 1_000, "toolagent-like"), 1, 100 * _T1["lru"][1_000], _p("lfu", 1_000, "toolagent-like")], trace=S,
      source="arXiv v3 Table 1")
claim("03.pol_blocks", "moves it by at most 2 points", lambda: at_most(2, _token_vs_block_points()), trace=R)
claim("03.pol_sum", "LRU ≥ LFU ≥ LengthAware from 10k\n  blocks up", _ordered_from_k, trace=R)
# exercises
claim("03.ex1_q", "fit in 1 TB (10^12 bytes)", lambda: [_ex_tb(), _ex_tb() * _c().DRAM_BYTES_PER_TB],
      where="03.tokens_per_tb")
claim("03.ex1_hint", "= 2 (K and V) × layers × KV heads × head dim × 2 bytes; divide 10^12", lambda: [2, 2, _TB],
      where="03.tokens_per_tb")
claim("03.ex1_why", "10^12 B / 327,680 B per token ≈ 3.05M tokens", lambda: [_TB, _kv(), _TB / _kv() / 1e6],
      where="03.tokens_per_tb")
claim("03.ex1_why2", "'1 TB holds about 3M tokens'", lambda: [1, paper.TOKENS_PER_TB_M], where="03.tokens_per_tb",
      source="FAST'25 §2.2")
claim("03.ex2_q", "how many whole 512-token blocks of", _bt, where="03.blocks_per_tb")
claim("03.ex2_q2", "KV fit in 1 TB of DRAM?", _ex_tb, where="03.blocks_per_tb")
claim("03.ex2_hint", "One block = 512 tokens × 320 KiB = 160 MiB", lambda: [_bt(), _kv() / 1024, _bt() * _kv() / 2**20],
      where="03.blocks_per_tb")
claim("03.ex2_why", "10^12 // (512 × 327,680) = 5,960 blocks", lambda: [_TB, _bt(), _kv(), _c().dram_bytes_to_blocks(_TB)],
      where="03.blocks_per_tb")
claim("03.ex3_q", "global LRU pool of 1 TB", _ex_tb, where="03.hit_1tb")
not_a_claim("03.ex3_eg", "(In %, e.g. 25%.)", "an example of the answer's format, not a result",
            where="03.hit_1tb")
claim("03.ex3_hint", "Read the curve at the 1 TB line", _ex_tb, where="03.hit_1tb")
claim("03.ex3_why", "1 TB holds 5,960 blocks", lambda: [1, _c().dram_bytes_to_blocks(_TB)], where="03.hit_1tb")
claim("03.ex4_q", "10 instances each cache 1 TB (5,960 blocks) locally", lambda: [_N, _ex_tb(), _c().LOCAL_CAPACITY_BLOCKS],
      where="03.global_over_local")
claim("03.ex4_q2", "one global pool of 10 TB?", lambda: _N * _ex_tb(), where="03.global_over_local")
claim("03.ex4_why", "turns over 10 caches", lambda: _N, where="03.global_over_local")
claim("03.ex5_q", "with the same 10 local caches", lambda: _N, where="03.best_routing")

# ---- solutions notebook (its introduction repeats the lecture's; the worked answers) -------------
restate("solutions", "03.blocks_intro", "03.as_block", "03.as_kv", "03.as_tb", "03.as_tb_label", "03.as_pool", "03.as_bucket", "03.q2", "03.q2b", "03.q3", "03.q4", "03.q4b")


def _mm():
    from ..models import get_model
    return get_model("llama2-70b")


claim("03.sol_q1", "KV per token = 2 (K and V) × 80 layers × 8 KV heads × 128 dims × 2 bytes = 327,680 B\n(320 KiB)",
      lambda: (2, _mm().n_layers, _mm().n_kv_heads, _mm().d_head, _mm().kv_bytes_per_elem, _kv(), _kv() / 1024),
      where="solutions")
claim("03.sol_q1b", "10¹² / 327,680 ≈ **3.05M tokens** — the paper's \"about 3M\"",
      lambda: (_TB, _kv(), _TB / _kv() / 1e6, paper.TOKENS_PER_TB_M), where="solutions", source="FAST'25 §2.2")
claim("03.sol_q2", "One block = 512 × 327,680 B = 167,772,160 B (160 MiB). 10¹² // 167,772,160 =\n**5,960 blocks**",
      lambda: (_bt(), _kv(), _bt() * _kv(), _bt() * _kv() / 2**20, _TB, _bt() * _kv(),
               _c().dram_bytes_to_blocks(_TB)), where="solutions")
claim("03.sol_q3", "Read the cached curve at 5,960 blocks: about 14% on the real trace — under half\nof the ≈ 37%",
      lambda: (_c().dram_bytes_to_blocks(_TB), _f("hit_1tb_pct"), _f("hit_inf_pct")),
      where="solutions", trace=R)
claim("03.sol_q4", "gives ≈ ×3.4 on the real trace (paper: ×2.22", lambda: (_f("random_over_local"),
      paper.FAST25_FIG10_GLOBAL_OVER_LOCAL), where="solutions", trace=R, source="FAST'25 Fig. 10")
