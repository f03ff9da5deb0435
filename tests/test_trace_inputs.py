"""Bad input to the trace entry points (issue 12 §2): files that are not files, hostile or absurd
content, bad Trace arguments, bad generator arguments, and unverified copies of the released traces.

Every case must end, quickly, in a Trace or in a ValueError (InputError / TraceFormatError) naming the
file and line or the argument — never a hang, an unbounded allocation or an exception from deep inside.
"""
from __future__ import annotations

import io
import json
import math
import os
import threading
import time
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mooncake_lab import trace_data
from mooncake_lab.doctor import run_doctor
from mooncake_lab.synthetic import synthetic_trace
from mooncake_lab.trace_data import TraceMismatchWarning, verify
from mooncake_lab.traces import (MAX_FILE_BYTES, MAX_LINE_BYTES, MAX_TIMESTAMP_MS, MAX_TOKENS, Trace,
                                 TraceFormatError, dense_block_ids, load_trace, read_jsonl, trace_from_requests)
from mooncake_lab.validate import InputError

FNAME = "t_trace.jsonl"


def _rec(ts=0, il=600, ol=20, h=None, **extra):
    return {"timestamp": ts, "input_length": il, "output_length": ol,
            "hash_ids": list(range(math.ceil(il / 512))) if h is None and isinstance(il, int) and il < 10**6
            else (h if h is not None else [0]), **extra}


def _file(tmp_path, content: bytes | str, name: str = FNAME):
    p = tmp_path / name
    p.write_bytes(content.encode() if isinstance(content, str) else content)
    return p


def _lines(*recs) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in recs)


def _finishes(fn, seconds: float = 10.0):
    """Run ``fn`` in a thread; fail if it is still running after ``seconds`` (a hang). Returns
    ``("ok", value)`` or ``("raised", exception)``."""
    box: list = []

    def run():
        try:
            box.append(("ok", fn()))
        except BaseException as e:  # noqa: BLE001 - reported to the test
            box.append(("raised", e))

    th = threading.Thread(target=run, daemon=True)
    th.start()
    th.join(seconds)
    assert not th.is_alive(), f"still running after {seconds} s (blocked?)"
    return box[0]


def _refused(fn, *fragments, cls=ValueError, seconds: float = 10.0):
    """``fn()`` raises ``cls`` (a ValueError by default) within ``seconds``, whose message holds every fragment."""
    kind, val = _finishes(fn, seconds)
    assert kind == "raised", f"accepted: {val!r}"
    assert isinstance(val, cls), f"{type(val).__name__}: {val}"
    for f in fragments:
        assert f in str(val), str(val)
    return str(val)


# ====================================================================== files that are not trace files
def test_directory_is_named_a_directory(tmp_path):
    d = tmp_path / "conversation_trace.jsonl"
    d.mkdir()
    for fn in (read_jsonl, load_trace):
        msg = _refused(lambda: fn(d), "is a directory")
        assert "does not exist" not in msg


def test_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    link = tmp_path / "link.jsonl"
    link.symlink_to(fifo)
    for target in (fifo, link):
        for fn in (read_jsonl, load_trace):
            msg = _refused(lambda: fn(target), "FIFO", seconds=5)
            assert "does not exist" not in msg


@pytest.mark.parametrize("dev", ["/dev/zero", "/dev/null", "/dev/urandom", "/dev/stdin"])
def test_devices_are_refused_at_once(dev):
    if not os.path.exists(dev):
        pytest.skip(f"{dev} not on this system")
    _refused(lambda: read_jsonl(dev), "not a regular file" if dev == "/dev/stdin" else "character device",
             seconds=5)


def test_missing_and_broken_link(tmp_path):
    _refused(lambda: read_jsonl(tmp_path / "nope.jsonl"), "does not exist", cls=FileNotFoundError)
    (tmp_path / "dangling.jsonl").symlink_to(tmp_path / "gone.jsonl")
    _refused(lambda: load_trace(tmp_path / "dangling.jsonl"), "broken symbolic link", cls=FileNotFoundError)


