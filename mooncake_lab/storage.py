"""Trading storage for computation: reload a cached prefix's KV from a tier, or recompute it?

Recomputing a prefix of ``p`` tokens costs a prefill (:func:`roofline.prefill_time`); reloading it
costs ``p × KV bytes per token / tier bandwidth`` (:func:`roofline.kv_load_time`). The seed
lecture assumed prefill runs at 60% of peak; :func:`seed_preset` makes that an explicit knob
(``mfu``), and every function here takes it.

Tiers (``hardware.TIER_NAMES``): "hbm", "dram" (host-to-device 128 GB/s per node, FAST'25 Table 1),
"ssd" (8 × 7 GB/s NVMe by default, see :mod:`hardware`), "remote_dram" (RDMA, 4 × 200 Gbps).
"""
from __future__ import annotations

import math

from .calibration import IDEAL, Preset
from .hardware import get_node
from .models import _check_count, get_model
from .roofline import _check_positive, cm_overlapped_time, kv_load_time, prefill_time
from .validate import InputError, flag, integer, real

__all__ = ["SEED_MFU", "seed_preset", "recompute_time", "reload_time", "reload_speedup",
           "breakeven_bandwidth", "eq2_min_bandwidth", "prefill_with_prefix_load", "layerwise_time"]

#: The seed lecture's assumption: prefill at 60% of peak FLOP/s (seed_lecture.md, demo 1).
SEED_MFU = 0.6
#: Prefix length used for "per token" comparisons: half of the seed lecture's 8.7k-token request,
#: rounded to a power of two (attention adds ≈ 5 GFLOP/token to LLaMA2-70B's 137 at this length).
DEFAULT_PREFIX = 4096


def seed_preset(mfu: float = SEED_MFU) -> Preset:
    """Ideal roofline with prefill (linear and attention) at ``mfu`` of peak."""
    mfu = real(mfu, "mfu", lo=0, hi=1, lo_open=True, where="seed_preset")
    return Preset(f"seed(mfu={mfu:g})", linear_efficiency=mfu, attn_efficiency=mfu,
                  kv_usable_fraction=IDEAL.kv_usable_fraction)


def recompute_time(model, node, prefix_len=DEFAULT_PREFIX, mfu: float = SEED_MFU) -> float:
    """Seconds to recompute the KV of a ``prefix_len``-token prefix (a prefill at ``mfu``)."""
    _check_count("prefix_len", prefix_len, minimum=1)
    return prefill_time(model, node, prefix_len, 0, preset=seed_preset(mfu))


def reload_time(model, node, tier: str, prefix_len=DEFAULT_PREFIX, bandwidth: float | None = None) -> float:
    """Seconds to load the prefix's KV from ``tier`` into HBM (``bandwidth`` B/s overrides the tier's)."""
    _check_count("prefix_len", prefix_len, minimum=1)
    return kv_load_time(model, node, prefix_len, tier, bandwidth=bandwidth)


def reload_speedup(model, node, tier: str, prefix_len=DEFAULT_PREFIX, mfu: float = SEED_MFU,
                   bandwidth: float | None = None) -> float:
    """recompute time / reload time (> 1: reloading wins)."""
    return (recompute_time(model, node, prefix_len, mfu)
            / reload_time(model, node, tier, prefix_len, bandwidth=bandwidth))


def breakeven_bandwidth(model, node, prefix_len=DEFAULT_PREFIX, mfu: float = SEED_MFU,
                        speedup: float = 1.0) -> float:
    """Tier bandwidth (B/s) at which reloading is ``speedup`` × faster than recomputing.

    ``speedup=1`` is the crossover: below it, recomputing is faster (reload time is
    ``bytes / B``, so ``B = speedup × bytes / recompute time``).
    """
    s = real(speedup, "speedup", lo=0, lo_open=True, hi=1e6, where="breakeven_bandwidth")
    m = get_model(model)
    n = _check_count("prefix_len", prefix_len, minimum=1)
    return s * n * m.kv_bytes_per_token() / recompute_time(m, node, n, mfu)


def eq2_min_bandwidth(model, node, prefix_len, a: float = 4.0, b: float = 22.0) -> float:
    """FAST'25 Eq. 2: minimum bandwidth (B/s) for reusing a ``prefix_len`` prefix to beat recomputing.

    ``B = G · 2·d·s / (gqa · (a·p·d + b·d²))`` with ``G`` the node's peak FLOP/s. ``2·d·s/gqa`` is
    the KV bytes per token per layer (2·H_kv·d_head·s), which we take from the model so MLA works
    too. LLaMA3-70B, p = 8192: 8×A800 → 5.86 GB/s ("6"), 8×H800 → 18.6 GB/s ("19").
    """
    m, nd = get_model(model), get_node(node)
    p = _check_count("prefix_len", prefix_len, minimum=1)
    a = real(a, "a", lo=0, hi=1e6, where="eq2_min_bandwidth")
    b = real(b, "b", lo=0, hi=1e6, where="eq2_min_bandwidth")
    if a == b == 0:
        raise InputError("eq2_min_bandwidth.a, b: got 0, 0; allowed: at least one > 0 (they divide)")
    d = m.d_model
    kv_per_layer = m.kv_bytes_per_token() / m.n_layers
    return nd.peak_flops * kv_per_layer / (a * p * d + b * d * d)


def prefill_with_prefix_load(model, node, n_new, n_cached, tier: str, preset="calibrated",
                             overlap: bool = True, bandwidth: float | None = None) -> dict:
    """Prefill of ``n_new`` tokens whose ``n_cached``-token prefix is loaded from ``tier``.

    Layer-wise overlap is a two-stage pipeline over ``L`` layers (load layer i+1 while computing
    layer i): ``total = max(load, compute) + min(load, compute) / L`` — the longer stage plus one
    layer's share of the shorter. Serialized: ``load + compute``.
    Returns ``{"load_s", "compute_s", "total_s"}``.
    """
    _check_count("n_new", n_new, minimum=1)
    _check_count("n_cached", n_cached, minimum=0)
    m = get_model(model)
    load = kv_load_time(m, node, n_cached, tier, bandwidth=bandwidth)
    compute = prefill_time(m, node, n_new, n_cached, preset=preset)
    total = layerwise_time(load, compute, m.n_layers, overlap=overlap)
    return {"load_s": load, "compute_s": compute, "total_s": total}


def layerwise_time(transfer_s: float, compute_s: float, n_layers: int, overlap: bool = True) -> float:
    """Seconds for ``compute_s`` of prefill and ``transfer_s`` of KV movement split over ``n_layers``.

    Overlapped (a two-stage pipeline, one layer per step — load layer i+1 while computing layer i,
    or store layer i while computing layer i+1): ``max(transfer, compute) + min(transfer, compute) / L``.
    Serialized: ``transfer + compute``.
    """
    transfer_s = real(transfer_s, "transfer_s", lo=0, where="layerwise_time")
    compute_s = real(compute_s, "compute_s", lo=0, where="layerwise_time")
    n_layers = integer(n_layers, "n_layers", lo=1, hi=10_000, where="layerwise_time")
    overlap = flag(overlap, "overlap", where="layerwise_time")
    if overlap:
        return float(cm_overlapped_time(transfer_s, compute_s, float(n_layers)))
    return transfer_s + compute_s
