"""Claims of lecture 05: every number its markdown and exercise strings state (see :mod:`mooncake_lab.claims`).

Nothing here depends on the trace: one request (or a few) on idle nodes, LLaMA2-70B, 8×A800, "modern"
preset unless stated (:mod:`mooncake_lab.cpp`, :mod:`mooncake_lab.experiments.l05_prefill`).
"""
from __future__ import annotations

from functools import lru_cache

from . import answer_of, claim, default_of, not_a_claim, notebook_arg, restate, when
from .. import paper
from .lecture00 import at_least

N = 131072          # the lecture's long prompt (tokens)
K = 1024            # "128k" = 128 × 1024 tokens in this lecture
M1 = 2 ** 20        # the 1M-token thought experiment
_F7 = paper.FIG7_STORE_LATENCY_S
_F7S = paper.FIG7_SOURCE


def _l():
    from ..experiments import l05_prefill
    return l05_prefill


def _cpp():
    from .. import cpp
    return cpp


def _m():
    from ..models import get_model
    return get_model("llama2-70b")


def _node():
    from ..hardware import A800_NODE
    return A800_NODE


def _one(n=N, preset="modern") -> float:
    return _cpp().one_node_ttft(n_tokens=n, preset=preset)


def _cppt(n=N, x=4, chunk=4096) -> float:
    return _cpp().cpp_ttft("llama2-70b", "a800x8", n, x, chunk, preset="modern")


@lru_cache(maxsize=None)
def _sch(n=N, x=4):
    return _l().schemes_vs_length([n], x=x).set_index("scheme")


def _bw() -> float:
    return _cpp().network_bandwidth("llama2-70b", "a800x8") / 1e9


def _act() -> float:
    return _cpp().activation_bytes_per_token("llama2-70b")


def _kv() -> float:
    return _m().kv_bytes_per_token()


def _tp_bytes(x=4) -> float:
    return _cpp().tp_allreduce_bytes_per_token(_m(), x)


def _tp_comm_s(x=4) -> float:
    return N * _tp_bytes(x) / (_bw() * 1e9)


@lru_cache(maxsize=None)
def _inter():
    return _l().interleave_demo()


def _short(order: str) -> float:
    df = _inter()
    return float(df[(df["order"] == order) & (df["kind"] == "short")]["ttft_s"].mean())


def _long_extra() -> float:
    df = _inter()
    longs = df[df["kind"] == "long"].set_index("order")["ttft_s"]
    return float(longs["interleave"] - longs["fifo"])


@lru_cache(maxsize=None)
def _store():
    return _l().layerwise_store([N]).iloc[0]


@lru_cache(maxsize=None)
def _vram():
    return _l().vram_occupation([N]).iloc[0]


def _peak_layer_gb() -> float:
    return _cpp().kv_vram_profile(n_tokens=N, layerwise=True)["peak_bytes"] / 1e9


@lru_cache(maxsize=None)
def _fit():
    return _l().fig7_fit()


def _attn_eff_pct():
    from ..calibration import get_preset
    p = get_preset("calibrated")
    vals = [p.attn_efficiency_at(tp) for tp in (1, 2, 4, 8)]
    return [100 * min(vals), 100 * max(vals)]


def _fit_max_tokens() -> float:
    from .. import calibration
    df = calibration.load_measured()
    return float(df.loc[df["phase"] == "prefill", "prompt_tokens"].max())


def _modern_mfu() -> float:
    from ..calibration import get_preset
    return get_preset("modern").linear_efficiency_at(8)


def _in_range(v: float, lo: float, hi: float) -> float:
    """``v`` if the dashboard slider reaches it (``lo ≤ v ≤ hi``), else NaN (the check fails)."""
    return float(v) if lo <= v <= hi else float("nan")


def _bw_slider():
    from ..dashboards import prefill as d
    return 10 ** d._BW_LOG10[0], 10 ** d._BW_LOG10[1]


def _chunk_slider():
    from ..dashboards import prefill as d
    return 2 ** d._CHUNK_LOG2[0], 2 ** d._CHUNK_LOG2[1]


def _q4():
    from ..exercises.lecture05 import _min_x_256k
    return _min_x_256k()


