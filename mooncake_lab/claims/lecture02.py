"""Claims of lecture 02: every number its markdown and exercise strings state (see :mod:`mooncake_lab.claims`).

Values come from the package (models, hardware, storage, the lecture's experiments module, paper.py);
nothing here depends on a trace. Grouped by sentence or table row, in notebook order. A number inside a
name ("LLaMA2-70B", "OPT-13B", "FAST'25") is a reference: not compared (claims.REFERENCES).
"""
from __future__ import annotations

import math
from functools import lru_cache

from . import answer_of, claim, not_a_claim, when


@lru_cache(maxsize=None)
def _v() -> dict:
    """Every number lecture 02 states, computed once."""
    from .. import paper
    from .. import storage as st
    from ..experiments import l02_storage as l02
    from ..hardware import A800_NODE, H800_NODE, SSD_DRIVE_READ_BW
    from ..models import DEEPSEEK_V3, LLAMA2_70B, LLAMA3_70B, OPT_13B

    nd = A800_NODE
    fp = l02.kv_footprint().set_index("model")
    sp = l02.reload_vs_recompute(l02.FOOTPRINT_MODELS, nd).pivot(index="model", columns="tier", values="speedup")
    cross = l02.crossover_table(node=nd).set_index("model")
    window, ssd = l02.ssd_claims(nd)
    ssd = ssd.set_index("bandwidth_gbs")
    half = l02.request_breakdown("llama2-70b", nd, n_tokens=l02.REQUEST_TOKENS, hit_fraction=0.5)
    opt7 = l02.request_breakdown("opt-13b", nd, n_tokens=l02.REQUEST_TOKENS, hit_fraction=0.5, bandwidth_gbs=7.0)
    store = l02.layerwise_store("llama2-70b", nd)
    f7, f7i = l02.fig7_comparison("llama2-70b", nd), l02.fig7_implied_store("llama2-70b")
    eq2 = {n: st.eq2_min_bandwidth("llama3-70b", n, 8192) / 1e9 for n in ("a800x8", "h800x8")}
    ours100 = {n: st.breakeven_bandwidth("llama3-70b", n, 8192, mfu=1.0) / 1e9 for n in ("a800x8", "h800x8")}
    m2, m3, opt, ds = LLAMA2_70B, LLAMA3_70B, OPT_13B, DEEPSEEK_V3
    return dict(
        paper=paper, st=st, l02=l02, nd=nd, h800=H800_NODE, fp=fp, sp=sp, cross=cross, window=window, ssd=ssd,
        half=half, opt7=opt7, store=store, f7=f7, f7i=f7i, eq2=eq2, ours100=ours100, m2=m2, m3=m3, opt=opt,
        ds=ds, drive=SSD_DRIVE_READ_BW / 1e9, mfu=st.SEED_MFU, p=st.DEFAULT_PREFIX,
        recompute=st.recompute_time("llama2-70b", nd, st.DEFAULT_PREFIX),
        ten_x=st.breakeven_bandwidth("llama2-70b", nd, speedup=10) / 1e9,
        tokens_tb=1e12 / m2.kv_bytes_per_token(),
    )


def _x(k):
    return _v()[k]


def _bw_range():
    from ..dashboards.storage import _BW_LOG10
    return _BW_LOG10


def _rdma_measured() -> float:
    """The node's effective RDMA bandwidth, B/s (cpp.network_bandwidth: FAST'25's measured 87 GB/s)."""
    from ..cpp import network_bandwidth
    return network_bandwidth("llama2-70b", _x("nd"))


def _kv(m):
    return _x(m).kv_bytes_per_token()


def _h800_one_drive_prefix() -> float:
    """Prefix length (tokens) below which FAST'25 Eq. 2 on 8×H800 asks more than one NVMe drive gives."""
    st, lo, hi = _x("st"), 512.0, 131072.0
    f = lambda p: st.eq2_min_bandwidth("llama3-70b", "h800x8", p) / 1e9 - _x("drive")  # noqa: E731
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if f(mid) > 0 else (lo, mid)
    return lo


def _claim_x(model: str, key: str) -> float:
    """The speedup at which ``l02.ssd_claims`` puts a statement's threshold (``lo_gbs``: claim A, "> 10×";
    ``hi_gbs``: claim B, "< 1×"): the threshold over the break-even bandwidth (reload time ∝ 1 / bandwidth)."""
    return _x("window")[key] / (_x("st").breakeven_bandwidth(model, _x("nd")) / 1e9)


def _seed_x() -> float:
    """The speedup of statement A ("more than 10× from SSD", §3) for LLaMA2-70B: 10."""
    return _claim_x("llama2-70b", "lo_gbs")


def _ex_x() -> float:
    """The speedup exercise 02.ssd_10x asks the bandwidth for (10)."""
    return answer_of("02.ssd_10x") / (_x("st").breakeven_bandwidth("llama2-70b", _x("nd")) / 1e9)


