"""Claims of lecture 04: every number its markdown and exercise strings state (see :mod:`mooncake_lab.claims`).

The worked example (section 2) does not depend on the trace. Sections 3–5 state the numbers of the
released conversation trace (``trace="released"``); the notebook's cells print this run's.
"""
from __future__ import annotations

from functools import lru_cache

from . import claim, default_of, not_a_claim, restate, when
from .. import paper
from .lecture00 import at_least

R = "released"
_FIG8 = paper.FIG8_SOURCE
_P8 = paper.FIG8_TTFT_S


def _s():
    from ..experiments import l04_scheduling
    return l04_scheduling


@lru_cache(maxsize=None)
def _t(threshold: float = 1.0):
    return _s().estimate_table(threshold=threshold)


@lru_cache(maxsize=None)
def _w():
    return _s().worked_example()


def _ex():
    return _s().worked_example_trace()


def _cfg():
    from .. import sim
    return sim.ClusterConfig()


def _h2d_gbs() -> float:
    """The host-to-device bandwidth (GB/s) of the simulator's default node, what ``dram_hbm_load`` charges."""
    from ..hardware import get_node
    return get_node(_cfg().node).h2d_bw / 1e9


def _kv() -> float:
    return _s()._kv_bytes_per_token()


@lru_cache(maxsize=None)
def _comp():
    return _s().policy_comparison("conversation", _s().DEFAULT_REPLAY_SPEED)


@lru_cache(maxsize=None)
def _q():
    return _s().queueing_check(_s().policy_runs("conversation", _s().DEFAULT_REPLAY_SPEED))


@lru_cache(maxsize=None)
def _sweep():
    return _s().speed_sweep("conversation").pivot(index="speed", columns="policy", values="ttft_mean_s")


def _rho1(trace: str = "conversation") -> float:
    return _s().offered_prefill_load(trace)


def _bt() -> int:
    return int(_ex().block_tokens)


def _doc_blocks() -> int:
    return int(_t().loc[0, "best_blocks"])


def _local1() -> int:
    return int(_t().loc[1, "local_blocks"])


def _E_len() -> int:
    return int(_ex().input_len[-1])


def _computed(row: int) -> int:
    return _E_len() - int(_t().loc[row, "cached_tokens"])


def _ca_computed1() -> int:
    return _E_len() - _local1() * _bt()


def _fetch_gb() -> float:
    return (_doc_blocks() - _local1()) * _bt() * _kv() / 1e9


def _rdma_gbs() -> float:
    return _fetch_gb() / _t().loc[1, "transfer_s"]


def _ca_prefill(row: int) -> float:
    t = _t()
    return t.loc[row, "cache_aware_s"] - t.loc[row, "queue_s"]


def _n_prefill() -> int:
    return _cfg().n_prefill


def _cap_blocks() -> int:
    return _cfg().resolve().cache_capacity_blocks


def _cap_tb() -> float:
    from ..experiments.l03_cache import blocks_to_dram_bytes
    return blocks_to_dram_bytes(_cap_blocks()) / 1e12


def _util(p: str) -> float:
    return float(_q().loc[p, "utilisation"])


def _odds(rho: float) -> float:
    return rho / (1 - rho)


def _max_queue_min(policy: str = "random") -> float:
    runs = _s().policy_runs("conversation", _s().DEFAULT_REPLAY_SPEED)
    return float(_s().instance_queues(runs[policy]).max().max() / 60)


def _toolagent_n() -> int:
    from ..traces import cached_trace
    return len(cached_trace("toolagent-like"))


def _bounds() -> dict:
    from ..dashboards.scheduling import BOUNDS
    return BOUNDS


def _on_slider(name: str, v: float) -> float:
    """``v`` if the dashboard's ``name`` control reaches it (log controls: ``capacity_log10`` …), else NaN."""
    lo, hi = _bounds()[name]
    if name.endswith("_log10"):
        lo, hi = 10 ** lo, 10 ** hi
    return float(v) if lo <= v <= hi else float("nan")


def _balanced() -> float:
    """The offered load ρ₀ the lecture's "balanced" replay speeds aim at (``balanced_replay_speed``'s default)."""
    return default_of(_s().balanced_replay_speed, "target")


