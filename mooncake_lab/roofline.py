"""Times from specs: prefill, decode step, KV load/transfer; roofline helpers; the ``CostModel``.

One place per formula. :func:`cost_model` turns (model, node, preset) into a :class:`CostModel`,
a few float coefficients; the ``@njit`` scalar functions :func:`cm_prefill_time`,
:func:`cm_decode_step_time` and :func:`cm_kv_transfer_time` turn coefficients into seconds. The
public functions here (:func:`prefill_time`, :func:`decode_step_time`, ...) validate inputs,
build the CostModel and call those same kernels — so the simulator (which passes
``CostModel.as_array()`` into its numba kernels) and the notebooks cannot disagree.

The formulas (``n`` new tokens after ``c`` cached; ``b`` sequences; ``ctx`` keys summed over the batch)::

    prefill = overhead + max(t_serial + n·(t_tok + t_comm) + t_pair·n·(c + n/2),  # compute
                             t_weights + t_expert·E_touched(n) + t_kv·(c + n))    # HBM traffic
    decode  = overhead + max(floor0 + floor1·b,                                   # per-step floor
                             t_weights + t_expert·E_touched(b) + t_kv·ctx,        # HBM traffic
                             b·(t_tok + t_comm) + t_pair_dec·ctx)                 # compute
    transfer = n·t_rdma

``t_tok`` = (linear + LM-head FLOP per token) / (node peak × MFU); ``t_pair`` = attention FLOP per
(token × key) / (node peak × attention efficiency) and ``t_pair_dec`` the same for a decode
step (MLA decodes in the absorbed form, :meth:`ModelConfig.decode_attention_flops_coefficient`); ``t_comm`` = TP all-reduce bytes per token /
(NVLink one-direction bandwidth × efficiency) (0 when the preset overlaps it); ``t_weights`` /
``t_kv`` = bytes / (node HBM bandwidth × HBM efficiency); ``t_rdma`` = KV bytes per token /
(NIC bandwidth × RDMA efficiency); ``t_serial`` a fixed per-prefill time serial with compute;
``E_touched(n)`` the expected distinct MoE experts per layer (0 for dense models).

Validity: "calibrated" is fitted on 128–8,192-token prompts and batches ≤ 64 of a 2023 stack; the
fit puts prefill attention at 4–7% of peak (a least-squares split of the measured growth, not a
measurement), so extrapolated to 32k–128k prompts it is very pessimistic (attention dominates). Use "ideal" or "modern" for long-context what-ifs.
"""
from __future__ import annotations

import math
from dataclasses import astuple, dataclass, fields

import numpy as np
from numba import njit

from .calibration import CALIBRATED, IDEAL, MODERN, PRESETS, Preset, get_preset
from .hardware import GPU, Node, get_gpu, get_node
from .models import ModelConfig, _check_count, get_model
from .validate import integer, real, reals

__all__ = [
    "CostModel", "cost_model", "cm_prefill_time", "cm_prefill_reuse_time", "cm_overlapped_time", "cm_total_prefill_time", "cm_decode_step_time", "cm_kv_transfer_time",
    "prefill_time", "decode_step_time", "kv_transfer_time", "kv_load_time", "decode_kv_capacity_tokens",
    "tp_allreduce_bytes_per_token", "mfu", "arithmetic_intensity", "attainable_flops", "ridge_point",
    "prefill_intensity", "decode_intensity",
    "Preset", "PRESETS", "IDEAL", "CALIBRATED", "MODERN", "get_preset",
]