def _q2():
    from ..exercises.lecture05 import Q2_CHUNKS, Q2_STAGE_S, Q2_X
    return Q2_CHUNKS, Q2_X, Q2_STAGE_S


def _tp_x() -> float:
    """Nodes of "TP across X nodes" (Question 3, exercise 05.tp_comm): ``schemes_vs_length``'s default X, if
    the exercise's answer is the all-reduce time at that X, else NaN."""
    x = default_of(_l().schemes_vs_length, "x")
    return when(abs(answer_of("05.tp_comm") / _tp_comm_s(x) - 1) < 1e-9, x)


_FILL = "X − 1 counts the pipeline's fill slots (a formula's constant), not a quantity"
_NEXT = "an index of the schedule (stage s − 1, chunk j ± 1, layer i + 1), not a quantity"
_SHARE = "1/X, 1/L: a share of the layers or width (a formula's constant), not a quantity"


def _cluster_default(field: str):
    from .. import sim
    return getattr(sim.ClusterConfig(), field)


def _slo() -> float:
    return paper.SLO_TTFT_S


# ---- introduction -----------------------------------------------------------------------------
claim("05.intro_128k", "A 128k-token prompt", lambda: N / K)
claim("05.intro_flop", "≈ 40 PFLOP of prefill — about **25 s** on one\n8 × A800 node at a good 65% MFU", lambda: [
    _m().prefill_flops(N) / 1e15, _one(), _node().n_gpus, 100 * _modern_mfu()], rel_tol=0.02)
claim("05.intro_slo", "the **30 s TTFT SLO**, and a 256k prompt", lambda: [_slo(), 2 * N / K])
not_a_claim("05.goal_fill", "((chunks + X − 1) × stage time)", _FILL)
claim("05.cost_mfu", "MFU 0.65, the default of the BLIS", _modern_mfu)
claim("05.cost_fit", "fitted on prompts ≤ 8k tokens", lambda: _fit_max_tokens() / K)
claim("05.cost_attn", "term corresponds to 4–7% of peak", _attn_eff_pct, rel_tol=0.1)
claim("05.cost_220", "to 128k it predicts 220 s instead of 25 s", lambda: [
    N / K, _one(preset="calibrated"), _one()], rel_tol=0.01)
# ---- the assumptions table (introduction) -------------------------------------------------------
claim("05.as_x", "X = 4 unless stated; chunks of 4,096 tokens", lambda: [
    default_of(_l().schemes_vs_length, "x"), _l().DEFAULT_CHUNK])
claim("05.as_cpp1", "no CPP: `cpp_group_size` = 1", lambda: _cluster_default("cpp_group_size"))
claim("05.as_rdma", "each node's RDMA at 87 GB/s", _bw)
claim("05.as_h2d", "at 128 GB/s host-to-device", lambda: _node().h2d_bw / 1e9)
# ---- section 1 --------------------------------------------------------------------------------
claim("05.chunk_typ", "Mooncake's `prefill_chunk` is \"typically > 1,000\"", lambda: paper.PREFILL_CHUNK_TYPICAL_MIN,
      source="arXiv v3 §3")
not_a_claim("05.layers", "… (*s*+1)·L/X − 1", "layer indices of stage s (a formula), not a quantity")
not_a_claim("05.rule1", "leave stage *s* − 1", _NEXT)
not_a_claim("05.rule2", "waits for chunk *j* − 1 on stage", _NEXT)
not_a_claim("05.stage", "on 1/X of the layers", _SHARE)
claim("05.keys", "A token of the last 4k-chunk of a 128k\nprompt attends to 126k keys on average, one of the first chunk to 2k",
      lambda: [4096 / K, N / K, (N - 4096 / 2) / K, 4096 / 2 / K])
claim("05.act", "*k* × d_model × 2 B = *k* × 16 KiB", lambda: [_m().bytes_per_param, _act() / 1024])
claim("05.act20", "20× less than the", lambda: _kv() / _act())
not_a_claim("05.overlap", "compute chunk\n*j* + 1", _NEXT)
not_a_claim("05.fill", "**(C + X − 1) × τ**: X − 1 slots", _FILL)
claim("05.gantt_node3", "node 3 starts only after the\nfirst chunk",   # the last of the Gantt cell's X nodes
      lambda: notebook_arg("05", "l05.gantt", "x") - 1)
