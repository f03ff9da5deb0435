"""Prefix cache: hand-worked cases, kernel ≡ plain-Python reference, stack distances ≡ direct LRU,
and the measured reference table of reference/mooncake_paper.md on the released traces."""
from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mooncake_lab import prefix_cache as pc
from mooncake_lab import traces as traces_mod
from mooncake_lab.traces import Trace, read_jsonl


# ------------------------------------------------------------------------------------------------
# fixtures and helpers
# ------------------------------------------------------------------------------------------------
def _trace(blocks_per_request, input_len=None) -> Trace:
    """A Trace from a list of block-id lists (lengths default to full 512-token blocks)."""
    k = [len(b) for b in blocks_per_request]
    if input_len is None:
        input_len = [512 * n for n in k]
    offs = np.concatenate([[0], np.cumsum(k)]).astype(np.int64)
    ids = np.array([b for bl in blocks_per_request for b in bl], dtype=np.int64)
    n = len(k)
    return Trace(np.arange(n, dtype=float), np.asarray(input_len), np.ones(n), offs, ids, name="hand")


@pytest.fixture(scope="module")
def real_traces(real_trace_dir):
    # real_trace_dir (tests/conftest.py) skips with a reason when the released traces are absent.
    return {name: read_jsonl(real_trace_dir / f"{name}_trace.jsonl", name=name)
            for name in ("conversation", "synthetic")}


# ------------------------------------------------------------------------------------------------
# hand-worked cases
# ------------------------------------------------------------------------------------------------
def test_prefix_hit_tokens_hand_worked():
    # L = 1,300 tokens = 3 blocks (512 + 512 + 276): n=3 → 1,300; n=2 → 2·512 = 1,024; n=0 → 0.
    assert pc.prefix_hit_tokens([3, 2, 0], [1300, 1300, 1300]).tolist() == [1300, 1024, 0]


# Requests (blocks): r0 [0,1,2] L=1300, r1 [0,1,3] L=1100, r2 [4] L=100, r3 [0,1,2] L=1500; capacity 3.
# Touching last block first (root last), MRU-first stacks:
#   r0: lookup 0 hits; touch 2,1,0 → [0,1,2]
#   r1: 0,1 cached, 3 not → 2 hits; touch 3 (evicts LRU 2), 1, 0 → [0,1,3]
#   r2: 4 misses → 0; touch 4 (evicts LRU 3) → [4,0,1]
#   r3: 0,1 cached, 2 not → 2 hits.                                  n_hit = [0, 2, 0, 2]
# Touching root first instead, r2's block 4 would evict block 0 and r3 would get 0 hits.
# Token-weighted: (0 + 1024 + 0 + 1024) / (1300 + 1100 + 100 + 1500) = 2048 / 4000 = 0.512.
# Block-weighted: 4 / 10 = 0.4.
HAND = [[0, 1, 2], [0, 1, 3], [4], [0, 1, 2]]
HAND_LEN = [1300, 1100, 100, 1500]


def test_lru_hand_worked_trace():
    t = _trace(HAND, HAND_LEN)
    res = pc.simulate_lru(t, 3)
    assert res.n_hit_blocks.tolist() == [0, 2, 0, 2]
    assert pc.hit_ratio(t, res.n_hit_blocks, "token") == pytest.approx(0.512)
    assert pc.hit_ratio(t, res.n_hit_blocks, "block") == pytest.approx(0.4)
    assert sorted(np.flatnonzero(res.state.last_use[0] >= 0).tolist()) == [0, 1, 2]  # final cache {0,1,2}
    assert pc._lru_reference(t.block_offsets, t.block_ids, np.zeros(4, np.int64), [3]).tolist() == [0, 2, 0, 2]


def test_stack_distances_hand_worked():
    # Stack before r3 (MRU first): [4, 0, 1, 3, 2] → distances of 0, 1, 2 are 1, 2, 4 → running max 1, 2, 4.
    # r1: stack [0, 1, 2]: block 0 → 0, block 1 → 1, block 3 never seen.
    t = _trace(HAND, HAND_LEN)
    N = pc.NEVER
    assert pc.stack_distances(t).tolist() == [N, N, N, 0, 1, N, N, 1, 2, 4]
    # capacity 3: r3 hits blocks 0,1 (max 2 < 3) → same 0.512 as the direct simulation;
    # capacity 5: r3 hits all 3 blocks (1500 tokens) → (1024 + 1500) / 4000 = 0.631; infinite: same.
    assert pc.hit_ratio_curve(t, [3, 5, math.inf]).tolist() == pytest.approx([0.512, 0.631, 0.631])


