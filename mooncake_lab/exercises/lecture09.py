"""Exercises of lecture 09 — KV-aware routing after Mooncake.

Expected answers come from :mod:`mooncake_lab.experiments.l09_routers` (the worked request's hand-set
state with exercise 1's change, through the same rules as the worked table: ``rule_scores`` and the
compiled ``route``; memoised runs on the conversation trace at lecture 04's stress).
"""
from __future__ import annotations

from . import Exercise, exercise


def _l09():
    from ..experiments import l09_routers as l09
    return l09


def _changed_choice(router: str) -> int:
    """The instance ``router`` picks in exercise 1's changed state (l09.worked_request: route_reference ≡ route)."""
    l09 = _l09()
    return int(l09.worked_request(l09.changed_state()).loc[router, "choice"])


def _explain(router: str):
    """Feedback for exercise 1: ``router``'s rule applied to the changed state, each term with its number
    (l09.explain_choice); on a wrong answer, why that instance loses."""
    def explain(value, correct: bool) -> str:
        l09 = _l09()
        return l09.explain_choice(router, l09.changed_state(), given=None if correct else value)
    return explain


def _prefix_imbalance() -> float:
    return float(_l09().leaderboard("conversation", "disaggregated", "lecture 04").loc["prodstack_prefix", "load_imbalance"])


def _best_coupled_router() -> str:
    df = _l09().leaderboard("conversation", "coupled", "lecture 04")
    return str(df[df.kind == "router"].index[0])


def _stale_percent() -> float:
    l09 = _l09()
    sweep = l09.belief_sweep("sglang", (l09.SYSTEM_DEFAULTS["sglang"][1],), cache_blocks=l09.SWEEP_CACHE_BLOCKS)
    return 100.0 * float(sweep.stale_share.iloc[0])


_RULES_HINT = ("the state is `l09.changed_state()`, the change `l09.state_change()`, the thresholds "
               "`l09.parameter_table()`. ")

exercise(Exercise(
    "09.changed_sglang",
    "Question 1a: the instance `sglang` picks when instance 1 now holds 7 of the prompt's 8 blocks instead of 2.",
    answer=lambda: _changed_choice("sglang"), rel_tol=0.0, unit="instance",
    hint=_RULES_HINT + "SGLang first tests the balance: is max n − min n above abs, and max n above rel · min n? "
         "If not both, the deepest match wins when its match rate h/L is above the threshold.",
    why="SGLang balances only when both imbalance tests hold. Otherwise it follows the deepest match, wherever "
        "that has moved.",
    explain=_explain("sglang")))

exercise(Exercise(
    "09.changed_aibrix",
    "Question 1b: the instance `aibrix` picks when instance 1 now holds 7 of the prompt's 8 blocks instead of 2.",
    answer=lambda: _changed_choice("aibrix"), rel_tol=0.0, unit="instance",
    hint=_RULES_HINT + "AIBrix first compares the spread of in-flight requests with abs: that decides the "
         "candidates. Among them, the deepest match within the load bound mean n + k_σ·σ(n) wins.",
    why="AIBrix looks at prefixes only among its candidates. A large spread of in-flight requests leaves only the "
        "least loaded, so a deeper match on a busier instance never counts.",
    explain=_explain("aibrix")))

exercise(Exercise(
    "09.prefix_imbalance",
    "Question 2: the load imbalance (busiest instance's computed prompt tokens ÷ the mean) of `prodstack_prefix` "
    "on Mooncake's pools.",
    answer=_prefix_imbalance, rel_tol=0.03,
    hint="§3's board of the conversation trace on Mooncake's pools at lecture 04's stress has it: "
         "`l09.leaderboard('conversation', 'disaggregated', 'lecture 04').load_imbalance`. Compare it with the "
         "number of prefill instances.",
    why="every prompt starts with the same block, so the longest match is always the instance that saw it first. "
        "prefixaware has no load term to break the tie: one instance gets all the work, and the imbalance equals "
        "the number of prefill instances."))

exercise(Exercise(
    "09.best_coupled",
    "Question 3: the router with the highest SLO attainment on coupled nodes.",
    answer=_best_coupled_router, choices=("dynamo", "sglang", "llmd", "prodstack_rr", "prodstack_prefix",
                                          "prodstack_kv", "aibrix", "preble"),
    # the names §1's table gives the systems; production-stack's three routers go by their rules' names
    synonyms={"SGLang model gateway": "sglang", "SGLang gateway": "sglang", "SGLang": "sglang",
              "NVIDIA Dynamo": "dynamo", "Dynamo": "dynamo", "llm-d router": "llmd", "llm-d": "llmd",
              "AIBrix": "aibrix", "Preble": "preble", "roundrobin": "prodstack_rr", "prefixaware": "prodstack_prefix",
              "kvaware": "prodstack_kv"},
    hint="`l09.leaderboard('conversation', 'coupled', 'lecture 04')`, rows of kind 'router'.",
    why="a coupled node decodes where it prefills: every prompt token left to compute delays the decode steps "
        "beside it. So the TBT SLO separates the routers there (§3's TTFT / TBT split), and reusing the cache keeps "
        "those chunks away."))

exercise(Exercise(
    "09.stale_percent",
    "Question 4: the percentage of requests sent on a stale belief by SGLang with its default tree, the instances "
    "caching 1,024 blocks each.",
    answer=_stale_percent, unit="%", rel_tol=0.05,
    hint="§4's sweep has it: the row of SGLang's default tree size (its belief box in §1), the column of "
         "requests sent on a stale belief, in %.",
    why="the tree remembers what the router sent, not what the engine kept. The instance evicts blocks the tree "
        "still lists, and the prefill recomputes them."))


def _conductor_pick() -> int:
    from ..experiments.watch import WATCH_END_S, contested_request, router_vs_conductor

    d = contested_request(router_vs_conductor().runs["sglang"], WATCH_END_S - 30.0)
    if d is None:
        raise RuntimeError("09.conductor_pick: SGLang's router and the Conductor agree on every request the view "
                           "explains, so the question has no request to ask about")
    return d.conductor_pick


exercise(Exercise(
    "09.conductor_pick",
    "Question 5 [watch]: the note under section 2's view names a request on which SGLang's rule and the "
    "Conductor disagree. Which prefill instance would the Conductor have sent it to?",
    answer=_conductor_pick, unit="instance", rel_tol=0.0,
    hint="Select the request (`view.selected = …`, as the note says) and read the panel under the view: its "
         "last sentence names the instance Algorithm 1 would have picked. `sim.explain(run, request)` gives the "
         "same table.",
    why="the router compares prefix matches and, past its balance threshold, loads; the Conductor adds each "
        "instance's queue, its prefill and a fetch into one TTFT estimate, and takes the smallest."))