def _eq2_p() -> float:
    """Prefix of exercise 02.eq2_h800, tokens: the paper's Eq. 2 prefix if the answer is Eq. 2 there, else NaN."""
    p = _x("paper").EQ2_MIN_GBS["h800x8"][0]
    return when(math.isclose(answer_of("02.eq2_h800"), _x("st").eq2_min_bandwidth("llama3-70b", _x("h800"), p) / 1e9), p)


def _tb() -> list:
    """Exercise 02.dram_tokens' "1 TB (10¹² B)": [TB, bytes]."""
    from ..exercises.lecture02 import ONE_TB
    return [ONE_TB / 1e12, ONE_TB]


def _f7_k(pick) -> float:
    """``pick`` (min or max) of the paper's Fig. 7 prompt lengths, k tokens."""
    return pick(_x("paper").FIG7_STORE_LATENCY_S["serialized"]) / 1024


def _ideal_efficiency() -> float:
    """The share of peak the ``ideal`` preset's prefill reaches (1: 100%)."""
    from ..calibration import IDEAL
    effs = {e for _, e in IDEAL.linear_efficiency} | {e for _, e in IDEAL.attn_efficiency}
    return effs.pop() if len(effs) == 1 else math.nan


_FORMULA = "a constant of a formula, not a quantity"
_LAYER = "a layer's index (i + 1: the next layer), not a quantity"


def _eq2_hand(node) -> float:
    """FAST'25 Eq. 2 by hand for LLaMA3-70B at p = 8,192: G × 4,096 B / (26 × 8,192²), GB/s."""
    m, p = _x("m3"), 8192
    per_layer = _kv("m3") / m.n_layers
    return node.peak_flops * per_layer / (_x("paper").EQ1_A * p * m.d_model + _x("paper").EQ1_B * m.d_model ** 2) / 1e9


# --- introduction and the assumptions table ------------------------------------------------------
claim("02.intro_node", "Every run uses one node of 8 × A800", lambda: _x("nd").n_gpus)
claim("02.intro_mfu", "**60% of peak**", lambda: 100 * _x("mfu"))
claim("02.as_node", "| 8 × A800 GPUs and 4 × 200 Gbps RDMA NICs (FAST'25 §5.1) | the same: 2.496 PFLOP/s",
      lambda: [_x("nd").n_gpus, _x("nd").nic_count, _x("nd").nic_gbps, _x("nd").peak_flops / 1e15],
      source="FAST'25 §5.1")
claim("02.as_mfu", "| 60% of peak for every recompute time", lambda: 100 * _x("mfu"))
claim("02.as_ideal", "preset, 100% of peak |", lambda: 100 * _ideal_efficiency())
claim("02.as_prefix", "| 8,192 tokens in the Eq. 2 example | 4,096 tokens in per-token comparisons",
      lambda: [_x("paper").EQ2_MIN_GBS["a800x8"][0], _x("p")], source="FAST'25 §2.3")
claim("02.as_request", "8,700 in §4's request", lambda: _x("l02").REQUEST_TOKENS)
claim("02.as_h2d", "| 128 GB/s per node (FAST'25 Table 1) | 128 GB/s |",
      lambda: [_x("paper").H2D_BW / 1e9, _x("nd").tier("dram").bandwidth / 1e9], source="FAST'25 Table 1")
claim("02.as_store", "Fig. 7's bars imply ≈ 52 GB/s | 128 GB/s, the host-to-device",
      lambda: [_x("f7i")["bandwidth_gbs"], _x("nd").h2d_bw / 1e9])
claim("02.as_rdma", "| 87 GB/s measured over the 4 NICs (FAST'25 §5.4.1) | 100 GB/s, the NICs' line rate",
      lambda: [_rdma_measured() / 1e9, _x("nd").nic_count, _x("nd").tier("remote_dram").bandwidth / 1e9],
      source="FAST'25 §5.4.1")
claim("02.as_rdma_sim", "RDMA efficiency: 87 GB/s with `calibrated`", lambda: _rdma_measured() / 1e9)
claim("02.as_ssd", "| 8 NVMe drives × 7 GB/s = 56 GB/s (drive count",
      lambda: [_x("nd").ssd_drives, _x("drive"), _x("nd").ssd_bw / 1e9])
claim("02.as_layers", "a two-stage pipeline over the 80 layers", lambda: _x("m2").n_layers)
claim("02.as_eq1", "| Eq. 1: *a* = 4, *b* = 22 (§6)", lambda: [_x("paper").EQ1_A, _x("paper").EQ1_B],
      source="FAST'25 Eq. 1")

# --- 1 · KV bytes ----------------------------------------------------------------------------------
not_a_claim("02.kv_formula", r"2 \times L \times H_{kv} \times d_{head} \times s", _FORMULA + " (K and V)")
claim("02.kv_s", "*s* = 2 bytes", lambda: _x("m2").kv_bytes_per_elem)
claim("02.mha_heads", "each of the 40 query heads", lambda: _x("opt").n_heads)
claim("02.mha_kv", "2 × 40 × 40 × 128 × 2 B = **819,200 B = 800",
      lambda: [2, _x("opt").n_layers, _x("opt").n_kv_heads, _x("opt").d_head, _x("opt").kv_bytes_per_elem,
               _kv("opt"), _kv("opt") / 1024])
