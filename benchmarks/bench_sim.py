"""Speed of the cluster simulator (prints numbers and ratios; no assertions).

    MOONCAKE_LAB_DATA=/path/to/mooncake_traces python benchmarks/bench_sim.py [--reference-n 300]

Budgets (DESIGN.md §5): conversation trace (12,031 requests), 8P+8D with caches, kvcentric
≤ 60 ms per run after warm-up (also printed for CPP groups of X = 2, 4, 8 nodes); a 23,608-request trace ≤ 120 ms; a fresh process with a warm
numba cache: import + load + first simulation ≤ 2 s. The plain-Python reference steps the decode
one iteration at a time, so it runs on the first ``--reference-n`` requests only (said in the output).

The machine is shared: compare best-of times taken in the same run (the median shows the noise).
Measured for issue 4 (whole ``simulate()``, kvcentric, best of 11, old and new kernel interleaved in
one process), before → after the kernel's helpers stopped reference counting (``sim/kernel.py``,
"Speed"): conversation 8P+8D 45 → 26 ms, 32P+32D 84 → 47 ms; toolagent-like 8P+8D 84 → 46 ms,
32P+32D 159 → 77 ms. In a slow phase of the shared machine: toolagent-like 8P+8D 128 → 77 ms.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import numpy as np

from mooncake_lab import sim
from mooncake_lab.synthetic import synthetic_trace
from mooncake_lab.traces import load_trace_or_synthetic


def best_of(fn, repeat=5):
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return min(ts), float(np.median(ts))


def fresh_process_seconds() -> float:
    code = ("import time; t=time.perf_counter()\n"
            "from mooncake_lab import sim\nfrom mooncake_lab.traces import load_trace_or_synthetic\n"
            "tr = load_trace_or_synthetic('conversation', download=False)\n"
            "sim.simulate(tr, sim.ClusterConfig())\nprint(time.perf_counter() - t)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ))
    return float(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else float("nan")


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--reference-n", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)

    conv = load_trace_or_synthetic("conversation", download=False)
    tool = synthetic_trace("toolagent-like")
    traces = {f"{conv.name} ({len(conv):,})": (conv, 60.0), f"{tool.name} ({len(tool):,})": (tool, 120.0)}
    sim.simulate(conv.head(50), sim.ClusterConfig())  # compile / load the numba cache
    t = time.perf_counter()
    sim.simulate(conv.head(50), sim.ClusterConfig())
    print(f"warm-up done ({time.perf_counter() - t:.3f} s for 50 requests)\n")
    print(f"{'trace':38s} {'cluster':9s} {'policy':12s} {'numba ms':>9s} {'median':>7s} {'budget':>7s} "
          f"{'req/s numba':>12s} {'req/s ref':>10s} {'ratio':>7s}")
    for label, (tr, budget_ms) in traces.items():
        for n in (8, 32):
            for policy in ("kvcentric", "random"):
                cfg = sim.ClusterConfig(n_prefill=n, n_decode=n, prefill_policy=policy)
                best, med = best_of(lambda: sim.simulate(tr, cfg), args.repeat)
                sub = tr.head(args.reference_n)
                t = time.perf_counter()
                sim.simulate(sub, cfg, engine="reference")
                ref_rps = len(sub) / (time.perf_counter() - t)
                rps = len(tr) / best
                bud = f"{budget_ms:.0f}" if n == 8 and policy == "kvcentric" else "-"
                print(f"{label:38s} {f'{n}P+{n}D':9s} {policy:12s} {best * 1e3:9.1f} {med * 1e3:7.1f} {bud:>7s} "
                      f"{rps:12,.0f} {ref_rps:10,.0f} {rps / ref_rps:7,.0f}")
    # admission control (lecture 07): the decode-bound overload of experiments/l07_overload.py
    print(f"\nadmission, {tool.name} at 2x, 8P+8D, preset modern, decode KV 40k tokens/node:")
    print(f"{'admission':12s} {'numba ms':>9s} {'vs none':>8s}")
    t_none = None
    for adm in sim.ADMISSIONS:
        cfg = sim.ClusterConfig(admission=adm, preset="modern", decode_kv_capacity_tokens=40_000.0)
        tr2 = tool.replay(2.0)
        best, _ = best_of(lambda: sim.simulate(tr2, cfg), args.repeat)
        t_none = best if t_none is None else t_none
        print(f"{adm:12s} {best * 1e3:9.1f} {best / t_none:8.2f}")
    # network contention (sim/links.py): links reserved by fetches and KV streams, budget as above
    print(f"\nnetwork contention, 8P+8D kvcentric (budget {60:.0f} ms on {conv.name}, 120 ms on {tool.name}):")
    print(f"{'trace':38s} {'speed':>5s} {'off ms':>7s} {'off med':>7s} {'on ms':>7s} {'on med':>7s} {'on/off':>7s}")
    for label, (tr, _) in traces.items():
        for speed in (0.4, 1.0):
            tr2 = tr.replay(speed) if speed != 1.0 else tr
            cfgs = [sim.ClusterConfig(network_contention=on) for on in (False, True)]
            for cfg in cfgs:
                sim.simulate(tr2.head(50), cfg)
            (b0, m0), (b1, m1) = (best_of(lambda: sim.simulate(tr2, cfg), args.repeat) for cfg in cfgs)
            print(f"{label:38s} {speed:5.1f} {b0 * 1e3:7.1f} {m0 * 1e3:7.1f} {b1 * 1e3:7.1f} {m1 * 1e3:7.1f} "
                  f"{b1 / b0:7.2f}")
    # CPP prefill groups (lecture 08): the 8 prefill nodes as 8/X pipeline groups of X nodes
    print(f"\nCPP prefill groups, {conv.name}, 8P+8D kvcentric (cpp_chunk 4096):")
    print(f"{'group size X':12s} {'groups':>6s} {'numba ms':>9s} {'vs X=1':>7s}")
    t_x1 = None
    for x in (1, 2, 4, 8):
        cfg = sim.ClusterConfig(cpp_group_size=x)
        sim.simulate(conv.head(50), cfg)
        best, _ = best_of(lambda: sim.simulate(conv, cfg), args.repeat)
        t_x1 = best if t_x1 is None else t_x1
        print(f"{x:12d} {8 // x:6d} {best * 1e3:9.1f} {best / t_x1:7.2f}")
    # coupled vLLM-like engine (lecture 06): 16 nodes, preset modern, one iteration per loop turn
    print(f"\ncoupled engine, {conv.name}, 16 nodes, preset modern:")
    print(f"{'engine':28s} {'speed':>5s} {'numba ms':>9s} {'iterations':>11s} {'vs 8P+8D':>9s}")
    base = {}  # speed → the disaggregated cluster's time
    for label, cfg in (("8P+8D (disaggregated)", sim.ClusterConfig(preset="modern")),
                       ("16 coupled", sim.ClusterConfig(engine_mode="coupled", preset="modern")),
                       ("16 coupled, chunked 512", sim.ClusterConfig(engine_mode="coupled", chunked_prefill=True,
                                                                     preset="modern"))):
        for speed in (1.0, 2.0):
            tr2 = conv.replay(speed)
            sim.simulate(tr2.head(50), cfg)
            best, _ = best_of(lambda: sim.simulate(tr2, cfg), max(1, args.repeat // 2))
            if label.startswith("8P"):
                base[speed] = best
            it = sim.simulate(tr2, cfg).diagnostics.get("iterations", 0)
            print(f"{label:28s} {speed:5.1f} {best * 1e3:9.1f} {it:11,d} {best / base[speed]:9.1f}")
    print(f"\n(reference engine timed on the first {args.reference_n} requests of each trace; "
          f"numba on the whole trace; times = best of {args.repeat}, whole simulate() call)")
    print(f"fresh process (import + load conversation + first simulation, warm numba cache): "
          f"{fresh_process_seconds():.2f} s (budget 2 s)")


if __name__ == "__main__":
    main()
