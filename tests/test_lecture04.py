"""Lecture 04: offered load, the worked example of Algorithm 1, policy comparison, plots, dashboards, exercises.

Traces are read by name through ``cached_trace`` with downloads disabled: the real traces when
``../shared/data`` has them, else the synthetic stand-ins (tests that need the real numbers say so).
"""
from __future__ import annotations

import re
import math

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from mooncake_lab import check, paper, sim
from mooncake_lab.experiments import l04_scheduling as S
from mooncake_lab.roofline import cm_kv_transfer_time, cm_prefill_time, kv_transfer_time, prefill_time
from mooncake_lab.synthetic import synthetic_trace
from mooncake_lab.traces import trace_from_requests

pytestmark = pytest.mark.usefixtures("offline_traces")  # never download (tests/conftest.py)


# ------------------------------------------------------------------------------------ offered load
def test_offered_prefill_load_by_hand():
    # Two requests of 4,000 and 8,000 tokens arriving at 0 s and 10 s on 2 prefill instances:
    # ρ₀ = (p(4000) + p(8000)) / (2 instances × 10 s); at 2× replay the duration is 5 s, so ρ₀ doubles.
    tr = trace_from_requests([0.0, 10.0], [4000, 8000], [2, 2], [8, 16], list(range(8)) + list(range(100, 116)))
    cfg = sim.ClusterConfig(n_prefill=2, n_decode=1)
    p4 = prefill_time("llama2-70b", "a800x8", 4000, 0, preset="calibrated")
    p8 = prefill_time("llama2-70b", "a800x8", 8000, 0, preset="calibrated")
    assert S.offered_prefill_load(tr, cfg) == pytest.approx((p4 + p8) / 20.0, rel=1e-12)
    assert S.offered_prefill_load(tr, cfg, speed=2.0) == pytest.approx((p4 + p8) / 10.0, rel=1e-12)
    assert S.balanced_replay_speed(tr, cfg) == pytest.approx(20.0 / (p4 + p8), rel=1e-12)
    with pytest.raises(ValueError, match="^speed must be a positive finite number, got 0"):
        S.offered_prefill_load(tr, cfg, speed=0)
    with pytest.raises(ValueError, match="^config must be a ClusterConfig, got str"):
        S.offered_prefill_load(tr, "8 nodes")
    with pytest.raises(ValueError, match="^trace must span a positive duration"):
        S.offered_prefill_load(tr.head(1), cfg)


def test_replay_speeds_are_the_balanced_ones():
    # each lecture speed ≈ 1 / ρ₀(1×), within 5% (conversation: 1/2.55 = 0.39 → 0.4; toolagent-like 0.49 → 0.5)
    for name, speed in S.REPLAY_SPEEDS.items():
        assert speed == pytest.approx(S.balanced_replay_speed(name), rel=0.05), name
        assert S.offered_prefill_load(name, speed=speed) == pytest.approx(1.0, abs=0.05)


def test_mg1_wait_pollaczek_khinchine_by_hand():
    # M/M/1 (C² = 1), E[S] = 2 s, ρ = 0.5: W = 0.5/0.5 × 2 × (1+1)/2 = 2 s; M/D/1 (C² = 0): 1 s.
    assert S.mg1_wait_s(2.0, 1.0, 0.5) == pytest.approx(2.0)
    assert S.mg1_wait_s(2.0, 0.0, 0.5) == pytest.approx(1.0)
    # ρ = 0.9, C² = 9, E[S] = 5 s: 9 × 5 × 5 = 225 s
    assert S.mg1_wait_s(5.0, 9.0, 0.9) == pytest.approx(225.0)
    assert math.isinf(S.mg1_wait_s(1.0, 1.0, 1.0))
    with pytest.raises(ValueError, match="^utilisation must be a finite number ≥ 0, got -0.1"):
        S.mg1_wait_s(1.0, 1.0, -0.1)


# ------------------------------------------------------------------------------------ worked example
def test_worked_example_estimates_by_hand_and_simulator_agrees():
    t = S.estimate_table(threshold=1.0)
    c = sim.ClusterConfig().resolve().cost
    # Request E: 10,000 tokens, 20 blocks, the first 16 (8,192 tokens) = the document.
    assert t["local_blocks"].tolist() == [16, 4, 0] and (t["best_blocks"] == 16).all()
    assert t["remote"].tolist() == [False, True, True]   # instance 0 holds the best; ratios 4 and ∞ ≥ 1
    # instance 1 fetches 12 blocks = 6,144 tokens and computes 10,000 − 8,192 = 1,808 after 8,192 cached
    assert t.loc[1, "transfer_s"] == pytest.approx(kv_transfer_time("llama2-70b", "a800x8", 6144, "calibrated"))
    # … while it loads the 8,192 cached tokens from DRAM (327,680 B each at 128 GB/s), layer by layer
    compute = prefill_time("llama2-70b", "a800x8", 1808, 8192, "calibrated")
    load = 8192 * 327_680 / 128e9

    def overlapped(a, b):  # two-stage pipeline over 80 layers
        return max(a, b) + min(a, b) / 80
    assert t.loc[1, "prefill_s"] == pytest.approx(overlapped(compute, load))
    # instance 2 is still busy with C (7,000 tokens from t = 0): queue = p(7000) − 0.8 s
    assert t.loc[2, "queue_s"] == pytest.approx(float(cm_prefill_time(c, 7000, 0)) - 0.8)
    assert t.loc[2, "kvcentric_s"] == pytest.approx(t.loc[2, "queue_s"] + float(cm_kv_transfer_time(c, 8192))
                                                    + overlapped(float(cm_prefill_time(c, 1808, 8192)), load))
    # cache-aware on instance 1: compute 7,952 after its 2,048 local tokens
    assert t.loc[1, "cache_aware_s"] == pytest.approx(overlapped(float(cm_prefill_time(c, 7952, 2048)),
                                                                 2048 * 327_680 / 128e9))
    assert t.index[t["chosen"]].tolist() == [1]
    got = S.worked_example(threshold=1.0)
    kv = got.loc["kvcentric"]
    assert kv["prefill_instance"] == 1 and kv["fetched_tokens"] == 6144 and kv["computed_tokens"] == 1808
    assert kv["queue_wait_s"] + kv["fetch_s"] + kv["prefill_s"] == pytest.approx(t.loc[1, "kvcentric_s"])
    ca = got.loc["cache_aware"]
    assert ca["prefill_instance"] == int(S.estimate_table(policy="cache_aware")["cache_aware_s"].idxmin())
    assert ca["fetched_tokens"] == 0 and ca["computed_tokens"] == 7952