claim("02.gqa_heads", "64 query heads share 8", lambda: [_x("m2").n_heads, _x("m2").n_kv_heads])
claim("02.gqa_kv", "2 × 80 × 8 × 128 × 2 B = **327,680 B = 320 KiB** per token — a model five times larger stores 2.5×",
      lambda: [2, _x("m2").n_layers, _x("m2").n_kv_heads, _x("m2").d_head, _x("m2").kv_bytes_per_elem, _kv("m2"),
               _kv("m2") / 1024, _kv("opt") / _kv("m2")])
claim("02.mla_latent", "512 values plus a\n  64-value", lambda: [_x("ds").kv_lora_rank, _x("ds").d_rope])
claim("02.mla_kv", "61 × (512 + 64) × 2 B = **70,272 B ≈ 69",
      lambda: [_x("ds").n_layers, _x("ds").kv_lora_rank, _x("ds").d_rope, _x("ds").kv_bytes_per_elem, _kv("ds"),
               _kv("ds") / 1024], rel_tol=0.01)
claim("02.recompute_2x", "about 2 × parameters FLOPs",
      lambda: _x("m2").linear_flops_per_token() / _x("m2").layer_matmul_params())
claim("02.per_gflop", "30 kB per GFLOP saved, LLaMA2-70B about 2.3 kB, DeepSeek-V3 under 1",
      lambda: [_x("fp").loc["OPT-13B", "kv_bytes_per_gflop"] / 1e3,
               _x("fp").loc["LLaMA2-70B", "kv_bytes_per_gflop"] / 1e3,
               1 if _x("fp").loc["DeepSeek-V3", "kv_bytes_per_gflop"] < 1e3 else 99])
claim("02.per_gflop_13x", "**13×",
      lambda: _x("fp").loc["OPT-13B", "kv_bytes_per_gflop"] / _x("fp").loc["LLaMA2-70B", "kv_bytes_per_gflop"])

# --- 2 · reload vs recompute ------------------------------------------------------------------------
claim("02.prefix", "*p* = 4,096 tokens", lambda: _x("p"))
claim("02.recompute_mfu", "tokens at 60% of peak", lambda: 100 * _x("mfu"))
claim("02.recompute", "4,096 × 142.8 GFLOP ≈ 585 TFLOP at 0.6 × 2.496 PFLOP/s ≈ **0.39",
      lambda: [_x("p"), _x("m2").prefill_flops(_x("p")) / _x("p") / 1e9, _x("m2").prefill_flops(_x("p")) / 1e12,
               _x("mfu"), _x("nd").peak_flops / 1e15, _x("recompute")])
claim("02.h2d", "(128 GB/s host-to-device per node", lambda: _x("paper").H2D_BW / 1e9, source="FAST'25 Table 1")
claim("02.reload", "4,096 × 327,680 B / 128 GB/s ≈ **10.5",
      lambda: [_x("p"), _kv("m2"), _x("nd").tier("dram").bandwidth / 1e9,
               _x("st").reload_time("llama2-70b", _x("nd"), "dram") * 1e3])
claim("02.tier_dram", "**DRAM ≈ 37×**", lambda: _x("sp").loc["LLaMA2-70B", "dram"])
claim("02.tier_rdma", "**remote DRAM over RDMA ≈ 29×**", lambda: _x("sp").loc["LLaMA2-70B", "remote_dram"])
claim("02.rdma_line_rate", "at the 4 × 200 Gbps line rate, 100 GB/s. FAST'25 measured 87 GB/s for its\n"
      "Transfer Engine over those NICs (the figure lecture 05 uses); there LLaMA2-70B reloads ≈ 25×",
      lambda: [_x("nd").nic_count, _x("nd").nic_gbps, _x("nd").tier("remote_dram").bandwidth / 1e9, _rdma_measured() / 1e9,
               _x("st").reload_speedup("llama2-70b", _x("nd"), "remote_dram", bandwidth=_rdma_measured())],
      source="FAST'25 §5.1 (NICs), §5.4.1 (87 GB/s over 4×200 Gbps)")
claim("02.opt_gain", "2.5× the bytes and a fifth of the FLOPs, gains only ≈ 2–3×",
      lambda: [_kv("opt") / _kv("m2"), int(_x("sp").loc["OPT-13B", ["dram", "remote_dram"]].min()),
               int(_x("sp").loc["OPT-13B", ["dram", "remote_dram"]].max()) + 1])
claim("02.hbm_league", "(16 TB/s across 8", lambda: [_x("nd").peak_hbm_bw / 1e12, _x("nd").n_gpus])

# --- 3 · SSD ------------------------------------------------------------------------------------------
claim("02.stmt_a", "still reloads more than 10× faster from SSD", _seed_x)
claim("02.threshold_a", "A needs bandwidth ≥ 10 ×", _seed_x)
claim("02.window", "between **≈ 34 and ≈ 45", lambda: [_x("window")["lo_gbs"], _x("window")["hi_gbs"]])
claim("02.default_ssd", "**8 NVMe drives × 7 GB/s = 56",
      lambda: [_x("nd").ssd_drives, _x("drive"), _x("nd").ssd_bw / 1e9])
