"""Lecture 01 — the roofline of LLaMA2-70B on 8×A800: tidy tables for the notebook and the metrics.

Presets: "ideal" (peak numbers, the physical limit), "calibrated" (fitted to SplitwiseSim's
A100 measurements, applied to the A800's slower NVLink), "modern" (BLIS defaults). Each function
says which it uses.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Iterable

import numpy as np
import pandas as pd

from .. import roofline as rf
from ..calibration import compare_to_measured, get_preset, load_measured
from ..hardware import A100_NODE, Node, get_node
from ..models import MODELS, _check_count, fast25_eq1_prefill_flops, get_model
from ..reproduce import Metric, figure_group, metric_group
from ..validate import integer, items, real_array

__all__ = ["model_table", "flops_breakdown", "prefill_vs_length", "decode_vs_batch", "roofline_points",
           "roofline_curve", "calibration_table", "metrics",
           "per_token_counts", "eq1_comparison", "measured_prefill_mfu", "decode_ridge_batch",
           "kv_equals_weights_batch", "with_nvlink", "with_tp_comm", "tp_comm_share", "nvlink_penalty",
           "roofline_sweep", "figures", "machine_table", "per_token_table", "eq1_table", "points_table",
           "ridge_table", "measured_table", "knobs_table", "calibration_view", "long_prompt_table", "tp_table",
           "reproduce_table", "boxed"]

DEFAULT_LENGTHS = (128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)
DEFAULT_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
PRESET_NAMES = ("ideal", "calibrated", "modern")
#: Intensity grid of the lecture's roofline charts (FLOP/B): 0.1 … 10^6, wide enough for a
#: 128k-token prefill (≈ 2·10^5 FLOP/B for LLaMA2-70B).
ROOFLINE_INTENSITIES = np.logspace(-1, 6, 141)


def model_table(node="a800x8") -> pd.DataFrame:
    """One row per catalog model: parameters, weight GB, KV bytes/token, GFLOP/token, KV capacity."""
    rows = []
    for m in MODELS.values():
        rows.append({
            "model": m.name, "attention": m.attention, "parameters_b": m.parameters() / 1e9,
            "active_parameters_b": m.active_parameters() / 1e9, "weight_gb": m.weight_bytes() / 1e9,
            "kv_bytes_per_token": m.kv_bytes_per_token(),
            "gflop_per_token": (m.linear_flops_per_token() + m.lm_head_flops_per_token()) / 1e9,
            "kv_capacity_tokens": rf.decode_kv_capacity_tokens(m, node),
        })
    return pd.DataFrame(rows)


def flops_breakdown(model="llama2-70b", lengths: Iterable[int] = DEFAULT_LENGTHS) -> pd.DataFrame:
    """Prefill FLOPs by term (linear, attention, lm_head) and FAST'25 Eq. 1, long format.

    Columns: n_tokens, term, flops, flops_per_token.
    """
    lengths = items(lengths, "lengths", where="flops_breakdown")
    m = get_model(model)
    rows = []
    for n in lengths:
        br = m.prefill_flops_breakdown(n)
        for term in ("linear", "attention", "lm_head", "total"):
            rows.append({"n_tokens": n, "term": term, "flops": br[term]})
        rows.append({"n_tokens": n, "term": "fast25_eq1",
                     "flops": fast25_eq1_prefill_flops(n, m.n_layers, m.d_model)})
    df = pd.DataFrame(rows)
    df["flops_per_token"] = df["flops"] / df["n_tokens"]
    return df


def prefill_vs_length(model="llama2-70b", node="a800x8", lengths: Iterable[int] = DEFAULT_LENGTHS,
                      presets=PRESET_NAMES, n_cached: int = 0) -> pd.DataFrame:
    """Prefill time and MFU vs prompt length, one row per (preset, length).

    Columns: preset, n_new, n_cached, time_s, mfu, flops, tokens_per_s.
    """
    lengths = items(lengths, "lengths", where="prefill_vs_length")
    presets = items(presets, "presets", where="prefill_vs_length")
    m, nd = get_model(model), get_node(node)
    rows = []
    for p in presets:
        name = get_preset(p).name
        for n in lengths:
            t = rf.prefill_time(m, nd, n, n_cached, preset=p)
            fl = m.prefill_flops(n, n_cached)
            rows.append({"preset": name, "n_new": n, "n_cached": n_cached, "time_s": t,
                         "mfu": fl / (t * nd.peak_flops), "flops": fl, "tokens_per_s": n / t})
    return pd.DataFrame(rows)


#: Longest context a sequence may hold in these functions, tokens (10M: today's longest context windows).
MAX_CONTEXT_TOKENS = 10**7


def _context(value, where: str, lo: int = 0) -> int:
    """``context_per_seq`` checked: whole tokens in [lo, MAX_CONTEXT_TOKENS]."""
    return integer(value, "context_per_seq", lo=lo, hi=MAX_CONTEXT_TOKENS, where=where)


def decode_vs_batch(model="llama2-70b", node="a800x8", batches: Iterable[int] = DEFAULT_BATCHES,
                    context_per_seq: int = 512, presets=PRESET_NAMES) -> pd.DataFrame:
    """Decode step time vs batch size (each sequence holding ``context_per_seq`` tokens).

    Columns: preset, batch_size, context_tokens, step_s, tokens_per_s, fits (KV within capacity).
    """
    batches = items(batches, "batches", where="decode_vs_batch")
    presets = items(presets, "presets", where="decode_vs_batch")
    context_per_seq = _context(context_per_seq, "decode_vs_batch")
    m, nd = get_model(model), get_node(node)
    cap = rf.decode_kv_capacity_tokens(m, nd)
    rows = []
    for p in presets:
        name = get_preset(p).name
        for b in batches:
            ctx = b * context_per_seq
            t = rf.decode_step_time(m, nd, b, ctx, preset=p)
            rows.append({"preset": name, "batch_size": b, "context_tokens": ctx, "step_s": t,
                         "tokens_per_s": b / t, "fits": ctx <= cap})
    return pd.DataFrame(rows)


def roofline_points(model="llama2-70b", node="a800x8", lengths: Iterable[int] = (512, 2048, 8192, 32768),
                    batches: Iterable[int] = (1, 8, 32, 128), context_per_seq: int = 4096,
                    preset="ideal") -> pd.DataFrame:
    """Prefill and decode operating points on the node's roofline.

    Columns: phase, label, intensity (FLOP/B), attainable_flops (roofline bound, FLOP/s),
    achieved_flops (FLOPs / time under ``preset``), flops, time_s.
    """
    lengths = items(lengths, "lengths", where="roofline_points")
    batches = items(batches, "batches", where="roofline_points")
    context_per_seq = _context(context_per_seq, "roofline_points")
    m, nd = get_model(model), get_node(node)
    rows = []
    for n in lengths:
        i = rf.prefill_intensity(m, n)
        t = rf.prefill_time(m, nd, n, preset=preset)
        fl = m.prefill_flops(n)
        rows.append({"phase": "prefill", "label": f"prefill n={n}", "intensity": i,
                     "attainable_flops": rf.attainable_flops(i, nd), "achieved_flops": fl / t,
                     "flops": fl, "time_s": t})
    for b in batches:
        ctx = b * context_per_seq
        i = rf.decode_intensity(m, b, ctx)
        t = rf.decode_step_time(m, nd, b, ctx, preset=preset)
        fl = m.decode_flops(b, ctx)
        rows.append({"phase": "decode", "label": f"decode b={b}", "intensity": i,
                     "attainable_flops": rf.attainable_flops(i, nd), "achieved_flops": fl / t,
                     "flops": fl, "time_s": t})
    return pd.DataFrame(rows)


def roofline_curve(node="a800x8", intensities=None) -> pd.DataFrame:
    """The roofline itself: columns intensity (FLOP/B), attainable_flops (FLOP/s)."""
    if intensities is not None:
        intensities = items(intensities, "intensities", where="roofline_curve")
    x = np.logspace(-1, 4, 200) if intensities is None else real_array(intensities, "intensities", lo=0, where="roofline_curve")
    return pd.DataFrame({"intensity": x, "attainable_flops": rf.attainable_flops(x, get_node(node))})


def calibration_table() -> pd.DataFrame:
    """Ideal vs calibrated vs modern vs measured (LLaMA2-70B on A100-80GB, SplitwiseSim)."""
    return compare_to_measured()


_SPLITWISE = "SplitwiseSim perf_model.csv, LLaMA2-70B A100-80GB TP8 (data/measured_latency_splitwise.csv)"


@metric_group("roofline")
def metrics() -> list[Metric]:
    m, nd = get_model("llama2-70b"), get_node("a800x8")
    return [
        Metric("roofline.kv_bytes_per_token.llama2_70b", m.kv_bytes_per_token(), "B", 327680.0,
               "2×80×8×128×2 B = 320 KiB (FAST'25 §2.2: '320 KB')"),
        Metric("roofline.prefill_flops.llama2_70b.n8192", m.prefill_flops(8192), "FLOP",
               fast25_eq1_prefill_flops(8192),
               "FAST'25 Eq. 1 (a=4, b=22): 1.14 PFLOP; ours adds the LM head, counts attention causally"),
        Metric("roofline.prefill_s.llama2_70b.a800x8.n8192.ideal",
               rf.prefill_time(m, nd, 8192, preset="ideal"), "s", None,
               "physical limit (peak FLOP/s); no published value"),
        Metric("roofline.prefill_s.llama2_70b.a800x8.n8192.calibrated",
               rf.prefill_time(m, nd, 8192, preset="calibrated"), "s", 1.550,
               f"{_SPLITWISE}: prompt 8k = 1,550 ms (A100 NVLink 600 vs A800 400 GB/s)"),
        Metric("roofline.decode_step_s.llama2_70b.a800x8.b1.ideal",
               rf.decode_step_time(m, nd, 1, 512, preset="ideal"), "s", None,
               "no published value: the HBM-streaming floor (weights ÷ HBM bandwidth)"),
        Metric("roofline.decode_step_s.llama2_70b.a800x8.b1.calibrated",
               rf.decode_step_time(m, nd, 1, 512, preset="calibrated"), "s", 45.0e-3,
               f"{_SPLITWISE}: decode batch 1, prompt 512 = 45.0 ms"),
    ]


# --- additions for the lecture notebook and its dashboards ---------------------------------------
def per_token_counts(model="llama2-70b") -> pd.Series:
    """The hand-checkable per-token figures of ``model``, straight from :mod:`mooncake_lab.models`.

    Index: layer_matmul_params, params_per_layer, linear_gflop_per_token, lm_head_gflop_per_token,
    gflop_per_token (linear + LM head), attention_flop_per_key (FLOP per new token per attended
    key), kv_bytes_per_token, kv_kib_per_token, weight_gb.
    """
    m = get_model(model)
    kv = m.kv_bytes_per_token()
    return pd.Series({
        "layer_matmul_params": float(m.layer_matmul_params()),
        "params_per_layer": m.layer_matmul_params() / m.n_layers,
        "linear_gflop_per_token": m.linear_flops_per_token() / 1e9,
        "lm_head_gflop_per_token": m.lm_head_flops_per_token() / 1e9,
        "gflop_per_token": (m.linear_flops_per_token() + m.lm_head_flops_per_token()) / 1e9,
        "attention_flop_per_key": m.attention_flops_coefficient(),
        "kv_bytes_per_token": kv,
        "kv_kib_per_token": kv / 1024.0,
        "weight_gb": m.weight_bytes() / 1e9,
    }, name=m.name)


def eq1_comparison(n_tokens: int = 8192, model="llama2-70b") -> pd.DataFrame:
    """FAST'25 Eq. 1 (a=4, b=22) beside our count, term by term, for a prefill of ``n_tokens``.

    Rows: linear, attention, lm_head, total. Columns: eq1_flops, ours_flops, ours_minus_eq1
    (FLOP), and the coefficient each side uses: ``eq1_coef`` (b = 22 for linear, a = 4 for
    attention) vs ``ours_coef`` (linear FLOP per token / (L·d²) = 25.5 for LLaMA2-70B; attention
    FLOPs / (L·n²·d) = 2 once the causal ½ is applied).
    """
    m = get_model(model)
    L, d, n = m.n_layers, m.d_model, _check_count("n_tokens", n_tokens, minimum=1)
    ours = m.prefill_flops_breakdown(n)
    eq_lin = fast25_eq1_prefill_flops(n, L, d, a=0.0, b=22.0)
    eq_att = fast25_eq1_prefill_flops(n, L, d, a=4.0, b=0.0)
    rows = [
        ("linear", eq_lin, ours["linear"], 22.0, m.linear_flops_per_token() / (L * d * d)),
        ("attention", eq_att, ours["attention"], 4.0, ours["attention"] / (L * n * n * d)),
        ("lm_head", 0.0, ours["lm_head"], 0.0, math.nan),
    ]
    df = pd.DataFrame(rows, columns=["term", "eq1_flops", "ours_flops", "eq1_coef", "ours_coef"])
    tot = pd.DataFrame([("total", df["eq1_flops"].sum(), ours["total"], math.nan, math.nan)], columns=df.columns)
    df = pd.concat([df, tot], ignore_index=True)
    df["ours_minus_eq1"] = df["ours_flops"] - df["eq1_flops"]
    return df.set_index("term")


def measured_prefill_mfu() -> pd.DataFrame:
    """MFU of every measured prefill row (SplitwiseSim, LLaMA2-70B on ``tp`` A100-80GB):
    our FLOP count / (measured seconds × tp × 312 TFLOP/s).

    Columns: tp, prompt_tokens, measured_s, flops, mfu.
    """
    m = get_model("llama2-70b")
    df = load_measured()
    pre = df[df["phase"] == "prefill"].copy()
    pre["measured_s"] = pre["latency_s"]
    pre["flops"] = [m.prefill_flops(int(n)) for n in pre["prompt_tokens"]]
    pre["mfu"] = [f / (t * A100_NODE.with_gpus(int(tp)).peak_flops)
                  for f, t, tp in zip(pre["flops"], pre["measured_s"], pre["tp"])]
    return pre[["tp", "prompt_tokens", "measured_s", "flops", "mfu"]].reset_index(drop=True)


def decode_ridge_batch(model="llama2-70b", node="a800x8", context_per_seq: int = 1024) -> float:
    """Batch size at which a decode step's arithmetic intensity reaches the node's ridge point
    (every sequence holding ``context_per_seq`` tokens): where decode turns compute-bound under
    the ideal preset. ``inf`` when the intensity never gets there (long contexts: the KV reads
    grow with the batch as fast as the FLOPs). Found by bisection on :func:`roofline.decode_intensity`.
    """
    m, nd = get_model(model), get_node(node)
    ctx = float(_context(context_per_seq, "decode_ridge_batch"))
    ridge = rf.ridge_point(nd)

    def gap(b: float) -> float:
        return rf.decode_intensity(m, b, b * ctx) - ridge

    lo, hi = 1.0, 2.0
    if gap(lo) >= 0:
        return lo
    while gap(hi) < 0:
        hi *= 2.0
        if hi > 1e9:
            return math.inf
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if gap(mid) < 0 else (lo, mid)
    return 0.5 * (lo + hi)


def kv_equals_weights_batch(model="llama2-70b", context_per_seq: int = 1024) -> float:
    """Batch size at which a decode step reads as many KV bytes as weight bytes."""
    m = get_model(model)
    ctx = float(_context(context_per_seq, "kv_equals_weights_batch", lo=1))
    return m.streamed_weight_bytes_dense() / (m.kv_bytes_per_token() * ctx)


def with_nvlink(node="a800x8", nvlink_gbs: float = 400.0) -> Node:
    """``node`` with its GPUs' NVLink set to ``nvlink_gbs`` GB/s (datasheet, bidirectional total:
    A800 400, A100 600, H100 900)."""
    nd = get_node(node)
    bw = float(nvlink_gbs)
    if not (math.isfinite(bw) and bw > 0):
        raise ValueError(f"nvlink_gbs must be a finite number > 0 GB/s, got {nvlink_gbs!r}")
    return replace(nd, gpu=replace(nd.gpu, nvlink_bw=bw * 1e9), name=f"{nd.name}-nvlink{bw:g}")


def with_tp_comm(preset="ideal"):
    """``preset`` with the TP all-reduce *exposed* (serial with compute, at the preset's own
    ``tp_comm_efficiency``: 1.0 for ideal/modern, 0.67 for calibrated, which already exposes it)."""
    p = get_preset(preset)
    return p if p.tp_comm else replace(p, name=f"{p.name}+tp-comm", tp_comm=True)


def tp_comm_share(model="llama2-70b", node="a800x8", preset="calibrated") -> float:
    """Share of the per-token prefill time (linear + LM head + all-reduce) spent in the TP all-reduce."""
    c = rf.cost_model(model, node, preset)
    return c.tp_comm_s_per_token / (c.prefill_s_per_token + c.tp_comm_s_per_token)


def nvlink_penalty(n_new: int = 8192, model="llama2-70b", node="a800x8", preset="calibrated",
                   nvlink_gbs: float = 400.0, reference_gbs: float = 600.0) -> float:
    """Extra prefill seconds at ``nvlink_gbs`` compared with ``reference_gbs`` (A800 vs A100)."""
    return (rf.prefill_time(model, with_nvlink(node, nvlink_gbs), n_new, preset=preset)
            - rf.prefill_time(model, with_nvlink(node, reference_gbs), n_new, preset=preset))


def roofline_sweep(model="llama2-70b", node="a800x8", preset="ideal", lengths=None, batches=None,
                   context_per_seq: int = 1024) -> pd.DataFrame:
    """Like :func:`roofline_points` over dense sweeps, with the CostModel built once (fast enough
    for a slider). Adds columns ``x`` (n_new or batch_size), ``bound`` ("compute"/"memory": which
    side of the ridge) and ``fits`` (decode KV within the node's capacity; prefill: True).
    """
    if lengths is not None:
        lengths = items(lengths, "lengths", where="roofline_sweep")
    if batches is not None:
        batches = items(batches, "batches", where="roofline_sweep")
    context_per_seq = _context(context_per_seq, "roofline_sweep")
    m, nd = get_model(model), get_node(node)
    lengths = np.unique(np.geomspace(64, 131072, 23).round()) if lengths is None else lengths
    batches = np.unique(np.geomspace(1, 1024, 21).round()) if batches is None else batches
    c = rf.cost_model(m, nd, preset).as_array()
    ridge = rf.ridge_point(nd)
    cap = rf.decode_kv_capacity_tokens(m, nd)
    rows = []
    for n in lengths:
        n = float(n)
        i, fl = rf.prefill_intensity(m, n), m.prefill_flops(n)
        t = float(rf.cm_prefill_time(c, n, 0.0))
        rows.append(("prefill", n, i, fl, t, True))
    for b in batches:
        b = float(b)
        ctx = b * float(context_per_seq)
        i, fl = rf.decode_intensity(m, b, ctx), m.decode_flops(b, ctx)
        t = float(rf.cm_decode_step_time(c, b, ctx))
        rows.append(("decode", b, i, fl, t, ctx <= cap))
    df = pd.DataFrame(rows, columns=["phase", "x", "intensity", "flops", "time_s", "fits"])
    df["attainable_flops"] = rf.attainable_flops(df["intensity"].to_numpy(), nd)
    df["achieved_flops"] = df["flops"] / df["time_s"]
    df["bound"] = np.where(df["intensity"] >= ridge, "compute", "memory")
    return df


@figure_group("roofline")
def figures() -> dict:
    """Headline figures of lecture 01 (LLaMA2-70B on 8×A800 unless stated)."""
    from ..plots import roofline as plots

    return {
        "l01_roofline_a800x8": plots.roofline_chart(roofline_curve("a800x8", ROOFLINE_INTENSITIES),
                                                    roofline_points(context_per_seq=1024),
                                                    node_label="8×A800", ridge=rf.ridge_point("a800x8")),
        "l01_flops_per_token": plots.flops_per_token(flops_breakdown()),
        "l01_prefill_vs_length": plots.prefill_vs_length(prefill_vs_length(), measured_prefill_mfu()),
        "l01_decode_vs_batch": plots.decode_vs_batch(decode_vs_batch(context_per_seq=1024)),
        "l01_ideal_calibrated_measured": plots.calibration_comparison(calibration_table()),
    }


# --- tables for people: what the notebook shows (labels with units, rounded, no scientific notation) ---
def _readout(rows, column: str = "value"):
    """A one-column table of ``(label, text)`` rows: each value already formatted as it should read."""
    df = pd.DataFrame({column: [t for _, t in rows]}, index=pd.Index([k for k, _ in rows]))
    return df.style.set_properties(**{"text-align": "right"})


def _fmt(x: float, digits: int = 3) -> str:
    """``x`` rounded to ``digits`` significant figures, thousands grouped, never in e-notation."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    if x == 0:
        return "0"
    decimals = max(0, digits - 1 - int(math.floor(math.log10(abs(x)))))
    return f"{x:,.{decimals}f}"


def machine_table(node="a800x8"):
    """What one 8-GPU node delivers, for people: peak compute, HBM bandwidth and capacity, NVLink, ridge."""
    nd = get_node(node)
    return _readout([
        ("peak BF16 compute (TFLOP/s)", f"{nd.peak_flops / 1e12:,.0f}"),
        ("HBM bandwidth (TB/s)", f"{nd.peak_hbm_bw / 1e12:.1f}"),
        ("HBM capacity (GiB)", f"{nd.hbm_bytes / 2**30:,.0f}"),
        ("NVLink per GPU, both directions (GB/s)", f"{nd.gpu.nvlink_bw / 1e9:,.0f}"),
        ("ridge point (FLOP/B)", f"{rf.ridge_point(nd):.0f}"),
    ], column=f"8 × {nd.gpu.name}")


def per_token_table(model="llama2-70b"):
    """:func:`per_token_counts` for people: what one token costs, each value with its unit."""
    m = get_model(model)
    s = per_token_counts(m)
    return _readout([
        ("matmul weights per layer", f"{s['params_per_layer'] / 1e6:,.1f} M"),
        (f"matmul weights, all {m.n_layers} layers", f"{s['layer_matmul_params'] / 1e9:.2f} B"),
        ("matmul FLOPs per token (GFLOP)", f"{s['linear_gflop_per_token']:.1f}"),
        ("LM head FLOPs per token (GFLOP)", f"{s['lm_head_gflop_per_token']:.2f}"),
        ("total per token, before attention (GFLOP)", f"{s['gflop_per_token']:.1f}"),
        ("attention per attended key (MFLOP)", f"{s['attention_flop_per_key'] / 1e6:.2f}"),
        ("KV cache per token (bytes)", f"{s['kv_bytes_per_token']:,.0f}"),
        ("KV cache per token (KiB)", f"{s['kv_kib_per_token']:,.0f}"),
        ("all weights (GB)", f"{s['weight_gb']:.2f}"),
        ("weights a forward pass reads (GB)", f"{m.streamed_weight_bytes_dense() / 1e9:.2f}"),
    ], column=m.name)


def eq1_table(n_tokens: int = 8192, model="llama2-70b", coefficients: bool = True):
    """:func:`eq1_comparison` for people: both counts of a prefill of ``n_tokens`` term by term, in PFLOP,
    with the coefficients (``coefficients=False``: the three PFLOP columns only)."""
    df = eq1_comparison(n_tokens, model)
    coef = {"linear": ("b = {:g}", "{:.1f}"), "attention": ("a = {:g}", "{:g}")}
    rows = []
    for term, label in (("linear", "linear layers"), ("attention", "attention"), ("lm_head", "LM head"),
                        ("total", "total")):
        r = df.loc[term]
        eq_c, our_c = coef.get(term, ("—", "—"))
        rows.append({"term": label,
                     "Eq. 1 coefficient": eq_c.format(r["eq1_coef"]) if term in coef else "—",
                     "our coefficient": our_c.format(r["ours_coef"]) if term in coef else "—",
                     "Eq. 1 (PFLOP)": r["eq1_flops"] / 1e15, "ours (PFLOP)": r["ours_flops"] / 1e15,
                     "ours − Eq. 1 (PFLOP)": r["ours_minus_eq1"] / 1e15})
    out = pd.DataFrame(rows).set_index("term")
    if not coefficients:
        out = out.drop(columns=["Eq. 1 coefficient", "our coefficient"])
    out.index.name = None
    return out.style.format({"Eq. 1 (PFLOP)": "{:.3f}", "ours (PFLOP)": "{:.3f}",
                             "ours − Eq. 1 (PFLOP)": "{:+.3f}"}).format_index(escape="html")


def points_table(points: pd.DataFrame, node="a800x8"):
    """:func:`roofline_points` for people: each point's intensity, bound, attainable FLOP/s and time."""
    ridge = rf.ridge_point(get_node(node))
    rows = []
    for r in points.itertuples():
        x = r.label.split("=", 1)[1]
        what = f"prefill of {int(x):,} tokens" if r.phase == "prefill" else f"decode, batch of {int(x):,}"
        rows.append({"point": what, "intensity (FLOP/B)": _fmt(r.intensity),
                     "bound": "compute" if r.intensity >= ridge else "memory",
                     "attainable (TFLOP/s)": f"{r.attainable_flops / 1e12:,.0f}",
                     "time (ms)": _fmt(r.time_s * 1e3)})
    return pd.DataFrame(rows).style.hide(axis="index")


def ridge_table(contexts=(256, 1024, 4096, 8192), model="llama2-70b", node="a800x8"):
    """Per context length: the batch from which decode is compute-bound ("never" if it is not), and the
    batch at which the KV reads equal the weight reads."""
    rows = []
    for c in contexts:
        b = decode_ridge_batch(model, node, c)
        rows.append({"context per sequence (tokens)": f"{c:,}",
                     "smallest batch that is compute-bound": "never" if math.isinf(b) else f"{b:,.0f}",
                     "KV reads equal weight reads at batch": f"{kv_equals_weights_batch(model, c):,.0f}"})
    return pd.DataFrame(rows).style.hide(axis="index")


def _ms(x: float) -> str:
    """Milliseconds as a person reads them: "127", "2,278" (a whole number without ".0"), else one decimal."""
    return f"{x:,.0f}" if abs(x - round(x)) < 1e-9 else f"{x:,.1f}"


def measured_table(measured: pd.DataFrame | None = None, mfu: bool = True):
    """:func:`measured_prefill_mfu` for people, ordered TP2, TP4, TP8: GPUs, prompt, measured time, the peak of
    those GPUs, and (``mfu``) FLOPs and MFU."""
    df = measured_prefill_mfu() if measured is None else measured
    df = df.sort_values(["tp", "prompt_tokens"])
    cols = {"GPUs (TP)": df["tp"].astype(int), "prompt (tokens)": df["prompt_tokens"].astype(int),
            "measured (ms)": [_ms(x) for x in df["measured_s"] * 1e3],
            "peak of those GPUs (PFLOP/s)": [A100_NODE.with_gpus(int(tp)).peak_flops / 1e15 for tp in df["tp"]]}
    if mfu:
        cols.update({"FLOPs (TFLOP)": df["flops"] / 1e12, "MFU (%)": df["mfu"] * 100})
    out = pd.DataFrame(cols)
    return out.style.hide(axis="index").format({"prompt (tokens)": "{:,}", "peak of those GPUs (PFLOP/s)": "{:.3f}",
                                                "FLOPs (TFLOP)": "{:,.1f}", "MFU (%)": "{:.0f}"})


def knobs_table(fitted: dict | None = None):
    """The calibrated preset's fitted knobs in words and units (``calibration.FITTED`` by default)."""
    from ..calibration import FITTED

    f = FITTED if fitted is None else fitted

    def per_tp(d, scale, fmt):
        return ", ".join(f"TP{tp} {fmt.format(v * scale)}" for tp, v in sorted(d.items()))

    return _readout([
        ("matmuls, share of peak (%)", per_tp(f["linear_efficiency"], 100, "{:.0f}")),
        ("attention, share of peak (%)", per_tp(f["attn_efficiency"], 100, "{:.1f}")),
        ("fixed time added to each prefill (ms)", f"{f['prefill_overhead_s'] * 1e3:.0f}"),
        ("decode: share of HBM bandwidth (%)", f"{f['hbm_efficiency'] * 100:.0f}"),
        ("decode: floor per step (ms)", f"{f['decode_floor_s'] * 1e3:.1f}"),
        ("decode: added per sequence in the batch (ms)", f"{f['decode_floor_s_per_seq'] * 1e3:.2f}"),
    ], column="fitted knob")


def calibration_view(comparison: pd.DataFrame | None = None):
    """:func:`calibration_table` for people: each measurement beside the three presets, in ms."""
    df = calibration_table() if comparison is None else comparison
    out = pd.DataFrame({"phase": df["phase"], "GPUs (TP)": df["tp"].astype(int),
                        "batch": df["batch_size"].astype(int), "prompt (tokens)": df["prompt_tokens"].astype(int),
                        "measured (ms)": [_ms(x) for x in df["measured_s"] * 1e3], "ideal (ms)": df["ideal_s"] * 1e3,
                        "calibrated (ms)": df["calibrated_s"] * 1e3, "modern (ms)": df["modern_s"] * 1e3,
                        "calibrated error (%)": df["calibrated_rel_err"] * 100})
    ms = "{:,.1f}"
    return out.style.hide(axis="index").format({"prompt (tokens)": "{:,}", "ideal (ms)": ms,
                                                "calibrated (ms)": ms, "modern (ms)": ms,
                                                "calibrated error (%)": "{:+.1f}"})


def long_prompt_table(long: pd.DataFrame, lengths=(8192, 32768, 131072)):
    """Prefill seconds per preset at a few prompt lengths (rows: prompt, columns: preset), for people."""
    t = long.pivot(index="n_new", columns="preset", values="time_s").loc[list(lengths)]
    t = t[[p for p in PRESET_NAMES if p in t.columns]]
    t.columns = [f"{p} (s)" for p in t.columns]
    t.index = pd.Index([f"{int(n):,}" for n in t.index], name="prompt (tokens)")
    return t.style.format("{:,.2f}")


def tp_table(model="llama2-70b", node="a800x8"):
    """The TP all-reduce of an 8k prefill, for people: bytes per token, its share of the time, the A800's cost."""
    m = get_model(model)
    return _readout([
        ("all-reduce bytes per token per GPU (MB)", f"{rf.tp_allreduce_bytes_per_token(m, 8) / 1e6:.2f}"),
        ("all-reduce share of prefill time, calibrated, A800 (%)", f"{tp_comm_share(m, node, 'calibrated') * 100:.0f}"),
        ("the same share on an A100 (%)", f"{tp_comm_share(m, A100_NODE, 'calibrated') * 100:.0f}"),
        ("extra time for an 8k prefill on A800 vs A100, calibrated (ms)", f"{nvlink_penalty(8192, m, node) * 1e3:.0f}"),
    ])


#: The reproduce metrics of this lecture, for people: name → (label, scale, unit shown).
_METRIC_LABELS = {
    "roofline.kv_bytes_per_token.llama2_70b": ("KV cache per token", 1.0, "B"),
    "roofline.prefill_flops.llama2_70b.n8192": ("FLOPs of an 8k prefill", 1e-15, "PFLOP"),
    "roofline.prefill_s.llama2_70b.a800x8.n8192.ideal": ("8k prefill, ideal", 1.0, "s"),
    "roofline.prefill_s.llama2_70b.a800x8.n8192.calibrated": ("8k prefill, calibrated, on 8 × A800", 1.0, "s"),
    "roofline.decode_step_s.llama2_70b.a800x8.b1.ideal": ("decode step at batch 1, ideal", 1e3, "ms"),
    "roofline.decode_step_s.llama2_70b.a800x8.b1.calibrated": ("decode step at batch 1, calibrated", 1e3, "ms"),
}


def reproduce_table():
    """``python -m mooncake_lab reproduce --only roofline`` as a table for people (labels, units, rounded)."""
    from ..reproduce import collect

    rows = []
    ref = "paper, or measured on 8 × A100"
    for x in collect("roofline"):
        label, scale, unit = _METRIC_LABELS.get(x.name, (x.name.removeprefix("roofline."), 1.0, x.unit))
        paper = "—" if x.paper is None else _fmt(x.paper * scale)
        if x.name == "roofline.prefill_s.llama2_70b.a800x8.n8192.calibrated":
            # like for like: the measurement is on A100s, so compare the calibrated A100 time with it;
            # the A800 time is a prediction with no measurement beside it
            a100 = rf.prefill_time("llama2-70b", A100_NODE, 8192, preset="calibrated")
            rows.append({"quantity": "8k prefill, calibrated, on 8 × A100", "ours": _fmt(a100 * scale),
                         ref: paper, "unit": unit})
            paper = "— (prediction)"
        rows.append({"quantity": label, "ours": _fmt(x.ours * scale), ref: paper, "unit": unit})
    return pd.DataFrame(rows).style.hide(axis="index")


def boxed(summary: str, *items):
    """``items`` (tables: a pandas Styler or DataFrame; figures: a matplotlib Figure) inside one collapsed
    ``<details>`` box headed ``summary``, as an HTML output: precision one click away from the main line."""
    import base64
    import io

    from IPython.display import HTML

    parts = []
    for it in items:
        if hasattr(it, "savefig"):
            buf = io.BytesIO()
            it.savefig(buf, format="png", dpi=90, bbox_inches="tight")
            import matplotlib.pyplot as plt
            plt.close(it)
            parts.append(f'<img alt="{summary}" style="max-width:100%" '
                         f'src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}"/>')
        else:
            parts.append(it.to_html())
    return HTML(f"<details><summary>{summary}</summary>\n\n" + "\n".join(parts) + "\n\n</details>")
