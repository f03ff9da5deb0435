"""Statements of lecture 09 about real systems, each with its source (see :mod:`mooncake_lab.claims.statements`).

The routers' sources are the files and commits of ``notebooks/routers.md`` and ``mooncake_lab/sim/routers.py``.
"""
from __future__ import annotations

from functools import partial

from . import not_a_statement, restate, statement

S, N = partial(statement, "09"), partial(not_a_statement, "09")
V3 = "arXiv 2407.00079 v3"
ALG1 = f"{V3} Algorithm 1"
DYN_CLASSIC = "ai-dynamo/dynamo@db19bd2a:lib/llm/src/kv_router/scheduler.rs"
DYN_SEL = "ai-dynamo/dynamo@07a6c9ce:lib/kv-router/src/scheduling/selector/default.rs"
DYN_MOD = "ai-dynamo/dynamo@07a6c9ce:lib/kv-router/src/scheduling/selector/mod.rs"
DYN_CFG = "ai-dynamo/dynamo@07a6c9ce:lib/kv-router/src/scheduling/config.rs"
DYN_DOC = "ai-dynamo/dynamo@391befc4:docs/router/kv_cache_routing.md"
DYN_PD = "ai-dynamo/dynamo@2e4735e3:docs/components/router/router-disaggregated-serving.md"
SGL = "sgl-project/sglang@b93974f1:sgl-model-gateway/src/policies/cache_aware.rs"
SGL_ARGS = "sgl-project/sglang@e46dcd87:sgl-router/py_src/sglang_router/router_args.py"
SGL_TREE = "sgl-project/sglang@03744dbe:sgl-model-gateway/src/policies/tree.rs"
SGL_OLD_TREE = "sgl-project/sglang@24ce7f6c:sgl-model-gateway/src/policies/tree.rs (first key of a DashMap)"
SMG_TIES = "smg-project/smg@04def283:model_gateway/src/policies/cache_aware.rs (select_matched_candidate)"
SGL_CFG = "sgl-project/sglang@b93974f1:sgl-model-gateway/src/policies/mod.rs (CacheAwareConfig::default)"
SGL_PD = "lightseekorg/smg@73da68ca:model_gateway/src/routers/http/pd_router.rs (select_pd_pair)"
SGL_OLD_PD = "sgl-project/sglang@026f853b:sgl-router/src/policies/cache_aware.rs (select_worker_pair)"
LLMD = "llm-d/llm-d-router@ebab6879:pkg/epp/config/loader/defaults.go"
LLMD_PICK = "llm-d/llm-d-router@ebab6879:pkg/epp/scheduling/scheduler_profile.go"
LLMD_PD = "llm-d/llm-d-router@ebab6879:deploy/config/pd-epp-config.yaml"
PS = "vllm-project/production-stack@a6c01db0:src/vllm_router/routers/routing_logic.py"
PS_TRIE = "vllm-project/production-stack@a6c01db0:src/vllm_router/prefix/hashtrie.py"
AIB = "vllm-project/aibrix@e3e10f9e:pkg/plugins/gateway/algorithms/prefix_cache.go"
AIB_README = "vllm-project/aibrix@e3e10f9e:pkg/plugins/gateway/algorithms/prefix_cache_readme.md"
AIB_HASH = "vllm-project/aibrix@0871c212:pkg/utils/prefixcacheindexer/hash.go"
AIB_PD = "vllm-project/aibrix@01692761:pkg/plugins/gateway/algorithms/pd_disaggregation.go"
AIB_PDREADME = "vllm-project/aibrix@e3e10f9e:pkg/plugins/gateway/algorithms/pd_readme.md"
PREBLE = "WukLab/preble@0c962c4c:multi_node/global_scheduler_with_time.py"
# §8, Mooncake in today's stacks: the files of l09_routers.STACKS (and notebooks/routers.md), each at its commit.
VLLM_MC_DOC = "vllm-project/vllm@8a53ea11:docs/features/mooncake_connector_usage.md"
VLLM_MCS_DOC = "vllm-project/vllm@135ed352:docs/features/mooncake_store_connector_usage.md"
SGL_PD_DOC = "sgl-project/sglang@cccb6546:docs/advanced_features/pd_disaggregation.md"
SGL_HICACHE_DOC = "sgl-project/sglang@0d57f2c1:docs/advanced_features/hicache_best_practices.md"
DYN_HICACHE = "ai-dynamo/dynamo@a9a4ef7a:docs/backends/sglang/sglang-hicache.md"
MC_TE_DOC = "kvcache-ai/Mooncake@3b5a5941:docs/source/design/transfer-engine/index.md"
TE_SLICE = "kvcache-ai/Mooncake@3b5a5941:mooncake-transfer-engine/include/config.h (slice_size = 65536)"
FAST_TE = "FAST'25 §5.4.1, Fig. 12 (40 GB = LLaMA3-70B KV of 128k tokens)"
FAST_TE_DESIGN = "FAST'25 §3.2.3 (topology-aware path selection: 16 KB slices)"
SIM = "about the course's simulated runs, not the real router"
Q = "a question of an exercise"