def _at_1x() -> float:
    """The replay speed ρ₀ is quoted at ("at 1×": ``offered_prefill_load``'s default)."""
    return default_of(_s().offered_prefill_load, "speed")


def _worked_q() -> list:
    """Question 1's "(balancing threshold 1), which prefill instance — 0, 1 or 2": the worked example's
    default threshold, then its instances."""
    return [default_of(_s().worked_example, "threshold"), *map(int, _t().index)]


_FORMULA = "a constant of a formula, not a quantity"
_SAT = "ρ = 1 is where a queue saturates (a utilisation's definition), not a quantity of ours"


def _node_gpus() -> int:
    from ..hardware import A800_NODE
    return A800_NODE.n_gpus


# ---- section 1 --------------------------------------------------------------------------------
claim("04.cluster", "**8 prefill instances + 8 decode instances**", lambda: [paper.FIG8_N_PREFILL, paper.FIG8_N_DECODE],
      source="arXiv v3 §8")
claim("04.node", "8 × A800 running", lambda: _node_gpus())
claim("04.cluster_abbr", "instances** (8P+8D)", lambda: [_cfg().n_prefill, _cfg().n_decode])
claim("04.blocks", "LRU cache of 512-token KV blocks", _bt)
claim("04.capacity", "≈ 2 TB = 11,920 blocks (lecture 03)", lambda: [_cap_tb(), _cap_blocks()])
claim("04.cut", "cuts the prompt into 512-token blocks", _bt)
# the assumptions table (a box in section 1)
claim("04.as_cluster", "| cluster | 8P+8D: nodes of 8 × A800 running LLaMA2-70B | the same, simulated | 8P+8D |", lambda: [
    paper.FIG8_N_PREFILL, paper.FIG8_N_DECODE, _node_gpus(), _cfg().n_prefill, _cfg().n_decode], source="arXiv v3 §8")
claim("04.as_paper_n", "23k real requests (the arXiv trace", lambda: paper.FIG8_REQUESTS / 1000, source="arXiv v3 §8")
claim("04.as_conv_n", "the released conversation trace, 12,031 requests", lambda: _n_requests(), trace=R)
claim("04.as_tool_n", "toolagent-like one, 23,608 requests", _toolagent_n)
claim("04.as_fit", "a fit to prefills up to 8k tokens", lambda: _fit_max_tokens() / 1000)
claim("04.as_load", "replay at 0.4×, where ρ₀ ≈ 1.0 (§4) | 1× |", lambda: [
    _s().DEFAULT_REPLAY_SPEED, _rho1() * _s().DEFAULT_REPLAY_SPEED, _at_1x()], trace=R)
claim("04.as_thr", "| 1: any longer prefix elsewhere qualifies | 1 |", lambda: [
    default_of(_s().worked_example, "threshold"), _cfg().kvcache_balancing_threshold])
claim("04.as_noise", "exact (estimator noise 0;", lambda: _cfg().estimator_noise)
claim("04.as_h2d", "the host-to-device bandwidth, 128 GB/s (FAST'25 Table 1)", _h2d_gbs,
      source="FAST'25 Table 1")
claim("04.as_slo", "| TTFT SLO | 30 s | 30 s, drawn as a dashed line | 30 s |", lambda: [
    paper.SLO_TTFT_S, _plot_slo(), _cfg().ttft_slo_s], source=paper.SLO_SOURCE)
# ---- section 2: the worked example ------------------------------------------------------------
claim("04.A", "went to instance 0,\n  which is still busy with it for ≈ 13.5 s", lambda: [0, _t().loc[0, "queue_s"]])
claim("04.A_doc", "request A, a 16-block document (8,192 tokens)", lambda: [_doc_blocks(), _doc_blocks() * _bt()])
claim("04.B", "first **4** blocks on instance 1", lambda: [_local1(), 1])
claim("04.C", "request C keeps instance 2 busy for another 0.55 s", lambda: [2, _t().loc[2, "queue_s"]])
claim("04.E", "the whole document plus 4 blocks of its own, 10,000 tokens", lambda: [
    len(_ex().blocks_of(len(_ex()) - 1)) - _doc_blocks(), _E_len()])
claim("04.row0", "**instance 0** holds all 16 blocks, so it only computes 1,808 tokens (0.63 s), but 13.5 s of A",
      lambda: [0, _doc_blocks(), _computed(0), _t().loc[0, "prefill_s"], _t().loc[0, "queue_s"]])
