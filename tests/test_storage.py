"""Trading storage for computation: hand-checked speedups, Eq. 2, crossover, overlap."""
import re

import pytest
from hypothesis import given, settings, strategies as st

from mooncake_lab import storage as S
from mooncake_lab.hardware import A800_NODE, H800_NODE
from mooncake_lab.models import LLAMA2_70B, LLAMA3_70B, OPT_13B


def test_recompute_and_reload_hand_checked():
    # recompute 4,096 tokens at 60% of 8 × 312 TFLOPS:
    #   4096 × 137,426,370,560 + 2,621,440 × 4096 × 2048 = 584,888,646,369,280 FLOP / 1.4976e15 = 0.39055 s
    assert S.recompute_time(LLAMA2_70B, A800_NODE, 4096) == pytest.approx(584_888_646_369_280 / 1.4976e15)
    # reload from DRAM: 4096 × 327,680 B / 128 GB/s = 10.486 ms → speedup 37.2×
    assert S.reload_time(LLAMA2_70B, A800_NODE, "dram", 4096) == pytest.approx(4096 * 327_680 / 128e9)
    assert S.reload_speedup(LLAMA2_70B, A800_NODE, "dram") == pytest.approx(
        (584_888_646_369_280 / 1.4976e15) / (4096 * 327_680 / 128e9))


def test_seed_lecture_claims():
    # LLaMA2-70B (GQA): reloading from any tier beats recomputing by > 10×
    for tier in ("dram", "remote_dram", "ssd"):
        assert S.reload_speedup(LLAMA2_70B, A800_NODE, tier) > 10, tier
    # OPT-13B (MHA, 2.5× the KV, 1/5 the FLOPs): only a few times from DRAM
    assert 2 < S.reload_speedup(OPT_13B, A800_NODE, "dram") < 5
    # SSD: whether OPT-13B's reload is slower than recomputing depends on the SSD bandwidth;
    # at the crossover the two are equal, below it recomputing wins
    cross = S.breakeven_bandwidth(OPT_13B, A800_NODE)
    assert S.reload_speedup(OPT_13B, A800_NODE, "ssd", bandwidth=cross) == pytest.approx(1.0)
    assert S.reload_speedup(OPT_13B, A800_NODE, "ssd", bandwidth=0.5 * cross) < 1
    # window where both SSD claims of the seed hold: LLaMA 10× needs ≥ 34 GB/s, OPT < 1 needs < 45 GB/s
    ten_x = S.breakeven_bandwidth(LLAMA2_70B, A800_NODE, speedup=10)
    assert 30e9 < ten_x < cross < 50e9


def test_breakeven_hand_checked():
    # OPT-13B crossover: 4096 × 819,200 B / recompute time
    rec = S.recompute_time(OPT_13B, A800_NODE, 4096)
    assert S.breakeven_bandwidth(OPT_13B, A800_NODE) == pytest.approx(4096 * 819_200 / rec)


def test_eq2_hand_checked():
    # G·2ds/(gqa·(a·p·d + b·d²)) = 2.496e15 × (2·8192·2/8 = 4096) / (26 × 8192²) = 5.859 GB/s ("6 GB/s")
    a800 = S.eq2_min_bandwidth(LLAMA3_70B, A800_NODE, 8192)
    assert a800 == pytest.approx(2.496e15 * 4096 / (26 * 8192**2))
    assert a800 / 1e9 == pytest.approx(6, abs=0.5)
    # 8 × 989 TFLOPS: 18.57 GB/s ("19 GB/s")
    assert S.eq2_min_bandwidth(LLAMA3_70B, H800_NODE, 8192) / 1e9 == pytest.approx(19, abs=0.5)
    # longer prefixes need less bandwidth (reuse saves the n² term)
    assert S.eq2_min_bandwidth(LLAMA3_70B, A800_NODE, 32768) < a800


