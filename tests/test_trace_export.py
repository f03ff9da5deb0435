"""Chrome trace export (mooncake_lab.trace_export): every architecture validates against the Trace
Event Format, the events round-trip to what the run recorded, and bad input is named."""
from __future__ import annotations

import json
import math
from collections import Counter

import numpy as np
import pytest

from mooncake_lab import trace_export as te
from mooncake_lab.sim import ClusterConfig, simulate
from mooncake_lab.synthetic import synthetic_trace
from mooncake_lab.validate import InputError

TRACE = synthetic_trace("conversation-like", seed=3).head(500)

CONFIGS = {
    "mooncake": ClusterConfig(n_prefill=4, n_decode=4),
    "overloaded, early rejection": ClusterConfig(n_prefill=2, n_decode=2, admission="early"),
    "cache-aware, contention": ClusterConfig(n_prefill=4, n_decode=4, prefill_policy="cache_aware",
                                             network_gbps=25.0),
    "CPP groups of 2": ClusterConfig(n_prefill=4, n_decode=4, cpp_group_size=2),
    "router": ClusterConfig(n_prefill=4, n_decode=4, prefill_policy="sglang"),
    "coupled": ClusterConfig(engine_mode="coupled", n_coupled=4),
    "coupled, chunked": ClusterConfig(engine_mode="coupled", n_coupled=4, chunked_prefill=True),
}


@pytest.fixture(scope="module", params=list(CONFIGS))
def run(request):
    trace = TRACE.replay(8.0) if "overloaded" in request.param else TRACE
    res = simulate(trace, CONFIGS[request.param])
    return res, te.chrome_trace(res)


def test_every_architecture_validates_and_survives_json(run):
    res, obj = run
    n = te.validate_chrome_trace(obj)
    assert n == len(obj["traceEvents"]) > len(res.trace)
    back = json.loads(json.dumps(obj, allow_nan=False))   # strict JSON: no NaN, no numpy types
    assert back == obj
    assert te.validate_chrome_trace(back) == n


def test_prefill_slices_round_trip_to_the_run(run):
    res, obj = run
    rq = res.requests
    done = rq[rq.prefill_instance >= 0]
    back = te.read_prefills(obj)
    assert list(back.index) == list(done.index)
    assert (back.instance.to_numpy() == done.prefill_instance.to_numpy()).all()
    compute_start = done.prefill_start_s + done.fetch_wait_s.fillna(0.0) + done.fetch_s
    assert np.allclose(back.start_s, compute_start, atol=2e-9)
    assert np.allclose(back.end_s, done.prefill_end_s, atol=2e-9)
    assert (back.cached_tokens.to_numpy() == done.cached_tokens.to_numpy()).all()
    assert list(back.outcome) == list(done.outcome.astype(str))


