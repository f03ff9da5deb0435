"""``simulate(trace, config, engine)``: validate, pre-draw the random numbers, run an engine."""
from __future__ import annotations

import time

import numpy as np

from ..prefix_cache import pooled_cache_state
from ..traces import Trace
from .config import ClusterConfig
from .conductor_view import new_view
from .coupled import _coupled_kernel, tail_slots
from .coupled_reference import run_coupled_reference
from .kernel import _kernel
from .reference import run_reference
from .result import SimResult
from .student_policy import compile_policy, student_kernel

__all__ = ["simulate", "ENGINES"]

#: ``numba``: the jumping kernel (fast); ``reference``: plain Python, one decode step at a time.
ENGINES = ("numba", "reference")

_FLOAT_OUT = ("queue_wait", "fetch_time", "prefill_start", "prefill_time", "prefill_end", "ready",
              "decode_admit", "finish", "tbt_mean", "tbt_tail", "prefill_load", "decode_load")
_INT_OUT = ("prefill_inst", "decode_inst", "fetch_src", "cached_tok", "fetched_tok", "computed_tok")


def _new_outputs(n: int) -> dict:
    """Per-request outputs, NaN / −1 / UNFINISHED until an engine sets them."""
    out = {k: np.full(n, np.nan) for k in _FLOAT_OUT}
    out.update({k: np.full(n, -1, dtype=np.int64) for k in _INT_OUT})
    out["outcome"] = np.zeros(n, dtype=np.int8)
    return out


def _draws(seed: int, n: int, n_prefill: int, noise_sd: float):
    """Random inputs of a run, drawn up front so both engines see the same numbers:
    one uniform per request (``random`` policy), then one normal per (request, prefill instance)
    for the estimator noise (only when ``noise_sd`` > 0)."""
    rng = np.random.default_rng(seed)
    u = rng.random(n)
    z = rng.standard_normal((n, n_prefill)) if noise_sd > 0 else np.zeros((1, 1))
    return u, z


def simulate(trace: Trace, config: ClusterConfig | None = None, engine: str = "numba") -> SimResult:
    """Simulate ``trace`` on the cluster ``config`` (default :class:`ClusterConfig`).

    ``engine="numba"`` (fast) or ``"reference"`` (plain Python, for tests and reading; slow: use
    a few hundred requests). Both give the same per-request results. Deterministic for a seed.
    ``config.prefill_policy`` may be a student's function (:mod:`.student_policy`).
    """
    if not isinstance(trace, Trace):
        raise ValueError(f"trace must be a mooncake_lab.traces.Trace, got {type(trace).__name__}")
    if config is None:
        config = ClusterConfig()
    if not isinstance(config, ClusterConfig):
        raise ValueError(f"config must be a ClusterConfig, got {type(config).__name__}")
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    trace.validate()
    rc = config.resolve()
    n = len(trace)
    n_route = config.n_prefill_instances  # instances a request is routed to (nodes, CPP groups, coupled)
    u, z = _draws(config.seed, n, n_route, config.estimator_noise)
    out = _new_outputs(n)
    max_kv = np.zeros(config.n_coupled if config.coupled else config.n_decode)
    diag = np.zeros(7, dtype=np.int64)  # [4:7]: a student policy's request, bad-value flag, value
    student = compile_policy(config.prefill_policy) if callable(config.prefill_policy) else None
    t0 = time.perf_counter()
    if config.coupled and engine == "numba":
        with pooled_cache_state(config.n_coupled, trace.n_blocks, rc.cache_capacity_blocks) as st:
            _coupled_kernel(trace.arrival_s, trace.input_len, trace.output_len, trace.block_offsets, trace.block_ids,
                            int(trace.block_tokens), rc.cost, int(config.n_coupled), int(rc.policy),
                            float(config.estimator_noise), u, z, float(rc.decode_kv_capacity),
                            bool(config.chunked_prefill), int(config.prefill_chunk),
                            st.last_use, st.q_block, st.q_stamp, st.meta, tail_slots(trace.output_len),
                            out["prefill_inst"], out["decode_inst"], out["outcome"], out["cached_tok"],
                            out["fetched_tok"], out["computed_tok"], out["queue_wait"], out["fetch_time"],
                            out["prefill_start"], out["prefill_time"], out["prefill_end"], out["ready"],
                            out["decode_admit"], out["finish"], out["tbt_mean"], out["tbt_tail"], max_kv, diag)
    elif config.coupled:
        run_coupled_reference(trace, config, rc, u, z, out, max_kv, diag)
    elif engine == "numba":
        with pooled_cache_state(n_route, trace.n_blocks, rc.cache_capacity_blocks) as st:
            args = (trace.arrival_s, trace.input_len, trace.output_len, trace.block_offsets, trace.block_ids,
                    int(trace.block_tokens), rc.cost, int(n_route), int(config.n_decode), int(rc.policy),
                    float(config.kvcache_balancing_threshold), float(config.estimator_noise), u, z,
                    bool(config.layerwise_kv_transfer), int(rc.n_layers), float(rc.decode_kv_capacity),
                    int(rc.admission), int(rc.cpp_group_size), int(rc.cpp_chunk), float(rc.cpp_act_bytes),
                    float(rc.cpp_bandwidth), bool(rc.cpp_overlap), float(config.ttft_slo_s), float(config.tbt_slo_s),
                    float(config.admission_threshold), float(config.decode_time_s),
                    float(config.prediction_horizon), st.last_use, st.q_block, st.q_stamp, st.meta,
                    out["prefill_inst"], out["decode_inst"], out["outcome"], out["fetch_src"],
                    out["cached_tok"], out["fetched_tok"], out["computed_tok"],
                    out["queue_wait"], out["fetch_time"], out["prefill_start"], out["prefill_time"],
                    out["prefill_end"], out["ready"], out["decode_admit"], out["finish"],
                    out["tbt_mean"], out["tbt_tail"], out["prefill_load"], out["decode_load"], max_kv, diag)
            if student is None:
                _kernel(*args)
            else:
                view = new_view(n_route)
                kernel, fn = student_kernel(args, view), student.kernel_function()  # compiled / loaded here
                t0 = time.perf_counter()  # wall_s: the run, not the compile
                with student.errors(diag, trace, view):  # so only the policy's own faults are its errors
                    kernel(*args, fn, view)
    elif student is not None:
        with student.errors(diag, trace, new_view(n_route)):
            run_reference(trace, config, rc, u, z, out, max_kv, diag, student)
    else:
        run_reference(trace, config, rc, u, z, out, max_kv, diag)
    wall = time.perf_counter() - t0
    names = (("iterations", "time_reversals", "prefill_iterations", "max_decode_batch") if config.coupled
             else ("events", "time_reversals", "runs_logged", "max_decode_batch"))
    return SimResult(trace=trace, config=config, engine=engine, arrays=out, max_kv_tokens=max_kv,
                     decode_kv_capacity=rc.decode_kv_capacity,
                     diagnostics={k: int(v) for k, v in zip(names, diag)},
                     wall_s=wall)
