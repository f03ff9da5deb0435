"""The Mooncake papers' numbers that the course quotes — one place, each with its source.

Sources: **arXiv** 2407.00079 ("Mooncake: A KVCache-centric Disaggregated Architecture for LLM Serving";
figure and table numbers of v3 unless noted) and **FAST'25** ("Mooncake: Trading More Storage for Less
Computation — A KVCache-centric Architecture for Serving LLM Chatbot"). Values "read from the rendered
figure" are approximate (stated so).

Lectures, plots, exercises and claims import these constants; none retypes a paper number, so a quote
and its plot cannot disagree. Sections follow the lectures that first use a number.
"""
from __future__ import annotations

ARXIV = "arXiv 2407.00079 v3"
FAST25 = "FAST'25"

# ---- 00 welcome ------------------------------------------------------------------------------
#: SLOs of the real-workload experiments (arXiv v3 §8): TTFT ≤ 30 s, TBT ≤ 0.1 s per token.
SLO_TTFT_S = 30.0
SLO_TBT_S = 0.1
SLO_SOURCE = f"{ARXIV}, §8 (real-workload experiments)"
#: Share of requests vLLM served within the TBT SLO in the real-workload run, % (arXiv v3 §8).
VLLM_TBT_SLO_MET_PCT = 57

#: vLLM V1's default chunked-prefill token budget per step for its OpenAI server: 8,192 on a GPU with at
#: least 70 GiB of memory whose name does not contain "a100", 2,048 on any other GPU
#: (vllm-project/vllm@99d7eb5d:vllm/engine/arg_utils.py, EngineArgs.get_batch_defaults: ``device_memory >=
#: 70 * GiB_bytes and "a100" not in device_name``; v0.4-0.5 chunked at 512). Not a Mooncake paper number: a
#: fact about the baseline engine today. The key "70GB+" names the large-GPU case (70 GiB, not 70e9 B).
VLLM_V1_BATCHED_TOKENS = {"other": 2048, "70GB+": 8192}
#: The memory (GiB) from which get_batch_defaults gives a GPU that is not an A100 the larger budget.
VLLM_V1_LARGE_GPU_GIB = 70


def vllm_v1_server_budget(gpu_memory_bytes: float, gpu_name: str) -> int:
    """vLLM V1's default token budget per step for its OpenAI server on one GPU (EngineArgs.get_batch_defaults):
    8,192 if the GPU has at least :data:`VLLM_V1_LARGE_GPU_GIB` GiB and "a100" is not in its name, else 2,048.

    >>> vllm_v1_server_budget(80 * 2**30, "NVIDIA A800-SXM4-80GB"), vllm_v1_server_budget(80 * 2**30, "NVIDIA A100-SXM4-80GB")
    (8192, 2048)
    """
    large = gpu_memory_bytes >= VLLM_V1_LARGE_GPU_GIB * 2**30 and "a100" not in gpu_name.lower()
    return VLLM_V1_BATCHED_TOKENS["70GB+" if large else "other"]
#: Not the paper: Dynamo's ``shared_cache_multiplier`` m, the weight its router gives a block a shared pool
#: holds: 0.0 by default; "the CLI sets this to 0.5 when shared cache is enabled" (ai-dynamo/dynamo @ 07a6c9ce
#: lib/kv-router/src/scheduling/config.rs). ``RouterConfig.dynamo_shared_multiplier`` defaults to the first.
DYNAMO_SHARED_MULTIPLIER = {"default": 0.0, "cli_shared_cache": 0.5}
DYNAMO_SHARED_MULTIPLIER_SOURCE = "ai-dynamo/dynamo @ 07a6c9ce : lib/kv-router/src/scheduling/config.rs"
#: RDMA bandwidth per node of the testbed, Gbit/s (arXiv v3 §8.1: "up to 800 Gbps").
ARXIV_RDMA_GBPS = 800