def test_prefix_chain_rule_a_block_needs_its_whole_prefix():
    # r1 = [5, 1]: block 1 is cached but block 5 (its prefix) is not → 0 hits.
    t = _trace([[0, 1], [5, 1]])
    assert pc.simulate_lru(t, 10).n_hit_blocks.tolist() == [0, 0]
    assert pc.hit_ratio_curve(t, [10]).tolist() == [0.0]


def test_capacity_zero_caches_nothing():
    t = _trace([[0, 1], [0, 1]])
    assert pc.simulate_lru(t, 0).n_hit_blocks.tolist() == [0, 0]
    assert pc.hit_ratio_curve(t, [0, 1, 2]).tolist() == pytest.approx([0.0, 0.25, 0.5])  # 0, 1/4, 2/4 blocks


def test_replica_counts_and_round_robin():
    # round robin: r0 → inst 0 holds {0,1}; r1 → inst 1 holds {0,2}; block 0 has 2 replicas.
    t = _trace([[0, 1], [0, 2]])
    res = pc.simulate_lru(t, 10, n_instances=2, routing="round_robin")
    assert res.assignment.tolist() == [0, 1]
    assert res.n_hit_blocks.tolist() == [0, 0]  # local caches: r1 misses block 0 held only by inst 0
    assert pc.replica_counts(res.state).tolist() == [2, 1, 1]


def test_explicit_assignment_shares_cache():
    t = _trace([[0, 1], [0, 2]])
    assert pc.simulate_lru(t, 10, n_instances=2, assignment=[1, 1]).n_hit_blocks.tolist() == [0, 1]


def test_block_popularity_hand():
    # block 0 in 3 requests, 1 in 2, 2 in 1 (counted once although repeated in r2), 3 in 1.
    t = _trace([[0, 1], [0, 1, 3], [0, 2, 2]])
    assert pc.block_popularity(t).tolist() == [3, 2, 1, 1]


def test_queue_compaction_many_touches():
    # 3,000 touches on 5 blocks with capacity 2: the queue (2·2 + 64 = 68 slots) compacts many times.
    rng = np.random.default_rng(1)
    reqs = [[int(b)] for b in rng.integers(0, 5, 3000)]
    t = _trace(reqs)
    res = pc.simulate_lru(t, 2)
    ref = pc._lru_reference(t.block_offsets, t.block_ids, np.zeros(len(t), np.int64), [2])
    assert res.n_hit_blocks.tolist() == ref.tolist()
    assert res.state.meta[0, 1] == (res.state.last_use[0] >= 0).sum() == 2


# ------------------------------------------------------------------------------------------------
# kernel ≡ reference on random small traces
# ------------------------------------------------------------------------------------------------
@st.composite
def small_traces(draw):
    """Prefix-chained requests: a few sessions whose prompts extend (or branch from) earlier ones,
    plus, sometimes, arbitrary ids (repeats inside a prompt, broken chains)."""
    n_req = draw(st.integers(1, 60))
    chains: list[list[int]] = [[]]
    nxt = 0
    reqs = []
    for _ in range(n_req):
        if draw(st.booleans()) and draw(st.booleans()):
            reqs.append(draw(st.lists(st.integers(0, 12), min_size=1, max_size=6)))
            continue
        base = chains[draw(st.integers(0, len(chains) - 1))]
        keep = draw(st.integers(0, len(base)))
        grow = draw(st.integers(0 if keep else 1, 4))
        chain = base[:keep] + list(range(nxt, nxt + grow))
        nxt += grow
        chains.append(chain)
        reqs.append(chain)
    lens = [512 * (len(r) - 1) + draw(st.integers(1, 512)) for r in reqs]
    ids = sorted({b for r in reqs for b in r})
    dense = {b: i for i, b in enumerate(ids)}  # dense ids, as the loader produces
    return _trace([[dense[b] for b in r] for r in reqs], lens)


@settings(max_examples=150, deadline=None)
@given(t=small_traces(), n_inst=st.integers(1, 3), caps=st.lists(st.integers(0, 8), min_size=3, max_size=3),
       seed=st.integers(0, 5))
