"""Lecture 09: after Mooncake — the KV-aware routers of today's open-source stacks on the same traces.

* :data:`ROUTER_INFO`: per router its system, the version implemented (file @ commit of
  ``notebooks/routers.md``, the course's router notes) and what it knows of the caches by default.
* :func:`cluster` / :func:`run`: one architecture (Mooncake's 8P+8D pools or 16 coupled nodes with
  chunked prefill, the same 16 nodes) at one stress level (:data:`STRESS`: lecture 04's replay speed
  on the calibrated preset, lecture 07's 2× decode-bound overload), memoised.
* :func:`leaderboard`: every router and the Conductor's policies side by side — mean and p99 TTFT,
  SLO attainment, hit ratio, fetched tokens, load imbalance.
* :func:`knowledge_cost`: each router with the true caches and with its own history (belief);
  :func:`belief_sweep` / :func:`belief_audit`: one router's belief capacity against the true cache, and
  the requests a stale belief sent to blocks the instance no longer (or never) held.
* :func:`worked_request`: one request, four hand-set instances, each rule's per-instance numbers;
  :func:`changed_state` / :func:`explain_choice`: exercise 1's changed state and a rule applied to it step by step.
* :func:`dynamo_weight_sweep`, :func:`default_variants`, :func:`docs_box`: what the docs claim vs what we measure.
* :data:`HISTORY`: the dated facts of ``notebooks/routers.md``.
* :data:`STACKS`, :func:`stacks_table`, :func:`transfer_rates`: §8, how today's stacks use Mooncake's store and
  Transfer Engine (each with its flag and source), and the engine's rates, FAST'25's RDMA beside the store lab's
  committed recording over TCP loopback (the store is never started here).
* :func:`readable`, :func:`overview`, :func:`board_table` …: the tables the notebook shows, labelled for people.
"""
from __future__ import annotations

import dataclasses
import math
import re
from collections import OrderedDict

import numpy as np
import pandas as pd

from .. import paper, sim
from ..sim.routers import ROUTERS, SYSTEM_DEFAULTS, RouterConfig
from ..traces import BLOCK_TOKENS, Trace
from ..validate import choice, fail, items, real
from . import l04_scheduling as l04
from . import l07_overload as l07
from .common import as_trace as _trace, memo_key, simulate_all

__all__ = ["ROUTER_INFO", "ARCHITECTURES", "STRESS", "CONDUCTOR", "TRACES", "cluster", "run", "leaderboard",
           "leaderboards", "describe_leaderboards", "parameter_table", "knowledge_cost", "load_imbalance", "router_table", "decode_rules",
           "WORKED_STATE", "WORKED_REQUEST", "worked_inputs", "worked_request", "describe_worked", "belief_audit",
           "EXERCISE_CHANGE", "EXERCISE_ROUTERS", "EXPLAINED", "changed_state", "state_change", "explain_choice",
           "BELIEF_CAPACITIES", "SWEEP_CACHE_BLOCKS", "belief_sweep", "describe_belief_sweep", "hot_first_block", "DYNAMO_WEIGHTS", "dynamo_weight_config",
           "dynamo_weight_sweep", "TBT_ROUTERS", "prefill_share_during_decode", "tbt_vs_ttft",
           "describe_tbt_vs_ttft", "instance_shares", "describe_instance_shares", "DEFAULT_VARIANTS", "default_variants", "docs_box", "HISTORY", "history",
           "LABELS", "STATE_LABELS", "readable", "overview", "belief_settings", "parameters", "state_table",
           "request_table", "worked_table", "board_table", "sweep_table", "weight_table", "variants_table",
           "describe_hot_first_block", "history_table", "md_table", "boxed", "state_rows", "rules_in_words",
           "board_label", "trace_label", "ARCH_LABELS", "PERCENT", "PARAMETER_SYMBOLS", "STACKS", "stacks_table",
           "stacks_sources", "transfer_rates", "describe_transfer_rates"]