# ---- 01 roofline -----------------------------------------------------------------------------
#: KV cache per LLaMA2-70B/LLaMA3-70B token as FAST'25 writes it: "320 KB" (= 320 KiB, 327,680 B).
KV_PER_TOKEN_KB = 320.0                      # FAST'25 §2.2
#: FAST'25 Eq. 1: prefill FLOPs l·(a·n²·d + b·n·d²) with these coefficients (LLaMA3-70B shapes).
EQ1_A, EQ1_B = 4.0, 22.0                     # FAST'25 §2.3, Eq. 1
#: Not the papers, quoted beside them in lecture 01: the share of A100 peak that FlashAttention-2 reaches
#: in the forward pass (Dao 2023, "FlashAttention-2", §4.1: 50–73%; "50–70%").
FLASH_ATTENTION_PEAK_SHARE = (0.50, 0.70)

# ---- 02 storage for computation --------------------------------------------------------------
#: Host-to-device bandwidth per node, B/s (FAST'25 Table 1, "set according to LLaMA3-70B and 8×A800").
H2D_BW = 128e9                               # FAST'25 Table 1
#: FAST'25 Eq. 2's minimum bandwidths, node → (prefix length p, GB/s): "6 GB/s" on 8×A800, "19 GB/s"
#: on 8×H800 for LLaMA3-70B at p = 8,192.
EQ2_MIN_GBS = {"a800x8": (8192, 6.0), "h800x8": (8192, 19.0)}    # FAST'25 §2.3, Eq. 2 and text
#: "1 TB of DRAM holds ≈ 3M tokens" of LLaMA3-70B KV (FAST'25 §2.2), millions of tokens.
TOKENS_PER_TB_M = 3.0                        # FAST'25 §2.2
#: arXiv v3 Fig. 7, read from the rendered figure (≈ ±0.01 s): latency (s) that storing the new KV adds
#: to a prefill with no store, LLaMA2-70B, per prompt length (tokens), serialized (prefill, then store)
#: and layer-wise. Caption: "Layer-wise latency refers to the difference in latency between Layer-wise
#: Prefill and Prefill without storing KVCache". Lectures 02 and 05 quote it.
FIG7_STORE_LATENCY_S = {
    "serialized": {8192: 0.11, 16384: 0.12, 32768: 0.23, 65536: 0.42, 131072: 0.87},
    "layerwise": {8192: 0.10, 16384: 0.10, 32768: 0.12, 65536: 0.10, 131072: 0.10},
}
FIG7_SOURCE = f"{ARXIV}, Fig. 7 (read from the rendered figure)"

# ---- 03 trace and prefix cache ---------------------------------------------------------------
#: FAST'25 Table 2: the released traces (requests, average input and output tokens, cache ratio).
FAST25_TABLE2 = {
    "conversation": {"requests": 12_031, "mean_input": 12_035, "mean_output": 343, "cache_ratio": 0.40},
    "synthetic": {"requests": 3_993, "mean_input": 15_325, "mean_output": 149, "cache_ratio": 0.66},
    "toolagent": {"requests": 23_608, "mean_input": 8_596, "mean_output": 182, "cache_ratio": 0.59},
}
#: arXiv v3 Table 1 (§4.2): "cache hit rates under different cache capacities" for "three cache
#: strategies: LRU, LFU, and LengthAwareCache (similar to LFU but prioritizing cache blocks occurring
#: later in requests)", "assuming a single global cache pool", on the arXiv experiments' trace
#: (arxiv-trace/mooncake_trace.jsonl). Policy (names of prefix_cache.EVICTION_POLICIES) → capacity in
#: 512-token blocks (inf = ∞) → hit rate (fraction; the paper does not say whether of blocks or tokens).
ARXIV_TABLE1 = {
    "lru": {float("inf"): 0.51, 100_000: 0.51, 50_000: 0.50, 30_000: 0.48, 10_000: 0.40, 1_000: 0.30},
    "lfu": {float("inf"): 0.51, 100_000: 0.51, 50_000: 0.49, 30_000: 0.43, 10_000: 0.35, 1_000: 0.30},
    "length_aware": {float("inf"): 0.51, 100_000: 0.50, 50_000: 0.48, 30_000: 0.42, 10_000: 0.35, 1_000: 0.30},
}
ARXIV_TABLE1_SOURCE = f"{ARXIV}, Table 1 (§4.2; single global cache pool, arXiv trace)"
#: The LRU row of arXiv v3 Table 1 (the name lectures used before the other rows were added).
ARXIV_TABLE1_HIT = ARXIV_TABLE1["lru"]
#: FAST'25 Fig. 10: hit ratio of one global pool over local caches, conversation trace.
FAST25_FIG10_GLOBAL_OVER_LOCAL = 2.22

