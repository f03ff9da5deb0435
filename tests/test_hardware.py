"""Hardware specs: datasheet figures, node aggregates, storage tiers, lookups."""
import dataclasses

import pytest

from mooncake_lab import hardware as hw


def test_a800_is_an_a100_with_slower_nvlink():
    # A800 datasheet: 312 TFLOPS BF16 dense, 2,039 GB/s, NVLink 400 GB/s; A100: NVLink 600 GB/s.
    assert hw.A800.flops_bf16 == 312e12 == hw.A100.flops_bf16
    assert hw.A800.hbm_bw == 2039e9 == hw.A100.hbm_bw
    assert hw.A800.nvlink_bw == 400e9 and hw.A100.nvlink_bw == 600e9
    assert hw.A800.nvlink_bw_per_direction == 200e9


def test_hopper_dense_not_sparse_peak():
    # H100/H800 datasheets print 1,979 TFLOPS BF16 *with sparsity*; dense is half (989).
    for g in (hw.H100, hw.H800):
        assert g.flops_bf16 == pytest.approx(1979e12 / 2, rel=1e-3)
    assert hw.H20.flops_bf16 == 148e12 and hw.H20.hbm_bytes == 96 * 2**30


def test_every_gpu_has_a_source():
    for g in hw.GPUS.values():
        assert g.source and g.flops_bf16 > 0 and g.hbm_bw > 0


def test_a800_node_aggregates():
    n = hw.A800_NODE
    assert n.n_gpus == 8 and n.gpu is hw.A800
    assert n.peak_flops == pytest.approx(8 * 312e12)          # FAST'25 Table 1: G = 8×312 TFLOPS
    assert n.peak_hbm_bw == pytest.approx(8 * 2039e9)         # 16,312 GB/s
    # "80GB" HBM2e is 80 GiB per GPU (nvidia-smi: 81920MiB), so the node holds 640 GiB = 687.2e9 B
    assert n.hbm_bytes == 8 * 80 * 2**30 == 687_194_767_360
    assert n.nic_bw == pytest.approx(4 * 200e9 / 8)           # 4 × 200 Gbps = 100 GB/s
    assert hw.A800_NODE_8X400G.nic_bw == pytest.approx(8 * 400e9 / 8)  # 8 × 400 Gbps = 400 GB/s


def test_tiers_bandwidths():
    n = hw.A800_NODE
    assert n.tier("hbm").bandwidth == pytest.approx(16.312e12)
    assert n.tier("dram").bandwidth == 128e9                  # FAST'25 Table 1 B_h2d
    assert n.tier("ssd").bandwidth == pytest.approx(8 * 7.0e9)  # 8 drives × 7 GB/s = 56 GB/s
    assert n.tier("remote_dram").bandwidth == pytest.approx(100e9)
    assert n.tier("Remote-DRAM").name == "remote_dram"
    # ordering a student should see: HBM ≫ DRAM > remote DRAM > SSD
    bws = [n.tier(t).bandwidth for t in ("hbm", "dram", "remote_dram", "ssd")]
    assert bws == sorted(bws, reverse=True)


def test_ssd_capped_by_host_to_device():
    fast = hw.A800_NODE.with_ssd_bw(500e9)
    assert fast.tier("ssd").bandwidth == 128e9
    assert hw.A800_NODE.with_ssd_bw(20e9).tier("ssd").bandwidth == pytest.approx(20e9)


def test_lookups_case_insensitive():
    assert hw.get_gpu("a800") is hw.A800
    assert hw.get_gpu("H100-SXM") is hw.H100
    assert hw.get_gpu(hw.H20) is hw.H20
    assert hw.get_node("A800x8") is hw.A800_NODE
    assert hw.get_node("h800") is hw.H800_NODE


def test_with_gpus_changes_tp_only():
    n4 = hw.A100_NODE.with_gpus(4)
    assert n4.n_gpus == 4 and n4.peak_flops == pytest.approx(4 * 312e12) and n4.gpu is hw.A100


@pytest.mark.parametrize("bad", ["B200", "", "a8000"])
def test_unknown_gpu_lists_allowed(bad):
    with pytest.raises(ValueError, match=r"gpu: unknown GPU .*allowed: .*A800-SXM4-80GB"):
        hw.get_gpu(bad)


def test_unknown_node_and_tier():
    with pytest.raises(ValueError, match=r"node: unknown node 'tpu'.*a800x8"):
        hw.get_node("tpu")
    with pytest.raises(ValueError, match=r"tier: unknown storage tier 'tape'.*hbm, dram, ssd, remote_dram"):
        hw.A800_NODE.tier("tape")


def test_bad_node_parameters():
    with pytest.raises(ValueError, match=r"^n_gpus must "):
        hw.Node("x", hw.A800, n_gpus=0)
    with pytest.raises(ValueError, match=r"^nic_gbps must "):
        hw.Node("x", hw.A800, nic_gbps=float("nan"))
    with pytest.raises(ValueError, match=r"^Node\.with_ssd_bw\.total_bw: "):
        hw.A800_NODE.with_ssd_bw(-1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        hw.A800_NODE.n_gpus = 4