claim("05.gantt", "TTFT ≈ 1.35 s against 3.65 s on one node: a 2.7× speedup on 4", lambda: [
    _cppt(32768), _one(32768), _one(32768) / _cppt(32768), 4])
claim("05.for128k", "For 128k tokens the bubble matters less: 4 nodes cut 25.0 s to 7.2 s, a 3.5× speedup", lambda: [
    N / K, 4, _one(), _cppt(), _one() / _cppt()])
claim("05.send", "at 87 GB/s one chunk's\nsend takes 0.77 ms", lambda: [_bw(), 4096 * _act() / (_bw() * 1e9) * 1e3])
claim("05.send2", "each chunk's send grows to 34 ms", lambda: 4096 * _act() / 2e9 * 1e3)
claim("05.sweep", "32,768 tokens on\n4 nodes", lambda: [32768, notebook_arg("05", "l05.chunk_sweep_table", "x")])
claim("05.best_chunk", "1,024-token chunks are the fastest, and our default of 4,096 is 24% slower", lambda: [
    _best_chunk(), _l().DEFAULT_CHUNK, 100 * (_sweep()[4096] / _sweep()[_best_chunk()] - 1)])
claim("05.best_chunk_box", "1,024 is the best chunk only in the model", lambda: _best_chunk())
claim("05.keep4096", "We keep 4,096 as a size", lambda: _l().DEFAULT_CHUNK)
claim("05.why4096", "Why keep 4,096?", lambda: _l().DEFAULT_CHUNK)
claim("05.detail128k", "Now the 128k prompt in detail", lambda: N / K)
claim("05.slo", "**Which scheme meets the 30 s SLO?** Up to 128k all four do, one node included (25.0 s). At 256k one node\n"
      "needs 78 s and TP just misses with 31.3 s. SP (19.4 s) and CPP (21.1 s) meet it. At 512k no scheme does on\n4 nodes",
      lambda: [_slo(), _all_meet_up_to() / K, _one(), 2 * N / K, _sch(2 * N).loc["one_node", "ttft_s"],
               _sch(2 * N).loc["tp", "ttft_s"], _sch(2 * N).loc["sp", "ttft_s"], _sch(2 * N).loc["cpp", "ttft_s"],
               _none_meet() / K, 4])
claim("05.try16k", "a **16k chunk** on a 32k prompt", lambda: [_in_range(16384, *_chunk_slider()) / K, 32768 / K])
claim("05.try512", "a **512-token chunk**", lambda: _in_range(512, *_chunk_slider()))
claim("05.try2gb", "**2 GB/s** without overlap", lambda: _in_range(2, *_bw_slider()))
claim("05.try_cal", "**calibrated** preset at 128k", lambda: N / K)
not_a_claim("05.x1", "bubble: X − 1 slots of a shorter stage time", _FILL)
claim("05.chunk_typ2", "`prefill_chunk` \"typically > 1,000\" avoids", lambda: paper.PREFILL_CHUNK_TYPICAL_MIN,
      source="arXiv v3 §3")
# ---- section 2 --------------------------------------------------------------------------------
not_a_claim("05.tp_width", "every layer at 1/X of the width", _SHARE)
claim("05.tp_bytes", "2 × 80 × 2(X−1)/X × 8,192 × 2 B ≈ 3.9 MB per token at X = 4", lambda: [
    2, _m().n_layers, 2, -1, _m().d_model, _m().bytes_per_param, _tp_bytes() / 1e6, 4])
claim("05.sp_bytes", "(X − 1)/X × n × 320 KiB per node", lambda: [1, _kv() / 1024])
claim("05.cpp_bytes", "(X − 1) boundaries × n × 16 KiB", lambda: [1, _act() / 1024])
claim("05.tp_x4", "**TP across 4 nodes** only halves the TTFT",   # at X = 4 (more nodes do better: 2.5× at 8)
      lambda: 4 if 1.9 < _one() / _sch().loc["tp", "ttft_s"] < 2.1 else float("nan"))
claim("05.tp_read", "≈ 5.9 s of all-reduce on top of 6.25 s of compute at 128k", lambda: [
    _tp_comm_s(), _one() / 4, N / K])