claim("04.row0b", "queued in front: 14.14 s", lambda: _t().loc[0, "kvcentric_s"])
claim("04.row1", "**instance 1** holds 4 blocks. Cache-aware computes the other 7,952 tokens: 2.00 s", lambda: [
    1, _local1(), _ca_computed1(), _t().loc[1, "cache_aware_s"]])
claim("04.row1b", "best/local = 16/4 = 4 ≥ 1. It fetches the other 12 blocks in ≈ 23 ms, then computes 1,808 tokens: 0.65 s",
      lambda: [_doc_blocks(), _local1(), _t().loc[1, "ratio"], 1, _doc_blocks() - _local1(),
               _t().loc[1, "transfer_s"] * 1e3, _computed(1), _t().loc[1, "kvcentric_s"]])
claim("04.row1_box", "12 blocks are 6,144 tokens × 320 KiB ≈ 2 GB of KV; at 87 GB/s the copy takes ≈ 23 ms", lambda: [
    _doc_blocks() - _local1(), (_doc_blocks() - _local1()) * _bt(), _kv() / 1024, _fetch_gb(), _rdma_gbs(),
    _t().loc[1, "transfer_s"] * 1e3])
claim("04.row2", "**instance 2** holds nothing (ratio ∞): cache-aware 0.55 + 2.26 = 2.81 s", lambda: [
    2, _t().loc[2, "queue_s"], _ca_prefill(2), _t().loc[2, "cache_aware_s"]])
claim("04.row2b", "0.55 + 0.031 + 0.63 = 1.20 s", lambda: [_t().loc[2, "queue_s"], _t().loc[2, "transfer_s"],
                                                          _t().loc[2, "prefill_s"], _t().loc[2, "kvcentric_s"]])
claim("04.picks", "Cache-aware picks instance 1 and recomputes 7,952 tokens; KVCache-centric picks instance 1 too",
      lambda: [_w().loc["cache_aware", "prefill_instance"], _w().loc["cache_aware", "computed_tokens"],
               _w().loc["kvcentric", "prefill_instance"]])
claim("04.3x", "**3× shorter TTFT for the same request**", lambda: _w().loc["cache_aware", "ttft_s"] / _w().loc["kvcentric", "ttft_s"])
claim("04.sim", "queue + fetch + prefill = 0.65 s", lambda: _w().loc["kvcentric", "ttft_s"])
claim("04.random", "`random` happened to draw instance 0 (3.2 s: 1.2 s of queue left", lambda: [
    _w().loc["random", "prefill_instance"], _w().loc["random", "ttft_s"], _w().loc["random", "queue_wait_s"]])
claim("04.random_table", "13.5 s of the table, where A sits on instance 0", lambda: [_t().loc[0, "queue_s"], 0])
not_a_claim("04.random_inst2", "the table's instance 0", "instance 0 names an instance, not a quantity")
not_a_claim("04.random_inst", "its instance 0 is not the table's", "instance 0 names an instance, not a quantity")
claim("04.load", "is lucky to find 4", lambda: _w().loc["load", "cached_tokens"] / _bt())
claim("04.try_thr", "threshold above 4 (instance 1 may no longer fetch", lambda: [_t().loc[1, "ratio"], 1])
# "… 10 Gbps (computed below: Algorithm 1 fetches where fetching is slower)": the slider's floor, if so there
claim("04.try_net", "network down to 10 Gbps", lambda: when(
    not _s().slow_network(10 ** _bounds()["network_gbps_log10"][0])["fetch_pays"].any(),
    10 ** _bounds()["network_gbps_log10"][0]))
