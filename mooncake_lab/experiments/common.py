"""Helpers every simulation lecture shares: resolving a trace by name, and one memoised run.

A notebook cell, a dashboard and the ``reproduce`` CLI that ask the same question (trace, replay
speed, cluster config) share one simulation instead of each running it.
"""
from __future__ import annotations

import math
from collections import OrderedDict

from .. import sim
from ..traces import Trace, as_trace

__all__ = ["as_trace", "simulate_at_speed"]

_RUNS: "OrderedDict[tuple, tuple]" = OrderedDict()
_RUNS_MAX = 64  # memoised runs kept (≈ 2 MB each on the conversation trace)


def simulate_at_speed(trace: Trace | str, speed: float, config: sim.ClusterConfig) -> sim.SimResult:
    """``sim.simulate`` of ``trace`` replayed at ``speed`` (×) on ``config``, memoised per process."""
    if not (isinstance(speed, (int, float)) and math.isfinite(speed) and speed > 0):
        raise ValueError(f"speed must be a replay factor > 0 (×), got {speed!r}")
    tr = as_trace(trace)
    key = (id(tr), float(speed), tuple(sorted(config.as_dict().items())))
    hit = _RUNS.get(key)
    if hit is not None and hit[0] is tr:
        _RUNS.move_to_end(key)
        return hit[1]
    res = sim.simulate(tr.replay(speed) if speed != 1 else tr, config)
    _RUNS[key] = (tr, res)  # holding the trace keeps its id unique while the entry lives
    while len(_RUNS) > _RUNS_MAX:
        _RUNS.popitem(last=False)
    return res
