"""Calibration: the measured table as data, the fit reproduces the stored constants, presets."""
import re

import numpy as np
import pytest

from mooncake_lab import calibration as cal
from mooncake_lab.roofline import decode_step_time, prefill_time
from mooncake_lab.hardware import A100_NODE
from mooncake_lab.models import LLAMA2_70B


def test_table_loads_as_data():
    df = cal.load_measured()
    assert len(df) == 21 and set(df["phase"]) == {"prefill", "decode"}
    row = df[(df.phase == "prefill") & (df.tp == 8) & (df.prompt_tokens == 8192)]
    assert row["latency_ms"].item() == 1550 and row["latency_s"].item() == pytest.approx(1.55)
    dec = df[(df.phase == "decode") & (df.tp == 8) & (df.batch_size == 64)]
    assert dec["context_tokens"].item() == 64 * 512


def test_refit_reproduces_stored_constants():
    fit = cal.fit_calibrated()
    assert set(fit) == set(cal.FITTED)
    for k, v in cal.FITTED.items():
        if isinstance(v, dict):
            assert set(fit[k]) == set(v)
            for tp in v:
                assert fit[k][tp] == pytest.approx(v[tp], rel=1e-5), (k, tp)
        else:
            assert fit[k] == pytest.approx(v, rel=1e-5), k


def test_calibrated_tracks_measured_table():
    df = cal.compare_to_measured()
    err = df["calibrated_rel_err"].abs()
    assert err.max() < 0.10                                  # every row within 10%
    assert np.sqrt(np.mean(df["calibrated_rel_err"] ** 2)) < 0.05   # RMS under 5%
    head = df[(df.tp == 8) & (((df.phase == "prefill") & (df.prompt_tokens == 8192))
                              | ((df.phase == "decode") & (df.batch_size == 1)))]
    assert (head["calibrated_rel_err"].abs() < 0.05).all()   # the two headline rows within 5%


def test_ideal_is_a_lower_bound_of_measurements():
    df = cal.compare_to_measured(presets=("ideal",))
    assert (df["ideal_s"] < df["measured_s"]).all()
    assert "calibrated_rel_err" not in df


def test_decode_floor_is_overlapped_not_added():
    # TP2 batch 1: HBM streaming (137.6 GB / (2 × 2,039 GB/s) / 0.563 ≈ 59.9 ms) exceeds the floor
    # (≈ 43.5 ms), so the step equals the memory time alone — the floor does not add on top.
    t = decode_step_time(LLAMA2_70B, A100_NODE.with_gpus(2), 1, 512, preset="calibrated")
    mem = LLAMA2_70B.decode_bytes(1, 512) / (2 * 2039e9 * cal.FITTED["hbm_efficiency"])
    assert t == pytest.approx(mem, rel=1e-9)
    assert t == pytest.approx(0.0599, rel=0.01)             # measured 59.9 ms


def test_refit_follows_the_data():
    df = cal.load_measured()
    slower = df.copy()
    dec = slower["phase"] == "decode"
    slower.loc[dec, "latency_s"] *= 1.5          # a 1.5× slower decode stack ...
    fit = cal.fit_decode(slower)
    assert fit["decode_floor_s"] == pytest.approx(1.5 * cal.FITTED["decode_floor_s"], rel=2e-3)
    assert fit["hbm_efficiency"] == pytest.approx(cal.FITTED["hbm_efficiency"] / 1.5, rel=2e-3)
    p = cal.refit_preset(slower, name="slow")
    assert decode_step_time(LLAMA2_70B, A100_NODE, 1, 512, preset=p) == pytest.approx(
        1.5 * decode_step_time(LLAMA2_70B, A100_NODE, 1, 512, preset="calibrated"), rel=2e-3)


def test_prefill_fit_sensitive_to_rows():
    df = cal.load_measured()
    edited = df.copy()
    rows = (edited.phase == "prefill") & (edited.tp == 8)
    edited.loc[rows, "latency_s"] *= 2.0
    fit = cal.fit_prefill(edited)
    assert fit["linear_efficiency"][8] < cal.FITTED["linear_efficiency"][8]
    assert fit["linear_efficiency"][4] != pytest.approx(cal.FITTED["linear_efficiency"][4], rel=1e-6)


def test_presets_and_knobs():
    assert cal.get_preset("Calibrated") is cal.CALIBRATED
    assert cal.CALIBRATED.linear_efficiency_at(8) == cal.FITTED["linear_efficiency"][8]
    assert cal.CALIBRATED.linear_efficiency_at(16) == cal.FITTED["linear_efficiency"][8]   # nearest TP
    assert cal.CALIBRATED.linear_efficiency_at(3) == cal.FITTED["linear_efficiency"][2]    # tie → lower TP
    assert cal.MODERN.hbm_efficiency == 0.72 and cal.MODERN.linear_efficiency_at(8) == 0.65
    # modern per-step overhead: 0.5 ms + 20 µs × 80 layers = 2.1 ms on top of the ideal decode step
    ideal = decode_step_time(LLAMA2_70B, A100_NODE, 1, 0, preset="ideal")
    modern = decode_step_time(LLAMA2_70B, A100_NODE, 1, 0, preset="modern")
    assert modern == pytest.approx(ideal / 0.72 + 0.5e-3 + 80 * 20e-6, rel=1e-9)
    assert prefill_time(LLAMA2_70B, A100_NODE, 8192, preset="modern") > prefill_time(LLAMA2_70B, A100_NODE, 8192)


@pytest.mark.parametrize("kwargs,match", [
    ({"linear_efficiency": 1.5}, "linear_efficiency"), ({"attn_efficiency": {8: 0.0}}, "attn_efficiency"),
    ({"hbm_efficiency": float("nan")}, "hbm_efficiency"), ({"decode_floor_s": -1.0}, "decode_floor_s"),
    ({"linear_efficiency": {}}, "linear_efficiency"),
])
def test_bad_preset(kwargs, match):
    with pytest.raises(ValueError, match=rf"(^|\.){re.escape(match)}(\[[^\]]*\])?(: | must | values )"):
        # (the field named as the wrong one, not its letters anywhere)
        cal.Preset("bad", **kwargs)


def test_unknown_preset():
    with pytest.raises(ValueError, match=r"preset: unknown preset 'turbo'; allowed: ideal, calibrated, modern"):
        cal.get_preset("turbo")
