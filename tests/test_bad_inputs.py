"""Bad input at public entry points outside the simulator and traces (issue 12): each case raises a
ValueError (InputError) naming the argument, never a TypeError/KeyError/OverflowError/ZeroDivisionError
from inside, and never returns NaN or inf."""
import math
import re

import numpy as np
import pandas as pd
import pytest

from mooncake_lab import calibration, cpp, hardware, models, prefix_cache, roofline, storage
from mooncake_lab.experiments import l00_welcome, l01_roofline, l02_storage, l05_prefill
from mooncake_lab.synthetic import synthetic_trace

M, N = "llama2-70b", "a800x8"
class _Opaque:
    """An object of no accepted type whose repr is the same in every process (test ids: pytest-xdist
    workers must collect the same ones)."""

    def __repr__(self) -> str:
        return "<object>"


OPAQUE = _Opaque()
JUNK = [None, "", "8", "ü", [1, 2], {}, OPAQUE, np.complex64(1)]
NONFINITE = [math.nan, math.inf, -math.inf, 10**400]
_STATE = prefix_cache.new_cache_state(2, 10, 5)

CASES = [  # (label, call, argument the message must name)
    *[(f"layerwise_time.{p}={v!r}", lambda p=p, v=v: storage.layerwise_time(**{"transfer_s": 1.0, "compute_s": 1.0,
                                                                                  "n_layers": 80, p: v}), p)
      for p in ("transfer_s", "compute_s", "n_layers") for v in JUNK + NONFINITE + [-1]],
    ("layerwise_time.n_layers=0", lambda: storage.layerwise_time(1.0, 1.0, 0), "n_layers"),
    *[(f"n_chunks.{p}={v!r}", lambda p=p, v=v: cpp.n_chunks(**{"n_new": 1000, "chunk": 100, p: v}), p)
      for p in ("n_new", "chunk") for v in JUNK + NONFINITE],
    ("n_chunks.chunk=0", lambda: cpp.n_chunks(1000, 0), "chunk"),
    *[(f"fast25_eq1.{p}={v!r}", lambda p=p, v=v: models.fast25_eq1_prefill_flops(8192, **{p: v}), p)
      for p in ("n_layers", "d", "a", "b") for v in JUNK + NONFINITE],
    *[(f"eq2_min_bandwidth.{p}={v!r}", lambda p=p, v=v: storage.eq2_min_bandwidth(M, N, 8192, **{p: v}), p)
      for p in ("a", "b") for v in JUNK + NONFINITE],
    *[(f"gbps_to_bytes_per_s={v!r}", lambda v=v: hardware.gbps_to_bytes_per_s(v), "gbps")
      for v in JUNK + NONFINITE + [1e308]],
    *[(f"tp_allreduce.tp={v!r}", lambda v=v: roofline.tp_allreduce_bytes_per_token(models.get_model(M), v), "tp")
      for v in JUNK + NONFINITE + [0]],
    *[(f"tp_allreduce.model={v!r}", lambda v=v: roofline.tp_allreduce_bytes_per_token(v, 8), "model")
      for v in JUNK],
    *[(f"arithmetic_intensity.{p}={v!r}", lambda p=p, v=v: roofline.arithmetic_intensity(**{"flops": 1e12,
                                                                                              "bytes_": 1e9, p: v}), p)
      for p in ("flops", "bytes_") for v in [x for x in JUNK if not isinstance(x, list)] + [[[1.0]]] + NONFINITE],
    ("arithmetic_intensity.bytes_=0", lambda: roofline.arithmetic_intensity(1e12, 0), "bytes_"),
    *[(f"attainable_flops.intensity={v!r}", lambda v=v: roofline.attainable_flops(v, N), "intensity")
      for v in ["", "ü", 10**400, [1, "a"]]],
    *[(f"prefix_len={v!r}", lambda v=v: storage.recompute_time(M, N, v), "prefix_len") for v in [None, math.nan, 0]],
    *[(f"seed_preset.mfu={v!r}", lambda v=v: storage.seed_preset(v), "mfu") for v in [10**400]],
    *[(f"prefill_with_prefix_load.{p}={v!r}",
       lambda p=p, v=v: storage.prefill_with_prefix_load(M, N, **{"n_new": 1000, "n_cached": 1000, p: v},
                                                         tier="dram"), p)
      for p in ("n_new", "n_cached") for v in [10**400, 1e308, np.array([[1.0]])]],
    ("breakeven_bandwidth.speedup=1e308", lambda: storage.breakeven_bandwidth(M, N, speedup=1e308), "speedup"),
    *[(f"with_ssd_bw={v!r}", lambda v=v: hardware.get_node(N).with_ssd_bw(v), "total_bw") for v in [None, 10**400]],
    ("scheme_summary.scheme=array", lambda: cpp.scheme_summary(np.array(["cpp", "tp"])), "scheme"),
    *[(f"simulate_pipeline.costs={v!r}", lambda v=v: cpp.simulate_pipeline([0.0], [1000], costs=v), "costs")
      for v in ["", "ü", {}, OPAQUE, 10**400]],
    *[(f"fit_prefill.table={v!r}", lambda v=v: calibration.fit_prefill(v), "table")
      for v in JUNK[1:] + [0, np.array([[1.0]]), pd.DataFrame({"a": [1]})]],
    ("fit_decode.table=bad tp", lambda: calibration.fit_decode(calibration.load_measured().assign(tp=-1)), "tp"),
    *[(f"compare_to_measured.presets={v!r}", lambda v=v: calibration.compare_to_measured(v), "presets")
      for v in [None, 0, "ideal", np.int8(1), OPAQUE]],
    *[(f"replica_counts.state={v!r}", lambda v=v: prefix_cache.replica_counts(v), "state") for v in JUNK],
    *[(f"new_cache_state.alloc={v!r}", lambda v=v: prefix_cache.new_cache_state(2, 10, 5, alloc=v), "alloc")
      for v in [1, "x", [1]]],
    # the lecture functions students call with a list of lengths, models, tiers ...
    *[(f"{f.__module__.rsplit('.', 1)[1]}.{f.__name__}.{p}={v!r}", lambda f=f, p=p, v=v: f(**{p: v}), p)
      for f, p in [(l00_welcome.coupled_stall, "prompt_lengths"), (l01_roofline.flops_breakdown, "lengths"),
                   (l01_roofline.prefill_vs_length, "presets"), (l01_roofline.decode_vs_batch, "batches"),
                   (l01_roofline.roofline_points, "lengths"), (l01_roofline.roofline_curve, "intensities"),
                   (l02_storage.reload_vs_recompute, "models"), (l02_storage.eq2_table, "prefix_lens"),
                   (l02_storage.kv_footprint, "models"), (l02_storage.tier_bandwidths, "tiers"),
                   (l02_storage.ssd_claims, "ssd_gbs"), (l05_prefill.cpp_vs_x, "xs"),
                   (l05_prefill.chunk_sweep, "chunks"), (l05_prefill.vram_occupation, "lengths"),
                   (l05_prefill.schemes_vs_length, "lengths")]
      for v in [0, 1.5, math.nan, np.float64(3), [], np.array([[1]]), OPAQUE, "ab"]],
    *[(f"one_request.n_output={v!r}", lambda v=v: l00_welcome.one_request(n_output=v), "n_output")  # 10**18: a hang
      for v in [10**18, 10**400, 2.5, None, "8"]],
    *[(f"interleave_demo.{p}={v!r}", lambda p=p, v=v: l05_prefill.interleave_demo(**{p: v}), p)
      for p, v in [("long_tokens", None), ("long_tokens", math.inf), ("gap_s", None), ("gap_s", 10**400),
                   ("short_tokens", [[1]])]],
    *[(f"schemes_vs_length.bandwidth_gbs={v!r}", lambda v=v: l05_prefill.schemes_vs_length(bandwidth_gbs=v),
       "bandwidth_gbs") for v in ["", {}, 10**400]],
    *[(f"eq1_comparison.n_tokens={v!r}", lambda v=v: l01_roofline.eq1_comparison(v), "n_tokens")
      for v in [None, True, np.complex64(1)]],
    ("layerwise_overlap.cached_fraction='x'", lambda: l02_storage.layerwise_overlap(cached_fraction="x"),
     "cached_fraction"),
    ("new_cache_state.n_blocks=10**400", lambda: prefix_cache.new_cache_state(2, 10**400, 5), "n_blocks"),
]


