"""Statements of lecture 05 about real systems, each with its source (see :mod:`mooncake_lab.claims.statements`)."""
from __future__ import annotations

from functools import partial

from . import not_a_statement, statement

S, N = partial(statement, "05"), partial(not_a_statement, "05")
V3, FAST = "arXiv 2407.00079 v3", "FAST'25"
BLIS = "inference-sim/inference-sim@29e84d31:docs/design/roofline.md (hardware_config.json entry)"
FIG7 = f"{V3} Fig. 7 (read from the rendered figure)"

S("Mooncake's answer (arXiv §5.1) is", f"{V3} §5.1")
N("compare one node, TP, SP and CPP", "a learning goal")
N("show how interleaving the chunks of", "a learning goal")
S("Every run here uses the **\"modern\"**", BLIS)
S("BLIS is an open-source simulator of", "https://github.com/inference-sim/inference-sim (README)")
S("| cost model | real GPUs; no CPP timings", f"{V3} §5.1")
S("| short prompts in a busy group | CPP", f"{V3} §5.1")
S("| KV store to CPU DRAM | measured (Fig. 7)", f"{FIG7}; {FAST} Table 1")
S("Mooncake's `prefill_chunk` is", f"{V3} §5.1")
S("That is the loss Mooncake's `prefill_chunk`", f"{V3} §5.1")
S("A small chunk's matrix\nproducts are", f"{V3} §5.1")
S("bandwidth that Mooncake needs for moving KV caches", f"{V3} §5.1")
S("The paper's argument for CPP is exactly", f"{V3} §5.1")
S("CPP crosses nodes only at stage", f"{V3} §5.1")
S("The paper claims only that CPP fits", f"{V3} §5.1")
S("In our model, chunking is what makes", f"{V3} §5.1")
S("Each prefill produces KV that must", f"{V3} §5.2; {V3} §3")
S("The store crosses the node's host-to-device", f"{FAST} Table 1")
S("The paper plots the same quantity for", f"{V3} Fig. 7 (caption)")
S("The paper's bars do not look like", FIG7)
S("In the paper, layer-wise hides little", FIG7)
S("The paper does not say what it is;", f"{V3} §5.2; {FIG7}")
S("* Its **serialized** bars grow with", f"{FIG7}; {FAST} Table 1")
S("A straight line through them gives", FIG7)
S("* So in the paper layer-wise hides", f"{FIG7}; {V3} §5.2")
S("* The paper's bars, as read from the", FIG7)
S("The paper adds a second argument", f"{V3} §5.2")
S("The paper gives no CPP timings, so", f"{V3} §5.1")
S("The first box lists our headline", FIG7)
S("| CPP speeds up long prefills |", f"{V3} §5.1")
S("| layer-wise store (Fig. 7) |", FIG7)
S("| short prompts behind a long one |", f"{V3} §5.1")
S("Section 4 found that the paper's store", FIG7)
S("* Interleaving chunks of several", f"{V3} §5.1")
S("In the paper's Fig. 7 it hides little", FIG7)
S("At the lecture's 128 GB/s it was\n4.19", FIG7, where="solutions")
S("With layer-wise store at the paper's", FIG7, where="05.store_exposed_ms")
S("The paper's layer-wise bars are", FIG7, where="05.store_exposed_ms")