def test_threshold_changes_the_choice():
    # best/local on instance 1 = 16/4 = 4: a threshold of 8 forbids its fetch, instance 2 (ratio ∞) wins.
    t = S.estimate_table(threshold=8.0)
    assert t["remote"].tolist() == [False, False, True]
    assert int(t["kvcentric_s"].idxmin()) == 2
    assert S.worked_example(threshold=8.0).loc["kvcentric", "prefill_instance"] == 2
    # a slower network makes fetches longer, linearly in 1/bandwidth
    slow = S.estimate_table(network_gbps=80.0)
    assert slow.loc[1, "transfer_s"] == pytest.approx(10 * S.estimate_table(network_gbps=800.0).loc[1, "transfer_s"])
    with pytest.raises(ValueError, match="^example_blocks must be an integer in 17..256, got 16"):
        S.worked_example_trace(16)
    with pytest.raises(ValueError, match="^policy must be 'cache_aware' or 'kvcentric', got 'random'"):
        S.estimate_table(policy="random")


# ------------------------------------------------------------------------------------ policies
def test_policy_comparison_on_a_small_trace():
    tr = synthetic_trace("conversation-like", n_requests=500, seed=2)
    df = S.policy_comparison(tr, speed=1.0, n_prefill=2, n_decode=2)
    assert list(df.index) == list(sim.PREFILL_POLICIES)
    assert (df.loc[["random", "load", "cache_aware"], "fetched_tokens"] == 0).all()
    total = int(tr.input_len.sum())
    assert ((df["computed_tokens"] + df["local_hit_tokens"] + df["fetched_tokens"]) == total).all()
    assert df.loc["kvcentric", "hit_ratio"] >= df.loc["load", "hit_ratio"]
    # memoised: same objects back
    a, b = S.policy_runs(tr, 1.0, n_prefill=2, n_decode=2), S.policy_runs(tr, 1.0, n_prefill=2, n_decode=2)
    assert all(a[p] is b[p] for p in a)


def test_paper_order_holds_on_both_workloads():
    # arXiv Fig. 8's order of mean TTFT at the lecture's replay speeds (real conversation trace if present)
    for name, speed in S.REPLAY_SPEEDS.items():
        m = S.policy_comparison(name, speed)["ttft_mean_s"]
        assert m["random"] > m["load"] > m["cache_aware"] > m["kvcentric"], (name, m.to_dict())


def test_replicas_and_queues_are_consistent():
    tr = synthetic_trace("conversation-like", n_requests=400, seed=3)
    res = S.run(tr, 1.0, n_prefill=4, n_decode=2, prefill_policy="kvcentric", cache_capacity_blocks=100_000)
    rep = S.hot_block_replicas(res, top=20)
    assert rep["requests"].is_monotonic_decreasing
    assert ((rep["replicas"] >= 1) & (rep["replicas"] <= 4)).all()   # every used block is somewhere, uncapped cache
    # with an unbounded cache the replicas of a block = distinct instances its requests ran on
    inst = res.arrays["prefill_inst"]
    b0 = int(rep["block"].iloc[0])
    users = [i for i in range(len(tr)) if b0 in tr.blocks_of(i)]
    assert rep["replicas"].iloc[0] == len(set(inst[users].tolist()))
    q = S.instance_queues(res, dt=5.0)
    assert list(q.columns) == [0, 1, 2, 3] and (q.to_numpy() >= 0).all()


