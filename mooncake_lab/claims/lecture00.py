"""Claims of lecture 00: every number its markdown and exercise strings state (see :mod:`mooncake_lab.claims`)."""
from __future__ import annotations

from functools import lru_cache

from . import claim, notebook_arg
from .. import paper

def at_least(bound: float, actual: float) -> float:
    """``bound`` when ``actual ≥ bound`` (the prose says "past/over bound"), else ``actual`` (so the
    check fails and shows it)."""
    return float(bound) if actual >= bound else float(actual)


def at_most(bound: float, actual: float) -> float:
    """``bound`` when ``actual ≤ bound`` (the prose says "under/within bound"), else ``actual``."""
    return float(bound) if actual <= bound else float(actual)


def _m():
    from ..models import get_model
    return get_model("llama2-70b")


def _node():
    from ..hardware import A800_NODE
    return A800_NODE


@lru_cache(maxsize=None)
def _one():
    from ..experiments.l00_welcome import one_request
    t2 = paper.FAST25_TABLE2["conversation"]
    return one_request(t2["mean_input"], t2["mean_output"], preset="ideal")


@lru_cache(maxsize=None)
def _stall(n: int = 32_000):
    from ..experiments.l00_welcome import coupled_stall
    return coupled_stall([n]).iloc[0]


def _levels():
    from ..experiments.l00_welcome import DISAGGREGATION_LEVELS, MOONCAKE_LEVEL
    return DISAGGREGATION_LEVELS, MOONCAKE_LEVEL


def _released_max_input() -> float:
    from ..traces import cached_trace
    return float(cached_trace("conversation").input_len.max())


_T2 = paper.FAST25_TABLE2["conversation"]
_Q_TOKENS = 32_000  # the exercises' prompt (lecture00.py)
_SLO = paper.SLO_SOURCE

claim("00.mean_prompt", "a mean prompt of about 12,000", lambda: _T2["mean_input"], rel_tol=0.01,
      source="FAST'25 Table 2")
claim("00.tail", "a tail past 100,000", lambda: at_least(100_000, _released_max_input()), trace="released")
claim("00.prefill_flops", "2 × (parameters) FLOPs per prompt token", lambda: _m().linear_flops_per_token() / _m().parameters())
claim("00.prefill_gflop", "about 140 GFLOP per token", lambda: _m().linear_flops_per_token() / 1e9, rel_tol=0.03)
claim("00.weights", "138 GB", lambda: _m().weight_bytes() / 1e9)
claim("00.slo_ttft", "| 30 s |", lambda: paper.SLO_TTFT_S, source=_SLO)
claim("00.slo_tbt", "| 0.1 s |", lambda: paper.SLO_TBT_S, source=_SLO)
claim("00.avg_shape", "12,035 prompt tokens, 343 output", lambda: [_T2["mean_input"], _T2["mean_output"]],
      source="FAST'25 Table 2")
claim("00.node", "8 × A800 GPUs", lambda: _node().n_gpus)
claim("00.prefill_12k", "The prefill of 12k tokens takes under a second of pure compute (≈ 1.8 PFLOP)",
      lambda: [at_most(_T2["mean_input"] / 1000, _one()["prefill_s"] * _T2["mean_input"] / 1000),
               _m().prefill_flops(_T2["mean_input"]) / 1e15])
claim("00.decode_step", "about 9 ms, because the GPUs", lambda: _one()["tbt_mean_s"] * 1e3)
claim("00.batching", "32 requests of this shape decode together in\n≈ 1.9× the time of one, although each brings its own 3.9 GB",
      lambda: [32, _batch_ratio(32), _T2["mean_input"] * _m().kv_bytes_per_token() / 1e9])
claim("00.kv_move", "12k tokens × 320 KiB ≈ 3.9 GB",
      lambda: [_T2["mean_input"] / 1000, _m().kv_bytes_per_token() / 1024, _T2["mean_input"] * _m().kv_bytes_per_token() / 1e9])