claim("05.tp_read2", "sends ≈ **2 TB** through the NICs", lambda: _sch().loc["tp", "net_gb"] / 1000)
claim("05.tp_mfu", "MFU falls to 33%", lambda: 100 * _sch().loc["tp", "mfu"])
claim("05.sp", "it moves ≈ **129 GB** — 20× CPP's 6.4 GB", lambda: [
    _sch().loc["sp", "net_gb"], _sch().loc["sp", "net_gb"] / _sch().loc["cpp", "net_gb"], _sch().loc["cpp", "net_gb"]])
claim("05.cpp_mfu", "(56% MFU at X = 4)", lambda: [100 * _sch().loc["cpp", "mfu"], 4])
claim("05.1m", "**The 1M-token thought experiment.** On one node a 1M-token prefill takes ≈ 16 minutes, and attention is 91% of it: its cost grows with the\nsquare",
      lambda: [M1 / 2 ** 20, M1 / 2 ** 20, _one(M1) / 60, 100 * _attn_share(M1)])
claim("05.1m_cpp", "CPP over 8 nodes brings it to ≈ 2 minutes — still 4× the SLO", lambda: [
    8, _cppt(M1, 8) / 60, _cppt(M1, 8) / _slo()], rel_tol=0.1)
claim("05.1m_box", "Where the KV of 1M tokens fits", lambda: M1 / 2 ** 20)
claim("05.1m_kv", "KV of 1M tokens is 344 GB", lambda: [M1 / 2 ** 20, M1 * _kv() / 1e9])
claim("05.1m_hbm", "It fits in one node's 687 GB of HBM beside the 138 GB of weights, but only one\n"
      "such request at a time; CPP spreads it by layers (86 GB per node at X = 4)", lambda: [
    _hbm_one_request() / 1e9, _m().weight_bytes() / 1e9, M1 * _kv() / 4 / 1e9, 4])
claim("05.try1gb", "At **1 GB/s** TP collapses", lambda: _in_range(1, *_bw_slider()))
# ---- section 3 --------------------------------------------------------------------------------
claim("05.inter_setup", "Suppose a 128k prompt arrives at t = 0 and short prompts (1k–4k tokens) every 0.5 s", lambda: [
    N / K, 0, *_short_range(), _short_gap()])