# ------------------------------------------------------------------------------------ metrics
def test_metrics_names_and_source():
    ms = {m.name: m for m in S._metrics()}
    names = ([f"scheduling.ttft_mean_s.{p}" for p in sim.PREFILL_POLICIES]
             + [f"scheduling.ttft_slo_attainment.{p}" for p in sim.PREFILL_POLICIES]
             + ["scheduling.random_over_kvcentric"]
             + [f"scheduling.contention.ttft_mean_s.{p}.{g:g}gbps.{n}" for g in S.CONTENTION_GBPS
                for p in ("kvcentric", "cache_aware") for n in ("free", "shared")]
             + [f"scheduling.contention.{k}.100gbps" for k in ("fetches_given_up", "fetch_wait_mean_s")]
             + [f"scheduling.contention.bite.ttft_mean_s.{p}.{n}" for p in ("kvcentric", "cache_aware")
                for n in ("free", "shared")]
             + [f"scheduling.fast25.fig5.{k}.{p}" for k in ("ttft_mean_s", "over_best")
                for p in ("random", "load", "cache_aware", "kvcentric")]
             + [f"scheduling.fast25.fig13.ttft_mean_s.{g:g}gbps" for g in S.FIG13_GBPS]
             + [f"scheduling.fast25.fig14.{k}" for k in ("prefill_cut", "ttft_cut")])
    assert sorted(ms) == sorted(names)
    # the paper column holds only the same metric: Fig. 5's means, its bound from 100 Gbps up, Fig. 14's cuts
    assert ms["scheduling.fast25.fig5.ttft_mean_s.kvcentric"].paper == paper.FAST25_FIG5_TTFT_S["kvcentric"]
    assert ms["scheduling.fast25.fig13.ttft_mean_s.24gbps"].paper is None
    assert ms["scheduling.fast25.fig14.ttft_cut"].paper == paper.FAST25_FIG14["ttft_cut"]
    tab = S.contention_comparison()
    assert ms["scheduling.contention.ttft_mean_s.kvcentric.100gbps.shared"].ours == tab.loc[(100.0, True, "kvcentric"),
                                                                                           "ttft_mean_s"]
    assert "network_contention = False / True" in ms["scheduling.contention.fetches_given_up.100gbps"].source
    assert ms["scheduling.contention.fetches_given_up.100gbps"].ours == S.fetch_delays(tab).loc[100.0, "given_up"]
    assert ms["scheduling.random_over_kvcentric"].paper == pytest.approx(92.07 / 6.26)
    assert f"{S.DEFAULT_REPLAY_SPEED:g}×" in ms["scheduling.ttft_mean_s.kvcentric"].source
    assert all(0 <= ms[f"scheduling.ttft_slo_attainment.{p}"].ours <= 1 for p in sim.PREFILL_POLICIES)


# ------------------------------------------------------------------------------------ plots
def _labelled(fig):
    assert isinstance(fig, Figure)
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert axes
    for ax in axes:
        assert ax.get_title() or (fig._suptitle is not None and fig._suptitle.get_text())
        assert ax.get_ylabel() or ax is not axes[0]
    assert any(ax.get_xlabel() for ax in axes)


def test_plots_have_titles_and_labels():
    from mooncake_lab.plots import scheduling as P

    tr = synthetic_trace("conversation-like", n_requests=300, seed=5)
    runs = S.policy_runs(tr, 1.0, n_prefill=3, n_decode=2)
    sw = S.speed_sweep(tr, speeds=(0.5, 1.0), n_prefill=3, n_decode=2)
    figs = [P.ttft_by_policy({"small": S.ttft_samples(runs)}, S.PAPER_FIG8_TTFT_S),
            P.speed_sweep(sw, S.PAPER_FIG8_TTFT_S, chosen_speed=1.0),
            P.policy_metrics(S.policy_comparison(tr, 1.0, n_prefill=3, n_decode=2)),
            P.instance_queues_grid({p: S.instance_queues(r) for p, r in runs.items()}),
            P.replica_bars(S.replica_summary(runs, bins=(0, 1, 10, 50)), n_instances=3),
            P.policy_view(runs["kvcentric"], S.instance_queues(runs["kvcentric"]), paper_mean=6.26),
            P.estimate_bars({p: S.estimate_table(policy=p) for p in ("cache_aware", "kvcentric")})]
    for f in figs:
        _labelled(f)


def test_estimate_bars_stack_to_the_estimates_and_star_the_choice():
    from mooncake_lab.plots import scheduling as P

    tables = {p: S.estimate_table(policy=p, threshold=8.0) for p in ("cache_aware", "kvcentric")}
    view = P.EstimateBars(tuple(tables)).update(tables)
    for pol, t in tables.items():
        queue, transfer, prefill = view.bars[pol]
        assert [b.get_width() for b in queue] == pytest.approx(t["queue_s"].tolist())
        assert [b.get_x() + b.get_width() for b in prefill] == pytest.approx(t[f"{pol}_s"].tolist())
        starred = [k for k, note in enumerate(view.notes[pol]) if "chosen" in note.get_text()]
        assert starred == t.index[t["chosen"]].tolist()
    with pytest.raises(ValueError, match=r"^tables\['kvcentric'\] has instances \[0, 1\], the figure was built for"):
        view.update({"kvcentric": tables["kvcentric"].iloc[:2]})


def test_policy_view_shows_the_run_and_hides_unused_instances():
    from mooncake_lab.plots import scheduling as P

    tr = synthetic_trace("conversation-like", n_requests=300, seed=5)
    big, small = (S.run(tr, 1.0, n_prefill=n, n_decode=2) for n in (4, 2))
    view = P.PolicyView()
    view.update(big, S.instance_queues(big), paper_mean=6.26)
    assert view.paper_line.get_visible() and view.paper_line.get_xdata()[0] == 6.26
    view.update(small, S.instance_queues(small))
    assert [line.get_visible() for line in view.queues] == [True, True, False, False]
    assert view.a2.get_title() == "Queue of each of the 2 prefill instances" and not view.paper_line.get_visible()
    done = small.requests["outcome"] == "completed"
    x, y = view.cdf.get_data()
    assert y[-1] == pytest.approx(done.mean()) and x[-1] == pytest.approx(small.requests.loc[done, "ttft_s"].max())
    assert view.mean_line.get_xdata()[0] == pytest.approx(small.summary()["ttft_mean_s"])


