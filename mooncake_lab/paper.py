"""The Mooncake papers' numbers that the course quotes — one place, each with its source.

Sources: **arXiv** 2407.00079 ("Mooncake: A KVCache-centric Disaggregated Architecture for LLM Serving";
figure and table numbers of v3 unless noted) and **FAST'25** ("Mooncake: Trading More Storage for Less
Computation — A KVCache-centric Architecture for Serving LLM Chatbot"). Values "read from the rendered
figure" are approximate (stated so). ``../shared/reference/mooncake_paper.md`` lists the same facts in prose.

Lectures, plots, exercises and claims import these constants; none retypes a paper number, so a quote
and its plot cannot disagree. Sections follow the lectures that first use a number.
"""
from __future__ import annotations

ARXIV = "arXiv 2407.00079 v3"
FAST25 = "FAST'25"

# ---- 00 welcome ------------------------------------------------------------------------------

# ---- 01 roofline -----------------------------------------------------------------------------

# ---- 02 storage for computation --------------------------------------------------------------

# ---- 03 trace and prefix cache ---------------------------------------------------------------

# ---- 04 KVCache-centric scheduling -----------------------------------------------------------

# ---- 05 long-context prefill -----------------------------------------------------------------

# ---- 06 decode, SLOs and goodput -------------------------------------------------------------
#: FAST'25 §5.1: "effective request capacity" = the share of requests meeting both SLOs (TTFT 30 s,
#: TBT threshold) at the trace's own load; Fig. 1 plots it ("Request Capacity Ratio (%)") for Mooncake
#: and vLLM v0.5.1 plain / + prefix caching / + chunked prefill. Mooncake's gain over vLLM per TBT
#: threshold (ms), FAST'25 text and Fig. 1 (the +59% … +498% range).
FIG1_GAIN = {100: 4.98, 200: 1.57, 300: 0.59}
#: FAST'25 Fig. 1 at a 100 ms TBT threshold, % of requests effective — read from the rendered figure
#: (approximate): Mooncake ≈ 95, vLLM ≈ 16, vLLM + chunked prefill ≈ 10 (the worst variant there).
FIG1_AT_100MS_PERCENT = {"mooncake": 95.0, "vllm": 16.0, "vllm_chunked": 10.0}
#: FAST'25 TBT thresholds of Fig. 1's headline gains (ms) and its TTFT SLO (s).
TBT_THRESHOLDS_MS = (100, 200, 300)
TTFT_SLO_S = 30.0
#: FAST'25: the best prefill:decode node ratio on its workload ≈ 1:1.
BEST_PD_RATIO = (1, 1)
#: arXiv v3 §8 (real workload, 10P+10D vs 20 vLLM instances): +75% requests; vLLM met the TBT SLO for 57%.
ARXIV_REAL_GAIN = 0.75
ARXIV_VLLM_TBT_SHARE = 0.57

# ---- 07 overload-oriented scheduling ---------------------------------------------------------
#: arXiv v3 Table 3: rejected requests per admission policy (8P+8D, the trace replayed at 2×).
TABLE3_REJECTED = {"baseline": 4183, "early": 3771, "predicted": 3589}
#: arXiv v3 §8.2 / Table 3 set-up: prefill and decode nodes, replay speed, requests (≈ 23,000 real requests).
TABLE3_SETUP = {"n_prefill": 8, "n_decode": 8, "speed": 2.0, "requests": 23_000}
#: arXiv v3 section numbers of the admission policies (§7.2 early rejection, §7.4 with prediction).
SECTION_EARLY, SECTION_PREDICTED = "7.2", "7.4"

# ---- 08 capstone -----------------------------------------------------------------------------