def test_lru_kernel_matches_ordereddict_reference(t, n_inst, caps, seed):
    caps = caps[:n_inst]
    assign = pc.route_requests(len(t), n_inst, "random", seed)
    st_ = pc.new_cache_state(n_inst, t.n_blocks, caps)
    got = pc._lru_kernel(t.block_offsets, t.block_ids, assign, *st_)
    ref = pc._lru_reference(t.block_offsets, t.block_ids, assign, caps)
    assert got.tolist() == ref.tolist()
    held = (st_.last_use >= 0).sum(axis=1)
    assert held.tolist() == st_.meta[:, 1].tolist()
    assert (held <= np.asarray(caps)).all()


@settings(max_examples=150, deadline=None)
@given(t=small_traces())
def test_stack_distances_match_reference_and_direct_lru(t):
    d = pc.stack_distances(t)
    assert d.tolist() == pc._stack_distances_reference(t.block_offsets, t.block_ids).tolist()
    caps = [0, 1, 2, 3, 5, 8, 13, t.n_blocks]
    curve = pc.hit_ratio_curve(t, caps, distances=d)
    curve_b = pc.hit_ratio_curve(t, caps, "block", distances=d)
    for c, h, hb in zip(caps, curve, curve_b):
        direct = pc.simulate_lru(t, c).n_hit_blocks
        assert h == pytest.approx(pc.hit_ratio(t, direct, "token"))
        assert hb == pytest.approx(pc.hit_ratio(t, direct, "block"))
    assert np.all(np.diff(curve) >= 0)  # LRU is a stack algorithm: more capacity never hurts


# ------------------------------------------------------------------------------------------------
# eviction policies: LRU, LFU, LengthAware (arXiv v3 Table 1)
# ------------------------------------------------------------------------------------------------
# Requests (blocks), one cache of 3 blocks, full 512-token blocks; touches go last block first.
# (touches, position, stamp) of each cached block:
#   r0 [0]    → 0 (1, 0, s0)
#   r1 [1, 2] → 2 (1, 1, s1), 1 (1, 0, s2): full {0, 1, 2}
#   r2 [3]    → victim: LRU 0 (oldest); LFU 0 (all once, oldest); LengthAware 2 (all once, largest
#               position). Store 3 (1, 0, s3).
#   r3 [1, 2] → LRU / LFU hit both; touch 2 (s4) and 1 (s5), counts 2.
#               LengthAware hits block 1 only; 2 is stored evicting 0 (once, pos 0, oldest), 1 → 2 touches.
#   r4 [4]    → LRU evicts 3 (s3) → {1, 2, 4}; LFU the once-touched 3 → {1, 2, 4};
#               LengthAware: once-touched 2 (pos 1) before 3 (pos 0) → {1, 3, 4}.
#   r5 [5]    → LRU evicts 2 (s4) → {1, 4, 5}; LFU the once-touched 4 → {1, 2, 5};
#               LengthAware: 3 and 4 both once at pos 0, the older 3 → {1, 4, 5}.
#   r6 [1, 2] → LRU hits 1 block, LFU 2, LengthAware 1.
POLICY_HAND = [[0], [1, 2], [3], [1, 2], [4], [5], [1, 2]]
POLICY_HITS = {"lru": [0, 0, 0, 2, 0, 0, 1], "lfu": [0, 0, 0, 2, 0, 0, 2], "length_aware": [0, 0, 0, 1, 0, 0, 1]}


@pytest.mark.parametrize("policy", pc.EVICTION_POLICIES)
def test_each_policy_hand_worked(policy):
    t = _trace(POLICY_HAND)
    res = pc.simulate_cache(t, 3, policy)
    assert res.n_hit_blocks.tolist() == POLICY_HITS[policy]
    assert res.state.policy == policy
    assert sorted(np.flatnonzero(res.state.last_use[0] >= 0).tolist()) == [1, 2, 5]  # after r6, all three
    ref = pc._replay_reference(t.block_offsets, t.block_ids, np.zeros(len(t), np.int64), [3], policy)
    assert ref.tolist() == POLICY_HITS[policy]
    # 7 requests, 10 blocks: block-weighted hit ratio = hits / 10
    assert pc.cache_hit_ratio(t, 3, policy, weight="block") == pytest.approx(sum(POLICY_HITS[policy]) / 10)


