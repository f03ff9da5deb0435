"""Efficiency presets of the cost model, the measured latency table, and the fit between them.

A :class:`Preset` is a handful of efficiency knobs that turn peak-number physics into times:

* ``ideal`` — peak FLOP/s and peak HBM bandwidth, no overhead, TP communication assumed fully
  overlapped: the physical limit, ``max(compute, memory)``.
* ``calibrated`` — knobs fitted (:func:`fit_calibrated`) to SplitwiseSim's measured LLaMA2-70B
  latencies on A100-80GB (``data/measured_latency_splitwise.csv``, a vLLM-era 2023 stack):
  per-TP linear-layer and attention efficiency factors, a fixed prefill overhead, HBM efficiency,
  and a per-step decode floor overlapped with HBM streaming, ``max(f0 + f1·batch, t_mem/eff)``.
  These are *fit parameters*, not measurements: six prompt lengths per TP degree cannot separate a
  fixed overhead, a linear and a quadratic term into physics, so "attention at 4–7% of peak" is
  what the least-squares split says, not what a profiler would. (``linear_efficiency`` is not the
  MFU lecture 01 measures: MFU divides *all* FLOPs by the whole time, overheads included.)
  TP all-reduce runs over NVLink at ``tp_comm_efficiency`` of one direction's bandwidth, so an
  A800 (400 GB/s NVLink) pays more than the A100 (600 GB/s) the table was measured on.
* ``modern`` — documented defaults of the BLIS simulator for a current stack: HBM efficiency
  0.72, MFU 0.65, per-step overhead 0.5 ms + 20 µs per layer.

The fitted numbers are stored below as constants (:data:`FITTED`); ``tests/test_calibration.py``
re-runs the fit and checks it reproduces them. The fit uses numpy least squares and a 1-D grid.
"""
from __future__ import annotations

import io
import math
from dataclasses import dataclass, field, replace
from importlib import resources

import numpy as np
import pandas as pd

from .validate import fail, int_array, real_array

__all__ = ["Preset", "IDEAL", "CALIBRATED", "MODERN", "PRESETS", "get_preset", "FITTED",
           "load_measured", "refit_preset", "fit_prefill", "fit_decode", "fit_calibrated", "compare_to_measured",
           "NCCL_ALLREDUCE_EFFICIENCY", "RDMA_EFFICIENCY", "KV_USABLE_FRACTION"]

#: Ring all-reduce bus bandwidth / NVLink one-direction bandwidth on 8×A100-SXM4-80GB:
#: nccl-tests all_reduce_perf reaches busbw ≈ 200 GB/s of 300 GB/s (NVIDIA/nccl-tests issue #149,
#: 2023; #178 reports 208 GB/s) → 200/300 ≈ 0.67.
NCCL_ALLREDUCE_EFFICIENCY = 0.67
#: Mooncake transfer engine: 87 GB/s over 4 × 200 Gbps = 100 GB/s line rate (FAST'25 §5.4.1).
RDMA_EFFICIENCY = 0.87
#: Fraction of HBM an engine may use for weights + KV cache: vLLM's default
#: ``gpu_memory_utilization=0.9`` (vLLM engine arguments docs); activations live in the rest.
KV_USABLE_FRACTION = 0.9


def _pairs(value, name: str) -> tuple[tuple[int, float], ...]:
    """Normalise a knob given as a float or {tp: value} to sorted ((tp, value), ...)."""
    if isinstance(value, (int, float)):
        items = [(0, float(value))]
    else:
        items = [(int(k), float(v)) for k, v in (value.items() if isinstance(value, dict) else value)]
    if not items:
        raise ValueError(f"{name} must be a number in (0, 1] or a non-empty {{tp: value}} mapping")
    for _, v in items:
        if not (math.isfinite(v) and 0.0 < v <= 1.0):
            raise ValueError(f"{name} values must be in (0, 1], got {v!r}")
    return tuple(sorted(items))


def _at_tp(pairs: tuple[tuple[int, float], ...], tp: int) -> float:
    """The value for TP degree ``tp``: exact match, else the nearest listed TP (ties → lower)."""
    return min(pairs, key=lambda kv: (abs(kv[0] - tp), kv[0]))[1]