#: Router → (system, what it implements, source file @ commit — notebooks/routers.md, "Sources").
ROUTER_INFO = {
    "dynamo": ("NVIDIA Dynamo", "KV router, cost = prefill blocks after overlap credit + decode blocks",
               "lib/kv-router/src/scheduling/selector/default.rs @ 07a6c9ce"),
    "sglang": ("SGLang model gateway", "cache_aware: balance when imbalanced, else longest router-tree match",
               "sgl-model-gateway/src/policies/cache_aware.rs @ b93974f1"),
    "llmd": ("llm-d router", "weighted scorers: prefix 3, queue 2, KV utilisation 2 (P/D: prefix 2, queue 1)",
             "pkg/epp/config/loader/defaults.go, deploy/config/pd-epp-config.yaml @ ebab6879"),
    "prodstack_rr": ("vLLM production-stack", "roundrobin", "src/vllm_router/routers/routing_logic.py @ a6c01db0"),
    "prodstack_prefix": ("vLLM production-stack", "prefixaware: longest match in a router trie, no eviction",
                         "src/vllm_router/prefix/hashtrie.py @ a6c01db0"),
    "prodstack_kv": ("vLLM production-stack", "kvaware: LMCache controller's longest prefix, else lowest QPS",
                     "src/vllm_router/routers/routing_logic.py @ a6c01db0"),
    "aibrix": ("AIBrix", "prefix-cache router: match among the least loaded, bounded by mean + σ (P/D: the PD "
               "router, argmin (100 − match %)·0.1 + n/max n within mean + σ)",
               "pkg/plugins/gateway/algorithms/prefix_cache.go @ e3e10f9e; P/D: pd_disaggregation.go @ 01692761"),
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


def _speed(trace, stress: str, speed, where: str = "l09.run") -> float:
    """The replay speed: ``speed`` if given (a factor > 0), else the stress level's for a trace named in
    :data:`~.l04_scheduling.TRACES` (a Trace object without ``speed``: as recorded, 1×)."""
    if speed is not None:
        return real(speed, "speed", lo=0.0, lo_open=True, where=where)
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


def _names(values, field: str, allowed, where: str) -> list:
    """``values`` (a non-empty list, not one string) as a list, each one of ``allowed``."""
    return [choice(v, f"{field}[{i}]", allowed, where) for i, v in enumerate(items(values, field, where=where))]


def _result(res, where: str) -> "sim.SimResult":
    """``res`` if it is a run (a SimResult, or anything with its ``arrays`` and ``config``), else an InputError."""
    if not (isinstance(res, sim.SimResult) or (hasattr(res, "arrays") and hasattr(res, "config"))):
        raise fail("res", type(res).__name__, "a SimResult: a run such as l09.run('conversation', 'dynamo')", where)
    return res


def run(trace: Trace | str = "conversation", policy: str = "dynamo", arch: str = "disaggregated",
        stress: str = "lecture 04", router: RouterConfig | None = None, speed: float | None = None,
        **overrides) -> sim.SimResult:
    """One memoised run of :func:`cluster` on ``trace`` at the stress level's replay speed (or ``speed``)."""
    cfg = cluster(policy, arch, stress, router, **overrides)
    return simulate_all([(trace, _speed(trace, stress, speed), cfg)])[0]


def load_imbalance(res: sim.SimResult) -> float:
    """Prompt tokens computed by the busiest instance / the mean over instances (1 = even)."""
    a = _result(res, "l09.load_imbalance").arrays
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


#: Leaderboard rows by run (:func:`common.memo_key`), oldest first: a row is a few numbers, so a board read
#: again (a re-run cell, the lecture's figure) needs no simulation even after the run cache (≈ 100 whole
#: runs, fewer than the 96 of :func:`leaderboards` plus the sweeps) dropped its runs. Each entry keeps its
#: trace, so the key's trace id stays unique.
_ROWS: "OrderedDict[tuple, tuple]" = OrderedDict()
_MAX_ROWS = 4096


def _rows(jobs) -> list:
    """:func:`_row` of each ``(trace, speed, config)`` job, simulating (in one batch) only the runs whose
    row is not known yet."""
    keys = [memo_key(tr, speed, cfg) for tr, speed, cfg in jobs]
    todo = {k: job for k, job in zip(keys, jobs) if not (k in _ROWS and _ROWS[k][0] is job[0])}
    for k, res in zip(todo, simulate_all(list(todo.values()))):
        _ROWS[k] = (todo[k][0], _row(res))
        while len(_ROWS) > _MAX_ROWS:
            _ROWS.popitem(last=False)
    for k in keys:
        _ROWS.move_to_end(k)
    return [dict(_ROWS[k][1]) for k in keys]


def _board(names, rows) -> pd.DataFrame:
    df = pd.DataFrame([{"policy": p, "kind": "router" if p in ROUTERS else "Conductor", **r}
                       for p, r in zip(names, rows)]).set_index("policy")
    return df.sort_values(["slo_attainment", "ttft_mean_s"], ascending=[False, True], kind="stable")


def leaderboard(trace: Trace | str = "conversation", arch: str = "disaggregated", stress: str = "lecture 04",
                policies=None, speed: float | None = None) -> pd.DataFrame:
    """One row per policy (default: the eight routers and the Conductor's four), best SLO attainment
    first (ties: lower mean TTFT). ``kind``: router or Conductor."""
    _check(arch, stress, "l09.leaderboard")
    names = (list(ROUTERS) + list(CONDUCTOR) if policies is None
             else _names(policies, "policies", (*ROUTERS, *CONDUCTOR), "l09.leaderboard"))
    tr, speed = _trace(trace), _speed(trace, stress, speed, "l09.leaderboard")
    return _board(names, _rows([(tr, speed, cluster(p, arch, stress)) for p in names]))


def knowledge_cost(trace: Trace | str = "conversation", arch: str = "disaggregated", stress: str = "lecture 04",
                   routers=None, speed: float | None = None) -> pd.DataFrame:
    """Each router (default: those that match prefixes) with the true caches and with its own history:
    hit ratio and mean TTFT under both, what the belief costs (TTFT ratio believed / true), and the share of
    the belief run's requests sent to an instance believed to hold more of their prefix than it did
    (:func:`belief_audit`'s ``stale_share``)."""
    _check(arch, stress, "l09.knowledge_cost")
    names = [r for r in ROUTERS if r != "prodstack_rr"] if routers is None else _names(routers, "routers", ROUTERS,
                                                                                        "l09.knowledge_cost")
    tr, speed = _trace(trace), _speed(trace, stress, speed, "l09.knowledge_cost")
    jobs = [(tr, speed, cluster(r, arch, stress, RouterConfig(knowledge=k))) for r in names for k in ("true", "belief")]
    runs = simulate_all(jobs)
    rows = []
    for k, r in enumerate(names):
        t, b = runs[2 * k].summary(), runs[2 * k + 1].summary()
        rows.append({"router": r, "default": SYSTEM_DEFAULTS[r][0],
                     "hit_ratio_true": t["hit_ratio"], "hit_ratio_belief": b["hit_ratio"],
                     "ttft_mean_true_s": t["ttft_mean_s"], "ttft_mean_belief_s": b["ttft_mean_s"],
                     "ttft_ratio": b["ttft_mean_s"] / t["ttft_mean_s"] if t["ttft_mean_s"] > 0 else float("nan"),
                     "stale_share_belief": belief_audit(runs[2 * k + 1])["stale_share"]})
    return pd.DataFrame(rows).set_index("router")


def decode_rules() -> dict:
    """Decode choice (:data:`~mooncake_lab.sim.routers.DECODE_CHOICES`) → what it does on the pools, in words,
    with RouterConfig's defaults (rules and sources: :mod:`mooncake_lab.sim.routers`)."""
    rc = RouterConfig()
    return {
        "least_kv": "least KV held + queued (Mooncake's Algorithm 1 line 24; Dynamo's load-only decode router)",
        "least_requests": "fewest running + queued + bound in flight (the deprecated select_worker_pair's least "
                          "load; SGLang's PD router now runs its decode policy, cache_aware by default)",
        "round_robin": "round robin over the decode nodes (production-stack's orchestrated P/D)",
        "least_queued": "fewest waiting (llm-d's decode profile, prefix 2 + queue 1, with the prefix score 0: "
                        "our decode nodes keep no prefix cache, where llm-d's router-side LRU would list what it "
                        "sent to each decode pod); ties at random",
        "aibrix_pd": (f"AIBrix's PD router: an idle node or a running spread ≥ {rc.aibrix_decode_max_request:g} → "
                      f"the least running; a throughput spread > {rc.aibrix_decode_max_throughput:g} tok/s → the "
                      "slowest; else argmin (running/max + 1 − tok/s / max) / (free KV % / max)"),
    }


def router_table() -> pd.DataFrame:
    """What each router is: system, rule, source, default knowledge, belief capacity and TTL (used when it
    runs on its belief), statistics window, and the decode node it picks on the pools (``decode_choice`` and
    :func:`decode_rules`' words)."""
    rows = []
    words = decode_rules()
    for r, (system, rule, src) in ROUTER_INFO.items():
        kn, cap, ttl, win, dc = SYSTEM_DEFAULTS[r]
        rows.append({"router": r, "system": system, "rule": rule, "source": src, "knowledge": kn,
                     "belief_blocks": "the instance's cache" if cap is None else ("unbounded" if cap == 0 else cap),
                     "belief_ttl_s": ttl, "window_s": win, "decode_choice": dc, "decode_rule": words[dc]})
    return pd.DataFrame(rows).set_index("router")


def parameter_table() -> pd.DataFrame:
    """Every :class:`RouterConfig` field with its default; where the default is the system's own (``None``),
    what it resolves to (per router: :func:`router_table`; llm-d's weights: per architecture)."""
    rc = RouterConfig()
    pools, coupled = rc.resolve("llmd", True, 1, BLOCK_TOKENS), rc.resolve("llmd", False, 1, BLOCK_TOKENS)
    llmd = {"llmd_prefix_weight": "llmd_w_prefix", "llmd_queue_weight": "llmd_w_queue", "llmd_kv_weight": "llmd_w_kv"}
    rows = []
    for f in dataclasses.fields(rc):
        v = getattr(rc, f.name)
        if v is None and f.name in llmd:
            v = f"{getattr(coupled, llmd[f.name]):g} coupled, {getattr(pools, llmd[f.name]):g} on the pools"
        elif v is None:
            v = "each router's own (the tables of §1)"
        rows.append({"parameter": f.name, "default": v})
    return pd.DataFrame(rows).set_index("parameter")


# ------------------------------------------------------------------ the worked request
#: One request and four coupled instances, set by hand so the rules disagree (tokens, requests, s).
#: The instances' fields are :class:`~mooncake_lab.sim.routers.RouterInputs`'; L = 4,096 tokens = 8 blocks.
WORKED_STATE = {
    "matched_blocks": (6, 2, 0, 6), "tree_blocks": (900, 400, 100, 1200),
    "pending_tokens": (6000.0, 1000.0, 0.0, 30000.0), "live_kv_tokens": (150_000.0, 60_000.0, 20_000.0, 200_000.0),
    "inflight": (10, 3, 1, 14), "queued": (4, 0, 0, 6), "recent_requests": (30, 12, 5, 8),
    "recent_prefill_s": (12.0, 3.0, 1.0, 20.0),
    # when block m − 1 entered the router's view of the instance (s; 0 with no match): SGLang's tie-break
    # between the two deepest (instances 0 and 3) goes to instance 0, whose block 5 is older (60 s < 180 s)
    "deepest_entered": (60.0, 90.0, 0.0, 180.0)}
#: The request and the router's scalars: prompt tokens, blocks, its U[0, 1) draw, decisions so far,
#: an instance's KV tokens (utilisation).
WORKED_REQUEST = {"L": 4096, "n_blocks": 8, "u": 0.3, "rr": 5, "kv_cap": 250_000.0}
_BT = BLOCK_TOKENS   # tokens per block (the traces' block size)


def worked_inputs(state: dict | None = None) -> "RouterInputs":
    """:data:`WORKED_STATE` (or ``state``, the same keys) as the kernel's :class:`RouterInputs`."""
    from ..sim.routers import RouterInputs

    state = WORKED_STATE if state is None else state
    if not isinstance(state, dict) or set(state) != set(RouterInputs._fields):
        raise fail("state", state, f"a dict with exactly the keys {', '.join(RouterInputs._fields)}",
                   "l09.worked_inputs")
    n = {len(v) for v in state.values()}
    if len(n) != 1 or n == {0}:
        raise fail("state", {k: len(v) for k, v in state.items()}, "one value per instance, the same number (≥ 1) "
                   "in every field", "l09.worked_inputs")
    ints = {"matched_blocks", "tree_blocks", "inflight", "queued", "recent_requests"}
    from ..validate import int_array, real_array
    return RouterInputs(*(int_array(state[f], f, lo=0, where="l09.worked_inputs") if f in ints else
                          real_array(state[f], f, lo=0.0, where="l09.worked_inputs").astype(np.float64)
                          for f in RouterInputs._fields))


def worked_request(state: dict | None = None, request: dict | None = None) -> pd.DataFrame:
    """Each router on one request (:data:`WORKED_REQUEST`) and a hand-set state (:data:`WORKED_STATE`):
    per instance the numbers its rule compares (:func:`~mooncake_lab.sim.routers_reference.rule_scores`,
    the functions the rules use), its choice by the plain-Python rule and by the compiled ``route``
    (they must agree). Coupled engine (``pd=False``), system defaults."""
    from ..sim.routers import route
    from ..sim.routers_reference import route_reference, rule_scores

    ri = worked_inputs(state)
    q = dict(WORKED_REQUEST if request is None else request)
    if set(q) != set(WORKED_REQUEST):
        raise fail("request", q, f"a dict with the keys {', '.join(WORKED_REQUEST)}", "l09.worked_request")
    from ..validate import integer, real
    L = integer(q["L"], "L", lo=1, hi=10 ** 7, where="l09.worked_request")
    nb = integer(q["n_blocks"], "n_blocks", lo=-(-L // _BT), hi=-(-L // _BT), where="l09.worked_request")
    u = real(q["u"], "u", lo=0.0, hi=1.0, hi_open=True, where="l09.worked_request")
    rr = integer(q["rr"], "rr", lo=0, where="l09.worked_request")
    kv = real(q["kv_cap"], "kv_cap", lo=0.0, lo_open=True, where="l09.worked_request")
    n = len(ri.inflight)
    rows = []
    for name in ROUTERS:
        rp = RouterConfig().resolve(name, False, 10 ** 6, _BT)
        ref = route_reference(rp, ri, L, nb, _BT, u, rr, kv)
        jit = int(route(rp, ri, L, nb, _BT, u, rr, kv))
        if ref != jit:
            raise RuntimeError(f"l09.worked_request: {name}: route {jit} != route_reference {ref}")
        sc = rule_scores(rp, ri, L, nb, _BT, kv)
        row = {"router": name, "compares": ", ".join(sc) if sc else "rr mod N"}
        for i in range(n):
            row[f"i{i}"] = " / ".join(f"{v[i]:.3g}" if isinstance(v[i], float) else f"{v[i]}" for v in sc.values()) \
                if sc else ("←" if i == rr % n else "")
        rows.append({**row, "choice": ref, "route (numba)": jit})
    return pd.DataFrame(rows).set_index("router")


def describe_worked(table: pd.DataFrame) -> str:
    """Markdown: which instance each router picks in :func:`worked_request` and the groups that agree."""
    groups = {}
    for r, c in table["choice"].items():
        groups.setdefault(int(c), []).append(r)
    parts = [f"instance {i}: {', '.join(f'`{r}`' for r in rs)}" for i, rs in sorted(groups.items())]
    same = bool((table["choice"] == table["route (numba)"]).all())
    return (f"The eight routers pick {len(groups)} different instances for the same request — " + "; ".join(parts)
            + f". The compiled `route` {'agrees with' if same else 'DISAGREES with'} the plain-Python rule on every router.")



# ------------------------------------------------------------------ exercise 1: the worked state, changed
#: Exercise 1's change to :data:`WORKED_STATE` (field → {instance: new value}): instance 1 now holds 7 of the
#: prompt's 8 blocks (2 in the worked state). Chosen so that the worked table does not hold the answer: SGLang,
#: which follows the deepest match in a balanced cluster, moves to instance 1; AIBrix, whose spread test keeps
#: only the least loaded instance as a candidate, does not move (tests/test_lecture09.py checks both against
#: the worked table, so the exercise stays a question if a rule changes).
EXERCISE_CHANGE = {"matched_blocks": {1: 7}}
#: The routers exercise 1 asks about, in the order of its questions (1a, 1b).
EXERCISE_ROUTERS = ("sglang", "aibrix")
#: The routers :func:`explain_choice` walks through.
EXPLAINED = ("sglang", "aibrix")


def changed_state(change: dict | None = None, state: dict | None = None) -> dict:
    """``state`` (default :data:`WORKED_STATE`) with ``change`` (default :data:`EXERCISE_CHANGE`: field →
    {instance: new value}) applied; a new dict of tuples, ``state`` is left as it was."""
    state = WORKED_STATE if state is None else state
    change = EXERCISE_CHANGE if change is None else change
    worked_inputs(state)   # validates the state
    if not isinstance(change, dict) or not change:
        raise fail("change", change, "a non-empty dict: field → {instance: new value}", "l09.changed_state")
    out = {k: list(v) for k, v in state.items()}
    n = len(next(iter(out.values())))
    for f, values in change.items():
        if f not in out:
            raise fail("change", f, f"a field of the state: {', '.join(out)}", "l09.changed_state")
        if not isinstance(values, dict) or not values:
            raise fail(f"change[{f!r}]", values, "a non-empty dict: instance → new value", "l09.changed_state")
        for i, v in values.items():
            if isinstance(i, bool) or not isinstance(i, (int, np.integer)) or not 0 <= i < n:
                raise fail(f"change[{f!r}]", i, f"an instance 0 … {n - 1}", "l09.changed_state")
            out[f][int(i)] = v
    out = {k: tuple(v) for k, v in out.items()}
    worked_inputs(out)     # validates the new values
    return out


def state_change(change: dict | None = None, state: dict | None = None) -> pd.DataFrame:
    """One row per number :func:`changed_state` changes: field (labelled as :func:`state_table` labels it),
    instance, the value in ``state`` (default :data:`WORKED_STATE`, §2's) and the value now."""
    state = WORKED_STATE if state is None else state
    new = changed_state(change, state)
    rows = [{"field": STATE_LABELS.get(f, f), "instance": i, "in §2": state[f][i], "now": new[f][i]}
            for f in state for i in range(len(state[f])) if new[f][i] != state[f][i]]
    return pd.DataFrame(rows, columns=["field", "instance", "in §2", "now"]).set_index(["field", "instance"])


def _num(x) -> str:
    """A number as the feedback prints it: whole numbers with thousands commas, others to 4 digits."""
    x = x.item() if hasattr(x, "item") else x
    if isinstance(x, float) and not x.is_integer():
        return f"{x:.4g}"
    return f"{int(x):,}"


def _vec(xs) -> str:
    return "(" + ", ".join(_num(x) for x in xs) + ")"


def _set(xs) -> str:
    return "{" + ", ".join(str(i) for i in xs) + "}"


def _sglang_steps(rp, r, sc, L) -> tuple[list, int, object]:
    """SGLang's rule on lists ``r`` (rule_scores ``sc``): (the steps in words with their numbers — the first
    decides the branch —, the instance, and a function of an instance saying why the rule does not take it)."""
    from ..sim.routers_reference import _hit, sglang_imbalanced

    n, m, rate, entered = sc["inflight"], list(r.matched_blocks), sc["match_rate"], sc["deepest_entered"]
    hi, lo = max(n), min(n)
    least = n.index(lo)
    imbalanced = sglang_imbalanced(rp, n)
    above = lambda yes: "above" if yes else "not above"   # noqa: E731
    test = (f"in flight n = {_vec(n)}: max n − min n = {_num(hi)} − {_num(lo)} = {_num(hi - lo)} is "
            f"{above(hi - lo > rp.sglang_abs)} abs = {_num(rp.sglang_abs)} and max n = {_num(hi)} is "
            f"{above(hi > rp.sglang_rel * lo)} rel · min n = {_num(rp.sglang_rel)} × {_num(lo)} = "
            f"{_num(rp.sglang_rel * lo)}; ")
    if imbalanced:
        steps = [test + "both hold, so the cluster is imbalanced and SGLang takes the least loaded",
                 f"argmin n → instance {least} (n = {_num(lo)})"]
        return steps, least, lambda g: (f"instance {g} is not the least loaded: n_{g} = {_num(n[g])} > "
                                        f"min n = {_num(lo)}")
    k = max(m)
    deepest = [i for i in range(len(m)) if m[i] == k]
    b = min(deepest, key=lambda i: (entered[i], i))
    steps = [test + (f"imbalanced needs both, so the cluster is balanced and SGLang follows the deepest match if its "
                     f"match rate h/L is above the threshold {_num(rp.sglang_threshold)}"),
             f"m = {_vec(m)}: the deepest is {_num(k)} blocks, on "
             + (f"instances {_set(deepest)}" if len(deepest) > 1 else f"instance {b} alone")
             + (f" (a tie: the tree's last_tenant, the first to store the prefix, instance {b} — its deepest block "
                f"entered at {_num(entered[b])} s)" if len(deepest) > 1 else ""),
             f"instance {b}'s match rate h/L = {_num(_hit(m[b], _BT, L))} / {_num(L)} = {_num(rate[b])} is "
             f"{above(rate[b] > rp.sglang_threshold)} the threshold"]
    if rate[b] > rp.sglang_threshold:
        steps[-1] += f" → instance {b}"

        def why(g):
            if m[g] < k:
                return (f"instance {g} matches m_{g} = {_num(m[g])} blocks, fewer than the deepest match "
                        f"({_num(k)} blocks, held elsewhere)")
            return (f"instance {g} ties at the deepest match but stored the prefix later "
                    f"(its deepest block entered at {_num(entered[g])} s, the first holder's at "
                    f"{_num(entered[b])} s)")
        return steps, b, why
    steps[-1] += f", too little to follow: argmin n → instance {least} (n = {_num(lo)})"
    return steps, least, lambda g: (f"the deepest match covers too little of the prompt, and instance {g} is not the "
                                    f"least loaded: n_{g} = {_num(n[g])} (min n = {_num(lo)})")


def _aibrix_steps(rp, r, sc, u) -> tuple[list, int, object]:
    """AIBrix's routeOriginal on lists ``r`` (rule_scores ``sc``), as :func:`_sglang_steps`."""
    n, m, bound = sc["inflight"], sc["matched_blocks"], sc["bound"][0]
    N, hi, lo = len(n), max(n), min(n)
    least = n.index(lo)
    restrict = hi - lo > rp.aibrix_abs
    cand = [i for i in range(N) if n[i] == lo] if restrict else list(range(N))
    steps = [f"in flight n = {_vec(n)}: max n − min n = {_num(hi)} − {_num(lo)} = {_num(hi - lo)} is "
             f"{'above' if restrict else 'not above'} abs = {_num(rp.aibrix_abs)}, so the candidates are "
             + (f"only the least loaded, C = {_set(cand)}" if restrict else f"all the instances, C = {_set(cand)}")]
    if not any(m[i] > 0 for i in cand):
        outside = [i for i in range(N) if i not in cand and m[i] > 0]
        steps.append(f"no candidate matches the prompt ({', '.join(f'm_{i} = {_num(m[i])}' for i in cand)}), so "
                     f"argmin n → instance {least}"
                     + (f"; the matches outside C ({', '.join(f'm_{i} = {_num(m[i])}' for i in outside)}) never count"
                        if outside else ""))

        def why(g):
            if g not in cand:
                return (f"instance {g} is not a candidate: n_{g} = {_num(n[g])} > min n = {_num(lo)}, so its match "
                        f"(m_{g} = {_num(m[g])}) is never looked at")
            return (f"no candidate matches, and instance {g} is not the first least loaded: n_{g} = {_num(n[g])} "
                    f"(min n = {_num(lo)})")
        return steps, least, why
    s = min(math.floor(u * N), N - 1)
    order = sorted(cand, key=lambda i: (-m[i], n[i], (i - s) % N))
    mu = sum(n) / N
    sd = (bound - mu) / rp.aibrix_k if rp.aibrix_k else 0.0
    within = [i for i in order if n[i] <= bound]
    pick = within[0] if within else least
    steps.append(f"in the order m descending, n ascending: "
                 f"{', '.join(f'{i} (m = {_num(m[i])}, n = {_num(n[i])})' for i in order)}; the load bound mean n + "
                 f"k_σ·σ(n) = {_num(mu)} + {_num(rp.aibrix_k)} × {_num(sd)} = {_num(bound)}")
    steps.append(f"the first within the bound → instance {pick}" if within else
                 f"none within the bound: argmin n → instance {least}")

    def why(g):
        if g not in cand:
            return f"instance {g} is not a candidate: n_{g} = {_num(n[g])} > min n = {_num(lo)}"
        if n[g] > bound:
            return (f"instance {g} is above the load bound: n_{g} = {_num(n[g])} > mean n + k_σ·σ(n) = "
                    f"{_num(bound)}")
        return (f"instance {g} (m_{g} = {_num(m[g])}, n_{g} = {_num(n[g])}) comes after another candidate within the "
                f"load bound (m descending, n ascending)")
    return steps, pick, why


def explain_choice(router: str, state: dict | None = None, request: dict | None = None, given=None) -> str:
    """Markdown: ``router``'s one-line rule (one of :data:`EXPLAINED`) applied step by step to ``state``
    (default :data:`WORKED_STATE`) and ``request`` (default :data:`WORKED_REQUEST`), each term with its number
    from :func:`~mooncake_lab.sim.routers_reference.rule_scores` (the functions the rule uses), ending with the
    instance it picks — which must be :func:`worked_request`'s choice (the plain-Python rule and the compiled
    ``route``). With ``given`` (an instance the rule does not pick): the test that decides the branch and why
    ``given`` loses, without naming the winner."""
    from ..sim.routers_reference import rule_scores, _as_lists

    choice(router, "router", EXPLAINED, "l09.explain_choice")
    table = worked_request(state, request)
    picked = int(table.loc[router, "choice"])
    ri, q = worked_inputs(state), dict(WORKED_REQUEST if request is None else request)
    r = _as_lists(ri)
    rp = RouterConfig().resolve(router, False, 10 ** 6, _BT)
    sc = rule_scores(rp, ri, q["L"], q["n_blocks"], _BT, q["kv_cap"])
    if router == "sglang":
        steps, mine, why = _sglang_steps(rp, r, sc, int(q["L"]))
    else:
        steps, mine, why = _aibrix_steps(rp, r, sc, float(q["u"]))
    if mine != picked:
        raise RuntimeError(f"l09.explain_choice: {router}: the steps give instance {mine}, the rule {picked}")
    name = f"`{router}`"
    N = len(r.inflight)
    g = given.item() if isinstance(given, np.generic) or (isinstance(given, np.ndarray) and given.size == 1) else given
    if g is not None and (isinstance(g, bool) or not isinstance(g, (int, float))):
        raise fail("given", given, f"None or one instance, a number 0 … {N - 1}", "l09.explain_choice")
    if g is None or g == picked:
        return f"{name}: " + "; ".join(steps) + "."
    if not math.isfinite(g) or g != int(g) or not 0 <= g < N:   # a student's answer (check): feedback, not an error
        return f"The instances are numbered 0 to {N - 1}: give one of them."
    g = int(g)
    worked = int(worked_request(None, request).loc[router, "choice"]) if state is not None else None
    copied = (f" Instance {g} is the worked table's choice, but this state differs from the worked one."
              if worked is not None and g == worked and worked != picked else "")
    reason = why(g)
    return f"{name}: " + steps[0] + f". {reason[0].upper()}{reason[1:]}." + copied


# ------------------------------------------------------------------ what a stale belief costs
def belief_audit(res: sim.SimResult) -> dict:
    """Replay a run's routing decisions through the router's belief (what it sent where, with the run's
    capacity and TTL, by the kernel's own :func:`~mooncake_lab.sim.routers.belief_match` /
    :func:`~mooncake_lab.sim.routers.belief_insert`) and compare, per request, the blocks the router
    believed its chosen instance held with what that instance's cache really gave. Keys: ``stale_share``
    (requests whose believed prefix exceeded the true one: sent to evicted or never-held blocks),
    ``under_share`` (believed less than the instance held: a belief that forgot), ``missed_tokens_share``
    (believed-but-recomputed tokens / prompt tokens), ``believed_hit_ratio`` and ``true_hit_ratio``
    (fractions of prompt tokens). Reused tokens follow the engines' rule (at least one token is computed)."""
    from ..prefix_cache import new_cache_state
    from ..sim.reference import _reusable_tokens
    from ..sim.routers import belief_insert, belief_match

    w = "l09.belief_audit"
    policy = _result(res, w).config.prefill_policy
    if not (isinstance(policy, str) and policy in ROUTERS):
        raise fail("res.config.prefill_policy", res.config.policy_name,
                   f"a router ({', '.join(map(repr, ROUTERS))}): this run has no router, so no belief to audit. Make "
                   f"one with l09.run(trace, 'sglang', arch, router=RouterConfig(knowledge='belief'))", w)
    rp = res.config.resolve().router
    if not rp.belief:
        raise fail("res.config.router.knowledge", "true", f"'belief': this {policy!r} run matched the true caches "
                   f"and kept no belief to audit. Run it with router=RouterConfig(knowledge='belief')", w)
    tr, a = res.trace, res.arrays
    n = res.config.n_prefill_instances
    st = new_cache_state(n, tr.n_blocks, rp.belief_capacity or tr.n_blocks)   # 0 = unbounded
    ttl = float(rp.belief_ttl)
    touched = np.zeros((n, tr.n_blocks if ttl < math.inf else 1))
    off, ids = tr.block_offsets, tr.block_ids
    believed = np.zeros(len(tr))
    for j in np.argsort(tr.arrival_s, kind="stable"):
        f = int(a["prefill_inst"][j])
        if f < 0:
            continue
        blocks, t = ids[off[j]:off[j + 1]], float(tr.arrival_s[j])
        believed[j] = _reusable_tokens(int(belief_match(st.last_use, touched, f, blocks, t, ttl)),
                                       int(tr.input_len[j]), _BT)
        belief_insert(st.last_use, st.q_block, st.q_stamp, st.meta, touched, f, blocks, t, ttl)
    ok = a["prefill_inst"] >= 0
    true = a["cached_tok"].astype(float)
    total = float(tr.input_len[ok].sum())
    return {"stale_share": float((believed[ok] > true[ok]).mean()),
            "under_share": float((believed[ok] < true[ok]).mean()),
            "missed_tokens_share": float(np.maximum(believed[ok] - true[ok], 0).sum() / total),
            "believed_hit_ratio": float(believed[ok].sum() / total), "true_hit_ratio": float(true[ok].sum() / total)}


#: Belief capacities of the sweep (512-token blocks per instance; 0 = unbounded) — SGLang's default
#: max_tree_size is 2^26 chars ≈ 32,768 blocks (SYSTEM_DEFAULTS).
BELIEF_CAPACITIES = (64, 256, 1024, 4096, 32768, 0)   # includes SWEEP_CACHE_BLOCKS


#: The true cache of the belief sweep (512-token blocks per instance): small enough that the instances
#: evict on the conversation trace (the node's default DRAM cache holds about all an instance is sent),
#: so a belief larger than it goes stale.
SWEEP_CACHE_BLOCKS = 1024


def belief_sweep(router: str = "sglang", capacities=BELIEF_CAPACITIES, trace: Trace | str = "conversation",
                 arch: str = "coupled", stress: str = "lecture 04", cache_blocks: int | None = None) -> pd.DataFrame:
    """``router`` with its belief capped at each of ``capacities`` (blocks per instance; 0 = unbounded),
    and with the true caches: SLO attainment, mean TTFT, hit ratio, and :func:`belief_audit`'s stale
    share. Row ``"true"``: KV events (knowledge = true). ``cache_blocks``: the instances' true cache
    (blocks; ``None`` = the node's default)."""
    _check(arch, stress, "l09.belief_sweep")
    choice(router, "router", [r for r in ROUTERS if r != "prodstack_rr"], "l09.belief_sweep")
    from ..validate import int_array, integer
    caps = [int(c) for c in int_array(capacities, "capacities", lo=0, hi=2 ** 40, where="l09.belief_sweep")]
    if not caps:
        raise fail("capacities", capacities, "at least one capacity (blocks, 0 = unbounded)", "l09.belief_sweep")
    over = {} if cache_blocks is None else {
        "cache_capacity_blocks": integer(cache_blocks, "cache_blocks", lo=1, hi=2 ** 40, where="l09.belief_sweep")}
    tr, speed = _trace(trace), _speed(trace, stress, None)
    cfgs = [cluster(router, arch, stress, RouterConfig(knowledge="belief", belief_capacity_blocks=c), **over)
            for c in caps]
    cfgs.append(cluster(router, arch, stress, RouterConfig(knowledge="true"), **over))
    runs = simulate_all([(tr, speed, c) for c in cfgs])
    cache = cfgs[0].resolve().cache_capacity_blocks
    rows = []
    for c, r in zip([*caps, "true"], runs):
        s = r.summary()
        audit = belief_audit(r) if c != "true" else {"stale_share": 0.0, "missed_tokens_share": 0.0}
        rows.append({"belief_blocks": c, "slo_attainment": s["slo_attainment"], "ttft_mean_s": s["ttft_mean_s"],
                     "hit_ratio": s["hit_ratio"], "stale_share": audit["stale_share"],
                     "missed_tokens_share": audit["missed_tokens_share"], "cache_blocks": cache})
    return pd.DataFrame(rows).set_index("belief_blocks")


def describe_belief_sweep(sweep: pd.DataFrame) -> str:
    """Markdown: what :func:`belief_sweep` shows — hit ratio below the cache size, stale share above it,
    and whether the belief of exactly the cache's size matched the true-cache run (short sentences)."""
    caps = [c for c in sweep.index if c != "true"]
    cache = int(sweep.cache_blocks.iloc[0])
    big = [c for c in caps if c == 0 or c > cache]
    small = [c for c in caps if 0 < c < cache]
    true = sweep.loc["true"]

    def stale(c):
        x = 100 * sweep.loc[c, "stale_share"]
        return "no request to an evicted prefix" if x == 0 else f"{x:.1f} % of the requests to an evicted prefix"

    out = [f"The instances cache {cache:,} blocks each."]
    if small:
        c = min(small)
        out.append(f"A belief of {c:,} blocks reaches a hit ratio of {sweep.loc[c, 'hit_ratio']:.3f}, against "
                   f"{true.hit_ratio:.3f} with the true cache; it sends {stale(c)}.")
    if big:
        c = big[-1]
        out.append(f"A belief {'without a bound' if c == 0 else f'of {c:,} blocks'} sends {stale(c)}: "
                   f"{100 * sweep.loc[c, 'missed_tokens_share']:.1f} % of all prompt tokens were believed cached and "
                   f"recomputed.")
    if cache in caps:
        same = bool(np.isclose(sweep.loc[cache, ["slo_attainment", "ttft_mean_s", "hit_ratio"]].astype(float),
                               true[["slo_attainment", "ttft_mean_s", "hit_ratio"]].astype(float)).all())
        out.append(f"A belief of exactly the cache's {cache:,} blocks {'matches' if same else 'does not match'} the "
                   "true-cache run.")
    return " ".join(out)


# ------------------------------------------------------------------ all leaderboards at once
#: The lecture's traces (lecture 04's: the released conversation trace and the toolagent-like stand-in).
TRACES = tuple(l04.TRACES)


def leaderboards(traces=TRACES, archs=tuple(ARCHITECTURES), stresses=tuple(STRESS)) -> dict:
    """``{(trace, arch, stress): leaderboard}`` for every combination; all runs go in one parallel batch."""
    w = "l09.leaderboards"
    combos = [(t, a, s) for s in items(stresses, "stresses", where=w) for a in items(archs, "archs", where=w)
              for t in items(traces, "traces", where=w)]
    for t, a, s in combos:
        _check(a, s, "l09.leaderboards")
    names = list(ROUTERS) + list(CONDUCTOR)
    rows = _rows([(_trace(t), _speed(t, s, None), cluster(p, a, s)) for t, a, s in combos for p in names])
    n = len(names)
    return {k: _board(names, rows[i * n:(i + 1) * n]) for i, k in enumerate(combos)}


def _best(df: pd.DataFrame) -> str:
    return f"`{df.index[0]}` ({df.slo_attainment.iloc[0]:.3f})"


#: Below this best SLO attainment a board's order is noise (every policy fails nearly every request).
NOISE_SLO = 0.2


def _board_name(key) -> str:
    return board_label(key)


def describe_leaderboards(boards: dict) -> str:
    """Markdown: a table with per board the winner, the best router, the Conductor's kvcentric and
    cache_aware, and the most uneven policy; then one short sentence per board whose order is noise
    (best SLO attainment under :data:`NOISE_SLO`) and per coupled board lighter at lecture 07's stress."""
    rows, full, noise, lighter = [], [], [], []
    for (t, a, s), df in boards.items():
        routers = df[df.kind == "router"]
        worst = df.load_imbalance.idxmax()
        rows.append(f"| {_board_name((t, a, s))} | {_best(df)} | {_best(routers)} |")
        full.append(f"| {_board_name((t, a, s))} | {df.loc['kvcentric', 'slo_attainment']:.3f} | "
                    f"{df.loc['cache_aware', 'slo_attainment']:.3f} | `{worst}` ({df.loc[worst, 'load_imbalance']:.2f}) |")
        if df.slo_attainment.max() < NOISE_SLO:
            noise.append(f"{_board_name((t, a, s))} (best {df.slo_attainment.max():.3f})")
        other = next((boards[k] for k in boards if k[:2] == (t, a) and k[2] != s), None)
        if a == "coupled" and s == "lecture 07" and other is not None \
                and df.slo_attainment.max() > other.slo_attainment.max():
            lighter.append(f"{trace_label(t)} (best {df.slo_attainment.max():.3f} against "
                           f"{other.slo_attainment.max():.3f})")
    out = ("**The winners of each board** (SLO attainment in brackets)\n\n"
           "| board: trace, architecture, stress | first | best router |\n|:---|:---|:---|\n" + "\n".join(rows))
    out += "\n\n" + boxed("The Conductor's two cache policies and the most uneven policy of each board",
                          "| board | `kvcentric` | `cache_aware` | most uneven (load imbalance) |\n|:---|---:|---:|:---|\n"
                          + "\n".join(full))
    if noise:
        out += (f"\n\nNo policy keeps even a fifth of the requests within the SLOs on {'; '.join(noise)}. "
                "There the order of the board is noise.")
    if lighter:
        out += (f"\n\nCoupled nodes are lighter at lecture 07's stress than at lecture 04's on "
                f"{'; '.join(lighter)}. Lecture 07's nodes are faster, and that gains more than its faster replay costs.")
    return out


def hot_first_block(trace: Trace | str = "conversation") -> dict:
    """How many of the trace's prompts start with its most common first block (why "longest match, no
    load term" can send everything to one instance)."""
    tr = _trace(trace)
    first = tr.block_ids[tr.block_offsets[:-1]]
    vals, counts = np.unique(first, return_counts=True)
    return {"requests": len(tr), "sharing_first_block": int(counts.max()), "share": float(counts.max() / len(tr))}


# ------------------------------------------------------------------ why a router wins TTFT and loses TBT
#: The policies compared on the coupled nodes: Dynamo, SGLang and llm-d, and the Conductor's cache_aware.
TBT_ROUTERS = ("dynamo", "sglang", "llmd", "cache_aware")


def prefill_share_during_decode(res: sim.SimResult) -> np.ndarray:
    """Per request (NaN if it did not decode): the share of its decode time (first token → last) during
    which its node was also prefilling a prompt. In the coupled engine every such iteration carries a
    prefill chunk, and a decode step that shares an iteration with a chunk waits for it."""
    a = _result(res, "l09.prefill_share_during_decode").arrays
    inst, start, end, fin = a["prefill_inst"], a["prefill_start"], a["prefill_end"], a["finish"]
    share = np.full(len(inst), np.nan)
    for e in range(res.config.n_prefill_instances):
        on = np.flatnonzero(inst == e)
        if not len(on):
            continue
        o = on[np.argsort(start[on], kind="stable")]
        # the union of the node's prefill intervals, as a cumulative busy-time function of t
        s0, s1 = [], []
        for b, f in zip(start[o], end[o]):
            if s1 and b <= s1[-1]:
                s1[-1] = max(s1[-1], f)
            else:
                s0.append(b)
                s1.append(f)
        xs = np.column_stack([s0, s1]).ravel()
        busy = np.zeros(len(xs))
        busy[1::2] = np.cumsum(np.subtract(s1, s0))
        busy[2::2] = busy[1:-1:2]
        dec = on[np.isfinite(fin[on]) & (fin[on] > end[on])]
        t0, t1 = end[dec], fin[dec]
        share[dec] = (np.interp(t1, xs, busy) - np.interp(t0, xs, busy)) / (t1 - t0)
    return share


def tbt_vs_ttft(trace: Trace | str = "conversation", arch: str = "coupled", stress: str = "lecture 04",
                routers=TBT_ROUTERS) -> pd.DataFrame:
    """Per router: the share of requests within the TTFT SLO, within the TBT SLO and within both, the hit
    ratio, and the mean share of a request's decode time its node spent prefilling
    (:func:`prefill_share_during_decode`)."""
    _check(arch, stress, "l09.tbt_vs_ttft")
    routers = _names(routers, "routers", (*ROUTERS, *CONDUCTOR), "l09.tbt_vs_ttft")
    tr, speed = _trace(trace), _speed(trace, stress, None)
    runs = simulate_all([(tr, speed, cluster(r, arch, stress)) for r in routers])
    rows = []
    for r, res in zip(routers, runs):
        s = res.summary()
        rows.append({"router": r, "ttft_slo": s["ttft_slo_attainment"], "tbt_slo": s["tbt_slo_attainment"],
                     "slo_attainment": s["slo_attainment"], "hit_ratio": s["hit_ratio"],
                     "prefill_share_during_decode": float(np.nanmean(prefill_share_during_decode(res)))})
    return pd.DataFrame(rows).set_index("router")


def describe_tbt_vs_ttft(df: pd.DataFrame) -> str:
    """What :func:`tbt_vs_ttft` shows, in three short sentences computed from it: which SLO separates the
    policies, the policy with the fewest requests within the TBT SLO and its prefill share, and whether the
    hit ratio orders them as the TBT SLO share does."""
    worst_tbt = df.tbt_slo.idxmin()
    w = df.loc[worst_tbt]
    others = df.drop(index=worst_tbt)
    spans = (f"within the TTFT SLO they keep {df.ttft_slo.min():.3f}–{df.ttft_slo.max():.3f} of the requests, "
             f"within the TBT SLO {df.tbt_slo.min():.3f}–{df.tbt_slo.max():.3f}")
    out = (f"TBT separates the policies here: {spans}. " if np.ptp(df.tbt_slo) > np.ptp(df.ttft_slo)
           else f"TBT does not separate the policies more than TTFT: {spans}. ")
    share_lo, share_hi = others.prefill_share_during_decode.min(), others.prefill_share_during_decode.max()
    out += (f"`{worst_tbt}` keeps the fewest within the TBT SLO ({w.tbt_slo:.3f}); its requests spend "
            f"{w.prefill_share_during_decode:.0%} of their decode time beside a prefill "
            f"({share_lo:.0%}–{share_hi:.0%} with the others)"
            + (". " if w.prefill_share_during_decode > share_hi else
               ", so here the prefill share does not explain it. "))
    same_order = list(df.hit_ratio.sort_values(kind="stable").index) == list(df.tbt_slo.sort_values(kind="stable").index)
    out += ("Ordered by hit ratio, the policies are ordered by TBT SLO share too." if same_order else
            "Their order by hit ratio is not their order by TBT SLO share.")
    return out


def instance_shares(res: sim.SimResult) -> pd.DataFrame:
    """Per instance: the share of requests routed to it and its hit ratio (prompt tokens reused from its
    own cache / its prompt tokens, as ``summary()["hit_ratio"]``)."""
    a = _result(res, "l09.instance_shares").arrays
    n = res.config.n_prefill_instances
    ok = a["prefill_inst"] >= 0
    inst = a["prefill_inst"][ok]
    req = np.bincount(inst, minlength=n)
    reused = np.bincount(inst, weights=a["cached_tok"][ok], minlength=n)
    prompt = np.bincount(inst, weights=res.trace.input_len[ok], minlength=n)
    return pd.DataFrame({"share": req / max(1, req.sum()),
                         "hit_ratio": np.divide(reused, prompt, out=np.zeros(n), where=prompt > 0)},
                        index=pd.RangeIndex(n, name="instance"))


def describe_instance_shares(df: pd.DataFrame, router: str) -> str:
    """The busiest instance of :func:`instance_shares` against the others, in one computed sentence."""
    top = int(df.share.idxmax())
    rest = df.drop(index=top)
    return (f"With `{router}`, instance {top} takes {df.share.max():.0%} of the requests (an even share is "
            f"{1 / len(df):.0%}) at a hit ratio of {df.hit_ratio.loc[top]:.3f}; the other instances "
            f"{rest.share.min():.0%}–{rest.share.max():.0%} each, at {rest.hit_ratio.min():.3f}–{rest.hit_ratio.max():.3f}.")


# ------------------------------------------------------------------ what the docs say / what we measure
#: Dynamo's overlap_score_weight values of the sweep (the deprecated knob: s = w, and κ = 0 if w = 0).
DYNAMO_WEIGHTS = (0.0, 0.5, 1.0, 2.0, 4.0)


def dynamo_weight_config(w: float) -> RouterConfig:
    """Dynamo with the deprecated ``overlap_score_weight = w`` (config.rs@07a6c9ce maps it to s = w, κ = 0 if w = 0)."""
    from ..validate import real
    w = real(w, "overlap_score_weight", lo=0.0, hi=1e6, where="l09.dynamo_weight_config")
    return RouterConfig(dynamo_prefill_scale=w, dynamo_overlap_credit=0.0 if w == 0 else 1.0)


def dynamo_weight_sweep(weights=DYNAMO_WEIGHTS, trace: Trace | str = "conversation", arch: str = "coupled",
                        stress: str = "lecture 04") -> pd.DataFrame:
    """Dynamo's docs: weight 0 = "pure load balancing"; higher improves TTFT and costs ITL (TBT). Per
    weight: mean and p99 TTFT (s), mean TBT and mean of each request's slowest-decile TBT (ms), hit ratio."""
    _check(arch, stress, "l09.dynamo_weight_sweep")
    if isinstance(weights, (str, bytes)) or not hasattr(weights, "__iter__"):
        raise fail("weights", weights, "at least one weight ≥ 0, in a list", "l09.dynamo_weight_sweep")
    cfgs = [dynamo_weight_config(w) for w in weights]
    if not cfgs:
        raise fail("weights", weights, "at least one weight ≥ 0", "l09.dynamo_weight_sweep")
    tr, speed = _trace(trace), _speed(trace, stress, None)
    runs = simulate_all([(tr, speed, cluster("dynamo", arch, stress, c)) for c in cfgs])
    rows = []
    for w, r in zip(weights, runs):
        s = r.summary()
        rows.append({"overlap_score_weight": float(w), "ttft_mean_s": s["ttft_mean_s"], "ttft_p99_s": s["ttft_p99_s"],
                     "tbt_mean_ms": 1e3 * s["tbt_mean_s"], "tbt_tail_mean_ms": 1e3 * s["tbt_tail_mean_s"],
                     "hit_ratio": s["hit_ratio"], "slo_attainment": s["slo_attainment"]})
    return pd.DataFrame(rows).set_index("overlap_score_weight")


#: Documented vs code defaults (notebooks/routers.md, SGLang and AIBrix): AIBrix's README (block 128, imbalance 16,
#: σ factor 2) vs its code (4, 8, 1); SGLang's CacheAwareConfig::default() (threshold 0.5, abs 32, rel 1.1,
#: max tree 10,000 chars) vs the CLI (0.3, 64, 1.5, 2^26 chars). Tree/store sizes in 512-token blocks at
#: 4 chars per token; SGLang's eviction interval (30 s vs 120 s) is not modelled (LRU at insert).
DEFAULT_VARIANTS = {
    ("aibrix", "code"): RouterConfig(),
    ("aibrix", "README"): RouterConfig(aibrix_imbalance_abs=16, aibrix_std_factor=2.0,
                                       belief_capacity_blocks=200_000 * 128 // 4 // 512),
    ("sglang", "CLI"): RouterConfig(),
    ("sglang", "CacheAwareConfig::default"): RouterConfig(sglang_cache_threshold=0.5, sglang_balance_abs=32,
                                                          sglang_balance_rel=1.1,
                                                          belief_capacity_blocks=max(1, 10_000 // 4 // 512)),
}


def default_variants(trace: Trace | str = "conversation", arch: str = "coupled", stress: str = "lecture 04") -> pd.DataFrame:
    """Each :data:`DEFAULT_VARIANTS` run: SLO attainment, mean TTFT, hit ratio, load imbalance."""
    _check(arch, stress, "l09.default_variants")
    tr, speed = _trace(trace), _speed(trace, stress, None)
    runs = simulate_all([(tr, speed, cluster(r, arch, stress, c)) for (r, _), c in DEFAULT_VARIANTS.items()])
    rows = [{"router": r, "defaults": v, **{k: _row(res)[k] for k in ("slo_attainment", "ttft_mean_s", "hit_ratio",
                                                                         "load_imbalance")}}
            for (r, v), res in zip(DEFAULT_VARIANTS, runs)]
    return pd.DataFrame(rows).set_index(["router", "defaults"])


def docs_box(sweep: pd.DataFrame, variants: pd.DataFrame, boards: dict | None = None) -> str:
    """Markdown table: what each system's docs (or code) claim, what we measure, why."""
    w0, w1, wmax = sweep.index[0], 1.0 if 1.0 in sweep.index else sweep.index[-1], sweep.index[-1]
    s = sweep
    ttft_down = s.ttft_mean_s.iloc[-1] < s.ttft_mean_s.iloc[0]
    tbt_up = s.tbt_mean_ms.iloc[-1] > s.tbt_mean_ms.iloc[0]
    a, g = variants.loc["aibrix"], variants.loc["sglang"]
    rows = [
        ("Dynamo docs: `overlap_score_weight` 0 = \"pure load balancing\"; higher improves TTFT and costs ITL",
         f"coupled nodes, conversation: weight {w0:g} → {wmax:g}: mean TTFT {s.ttft_mean_s.loc[w0]:.2f} → "
         f"{s.ttft_mean_s.loc[wmax]:.2f} s, mean TBT {s.tbt_mean_ms.loc[w0]:.1f} → {s.tbt_mean_ms.loc[wmax]:.1f} ms, "
         f"hit ratio {s.hit_ratio.loc[w0]:.3f} → {s.hit_ratio.loc[wmax]:.3f} (default {w1:g}: "
         f"{s.ttft_mean_s.loc[w1]:.2f} s, {s.tbt_mean_ms.loc[w1]:.1f} ms)",
         ("TTFT " + ("falls" if ttft_down else "does not fall") + ", TBT " + ("rises" if tbt_up else "does not rise")
          + (": the weight trades the prefill a cache hit saves against spreading decode (the D term)" if tbt_up else
             ": in a chunked coupled engine the prefill chunks a cache hit saves are the ones that stall the decode "
             "batch, so TBT falls too"))),
        ("AIBrix README: block 128, imbalance 16, σ factor 2 (the code: 4, 8, 1)",
         f"coupled nodes, conversation: code defaults {a.loc['code', 'slo_attainment']:.3f} SLO attainment, hit ratio {a.loc['code', 'hit_ratio']:.3f}; "
         f"README {a.loc['README', 'slo_attainment']:.3f}, {a.loc['README', 'hit_ratio']:.3f}",
         (f"the README's blocks are 128 characters long, the code's 4. The same number of blocks then holds "
          f"{128 // 4}× more of the prompts. Its wider bound (imbalance 16, 2σ) lets more requests stay on their match"
          + ("" if a.loc["README", "hit_ratio"] > a.loc["code", "hit_ratio"] else " — yet here it does not help"))),
        ("SGLang `CacheAwareConfig::default()`: 0.5 / 32 / 1.1 / 10,000 chars (the CLI: 0.3 / 64 / 1.5 / 2²⁶)",
         f"coupled nodes, conversation: CLI {g.loc['CLI', 'slo_attainment']:.3f} SLO attainment, hit ratio {g.loc['CLI', 'hit_ratio']:.3f}; struct "
         f"defaults {g.loc['CacheAwareConfig::default', 'slo_attainment']:.3f}, "
         f"{g.loc['CacheAwareConfig::default', 'hit_ratio']:.3f}",
         (f"a 10,000-character tree holds {max(1, 10_000 // 4 // 512)} blocks of 512 tokens per worker: the router "
          "forgets almost at once, and the higher threshold and tighter balance send more requests by load")),
    ]
    if boards is not None and ("conversation", "disaggregated", "lecture 04") in boards:
        df = boards["conversation", "disaggregated", "lecture 04"]
        hot = hot_first_block("conversation")
        rows.append(("production-stack `prefixaware`: the code \"assume[s] that there is no eviction\"; no load term",
                     f"Mooncake's pools, conversation: load imbalance {df.loc['prodstack_prefix', 'load_imbalance']:.2f}, "
                     f"SLO attainment {df.loc['prodstack_prefix', 'slo_attainment']:.3f}",
                     f"{100 * hot['share']:.1f} % of the prompts start with the same block, so the longest match "
                     "keeps naming the instance that first got it, and nothing counts its load"))
    head = "| system: docs or code say | what we measure | why |\n|---|---|---|\n"
    return head + "\n".join(f"| {x} | {y} | {z} |" for x, y, z in rows)


# ------------------------------------------------------------------ history (dates: notebooks/routers.md)
#: (system, what, when, where) — the dates the course's router notes (notebooks/routers.md) give: a commit's, or
#: between the pull requests its code contains or predates.
HISTORY = (
    ("Mooncake", "paper with the Conductor (Algorithm 1); no open-source Conductor found",
     "arXiv 2407.00079 (the id: July 2024)", "the paper (notebooks/routers.md)"),
    ("NVIDIA Dynamo", "early rule: maximise 2·overlap − usage − waiting", "2025-03-25 … 2025-05-29 (issue #392; PR #1259)",
     "lib/llm/src/kv_router/scheduler.rs @ 00564be8"),
    ("NVIDIA Dynamo", "classic rule: w·prefill blocks + decode blocks, argmin", "after 2026-02-05 (PR #6010)",
     "lib/llm/src/kv_router/scheduler.rs @ db19bd2a"),
    ("NVIDIA Dynamo", "credit/scale rule (κ, s, ρ), the one implemented", "after 2026-08-18 (PR #13491)",
     "lib/kv-router/src/scheduling/selector/default.rs @ 07a6c9ce"),
    ("SGLang router", "cache_aware, miss → smallest tree", "about 2025-12-02 (PR #14312)",
     "sgl-router/src/policies/cache_aware.rs @ 026f853b"),
    ("SGLang model gateway", "cache_aware, miss → least load (implemented)", "2025-12-09 (PR #14758)",
     "sgl-model-gateway/src/policies/cache_aware.rs @ b93974f1"),
    ("SGLang model gateway", "ties among the deepest holders → the node's last_tenant (implemented)",
     "after 2025-12-29 (PR #16099)", "sgl-model-gateway/src/policies/tree.rs @ 03744dbe"),
    ("SMG (lightseekorg/smg)", "later home of the gateway; token-usage imbalance terms", "2026-08-07",
     "lightseekorg/smg @ 73da68ca"),
    ("SMG (smg-project/smg)", "ties → the least loaded of up to 8 holders (PR #2161)", "2026-08-16",
     "smg-project/smg @ e1905542"),
    ("llm-d inference scheduler", "weighted scorers, match cap 256 blocks", "2026-05-17",
     "llm-d/llm-d-inference-scheduler @ 520af478"),
    ("Gateway API Inference Extension", "the same default profile 2/2/3 in its Helm config", "tag v1.3.0, 2026-01-21",
     "kubernetes-sigs/gateway-api-inference-extension @ a93ccb58"),
    ("llm-d router", "renamed scheduler, match cap 131,072 tokens (implemented)", "2026-08-21",
     "llm-d/llm-d-router @ ebab6879"),
    ("vLLM production-stack", "roundrobin, prefixaware, kvaware (implemented)", "2026-08-05",
     "vllm-project/production-stack @ a6c01db0"),
    ("AIBrix", "prefix-cache router, ported from Preble (implemented)", "2026-08-23", "vllm-project/aibrix @ e3e10f9e"),
    ("Preble", "E2 scheduler: exploit the cache or explore by load (implemented)", "2024-05-07",
     "WukLab/preble multi_node/global_scheduler_with_time.py @ 0c962c4c"),
)


def history() -> pd.DataFrame:
    """:data:`HISTORY` as a table (dates as notebooks/routers.md gives them: the commits we read, not releases)."""
    return pd.DataFrame(HISTORY, columns=["system", "what", "when", "source"])


# ------------------------------------------------------------------ reproduce: metrics and figures
from ..reproduce import Metric, figure_group, metric_group  # noqa: E402


@metric_group("routers")
def _metrics() -> list:
    out = []
    src = "ours: l09.leaderboard({t!r}, {a!r}, {s!r}); routers as in notebooks/routers.md"
    for (t, a, s), df in leaderboards().items():
        key = f"{_trace(t).name}.{a}.{s.replace(' ', '')}"
        for p in df.index:
            out.append(Metric(f"routers.slo_attainment.{key}.{p}", float(df.loc[p, "slo_attainment"]), "fraction",
                              None, src.format(t=t, a=a, s=s)))
            out.append(Metric(f"routers.ttft_mean_s.{key}.{p}", float(df.loc[p, "ttft_mean_s"]), "s",
                              None, src.format(t=t, a=a, s=s)))
    return out


@figure_group("routers")
def _figures() -> dict:
    from ..plots import routers as plots

    boards = leaderboards()
    return {"l09_leaderboard": plots.leaderboard_bars({k: v for k, v in boards.items() if k[2] == "lecture 04"}),
            "l09_belief_sweep": plots.belief_sweep(belief_sweep(cache_blocks=SWEEP_CACHE_BLOCKS)),
            "l09_dynamo_weight": plots.dynamo_weight(dynamo_weight_sweep())}


# ------------------------------------------------------------------ tables for people (what the notebook shows)
#: Column → the label the lecture's tables show (units in the label).
LABELS = {
    "kind": "kind", "ttft_mean_s": "mean TTFT (s)", "ttft_p99_s": "p99 TTFT (s)",
    "slo_attainment": "SLO attainment", "hit_ratio": "hit ratio", "fetched_tokens": "fetched tokens",
    "load_imbalance": "load imbalance (busiest ÷ mean)",
    "ttft_slo": "within TTFT SLO", "tbt_slo": "within TBT SLO",
    "prefill_share_during_decode": "decode time beside a prefill (%)",
    "default": "default knowledge", "hit_ratio_true": "hit ratio, true", "hit_ratio_belief": "hit ratio, belief",
    "ttft_mean_true_s": "mean TTFT, true (s)", "ttft_mean_belief_s": "mean TTFT, belief (s)",
    "ttft_ratio": "TTFT belief ÷ true", "stale_share_belief": "sent on a stale belief (%)",
    "stale_share": "sent on a stale belief (%)", "missed_tokens_share": "prompt tokens believed, not cached (%)",
    "tbt_mean_ms": "mean TBT (ms)", "tbt_tail_mean_ms": "slowest-decile TBT (ms)",
}
#: :data:`WORKED_STATE`'s fields → the labels of :func:`state_table` (the rule's symbol in front).
STATE_LABELS = {
    "matched_blocks": "m: matched blocks", "tree_blocks": "router tree (blocks)", "pending_tokens": "P: tokens to prefill",
    "live_kv_tokens": "D: live KV tokens", "inflight": "n: in flight", "queued": "q: queued",
    "recent_requests": "r: requests in window", "recent_prefill_s": "W: prefill s in window",
    "deepest_entered": "deepest block stored at (s)"}
#: Shares (0–1) the lecture's tables show in % (one unit with the prose and the figures).
PERCENT = ("stale_share", "stale_share_belief", "missed_tokens_share", "prefill_share_during_decode")
#: The architectures as the lecture names them (prose, tables and figures).
ARCH_LABELS = {"disaggregated": "Mooncake's pools", "coupled": "coupled nodes"}


def trace_label(t) -> str:
    """A trace as the lecture names it: its key ("conversation", "toolagent-like"), else its name."""
    return t if isinstance(t, str) else _trace(t).name


def board_label(key) -> str:
    """A board ``(trace, arch, stress)`` as the lecture names it: "conversation, Mooncake's pools, lecture 04"."""
    t, a, s = key
    return f"{trace_label(t)}, {ARCH_LABELS.get(a, a)}, {s}"


def _cell(v) -> str:
    if isinstance(v, (bool, np.bool_)):
        return str(v)
    if isinstance(v, (int, np.integer)):
        return f"{int(v):,}"
    if isinstance(v, (float, np.floating)):
        return "" if not math.isfinite(v) else f"{v:,.3f}".rstrip("0").rstrip(".") if abs(v) < 1000 else f"{v:,.0f}"
    return str(v).replace("|", "\\|")


def md_table(df: pd.DataFrame, index: bool = True) -> str:
    """``df`` as a markdown table: text columns left-aligned, numbers right-aligned, numbers as printed
    (thousands with commas, floats as ``readable`` rounded them); a MultiIndex header joined with ", "."""
    cols = [", ".join(map(str, c)) if isinstance(c, tuple) else str(c) for c in df.columns]
    number = re.compile(r"[−-]?[\d,]+(\.\d+)?")
    num = [pd.api.types.is_numeric_dtype(df[c]) or (df[c].dtype == object and len(df) > 0 and all(
        isinstance(v, (int, float, np.integer, np.floating)) or number.fullmatch(str(v)) for v in df[c]))
        for c in df.columns]
    head, rule = cols, ["---:" if n else ":---" for n in num]
    def places(c) -> int:   # the decimals a float column was rounded to (≤ 3), the same on every row
        x = pd.to_numeric(df[c], errors="coerce").dropna().astype(float) if df[c].dtype.kind == "f" else None
        if x is None or not len(x):
            return -1
        return next((d for d in range(4) if np.allclose(x.round(d), x, rtol=0, atol=1e-9)), 3)
    dec = [places(c) for c in df.columns]
    fmt = lambda v, d: (f"{v:,.{d if abs(v) < 1000 else 0}f}" if d >= 0 and isinstance(v, (float, np.floating)) and math.isfinite(v)   # noqa: E731
                        else _cell(v))
    rows = [[fmt(v, d) for v, d in zip(r, dec)] for r in df.itertuples(index=False, name=None)]
    if index:
        name = df.index.name if not isinstance(df.index, pd.MultiIndex) else ", ".join(map(str, df.index.names))
        head, rule = [name or ""] + head, [":---"] + rule
        labels = [", ".join(map(str, i)) if isinstance(i, tuple) else str(i) for i in df.index]
        rows = [[lab] + r for lab, r in zip(labels, rows)]
    return "\n".join("| " + " | ".join(r) + " |" for r in [head, rule, *rows])


def boxed(summary: str, *parts: str) -> str:
    """Markdown: ``parts`` (markdown, a table from :func:`md_table` …) in a collapsible ``<details>`` box."""
    body = "\n\n".join(parts)
    return f"<details><summary>{summary}</summary>\n\n{body}\n\n</details>"


def readable(df: pd.DataFrame, digits: int = 3) -> pd.DataFrame:
    """``df`` with the lecture's labels (:data:`LABELS`) for its columns, floats rounded to ``digits``
    (seconds and milliseconds to 2 and 1; the shares of :data:`PERCENT` in % to 1), whole-number columns as
    integers."""
    out = df.copy()
    for c in out.columns:
        if c in PERCENT:
            out[c] = (100 * out[c].astype(float)).round(1)
        elif pd.api.types.is_float_dtype(out[c]):
            d = 1 if c.endswith("_ms") else 2 if c.endswith("_s") else digits
            out[c] = out[c].round(d)
    return out.rename(columns=LABELS)


def overview() -> pd.DataFrame:
    """What each router is and what it knows of the caches by default (from :func:`router_table`)."""
    t = router_table()
    kn = {"true": "the true caches", "belief": "its belief"}
    knows = t.knowledge.map(kn).where(t.index != "prodstack_rr", "none: round robin reads no cache")
    return pd.DataFrame({"system": t.system.str.replace(" (E2)", "", regex=False), "knows the caches by": knows})


def rules_in_words() -> pd.DataFrame:
    """Each router's rule in words, as :data:`ROUTER_INFO` gives it."""
    t = router_table()
    return pd.DataFrame({"rule in words": t.rule})


def belief_settings() -> pd.DataFrame:
    """Per router: its belief's size and time-to-live (used whenever it runs on its belief), the window of its
    request-rate statistics and the decode node it picks on the pools (from :func:`router_table`)."""
    t = router_table()
    ttl = t.belief_ttl_s.map(lambda x: "none" if not math.isfinite(x) else f"{x:,.0f}")
    size = t.belief_blocks.map(lambda x: f"{x:,}" if isinstance(x, (int, np.integer)) else x)
    # round robin keeps no belief; only production-stack's kvaware (r) and Preble (W) read the rate window
    ttl, size = ttl.where(t.index != "prodstack_rr", "—"), size.where(t.index != "prodstack_rr", "—")
    windowed = t.index.isin(["prodstack_kv", "preble"])
    short = {"least_kv": "least KV", "least_requests": "fewest requests", "least_queued": "fewest waiting",
             "round_robin": "round robin", "aibrix_pd": "AIBrix's PD router"}
    return pd.DataFrame({"belief size (512-token blocks)": size, "belief time-to-live (s)": ttl,
                         "rate window (s)": t.window_s.map(lambda x: f"{x:,.0f}").where(windowed, "—"),
                         "decode node on the pools": t.decode_choice.map(short)})


def parameters() -> pd.DataFrame:
    """:func:`parameter_table` with its defaults printed as a person reads them (131,072, not 131072)."""
    t = parameter_table()

    def fmt(v):
        if isinstance(v, bool) or isinstance(v, str):
            return v
        if isinstance(v, (int, np.integer)):
            return f"{v:,}"
        return f"{v:,g}"
    return pd.DataFrame({"symbol in §1": [PARAMETER_SYMBOLS.get(p, "") for p in t.index],
                         "default": t["default"].map(fmt)}, index=t.index)


#: RouterConfig's fields → the letters of §1's rules (the rest are named in words there or not in a rule).
PARAMETER_SYMBOLS = {
    "dynamo_overlap_credit": "κ", "dynamo_prefill_scale": "s", "dynamo_request_weight": "ρ",
    "dynamo_temperature": "T", "sglang_cache_threshold": "threshold", "sglang_balance_abs": "abs",
    "sglang_balance_rel": "rel", "llmd_prefix_weight": "w_p", "llmd_queue_weight": "w_q",
    "llmd_kv_weight": "w_kv", "llmd_max_prefix_tokens": "M (in tokens)", "prodstack_kv_threshold": "threshold",
    "aibrix_imbalance_abs": "abs", "aibrix_std_factor": "k_σ", "preble_decode_len": "decode length",
    "preble_tpot_s": "TPOT"}


def state_table(state: dict | None = None) -> pd.DataFrame:
    """:data:`WORKED_STATE` (or ``state``) as a table: one row per instance, the rule's symbols in the labels,
    whole numbers as integers."""
    st = WORKED_STATE if state is None else state
    worked_inputs(st)   # validates
    def fmt(x):   # whole numbers as integers, thousands with commas ("150,000")
        x = float(x)
        return (f"{int(x):,}" if abs(x) >= 1000 else int(x)) if x.is_integer() else x
    df = pd.DataFrame({STATE_LABELS[k]: [fmt(x) for x in v] for k, v in st.items()})
    return df.rename_axis("instance")


def state_rows(state: dict | None = None) -> pd.DataFrame:
    """:func:`state_table` turned on its side: one row per number (labelled with the rule's symbol), one column
    per instance — four narrow columns instead of ten."""
    t = state_table(state).T
    t.columns = [f"instance {i}" for i in t.columns]
    return t.rename_axis("")


def request_table(request: dict | None = None) -> pd.DataFrame:
    """:data:`WORKED_REQUEST` (or ``request``) as a one-row table with labels."""
    q = WORKED_REQUEST if request is None else request
    return pd.DataFrame([{"L: prompt tokens": f"{q['L']:,}", "blocks": q["n_blocks"], "u: random draw": q["u"],
                          "decisions so far (round robin)": q["rr"],
                          "KV tokens an instance holds": f"{q['kv_cap']:,.0f}"}], index=["the request"])


def worked_table(table: pd.DataFrame, compiled: bool = False) -> pd.DataFrame:
    """:func:`worked_request`'s table with labels: the numbers each rule compares, per instance, its choice by
    the plain-Python rule (and, with ``compiled``, by the compiled kernel: :func:`describe_worked` says whether
    they agree)."""
    cols = {c: f"instance {c[1:]}" for c in table.columns if re.fullmatch(r"i\d+", c)}
    out = table.rename(columns={**cols, "compares": "numbers compared", "choice": "choice",
                                "route (numba)": "choice, compiled"})
    out["numbers compared"] = out["numbers compared"].map(
        lambda s: ", ".join(SCORE_LABELS.get(k.strip(), k.strip()) for k in s.split(",")))
    return out if compiled else out.drop(columns="choice, compiled")


#: :func:`~mooncake_lab.sim.routers_reference.rule_scores`' keys → the symbols of the lecture's rule table.
SCORE_LABELS = {"cost_blocks": "cost (blocks)", "match_rate": "h/L", "inflight": "n",
                "deepest_entered": "stored at (s)", "score": "S", "matched_blocks": "m", "recent_requests": "r",
                "match_pct": "match %", "bound": "load bound", "cost_s": "cost (s)", "rr mod N": "rr mod N"}


def board_table(boards: dict, stress: str | None = None, metric: str = "slo_attainment",
                digits: int = 3) -> pd.DataFrame:
    """One row per policy (routers, then the Conductor's), one column per board of :func:`leaderboards`
    (architecture, trace; only those at ``stress`` if given): ``metric`` rounded to ``digits``."""
    keys = [k for k in boards if stress is None or k[2] == stress]
    if not keys:
        raise fail("stress", stress, ", ".join(sorted({repr(k[2]) for k in boards})), "l09.board_table")
    names = [p for p in (*ROUTERS, *CONDUCTOR) if all(p in boards[k].index for k in keys)]
    label, arch = trace_label, lambda a: ARCH_LABELS.get(a, a)   # noqa: E731
    tup = [(arch(a), label(t)) if stress is not None else (s, arch(a), label(t)) for t, a, s in keys]
    cols = pd.MultiIndex.from_tuples(tup, names=["architecture", "trace"] if stress is not None
                                     else ["stress", "architecture", "trace"])
    data = np.array([[boards[k].loc[p, metric] for k in keys] for p in names], dtype=float)
    return pd.DataFrame(data.round(digits), index=pd.Index(names, name="policy"), columns=cols)


def sweep_table(sweep: pd.DataFrame) -> pd.DataFrame:
    """:func:`belief_sweep` with labels: the index says "unbounded" for 0 and "true cache (KV events)" for the
    true-cache run; the constant cache size is left out (:func:`describe_belief_sweep` states it)."""
    idx = ["true cache (KV events)" if c == "true" else "unbounded" if int(c) == 0 else f"{int(c):,}"
           for c in sweep.index]
    out = readable(sweep.drop(columns="cache_blocks"))
    out.index = pd.Index(idx, name="belief size (blocks)")
    return out


def weight_table(sweep: pd.DataFrame) -> pd.DataFrame:
    """:func:`dynamo_weight_sweep` with labels; the weight as 0, 0.5, 1 …"""
    out = readable(sweep)
    out.index = pd.Index([f"{w:g}" for w in sweep.index], name="overlap_score_weight")
    return out


def variants_table(variants: pd.DataFrame) -> pd.DataFrame:
    """:func:`default_variants` with labels."""
    return readable(variants).rename_axis(["router", "defaults from"])


def describe_hot_first_block(hot: dict) -> str:
    """One sentence: how many prompts start with the trace's most common first block."""
    return (f"{hot['sharing_first_block']:,} of {hot['requests']:,} prompts ({100 * hot['share']:.1f} %) start with "
            "the same first block.")


def history_table() -> pd.DataFrame:
    """:func:`history`, indexed by system, for reading whole (no cut cells)."""
    return history().set_index("system")


# ------------------------------------------------------------------ §8 Mooncake in today's stacks
#: (system, what it uses from Mooncake, how to turn it on, documentation page, repository @ commit : file) — each
#: flag as the page at that commit writes it. The routers of §1 move no KV; these are the engines' (and, for
#: Dynamo, the router's) own uses of the Mooncake Store and Transfer Engine.
STACKS = (
    ("vLLM", "Transfer Engine: P/D transfer, the prefiller's KV sent point to point to the decoder "
     "(`MooncakeConnector`)",
     "prefiller `--kv-transfer-config '{\"kv_connector\":\"MooncakeConnector\",\"kv_role\":\"kv_producer\"}'`, "
     "decoder the same with `\"kv_consumer\"`, a proxy in front",
     "vLLM docs, MooncakeConnector Usage Guide",
     "vllm-project/vllm @ 8a53ea11 : docs/features/mooncake_connector_usage.md"),
    ("vLLM", "Mooncake Store: a shared KV pool, for CPU offloading and prefix caching across instances by block "
     "hash (`MooncakeStoreConnector`)",
     "a running `mooncake_master`, `MOONCAKE_CONFIG_PATH=…` and "
     "`--kv-transfer-config '{\"kv_connector\":\"MooncakeStoreConnector\",\"kv_role\":\"kv_both\"}'`",
     "vLLM docs, MooncakeStoreConnector Usage Guide",
     "vllm-project/vllm @ 135ed352 : docs/features/mooncake_store_connector_usage.md"),
    ("SGLang", "Transfer Engine: the P/D transfer backend",
     "`--disaggregation-mode prefill` or `decode`, with `--disaggregation-transfer-backend mooncake` (the default)",
     "SGLang docs, PD Disaggregation",
     "sgl-project/sglang @ cccb6546 : docs/advanced_features/pd_disaggregation.md"),
    ("SGLang", "Mooncake Store: HiCache's third tier, beside GPU and host memory; prefill instances share it",
     "`--enable-hierarchical-cache --hicache-storage-backend mooncake`",
     "SGLang docs, HiCache Best Practices",
     "sgl-project/sglang @ 0d57f2c1 : docs/advanced_features/hicache_best_practices.md"),
    ("NVIDIA Dynamo", "the shared pool in the router: a block any worker can fetch from Mooncake lowers every "
     "worker's prefill cost",
     "workers: SGLang HiCache with `--hicache-storage-backend mooncake`; frontend: `--router-mode kv "
     "--shared-cache-type hicache --shared-cache-multiplier 0.5`",
     "Dynamo docs, HiCache (tier-aware shared KV cache routing)",
     "ai-dynamo/dynamo @ a9a4ef7a : docs/backends/sglang/sglang-hicache.md"),
    ("Mooncake itself", "the Transfer Engine and the Store as a library: topology-aware NIC choice, slices spread "
     "over several NICs (the design box below)",
     "`pip install mooncake-transfer-engine` (the store lab uses `mooncake-transfer-engine-non-cuda`)",
     "FAST'25 §3.2.3; Mooncake docs, Transfer Engine",
     "kvcache-ai/Mooncake @ 3b5a5941 : docs/source/design/transfer-engine/index.md"),
)
_STACK_COLUMNS = ["system", "what it uses from Mooncake", "how to turn it on", "source", "file"]


def stacks_table() -> pd.DataFrame:
    """:data:`STACKS` as the lecture's table: system, what it uses, how to turn it on, the documentation page."""
    return pd.DataFrame(STACKS, columns=_STACK_COLUMNS).drop(columns="file").set_index("system")


def stacks_sources() -> pd.DataFrame:
    """The file and commit behind each row of :func:`stacks_table` (repository @ commit : path)."""
    return pd.DataFrame(STACKS, columns=_STACK_COLUMNS)[["system", "source", "file"]].set_index("system")


def _line_rate_gbs(net: dict) -> float:
    """A network's line rate in GB/s: NICs × Gbit/s per NIC ÷ 8."""
    return net["nics"] * net["nic_gbps"] / 8


def transfer_rates(recorded: dict | None = None) -> pd.DataFrame:
    """The Transfer Engine's rates: FAST'25's over RDMA (Fig. 12; its share of the line rate) beside the range the
    store lab recorded over TCP loopback (every put and get point), and the time each takes for FAST'25's 40 GB
    (the lab's at its fastest point). ``recorded``: the lab's results, by default its committed recording — this
    never starts the store (lab_mooncake_store does)."""
    from . import lab_store as L

    rec = L.load_recorded() if recorded is None else L.check_results(recorded, where="l09.transfer_rates",
                                                                     label="recorded")
    gb, rows = paper.FAST25_TE_GB, []
    for name, net in paper.FAST25_TE_NETWORKS.items():
        rows.append({"measured by": "FAST'25, Fig. 12", "network": f"RDMA, {name.replace('×', ' × ')} NICs",
                     "GB/s": f"{net['gbs']:g}", "share of line rate": f"{100 * net['gbs'] / _line_rate_gbs(net):.0f}%",
                     f"{gb:g} GB take (s)": f"{gb / net['gbs']:.2f}"})
    rates = [r[f"{k}_gbps"] for r in rec["transfer"] for k in ("put", "get")]
    rows.append({"measured by": "the course's store lab, recorded", "network": "TCP over loopback, one machine",
                 "GB/s": f"{min(rates):.2f} – {max(rates):.2f}", "share of line rate": "— (no NIC)",
                 f"{gb:g} GB take (s)": f"{gb / max(rates):.0f} at the fastest"})
    return pd.DataFrame(rows)


def describe_transfer_rates(recorded: dict | None = None) -> str:
    """Two sentences: where the lab's row comes from (package, version, date, machine), and how many times
    FAST'25's slower network beats the lab's fastest point."""
    from . import lab_store as L

    rec = L.load_recorded() if recorded is None else L.check_results(recorded, where="l09.describe_transfer_rates",
                                                                     label="recorded")
    fastest = max(r[f"{k}_gbps"] for r in rec["transfer"] for k in ("put", "get"))
    name, net = next(iter(paper.FAST25_TE_NETWORKS.items()))
    sizes = [L.size_label(r["value_bytes"]) for r in rec["transfer"]]
    sizes = list(dict.fromkeys(sizes))
    return (f"The lab's row is its committed recording ({rec['package']} {rec['version']}, {rec['date']}, "
            f"{rec['machine']}): every put and get point, at values of {', '.join(sizes[:-1])} and {sizes[-1]}. "
            f"FAST'25's {net['gbs']:g} GB/s over {name.replace('×', ' × ')} NICs is {net['gbs'] / fastest:,.0f}× the "
            "lab's fastest point.")