def test_lfu_keeps_a_frequent_block_that_lru_evicts():
    # capacity 2: block 0 used twice, then 1, 2 once each, then 0 again. LRU: r2 [1] and r3 [2] push 0
    # out → r4 misses; LFU evicts the once-used 1 (for 2) → r4 hits.
    t = _trace([[0], [0], [1], [2], [0]])
    assert pc.simulate_cache(t, 2, "lru").n_hit_blocks.tolist() == [0, 1, 0, 0, 0]
    assert pc.simulate_cache(t, 2, "lfu").n_hit_blocks.tolist() == [0, 1, 0, 0, 1]


def test_length_aware_evicts_the_later_block_first():
    # capacity 3, all blocks touched once: r0 [0], r1 [1, 2] (2 at position 1), r2 [9]. LFU evicts
    # the least recent (0), LengthAware the later position (2): r3 [0] hits only under LengthAware.
    t = _trace([[0], [1, 2], [9], [0]])
    assert pc.simulate_cache(t, 3, "lfu").n_hit_blocks.tolist() == [0, 0, 0, 0]
    assert pc.simulate_cache(t, 3, "length_aware").n_hit_blocks.tolist() == [0, 0, 0, 1]


def test_lfu_is_not_a_stack_algorithm():
    # Why LFU curves replay once per capacity: here a cache of 3 blocks hits less than one of 2
    # (found by a random search; kernel and reference agree). LRU can never do that.
    t = _trace([[1], [5], [2], [3], [5], [2], [4], [3], [4], [3], [4], [4]])
    z = np.zeros(len(t), np.int64)
    hits = {c: pc.simulate_cache(t, c, "lfu").n_hit_blocks.sum() for c in (2, 3)}
    assert hits == {2: 4, 3: 3}
    assert [pc._replay_reference(t.block_offsets, t.block_ids, z, [c], "lfu").sum() for c in (2, 3)] == [4, 3]
    assert pc.simulate_cache(t, 3, "lru").n_hit_blocks.sum() >= pc.simulate_cache(t, 2, "lru").n_hit_blocks.sum()


def test_reference_cache_lru_equals_the_ordereddict_lru():
    rng = np.random.default_rng(3)
    reqs = [rng.integers(0, 9, rng.integers(1, 5)).tolist() for _ in range(400)]
    t = _trace(reqs)
    z = np.zeros(len(t), np.int64)
    for cap in (0, 1, 3, 7):
        assert (pc._replay_reference(t.block_offsets, t.block_ids, z, [cap], "lru").tolist()
                == pc._lru_reference(t.block_offsets, t.block_ids, z, [cap]).tolist())


@pytest.mark.parametrize("policy", ["lfu", "length_aware"])
def test_heap_compaction_many_touches(policy):
    # 3,000 single-block requests on 5 blocks, capacity 2: the heap (68 slots) compacts many times.
    rng = np.random.default_rng(1)
    t = _trace([[int(b)] for b in rng.integers(0, 5, 3000)])
    res = pc.simulate_cache(t, 2, policy)
    ref = pc._replay_reference(t.block_offsets, t.block_ids, np.zeros(len(t), np.int64), [2], policy)
    assert res.n_hit_blocks.tolist() == ref.tolist()
    assert res.state.meta[0, 1] == (res.state.last_use[0] >= 0).sum() == 2
    assert res.state.meta[0, 3] <= res.state.q_block.shape[1]


@settings(max_examples=150, deadline=None)
@given(t=small_traces(), n_inst=st.integers(1, 3), caps=st.lists(st.integers(0, 8), min_size=3, max_size=3),
       seed=st.integers(0, 5), policy=st.sampled_from(pc.EVICTION_POLICIES))
def test_policy_kernel_matches_reference(t, n_inst, caps, seed, policy):
    caps = caps[:n_inst]
    assign = pc.route_requests(len(t), n_inst, "random", seed)
    st_ = pc.new_cache_state(n_inst, t.n_blocks, caps, policy=policy)
    got = pc._replay_kernel(t.block_offsets, t.block_ids, assign, *st_)
    ref = pc._replay_reference(t.block_offsets, t.block_ids, assign, caps, policy)
    assert got.tolist() == ref.tolist()
    held = (st_.last_use >= 0).sum(axis=1)
    assert held.tolist() == st_.meta[:, 1].tolist()
    assert (held <= np.asarray(caps)).all()