claim("04.try_len", "a 120-block prompt", lambda: _bounds()["example_blocks"][1])
# ---- section 3: offered load --------------------------------------------------------------------
not_a_claim("04.rho_below", "Below 1, even a cache-blind", _SAT)
not_a_claim("04.rho_formula", "(L_i, 0)", "a formula's argument (prefill time with 0 cached tokens), not a quantity")
not_a_claim("04.sum_odds", "queues explode like ρ/(1−ρ)", _FORMULA)
not_a_claim("04.rho_above", "Above 1, only", _SAT)
not_a_claim("04.speed2", "at speed 2 the", "an example of a replay speed (what speed means), not a quantity of ours")
claim("04.rho1", "the prefill work is **2.55×** what 8 prefill nodes", lambda: [_rho1(), _n_prefill()], trace=R)
claim("04.best_paper", "its best policy averaged 6.26 s", lambda: _P8["kvcentric"], source=_FIG8)
claim("04.replay", "We replay at **0.4×**", lambda: _s().DEFAULT_REPLAY_SPEED)
claim("04.rho_at", "* ρ₀ ≈ 1.0 there", lambda: _rho1() * _s().DEFAULT_REPLAY_SPEED, trace=R)
claim("04.differ", "policies differ by 15×", lambda: _P8["random"] / _P8["kvcentric"], source=_FIG8)
claim("04.fit_range", "a fit to prefills of at most 8k tokens", lambda: _fit_max_tokens() / 1000)
claim("04.rho_speed", "each at its own ρ₀ = 1 speed", _balanced)
claim("04.coincide", "means (6.3 s, 62 s) land near the paper's 6.26 s and 60.41 s", lambda: [
    _comp().loc["kvcentric", "ttft_mean_s"], _comp().loc["load", "ttft_mean_s"], _P8["kvcentric"], _P8["load"]], trace=R)
claim("04.steep", "from 0.35× to 0.45× load balancing goes from 13 s to 280 s", lambda: [
    0.35, 0.45, _sweep().loc[0.35, "load"], _sweep().loc[0.45, "load"]], rel_tol=0.02, trace=R)
# ---- section 4 --------------------------------------------------------------------------------
claim("04.tool", "23,608 requests, the size", _toolagent_n)
claim("04.tool_speed", "runs at 0.5×, *its* balanced speed 0.49× rounded (ρ₀ = 2.03 at 1×)", lambda: [
    _s().REPLAY_SPEEDS["toolagent-like"], 1 / _rho1("toolagent-like"), _rho1("toolagent-like"), _at_1x()])
claim("04.box", "Each box spans the 25th–75th percentile of TTFT, whiskers 5–95%", lambda: [
    *_box_percentiles()])
claim("04.slo", "the dashed line the 30 s SLO", lambda: paper.SLO_TTFT_S, source=paper.SLO_SOURCE)
claim("04.comp_speed", "Each policy on the conversation trace at 0.4×", lambda: _s().REPLAY_SPEEDS["conversation"])
claim("04.fig8m_rho", "each workload at its own ρ₀ = 1 speed (the\nsolutions draw it)", _balanced)
claim("04.cal_fit", "a fit to measured prefills of up to 8k tokens (lecture 01)", lambda: _fit_max_tokens() / 1000)
claim("04.mod_speed", "so its ρ₀ = 1 speed is 1.75×, not 0.4×", lambda: [
    _balanced(), _s().preset_check_speed("conversation"), _s().DEFAULT_REPLAY_SPEED], trace=R)
not_a_claim("04.rank1", "(rank 1, the system prompt)", "rank 1 names the most popular block, not a quantity")
# ---- section 5 --------------------------------------------------------------------------------
claim("04.hit_blind", "≈ 13% of prompt tokens", lambda: 100 * _comp().loc["load", "hit_ratio"], trace=R)
claim("04.hit_kvc", "KVCache-centric reuses ≈ 37%", lambda: 100 * _comp().loc["kvcentric", "hit_ratio"], trace=R)
claim("04.ceiling", "infinite-cache ceiling (37.4%", lambda: _inf_hit(), trace=R)
claim("04.busy", "the same 8 nodes are busy ≈ 69% of the time under\n  KVCache-centric, ≈ 94% under load balancing", lambda: [
    _n_prefill(), 100 * _comp().loc["kvcentric", "prefill_busy"], 100 * _comp().loc["load", "prefill_busy"]], trace=R)
claim("04.runaway", "queues of 15+ minutes", lambda: at_least(15, _max_queue_min()), trace=R)
not_a_claim("04.block0", "Block 0 (the system prompt)", "block 0 names a block (the system prompt), not a quantity")
claim("04.pk_busy", "At 0.4× random makes the pool ≈ 93% busy", lambda: [
    _s().DEFAULT_REPLAY_SPEED, 100 * _util("random")], trace=R)
