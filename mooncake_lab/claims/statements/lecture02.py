"""Statements of lecture 02 about real systems, each with its source (see :mod:`mooncake_lab.claims.statements`)."""
from __future__ import annotations

from functools import partial

from . import not_a_statement, statement

S, N = partial(statement, "02"), partial(not_a_statement, "02")
V3, FAST = "arXiv 2407.00079 v3", "FAST'25"

S("Mooncake's FAST'25\npaper is named", f"{FAST} abstract (the title)")
S("use FAST'25 Eq. 2 to decide whether", f"{FAST} Eq. 2")
S("| node | 8 × A800 GPUs and 4 ×", f"{FAST} §5.1")
S("| DRAM → HBM | 128 GB/s per node", f"{FAST} Table 1")
S("| remote DRAM over RDMA | 87 GB/s", f"{FAST} §5.4.1")
S("FAST'25 measured 87 GB/s for its\nTransfer", f"{FAST} §5.4.1; {FAST} Fig. 12")
S("The longer stage runs back to back;", f"{V3} Fig. 7")
S("The paper's Fig. 7 measures the", f"{V3} Fig. 7 (caption)")
S("Our bars and the paper's differ", f"{V3} Fig. 7")
S("A straight line through the paper's", f"{V3} Fig. 7 (read from the rendered figure)")
S("So the paper's device-to-host copy", f"{V3} Fig. 7; {FAST} Table 1")
S("Our layer-wise store costs 1/80", f"{V3} Fig. 7")
S("The paper does not say where that", f"{V3} §5.2; {V3} Fig. 7")
S("FAST'25 (§2.3) writes the break-even", f"{FAST} §2.3")
S("| KV per token, LLaMA2-70B | 320", f"{FAST} §2.2")
S("| Eq. 2, 8 × A800, p = 8,192 |", f"{FAST} §2.3")
S("| Eq. 2, 8 × H800, p = 8,192 |", f"{FAST} §2.3")
S("The paper gives no SSD bandwidth", f"{FAST} §2.3; {FAST} Table 1")
S("What bandwidth (GB/s) does FAST'25", f"{FAST} Eq. 2")
S("* FAST'25 Eq. 2: reuse needs ≈", f"{FAST} Eq. 2; {FAST} §2.3")
N("* Next: lecture 03 measures how", "announces the next lecture")
S("1e12 / (KV bytes per token), with", f"{FAST} §2.2", where="02.dram_tokens")
S("That is why Mooncake pools the", f"{FAST} §2.2; {V3} §3", where="02.dram_tokens")