@dataclass(frozen=True)
class Preset:
    """Efficiency knobs of the cost model (dimensionless unless a unit is in the name).

    ``linear_efficiency`` (fraction of peak FLOP/s at which the linear layers and the LM head run)
    and ``attn_efficiency`` (the same for attention) may be a float or ``{tp_degree: value}`` (the
    value of the nearest TP degree is used). Neither is an MFU (all FLOPs over the whole time). Overheads are seconds: ``step_overhead_s +
    overhead_s_per_layer · layers`` is added to every prefill and every decode step;
    ``prefill_overhead_s`` is serial with prefill compute (it overlaps the HBM traffic);
    ``decode_floor_s + decode_floor_s_per_seq · batch`` is a per-step floor *overlapped* with HBM
    streaming and compute (max).
    """

    name: str
    linear_efficiency: tuple = 1.0
    attn_efficiency: tuple = 1.0
    hbm_efficiency: float = 1.0
    tp_comm: bool = False
    tp_comm_efficiency: float = 1.0
    rdma_efficiency: float = 1.0
    prefill_overhead_s: float = 0.0
    step_overhead_s: float = 0.0
    overhead_s_per_layer: float = 0.0
    decode_floor_s: float = 0.0
    decode_floor_s_per_seq: float = 0.0
    kv_usable_fraction: float = KV_USABLE_FRACTION
    description: str = field(default="", compare=False)

    def __post_init__(self):
        object.__setattr__(self, "linear_efficiency", _pairs(self.linear_efficiency, "linear_efficiency"))
        object.__setattr__(self, "attn_efficiency", _pairs(self.attn_efficiency, "attn_efficiency"))
        for f in ("hbm_efficiency", "tp_comm_efficiency", "rdma_efficiency", "kv_usable_fraction"):
            v = getattr(self, f)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and 0.0 < v <= 1.0):
                raise ValueError(f"{f} must be in (0, 1], got {v!r}")
        for f in ("prefill_overhead_s", "step_overhead_s", "overhead_s_per_layer", "decode_floor_s",
                  "decode_floor_s_per_seq"):
            v = getattr(self, f)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0.0):
                raise ValueError(f"{f} must be a finite number >= 0 seconds, got {v!r}")

    def linear_efficiency_at(self, tp: int) -> float:
        """Efficiency of the linear layers (and LM head) at TP degree ``tp``: FLOP/s over peak."""
        return _at_tp(self.linear_efficiency, tp)

    def attn_efficiency_at(self, tp: int) -> float:
        """Attention FLOP efficiency at TP degree ``tp``."""
        return _at_tp(self.attn_efficiency, tp)


IDEAL = Preset("ideal", description="peak FLOP/s and HBM bandwidth, no overhead, TP comm overlapped")

MODERN = Preset(
    "modern",
    linear_efficiency=0.65,      # BLIS simulator default MFU (measured_latency.md), applied to the matmuls
    attn_efficiency=0.65,        # ... and to attention
    hbm_efficiency=0.72,         # BLIS default HBM efficiency
    step_overhead_s=0.5e-3,      # BLIS: 0.5 ms per step (prefill forward or decode step) ...
    overhead_s_per_layer=20e-6,  # ... + 20 µs per layer
    rdma_efficiency=RDMA_EFFICIENCY,
    description="BLIS simulator defaults for a modern stack (TP comm folded into MFU)",
)

# --- fitted constants (re-run fit_calibrated() to refresh; tests check they agree) --------------
#: Output of :func:`fit_calibrated` on data/measured_latency_splitwise.csv (21 rows).
FITTED = {
    "prefill_overhead_s": 0.0481417,
    "linear_efficiency": {2: 0.939552, 4: 0.857547, 8: 0.821675},
    "attn_efficiency": {2: 0.0661975, 4: 0.0661975, 8: 0.043695},
    "hbm_efficiency": 0.563,
    "decode_floor_s": 0.0431295,
    "decode_floor_s_per_seq": 0.000405161,
}

CALIBRATED = Preset(
    "calibrated",
    linear_efficiency=FITTED["linear_efficiency"],
    attn_efficiency=FITTED["attn_efficiency"],
    hbm_efficiency=FITTED["hbm_efficiency"],
    tp_comm=True,
    tp_comm_efficiency=NCCL_ALLREDUCE_EFFICIENCY,
    rdma_efficiency=RDMA_EFFICIENCY,
    prefill_overhead_s=FITTED["prefill_overhead_s"],
    decode_floor_s=FITTED["decode_floor_s"],
    decode_floor_s_per_seq=FITTED["decode_floor_s_per_seq"],
    description="fitted to SplitwiseSim LLaMA2-70B on A100-80GB (vLLM-era stack, 2023)",
)

PRESETS: dict[str, Preset] = {p.name: p for p in (IDEAL, CALIBRATED, MODERN)}


def get_preset(preset: str | Preset) -> Preset:
    """A preset by name ("ideal", "calibrated", "modern"); a :class:`Preset` passes through."""
    if isinstance(preset, Preset):
        return preset
    key = str(preset).strip().lower()
    if key in PRESETS:
        return PRESETS[key]
    raise ValueError(f"preset: unknown preset {preset!r}; allowed: {', '.join(PRESETS)} "
                     "(or a calibration.Preset)")


