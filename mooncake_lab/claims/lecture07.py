"""Claims of lecture 07: every number its markdown and exercise strings state (see :mod:`mooncake_lab.claims`).

The lecture's runs are on the toolagent-like trace, which is synthetic (the same with or without the
released traces): its claims are trace-independent. Sentences about the conversation trace are
computed in the notebook (``ov.describe_*``), not claimed.
"""
from __future__ import annotations

import math
from functools import lru_cache

from . import claim, restate
from .. import paper

_TABLE3 = "arXiv 2407.00079 v3, Table 3"


def _ov():
    from ..experiments import l07_overload as ov
    return ov


@lru_cache(maxsize=None)
def _comp():
    return _ov().overload_comparison("toolagent-like")


@lru_cache(maxsize=None)
def _sweep():
    return _ov().speed_sweep("toolagent-like", progress=False)


@lru_cache(maxsize=None)
def _regimes():
    return _ov().regime_table("toolagent-like", progress=False)


def _regime(kind: str):
    return _regimes().loc[[r for r in _regimes().index if kind in r][0]]


def _holds():
    ov, sw = _ov(), _sweep()
    return [s for s in sw.speed.unique() if ov.paper_ordering_holds(sw[sw.speed == s].set_index("policy")["rejected"])]


def _kv_k() -> float:
    return _ov().DEFAULT_CONFIG["decode_kv_capacity_tokens"] / 1e3


def _cfg():
    from .. import sim
    return sim.ClusterConfig(**_ov().DEFAULT_CONFIG)


def _gpus() -> int:
    from ..hardware import get_node
    return get_node("a800x8").n_gpus


def _real():
    ov = _ov()
    cap = ov.real_kv_capacity_tokens()
    return cap, ov.requests_per_node(cap)


def _example():
    """Section 2's worked decode-load example on the modern preset's cost coefficients."""
    from ..sim.admission import decode_load
    c = _cfg().resolve().cost
    cap = _ov().DEFAULT_CONFIG["decode_kv_capacity_tokens"]
    return (cap, 3, 9_000, 27_000, decode_load(c, 3.0, 27_000.0, cap, 0.1), 15_000, 42_000, cap,
            decode_load(c, 4.0, 42_000.0, cap, 0.1), _cfg().admission_threshold)


# ---- parameters that recur (every occurrence is covered by one claim per place) -----------------
for _where in ("notebook", "07.corr_sign", "07.most_completed", "07.requests_per_node", "07.wasted_prefill",
               "07.crossover_speed"):
    _sfx = _where.replace("07.", "")
    claim(f"07.speed_{_sfx}", "2×", lambda: _ov().DEFAULT_SPEED, where=_where, source=f"{_TABLE3}: 2× replay")
for _where in ("notebook", "07.requests_per_node"):
    claim(f"07.kv_{_where.replace('07.', '')}", "40,000", lambda: _ov().DEFAULT_CONFIG["decode_kv_capacity_tokens"],
          where=_where)
for _where in ("notebook", "07.wasted_prefill"):
    claim(f"07.kvk_{_where.replace('07.', '')}", "40k", _kv_k, where=_where)
    claim(f"07.pd_{_where.replace('07.', '')}", "8P+8D", lambda: (_cfg().n_prefill, _cfg().n_decode), where=_where)

# ---- notebook ---------------------------------------------------------------------------------
claim("07.paper_setup", "on 8 prefill + 8 decode nodes with the trace replayed at 2× speed",
      lambda: (paper.TABLE3_SETUP["n_prefill"], paper.TABLE3_SETUP["n_decode"], paper.TABLE3_SETUP["speed"]),
      source=_TABLE3)
claim("07.gpus", "an 8-GPU node", _gpus)
claim("07.ttft_slo", "TTFT SLO (30 s)", lambda: _cfg().ttft_slo_s, source="arXiv v3 §8")
claim("07.tbt_slo", "TBT SLO (0.1 s)", lambda: _cfg().tbt_slo_s, source="arXiv v3 §8")
claim("07.theta", "θ = 1 means exactly at the SLO", lambda: _cfg().admission_threshold)
claim("07.theta_paper", "the threshold θ = 1", lambda: _cfg().admission_threshold)
claim("07.example", "A decode node with 40,000 tokens of KV capacity holds 3 requests of 9,000 tokens (27,000 tokens). "
      "Its memory load is 0.675. A fourth request of 15,000 tokens would make it 42,000 / 40,000 = 1.05 > 1",
      _example)
claim("07.horizon", "between now (0) and the end of the prefill (1); the dashboard's slider goes on to 2",
      lambda: (0.0, 1.0, __import__("mooncake_lab.dashboards.overload", fromlist=["BOUNDS"]).BOUNDS["horizon"][1]))