claim("00.slo_tbt_fig", "The 0.1 s TBT SLO is marked", lambda: paper.SLO_TBT_S, source=_SLO)
claim("00.stall", "A single 32k-token prompt turns one TBT of ≈ 16 ms into more than two", lambda: [
    _Q_TOKENS / 1000, _stall()["normal_tbt_s"] * 1e3])
claim("00.level_m1", "| −1 |", lambda: min(_levels()[0]))
claim("00.level_0", "| 0 |", lambda: sorted(_levels()[0])[1])
claim("00.level_1", "| 1 |", lambda: sorted(_levels()[0])[2])
claim("00.level_2", "| 2 |", lambda: _levels()[1])
claim("00.level_3", "| 3 |", lambda: max(_levels()[0]))
claim("00.level_2_net", "Level 2 needs a fast network: Mooncake's nodes have up to 800 Gbps", lambda: [
    _levels()[1], _node().nic_count * _node().nic_gbps], source="arXiv v3 §8.1")
claim("00.level_3_cost", "Level 3 is attractive", lambda: max(_levels()[0]))
claim("00.q1", "prefill of a\n32,000-token prompt", lambda: _Q_TOKENS)
claim("00.q1_node", "take on one 8×A800 node", lambda: _node().n_gpus)
claim("00.q2", "a\n32,000-token prompt is prefilled on the same GPUs. How many times the 0.1 s TBT SLO",
      lambda: [_Q_TOKENS, paper.SLO_TBT_S])
claim("00.q3", "different 8-GPU nodes", lambda: _node().n_gpus)
claim("00.q3_range", "(an integer from −1 to 3)", lambda: [min(_levels()[0]), max(_levels()[0])])
claim("00.box_slo", "TTFT ≤ 30 s, TBT ≤ 0.1 s", lambda: [paper.SLO_TTFT_S, paper.SLO_TBT_S], source=_SLO)
claim("00.box_vllm", "vLLM met the TBT SLO for only 57% of requests", lambda: paper.VLLM_TBT_SLO_MET_PCT,
      source="arXiv v3 §8")
claim("00.box_ours", "one unchunked 32k prefill stretches a 16 ms token gap past 2 s", lambda: [
    _Q_TOKENS / 1000, _stall()["normal_tbt_s"] * 1e3, at_least(2, _stall()["stalled_gap_s"])])
claim("00.box_57", "the paper's 57%", lambda: paper.VLLM_TBT_SLO_MET_PCT, source="arXiv v3 §8")
claim("00.box_cost", "| 320 KB of KV (FAST'25 §2.2) | ≈ 140 GFLOP and 320 KiB of KV", lambda: [
    paper.KV_PER_TOKEN_KB, _per_token_gflop_1k(), _m().kv_bytes_per_token() / 1024], source="FAST'25 §2.2 (\"320 KB\")")
claim("00.box_streamed", "137.4 of the 138 GB", lambda: [_m().streamed_weight_bytes_dense() / 1e9, _m().weight_bytes() / 1e9])
claim("00.assume_node", "nodes of 8 × A800 GPUs | one node of 8 × A800", lambda: [_node().n_gpus] * 2)
claim("00.assume_shape", "mean shape: 12,035 prompt and 343 output tokens", lambda: [_T2["mean_input"], _T2["mean_output"]],
      source="FAST'25 Table 2")
claim("00.assume_coupled", "two decode steps of 32 requests of 12,035 tokens", lambda: [
    notebook_arg("00", "welcome.coupled_stall", "batch_size"), notebook_arg("00", "welcome.coupled_stall", "context")])
claim("00.summary_32k", "one 32k prompt breaks the TBT SLO many times over", lambda: _Q_TOKENS / 1000)
claim("00.summary_level", "(level 2)", lambda: _levels()[1])
claim("00.summary_slo", "TTFT ≤ 30 s and TBT ≤ 0.1 s", lambda: [paper.SLO_TTFT_S, paper.SLO_TBT_S], source=_SLO)
# exercise strings
claim("00.ex1_q", "a 32,000-token", lambda: _Q_TOKENS, where="00.prefill_32k")
claim("00.ex1_node", "prompt on one 8×A800 node", lambda: _node().n_gpus, where="00.prefill_32k")
claim("00.ex1_why", "About 5.7 PFLOP (4.4 in the matmuls, 1.3 in attention) at 2.5 PFLOP/s of peak",
      lambda: _flops_32k(), where="00.prefill_32k")
