"""Claims of lecture 06: every number its markdown and exercise strings state (see :mod:`mooncake_lab.claims`).

Sentences about simulation results on the conversation trace (capacities, the best P:D split, the
request capacity ratio, the paper-vs-ours box) are computed in the notebook (``g.describe_*``,
``g.paper_box``), so they follow the trace in use; the claims here are cost-model facts, the
lecture's parameters, quotes of the papers and two statistics of the released trace.
"""
from __future__ import annotations

from . import claim, default_of, restate
from .. import paper

_FAST = "FAST'25 §5.1 and Fig. 1"


def _g():
    from ..experiments import l06_goodput as g
    return g


def _ex():
    from ..exercises import lecture06 as ex
    return ex


def _m():
    from ..models import get_model
    return get_model("llama2-70b")


def _n():
    from ..hardware import get_node
    return get_node("a800x8")


def _frac() -> float:
    from ..roofline import IDEAL
    return IDEAL.kv_usable_fraction


def _cap_tokens() -> float:
    from ..roofline import decode_kv_capacity_tokens
    return decode_kv_capacity_tokens("llama2-70b", "a800x8")


def _pt(n, cached=0, preset=None) -> float:
    from ..roofline import prefill_time
    return prefill_time("llama2-70b", "a800x8", n, cached, preset=preset or _g().PRESET)


def _step(b, ctx) -> float:
    from ..roofline import decode_step_time
    return decode_step_time("llama2-70b", "a800x8", b, ctx, preset=_g().PRESET)


def _calibrated_max_prompt_k() -> float:
    from ..calibration import load_measured
    return float(load_measured().prompt_tokens.max()) / 1024


def _conv():
    from ..traces import cached_trace
    return cached_trace("conversation")


def _mooncake():
    c = _g().config_for("mooncake")
    return c.n_prefill, c.n_decode


def _cluster_default(field: str):
    from .. import sim
    return getattr(sim.ClusterConfig(), field)


def _chunk() -> int:
    from .. import sim
    return sim.ClusterConfig().prefill_chunk


def _budget(k: int) -> int:
    """The k-th token budget per step of the lecture's chunked coupled engine (``g.CHUNK_BUDGETS``: 512, then
    vLLM V1's two)."""
    return _g().CHUNK_BUDGETS[k]


_VLLM_V1 = "vLLM V1 vllm/engine/arg_utils.py EngineArgs.get_batch_defaults (OpenAI server context)"


def tail_pct() -> float:
    """The share of a request's token intervals its TBT averages, % (10: the simulator's ``tail_slots``)."""
    from ..sim.coupled import tail_slots
    return 100 * float(tail_slots([1001])[-1]) / 1000


def _paper_speed() -> float:
    """The replay speed of "the paper's setting" (``request_capacity_ratio``'s default, 1×)."""
    return default_of(_g().request_capacity_ratio, "speed")


# ---- recurring parameters --------------------------------------------------------------------
for _w in ("notebook", "06.capacity_gain"):
    _s = _w.replace("06.", "")
    claim(f"06.pd_{_s}", "8P+8D", _mooncake, where=_w)
    claim(f"06.tbt100_{_s}", "100 ms", lambda: _g().TBT_SLOS_MS[0], where=_w, source="FAST'25: TBT SLO 100 ms")
claim("06.target", "90 %", lambda: 100 * _g().TARGET)
claim("06.target_q4x", "90 % capacity", lambda: 100 * _g().TARGET, where="06.capacity_gain")
claim("06.target_q4", "≥ 90%", lambda: 100 * _g().TARGET, where="06.capacity_gain")
claim("06.speed", "2×", lambda: _g().DEMO_SPEED)

# ---- notebook ---------------------------------------------------------------------------------
claim("06.pd_explained", "8 prefill and 8 decode nodes", _mooncake)
claim("06.slo_ttft", "must be at most 30 s", lambda: _g().TTFT_SLO_S, source="FAST'25 §5.1")
claim("06.slo_tbt", "must be at most a threshold: 100, 200 or 300 ms", lambda: _g().TBT_SLOS_MS, source="FAST'25 §5.1")
# the assumptions table
claim("06.as_nodes", "16 nodes; Mooncake as 8P+8D", lambda: (_g().N_NODES, *_mooncake()))
claim("06.as_default_pd", "| 8P+8D |", lambda: (_cluster_default("n_prefill"), _cluster_default("n_decode")))
claim("06.as_speeds", "replayed at 1× and 2×", lambda: (_paper_speed(), _g().DEMO_SPEED))
claim("06.as_slos", "TTFT ≤ 30 s; TBT ≤ 100 / 200 / 300 ms, a request's mean of its longest 10 % intervals",
      lambda: (_g().TTFT_SLO_S, *_g().TBT_SLOS_MS, tail_pct()), source="FAST'25 §5.1")