# ---- 04 KVCache-centric scheduling -----------------------------------------------------------
#: arXiv v3 Fig. 8: average TTFT (s) per prefill policy, 8P+8D, ≈ 23k real requests.
FIG8_TTFT_S = {"random": 92.07, "load": 60.41, "cache_aware": 14.36, "kvcentric": 6.26}
FIG8_SOURCE = f"{ARXIV}, Fig. 8 (8P+8D, 23k real requests)"
#: The size of that experiment: prefill and decode instances, requests (arXiv v3 §8).
FIG8_N_PREFILL, FIG8_N_DECODE, FIG8_REQUESTS = 8, 8, 23_000

#: FAST'25 §4.2, Fig. 5: mean TTFT (s) per scheduling policy. "We build a MOONCAKE cluster consisting of
#: 16 8×A800 nodes, and replay the conversation trace detailed in §5.2.1" (the trace the course ships),
#: LLaMA2-70B. Keys are the simulator's policies lecture 04 maps them to: "global cache-aware" (§4.2: the
#: best prefix in the pool, fetched and replicated) → kvcentric; "local cache-aware" (§4.1: each
#: instance's own prefix) → cache_aware; "load balancing" → load; "random" → random.
FAST25_FIG5_TTFT_S = {"random": 19.65, "load": 5.27, "cache_aware": 3.58, "kvcentric": 3.07}
FAST25_FIG5_SOURCE = f"{FAST25} §4.2, Fig. 5 (16 × 8×A800 nodes, LLaMA2-70B, conversation trace)"
#: Nodes of the Fig. 5 cluster (FAST'25 §4.2; the prefill/decode split is not stated there).
FAST25_FIG5_NODES = 16
#: FAST'25 §4.2, the forwarding rule in prose (Algorithm 1's pseudocode shows only the ratio test).
FAST25_FORWARD_RULE_QUOTE = ("Conductor forwards the cache's location and the request to an alternative instance "
                             "if the estimated additional prefill time is shorter than the transfer time")
FAST25_THRESHOLD_QUOTE = ("we prefer to compute the input tokens if the best remote prefix match length is no "
                          "larger than the current local reusable prefix multiplied by a threshold")
#: FAST'25 §5.4.2, Fig. 13: mean TTFT on the synthetic trace (§5.2.1) at simulated network bandwidths from
#: 24 to 400 Gbps (the end points, Gbit/s); above 100 Gbps the mean TTFT stays below 2 s; "We recommend a
#: minimum network bandwidth of 100 Gbps".
FAST25_FIG13_GBPS_RANGE = (24.0, 400.0)
FAST25_FIG13_MIN_GBPS = 100.0
FAST25_FIG13_TTFT_BOUND_S = 2.0
FAST25_FIG13_SOURCE = (f"{FAST25} §5.4.2, Fig. 13 (synthetic trace, 24 → 400 Gbps; mean TTFT below 2 s above "
                       "100 Gbps; 'we recommend a minimum network bandwidth of 100 Gbps')")
#: FAST'25 Fig. 14, the end-to-end latency breakdown of one request (prompts 8k … 128k): at a 128k-token prompt a 95% cached
#: prefix cuts the prefill time by 92% and the TTFT by 86% (overheads included).
FAST25_FIG14 = {"prompt_tokens": 131_072, "cached_share": 0.95, "prefill_cut": 0.92, "ttft_cut": 0.86}
FAST25_FIG14_SOURCE = (f"{FAST25} Fig. 14 (128k-token prompt, prefix cache ratio 0% vs 95%: prefill "
                       "−92%, TTFT −86%)")