# ------------------------------------------------------------------------------------ dashboards
def _lines(fig):
    return [np.asarray(l.get_ydata(), dtype=float).copy() for ax in fig.axes for l in ax.lines] + \
           [np.asarray(l.get_xdata(), dtype=float).copy() for ax in fig.axes for l in ax.lines]


def _changed(a, b):
    return len(a) != len(b) or any(x.shape != y.shape or not np.allclose(x, y, equal_nan=True) for x, y in zip(a, b))


def test_scheduling_dashboard_every_control_changes_the_figure():
    from mooncake_lab.dashboards.scheduling import BOUNDS, SchedulingDashboard

    d = SchedulingDashboard()
    sliders = [w for w in d.controls.values() if hasattr(w, "continuous_update")]
    assert len(sliders) == 5 and all(w.continuous_update is False for w in sliders)
    moves = {"policy": "cache_aware", "speed": 0.5, "n_prefill": 6, "capacity": 1000.0,
             "threshold": 4.0, "noise": 0.5, "trace": "toolagent-like"}
    d.controls["policy"].value = "kvcentric"  # threshold and noise matter only to estimate-based policies
    for k, v in moves.items():
        before, n0 = _lines(d.figure), d.n_draws
        d.controls[k].value = v
        assert d.n_draws == n0 + 1, k
        assert _changed(before, _lines(d.figure)), k
        if k == "policy":
            d.controls["policy"].value = "kvcentric"
    assert BOUNDS["speed"] == (0.1, 2.0) and BOUNDS["n_prefill"] == (1, 32)
    assert d.controls["speed"].min == 0.1 and d.controls["speed"].max == 2.0
    assert d.controls["n_prefill"].min == 1 and d.controls["n_prefill"].max == 32


def test_scheduling_dashboard_contention_box_runs_the_shared_network():
    from mooncake_lab.dashboards.scheduling import SchedulingDashboard

    d = SchedulingDashboard(n_prefill=4, speed=0.3)   # few instances at 800 Gbps: fetches do wait
    # on by default, as ClusterConfig's (the lecture's whole-trace runs share the links)
    assert d.controls["contention"].value is True and "shared links:" in d.readout.value
    n0 = d.n_draws
    d.controls["contention"].value = False
    assert d.n_draws == n0 + 1 and "shared links" not in d.readout.value
    d.controls["contention"].value = True
    assert d.n_draws == n0 + 2 and "shared links:" in d.readout.value
    on = S.run("conversation", 0.3, **SchedulingDashboard._config({k: w.value for k, w in d.controls.items()}))
    assert on.config.network_contention is True
    w = on.requests.loc[on.requests.fetched_tokens > 0, "fetch_wait_s"]
    assert f"{int((w > 0).sum()):,} of {len(w):,} fetches waited" in d.readout.value
    with pytest.raises(ValueError, match=r"^SchedulingDashboard\(contention=\.\.\.\): got 'yes'; allowed: True or False"):
        SchedulingDashboard(contention="yes")


def test_scheduling_dashboard_corners_do_not_crash():
    from mooncake_lab.dashboards.scheduling import SchedulingDashboard

    d = SchedulingDashboard(trace="conversation")
    c = d.controls
    for k in ("speed", "n_prefill", "capacity", "threshold", "noise"):
        for end in (c[k].max, c[k].min):
            c[k].value = end
            assert isinstance(d.figure, Figure), (k, end)
    assert "mean TTFT" in d.readout.value


def test_algorithm_one_dashboard_every_control_changes_the_figure():
    from mooncake_lab.dashboards.scheduling import AlgorithmOneDashboard

    d = AlgorithmOneDashboard()
    assert "instance 1" in d.readout.value
    for k, v in {"threshold": 8.0, "network_gbps": 20.0, "example_blocks": 60}.items():
        before = [p.get_width() for ax in d.figure.axes for p in ax.patches]
        d.controls[k].value = v
        after = [p.get_width() for ax in d.figure.axes for p in ax.patches]
        assert before != after, k
        assert d.controls[k].continuous_update is False
    for k in ("threshold", "network_gbps", "example_blocks"):
        for end in (d.controls[k].max, d.controls[k].min):
            d.controls[k].value = end
            assert isinstance(d.figure, Figure)


# ------------------------------------------------------------------------------------ exercises
def test_worked_example_choices_by_hand():
    assert check("04.worked_choice", 1).correct and check("04.threshold_choice", 2).correct


def test_glossary_has_lecture_04_terms():
    from mooncake_lab.glossary import glossary

    g = glossary("04")
    assert "KVCache-centric scheduling" in set(g["term"]) and len(g) >= 5


# ---- issue 13: the fetch rule, and which preset the lecture trusts ------------------------------
def test_algorithm1_fetches_by_prefix_ratio_even_when_the_fetch_is_slower():
    # 10 Gbps: 12 blocks of 512 × 327,680 B = 2.01 GB take > 1.6 s, longer than recomputing 6,144 tokens
    slow = S.slow_network(network_gbps=10.0)
    assert slow.loc[1, "fetched_blocks"] == 12 and slow.loc[2, "fetched_blocks"] == 16
    assert slow.loc[2, "fetched_GB"] == pytest.approx(16 * 512 * 327_680 / 1e9)
    assert slow.loc[2, "transfer_s"] >= 16 * 512 * 327_680 / 1.25e9   # at most 10 Gbit/s = 1.25 GB/s
    assert not slow["fetch_pays"].any()
    ex = S.worked_example(network_gbps=10.0)
    assert ex.loc["kvcentric", "ttft_s"] > ex.loc["cache_aware", "ttft_s"]      # the fetch made E slower
    assert ex.loc["kvcentric", "fetched_tokens"] > 0
    fast = S.slow_network(network_gbps=None)                                  # the default RDMA: it pays
    assert fast.loc[[1, 2], "fetch_pays"].all()
    note = S.slow_network_note(10.0)
    assert "2.68 s" in note and "the ratio decides, not the times" in note


