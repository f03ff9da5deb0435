"""Statements of lecture 00 about real systems, each with its source (see :mod:`mooncake_lab.claims.statements`)."""
from __future__ import annotations

from functools import partial

from . import not_a_statement, statement

S, N = partial(statement, "00"), partial(not_a_statement, "00")
V3, FAST = "arXiv 2407.00079 v3", "FAST'25"
TRACE = "kvcache-ai/Mooncake@3cca71da:FAST25-release/traces/conversation_trace.jsonl"
OUTLINE = "a row of the course outline: what a lecture covers"

S("Its\nprompts are **long** — the released Mooncake conversation trace", f"{FAST} Table 2; {TRACE}")
S("Mooncake is the serving system built", f"{FAST} abstract")
N("This course rebuilds Mooncake's ideas one", "about the course, not about Mooncake")
N("define TTFT, TBT, SLO and goodput,", "a learning goal")
N("name the levels of prefill/decode (P/D)", "a learning goal")
S("| model | LLaMA2-70B (arXiv) |", f"{V3} §8.1")
S("| request | the trace's requests", f"{FAST} Table 2")
S("| coupled engine | vLLM in the", f"{V3} §8")
S("The average shape is the conversation", f"{FAST} Table 2")
S("Lecture 06 makes TBT one number", f"{FAST} §5.1 (TBT = mean of the longest 10% of a request's token intervals)")
S("| 0 | separate phases, scheduled",
  "https://docs.vllm.ai/en/latest/configuration/optimization.html (chunked prefill: prefill and decode in one batch)")
S("| 2 | separate nodes on one network",
  f"{FAST} §3; DistServe (OSDI'24) abstract; Splitwise (ISCA'24) abstract")
S("Level 2 needs a fast network: Mooncake's", f"{V3} §8.1 (\"up to 800 Gbps\")")
S("That is the second big idea: Mooncake", f"{V3} §3")
S("Kimi runs near capacity, and requests", f"{V3} §7")
S("Mooncake's scheduler, the", f"{V3} §3; {V3} Algorithm 1")
N("| `03_trace_and_prefix_cache` | the real Mooncake", OUTLINE)
N("| `04_kvcache_centric_scheduling` | the Conductor's Algorithm", OUTLINE)
N("| `06_decode_slos_goodput` | continuous batching, KV", OUTLINE)
N("| `07_overload_scheduling` | baseline, early and", OUTLINE)
N("| `08_capstone` | Mooncake end to", OUTLINE)
N("| `lab_mooncake_store` | the real, open-source", OUTLINE)
N("| `09_after_mooncake` | the KV-aware routers", OUTLINE)
S("Mooncake runs prefill and decode on", f"{V3} §8.1")
S("| SLOs of the real-workload runs", f"{V3} §8")
S("| co-locating prefill with decode hurts", f"{V3} §8")
S("| per-token cost of LLaMA2-70B |", f"{FAST} §2.2")
S("* Mooncake disaggregates the phases onto", f"{V3} §3; {V3} §8")
S("Level of P/D disaggregation of Mooncake", f"{V3} §3; {V3} §8.1", where="00.level")
