"""Claims of lecture 09: every number its markdown and exercise strings state (see :mod:`mooncake_lab.claims`).

Results of the simulations (leaderboards, the belief sweep, the docs box) are computed in the notebook
(``l09.describe_*``, ``l09.docs_box``); the claims here are the lecture's set-up: block size, the
architectures, and the hand-set worked request.
"""
from __future__ import annotations

import numpy as np

from . import claim, not_a_claim, when


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


# ---- §8 Mooncake in today's stacks: the Transfer Engine's numbers (mooncake_lab.paper, FAST'25) ----------------
def _te():
    from .. import paper
    return paper


def _net(name: str) -> dict:
    return _te().FAST25_TE_NETWORKS[name]


def _line_gbs(name: str) -> float:
    """A network's line rate, GB/s: NICs × Gbit/s per NIC ÷ 8."""
    n = _net(name)
    return n["nics"] * n["nic_gbps"] / 8


def _take_s(name: str) -> float:
    """FAST'25's 40 GB at that network's measured rate, s."""
    return _te().FAST25_TE_GB / _net(name)["gbs"]


_A, _B = "4×200 Gbps", "8×400 Gbps"
_TE = "FAST'25 §5.4.1, Fig. 12"
claim("09.te_main", "FAST'25 moved 40 GB, the KV of 128k LLaMA3-70B tokens, at 87 GB/s over 4 × 200 Gbps NICs: ≈ 0.46 s",
      lambda: (_te().FAST25_TE_GB, _te().FAST25_TE_TOKENS / 1024, _net(_A)["gbs"], _net(_A)["nics"],
               _net(_A)["nic_gbps"], _take_s(_A)), source=_TE)
def _dyn_m() -> dict:
    """Dynamo's shared-cache multiplier m, as paper.py records it, once the simulator's default is checked
    against it (a mismatch gives NaN: the claim fails)."""
    from .. import paper
    from ..sim.routers import RouterConfig
    d = paper.DYNAMO_SHARED_MULTIPLIER
    return {k: when(RouterConfig().dynamo_shared_multiplier == d["default"], x) for k, x in d.items()}


_DYN_CFG = "ai-dynamo/dynamo@07a6c9ce: lib/kv-router/src/scheduling/config.rs"
claim("09.dyn_m", "through a multiplier *m* whose default, 0, ignores it", lambda: _dyn_m()["default"], source=_DYN_CFG)
claim("09.dyn_m_box", "Its default,\n  *m* = 0, asks and ignores", lambda: _dyn_m()["default"], source=_DYN_CFG)
claim("09.dyn_m_cli", "sets *m* = 0.5, the command line's", lambda: _dyn_m()["cli_shared_cache"], source=_DYN_CFG)
claim("09.dyn_m_sum", "by default (*m* = 0) does not", lambda: _dyn_m()["default"], source=_DYN_CFG)


def _te_kv():
    """(GB, GiB) of LLaMA3-70B's KV for FAST'25's 128k tokens: lecture 05's 43 GB, the paper's 40 (GiB)."""
    from ..models import LLAMA3_70B
    b = _te().FAST25_TE_TOKENS * LLAMA3_70B.kv_bytes_per_token()
    return b / 1e9, when(abs(b / 2**30 - _te().FAST25_TE_GB) < 0.05, _te().FAST25_TE_GB), 2**30


claim("09.te_gib", "Lecture 05 counts the same KV as 43 GB: the paper's 40 are GiB, of 2³⁰ bytes", _te_kv,
      source=f"{_TE} (40 GB); models.LLAMA3_70B (derived)")
claim("09.te_gib_q", "**40 GB or 43 GB?**", lambda: _te_kv()[1::-1], source=f"{_TE} (40 GB); models.LLAMA3_70B (derived)")
claim("09.te_slice", "slices of 16 KB, in the paper", lambda: _te().FAST25_TE_SLICE_KB,
      source="FAST'25 §3.2.3 (topology-aware path selection)")
claim("09.te_slice_code", "default slice is 64 KiB", lambda: _te().TE_SLICE_BYTES_OPEN_SOURCE / 1024,
      source="kvcache-ai/Mooncake @ 3b5a5941 : mooncake-transfer-engine/include/config.h (slice_size = 65536)")
claim("09.te_size", "40 GB between two nodes", lambda: _te().FAST25_TE_GB, source=_TE)
claim("09.te_settings", "a concurrency of 64 and a minimum transfer granularity of 128 KB",
      lambda: (_te().FAST25_TE_CONCURRENCY, _te().FAST25_TE_MIN_GRANULARITY_KB), source=_TE)
claim("09.te_rates", "87 GB/s on 4 × 200 Gbps NICs and 190 GB/s on 8 × 400 Gbps: ≈ 2.4× and 4.6× faster than TCP",
      lambda: (_net(_A)["gbs"], _net(_A)["nics"], _net(_A)["nic_gbps"], _net(_B)["gbs"], _net(_B)["nics"],
               _net(_B)["nic_gbps"], _net(_A)["vs_tcp"], _net(_B)["vs_tcp"]), source=_TE)
claim("09.te_gloo", "also marks 7.5× and 16.2× against Gloo", lambda: (_net(_A)["vs_gloo"], _net(_B)["vs_gloo"]),
      source=f"{_TE} (the figure's labels)")


def _line_rates():
    """(NICs, Gbit/s, line GB/s, measured GB/s, % of line) of the smaller network, the same of the larger — its
    measured rate only if it is "about half" of the line (40–60%) — then FAST'25's 40 GB and the two times."""
    b = _net(_B)["gbs"] / _line_gbs(_B)
    return (_net(_A)["nics"], _net(_A)["nic_gbps"], _line_gbs(_A), _net(_A)["gbs"], 100 * _net(_A)["gbs"] / _line_gbs(_A),
            _net(_B)["nics"], _net(_B)["nic_gbps"], _line_gbs(_B), when(0.4 <= b <= 0.6, _net(_B)["gbs"]),
            _te().FAST25_TE_GB, _take_s(_A), _take_s(_B))


claim("09.te_line", "4 × 200 Gbps is 100 GB/s, so 87 GB/s is 87% of it. 8 × 400 Gbps is 400 GB/s,\n  of which 190 GB/s "
      "is about half. The 40 GB take ≈ 0.46 s and ≈ 0.21 s", _line_rates, source=f"{_TE} (derived)")