claim("07.real_node", "A real decode node (8 × A800", _gpus)
claim("07.real_kv", "holds ≈ 1.47 M tokens of KV", lambda: _real()[0] / 1e6)
claim("07.real_requests", "≈ 172 toolagent-like requests of mean size", lambda: _real()[1])
claim("07.calibrated_loads", "mean prefill load ≈ 0.87, decode load ≈ 0.48",
      lambda: (_regime("real node")["prefill_load_mean"], _regime("real node")["decode_load_mean"]))
claim("07.same_rejected", "the **same** 2,195 requests", lambda: _regime("real node")["rejected_baseline"])
claim("07.sem_calibrated", "(§3's 2,195 rejections came from the slower `calibrated` prefill.)",
      lambda: _regime("real node")["rejected_baseline"])
claim("07.fit", "(≈ 4.7 requests instead of ≈ 172)",
      lambda: (_ov().requests_per_node(_ov().DEFAULT_CONFIG["decode_kv_capacity_tokens"]), _real()[1]))
claim("07.too_large", "the 220 toolagent-like requests", lambda: _comp().loc["early", "rejected_too_large"])
claim("07.baseline_waste", "rejects 2,135 requests after their prefill (yellow), throwing away ≈ 1,926 s of prefill",
      lambda: (_comp().loc["baseline", "rejected_after_prefill"], _comp().loc["baseline", "wasted_prefill_s"]),
      )
claim("07.pred_vs_early", "3,208 against 4,041 (the paper: 3,589 < 3,771)",
      lambda: (_comp().loc["predicted", "rejected"], _comp().loc["early", "rejected"],
               paper.TABLE3_REJECTED["predicted"], paper.TABLE3_REJECTED["early"]), source=_TABLE3)
claim("07.pred_completes", "completes 833 more",
      lambda: _comp().loc["predicted", "completed"] - _comp().loc["early", "completed"])
claim("07.pred_tbt", "rise from 1,048 to 4,941. Prediction serves 3,060 *fewer*",
      lambda: (_comp().loc["early", "missed_tbt"], _comp().loc["predicted", "missed_tbt"],
               _comp().loc["early", "goodput"] - _comp().loc["predicted", "goodput"]))
claim("07.paper_baseline", "the most (4,183)", lambda: paper.TABLE3_REJECTED["baseline"], source=_TABLE3)
claim("07.idle_prefill", "the prefill pool is ≈ 1 % loaded, so 1,926 wasted seconds",
      lambda: (100 * _comp().loc["baseline", "prefill_load_mean"], _comp().loc["baseline", "wasted_prefill_s"]),
      )
claim("07.crossing", "cross at ≈ 1.4×, between the swept 1.25× and 1.5×",
      lambda: (_ov().crossing_speed(_sweep()), max(s for s in _sweep().speed.unique() if s < _ov().crossover_speed(_sweep())),
               _ov().crossover_speed(_sweep())))
claim("07.mild", "≤ 1.25×", lambda: max(_holds()))
def _deep() -> float:
    """The speed from which the baseline rejects fewer than early, checked to hold at every faster swept speed."""
    ov, sw = _ov(), _sweep()
    s, flipped = ov.crossover_speed(sw), ov.sweep_regimes(sw)["flipped"]
    if flipped != [v for v in sorted(sw.speed.unique()) if v >= s]:
        raise AssertionError(f"the baseline rejects fewer than early at {flipped}, not at every speed from {s:g}×")
    return s


def _fewest() -> float:
    """The one swept speed at which the baseline rejects the fewest of all three policies."""
    fewest = _ov().sweep_regimes(_sweep())["fewest"]
    if len(fewest) != 1:
        raise AssertionError(f"the baseline rejects the fewest at {fewest}, not at one speed")
    return fewest[0]


claim("07.deep", "(≥ 1.5×): the baseline rejects fewer than early rejection**, and at 2× the fewest of all",
      lambda: (_deep(), _fewest()))
claim("07.td_used", "use the derived t_d: ≈ 2.7 s on toolagent-like",
      lambda: _ov().decode_time_estimate("toolagent-like"))
claim("07.td_default", "The simulator's default of 10 s is not used", lambda: _default().decode_time_s)
claim("07.dash_theta", "Threshold θ starts at 1, at the SLO",
      lambda: __import__("inspect").signature(
          __import__("mooncake_lab.dashboards.overload", fromlist=["OverloadDashboard"]).OverloadDashboard.__init__
      ).parameters["threshold"].default)
claim("07.sizes", "(≈ 21k tokens vs ≈ 9–10k at 2×",
      lambda: (_comp().loc["baseline", "rejected_kv_mean"] / 1e3, _comp().loc["predicted", "rejected_kv_mean"] / 1e3,
               _comp().loc["early", "rejected_kv_mean"] / 1e3, _ov().DEFAULT_SPEED))
