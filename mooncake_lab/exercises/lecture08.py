"""Exercises of lecture 08 — the capstone.

Expected answers come from :mod:`mooncake_lab.experiments.l08_capstone` (memoised runs on the
conversation trace, 16 nodes, preset ``modern``; the analytic fleet-cost model).
"""
from __future__ import annotations

import numpy as np

from . import Exercise, exercise

_REJECT_SPEED = 5.0   # Question 3: replay speed (× 3.40 req/s) of the rejection profile


def _cap():
    from ..experiments import l08_capstone as c

    return c.capacity_table(c.capacity_curve(progress=False))


def _gain_percent() -> float:
    from ..experiments.l08_capstone import capacity_gain

    return 100.0 * capacity_gain(_cap(), 100)


def _largest_share() -> str:
    from ..experiments.l08_capstone import PART_NAMES, gain_shares

    return PART_NAMES[str(gain_shares(_cap(), 100).share.drop("interaction").idxmax())]


def _rejected_tokens_percent() -> float:
    from ..experiments.l08_capstone import rejection_profile

    return 100.0 * float(rejection_profile("conversation", (_REJECT_SPEED,)).rejected_tokens.iloc[0])


def _break_even_usd_per_tb() -> float:
    from ..experiments.l08_capstone import network_break_even_usd_per_tb

    return network_break_even_usd_per_tb()


def least_ttft(req, view):
    """Question 5's policy: the prefill instance with the smallest estimated TTFT."""
    return int(np.argmin(view.ttft_s))


def _same_as_least_ttft() -> str:
    from ..experiments.l08_capstone import policy_leaderboard
    from ..sim import BASELINES

    board = policy_leaderboard({"least_ttft": least_ttft}, baselines=BASELINES)   # the question's four
    cols = ["ttft_mean_s", "ttft_p99_s", "slo_attainment", "hit_ratio", "fetched_ratio", "completed"]
    mine = board.loc["least_ttft", cols]
    same = [p for p in board.index[board.kind == "built-in"] if board.loc[p, cols].equals(mine)]
    return same[0] if len(same) == 1 else "none"


exercise(Exercise(
    "08.capacity_gain",
    "Question 1 [headline]: by how many percent does Mooncake's 90 % capacity exceed that of the coupled "
    "cluster without chunked prefill? Take TBT ≤ 100 ms and the conversation trace.",
    answer=_gain_percent, unit="%", rel_tol=0.03,
    hint="`c.capacity_gain(caps['conversation'], 100)` gives the ratio of the capacities − 1; multiply it by 100.",
    why="It is a ratio of 90 % capacities (rates), our own metric. Do not set it beside the paper's "
        "+59% … +498%: those are gains in the share of requests meeting the SLOs at the trace's own load "
        "(lecture 06). Against the chunked coupled cluster the gain is much smaller."))

exercise(Exercise(
    "08.largest_share",
    "Question 2 [ablation]: which part brings the largest share of that gain: the P/D split, CPP groups, "
    "KVCache-centric scheduling, layer-wise transfer or early rejection?",
    answer=_largest_share,
    choices=("P/D split", "CPP groups", "KVCache-centric scheduling", "layer-wise transfer", "early rejection"),
    synonyms={"disaggregation": "P/D split", "split": "P/D split", "PD split": "P/D split", "cpp": "CPP groups",
              "kvcentric": "KVCache-centric scheduling", "KVCache-centric": "KVCache-centric scheduling",
              "layerwise": "layer-wise transfer", "early_rejection": "early rejection",
              "prediction-based early rejection": "early rejection", "rejection": "early rejection"},
    hint="Read the shares in the note under the waterfall, or the box beside it.",
    why="Capacity counts requests, and turning away a few long prompts frees the prefill pool for many "
        "short ones. The TTFT check does the rejecting: the decode pool never binds here."))

exercise(Exercise(
    "08.rejected_tokens",
    f"Question 3 [what rejection costs]: at {_REJECT_SPEED:g}× replay of the conversation trace, Mooncake rejects "
    "some requests. What percentage of all prompt tokens do they carry?",
    answer=_rejected_tokens_percent, unit="%", rel_tol=0.03,
    hint=f"Read the row {_REJECT_SPEED:g}× of the rejection table in section 3, or compute "
         f"`c.rejection_profile('conversation', ({_REJECT_SPEED:g},)).rejected_tokens` (a fraction).",
    why="Several times their share of the requests: the rejected requests are the long ones. That is why "
        "counting tokens instead of requests cuts Mooncake's capacity."))

exercise(Exercise(
    "08.network_break_even",
    "Question 4 [level-3 cost]: take 20 req/s of the conversation trace. Above what price of moving KV "
    "between the pools (USD per TB) does 'H800 prefill + H20 decode' stop being cheaper than the cheaper "
    "homogeneous fleet?",
    answer=_break_even_usd_per_tb, unit="USD/TB", rel_tol=0.03,
    hint="`c.network_break_even_usd_per_tb()` gives it, or the note under the fleet-cost chart.",
    why="A few cents per TB. A 12k-token prompt carries ≈ 3.9 GB of KV, so only a network that is already "
        "paid for (one RDMA fabric) keeps heterogeneity cheaper. Cloud cross-zone traffic (20 USD/TB) costs "
        "hundreds of times the saving."))

exercise(Exercise(
    "08.least_ttft",
    "Question 5 [your Conductor]: a policy `least_ttft` returns `int(np.argmin(view.ttft_s))`, the instance with "
    "the smallest estimated TTFT. Work it out before you run it: which built-in policy does it tie exactly? "
    "'random', 'load', 'cache_aware' or 'kvcentric'.",
    answer=_same_as_least_ttft, choices=("random", "load", "cache_aware", "kvcentric"),
    synonyms={"cache-aware": "cache_aware", "Algorithm 1": "kvcentric", "KVCache-centric": "kvcentric"},
    hint="`view.ttft_s` = wait + fetch + prefill, with the fetch Algorithm 1 would make. Which policy minimises "
         "exactly that? Run `c.policy_leaderboard({\"least_ttft\": least_ttft})` and compare the rows.",
    why="Taking the smallest wait + fetch + prefill, with Algorithm 1's fetch rule, is Algorithm 1 itself."))