def test_long_prompts_carry_half_the_calibrated_work_and_the_order_holds_under_both_presets():
    sh = S.long_prompt_share("conversation")
    assert 40_000 < sh["min_tokens"] < 50_000          # prefill > 30 s from ≈ 46k tokens (calibrated)
    assert 2 < sh["share_requests"] < 6 and 40 < sh["share_work"] < 60
    assert S.long_prompt_share("conversation", preset="modern")["share_requests"] == 0
    chk = S.preset_check("conversation")
    for col in [c for c in chk.columns if "×" in c]:
        m = chk[col]
        assert m["random"] > m["load"] > m["cache_aware"] > m["kvcentric"], col
    assert any(c.startswith("modern at 1.7") for c in chk.columns)   # ρ₀ = 1 at ≈ 1.75× under modern


@pytest.mark.parametrize("trace_setup", ["released", "no-traces"], indirect=True)
def test_fig8_under_the_check_preset_keeps_the_order_and_the_note_says_why(trace_setup):
    """§4's Fig. 8 on `modern` (valid at the trace's prompt lengths): each workload at its own ρ₀ = 1 speed
    keeps the paper's order; the note puts our means beside the paper's and gives the service times."""
    from mooncake_lab.plots import scheduling as P
    from mooncake_lab.traces import cached_trace

    tr = cached_trace("conversation")
    for t in S.TRACES:
        sp = S.preset_check_speed(t)
        assert sp == round(S.balanced_replay_speed(t, sim.ClusterConfig(preset=S.CHECK_PRESET)), 2)
        assert S.offered_prefill_load(t, sim.ClusterConfig(preset=S.CHECK_PRESET), speed=sp) == pytest.approx(1, abs=0.01)
        m = S.policy_comparison(t, sp, preset=S.CHECK_PRESET)["ttft_mean_s"]
        assert m["random"] > m["load"] > m["cache_aware"] > m["kvcentric"], t
    sp = S.preset_check_speed(tr)
    assert f"{S.CHECK_PRESET} at {sp:g}×" in S.preset_check(tr).columns     # the preset check's runs
    m = S.policy_comparison(tr, sp, preset=S.CHECK_PRESET)["ttft_mean_s"]
    q = S.queueing_check(S.policy_runs(tr, sp, preset=S.CHECK_PRESET)).loc["random"]
    qc = S.queueing_check(S.policy_runs(tr, S.DEFAULT_REPLAY_SPEED)).loc["random"]
    assert q.mean_service_s < qc.mean_service_s and q.service_scv < qc.service_scv   # the "why"
    note = S.fig8_note(tr)
    assert f"at {sp:g}×" in note and tr.name in note and "the paper's order" in note
    assert " / ".join(f"{m[p]:.3g}" for p in S.POLICIES) + " s" in note
    assert "92.07 / 60.41 / 14.36 / 6.26 s" in note and f"{q.mean_service_s:.2f} s on average" in note
    assert (pd.Series(S.PAPER_FIG8_TTFT_S) > m).all() and "shorter than the paper's" in note
    fig = P.ttft_by_policy({"modern": S.ttft_samples(S.policy_runs(tr, sp, preset=S.CHECK_PRESET))},
                           S.PAPER_FIG8_TTFT_S)
    _labelled(fig)


def test_algorithm_one_dashboard_says_when_the_fetch_made_it_slower():
    from mooncake_lab.dashboards.scheduling import AlgorithmOneDashboard
    d = AlgorithmOneDashboard()
    assert "slower" not in d.readout.value                      # default RDMA: the fetch pays
    d.controls["network_gbps"].value = 10.0
    assert "the fetch made it slower" in d.readout.value


# ------------------------------------------------------------------------------ the network is shared
def test_fetch_delays_by_hand():
    import pandas as pd

    idx = pd.MultiIndex.from_tuples([(100.0, False, "kvcentric"), (100.0, True, "kvcentric")],
                                    names=["gbps", "contention", "policy"])
    tab = pd.DataFrame({"fetches": [10, 7], "fetches_waited": [0, 3], "fetch_wait_mean_s": [0.0, 0.2],
                        "fetch_wait_p90_s": [0.0, 0.5], "fetch_wait_max_s": [0.0, 1.5],
                        "stream_wait_mean_s": [0.0, 0.01]}, index=idx)
    d = S.fetch_delays(tab).loc[100.0]
    assert (d.fetches_free, d.fetches_shared, d.given_up, d.waited) == (10, 7, 3, 3)
    assert (d.wait_mean_s, d.wait_p90_s, d.wait_max_s, d.stream_wait_mean_s) == (0.2, 0.5, 1.5, 0.01)
    for bad, field in ((dict(table=tab.reset_index()), "table"), (dict(table="table"), "table"),
                       (dict(table=tab, policy="random"), "policy")):
        with pytest.raises(ValueError, match=rf"^fetch_delays\.{field}: got .*; allowed: "):
            S.fetch_delays(**bad)


