"""Lecture 03: the shared trace loader, the cached hit curve, routing, plots, dashboards, exercises.

Dashboards and exercises read traces by name through ``cached_trace``: here downloads are disabled,
and the real traces are used when ``real_trace_dir`` finds them (else the synthetic stand-ins), so
these tests run — on one or the other — with or without ``../shared/data``.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from conftest import TRACE_SETUPS
from mooncake_lab import prefix_cache as pc
from mooncake_lab.experiments import l03_cache as C, l03_traces as T
from mooncake_lab.plots import cache as cache_plots
from mooncake_lab.exercises import list_exercises
from mooncake_lab.synthetic import synthetic_trace
from mooncake_lab.traces import cached_trace

pytestmark = pytest.mark.usefixtures("offline_traces")  # never download (tests/conftest.py)


@pytest.fixture(scope="module")
def small():
    return synthetic_trace("conversation-like", n_requests=400, seed=1)


# ---------------------------------------------------------------------------------------------- loader
@pytest.mark.parametrize("trace_setup", TRACE_SETUPS, indirect=True)
def test_cached_trace_parses_once_and_accepts_presets(trace_setup):
    a, b = cached_trace("conversation"), cached_trace("conversation")
    assert a is b                                       # memoised: the same object
    assert a.name == {"released": "conversation", "no-traces": "synthetic:conversation-like"}[trace_setup]
    p = cached_trace("toolagent-like")
    assert p is cached_trace("toolagent-like") and p.name == "synthetic:toolagent-like"
    with pytest.raises(ValueError, match="name must be a released trace"):
        cached_trace("nope")


def test_cached_trace_follows_the_data_folder(isolated_trace_lookup):
    # with nothing anywhere and downloads off, the stand-in is used, labelled as such
    cached_trace.cache_clear()
    try:
        with pytest.warns(UserWarning, match="stand-in"):
            t = cached_trace("synthetic")
    finally:
        cached_trace.cache_clear()
    assert t.name == "synthetic:synthetic-like"
    assert "SYNTHETIC" in C.trace_banner(t)


# ---------------------------------------------------------------------------------------------- DRAM
def test_dram_conversions_hand_worked():
    # LLaMA2-70B: 2 × 80 layers × 8 KV heads × 128 × 2 B = 327,680 B/token; × 512 = 167,772,160 B/block.
    assert C.kv_block_bytes() == 167_772_160
    # 1e12 // 167,772,160 = 5,960 (5,960 × 167,772,160 = 999,922,073,600 ≤ 1e12 < 5,961 × … = 1,000,089,845,760)
    assert C.dram_bytes_to_blocks(1e12) == 5_960
    assert C.blocks_to_dram_bytes(5_960) == 999_922_073_600
    assert C.blocks_to_dram_bytes(math.inf) == math.inf
    for bad in (-1, math.nan, "1TB", True):
        with pytest.raises(ValueError, match=r"^dram_bytes must "):
            C.dram_bytes_to_blocks(bad)


# ---------------------------------------------------------------------------------------------- hit curve
def test_hit_curve_matches_direct_simulation(small):
    hc = C.HitCurve(small)
    caps = [1, 10, 50, 200, 1_000, math.inf]
    for w in ("token", "block"):
        np.testing.assert_allclose(hc.hit_ratio(caps, w), pc.hit_ratio_curve(small, caps, w))
    for c in (10, 200, 5_000):
        direct = pc.simulate_lru(small, c, 1).n_hit_blocks
        np.testing.assert_array_equal(hc.n_hit_blocks(c), direct)
    assert C.hit_curve(small) is C.hit_curve(small)     # cached per trace


def test_hit_curve_rejects_bad_capacity(small):
    with pytest.raises(ValueError, match=r"^capacities: "):
        C.HitCurve(small).hit_ratio([-5])


# ---------------------------------------------------------------------------------------------- routing
def test_session_routing_is_sticky(small):
    a = C.route(small, 8, "session")
    # requests sharing their first two blocks (the system prompt + the chat's first block) share an instance
    nb = small.blocks_per_request
    key = small.block_ids[small.block_offsets[:-1] + np.minimum(1, nb - 1)]
    for k in np.unique(key):
        assert len(np.unique(a[key == k])) == 1
    assert len(np.unique(a)) > 1                        # but different chats spread over instances
    # keyed on block 0 (the system prompt every conversation shares) everything lands on one instance
    assert len(np.unique(C.route(small, 8, "session", key_block=0))) == 1


def test_route_validates(small):
    with pytest.raises(ValueError, match="routing must be one of"):
        C.route(small, 4, "magic")
    with pytest.raises(ValueError, match=r"^n_instances: "):
        C.route(small, 0, "random")
    with pytest.raises(ValueError, match=r"^key_block must "):
        C.route(small, 4, "session", key_block=-1)


def test_pool_breakdown_layouts_agree_with_one_instance(small):
    g = C.pool_breakdown(small, 300, layout="global")
    one = C.pool_breakdown(small, 300, n_instances=1, layout="local", routing="random")
    assert g["hit_tokens"].sum() == one["hit_tokens"].sum()   # one local cache of the whole pool = the pool
    loc = C.pool_breakdown(small, 300, n_instances=4, layout="local", routing="random")
    assert len(loc) == 4 and loc["requests"].sum() == len(small)
    assert loc["load_share"].sum() == pytest.approx(1.0)
    assert loc["hit_tokens"].sum() < g["hit_tokens"].sum()    # splitting the pool loses hits
    with pytest.raises(ValueError, match=r"^layout must "):
        C.pool_breakdown(small, 300, layout="both")


def test_session_routing_beats_random_on_chats():
    # 1,500 chat requests in 5 minutes: many turns of one chat come back while their blocks are cached
    busy = synthetic_trace("conversation-like", n_requests=1_500, duration_s=300, seed=1)
    df = C.local_vs_global(busy, n_instances=4, total_capacity_blocks=2_000, routings=C.ROUTINGS)
    hit = dict(zip(df["routing"], df["hit_ratio"]))
    assert hit["session"] > hit["random"]


# ---------------------------------------------------------------------------------------------- plots
def _assert_labelled(fig):
    assert isinstance(fig, Figure)
    for ax in fig.axes:
        assert ax.get_title(), "every axes needs a title"
        assert ax.get_xlabel() and ax.get_ylabel(), f"axes {ax.get_title()!r} needs both axis labels"


def test_plots_have_titles_and_labels(small):
    from mooncake_lab.plots import cache as cp, traces as tp

    lvg = C.local_vs_global_sweep(small, n_instances=(2, 4), total_capacity_blocks=400)
    figs = [
        tp.arrivals(T.arrivals_per_minute(small), small.name),
        tp.length_cdfs(T.length_cdf(small), small.name, paper_means={"input": 12_035, "output": 343}),
        tp.timestamp_gaps(T.timestamp_gaps(small), small.name),
        tp.block_popularity(C.block_popularity_table(small), small.name),
        cp.hit_ratio_curve(C.hit_ratio_vs_capacity(small, C.curve_capacities()), C.paper_table1_points(),
                           capacity=1_000, block_bytes=C.kv_block_bytes()),
        cp.pool_layout(C.pool_breakdown(small, 400, layout="global"),
                       C.pool_breakdown(small, 400, 4, layout="local"), paper_ratio=2.22,
                       block_bytes=C.kv_block_bytes()),
        cp.global_over_local(lvg, 2.22, 10, small.name),
    ]
    for f in figs:
        _assert_labelled(f)
    # units are named in the labels
    assert "blocks" in figs[4].axes[0].get_xlabel() and "TB" in figs[4].axes[0].get_xlabel()
    assert "(s" in figs[2].axes[0].get_xlabel() and "tokens" in figs[1].axes[0].get_xlabel()


def test_figure_groups_registered():
    from mooncake_lab import reproduce

    figs = reproduce.collect_figures("trace")
    assert {"l03_arrivals_per_minute", "l03_block_popularity"} <= set(figs)
    for f in figs.values():
        _assert_labelled(f)


# ---------------------------------------------------------------------------------------------- dashboards
def _snapshot(fig) -> tuple:
    """Everything drawn: line data, bar/patch geometry, texts, titles (of the axes shown)."""
    out = []
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        out.append(ax.get_title())
        for ln in ax.get_lines():
            out.append(tuple(np.round(np.asarray(ln.get_xydata(), dtype=float).ravel(), 9)))
        for p in ax.patches:
            out.append(tuple(np.round(p.get_path().vertices.ravel() if hasattr(p, "get_path") else (), 9)))
        for t in ax.texts:
            out.append(t.get_text())
        out.append(tuple(t.get_text() for t in ax.get_xticklabels()))
    return tuple(out)


def _moves_change_figure(dash, moves):
    for name, value in moves:
        before, n = _snapshot(dash.figure), dash.n_draws
        dash.controls[name].value = value
        assert dash.n_draws == n + 1, f"moving {name} did not redraw"
        assert _snapshot(dash.figure) != before, f"moving {name} to {value!r} left the figure unchanged"
        assert dash.png[:8] == b"\x89PNG\r\n\x1a\n"


def test_capacity_dashboard_controls_change_the_figure():
    from mooncake_lab.dashboards.cache import CapacityDashboard

    d = CapacityDashboard()
    _moves_change_figure(d, [("capacity", 30_000), ("capacity", 300), ("weight", "block"),
                             ("trace", "synthetic"), ("trace", "toolagent-like")])
    assert "TB" in d.readout.value and "tokens" in d.readout.value
    assert all(not getattr(w, "continuous_update", False) for w in d.controls.values())


def test_capacity_slider_is_bounded_and_shows_dram():
    from mooncake_lab.dashboards.cache import CapacityDashboard

    d = CapacityDashboard()
    s = d.controls["capacity"]
    s.value = 10 ** 9                                  # beyond the slider: clamped, no crash
    assert s.value <= 10 ** s.max
    d.controls["capacity"].value = 5_960
    # 5,960 blocks × 512 = 3.05M tokens; × 167,772,160 B = 1.00 TB
    assert "3.05M tokens" in d.readout.value and "1.00 TB" in d.readout.value


def test_pool_dashboard_controls_change_the_figure():
    from mooncake_lab.dashboards.cache import PoolDashboard

    d = PoolDashboard()
    _moves_change_figure(d, [("n_instances", 4), ("routing", "session"), ("layout", "global"),
                             ("capacity", 10_000), ("trace", "synthetic")])
    before = d.controls["n_instances"].value
    d.controls["n_instances"].value = 10 ** 6          # beyond the slider: refused, named, nothing recomputed
    assert d.controls["n_instances"].value == before and d.n_refused == 1
    assert ("PoolDashboard.n_instances: got 1000000; allowed: an integer in [1, 32]. Kept n_instances = 4."
            in d.notice.value)
    for k in ("capacity", "n_instances"):
        assert d.controls[k].continuous_update is False


def test_trace_dashboard_controls_change_the_figure():
    from mooncake_lab.dashboards.traces import VIEWS, TraceDashboard

    d = TraceDashboard()
    _moves_change_figure(d, [("bin_s", 10)] + [("view", v) for v in VIEWS[1:]] + [("trace", "synthetic")])


# ---------------------------------------------------------------------------------------------- exercises
def test_exercise_answers_come_from_the_package():
    # Q1: 1e12 / 327,680 = 3,051,757.8 tokens; Q2: 5,960 blocks (see test_dram_conversions_hand_worked)
    assert list_exercises("03.tokens_per_tb")[0].answer() == pytest.approx(3_051_757.8125)
    assert list_exercises("03.blocks_per_tb")[0].answer() == 5_960
    hit = list_exercises("03.hit_1tb")[0].answer()
    assert hit == pytest.approx(C.hit_curve("conversation").hit_ratio([5_960])[0])


# ---- issue 13 -------------------------------------------------------------------------------
def test_trace_summary_counts_print_as_integers():
    df = T.trace_summary(["conversation"])
    for c in ("requests", "unique_blocks", "distinct_timestamps"):
        assert df[c].dtype.kind == "i", c
    assert "12031.0" not in df.round(1).to_string()


def test_this_run_notes_follow_the_trace_in_use():
    tr = cached_trace("conversation")
    f = C.trace_facts(tr)
    lvg = C.local_vs_global(tr, routings=C.ROUTINGS).set_index("routing")["global_over_this"]
    assert f["random_over_local"] == pytest.approx(lvg["random"])      # by name: iloc[1] is round_robin
    assert f"×{lvg['random']:.2f} random" in C.this_run_note(tr, "pool")
    assert f"{f['hit_1tb_pct']:.1f}%" in C.this_run_note(tr, "curve")
    with pytest.raises(ValueError, match=r"^part must "):
        C.this_run_note(tr, "nope")


def test_paper_box_selects_the_routing_by_name():
    # the Fig. 10 row once read iloc[1] (round-robin) as "random": the routings are picked by name
    tr = cached_trace("conversation")
    lvg = C.local_vs_global(tr, routings=C.ROUTINGS).set_index("routing")["global_over_this"]
    row = next(line for line in C.paper_comparison(tr).splitlines() if "FAST'25 Fig. 10" in line)
    assert f"×{lvg['random']:.2f} random, ×{lvg['session']:.2f} session" in row
    if f"{lvg['round_robin']:.2f}" != f"{lvg['random']:.2f}":
        assert f"×{lvg['round_robin']:.2f} random" not in row
    import nbformat
    from pathlib import Path
    nb = nbformat.read(str(next(Path(__file__).parent.parent.glob("notebooks/03_*.ipynb"))), as_version=4)
    assert any("cache.paper_comparison(trace)" in c.source for c in nb.cells if c.cell_type == "code")


def test_reading_tables_label_their_columns_and_print_no_floats_as_counts():
    """The tables lecture 03 shows: counts as integers with thousands grouped, no "e+06", no raw column
    names, ∞ for the unbounded cache, index labels that mean something."""
    import re
    tr = cached_trace("conversation")
    frames = [T.summary_table(["conversation"]), T.gap_table(T.timestamp_gaps(tr)), C.popularity_view(tr),
              C.capacity_table(tr), C.pool_table(C.local_vs_global(tr, routings=C.ROUTINGS)),
              C.table1_view(C.table1_comparison(tr))]
    for df in frames:
        cells = [str(v) for v in df.to_numpy().ravel()] + [str(i) for i in df.index]
        assert not any(re.search(r"\d[eE][+-]\d", c) for c in cells), cells
        counts = [str(v) for col in df.columns if "%" not in str(col) for v in df[col]]   # a share may be 100.0
        assert not any(re.fullmatch(r"\d[\d,]*\.0", c) for c in counts), counts      # no "12,031.0"
        names = [str(c) for c in df.columns.get_level_values(-1)]
        assert not any("_" in n for n in names), names                                # no raw column names
    summary = frames[0]
    assert summary.loc[C.trace_label(tr), "requests"] == f"{len(tr):,}"
    assert "synthetic:" not in " ".join(T.summary_table().index)            # row labels, not raw names
    cap = frames[3]
    assert cap.index[-1] == "∞" and cap.index[0] == "1,000"
    pool = frames[4]
    assert pool.index[0] == "one global pool" and "session (sticky) routing" in pool.index[-1]


def test_tokens_per_tb_counts_kib_not_kb():
    # 320 KiB = 327,680 B per token: 1e12 / 327,680 ≈ 3.05M is right; 1e12 / 320,000 = 3.125M (KB) is not
    from mooncake_lab import check
    assert check("03.tokens_per_tb", 1e12 / 327_680).correct
    assert not check("03.tokens_per_tb", 1e12 / 320_000).correct


# ---- issue 14: eviction policies (arXiv v3 Table 1) -------------------------------------------
def test_policy_curves_agree_with_the_cache_functions(small):
    caps = [100, 1_000, math.inf]
    df = C.policy_curves(small, caps)
    assert df["policy"].tolist() == [p for p in pc.EVICTION_POLICIES for _ in caps]
    for pol, g in df.groupby("policy"):
        assert g["hit_ratio"].tolist() == pytest.approx(pc.hit_ratio_curve(small, caps, policy=pol).tolist())
        assert g["block_hit_ratio"].tolist() == pytest.approx(
            pc.hit_ratio_curve(small, caps, "block", policy=pol).tolist())
    inf = df[df["capacity_blocks"] == math.inf]["hit_ratio"]
    assert inf.nunique() == 1 and inf.iloc[0] == pytest.approx(pc.infinite_cache_hit_ratio(small))
    with pytest.raises(ValueError, match=r"^policy_curves\.policy: "):
        C.policy_curves(small, caps, policies=["mru"])


def test_table1_comparison_puts_the_paper_beside_ours(small):
    from mooncake_lab import paper

    df = C.table1_comparison(small)
    assert len(df) == 18 and set(df["trace"]) == {small.name}
    for r in df.itertuples():
        assert r.paper == paper.ARXIV_TABLE1[r.policy][r.capacity_blocks]
        assert r.diff == pytest.approx(r.ours - r.paper)
    assert paper.ARXIV_TABLE1_HIT is paper.ARXIV_TABLE1["lru"]   # one LRU row, not two
    wide = C.table1_side_by_side(df, df.assign(trace="other"))
    assert wide.shape == (9, 6) and list(wide.columns) == ["∞", "100,000", "50,000", "30,000", "10,000", "1,000"]
    assert wide.loc[("LFU", "paper (arXiv trace)")].tolist() == [0.51, 0.51, 0.49, 0.43, 0.35, 0.30]


def test_arxiv_trace_is_the_stand_in_without_a_copy(isolated_trace_lookup):
    t = C.arxiv_trace()
    assert t.name == "synthetic:toolagent-like" and len(t) == 23_608
    ms = C.eviction_metrics()
    assert len(ms) == 18 and all(m.paper is None and "stand-in" in m.source for m in ms)
    assert ms[0].name == "cache_eviction.arxiv.lru_hit.inf"


def test_policy_plot_is_labelled(small):
    from mooncake_lab.plots import cache as cp

    curves = C.policy_curves(small, [100, 1_000, 10_000, math.inf])
    fig = cp.policy_curves(pd.concat([curves, curves.assign(trace="other")]), C.table1_comparison(small),
                           paper_trace="other", block_bytes=C.kv_block_bytes())
    _assert_labelled(fig)
    assert len(fig.axes) == 2
    assert len(fig.axes[1].get_lines()) > len(fig.axes[0].get_lines())   # the paper's squares on one panel


def test_policy_curves_replay_once_for_every_capacity_that_never_evicts(small, monkeypatch):
    n = small.n_blocks
    want = C.policy_curves(small, [1_000, n], ["lfu"])["hit_ratio"].tolist()
    ran = []
    real = pc.simulate_cache
    monkeypatch.setattr(pc, "simulate_cache", lambda t, c, *a, **k: ran.append(c) or real(t, c, *a, **k))
    C._policy_curve.cache_clear()   # count this call's replays, not a hit of an earlier run's (the test runs twice)
    df = C.policy_curves(small, [1_000, n, 2 * n, math.inf], ["length_aware"])
    assert ran == [1_000, n]      # 2n and ∞ hold every block as n does: no eviction, the same replay
    assert df["hit_ratio"].tolist()[1:] == [pc.cache_hit_ratio(small, 2 * n, "length_aware")] * 3
    assert want[1] == pytest.approx(pc.infinite_cache_hit_ratio(small))


def test_eviction_curve_is_hit_ratio_vs_capacity_for_any_policy(small):
    caps = [300, 3_000, math.inf]
    lru = C.eviction_curve(small, "lru", caps)
    pd.testing.assert_frame_equal(lru, C.hit_ratio_vs_capacity(small, caps))
    lfu = C.eviction_curve(small, "lfu", caps)
    assert list(lfu.columns) == list(lru.columns)
    assert lfu["hit_ratio"].tolist() == [pc.cache_hit_ratio(small, c, "lfu") for c in caps]
    assert lfu["capacity_tokens"].tolist() == [c * small.block_tokens for c in caps]
    assert lfu["reference_hit_ratio"].isna().all()
    with pytest.raises(ValueError, match=r"eviction_curve.policy: got 'mru'; allowed: one of 'lru', 'lfu', 'length_aware'"):
        C.eviction_curve(small, "mru", caps)
    assert C.paper_table1_points("lfu")["hit_ratio"].tolist() == [0.51, 0.51, 0.49, 0.43, 0.35, 0.30]


def test_capacity_dashboard_eviction_control_switches_curve_paper_row_and_readout(offline_traces):
    from mooncake_lab.dashboards.cache import CapacityDashboard, _capacity_stops

    d = CapacityDashboard(trace="synthetic", capacity_blocks=10 ** 4)
    t = cached_trace("synthetic")
    assert d.value("eviction") == "lru" and [o[1] for o in d.controls["eviction"].options] == list(pc.EVICTION_POLICIES)
    assert len(_capacity_stops()) == 81 and 10_000 in _capacity_stops()
    _moves_change_figure(d, [("eviction", "lfu"), ("eviction", "length_aware"), ("eviction", "lru")])
    for policy, label in (("lfu", "LFU"), ("length_aware", "LengthAware"), ("lru", "LRU")):
        d.controls["eviction"].value = policy
        for cap in (10_000, 12_345):        # a slider stop (read off the curve), and one between stops (replayed)
            d.controls["capacity"].value = cap
            for weight in ("token", "block"):
                d.controls["weight"].value = weight
                want = pc.cache_hit_ratio(t, cap, policy, weight=weight)
                assert f"<b>{want:.1%}</b> {weight}-weighted hit ratio of one global {label} cache" in d.readout.value
                assert d.view.marker.get_ydata()[0] == pytest.approx(want)
                assert f"ours: global {label} on this trace" in [t.get_text() for t in d.view._legend.get_texts()]
                assert d.background_is_current(), (policy, cap, weight)
        paper = [y for c, y in zip(*d.view.paper.get_data()) if math.isfinite(c)]
        assert paper == [v for c, v in C.PAPER_TABLE1_POLICIES[policy].items() if math.isfinite(c)]
        curve = d._curve_of("synthetic", policy)
        stops = curve[curve["capacity_blocks"].isin([100, 10_000, 1_000_000])]
        assert stops["hit_ratio"].tolist() == pytest.approx([pc.cache_hit_ratio(t, c, policy) for c in (100, 10_000, 1_000_000)])
    def legend():
        return " | ".join(text.get_text() for text in d.view._legend.get_texts())

    ref = "measured once on this trace"                  # the reference table's points (a regression check)
    assert ref not in legend()             # block-weighted: the reference table is token-weighted
    d.controls["weight"].value = "token"
    # the reference table was measured on the released trace: drawn on it, never on the stand-in
    assert (ref in legend()) == (offline_traces == "released") and "Table 1, same policy" in legend()
    d.controls["eviction"].value = "lfu"
    assert ref not in legend() and "Table 1, same policy" in legend()   # the reference table measured LRU
    with pytest.raises(ValueError, match=r"CapacityDashboard\(eviction=...\): got 'LFU'; allowed: one of 'lru', 'lfu', 'length_aware'"):
        CapacityDashboard(eviction="LFU")


# ---- issue 25: one definition of "1 TB", tables in the order of the figures, labels not raw names --------
def test_one_tb_is_one_nodes_cache_everywhere():
    assert C.LOCAL_CAPACITY_BLOCKS == C.dram_bytes_to_blocks(1e12) == 5_960
    lvg = C.local_vs_global(cached_trace("conversation"), routings=("random",))
    assert lvg["capacity_per_instance_blocks"].tolist() == [10 * 5_960, 5_960]


def test_table1_view_runs_from_small_to_unbounded_with_labelled_rows():
    tr = cached_trace("conversation")
    v = C.table1_view(C.table1_comparison(tr))
    assert list(v.columns) == ["1,000", "10,000", "30,000", "50,000", "100,000", "∞"]
    assert v.index.nlevels == 1 and v.index[0] == "LRU, paper (arXiv trace)"
    box = C.table1_box(C.table1_comparison(tr))
    assert box.startswith("<details><summary>") and "\n\n| " in box and box.endswith("\n\n</details>")


def test_labels_read_as_the_prose_writes_them(small):
    assert C.trace_label("synthetic:toolagent-like") == "tool & agent preset"
    assert C.trace_label("conversation") == "conversation"
    sweep = C.local_vs_global_sweep(small, n_instances=(2, 4))
    fig = cache_plots.global_over_local(sweep, 2.22, 10, small.name)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "round-robin routing" in labels and not any("_" in t for t in labels)
    assert fig.axes[0].get_ylabel().endswith("(×)")


def test_hit_ratio_axes_print_percent(small):
    curve = C.hit_ratio_vs_capacity(small, [10, 100, float("inf")])
    fig = cache_plots.hit_ratio_curve(curve)
    assert fig.axes[0].get_ylabel() == "hit ratio (%)"
    assert fig.axes[0].yaxis.get_major_formatter()(0.25, 0) == "25%"


def test_paper_comparison_says_what_is_the_same_and_what_is_not():
    md = C.paper_comparison(cached_trace("conversation"))
    assert "knee" not in md and "<details><summary>Why they differ</summary>" in md
    assert "of its ceiling" in md and "At 1k blocks the paper's LRU has" in md
