"""Lecture 01 (roofline of LLaMA2-70B on 8×A800): experiments, plots, dashboards, exercises."""
from __future__ import annotations

import math

import numpy as np
import pytest

from mooncake_lab import check, hardware, models, roofline
from mooncake_lab.dashboards.roofline import (BATCH_CHOICES, CONTEXT_CHOICES, NVLINK_RANGE_GBS, PROMPT_CHOICES,
                                              PresetDashboard, RooflineDashboard)
from mooncake_lab.experiments import l01_roofline as ex

M = models.LLAMA2_70B
A800 = hardware.A800_NODE


# --- experiments against hand-worked values ------------------------------------------------------
def test_per_token_counts_by_hand():
    s = ex.per_token_counts(M)
    # per layer: Q 8192² + K,V 2·8192·1024 + O 8192² + FFN 3·8192·28672 = 12.75 · 8192² = 855,638,016
    assert s["params_per_layer"] == 12.75 * 8192 ** 2
    # × 80 layers × 2 FLOP = 136.902 GFLOP; LM head 2·32000·8192 = 0.524288 GFLOP
    assert s["linear_gflop_per_token"] == pytest.approx(2 * 80 * 12.75 * 8192 ** 2 / 1e9)
    assert s["lm_head_gflop_per_token"] == pytest.approx(0.524288)
    # attention: 4 · 128 · 64 heads · 80 layers = 2,621,440 FLOP per attended key
    assert s["attention_flop_per_key"] == 2_621_440
    # KV: 2 · 80 · 8 · 128 · 2 B = 327,680 B = 320 KiB
    assert s["kv_kib_per_token"] == 320


def test_eq1_comparison_terms():
    df = ex.eq1_comparison(8192)
    # Eq. 1: 80·(4·8192²·8192 + 22·8192·8192²) = 80·26·8192³ = 1.14349e15
    assert df.loc["total", "eq1_flops"] == pytest.approx(80 * 26 * 8192 ** 3)
    # our linear coefficient from the shapes: 2 × 12.75 = 25.5 (d² per token per layer)
    assert df.loc["linear", "ours_coef"] == pytest.approx(25.5)
    # causal ½: effective a = 2
    assert df.loc["attention", "ours_coef"] == pytest.approx(2.0)
    assert df.loc["attention", "ours_minus_eq1"] < 0 < df.loc["linear", "ours_minus_eq1"]
    assert df.loc["total", "ours_flops"] == pytest.approx(M.prefill_flops(8192))
    assert df["ours_minus_eq1"].iloc[:3].sum() == pytest.approx(df.loc["total", "ours_minus_eq1"])


def test_measured_mfu_tp8_8k():
    df = ex.measured_prefill_mfu()
    row = df[(df.tp == 8) & (df.prompt_tokens == 8192)].iloc[0]
    # 1.21376e15 FLOP / (1.55 s × 8 × 312e12) = 0.3137
    assert row["mfu"] == pytest.approx(1.2137577578496e15 / (1.55 * 8 * 312e12))
    assert 0.31 < row["mfu"] < 0.32
    assert (df["mfu"] < 1).all() and (df["mfu"] > 0).all()


def test_decode_ridge_batch_by_hand():
    # per sequence: 137.426 GFLOP (matmuls + head) + 2.62144 MFLOP × 1024 = 140.110 GFLOP;
    # bytes: 137.429 GB of streamed weights + b × 1024 × 327,680 B (0.33554 GB);
    # ridge 312e12 / 2.039e12 = 153.016 → b = 153.016·137.429 / (140.110 − 153.016·0.33554) = 236.9
    b = ex.decode_ridge_batch(M, A800, 1024)
    assert b == pytest.approx(236.9, rel=2e-3)
    assert roofline.decode_intensity(M, b, b * 1024) == pytest.approx(roofline.ridge_point(A800), rel=1e-6)
    # no KV at all: b ≈ 153.016 × 137.429 / 137.426 ≈ 153.0 (weights-only rule of thumb)
    assert ex.decode_ridge_batch(M, A800, 0) == pytest.approx(153.0, rel=2e-3)
    # 8k contexts: asymptotic intensity (137.426 + 21.47) G / 2.684 GB = 59 FLOP/B < 153 → never
    assert math.isinf(ex.decode_ridge_batch(M, A800, 8192))
    # faster HBM relative to compute (H800 ridge 295) needs a bigger batch
    assert ex.decode_ridge_batch(M, "h800x8", 256) > ex.decode_ridge_batch(M, A800, 256)


