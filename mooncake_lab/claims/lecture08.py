"""Claims of lecture 08: every number its markdown and exercise strings state (see :mod:`mooncake_lab.claims`).

Results that depend on the simulation of the conversation trace (capacities, gains, rejection
shares, fleet costs) are computed in the notebook (``c.describe_*``, ``c.paper_box``); the claims
here are the lecture's parameters, cost-model and hardware facts, assumptions with sources, quotes of
the papers, results on the synthetic toolagent-like trace, and statistics of the released trace.
"""
from __future__ import annotations

from functools import lru_cache

from . import claim, not_a_claim, restate
from .lecture06 import tail_pct
from .. import paper

_FAST = "FAST'25 §5.1 and Fig. 1"


def _c():
    from ..experiments import l08_capstone as c
    return c


def _g():
    from ..experiments import l06_goodput as g
    return g


def _routers():
    from ..sim.routers import ROUTERS
    return [b for b in _c().LEADERBOARD_BASELINES if b in ROUTERS]


def _node(name):
    from ..hardware import get_node
    return get_node(name)


def _kvb() -> float:
    from ..models import get_model
    return get_model("llama2-70b").kv_bytes_per_token()


def _pt(n) -> float:
    from ..roofline import prefill_time
    return prefill_time("llama2-70b", "a800x8", int(n), 0, preset=_g().PRESET)


def _rdma_gbs() -> float:
    """The RDMA rate KV crosses at in the cost model (GB/s): the NICs' line rate × the measured efficiency."""
    from ..calibration import get_preset
    return _node("a800x8").nic_bw * get_preset(_g().PRESET).rdma_efficiency / 1e9


def _full():
    return _c().config_of("mooncake")


def _x() -> int:
    return _c().CPP_GROUP_SIZE


@lru_cache(maxsize=None)
def _tool_caps():
    c = _c()
    return c.capacity_table(c.capacity_curve(trace="toolagent-like", progress=False))


def _tool():
    from ..traces import cached_trace
    return cached_trace("toolagent-like")


def _conv():
    from ..traces import cached_trace
    return cached_trace("conversation")


def _single_node_limit_k() -> float:
    """Prompt length (k tokens, to 1,000) above which one node's prefill exceeds the TTFT SLO."""
    lo, hi = 1_000, 1_000_000
    while hi - lo > 1_000:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if _pt(mid) <= _g().TTFT_SLO_S else (lo, mid)
    return hi / 1e3


# ---- recurring --------------------------------------------------------------------------------
claim("08.nodes", "the same 16 nodes", lambda: _g().N_NODES)
claim("08.target", "90 %", lambda: 100 * _g().TARGET)
claim("08.paper_range", "+59 % … +498 %", lambda: (100 * paper.FIG1_GAIN[300], 100 * paper.FIG1_GAIN[100]), source=_FAST)
claim("08.tbt100", "100 ms", lambda: _g().TBT_SLOS_MS[0])
claim("08.pd", "8P+8D", lambda: (_full().n_prefill, _full().n_decode))
claim("08.rate", "20 req/s", lambda: _c().HETERO_RATE_RPS)