not_a_claim("04.pk_formula", "(1 + C²)/2", _FORMULA + " (Pollaczek–Khinchine)")
claim("04.pk_scv", "C² ≈ 10, because prompts", lambda: _q().loc["random", "service_scv"], trace=R)
claim("04.pk_odds", "ρ/(1−ρ) ≈ 12.5 at 92.6% busy", lambda: [1, _odds(_util("random")), 100 * _util("random")], trace=R)
claim("04.pk_wait", "P-K's 6 minutes is close to the simulated 5", lambda: [
    _q().loc["random", "mg1_wait_s"] / 60, _q().loc["random", "simulated_wait_s"] / 60], trace=R)
claim("04.pk_load", "waits 56 s, not 7 minutes", lambda: [
    _q().loc["load", "simulated_wait_s"], _q().loc["load", "mg1_wait_s"] / 60], trace=R)
claim("04.pk_pool", "least-loaded of 8 queues", _n_prefill)
not_a_claim("04.pk_rho1", "Near ρ = 1 the wait", _SAT)
claim("04.pk_sens", "93% vs 90% busy changes ρ/(1−ρ) from 13 to 9", lambda: [93, 90, 1, _odds(0.93), _odds(0.90)])
claim("04.arxiv_ratio", "~50% cache ratio", lambda: 100 * paper.ARXIV_TABLE1_HIT[float("inf")], rel_tol=0.05,
      source="arXiv v3 Table 1")
claim("04.random_paper", "not random's 92 s", lambda: _P8["random"], source=_FIG8)
# ---- section 6: the network is shared (the measured numbers are printed by the cells) ------------
claim("04.net_gbps", "at 100, 200 and 800 Gbps per prefill node", lambda: list(_s().CONTENTION_GBPS))
claim("04.net_testbed", "800 Gbps is the testbed's 4 × 200 Gbps NICs", lambda: [
    _s().CONTENTION_GBPS[-1], _nic()[0], _nic()[1]], source="FAST'25 §5.1")
claim("04.net_min", "recommends at least 100 Gbps", lambda: _s().CONTENTION_GBPS[0],  # documented as §5.4.2's minimum
      source="FAST'25 §5.4.2")
claim("04.net_speed", "same trace, 0.4×, calibrated preset", lambda: _s().DEFAULT_REPLAY_SPEED)
claim("04.net_rep", "KVCache-centric runs at 100 Gbps without and with contention (band: the blocks\nranked 2–10",
      lambda: [_s().CONTENTION_GBPS[0], 2, _s().contention_replicas()[False].shape[1]])
claim("04.net_rep_n", "(8 instances here", _n_prefill)
claim("04.net_sum", "contention costs little on this trace at 100 Gbps", lambda: _s().CONTENTION_GBPS[0])

# where shared links break Algorithm 1 outright (l04_scheduling.holder_jam)
claim("04.jam_head", "`modern` GPUs on 25 Gbps NICs", lambda: _s().JAM_GBPS)
claim("04.jam_setup2", "on 25 Gbps NICs, with layer-wise", lambda: _s().jam_config().network_gbps)
claim("04.jam_setup", "25 Gbps is a quarter of the 100 Gbps", lambda: [
    _s().JAM_GBPS, _s().CONTENTION_GBPS[0]], source="FAST'25 §5.4.2 (100 Gbps; JAM_GBPS = a quarter of it)")
claim("04.jam_cluster", "on 8 prefill + 8 decode instances", lambda: [
    _s().jam_config().n_prefill, _s().jam_config().n_decode])
claim("04.jam_none", "all 12,031 requests then go to the first holder", lambda: round(
    _jam().loc["kvcentric", "requests"] * _jam().loc["kvcentric", "busiest_share"]), trace=R)
claim("04.jam_sum", "At 25 Gbps under `modern` it breaks", lambda: _s().JAM_GBPS)


@lru_cache(maxsize=None)
def _jam():
    return _s().holder_jam("conversation")


def _nic():
    from .. import hardware
    nd = hardware.get_node(_cfg().node)
    return [nd.nic_count, nd.nic_gbps]


# ---- section 7 --------------------------------------------------------------------------------
claim("04.dash_n", "(12,031 requests on the released trace", lambda: _n_requests(), trace=R)
claim("04.dash_try", "`kvcentric` at 0.45×;\n* 12 prefill instances at 0.6×;\n* a cache of 300 blocks per instance", lambda: [
    _on_slider("speed", 0.45), _on_slider("n_prefill", 12), _on_slider("speed", 0.6), _on_slider("capacity_log10", 300)])
