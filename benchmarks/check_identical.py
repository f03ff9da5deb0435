"""Whether a change to the disaggregated engine keeps every result bit-identical (prints; exits 1 on a difference).

    git stash; MOONCAKE_LAB_DATA=... python benchmarks/check_identical.py save /tmp/before.npz
    git stash pop; MOONCAKE_LAB_DATA=... python benchmarks/check_identical.py cmp /tmp/before.npz

Runs the numba kernel over every switch of ``ClusterConfig`` that changes its code path — the four Conductor
policies, contention on / off, binding, load metric, output lengths, the three admissions, CPP groups, the
three eviction policies, noise, a small decode KV, 32P+32D, the earlier semantics, every router with its
true cache and its belief (with a TTL, a bounded belief, each decode choice) and a student policy — on the
conversation trace (released or stand-in) and the synthetic toolagent-like one, and saves or compares every
output array, the per-instance peak KV and the diagnostics, exactly (NaN equal to NaN). The coupled engine
has its own: ``check_coupled_identical.py``.
"""
import sys

import numpy as np

from mooncake_lab import sim
from mooncake_lab.sim.routers import ROUTERS, RouterConfig
from mooncake_lab.synthetic import synthetic_trace
from mooncake_lab.traces import load_trace_or_synthetic


def least_wait(req, view):  # a student policy (compiled with numba)
    best = 0
    for p in range(len(view.ttft_s)):
        if view.ttft_s[p] + 0.001 * view.send_backlog_s[p] < view.ttft_s[best] + 0.001 * view.send_backlog_s[best]:
            best = p
    return best


def configs(conv, tool):
    c = {}
    for pol in ("random", "load", "cache_aware", "kvcentric"):
        c[f"{pol}"] = (conv, dict(prefill_policy=pol))
        c[f"{pol}/simple"] = (conv, dict(prefill_policy=pol, **sim.SIMPLE_SEMANTICS))
    c["tool"] = (tool, {})
    c["tool/simple"] = (tool, dict(sim.SIMPLE_SEMANTICS))
    c["tool/2x/predicted/40k"] = (tool.replay(2.0), dict(admission="predicted", preset="modern",
                                                          decode_kv_capacity_tokens=40_000.0))
    for adm in ("baseline", "early", "predicted"):
        c[f"conv/2x/{adm}"] = (conv.replay(2.0), dict(admission=adm, preset="modern"))
        c[f"conv/2x/{adm}/memory/ready"] = (conv.replay(2.0), dict(admission=adm, preset="modern",
                                                                     decode_load_metric="tbt_or_memory",
                                                                     decode_binding="ready"))
    c["known"] = (conv, dict(output_lengths="known"))
    c["40k"] = (conv, dict(decode_kv_capacity_tokens=40_000.0))
    c["40k/ready"] = (conv, dict(decode_kv_capacity_tokens=40_000.0, decode_binding="ready"))
    c["no_links"] = (conv, dict(network_contention=False))
    c["25gbps"] = (conv.replay(1.755), dict(network_gbps=25.0, preset="modern"))
    c["noise"] = (conv, dict(estimator_noise=0.2, seed=3))
    for x in (2, 4):
        c[f"cpp{x}"] = (conv, dict(cpp_group_size=x))
    c["cpp2/serial"] = (conv, dict(cpp_group_size=2, cpp_overlap=False, layerwise_kv_transfer=False))
    for ev in ("lfu", "length_aware"):
        c[ev] = (conv, dict(cache_eviction=ev, cache_capacity_blocks=2_000))
        c[f"tool/{ev}"] = (tool, dict(cache_eviction=ev, cache_capacity_blocks=2_000))
    c["lru/small"] = (conv, dict(cache_capacity_blocks=500))
    c["32x32"] = (conv, dict(n_prefill=32, n_decode=32))
    c["threshold"] = (conv, dict(kvcache_balancing_threshold=2.0))
    for r in ROUTERS:
        c[f"router/{r}"] = (conv, dict(prefill_policy=r))
        c[f"router/{r}/true"] = (conv, dict(prefill_policy=r, router=RouterConfig(knowledge="true")))
        c[f"router/{r}/belief"] = (conv, dict(prefill_policy=r, router=RouterConfig(
            knowledge="belief", belief_capacity_blocks=1_000, belief_ttl_s=60.0)))
        c[f"router/{r}/tool/ready"] = (tool, dict(prefill_policy=r, decode_binding="ready",
                                                  cache_capacity_blocks=1_000))
    for dc in ("least_kv", "least_requests", "round_robin", "least_queued", "aibrix_pd"):
        c[f"router/dynamo/{dc}"] = (conv, dict(prefill_policy="dynamo", router=RouterConfig(decode_choice=dc)))
    c["student"] = (conv, dict(prefill_policy=least_wait))
    c["student/simple"] = (conv.head(3000), dict(prefill_policy=least_wait, **sim.SIMPLE_SEMANTICS))
    return c


def save_or_compare(mode, path, cfgs) -> int:
    """Run every ``{name: (trace, ClusterConfig fields)}`` and save (``mode`` "save") or compare (``"cmp"``) its
    output arrays, per-instance peak KV and diagnostics with the file ``path``; 1 if anything differs."""
    saved = {}
    for name, (tr, kw) in cfgs.items():
        r = sim.simulate(tr, sim.ClusterConfig(**kw))
        for k, v in r.arrays.items():
            saved[f"{name}/{k}"] = np.asarray(v)
        saved[f"{name}/max_kv"] = np.asarray(r.max_kv_tokens)
        saved[f"{name}/diag"] = np.array([r.diagnostics[k] for k in sorted(r.diagnostics)])
    if mode == "save":
        np.savez(path, **saved)
        print("saved", len(saved), "arrays")
        return 0
    old = np.load(path)
    bad = 0
    for k in sorted(set(old.files) ^ set(saved)):
        bad += 1
        print("ONLY IN ONE", k)
    for k in sorted(set(old.files) & set(saved)):
        a, b = old[k], saved[k]
        if a.dtype != b.dtype or a.shape != b.shape or not np.array_equal(a, b, equal_nan=a.dtype.kind == "f"):
            bad += 1
            print("DIFF", k, a.dtype, b.dtype, a.shape, b.shape)
    print("compared", len(old.files), "arrays;", bad, "differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(save_or_compare(sys.argv[1], sys.argv[2], configs(load_trace_or_synthetic("conversation", download=False),
                                                               synthetic_trace("toolagent-like"))))