def test_permission_denied_is_a_clear_error(tmp_path, monkeypatch):
    p = _file(tmp_path, _lines(_rec()))
    real_open = os.open

    def deny(path, *a, **k):          # the tests run as root, for whom chmod 000 does not deny
        if os.fspath(path) == str(p):
            raise PermissionError(13, "Permission denied", str(p))
        return real_open(path, *a, **k)

    monkeypatch.setattr(os, "open", deny)
    _refused(lambda: read_jsonl(p), str(p), "Permission denied")


def test_too_large_file_is_refused_before_reading(tmp_path):
    p = tmp_path / "huge.jsonl"
    with p.open("wb") as f:             # sparse: nothing is written, but the size is over the limit
        f.truncate(MAX_FILE_BYTES + 1)
    t0 = time.perf_counter()
    _refused(lambda: read_jsonl(p), f"{MAX_FILE_BYTES + 1:,} bytes", "more than")
    assert time.perf_counter() - t0 < 1.0


def test_absurd_line_length_is_refused(tmp_path):
    p = _file(tmp_path, _lines(_rec()) + '{"timestamp": 0, "pad": "' + "x" * (MAX_LINE_BYTES + 10) + '"}\n')
    _refused(lambda: read_jsonl(p), f"{FNAME} line 2:", "characters long")


@pytest.mark.parametrize("path", [None, 42, 3.5, b"/tmp/x.jsonl", ["a.jsonl"], "", "a\x00b.jsonl"])
def test_path_of_the_wrong_kind(path):
    msg = _refused(lambda: read_jsonl(path), "path: got ", "; allowed: ")
    assert msg.startswith("path: got "), msg
    if path not in ("",):
        # a str is a path there too; anything else is looked up as a name (the message lists the names)
        _refused(lambda: load_trace(path), "path: got " if isinstance(path, str) else
                 f"unknown trace name {path!r}; known names: conversation, ")


# ====================================================================== content: encodings and line ends
def test_line_separators_inside_strings_do_not_split_records(tmp_path):
    # str.splitlines() splits at these; JSON Lines only at \n. Each is legal inside a JSON string.
    seps = ["\u2028", "\u2029", "\u0085", "\x1c", "\x1d", "\x1e", "\x0b", "\x0c"]
    text = "".join(json.dumps(_rec(ts=i, note=f"a{s}b"), ensure_ascii=False) + "\n" for i, s in enumerate(seps))
    t = read_jsonl(_file(tmp_path, text))
    assert len(t) == len(seps)
    np.testing.assert_array_equal(t.arrival_s, np.arange(len(seps)) / 1000)


def test_bom_crlf_and_missing_last_newline_are_accepted(tmp_path):
    body = json.dumps(_rec()) + "\r\n" + json.dumps(_rec(ts=5))
    t = read_jsonl(_file(tmp_path, b"\xef\xbb\xbf" + body.encode()))
    assert len(t) == 2 and t.arrival_s[1] == 0.005


@pytest.mark.parametrize("content,line,fragment", [
    (b"\xff\xfe" + "{}".encode("utf-16-le"), 1, "binary content"),          # UTF-16 with BOM
    (json.dumps(_rec()).encode() + b"\n\x80abc\n", 2, "not UTF-8"),
    (json.dumps(_rec()).encode() + b"\r" + json.dumps(_rec()).encode() + b"\r", 1, "malformed JSON"),  # old Mac
    (bytes(range(1, 256)) * 10, 2, "not UTF-8"),
])
def test_undecodable_or_odd_files(tmp_path, content, line, fragment):
    _refused(lambda: read_jsonl(_file(tmp_path, content)), f"{FNAME} line {line}:", fragment)


