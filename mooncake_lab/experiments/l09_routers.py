"""Lecture 09: after Mooncake — the KV-aware routers of today's open-source stacks on the same traces.

* :data:`ROUTER_INFO`: per router its system, the version implemented (file @ commit of
  ``reference/routers.md``) and what it knows of the caches by default.
* :func:`cluster` / :func:`run`: one architecture (Mooncake's 8P+8D pools or 16 coupled nodes with
  chunked prefill, the same 16 nodes) at one stress level (:data:`STRESS`: lecture 04's replay speed
  on the calibrated preset, lecture 07's 2× decode-bound overload), memoised.
* :func:`leaderboard`: every router and the Conductor's policies side by side — mean and p99 TTFT,
  SLO attainment, hit ratio, fetched tokens, load imbalance.
* :func:`knowledge_cost`: each router with the true caches and with its own history (belief).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .. import sim
from ..sim.routers import ROUTERS, SYSTEM_DEFAULTS, RouterConfig
from ..traces import Trace
from ..validate import choice, fail
from . import l04_scheduling as l04
from . import l07_overload as l07
from .common import as_trace as _trace, simulate_all

__all__ = ["ROUTER_INFO", "ARCHITECTURES", "STRESS", "CONDUCTOR", "cluster", "run", "leaderboard",
           "knowledge_cost", "load_imbalance", "router_table"]

#: Router → (system, what it implements, source file @ commit — reference/routers.md).
ROUTER_INFO = {
    "dynamo": ("NVIDIA Dynamo", "KV router, cost = prefill blocks after overlap credit + decode blocks",
               "lib/kv-router/src/scheduling/selector/default.rs @ 07a6c9ce"),
    "sglang": ("SGLang model gateway", "cache_aware: balance when imbalanced, else longest router-tree match",
               "sgl-model-gateway/src/policies/cache_aware.rs @ b93974f1"),
    "llmd": ("llm-d router", "weighted scorers: prefix 3, queue 2, KV utilisation 2 (P/D: prefix 2, queue 1)",
             "pkg/epp/config/loader/defaults.go @ ebab6879"),
    "prodstack_rr": ("vLLM production-stack", "roundrobin", "src/vllm_router/routers/routing_logic.py @ a6c01db0"),
    "prodstack_prefix": ("vLLM production-stack", "prefixaware: longest match in a router trie, no eviction",
                         "src/vllm_router/prefix/hashtrie.py @ a6c01db0"),
    "prodstack_kv": ("vLLM production-stack", "kvaware: LMCache controller's longest prefix, else lowest QPS",
                     "src/vllm_router/routers/routing_logic.py @ a6c01db0"),
    "aibrix": ("AIBrix", "prefix-cache router: match among the least loaded, bounded by mean + σ",
               "pkg/plugins/gateway/algorithms/prefix_cache.go @ e3e10f9e"),
    "preble": ("Preble (E2)", "exploit the holders when the cached part is longer, else explore by load",
               "multi_node/global_scheduler_with_time.py @ 0c962c4c"),
}
#: The Conductor's policies the routers are measured against (lecture 04).
CONDUCTOR = ("random", "load", "cache_aware", "kvcentric")
#: The two architectures on the same 16 nodes: Mooncake's pools, or vLLM-like coupled nodes with
#: chunked prefill (vLLM's default token budget with chunking, 512; ClusterConfig.prefill_chunk).
ARCHITECTURES = {"disaggregated": dict(n_prefill=8, n_decode=8),
                 "coupled": dict(engine_mode="coupled", n_coupled=16, chunked_prefill=True)}
#: Stress levels (name → (replay speed per trace, ClusterConfig overrides)): lecture 04's (the speed where
#: the prefill work offered without cache equals the pool's capacity) and lecture 07's (the paper's 2×,
#: fast prefill, 40k-token decode nodes).
STRESS = {"lecture 04": (dict(l04.REPLAY_SPEEDS), {}),
          "lecture 07": ({t: l07.DEFAULT_SPEED for t in l04.TRACES}, dict(l07.DEFAULT_CONFIG))}


def _check(arch: str, stress: str, where: str) -> None:
    choice(arch, "arch", ARCHITECTURES, where)
    choice(stress, "stress", STRESS, where)


def _speed(trace, stress: str, speed) -> float:
    """The replay speed: ``speed`` if given, else the stress level's for a trace named in
    :data:`~.l04_scheduling.TRACES` (a Trace object without ``speed``: as recorded, 1×)."""
    if speed is not None:
        return speed
    return STRESS[stress][0][trace] if isinstance(trace, str) and trace in STRESS[stress][0] else 1.0


def cluster(policy: str, arch: str = "disaggregated", stress: str = "lecture 04",
            router: RouterConfig | None = None, **overrides) -> sim.ClusterConfig:
    """The :class:`~mooncake_lab.sim.ClusterConfig` of ``policy`` (a router or a Conductor policy) on
    ``arch`` at ``stress``; ``overrides`` go on top. In the coupled architecture the disaggregated
    fields (admission, links, decode binding) do not apply."""
    _check(arch, stress, "l09.cluster")
    if policy not in ROUTERS and policy not in CONDUCTOR:
        raise fail("policy", policy, ", ".join(map(repr, (*CONDUCTOR, *ROUTERS))), "l09.cluster")
    cfg = {**STRESS[stress][1], **ARCHITECTURES[arch], **overrides}
    return sim.ClusterConfig(prefill_policy=policy, router=router, **cfg)


def run(trace: Trace | str = "conversation", policy: str = "dynamo", arch: str = "disaggregated",
        stress: str = "lecture 04", router: RouterConfig | None = None, speed: float | None = None,
        **overrides) -> sim.SimResult:
    """One memoised run of :func:`cluster` on ``trace`` at the stress level's replay speed (or ``speed``)."""
    cfg = cluster(policy, arch, stress, router, **overrides)
    return simulate_all([(trace, _speed(trace, stress, speed), cfg)])[0]


