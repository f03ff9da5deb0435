"""Helpers every simulation lecture shares: resolving a trace by name, and one memoised run.

A notebook cell, a dashboard and the ``reproduce`` CLI that ask the same question (trace, replay
speed, cluster config) share one simulation instead of each running it.
"""
from __future__ import annotations

import math
import os
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor

from .. import sim
from ..traces import Trace, as_trace

__all__ = ["as_trace", "simulate_at_speed", "simulate_all"]

_RUNS: "OrderedDict[tuple, tuple]" = OrderedDict()
_RUNS_MAX = 64  # memoised runs kept (≈ 2 MB each on the conversation trace)
_LOCK = threading.Lock()  # guards _RUNS (simulate_all's threads)


def simulate_at_speed(trace: Trace | str, speed: float, config: sim.ClusterConfig) -> sim.SimResult:
    """``sim.simulate`` of ``trace`` replayed at ``speed`` (×) on ``config``, memoised per process."""
    return simulate_all([(trace, speed, config)])[0]


def simulate_all(jobs, workers: int | None = None) -> list:
    """:func:`simulate_at_speed` of each ``(trace, speed, config)`` in ``jobs``, in order. The runs
    not memoised go in parallel threads (at most ``workers``, default one per core): the Mooncake
    kernel releases the GIL, the coupled one does not (its runs take turns). Same results as one by one."""
    todo: dict = {}  # memo key → (trace, speed, config, positions in jobs)
    out: list = []
    for trace, speed, config in jobs:
        if not (isinstance(speed, (int, float)) and math.isfinite(speed) and speed > 0):
            raise ValueError(f"speed must be a replay factor > 0 (×), got {speed!r}")
        tr = as_trace(trace)
        key = (id(tr), float(speed), tuple(sorted(config.as_dict().items())))
        with _LOCK:
            hit = _RUNS.get(key)
            if hit is not None and hit[0] is tr:
                _RUNS.move_to_end(key)
        out.append(hit[1] if hit is not None and hit[0] is tr else None)
        if out[-1] is None:
            todo.setdefault(key, (tr, float(speed), config, []))[3].append(len(out) - 1)

    def one(job):
        tr, speed, config, _ = job
        return sim.simulate(tr.replay(speed) if speed != 1 else tr, config)

    n = min(len(todo), workers or os.cpu_count() or 1)
    if n <= 1:
        results = [one(job) for job in todo.values()]
    else:
        with ThreadPoolExecutor(n) as pool:
            results = list(pool.map(one, todo.values()))
    for (key, (tr, _, _, where)), res in zip(todo.items(), results):
        with _LOCK:
            _RUNS[key] = (tr, res)  # holding the trace keeps its id unique while the entry lives
            while len(_RUNS) > _RUNS_MAX:
                _RUNS.popitem(last=False)
        for k in where:
            out[k] = res
    return out
