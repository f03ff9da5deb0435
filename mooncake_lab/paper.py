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
#: arXiv v3 Fig. 7, read from the rendered figure (≈ ±0.01 s): latency (s) that storing the new KV adds
#: to a prefill with no store, LLaMA2-70B, per prompt length (tokens). Caption: "Layer-wise latency refers
#: to the difference in latency between Layer-wise Prefill and Prefill without storing KVCache".
#: (Lecture 02 quotes the same figure; one copy is kept when the two sections meet.)
FIG7_STORE_LATENCY_S = {
    "serialized": {8192: 0.11, 16384: 0.12, 32768: 0.23, 65536: 0.42, 131072: 0.87},
    "layerwise": {8192: 0.10, 16384: 0.10, 32768: 0.12, 65536: 0.10, 131072: 0.10},
}
FIG7_SOURCE = f"{ARXIV}, Fig. 7 (read from the rendered figure)"

# ---- 06 decode, SLOs and goodput -------------------------------------------------------------

# ---- 07 overload-oriented scheduling ---------------------------------------------------------

# ---- 08 capstone -----------------------------------------------------------------------------
