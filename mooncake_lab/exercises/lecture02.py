"""Lecture 02 exercises: trading storage for computation (answers computed from the package)."""
from __future__ import annotations

from .. import storage
from ..hardware import A800_NODE, H800_NODE, SSD_DRIVE_READ_BW
from ..models import get_model
from . import Exercise, exercise

#: "1 TB of DRAM" in the question, decimal bytes (as FAST'25 §2.2: "1 TB of DRAM holds ≈ 3M tokens").
ONE_TB = 1e12

exercise(Exercise(
    "02.kv_ratio", "KV bytes per token of OPT-13B divided by those of LLaMA2-70B.",
    answer=lambda: get_model("opt-13b").kv_bytes_per_token() / get_model("llama2-70b").kv_bytes_per_token(),
    unit="×", rel_tol=0.02,
    hint="2 × layers × KV heads × head dim × 2 bytes for each: OPT-13B has 40 layers × 40 KV heads, "
         "LLaMA2-70B 80 layers × 8 KV heads, both with head dim 128.",
    why="(40 × 40) / (80 × 8) = 2.5: a model 5× smaller stores 2.5× more KV per token. Each of its heads "
        "keeps its own K and V (MHA), while LLaMA2-70B's 64 query heads share 8 (GQA)."))


def _ssd_10x_gbs() -> float:
    return storage.breakeven_bandwidth("llama2-70b", A800_NODE, speedup=10) / 1e9


exercise(Exercise(
    "02.ssd_10x", "SSD bandwidth (GB/s per node) above which reloading a 4,096-token LLaMA2-70B prefix is "
                  "10× faster than recomputing it at 60% of 8×A800 peak.",
    answer=_ssd_10x_gbs, unit="GB/s", rel_tol=0.03,
    hint="10 × (bytes to load) / (recompute time): storage.breakeven_bandwidth('llama2-70b', "
         "hardware.A800_NODE, speedup=10), or by hand 10 × 4096 × 327,680 B / 0.39 s.",
    why="About 34 GB/s: five PCIe-4 NVMe drives' worth. One drive (7 GB/s) gives only ≈ 2×; the "
        "default array of 8 drives (56 GB/s) gives ≈ 16×."))

exercise(Exercise(
    "02.eq2_h800", "FAST'25 Eq. 2 minimum bandwidth (GB/s) for reusing an 8,192-token LLaMA3-70B prefix "
                   "on 8×H800.",
    answer=lambda: storage.eq2_min_bandwidth("llama3-70b", H800_NODE, 8192) / 1e9,
    unit="GB/s", rel_tol=0.03,
    hint="B = G · (KV bytes per token per layer) / (a·p·d + b·d²) with G = 8 × 989 TFLOP/s, 4,096 B per "
         "layer, a = 4, b = 22, d = 8,192, p = 8,192.",
    why="7.912e15 × 4096 / (26 × 8192²) ≈ 18.6 GB/s — the paper's '19 GB/s'. A faster GPU recomputes "
        "faster, so reuse needs proportionally more bandwidth to pay off."))


def _tokens_per_tb() -> float:
    return ONE_TB / get_model("llama2-70b").kv_bytes_per_token()


exercise(Exercise(
    "02.dram_tokens", "How many tokens of LLaMA2-70B KV (BF16) fit in 1 TB (10¹² B) of DRAM? "
                      "(Three significant figures.)",
    answer=_tokens_per_tb, unit="tokens", rel_tol=0.005,
    hint="1e12 / (KV bytes per token), with 320 KiB = 320 × 1,024 B (not 320,000 B: the paper's "
         "'KB' is KiB); models.get_model('llama2-70b').kv_bytes_per_token()",
    why="1e12 / 327,680 ≈ 3.05 million tokens — FAST'25's 'about 3M tokens per TB': only a few "
        "hundred long conversations. That is why Mooncake pools the DRAM of the whole cluster."))


def _one_drive_10x() -> bool:
    return storage.reload_speedup("llama2-70b", A800_NODE, "ssd", bandwidth=SSD_DRIVE_READ_BW) > 10


exercise(Exercise(
    "02.one_drive", "With a single 7 GB/s NVMe drive, is reloading a 4,096-token LLaMA2-70B prefix still "
                    "more than 10× faster than recomputing it (True/False)?",
    answer=_one_drive_10x, unit="", rel_tol=0.0,
    hint="the 10× line needs ≈ 34 GB/s (Question 2); compare with 7 GB/s.",
    why="Only ≈ 2×: '> 10× from SSD' needs an array of at least five such drives (Question 2)."))