def test_kv_equals_weights_batch():
    # 137.429e9 B of weights / (1024 × 327,680 B) = 409.6
    assert ex.kv_equals_weights_batch(M, 1024) == pytest.approx(M.streamed_weight_bytes_dense() / (1024 * 327680))
    assert ex.kv_equals_weights_batch(M, 1024) == pytest.approx(409.6, rel=1e-3)


def test_nvlink_penalty_by_hand():
    # 2 all-reduces × 80 layers × 2·7/8 × 8192 × 2 B = 4,587,520 B per token per GPU;
    # at 0.67 × 200 GB/s vs 0.67 × 300 GB/s: 8192 × 4,587,520 × (1/134e9 − 1/201e9) = 0.09349 s
    expected = 8192 * 4_587_520 * (1 / 134e9 - 1 / 201e9)
    assert ex.nvlink_penalty(8192, M, A800, "calibrated", 400, 600) == pytest.approx(expected, rel=1e-6)
    # ideal overlaps TP comm: NVLink has no effect unless exposed
    assert ex.nvlink_penalty(8192, M, A800, "ideal", 400, 600) == 0.0
    assert ex.nvlink_penalty(8192, M, A800, ex.with_tp_comm("ideal"), 400, 600) > 0.0


def test_tp_comm_share_and_preset_variant():
    assert ex.tp_comm_share(M, A800, "ideal") == 0.0
    # exposed at full efficiency: 22.94 µs comm vs 55.06 µs compute per token → 0.294
    assert ex.tp_comm_share(M, A800, ex.with_tp_comm("ideal")) == pytest.approx(22.9376 / (22.9376 + 55.0587), rel=1e-3)
    cal = roofline.get_preset("calibrated")
    assert ex.with_tp_comm(cal) is cal
    assert ex.with_tp_comm("modern").tp_comm and not roofline.get_preset("modern").tp_comm
    # section 7's words for calibrated's shares: "about a third on the A800 and a quarter on the A100"
    assert ex.tp_comm_share(M, A800, "calibrated") == pytest.approx(1 / 3, abs=0.02)
    assert ex.tp_comm_share(M, hardware.A100_NODE, "calibrated") == pytest.approx(1 / 4, abs=0.02)


def test_with_nvlink():
    nd = ex.with_nvlink("a800x8", 600)
    assert nd.gpu.nvlink_bw == 600e9 and nd.peak_flops == A800.peak_flops
    assert A800.gpu.nvlink_bw == 400e9          # the original is untouched
    for bad in (0, -5, math.nan, math.inf):
        with pytest.raises(ValueError, match=r"^nvlink_gbs must "):
            ex.with_nvlink("a800x8", bad)
    with pytest.raises(ValueError, match=r"^decode_ridge_batch\.context_per_seq: "):
        ex.decode_ridge_batch(M, A800, -1)


def test_roofline_sweep():
    df = ex.roofline_sweep(M, A800, "ideal", lengths=[64, 8192], batches=[1, 1024], context_per_seq=4096)
    pre, dec = df[df.phase == "prefill"].set_index("x"), df[df.phase == "decode"].set_index("x")
    assert pre.loc[8192, "bound"] == "compute" and pre.loc[64, "bound"] == "memory"
    assert dec.loc[1, "bound"] == "memory"
    # ideal: every point sits on the roof
    assert np.allclose(df["achieved_flops"], df["attainable_flops"], rtol=1e-9)
    # 1024 × 4096 = 4.2M tokens > 1.34M-token capacity
    assert dec.loc[1, "fits"] and not dec.loc[1024, "fits"]
    # the fast path equals the public functions
    assert pre.loc[8192, "time_s"] == pytest.approx(roofline.prefill_time(M, A800, 8192))
    cal = ex.roofline_sweep(M, A800, "calibrated", lengths=[8192], batches=[32])
    assert (cal["achieved_flops"] < cal["attainable_flops"]).all()


