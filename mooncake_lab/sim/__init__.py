"""The cluster simulator: ``ClusterConfig``, ``simulate(trace, config) -> SimResult``.

A Mooncake-like disaggregated cluster: a pool of prefill instances (FIFO queue + LRU prefix cache
each) behind a Conductor policy, KV transfer over RDMA, a pool of continuous-batching decode
instances. ``engine="numba"`` runs :mod:`.kernel`; ``engine="reference"`` runs the plain-Python
:mod:`.reference` (the semantics, written out step by step, listed in its docstring).
"""
from __future__ import annotations

from .config import (ADMISSIONS, COMPLETED, OUTCOMES, PREFILL_POLICIES, REJECTED_AFTER_PREFILL,
                     REJECTED_AT_ARRIVAL, REJECTED_TOO_LARGE, ClusterConfig)
from .result import SimResult
from .run import ENGINES, simulate

__all__ = ["ClusterConfig", "simulate", "SimResult", "ENGINES", "PREFILL_POLICIES", "ADMISSIONS",
           "OUTCOMES", "COMPLETED", "REJECTED_AT_ARRIVAL", "REJECTED_AFTER_PREFILL", "REJECTED_TOO_LARGE"]
