"""Statements of lecture 07 about real systems, each with its source (see :mod:`mooncake_lab.claims.statements`)."""
from __future__ import annotations

from functools import partial

from . import not_a_statement, restate, statement

S, N = partial(statement, "07"), partial(not_a_statement, "07")
V3 = "arXiv 2407.00079 v3"
T3, ALG1 = f"{V3} Table 3", f"{V3} Algorithm 1"
SIM = "about the course's simulated runs, not the real system"

S("At peak hours, requests reach Kimi", f"{V3} §7")
S("So Mooncake's Conductor **rejects**", f"{V3} §7; {ALG1}")
S("The paper (arXiv 2407.00079, §7)", f"{V3} §7; {T3}")
S("We run the same three in our simulator", T3)
N("say when the paper's ordering holds", "a learning goal")
S("A request's life on Mooncake: a prefill", f"{V3} §3")
S("Where can the Conductor turn a request", f"{V3} §7.2; {V3} §7.3")
S("* **After the prefill** (the paper's", f"{V3} §7.2; {T3}")
S("The paper measures both pools in one", f"{V3} §7.1")
S("The paper (§7.1, §7.4) takes the TBT", f"{V3} §7.1 and 7.4")
N("§8 runs the paper's load.", "announces a section of the lecture")
S("The paper gives no value for t_d.", f"{V3} §7.4")
S("Algorithm 1 (line 25) also rejects", ALG1)
S("The paper's overload is **decode-bound**", f"{V3} §7.2; {T3}")
S("The decode side differs from the paper's", f"{V3} §7.4; {ALG1}")
S("| when the decode node is chosen |", ALG1)
S("In code, the lecture's decode semantics", f"{V3} §7.4; {ALG1}")
S("* **Prediction rejects fewer than early", T3)
S("The paper gives no t_d, so sweep it", f"{V3} §7.4")
S("Under early rejection, the paper saw", f"{V3} Fig. 9 and 10; {V3} §7.3")
S("The Conductor reacts to a decode load", f"{V3} §7.3; {V3} §7.4")
N("Under early rejection, the load the", SIM)
S("The paper rejects early because wasted", f"{V3} §7.3")
S("* **Mild decode overload (≤ 1.25×):", T3)
S("**So what must admission and load be", T3)
S("The paper's 2× run rejected 3,589 to", f"{T3}; {V3} Fig. 8 (≈ 23,000 requests)")
S("The paper's differs in six rows", f"{V3} §7.4; {V3} §3; {T3}")
S("| DRAM ↔ HBM | cached and received", f"{V3} §3; FAST'25 Fig. 14; FAST'25 Table 1")
S('Row "paper" is the paper\'s, with the', f"{V3} §8.1")
S("With the paper's decode semantics and", f"{V3} §7.4; {T3}")
S("The paper's ordering needs a **decode-bound**", T3)
S("These runs use the paper's decode", f"{V3} §7.4")
S("The note under the table says whether", T3)
S("Start from the paper's semantics and", f"{V3} §7.4")
S("* With the paper's decode semantics", f"{V3} §7.4; {T3}")
restate("07", "solutions", "At peak hours, requests reach Kimi", "So Mooncake's Conductor **rejects**",
        "The paper (arXiv 2407.00079, §7)", "We run the same three in our simulator", "say when the paper's ordering holds")
S("When decode drains, it admits a", f"{V3} Fig. 9 and 10", where="07.corr_sign")
S("The paper's Table 3 found the opposite.", T3, where="07.most_completed")
S("That is the decode-bound overload", f"{V3} §7.2; {T3}", where="07.requests_per_node")