def test_network_section_shows_what_its_prose_says():
    """The section's conclusion on the lecture's trace (released or stand-in): links make fetches wait,
    the Conductor fetches less, mean TTFT barely moves at 100–800 Gbps; under the modern preset on
    50 Gbps NICs contention costs KVCache-centric TTFT."""
    tab = S.contention_comparison()
    assert list(tab.index) == [(g, on, p) for g in S.CONTENTION_GBPS for on in (False, True)
                               for p in ("kvcentric", "cache_aware")]
    assert (tab.xs("cache_aware", level="policy").fetches == 0).all()
    free, shared = tab.xs(False, level="contention"), tab.xs(True, level="contention")
    assert (free.fetch_wait_max_s == 0).all() and (free.stream_wait_mean_s == 0).all()
    d = S.fetch_delays(tab)
    assert (d.given_up > 0).all() and (d.waited > 0).all() and (d.wait_max_s > 0).all()
    assert ((shared.ttft_mean_s / free.ttft_mean_s - 1).abs() < 0.02).all()   # "contention costs little"
    bite = S.contention_bite()
    b = bite["ttft_mean_s"]
    g = S.BITE_GBPS
    assert b[(g, True, "kvcentric")] > b[(g, False, "kvcentric")]   # "where it bites": TTFT rises, the edge shrinks,
    assert (b[(g, True, "cache_aware")] - b[(g, True, "kvcentric")]) < 0.8 * (b[(g, False, "cache_aware")]
                                                                          - b[(g, False, "kvcentric")])
    bd = S.fetch_delays(bite).loc[g]                                  # about half the fetches given up, streams queue
    assert 0.4 < bd.given_up / bd.fetches_free < 0.6 and bd.stream_wait_mean_s > 0.1
    reps = S.contention_replicas(n_samples=6)
    assert set(reps) == {False, True} and all(f.shape == (6, 10) for f in reps.values())
    assert all(((f >= 0) & (f <= 8)).all().all() for f in reps.values())
    note = S.contention_note(tab, bite, reps)
    g0 = S.CONTENTION_GBPS[0]
    kv0, kv1 = (f"{tab.loc[(g0, on, 'kvcentric'), 'ttft_mean_s']:.2f}" for on in (False, True))
    # a readout whose two values print the same says so ("does not change"), never "from 6.60 s to 6.60 s"
    moved = f"does not change ({kv0} s)" if kv0 == kv1 else f"goes from {kv0} s to {kv1} s"
    for text in (f"KVCache-centric's mean TTFT {moved} with shared links",
                 f"made {d.loc[g0, 'given_up']:,.0f} fewer fetches", f"on {S.BITE_GBPS:g} Gbps NICs"):
        assert text in note
    assert not any(f"from {x} s to {x} s" in note for x in [kv0])
    from mooncake_lab.plots import scheduling as P

    for fig in (P.contention_ttft(tab), P.replicas_over_time({"a": reps[False], "b": reps[True]}, n_instances=8)):
        assert isinstance(fig, Figure) and fig.axes[0].get_title() and fig.axes[0].get_xlabel()
        assert "(" in fig.axes[0].get_ylabel() or "instances" in fig.axes[0].get_ylabel()
    # the runs' clock is the replay's: the time axis names the speed
    fig = P.replicas_over_time({"a": reps[False]}, n_instances=8, speed=S.DEFAULT_REPLAY_SPEED)
    assert f"replayed at {S.DEFAULT_REPLAY_SPEED:g}×" in fig.axes[0].get_xlabel()


@pytest.mark.parametrize("trace_setup", ["released", "no-traces"], indirect=True)
def test_holder_jam_measures_why_shared_links_break_algorithm_one(trace_setup):
    """§6's passage on 25 Gbps NICs under modern: on the released trace KVCache-centric piles every request
    onto the first holder of the shared first block and never fetches (its streams jam the holder's send
    link; with a whole NIC per transfer it is as fast as cache-aware); on the stand-in the first
    requests spread and it does not break. The note says whichever happened, with the table's numbers."""
    from mooncake_lab.traces import cached_trace

    tr = cached_trace("conversation")
    assert S.JAM_GBPS == 100 / 4                       # "a quarter of the 100 Gbps"
    speed = S.jam_speed(tr)
    assert speed == round(S.balanced_replay_speed(tr, sim.ClusterConfig(preset=S.CHECK_PRESET)), 3)
    cfg = S.jam_config("kvcentric")
    assert (cfg.preset, cfg.network_gbps, cfg.network_contention, cfg.layerwise_kv_transfer,
            cfg.n_prefill, cfg.n_decode) == ("modern", 25.0, True, True, 8, 8)
    jam = S.holder_jam(tr)
    kv, ca = jam.loc["kvcentric"], jam.loc["cache_aware"]
    assert (jam.speed == speed).all() and (jam.requests == len(tr)).all() and ca.fetches == 0
    assert kv.shared_first_block == 1.0                 # every prompt starts with the same block
    assert ca.busiest_share < 0.2 and kv.busiest_stream_s > kv.busiest_prefill_s   # streams outlast prefills
    res = S.simulate_at_speed(tr, speed, cfg)
    assert kv.ttft_mean_s == res.summary()["ttft_mean_s"]
    assert kv.busiest_stream_s == pytest.approx(
        np.mean([cm_kv_transfer_time(cfg.resolve().cost, n) for n in res.requests.input_len[
            res.requests.prefill_instance == kv.busiest]]))
    note = S.holder_jam_note(jam, tr)
    assert f"{S.JAM_GBPS:g} Gbps NICs" in note and f"at {speed:g}×" in note and tr.name in note
    if trace_setup == "released":
        assert kv.ttft_mean_s > 1000 * ca.ttft_mean_s        # ≈ 5,575 s vs ≈ 1.42 s
        assert kv.busiest_share == 1.0 and kv.busiest == kv.first_holder and math.isnan(kv.elsewhere_first_s)
        assert kv.fetches == 0 and kv.busiest_stream_wait_s > 1000 and kv.busiest_queue_s > 1000
        assert kv.ttft_mean_free_s < 1.1 * ca.ttft_mean_free_s   # the shared links do it
        assert "break Algorithm 1's literal pseudocode" in note and f"All {len(tr):,} requests went to instance" in note
        assert f"{kv.ttft_mean_s:,.0f} s, cache-aware's {ca.ttft_mean_s:.2f} s" in note
    else:
        assert tr.name == "synthetic:conversation-like"
        assert kv.elsewhere_first_s < 5 and kv.fetches > 0 and kv.busiest_share < 0.2
        assert kv.ttft_mean_s < 2 * ca.ttft_mean_s
        assert "does not break" in note and f"{kv.ttft_mean_s:.2f} s and trails" in note


