"""Exercises of lecture 09 — KV-aware routing after Mooncake.

Expected answers come from :mod:`mooncake_lab.experiments.l09_routers` (the worked request's hand-set
state; memoised runs on the conversation trace at lecture 04's stress).
"""
from __future__ import annotations

from . import Exercise, exercise


def _l09():
    from ..experiments import l09_routers as l09
    return l09


def _worked_dynamo() -> int:
    return int(_l09().worked_request().loc["dynamo", "choice"])


def _prefix_imbalance() -> float:
    return float(_l09().leaderboard("conversation", "disaggregated", "lecture 04").loc["prodstack_prefix", "load_imbalance"])


def _best_coupled_router() -> str:
    df = _l09().leaderboard("conversation", "coupled", "lecture 04")
    return str(df[df.kind == "router"].index[0])


def _stale_percent() -> float:
    l09 = _l09()
    sweep = l09.belief_sweep("sglang", (l09.SYSTEM_DEFAULTS["sglang"][1],), cache_blocks=l09.SWEEP_CACHE_BLOCKS)
    return 100.0 * float(sweep.stale_share.iloc[0])


exercise(Exercise(
    "09.worked_dynamo",
    "Question 1 [worked request]: which instance (its index in the worked request's table) does `dynamo` "
    "choose, in the coupled engine with its defaults?",
    answer=_worked_dynamo, rel_tol=0.0, unit="instance",
    hint="the `dynamo` row of the worked table (lower cost wins), or `mooncake_lab.sim.routers_reference.dynamo_cost` per "
         "instance: the prefill blocks left after the overlap credit plus the decode blocks the instance holds, plus the "
         "request's own.",
    why="the decode term (KV held by the live requests, counted in blocks) dwarfs the prefill blocks a cache hit "
        "saves, so in a coupled engine Dynamo's default mostly balances KV memory."))

exercise(Exercise(
    "09.prefix_imbalance",
    "Question 2 [no load term]: on the conversation trace, disaggregated, at lecture 04's stress, what load "
    "imbalance (busiest instance's prompt tokens computed ÷ the mean) does `prodstack_prefix` reach?",
    answer=_prefix_imbalance, rel_tol=0.03,
    hint="`l09.leaderboard('conversation', 'disaggregated', 'lecture 04').load_imbalance`; compare with the number "
         "of prefill instances.",
    why="every prompt starts with the same first block, so the longest match is always the instance that saw "
        "it first, and production-stack's prefixaware has no load term to break the tie: one instance gets "
        "all the work, the imbalance equals the number of prefill instances."))

exercise(Exercise(
    "09.best_coupled",
    "Question 3 [architecture]: in the coupled engine (conversation, lecture 04's stress), which router has "
    "the highest SLO attainment?",
    answer=_best_coupled_router, choices=("dynamo", "sglang", "llmd", "prodstack_rr", "prodstack_prefix",
                                          "prodstack_kv", "aibrix", "preble"),
    hint="`l09.leaderboard('conversation', 'coupled', 'lecture 04')`, rows of kind 'router'.",
    why="the coupled engine decodes where it prefills: every prompt token left to compute is a chunk that delays "
        "the decode steps beside it, so the TBT SLO separates the routers there (§3's TTFT / TBT split), and reusing "
        "the cache is what keeps chunks away."))

exercise(Exercise(
    "09.stale_percent",
    "Question 4 [cost of belief]: with SGLang's default router tree and instances that cache "
    "`l09.SWEEP_CACHE_BLOCKS` blocks each (coupled, conversation, lecture 04's stress), what percentage of "
    "requests go to an instance the router believes holds more of their prefix than it really does?",
    answer=_stale_percent, unit="%", rel_tol=0.05,
    hint="`l09.belief_sweep('sglang', cache_blocks=l09.SWEEP_CACHE_BLOCKS)`, the row of SGLang's default "
         "capacity (`l09.SYSTEM_DEFAULTS['sglang'][1]`), column `stale_share` (a fraction).",
    why="the tree remembers what the router sent, not what the engine kept: the instance's LRU evicts blocks "
        "the tree still lists, and the prefill recomputes them."))