@settings(max_examples=60, deadline=None)
@given(t=small_traces(), policy=st.sampled_from(pc.EVICTION_POLICIES))
def test_policy_curve_equals_direct_runs(t, policy):
    caps = [0, 1, 2, 5, t.n_blocks, math.inf]
    curve = pc.hit_ratio_curve(t, caps, policy=policy)
    for c, h in zip(caps, curve):
        assert h == pytest.approx(pc.cache_hit_ratio(t, c, policy))
    # a cache that never fills never evicts: every policy gives the infinite-cache hit ratio
    assert curve[-2] == curve[-1] == pytest.approx(pc.infinite_cache_hit_ratio(t))
    if policy == "lru":
        assert curve.tolist() == pytest.approx(pc.hit_ratio_curve(t, caps).tolist())


def test_policy_validation():
    t = _trace([[0], [1]])
    for bad in ("LRU", "fifo", 3, None):
        with pytest.raises(ValueError, match=r"^simulate_cache\.policy: got .*; allowed: one of 'lru'"):
            pc.simulate_cache(t, 2, bad)
        with pytest.raises(ValueError, match=r"^hit_ratio_curve\.policy: got .*; allowed: one of 'lru'"):
            pc.hit_ratio_curve(t, [2], policy=bad)
        with pytest.raises(ValueError, match=r"^new_cache_state\.policy: got .*; allowed: one of 'lru'"):
            pc.new_cache_state(1, 2, 2, policy=bad)
    with pytest.raises(ValueError, match=r"^hit_ratio_curve\.distances: "):
        pc.hit_ratio_curve(t, [2], distances=pc.stack_distances(t), policy="lfu")
    with pytest.raises(ValueError, match=r"^simulate: a 'lfu' cache may see up to 1,073,741,824 block touches; "
                                         r"allowed: at most 1,073,741,823"):
        pc.check_touch_budget(2**30, "lfu", "simulate")
    pc.check_touch_budget(2**40, "lru")  # LRU stamps are plain int64 clocks


def test_counts_and_positions_saturate_in_the_packed_rank():
    # a block already touched FREQ_MAX times keeps count FREQ_MAX when touched again
    st_ = pc.new_cache_state(1, 1, 1, policy="lfu")
    st_.last_use[0, 0], st_.meta[0, 1] = pc.FREQ_MAX << pc.FREQ_SHIFT, 1
    pc._replay_kernel(np.array([0, 1]), np.array([0]), np.zeros(1, np.int64), *st_)
    assert st_.last_use[0, 0] >> pc.FREQ_SHIFT == pc.FREQ_MAX
    # a prompt longer than POS_MAX blocks: positions past POS_MAX rank as POS_MAX (kernel and reference)
    n = pc.POS_MAX + 10
    t = _trace([list(range(n))])
    res = pc.simulate_cache(t, n, "length_aware")
    pos_rev = (res.state.last_use[0] >> pc.STAMP_BITS) & pc.POS_MAX
    assert pos_rev[[0, 1, pc.POS_MAX, n - 1]].tolist() == [pc.POS_MAX, pc.POS_MAX - 1, 0, 0]
    ref = pc.ReferenceCache(n, "length_aware")
    ref.touch(list(range(n)))
    assert ref.entries[n - 1][1] == pc.POS_MAX and ref.entries[1][1] == 1


# ------------------------------------------------------------------------------------------------
# validation
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, param", [
    ({"capacity": -1}, "capacity"),
    ({"capacity": 1.5}, "capacity"),
    ({"capacity": "10"}, "capacity"),
    ({"capacity": math.nan}, "capacity"),
    ({"capacity": 10, "n_instances": 0}, "n_instances"),
    ({"capacity": 10, "n_instances": 2.5}, "n_instances"),  # 2.0 is accepted, as everywhere (validate.integer)
    ({"capacity": 10, "routing": "nearest"}, "routing"),
    ({"capacity": 10, "n_instances": 2, "assignment": [0, 2]}, "assignment"),
    ({"capacity": 10, "assignment": [0]}, "assignment"),
])
def test_simulate_lru_rejects_bad_input(kwargs, param):
    t = _trace([[0], [1]])
    with pytest.raises(ValueError, match=rf"(^|\.){re.escape(param)}(\[[^\]]*\])?(: | must | values )"):
        pc.simulate_lru(t, **kwargs)


