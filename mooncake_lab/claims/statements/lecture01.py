"""Statements of lecture 01 about real systems, each with its source (see :mod:`mooncake_lab.claims.statements`)."""
from __future__ import annotations

from functools import partial

from . import not_a_statement, statement

S, N = partial(statement, "01"), partial(not_a_statement, "01")
V3, FAST = "arXiv 2407.00079 v3", "FAST'25"
SPLITWISE = "Mutinifni/splitwise-sim@37808801:data/perf_model.csv"
BLIS = "inference-sim/inference-sim@29e84d31:docs/design/roofline.md (hardware_config.json entry)"
VLLM_MEM = "https://docs.vllm.ai/en/latest/configuration/engine_args.html (--gpu-memory-utilization, default 0.9)"

S("We use the paper's setting: the", f"{V3} §8.1")
N("derive by hand the FLOPs and KV", "a learning goal")
S("| model | dummy LLaMA2-70B (arXiv);", f"{V3} §8.1; {FAST} Table 1")
S("| FLOP count | FAST'25 Eq. 1: a", f"{FAST} Eq. 1")
S("| measurements | — | SplitwiseSim's", SPLITWISE)
S("| KV memory | — | 90% of HBM usable", VLLM_MEM)
S("The FAST'25 paper writes the prefill", f"{FAST} Eq. 1")
S("FAST'25 does not show how it got", f"{FAST} §2.3 (Eq. 1); {FAST} Table 1")
N('Neither count is "wrong" for the', "the course's judgement of two counts, stated as such")
S("The node's KV cache holds ≈ 1.47", VLLM_MEM)
S("The modern preset takes the documented", BLIS)
S("The fit blames the growth between", "FlashAttention-2 (Dao 2023) §4.1")
S('| KV per token, LLaMA2-70B | "320', f"{FAST} §2.2")
S("| 8k prefill FLOPs | 1.14 PFLOP", f"{FAST} Eq. 1")
S("| TP8 8k prefill | 1.55 s measured", SPLITWISE)
S("| TP8 decode step, batch 1 | 45", SPLITWISE)
S("A 512-token block is therefore", f"{FAST} §2.2", where="solutions")