@dataclass(frozen=True)
class CostModel:
    """The coefficients the kernels need (seconds unless noted). Field order = array order."""

    overhead_s: float              # 0: added to every prefill and every decode step
    prefill_s_per_token: float     # 1: linear + LM head, per token, at the preset's MFU
    tp_comm_s_per_token: float     # 2: TP all-reduce time per token (0 if overlapped)
    attn_s_per_pair: float         # 3: attention per (new token × attended key)
    weights_s: float               # 4: streaming the dense weights once from HBM
    expert_s: float                # 5: streaming one routed expert (all MoE layers)
    n_experts: float               # 6: routed experts per MoE layer (0: dense model)
    top_k: float                   # 7: experts per token
    kv_hbm_s_per_token: float      # 8: reading/writing one token's KV in HBM
    prefill_serial_s: float        # 9: fixed time serial with prefill compute (overlaps HBM traffic)
    decode_floor_s: float          # 10: per-step floor (overlapped)
    decode_floor_s_per_seq: float  # 11: per-sequence part of the floor (overlapped)
    kv_transfer_s_per_token: float # 12: RDMA time per token of KV
    kv_bytes_per_token: float      # 13: bytes
    kv_capacity_tokens: float      # 14: decode KV capacity of the node, tokens
    decode_attn_s_per_pair: float  # 15: decode attention per (decoding token × attended key)
    dram_load_s_per_token: float   # 16: loading one token's KV from host DRAM into HBM (host-to-device)
    n_layers: float                # 17: layers the node runs (the steps a layer-wise load overlaps over)

    def as_array(self) -> np.ndarray:
        """The coefficients as a float64 array (what numba kernels take)."""
        return np.array(astuple(self), dtype=np.float64)

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))


# --- kernels (scalar, njit; no globals) --------------------------------------------------------
@njit(cache=True)
def _experts_touched(c, n_tokens):
    # E·(1 − (1 − k/E)^n): expected distinct routed experts per MoE layer (uniform routing)
    e = c[6]
    if e <= 0.0:
        return 0.0
    return e * (1.0 - (1.0 - c[7] / e) ** n_tokens)


@njit(cache=True)
def cm_prefill_time(c, n_new, n_cached):
    """Prefill time (s) of ``n_new`` tokens after ``n_cached`` cached ones, from coefficients ``c``."""
    n = float(n_new)
    cached = float(n_cached)
    compute = c[9] + n * (c[1] + c[2]) + c[3] * n * (cached + 0.5 * n)
    memory = c[4] + c[5] * _experts_touched(c, n) + c[8] * (cached + n)
    return c[0] + max(compute, memory)


@njit(cache=True)
def cm_overlapped_time(transfer_s, compute_s, n_layers):
    """Seconds for ``compute_s`` of work and ``transfer_s`` of KV movement split over ``n_layers``
    layers, one overlapping the other (a two-stage pipeline, one layer per step: load layer i+1 while
    layer i computes): max(transfer, compute) + min(transfer, compute) / n_layers."""
    return max(transfer_s, compute_s) + min(transfer_s, compute_s) / n_layers


@njit(cache=True)
def cm_prefill_reuse_time(c, n_new, n_cached):
    """Prefill time (s) of ``n_new`` tokens after ``n_cached`` cached ones whose KV first comes from host
    DRAM: the load (``n_cached`` × c[16]) overlaps the compute layer by layer (:func:`cm_overlapped_time`
    over c[17] layers). c[16] = 0 (no load charged) or nothing cached: :func:`cm_prefill_time` exactly."""
    compute = cm_prefill_time(c, n_new, n_cached)
    load = c[16] * float(n_cached)
    if load <= 0.0:
        return compute
    return cm_overlapped_time(load, compute, c[17])


@njit(cache=True)
def cm_total_prefill_time(c, n_new):
    """Σ ``cm_prefill_time(c, n, 0)`` over the array ``n_new`` (s): prefills with nothing cached."""
    total = 0.0
    for n in n_new:
        total += cm_prefill_time(c, n, 0)
    return total


@njit(cache=True)
def cm_decode_step_time(c, batch, context_tokens):
    """One decode step (s) for ``batch`` sequences attending to ``context_tokens`` keys in total."""
    b = float(batch)
    ctx = float(context_tokens)
    floor = c[10] + c[11] * b
    memory = c[4] + c[5] * _experts_touched(c, b) + c[8] * ctx
    compute = b * (c[1] + c[2]) + c[15] * ctx
    return c[0] + max(floor, max(memory, compute))


@njit(cache=True)
def cm_kv_transfer_time(c, n_tokens):
    """RDMA time (s) to move ``n_tokens`` tokens of KV between nodes."""
    return float(n_tokens) * c[12]


