"""The Trace container, the JSONL reader (good and malformed files) and the lecture-03 trace experiments."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from mooncake_lab import reproduce
from mooncake_lab.experiments import l03_traces
from mooncake_lab.traces import (Trace, TraceFormatError, dense_block_ids, load_trace, read_jsonl,
                                 trace_from_requests)


def _write(path, lines):
    path.write_text("".join((ln if isinstance(ln, str) else json.dumps(ln)) + "\n" for ln in lines))
    return path


def _rec(ts=0, il=600, ol=20, h=None):
    return {"timestamp": ts, "input_length": il, "output_length": ol,
            "hash_ids": list(range(math.ceil(il / 512))) if h is None else h}


# Three requests worked by hand: ids 100,7 | 100,7,9 | 55 (raw), lengths 1000, 1300, 512 tokens.
# ceil(1000/512) = 2, ceil(1300/512) = 3, ceil(512/512) = 1 blocks.
GOOD = [
    {"timestamp": 0, "input_length": 1000, "output_length": 10, "hash_ids": [100, 7]},
    {"timestamp": 1500, "input_length": 1300, "output_length": 30, "hash_ids": [100, 7, 9], "extra": "ignored"},
    {"timestamp": 61000, "input_length": 512, "output_length": 2, "hash_ids": [55]},
]


@pytest.fixture
def good(tmp_path):
    return read_jsonl(_write(tmp_path / "good_trace.jsonl", GOOD))


# ------------------------------------------------------------------------------------ reading good files
def test_read_good_file(good):
    assert good.name == "good" and good.source.endswith("good_trace.jsonl")
    np.testing.assert_array_equal(good.arrival_s, [0.0, 1.5, 61.0])      # ms / 1000
    np.testing.assert_array_equal(good.input_len, [1000, 1300, 512])
    np.testing.assert_array_equal(good.output_len, [10, 30, 2])
    np.testing.assert_array_equal(good.block_offsets, [0, 2, 5, 6])
    # dense ids in order of first appearance: 100→0, 7→1, 9→2, 55→3
    np.testing.assert_array_equal(good.block_ids, [0, 1, 0, 1, 2, 3])
    assert good.n_blocks == 4
    good.validate()


def test_blank_lines_are_skipped(tmp_path):
    t = read_jsonl(_write(tmp_path / "t.jsonl", [GOOD[0], "", "   ", GOOD[1]]))
    assert len(t) == 2


def test_dense_block_ids_first_appearance():
    ids, k = dense_block_ids([5, 3, 5, 9, 3])
    np.testing.assert_array_equal(ids, [0, 1, 0, 2, 1])
    assert k == 3
    ids, k = dense_block_ids([])
    assert len(ids) == 0 and k == 0


def test_jsonl_round_trip(good, tmp_path):
    back = read_jsonl(good.to_jsonl(tmp_path / "back.jsonl"))
    assert back.equals(good)


# ------------------------------------------------------------------------------------ malformed files
BAD_CASES = [
    # (lines of the file, line named in the error, fragment of the message)
    ([_rec(), '{"timestamp": 0, "input_length": 600,'], 2, "malformed JSON"),
    (["timestamp,input_length,output_length,hash_ids", "0,600,20,0"], 1, "CSV"),
    ([_rec(), [1, 2, 3]], 2, "expected a JSON object, got a list"),
    ([_rec(), "42"], 2, "expected a JSON object, got an integer"),
    ([_rec(), {"timestamp": 0, "input_length": 600, "output_length": 20}], 2, "missing field(s) hash_ids"),
    ([_rec(), _rec(), {"input_length": 600}], 3, "timestamp, output_length, hash_ids"),
    ([_rec(il="600", h=[0, 1])], 1, "input_length: got '600' (string); allowed: an integer in [1, 100,000,000] tokens"),
    ([_rec(), _rec(il=600.0, h=[0, 1])], 2, "input_length: got 600.0 (float); allowed: an integer"),
    ([_rec(il=-5, h=[])], 1, "input_length: got -5; allowed: an integer in [1, "),
    ([_rec(il=0, h=[])], 1, "input_length: got 0; allowed"),
    ([_rec(), _rec(ol=0)], 2, "output_length: got 0; allowed"),
    ([_rec(ol=-3)], 1, "output_length: got -3; allowed"),
    ([_rec(ol=True)], 1, "output_length: got True (boolean)"),
    ([_rec(ol=None)], 1, "output_length: got None (null)"),
    ([_rec(h="0,1")], 1, "hash_ids: got '0,1' (string); allowed: a list of integers"),
    ([_rec(h=[0, 1.5])], 1, "hash_ids: got 1.5 (float)"),
    ([_rec(h=[0, "1"])], 1, "hash_ids: got '1' (string)"),
    # ceil(1025/512) = 3 blocks expected, 2 given
    ([_rec(), _rec(il=1025, h=[0, 1])], 2, "hash_ids has 2 ids but input_length 1025 needs ceil(1025/512) = 3"),
    # ceil(512/512) = 1, 2 given
    ([_rec(il=512, h=[0, 1])], 1, "needs ceil(512/512) = 1"),
    ([_rec(h=[0, 2**70])], 1, "hash_ids: got ~10**21; allowed: a list of integers in [0, 2**63-1]"),
    ([_rec(ts=0), _rec(ts=5000), _rec(ts=4000)], 3, "timestamp 4000 is earlier than the previous line's 5000"),
    ([_rec(ts=-1)], 1, "timestamp: got -1; allowed: a number of ms in [0, "),
    ([_rec(ts="0")], 1, "timestamp: got '0' (string)"),
    ([_rec(), "[", json.dumps(_rec())], 2, "malformed JSON"),
]


@pytest.mark.parametrize("lines,line,fragment", BAD_CASES)
def test_malformed_lines_name_file_and_line(tmp_path, lines, line, fragment):
    path = _write(tmp_path / "conversation_trace.jsonl", lines)
    with pytest.raises(TraceFormatError) as e:
        read_jsonl(path)
    msg = str(e.value)
    assert msg.startswith(f"conversation_trace.jsonl line {line}:"), msg
    assert fragment in msg, msg
    assert isinstance(e.value, ValueError)


@pytest.mark.parametrize("content,fragment", [
    (b"", "file is empty"),
    (b"\n  \n\n", "file is empty"),
])
def test_empty_files(tmp_path, content, fragment):
    path = tmp_path / "empty.jsonl"
    path.write_bytes(content)
    with pytest.raises(TraceFormatError, match=f"^empty.jsonl: {fragment}"):
        read_jsonl(path)


def test_json_array_file_is_rejected(tmp_path):
    path = tmp_path / "array.jsonl"
    path.write_text(json.dumps([_rec(), _rec()], indent=1))
    with pytest.raises(TraceFormatError, match=r"^array.jsonl line 1: looks like a JSON array"):
        read_jsonl(path)
    path.write_text(json.dumps([_rec(), _rec()]))   # the same on one line
    with pytest.raises(TraceFormatError, match=r"^array.jsonl line 1: looks like a JSON array"):
        read_jsonl(path)


def test_binary_file_is_rejected(tmp_path):
    path = tmp_path / "blob.jsonl"
    path.write_bytes(json.dumps(_rec()).encode() + b"\n" + bytes(range(256)))
    with pytest.raises(TraceFormatError, match=r"^blob.jsonl line 2: binary content"):
        read_jsonl(path)


def test_non_utf8_file_is_rejected(tmp_path):
    path = tmp_path / "latin.jsonl"
    path.write_bytes(json.dumps(_rec()).encode() + b"\n\xff\xfe{}\n")
    with pytest.raises(TraceFormatError, match=r"^latin.jsonl line 2: not UTF-8"):
        read_jsonl(path)


def test_load_trace_by_path_and_unknown_name(tmp_path, good):
    p = good.to_jsonl(tmp_path / "mine.jsonl")
    assert load_trace(p).equals(good)
    assert load_trace(str(p)).equals(good)
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        load_trace(str(tmp_path / "nope.jsonl"))
    with pytest.raises(ValueError, match="known names: conversation, synthetic, toolagent, arxiv"):
        load_trace("chat")


# ------------------------------------------------------------------------------------ Trace methods
def test_constructor_checks():
    with pytest.raises(ValueError, match=r"^Trace\.input_len has 1 entries, arrival_s has 2"):
        Trace([0.0, 1.0], [1], [1, 1], [0, 1, 2], [0, 1])
    with pytest.raises(ValueError, match=r"^Trace\.block_offsets must have n\+1 = 2 entries, has 1"):
        Trace([0.0], [1], [1], [0], [0])


def test_validate_catches_broken_invariants():
    ok = dict(arrival_s=[0.0, 1.0], input_len=[600, 512], output_len=[1, 1], block_offsets=[0, 2, 3],
              block_ids=[0, 1, 2])
    Trace(**ok).validate()
    with pytest.raises(ValueError, match=r"arrival_s goes backwards at request 1"):
        Trace(**{**ok, "arrival_s": [1.0, 0.0]}).validate()
    with pytest.raises(ValueError, match="request 1 has 1 blocks, ceil\\(1000/512\\) = 2"):
        Trace(**{**ok, "input_len": [600, 1000]}).validate()
    with pytest.raises(ValueError, match=r"output_len\[0\] = 0, must be ≥ 1 token"):
        Trace(**{**ok, "output_len": [0, 1]}).validate()


def test_head_select_and_csr(good):
    h = good.head(2)
    assert len(h) == 2 and h.n_blocks == good.n_blocks
    np.testing.assert_array_equal(h.block_offsets, [0, 2, 5])
    s = good.select(np.array([False, True, True]))
    np.testing.assert_array_equal(s.block_offsets, [0, 3, 4])
    for i, j in enumerate([1, 2]):
        np.testing.assert_array_equal(s.blocks_of(i), good.blocks_of(j))
    assert len(good.head(10)) == 3 and len(good.head(0)) == 0
    with pytest.raises(ValueError, match="Trace.head.n: got -1; allowed: an integer >= 0"):
        good.head(-1)
    with pytest.raises(ValueError, match=r"^Trace\.select\.index: must be strictly increasing"):
        good.select([2, 1])


def test_window_rebases_time(good):
    w = good.window(1.0, 61.0)          # [1, 61) holds only the request at 1.5 s
    assert len(w) == 1 and w.input_len[0] == 1300
    assert w.arrival_s[0] == pytest.approx(0.5)   # 1.5 − 1.0
    w2 = good.window(1.0, 62.0, rebase=False)
    np.testing.assert_array_equal(w2.arrival_s, [1.5, 61.0])
    with pytest.raises(ValueError, match=r"Trace.window.t1_s: got 1; allowed: a finite number in \[5, "):
        good.window(5, 1)


def test_replay_divides_arrival_times(good):
    r = good.replay(2)
    np.testing.assert_array_equal(r.arrival_s, [0.0, 0.75, 30.5])
    np.testing.assert_array_equal(r.block_ids, good.block_ids)
    assert "2× speed" in r.source and good.arrival_s[1] == 1.5   # original untouched
    for bad in (0, -1, float("nan"), float("inf"), "fast", None):
        with pytest.raises(ValueError, match=r"Trace.replay.speed: got .*; allowed: a finite number in \[0.001, 1000\]"):
            good.replay(bad)


def test_to_frame(good):
    df = good.to_frame()
    assert list(df.columns) == ["arrival_s", "input_len", "output_len", "n_blocks", "first_block"]
    assert df["n_blocks"].tolist() == [2, 3, 1]
    assert df["first_block"].tolist() == [0, 0, 3]


def test_describe_hand_worked(good):
    d = good.describe()
    assert d["requests"] == 3
    assert d["duration_s"] == 61.0
    assert d["rate_per_s"] == pytest.approx(3 / 61)
    assert d["mean_input"] == pytest.approx((1000 + 1300 + 512) / 3)   # = 937.33
    assert d["median_input"] == 1000
    assert d["mean_output"] == pytest.approx(14.0)                      # (10+30+2)/3
    assert d["max_output"] == 30
    assert d["unique_blocks"] == 4


def test_trace_from_requests_remaps():
    t = trace_from_requests([0, 1], [600, 100], [5, 5], [2, 1], [900, 901, 900])
    np.testing.assert_array_equal(t.block_ids, [0, 1, 0])
    t.validate()


# ------------------------------------------------------------------------------------ real traces
@pytest.fixture(scope="module")
def real(real_trace_dir):
    return {n: read_jsonl(real_trace_dir / f"{n}_trace.jsonl") for n in ("conversation", "synthetic")}


def test_real_traces_match_the_reference_statistics(real):
    # reference/mooncake_paper.md, Traces table and "Measured on those two files"
    c, s = real["conversation"].describe(), real["synthetic"].describe()
    assert c["requests"] == 12_031 and s["requests"] == 3_993
    assert round(c["mean_input"]) == 12_035 and round(c["mean_output"]) == 343
    assert round(s["mean_input"]) == 15_325 and round(s["mean_output"]) == 149
    assert c["median_input"] == 6_909 and c["max_input"] == 126_195 and c["max_output"] == 2_000
    assert s["median_input"] == 11_587 and s["max_input"] == 191_378
    assert round(c["duration_s"]) == 3_537 and round(s["duration_s"]) == 1_022
    assert c["unique_blocks"] == 182_790 and s["unique_blocks"] == 43_924
    for t in real.values():
        t.validate()
        assert t.n_blocks == t.describe()["unique_blocks"]   # dense ids


def test_real_conversation_structure(real):
    t = real["conversation"]
    # every conversation request starts with the shared system-prompt block 0
    assert (t.block_ids[t.block_offsets[:-1]] == 0).all()
    # 1,180 distinct timestamps (MANIFEST.md), 1,179 gaps, almost all 3.000 ± 0.001 s
    gaps = l03_traces.timestamp_gaps(t)
    assert gaps["count"].sum() == 1_179
    assert gaps.loc[gaps["gap_s"].between(2.998, 3.002), "share"].sum() > 0.99


def _assert_prefix_chained(t: Trace):
    """Equal id ⇒ same position and same parent block (hence same whole prefix)."""
    k = t.blocks_per_request
    pos = np.arange(len(t.block_ids)) - np.repeat(t.block_offsets[:-1], k)
    parent = np.where(pos > 0, np.roll(t.block_ids, 1), -1)
    triples = np.unique(np.stack([t.block_ids, pos, parent], axis=1), axis=0)
    assert len(triples) == len(np.unique(t.block_ids))


def test_real_traces_are_prefix_chained(real):
    for t in real.values():
        _assert_prefix_chained(t)


def test_real_trace_through_load_trace(real_trace_dir, monkeypatch):
    monkeypatch.setenv("MOONCAKE_LAB_DATA", str(real_trace_dir))
    t = load_trace("synthetic")
    assert t.name == "synthetic" and str(real_trace_dir) in t.source and len(t) == 3_993


# ------------------------------------------------------------------------------------ experiments
def test_arrivals_per_minute_hand_worked(good):
    df = l03_traces.arrivals_per_minute(good)
    # arrivals 0, 1.5, 61 s → minute 0 holds 2, minute 1 holds 1
    assert df["requests"].tolist() == [2, 1]
    assert df["rate_per_s"].tolist() == [2 / 60, 1 / 60]
    with pytest.raises(ValueError, match=r"^bin_s must "):
        l03_traces.arrivals_per_minute(good, bin_s=0)


def test_length_cdf_hand_worked(good):
    df = l03_traces.length_cdf(good, "input")
    assert df["tokens"].tolist() == [512, 1000, 1300]
    assert df["cdf"].tolist() == pytest.approx([1 / 3, 2 / 3, 1.0])
    both = l03_traces.length_cdf(good)
    assert set(both["kind"]) == {"input", "output"}
    with pytest.raises(ValueError, match=r"^which must "):
        l03_traces.length_cdf(good, "prompt")


def test_timestamp_gaps_hand_worked(good):
    df = l03_traces.timestamp_gaps(good)
    # distinct times 0, 1.5, 61 s → gaps 1.5 and 59.5 s
    assert df["gap_s"].tolist() == [1.5, 59.5] and df["count"].tolist() == [1, 1]


def test_trace_summary_and_bad_argument(good):
    df = l03_traces.trace_summary([good])
    assert df.loc[0, "trace"] == "good" and df.loc[0, "distinct_timestamps"] == 3
    with pytest.raises(ValueError, match="trace must be"):
        l03_traces.arrivals_per_minute(42)


def test_trace_metrics_on_real_traces(real, monkeypatch):
    monkeypatch.setattr(l03_traces, "_load", lambda name: real[name])
    ms = {m.name: m for m in reproduce.collect("trace")}
    names = [f"trace.{t}.{s}" for t in ("conversation", "synthetic", "toolagent_like")
             for s in ("requests", "mean_input", "mean_output", "cache_ratio_inf")]
    assert sorted(ms) == sorted(names)
    assert ms["trace.conversation.requests"].ours == 12_031
    # reference/mooncake_paper.md: infinite-cache hit 37.4% (conversation), 65.1% (synthetic)
    assert ms["trace.conversation.cache_ratio_inf"].ours == pytest.approx(0.374, abs=0.0005)
    assert ms["trace.synthetic.cache_ratio_inf"].ours == pytest.approx(0.651, abs=0.0005)
    assert ms["trace.synthetic.cache_ratio_inf"].paper == 0.66
    assert ms["trace.conversation.cache_ratio_inf"].unit == "fraction"
    assert "STAND-IN" not in ms["trace.conversation.mean_input"].source
    assert "toolagent-like" in ms["trace.toolagent_like.requests"].source


def test_trace_metrics_say_when_they_use_the_stand_in(isolated_trace_lookup):
    l03_traces._load.cache_clear()
    try:
        with pytest.warns(UserWarning, match="synthetic stand-in"):
            ms = {m.name: m for m in reproduce.collect("trace.conversation")}
    finally:
        l03_traces._load.cache_clear()
    for m in ms.values():
        assert "STAND-IN" in m.source and "synthetic:conversation-like" in m.source
