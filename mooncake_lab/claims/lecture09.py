"""Claims of lecture 09: every number its markdown and exercise strings state (see :mod:`mooncake_lab.claims`).

Results of the simulations (leaderboards, the belief sweep, the docs box) are computed in the notebook
(``l09.describe_*``, ``l09.docs_box``); the claims here are the lecture's set-up: block size, the
architectures, and the hand-set worked request.
"""
from __future__ import annotations

import numpy as np

from . import claim, not_a_claim


def _l09():
    from ..experiments import l09_routers as l09
    return l09


def _bt() -> int:
    from ..traces import BLOCK_TOKENS
    return BLOCK_TOKENS


def _worked_roles():
    """Indices of the worked state's instances as the text names them: the two holding the deepest
    prefix, the busiest, the one holding a little, the nearly idle one."""
    st = _l09().WORKED_STATE
    m, n = np.array(st["matched_blocks"]), np.array(st["inflight"])
    deep = np.flatnonzero(m == m.max())
    little = np.flatnonzero((m > 0) & (m < m.max()))
    return (*deep, int(np.argmax(n)), *little, int(np.argmin(n)))


claim("09.block", "in 512-token blocks", _bt)
claim("09.worked_request", "One request of 4,096 tokens (8 blocks)",
      lambda: (_l09().WORKED_REQUEST["L"], _l09().WORKED_REQUEST["n_blocks"]))
claim("09.worked_roles", "instance 0 and 3 hold most of its prefix, but 3 is the busiest; 1 holds a little; 2 is",
      _worked_roles)
claim("09.block_box", "give 512-token blocks", _bt)


def _change():
    """(the instance, its new match, the prompt's blocks, its worked match) of exercise 1's change; NaN unless
    the change is that one number (the text states one change of ``matched_blocks``)."""
    l09 = _l09()
    ch = l09.EXERCISE_CHANGE
    if set(ch) != {"matched_blocks"} or len(ch["matched_blocks"]) != 1:
        return float("nan")
    (i, m), = ch["matched_blocks"].items()
    return i, m, l09.WORKED_REQUEST["n_blocks"], l09.WORKED_STATE["matched_blocks"][i]


_CHANGE = "instance 1 now holds 7 of the prompt's 8 blocks instead of 2"
claim("09.change", _CHANGE, _change)
claim("09.change_sglang", _CHANGE, _change, where="09.changed_sglang")
claim("09.change_aibrix", _CHANGE, _change, where="09.changed_aibrix")

def _archs():
    a = _l09().ARCHITECTURES
    d, c = a["disaggregated"], a["coupled"]
    return d["n_prefill"] + d["n_decode"], d["n_prefill"], d["n_decode"], c["n_coupled"]


def _sim_default_pools():
    from ..sim import ClusterConfig
    c = ClusterConfig()
    return c.n_prefill, c.n_decode


claim("09.nodes", "both on the same 16 nodes: 8 prefill and 8 decode nodes, or 16 coupled nodes", _archs)
claim("09.sim_pools", "(vLLM-like) | 8 prefill and 8 decode nodes", _sim_default_pools)
claim("09.block_assumption", "the traces' 512-token blocks | 512-token blocks for every router", lambda: (_bt(), _bt()))
claim("09.block_symbol", "tokens per block (512)", _bt)
claim("09.dynamo_docs", "`overlap_score_weight` 0 is", lambda: _l09().DYNAMO_WEIGHTS[0],
      source="ai-dynamo/dynamo docs/router/kv_cache_routing.md@391befc4 (notebooks/routers.md, Dynamo)")


def _pd_router():
    from ..sim.routers import RouterConfig
    return RouterConfig()


_PD_SRC = "vllm-project/aibrix pkg/plugins/gateway/algorithms/pd_disaggregation.go@0169276105b1 (RouterConfig)"
claim("09.pd_prefill_spread", "if the in-flight spread exceeds 32", lambda: _pd_router().aibrix_pd_prefill_imbalance,
      source=_PD_SRC)
claim("09.pd_decode_spreads", "a spread of running requests of at least 32 → the least running; else a throughput "
      "spread above 2,048 tok/s", lambda: (_pd_router().aibrix_decode_max_request,
                                            _pd_router().aibrix_decode_max_throughput), source=_PD_SRC)


def _prefix_tie():
    """(u·N, the start instance, the next, the one chosen) of production-stack prefixaware's random tie-break in
    the worked request; NaN unless the start and the next are not tied and the choice is the one after."""
    l09 = _l09()
    u, m = l09.WORKED_REQUEST["u"], np.array(l09.WORKED_STATE["matched_blocks"])
    n = len(m)
    s = int(np.floor(u * n))
    tied = m == m.max()
    choice = int(l09.worked_request().loc["prodstack_prefix", "choice"])
    ok = not tied[s % n] and not tied[(s + 1) % n] and choice == (s + 2) % n
    return (u * n, s, (s + 1) % n, choice) if ok else float("nan")


claim("09.prefix_tie", "u·N = 1.2: instance 1 is not tied, 2 neither, 3 is", _prefix_tie)


def _slos():
    from ..sim import ClusterConfig
    c = ClusterConfig()
    return c.ttft_slo_s, 1e3 * c.tbt_slo_s


claim("09.slos", "TTFT ≤ 30 s, TBT ≤ 100 ms", _slos)
not_a_claim("09.pd_readme", "fast-path spreads as 16 requests",
            "a quote of AIBrix's pd_readme.md (notebooks/routers.md, AIBrix) that no code holds; the code's "
            "32 is claimed by 09.pd_code")
claim("09.pd_code", "at the commit we implemented uses 32", lambda: _pd_router().aibrix_decode_max_request,
      source=_PD_SRC)


claim("09.sweep_cache", "a smaller cache of 1,024 blocks each", lambda: _l09().SWEEP_CACHE_BLOCKS)
claim("09.sweep_cache_q4", "The instances cache 1,024 blocks each", lambda: _l09().SWEEP_CACHE_BLOCKS)
claim("09.sweep_cache_ex", "caching 1,024 blocks each", lambda: _l09().SWEEP_CACHE_BLOCKS, where="09.stale_percent")
claim("09.dynamo_ttl", "its 120 s time-to-live", lambda: _l09().SYSTEM_DEFAULTS["dynamo"][2],
      source="ai-dynamo/dynamo router_ttl_secs (notebooks/routers.md, Dynamo)")
