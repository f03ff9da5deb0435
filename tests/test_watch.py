"""What lectures 04, 06, 07 and 09 watch in the timeline view (mooncake_lab.experiments.watch): each scene's
exercise answer is recomputed here another way, from the run's own arrays, and the scene's physics holds
(a document is fetched only after someone computed it; a stalled batch is the requests resident on the node).
"""
from __future__ import annotations

import numpy as np
import pytest

from mooncake_lab import check, sim
from mooncake_lab.experiments import watch as W
from mooncake_lab.timeline import Timeline
from mooncake_lab.validate import InputError


@pytest.fixture(scope="module")
def hot():
    return W.hot_document()


def test_the_hot_document_trace_is_one_shared_document_and_seeded():
    tr = W.hot_document_trace()
    again = W.hot_document_trace()
    assert tr.equals(again), "the same seed must give the same burst"
    doc = W.HOT_DOCUMENT["doc_blocks"]
    assert len(tr) == W.HOT_DOCUMENT["users"]
    assert all(list(tr.blocks_of(i)[:doc]) == list(tr.blocks_of(0)[:doc]) for i in range(len(tr)))
    own = {tuple(tr.blocks_of(i)[doc:]) for i in range(len(tr))}
    assert len(own) == len(tr), "each user's question is its own"
    assert tr.arrival_s.min() >= 0 and tr.arrival_s.max() <= W.HOT_DOCUMENT["spread_s"]
    assert not W.hot_document_trace(seed=1).equals(tr)


def test_a_document_is_fetched_only_after_someone_computed_it(hot):
    kv, ca = hot.runs["KVCache-centric"], hot.runs["cache-aware"]
    n = kv.config.n_prefill_instances
    a = kv.arrays
    first_compute = a["prefill_end"][a["cached_tok"] < W.HOT_DOCUMENT["doc_blocks"] * 512].min()
    times = [W.holds_document_s(kv, k) for k in range(n)]
    assert all(np.isfinite(times)), "under KVCache-centric every instance ends up with the document"
    assert min(times) == pytest.approx(first_compute)
    assert all(t >= first_compute - 1e-9 for t in times), "a copy exists only once the document was computed"
    # P7's time is the end of its first fetch, as the lanes draw it
    from mooncake_lab.timeline.lanes import lanes

    ln = lanes(kv)
    on7 = (ln.pf_lane == 7) & (ln.pf_fetched > 0)
    assert W.holds_document_s(kv, 7) == pytest.approx(ln.pf_compute[on7].min())
    # cache-aware never fetches: an instance holds the document only where it computed it, and some never do
    ca_times = [W.holds_document_s(ca, k) for k in range(n)]
    assert (ca.arrays["fetched_tok"] == 0).all()
    assert any(np.isinf(ca_times)) and sum(np.isfinite(ca_times)) < n
    idle = [k for k in range(n) if not (ca.arrays["prefill_inst"] == k).any()]
    assert idle == [k for k in range(n) if np.isinf(ca_times[k])]


def test_the_hot_document_note_states_the_runs_numbers(hot):
    kv, ca = hot.runs["KVCache-centric"], hot.runs["cache-aware"]
    spread = max(W.holds_document_s(kv, k) for k in range(8))
    never = int((np.bincount(ca.arrays["prefill_inst"], minlength=8) == 0).sum())
    assert f"by {spread:.1f} s" in hot.note and f"{never} never get a request" in hot.note
    ttft = float(np.mean(kv.arrays["prefill_end"] - kv.trace.arrival_s))
    assert f"{ttft:.2f} s against" in hot.note


def test_the_view_shows_the_scenes_runs_on_one_clock(hot):
    view = hot.view()
    assert isinstance(view, Timeline)
    assert view.labels == list(hot.runs) and view.results == list(hot.runs.values())
    assert view.window == hot.window_s and view.now == pytest.approx(hot.now_s)
    view.selected = 5
    assert "Request 5" in view.why_html()


