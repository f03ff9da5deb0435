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
#: KV cache per LLaMA2-70B/LLaMA3-70B token as FAST'25 writes it: "320 KB" (= 320 KiB, 327,680 B).
KV_PER_TOKEN_KB = 320.0                      # FAST'25 §2.2 (and the seed lecture)
#: FAST'25 Eq. 1: prefill FLOPs l·(a·n²·d + b·n·d²) with these coefficients (LLaMA3-70B shapes).
EQ1_A, EQ1_B = 4.0, 22.0                     # FAST'25 §2.3, Eq. 1
#: Compute per LLaMA2-70B token the seed lecture quotes ("≈ 140 GFLOP").
SEED_GFLOP_PER_TOKEN = 140.0                 # seed lecture demo 1 (../shared/reference/seed_lecture.md)
#: Not the papers, quoted beside them in lecture 01: the TP8 HBM-streaming floor of a LLaMA2-70B decode
#: step (../shared/reference/measured_latency.md, "8.5 ms at TP8"), and the share of A100 peak that
#: FlashAttention-2 reaches in the forward pass (Dao 2023, "FlashAttention-2", §4.1: 50–73%; "50–70%").
HBM_FLOOR_TP8_MS = 8.5
FLASH_ATTENTION_PEAK_SHARE = (0.50, 0.70)

# ---- 02 storage for computation --------------------------------------------------------------
#: Host-to-device bandwidth per node, B/s (FAST'25 Table 1, "set according to LLaMA3-70B and 8×A800").
H2D_BW = 128e9                               # FAST'25 Table 1
#: FAST'25 Eq. 2's minimum bandwidths, node → (prefix length p, GB/s): "6 GB/s" on 8×A800, "19 GB/s"
#: on 8×H800 for LLaMA3-70B at p = 8,192.
EQ2_MIN_GBS = {"a800x8": (8192, 6.0), "h800x8": (8192, 19.0)}    # FAST'25 §2.3, Eq. 2 and text
#: "1 TB of DRAM holds ≈ 3M tokens" of LLaMA3-70B KV (FAST'25 §2.2), millions of tokens.
TOKENS_PER_TB_M = 3.0                        # FAST'25 §2.2
#: arXiv Fig. 7: latency of storing the KV cache of a prefill, serialized (prefill, then store) and
#: layer-wise, at each prompt length. Caption: "Layer-wise latency refers to the difference in latency
#: between Layer-wise Prefill and Prefill without storing KVCache": both series are the time *added* to
#: a prefill that stores nothing, in seconds. Read from the rendered figure (≈ ±0.01 s).
FIG7_STORE_LATENCY_S = {
    "lengths": (8192, 16384, 32768, 65536, 131072),
    "serialized": (0.11, 0.12, 0.23, 0.42, 0.87),
    "layerwise": (0.10, 0.10, 0.12, 0.10, 0.10),
}
FIG7_SOURCE = f"{ARXIV}, Fig. 7 (read from the rendered figure)"

# ---- 03 trace and prefix cache ---------------------------------------------------------------

# ---- 04 KVCache-centric scheduling -----------------------------------------------------------

# ---- 05 long-context prefill -----------------------------------------------------------------

# ---- 06 decode, SLOs and goodput -------------------------------------------------------------

# ---- 07 overload-oriented scheduling ---------------------------------------------------------

# ---- 08 capstone -----------------------------------------------------------------------------