claim("07.fewer_completed", "completes 1,686 fewer requests than",
      lambda: _comp().loc["baseline", "completed"] - _comp().loc["early", "completed"])
claim("07.hair", "(by a hair at 0.75×)", lambda: _ov().SWEEP_SPEEDS[0])
claim("07.both_loaded", "(calibrated prefill, 1×, 40k-token nodes)",
      lambda: (_ov().REGIMES["both pools loaded (calibrated, 1×)"][0],
               _ov().REGIMES["both pools loaded (calibrated, 1×)"][1]["decode_kv_capacity_tokens"] / 1e3))
claim("07.both_loaded_counts", "(10,276 vs 8,973)",
      lambda: (_regime("both pools")["rejected_predicted"], _regime("both pools")["rejected_early"]))
claim("07.paper_share", "rejected 3,589 to 4,183 of its ≈ 23,000 requests (16–18 %)",
      lambda: (paper.TABLE3_REJECTED["predicted"], paper.TABLE3_REJECTED["baseline"], paper.TABLE3_SETUP["requests"],
               100 * paper.TABLE3_REJECTED["predicted"] / paper.TABLE3_SETUP["requests"],
               100 * paper.TABLE3_REJECTED["baseline"] / paper.TABLE3_SETUP["requests"]), source=_TABLE3)
claim("07.sweep_range", "(0.75× … 2×)", lambda: (min(_ov().SWEEP_SPEEDS), max(_ov().SWEEP_SPEEDS)))
claim("07.summary_slos", "predicted TTFT / 30 s for prefill", lambda: _cfg().ttft_slo_s)
claim("07.summary_td", "≈ 2.7 s on", lambda: _ov().decode_time_estimate("toolagent-like"))

# ---- exercises --------------------------------------------------------------------------------
claim("07.q5_range", "(0.75× … 2×)", lambda: (min(_ov().SWEEP_SPEEDS), max(_ov().SWEEP_SPEEDS)),
      where="07.crossover_speed")
claim("07.q5_grid", "(0.75, 1, 1.25, …)", lambda: _ov().SWEEP_SPEEDS[:3], where="07.crossover_speed")
claim("07.q5_crossing", "(≈ 1.4×, crossing_speed)", lambda: _ov().crossing_speed(_sweep()), where="07.crossover_speed")
claim("07.q1_size", "(≈ 8.5k tokens)",
      lambda: _real()[0] / _real()[1] / 1e3, where="07.requests_per_node")
claim("07.q1_fewer", "fewer than 5",
      lambda: math.ceil(_ov().requests_per_node(_ov().DEFAULT_CONFIG["decode_kv_capacity_tokens"])),
      where="07.requests_per_node")
claim("07.q1_real", "(1.47M tokens) holds ≈ 172", lambda: (_real()[0] / 1e6, _real()[1]), where="07.requests_per_node")
claim("07.q2_idle", "over 8 nodes that are ≈ 1%",
      lambda: (_cfg().n_prefill, 100 * _comp().loc["baseline", "prefill_load_mean"]), where="07.wasted_prefill")

# ---- solutions notebook (its introduction repeats the lecture's; the worked answers) -------------
restate("solutions", "07.kv_notebook", "07.kvk_notebook", "07.paper_setup", "07.pd_notebook",
        "07.speed_notebook", "07.sweep_range")


@lru_cache(maxsize=None)
def _conv_comp():
    return _ov().overload_comparison("conversation")


def _run_s() -> float:
    from ..traces import cached_trace
    return float(cached_trace("toolagent-like").arrival_s.max()) / _ov().DEFAULT_SPEED


def _waste():
    b = _comp().loc["baseline"]
    return b["wasted_prefill_s"], b["rejected_after_prefill"], b["wasted_prefill_s"] / b["rejected_after_prefill"]


def _pivot(speed, policy):
    sw = _sweep()
    return sw[(sw.speed == speed) & (sw.policy == policy)]["rejected"].iloc[0]


def _below() -> float:
    """The swept speed just below the one where the ordering flips."""
    return max(s for s in _sweep().speed.unique() if s < _ov().crossover_speed(_sweep()))


claim("07.sol_q1", "The mean request needs ≈ 8,510 tokens of KV", lambda: _real()[0] / _real()[1],
      where="solutions", rel_tol=1e-3)
claim("07.sol_q1b", "so 40,000 / 8,510 ≈ **4.7 requests**. A real node holds 1.47 M tokens ≈ 172 requests",
      lambda: (_ov().DEFAULT_CONFIG["decode_kv_capacity_tokens"], _real()[0] / _real()[1],
               _ov().requests_per_node(_ov().DEFAULT_CONFIG["decode_kv_capacity_tokens"]), _real()[0] / 1e6,
               _real()[1]), where="solutions", rel_tol=5e-3)
