"""Whether a change to the coupled engine keeps every result bit-identical (prints; exits 1 on a difference).

    git stash; MOONCAKE_LAB_DATA=... python benchmarks/check_coupled_identical.py save /tmp/before.npz
    git stash pop; MOONCAKE_LAB_DATA=... python benchmarks/check_coupled_identical.py cmp /tmp/before.npz

Runs 10 coupled configurations (with and without chunked prefill, presets, policies, noise, a tight
KV budget; the conversation trace and the synthetic toolagent-like one) and saves or compares every
output array, the per-instance peak KV and the diagnostics, exactly (NaN equal to NaN).
Issue 16's coupled speed-up was checked this way: 240 arrays, 0 differ.
"""
import sys

from check_identical import save_or_compare  # this folder's: runs, saves, compares
from mooncake_lab.traces import load_trace_or_synthetic
from mooncake_lab.synthetic import synthetic_trace
mode, path = sys.argv[1], sys.argv[2]
conv = load_trace_or_synthetic("conversation", download=False)
tool = synthetic_trace("toolagent-like")
cfgs = {
    "plain": (conv, dict(engine_mode="coupled")),
    "chunk512": (conv, dict(engine_mode="coupled", chunked_prefill=True)),
    "modern": (conv, dict(engine_mode="coupled", preset="modern")),
    "modern_chunk": (conv, dict(engine_mode="coupled", preset="modern", chunked_prefill=True)),
    "fast2x_chunk": (conv.replay(2.0), dict(engine_mode="coupled", chunked_prefill=True, prefill_chunk=2048)),
    "random8": (conv, dict(engine_mode="coupled", n_coupled=8, prefill_policy="random")),
    "load_noise": (conv, dict(engine_mode="coupled", prefill_policy="load", estimator_noise=0.2, chunked_prefill=True)),
    "tool_chunk": (tool, dict(engine_mode="coupled", chunked_prefill=True)),
    "tool": (tool, dict(engine_mode="coupled")),
    "tight_kv": (conv, dict(engine_mode="coupled", decode_kv_capacity_tokens=200_000.0, chunked_prefill=True)),
}
sys.exit(save_or_compare(mode, path, cfgs))