# ---- notebook ---------------------------------------------------------------------------------
claim("08.more_requests", "75 % more requests", lambda: 100 * paper.ARXIV_REAL_GAIN, source="arXiv 2407.00079 v3 §8")
claim("08.cpp_x", "groups of X = 2 nodes", _x)
claim("08.cpp_groups", "instead of 4 groups of 2", lambda: (_full().n_prefill // _x(), _x()))
claim("08.single", "(8 single-node instances", lambda: _full().n_prefill)
claim("08.single_row", "| 8 single-node instances |", lambda: _full().n_prefill)
claim("08.td", "uniform t_d = 10 s, the simulator's default", lambda: _full().decode_time_s)
claim("08.decode_nodes", "on 8 decode nodes", lambda: _full().n_decode)
claim("08.setup", "16 nodes of 8×A800", lambda: (_g().N_NODES, _node("a800x8").n_gpus))
claim("08.slos", "(TTFT) ≤ 30 s and time between tokens (TBT) ≤ 100, 200 or 300 ms",
      lambda: (_g().TTFT_SLO_S, *_g().TBT_SLOS_MS), source="FAST'25 §5.1")
claim("08.chunk", "cuts prompts into 512-token chunks", lambda: _c().config_of("coupled_chunked").prefill_chunk)
claim("08.vllm_budget", "server budget of 2,048 or 8,192 tokens a step, by GPU",
      lambda: (paper.VLLM_V1_BATCHED_TOKENS["other"], paper.VLLM_V1_BATCHED_TOKENS["70GB+"]),
      source="vLLM V1 vllm/engine/arg_utils.py EngineArgs.get_batch_defaults (OpenAI server context)")
claim("08.speeds", "from 0.5× to 8× its own rate", lambda: (min(_c().SPEEDS), max(_c().SPEEDS)))
claim("08.conv", "the conversation trace has 12,031 requests, 3.40 req/s at 1×",
      lambda: (len(_conv()), _g().trace_rate(_conv()), 1), trace="released")
claim("08.split", "splits the same 16 nodes into 8 prefill + 8 decode nodes",
      lambda: (_g().N_NODES, _full().n_prefill, _full().n_decode))
claim("08.layerwise", "The KV of a 12k-token prompt, ≈ 3.9 GB, crosses at 87 GB/s in ≈ 45 ms, against a 30 s TTFT budget",
      lambda: (12, 12_000 * _kvb() / 1e9, _rdma_gbs(),
               1e3 * __import__("mooncake_lab.roofline", fromlist=["kv_transfer_time"]).kv_transfer_time(
                   "llama2-70b", "a800x8", 12_000, preset=_g().PRESET), _g().TTFT_SLO_S))
claim("08.rdma", "87 GB/s is what Mooncake's transfer engine measured over 4 × 200 Gbps NICs",
      lambda: (_rdma_gbs(), _node("a800x8").nic_count, _node("a800x8").nic_gbps),
      source="FAST'25 §5.4.1 (87 GB/s over 4 × 200 Gbps); calibration.RDMA_EFFICIENCY")
claim("08.cpp_of_2", "**CPP groups of 2**", _x)
claim("08.longest", "(126k tokens) in ≈ 24 s, inside the 30 s SLO, and 4 groups queue less",
      lambda: (_conv().input_len.max() / 1e3, _pt(_conv().input_len.max()), _g().TTFT_SLO_S,
               _full().n_prefill // _x()), trace="released")
claim("08.flexibly", "flexibly than 8 nodes", lambda: _full().n_prefill)
claim("08.beyond", "prompts beyond ≈ 148k", _single_node_limit_k, rel_tol=0.01)
claim("08.ratio", "at 1:1 only *ties*", lambda: (_full().n_prefill / _full().n_decode, 1))
claim("08.h800", "The H800 has 989 TFLOPS BF16 and 80 GiB of HBM3 at 3.35 TB/s",
      lambda: (_node("h800x8").gpu.flops_bf16 / 1e12, _node("h800x8").gpu.hbm_bytes / 2**30,
               _node("h800x8").gpu.hbm_bw / 1e12))
claim("08.h20", "only 148 TFLOPS, but 96 GiB at 4.0 TB/s",
      lambda: (_node("h20x8").gpu.flops_bf16 / 1e12, _node("h20x8").gpu.hbm_bytes / 2**30, _node("h20x8").gpu.hbm_bw / 1e12))
claim("08.price_h800", "H800: **2.00 USD per GPU-hour**", lambda: _c().PRICE_USD_PER_GPU_HOUR["h800x8"],
      source="DeepSeek-V3 technical report, arXiv 2412.19437 §1")
claim("08.price_h20", "H20: **1.40 USD per GPU-hour**", lambda: _c().PRICE_USD_PER_GPU_HOUR["h20x8"])
claim("08.price_rule", "our assumption, 2 USD × the ratio of the 8-GPU server",
      lambda: (_c().PRICE_USD_PER_GPU_HOUR["h800x8"], _node("h800x8").n_gpus))
claim("08.yuan", "(H20 1.4 M yuan, H800 ≈ 2 M yuan at launch)",
      lambda: (_c().SERVER_PRICE_M_YUAN["h20x8"], _c().SERVER_PRICE_M_YUAN["h800x8"]), source="Reuters, Feb 2024")
claim("08.headroom", "sized for 80 % mean load (queues explode near 100 %", lambda: (100 * _c().HEADROOM, 100))
claim("08.zones", "**0.02 USD per GB**", lambda: _c().NETWORK_USD_PER_GB["across cloud zones"],
      source="AWS EC2 data transfer across Availability Zones")
claim("08.zones_tb", "(20 USD per TB) across cloud zones", lambda: 1e3 * _c().NETWORK_USD_PER_GB["across cloud zones"])
claim("08.private_link", "a private link between the two clusters at 1 USD per TB",
      lambda: 1e3 * _c().PRIVATE_LINK_USD_PER_GB)
claim("08.aws", "AWS charges 0.01 USD/GB in each direction", lambda: _c().NETWORK_USD_PER_GB["across cloud zones"] / 2)
claim("08.kv_per_prompt", "A 12k-token prompt × 320 KiB ≈ 3.9 GB", lambda: (12, _kvb() / 1024, 12_000 * _kvb() / 1e9))
claim("08.h20_slow", "within 30 s at all", lambda: _g().TTFT_SLO_S)
claim("08.h20_hbm", "thanks to its 96 GiB", lambda: _node("h20x8").gpu.hbm_bytes / 2**30)
claim("08.leaderboard", "at 4× on full Mooncake with 8 single-node prefill",
      lambda: (_c().LEADERBOARD_SPEED, _full().n_prefill))
claim("08.leaderboard_rate", "On the released trace 4× is 13.6 req/s",
      lambda: (_c().LEADERBOARD_SPEED, _c().LEADERBOARD_SPEED * _g().trace_rate(_conv())), trace="released")
claim("08.leaderboard_rows", "the 4 built-in policies and the 8 routers",
      lambda: (len(_c().LEADERBOARD_BASELINES) - len(_routers()), len(_routers())))
claim("08.reject_speed", "at 5× replay", lambda: __import__("mooncake_lab.exercises.lecture08", fromlist=["x"])._REJECT_SPEED)

# ---- the assumptions table (a <details> box of §1) ------------------------------------------------
claim("08.as_cluster", "| 16 nodes; Mooncake as 8P+8D (8 prefill, 8 decode) | 8P+8D |",
      lambda: (_g().N_NODES, _full().n_prefill, _full().n_decode, _full().n_prefill, _full().n_decode,
               __import__("mooncake_lab.sim", fromlist=["x"]).ClusterConfig().n_prefill,
               __import__("mooncake_lab.sim", fromlist=["x"]).ClusterConfig().n_decode))
claim("08.tool", "23,608 requests in an hour, mean prompt 8.3k tokens, mean answer 183",
      lambda: (len(_tool()), _tool().input_len.mean() / 1e3, _tool().output_len.mean()))
claim("08.as_load", "| each trace replayed from 0.5× to 8× its own rate; a capacity",
      lambda: (min(_c().SPEEDS), max(_c().SPEEDS)))
claim("08.tail", "longest 10 %", tail_pct, source="FAST'25 §5.1: TBT = mean of the longest 10% intervals")
claim("08.as_paper_node", "| 8×A800 nodes |", lambda: _node("a800x8").n_gpus,
      source="FAST'25 and arXiv 2407.00079, experimental set-up: nodes of eight NVIDIA A800-SXM4-80GB GPUs")
claim("08.as_slos", "TTFT 30 s; TBT 100 / 200 / 300 ms", lambda: (_g().TTFT_SLO_S, *_g().TBT_SLOS_MS), source="FAST'25 §5.1")
claim("08.as_slo_default", "| TTFT 30 s, TBT 100 ms |",
      lambda: (__import__("mooncake_lab.sim", fromlist=["x"]).ClusterConfig().ttft_slo_s,
               1e3 * __import__("mooncake_lab.sim", fromlist=["x"]).ClusterConfig().tbt_slo_s))
claim("08.as_cpp", "| X = 2: 4 groups of 2 prefill nodes | 1 |",
      lambda: (_x(), _full().n_prefill // _x(), _x(), __import__("mooncake_lab.sim", fromlist=["x"]).ClusterConfig().cpp_group_size))
claim("08.as_td", "predicted, uniform t_d = 10 s", lambda: _full().decode_time_s)
claim("08.as_chunk", "(512-token chunks, idealised)", lambda: _c().config_of("coupled_chunked").prefill_chunk)

# ---- exercises --------------------------------------------------------------------------------
claim("08.x1_q", "TBT ≤ 100 ms", lambda: _g().TBT_SLOS_MS[0], where="08.capacity_gain")
not_a_claim("08.x1_hint", "the ratio of the capacities − 1", "part of a formula (ratio − 1 = the relative gain)",
            where="08.capacity_gain")
not_a_claim("08.x1_pct", "multiply it by 100", "a unit conversion (a fraction to percent), not a quantity",
            where="08.capacity_gain")
claim("08.x1_why", "a ratio of 90 % capacities", lambda: 100 * _g().TARGET, where="08.capacity_gain")
claim("08.x1_paper", "+59% … +498%", lambda: (100 * paper.FIG1_GAIN[300], 100 * paper.FIG1_GAIN[100]),
      where="08.capacity_gain", source=_FAST)
claim("08.x3_q", "at 5× replay", lambda: __import__("mooncake_lab.exercises.lecture08", fromlist=["x"])._REJECT_SPEED,
      where="08.rejected_tokens")
claim("08.x3_hint", "Read the row 5× of the rejection table",
      lambda: __import__("mooncake_lab.exercises.lecture08", fromlist=["x"])._REJECT_SPEED, where="08.rejected_tokens")
claim("08.x4_q", "take 20 req/s", lambda: _c().HETERO_RATE_RPS, where="08.network_break_even")
claim("08.x4_why", "A 12k-token prompt carries ≈ 3.9 GB of KV", lambda: (12, 12_000 * _kvb() / 1e9),
      where="08.network_break_even")
claim("08.x4_zones", "(20 USD/TB)", lambda: 1e3 * _c().NETWORK_USD_PER_GB["across cloud zones"], where="08.network_break_even")
claim("08.x1_q90", "Mooncake's 90 % capacity", lambda: 100 * _g().TARGET, where="08.capacity_gain")

# ---- solutions notebook (its introduction repeats the lecture's; its code comments) ---------------
restate("solutions", "08.more_requests", "08.nodes", "08.paper_range", "08.rate", "08.target")
claim("08.sol_nics", "small prefixes over 4 × 200 Gbps",
      lambda: (_node("a800x8").nic_count, _node("a800x8").nic_gbps), where="solutions")
claim("08.sol_break_even", "(20 req/s × 3.9 GB)",
      lambda: (_c().HETERO_RATE_RPS, _c().node_rates("conversation", "h800x8")["kv_gb_per_request"]),
      where="solutions", trace="released")
