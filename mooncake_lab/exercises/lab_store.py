"""Exercises of the Mooncake Store lab.

Answers come from the course's model (KV sizes), the paper's figures, and the recorded run of the
real store (``mooncake_lab/data/store_lab_recorded.json``; the live run behaves the same, which
``tests/test_store_lab.py`` checks on the real store).
"""
from __future__ import annotations

from . import Exercise, exercise


def _layer_mib() -> float:
    from ..experiments.lab_store import KV_LAYER_BYTES

    return KV_LAYER_BYTES / 2**20


def _block_ms_rdma() -> float:
    from ..experiments.lab_store import FAST25_RDMA_GBPS, KV_BLOCK_BYTES

    return KV_BLOCK_BYTES / (FAST25_RDMA_GBPS["4×200 Gbps RDMA"] * 1e9) * 1e3


def _closer_lease() -> str:
    from ..experiments.lab_store import lease_agreement, lease_label, load_recorded

    agree = lease_agreement(load_recorded())
    return lease_label(max(agree, key=agree.get))   # "1 ms", as the question says it


def _code_before_ttl() -> int:
    from ..experiments.lab_store import load_recorded

    return int(load_recorded()["replication"]["timeline"][0]["one"][0])


exercise(Exercise(
    "lab.layer_mib",
    "Question 1 [block scale]: how many MiB of KV does ONE layer of one 512-token LLaMA2-70B block hold (BF16)?",
    answer=_layer_mib, unit="MiB", rel_tol=0.01,
    hint="KV per token per layer = 2 (K, V) × 8 KV heads × 128 × 2 bytes; × 512 tokens.",
    why="512 × 4,096 B = 2 MiB per layer — the value size the lab puts; × 80 layers = 160 MiB per block."))

exercise(Exercise(
    "lab.block_ms_rdma",
    "Question 2 [RDMA]: at FAST'25's 87 GB/s (4×200 Gbps RDMA), how many milliseconds does one whole "
    "512-token LLaMA2-70B block (all 80 layers) take to move? Give it to 0.1 ms.",
    answer=_block_ms_rdma, unit="ms", rel_tol=0.03,
    hint="160 MiB = 167,772,160 bytes; divide by 87 × 10^9 B/s.",
    why="Over this lab's TCP loopback the same block takes far longer (the transfer section computes it at your measured "
        "rate): the 'fast network' is what makes the pool worth fetching from (lecture 02's Eq. 2)."))

exercise(Exercise(
    "lab.closer_lease",
    "Question 3 [leases]: with which lease TTL did the store's hit/miss verdicts agree more often with "
    "exact LRU, \"1 ms\" or \"10 s\"?",
    answer=_closer_lease, choices=("1 ms", "10 s"),
    # the master's spelling, and the same durations in other units a reader may write
    synonyms={"1 millisecond": "1 ms", "0.001 s": "1 ms", "1e-3 s": "1 ms", "1000 us": "1 ms", "1000 µs": "1 ms",
              "10 seconds": "10 s", "10000 ms": "10 s", "10,000 ms": "10 s", "10 sec": "10 s"},
    hint="A key read within the last lease TTL cannot be evicted. Which TTL keeps the eviction order closest "
         "to pure recency?",
    why="With a 1 ms lease nothing is protected for long, so 'lease expired longest ago' is 'used longest ago': "
        "nearly LRU. A 10 s lease protects every key read in the last 10 s — the whole replay here."))

exercise(Exercise(
    "lab.code_before_ttl",
    "Question 4 [failure]: right after a memory node is SIGKILLed (before client_ttl expires), what return "
    "code does get_into give for a single-replica key that lived on it? Give the code as a number.",
    answer=_code_before_ttl, unit="", rel_tol=0.0, synonyms={"TRANSFER_FAIL": -800, "OBJECT_NOT_FOUND": -704},
    hint="The master still lists the key and hands out its replica; the Transfer Engine then cannot reach it.",
    why="−800 is TRANSFER_FAIL; once client_ttl expires the master drops the segment and the key: −704, "
        "OBJECT_NOT_FOUND."))