# ---- 05 long-context prefill -----------------------------------------------------------------
#: arXiv v3 §3: chunked pipeline prefill starts when uncached tokens exceed ``prefill_chunk``,
#: "typically > 1,000 tokens".
PREFILL_CHUNK_TYPICAL_MIN = 1_000

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
#: FAST'25 §5.5, Fig. 15: on 16 nodes, P:D from 5P11D to 11P5D, the best prefill:decode ratio is near 1:1.
BEST_PD_RATIO = (1, 1)
BEST_PD_SOURCE = f"{FAST25} §5.5, Fig. 15 (16 nodes, P:D from 5P11D to 11P5D: the best is near 1:1)"
#: The FAST'25 Fig. 1 source line the reproduce metrics quote.
FIG1_SOURCE = (f"{FAST25} §5.1 and Fig. 1 (request capacity ratio; the 100 ms values read from the rendered "
               "figure, the gains from the text)")
#: arXiv v3 §8 (real workload, 10P+10D vs 20 vLLM instances): +75% requests (vLLM's 57%: VLLM_TBT_SLO_MET_PCT).
ARXIV_REAL_GAIN = 0.75

# ---- 07 overload-oriented scheduling ---------------------------------------------------------
#: arXiv v3 Table 3: rejected requests per admission policy (8P+8D, the trace replayed at 2×).
TABLE3_REJECTED = {"baseline": 4183, "early": 3771, "predicted": 3589}
#: arXiv v3 §8.2 / Table 3 set-up: prefill and decode nodes, replay speed, requests (≈ 23,000 real requests).
TABLE3_SETUP = {"n_prefill": 8, "n_decode": 8, "speed": 2.0, "requests": 23_000}
#: arXiv v3 section numbers of the admission policies (§7.2 early rejection, §7.4 with prediction).
SECTION_EARLY, SECTION_PREDICTED = "7.2", "7.4"

# ---- 08 capstone -----------------------------------------------------------------------------

# ---- 09 after Mooncake -----------------------------------------------------------------------
#: FAST'25 §5.4.1, Fig. 12 ("Latency of inter-node cache transfer"): the Transfer Engine moves 40 GB between two
#: nodes, "the cache size for LLaMA3-70B with 128k tokens" (GB as the paper writes it), against TCP and
#: torch.distributed with Gloo. Per network: NICs, Gbit/s per NIC, the engine's GB/s, and how many times faster
#: it is than TCP (the text: "approximately 2.4× and 4.6× faster") and than Gloo (marked in the figure only).
FAST25_TE_GB = 40.0
FAST25_TE_TOKENS = 131_072                   # "128k tokens"
FAST25_TE_NETWORKS = {
    "4×200 Gbps": {"nics": 4, "nic_gbps": 200, "gbs": 87.0, "vs_tcp": 2.4, "vs_gloo": 7.5},
    "8×400 Gbps": {"nics": 8, "nic_gbps": 400, "gbs": 190.0, "vs_tcp": 4.6, "vs_gloo": 16.2},
}
#: The settings of that measurement: "All schemes are tested with a concurrency level of 64 and a minimum
#: transfer granularity of 128 KB" (FAST'25 §5.4.1) — TCP and Gloo too, so not the engine's own slice size.
FAST25_TE_CONCURRENCY = 64
FAST25_TE_MIN_GRANULARITY_KB = 128
FAST25_TE_SOURCE = (f"{FAST25} §5.4.1, Fig. 12 (40 GB = LLaMA3-70B KV of 128k tokens; concurrency 64, minimum "
                    "transfer granularity 128 KB, for every scheme)")
#: FAST'25 §3.2.3 (Transfer Engine, "Topology-aware path selection"): "a single request's transfer is internally
#: divided into multiple slices at a granularity of 16 KB. Each slice might use a different path, enabling
#: collaborative work among all RDMA NICs". KB as the paper writes it.
FAST25_TE_SLICE_KB = 16
FAST25_TE_DESIGN_SOURCE = f"{FAST25} §3.2.3 (topology-aware path selection, slicing, endpoint pooling, failures)"
#: Not the paper: the open-source engine's default slice, bytes (kvcache-ai/Mooncake
#: mooncake-transfer-engine/include/config.h @ 3b5a5941, ``slice_size = 65536``; its design doc says a request
#: is sliced "if its length exceeds 64KB").
TE_SLICE_BYTES_OPEN_SOURCE = 65_536
TE_SLICE_SOURCE = "kvcache-ai/Mooncake @ 3b5a5941 : mooncake-transfer-engine/include/config.h (slice_size)"