# --- building the coefficients -------------------------------------------------------------------
def tp_allreduce_bytes_per_token(model: ModelConfig, tp: int) -> float:
    """Bytes each GPU sends per token for TP: 2 all-reduces per layer of ``d·s`` bytes, ring
    algorithm ``2(p−1)/p`` (0 for tp = 1)."""
    model = get_model(model)
    tp = integer(tp, "tp", lo=1, hi=4096, where="tp_allreduce_bytes_per_token")
    return 2.0 * model.n_layers * 2.0 * (tp - 1) / tp * model.d_model * model.bytes_per_param


def _resolve(model, node, preset) -> tuple[ModelConfig, Node, Preset]:
    return get_model(model), get_node(node), get_preset(preset)


def decode_kv_capacity_tokens(model, node, usable_fraction: float | None = None) -> float:
    """Tokens of KV a decode node holds: (HBM × usable fraction − weights) / KV bytes per token.

    ``usable_fraction`` defaults to 0.9 (vLLM's ``gpu_memory_utilization``); 0 if weights don't fit.
    """
    m, nd = get_model(model), get_node(node)
    f = IDEAL.kv_usable_fraction if usable_fraction is None else usable_fraction
    if not (isinstance(f, (int, float)) and 0.0 < f <= 1.0):
        raise ValueError(f"usable_fraction must be in (0, 1], got {usable_fraction!r}")
    return max(0.0, (nd.hbm_bytes * f - m.weight_bytes()) / m.kv_bytes_per_token())


def cost_model(model, node, preset="ideal") -> CostModel:
    """The :class:`CostModel` of ``model`` (name or ModelConfig) on ``node`` under ``preset``."""
    m, nd, p = _resolve(model, node, preset)
    tp = nd.n_gpus
    peak, hbm = nd.peak_flops, nd.peak_hbm_bw * p.hbm_efficiency
    comm = (tp_allreduce_bytes_per_token(m, tp) / (nd.gpu.nvlink_bw_per_direction * p.tp_comm_efficiency)
            if p.tp_comm and tp > 1 else 0.0)
    per_layer = p.overhead_s_per_layer * m.n_layers
    return CostModel(
        overhead_s=p.step_overhead_s + per_layer,
        prefill_s_per_token=(m.linear_flops_per_token() + m.lm_head_flops_per_token()) / (peak * p.linear_efficiency_at(tp)),
        tp_comm_s_per_token=comm,
        attn_s_per_pair=m.attention_flops_coefficient() / (peak * p.attn_efficiency_at(tp)),
        weights_s=m.streamed_weight_bytes_dense() / hbm,
        expert_s=m.expert_bytes() / hbm,
        n_experts=float(m.n_experts),
        top_k=float(m.top_k),
        kv_hbm_s_per_token=m.kv_bytes_per_token() / hbm,
        prefill_serial_s=p.prefill_overhead_s,
        decode_floor_s=p.decode_floor_s,
        decode_floor_s_per_seq=p.decode_floor_s_per_seq,
        kv_transfer_s_per_token=m.kv_bytes_per_token() / (nd.nic_bw * p.rdma_efficiency),
        kv_bytes_per_token=m.kv_bytes_per_token(),
        kv_capacity_tokens=decode_kv_capacity_tokens(m, nd, p.kv_usable_fraction),
        decode_attn_s_per_pair=m.decode_attention_flops_coefficient() / (peak * p.attn_efficiency_at(tp)),
        dram_load_s_per_token=m.kv_bytes_per_token() / nd.tier("dram").bandwidth,
        n_layers=float(m.n_layers),
    )


# --- public API (validate, build, call the kernel) --------------------------------------------------
def prefill_time(model, node, n_new, n_cached=0, preset="ideal") -> float:
    """Seconds to prefill ``n_new`` tokens after ``n_cached`` cached tokens on one node (TP = GPUs)."""
    n = _check_count("n_new", n_new, minimum=1)
    c = _check_count("n_cached", n_cached, minimum=0)
    return float(cm_prefill_time(cost_model(model, node, preset).as_array(), n, c))


def decode_step_time(model, node, batch_size, context_tokens, preset="ideal") -> float:
    """Seconds of one decode step: ``batch_size`` sequences, ``context_tokens`` keys in total."""
    b = _check_count("batch_size", batch_size, minimum=1)
    ctx = _check_count("context_tokens", context_tokens, minimum=0)
    return float(cm_decode_step_time(cost_model(model, node, preset).as_array(), b, ctx))