# ====================================================================== content: fields
BIG = 10**30
BAD_FIELDS = [
    # (record, field named in the message, fragment)
    (_rec(ol=BIG), "output_length", "~10**30"),
    (_rec(ol=10**18), "output_length", "~10**18"),
    (_rec(ol=MAX_TOKENS + 1), "output_length", "100,000,000"),
    (_rec(il=10**9, h=[0]), "input_length", "100,000,000"),
    (_rec(il=2**64, h=[0]), "input_length", "~10**19"),
    (_rec(il=True, h=[0]), "input_length", "(boolean)"),
    (_rec(il=[600], h=[0]), "input_length", "(list)"),
    (_rec(il={"v": 600}, h=[0]), "input_length", "(object)"),
    (_rec(ol="20"), "output_length", "(string)"),
    (_rec(ol=20.5), "output_length", "(float)"),
    (_rec(ol=1e18), "output_length", "(float)"),
    (_rec(ts=1e300), "timestamp", "1e+300"),
    (_rec(ts=MAX_TIMESTAMP_MS + 1), "timestamp", "10 years"),
    (_rec(ts=1_733_000_000_000), "timestamp", "epoch"),          # absolute epoch ms
    (_rec(ts=-0.5), "timestamp", "-0.5"),
    (_rec(ts=10**400), "timestamp", "~10**400"),
    (_rec(ts=None), "timestamp", "(null)"),
    (_rec(ts=False), "timestamp", "(boolean)"),
    (_rec(ts=[0]), "timestamp", "(list)"),
    (_rec(h=[-1, 2]), "hash_ids", "got -1"),
    (_rec(h=[0, 2**63]), "hash_ids", "~10**18"),
    (_rec(h=[0, -(2**70)]), "hash_ids", "-~10**21"),
    (_rec(h=[0, True]), "hash_ids", "(boolean)"),
    (_rec(h=[0, [1]]), "hash_ids", "(list)"),
    (_rec(h=[0, None]), "hash_ids", "(null)"),
    (_rec(h=[0, 1.0]), "hash_ids", "(float)"),
    (_rec(h={"0": 1}), "hash_ids", "(object)"),
    (_rec(h=None) | {"hash_ids": None}, "hash_ids", "(null)"),
    (_rec(h=7), "hash_ids", "(integer)"),
    (_rec(il=600, h=[0]), "hash_ids has 1 ids", "ceil(600/512) = 2"),
    (_rec(il=600, h=[0, 1, 2]), "hash_ids has 3 ids", "ceil(600/512) = 2"),
]


@pytest.mark.parametrize("rec,field,fragment", BAD_FIELDS)
def test_bad_field_names_file_line_and_field(tmp_path, rec, field, fragment):
    p = _file(tmp_path, _lines(_rec(), "", _rec(ts=1), rec, _rec(ts=2**30)))
    msg = _refused(lambda: read_jsonl(p), f"{FNAME} line 4: ", field, fragment, cls=TraceFormatError)
    assert "allowed" in msg or "needs" in msg


RAW_BAD_LINES = [
    # (raw line 2, fragment)
    ('{"timestamp": NaN, "input_length": 600, "output_length": 1, "hash_ids": [0, 1]}', "NaN is not a JSON number"),
    ('{"timestamp": Infinity, "input_length": 600, "output_length": 1, "hash_ids": [0, 1]}', "Infinity"),
    ('{"timestamp": -Infinity, "input_length": 600, "output_length": 1, "hash_ids": [0, 1]}', "-Infinity"),
    ('{"timestamp": 1e400, "input_length": 600, "output_length": 1, "hash_ids": [0, 1]}', "timestamp: got inf"),
    ('{"timestamp": 0, "input_length": 600, "input_length": 5000, "output_length": 1, "hash_ids": [0, 1]}',
     "duplicate key 'input_length'"),
    ('{"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [0, 1], "x": {"a": 1, "a": 2}}',
     "duplicate key 'a'"),
    ('{"timestamp": 0, "input_length": ' + "9" * 5000 + ', "output_length": 1, "hash_ids": [0]}', "malformed JSON"),
    ('{"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": ' + "[" * 100_000 + "]" * 100_000 + "}",
     "malformed JSON"),
    ('{"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [0, 1]} {}', "malformed JSON"),
    ('"just a string"', "expected a JSON object, got a string"),
    ("null", "expected a JSON object, got a null"),
    ("{}", "missing field(s) timestamp, input_length, output_length, hash_ids"),
    ('{"Timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [0, 1]}', "missing field(s) timestamp"),
    ("\u2028", "malformed JSON"),
    ('{"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [0, 1]', "malformed JSON"),
]


@pytest.mark.parametrize("line,fragment", RAW_BAD_LINES)
def test_bad_raw_line_names_file_and_line(tmp_path, line, fragment):
    p = _file(tmp_path, _lines(_rec(), line, _rec(ts=5)))
    _refused(lambda: read_jsonl(p), f"{FNAME} line 2: ", fragment, cls=TraceFormatError)