def test_holder_jam_refuses_bad_arguments():
    for bad in ("kvcentric", [], ["nope"], [None], 3):
        with pytest.raises(ValueError, match=r"holder_jam.policies: got"):
            S.holder_jam("conversation", policies=bad)
    for bad in (None, "table", S.contention_comparison(gbps=[100.0]),
                S.holder_jam("conversation", policies=["kvcentric"])):
        with pytest.raises(ValueError, match=r"holder_jam_note.table: got .*; allowed: a holder_jam table"):
            S.holder_jam_note(bad)


# ---- issue 25: readable again (notes, tables, colours, Q4) ------------------------------------------
def test_moved_says_no_change_when_both_values_print_the_same():
    assert S._moved(6.601, 6.604) == "does not change (6.60 s)"
    assert S._moved(1.287, 1.402, ".3f") == "goes from 1.287 s to 1.402 s"


def test_generated_notes_lead_with_one_or_two_short_sentences_and_box_the_rest():
    """Each note the lecture displays: at most two sentences outside its <details> box, none over 40 words;
    the precision (the per-instance numbers, the mechanism) inside the box."""
    from mooncake_lab.prose_load import LONG, load_of_text, words

    tab, bite = S.contention_comparison(), S.contention_bite()
    notes = {"slow": S.slow_network_note(10.0), "preset": S.preset_note("conversation"),
             "fig8": S.fig8_note("conversation"),
             "contention": S.contention_note(tab, bite, S.contention_replicas(n_samples=6)),
             "jam": S.holder_jam_note(S.holder_jam("conversation"))}
    for name, note in notes.items():
        main = load_of_text(note)
        assert 1 <= len(main.sentences) <= 3, (name, main.sentences)
        assert all(words(x) <= LONG for x in main.sentences), (name, main.sentences)
        assert note.count("<details>") == 1 and "</summary>\n\n" in note and note.rstrip().endswith("</details>"), name
    box = notes["slow"].split("<details>")[1]                              # the numbers sit in the box
    assert "| 1 | 0.20 | 12 | 2.01 | 1.85 | 2.68 | 2.21 | no |" in box          # the queue term shown
    assert "0.20 + 2.00 = 2.21 s" in box and "idle (0.00 s queued): 2.00 s" in box
    assert re.search(r"local hits rise from \d+% to \d+%", notes["contention"].split("<details>")[1])
    for name in ("preset", "contention", "jam"):                          # each note's table is in its box
        assert "\n|---|" in notes[name].split("<details>")[1], name


def test_tables_for_people_have_labels_units_and_whole_counts():
    from mooncake_lab.traces import cached_trace

    est = S.estimate_view(S.estimate_table(), full=True)
    assert est.index.name == "instance" and list(est["best/local"]) == ["1", "4", "∞"]
    short = S.estimate_view(S.estimate_table())
    assert list(short.columns) == ["queued (s)", "blocks held", "may fetch", "cache-aware estimate (s)",
                                   "KVCache-centric estimate (s)", "KVCache-centric picks"]
    assert list(short["may fetch"]) == ["no", "yes", "yes"]            # instance 0: ratio 1, but best = local
    assert list(est["KVCache-centric picks"]) == ["", "★", ""]
    req = S.example_requests()
    assert list(req.index) == ["A", "B", "C", "D"] and req.loc["D", "block ids (0–15: the document)"] == "0–15, 78–81"
    assert req.loc["A", "prompt (tokens)"] == "30,500"
    work = S.worked_view(S.worked_example())
    assert list(work.index) == ["random", "load balancing", "cache-aware", "KVCache-centric"]
    assert work.loc["KVCache-centric", "computed tokens"] == "1,808"
    comp = S.comparison_view(S.policy_comparison())
    assert all(c.endswith(("(s)", "s")) or c in ("hit ratio", "fetched", "prefill pool busy") for c in comp.columns)
    net = S.contention_view(S.contention_comparison())
    assert net.index.names == ["NIC (Gbps)", "network", "policy"]
    assert set(net.index.get_level_values("network")) == {"free network", "shared links"}
    assert set(net.index.get_level_values("NIC (Gbps)")) == {"100", "200", "800"}
    d = S.fetch_delays_view(S.fetch_delays(S.contention_comparison()))
    assert all("." not in v for v in d["given up"])                      # counts, never "234.0"
    jam = S.jam_view(S.holder_jam(cached_trace("conversation")))
    for t in (est, req, work, comp, net, d, jam, S.preset_view(S.preset_check()), S.queueing_view(
            S.queueing_check(S.policy_runs())), S.slow_network_view(S.slow_network(10.0))):
        cells = [str(x) for x in t.to_numpy().ravel()] + [str(x) for x in t.columns]
        assert not any("…" in c or "..." in c or "e+" in c for c in cells), cells
        assert not any(c in t.columns for c in ("ttft_mean_s", "hit_ratio", "queue_s", "fetches_free"))