def load_imbalance(res: sim.SimResult) -> float:
    """Prompt tokens computed by the busiest instance / the mean over instances (1 = even)."""
    a = res.arrays
    n = res.config.n_prefill_instances
    ok = a["prefill_inst"] >= 0
    work = np.bincount(a["prefill_inst"][ok], weights=a["computed_tok"][ok], minlength=n)
    return float(work.max() / work.mean()) if work.sum() > 0 else float("nan")


def _row(res: sim.SimResult) -> dict:
    s = res.summary()
    a = res.arrays
    return {"ttft_mean_s": s["ttft_mean_s"], "ttft_p99_s": s["ttft_p99_s"], "slo_attainment": s["slo_attainment"],
            "hit_ratio": s["hit_ratio"], "fetched_tokens": int(a["fetched_tok"][a["fetched_tok"] > 0].sum()),
            "load_imbalance": load_imbalance(res)}


def leaderboard(trace: Trace | str = "conversation", arch: str = "disaggregated", stress: str = "lecture 04",
                policies=None, speed: float | None = None) -> pd.DataFrame:
    """One row per policy (default: the eight routers and the Conductor's four), best SLO attainment
    first (ties: lower mean TTFT). ``kind``: router or Conductor."""
    _check(arch, stress, "l09.leaderboard")
    names = list(ROUTERS) + list(CONDUCTOR) if policies is None else list(policies)
    tr, speed = _trace(trace), _speed(trace, stress, speed)
    runs = simulate_all([(tr, speed, cluster(p, arch, stress)) for p in names])
    df = pd.DataFrame([{"policy": p, "kind": "router" if p in ROUTERS else "Conductor", **_row(r)}
                       for p, r in zip(names, runs)]).set_index("policy")
    return df.sort_values(["slo_attainment", "ttft_mean_s"], ascending=[False, True], kind="stable")


def knowledge_cost(trace: Trace | str = "conversation", arch: str = "disaggregated", stress: str = "lecture 04",
                   routers=None, speed: float | None = None) -> pd.DataFrame:
    """Each router (default: those that match prefixes) with the true caches and with its own history:
    hit ratio and mean TTFT under both, and what the belief costs (TTFT ratio believed / true)."""
    _check(arch, stress, "l09.knowledge_cost")
    names = [r for r in ROUTERS if r != "prodstack_rr"] if routers is None else list(routers)
    tr, speed = _trace(trace), _speed(trace, stress, speed)
    jobs = [(tr, speed, cluster(r, arch, stress, RouterConfig(knowledge=k))) for r in names for k in ("true", "belief")]
    runs = simulate_all(jobs)
    rows = []
    for k, r in enumerate(names):
        t, b = runs[2 * k].summary(), runs[2 * k + 1].summary()
        rows.append({"router": r, "default": SYSTEM_DEFAULTS[r][0],
                     "hit_ratio_true": t["hit_ratio"], "hit_ratio_belief": b["hit_ratio"],
                     "ttft_mean_true_s": t["ttft_mean_s"], "ttft_mean_belief_s": b["ttft_mean_s"],
                     "ttft_ratio": b["ttft_mean_s"] / t["ttft_mean_s"] if t["ttft_mean_s"] > 0 else float("nan")})
    return pd.DataFrame(rows).set_index("router")


def router_table() -> pd.DataFrame:
    """What each router is: system, rule, source, default knowledge, belief capacity and TTL."""
    rows = []
    for r, (system, rule, src) in ROUTER_INFO.items():
        kn, cap, ttl, win, dc = SYSTEM_DEFAULTS[r]
        rows.append({"router": r, "system": system, "rule": rule, "source": src, "knowledge": kn,
                     "belief_blocks": "the instance's cache" if cap is None else ("unbounded" if cap == 0 else cap),
                     "belief_ttl_s": ttl, "decode_choice": dc})
    return pd.DataFrame(rows).set_index("router")