def test_timestamps_must_not_go_backwards(tmp_path):
    # the simulator needs arrival order; the released files are sorted (kept behaviour)
    p = _file(tmp_path, _lines(_rec(ts=0), _rec(ts=3000.5), _rec(ts=3000)))
    _refused(lambda: read_jsonl(p), f"{FNAME} line 3:", "earlier than the previous line's 3000.5")


def test_extreme_but_meaningful_values_are_accepted(tmp_path):
    # float timestamps, the largest id, equal timestamps, an extra nested field, a long prompt
    il = 300_000
    recs = [_rec(ts=0.25, h=[2**63 - 1, 2**63 - 2]), _rec(ts=0.25, il=il, ol=MAX_TOKENS, meta={"a": [1, {"b": None}]}),
            _rec(ts=MAX_TIMESTAMP_MS, il=1, ol=1)]
    t = read_jsonl(_file(tmp_path, _lines(*recs))).validate()
    assert t.input_len.tolist() == [600, il, 1] and t.output_len[1] == MAX_TOKENS
    assert t.arrival_s[-1] == MAX_TIMESTAMP_MS / 1000


def test_block_tokens_and_name_arguments(tmp_path):
    p = _file(tmp_path, _lines(_rec(h=[0])))
    assert read_jsonl(p, block_tokens=1024, name="x").name == "x"    # ceil(600/1024) = 1 block
    for bad in (0, -512, 512.5, True, "512", None, 10**9):
        _refused(lambda: read_jsonl(p, block_tokens=bad), "read_jsonl.block_tokens: got ")
    _refused(lambda: read_jsonl(p, name=3), "read_jsonl.name: got 3; allowed: ")


# ====================================================================== Trace construction and methods
OK = dict(arrival_s=[0.0, 1.0, 2.0], input_len=[1000, 1300, 512], output_len=[10, 30, 2],
          block_offsets=[0, 2, 5, 6], block_ids=[0, 1, 0, 1, 2, 3])


@pytest.fixture
def tr():
    return Trace(**OK).validate()


@pytest.mark.parametrize("field,value,fragment", [
    ("input_len", [1000, 1300.7, 512], "Trace.input_len[1]: got 1300.7"),
    ("input_len", [1000, 1300, 10**30], "Trace.input_len[2]"),
    ("input_len", [1000, 1300, -1], "Trace.input_len[2]: got -1"),
    ("output_len", [10, np.nan, 2], "Trace.output_len[1]: got nan"),
    ("output_len", ["10", "30", "2"], "Trace.output_len"),
    ("output_len", [True, False, True], "Trace.output_len"),
    ("arrival_s", [0.0, np.inf, 2.0], "Trace.arrival_s[1]: got inf"),
    ("arrival_s", [[0.0, 1.0, 2.0]], "Trace.arrival_s: got [[0.0, 1.0, 2.0]]; allowed: a one-dimensional"),
    ("arrival_s", None, "Trace.arrival_s: got None"),
    ("arrival_s", 5.0, "Trace.arrival_s: got 5.0; allowed: a one-dimensional"),
    ("block_offsets", [0, 3, 2, 6], "Trace.block_offsets must be non-decreasing"),
    ("block_offsets", [1, 2, 5, 6], "Trace.block_offsets must start at 0"),
    ("block_offsets", [0, 2, 5], "Trace.block_offsets must have n+1 = 4"),
    ("block_ids", [0, 1, 0, -1, 2, 3], "Trace.block_ids[3]: got -1"),
    ("block_ids", [0, 1, 0, 2**40, 2, 3], "Trace.block_ids[3]"),
    ("n_blocks", 2, "Trace.n_blocks: got 2"),
    ("n_blocks", 2**62, "Trace.n_blocks"),
    ("n_blocks", 4.5, "Trace.n_blocks"),
    ("block_tokens", 0, "Trace.block_tokens"),
    ("block_tokens", 512.5, "Trace.block_tokens"),
    ("name", None, "Trace.name"),
])
def test_trace_constructor_rejects(field, value, fragment):
    _refused(lambda: Trace(**{**OK, field: value}), fragment, cls=InputError)


