"""Statements of lecture 08 about real systems, each with its source (see :mod:`mooncake_lab.claims.statements`)."""
from __future__ import annotations

from functools import partial

from . import not_a_statement, restate, statement

S, N = partial(statement, "08"), partial(not_a_statement, "08")
V3, FAST = "arXiv 2407.00079 v3", "FAST'25"
ALG1 = f"{V3} Algorithm 1"
BLIS = "inference-sim/inference-sim@29e84d31:docs/design/roofline.md (hardware_config.json entry)"
VLLM_V1 = ("vllm-project/vllm@99d7eb5d:vllm/engine/arg_utils.py (EngineArgs.get_batch_defaults); "
           "https://docs.vllm.ai/en/stable/configuration/optimization/ (chunked prefill is always on in V1)")
CHUNK512 = "https://github.com/vllm-project/vllm/pull/4580 (chunked prefill doc: max_num_batched_tokens 512 by default)"
SIM = "about the course's simulated cluster, not the real system"
API = "describes the course's policy API (mooncake_lab.experiments), not the real Conductor"
GOAL = "a learning goal"

N("Seven lectures took Mooncake apart.", "about the course")
N("This one puts the pieces back together", "about the course")
N("compare Mooncake with coupled clusters", GOAL)
N("write your own Conductor policy", GOAL)
S("FAST'25's headline gains, +59 %", f"{FAST} §5.1; {FAST} Fig. 1")
S('The arXiv version reports "75 %', f"{V3} §8")
S("The table follows a request through", f"{V3} §3")
S("| Conductor | **KVCache-centric", ALG1)
S("In the **coupled** cluster each", f"{FAST} Fig. 1 (vLLM without chunked prefill)")
S("The **chunked coupled** cluster", CHUNK512)
S("vLLM V1 always chunks, with a server", VLLM_V1)
S("Early rejection makes Algorithm", ALG1)
S("| cluster | 8×A800 nodes | 16 nodes;", f"{FAST} §5.1; {FAST} §5.5")
S("| GPU speed | real GPUs and kernels", BLIS)
S("| early rejection | Algorithm 1,", f"{ALG1}; {V3} §7.4")
S("| baselines | vLLM v0.5.1 plain,", f"{FAST} Fig. 1, 6 and 7")
S("| output lengths | unknown until", f"{V3} §7.4")
S("| network | links shared by every", f"{V3} §4")
S("| DRAM ↔ HBM | cached and received", f"{V3} §3; {FAST} Fig. 14")
S("| prices (§6) | — (the paper prices",
  "DeepSeek-V3 (arXiv 2412.19437) Table 1 (2 USD per H800 GPU hour); "
  "https://aws.amazon.com/ec2/pricing/on-demand/ (data transfer between availability zones)")
S("The paper's gains are a different", f"{FAST} §5.1")
S("§5 sets our numbers beside the", f"{FAST} §5.1")
N("With early rejection, Mooncake", SIM)
N("Counted in tokens, Mooncake loses", SIM)
S("The paper counts requests.", f"{FAST} §5.1; {V3} §8")
N("Each mechanism's share is then", SIM)
N("* **The split itself** helps against", SIM)
S("87 GB/s is what Mooncake's transfer", f"{FAST} §5.4.1")
N("* **CPP groups of 2** *cost* a", SIM)
S("Our results beside the paper's", f"{FAST} §5.1; {V3} §8")
S("**What we reproduce**: Mooncake", f"{FAST} Fig. 1; {V3} §8")
S("**What we do not**: the paper's", f"{FAST} Fig. 1")
S("The paper's chunked vLLM was the", f"{FAST} Fig. 1")
N("Without early rejection, Mooncake", SIM)
S("The paper's vLLM, trace and exact", f"{FAST} §5.1; {V3} §8")
N("Our baselines get the same prefix", SIM)
N("`c.node_rates` gives a node's prefill", API)
N("The Conductor's choice of prefill", API)
N("* `view` has one entry per prefill", API)
N("Decode, KV transfer and early rejection", API)
N("* `view`, per instance p: `wait_s`", API)
N("The leaderboard (`c.policy_leaderboard`)", API)
N("*Question 1 [headline]: by how", "a question about the course's simulated runs")
N("*Question 3 [what rejection costs]:", "a question about the course's simulated runs")
N("*Question 5 [your Conductor]: a", "a question about the course's policy API")
N("* Mooncake's 90 % capacity far", SIM)
S("* On this model, Algorithm 1 is", ALG1)
restate("08", "solutions", "Seven lectures took Mooncake apart.", "This one puts the pieces back together",
        "compare Mooncake with coupled clusters", "write your own Conductor policy",
        "FAST'25's headline gains, +59 %", 'The arXiv version reports "75 %')
N("Question 1 [headline]: by how many", "a question about the course's simulated runs", where="08.capacity_gain")
S("Do not set it beside the paper's", f"{FAST} §5.1", where="08.capacity_gain")
N("Question 5 [your Conductor]: a", "a question about the course's policy API", where="08.least_ttft")
S("`view.ttft_s` = wait + fetch +", ALG1, where="08.least_ttft")
S("Taking the smallest wait + fetch", ALG1, where="08.least_ttft")
N("Question 3 [what rejection costs]:", "a question about the course's simulated runs", where="08.rejected_tokens")
N("That is why counting tokens instead", SIM, where="08.rejected_tokens")