S("Mooncake's Conductor (lecture 04)", ALG1)
S("Since then the open-source serving", f"{DYN_SEL}; {SGL}; {LLMD}; {PS}; {AIB}; {PREBLE}")
N("We run their rules on the Conductor's", SIM)
S("| architecture | Mooncake's prefill", f"{V3} §3")
S("| who picks the prefill instance", ALG1)
S("| who picks the decode node on", ALG1)
S("| the serving engine | Kimi's own", f"{V3} §3")
S("| stress | the paper's replay |", f"{V3} §8; {V3} Table 3")
S("| KV transfer between nodes | the", f"{FAST_TE}; {FAST_TE_DESIGN}")
S("| DRAM ↔ HBM | cached and received", f"{V3} §3 (cached and received KV loaded into HBM)")
S("**Mooncake's pools** split prefill", f"{V3} §3; https://docs.vllm.ai/en/stable/configuration/optimization/ (chunked prefill)")
S("A router uses these settings whenever", f"{DYN_DOC}; {DYN_CFG} (router_ttl_secs = 120 without KV events)")
S("| *M* | the prompt's blocks, capped", "llm-d/llm-d-router@ebab6879:pkg/epp (defaultMaxPrefixTokens = 131072)")
S("| `dynamo` | cost_i = (s·[P_i +", f"{DYN_SEL}; {DYN_CFG}")
S("| `sglang` | if max n − min n >", f"{SGL}; {SGL_ARGS}")
S("| `llmd` | S_i = w_p·min(m_i, M)/M", f"{LLMD}; {LLMD_PICK}")
S("| `prodstack_rr` | the next instance", PS)
S("| `prodstack_prefix` | random among", f"{PS}; {PS_TRIE}")
S("| `prodstack_kv` | b = argmax m", PS)
S("| `aibrix` | candidates C = {argmin", AIB)
S("| `preble` | G = {argmax m} if", PREBLE)
S("The other letters are parameters,", f"{DYN_CFG}; {SGL_ARGS}; {LLMD}; {PS}; {AIB}")
S("On Mooncake's pools the router", f"{DYN_PD}; {SGL_PD}; {LLMD_PD}; {PS}; {AIB_PD}")
S("* `dynamo`: ties go to the smaller", f"{DYN_CLASSIC}; {DYN_MOD} (current: random among exact ties); {DYN_PD}")
S("* `sglang`: among equal deepest", SGL_TREE)
S("* `llmd`: the queue term is the", f"{LLMD_PICK} (max-score-picker shuffles); {LLMD_PD}")
S("* `prodstack_kv`: r counts requests", PS)
S("* `aibrix`: σ is the population", AIB)
S("* `preble`: on the pools, without", PREBLE)
S("Dynamo's decode router balances", DYN_PD)
S("Preble has no P/D mode, so it gets\nMooncake's", PREBLE)
S("production-stack goes round robin.", f"{PS} (disaggregated_prefill_orchestrated)")
S("SGLang's\nPD router runs its decode", f"{SGL_PD}; {SGL_OLD_PD}")
S("llm-d's decode\nprofile (prefix", LLMD_PD)
S("AIBrix in P/D mode runs a different", AIB_PD)
N("For comparison, the Conductor's", SIM)
S("The last one is Algorithm 1 with", ALG1)
S("Two rows only break ties: the router", f"{DYN_CLASSIC}; {SGL_TREE}")
S("`u` is the request's random draw,", f"{DYN_SEL} (softmax sampling at T > 0)")
N("* Dynamo's decode term *D_i* dominates", SIM)
N("* SGLang sees a balanced cluster", SIM)
N("* llm-d's queue and memory scores", SIM)
N("* AIBrix sees an imbalance and", SIM)
N("* production-stack's prefixaware", SIM)
N("We run every router and the Conductor's", SIM)
S("Fetched tokens are KV moved between\ninstances;", ALG1)
S("Why production-stack's prefixaware", f"{PS}; {PS_TRIE}")
S("So Dynamo sends a new prompt to", DYN_SEL)
N("Where the table shows a larger", SIM)
N("§6 sweeps Dynamo's overlap weight", SIM)
N("**Where SGLang sends a shared prefix.", "a heading in bold, followed by the statement")
S("When several instances hold the", SGL_TREE)
S("The tree answers with the node's", f"{SGL_TREE}; {SGL_OLD_TREE}")
S("Today's gateway, SMG, takes the", f"{SMG_TIES}; https://github.com/smg-project/smg/pull/2161")
N("Where one instance takes far more", SIM)
S("Dynamo without KV events predicts", f"{DYN_CFG}; {AIB_HASH}")
N("We cap SGLang's router\ntree at", SIM)
S("Its overlap weight is not offered:", DYN_PD)
N("SGLang: the cache\nthreshold.", "a label of a sweep")
S("Dynamo's router docs say that `overlap_score_weight`", DYN_DOC)
S("Two defaults depend on where you", f"{AIB_README}; {AIB}; {SGL_CFG}; {SGL_ARGS}")
S("Some router state is simplified", f"{AIB_HASH}; {SGL_TREE}; {DYN_SEL}")
S("One more place where the docs and", f"{AIB_PDREADME}; {AIB_PD}")
S("Of §1's rules only the Conductor's", f"{ALG1}; {DYN_SEL}; {SGL}; {LLMD}; {PS}; {AIB}; {PREBLE} (none moves KV)")
S("The engines behind the other routers", f"{VLLM_MC_DOC}; {VLLM_MCS_DOC}; {SGL_PD_DOC}; {SGL_HICACHE_DOC}; {MC_TE_DOC}")
S("Only Dynamo's router can count the pool", f"{DYN_HICACHE}; {DYN_SEL} (shared_cache_multiplier); {DYN_CFG} (default 0.0)")
S("Lecture 05 counts the same KV as", "FAST'25 §5.4.1, Fig. 12 (40 GB for 128k tokens of LLaMA3-70B KV: 131,072 × 327,680 B = 40 GiB)")
S("`MooncakeConnector` sends a request's", f"{VLLM_MC_DOC} (kv_producer, kv_consumer and the proxy)")
S("Mooncake is the default P/D transfer", SGL_PD_DOC)
S("HiCache moves KV pages between", f"{SGL_HICACHE_DOC}; {DYN_HICACHE}")
S("With HiCache on the prefill nodes", f"{SGL_HICACHE_DOC} (Prefill-only HiCache)")
S("On each request the router asks", f"{DYN_HICACHE} (How it works, Scoring)")
S("That is a fixed weight per block,", f"{DYN_HICACHE} (Scoring); {ALG1}")
S("At the commit\n  we read, the page", f"{DYN_HICACHE} (Requirements: sgl-project/sglang#22894 not yet merged)")
N("The\n  `dynamo` rule of §1 has the same", "about the course's `dynamo` rule of §1 and its option (the real router's pool term is the item above)")
S("FAST'25 moved 40 GB, the KV of", FAST_TE)
S("The engine cuts a transfer into", f"{FAST_TE_DESIGN}; {TE_SLICE}")
N("(a) Which instance does `sglang`", Q)
N("(b) Which\ndoes `aibrix` pick?", Q)
N("On the conversation trace, on Mooncake's", Q)
N("The instances cache 1,024 blocks", Q)
S("* The routers weigh cached prefix", f"{ALG1}; {SGL}; {LLMD}; {AIB}")
S("Of the rules only the Conductor's", f"{ALG1}; {VLLM_MCS_DOC}; {SGL_HICACHE_DOC}; {DYN_HICACHE}")
S("which only\n  Dynamo's router can count", f"{DYN_HICACHE}; {DYN_CFG} (shared_cache_multiplier default 0.0)")
N("On Mooncake's pools (conversation", SIM)
restate("09", "solutions", "Mooncake's Conductor (lecture 04)", "Since then the open-source serving",
        "We run their rules on the Conductor's", "Its overlap weight is not offered:", "SGLang: the cache\nthreshold.",
        "Two defaults depend on where you")