def test_select_refuses_negative_out_of_range_and_bad_masks(tr):
    for bad, frag in [([-1], "index[0]: got -1"), ([0, -2], "index[1]: got -2"),
                      ([3], "index[0]: got 3; allowed: integers in [0, 2]"), ([0.5], "index[0]: got 0.5"),
                      ([[0, 1]], "index: got array([[0, 1]]); allowed: a one-dimensional"),
                      (["0"], "index: got array(['0'], dtype='<U1'); allowed: a one-dimensional"),
                      ([1, 1], "index: must be strictly increasing"),
                      ([2, 0], "index: must be strictly increasing (arrival order is kept); index[1] = 0 follows 2"),
                      (np.array([True, False]), "index: a boolean mask must have shape (3,)"),
                      (np.ones((3, 1), bool), "index: a boolean mask must have shape (3,)"),
                      (None, "index: got "), (object(), "index: got ")]:
        _refused(lambda: tr.select(bad), "Trace.select." + frag, cls=InputError)
    # what stays allowed
    assert len(tr.select([])) == 0 and len(tr.select(np.array([], dtype=np.int64))) == 0
    np.testing.assert_array_equal(tr.select([0, 2]).input_len, [1000, 512])
    np.testing.assert_array_equal(tr.select(np.array([2.0])).blocks_of(0), [3])


def test_validate_catches_lengths_paired_with_another_requests_blocks(tr):
    # what the old select([-2]) built: request 1's lengths (3 blocks) over request 2's and beyond —
    # here by hand: request 0's length with the chain [1, 0] (block 1 first, then 0)
    stitched = Trace([0.0, 1.0], [1000, 1300], [10, 30], [0, 2, 5], [1, 0, 0, 1, 2], n_blocks=4)
    _refused(stitched.validate, "not prefix-consistent", "block id 1 starts the prompt in request 0 but "
             "follows block 0 in request 1", cls=InputError)
    # the same block at two positions (a chain shifted by one block)
    shifted = Trace([0.0, 1.0], [1000, 1300], [10, 30], [0, 2, 5], [0, 1, 2, 0, 1])
    _refused(shifted.validate, "not prefix-consistent", cls=InputError)
    # a slice of a trace (sparse id space) keeps passing
    tr.select([2]).validate()
    tr.select([1, 2]).validate()


@pytest.mark.parametrize("speed", [0, -1, math.nan, math.inf, -math.inf, 1e-300, 1e300, 1e4, "2", None, True, [2]])
def test_replay_rejects(tr, speed):
    _refused(lambda: tr.replay(speed), "Trace.replay.speed", cls=InputError)


def test_replay_accepts_numpy_and_int_speeds(tr):
    np.testing.assert_array_equal(tr.replay(np.float32(2)).arrival_s, [0, 0.5, 1])
    np.testing.assert_array_equal(tr.replay(4).arrival_s, [0, 0.25, 0.5])


@pytest.mark.parametrize("args,kw,fragment", [
    ((math.nan, 1), {}, "t0_s"), ((0, math.inf), {}, "t1_s"), (("0", 1), {}, "t0_s"), ((None, 1), {}, "t0_s"),
    ((-1, 1), {}, "t0_s"), ((0, 1e300), {}, "t1_s"), ((0, 1), {"rebase": "yes"}, "rebase"),
    ((0, 1), {"rebase": 1}, "rebase"),
])
def test_window_rejects(tr, args, kw, fragment):
    _refused(lambda: tr.window(*args, **kw), f"Trace.window.{fragment}", cls=InputError)


@pytest.mark.parametrize("n", [-1, 2.5, True, "2", None, math.nan, math.inf])
def test_head_rejects(tr, n):
    _refused(lambda: tr.head(n), "Trace.head.n", cls=InputError)


@pytest.mark.parametrize("i", [-1, 3, 1.5, None, "0", True])
def test_blocks_of_rejects(tr, i):
    # blocks_of(-1) used to return block_ids[6:0] = [] silently
    _refused(lambda: tr.blocks_of(i), "Trace.blocks_of.i", cls=InputError)


def test_to_frame_describe_and_empty_trace(tr):
    empty = tr.select([])
    assert len(empty.to_frame()) == 0 and empty.describe()["requests"] == 0
    assert empty.validate() is empty and empty.duration_s == 0.0
    assert tr.to_frame()["first_block"].tolist() == [0, 0, 3]
    _refused(lambda: tr.to_jsonl(None), "Trace.to_jsonl.path: got None", cls=InputError)
    assert not tr.equals("a trace")


