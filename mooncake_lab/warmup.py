"""Compile every numba kernel of the course once, so no lecture (and no student's first policy) waits.

Kernels are compiled on first use and cached on disk (``cache=True``, in ``__pycache__``); from an
empty cache the first simulation of a session takes 15–40 s on a 2-core machine. ``make lab`` runs
this once after installing (``python -m mooncake_lab warmup``); it prints what it compiled and how long
each took. A second run finds everything cached and takes about a second.
"""
from __future__ import annotations

import time

import numpy as np

__all__ = ["warm_up"]


def _least_ttft(req, view):
    """A student-style policy (lecture 08), to compile the student-policy kernel variant."""
    return int(np.argmin(view.ttft_s))


def _steps():
    from . import cpp, prefix_cache, sim
    from .synthetic import synthetic_trace

    tr = synthetic_trace("toolagent-like", n_requests=60, seed=1)
    small = dict(n_prefill=4, n_decode=2)
    return [
        ("cluster simulator (lectures 04, 06, 07)",   # links shared (the default) or not (lecture 07)
         lambda: [sim.simulate(tr, sim.ClusterConfig(**small, **kw)) for kw in ({}, sim.SIMPLE_SEMANTICS)]),
        ("coupled engine (lectures 06, 08)",
         lambda: sim.simulate(tr, sim.ClusterConfig(engine_mode="coupled", chunked_prefill=True))),
        ("student policies (lecture 08)",
         lambda: sim.simulate(tr, sim.ClusterConfig(prefill_policy=_least_ttft, **small))),
        # routers (sim/routers.py): the kernels take a RouterParams and the belief's arrays — other
        # numba types than a Conductor policy's None, so each engine compiles once more
        ("routers, disaggregated (lecture 09)",   # true caches, a belief; links shared or not (lecture 07's stress)
         lambda: [sim.simulate(tr, sim.ClusterConfig(prefill_policy=r, **small, **kw))
                  for r, kw in (("dynamo", {}), ("sglang", {}), ("dynamo", sim.SIMPLE_SEMANTICS))]),
        ("routers, coupled (lecture 09)",   # true caches; belief without and with a TTL
         lambda: [sim.simulate(tr, sim.ClusterConfig(engine_mode="coupled", chunked_prefill=True, prefill_policy=r))
                  for r in ("dynamo", "sglang", "aibrix")]),
        ("prefix caches (lecture 03)", lambda: (prefix_cache.lru_hit_ratio(tr, 100, n_instances=2),
                                                prefix_cache.hit_ratio_curve(tr, [10, 100]),
                                                prefix_cache.prefault_pool(1))),
        ("CPP pipeline (lecture 05)", lambda: cpp.simulate_pipeline(np.zeros(2), np.array([8192, 4096]))),
    ]


def warm_up(verbose: bool = True) -> float:
    """Run one tiny case of every kernel; returns the total seconds."""
    t_all = time.perf_counter()
    for label, step in _steps():
        t0 = time.perf_counter()
        step()
        if verbose:
            print(f"  {label:<42s} {time.perf_counter() - t0:6.1f} s", flush=True)
    total = time.perf_counter() - t_all
    if verbose:
        print(f"numba kernels ready ({total:.1f} s; cached on disk for later sessions)")
    return total