claim("02.default_verdict", "LLaMA2-70B reloads ≈ 16× faster, so A\n  holds. But OPT-13B reloads ≈ 1.25×",
      lambda: [_x("ssd").loc[56.0, "llama2_70b_speedup"], _x("ssd").loc[56.0, "opt_13b_speedup"]])
claim("02.one_drive", "(7 GB/s): OPT-13B is indeed ≈ 6×",
      lambda: [_x("drive"), 1 / _x("ssd").loc[7.0, "opt_13b_speedup"]])
claim("02.one_drive_a", "gains only ≈ 2×, so A fails", lambda: _x("ssd").loc[7.0, "llama2_70b_speedup"])
claim("02.crossover", "≈ 3.4 GB/s for LLaMA2-70B, ≈ 45",
      lambda: [_x("cross").loc["LLaMA2-70B", "breakeven_gbs"], _x("cross").loc["OPT-13B", "breakeven_gbs"]])

# --- 4 · one request --------------------------------------------------------------------------------
claim("02.seed_request", "an 8.7k-token", lambda: _x("l02").REQUEST_TOKENS / 1000)
claim("02.half_tokens", "4,350 new tokens, each attending to the 4,350",
      lambda: [_x("l02").REQUEST_TOKENS - _x("half")["n_cached"].max(), _x("half")["n_cached"].max()])
claim("02.recompute_all", "**recompute all** 8,700", lambda: _x("l02").REQUEST_TOKENS)
not_a_claim("02.layerwise_def", "load layer *i*+1's KV", _LAYER)
claim("02.half_times", "0.86 s. Reusing the cached half cuts TTFT to ≈ 0.45",
      lambda: [_x("half")["total_s"].iloc[0], _x("half")["total_s"].iloc[1:].mean()], rel_tol=0.02)
claim("02.half_exposed", "11–25 ms;\nlayer-wise loading hides all but 1/80",
      lambda: [_x("half")["exposed_load_s"][_x("half")["mode"] == "serialized"].min() * 1e3,
               _x("half")["exposed_load_s"][_x("half")["mode"] == "serialized"].max() * 1e3, 1, _x("m2").n_layers])
claim("02.dash1_bw", "1 GB/s is a slow disk, 128 GB/s host DRAM, 2,000",
      lambda: [10 ** _bw_range()[0], _x("nd").h2d_bw / 1e9, 10 ** _bw_range()[1]])
claim("02.dash1_opt", "Try OPT-13B at 7 GB/s", lambda: _x("drive"))
claim("02.dash1_loses", "(≈ 0.3×).", lambda: _x("opt7")["speedup"].iloc[-1], rel_tol=0.15)

# --- 5 · layer-wise store (Fig. 7) --------------------------------------------------------------------
claim("02.store_formula", "*n* × 320 KiB / 128", lambda: [_kv("m2") / 1024, _x("nd").h2d_bw / 1e9])
not_a_claim("02.store_layer", "while layer *i*+1 computes", _LAYER)
claim("02.fig7_serialized", "0.11 s at 8k tokens to ≈ 0.87 s at 128k.",
      lambda: [_x("paper").FIG7_STORE_LATENCY_S["serialized"][8192], 8,
               _x("paper").FIG7_STORE_LATENCY_S["serialized"][131072], 128], source="arXiv 2407.00079 v3, Fig. 7")
claim("02.fig7_layerwise", "0.1 s at every length,\nso it hides little at 8k and ≈ 89% at 128k.",
      lambda: [_x("f7i")["layerwise_mean_s"], 8,
               100 * (1 - _x("f7")["paper_layerwise_s"].iloc[-1] / _x("f7")["paper_serialized_s"].iloc[-1]), 128],
      rel_tol=0.06, source="arXiv 2407.00079 v3, Fig. 7")
claim("02.fig7_ours", "Our serialized store costs 21 ms at 8k tokens and 0.34 s at 128k (40 GiB of KV at 128 GB/s); the\n"
      "paper's costs 5× as much at 8k and 2.6× at 128k.",
      lambda: [_x("store")["exposed_serialized_s"].iloc[0] * 1e3, 8, _x("store")["exposed_serialized_s"].iloc[-1], 128,
               131072 * _kv("m2") / 2**30, _x("nd").h2d_bw / 1e9,
               _x("f7")["paper_serialized_s"].iloc[0] / _x("f7")["ours_serialized_s"].iloc[0], 8,
               _x("f7")["paper_serialized_s"].iloc[-1] / _x("f7")["ours_serialized_s"].iloc[-1], _f7_k(max)])
claim("02.fig7_implied", "52 GB/s plus\n≈ 0.03", lambda: [_x("f7i")["bandwidth_gbs"], _x("f7i")["fixed_s"]])
claim("02.fig7_table1", "the 128 GB/s host-to-device\nfigure of FAST'25 Table 1",
      lambda: _x("nd").h2d_bw / 1e9)