def test_other_validation():
    t = _trace([[0], [1]])
    with pytest.raises(ValueError, match=r"^capacities: "):
        pc.hit_ratio_curve(t, [10, -1])
    with pytest.raises(ValueError, match=r"^weight: "):
        pc.hit_ratio_curve(t, [10], weight="bytes")
    with pytest.raises(ValueError, match=r"^trace: "):
        pc.stack_distances([[0], [1]])
    with pytest.raises(ValueError, match=r"^hit_ratio\.n_hit_blocks: "):
        pc.hit_ratio(t, [0])
    with pytest.raises(ValueError, match=r"^capacity: "):
        pc.new_cache_state(2, 5, [1, 2, 3])
    assert pc.simulate_lru(t, 10.0).n_hit_blocks.tolist() == [0, 0]  # an integer-valued float is fine


# ------------------------------------------------------------------------------------------------
# the released traces: reference table of reference/mooncake_paper.md (±0.3 point)
# ------------------------------------------------------------------------------------------------
REF = {  # reference/mooncake_paper.md, "Measured on those two files" table, token-weighted global LRU
    "conversation": {"unique": 182_790, "once": 0.758, "inf": 0.374,
                     "lru": {1_000: 0.045, 10_000: 0.216, 30_000: 0.332, 100_000: 0.371}},
    "synthetic": {"unique": 43_924, "once": 0.584, "inf": 0.651,
                  "lru": {1_000: 0.086, 10_000: 0.432, 30_000: 0.636, 100_000: 0.651}},
}


@pytest.mark.parametrize("name", ["conversation", "synthetic"])
def test_reference_table(real_traces, name):
    t, ref = real_traces[name], REF[name]
    pop = pc.block_popularity(t)
    assert len(pop) == ref["unique"]
    assert (pop == 1).mean() == pytest.approx(ref["once"], abs=0.0005)
    caps = list(ref["lru"])
    d = pc.stack_distances(t)
    curve = pc.hit_ratio_curve(t, caps + [math.inf], distances=d)
    assert curve[-1] == pytest.approx(ref["inf"], abs=0.003)
    for c, h in zip(caps, curve):
        assert h == pytest.approx(ref["lru"][c], abs=0.003), c
        # stack-distance curve ≡ direct LRU simulation at the same capacity
        assert h == pytest.approx(pc.lru_hit_ratio(t, c), abs=1e-12)


def test_conversation_starts_with_shared_block(real_traces):
    # reference/mooncake_paper.md: every conversation request starts with block 0 (system prompt).
    t = real_traces["conversation"]
    assert (t.block_ids[t.block_offsets[:-1]] == t.block_ids[0]).all()
    assert pc.block_popularity(t).max() == len(t)


def test_local_caches_hit_less_than_global_pool(real_traces):
    t = real_traces["conversation"]
    g = pc.lru_hit_ratio(t, 58_590)
    local = pc.simulate_lru(t, 5_859, n_instances=10, routing="random", seed=0)
    loc = pc.hit_ratio(t, local.n_hit_blocks)
    assert loc < g / 2  # FAST'25 Fig. 10 shows the global pool at 2.22× the local caches' hit ratio
    # With random routing, a hot block lands in (almost) every local cache:
    assert pc.replica_counts(local.state)[t.block_ids[0]] == 10


# ------------------------------------------------------------------------------------------------
# lecture 03 experiments and metrics
# ------------------------------------------------------------------------------------------------
from mooncake_lab.experiments import l03_cache  # noqa: E402


def test_local_vs_global_hand():
    # 4 requests all [0, 1] (1024 tokens each). Global pool of 4 blocks: r1..r3 hit 2 blocks → 3/4.
    # 2 local caches of 2 blocks, round robin: r0→0, r1→1 miss; r2→0, r3→1 hit → 2/4; global/local = 1.5.
    t = _trace([[0, 1]] * 4)
    df = l03_cache.local_vs_global(t, n_instances=2, total_capacity_blocks=4, routings=("round_robin",))
    assert df["hit_ratio"].tolist() == pytest.approx([0.75, 0.5])
    assert df["global_over_this"].tolist() == pytest.approx([1.0, 1.5])
    assert df["capacity_per_instance_blocks"].tolist() == [4, 2]


def test_experiment_validation():
    t = _trace([[0, 1]])
    with pytest.raises(ValueError, match=r"^n_instances: "):
        l03_cache.local_vs_global(t, n_instances=0)
    with pytest.raises(ValueError, match=r"^total_capacity_blocks: "):
        l03_cache.local_vs_global(t, total_capacity_blocks=-5)
    with pytest.raises(ValueError, match=r"^trace must "):
        l03_cache.hit_ratio_vs_capacity(42)