claim("06.as_kv", "at most 90% of HBM (vLLM's default)", lambda: 100 * _frac())
# section 2: the 90% cap (lecture 01 refers to it)
claim("06.cap_hbm", "at most **90% of the HBM**", lambda: 100 * _frac())
claim("06.cap_name", "the same **90% cap**", lambda: 100 * _frac())
claim("06.goal_kv", "(8 × 80 GiB minus the weights, 320 KiB per token)",
      lambda: (_n().n_gpus, _n().gpu.hbm_bytes / 2**30, _m().kv_bytes_per_token() / 1024))
claim("06.nodes", "16 nodes by each", lambda: _g().N_NODES)
claim("06.calibrated_range", "at most 8k tokens", _calibrated_max_prompt_k, source="data/measured_latency_splitwise.csv")
claim("06.conv_lengths", "prompts average 12k tokens with a p99 of 85k",
      lambda: (_conv().input_len.mean() / 1e3, __import__("numpy").percentile(_conv().input_len, 99) / 1e3),
      trace="released")
claim("06.deep_chunk", "a 512-token chunk deep inside a 30k prompt cost 0.47 s",
      lambda: (_chunk(), 30, _pt(_chunk(), 30_000, "calibrated")))
claim("06.weights", "all 138 GB of weights", lambda: _m().weight_bytes() / 1e9)
claim("06.kv_cap", "(0.9 × 640 GiB − 138 GB) / 320 KiB ≈ 1.47 M tokens",
      lambda: (_frac(), _n().hbm_bytes / 2**30, _m().weight_bytes() / 1e9, _m().kv_bytes_per_token() / 1024,
               _cap_tokens() / 1e6))
claim("06.stall", "(≈ 3.3 s for a 30k prompt)", lambda: (_pt(30_000), 30))
claim("06.chunk", "≤ 512 prompt tokens", _chunk)
claim("06.fused", "saving ≤ ≈ 14 ms", lambda: 1e3 * _step(1, 0))
claim("06.tail", "longest 10 %", tail_pct, source="FAST'25 §5.1: TBT = mean of the longest 10% intervals")
claim("06.ttft", "(TTFT ≤ 30 s, TBT ≤ a threshold)", lambda: _g().TTFT_SLO_S, source="FAST'25 §5.1")
claim("06.five", "five clusters (16 nodes each", lambda: _g().N_NODES)
claim("06.speeds", "at 1× (the paper's setting) and at 2×", lambda: (_paper_speed(), _g().DEMO_SPEED))
claim("06.fig1_curve", "at 1× against the TBT\nthreshold as Fig. 1 plots it", _paper_speed)
claim("06.control_speed", "(`g.semantics_control`, at 1×)",
      lambda: __import__("inspect").signature(_g().semantics_control).parameters["speed"].default)
claim("06.paper_range", "beside the paper's +59 % … +498 %",
      lambda: (100 * paper.FIG1_GAIN[300], 100 * paper.FIG1_GAIN[100]), source=_FAST)
claim("06.prefill_nodes", "the 8 prefill nodes saturate", lambda: _mooncake()[0])
# section 5: the chunked coupled cluster at vLLM V1's token budgets (the capacity table's last two rows)
claim("06.chunk_row", "Chunked prefill at 512 tokens a step recovers it",
      lambda: _g().config_for("coupled_chunked").prefill_chunk)
claim("06.v1_budget", "gives 8,192 tokens a step on a GPU\nwith at least 70 GiB of memory that is not an A100, and 2,048 on any other GPU",
      lambda: (paper.VLLM_V1_BATCHED_TOKENS["70GB+"], paper.VLLM_V1_LARGE_GPU_GIB, paper.VLLM_V1_BATCHED_TOKENS["other"]),
      source=_VLLM_V1)
claim("06.v1_a800", "A800s have 80 GiB each and are not A100s, so vLLM V1 would give them 8,192 tokens a step",
      lambda: (_n().gpu.hbm_bytes / 2**30, paper.vllm_v1_server_budget(_n().gpu.hbm_bytes, _n().gpu.name)),
      source=_VLLM_V1)