claim("07.sol_q2", "At 2× replay (toolagent-like, 8P+8D, 40k-token decode nodes)",
      lambda: (_ov().DEFAULT_SPEED, _cfg().n_prefill, _cfg().n_decode, _kv_k()), where="solutions")
claim("07.sol_q2_waste", "≈ **1,926 s**, spent on 2,135 requests rejected\nafter prefill (≈ 0.9 s each)",
      _waste, where="solutions")
claim("07.sol_q2_share", "Over a 1,800 s run on 8 prefill nodes that is 1,926 / (8 × 1,800) ≈ 13% of the\n"
      "pool's time — which the pool, ≈ 1% loaded",
      lambda: (_run_s(), _cfg().n_prefill, _waste()[0], _cfg().n_prefill, _run_s(),
               100 * _waste()[0] / (_cfg().n_prefill * _run_s()), 100 * _comp().loc["baseline", "prefill_load_mean"]),
      where="solutions")
claim("07.sol_q3", "At 2× replay, which admission policy", lambda: _ov().DEFAULT_SPEED, where="solutions")
claim("07.sol_q3_counts", "(21,253 vs 20,400 predicted and 19,567 early)",
      lambda: tuple(_comp().loc[p, "completed"] for p in ("baseline", "predicted", "early")), where="solutions")
claim("07.sol_q3_sizes", "average\n≈ 20.6k tokens against ≈ 9.8k for early",
      lambda: (_comp().loc["baseline", "rejected_kv_mean"] / 1e3, _comp().loc["early", "rejected_kv_mean"] / 1e3),
      where="solutions")
claim("07.sol_q4", "Under early rejection at 2× (toolagent-like)", lambda: _ov().DEFAULT_SPEED, where="solutions")
claim("07.sol_q4_r", "(r ≈ −0.16 on toolagent-like", lambda: _comp().loc["early", "load_corr"], where="solutions")
claim("07.sol_q4_conv", "−0.49 on conversation", lambda: _conv_comp().loc["early", "load_corr"], where="solutions",
      trace="released")
claim("07.sol_q5_pivot", "at 1.25× baseline 890 > early 680; at **1.5×** baseline 1,286 < early\n1,450",
      lambda: (_below(), _pivot(_below(), "baseline"), _pivot(_below(), "early"), _ov().crossover_speed(_sweep()),
               _pivot(_ov().crossover_speed(_sweep()), "baseline"), _pivot(_ov().crossover_speed(_sweep()), "early")),
      where="solutions")


def _split_nodes() -> int:
    """The cluster size every split of §8 keeps (8P+8D's 16 nodes)."""
    ov, c = _ov(), _cfg()
    sizes = {n_p + n_d for n_p, n_d in ov.SPLITS} | {c.n_prefill + c.n_decode}
    if len(sizes) != 1:
        raise AssertionError(f"l07_overload.SPLITS do not all keep {c.n_prefill + c.n_decode} nodes: {ov.SPLITS}")
    return sizes.pop()


claim("07.split_nodes", "Keep the same 16", _split_nodes)


# ---- the assumptions table (§3) and what the paper's decode semantics give (§8) -------------------------
def _default():
    from .. import sim
    return sim.ClusterConfig()


def _paper_semantics_loads():
    """Mean prefill and decode load (under baseline) of toolagent-like at 2× with the paper's decode semantics."""
    t = _ov().semantics_table(("toolagent-like",))
    row = t.xs("paper", level="semantics").iloc[0]
    return row["prefill_load_mean"], row["decode_load_mean"]


claim("07.table_paper_trace", "≈ 23,000 real requests (not public)", lambda: paper.TABLE3_SETUP["requests"],
      source=_TABLE3)
claim("07.table_trace", "synthetic, 23,608 requests",
      lambda: len(__import__("mooncake_lab.traces", fromlist=["cached_trace"]).cached_trace("toolagent-like")))
claim("07.table_cluster", "8 prefill + 8 decode nodes of 8 × A800",
      lambda: (paper.TABLE3_SETUP["n_prefill"], paper.TABLE3_SETUP["n_decode"], _gpus()), source=_TABLE3)
claim("07.table_cluster_ours", "| 8P+8D, simulated | 8P+8D |",
      lambda: (_cfg().n_prefill, _cfg().n_decode, _default().n_prefill, _default().n_decode))
claim("07.table_kv_default", "the real node's ≈ 1.47 M tokens",
      lambda: float(_default().resolve().decode_kv_capacity) / 1e6)
claim("07.table_td_default", "| 10 s |", lambda: _default().decode_time_s)
claim("07.table_slos", "TTFT 30 s, TBT 0.1 s", lambda: (_cfg().ttft_slo_s, _cfg().tbt_slo_s), source="arXiv v3 §8")
claim("07.paper_semantics_loads", "the mean prefill load is 0.02 and the mean decode load 0.14",
      _paper_semantics_loads)