def test_each_policy_keeps_one_colour_and_no_other_series_wears_it():
    """Issue 25: the hit-ratio legend drew "local prefix" in random's colour. Every figure of the lecture
    colours a policy's series with its colour only; legends and series that are not policies use
    none of the four policy colours."""
    from matplotlib.colors import to_hex
    from mooncake_lab.plots import scheduling as P

    pol = {to_hex(c) for c in P.POLICY_COLORS.values()}
    assert len(pol) == 4
    tr = synthetic_trace("conversation-like", n_requests=300, seed=5)
    runs = S.policy_runs(tr, 1.0, n_prefill=3, n_decode=2)
    fig = P.policy_metrics(S.policy_comparison(tr, 1.0, n_prefill=3, n_decode=2))
    for ax in fig.axes[1:]:
        for h in ax.get_legend().legend_handles:
            assert to_hex(h.get_facecolor()) not in pol, (ax.get_title(), h.get_label())
    tokens = fig.axes[2]
    assert not {to_hex(p.get_facecolor()) for p in tokens.patches} & pol   # computed / local hit / fetched
    fig = P.ttft_by_policy({"small": S.ttft_samples(runs)}, S.PAPER_FIG8_TTFT_S)
    for h in fig.axes[0].get_legend().legend_handles:
        assert to_hex(h.get_markerfacecolor() if h.get_marker() not in (None, "None") else h.get_color()) not in pol
    assert all(to_hex(line.get_color()) == "#000000" for line in fig.axes[0].lines if line.get_linestyle() == "-"
               and len(line.get_xdata()) == 2 and line.get_xdata()[0] != line.get_xdata()[1])  # medians black
    view = P.EstimateBars()
    assert not {to_hex(b.patches[0].get_facecolor()) for b in view.bars["kvcentric"]} & pol
    grid = P.instance_queues_grid({p: S.instance_queues(r) for p, r in runs.items()})
    for ax, p in zip(grid.axes, runs):
        others = pol - {to_hex(P.POLICY_COLORS[p])}
        assert not {to_hex(line.get_color()) for line in ax.lines[:-1]} & others, p   # [-1]: the 30 s line
    reps = S.contention_replicas(n_samples=4)
    fig = P.replicas_over_time({"free": reps[False], "shared": reps[True]}, n_instances=8)
    solid = [line for line in fig.axes[0].lines if line.get_label().startswith(("free", "shared"))]
    assert to_hex(solid[0].get_color()) == to_hex(P.POLICY_COLORS["kvcentric"])      # both runs are kvcentric's
    assert not {to_hex(line.get_color()) for line in solid} & (pol - {to_hex(P.POLICY_COLORS["kvcentric"])})
    assert solid[0].get_linestyle() != solid[1].get_linestyle()


def test_q4_asks_one_decimal_and_accepts_it():
    from mooncake_lab.exercises import _REGISTRY, _load

    _load()
    q = _REGISTRY["04.hit_gain"]
    assert "one decimal" in q.question
    v = q.answer()
    assert check("04.hit_gain", round(v, 1)).correct and check("04.hit_gain", v).correct
    assert not check("04.hit_gain", round(v, 1) - 0.1).correct


def test_fig14_breakdown_hand_worked():
    """Fig. 14: the prefill part is max(compute, DRAM load) and the 0%-cached row has no load; the cut
    is 1 − prefill(95%) / prefill(0%), both from the cost model."""
    t = S.fig14_breakdown()
    c = sim.ClusterConfig(preset=S.CHECK_PRESET).resolve().cost
    from mooncake_lab.roofline import cm_prefill_time
    L = paper.FAST25_FIG14["prompt_tokens"]
    assert t.iloc[0]["prefill (with cache load)"] == pytest.approx(float(cm_prefill_time(c, L, 0)))
    cached = int(t.iloc[1]["cached_tokens"])
    assert cached % 512 == 0 and abs(cached / L - 0.95) < 512 / L
    # 95% cached: the load of the prefix (KV bytes / 128 GB/s) overlaps the compute layer by layer
    compute, load = float(cm_prefill_time(c, L - cached, cached)), cached * 327_680 / 128e9
    assert t.iloc[1]["prefill (with cache load)"] == pytest.approx(max(compute, load) + min(compute, load) / 80)
    assert t.iloc[1]["decode: load cache DRAM→HBM"] == pytest.approx(L * 327_680 / 128e9)
    cuts = S.fig14_cuts(t)
    assert 0 < cuts["ttft_cut"] < cuts["prefill_cut"] < 1


def test_forward_if_faster_never_fetches_a_slower_transfer():
    """The prose's time rule vs the literal pseudocode on the jam's set-up: it does not pile everything onto
    one instance, and its mean TTFT is no worse than cache-aware's."""
    t = S.time_rule_jam("conversation")
    assert t.loc["time rule", "busiest_share"] < 1.0
    assert t.loc["time rule", "ttft_mean_s"] <= 1.05 * t.loc["cache-aware", "ttft_mean_s"]