claim("06.chunk_2048", "A 2,048-token chunk\nalone takes ≈ 180 ms, so at TBT ≤ 100 ms",
      lambda: (_budget(1), 1e3 * _pt(_budget(1)), _g().TBT_SLOS_MS[0]), rel_tol=0.01)
claim("06.budget_300", "At TBT ≤ 300 ms a 2,048-token chunk fits", lambda: (_g().TBT_SLOS_MS[-1], _budget(1)))
claim("06.chunk_8192", "An 8,192-token chunk takes ≈ 750 ms", lambda: (_budget(2), 1e3 * _pt(_budget(2))))
claim("06.as_budgets", "section 5 also tries vLLM V1's 2,048 and 8,192", lambda: (_budget(1), _budget(2)),
      source=_VLLM_V1)
claim("06.best_pd", "near 1:1", lambda: paper.BEST_PD_RATIO, source="FAST'25 §5")
# section 7: the paper's hybrid; the TBT SLO, not the chunk, limits the prompts it inlines
claim("06.inline_max", "prefill + decode step ≤ 100 ms. On the lecture's nodes that allows prompts of up to 983 tokens",
      lambda: (_g().TBT_SLOS_MS[0], _g().inline_max_prompt(_g().TBT_SLOS_MS[0])))
claim("06.cpp_chunk", "`cpp_chunk` tokens, 4,096 by default", lambda: _cluster_default("cpp_chunk"))


# section 8: roles that switch (FAST'25 §5.5 states the idea; the rule and its costs are the course's)
def _reload_s() -> float:
    from ..sim import ClusterConfig
    return ClusterConfig(role_switch_ratio=_g().SWITCH_RATIO).resolve().role_switch_s


def _rule_number() -> int:
    import re
    from ..sim import reference
    return int(re.search(r"\n\s+(\d+)\. The N = ", reference.__doc__).group(1))


def _at_load() -> float:
    from ..sim.config import ROLE_SWITCH_AT_LOAD
    return ROLE_SWITCH_AT_LOAD


claim("06.roles_check", "* Every 60 s the Conductor compares", lambda: _cluster_default("role_switch_interval_s"))
claim("06.roles_at_slo", "When one pool is at its SLO (load ≥ 1)", _at_load)
claim("06.roles_reload", "is the weights' load from DRAM, about\n  1.1 s", _reload_s)
claim("06.roles_slow", "so the table also tries 60 s", lambda: _g().SLOW_RELOAD_S)
claim("06.roles_demo", "replays the conversation trace at 2× and makes every answer 4× longer",
      lambda: (_g().DEMO_SPEED, _g().SHIFT_FACTOR))
claim("06.roles_rho", "ρ = 2 here", lambda: _g().SWITCH_RATIO)
claim("06.roles_nodes", "Nodes are numbered 0 … 15", lambda: (0, _g().N_NODES - 1))
claim("06.roles_rule", "Rule 14 of `mooncake_lab.sim.reference`", _rule_number)
claim("06.as_roles", "a reload of the weights from DRAM (≈ 1.1 s) or 60 s", lambda: (_reload_s(), _g().SLOW_RELOAD_S))


def _pd_decisive():
    """(answer scale, the split's ratio as P, D, its P and D nodes) of the one assumption that brings the
    best split to the paper's ratio on the released trace; NaN unless it alone does."""
    g = _g()
    pds = g.pd_assumptions(progress=False)
    b = g.best_split(pds[g.PD_DECISIVE])
    r = paper.BEST_PD_RATIO
    ok = g._pd_decides(pds)[0] == [g.PD_DECISIVE] and b.n_prefill * r[1] == b.n_decode * r[0]
    return (g.PD_LONGER_ANSWERS, *r, b.n_prefill, b.n_decode) if ok else float("nan")


claim("06.pd_decides", "On the released trace only answers 4× longer bring the best\nsplit to 1:1 (8P:8D)",
      _pd_decisive, trace="released")
claim("06.q1", "sequences of 12,000 tokens fit at once in one 8×A800", lambda: (_ex()._CTX, _n().n_gpus))
claim("06.q2", "decodes 101 tokens (100 intervals) at 20 ms per step",
      lambda: (_ex()._INTERVALS + 1, _ex()._INTERVALS, 1e3 * _ex()._STEP_S))
claim("06.q2_prompt", "a 32,768-token prompt", lambda: _ex()._PROMPT)
claim("06.q3", "16 sequences ×\n12,000 tokens", lambda: (_ex()._BATCH, _ex()._CTX))
claim("06.q3_budget", "(multiple of 128, nothing cached) keeping it ≤ 100 ms",
      lambda: (_ex()._K_STEP, 1e3 * _ex()._BUDGET_S))

