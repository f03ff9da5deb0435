"""Statements of the Mooncake Store lab about real systems, each with its source (see
:mod:`mooncake_lab.claims.statements`)."""
from __future__ import annotations

from functools import partial

from . import not_a_statement, restate, statement

S, N = partial(statement, "lab"), partial(not_a_statement, "lab")
FAST = "FAST'25"
STORE = "kvcache-ai/Mooncake@9a76be57:doc/en/mooncake-store.md"
TE = "kvcache-ai/Mooncake@c041d612:doc/en/transfer-engine.md"
WHEEL = ("https://pypi.org/project/mooncake-transfer-engine-non-cuda/0.3.13.post1/ "
         "(the pinned wheel, as the lab observes it)")

S("Mooncake's KVCache pool itself", f"https://pypi.org/project/mooncake-transfer-engine-non-cuda/; {STORE}")
N("In this lab you start the **real", "about the lab")
S("A prefill-side **writer** and a", f"{STORE}; {TE}")
N("name the parts of the store (master,", "a learning goal")
S("The master's HTTP metadata server", WHEEL)
S("Then the Transfer Engine writes", f"{STORE}; {TE}")
S("* FAST'25 (§5.4.1) measured the", f"{FAST} §5.4.1; {FAST} Fig. 12")
S("This\nis a feature of the open-source", f"{STORE}; {FAST} §4.2")
S("A failing read can take a second,", WHEEL)
S("At FAST'25's 87 GB/s (4×200 Gbps", f"{FAST} §5.4.1")
S("* The real Mooncake Store runs", STORE)
S("RDMA\n  (87–190 GB/s in FAST'25)", f"{FAST} §5.4.1; {FAST} Eq. 2")
restate("lab", "solutions", "Mooncake's KVCache pool itself", "In this lab you start the **real",
        "A prefill-side **writer** and a", "name the parts of the store (master,", "The master's HTTP metadata server")
S("Question 2 [RDMA]: at FAST'25's", f"{FAST} §5.4.1", where="lab.block_ms_rdma")
S("The master still lists the key", f"{WHEEL}; {STORE}", where="lab.code_before_ttl")