claim("02.fig7_lw_ours", "1/80 of the serialized one (0.26 ms at 8k), where the paper's costs ≈ 0.1",
      lambda: [1, _x("m2").n_layers, _x("store")["exposed_layerwise_s"].iloc[0] * 1e3, 8, _x("f7i")["layerwise_mean_s"]])
claim("02.fig7_per_layer", "1.3 ms for each of the 80 layers", lambda: [_x("f7i")["per_layer_ms"], _x("m2").n_layers])
claim("02.fig7_ideal", "Our prefill runs at 100% of peak here", lambda: 100 * _ideal_efficiency())

# --- 6 · Eq. 2 -------------------------------------------------------------------------------------------
claim("02.eq2_coef", "*a* = 4, *b* = 22, *d* = 8,192",
      lambda: [_x("paper").EQ1_A, _x("paper").EQ1_B, _x("m3").d_model])
claim("02.eq2_bytes", "2·*d*·*s*/gqa bytes (4,096",
      lambda: [2, 2 * _x("m3").d_model * _x("m3").bytes_per_param / _x("m3").gqa_ratio])
not_a_claim("02.eq2_formula", r"\frac{2ds/\text{gqa}}{a\,p\,d + b\,d^2}$$", _FORMULA + " (K and V; d squared)")
claim("02.eq2_a800_setup", "8,192 on 8 × A800 (*G* = 2.496", lambda: [8192, 8, _x("nd").peak_flops / 1e15])
claim("02.eq2_hand", "2.496e15 × 4,096 / (26 × 8,192²) ≈ **5.9 GB/s**,\nthe paper's \"6 GB/s\". On 8 × H800 it is ≈ **18.6",
      lambda: [_x("nd").peak_flops, 4096, _x("paper").EQ1_A + _x("paper").EQ1_B, 8192 ** 2, _eq2_hand(_x("nd")),
               _x("paper").EQ2_MIN_GBS["a800x8"][1], 8, _eq2_hand(_x("h800"))])
claim("02.eq2_paper_h800", '("19 GB/s")', lambda: _x("paper").EQ2_MIN_GBS["h800x8"][1], source="FAST'25 §2.3")
claim("02.eq2_3x", "An H800 node needs 3×", lambda: _x("eq2")["h800x8"] / _x("eq2")["a800x8"], rel_tol=0.1)
claim("02.eq2_95k", "prefixes below ≈ 95k", lambda: _h800_one_drive_prefix() / 1000, rel_tol=0.03)
claim("02.eq2_vs_ours", "100% of peak our crossover is ≈ 7%",
      lambda: [100, 100 * (1 - _x("ours100")["a800x8"] / _x("eq2")["a800x8"])], rel_tol=0.05)
claim("02.eq2_b", "*b* ≈ 25.5 for LLaMA3-70B rather than 22",
      lambda: [_x("m3").linear_flops_per_token() / (_x("m3").n_layers * _x("m3").d_model ** 2),
               _x("paper").EQ1_B])
claim("02.eq2_a", "(*a* = 4 rather than 2)",
      lambda: [_x("paper").EQ1_A, _x("m3").attention_flops_coefficient() / 2 / (_x("m3").n_layers * _x("m3").d_model)])
claim("02.eq2_60", "this lecture's 60% of peak", lambda: 100 * _x("mfu"))

# --- what the paper says ---------------------------------------------------------------------------------
claim("02.box_kv_paper", "| 320 KB (FAST'25 §2.2) | 327,680 B = 320 KiB | same;",
      lambda: [_x("paper").KV_PER_TOKEN_KB, _kv("m2"), _kv("m2") / 1024], source="FAST'25 §2.2")
claim("02.box_eq2_a800", "p = 8,192 | 6 GB/s (FAST'25 §2.3) | 5.86 GB/s |",
      lambda: [8192, _x("paper").EQ2_MIN_GBS["a800x8"][1], _x("eq2")["a800x8"]], source="FAST'25 §2.3")
claim("02.box_eq2_h800", "p = 8,192 | 19 GB/s (FAST'25 §2.3) | 18.6 GB/s |",
      lambda: [8192, _x("paper").EQ2_MIN_GBS["h800x8"][1], _x("eq2")["h800x8"]], source="FAST'25 §2.3")
claim("02.box_fig7", "(Fig. 7), 8k → 128k tokens | serialized ≈ 0.11 → 0.87 s; layer-wise ≈ 0.1 s at every length | "
      "serialized 21 → 336 ms; layer-wise 0.26 → 4.2 ms | we store at 128 GB/s",
      lambda: [_f7_k(min), _f7_k(max), _x("f7")["paper_serialized_s"].iloc[0], _x("f7")["paper_serialized_s"].iloc[-1],
               _x("f7i")["layerwise_mean_s"], _x("f7")["ours_serialized_s"].iloc[0] * 1e3,
               _x("f7")["ours_serialized_s"].iloc[-1] * 1e3,
               _x("f7")["ours_layerwise_s"].iloc[0] * 1e3, _x("f7")["ours_layerwise_s"].iloc[-1] * 1e3,
               _x("nd").h2d_bw / 1e9], source="arXiv 2407.00079 v3, Fig. 7")
