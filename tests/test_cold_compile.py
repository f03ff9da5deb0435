"""The simulator compiles from an empty numba cache, whatever the order of first calls.

A kernel helper compiled without reference counting (``mooncake_lab.jit.helper_njit``) cannot call
code that allocates; with a warm cache such a mistake can hide (the callee was cached by an earlier,
ordinary compile), and the first student on a new machine meets it. So: a fresh process with an
empty cache whose very first numba call is a whole simulation (every policy, CPP groups, admission).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
from mooncake_lab import sim
from mooncake_lab.synthetic import synthetic_trace
tr = synthetic_trace("toolagent-like", n_requests=60, seed=1)
for policy in ("kvcentric", "cache_aware", "load", "random"):
    sim.simulate(tr, sim.ClusterConfig(n_prefill=4, n_decode=2, prefill_policy=policy, cpp_group_size=2,
                                       admission="predicted"))
print("ok")
"""


def test_simulator_compiles_from_an_empty_cache(tmp_path):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    env.pop("NUMBA_DISABLE_JIT", None)
    run = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stderr[-3000:]