def test_helpers_reject_bad_arrays():
    _refused(lambda: dense_block_ids([1, 2.5]), "dense_block_ids.raw_ids[1]: got 2.5", cls=InputError)
    _refused(lambda: dense_block_ids([1, 2**70]), "dense_block_ids.raw_ids[1]: got ", cls=InputError)
    _refused(lambda: trace_from_requests([0], [600], [1], [3], [0, 1]),
             "trace_from_requests: block_counts sum to 3 but raw_block_ids has 2 ids", cls=InputError)
    _refused(lambda: trace_from_requests([0], [600], [1], [-1], []), "trace_from_requests.block_counts[0]: got -1",
             cls=InputError)


# ====================================================================== the synthetic generator
@pytest.mark.parametrize("kwargs,fragment", [
    ({"n_requests": 10**12}, "synthetic_trace.n_requests"),
    ({"n_requests": 2**64}, "synthetic_trace.n_requests"),
    ({"duration_s": 1e300}, "synthetic_trace.duration_s"),
    ({"rate": 1e-300}, "would last 2.361e+304 s; allowed: 0.001 to 1e+07 s (duration_s = n_requests / rate)"),
    ({"rate": 1e300}, "synthetic_trace.rate"),
    ({"duration_s": 1e7, "rate": 1e5}, "would have 1,000,000,000,000 requests; allowed: 1 to 1,000,000 "
                                        "(n_requests = rate × duration_s)"),
    ({"seed": -1}, "synthetic_trace.seed"),
    ({"seed": 2**70}, "synthetic_trace.seed"),
    ({"seed": "0"}, "synthetic_trace.seed"),
    ({"preset": None}, "synthetic_trace.preset"),
    ({"preset": ["toolagent-like"]}, "synthetic_trace.preset"),
    ({"arrivals": None}, "synthetic_trace.arrivals"),
    ({"think_mean_s": 1e300}, "synthetic_trace.think_mean_s"),
    ({"think_mean_s": 86_400, "max_turns": 1000, "p_continue": 0.999, "n_requests": 100},
     "synthetic_trace: think_mean_s=86400 s with 632 turns per session needs a warm-up"),
    ({"max_input": 10**18}, "synthetic_trace.max_input"),
    ({"max_turns": 10**9}, "synthetic_trace.max_turns"),
    ({"first_sigma": 1e3}, "synthetic_trace.first_sigma"),
    ({"p_shared": math.nan}, "synthetic_trace.p_shared"),
    ({"burst_cv": 0}, "synthetic_trace.burst_cv"),
    ({"bucket_s": -1}, "synthetic_trace.bucket_s"),
    ({"shared_pool_min": 10**12}, "synthetic_trace.shared_pool_min"),
    ({"out_hi": 0.5}, "synthetic_trace.out_hi"),
    ({"first_lo": 100_000, "max_input": 50_000, "n_requests": 50},
     "synthetic_trace: could not generate 50 requests with these overrides (first_lo=100000, max_input=50000)"),
    ({"n_requests": 1_000_000, "first_lo": 90_000_000, "first_median": 9e7, "first_sigma": 0,
      "max_input": MAX_TOKENS, "p_continue": 0, "max_turns": 1},
     "blocks, more than 67,108,864; ask for fewer requests (n_requests) or shorter inputs (max_input)"),
])
def test_synthetic_unbounded_arguments_are_refused_fast(kwargs, fragment):
    kwargs = {"preset": "toolagent-like", **kwargs}
    _refused(lambda: synthetic_trace(**kwargs), fragment, cls=InputError, seconds=60)


# ====================================================================== verification of the released files
@pytest.fixture
def lookup(isolated_trace_lookup, monkeypatch):
    """Empty lookup folders, a fresh verification cache, and a doctor that checks only the traces."""
    from mooncake_lab import doctor

    monkeypatch.setattr(doctor, "_numba_check", lambda: (True, "not checked in this test"))
    monkeypatch.setattr(doctor, "_version", lambda name: "(not checked in this test)")
    trace_data._VERIFIED.clear()
    yield isolated_trace_lookup
    trace_data._VERIFIED.clear()


