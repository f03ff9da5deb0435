"""Statements of lecture 06 about real systems, each with its source (see :mod:`mooncake_lab.claims.statements`)."""
from __future__ import annotations

from functools import partial

from . import not_a_statement, restate, statement

S, N = partial(statement, "06"), partial(not_a_statement, "06")
V3, FAST = "arXiv 2407.00079 v3", "FAST'25"
BLIS = "inference-sim/inference-sim@29e84d31:docs/design/roofline.md (hardware_config.json entry)"
VLLM_MEM = "https://docs.vllm.ai/en/latest/configuration/engine_args.html (--gpu-memory-utilization, default 0.9)"
VLLM_OPT = "https://docs.vllm.ai/en/stable/configuration/optimization/ (preemption by recompute; chunked prefill)"
VLLM_V1_SCHED = "vllm-project/vllm@b4622cf9:vllm/v1/core/sched/scheduler.py (preempts the last running request)"
CHUNK512 = "https://github.com/vllm-project/vllm/pull/4580 (chunked prefill doc: max_num_batched_tokens 512 by default)"
VLLM_V1_BUDGET = ("vllm-project/vllm@99d7eb5d:vllm/engine/arg_utils.py (EngineArgs.get_batch_defaults: 8,192 tokens on "
                  "GPUs of >= 70 GiB whose name has no \"a100\", 2,048 on others, OpenAI server)")
VLLM_V1_STEP = ("vllm-project/vllm@b4622cf9:vllm/v1/core/sched/scheduler.py (running requests' decode tokens come out "
                "of the same token_budget as the prefill chunks)")
HYBRID = f"{V3} §5 (a prefill inlined into the decoding batch)"
SYNTHETIC = "kvcache-ai/Mooncake@3cca71da:FAST25-release/traces/synthetic_trace.jsonl (Mooncake's synthetic trace)"
SIM = "about the course's simulated engine, not the real system"

S("It is also about the number Kimi", f"{FAST} §5.1; {V3} §7")
S("The SLOs are FAST'25's.", f"{FAST} §5.1")
S("As in FAST'25, a request's TBT is", f"{FAST} §5.1")
N("show why a coupled engine, which", "a learning goal")
N("tell FAST'25's capacity metric", "a learning goal")
S("`modern` (BLIS defaults for a current", BLIS)
S("| cluster | clusters of equal node count", f"{FAST} §5.1; {FAST} Fig. 1")
S("| trace | the conversation trace,", f"{FAST} §5.1; {SYNTHETIC}")
S("| KV memory | — | weights and KV fill", VLLM_MEM)
S("| the vLLM baseline | vLLM v0.5.1", f"{FAST} §5.1; {FAST} Fig. 1")
S("| chunked prefill | vLLM's |", f"{FAST} Fig. 1; {CHUNK512}")
S("| Mooncake's decode | output lengths", f"{V3} §7.4; {V3} §3")
S("| prefix caching | vLLM with and", f"{FAST} Fig. 1")
S("| DRAM ↔ HBM | a cached prefix", f"{V3} §3 (cached and received KV loaded into HBM)")
S("| short prefills | inlined into", HYBRID)
S("| node roles | fixed; switched", f"{FAST} §5.5 (fixed P:D; roles switched only on large load shifts)")
S("This is vLLM's default (`gpu_memory_utilization`)", VLLM_MEM)
S("A Mooncake decode node admits", f"{V3} §3 (continuous batching on the decode instance)")
S("Its decode node was chosen when it", f"{V3} Algorithm 1")
S("A node that runs out\nof KV memory", f"{VLLM_OPT}; {VLLM_V1_SCHED}")
S("In a vLLM-like **coupled** engine", "https://docs.vllm.ai/en/stable/configuration/optimization/ (chunked prefill)")
S("In FAST'25 (Figs 1, 6 and 7) vLLM", f"{FAST} Fig. 1; {FAST} Fig. 6 and 7")
N("It reserves each request's prompt +", SIM)
S("We cannot tell which of vLLM v0.5.1's", f"{FAST} Fig. 1; {FAST} §5.1")
S('So "chunked prefill is nearly as good', f"{FAST} Fig. 1")
S("**Effective request capacity** is FAST'25's", f"{FAST} §5.1; {FAST} Fig. 1")
S("The paper measures it for Mooncake", f"{FAST} Fig. 1")
S("Below: our five clusters (16 nodes", f"{FAST} Fig. 1 (read from the rendered figure)")
N('"vLLM-like" is the coupled engine.', "names the course's simulated engine")
S("The paper's real vLLM served only", f"{FAST} Fig. 1")
N("Our vLLM-like engine knows every", SIM)
S("Mooncake's decode does not know them", f"{V3} §7.4")
N("A control gives Mooncake the\ncoupled", SIM)
S("So its ratios must **not**\nbe set", f"{FAST} §5.1; {FAST} Fig. 1")
N("On the released trace it goes even", SIM)
S("The last two rows use vLLM V1's", VLLM_V1_BUDGET)
S("Our nodes' A800s have 80 GiB each", VLLM_V1_BUDGET)
S("vLLM's budget also counts\nthe decode", VLLM_V1_STEP)
S("FAST'25 found the best ratio near 1:1.", f"{FAST} §5.5; {FAST} Fig. 15")
S("Mooncake does not send every prompt", HYBRID)
S('A prefill "is inlined into the', HYBRID)
N("`inline_prefill=True` switches", "the course's simulator switch and its table")
S("The table runs Mooncake at 2× on", SYNTHETIC)
N("A request is inlined when all of", "the course's simulator rule (mooncake_lab.sim.reference), not the real system")
N("* the decode node the Conductor", "the course's simulator rule (mooncake_lab.sim.reference), not the real system")
S("It sets each of the paper's findings", f"{FAST} §5.1")
S("What is its TBT as\nFAST'25 measures it,", f"{FAST} §5.1")
N("*Question 4 [90 % capacity]: at TBT", "a question about the course's simulated sweep")
S("FAST'25's request capacity ratio is", f"{FAST} §5.1; {FAST} Fig. 1")
restate("06", "solutions", "It is also about the number Kimi", "The SLOs are FAST'25's.",
        "As in FAST'25, a request's TBT is", "show why a coupled engine, which", "tell FAST'25's capacity metric")
N("In our sweep at TBT ≤ 100 ms, how", "a question about the course's simulated sweep", where="06.capacity_gain")
S("FAST'25's +59% … +498% are gains", f"{FAST} §5.1; {FAST} Fig. 1", where="06.capacity_gain")
S("vLLM v0.5's 512 default is on the safe", CHUNK512, where="06.largest_chunk")
S("What is its TBT in ms, as FAST'25", f"{FAST} §5.1", where="06.stall_tail")

# section 8: roles that switch
ROLES = f"{FAST} §5.5 (\"only switching node roles when significant load fluctuations occur\")"
S("FAST'25 keeps the P:D ratio fixed,", ROLES)
S("The paper gives no rule and no\ncost.", f"{FAST} §5.5 (no rule, threshold or switch cost is given)")
N("* Every 60 s the Conductor compares", SIM)
S("That is why Mooncake fixes the", ROLES)
N("A well-chosen\n  fixed split needs", "the course's finding of §8, computed in the notebook")
N("In this run no decode node of Mooncake's pair", SIM + " (inline_prefill off: lecture 06 §7 turns the hybrid on)",
  where="06.stalled_batch")