def test_rejections_decodes_and_counters_match_the_run(run):
    res, obj = run
    rq, ev = res.requests, obj["traceEvents"]
    instants = Counter(e["args"]["outcome"] for e in ev if e["ph"] == "i")
    rejected = Counter(str(o) for o in rq.outcome if str(o).startswith("rejected"))
    assert instants == rejected
    begins = [e for e in ev if e["ph"] == "b" and e["cat"] == "decode"]
    admitted = rq[np.isfinite(rq.decode_admit_s) & (rq.decode_instance >= 0)]
    assert sorted(e["args"]["request"] for e in begins) == sorted(admitted.index)
    for e in ev:
        if e["ph"] == "C":
            (value,) = e["args"].values()
            assert value >= -1e-6, e            # a count or a KV total never goes negative
            if e["name"].startswith("KV") and res.config.output_lengths == "known":
                assert value <= res.decode_kv_capacity + 1e-6, e
    last = {}
    for e in ev:                                  # every counter ends where it started: at 0
        if e["ph"] == "C":
            last[e["name"]] = next(iter(e["args"].values()))
    assert all(abs(v) < 1e-6 for v in last.values()), last
    used = {(e["pid"], e["tid"]) for e in ev if e["ph"] not in ("M",) and e["pid"] != 1}
    named = {(e["pid"], e["tid"]) for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    assert used <= named, used - named            # every track has a name in Perfetto


def test_overload_run_shows_its_rejections():
    res = simulate(TRACE.replay(8.0), CONFIGS["overloaded, early rejection"])
    n_rejected = int((res.requests.outcome.astype(str) != "completed").sum())
    assert n_rejected > 0   # else the test above checks nothing about rejections
    obj = te.chrome_trace(res)
    assert sum(e["ph"] == "i" for e in obj["traceEvents"]) == n_rejected
    assert obj["otherData"]["replay_speed"] == 8.0


def test_both_engines_export_the_same_events():
    tr = TRACE.head(150)
    cfg = ClusterConfig(n_prefill=2, n_decode=2, prefill_policy="cache_aware")
    a = te.chrome_trace(simulate(tr, cfg, engine="numba"))
    b = te.chrome_trace(simulate(tr, cfg, engine="reference"))
    assert a["traceEvents"] == b["traceEvents"]


def test_streams_end_when_the_kv_is_ready_and_fetches_name_their_holder():
    res = simulate(TRACE, CONFIGS["mooncake"])
    obj = te.chrome_trace(res)
    rq = res.requests
    ends = {e["id"]: e["ts"] for e in obj["traceEvents"] if e["ph"] == "e" and e["cat"] == "stream"}
    for e in obj["traceEvents"]:
        if e["ph"] == "b" and e["cat"] == "stream":
            i = e["args"]["request"]
            assert math.isclose(ends[e["id"]] / 1e6, rq.decode_ready_s[i], abs_tol=2e-9)
            assert e["args"]["to_decode"] == rq.decode_instance[i]
        if e["ph"] == "b" and e["cat"] == "fetch":
            i = e["args"]["request"]
            assert e["args"]["from_prefill"] == rq.fetch_source[i] != rq.prefill_instance[i]
    assert any(e["ph"] == "b" and e["cat"] == "fetch" for e in obj["traceEvents"])  # kvcentric fetched


def test_replay_speed_is_read_from_the_trace():
    assert te.replay_speed(TRACE) == 1.0
    assert te.replay_speed(TRACE.replay(2.0).replay(1.5)) == 3.0


def test_write_and_bad_paths(tmp_path):
    res = simulate(TRACE.head(100), CONFIGS["mooncake"])
    p = te.write_chrome_trace(res, tmp_path / "run.json")
    assert te.validate_chrome_trace(json.loads(p.read_text(encoding="utf-8"))) > 100
    with pytest.raises(InputError, match=r"write_chrome_trace\.path: got 'run\.txt'.*ending in \.json"):
        te.write_chrome_trace(res, tmp_path / "run.txt")
    with pytest.raises(InputError, match=r"write_chrome_trace\.path: got 'run\.json'.*no folder .*nowhere"):
        te.write_chrome_trace(res, tmp_path / "nowhere" / "run.json")
    with pytest.raises(InputError, match=r"chrome_trace\.result: got .*SimResult"):
        te.chrome_trace(res.requests)


def _x(ts=0.0, dur=1.0, tid=0, **kw):
    return {"ph": "X", "pid": 2, "tid": tid, "ts": ts, "dur": dur, "name": "prefill", **kw}


@pytest.mark.parametrize("events, match", [
    (None, r"validate_chrome_trace\.obj: got 'NoneType'.*traceEvents"),
    ([{"ph": "Q", "pid": 1, "tid": 0, "name": "x", "ts": 0}], r"traceEvents\[0\]\.ph: got 'Q'"),
    ([{"ph": "X", "pid": True, "tid": 0, "name": "x", "ts": 0, "dur": 1}], r"traceEvents\[0\]\.pid: got True"),
    ([{"ph": "X", "pid": 1, "tid": 0, "name": "", "ts": 0, "dur": 1}], r"traceEvents\[0\]\.name"),
    ([{"ph": "X", "pid": 1, "tid": 0, "name": "x", "dur": 1}], r"traceEvents\[0\]\.ts: got None"),
    ([_x(ts=float("nan"))], r"traceEvents\[0\]\.ts: got nan"),
    ([_x(ts=-1.0)], r"traceEvents\[0\]\.ts: got -1\.0"),
    ([{"ph": "X", "pid": 1, "tid": 0, "name": "x", "ts": 0}], r"traceEvents\[0\]\.dur: got None"),
    ([_x(dur=-2.0)], r"traceEvents\[0\]\.dur: got -2\.0"),
    ([_x(0.0, 10.0), _x(5.0, 10.0)], r"traceEvents\[1\]: complete event \[5\.0, 15\.0\].*overlaps traceEvents\[0\]"),
    ([{"ph": "C", "pid": 1, "tid": 0, "name": "q", "ts": 0, "args": {"n": "3"}}], r"traceEvents\[0\]\.args"),
    ([{"ph": "i", "pid": 1, "tid": 0, "name": "r", "ts": 0, "s": "x"}], r"traceEvents\[0\]\.s: got 'x'"),
    ([{"ph": "e", "pid": 1, "tid": 0, "name": "d", "ts": 0, "id": 1, "cat": "decode"}], r"traceEvents\[0\].*not open"),
    ([{"ph": "b", "pid": 1, "tid": 0, "name": "d", "ts": 0, "id": 1, "cat": "decode"}],
     r"traceEvents\[0\].*never ends"),
    ([{"ph": "b", "pid": 1, "tid": 0, "name": "d", "ts": 5, "id": 1, "cat": "decode"},
      {"ph": "e", "pid": 1, "tid": 0, "name": "d", "ts": 4, "id": 1, "cat": "decode"}], r"traceEvents\[1\]\.ts: got 4"),
    ([{"ph": "b", "pid": 1, "tid": 0, "name": "d", "ts": 0, "cat": "decode"}], r"traceEvents\[0\].*needs an 'id'"),
    ([{"ph": "M", "pid": 1, "tid": 0, "name": "thread_name"}], r"traceEvents\[0\]\.args"),
])
def test_the_validator_names_what_is_wrong(events, match):
    obj = None if events is None else {"traceEvents": events}
    with pytest.raises(InputError, match=match):
        te.validate_chrome_trace(obj)


def test_the_validator_accepts_nesting_and_slices_that_touch():
    assert te.validate_chrome_trace({"traceEvents": [_x(0.0, 10.0), _x(2.0, 3.0), _x(10.0, 5.0), _x(5.0, 1.0, tid=1)]}) == 4