# --- plots -----------------------------------------------------------------------------------------
def _labelled(fig) -> bool:
    title = (fig._suptitle.get_text() if fig._suptitle else "") or any(a.get_title() for a in fig.axes)
    return bool(title) and all(a.get_xlabel() and a.get_ylabel() for a in fig.axes)


def test_log_limits_by_hand():
    from mooncake_lab.plots import log_limits
    # 5% of 2 decades on each side: 10^±0.1 = ×1.2589
    assert log_limits(1.0, 100.0) == pytest.approx((1 / 1.258925, 125.8925), rel=1e-6)


def test_headline_figures_registered_and_labelled():
    from mooncake_lab.reproduce import collect_figures
    figs = collect_figures("roofline")
    assert {"l01_roofline_a800x8", "l01_flops_per_token", "l01_prefill_vs_length", "l01_decode_vs_batch",
            "l01_ideal_calibrated_measured"} <= set(figs)
    for name, fig in figs.items():
        assert _labelled(fig), name


# --- dashboards ------------------------------------------------------------------------------------
def _content(fig) -> list:
    """Everything drawn: line data, scatter offsets, texts and titles of every axis."""
    out = [fig._suptitle.get_text() if fig._suptitle else ""]
    for ax in fig.axes:
        out.append(ax.get_title())
        out.extend(np.round(np.asarray(line.get_xydata(), dtype=float), 12).tobytes() for line in ax.get_lines())
        out.extend(np.round(np.asarray(c.get_offsets(), dtype=float), 12).tobytes() for c in ax.collections)
        out.extend(t.get_text() for t in ax.texts)
    return out


@pytest.fixture(scope="module")
def roof():
    return RooflineDashboard()


@pytest.mark.parametrize("name,value", [("prompt", 32768), ("batch", 256), ("context", 8192),
                                        ("preset", "calibrated"), ("model", "DeepSeek-V3"), ("node", "h800x8")])
def test_roofline_dashboard_controls_change_figure(roof, name, value):
    before, draws = _content(roof.figure), roof.n_draws
    roof.controls[name].value = value
    assert roof.n_draws == draws + 1
    assert _content(roof.figure) != before
    assert _labelled(roof.figure)


def test_roofline_dashboard_readout_and_bounds():
    d = RooflineDashboard(prompt=8192, batch=1, context=1024)
    assert "compute-bound" in d.readout.value and "memory-bound" in d.readout.value
    assert "≈ 237" in d.readout.value             # decode ridge batch at 1k contexts
    c = d.controls
    assert tuple(v for _, v in c["prompt"].options) == PROMPT_CHOICES and min(PROMPT_CHOICES) >= 1
    assert tuple(c["batch"].options) == BATCH_CHOICES and min(BATCH_CHOICES) >= 1
    assert tuple(v for _, v in c["context"].options) == CONTEXT_CHOICES
    for w in (c["prompt"], c["batch"], c["context"]):
        assert w.continuous_update is False
    # the extreme corner does not crash and reports the KV overflow
    c["prompt"].value, c["batch"].value, c["context"].value = max(PROMPT_CHOICES), max(BATCH_CHOICES), max(CONTEXT_CHOICES)
    assert "does not fit" in d.readout.value and "never" in d.readout.value


@pytest.fixture
def presets():
    return PresetDashboard(preset="calibrated")


def test_preset_dashboard_nvlink_moves_calibrated_prefill(presets):
    before = _content(presets.figure)
    presets.controls["nvlink"].value = 600
    assert _content(presets.figure) != before
    assert "+0 ms" in presets.readout.value            # 600 GB/s vs the 600 GB/s reference
    assert presets.controls["tp_comm"].disabled        # calibrated always exposes the all-reduce
    assert "always exposed" in presets.controls["tp_comm"].description   # … and the box says so (issue 13 §10)