def test_the_exercise_takes_a_time_to_half_a_second():
    answer = W.holds_document_s(W.hot_document().runs["KVCache-centric"], 7)
    assert check("04.document_reaches", answer + 0.4).correct
    assert check("04.document_reaches", answer - 0.4).correct
    wrong = check("04.document_reaches", answer + 0.6)
    assert not wrong.correct and "±0.5 s" in wrong.message


def test_bad_arguments_are_named(hot):
    with pytest.raises(InputError, match="instance"):
        W.holds_document_s(hot.runs["KVCache-centric"], 8)
    with pytest.raises(InputError, match="t0, t1"):
        W.longest_prefill(hot.runs["KVCache-centric"], 1e6, 1e6 + 1)
    with pytest.raises(InputError, match="users"):
        W.hot_document_trace(users=0)


def test_the_stalled_batch_is_the_requests_resident_on_the_node():
    scene = W.interference()
    co = scene.runs["coupled"]
    t0, t1 = W.WATCH_END_S - 30, W.WATCH_END_S
    lp = W.longest_prefill(co, t0, t1)
    a = co.arrays
    inside = (a["prefill_inst"] >= 0) & (a["prefill_start"] >= t0) & (a["prefill_end"] <= t1)
    dur = np.where(inside, a["prefill_end"] - a["prefill_start"], -1)
    assert lp["request"] == int(np.argmax(dur)) and lp["node"] == int(a["prefill_inst"][lp["request"]])
    mid = (lp["start_s"] + lp["end_s"]) / 2
    fin = np.where(np.isfinite(a["finish"]), a["finish"], np.inf)
    resident = (a["decode_inst"] == lp["node"]) & (a["decode_admit"] <= mid) & (fin > mid)
    assert lp["stalled"] == int(resident.sum()) > 0
    # no token of those requests is made while the prefill runs: none finishes inside it
    assert not ((a["decode_inst"] == lp["node"]) & (fin > lp["start_s"]) & (fin < lp["end_s"])).any()
    assert f"{lp['end_s'] - lp['start_s']:.1f} s on node N{lp['node']}" in scene.note
    assert not scene.runs["Mooncake 8P+8D"].config.inline_prefill   # "decode nodes never prefill" holds here


def test_rejections_by_the_clock_are_the_runs_rejected_requests():
    scene = W.oscillation()
    for res in scene.runs.values():
        a, arr = res.arrays, res.trace.arrival_s
        rejected = np.isin(a["outcome"], [sim.REJECTED_AT_ARRIVAL, sim.REJECTED_AFTER_PREFILL, sim.REJECTED_TOO_LARGE])
        when = np.where(a["outcome"] == sim.REJECTED_AFTER_PREFILL, a["prefill_end"], arr)
        for t in (60.0, W.OSCILLATION_S):
            assert W.rejected_by(res, t) == int((rejected & (when <= t)).sum())
    at, mean = W.kv_at_rejections(scene.runs["early rejection"], W.OSCILLATION_S)
    assert 0 < mean < 1 and 0 < at <= 1
    assert f"{at:.0%} full at a rejection, {mean:.0%} on average" in scene.note


def test_the_contested_request_is_the_first_disagreement():
    from mooncake_lab.sim.explain import explain

    scene = W.router_vs_conductor()
    run = scene.runs["sglang"]
    d = W.contested_request(run, W.WATCH_END_S - 30)
    assert d is not None, "the lecture's question needs a request on which the two disagree"
    assert d.chosen == int(run.arrays["prefill_inst"][d.request]) != d.conductor_pick
    assert d.arrival_s >= W.WATCH_END_S - 30
    earlier = np.flatnonzero((run.trace.arrival_s >= W.WATCH_END_S - 30) & (np.arange(len(run.trace)) < d.request))
    for i in earlier[:20]:
        e = explain(run, int(i))
        assert e.chosen < 0 or e.conductor_pick < 0 or e.chosen == e.conductor_pick
    assert f"`view.selected = {d.request}`" in scene.note
    t0, t1 = scene.view().shown()
    assert t0 <= d.arrival_s <= t1, "the view opens on the request the note names"