claim("04.dash_noise", "estimator noise 0.5: the Conductor's estimates off by ±50%", lambda: [
    _on_slider("noise", 0.5), 100 * _on_slider("noise", 0.5)])
claim("04.dash_2x", "2× replay, the paper's overload", lambda: _on_slider("speed", 2), source="arXiv v3 Table 3")
# ---- exercises (markdown) ---------------------------------------------------------------------
claim("04.q1", "(balancing threshold 1), which prefill instance — 0, 1\nor 2", _worked_q)
claim("04.q3", "the capacity of 8 prefill instances? Give it to two decimals", _n_prefill)
claim("04.q5", "(The paper's: 92.07 / 6.26 = 14.7.)", lambda: [_P8["random"], _P8["kvcentric"], _P8["random"] / _P8["kvcentric"]],
      source=_FIG8)
claim("04.sum_speed", "replay the trace at **0.4×**, where its offered prefill load without cache is ≈ 1.0 of 8 nodes",
      lambda: [_s().DEFAULT_REPLAY_SPEED, _rho1() * _s().DEFAULT_REPLAY_SPEED, _n_prefill()], trace=R)
claim("04.sum_3x", "our random policy is 3× worse", lambda: _comp().loc["random", "ttft_mean_s"] / _P8["random"], trace=R)
# ---- exercise strings -------------------------------------------------------------------------
E1, E2, E3, E4, E5 = "04.worked_choice", "04.threshold_choice", "04.balanced_speed", "04.hit_gain", "04.random_over_kvcentric"
claim("04.e1_q", "(balancing threshold 1), which prefill instance (0, 1 or 2)", _worked_q, where=E1)
claim("04.e1_why", "instance 1 is idle and already holds 4 of the 16 document blocks: fetching the other 12",
      lambda: [1, _local1(), _doc_blocks(), _doc_blocks() - _local1()], where=E1)
claim("04.e1_why2", "takes ≈ 23 ms, then only 1,808 tokens", lambda: [_t().loc[1, "transfer_s"] * 1e3, _computed(1)], where=E1)
claim("04.e2_q", "kvcache_balancing_threshold = 8", lambda: _high_threshold(), where=E2)
claim("04.e2_hint", "Instance 1's ratio best/local is 16/4 = 4 < 8, so it must use its own 4 blocks; instance 2",
      lambda: [1, _doc_blocks(), _local1(), _t().loc[1, "ratio"], _high_threshold(), _local1(), 2], where=E2)
claim("04.e2_why", "instance 2, although busy for another 0.55 s: fetching all 16 blocks and computing 1,808 tokens "
      "beats recomputing 7,952 tokens on instance 1", lambda: [
          _w8(), _t().loc[2, "queue_s"], _doc_blocks(), _computed(2), _ca_computed1(), 1], where=E2)
claim("04.e3_q", "the capacity of 8 prefill instances? Give it to two decimals", _n_prefill, where=E3)
claim("04.e3_hint", "at 1× is Σ prefill_time(L, 0) / (8 × duration)", lambda: [_at_1x(), 0, _n_prefill()], where=E3)
claim("04.e3_why", "On the released trace ≈ 1/2.55 ≈ 0.39×: the 0.4×", lambda: [
    1, _rho1(), 1 / _rho1(), _s().DEFAULT_REPLAY_SPEED], trace=R, where=E3)
claim("04.e4_why", "over 8 local caches", _n_prefill, where=E4)
claim("04.e5_q", "(The paper's ratio is 92.07 / 6.26 = 14.7.)", lambda: [
    _P8["random"], _P8["kvcentric"], _P8["random"] / _P8["kvcentric"]], where=E5, source=_FIG8)
claim("04.e5_why", "far more than 14.7 here: random leaves 8 independent queues at ~93% utilisation", lambda: [
    _P8["random"] / _P8["kvcentric"], _n_prefill(), 100 * _util("random")], trace=R, where=E5)
not_a_claim("04.e5_why2", "grows like ρ/(1−ρ)", _FORMULA, where=E5)