claim("02.box_cli", "Fig. 7's bars at 8k and 128k tokens", lambda: [_f7_k(min), _f7_k(max)])

# --- questions (markdown) -----------------------------------------------------------------------------
claim("02.q2_md", "10×].** Above what SSD bandwidth (GB/s per node) is reloading a 4,096-token",
      lambda: [_ex_x(), _x("p")])
claim("02.q2_md2", "10× faster than recomputing it (prefill at 60% of 8×A800",
      lambda: [_ex_x(), 100 * _x("mfu"), _x("nd").n_gpus])
claim("02.q3_md", "8,192-token LLaMA3-70B prefix on 8 × H800 (989",
      lambda: [_eq2_p(), _x("h800").n_gpus, _x("h800").gpu.flops_bf16 / 1e12])
claim("02.q4_md", "1 TB (10¹²", _tb)
claim("02.q5_md", "7 GB/s NVMe drive, is reloading a 4,096-token", lambda: [_x("drive"), _x("p")])
claim("02.q5_md2", "more than 10× faster than", _seed_x)

# --- summary ---------------------------------------------------------------------------------------------
claim("02.sum_kv", "2·L·H_kv·d_head·s: MHA (OPT-13B, 800 KiB) ≫ GQA (LLaMA2-70B, 320",
      lambda: [2, _kv("opt") / 1024, _kv("m2") / 1024])
claim("02.sum_mla", "(DeepSeek-V3, 69 KiB)", lambda: _kv("ds") / 1024, rel_tol=0.01)
claim("02.sum_node", "On 8 × A800, LLaMA2-70B reloads", lambda: _x("nd").n_gpus)
claim("02.sum_dram", "30–40× faster than it recomputes; it\n  breaks even at only ≈ 3.4",
      lambda: [30 if _x("sp").loc["LLaMA2-70B", "remote_dram"] >= 29 else 0,
               40 if _x("sp").loc["LLaMA2-70B", "dram"] <= 40 else 0, _x("cross").loc["LLaMA2-70B", "breakeven_gbs"]])
claim("02.sum_ssd", '10×" needs ≥ 34', lambda: [_seed_x(), _x("window")["lo_gbs"]])
claim("02.sum_ssd2", "recomputing\" needs\n  < 45", lambda: _x("window")["hi_gbs"])
not_a_claim("02.sum_layerwise", "all but 1/L of the KV", _FORMULA + " (one layer in L)")
claim("02.sum_fig7", "still adds ≈ 0.1 s", lambda: _x("f7i")["layerwise_mean_s"])
claim("02.sum_fig7b", "the store at 128k and little at 8k.", lambda: [_f7_k(max), _f7_k(min)])
claim("02.sum_eq2", "6 GB/s on 8 × A800 and ≈ 19 GB/s on 8 × H800 at p = 8,192",
      lambda: [_x("paper").EQ2_MIN_GBS["a800x8"][1], 8, _x("paper").EQ2_MIN_GBS["h800x8"][1], 8, 8192])

# --- exercises -----------------------------------------------------------------------------------------------
claim("02.x_ratio_hint", "2 × layers × KV heads × head dim × 2 bytes for each: OPT-13B has 40 layers × 40 KV heads, LLaMA2-70B 80 layers × 8 KV heads, both with head dim 128.",
      lambda: [2, _x("m2").kv_bytes_per_elem, _x("opt").n_layers, _x("opt").n_kv_heads, _x("m2").n_layers,
               _x("m2").n_kv_heads, _x("m2").d_head], where="02.kv_ratio")
claim("02.x_ratio_why", "(40 × 40) / (80 × 8) = 2.5: a model 5× smaller stores 2.5× more KV per token. Each of its heads keeps its own K and V (MHA), while LLaMA2-70B's 64 query heads share 8",
      lambda: [_x("opt").n_layers, _x("opt").n_kv_heads, _x("m2").n_layers, _x("m2").n_kv_heads, _kv("opt") / _kv("m2"),
               _x("m2").parameters() / _x("opt").parameters(), _kv("opt") / _kv("m2"), _x("m2").n_heads,
               _x("m2").n_kv_heads], where="02.kv_ratio", rel_tol=0.07)
claim("02.x_10x_q", "4,096-token LLaMA2-70B prefix is 10× faster than recomputing it at 60% of 8×A800",
      lambda: [_x("p"), _ex_x(), 100 * _x("mfu"), _x("nd").n_gpus], where="02.ssd_10x")
claim("02.x_10x_hint", "10 × (bytes to load) / (recompute time): storage.breakeven_bandwidth('llama2-70b', hardware.A800_NODE, speedup=10), or by hand 10 × 4096 × 327,680 B / 0.39",
      lambda: [_ex_x(), _ex_x(), _ex_x(), _x("p"), _kv("m2"), _x("recompute")], where="02.ssd_10x")
