"""``simulate(trace, config, engine)``: validate, pre-draw the random numbers, run an engine."""
from __future__ import annotations

import math
import time
from contextlib import ExitStack, contextmanager

import numpy as np

from ..prefix_cache import check_touch_budget, new_cache_state, pooled_array, pooled_cache_state
from ..traces import Trace
from ..validate import MEMORY_BUDGET_BYTES, InputError, choice
from .config import ClusterConfig
from .conductor_view import PROBE_ROWS, new_view
from .coupled import _coupled_kernel, log_widths, tail_slots
from .coupled_reference import run_coupled_reference
from .kernel import _kernel
from .reference import run_reference
from .state import CppParams, Outputs, Params, RouterBelief, TraceArrays
from .result import SimResult
from .routers import ROUTERS, new_router_inputs
from .student_policy import compile_policy, student_kernel

__all__ = ["simulate", "ENGINES", "memory_estimate", "MEMORY_BUDGET_BYTES", "reference_steps", "MAX_REFERENCE_STEPS"]

#: ``numba``: the jumping kernel (fast); ``reference``: plain Python, one decode step at a time.
ENGINES = ("numba", "reference")

_FLOAT_OUT = ("queue_wait", "fetch_time", "prefill_start", "prefill_time", "prefill_end", "ready",
              "decode_admit", "finish", "tbt_mean", "tbt_tail", "prefill_load", "decode_load",
              "fetch_wait", "stream_wait")
_INT_OUT = ("prefill_inst", "decode_inst", "fetch_src", "cached_tok", "fetched_tok", "computed_tok")


def _new_outputs(n: int) -> dict:
    """Per-request outputs, NaN / −1 / UNFINISHED until an engine sets them."""
    out = {k: np.full(n, np.nan) for k in _FLOAT_OUT}
    out.update({k: np.full(n, -1, dtype=np.int64) for k in _INT_OUT})
    out["outcome"] = np.zeros(n, dtype=np.int8)
    out["preemptions"] = np.zeros(n, dtype=np.int64)  # times a request was preempted (unknown output lengths)
    return out


def _draws(seed: int, n: int, n_prefill: int, noise_sd: float):
    """Random inputs of a run, drawn up front so both engines see the same numbers:
    one uniform per request (``random`` policy), then one normal per (request, prefill instance)
    for the estimator noise (only when ``noise_sd`` > 0)."""
    rng = np.random.default_rng(seed)
    u = rng.random(n)
    z = rng.standard_normal((n, n_prefill)) if noise_sd > 0 else np.zeros((1, 1))
    return u, z


_PER_REQUEST_BYTES = (8 * (len(_FLOAT_OUT) + len(_INT_OUT) + 1) + 1  # outputs
                      + 8 * 12                                    # uniform draw, heap, queues, marks, stints
                      + 8 * 9 * 6)                                # the decode run log: 9 arrays of 6 n


def _preemption_bytes(n: int, spare: int) -> int:
    """Bytes the kernel adds with unknown output lengths for room for ``spare`` preemptions: a longer
    run log (4 × (2n + spare) + 8 runs instead of 6n + 8; 9 arrays incl. the interval buffers, which
    also hold one first interval per stint) and 5 arrays of stint records."""
    return 8 * (9 * (4 * (2 * n + spare) + 8 - (6 * n + 8) + spare + 1) + 5 * (spare + 1))


def _check_args(trace, config, where: str) -> ClusterConfig:
    """``config`` (None: the default) if ``trace`` is a Trace and ``config`` a ClusterConfig, else an InputError."""
    if not isinstance(trace, Trace):
        raise InputError(f"{where}.trace: got {type(trace).__name__}; allowed: a mooncake_lab.traces.Trace")
    config = ClusterConfig() if config is None else config
    if not isinstance(config, ClusterConfig):
        raise InputError(f"{where}.config: got {type(config).__name__}; allowed: a sim.ClusterConfig")
    return config


