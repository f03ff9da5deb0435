"""Exercises of lecture 07 — overload-oriented scheduling.

Expected answers come from :mod:`mooncake_lab.experiments.l07_overload` (memoised runs on the
toolagent-like trace at 2×, 8P+8D, preset ``modern``, 40k-token decode nodes; the speed sweep).
"""
from __future__ import annotations

from . import Exercise, exercise


def _fit_small() -> float:
    from ..experiments.l07_overload import DEFAULT_CONFIG, requests_per_node

    return requests_per_node(DEFAULT_CONFIG["decode_kv_capacity_tokens"])


def _comparison():
    from ..experiments.l07_overload import overload_comparison

    return overload_comparison()


def _wasted() -> float:
    return float(_comparison().loc["baseline", "wasted_prefill_s"])


def _most_completed() -> str:
    return str(_comparison()["completed"].idxmax())


def _corr_sign() -> str:
    return "negative" if float(_comparison().loc["early", "load_corr"]) < 0 else "positive"


def _crossover() -> float:
    from ..experiments.l07_overload import crossover_speed, speed_sweep

    return crossover_speed(speed_sweep(progress=False))


exercise(Exercise(
    "07.requests_per_node",
    "Question 1 [KV capacity]: how many toolagent-like requests of mean size (input + output tokens) fit in "
    "the KV memory of one 40,000-token decode node? Give the ratio, not a whole number.",
    answer=_fit_small, unit="requests", rel_tol=0.03,
    hint="Divide the node's capacity by the trace's mean request size, mean(input_len + output_len) "
         "(≈ 8.5k tokens).",
    why="A node that holds fewer than 5 requests is full most of the time at 2×. That is the decode-bound "
        "overload of the paper's experiment. A real node (1.47M tokens) holds ≈ 172."))

exercise(Exercise(
    "07.wasted_prefill",
    "Question 2 [wasted prefill]: at 2× replay (toolagent-like, 8P+8D, 40k-token decode nodes), how many "
    "seconds of prefill does the baseline spend on requests it then rejects?",
    answer=_wasted, unit="s", rel_tol=0.03,
    hint="The third panel of §4's figure, or comp.loc['baseline', 'wasted_prefill_s']. Only the baseline "
         "rejects after prefill.",
    why="That is about half an hour of one prefill node's time. It is spread over 8 nodes that are ≈ 1% "
        "loaded, so here it delays nobody."))

exercise(Exercise(
    "07.most_completed",
    "Question 3 [completions]: at 2× replay, which admission policy completes the most requests: "
    "'baseline', 'early' or 'predicted'?",
    answer=_most_completed, choices=("baseline", "early", "predicted"),
    hint="Look at the completed column, and at the mean size of what each policy rejects (§7).",
    why="Its late check is a per-node fit, so it mostly rejects big requests and lets small ones through. "
        "Counting requests rewards that. The paper's Table 3 found the opposite."))

exercise(Exercise(
    "07.corr_sign",
    "Question 4 [anti-phase]: under early rejection at 2× (toolagent-like), is the correlation between the "
    "sampled prefill and decode loads 'positive' or 'negative'?",
    answer=_corr_sign, choices=("positive", "negative"),
    hint="The note under §6's figure gives r for both traces; or comp.loc['early', 'load_corr'].",
    why="When decode is full, early rejection turns arrivals away and prefill idles. When decode drains, it "
        "admits a burst that loads prefill while decode is still low (arXiv Fig. 9–10)."))

exercise(Exercise(
    "07.crossover_speed",
    "Question 5 [when the ordering flips]: in the lecture's speed sweep (0.75× … 2×), what is the lowest "
    "swept replay speed at which the baseline rejects FEWER requests than early rejection?",
    answer=_crossover, unit="×", rel_tol=0.0,
    hint="Read §7's table: the first speed of the grid (0.75, 1, 1.25, …) whose baseline count is below "
         "early's. The lines cross between two grid points (≈ 1.4×, crossing_speed); the answer is the "
         "grid point after the crossing.",
    why="From there on the overload is deep enough that the baseline's size-selective late check beats a "
        "size-blind early one."))


def _prediction_fewer() -> int:
    from ..experiments.watch import OSCILLATION_S, oscillation, rejected_by

    runs = oscillation().runs
    return rejected_by(runs["early rejection"], OSCILLATION_S) - rejected_by(runs["prediction"], OSCILLATION_S)


exercise(Exercise(
    "07.prediction_fewer",
    "Question 6 [watch]: in the view of section 6, with the clock at the end of the first ten minutes, how many "
    "fewer requests has prediction rejected than early rejection?",
    answer=_prediction_fewer, unit="requests", rel_tol=0.0,
    hint="The count beside each run's arrivals lane is its rejections up to the clock (\"rej.\"). Subtract "
         "prediction's from early rejection's.",
    why="prediction counts the requests that will still be decoding when this one's prefill is done, not those "
        "decoding now. Requests that finish by then free their memory, so fewer arrivals are turned away."))
