"""Exercises of lecture 03 — the trace and the prefix cache.

Expected answers are computed from the package (the KV size from :mod:`mooncake_lab.models`, hit
ratios from :mod:`mooncake_lab.experiments.l03_cache`) on the same trace the notebook uses: the real
conversation trace if it is available, else its labelled synthetic stand-in.
"""
from __future__ import annotations

from . import Exercise, exercise

_TB = 1e12  # bytes in 1 TB (decimal), as in FAST'25 §2.2 "1 TB of DRAM ≈ 3M tokens"


def _tokens_per_tb() -> float:
    from ..models import get_model

    return _TB / get_model("llama2-70b").kv_bytes_per_token()


def _blocks_per_tb() -> int:
    from ..experiments.l03_cache import dram_bytes_to_blocks

    return dram_bytes_to_blocks(_TB)


def _hit_at_1tb() -> float:
    from ..experiments.l03_cache import hit_curve

    return float(hit_curve("conversation").hit_ratio([_blocks_per_tb()])[0])


def _global_over_local() -> float:
    from ..experiments.l03_cache import local_vs_global

    df = local_vs_global("conversation", routings=("random",))
    return float(df["global_over_this"].iloc[1])


def _best_routing() -> str:
    from ..experiments.l03_cache import ROUTINGS, local_vs_global

    df = local_vs_global("conversation", routings=ROUTINGS).iloc[1:]
    return str(df.loc[df["hit_ratio"].idxmax(), "routing"])


exercise(Exercise(
    "03.tokens_per_tb",
    "Question 1 [KV size]: how many tokens of LLaMA2-70B KV (BF16) fit in 1 TB (10^12 bytes) of DRAM?",
    answer=_tokens_per_tb, unit="tokens", rel_tol=0.02,   # 3.05M, and the paper's "about 3M" (1.7% off)
    hint="KV bytes per token = 2 (K and V) × layers × KV heads × head dim × 2 bytes; divide 10^12 by it.",
    why="10^12 B / 327,680 B per token ≈ 3.05M tokens: FAST'25's '1 TB holds about 3M tokens'."))

exercise(Exercise(
    "03.blocks_per_tb",
    "Question 2 [DRAM]: how many whole 512-token blocks of LLaMA2-70B KV fit in 1 TB of DRAM?",
    answer=_blocks_per_tb, unit="blocks", rel_tol=0.001,
    hint="One block = 512 tokens × 320 KiB = 160 MiB; round down.",
    why="10^12 // (512 × 327,680) = 5,960 blocks — the cache size a single node's DRAM buys."))

exercise(Exercise(
    "03.hit_1tb",
    "Question 3 [hit ratio]: with one global LRU pool of 1 TB (your answer to Question 2, in blocks), what "
    "token-weighted hit ratio does the conversation trace reach? (In %, e.g. 25%.)",
    answer=_hit_at_1tb, unit="", rel_tol=0.03,
    hint="Read the curve at the 1 TB line, or compute it: "
         "`cache.hit_curve(trace).hit_ratio([cache.dram_bytes_to_blocks(1e12)])`.",
    why="Far below the infinite-cache ratio: 1 TB holds 5,960 blocks, a small fraction of the distinct blocks the trace touches."))

exercise(Exercise(
    "03.global_over_local",
    "Question 4 [pool layout]: 10 instances each cache 1 TB (5,960 blocks) locally, requests routed "
    "uniformly at random; how many times higher is the hit ratio of one global pool of 10 TB?",
    answer=_global_over_local, unit="×", rel_tol=0.03,
    hint="The pool table of §6: the random-routing row, column 'global pool ÷ this (×)'.",
    why="Random routing scatters each conversation's turns over 10 caches, each a tenth of the pool."))

exercise(Exercise(
    "03.best_routing",
    "Question 5 [routing]: with the same 10 local caches, which routing — 'random', 'round_robin' or "
    "'session' — comes closest to the global pool?",
    answer=_best_routing, choices=("random", "round_robin", "session"),
    synonyms={"sticky": "session", "sticky session": "session"},   # the lecture's words for it
    hint="The pool table of §6: which local-cache row has the highest hit ratio (%)?",
    why="Sticky 'session' routing keeps a chat's turns on one instance, so its blocks are cached where it returns."))