def named(name: str) -> str:
    """A pattern for a message that names ``name`` as the wrong field — ``[where.]name[i]: got …``,
    ``name must …``, ``name values …`` or, for a memory budget, ``… (name) …`` — not one that merely
    holds its letters somewhere (``a`` is in every "allowed", ``tp`` in "http")."""
    n = re.escape(name)
    return rf"(?:^|[.(\s]){n}(?:\[[^\]]*\])*(?:: | must | values )|\({n}\)"


def test_the_pattern_names_a_field_not_letters():
    assert re.search(named("a"), "eq2_min_bandwidth.a: got ''; allowed: a finite number")
    assert re.search(named("tp"), "calibration.table.tp[0]: got -1; allowed: integers in [1, 64]")
    assert re.search(named("prefix_len"), "prefix_len must be a finite number >= 1, got 0")
    assert re.search(named("n_blocks"), "f: would allocate ≈ 1 GiB for 2 caches × (5 block ids (n_blocks) + 1)")
    for other in ("eq2_min_bandwidth.b: got 'a'; allowed: a finite number", "data: got 3", "tpu: unknown",
                  "n_blocks_x: got 1", "x.n_block: got 1"):
        assert not re.search(named("a"), other) and not re.search(named("tp"), other), other
        assert not re.search(named("n_blocks"), other), other