def _high_threshold() -> float:
    from ..exercises.lecture04 import _HIGH_THRESHOLD
    return _HIGH_THRESHOLD


def _w8() -> int:
    return int(_s().worked_example(threshold=_high_threshold()).loc["kvcentric", "prefill_instance"])


def _fit_max_tokens() -> float:
    from .. import calibration
    df = calibration.load_measured()
    return float(df.loc[df["phase"] == "prefill", "prompt_tokens"].max())


def _box_percentiles():
    from ..plots import scheduling as P
    return [25, 75, *P.BOX_WHISKERS]  # matplotlib's box is the quartiles; whiskers as drawn


def _inf_hit() -> float:
    from .. import prefix_cache as pc
    from ..traces import cached_trace
    return 100 * pc.infinite_cache_hit_ratio(cached_trace("conversation"))


def _n_requests() -> int:
    from ..traces import cached_trace
    return len(cached_trace("conversation"))


# ---- solutions notebook (its introduction repeats the lecture's; the worked answers) -------------
_S = "solutions"
restate(_S, "04.pk_formula", "04.row2b", "04.q3")


def _conv_duration_s() -> float:
    from ..traces import cached_trace
    return float(cached_trace("conversation").duration_s)


def _ttft(policy: str) -> float:
    return float(_comp().loc[policy, "ttft_mean_s"])


claim("04.sol_q1", "instance 0: 13.52 + 0.63 = 14.14 s", lambda: [
    0, _t().loc[0, "queue_s"], _t().loc[0, "prefill_s"], _t().loc[0, "kvcentric_s"]], where=_S)
claim("04.sol_q1b", "instance 1: 0 + 0.023 (12 blocks × 512 tokens × 327,680 B / 87 GB/s) + 0.63 = 0.65 s; instance 2:\n"
      "0.55 + 0.031 + 0.63 = 1.20 s. The minimum is **instance 1**", lambda: [
          1, _t().loc[1, "queue_s"], _t().loc[1, "transfer_s"], _doc_blocks() - _local1(), _bt(), _kv(), _rdma_gbs(),
          _t().loc[1, "prefill_s"], _t().loc[1, "kvcentric_s"], 2, _t().loc[2, "queue_s"], _t().loc[2, "transfer_s"],
          _t().loc[2, "prefill_s"], _t().loc[2, "kvcentric_s"], _w().loc["kvcentric", "prefill_instance"]], where=_S)
claim("04.sol_q2", "`kvcache_balancing_threshold = 8`", _high_threshold, where=_S)
claim("04.sol_q2b", "Instance 1's ratio best/local = 16/4 = 4 < 8, so it must use its own 4 blocks: 2.00 s.",
      lambda: [1, _doc_blocks(), _local1(), _t().loc[1, "ratio"], _high_threshold(), _local1(),
               _t(_high_threshold()).loc[1, "kvcentric_s"]], where=_S)
claim("04.sol_q2c", "Instance 2 has no local prefix (ratio ∞) and still fetches all 16 blocks",
      lambda: [2, _doc_blocks()], where=_S)
claim("04.sol_q2d", "Instance 0 stays at 14.14 s. The minimum is **instance 2** — busy, but it computes 1,808 tokens "
      "instead of 7,952", lambda: [0, _t(_high_threshold()).loc[0, "kvcentric_s"], _w8(), _computed(2), _ca_computed1()],
      where=_S)
claim("04.sol_q3", "ρ₀(s) = s × ρ₀(1×) = s × 2.55 on the real trace (72,278 s of\nprefill work / (8 × 3,537 s)). "
      "ρ₀ = 1 at s = 1 / 2.55 ≈ **0.39×**, which the lecture rounds to 0.4×", lambda: [
          1, _rho1(), _rho1() * _n_prefill() * _conv_duration_s(), _n_prefill(), _conv_duration_s(), 1, 1, _rho1(),
          1 / _rho1(), _s().DEFAULT_REPLAY_SPEED], where=_S, trace=R)
claim("04.sol_q4", "about 0.272 / 0.125 ≈ **2.2×** on the real trace", lambda: [
    _comp().loc["cache_aware", "hit_ratio"], _comp().loc["load", "hit_ratio"],
    _comp().loc["cache_aware", "hit_ratio"] / _comp().loc["load", "hit_ratio"]], where=_S, trace=R)
