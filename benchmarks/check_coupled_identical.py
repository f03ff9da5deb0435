"""Whether a change to the coupled engine keeps every result bit-identical (prints; exits 1 on a difference).

    git stash; MOONCAKE_LAB_DATA=... python benchmarks/check_coupled_identical.py save /tmp/before.npz
    git stash pop; MOONCAKE_LAB_DATA=... python benchmarks/check_coupled_identical.py cmp /tmp/before.npz

Runs 10 coupled configurations (with and without chunked prefill, presets, policies, noise, a tight
KV budget; the conversation trace and the synthetic toolagent-like one) and saves or compares every
output array, the per-instance peak KV and the diagnostics, exactly (NaN equal to NaN).
Issue 16's coupled speed-up was checked this way: 240 arrays, 0 differ.
"""
import sys, time
import numpy as np
from mooncake_lab import sim
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
saved = {}
for name, (tr, kw) in cfgs.items():
    r = sim.simulate(tr, sim.ClusterConfig(**kw))
    for k, v in r.arrays.items():
        saved[f"{name}/{k}"] = np.asarray(v)
    saved[f"{name}/max_kv"] = np.asarray(r.max_kv_tokens)
    saved[f"{name}/diag"] = np.array([r.diagnostics[k] for k in sorted(r.diagnostics)])
if mode == "save":
    np.savez(path, **saved); print("saved", len(saved))
else:
    old = np.load(path); bad = 0
    assert set(old.files) == set(saved), set(old.files) ^ set(saved)
    for k in old.files:
        a, b = old[k], saved[k]
        if a.dtype != b.dtype or a.shape != b.shape or not np.array_equal(a, b, equal_nan=a.dtype.kind == "f"):
            bad += 1; print("DIFF", k, a.dtype, b.dtype, a.shape, b.shape)
    print("compared", len(old.files), "arrays;", bad, "differ")
    sys.exit(1 if bad else 0)