claim("02.x_10x_why", "34 GB/s: five PCIe-4 NVMe drives' worth. One drive (7 GB/s) gives only ≈ 2×; the default array of 8 drives (56 GB/s) gives ≈ 16×.",
      lambda: [_x("ten_x"), _x("drive"), _x("ssd").loc[7.0, "llama2_70b_speedup"], _x("nd").ssd_drives,
               _x("nd").ssd_bw / 1e9, _x("ssd").loc[56.0, "llama2_70b_speedup"]], where="02.ssd_10x")
claim("02.x_eq2_q", "8,192-token LLaMA3-70B prefix on 8×H800.", lambda: [_eq2_p(), _x("h800").n_gpus],
      where="02.eq2_h800")
claim("02.x_eq2_hint", "8 × 989 TFLOP/s, 4,096 B per layer, a = 4, b = 22, d = 8,192, p = 8,192.",
      lambda: [_x("h800").n_gpus, _x("h800").gpu.flops_bf16 / 1e12, _kv("m3") / _x("m3").n_layers,
               _x("paper").EQ1_A, _x("paper").EQ1_B, _x("m3").d_model, 8192], where="02.eq2_h800")
claim("02.x_eq2_why", "7.912e15 × 4096 / (26 × 8192²) ≈ 18.6 GB/s — the paper's '19",
      lambda: [_x("h800").peak_flops, 4096, _x("paper").EQ1_A + _x("paper").EQ1_B, 8192 ** 2, _x("eq2")["h800x8"],
               _x("paper").EQ2_MIN_GBS["h800x8"][1]], where="02.eq2_h800")
claim("02.x_tb_q", "1 TB (10¹²", _tb, where="02.dram_tokens")
claim("02.x_tb_hint", "1e12 / (KV bytes per token), with 320 KiB = 320 × 1,024 B (not 320,000",
      lambda: [1e12, _kv("m2") / 1024, _kv("m2") / 1024, 1024, _kv("m2") / 1024 * 1000], where="02.dram_tokens")
claim("02.x_tb_why", "1e12 / 327,680 ≈ 3.05 million tokens — FAST'25's 'about 3M",
      lambda: [1e12, _kv("m2"), _x("tokens_tb") / 1e6, _x("paper").TOKENS_PER_TB_M], where="02.dram_tokens")
claim("02.x_drive_q", "7 GB/s NVMe drive, is reloading a 4,096-token LLaMA2-70B prefix still more than 10×",
      lambda: [_x("drive"), _x("p"), _seed_x()], where="02.one_drive")
claim("02.x_drive_hint", "10× line needs ≈ 34 GB/s (Question 2); compare with 7",
      lambda: [_seed_x(), _x("ten_x"), _x("drive")], where="02.one_drive")
claim("02.x_drive_why", "Only ≈ 2×: '> 10× from SSD'",
      lambda: [_x("ssd").loc[7.0, "llama2_70b_speedup"], _seed_x()], where="02.one_drive")


# --- solutions notebook: the worked answers -------------------------------------------------------
_S = "solutions"


def _bd4096() -> dict:
    return _x("m2").prefill_flops_breakdown(_x("p"))


def _load_gb() -> float:
    return _x("p") * _kv("m2") / 1e9


def _mean_prompt() -> float:
    return _x("paper").FAST25_TABLE2["conversation"]["mean_input"]


claim("02.sol_q1", "KV bytes per token = 2 × layers × KV heads × head dim × 2 B.", lambda: [2, _x("m2").kv_bytes_per_elem],
      where=_S)
claim("02.sol_q1_opt", ": 2 × 40 × 40 × 128 × 2 = 819,200 B (800 KiB, or ≈ 819 kB in decimal units)",
      lambda: [2, _x("opt").n_layers, _x("opt").n_kv_heads, _x("opt").d_head, _x("opt").kv_bytes_per_elem, _kv("opt"),
               _kv("opt") / 1024, _kv("opt") / 1000], where=_S)
claim("02.sol_q1_llama", ": 2 × 80 × 8 × 128 × 2 = 327,680 B (320 KiB)",
      lambda: [2, _x("m2").n_layers, _x("m2").n_kv_heads, _x("m2").d_head, _x("m2").kv_bytes_per_elem, _kv("m2"),
               _kv("m2") / 1024], where=_S)
claim("02.sol_q1_ratio", "Ratio: (40 × 40) / (80 × 8) = 1,600 / 640 = **2.5**", lambda: [
    _x("opt").n_layers, _x("opt").n_kv_heads, _x("m2").n_layers, _x("m2").n_kv_heads,
    _x("opt").n_layers * _x("opt").n_kv_heads, _x("m2").n_layers * _x("m2").n_kv_heads, _kv("opt") / _kv("m2")],
    where=_S)
claim("02.sol_q2", "prefix\n10× faster than recomputing it (60% of 8 × A800 peak)?", lambda: [_ex_x(), 100 * _x("mfu"), _x("nd").n_gpus],
      where=_S)
