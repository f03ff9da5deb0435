"""Exercises of lecture 06 — decode, SLOs and goodput.

Expected answers come from :mod:`mooncake_lab.roofline` and :mod:`mooncake_lab.experiments.l06_goodput`.
"""
from __future__ import annotations


from . import Exercise, exercise

_CTX = 12_000      # Question 1: tokens per sequence (≈ the conversation trace's mean prompt)
_PROMPT = 32_768   # Question 2: the long prompt that stalls the batch
_STEP_S = 0.020    # Question 2: decode step time, s
_INTERVALS = 100   # Question 2: token intervals of the request (101 output tokens)
_BATCH = 16        # Question 3: sequences in the decode batch
_K_STEP = 128      # Question 3: chunk sizes tried are multiples of this
_BUDGET_S = 0.1    # Question 3: iteration budget, s (the 100 ms TBT SLO)


def _max_batch() -> int:
    from ..roofline import decode_kv_capacity_tokens

    return int(decode_kv_capacity_tokens("llama2-70b", "a800x8") // _CTX)


def _stalled_tail_ms() -> float:
    from ..experiments.l06_goodput import PRESET
    from ..roofline import prefill_time

    p = prefill_time("llama2-70b", "a800x8", _PROMPT, 0, preset=PRESET)
    # 100 intervals → the tail is the mean of the longest 10: the stalled one (p + a step) and 9 steps
    k = (_INTERVALS + 9) // 10
    return (p + _STEP_S + (k - 1) * _STEP_S) / k * 1e3


def _largest_chunk() -> int:
    from ..experiments.l06_goodput import PRESET
    from ..roofline import decode_step_time, prefill_time

    step = decode_step_time("llama2-70b", "a800x8", _BATCH, _BATCH * _CTX, preset=PRESET)
    best = 0
    for k in range(_K_STEP, 8193, _K_STEP):
        if prefill_time("llama2-70b", "a800x8", k, 0, preset=PRESET) + step <= _BUDGET_S:
            best = k
    return best


def _capacity_gain() -> float:
    from ..experiments import l06_goodput as g

    cap = g.capacity_table(g.attainment_curve(tbt_slos_ms=(100,), progress=False))
    return float(cap.loc["mooncake", 100] / cap.loc["coupled", 100])


exercise(Exercise(
    "06.max_batch",
    f"Question 1 [KV limit]: how many sequences of {_CTX:,} tokens of context fit at once in the KV memory of "
    "one 8×A800 decode node serving LLaMA2-70B? Count 90% of 640 GiB minus the weights, and 320 KiB per token "
    "(mind the units: GiB and KiB are binary, the weights' GB decimal).",
    answer=_max_batch, unit="sequences", rel_tol=0.0,
    hint="Divide decode_kv_capacity_tokens('llama2-70b', 'a800x8') by the tokens per sequence, rounding down.",
    why="(576 GiB − 138 GB) / 327,680 B ≈ 1.47 M tokens → ≈ 122 sequences of 12k. Memory, not compute, caps the batch."))

exercise(Exercise(
    "06.stall_tail",
    f"Question 2 [stall]: a request decodes {_INTERVALS + 1} tokens ({_INTERVALS} intervals) at {_STEP_S * 1e3:g} ms per step on a "
    f"coupled node without chunking. Once, a {_PROMPT:,}-token prompt is prefilled in between (preset 'modern'). "
    "What is its TBT in ms, as FAST'25 measures it: the mean of the longest 10% of intervals?",
    answer=_stalled_tail_ms, unit="ms", rel_tol=0.02,
    hint="The stalled interval is the prefill plus one step; the other nine longest are plain steps. The prefill "
         "time, in s: `mooncake_lab.roofline.prefill_time('llama2-70b', 'a800x8', 32768, 0, preset='modern')` "
         "(give the preset: the default is 'ideal').",
    why="One prefill of ≈ 3.6 s lifts the tail mean to ≈ 380 ms: a single stall breaks even a 300 ms SLO."))

exercise(Exercise(
    "06.largest_chunk",
    f"Question 3 [chunk budget]: with chunked prefill, an iteration is a chunk of k prompt tokens plus a decode step "
    f"of {_BATCH} sequences × {_CTX:,} tokens (preset 'modern'). What is the largest k (a multiple of {_K_STEP}, no "
    f"cached prefix) that keeps the iteration ≤ {_BUDGET_S * 1e3:g} ms?",
    answer=_largest_chunk, unit="tokens", rel_tol=0.0,
    hint="Loop k over 128, 256, … and test prefill_time(k) + decode_step_time(16, 16 × 12,000) ≤ 0.1 s, "
         "both from `mooncake_lab.roofline` with `preset='modern'`.",
    why="The decode step costs ≈ 19 ms, leaving ≈ 81 ms for the chunk: ≈ 900 tokens. vLLM v0.5's 512 default is on the safe side."))

exercise(Exercise(
    "06.capacity_gain",
    "Question 4 [90 % capacity]: the 90 % capacity is the highest request rate at which ≥ 90% of requests meet "
    "both SLOs. In our sweep at TBT ≤ 100 ms, how many times the coupled engine's (no chunking) 90 % capacity does "
    "Mooncake 8P+8D reach?",
    answer=_capacity_gain, unit="×", rel_tol=0.03,
    hint="capacity_table(attainment_curve()) has one row per system: divide mooncake's by coupled's.",
    why="A ratio of rates, in our own metric. FAST'25's +59% … +498% are gains in a different one: the share of "
        "requests meeting the SLOs at the trace's own load (request_capacity_ratio). Do not compare the two."))


def _stalled_by_prefill() -> int:
    from ..experiments.watch import WATCH_END_S, interference, longest_prefill

    return longest_prefill(interference().runs["coupled"], WATCH_END_S - 30.0, WATCH_END_S)["stalled"]


exercise(Exercise(
    "06.stalled_batch",
    "Question 5 [watch]: in the coupled run of the view in section 4, take the longest prefill (orange bar) of "
    "the window the view opens on. How many requests sit in that node's decode batch while it runs?",
    answer=_stalled_by_prefill, unit="requests", rel_tol=0.0,
    hint="The note under the view names the node. Scrub the clock into the orange bar and read the number beside "
         "that node's decode lane, or hover over the lane.",
    why="each of them waits the whole prefill for its next token: one long prompt breaks the TBT of every request "
        "decoding on its node. In this run no decode node of Mooncake's pair prefills."))
