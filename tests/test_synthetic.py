"""The synthetic trace generator: calibration of each preset, validity, determinism, arguments."""
from __future__ import annotations

import numpy as np
import pytest

from mooncake_lab.prefix_cache import infinite_cache_hit_ratio
from mooncake_lab.synthetic import PRESETS, TARGETS, synthetic_trace
from mooncake_lab.traces import read_jsonl


@pytest.fixture(scope="module")
def traces():
    return {(p, s): synthetic_trace(p, seed=s) for p in PRESETS for s in (0, 1)}


def _prefix_chained(t) -> bool:
    """Equal id ⇒ same position and same parent block (so the same whole prefix)."""
    k = t.blocks_per_request
    pos = np.arange(len(t.block_ids)) - np.repeat(t.block_offsets[:-1], k)
    parent = np.where(pos > 0, np.roll(t.block_ids, 1), -1)
    triples = np.unique(np.stack([t.block_ids, pos, parent], axis=1), axis=0)
    return len(triples) == len(np.unique(t.block_ids))


# ------------------------------------------------------------------------------------ calibration
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("preset", list(PRESETS))
def test_preset_within_10_percent_of_targets(traces, preset, seed):
    t, target = traces[preset, seed], TARGETS[preset]
    assert len(t) == target["requests"]
    ours = {"mean_input": t.input_len.mean(), "mean_output": t.output_len.mean(),
            "cache_ratio": infinite_cache_hit_ratio(t), "duration_s": t.duration_s}
    for k, v in ours.items():
        assert abs(v / target[k] - 1) <= 0.10, f"{preset} seed {seed}: {k} = {v:.4g}, target {target[k]}"


@pytest.mark.parametrize("name", ["conversation", "synthetic"])
def test_targets_are_what_the_released_file_measures(name, real_trace_dir):
    """The stand-ins' targets for the two files we have are those files' own statistics (rounded)."""
    from mooncake_lab.traces import load_trace
    t, target = load_trace(real_trace_dir / f"{name}_trace.jsonl"), TARGETS[f"{name}-like"]
    ours = {"requests": len(t), "duration_s": t.duration_s, "mean_input": t.input_len.mean(),
            "mean_output": t.output_len.mean(), "cache_ratio": infinite_cache_hit_ratio(t),
            "median_input": np.median(t.input_len), "p99_input": np.percentile(t.input_len, 99)}
    assert set(ours) == set(target)
    for k, v in ours.items():
        tol = 0.0005 if k == "cache_ratio" else max(0.5, 0.002 * target[k])   # a fraction to 3 places; counts rounded
        assert abs(v - target[k]) <= tol, f"{name}: {k} = {v:.6g}, target {target[k]}"


def test_conversation_like_long_tail(traces):
    # the released conversation file: input median 6,909, p99 85,400 (TARGETS, checked above)
    t = traces["conversation-like", 0]
    assert abs(np.median(t.input_len) / 6_909 - 1) < 0.15
    assert abs(np.percentile(t.input_len, 99) / 85_400 - 1) < 0.20
    assert t.input_len.max() <= PRESETS["conversation-like"].max_input


def test_synthetic_like_has_tiny_and_huge_prompts(traces):
    # real synthetic trace: 10% of prompts ≤ 30 tokens, 25% ≤ 277, median 11,587, max 191,378
    t = traces["synthetic-like", 0]
    assert np.mean(t.input_len <= 300) > 0.15
    assert abs(np.median(t.input_len) / 11_587 - 1) < 0.15
    assert t.input_len.max() > 100_000


# ------------------------------------------------------------------------------------ structure
@pytest.mark.parametrize("preset", list(PRESETS))
def test_valid_prefix_chained_trace(traces, preset):
    t = traces[preset, 0]
    t.validate()                         # lengths ≥ 1, ceil(len/512) blocks, sorted arrivals, dense ids
    assert _prefix_chained(t)
    assert t.n_blocks == len(np.unique(t.block_ids))
    assert t.name == f"synthetic:{preset}" and "seed=0" in t.source
    np.testing.assert_allclose(t.arrival_s * 1000, np.round(t.arrival_s * 1000), atol=1e-6)  # ms