claim("04.sol_q4b", "over 8 caches", _n_prefill, where=_S)
claim("04.sol_q5", "(The paper's: 92.07 / 6.26 = 14.7.)", lambda: [
    _P8["random"], _P8["kvcentric"], _P8["random"] / _P8["kvcentric"]], where=_S, source=_FIG8)
claim("04.sol_q5b", "≈ 295 / 6.34 ≈ **47×** on the real trace — three times the paper's 14.7×", lambda: [
    _ttft("random"), _ttft("kvcentric"), _ttft("random") / _ttft("kvcentric"), _P8["random"] / _P8["kvcentric"]],
    where=_S, trace=R, source=_FIG8)
claim("04.sol_q5c", "at 93% utilisation with C² ≈ 10 each of its 8\nindependent queues", lambda: [
    100 * _util("random"), _q().loc["random", "service_scv"], _n_prefill()], where=_S, trace=R)
claim("04.sol_q5d", "(P-K: ρ/(1−ρ) · E[S] · (1 + C²)/2 ≈ 12.5 × 5.4 s × 5.3 ≈ 6 min)", lambda: [
    1, 1, 2, _odds(_util("random")), _q().loc["random", "mean_service_s"],
    (1 + _q().loc["random", "service_scv"]) / 2, _q().loc["random", "mg1_wait_s"] / 60], where=_S, trace=R)


def _plot_slo() -> float:
    from ..plots import scheduling as P
    return P._SLO_S

# ---- FAST'25 Figs. 5, 13, 14 (issue 26 §1) and the prefill cache of §2
_F5 = paper.FAST25_FIG5_SOURCE


def _tb_tokens_m() -> float:
    from ..experiments import l03_cache
    return l03_cache.DRAM_BYTES_PER_TB / _kv() / 1e6


claim("04.f5_as_cluster", "| cluster of Fig. 5 | 16 nodes of 8 × A800; the prefill/decode split not stated | 8P+8D (§3) |",
      lambda: [paper.FAST25_FIG5_NODES, _node_gpus(), _s().fig5_config()["n_prefill"], _s().fig5_config()["n_decode"]],
      source=_F5)
claim("04.f5_as_load", "Fig. 5: 1×; Fig. 8: replay", lambda: _s().FIG5_SPEED)
claim("04.f5_as_cache", "≈ 1 TB ≈ 3M tokens per node (FAST'25 §2.2, §5.3) | Figs. 5, 13: 1 TB, lecture 03's 5,960 blocks",
      lambda: [1, paper.TOKENS_PER_TB_M, 1, _s().fig5_cache_blocks()], source="FAST'25 §2.2")
claim("04.f5_nodes", "on 16 nodes of 8 × A800", lambda: [paper.FAST25_FIG5_NODES, _node_gpus()], source=_F5)
claim("04.f5_cache", "with 1 TB of cache per prefill node", lambda: __import__("mooncake_lab.experiments.l03_cache", fromlist=["x"]).DRAM_BYTES_PER_TB / 1e12)
claim("04.f5_box_nodes", "§4.2 names 16 nodes but not how many prefill. We run 8 prefill + 8 decode nodes",
      lambda: [paper.FAST25_FIG5_NODES, _s().fig5_config()["n_prefill"], _s().fig5_config()["n_decode"]], source=_F5)
claim("04.f5_box_cache", "1 TB of DRAM, ≈ 3M tokens: lecture 03's 5,960 blocks",
      lambda: [1, _tb_tokens_m(), _s().fig5_cache_blocks()], rel_tol=0.05)
claim("04.f14", "A 128k-token prompt with 95% of it cached", lambda: [paper.FAST25_FIG14["prompt_tokens"] / 1024,
                                                                     100 * paper.FAST25_FIG14["cached_share"]],
      source=paper.FAST25_FIG14_SOURCE)
claim("04.f13", "The paper sweeps 24 to 400 Gbps on its synthetic trace,\nlinks shared, and recommends at least 100 Gbps",
      lambda: [*paper.FAST25_FIG13_GBPS_RANGE, paper.FAST25_FIG13_MIN_GBPS], source=paper.FAST25_FIG13_SOURCE)
not_a_claim("04.pk_main", "saturation a queue's wait grows like ρ/(1−ρ)", _FORMULA)
