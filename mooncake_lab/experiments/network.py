"""The network as a shared resource (issue 14 §1): KVCache-centric vs cache-aware scheduling at
several NIC speeds with and without link contention (``ClusterConfig.network_contention``,
:mod:`mooncake_lab.sim.links`), and hot blocks' replica counts over time (FAST'25 Fig. 11's shape).

Not a lecture module yet (nothing here is registered with ``reproduce``): the integrator decides
where it is shown.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .. import sim
from ..prefix_cache import block_popularity, replica_counts, simulate_lru
from ..traces import Trace
from ..validate import fail, integer, real_array
from .common import as_trace as _trace, simulate_at_speed
from .l04_scheduling import DEFAULT_REPLAY_SPEED

__all__ = ["CONTENTION_GBPS", "contention_comparison", "replicas_over_time"]

#: NIC speeds compared (Gbit/s per node): 100 (FAST'25 Fig. 13's practical minimum), 200, and the
#: A800 testbed's 4 × 200 = 800 (FAST'25 §5.1).
CONTENTION_GBPS = (100.0, 200.0, 800.0)


def contention_comparison(trace: Trace | str = "conversation", speed: float = DEFAULT_REPLAY_SPEED,
                          gbps=CONTENTION_GBPS, policies=("kvcentric", "cache_aware"), **config) -> pd.DataFrame:
    """One row per (Gbps, contention off/on, policy): mean and p90 TTFT (s, completed requests),
    hit and fetched ratios, mean fetch wait over the requests that fetched (s), the largest fetch
    wait, mean KV-stream wait (s). ``config`` goes to :class:`~mooncake_lab.sim.ClusterConfig`
    (default 8P+8D, calibrated preset); runs are memoised."""
    speeds = real_array(gbps, "gbps", lo=1.0, hi=32_000.0, where="contention_comparison")
    rows = []
    for g in speeds:
        for on in (False, True):
            for p in policies:
                res = simulate_at_speed(trace, speed, sim.ClusterConfig(prefill_policy=p, network_gbps=float(g),
                                                                        network_contention=on, **config))
                s, df = res.summary(), res.requests
                fetched = df[df.fetched_tokens > 0]
                rows.append({"gbps": float(g), "contention": on, "policy": p, "ttft_mean_s": s["ttft_mean_s"],
                             "ttft_p90_s": s["ttft_p90_s"], "hit_ratio": s["hit_ratio"],
                             "fetched_ratio": s["fetched_ratio"], "fetches": len(fetched),
                             "fetch_wait_mean_s": float(fetched.fetch_wait_s.mean()) if len(fetched) else 0.0,
                             "fetch_wait_max_s": float(fetched.fetch_wait_s.max()) if len(fetched) else 0.0,
                             "stream_wait_mean_s": float(df.stream_wait_s.mean())})
    return pd.DataFrame(rows).set_index(["gbps", "contention", "policy"])


def replicas_over_time(result: sim.SimResult, top: int = 10, n_samples: int = 20) -> pd.DataFrame:
    """Replica counts of the ``top`` most popular blocks (columns: popularity rank 1 … top) at
    ``n_samples`` times evenly spaced over the arrivals (index ``time_s``): in how many prefill
    instances' caches each block is just after the last request arrived by then.

    Like :func:`.l04_scheduling.hot_block_replicas`, the caches are rebuilt by replaying the run's
    placements (each placed request's blocks stored on its prefill instance, LRU, the run's capacity)
    — a fetch's refresh of the blocks at their source is omitted — once per sample (n_samples × the
    LRU replay, a few ms each on the conversation trace).
    """
    if not isinstance(result, sim.SimResult):
        raise fail("result", result, "a SimResult of sim.simulate", "replicas_over_time")
    top = integer(top, "top", lo=1, hi=10_000, where="replicas_over_time")
    n_samples = integer(n_samples, "n_samples", lo=1, hi=1_000, where="replicas_over_time")
    tr, cfg = result.trace, result.config
    placed = np.flatnonzero(result.arrays["prefill_inst"] >= 0)
    cap = cfg.resolve().cache_capacity_blocks
    order = np.argsort(-block_popularity(tr), kind="stable")[:top]
    times = np.linspace(float(tr.arrival_s[0]), float(tr.arrival_s[-1]), n_samples) if len(tr) else np.zeros(0)
    out = np.zeros((len(times), len(order)), dtype=np.int64)
    for k, t in enumerate(times):
        upto = placed[tr.arrival_s[placed] <= t]
        if len(upto) == 0:
            continue
        lru = simulate_lru(tr.select(upto), cap, cfg.n_prefill_instances,
                           assignment=result.arrays["prefill_inst"][upto])
        out[k] = replica_counts(lru.state)[order]
    return pd.DataFrame(out, index=pd.Index(times, name="time_s"),
                        columns=pd.Index(np.arange(1, len(order) + 1), name="rank"))
