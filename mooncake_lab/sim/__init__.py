"""The cluster simulator: ``ClusterConfig``, ``simulate(trace, config) -> SimResult``.

A Mooncake-like disaggregated cluster: a pool of prefill instances (FIFO queue + LRU prefix cache
each) behind a Conductor policy, KV transfer over RDMA, a pool of continuous-batching decode
instances. ``engine="numba"`` runs :mod:`.kernel`; ``engine="reference"`` runs the plain-Python
:mod:`.reference` (the semantics, written out step by step, listed in its docstring). A student's
prefill policy is a function ``policy(req, view) -> instance`` passed as ``prefill_policy``;
``leaderboard`` ranks it against the built-in ones (:mod:`.student_policy`, :mod:`.conductor_view`).
``explain(result, i)`` says why request ``i`` went where it went (:mod:`.explain`).
"""
from __future__ import annotations

from .conductor_view import Request, View
from .config import (ADMISSIONS, COMPLETED, DECODE_BINDINGS, DECODE_LOAD_METRICS, OUTCOMES, OUTPUT_LENGTHS,
                     PREFILL_POLICIES, REJECTED_AFTER_PREFILL,
                     REJECTED_AT_ARRIVAL, REJECTED_TOO_LARGE, SIMPLE_SEMANTICS, ClusterConfig)
from .explain import Decision, explain
from .result import SimResult
from .run import ENGINES, simulate
from .student_policy import (BASELINES, LEADERBOARD_SORT_BY, PolicyChoiceError, PolicyCompileWarning,
                             PolicyRandomWarning, PolicyReturnTypeError, compile_policy, leaderboard)

__all__ = ["ClusterConfig", "simulate", "SimResult", "explain", "Decision", "ENGINES", "PREFILL_POLICIES", "ADMISSIONS",
           "DECODE_BINDINGS", "DECODE_LOAD_METRICS", "OUTPUT_LENGTHS", "SIMPLE_SEMANTICS",
           "OUTCOMES", "COMPLETED", "REJECTED_AT_ARRIVAL", "REJECTED_AFTER_PREFILL", "REJECTED_TOO_LARGE",
           "leaderboard", "compile_policy", "Request", "View", "BASELINES", "LEADERBOARD_SORT_BY",
           "PolicyCompileWarning", "PolicyRandomWarning", "PolicyReturnTypeError", "PolicyChoiceError"]