N("Question 1b: the instance `aibrix`", Q, where="09.changed_aibrix")
S("AIBrix first compares the spread", AIB, where="09.changed_aibrix")
S("AIBrix looks at prefixes only among", AIB, where="09.changed_aibrix")
N("Question 1a: the instance `sglang`", Q, where="09.changed_sglang")
S("SGLang first tests the balance:", f"{SGL}; {SGL_ARGS}", where="09.changed_sglang")
S("SGLang balances only when both", SGL, where="09.changed_sglang")
N("Question 2: the load imbalance", Q, where="09.prefix_imbalance")
N("§3's board of the conversation", "points to the course's own leaderboard", where="09.prefix_imbalance")
N("Question 4: the percentage of requests", Q, where="09.stale_percent")
N("§4's sweep has it: the row of SGLang's", "points to the course's own sweep", where="09.stale_percent")
# §2's view on the whole trace (issue 27): a request of the course's runs, and the two rules
N("For the request the note under", Q)
N("Question 5 [watch]: the note under", Q, where="09.conductor_pick")
N("Which prefill instance would the", Q, where="09.conductor_pick")
N("Select the request (`view.selected", "points to the course's own view and sim.explain", where="09.conductor_pick")
S("the router compares prefix matches", f"{SGL}; {ALG1}", where="09.conductor_pick")
