"""Speed of the routers (sim/routers.py) in the coupled engine (prints numbers; no assertions).

    MOONCAKE_LAB_DATA=/path/to/mooncake_traces python benchmarks/bench_coupled_routers.py [--repeat 10]

Conversation trace, 16 coupled nodes, default preset, each router with its system's defaults
(RouterConfig()), without and with chunked prefill (512): CPU-time median / best of the whole
``simulate()`` (``bench_sim.cpu_median``), µs per request and the ratio to the Conductor's
``kvcentric`` on the same cluster (the routers' code is compiled separately; kvcentric's is unchanged).

Measured when the routers entered the coupled engine (load average ≈ 1–2 on 2 cores; median ms, ratio
to kvcentric), unchunked / chunked 512: kvcentric 116.1 / 128.9; dynamo 119.5 (1.03) / 141.6 (1.10);
sglang 138.7 (1.19) / 163.3 (1.27); llmd 114.8 (0.99) / 164.4 (1.28); prodstack_rr 113.1 (0.97) /
143.1 (1.11); prodstack_prefix 113.8 (0.98) / 147.6 (1.14); prodstack_kv 93.1 (0.80) / 143.4 (1.11);
aibrix 152.8 (1.32) / 172.7 (1.34); preble 117.0 (1.01) / 177.3 (1.38). A router also changes the
run (batches, iterations), not only the routing cost. The other policies: the coupled kernel is
called with the router arguments ``None`` and numba prunes the router code — its native function
(≈ 4,060 lines of assembly, compiled without cache, ``inspect_asm``) is the same instruction for instruction
as before the routers, only the Python wrapper unboxes 7 more arguments; the whole-``simulate()``
medians of ``bench_sim.py --coupled-only`` moved within the shared machine's noise (±30 % between
rounds), and benchmarks/check_coupled_identical.py found 0 of 240 arrays different.
"""
from __future__ import annotations

import argparse

from bench_sim import cpu_median
from mooncake_lab import sim
from mooncake_lab.sim.routers import ROUTERS
from mooncake_lab.traces import load_trace_or_synthetic


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args(argv)
    conv = load_trace_or_synthetic("conversation", download=False)
    print(f"routers, 16 coupled, {conv.name} ({len(conv):,} requests), CPU-time median / best of {args.repeat}:")
    print(f"{'policy':18s} {'chunked':>7s} {'median ms':>10s} {'best ms':>8s} {'us/req':>7s} {'vs kvcentric':>13s} "
          f"{'cached %':>9s}")
    for chunked in (False, True):
        base = None
        for policy in ("kvcentric", *ROUTERS):
            cfg = sim.ClusterConfig(engine_mode="coupled", chunked_prefill=chunked, prefill_policy=policy)
            sim.simulate(conv.head(50), cfg)  # compile / load the numba cache
            med, best = cpu_median(lambda: sim.simulate(conv, cfg), args.repeat)
            base = med if base is None else base
            df = sim.simulate(conv, cfg).requests
            hit = 100 * df.cached_tokens.sum() / df.input_len.sum()
            print(f"{policy:18s} {str(chunked):>7s} {med * 1e3:10.1f} {best * 1e3:8.1f} {med / len(conv) * 1e6:7.2f} "
                  f"{med / base:13.2f} {hit:9.1f}")


if __name__ == "__main__":
    main()