@settings(max_examples=40, deadline=None)
@given(bw=st.floats(1e8, 1e12), gain=st.floats(1.01, 10), p=st.integers(1, 100_000))
def test_more_bandwidth_higher_speedup(bw, gain, p):
    lo = S.reload_speedup(LLAMA2_70B, A800_NODE, "ssd", p, bandwidth=bw)
    assert S.reload_speedup(LLAMA2_70B, A800_NODE, "ssd", p, bandwidth=bw * gain) > lo


def test_higher_mfu_makes_reload_less_attractive():
    assert S.reload_speedup(LLAMA2_70B, A800_NODE, "ssd", mfu=0.9) < S.reload_speedup(LLAMA2_70B, A800_NODE, "ssd", mfu=0.3)


def test_layerwise_overlap():
    # OPT-13B, 8192 cached from SSD (56 GB/s) then 512 new: compare against max + min/L by hand
    ser = S.prefill_with_prefix_load(OPT_13B, A800_NODE, 512, 8192, "ssd", preset="ideal", overlap=False)
    ovl = S.prefill_with_prefix_load(OPT_13B, A800_NODE, 512, 8192, "ssd", preset="ideal", overlap=True)
    load, comp = ser["load_s"], ser["compute_s"]
    assert load == pytest.approx(8192 * 819_200 / 56e9)
    assert ser["total_s"] == pytest.approx(load + comp)
    assert ovl["total_s"] == pytest.approx(max(load, comp) + min(load, comp) / 40)
    assert max(load, comp) <= ovl["total_s"] < ser["total_s"]


def test_storage_experiments():
    from mooncake_lab.experiments import l02_storage as ex
    df = ex.reload_vs_recompute(models=("llama2-70b", "opt-13b"))
    assert len(df) == 8
    llama = df[df.model == "LLaMA2-70B"].set_index("tier")["speedup"]
    opt = df[df.model == "OPT-13B"].set_index("tier")["speedup"]
    assert (llama > opt).all()
    ov = ex.layerwise_overlap(lengths=(8192, 32768))
    assert (ov["overlapped_s"] <= ov["serialized_s"]).all()
    sw = ex.speedup_vs_bandwidth(bandwidths_gbs=(10, 100))
    assert len(sw) == 4
    names = [m.name for m in __import__("mooncake_lab.reproduce", fromlist=["collect"]).collect("storage")]
    assert names == ["storage.reload_speedup.llama2_70b.dram", "storage.reload_speedup.llama2_70b.ssd",
                     "storage.reload_speedup.llama2_70b.remote_dram", "storage.reload_speedup.opt_13b.ssd",
                     "storage.eq2_min_bandwidth_gbs.a800x8.p8192", "storage.eq2_min_bandwidth_gbs.h800x8.p8192",
                     "storage.fig7_store_s.serialized.n8192", "storage.fig7_store_s.layerwise.n8192",
                     "storage.fig7_store_s.serialized.n131072", "storage.fig7_store_s.layerwise.n131072"]


@pytest.mark.parametrize("call,match", [
    (lambda: S.reload_speedup(LLAMA2_70B, A800_NODE, "tape"), "tier"),
    (lambda: S.recompute_time(LLAMA2_70B, A800_NODE, 0), "prefix_len"),
    (lambda: S.reload_time(LLAMA2_70B, A800_NODE, "dram", 0), "prefix_len"),
    (lambda: S.recompute_time(LLAMA2_70B, A800_NODE, 10, mfu=0), "mfu"),
    (lambda: S.recompute_time(LLAMA2_70B, A800_NODE, 10, mfu=1.5), "mfu"),
    (lambda: S.reload_speedup(LLAMA2_70B, A800_NODE, "ssd", bandwidth=-1), "bandwidth"),
    (lambda: S.breakeven_bandwidth(LLAMA2_70B, A800_NODE, speedup=float("nan")), "speedup"),
    (lambda: S.eq2_min_bandwidth("llama3-70b", "a800x8", -4), "prefix_len"),
    (lambda: S.eq2_min_bandwidth("llama3-70b", "a900", 8192), "node"),
])
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=rf"(^|\.){re.escape(match)}(\[[^\]]*\])?(: | must | values )"):
        # (the field named as the wrong one, not its letters anywhere)
        call()