claim("05.fifo", "all 32 chunks of the long prompt enter stage 0 first, and every short request waits ≈ 6 s", lambda: [
    N // 4096, 0, _short("fifo")], rel_tol=0.05)
not_a_claim("05.slot0", "each free slot at stage 0", "stage 0 names the first stage, not a quantity")
not_a_claim("05.table_stage0", "the chunks of several requests interleaved at stage 0",
            "stage 0 names the first stage, not a quantity")
claim("05.inter", "The short requests drop from ≈ 6 s to ≈ 0.6 s; the long one pays the short ones' chunk time (≈ 0.2 s, 3%)",
      lambda: [_short("fifo"), _short("interleave"), _long_extra(), 100 * _long_extra() / _inter().loc[0, "ttft_s"]],
      rel_tol=0.15)
# ---- section 4 --------------------------------------------------------------------------------
claim("05.h2d_link", "PCIe between the GPUs and CPU DRAM, 128 GB/s per node", lambda: _node().h2d_bw / 1e9,
      source="FAST'25 Table 1")
claim("05.ser", "At 128k that adds 131,072 × 320 KiB / 128 GB/s ≈ 0.34 s", lambda: [
    N / K, N, _kv() / 1024, _node().h2d_bw / 1e9, _store()["exposed_serialized_s"]])
not_a_claim("05.lw_next", "while layer *i* + 1 computes", _NEXT)
claim("05.f7_80", "not 1/80 of the serialized store", lambda: [1, _m().n_layers])
claim("05.f7_128", "more slowly than 128 GB/s", lambda: (paper.H2D_BW / 1e9), source="FAST'25 Table 1")
claim("05.f7_fit_main", "gives a store at ≈ 52 GB/s, not our 128 GB/s", lambda: [_fit()["gbs"], _node().h2d_bw / 1e9],
      rel_tol=0.02, source=_F7S)
claim("05.f7_fit_box", "the paper's store achieved: ≈ 52 GB/s", lambda: _fit()["gbs"], rel_tol=0.02, source=_F7S)
claim("05.f7_8k", "hides little at 8k", lambda: min(_F7["serialized"]) / K, source=_F7S)
claim("05.f7_128k", "and most of it at 128k", lambda: max(_F7["serialized"]) / K, source=_F7S)
claim("05.vram", "At 128k: 537 GB·s serialized against 0.18 GB·s layer-wise — about 3,000× less, and a peak of one layer\n(0.54 GB) instead of 43 GB",
      lambda: [N / K, _vram()["serialized_gb_s"], _vram()["layerwise_gb_s"], _vram()["ratio"], _peak_layer_gb(),
               _vram()["kv_gb"]], rel_tol=0.01)
# ---- the paper box ----------------------------------------------------------------------------
claim("05.box_cpp", "128k: 25.0 s → 13.2 / 7.2 / 4.3 s on 2 / 4 / 8 nodes", lambda: [
    N / K, _one(), _cppt(x=2), _cppt(x=4), _cppt(x=8), 2, 4, 8])
claim("05.box_chunk", "fixed overhead per stage, chunk 4,096", lambda: _l().DEFAULT_CHUNK)
claim("05.box_tp", "7.2 s vs 12.2 s at X = 4; 6.4 GB vs 2 TB sent", lambda: [
    _cppt(), _sch().loc["tp", "ttft_s"], 4, _sch().loc["cpp", "net_gb"], _sch().loc["tp", "net_gb"] / 1000])
claim("05.box_nvlink", "a node's RDMA 87 GB/s is ~5× below the NVLink of one GPU", lambda: [_bw(), _node().gpu.nvlink_bw / 1e9 / _bw()],
      rel_tol=0.1)
claim("05.box_sp", "SP 6.3 s (faster), but 129 GB sent", lambda: [_sch().loc["sp", "ttft_s"], _sch().loc["sp", "net_gb"]])
claim("05.box_f7", "layer-wise adds ≈ 0.1 s at every length; serialized ≈ 0.11 s at 8k, ≈ 0.87 s at 128k", lambda: [
    _fit()["layerwise_mean_s"], _F7["serialized"][8192], 8, _F7["serialized"][N], N / K], source=_F7S, rel_tol=0.05)
claim("05.box_ours", "serialized 0.336 s → layer-wise 4.2 ms at 128k (1/80)", lambda: [
    _store()["exposed_serialized_s"], _store()["exposed_layerwise_s"] * 1e3, N / K, 1, _m().n_layers])
claim("05.box_fit", "runs at ≈ 52 GB/s (section 4), not 128 GB/s", lambda: [_fit()["gbs"], (paper.H2D_BW / 1e9)],
      rel_tol=0.02)
claim("05.box_inter", "interleaved chunks: short prompts ≈ 6 s → ≈ 0.6 s", lambda: [_short("fifo"), _short("interleave")],
      rel_tol=0.15)
claim("05.box_vram", "537 → 0.18 GB·s at 128k", lambda: [_vram()["serialized_gb_s"], _vram()["layerwise_gb_s"], N / K],
      rel_tol=0.01)
# ---- exercises (markdown) ---------------------------------------------------------------------
claim("05.q1", "for a 131,072-token", lambda: N)
claim("05.q1b", "d_model = 8,192", lambda: _m().d_model)
claim("05.q2", "16 equal chunks go through X = 4 stages; every chunk takes 0.5 s", lambda: list(_q2()))
claim("05.q3", "Section 2 found ≈ 5.9 s of all-reduce for TP across 4 nodes", lambda: [_tp_comm_s(), 4])
claim("05.q3b", "TP across **8** nodes pay on the same 131,072-token", lambda: _q3_x_and_n())
claim("05.q3c", "at 87 GB/s\nper node", _bw)
claim("05.q4", "X in {1, 2, 4, 8, 16} that prefills a\n262,144-token", lambda: [1, 2, 4, 8, 16, 2 * N])
claim("05.q4b", "within the 30 s SLO (\"modern\", chunk 4,096)", lambda: [_slo(), _l().DEFAULT_CHUNK])
claim("05.q5", "Section 4 found that the paper's store ran at ≈ 52 GB/s. With layer-wise store at\n52 GB/s instead of 128 GB/s",
      lambda: [_fit()["gbs"], _q5_bw(), _node().h2d_bw / 1e9], rel_tol=0.02)
claim("05.q5b", "does a 131,072-token", lambda: N)
# ---- summary ----------------------------------------------------------------------------------
not_a_claim("05.sum_fill", "TTFT ≈ (chunks + X − 1) stage times", _FILL)
claim("05.sum_128k", "At 128k tokens, CPP on 4 nodes cuts 25 s to 7.2 s and sends only 6.4 GB. TP across nodes sends 2 TB and reaches 12 s",
      lambda: [N / K, 4, _one(), _cppt(), _sch().loc["cpp", "net_gb"], _sch().loc["tp", "net_gb"] / 1000,
               _sch().loc["tp", "ttft_s"]])
claim("05.sum_sp", "sends 20× more than CPP", lambda: _sch().loc["sp", "net_gb"] / _sch().loc["cpp", "net_gb"])
claim("05.sum_32", "wait one chunk, not 32", lambda: N // _l().DEFAULT_CHUNK)
not_a_claim("05.sum_lw", "all but 1/L of the KV store", _SHARE)
claim("05.sum_f7", "hides little at 8k and\n  most at 128k (a fixed ≈ 0.1 s remains)", lambda: [
    min(_F7["serialized"]) / K, max(_F7["serialized"]) / K, _fit()["layerwise_mean_s"]], source=_F7S)
claim("05.sum_st", "S·T drops ~3,000×", lambda: _vram()["ratio"], rel_tol=0.05)
# ---- exercise strings -------------------------------------------------------------------------
E1, E2, E3, E4, E5 = "05.boundary_gb", "05.pipeline_fill", "05.tp_comm", "05.min_x_256k", "05.store_exposed_ms"
claim("05.e1_q", "boundary for a 131,072-token", lambda: N, where=E1)
claim("05.e1_hint", "Tokens × d_model × 2 B", lambda: _m().bytes_per_param, where=E1)
claim("05.e1_why", "131,072 × 8,192 × 2 B ≈ 2.15 GB — 20× less than the 43 GB of KV those tokens produce, and "
      "≈ 25 ms at 87 GB/s", lambda: [N, _m().d_model, _m().bytes_per_param, N * _act() / 1e9, _kv() / _act(),
                                     N * _kv() / 1e9, N * _act() / (_bw() * 1e9) * 1e3, _bw()], where=E1)
claim("05.e2_q", "TTFT (s) of 16 equal chunks through 4 stages of 0.5 s each", lambda: list(_q2()), where=E2)
claim("05.e2_why", "(16 + 4 − 1) × 0.5 = 9.5 s against 16 × 4 × 0.5 / 4 = 8 s of work per node: the X − 1", lambda: [
    _q2()[0], _q2()[1], 1, _q2()[2], (_q2()[0] + _q2()[1] - 1) * _q2()[2], _q2()[0], _q2()[1], _q2()[2], _q2()[1],
    _q2()[0] * _q2()[2], 1], where=E2)
claim("05.e3_q", "TP across 8 nodes on a 131,072-token", lambda: _q3_x_and_n(), where=E3)
claim("05.e3_q2", "prefill need at 87 GB/s per node", _bw, where=E3)
claim("05.e3_hint", "2 all-reduces × 80 layers × 2(X−1)/X × 8,192 × 2 B", lambda: [
    2, _m().n_layers, 2, -1, _m().d_model, _m().bytes_per_param], where=E3)
claim("05.e3_hint2", "Only the ring factor 2(X−1)/X changes from X = 4", lambda: [2, -1, notebook_arg("05", "l05.schemes_vs_length", "x")], where=E3)
claim("05.e3_why", "The ring factor grows from 1.5 to 1.75: 4.59 MB per token × 131,072 / 87 GB/s ≈ 6.9 s", lambda: [
    2 * 3 / 4, 2 * 7 / 8, _tp_bytes(8) / 1e6, N, _bw(), _tp_comm_s(8)], where=E3)
claim("05.e3_why2", "more than at 4 nodes, while the compute per node halves to 3.12 s", lambda: [
    4 if _tp_comm_s(8) > _tp_comm_s(4) else float("nan"), _one() / 8], where=E3)
claim("05.e4_q", "X in {1, 2, 4, 8, 16} that prefills a 262,144-token", lambda: [1, 2, 4, 8, 16, 2 * N], where=E4)
claim("05.e4_q2", "within the 30 s TTFT SLO ('modern' preset, chunk 4,096)", lambda: [_slo(), _l().DEFAULT_CHUNK], where=E4)
claim("05.e4_why", "One node needs ≈ 78 s, two ≈ 40 s, four ≈ 21 s", lambda: [
    _cppt(2 * N, 1), _cppt(2 * N, 2), _cppt(2 * N, 4)], where=E4)
claim("05.e4_why2", "from 128k (≈ 25 s on one node)", lambda: [N / K, _one()], where=E4)
claim("05.e5_q", "at the paper's 52 GB/s instead of 128 GB/s", lambda: [_q5_bw(), _node().h2d_bw / 1e9], where=E5)
claim("05.e5_q2", "does a 131,072-token", lambda: N, where=E5)
claim("05.e5_hint", "(n × 320 KiB / 52 GB/s) / 80", lambda: [_kv() / 1024, _q5_bw(), _m().n_layers], where=E5)
claim("05.e5_hint_tol", "The 52 GB/s is read off a figure, so an answer within 6% passes.",
      lambda: [_q5_bw(), 100 * _q5_tol()], where=E5)
claim("05.e5_why", "43 GB / 52 GB/s = 0.83 s serialized, / 80 layers ≈ 10.3 ms layer-wise, still far below the "
      "0.31 s a layer computes", lambda: [N * _kv() / 1e9, _q5_bw(), N * _kv() / (_q5_bw() * 1e9), _m().n_layers,
                                          answer_of(E5), _one() / _m().n_layers], where=E5)
claim("05.e5_why2", "bars are ≈ 0.1 s: a fixed cost", lambda: _fit()["layerwise_mean_s"], where=E5, source=_F7S)


def _q3_x_and_n():
    from ..exercises.lecture05 import Q3_X
    x = Q3_X
    return [when(abs(answer_of("05.tp_comm") / _tp_comm_s(x) - 1) < 1e-9, x), N]


def _q5_bw() -> float:
    from ..exercises.lecture05 import Q5_BW_GBS
    return Q5_BW_GBS


def _q5_tol() -> float:
    """Question 5's relative tolerance, read from the registered exercise (not the module constant)."""
    from ..exercises import list_exercises
    return {e.id: e for e in list_exercises("05")}[E5].rel_tol


@lru_cache(maxsize=None)
def _sweep():
    return _l().chunk_sweep(32768, x=4).set_index("chunk")["ttft_s"]


def _best_chunk() -> float:
    return float(_sweep().idxmin())


def _all_meet_up_to() -> float:
    """The longest prompt of the TTFT curves at which every scheme (one node included) meets the SLO."""
    c = _l().schemes_vs_length(_l().LONG_LENGTHS, x=4)
    ok = c.groupby("n_tokens")["meets_slo"].all().to_numpy()
    n = ok.argmin() if not ok.all() else len(ok)       # the first length at which a scheme misses
    return float(sorted(set(c["n_tokens"]))[n - 1]) if n > 0 else float("nan")


def _none_meet() -> float:
    """The shortest prompt of the TTFT curves at which no scheme meets the SLO."""
    c = _l().schemes_vs_length(_l().LONG_LENGTHS, x=4)
    none = ~c.groupby("n_tokens")["meets_slo"].any()
    return float(none[none].index.min())


def _hbm_one_request() -> float:
    """One node's HBM (B) if the KV of one 1M-token request fits beside the weights and two do not, else NaN."""
    hbm = _node().n_gpus * _node().gpu.hbm_bytes
    free = hbm - _m().weight_bytes()
    return hbm if M1 * _kv() <= free < 2 * M1 * _kv() else float("nan")


def _attn_share(n: int) -> float:
    b = _m().prefill_flops_breakdown(n)
    return b["attention"] / b["total"]


def _short_range():
    df = _inter()
    s = df[df["kind"] == "short"]["n_new"]
    return [s.min() / 1000, s.max() / 1000]


def _short_gap() -> float:
    df = _inter()
    a = df[(df["kind"] == "short") & (df["order"] == "fifo")]["arrival_s"].sort_values().diff().dropna()
    return float(a.mean())


# ---- solutions notebook: the worked answers ----------------------------------------------------
def _fill() -> float:
    from ..exercises.lecture05 import _equal_stages
    return _equal_stages()


_S = "solutions"
restate(_S, "05.act20")
claim("05.sol_q1", "131,072 × 8,192 × 2 B = 2,147,483,648 B ≈ **2.15 GB** — 20× less than the\n"
      "131,072 × 327,680 B ≈ 43 GB of KV the same tokens leave behind, and ≈ 25 ms at 87 GB/s", lambda: [
          N, _m().d_model, _m().bytes_per_param, N * _act(), N * _act() / 1e9, _kv() / _act(), N, _kv(),
          N * _kv() / 1e9, 1e3 * N * _act() / (_bw() * 1e9), _bw()], where=_S)
claim("05.sol_q2", "The first chunk leaves the last stage after X × 0.5 = 2 s; each of the other 15\n"
      "follows 0.5 s later: (16 + 4 − 1) × 0.5 = **9.5 s**. Each node works 16 × 0.5 = 8 s of it; the remaining 1.5 s",
      lambda: [_q2()[2], _q2()[1] * _q2()[2], _q2()[0] - 1, _q2()[2], _q2()[0], _q2()[1], 1, _q2()[2], _fill(),
               _q2()[0], _q2()[2], _q2()[0] * _q2()[2], _fill() - _q2()[0] * _q2()[2]], where=_S)
claim("05.sol_q3", "of d × 2 B, ring factor 2(X−1)/X.\nAt X = 8 the ring factor is 1.75 instead of 1.5: 2 × 80 × 1.75 × 8,192 × 2 B = "
      "4,587,520 B. Times 131,072 tokens =\n601 GB per node; at 87 GB/s that is **≈ 6.9 s**, on the critical path. The compute "
      "per node halves to 3.12 s", lambda: [_m().bytes_per_param, 2, -1, 8, 2 * 7 / 8, 2 * 3 / 4, 2, _m().n_layers, 2 * 7 / 8,
                                            _m().d_model, _m().bytes_per_param, _tp_bytes(8), N, N * _tp_bytes(8) / 1e9,
                                            _bw(), _tp_comm_s(8), _one() / 8], where=_S)
claim("05.sol_q4", "one node ≈ 78 s, two ≈ 40 s, four ≈ 21 s.\n**X = 4** is the first within 30 s. (Doubling the "
      "prompt from 128k to 256k", lambda: [_cppt(2 * N, 1), _cppt(2 * N, 2), _cppt(2 * N, 4), _q4(), _slo(),
                                           N / K, 2 * N / K], where=_S)
claim("05.sol_q5", "Serialized, at 52 GB/s: 131,072 × 327,680 B / 52 GB/s = 0.83 s. Layer-wise the store of\n"
      "layer i runs under the compute of layer i + 1, which is far longer (25 s / 80 ≈ 0.31 s per layer vs 10.3 ms of\n"
      "store), so only the last layer's store is exposed: 0.83 s / 80 ≈ **10.3 ms**. At the lecture's 128 GB/s it was\n"
      "4.19 ms; the paper's ≈ 0.1 s layer-wise bars", lambda: [
          _q5_bw(), N, _kv(), _q5_bw(), N * _kv() / (_q5_bw() * 1e9), 1, _one(), _m().n_layers, _one() / _m().n_layers,
          answer_of(E5), N * _kv() / (_q5_bw() * 1e9), _m().n_layers, answer_of(E5), _node().h2d_bw / 1e9,
          1e3 * _store()["exposed_layerwise_s"], _fit()["layerwise_mean_s"]], where=_S)
claim("05.sol_q5_fig", "our\nmodel at 128 GB/s", lambda: _node().h2d_bw / 1e9, where=_S)
claim("05.sol_q4_attn", "already more than half of it at 128k", lambda: N / K if _attn_share(N) > 0.5 else float("nan"),
      where=_S)
claim("05.box_links", "at 128k and X = 4 the boundaries carry 6.4 GB against the 43 GB of KV the prompt streams to decode (15%)",
      lambda: [N / K, 4, _sch().loc["cpp", "net_gb"], _vram()["kv_gb"], 100 * _sch().loc["cpp", "net_gb"] / _vram()["kv_gb"]])