claim("00.ex2_q", "during a 32k co-located prefill, as a multiple of the 0.1 s TBT SLO",
      lambda: [_Q_TOKENS / 1000, paper.SLO_TBT_S], where="00.stall_ratio")
claim("00.ex2_hint", "the 32,000-token row of `stall` over the SLO", lambda: _Q_TOKENS, where="00.stall_ratio")
claim("00.ex3_hint", "−1 fused, 0 same GPUs, 1 same node, 2 separate nodes, 3 heterogeneous hardware",
      lambda: sorted(_levels()[0]), where="00.level")
claim("00.ex3_why", "level 2.", lambda: _levels()[1], where="00.level")


def _batch_ratio(b: int) -> float:
    from .. import roofline
    ctx = _T2["mean_input"]
    one = roofline.decode_step_time(_m(), _node(), 1, ctx, preset="ideal")
    return roofline.decode_step_time(_m(), _node(), b, b * ctx, preset="ideal") / one


def _per_token_gflop_1k() -> float:
    """GFLOP of one LLaMA2-70B token at a 1k-token context (matmuls, LM head, attention): lecture 01's ≈ 140."""
    m = _m()
    return (m.linear_flops_per_token() + m.lm_head_flops_per_token() + m.attention_flops_coefficient() * 1024) / 1e9


def _flops_32k():
    bd = _m().prefill_flops_breakdown(_Q_TOKENS)
    peak = _node().n_gpus * _node().gpu.flops_bf16
    return [bd["total"] / 1e15, (bd["linear"] + bd["lm_head"]) / 1e15, bd["attention"] / 1e15, peak / 1e15]


# ---- solutions notebook: the worked answers ----------------------------------------------------
def _answer(ex_id: str) -> float:
    from ..exercises import list_exercises
    return float(next(e for e in list_exercises("00") if e.id == ex_id).answer())


claim("00.sol_q1", "≈ 137 GFLOP per token in its matrix multiplies (2 × 68.5 B\nparameters",
      lambda: (_m().linear_flops_per_token() / 1e9, 2, _m().linear_flops_per_token() / 2e9), where="solutions")
claim("00.sol_q1_lin", "so 32,000 tokens cost ≈ 4.4 PFLOP there", lambda: (_Q_TOKENS, _flops_32k()[1]),
      where="solutions")
claim("00.sol_q1_attn", "4 · L · d_head · n_heads · n · n/2 = 4 · 80 · 128 · 64 · 32,000² / 2 ≈ 1.3 PFLOP",
      lambda: (4, 2, 4, _m().n_layers, _m().d_head, _m().n_heads, _Q_TOKENS ** 2, 2, _flops_32k()[2]),
      where="solutions")
claim("00.sol_q1_time", "On 8 × 312 TFLOP/s = 2.5 PFLOP/s\nthat is ≈ 5.7 / 2.5 ≈ 2.3 s",
      lambda: (_node().n_gpus, _node().gpu.flops_bf16 / 1e12, _flops_32k()[3], _flops_32k()[0], _flops_32k()[3],
               _answer("00.prefill_32k")), where="solutions")
claim("00.sol_q2", "the whole 32k prefill (≈ 2.3 s) plus one decode step, against a\n0.1 s SLO: about 23 times",
      lambda: (_Q_TOKENS / 1000, _answer("00.prefill_32k"), paper.SLO_TBT_S, _answer("00.stall_ratio")),
      where="solutions", source=_SLO)
claim("00.sol_q3", "level 2. (Level 3", lambda: (_levels()[1], max(_levels()[0])), where="solutions")