def kv_transfer_time(model, node, n_tokens, preset="ideal") -> float:
    """Seconds to move ``n_tokens`` tokens of KV over the node's RDMA NICs."""
    n = _check_count("n_tokens", n_tokens, minimum=0)
    return float(cm_kv_transfer_time(cost_model(model, node, preset).as_array(), n))


def kv_load_time(model, node, n_tokens, tier: str, bandwidth: float | None = None) -> float:
    """Seconds to load ``n_tokens`` tokens of KV into HBM from ``tier`` ("hbm", "dram", "ssd",
    "remote_dram") at the tier's bandwidth (or ``bandwidth`` B/s if given)."""
    m, nd = get_model(model), get_node(node)
    n = _check_count("n_tokens", n_tokens, minimum=0)
    bw = nd.tier(tier).bandwidth if bandwidth is None else _check_positive("bandwidth", bandwidth)
    return n * m.kv_bytes_per_token() / bw


def _check_positive(name, value) -> float:
    return real(value, name, lo=0, lo_open=True)


def mfu(model, node, n_new, n_cached=0, preset="calibrated") -> float:
    """Model FLOPs utilisation of a prefill: FLOPs / (time × node peak)."""
    m, nd = get_model(model), get_node(node)
    return m.prefill_flops(n_new, n_cached) / (prefill_time(m, nd, n_new, n_cached, preset) * nd.peak_flops)


# --- roofline helpers -------------------------------------------------------------------------------
def arithmetic_intensity(flops, bytes_) -> np.ndarray | float:
    """FLOP per byte of HBM traffic."""
    f = reals(flops, "flops", lo=0, where="arithmetic_intensity")
    b = reals(bytes_, "bytes_", lo=0, lo_open=True, where="arithmetic_intensity")
    out = np.asarray(f) / np.asarray(b)
    return float(out) if out.ndim == 0 else out


def _compute_and_bw(gpu_or_node) -> tuple[float, float]:
    if isinstance(gpu_or_node, (GPU, Node)):
        return gpu_or_node.peak_flops, gpu_or_node.peak_hbm_bw
    try:  # a string: a GPU name ("a800") first, then a node name ("a800x8")
        return _compute_and_bw(get_gpu(gpu_or_node))
    except ValueError:
        pass
    try:
        return _compute_and_bw(get_node(gpu_or_node))
    except ValueError:
        raise ValueError(f"gpu_or_node: unknown GPU or node {gpu_or_node!r}; give a hardware.GPU, a "
                         "hardware.Node or a name from hardware.GPUS / hardware.NODES") from None


def attainable_flops(intensity, gpu_or_node) -> np.ndarray | float:
    """Roofline: ``min(peak FLOP/s, intensity × HBM bandwidth)`` (FLOP/s) for a GPU or a node."""
    peak, bw = _compute_and_bw(gpu_or_node)
    x = np.asarray(reals(intensity, "intensity", lo=0, where="attainable_flops"))
    out = np.minimum(peak, x * bw)
    return float(out) if out.ndim == 0 else out


def ridge_point(gpu_or_node) -> float:
    """Intensity (FLOP/byte) where the roofline turns flat: peak / bandwidth (A800: 153)."""
    peak, bw = _compute_and_bw(gpu_or_node)
    return peak / bw


def prefill_intensity(model, n_new, n_cached=0) -> float:
    """Prefill FLOP per HBM byte (weights read once + KV of cached and new tokens)."""
    m = get_model(model)
    c = _check_count("n_cached", n_cached, minimum=0)
    n = _check_count("n_new", n_new, minimum=1)
    bytes_ = m.streamed_weight_bytes_dense() + m.expert_bytes() * m.expected_experts_touched(n) \
        + m.kv_bytes_per_token() * (c + n)
    return m.prefill_flops(n, c) / bytes_


def decode_intensity(model, batch_size, context_tokens) -> float:
    """Decode-step FLOP per HBM byte."""
    m = get_model(model)
    return m.decode_flops(batch_size, context_tokens) / m.decode_bytes(batch_size, context_tokens)