# --- the measured table ---------------------------------------------------------------------------
def load_measured() -> pd.DataFrame:
    """The SplitwiseSim table (LLaMA2-70B, A100-80GB) with a ``latency_s`` column.

    Columns: phase ("prefill"/"decode"), tp, batch_size, prompt_tokens, latency_ms, latency_s,
    context_tokens (decode: batch_size × prompt_tokens), source.
    """
    text = resources.files("mooncake_lab").joinpath("data/measured_latency_splitwise.csv").read_text()
    df = pd.read_csv(io.StringIO(text))
    df["latency_s"] = df["latency_ms"] / 1e3
    df["context_tokens"] = np.where(df["phase"] == "decode", df["batch_size"] * df["prompt_tokens"], 0)
    return df


#: Columns a latency table for the fits needs (those of :func:`load_measured`).
TABLE_COLUMNS = ("phase", "tp", "batch_size", "prompt_tokens", "latency_s")


def _table(table) -> pd.DataFrame:
    """``table`` checked (a DataFrame like :func:`load_measured`'s, with positive counts and latencies),
    or the measured table if None."""
    if table is None:
        return load_measured()
    allowed = "a pandas DataFrame with columns " + ", ".join(TABLE_COLUMNS) + " (see load_measured())"
    if not isinstance(table, pd.DataFrame) or not set(TABLE_COLUMNS) <= set(table.columns) or table.empty:
        raise fail("table", table, allowed, "calibration")
    choice_ok = table["phase"].isin(["prefill", "decode"])
    if not choice_ok.all():
        i = int(np.flatnonzero(~choice_ok.to_numpy())[0])
        raise fail(f"table.phase[{i}]", table["phase"].iloc[i], "'prefill' or 'decode'", "calibration", index=i)
    int_array(table["tp"].to_numpy(), "table.tp", lo=1, hi=64, where="calibration")
    int_array(table["batch_size"].to_numpy(), "table.batch_size", lo=1, hi=10**6, where="calibration")
    int_array(table["prompt_tokens"].to_numpy(), "table.prompt_tokens", lo=1, hi=10**7, where="calibration")
    real_array(table["latency_s"].to_numpy(), "table.latency_s", lo=1e-9, hi=1e6, where="calibration")
    return table


def _unit_terms(tp: int):
    """Per-term times at peak (all efficiencies 1, TP comm on) for LLaMA2-70B on ``tp`` A100s:
    the CostModel the kernels use, so counting lives in one place (roofline/models)."""
    from .hardware import A100_NODE
    from .models import LLAMA2_70B
    from .roofline import cost_model
    unit = Preset("unit", tp_comm=True, kv_usable_fraction=KV_USABLE_FRACTION)
    return cost_model(LLAMA2_70B, A100_NODE.with_gpus(int(tp)), unit)


def fit_prefill(table: pd.DataFrame | None = None) -> dict:
    """Least-squares fit of the prefill knobs (relative errors).

    Model (per TP degree p): ``t = t0 + T_lin/lin_p + T_att/eff_p + T_comm/0.67`` where the ``T``
    are times at peak from :func:`roofline.cost_model`. ``t0`` is shared; TP2 has a single row so
    it shares TP4's attention efficiency. Returns ``{"prefill_overhead_s", "linear_efficiency",
    "attn_efficiency"}`` (the last two as ``{tp: value}``): a fit, whose split between the terms
    the few prompt lengths per TP degree do not pin down.
    """
    df = _table(table)
    pre = df[df["phase"] == "prefill"]
    tps = sorted(int(t) for t in pre["tp"].unique())
    att_groups = {tp: (tp if (pre["tp"] == tp).sum() >= 3 else None) for tp in tps}
    for tp in tps:  # a TP degree with too few rows borrows the nearest well-measured one's attention
        if att_groups[tp] is None:
            att_groups[tp] = min((t for t in tps if (pre["tp"] == t).sum() >= 3), key=lambda t: abs(t - tp))
    att_keys = sorted(set(att_groups.values()))
    rows, y = [], []
    for r in pre.itertuples():
        cm = _unit_terms(r.tp)
        n = float(r.prompt_tokens)
        lin, comm, att = n * cm.prefill_s_per_token, n * cm.tp_comm_s_per_token, cm.attn_s_per_pair * n * n / 2
        row = [1.0] + [lin * (r.tp == tp) for tp in tps] + [att * (att_groups[r.tp] == k) for k in att_keys]
        rows.append(row)
        y.append(r.latency_s - comm / NCCL_ALLREDUCE_EFFICIENCY)
    A, y = np.array(rows), np.array(y)
    w = 1.0 / pre["latency_s"].to_numpy()
    x, *_ = np.linalg.lstsq(A * w[:, None], y * w, rcond=None)
    mfu = {tp: float(1.0 / x[1 + i]) for i, tp in enumerate(tps)}
    att_by_key = {k: float(1.0 / x[1 + len(tps) + j]) for j, k in enumerate(att_keys)}
    return {"prefill_overhead_s": float(x[0]), "linear_efficiency": mfu,
            "attn_efficiency": {tp: att_by_key[att_groups[tp]] for tp in tps}}


