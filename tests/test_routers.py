"""The routers of today's stacks (mooncake_lab.sim.routers): hand-worked decisions per rule, each asserted for
the numba ``route`` and the plain-Python ``route_reference`` (and the decode-node rules, ``route_decode`` and
``route_decode_reference``); kernel ≡ reference on random inputs; the router-side belief ≡ ReferenceBelief;
RouterConfig's bad inputs."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mooncake_lab.prefix_cache import new_cache_state
from mooncake_lab.sim import routers as R
from mooncake_lab.sim import routers_reference as ref
from mooncake_lab.sim.routers import (DECODE_CHOICES, ROUTERS, DecodeInputs, RouterConfig, RouterInputs,
                                      belief_insert, belief_match, deepest_entered, new_router_inputs,
                                      note_entered, route, route_decode)
from mooncake_lab.sim.routers_reference import ReferenceBelief, route_decode_reference, route_reference
from mooncake_lab.validate import InputError

BT = 512  # tokens per block (the traces')


def inputs(n, **fields):
    """RouterInputs for ``n`` instances: the given fields (lists), the others zero."""
    ri = new_router_inputs(n)
    for name, values in fields.items():
        getattr(ri, name)[:] = values
    return ri


def params(name, pd=False, **cfg):
    return RouterConfig(**cfg).resolve(name, pd, 100, BT)


def pick(rp, ri, L, *, u=0.0, rr=0, kv_cap=1e6, bt=BT):
    """The instance both implementations choose (asserting they agree)."""
    n_blocks = -(-L // bt)
    a = route(rp, ri, L, n_blocks, bt, u, rr, kv_cap)
    b = route_reference(rp, ri, L, n_blocks, bt, u, rr, kv_cap)
    assert a == b, f"numba route {a} != route_reference {b}"
    return a


# ------------------------------------------------------------------ dynamo (code 5)
def test_dynamo_argmin_cost_uses_prefill_decode_and_request_terms():
    # L = 1024, m = [2, 0, 1] → hit = [1024, 0, 512]; P = [2048, 0, 0]; D = [0, 1024, 512]; n = [0, 0, 1]
    # prefill = max(0, P + L − hit) = [2048, 1024, 512]; decode = D + L = [1024, 2048, 1536]
    # cost = (prefill + decode)/512 + ρ n = [6, 6, 4 + ρ]: ρ = 0 → 2; ρ = 3 → [6, 6, 7]: tie 0, 1, trees
    # [1, 0, 0] → 1
    ri = inputs(3, matched_blocks=[2, 0, 1], pending_tokens=[2048, 0, 0], live_kv_tokens=[0, 1024, 512],
                inflight=[0, 0, 1], tree_blocks=[1, 0, 0])
    assert pick(params("dynamo"), ri, 1024) == 2
    assert pick(params("dynamo", dynamo_request_weight=3.0), ri, 1024) == 1
    # κ = 0 (no overlap credit): prefill = P + L = [3072, 1024, 1024] → cost = [8, 6, 5] → 2 still;
    # s = 2: cost = [2·2048 + 1024, 2·1024 + 2048, 2·512 + 1536]/512 = [10, 8, 5] → 2
    assert pick(params("dynamo", dynamo_overlap_credit=0.0), ri, 1024) == 2
    assert pick(params("dynamo", dynamo_prefill_scale=2.0), ri, 1024) == 2


def test_dynamo_ties_go_to_the_smaller_tree_then_random():
    # L = 1024, m = [1, 1, 0], P = D = 0 → prefill [512, 512, 1024], decode 1024 → cost [3, 3, 4];
    # tie 0, 1; trees [5, 2, 0] → 1 (even with u = 0, whose random tie-break would start at 0)
    ri = inputs(3, matched_blocks=[1, 1, 0], tree_blocks=[5, 2, 0])
    assert pick(params("dynamo"), ri, 1024, u=0.0) == 1
    # all equal: random tie-break starting at floor(u·3): u = 0.2 → 0, 0.5 → 1, 0.7 → 2
    ri = inputs(3)
    assert [pick(params("dynamo"), ri, 1024, u=u) for u in (0.2, 0.5, 0.7)] == [0, 1, 2]


def test_dynamo_pd_prefill_router_drops_the_decode_term():
    # L = 1024, m = 0, P = [0, 512, 0], D = [4096, 0, 0]
    # coupled: cost = ([1024, 1536, 1024] + [5120, 1024, 1024])/512 = [12, 5, 4] → 2
    # P/D (track_active_blocks=false): cost = [2, 3, 2] → tie 0, 2, equal trees, u = 0 → 0
    ri = inputs(3, pending_tokens=[0, 512, 0], live_kv_tokens=[4096, 0, 0])
    assert pick(params("dynamo", pd=False), ri, 1024) == 2
    assert pick(params("dynamo", pd=True), ri, 1024) == 0


def test_dynamo_temperature_samples_the_softmax():
    # P/D, L = 512, P = [0, 512, 1024] → cost [1, 2, 3]; z = [0, 0.5, 1]; T = 1: w = [1, 0.60653, 0.36788],
    # Σ = 1.97441, cumulative [1, 1.60653, 1.97441]; u = 0.5 → u·Σ = 0.98721 → 0; u = 0.6 → 1.18465 → 1;
    # u = 0.9 → 1.77697 → 2
    ri = inputs(3, pending_tokens=[0, 512, 1024])
    rp = params("dynamo", pd=True, dynamo_temperature=1.0)
    assert [pick(rp, ri, 512, u=u) for u in (0.5, 0.6, 0.9)] == [0, 1, 2]
    # T = 0.1: w = [1, e^-5, e^-10] = [1, 0.00674, 0.0000454] → u = 0.9 (target 0.9061) → 0
    assert pick(params("dynamo", pd=True, dynamo_temperature=0.1), ri, 512, u=0.9) == 0
    # all costs equal: z = 0, w = 1 each, cumulative [1, 2, 3]; u = 0.5 → 1.5 → 1; u = 0.3 → 0.9 → 0
    assert pick(rp, inputs(3), 512, u=0.5) == 1 and pick(rp, inputs(3), 512, u=0.3) == 0


# ------------------------------------------------------------------ sglang (code 6)
def test_sglang_imbalanced_hit_and_miss():
    rp = params("sglang", sglang_balance_abs=2, sglang_balance_rel=1.5)
    # imbalanced: n = [5, 1, 2]: 5 − 1 = 4 > 2 and 5 > 1.5·1 → least load 1, although 0 holds the prompt
    assert pick(rp, inputs(3, inflight=[5, 1, 2], matched_blocks=[2, 0, 0]), 1024) == 1
    # n = [10, 7, 8]: 3 > 2 but 10 > 1.5·7 = 10.5 fails → balanced; m = [0, 0, 2], L = 1024:
    # rate = 1024/1024 = 1 > 0.3 → cache hit, 2
    assert pick(rp, inputs(3, inflight=[10, 7, 8], matched_blocks=[0, 0, 2]), 1024) == 2
    # miss: m = [0, 0, 1], L = 2048: rate = 512/2048 = 0.25 ≤ 0.3 → least load, 1
    assert pick(rp, inputs(3, inflight=[10, 7, 8], matched_blocks=[0, 0, 1]), 2048) == 1
    # the threshold is strict: threshold 0.25, rate 0.25 → miss (1); 0.2 → hit (2)
    ri = inputs(3, inflight=[10, 7, 8], matched_blocks=[0, 0, 1])
    assert pick(params("sglang", sglang_cache_threshold=0.25), ri, 2048) == 1
    assert pick(params("sglang", sglang_cache_threshold=0.2), ri, 2048) == 2
    # the deepest match, lowest index among ties (equal deepest_entered): m = [0, 2, 2] → 1; the hit counts min(m·bt, L):
    # L = 600, m = 2 → 600/600 = 1 > 0.3
    assert pick(rp, inputs(3, inflight=[1, 1, 1], matched_blocks=[0, 2, 2]), 600) == 1
    # defaults (64, 1.5): n = [70, 0, 3] is imbalanced (70 > 64, 70 > 0) → 1; [60, 0, 3] is not → the hit 0
    assert pick(params("sglang"), inputs(3, inflight=[70, 0, 3], matched_blocks=[2, 0, 0]), 1024) == 1
    assert pick(params("sglang"), inputs(3, inflight=[60, 0, 3], matched_blocks=[2, 0, 0]), 1024) == 0


def test_sglang_deepest_tie_goes_to_the_last_tenant():
    """Among the deepest matches the tree's last_tenant: the instance whose deepest block entered its view
    first (least deepest_entered), then the lowest index; a shallower match never wins on its time."""
    rp = params("sglang")
    # m = [3, 3, 3, 1], L = 2048: rate 1536/2048 = 0.75 > 0.3; entered [5, 2, 2, 0] s: 1 and 2 tie at 2 s → 1
    ri = inputs(4, inflight=[1, 1, 1, 1], matched_blocks=[3, 3, 3, 1], deepest_entered=[5.0, 2.0, 2.0, 0.0])
    assert pick(rp, ri, 2048) == 1
    ri.deepest_entered[:] = [5.0, 4.0, 3.0, 0.0]   # 2's block 2 is the oldest of the three → 2
    assert pick(rp, ri, 2048) == 2
    # a miss is still the least load, whoever holds the deepest block first: m = [1, 1, 0], L = 2048 → 0.25
    ri = inputs(3, inflight=[2, 3, 1], matched_blocks=[1, 1, 0], deepest_entered=[9.0, 1.0, 0.0])
    assert pick(rp, ri, 2048) == 2
    assert pick(rp, ri, 1024) == 1   # L = 1024: 0.5 > 0.3 → the deepest, the one with block 0 since 1 s


# ------------------------------------------------------------------ llmd (code 7)
def test_llmd_weighted_scores():
    # coupled weights 3/2/2; L = 2048 → 4 blocks; kv_cap = 10,000
    # m = [4, 2, 0] → pm = [1, 0.5, 0]; q = [4, 0, 2] → qs = (4 − q)/4 = [0, 1, 0.5];
    # D = [0, 5000, 0] → ku = [1, 0.5, 1]; score = 3pm + 2qs + 2ku = [5, 4.5, 3] → 0
    ri = inputs(3, matched_blocks=[4, 2, 0], queued=[4, 0, 2], live_kv_tokens=[0, 5000, 0])
    assert pick(params("llmd"), ri, 2048, kv_cap=10_000.0) == 0
    # queue weight 4: score = [3 + 0 + 2, 1.5 + 4 + 1, 0 + 2 + 2] = [5, 6.5, 4] → 1
    assert pick(params("llmd", llmd_queue_weight=4.0), ri, 2048, kv_cap=10_000.0) == 1
    # KV over capacity counts as full: D = [20000, 0, 0] → ku = [0, 1, 1]; score = [3, 5.5, 3] → 1
    ri = inputs(3, matched_blocks=[4, 2, 0], queued=[4, 0, 2], live_kv_tokens=[20_000, 0, 0])
    assert pick(params("llmd"), ri, 2048, kv_cap=10_000.0) == 1


def test_llmd_all_equal_queues_score_one_and_ties_are_random():
    # q all 1 → qs = 1 for all (not 0/0); m = [0, 2, 0], L = 2048: score = [0 + 2 + 2, 1.5 + 2 + 2, 4] → 1
    assert pick(params("llmd"), inputs(3, queued=[1, 1, 1], matched_blocks=[0, 2, 0]), 2048) == 1
    # everything equal: random tie-break, u = 0.8 → floor(2.4) = 2
    assert pick(params("llmd"), inputs(3), 2048, u=0.8) == 2


def test_llmd_match_cap_and_pd_weights():
    # cap 1024 tokens = 2 blocks: m = [4, 2, 0] → pm = [1, 1, 0]: score [7, 7, 4]: tie, u = 0.4 → start 1 → 1;
    # uncapped (131,072 tokens): pm = [1, 0.5, 0] → [7, 5.5, 4] → 0
    ri = inputs(3, matched_blocks=[4, 2, 0])
    assert pick(params("llmd", llmd_max_prefix_tokens=1024), ri, 2048, u=0.4) == 1
    assert pick(params("llmd"), ri, 2048, u=0.4) == 0
    # L = 1024; m = [2, 2, 0]; D = [9000, 0, 0], kv_cap 10,000 → ku = [0.1, 1, 1]
    # coupled 3/2/2: [3 + 2 + 0.2, 3 + 2 + 2, 0 + 2 + 2] = [5.2, 7, 4] → 1
    # P/D 2/1/0 (pd-epp-config.yaml): [3, 3, 1] → tie 0, 1, u = 0 → 0
    ri = inputs(3, matched_blocks=[2, 2, 0], live_kv_tokens=[9000, 0, 0])
    assert pick(params("llmd", pd=False), ri, 1024, kv_cap=10_000.0) == 1
    assert pick(params("llmd", pd=True), ri, 1024, kv_cap=10_000.0) == 0


# ------------------------------------------------------------------ production-stack (codes 8, 9, 10)
def test_prodstack_round_robin():
    assert [pick(params("prodstack_rr"), inputs(3), 100, rr=rr) for rr in (0, 1, 2, 7)] == [0, 1, 2, 1]


def test_prodstack_prefix_random_among_the_longest():
    # m = [1, 3, 3, 0]: the longest = {1, 2}; start floor(4u): u = 0 → 0 → 1; 0.5 → 2 → 2;
    # 0.75 → 3 → 3, 0, 1 → 1
    ri = inputs(4, matched_blocks=[1, 3, 3, 0])
    assert [pick(params("prodstack_prefix"), ri, 2048, u=u) for u in (0.0, 0.5, 0.75)] == [1, 2, 1]
    # nothing matched: all are candidates, u = 0.75 → 3 (no load term: inflight is ignored)
    assert pick(params("prodstack_prefix"), inputs(4, inflight=[0, 0, 0, 9]), 2048, u=0.75) == 3


def test_prodstack_kv_threshold_and_fallback():
    rp = params("prodstack_kv")  # threshold 2000 tokens
    # L = 4096: m = [4, 6, 6] → k = 6, b = 1, hit 3072 ≥ 4096 − 2000 = 2096 → 1
    assert pick(rp, inputs(3, matched_blocks=[4, 6, 6], recent_requests=[0, 9, 9]), 4096) == 1
    # m = [2, 3, 0]: hit 1536 < 2096 → lowest QPS among recent [5, 2, 2] → 1 (lowest index)
    assert pick(rp, inputs(3, matched_blocks=[2, 3, 0], recent_requests=[5, 2, 2]), 4096) == 1
    # nothing matched (k = 0), even for L = 100 < threshold → fallback: recent [3, 1, 0] → 2
    assert pick(rp, inputs(3, recent_requests=[3, 1, 0]), 100) == 2
    # L = 100, m = [0, 1, 0]: hit 100 ≥ 100 − 2000 → 1
    assert pick(rp, inputs(3, matched_blocks=[0, 1, 0], recent_requests=[0, 5, 0]), 100) == 1
    # threshold 0: only a full hit routes by cache: L = 4096, m = [7, 8, 0] → b = 1 (hit 4096) → 1;
    # m = [7, 0, 0] → 3584 < 4096 → fallback to the lowest QPS: recent [2, 1, 1] → 1
    rp0 = params("prodstack_kv", prodstack_kv_threshold=0)
    assert pick(rp0, inputs(3, matched_blocks=[7, 8, 0], recent_requests=[0, 5, 0]), 4096) == 1
    assert pick(rp0, inputs(3, matched_blocks=[7, 0, 0], recent_requests=[2, 1, 1]), 4096) == 1


# ------------------------------------------------------------------ aibrix (code 11)
def test_aibrix_bound_excludes_the_best_match():
    # n = [6, 2, 2, 2]: spread 4 ≤ 8 → all are candidates; mean 3, population σ = √((9 + 1 + 1 + 1)/4) = √3
    # = 1.732, bound 4.732. m = [5, 2, 0, 2]: order 0 (m 5), then 1 and 3 (m 2, n 2, random order);
    # 0 has n 6 > 4.732 → skipped; u = 0 → order 1, 3 → 1; u = 0.5 (start 2) → 3 before 1 → 3
    ri = inputs(4, inflight=[6, 2, 2, 2], matched_blocks=[5, 2, 0, 2])
    assert pick(params("aibrix"), ri, 4096, u=0.0) == 1
    assert pick(params("aibrix"), ri, 4096, u=0.5) == 3
    # k_σ = 3: bound 3 + 5.196 = 8.196 ≥ 6 → the best match 0
    assert pick(params("aibrix", aibrix_std_factor=3.0), ri, 4096) == 0


def test_aibrix_imbalanced_candidate_set():
    # n = [12, 3, 3, 20]: spread 17 > 8 → candidates {1, 2} (n = min 3); m = [4, 0, 1, 4] → only 2 matched → 2
    ri = inputs(4, inflight=[12, 3, 3, 20], matched_blocks=[4, 0, 1, 4])
    assert pick(params("aibrix"), ri, 4096) == 2
    # IMBALANCE_ABS = 20: balanced; mean 9.5, σ = √50.25 = 7.089, bound 16.59 → 0 (m 4, n 12 < 20 of pod 3)
    assert pick(params("aibrix", aibrix_imbalance_abs=20), ri, 4096) == 0
    # no candidate matched: m = [4, 0, 0, 4] → least requests over all → 1 (lowest index of n = 3)
    assert pick(params("aibrix"), inputs(4, inflight=[12, 3, 3, 20], matched_blocks=[4, 0, 0, 4]), 4096, u=0.6) == 1


def test_aibrix_none_within_bound_and_load_order():
    # n = [4, 0, 0, 0]: mean 1, σ = √3, bound 2.732; m = [3, 0, 0, 0]: 0 has 4 > bound → the unmatched
    # candidates 1, 2, 3 (n 0, random order): u = 0 → 1; u = 0.5 (start 2) → 2 — AIBrix's random
    # least-request fallback; only "no candidate matched" falls back to the lowest index
    ri = inputs(4, inflight=[4, 0, 0, 0], matched_blocks=[3, 0, 0, 0])
    assert pick(params("aibrix"), ri, 4096) == 1 and pick(params("aibrix"), ri, 4096, u=0.5) == 2
    # equal matches sort by n ascending: n = [3, 1, 2, 2], m = [2, 2, 2, 0] → 1 (whatever u)
    ri = inputs(4, inflight=[3, 1, 2, 2], matched_blocks=[2, 2, 2, 0])
    assert {pick(params("aibrix"), ri, 4096, u=u) for u in (0.0, 0.3, 0.6, 0.9)} == {1}


# ------------------------------------------------------------------ aibrix in P/D: the PD router's prefill side
def test_aibrix_pd_prefill_spread_over_32_takes_a_least_loaded_pod_at_random():
    # n = [40, 3, 3, 7]: 40 − 3 = 37 > 32 → the pods with n = 3, {1, 2}, random (rand.Intn): u = 0 → start 0 → 1;
    # u = 0.6 → start floor(2.4) = 2 → 2; the best match (pod 0, all 8 blocks) does not count
    ri = inputs(4, inflight=[40, 3, 3, 7], matched_blocks=[8, 0, 0, 8])
    assert pick(params("aibrix", pd=True), ri, 4096, u=0.0) == 1
    assert pick(params("aibrix", pd=True), ri, 4096, u=0.6) == 2
    # a spread of exactly 32 is not imbalanced (> 32): n = [35, 3, 3, 7], mean 12, sample sd = √((23² + 9² + 9²
    # + 5²)/3) = √(716/3) = 15.45, bound 27.45 → 0 skipped; pct = [100, 0, 0, 100], max n 35:
    # score 1, 2: 10 + 3/35, 3: 0 + 7/35 → 3
    ri = inputs(4, inflight=[35, 3, 3, 7], matched_blocks=[8, 0, 0, 8])
    assert pick(params("aibrix", pd=True), ri, 4096, u=0.6) == 3
    # the threshold is a field: 2 → 35 − 3 > 2 → least loaded, random from u = 0.6 → 2
    assert pick(params("aibrix", pd=True, aibrix_pd_prefill_imbalance=2), ri, 4096, u=0.6) == 2


def test_aibrix_pd_prefill_sigma_filter_uses_the_sample_deviation():
    # n = [4, 1, 1, 1], mean 1.75, Σ(n − mean)² = 6.75: AIBrix's standardDeviation divides by N − 1 → sd 1.5
    # (population: 1.299). m = [8, 4, 0, 4] of 8 blocks → pct [100, 50, 0, 50]; max n 4 →
    # score = [0 + 1, 5 + 0.25, 10 + 0.25, 5 + 0.25].
    ri = inputs(4, inflight=[4, 1, 1, 1], matched_blocks=[8, 4, 0, 4])
    # k_σ = 1: bound 3.25 < 4 → 0 skipped; 1 and 3 tie at 5.25 → strict <: the first, 1
    assert pick(params("aibrix", pd=True), ri, 4096, u=0.9) == 1
    # k_σ = 1.5: bound 1.75 + 2.25 = 4.0 (population: 3.70) and 4 ≤ 4.0 is kept → 0
    assert pick(params("aibrix", pd=True, aibrix_std_factor=1.5), ri, 4096) == 0
    rp = params("aibrix", pd=True, aibrix_std_factor=1.5)
    assert ref.aibrix_pd_bound(rp, [4, 1, 1, 1]) == 4.0
    assert ref.aibrix_pd_bound(rp, [5]) == 5.0       # one pod: sd 0
    sc = ref.rule_scores(rp, ri, 4096, 8, BT, 1e6)
    assert sc["match_pct"] == [100, 50, 0, 50] and sc["score"] == pytest.approx([1.0, 5.25, 10.25, 5.25])


def test_aibrix_pd_match_percentage_is_integer_division():
    # MatchPrefix: (k + 1) · 100 / len(prefixHashes) in integers: 1 of 3 blocks → 33, 2 of 3 → 66
    assert ref.aibrix_match_pct(inputs(3, matched_blocks=[1, 2, 3]), 3) == [33, 66, 100]
    assert R.aibrix_pd_prefill_score(1, 3, 0, 1) == pytest.approx(6.7)        # (100 − 33) · 0.1, not 6.667
    assert R.aibrix_pd_prefill_score(2, 3, 3, 4) == pytest.approx(3.4 + 0.75)
    # 10 % of match weighs one full normalised load: 2 of 3 blocks idle (3.4 + 0) loses to 3 of 3 at max load (0 + 1)
    ri = inputs(2, inflight=[0, 7], matched_blocks=[2, 3])
    assert pick(params("aibrix", pd=True, aibrix_pd_prefill_imbalance=100), ri, 1536) == 1


def test_aibrix_pd_is_not_route_original():
    # n = [12, 3, 3, 20], m = [4, 0, 1, 4] of 8. routeOriginal (coupled): 17 > 8 → candidates {1, 2}, 2 matched → 2.
    # PD router: 17 ≤ 32; mean 9.5, sample sd = √(201/3) = 8.185, bound 17.69 → 3 skipped; pct [50, 0, 12, 50],
    # max n 20: score [5 + 0.6, 10 + 0.15, 8.8 + 0.15] → 0
    ri = inputs(4, inflight=[12, 3, 3, 20], matched_blocks=[4, 0, 1, 4])
    assert pick(params("aibrix", pd=False), ri, 4096) == 2
    assert pick(params("aibrix", pd=True), ri, 4096) == 0


def test_aibrix_pd_rule_uses_the_score_rule_scores_shows(monkeypatch):
    """route_reference's PD rule takes its choice from aibrix_pd_prefill_score (the lecture's one place)."""
    rp = params("aibrix", pd=True)
    ri = inputs(4, inflight=[1, 1, 1, 1], matched_blocks=[8, 0, 0, 0])
    assert ref.route_reference(rp, ri, 4096, 8, BT, 0.0, 0, 1e6) == 0
    monkeypatch.setattr(ref, "aibrix_pd_prefill_score", lambda r, nb: [5.0, 5.0, 1.0, 5.0])
    assert ref.route_reference(rp, ri, 4096, 8, BT, 0.0, 0, 1e6) == 2


# ------------------------------------------------------------------ the decode node (route_decode)
def decode_inputs(**fields):
    n = len(next(iter(fields.values())))
    di = R.new_decode_inputs(n)
    for name, values in fields.items():
        getattr(di, name)[:] = values
    return di


def dpick(choice, di, *, u=0.0, n_prefill=8, k=0, kv_cap=100_000.0, max_req=32.0, max_thr=2048.0):
    """The decode node both implementations choose (asserting they agree)."""
    code = DECODE_CHOICES[choice]
    a = route_decode(code, di, u, n_prefill, k, kv_cap, max_req, max_thr)
    b = route_decode_reference(code, di, u, n_prefill, k, kv_cap, max_req, max_thr)
    assert a == b, f"numba route_decode {a} != route_decode_reference {b}"
    return a


def test_llmd_decode_takes_the_fewest_waiting_with_the_leftover_tie_break():
    # q = [2, 0, 1, 0]: the fewest waiting are 1 and 3 (not node 0, idle but with 2 waiting: running does not count,
    # where least_requests would take it: 0 + 2 < 9 + 0)
    di = decode_inputs(running=[0, 9, 9, 9], queued=[2, 0, 1, 0])
    assert dpick("least_requests", di) == 0
    # u = 0.3, 8 prefill instances: u · 8 = 2.4 → prefill start 2, leftover u2 = 0.4 → floor(0.4 · 4) = 1 → 1
    assert dpick("least_queued", di, u=0.3) == 1
    # u = 0.33: u · 8 = 2.64 → u2 = 0.64 → start floor(2.56) = 2 → the first tied at or after 2 → 3
    assert dpick("least_queued", di, u=0.33) == 3
    # u = 0.45: 3.6 → u2 = 0.6 → start 2 → 3; u = 0.12: 0.96 → u2 = 0.96 → start 3 → 3
    assert [dpick("least_queued", di, u=u) for u in (0.45, 0.12)] == [3, 3]
    assert [R.decode_tie_start(u, 8, 4) for u in (0.3, 0.33, 0.0, 0.999999)] == [1, 2, 0, 3]
    assert [ref.decode_tie_start(u, 8, 4) for u in (0.3, 0.33, 0.0, 0.999999)] == [1, 2, 0, 3]


def test_aibrix_decode_fast_path_idle_or_request_spread():
    # an idle node (min r = 0) → the first of the least running, whatever the scores
    di = decode_inputs(running=[3, 0, 5, 0], rate=[100.0, 0.0, 900.0, 0.0], kv_used=[0.0, 99_000.0, 0.0, 0.0])
    assert dpick("aibrix_pd", di) == 1
    # r = [40, 8, 9, 8]: 40 − 8 = 32 ≥ 32 → the first least running, 1 (the score would take 3: most free KV)
    di = decode_inputs(running=[40, 8, 9, 8], rate=[1000.0, 400.0, 450.0, 400.0],
                       kv_used=[50_000.0, 90_000.0, 50_000.0, 0.0])
    assert dpick("aibrix_pd", di) == 1
    # AIBRIX_DECODE_MAX_REQUEST = 33: no fast path; throughput spread 600 ≤ 2048 → the score:
    # max r 40, max thr 1000, free [50, 10, 50, 100] (max 100):
    # 0: (1 + 0)/0.5 = 2; 1: (0.2 + 0.6)/0.1 = 8; 2: (0.225 + 0.55)/0.5 = 1.55; 3: (0.2 + 0.6)/1 = 0.8 → 3
    assert dpick("aibrix_pd", di, max_req=33.0) == 3
    assert ref.aibrix_decode_score(di, 100_000.0) == pytest.approx([2.0, 8.0, 1.55, 0.8])


def test_aibrix_decode_fast_path_throughput_spread():
    # r = [10, 12, 11, 10]; thr = [3000, 500, 800, 400]: spread 2600 > 2048 → the first slowest, 3
    di = decode_inputs(running=[10, 12, 11, 10], rate=[3000.0, 500.0, 800.0, 400.0], kv_used=[0.0, 0.0, 0.0, 0.0])
    assert dpick("aibrix_pd", di) == 3
    # spread exactly 2048 (> is strict) → the score: max r 12, max thr 2448, free all 100 →
    # 0: 10/12 + 0 = 0.833; 1: 1 + 0.796; 2: 0.917 + 0.673; 3: 0.833 + 0.837 → 0
    di = decode_inputs(running=[10, 12, 11, 10], rate=[2448.0, 500.0, 800.0, 400.0], kv_used=[0.0] * 4)
    assert dpick("aibrix_pd", di) == 0
    assert dpick("aibrix_pd", di, max_thr=2047.0) == 3


def test_aibrix_decode_score_ties_and_free_percent():
    # two equal nodes: strict < → the lower index
    di = decode_inputs(running=[4, 5, 4], rate=[200.0, 210.0, 200.0], kv_used=[500.0, 500.0, 500.0])
    assert dpick("aibrix_pd", di, kv_cap=1000.0) == 0
    # free % is Go's math.Round (half away from zero): 7/8 used → 100 − 87.5 = 12.5 → 13 (Python's round: 12)
    assert R.aibrix_free_pct(7.0, 8.0) == ref.aibrix_free_pct(7.0, 8.0) == 13.0
    assert R.aibrix_free_pct(8.0, 8.0) == ref.aibrix_free_pct(8.0, 8.0) == 0.1   # full: ≤ 0 → 0.1
    assert R.aibrix_free_pct(0.0, 8.0) == ref.aibrix_free_pct(0.0, 8.0) == 100.0
    # a full node divides by 0.1 / max free: it loses to anything with room
    di = decode_inputs(running=[1, 6], rate=[50.0, 300.0], kv_used=[1000.0, 500.0])
    assert dpick("aibrix_pd", di, kv_cap=1000.0) == 1
    # the maxima start at 1: rates all below 1 tok/s → 1 − thr/1 (not 1 − thr/max thr)
    di = decode_inputs(running=[1, 1], rate=[0.5, 0.25], kv_used=[0.0, 0.0])
    assert ref.aibrix_decode_score(di, 1000.0) == pytest.approx([1.5, 1.75])


def test_decode_round_robin_least_requests_and_unknown():
    di = decode_inputs(running=[1, 0, 2], queued=[0, 3, 0], bound=[1, 0, 0])
    assert [dpick("round_robin", di, k=k) for k in (0, 4, 8)] == [0, 1, 2]
    assert dpick("least_requests", di) == 0         # 1 + 0 + 1 = 2 < 3 = 0 + 3 + 0, 2 + 0 + 0
    assert route_decode(9, di, 0.0, 1, 0, 1.0, 32.0, 2048.0) == -1
    with pytest.raises(NotImplementedError):
        route_decode_reference(9, di, 0.0, 1, 0, 1.0, 32.0, 2048.0)


@st.composite
def decode_case(draw):
    D = draw(st.integers(1, 6))
    ints = lambda hi: st.lists(st.integers(0, hi), min_size=D, max_size=D)  # noqa: E731
    floats = lambda xs: st.lists(st.one_of(st.sampled_from(xs), st.floats(0.0, max(xs))), min_size=D,  # noqa: E731
                                 max_size=D)
    di = DecodeInputs(np.array(draw(ints(40)), dtype=np.int64), np.array(draw(ints(3)), dtype=np.int64),
                      np.array(draw(ints(2)), dtype=np.int64),
                      np.array(draw(floats([0.0, 50.0, 400.0, 3000.0])), dtype=np.float64),
                      np.array(draw(floats([0.0, 500.0, 875.0, 1000.0])), dtype=np.float64))
    u = draw(st.one_of(st.sampled_from([0.0, 0.3, 0.999999]), st.floats(0.0, 1.0, exclude_max=True)))
    return (draw(st.integers(1, 4)), di, u, draw(st.integers(1, 8)), draw(st.integers(0, 20)), 1000.0,
            draw(st.sampled_from([1.0, 5.0, 32.0])), draw(st.sampled_from([10.0, 500.0, 2048.0])))


@settings(max_examples=300, deadline=None)
@given(decode_case())
def test_route_decode_equals_reference_and_is_a_node(case):
    got = route_decode(*case)
    assert got == route_decode_reference(*case)
    assert 0 <= got < len(case[1].running)


# ------------------------------------------------------------------ preble (code 12)
def test_preble_exploit_explore_and_pd():
    # L = 1536 (3 blocks), m = [2, 2, 1]: k = 2, cached 1024, new 512 < 1024 → exploit G = {0, 1}
    # coupled: cost = recent + n·45·0.15 = [0.5, 0.3 + 6.75, 0.0] → argmin over G → 0 (2 is cheaper but not in G)
    # P/D: cost = [0.5, 0.3, 0.0] → 1
    ri = inputs(3, matched_blocks=[2, 2, 1], recent_prefill_s=[0.5, 0.3, 0.0], inflight=[0, 1, 0])
    assert pick(params("preble", pd=False), ri, 1536) == 0
    assert pick(params("preble", pd=True), ri, 1536) == 1
    # explore: m = [1, 0, 0], L = 1536: cached 512, new 1024 ≥ 512 → all; cost [0.5, 0.3, 0.0] → 2
    ri = inputs(3, matched_blocks=[1, 0, 0], recent_prefill_s=[0.5, 0.3, 0.0])
    assert pick(params("preble"), ri, 1536) == 2
    # new == cached (L = 1024, m = 1 → 512 / 512) is not exploit → 2
    assert pick(params("preble"), ri, 1024) == 2
    # L = 1000, m = 1: cached 512, new 488 < 512 → exploit → 0
    assert pick(params("preble"), ri, 1000) == 0


# ------------------------------------------------------------------ kernel ≡ reference
def _router_inputs(draw, n, n_blocks):
    ints = lambda hi: st.lists(st.integers(0, hi), min_size=n, max_size=n)  # noqa: E731
    vals = lambda xs: st.lists(st.sampled_from(xs), min_size=n, max_size=n)  # noqa: E731
    f = lambda xs: np.array(xs, dtype=np.float64)  # noqa: E731
    i = lambda xs: np.array(xs, dtype=np.int64)  # noqa: E731
    matched = st.lists(st.one_of(st.just(0), st.integers(0, n_blocks)), min_size=n, max_size=n)  # many 0s
    return RouterInputs(i(draw(matched)), i(draw(ints(3))),
                        f(draw(vals([0.0, 256.0, 512.0, 1000.0, 3000.0]))),
                        f(draw(vals([0.0, 512.0, 1024.0, 5000.0]))), i(draw(ints(4))), i(draw(ints(3))),
                        i(draw(ints(3))), f(draw(vals([0.0, 0.25, 0.5, 1.0]))),
                        f(draw(vals([0.0, 1.0, 2.0, 7.5]))))  # deepest_entered: ties are common


@st.composite
def router_case(draw, name):
    pd = draw(st.booleans())
    small = lambda hi: st.one_of(st.just(0.0), st.floats(0.0, hi))  # noqa: E731
    weight = st.one_of(st.none(), st.sampled_from([0.0, 1.0, 2.0, 3.0]), st.floats(0.0, 5.0))
    cfg = RouterConfig(
        dynamo_overlap_credit=draw(st.sampled_from([0.0, 0.5, 1.0, 2.0])),
        dynamo_prefill_scale=draw(st.sampled_from([0.0, 1.0, 2.0])),
        dynamo_request_weight=draw(st.sampled_from([0.0, 1.0, 3.0])),
        dynamo_temperature=draw(st.one_of(st.just(0.0), st.sampled_from([0.1, 1.0]), st.floats(1e-3, 5.0))),
        # the shared tier (issue 26 §3 fact 2): the disaggregated pools only
        dynamo_shared_multiplier=draw(st.sampled_from([0.0, 0.5, 1.0]) | st.floats(0.0, 1.0)) if pd else 0.0,
        sglang_cache_threshold=draw(st.one_of(st.sampled_from([0.0, 0.25, 0.3, 0.5, 1.0]), st.floats(0.0, 1.0))),
        sglang_balance_abs=draw(st.integers(0, 5)), sglang_balance_rel=draw(st.sampled_from([1.0, 1.5, 2.0])),
        llmd_prefix_weight=draw(weight), llmd_queue_weight=draw(weight), llmd_kv_weight=draw(weight),
        llmd_max_prefix_tokens=draw(st.sampled_from([1, 512, 1024, 131_072])),
        prodstack_kv_threshold=draw(st.sampled_from([0, 500, 2000])),
        aibrix_imbalance_abs=draw(st.integers(0, 5)),
        aibrix_std_factor=draw(st.one_of(st.sampled_from([0.0, 0.5, 1.0]), small(3.0))),
        aibrix_pd_prefill_imbalance=draw(st.integers(0, 5)),
        preble_decode_len=draw(st.sampled_from([0.0, 45.0])), preble_tpot_s=draw(st.sampled_from([0.0, 0.15])))
    bt = draw(st.sampled_from([512, 64]))
    L = draw(st.integers(1, 3000))
    n_blocks = -(-L // bt)
    n = draw(st.integers(1, 8))
    ri = _router_inputs(draw, n, n_blocks)
    u = draw(st.one_of(st.sampled_from([0.0, 0.25, 0.5, 0.999999]), st.floats(0.0, 1.0, exclude_max=True)))
    rr = draw(st.integers(0, 50))
    kv_cap = draw(st.sampled_from([512.0, 1024.0, 4096.0, 1e6, math.inf]))
    return cfg.resolve(name, pd, 100, bt), ri, L, n_blocks, bt, u, rr, kv_cap


@pytest.mark.parametrize("name", sorted(ROUTERS))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_route_equals_reference_and_is_an_instance(name, data):
    rp, ri, L, n_blocks, bt, u, rr, kv_cap = data.draw(router_case(name))
    got = route(rp, ri, L, n_blocks, bt, u, rr, kv_cap)
    assert got == route_reference(rp, ri, L, n_blocks, bt, u, rr, kv_cap)
    assert 0 <= got < len(ri.inflight)


def test_reference_takes_lists():
    ri = inputs(3, matched_blocks=[2, 0, 1], pending_tokens=[2048, 0, 0], live_kv_tokens=[0, 1024, 512])
    as_lists = RouterInputs(*(a.tolist() for a in ri))
    for name in ROUTERS:
        rp = params(name)
        assert route_reference(rp, as_lists, 1024, 2, BT, 0.3, 4, 1e6) == route(rp, ri, 1024, 2, BT, 0.3, 4, 1e6)


def test_unknown_code_is_refused():
    rp = params("dynamo")._replace(code=99)
    assert route(rp, inputs(2), 10, 1, BT, 0.0, 0, 1.0) == -1
    with pytest.raises(NotImplementedError):
        route_reference(rp, inputs(2), 10, 1, BT, 0.0, 0, 1.0)


# ------------------------------------------------------------------ the belief ≡ ReferenceBelief
@st.composite
def belief_case(draw):
    n_inst, n_ids = draw(st.integers(1, 3)), draw(st.integers(1, 12))
    cap = draw(st.sampled_from([0, 1, 2, 3, 5, 100]))
    ttl = draw(st.sampled_from([math.inf, 0.5, 2.0]))
    ops = draw(st.lists(st.tuples(st.booleans(), st.integers(0, n_inst - 1),
                                  st.lists(st.integers(0, n_ids - 1), min_size=1, max_size=5, unique=True),
                                  st.sampled_from([0.0, 0.25, 0.5, 1.0, 3.0])), min_size=1, max_size=30))
    return n_inst, n_ids, cap, ttl, ops


@settings(max_examples=400, deadline=None)
@given(belief_case())
def test_belief_equals_reference_belief(case):
    n_inst, n_ids, cap, ttl, ops = case
    st_ = new_cache_state(n_inst, n_ids, cap if cap > 0 else n_ids)  # 0 = unbounded: the engines use n_blocks
    touched = np.zeros((n_inst, n_ids) if ttl < math.inf else (n_inst, 1))
    entered = np.full((n_inst, n_ids), np.nan)   # note_entered writes every block it lets be matched
    ref = ReferenceBelief(n_inst, cap, ttl)
    t = 0.0
    for insert, inst, blocks, dt in ops:
        t += dt
        b = np.array(blocks, dtype=np.int64)
        for i in range(n_inst):
            m = belief_match(st_.last_use, touched, i, b, t, ttl)
            assert m == ref.match(i, blocks, t)
            assert st_.meta[i, 1] == ref.size(i)
            assert deepest_entered(entered, i, b, m) == ref.entered.deepest(i, blocks, m)  # not NaN: written
        if insert:
            note_entered(st_.last_use, touched, entered, inst, b, t, ttl)
            belief_insert(st_.last_use, st_.q_block, st_.q_stamp, st_.meta, touched, inst, b, t, ttl)
            ref.insert(inst, blocks, t)


def test_belief_hand_worked():
    # capacity 2, TTL 1 s: send [0, 1, 2] to 0 at t = 0 → the LRU keeps the last two touched (blocks are
    # touched last first, so 1 and 0 remain): match [0, 1, 2] = 2 at t = 1; at t = 1.5 the TTL has passed → 0
    s = new_cache_state(1, 4, 2)
    touched = np.zeros((1, 4))
    b = np.array([0, 1, 2], dtype=np.int64)
    belief_insert(s.last_use, s.q_block, s.q_stamp, s.meta, touched, 0, b, 0.0, 1.0)
    assert belief_match(s.last_use, touched, 0, b, 1.0, 1.0) == 2
    assert belief_match(s.last_use, touched, 0, b, 1.5, 1.0) == 0
    ref = ReferenceBelief(1, 2, 1.0)
    ref.insert(0, [0, 1, 2], 0.0)
    assert ref.match(0, [0, 1, 2], 1.0) == 2 and ref.match(0, [0, 1, 2], 1.5) == 0
    # capacity 0 = unbounded in the reference (RouterParams.belief_capacity's meaning)
    ref0 = ReferenceBelief(1, 0, math.inf)
    ref0.insert(0, [0, 1, 2], 0.0)
    assert ref0.match(0, [0, 1, 2, 3], 99.0) == 3 and ref0.size(0) == 3


# ------------------------------------------------------------------ RouterConfig: defaults and bad inputs
def test_defaults_resolve_to_the_sources_numbers():
    rp = RouterConfig().resolve("llmd", False, 11_920, BT)
    assert (rp.llmd_w_prefix, rp.llmd_w_queue, rp.llmd_w_kv) == (3.0, 2.0, 2.0)        # defaults.go
    assert (rp.llmd_max_blocks, rp.belief_capacity) == (131_072 // 512, 11_920)         # 256 blocks; pod's cache
    rp = RouterConfig().resolve("llmd", True, 11_920, BT)
    assert (rp.llmd_w_prefix, rp.llmd_w_queue, rp.llmd_w_kv) == (2.0, 1.0, 0.0)         # pd-epp-config.yaml
    rp = RouterConfig().resolve("sglang", False, 11_920, BT)
    assert (rp.sglang_threshold, rp.sglang_abs, rp.sglang_rel) == (0.3, 64.0, 1.5)
    assert rp.belief and rp.belief_capacity == 32_768   # 2^26 chars / 4 chars per token / 512
    rp = RouterConfig().resolve("aibrix", False, 11_920, BT)
    assert (rp.aibrix_abs, rp.aibrix_k, rp.belief_capacity, rp.belief_ttl) == (8.0, 1.0, 390, 1200.0)
    rp = RouterConfig().resolve("aibrix", True, 11_920, BT)   # the PD router: pd_disaggregation.go@01692761
    assert (rp.aibrix_pd_prefill_abs, rp.aibrix_decode_max_request, rp.aibrix_decode_max_throughput) == \
        (32.0, 32.0, 2048.0)
    assert rp.decode_choice == DECODE_CHOICES["aibrix_pd"]
    assert RouterConfig().resolve("llmd", True, 10, BT).decode_choice == DECODE_CHOICES["least_queued"]
    assert RouterConfig(decode_choice="least_kv").resolve("llmd", True, 10, BT).decode_choice == 0
    rp = RouterConfig().resolve("dynamo", False, 11_920, BT)
    assert (rp.dynamo_credit, rp.dynamo_scale, rp.dynamo_request_weight, rp.dynamo_temperature) == (1, 1, 0, 0)
    assert not rp.belief
    assert RouterConfig(knowledge="belief").resolve("dynamo", True, 10, BT).belief_ttl == 120.0
    rp = RouterConfig().resolve("preble", False, 11_920, BT)
    assert (rp.preble_decode_len, rp.preble_tpot, rp.window_s) == (45.0, 0.15, 180.0)
    assert RouterConfig().resolve("prodstack_kv", False, 10, BT).prodstack_threshold == 2000.0


NAN, INF = math.nan, math.inf
BAD_FIELDS = [
    ("knowledge", "oracle"), ("knowledge", 1), ("decode_choice", "fastest"), ("decode_choice", 0),
    ("belief_capacity_blocks", -1), ("belief_capacity_blocks", 1.5), ("belief_capacity_blocks", "3"),
    ("belief_capacity_blocks", True), ("belief_capacity_blocks", 2 ** 41),
    ("belief_ttl_s", 0.0), ("belief_ttl_s", -1.0), ("belief_ttl_s", NAN), ("belief_ttl_s", "1"),
    ("window_s", 0.0), ("window_s", INF), ("window_s", 1e8), ("window_s", NAN),
    ("dynamo_overlap_credit", -0.1), ("dynamo_overlap_credit", NAN), ("dynamo_overlap_credit", "1"),
    ("dynamo_prefill_scale", -1.0), ("dynamo_prefill_scale", INF), ("dynamo_request_weight", -1.0),
    ("dynamo_request_weight", None), ("dynamo_temperature", -0.5), ("dynamo_temperature", INF),
    ("dynamo_temperature", True), ("dynamo_shared_multiplier", 1.5), ("dynamo_shared_multiplier", -0.1),
    ("sglang_cache_threshold", 1.5), ("sglang_cache_threshold", -0.1),
    ("sglang_cache_threshold", NAN), ("sglang_balance_abs", -1), ("sglang_balance_abs", 2.5),
    ("sglang_balance_abs", "64"), ("sglang_balance_abs", True), ("sglang_balance_rel", 0.9),
    ("sglang_balance_rel", NAN), ("llmd_prefix_weight", -1.0), ("llmd_prefix_weight", NAN),
    ("llmd_queue_weight", "2"), ("llmd_queue_weight", 1e7), ("llmd_kv_weight", INF), ("llmd_kv_weight", False),
    ("llmd_max_prefix_tokens", 0), ("llmd_max_prefix_tokens", 1.5), ("llmd_max_prefix_tokens", None),
    ("prodstack_kv_threshold", -1), ("prodstack_kv_threshold", 20.5), ("prodstack_kv_threshold", "2000"),
    ("aibrix_imbalance_abs", -1), ("aibrix_imbalance_abs", 8.5), ("aibrix_imbalance_abs", 10 ** 10),
    ("aibrix_std_factor", -1.0), ("aibrix_std_factor", NAN), ("aibrix_std_factor", "1"),
    ("aibrix_pd_prefill_imbalance", -1), ("aibrix_pd_prefill_imbalance", 32.5), ("aibrix_pd_prefill_imbalance", "32"),
    ("aibrix_decode_max_request", -1.0), ("aibrix_decode_max_request", NAN), ("aibrix_decode_max_request", "32"),
    ("aibrix_decode_max_throughput", -1.0), ("aibrix_decode_max_throughput", INF),
    ("aibrix_decode_max_throughput", None), ("decode_choice", "aibrix"),
    ("preble_decode_len", -1.0), ("preble_decode_len", INF), ("preble_tpot_s", -0.15), ("preble_tpot_s", NAN),
    ("preble_tpot_s", [0.15]),
]


@pytest.mark.parametrize("field, value", BAD_FIELDS)
def test_router_config_bad_inputs_name_the_field(field, value):
    with pytest.raises(InputError, match=rf"RouterConfig\.{field}: got .*; allowed: "):
        RouterConfig(**{field: value})


def test_bad_inputs_are_many():
    # every field of RouterConfig is tried at least twice
    assert len(BAD_FIELDS) == 71
    fields = {f for f, _ in BAD_FIELDS}
    assert fields == set(RouterConfig.__dataclass_fields__)


@pytest.mark.parametrize("router", ["vllm", "Dynamo", 5, None, ["dynamo"]])
def test_resolve_unknown_router_names_it(router):
    with pytest.raises(InputError, match=r"RouterConfig\.resolve\.router: got .*; allowed: one of 'dynamo'"):
        RouterConfig().resolve(router, False, 10, BT)


@pytest.mark.parametrize("args, field", [((1, 10, BT), "pd"), ((False, -1, BT), "cache_capacity_blocks"),
                                         ((False, 10, 0), "block_tokens")])
def test_resolve_bad_cluster_numbers(args, field):
    with pytest.raises(InputError, match=rf"RouterConfig\.resolve\.{field}"):
        RouterConfig().resolve("dynamo", *args)