def test_preset_dashboard_tp_comm_box_says_why_it_is_off_by_default():
    d = PresetDashboard()                               # the default preset is calibrated
    box = d.controls["tp_comm"]
    assert d.value("preset") == "calibrated" and box.disabled and "always exposed" in box.description
    d.controls["preset"].value = "modern"
    assert not box.disabled and box.description == "expose TP all-reduce"
    before = _content(d.figure)
    box.value = True                                    # under modern it does something visible
    assert _content(d.figure) != before and "TP all-reduce =" in d.readout.value


def test_preset_dashboard_nvlink_needs_exposed_comm_under_ideal(presets):
    presets.controls["preset"].value = "ideal"
    assert not presets.controls["tp_comm"].disabled
    before = _content(presets.figure)
    presets.controls["nvlink"].value = 200
    assert _content(presets.figure) == before                # the data do not move …
    assert any("NVLink 200 GB/s" in t.get_text() for t in presets.figure.texts)   # … the heading does
    assert "overlapped" in presets.readout.value
    before = _content(presets.figure)
    presets.controls["tp_comm"].value = True
    assert _content(presets.figure) != before
    assert "TP all-reduce =" in presets.readout.value


@pytest.mark.parametrize("name,value", [("preset", "modern"), ("context", 8192), ("nvlink", 900)])
def test_preset_dashboard_controls_change_figure(presets, name, value):
    before = _content(presets.figure)
    presets.controls[name].value = value
    assert _content(presets.figure) != before
    assert _labelled(presets.figure)


def test_preset_dashboard_bounds(presets):
    nv = presets.controls["nvlink"]
    assert (nv.min, nv.max) == NVLINK_RANGE_GBS and nv.min > 0 and nv.continuous_update is False
    assert presets.controls["context"].continuous_update is False
    nv.value = nv.min
    presets.controls["context"].value = presets.controls["context"].options[-1][1]
    assert _labelled(presets.figure)


# --- exercises -------------------------------------------------------------------------------------
def test_exercise_values_by_hand():
    # each question asks for a case the lecture does not print: 2,048 tokens, a 4,096-token prompt,
    # TP8's 2k prefill, 512-token contexts, 900 vs 400 GB/s
    assert check("01.kv_bytes", 2 * 80 * 8 * 128 * 2 * 2048 / 2**20)       # 640 MiB
    assert not check("01.kv_bytes", 2 * 80 * 64 * 128 * 2 * 2048 / 2**20)  # MHA count: 8× too many
    assert not check("01.kv_bytes", 2 * 80 * 8 * 128 * 2)                  # one token, not the sequence
    assert check("01.prefill_pflop_4k", 0.585)
    assert not check("01.prefill_pflop_4k", 1.214)               # the lecture's 8k prompt
    assert check("01.measured_mfu_2k", 0.42)
    assert not check("01.measured_mfu_2k", 42)                   # a percentage, not a fraction
    assert not check("01.measured_mfu_2k", 0.314)                # the lecture's 8k prefill
    assert check("01.decode_ridge_batch", 186)
    assert not check("01.decode_ridge_batch", 237)               # 1,024-token contexts
    assert not check("01.decode_ridge_batch", 152)               # forgot the KV reads
    assert check("01.nvlink_penalty_ms", 156)
    assert not check("01.nvlink_penalty_ms", 93)                 # A800 vs A100
    assert not check("01.nvlink_penalty_ms", 156 * 0.67)          # both directions at once, or no 67%


def test_glossary_has_lecture01_terms():
    from mooncake_lab.glossary import glossary
    terms = set(glossary("01")["term"])
    assert {"roofline model", "ridge point", "MFU (model FLOPs utilisation)"} <= terms


def test_glossary_shows_every_meaning_in_full():
    # Issue 13 §3: pandas cut the meaning column at 50 characters with "…" in every lecture.
    from html import unescape as html_unescape

    from mooncake_lab.glossary import TERMS, glossary
    for lecture in sorted({t[3] for t in TERMS}):
        g = glossary(lecture)
        html, text = g._repr_html_(), repr(g)
        assert "…" not in html and "..." not in text
        for meaning in g["meaning"]:
            assert meaning in html_unescape(html) and meaning in text
        assert "white-space: normal" in html     # wrapped, not one long line