def test_conversation_like_shares_system_prompt_and_turns(traces):
    t = traces["conversation-like", 0]
    assert (t.block_ids[t.block_offsets[:-1]] == 0).all()     # block 0 = shared system prompt
    # continuations: the 2nd block was seen in an earlier request. Real trace: 38.7% of requests.
    first_seen = np.full(t.n_blocks, len(t))
    req = np.repeat(np.arange(len(t)), t.blocks_per_request)
    np.minimum.at(first_seen, t.block_ids, req)
    second = t.block_ids[t.block_offsets[:-1] + 1]            # every request has ≥ 2 blocks (≥ 891 tokens)
    share = np.mean(first_seen[second] < np.arange(len(t)))
    assert 0.30 < share < 0.48
    # timestamps bucketed at 3 s like the real file
    assert np.allclose(t.arrival_s / 3.0, np.round(t.arrival_s / 3.0))


def test_round_trip_through_jsonl(tmp_path):
    t = synthetic_trace("toolagent-like", n_requests=300, seed=3)
    back = read_jsonl(t.to_jsonl(tmp_path / "x.jsonl"))
    assert back.equals(t)


# ------------------------------------------------------------------------------------ determinism
def test_same_seed_same_arrays_different_seed_different(traces):
    for p in PRESETS:
        again = synthetic_trace(p, seed=0)
        assert again.equals(traces[p, 0])
        assert not traces[p, 1].equals(traces[p, 0])


# ------------------------------------------------------------------------------------ size and arrivals
def test_size_arguments():
    # toolagent-like rate = 23,608 / 3,600 s = 6.558 req/s
    t = synthetic_trace("toolagent-like", n_requests=656)
    assert len(t) == 656 and t.duration_s == pytest.approx(656 / (23_608 / 3_600), abs=0.002)
    t = synthetic_trace("toolagent-like", duration_s=100.0)
    assert len(t) == round(100 * 23_608 / 3_600) and t.duration_s == pytest.approx(100.0, abs=0.002)
    t = synthetic_trace("synthetic-like", duration_s=50.0, rate=10.0)
    assert len(t) == 500 and t.duration_s == pytest.approx(50.0, abs=0.002)
    t = synthetic_trace("synthetic-like", n_requests=200, rate=4.0)
    assert len(t) == 200 and t.duration_s == pytest.approx(50.0, abs=0.002)


@pytest.mark.parametrize("kwargs,fragment", [
    ({"preset": "chat-like"}, "synthetic_trace.preset: got 'chat-like'; allowed: one of 'conversation-like', 'synthetic-like', 'toolagent-like'"),
    ({"arrivals": "uniform"}, "synthetic_trace.arrivals: got 'uniform'; allowed: one of 'poisson', 'bursty'"),
    ({"n_requests": 0}, "synthetic_trace.n_requests: got 0; allowed: an integer in [1, "),
    ({"n_requests": 10.5}, "synthetic_trace.n_requests: got 10.5; allowed: an integer"),
    ({"duration_s": -1.0}, "synthetic_trace.duration_s: got -1.0; allowed: a finite number in [0.001, "),
    ({"rate": float("nan")}, "synthetic_trace.rate: got nan; allowed: a finite number in (0, "),
    ({"n_requests": 10, "duration_s": 10.0, "rate": 1.0}, "at most two"),
    ({"seed": 1.5}, "synthetic_trace.seed: got 1.5; allowed: an integer"),
    ({"p_continu": 0.5}, "unknown SessionModel field"),
    ({"p_continue": 1.0}, "synthetic_trace.p_continue: got 1.0; allowed: a finite number in [0, 0.999]"),
])
def test_bad_arguments(kwargs, fragment):
    with pytest.raises(ValueError) as e:
        synthetic_trace(**kwargs)
    assert fragment in str(e.value)


def test_bursty_arrivals_are_more_variable_than_poisson():
    counts = {}
    for arr in ("poisson", "bursty"):
        t = synthetic_trace("synthetic-like", arrivals=arr, seed=4)
        c = np.bincount((t.arrival_s // 60).astype(int))[:-1]     # full minutes only
        counts[arr] = c.var() / c.mean()                           # index of dispersion (1 for Poisson)
    assert counts["bursty"] > 2 * counts["poisson"]


def test_overrides_change_the_workload():
    base = synthetic_trace("conversation-like", n_requests=3000, seed=0)
    more_turns = synthetic_trace("conversation-like", n_requests=3000, seed=0, p_continue=0.7)
    assert infinite_cache_hit_ratio(more_turns) > infinite_cache_hit_ratio(base) + 0.1
    assert "p_continue=0.7" in more_turns.source
    assert not np.allclose(synthetic_trace("conversation-like", n_requests=100, bucket_s=0).arrival_s % 3, 0)