# ---- exercises --------------------------------------------------------------------------------
claim("06.x1_q", "sequences of 12,000 tokens of context fit at once in the KV memory of one 8×A800",
      lambda: (_ex()._CTX, _n().n_gpus), where="06.max_batch")
claim("06.x1_q2", "Count 90% of 640 GiB minus the weights, and 320 KiB per token",
      lambda: (100 * _frac(), _n().hbm_bytes / 2**30, _m().kv_bytes_per_token() / 1024), where="06.max_batch")
claim("06.x1_why", "(576 GiB − 138 GB) / 327,680 B ≈ 1.47 M tokens → ≈ 122 sequences of 12k",
      lambda: (_frac() * _n().hbm_bytes / 2**30, _m().weight_bytes() / 1e9, _m().kv_bytes_per_token(),
               _cap_tokens() / 1e6, _ex()._max_batch(), _ex()._CTX / 1e3), where="06.max_batch")
claim("06.x2_q", "decodes 101 tokens (100 intervals) at 20 ms per step",
      lambda: (_ex()._INTERVALS + 1, _ex()._INTERVALS, 1e3 * _ex()._STEP_S), where="06.stall_tail")
claim("06.x2_prompt", "a 32,768-token prompt", lambda: _ex()._PROMPT, where="06.stall_tail")
claim("06.x2_tail", "the longest 10% of intervals", tail_pct, where="06.stall_tail",
      source="FAST'25 §5.1")
claim("06.x2_why", "One prefill of ≈ 3.6 s lifts the tail mean to ≈ 380 ms: a single stall breaks even a 300 ms SLO",
      lambda: (_pt(_ex()._PROMPT), _ex()._stalled_tail_ms(), _g().TBT_SLOS_MS[-1]), where="06.stall_tail",
      rel_tol=0.02)
claim("06.x3_q", "16 sequences × 12,000 tokens", lambda: (_ex()._BATCH, _ex()._CTX), where="06.largest_chunk")
claim("06.x3_budget", "(a multiple of 128, no cached prefix) that keeps the iteration ≤ 100 ms",
      lambda: (_ex()._K_STEP, 1e3 * _ex()._BUDGET_S), where="06.largest_chunk")
claim("06.x3_hint", "Loop k over 128, 256, … and test prefill_time(k) + decode_step_time(16, 16 × 12,000) ≤ 0.1 s,",
      lambda: (_ex()._K_STEP, 2 * _ex()._K_STEP, _ex()._BATCH, _ex()._BATCH, _ex()._CTX, _ex()._BUDGET_S),
      where="06.largest_chunk")
claim("06.x3_why", "The decode step costs ≈ 19 ms, leaving ≈ 81 ms for the chunk: ≈ 900 tokens. vLLM v0.5's 512",
      lambda: (1e3 * _step(_ex()._BATCH, _ex()._BATCH * _ex()._CTX),
               1e3 * (_ex()._BUDGET_S - _step(_ex()._BATCH, _ex()._BATCH * _ex()._CTX)),
               _ex()._largest_chunk(), _chunk()), where="06.largest_chunk", rel_tol=0.02)
claim("06.x4_paper", "+59% … +498% are gains", lambda: (100 * paper.FIG1_GAIN[300], 100 * paper.FIG1_GAIN[100]),
      where="06.capacity_gain", source=_FAST)

# ---- solutions notebook (its introduction repeats the lecture's; its code comments) ---------------
restate("solutions", "06.goal_kv", "06.nodes", "06.slo_ttft", "06.slo_tbt", "06.tail")
claim("06.sol_kv", "(0.9 × 640 × 2**30 − 138e9 B) / 327,680 B per token ≈ 1.47 M tokens; // 12,000 → 122 sequences",
      lambda: (_frac(), _n().hbm_bytes / 2**30, 2, 30, _m().weight_bytes(), _m().kv_bytes_per_token(),
               _cap_tokens() / 1e6, _ex()._CTX, _ex()._max_batch()), where="solutions")
claim("06.sol_tail", "longest 10 of 100 intervals: (p + 20 ms) and nine plain 20 ms steps → (p + 0.2 s) / 10",
      lambda: (_ex()._INTERVALS // 10, _ex()._INTERVALS, 1e3 * _ex()._STEP_S, 1e3 * _ex()._STEP_S,
               _ex()._INTERVALS // 10 * _ex()._STEP_S, _ex()._INTERVALS // 10), where="solutions")