def test_mla_decode_can_turn_compute_bound():
    # Issue 13 §6: absorbed MLA attention is ≈ 242 FLOP per KV byte, above the A800's ridge (153) and
    # below the H800's (295): long-context decode of DeepSeek-V3 turns compute-bound on A800 only.
    ds = models.DEEPSEEK_V3
    assert ds.decode_attention_flops_coefficient() / ds.kv_bytes_per_token() == pytest.approx(241.78, abs=0.01)
    # the ridge batch by its definition (no number copied from a run): at b the decode step's intensity is
    # the A800's ridge, 1 % fewer sequences stay memory-bound, 1 % more turn compute-bound
    b = ex.decode_ridge_batch(ds, "a800x8", 32768)
    assert math.isfinite(b) and b > 1
    at = [roofline.decode_intensity(ds, k * b, k * b * 32768) for k in (0.99, 1.0, 1.01)]
    assert at[0] < roofline.ridge_point(A800) < at[2] and at[1] == pytest.approx(roofline.ridge_point(A800), rel=1e-6)
    assert math.isinf(ex.decode_ridge_batch(ds, "h800x8", 32768))
    assert math.isinf(ex.decode_ridge_batch(M, "a800x8", 32768))   # GQA never does


# --- what the notebook shows: controls and tables for people (issue 25) -----------------------------
def test_dashboard_control_labels_are_shown_in_full():
    # ipywidgets cuts a description to 80 px by default ("node (8 G…"); every labelled control asks for its
    # label's own width instead.
    for dash in (RooflineDashboard(), PresetDashboard()):
        for name, w in dash.controls.items():
            if getattr(w, "description", "") and hasattr(w.style, "description_width"):
                assert w.style.description_width == "initial", (type(dash).__name__, name)


_SCIENTIFIC = r"(?<![\w.])\d(?:\.\d+)?e[+-]?\d+"


@pytest.mark.parametrize("make", [
    lambda: ex.machine_table(A800), lambda: ex.per_token_table(M), lambda: ex.eq1_table(8192),
    lambda: ex.points_table(ex.roofline_points(M, A800, context_per_seq=1024), A800), lambda: ex.ridge_table(),
    lambda: ex.measured_table(), lambda: ex.knobs_table(), lambda: ex.calibration_view(),
    lambda: ex.long_prompt_table(ex.prefill_vs_length(M, A800)), lambda: ex.tp_table(M, A800),
    lambda: ex.reproduce_table()])
def test_tables_read_as_numbers_for_people(make):
    import re
    html = make().to_html()
    cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", html, re.S)]
    assert cells
    for c in cells:
        assert not re.search(_SCIENTIFIC, c), c            # "6.845e+10" → "68.45 B"
        assert not c.endswith(("…", "...")), c
        assert "{" not in c and "_" not in c, c             # no dict, no raw column name such as ours_flops


def test_tables_state_the_hand_worked_values():
    text = ex.per_token_table(M).to_html()
    # the matmul weights (12.75 · 8192² × 80 = 68.45 B), all weights 137.95 GB vs the 137.43 GB a pass reads
    assert "68.45 B" in text and "137.95" in text and "137.43" in text and "327,680" in text
    points = ex.points_table(ex.roofline_points(M, A800, context_per_seq=1024), A800).to_html()
    assert "prefill of 32,768 tokens" in points and "39,891" in points     # not 3.989e+04
    ridge = ex.ridge_table(contexts=(1024, 8192)).to_html()
    assert "237" in ridge and "never" in ridge and "410" in ridge
    measured = ex.measured_table().to_html()
    assert ">8,192<" in measured and "8192.0" not in measured                # a count is an integer
    knobs = ex.knobs_table().to_html()
    assert "TP2 94, TP4 86, TP8 82" in knobs                               # linear_efficiency, not a dict