claim("02.sol_q2_tokens", "a 4,096-token", lambda: _x("p"), where=_S)
claim("02.sol_q2_flop", "4,096 tokens × 137.43 GFLOP (matmuls + LM head) = 562.9 TFLOP, plus causal attention\n"
      "  4 × 80 × 64 × 128 × 4,096 × 2,048 = 22.0 TFLOP → 584.9 TFLOP. At 0.6 × 8 × 312 TFLOP/s =\n"
      "  1.4976 PFLOP/s: **0.3906 s**", lambda: [
          _x("p"), (_bd4096()["linear"] + _bd4096()["lm_head"]) / _x("p") / 1e9,
          (_bd4096()["linear"] + _bd4096()["lm_head"]) / 1e12, 4, _x("m2").n_layers, _x("m2").n_heads, _x("m2").d_head,
          _x("p"), _x("p") / 2, _bd4096()["attention"] / 1e12, _bd4096()["total"] / 1e12, _x("mfu"), _x("nd").n_gpus,
          _x("nd").gpu.flops_bf16 / 1e12, _x("mfu") * _x("nd").peak_flops / 1e15, _x("recompute")], where=_S)
claim("02.sol_q2_bytes", "Bytes to load: 4,096 × 327,680 B = 1.342 GB.", lambda: [_x("p"), _kv("m2"), _load_gb()],
      where=_S)
claim("02.sol_q2_bw", "10× faster means a load time of 0.03906 s: bandwidth = 1.342 GB / 0.03906 s ≈ **34.4 GB/s**",
      lambda: [_ex_x(), _x("recompute") / _ex_x(), _load_gb(), _x("recompute") / _ex_x(),
               when(round(_x("ten_x") / _x("drive")) == 5, _x("ten_x"))], where=_S)  # "— about five PCIe-4 NVMe drives"
claim("02.sol_q3", "for an 8,192-token", _eq2_p, where=_S)
claim("02.sol_q3_setup", "prefix on 8 × H800.", lambda: _x("h800").n_gpus, where=_S)
claim("02.sol_q3_eq", "B = G · (2·d·s/gqa) / (a·p·d + b·d²), with G = 8 × 989 TFLOP/s = 7.912 PFLOP/s,\n"
      "2·d·s/gqa = 2 × 8,192 × 2 / 8 = 4,096 B per token per layer, a·p·d + b·d² = (4 + 22) × 8,192² =\n"
      "1.745e9 FLOP (p = d here). B = 7.912e15 × 4,096 / 1.745e9 ≈ **18.6 GB/s**: the paper's \"19 GB/s\"", lambda: [
          2, _x("h800").n_gpus, _x("h800").gpu.flops_bf16 / 1e12, _x("h800").peak_flops / 1e15, 2,
          2, _x("m3").d_model, _x("m3").kv_bytes_per_elem, _x("m3").n_heads // _x("m3").n_kv_heads,
          _kv("m3") / _x("m3").n_layers, _x("paper").EQ1_A, _x("paper").EQ1_B, 8192 ** 2,
          (_x("paper").EQ1_A + _x("paper").EQ1_B) * 8192 ** 2, _x("h800").peak_flops, _kv("m3") / _x("m3").n_layers,
          (_x("paper").EQ1_A + _x("paper").EQ1_B) * 8192 ** 2, _x("eq2")["h800x8"], _x("paper").EQ2_MIN_GBS["h800x8"][1]],
      where=_S, source="FAST'25 Eq. 2")
claim("02.sol_q3_a800", "node (2.496 PFLOP/s) needs 3.2× less: 5.9 GB/s (\"6 GB/s\")", lambda: [
    _x("nd").peak_flops / 1e15, _x("eq2")["h800x8"] / _x("eq2")["a800x8"], _x("eq2")["a800x8"],
    _x("paper").EQ2_MIN_GBS["a800x8"][1]], where=_S, source="FAST'25 Eq. 2")
claim("02.sol_q4", "in 1 TB of DRAM: 10¹² B / 327,680 B ≈\n**3.05 million tokens**", lambda: [
    *_tb(), _kv("m2"), _x("tokens_tb") / 1e6], where=_S)
claim("02.sol_q4_fast", "\"about 3M tokens\". At the conversation trace's mean prompt of\n12k tokens, that is only ≈ 250",
      lambda: [_x("paper").TOKENS_PER_TB_M, _mean_prompt() / 1e3, _x("tokens_tb") / _mean_prompt()], where=_S,
      rel_tol=0.02, source="FAST'25 §2.2 and Table 2")
claim("02.sol_q5", "At 7 GB/s, loading 1.342 GB takes 0.192 s; recomputing takes 0.391 s:\na speedup of ≈ 2.0×, far from 10×",
      lambda: [_x("drive"), _load_gb(), _load_gb() / _x("drive"), _x("recompute"), _x("ssd").loc[7.0, "llama2_70b_speedup"],
               _seed_x()], where=_S)
claim("02.sol_q5_seed", "\"> 10× from SSD\" needs an array of\nat least five", _seed_x, where=_S)
claim("02.sol_q2_title", "[SSD for 10×]", _ex_x, where=_S)