def _head_of_conversation(real_trace_dir, folder, n_lines: int):
    src = (real_trace_dir / "conversation_trace.jsonl").read_bytes()
    dst = folder / "conversation_trace.jsonl"
    dst.write_bytes(b"".join(src.splitlines(keepends=True)[:n_lines]))
    return dst


def test_truncated_release_warns_and_doctor_says_so(real_trace_dir, lookup):
    dst = _head_of_conversation(real_trace_dir, lookup["env"], 6_000)
    with pytest.warns(TraceMismatchWarning) as w:
        t = load_trace("conversation")
    msg = str(w[0].message)
    assert str(dst) in msg and "not the released 'conversation' trace" in msg
    assert "b8cbb061a85206d7" in msg and "6,000 requests" in msg and "12,031" in msg   # expected vs got
    assert "uses this file as it is" in msg and trace_data.url_of("conversation") in msg  # what happens / fix
    assert len(t) == 6_000 and "NOT the released" in t.source
    out = io.StringIO()
    assert run_doctor(out=out) == 1
    text = out.getvalue()
    assert "FAIL" in text and "not the released 'conversation' trace" in text and "all good" not in text


def test_garbage_file_makes_doctor_fail(lookup):
    (lookup["env"] / "synthetic_trace.jsonl").write_bytes(b"garbage\n" * 3_993)
    (lookup["data"] / "arxiv_trace.jsonl").write_text(_lines(*[_rec(ts=i) for i in range(23_607)], "garbage"))
    out = io.StringIO()
    assert run_doctor(out=out) == 1
    text = out.getvalue()
    assert "sha256" in text and "3,993 requests (non-blank lines)" in text      # synthetic: hash differs
    assert "arxiv_trace.jsonl line 23608" in text                                # count fits, content broken
    assert "all good" not in text


def test_unpinned_trace_is_checked_by_request_count(lookup):
    p = lookup["env"] / "toolagent_trace.jsonl"
    p.write_text(_lines(*[_rec(ts=i) for i in range(23_608)]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", TraceMismatchWarning)
        assert len(load_trace("toolagent")) == 23_608
    assert verify("toolagent", p) == (True, "23,608 requests as released (no pinned sha256: only the count "
                                            "is checked)")
    p.write_text(_lines(*[_rec(ts=i) for i in range(100)]))
    ok, what = verify("toolagent", p)
    assert not ok and "100 requests (non-blank lines) but the release has 23,608" in what


def test_verification_is_cached_by_size_and_mtime(real_trace_dir, lookup, monkeypatch):
    src = real_trace_dir / "conversation_trace.jsonl"
    dst = lookup["env"] / "conversation_trace.jsonl"
    dst.write_bytes(src.read_bytes())
    calls = []
    real_sha = trace_data.hashlib.sha256
    monkeypatch.setattr(trace_data.hashlib, "sha256", lambda b: calls.append(len(b)) or real_sha(b))
    with warnings.catch_warnings():
        warnings.simplefilter("error", TraceMismatchWarning)
        for _ in range(3):
            assert len(load_trace("conversation")) == 12_031
    assert len(calls) == 1                                   # hashed once for three loads
    os.utime(dst, ns=(time.time_ns(), time.time_ns() + 10**9))   # a new version of the file
    assert verify("conversation", dst)[0] and len(calls) == 2


def test_real_releases_verify(real_trace_dir, lookup):
    for name in ("conversation", "synthetic"):
        ok, what = verify(name, real_trace_dir / f"{name}_trace.jsonl")
        assert ok and "sha256 matches" in what


def test_doctor_all_good_only_for_verified_files(real_trace_dir, lookup, monkeypatch):
    monkeypatch.setenv(trace_data.ENV_DATA, str(real_trace_dir))
    out = io.StringIO()
    run_doctor(out=out)
    text = out.getvalue()
    assert text.count("sha256 matches the released file") == 2 and "FAIL" not in text.split("trace data")[1]


def test_doctor_reports_a_directory_in_place_of_a_trace(lookup):
    (lookup["env"] / "conversation_trace.jsonl").mkdir()
    out = io.StringIO()
    assert run_doctor(out=out) == 1
    assert "is a directory" in out.getvalue()


# ====================================================================== fuzzing
_json = st.recursive(st.none() | st.booleans() | st.integers() | st.integers(-2**80, 2**80) | st.floats(allow_nan=True)
                     | st.text(max_size=8),
                     lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6), c, max_size=4),
                     max_leaves=12)
_FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _ends_well(p):
    """read_jsonl(p) returns a valid Trace within the bounds, or raises a TraceFormatError naming the file."""
    try:
        t = read_jsonl(p)
    except TraceFormatError as e:
        assert str(e).startswith(FNAME), str(e)
        return None
    t.validate()
    assert t.input_len.max() <= MAX_TOKENS and t.output_len.max() <= MAX_TOKENS
    assert t.arrival_s.max() <= MAX_TIMESTAMP_MS / 1000
    return t


@_FUZZ
@given(data=st.binary(max_size=400))
def test_fuzz_random_bytes(tmp_path, data):
    _ends_well(_file(tmp_path, data))


@_FUZZ
@given(ts=_json, il=_json, ol=_json, h=_json | st.lists(st.integers(), max_size=6))
def test_fuzz_random_field_values(tmp_path, ts, il, ol, h):
    rec = json.dumps({"timestamp": ts, "input_length": il, "output_length": ol, "hash_ids": h})
    _ends_well(_file(tmp_path, _lines(_rec(), rec)))


@_FUZZ
@given(recs=st.lists(st.fixed_dictionaries({
    "timestamp": st.integers(-5, 10**13) | st.floats(-1, 1e13), "input_length": st.integers(-2, 5000),
    "output_length": st.integers(-2, 2 * MAX_TOKENS), "hash_ids": st.lists(st.integers(-1, 2**64), max_size=11),
    "note": st.text(alphabet="ab\u2028\u2029\x85\x1c\x0b\x0c\r", max_size=4)}),
    min_size=1, max_size=6), line_end=st.sampled_from(["\n", "\r\n"]), repair=st.booleans())
def test_fuzz_near_valid_records(tmp_path, recs, line_end, repair):
    if repair:   # mostly valid: sorted times, the right number of fresh ids; lengths and strings stay wild
        for i, (r, ts) in enumerate(zip(recs, sorted(r["timestamp"] for r in recs))):
            r["timestamp"] = ts
            r["hash_ids"] = [1000 * i + j for j in range(-(-r["input_length"] // 512))]
    text = line_end.join(json.dumps(r, ensure_ascii=False) for r in recs)
    t = _ends_well(_file(tmp_path, text))
    assert t is None or len(t) == len(recs)      # one request per record, whatever its strings hold


@_FUZZ
@given(idx=st.lists(st.integers(-5, 8), max_size=5) | st.lists(st.booleans(), max_size=4)
       | st.lists(st.floats(), max_size=3), speed=_json)
def test_fuzz_trace_methods(idx, speed):
    t = Trace(**OK)
    for call in (lambda: t.select(idx), lambda: t.replay(speed), lambda: t.head(speed),
                 lambda: t.window(speed, 5)):
        try:
            out = call()
        except InputError:
            continue
        out.validate()
        out.to_frame()


@pytest.mark.parametrize("recs,line,fragment", [
    ([_rec(h=[0, 0])], 1, "id 0 comes after id 0 here but first on line 1"),
    ([_rec(h=[7, 8]), _rec(h=[8, 9])], 2, "id 8 comes first here but after id 7 on line 1"),
    ([_rec(h=[7, 8]), _rec(h=[9, 8])], 2, "id 8 comes after id 9 here but after id 7 on line 1"),
])
def test_hash_ids_must_be_prefix_chained(tmp_path, recs, line, fragment):
    p = _file(tmp_path, _lines(*recs))
    _refused(lambda: read_jsonl(p), f"{FNAME} line {line}: hash_ids: ", fragment, cls=TraceFormatError)


def test_fifo_in_the_lookup_folder_is_refused_by_name(lookup):
    os.mkfifo(lookup["env"] / "conversation_trace.jsonl")
    _refused(lambda: load_trace("conversation"), "FIFO", seconds=5)
    _refused(lambda: load_trace("conversation", download="no"), "load_trace.download", cls=InputError)