def fit_decode(table: pd.DataFrame | None = None) -> dict:
    """Fit of the decode knobs: ``t = max(f0 + f1·batch, T_mem/eff)``.

    A grid over ``eff`` (0.200…1.000, step 0.0005); for each, (f0, f1) by relative least squares
    on the rows the memory branch does not explain; keep the best. Returns ``{"hbm_efficiency",
    "decode_floor_s", "decode_floor_s_per_seq"}``.
    """
    df = _table(table)
    dec = df[df["phase"] == "decode"]
    y = dec["latency_s"].to_numpy()
    b = dec["batch_size"].to_numpy(dtype=float)
    mem = np.array([_unit_terms(r.tp).weights_s + _unit_terms(r.tp).kv_hbm_s_per_token * r.context_tokens
                    for r in dec.itertuples()])
    best = None
    for eff in np.round(np.arange(0.200, 1.00001, 0.0005), 4):
        t_mem = mem / eff
        floor_rows = t_mem < y
        if floor_rows.sum() < 2:
            continue
        A = np.column_stack([np.ones(floor_rows.sum()), b[floor_rows]]) / y[floor_rows, None]
        (f0, f1), *_ = np.linalg.lstsq(A, np.ones(floor_rows.sum()), rcond=None)
        f0, f1 = max(f0, 0.0), max(f1, 0.0)
        pred = np.maximum(f0 + f1 * b, t_mem)
        err = float(np.sum((pred / y - 1.0) ** 2))
        if best is None or err < best[0] - 1e-15:
            best = (err, float(eff), float(f0), float(f1))
    _, eff, f0, f1 = best
    return {"hbm_efficiency": eff, "decode_floor_s": f0, "decode_floor_s_per_seq": f1}


def fit_calibrated(table: pd.DataFrame | None = None) -> dict:
    """Both fits; the dict has the keys of :data:`FITTED`."""
    return {**fit_prefill(table), **fit_decode(table)}


def compare_to_measured(presets=("ideal", "calibrated", "modern")) -> pd.DataFrame:
    """Ideal vs calibrated vs modern vs measured for every row of the table (LLaMA2-70B, A100).

    Columns: phase, tp, batch_size, prompt_tokens, measured_s, one ``<preset>_s`` per preset,
    and ``calibrated_rel_err`` (calibrated / measured − 1) when "calibrated" is among them.
    """
    from .hardware import A100_NODE
    from .models import LLAMA2_70B
    from .roofline import decode_step_time, prefill_time
    df = load_measured()
    out = df[["phase", "tp", "batch_size", "prompt_tokens", "context_tokens"]].copy()
    out["measured_s"] = df["latency_s"]
    if isinstance(presets, (str, Preset)) or not isinstance(presets, (list, tuple)):
        raise fail("presets", presets, "a list or tuple of preset names or Presets", "compare_to_measured")
    for p in presets:
        name = get_preset(p).name
        vals = []
        for r in df.itertuples():
            node = A100_NODE.with_gpus(int(r.tp))
            if r.phase == "prefill":
                vals.append(prefill_time(LLAMA2_70B, node, int(r.prompt_tokens), 0, preset=p))
            else:
                vals.append(decode_step_time(LLAMA2_70B, node, int(r.batch_size), int(r.context_tokens), preset=p))
        out[f"{name}_s"] = vals
    if "calibrated_s" in out:
        out["calibrated_rel_err"] = out["calibrated_s"] / out["measured_s"] - 1.0
    return out.reset_index(drop=True)


def refit_preset(table: pd.DataFrame | None = None, name: str = "refit") -> Preset:
    """A calibrated-style preset refitted on ``table`` (e.g. after a student edits a row)."""
    return replace(CALIBRATED, name=name, **_as_preset_kwargs(fit_calibrated(table)))


def _as_preset_kwargs(fit: dict) -> dict:
    return {k: fit[k] for k in FITTED}