def test_popularity_and_replicas_hand():
    t = _trace([[0, 1], [0, 2], [0, 1]])
    pop = l03_cache.block_popularity_table(t)
    assert pop["requests"].tolist() == [3, 2, 1] and pop["block_id"].tolist() == [0, 1, 2]
    # round robin on 2 instances: inst 0 gets r0, r2 → {0,1}; inst 1 gets r1 → {0,2}.
    rep = l03_cache.replica_distribution(t, n_instances=2, capacity_blocks=10, routing="round_robin")
    assert rep["blocks"].tolist() == [2, 1]  # blocks 1 and 2 once, block 0 twice


def test_curve_frame_on_real_trace(real_traces):
    df = l03_cache.hit_ratio_vs_capacity(real_traces["synthetic"], [1_000, 10_000, 30_000, 100_000, math.inf])
    assert np.all(np.diff(df["hit_ratio"]) >= 0)
    assert np.allclose(df["hit_ratio"], df["reference_hit_ratio"], atol=0.003)
    assert (df["block_hit_ratio"] <= df["hit_ratio"] + 0.02).all()


def test_cache_metrics(real_traces, monkeypatch):
    monkeypatch.setattr(traces_mod, "cached_trace", lambda name: real_traces[name])
    ms = {m.name: m for m in l03_cache.cache_metrics()}
    assert list(ms) == [f"cache.conversation.lru_hit.b{c}" for c in (1000, 10000, 30000, 100000)] + [
        "cache.conversation.global_vs_local_ratio"]
    for c in (1000, 10000, 30000, 100000):
        m = ms[f"cache.conversation.lru_hit.b{c}"]
        assert m.ours == pytest.approx(m.paper, abs=0.003)
    r = ms["cache.conversation.global_vs_local_ratio"]
    assert r.paper == 2.22 and r.ours > 1.5


def test_cache_metrics_say_when_on_stand_in(monkeypatch):
    rng = np.random.default_rng(0)
    stand_in = _trace([[0] + [int(b) for b in rng.integers(1, 50, 3)] for _ in range(200)])
    stand_in = Trace(stand_in.arrival_s, stand_in.input_len, stand_in.output_len, stand_in.block_offsets,
                     stand_in.block_ids, name="synthetic:conversation-like", source="generator seed 0")
    monkeypatch.setattr(traces_mod, "cached_trace", lambda name: stand_in)
    ms = l03_cache.cache_metrics()
    assert all(m.paper is None for m in ms)
    assert all("stand-in" in m.source for m in ms)


def test_pooled_cache_state_reuses_its_buffers_and_behaves_like_a_fresh_state(monkeypatch):
    """Pooled arrays start empty (last_use all −1) and a simulation on them matches fresh arrays,
    even though the queues are not cleared between runs."""
    monkeypatch.setattr(pc, "_POOL", [])
    t = _trace([[0, 1, 2], [0, 1, 3], [4], [0, 1, 2], [5, 6], [0, 5]] * 5)
    assign = pc.route_requests(len(t), 3, "random", 1)
    fresh = pc.new_cache_state(3, t.n_blocks, 2)
    want = pc._lru_kernel(t.block_offsets, t.block_ids, assign, *fresh)
    first = None
    for n_inst, cap in ((3, 2), (2, 1), (3, 2), (8, 3), (3, 2)):   # up to 4× the first run's size
        with pc.pooled_cache_state(n_inst, t.n_blocks, cap) as st:
            assert st.last_use.shape == (n_inst, t.n_blocks) and (st.last_use == -1).all()
            assert (st.meta[:, 1:] == 0).all() and st.q_block.shape[0] == n_inst
            first = st.last_use if first is None else first
            assert np.shares_memory(st.last_use, first)   # one buffer, reused
            if (n_inst, cap) == (3, 2):
                assert pc._lru_kernel(t.block_offsets, t.block_ids, assign, *st).tolist() == want.tolist()
                assert np.array_equal(st.meta, fresh.meta) and np.array_equal(st.last_use, fresh.last_use)
            else:
                pc._lru_kernel(t.block_offsets, t.block_ids, assign % n_inst, *st)   # leaves its marks
    assert len(pc._POOL) == 2
    with pytest.raises(ValueError, match=r"^n_instances: "):
        with pc.pooled_cache_state(0, 5, 1):
            pass