def memory_estimate(trace: Trace, config: ClusterConfig, rc=None) -> dict:
    """Bytes a run of ``trace`` on ``config`` allocates, by part, and which fields drive each part:
    ``{part: (bytes, "what drives it")}``. What :func:`simulate` checks against :data:`MEMORY_BUDGET_BYTES`."""
    config = _check_args(trace, config, "memory_estimate")
    rc = config.resolve() if rc is None else rc
    n, nb = len(trace), int(trace.n_blocks)
    P, D = config.prefill_slots, config.decode_slots
    inst = (f"n_coupled={config.n_coupled}" if config.coupled else
            f"n_prefill={config.n_prefill}" + (f" / cpp_group_size={config.cpp_group_size}"
                                               if config.cpp_group_size > 1 else "")
            + (f" + n_decode={config.n_decode}: roles switch" if config.switches_roles else ""))
    qcap = 2 * min(rc.cache_capacity_blocks, nb) + 64
    grow = rc.output_unknown and not config.coupled  # decode admits on the prompt + 1 token alone
    min_need = int((trace.input_len + (1 if grow else trace.output_len)).min()) if n else 1
    batch = min(n, int(rc.decode_kv_capacity // max(min_need, 1)) + 1) + 1
    parts = {
        "prefix caches": (8 * P * (nb + 2 * qcap),
                          f"{P:,} instances ({inst}) × ({nb:,} block ids of the trace + 2 × {qcap:,} "
                          f"queue slots from cache_capacity_blocks) × 8 B"),
        "estimator noise": (8 * n * P if config.estimator_noise > 0 else 0,
                            f"{n:,} requests × {P:,} instances × 8 B (estimator_noise > 0)"),
        "decode batches": (8 * D * batch,
                           f"{D:,} decode instances × {batch:,} batch slots (decode_kv_capacity_tokens / the "
                           f"smallest request's KV, at most the requests) × 8 B"),
        "per-request arrays": (n * _PER_REQUEST_BYTES, f"{n:,} requests of the trace"),
        "preemption records": (_preemption_bytes(n, n) if grow else 0,
                               f"{n:,} requests (output_lengths='unknown': room for {n:,} preemptions, "
                               f"doubled while a run needs more)"),
    }
    if config.coupled:
        w_ev, w_run = log_widths(trace.input_len, trace.output_len, config.chunked_prefill, config.prefill_chunk)
        parts["coupled logs"] = (8 * D * 2 * (2 * w_ev + 3 * w_run),
                                 f"{D:,} instances (n_coupled) × 2 × ({w_ev:,} events × 2 + {w_run:,} runs × 3; "
                                 f"from the longest output) × 8 B")
    rp = rc.router
    if rc.policy == ROUTERS["sglang"]:  # when each block entered the view SGLang matches (its last_tenant)
        parts["router entry times"] = (8 * P * nb, f"{P:,} instances × {nb:,} block ids of the trace × 8 B "
                                                   f"(the sglang router)")
    if rc.policy >= 5 and rp.belief:  # a router's own history of what it sent (sim/routers.py)
        bq, ttl = 2 * min(rp.belief_capacity or nb, nb) + 64, rp.belief_ttl < math.inf
        parts["router belief"] = (8 * P * (nb * (2 if ttl else 1) + 2 * bq),
                                  f"{P:,} instances × ({nb:,} block ids of the trace{' × 2 (a TTL: send times)' if ttl else ''}"
                                  f" + 2 × {bq:,} queue slots from belief_capacity_blocks) × 8 B (knowledge='belief')")
    if config.network_contention and not config.coupled:
        parts["block availability"] = (8 * P * nb, f"{P:,} instances × {nb:,} block ids of the trace × 8 B "
                                                    f"(network_contention)")
        rows = 2 * P + D  # links: prefill send + receive, decode receive (roles switch: every node has all three)
        slots = n + 1  # a request books each link at most once (sim/kernel.py::_book)
        parts["link calendars"] = (8 * rows * (2 * slots + 2),
                                   f"{rows:,} links (2 × n_prefill={P} + n_decode={D}{' nodes: roles switch' if config.switches_roles else ''}) "
                                   f"× {slots:,} reservation slots (one per request) × 2 × 8 B "
                                   f"(network_contention)")
    return parts


@contextmanager
def _router_state(rc, n_route: int, n_blocks: int):
    """``(router, belief)``, the kernel's last arguments: ``(None, None)`` for the Conductor's policies (numba
    drops the router code); else the :class:`~.routers.RouterParams` (a student policy: for its loads) and a
    :class:`~.state.RouterBelief` — pooled like the true caches when the router keeps one, else empty."""
    rp = rc.router
    if rc.policy < 4 or rp is None:
        yield None, None
        return
    with ExitStack() as stack:
        # entered_at / touched_at are read only where a block was sent (and so written): no fill needed;
        # pooled, as the caches are (a new (P, block ids) array costs thousands of page faults per run)
        entered = stack.enter_context(pooled_array((n_route, n_blocks if rc.policy == ROUTERS["sglang"] else 1)))
        if rc.policy >= 5 and rp.belief:
            ttl = rp.belief_ttl < math.inf
            b = stack.enter_context(pooled_cache_state(n_route, n_blocks, rp.belief_capacity or n_blocks))  # 0: unbounded
            touched = stack.enter_context(pooled_array((n_route, n_blocks if ttl else 1)))
            yield rp, RouterBelief(b.last_use, b.q_block, b.q_stamp, b.meta, touched, entered)
        else:
            b = new_cache_state(n_route, 0, 0)
            yield rp, RouterBelief(b.last_use, b.q_block, b.q_stamp, b.meta, np.zeros((n_route, 1)), entered)


def _size(b: float) -> str:
    return f"{b / 2**30:,.1f} GiB" if b >= 2**30 else f"{b / 2**20:,.1f} MiB"


def _more_room(trace: Trace, config: ClusterConfig, rc, spare: int) -> int:
    """Room for twice ``spare`` preemptions, or an error if that would exceed the memory budget."""
    spare *= 2
    parts = memory_estimate(trace, config, rc)
    n = len(trace)
    total = sum(b for b, _ in parts.values()) - parts["preemption records"][0] + _preemption_bytes(n, spare)
    if total > MEMORY_BUDGET_BYTES:
        raise InputError(f"simulate: with output_lengths='unknown' this run preempts more than {spare // 2:,} "
                         f"times; recording them would allocate ≈ {_size(total)}, more than the "
                         f"{_size(MEMORY_BUDGET_BYTES)} a run may use (validate.MEMORY_BUDGET_BYTES). Give the "
                         f"decode nodes more KV (decode_kv_capacity_tokens), add decode nodes or use a shorter trace")
    return spare


#: Most steps :func:`reference_steps` counts that ``engine="reference"`` takes on: ≈ 5–20 s (measured
#: 4–7 µs per decode token at one request per node, 20 µs with 64 decode nodes each stepping one; the numba
#: engine jumps over steps and takes < 1 s for 10**8 output tokens). Beyond it the plain-Python engines run
#: for minutes, so they refuse (the tests and lectures use a few hundred requests: ≈ 10**5 tokens).
MAX_REFERENCE_STEPS = 1_000_000


def reference_steps(trace: Trace, config: ClusterConfig) -> tuple[int, str]:
    """An upper bound of the loop steps the plain-Python engines take on ``trace``, and what drives it: one
    per decode token (Σ ``output_len``: each step gives every running request one token), plus the coupled
    engine's prefill chunks (``chunked_prefill``: ⌈input_len / prefill_chunk⌉ per request), plus a CPP group's
    chunk × stage loop (⌈input_len / cpp_chunk⌉ × cpp_group_size per run, n_prefill / cpp_group_size + 2 runs
    per request: the estimates and the commit)."""
    config = _check_args(trace, config, "reference_steps")
    out = int(trace.output_len.sum())
    parts = [f"trace.output_len sums to {out:,} tokens"]
    steps = out
    if config.coupled and config.chunked_prefill:
        k = int((-(-trace.input_len // config.prefill_chunk)).sum())
        steps += k
        parts.append(f"{k:,} prefill chunks (input_len / prefill_chunk={config.prefill_chunk:,})")
    if not config.coupled and config.cpp_group_size > 1:
        x = config.cpp_group_size
        k = int((-(-trace.input_len // config.cpp_chunk)).sum()) * x * (config.n_prefill_instances + 2)
        steps += k
        parts.append(f"{k:,} pipeline chunk-stages (input_len / cpp_chunk={config.cpp_chunk:,} × cpp_group_size={x} "
                     f"× {config.n_prefill_instances + 2} runs per request)")
    return steps, " + ".join(parts)


def _check_reference(trace: Trace, config: ClusterConfig) -> None:
    steps, why = reference_steps(trace, config)
    if steps > MAX_REFERENCE_STEPS:
        raise InputError(f"simulate(engine='reference'): {steps:,} steps ({why}); allowed: at most "
                         f"{MAX_REFERENCE_STEPS:,} (sim.run.MAX_REFERENCE_STEPS) — the plain-Python engines take "
                         f"these steps one at a time, ≈ 5–20 µs each, and would run for minutes. Use "
                         f"engine='numba' (the same results) or a shorter trace (trace.head(n))")


def _check_memory(trace: Trace, config: ClusterConfig, rc) -> None:
    parts = memory_estimate(trace, config, rc)
    total = sum(b for b, _ in parts.values())
    if total > MEMORY_BUDGET_BYTES:
        big = sorted(parts.items(), key=lambda kv: -kv[1][0])
        detail = "; ".join(f"{k} {_size(b)} = {why}" for k, (b, why) in big if b > 0)
        raise InputError(f"simulate: this run would allocate ≈ {_size(total)}, more than the "
                         f"{_size(MEMORY_BUDGET_BYTES)} a run may use (validate.MEMORY_BUDGET_BYTES): "
                         f"{detail}. Use fewer instances, a shorter trace (trace.head(n)) or no estimator noise")


def _params(trace: Trace, config: ClusterConfig, rc, n_route: int, spare: int, probe: int = -1) -> Params:
    """The kernel's settings (:class:`.state.Params`), typed as it is compiled for."""
    return Params(int(trace.block_tokens), int(n_route), int(config.decode_slots), int(rc.policy),
                  float(config.kvcache_balancing_threshold), float(config.estimator_noise),
                  bool(config.layerwise_kv_transfer), int(rc.n_layers), float(rc.decode_kv_capacity),
                  int(rc.admission), CppParams(int(rc.cpp_group_size), int(rc.cpp_chunk), float(rc.cpp_act_bytes),
                                               float(rc.cpp_bandwidth), bool(rc.cpp_overlap)), float(config.ttft_slo_s), float(config.tbt_slo_s),
                  float(config.admission_threshold), float(config.decode_time_s), float(config.prediction_horizon),
                  int(rc.decode_binding), int(rc.decode_load_metric), bool(rc.output_unknown), int(spare),
                  bool(config.inline_prefill), int(config.n_prefill if config.switches_roles else n_route),
                  float(config.role_switch_ratio if config.switches_roles else 0.0),
                  float(config.role_switch_interval_s), float(rc.role_switch_s), int(probe))


def simulate(trace: Trace, config: ClusterConfig | None = None, engine: str = "numba") -> SimResult:
    """Simulate ``trace`` on the cluster ``config`` (default :class:`ClusterConfig`).

    ``engine="numba"`` (fast) or ``"reference"`` (plain Python, for tests and reading; slow: use
    a few hundred requests; a run beyond :data:`MAX_REFERENCE_STEPS` of :func:`reference_steps` is refused).
    Both give the same per-request results. Deterministic for a seed.
    ``config.prefill_policy`` may be a student's function (:mod:`.student_policy`).
    """
    return simulate_probed(trace, config, engine)


def simulate_probed(trace: Trace, config: ClusterConfig | None = None, engine: str = "numba",
                    probe: int = -1) -> SimResult:
    """:func:`simulate`, and with ``probe`` ≥ 0 the result's ``probe`` holds what that request saw at its
    arrival (rule 2d of :mod:`.reference`; :func:`.explain.explain` reads it)."""
    spare = max(len(trace), 1) if isinstance(trace, Trace) else 1  # room for preemptions
    while True:
        config = ClusterConfig() if config is None else config
        res = _simulate(trace, config, engine, spare, probe)
        if res is not None:
            return res
        # more preemptions than room (output_lengths="unknown"): again, from scratch, with twice the room
        spare = _more_room(trace, config, config.resolve(), spare)


def _coupled_router_args(trace, config, rc, stack: ExitStack) -> tuple:
    """The coupled kernel's router arguments (:func:`.coupled._coupled_kernel`): ``None`` × 8 unless
    ``prefill_policy`` is a router; else its params, a :class:`~.routers.RouterInputs` and the belief's
    arrays (:func:`_router_state`, the same as the disaggregated kernel's)."""
    rp, belief = stack.enter_context(_router_state(rc, int(config.n_coupled), int(trace.n_blocks)))
    if rp is None:
        return (None,) * 8
    return (rp, new_router_inputs(int(config.n_coupled)), *belief)


def _simulate(trace, config, engine, spare, probe=-1):
    """One run of :func:`simulate`; None if the kernel needed room for more than ``spare`` preemptions.
    ``probe`` ≥ 0: the result's ``probe`` holds what that request saw at its arrival (:func:`.explain.explain`)."""
    config = _check_args(trace, config, "simulate")
    choice(engine, "engine", ENGINES, "simulate")
    trace.validate()
    rc = config.resolve()
    _check_memory(trace, config, rc)
    if engine == "reference":
        _check_reference(trace, config)
    # a cache is touched by the requests it serves and as the source of fetched prefixes: ≤ 2 per block id
    check_touch_budget(2 * len(trace.block_ids), config.cache_eviction, "simulate")
    n = len(trace)
    n_route = config.prefill_slots  # instances a request may be routed to (nodes, CPP groups, coupled; roles: all)
    u, z = _draws(config.seed, n, n_route, config.estimator_noise)
    out = _new_outputs(n)
    max_kv = np.zeros(config.decode_slots)
    # rule 14: a switch per check at most, a check per arrival at most
    switch_log = np.full((len(trace) if config.switches_roles else 0, 5), np.nan)
    switches = []
    diag = np.zeros(12, dtype=np.int64)  # [4:7]: a student policy's request, bad-value flag, value; [7] no room;
    # [8]: role switches logged; [9]–[11]: the probe's best prefix (blocks), holder and chosen instance
    probe_rows = np.full((len(PROBE_ROWS), n_route if probe >= 0 else 0), np.nan)
    student = compile_policy(config.prefill_policy) if callable(config.prefill_policy) else None
    t0 = time.perf_counter()
    if config.coupled and engine == "numba":
        with pooled_cache_state(config.n_coupled, trace.n_blocks, rc.cache_capacity_blocks,
                                config.cache_eviction) as st, ExitStack() as stack:
            _coupled_kernel(trace.arrival_s, trace.input_len, trace.output_len, trace.block_offsets, trace.block_ids,
                            int(trace.block_tokens), rc.cost, int(config.n_coupled), int(rc.policy),
                            float(config.estimator_noise), u, z, float(rc.decode_kv_capacity),
                            bool(config.chunked_prefill), int(config.prefill_chunk),
                            st.last_use, st.q_block, st.q_stamp, st.meta, tail_slots(trace.output_len),
                            *log_widths(trace.input_len, trace.output_len, config.chunked_prefill,
                                        config.prefill_chunk),
                            out["prefill_inst"], out["decode_inst"], out["outcome"], out["cached_tok"],
                            out["fetched_tok"], out["computed_tok"], out["queue_wait"], out["fetch_time"],
                            out["prefill_start"], out["prefill_time"], out["prefill_end"], out["ready"],
                            out["decode_admit"], out["finish"], out["tbt_mean"], out["tbt_tail"], max_kv, diag,
                            *_coupled_router_args(trace, config, rc, stack))
    elif config.coupled:
        run_coupled_reference(trace, config, rc, u, z, out, max_kv, diag)
    elif engine == "numba":
        with pooled_cache_state(n_route, trace.n_blocks, rc.cache_capacity_blocks, config.cache_eviction) as st, \
                _router_state(rc, n_route, trace.n_blocks) as (router, belief), ExitStack() as stack:
            # with contention: when each block is complete on each instance (Links.block_ready), pooled
            links = (stack.enter_context(pooled_array((n_route, trace.n_blocks))) if config.network_contention
                     else None)
            args = (TraceArrays(trace.arrival_s, trace.input_len, trace.output_len, trace.block_offsets,
                                trace.block_ids),
                    rc.cost, _params(trace, config, rc, n_route, spare, probe), u, z, st,
                    Outputs(**out, probe=probe_rows), max_kv, diag,
                    switch_log,
                    links, router, belief)
            if student is None:
                _kernel(*args)
            else:
                view = new_view(n_route)
                kernel, fn = student_kernel(args, view), student.kernel_function()  # compiled / loaded here
                t0 = time.perf_counter()  # wall_s: the run, not the compile
                with student.errors(diag, trace, view):  # so only the policy's own faults are its errors
                    student.run_kernel(kernel, (*args, fn, view))  # Ctrl-C stops even a compiled loop
        if diag[7]:
            return None
        if rc.policy >= 5 and diag[5] == 2:
            raise RuntimeError(f"simulate: router {config.prefill_policy!r} (code {rc.policy}) chose instance "
                               f"{int(diag[6])}, not one of 0 … {n_route - 1} (sim/routers.py::route)")
    elif student is not None:
        with student.errors(diag, trace, new_view(n_route)):
            run_reference(trace, config, rc, u, z, out, max_kv, diag, student, probe=(probe, probe_rows))
    else:
        run_reference(trace, config, rc, u, z, out, max_kv, diag, switch_log=switches, probe=(probe, probe_rows))
        switch_log = np.array(switches, dtype=np.float64).reshape(-1, 5)
    wall = time.perf_counter() - t0
    names = (("iterations", "time_reversals", "prefill_iterations", "max_decode_batch") if config.coupled
             else ("events", "time_reversals", "runs_logged", "max_decode_batch"))
    return SimResult(trace=trace, config=config, engine=engine, arrays=out, max_kv_tokens=max_kv,
                     decode_kv_capacity=rc.decode_kv_capacity,
                     diagnostics={k: int(v) for k, v in zip(names, diag)},
                     wall_s=wall, switch_log=switch_log[:int(diag[8])] if engine == "numba" else switch_log,
                     probe=None if probe < 0 else {"request": int(probe), "rows": probe_rows,
                                                   "best_blocks": int(diag[9]), "holder": int(diag[10]),
                                                   "chosen": int(diag[11])})
