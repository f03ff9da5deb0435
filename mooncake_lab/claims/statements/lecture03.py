"""Statements of lecture 03 about real systems, each with its source (see :mod:`mooncake_lab.claims.statements`)."""
from __future__ import annotations

from functools import partial

from . import not_a_statement, restate, statement

S, N = partial(statement, "03"), partial(not_a_statement, "03")
V3, FAST = "arXiv 2407.00079 v3", "FAST'25"
TRACES = "kvcache-ai/Mooncake@3cca71da:FAST25-release/traces"

N("load a Mooncake trace and explore", "a learning goal")
S("put our numbers beside the paper's", f"{FAST} Table 2; {FAST} Fig. 10; {V3} Table 1")
S("| trace | FAST'25 Table 2: conversation,", f"{FAST} Table 2; {V3} Table 1; {TRACES}")
S("| KV per token | 320 KB for a LLaMA2-70B-sized", f"{FAST} §2.2")
S('| "1 TB of DRAM" | ≈ 3M tokens', f"{FAST} §2.2")
S("| eviction | LRU, LFU and LengthAware,", f"{V3} §4.2")
S("| where the cache lives | one global", f"{FAST} Fig. 10; {V3} Algorithm 1")
S("Three workloads: **conversation**", f"{FAST} Table 2; {FAST} §5.2.1")
S("The real tool & agent trace is", f"{FAST} Table 2; {TRACES}/toolagent_trace.jsonl")
S("That asymmetry is why prefill dominates", f"{FAST} Table 2 (mean input 12,035 vs output 343 tokens); {FAST} §2.3")
S('That is FAST\'25\'s point: "a local', f"{FAST} §2.2")
S("FAST'25 Table 2 calls it the\n ", f"{FAST} Table 2")
S("* The squares are arXiv v3 Table", f"{V3} Table 1")
S("The squares follow the chosen policy's", f"{V3} Table 1")
S("arXiv v3 §4.2 compares it with\ntwo", f"{V3} §4.2; {V3} Table 1")
S("The paper gives no more detail,", f"{V3} §4.2")
S("`cache.arxiv_trace()` would use", "kvcache-ai/Mooncake@3cca71da:arxiv-trace/mooncake_trace.jsonl")
S("At 1k blocks the paper's three", f"{V3} Table 1")
S("The arXiv trace is not shipped.", "kvcache-ai/Mooncake@3cca71da:arxiv-trace/mooncake_trace.jsonl (> 4 MiB, not in the package)")
S("The paper does not say which it", f"{V3} §4.2; {V3} Table 1")
S("That is the likely reason ours", f"{V3} Table 1")
S("The paper may age or cap its counts;", f"{V3} §4.2")
S("Mooncake pools the DRAM of all", f"{V3} §3; {FAST} §3")
S("FAST'25 Fig. 10 reports **×2.22**", f"{FAST} Fig. 10")
S("The paper's local caches sat behind", f"{FAST} §4.1; {FAST} Fig. 10")
S("The paper's ×2.22 lies between,", f"{FAST} Fig. 10; {FAST} §4.1")
restate("03", "solutions", "put our numbers beside the paper's", "| trace | FAST'25 Table 2: conversation,",
        "| KV per token | 320 KB for a LLaMA2-70B-sized", '| "1 TB of DRAM" | ≈ 3M tokens',
        "| eviction | LRU, LFU and LengthAware,", "| where the cache lives | one global",
        "load a Mooncake trace and explore")
S("10^12 B / 327,680 B per token ≈", f"{FAST} §2.2", where="03.tokens_per_tb")