def test_pooled_cache_state_is_cleared_through_its_queues_and_refilled_after_an_error(monkeypatch):
    """A state given back after a normal run is cleared by its queues (the pool marks it clean, so the next
    run skips the fill); one given back by an error is refilled; either way the next state is empty."""
    monkeypatch.setattr(pc, "_POOL", [])
    t = _trace([[0, 1, 2], [0, 1, 3], [4], [0, 1, 2], [5, 6], [0, 5]] * 5 + [[7 + i] for i in range(100)])
    assign = pc.route_requests(len(t), 3, "random", 1)
    for policy in pc.EVICTION_POLICIES:
        with pc.pooled_cache_state(3, t.n_blocks, 2, policy=policy) as st:
            pc._replay_kernel(t.block_offsets, t.block_ids, assign, *st)
            assert (st.last_use >= 0).any()
        assert [e[1] for e in pc._POOL if e[1]] == [3 * t.n_blocks]  # last_use known clean
        with pytest.raises(RuntimeError):
            with pc.pooled_cache_state(3, t.n_blocks, 2, policy=policy) as st:
                assert (st.last_use == -1).all()  # cleared through the queues, not filled
                pc._replay_kernel(t.block_offsets, t.block_ids, assign, *st)
                raise RuntimeError("a run that fails half-way")
        assert all(e[1] == 0 for e in pc._POOL)  # dirty: the next one fills
        with pc.pooled_cache_state(3, t.n_blocks, 2, policy=policy) as st:
            assert (st.last_use == -1).all()


def test_pool_remembers_what_is_clean_beyond_a_smaller_run(monkeypatch):
    """A run on fewer instances leaves the rest of a clean buffer clean (so going back to more instances
    fills nothing), and a run on more instances fills only beyond the clean part (a move of
    SchedulingDashboard from 8 to 24 prefill instances filled all 24 × 183k)."""
    monkeypatch.setattr(pc, "_POOL", [])
    t = _trace([[0, 1, 2], [0, 1, 3], [4], [0, 1, 2], [5, 6], [0, 5]] * 5 + [[7 + i] for i in range(100)])
    n = t.n_blocks

    def run(n_inst):
        with pc.pooled_cache_state(n_inst, n, 2) as st:
            assert (st.last_use == -1).all()
            pc._replay_kernel(t.block_offsets, t.block_ids, pc.route_requests(len(t), n_inst, "random", 1), *st)
        return max(e[1] for e in pc._POOL)

    assert run(3) == 3 * n
    assert run(1) == 3 * n          # instance 0 written and cleared; 1 and 2 untouched
    buf = next(e[0] for e in pc._POOL if e[1])
    buf[3 * n:4 * n] = 7            # beyond the clean part: must be filled by the next larger run
    assert run(4) == 4 * n
    assert run(2) == 4 * n


def test_prefault_pool_leaves_clean_written_buffers_for_a_bigger_run(monkeypatch):
    """prefault_pool(k, 2): two pooled buffers whose first k elements are −1 and marked clean, which the
    next runs of that size take as they are (no fill, no page to fault in); bad sizes are refused by name."""
    monkeypatch.setattr(pc, "_POOL", [])
    t = _trace([[0, 1, 2], [0, 1, 3], [4], [0, 1, 2], [5, 6], [0, 5]] * 5 + [[7 + i] for i in range(1000)])
    n = t.n_blocks
    with pc.pooled_cache_state(1, n, 2) as st:   # a small run first: its buffer has room for 4 instances
        pc._replay_kernel(t.block_offsets, t.block_ids, np.zeros(len(t), dtype=np.int64), *st)
    pc.prefault_pool(4 * n)
    clean = sorted(e[1] for e in pc._POOL)
    assert len(clean) >= 2 and clean[-2] >= 4 * n
    assert all((e[0][:4 * n] == -1).all() for e in pc._POOL if e[1] >= 4 * n)
    ready = [e[0] for e in pc._POOL if e[1] >= 4 * n]
    with pc.pooled_cache_state(4, n, 2) as st, pc.pooled_array((4, n)) as avail:
        assert (st.last_use == -1).all()
        assert any(np.shares_memory(st.last_use, b) for b in ready)   # taken as it was
        assert any(np.shares_memory(avail, b) for b in ready)
    for bad in (-1, 2.5, float("nan"), "8"):
        with pytest.raises(ValueError, match=r"^n_elements: "):
            pc.prefault_pool(bad)
    with pytest.raises(ValueError, match=r"^n_buffers: "):
        pc.prefault_pool(10, 0)