@pytest.mark.parametrize("call,name", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_named(call, name):
    with pytest.raises(ValueError, match=named(name)):
        call()


def test_cases_counted():
    assert len(CASES) >= 380


def test_good_inputs_still_work():
    assert storage.layerwise_time(2.0, 1.0, 80) == pytest.approx(2.0 + 1.0 / 80)
    assert cpp.n_chunks(1000, 100) == 10 and cpp.n_chunks(1001, 100) == 11 and cpp.n_chunks(0, 100) == 0
    assert roofline.arithmetic_intensity(1e12, 1e9) == pytest.approx(1000.0)
    assert np.allclose(roofline.arithmetic_intensity([2.0, 4.0], [1.0, 2.0]), [2.0, 2.0])
    assert roofline.attainable_flops(np.array(1.0), N) == pytest.approx(hardware.get_node(N).peak_hbm_bw)
    assert calibration.fit_prefill(calibration.load_measured()) == calibration.fit_prefill()
    assert prefix_cache.replica_counts(_STATE).shape == (10,)
    odd = cpp.scheme_summary("cpp", x=np.float16(3))  # was NaN: (x - 1) × n × bytes overflowed float16
    assert odd["x"] == 3 and math.isfinite(odd["net_bytes"]) and odd == cpp.scheme_summary("cpp", x=3)
    assert synthetic_trace("conversation-like", n_requests=10, seed=0).n_requests == 10


# ------------------------------------------------------------------ contexts and batches of lectures 00/01
def _l00():
    return __import__("mooncake_lab.experiments.l00_welcome", fromlist=["x"])


def _l01():
    return __import__("mooncake_lab.experiments.l01_roofline", fromlist=["x"])


@pytest.mark.parametrize("call,field", [
    (lambda v: _l00().coupled_stall(batch_size=v), "coupled_stall.batch_size"),
    (lambda v: _l00().coupled_stall(context=v), "coupled_stall.context"),
    (lambda v: _l01().decode_vs_batch(context_per_seq=v), "decode_vs_batch.context_per_seq"),
    (lambda v: _l01().roofline_points(context_per_seq=v), "roofline_points.context_per_seq"),
    (lambda v: _l01().roofline_sweep(context_per_seq=v), "roofline_sweep.context_per_seq"),
    (lambda v: _l01().decode_ridge_batch(context_per_seq=v), "decode_ridge_batch.context_per_seq"),
    (lambda v: _l01().kv_equals_weights_batch(context_per_seq=v), "kv_equals_weights_batch.context_per_seq"),
], ids=["stall_batch", "stall_context", "decode_vs_batch", "roofline_points", "roofline_sweep", "ridge_batch",
        "kv_equals_weights"])
@pytest.mark.parametrize("bad", [None, {}, "8", math.inf, math.nan, -1, 10**400, 2.5, [1024]],
                         ids=["None", "dict", "str", "inf", "nan", "neg", "huge", "frac", "list"])
def test_context_and_batch_arguments_are_named(call, field, bad):
    with pytest.raises(ValueError, match=rf"^{re.escape(field)}: got .*; allowed: "):
        call(bad)


@pytest.mark.parametrize("bad", [None, 3, b"{}", "", "{}", "[1, 2]", "not json", '{"cells": 3}'],
                         ids=["None", "int", "bytes", "empty", "empty-object", "list", "text", "cells-int"])
def test_notebook_form_names_a_text_that_is_not_a_notebook(bad):
    from mooncake_lab.notebook_form import saved_form

    with pytest.raises(ValueError, match=r"saved_form\.text: "):
        saved_form(bad)
