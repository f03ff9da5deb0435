"""Exercises of lecture 04 — KVCache-centric scheduling.

Expected answers come from :mod:`mooncake_lab.experiments.l04_scheduling` (the worked example, the
offered-load computation and the memoised policy runs) on the same trace the notebook uses: the real
conversation trace if it is available, else its labelled synthetic stand-in.
"""
from __future__ import annotations

from . import Exercise, exercise

_HIGH_THRESHOLD = 8.0  # Question 2's balancing threshold: above the worked example's best/local ratio of 4


def _choice(threshold: float) -> int:
    from ..experiments.l04_scheduling import worked_example

    return int(worked_example(threshold=threshold).loc["kvcentric", "prefill_instance"])


def _balanced_speed() -> float:
    from ..experiments.l04_scheduling import balanced_replay_speed

    return balanced_replay_speed("conversation")


def _hit_gain() -> float:
    from ..experiments.l04_scheduling import policy_comparison

    df = policy_comparison()
    return float(df.loc["cache_aware", "hit_ratio"] / df.loc["load", "hit_ratio"])


def _random_over_kvcentric() -> float:
    from ..experiments.l04_scheduling import policy_comparison

    df = policy_comparison()
    return float(df.loc["random", "ttft_mean_s"] / df.loc["kvcentric", "ttft_mean_s"])


exercise(Exercise(
    "04.worked_choice",
    "Question 1 [Algorithm 1]: in the worked example (balancing threshold 1), which prefill instance "
    "(0, 1 or 2) does the KVCache-centric policy choose?",
    answer=lambda: _choice(1.0), unit="instance", rel_tol=0.0,
    hint="Add queue + transfer + prefill for each instance (the `table['kvcentric_s']` column) and take "
         "the smallest; fetching is allowed wherever best/local ≥ the threshold.",
    why="instance 1 is idle and already holds 4 of the 16 document blocks: fetching the other 12 over RDMA "
        "takes ≈ 23 ms, then only 1,808 tokens are computed."))

exercise(Exercise(
    "04.threshold_choice",
    f"Question 2 [threshold]: same request, but kvcache_balancing_threshold = {_HIGH_THRESHOLD:g}. Which instance now?",
    answer=lambda: _choice(_HIGH_THRESHOLD), unit="instance", rel_tol=0.0,
    hint="Instance 1's ratio best/local is 16/4 = 4 < 8, so it must use its own 4 blocks; instance 2 holds "
         "nothing (ratio ∞) and may still fetch.",
    why="instance 2, although busy for another 0.55 s: fetching all 16 blocks and computing 1,808 tokens beats "
        "recomputing 7,952 tokens on instance 1."))

exercise(Exercise(
    "04.balanced_speed",
    "Question 3 [offered load]: under the calibrated preset, at what replay speed of the conversation trace does "
    "the prefill work it offers without any cache equal the capacity of 8 prefill instances? Give it to two decimals.",
    # two decimals of a speed near 0.39 are within ±0.005 of it, 1.3%: 0.39 passes, the rounder 0.4 (2.3% off) does not
    answer=_balanced_speed, unit="×", rel_tol=0.013,
    hint="`sched.offered_prefill_load(trace)` at 1× is Σ prefill_time(L, 0) / (8 × duration); it grows linearly "
         "with speed (`sched.balanced_replay_speed(trace)` does the division).",
    why="On the released trace ≈ 1/2.55 ≈ 0.39×: the 0.4× the lecture replays at is where the pool would just "
        "keep up if nothing hit."))

exercise(Exercise(
    "04.hit_gain",
    "Question 4 [hit ratio]: at the lecture's replay speed, how many times higher is the cache-aware policy's "
    "prefix-cache hit ratio than load balancing's? Give it to one decimal.",
    # one decimal of a ratio ≥ 1.7 is within 3% of it (the lecture's prose says "more than doubles", not a number)
    answer=_hit_gain, unit="×", rel_tol=0.03,
    hint="Divide two hit_ratio values of `comp`: `comp.loc['cache_aware', 'hit_ratio'] / comp.loc['load', 'hit_ratio']`, "
         "and round to one decimal.",
    why="load balancing scatters a chat's turns over 8 local caches (like random routing in lecture 03); "
        "cache-aware sends a turn back to the instance that holds its earlier turns."))

exercise(Exercise(
    "04.random_over_kvcentric",
    "Question 5 [Fig. 8]: how many times longer is random's mean TTFT than KVCache-centric's in our run? "
    "(The paper's ratio is 92.07 / 6.26 = 14.7.)",
    answer=_random_over_kvcentric, unit="×", rel_tol=0.03,
    hint="Divide the two ttft_mean_s values of `comp`: "
         "`comp.loc['random', 'ttft_mean_s'] / comp.loc['kvcentric', 'ttft_mean_s']`.",
    why="far more than 14.7 here: random leaves 8 independent queues at ~93% utilisation (released trace), where the wait "
        "grows like ρ/(1−ρ) — close to saturation, small differences in load give huge differences in TTFT."))


def _document_reaches_p7() -> float:
    from ..experiments.watch import hot_document, holds_document_s

    return holds_document_s(hot_document().runs["KVCache-centric"], 7)


exercise(Exercise(
    "04.document_reaches",
    "Question 6 [watch]: in the hot document's view, under KVCache-centric, at which second does the document "
    "reach P7? That is where P7's first fetch (dark blue) ends. Give it to half a second.",
    answer=_document_reaches_p7, unit="s", rel_tol=0.0, abs_tol=0.5,
    hint="In the KVCache-centric run, find P7's lane. Its first request waits for the fetch (light blue), then "
         "fetches (a thin dark-blue bar), then computes. Read the time axis where the dark blue ends.",
    why="the document exists only once P0 has computed it. The Conductor let P7 wait for that rather than compute "
        "the document again; the fetch itself takes a few hundredths of a second."))
