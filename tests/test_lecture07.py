"""Lecture 07: overload experiments (ordering helpers, sweep, KV capacity), plots, dashboards, exercises.

The admission semantics themselves are tested in test_sim_admission.py (the simulator's owner).
Runs use the toolagent-like preset (deterministic, no file needed) and the conversation trace
(real when ../shared/data has it, else its stand-in).
"""
from __future__ import annotations

import re

import numpy as np
import pytest
from matplotlib.figure import Figure

from mooncake_lab import sim
from mooncake_lab.experiments import l07_overload as ov
from mooncake_lab.plots import overload as plots
from mooncake_lab.traces import trace_from_requests

pytestmark = pytest.mark.usefixtures("offline_traces")  # never download (tests/conftest.py)


def _labelled(fig: Figure):
    assert isinstance(fig, Figure)
    assert any(ax.get_title() for ax in fig.axes)
    assert all(ax.get_ylabel() for ax in fig.axes), "every axis (twins included) says what it shows"
    assert any(ax.get_xlabel() for ax in fig.axes)


# ------------------------------------------------------------------------------- helpers
def test_rejection_ordering_and_paper_ordering():
    # Table 3: 4,183 > 3,771 > 3,589 → the paper's ordering
    assert ov.rejection_ordering(ov.PAPER_TABLE3_REJECTED) == "baseline > early > predicted"
    assert ov.paper_ordering_holds(ov.PAPER_TABLE3_REJECTED)
    assert ov.rejection_ordering({"baseline": 5, "early": 9, "predicted": 9}) == "early = predicted > baseline"
    assert not ov.paper_ordering_holds({"baseline": 5, "early": 9, "predicted": 7})
    assert not ov.paper_ordering_holds({"baseline": 9, "early": 7, "predicted": 7})  # strict
    with pytest.raises(ValueError, match="^rejected: got no policies; allowed: "):
        ov.rejection_ordering({})


def test_crossover_speed_by_hand():
    import pandas as pd
    # baseline − early: +3 at 1×, +1 at 1.5×, −2 at 2× → first speed with baseline < early is 2.
    rows = [(1.0, 10, 7), (1.5, 12, 11), (2.0, 14, 16)]
    sw = pd.DataFrame([{"speed": s, "policy": p, "rejected": v} for s, b, e in rows
                       for p, v in (("baseline", b), ("early", e))])
    assert ov.crossover_speed(sw) == 2.0
    assert np.isnan(ov.crossover_speed(sw[sw.speed < 2.0]))


def test_requests_per_node_by_hand():
    # two requests needing (1,000 + 10) and (3,000 + 30) tokens: mean 2,020 → 40,400 tokens hold 20 of them
    tr = trace_from_requests([0.0, 1.0], [1000, 3000], [10, 30], [2, 6], [0, 1, 10, 11, 12, 13, 14, 15])
    assert ov.requests_per_node(40_400.0, tr) == pytest.approx(20.0)
    with pytest.raises(ValueError, match="^capacity_tokens must be a positive number of tokens, got 0.0"):
        ov.requests_per_node(0.0, tr)


def test_real_kv_capacity_is_the_cost_models():
    # LLaMA2-70B on 8×A800: (640 GB × 0.9 − weights) / 327,680 B per token ≈ 1.34 M tokens (config docstring)
    cap = ov.real_kv_capacity_tokens()
    assert cap == sim.ClusterConfig(preset="modern").resolve().decode_kv_capacity
    assert 1.2e6 < cap < 1.5e6


def test_run_is_memoised_and_validates_speed():
    a = ov.run("conversation", 2.0, admission="early")
    assert ov.run("conversation", 2.0, admission="early") is a
    # the lecture's cap ("cap decode KV at 40,000 tokens per node", l07_overload's docstring and the
    # notebook), far under the ≈ 1.34 M tokens an 8×A800 node holds: the decode side can bind
    assert a.config.resolve().decode_kv_capacity == 40_000.0 < ov.real_kv_capacity_tokens() / 30
    with pytest.raises(ValueError, match=r"^speed must be a replay factor > 0 \(×\), got 0.0"):
        ov.run("conversation", 0.0)


def _same_run(a, b) -> bool:
    return all(np.array_equal(a.arrays[k], b.arrays[k], equal_nan=True) for k in a.arrays)


def test_admission_parameters_a_policy_does_not_read_share_one_run():
    tr = ov._trace("conversation").head(1500)
    for pol, ignored in [("none", dict(admission_threshold=0.6, decode_time_s=30.0, prediction_horizon=0.3)),
                         ("early", dict(decode_time_s=30.0, prediction_horizon=0.3))]:
        base = dict(admission=pol, decode_kv_capacity_tokens=20_000.0)
        # the simulator itself ignores them (the rule the memo relies on) …
        plain = sim.simulate(tr.replay(2.0), sim.ClusterConfig(**ov.DEFAULT_CONFIG | base))
        moved = sim.simulate(tr.replay(2.0), sim.ClusterConfig(**ov.DEFAULT_CONFIG | base | ignored))
        assert _same_run(plain, moved), pol
        # … so the experiment runs them once
        assert ov.run(tr, 2.0, **base, **ignored) is ov.run(tr, 2.0, **base), pol
    pred = dict(admission="predicted", decode_kv_capacity_tokens=20_000.0)
    assert ov.run(tr, 2.0, **pred, decode_time_s=30.0) is not ov.run(tr, 2.0, **pred)
    assert ov.run(tr, 2.0, **pred, decode_time_s=30.0).config.decode_time_s == 30.0


def test_policy_runs_in_parallel_threads_equal_runs_one_by_one():
    tr = ov._trace("conversation").head(1500)
    runs = ov.policy_runs(tr, 1.75, decode_kv_capacity_tokens=30_000.0)  # none memoised: three threads
    for p, res in runs.items():
        cfg = ov.DEFAULT_CONFIG | dict(admission=p, decode_kv_capacity_tokens=30_000.0)
        if p == "predicted":  # t_d derived from this trace and config (not the simulator's 10 s)
            cfg["decode_time_s"] = ov.decode_time_estimate(tr, decode_kv_capacity_tokens=30_000.0)
        alone = sim.simulate(tr.replay(1.75), sim.ClusterConfig(**cfg))
        assert _same_run(res, alone), p
    assert ov.policy_runs(tr, 1.75, decode_kv_capacity_tokens=30_000.0)["early"] is runs["early"]  # memoised


# ------------------------------------------------------------------------- experiment facts
def test_comparison_accounting_and_lecture_claims():
    import pandas as pd

    df = ov.overload_comparison()
    n = len(ov._trace("toolagent-like"))
    for p in ov.POLICIES:
        r = df.loc[p]
        assert r.completed + r.rejected == n  # every request ends exactly once
        assert r.rejected == r.rejected_at_arrival + r.rejected_after_prefill + r.rejected_too_large
    # only the baseline rejects after prefill, and only it wastes prefill
    assert df.loc["baseline", "rejected_after_prefill"] > 0 and df.loc["baseline", "wasted_prefill_s"] > 0
    assert (df.loc[["early", "predicted"], "wasted_prefill_s"] == 0).all()
    counts = ov.policy_counts()  # the dashboard's cheap table: the same numbers
    pd.testing.assert_frame_equal(counts, df[counts.columns])
    for p, res in ov.policy_runs().items():
        assert counts.loc[p, "rejected"] == res.summary()["rejected"]
    # the lecture's claims at 2×: predicted beats early; the baseline rejects bigger requests; anti-phase
    assert df.loc["predicted", "completed"] > df.loc["early", "completed"]
    assert df.loc["baseline", "rejected_kv_mean"] > 1.5 * df.loc["early", "rejected_kv_mean"]
    assert df.loc["early", "load_corr"] < 0


def test_speed_sweep_shows_both_regimes():
    sw = ov.speed_sweep(progress=False)
    assert len(sw) == len(ov.SWEEP_SPEEDS) * len(ov.POLICIES)
    piv = sw.pivot(index="speed", columns="policy", values="rejected")
    assert (np.diff(piv["baseline"].to_numpy()) > 0).all()  # deeper overload, more rejections
    holds = [ov.paper_ordering_holds(r) for _, r in piv.iterrows()]
    assert any(holds) and not all(holds)
    assert 1.0 < ov.crossover_speed(sw) <= 2.0


def test_regime_table_real_kv_policies_coincide():
    t = ov.regime_table(regimes={k: v for k, v in ov.REGIMES.items() if "real node" in k}, progress=False)
    row = t.iloc[0]
    assert row.rejected_baseline == row.rejected_early == row.rejected_predicted
    assert row.ordering == "baseline = early = predicted"


# ------------------------------------------------------------------------------------ plots
def test_plots_have_titles_and_labels():
    df = ov.overload_comparison("conversation")
    _labelled(plots.policy_results(df, ov.PAPER_TABLE3_REJECTED))
    fig = plots.load_over_time({p: ov.load_timeseries("conversation", policy=p) for p in ("early", "predicted")})
    _labelled(fig)
    assert "r = " in fig.axes[0].get_title()
    sw = ov.speed_sweep("conversation", speeds=(1.0, 2.0), progress=False)
    _labelled(plots.rejection_sweep(sw, 2.0))
    with pytest.raises(ValueError, match="^series: got no policies; allowed: "):
        plots.load_over_time({})


def test_policy_results_without_any_rejection_has_a_nonsingular_axis():
    import warnings

    import pandas as pd

    cols = ("completed", "rejected", "rejected_at_arrival", "rejected_after_prefill", "rejected_too_large")
    quiet = pd.DataFrame({**{c: [0] * 3 for c in cols}, "wasted_prefill_s": 0.0}, index=list(ov.POLICIES))
    quiet["completed"] = 100
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # was: "Attempting to set identical low and high ylims"
        fig = plots.policy_results(quiet)
    assert fig.axes[0].get_ylim() == (0.0, 1.15)  # ≥ 1 request of room × 1.15 for the bar labels
    assert fig.axes[1].get_ylim()[1] > fig.axes[1].get_ylim()[0]


# ------------------------------------------------------------------------------- dashboards
def _line_data(fig):
    return [np.asarray(l.get_ydata(), dtype=float).copy() for ax in fig.axes for l in ax.get_lines()]


def _changed(before, after):
    return len(before) != len(after) or any(a.shape != b.shape or not np.allclose(a, b, equal_nan=True)
                                            for a, b in zip(before, after))


def test_overload_dashboard_every_control_changes_the_figure():
    from mooncake_lab.dashboards.overload import OverloadDashboard

    d = OverloadDashboard(policy="predicted")
    for name, value in [("speed", 1.5), ("threshold", 0.8), ("t_d", 30.0), ("horizon", 0.3),
                        ("kv", 80_000.0), ("policy", "baseline"), ("trace", "toolagent-like"),
                        ("decode", "paper")]:
        before, text = _line_data(d.figure), d.readout.value
        d.controls[name].value = value
        assert _changed(before, _line_data(d.figure)), name
        assert d.readout.value != text, name
    assert d.controls["speed"].continuous_update is False
    assert d.png[:4] == b"\x89PNG"


def test_overload_dashboard_slider_corners_run():
    from mooncake_lab.dashboards.overload import BOUNDS, OverloadDashboard

    d = OverloadDashboard()
    for name, key in [("speed", "speed"), ("threshold", "threshold"), ("t_d", "t_d"), ("horizon", "horizon")]:
        lo, hi = BOUNDS[key]
        assert (d.controls[name].min, d.controls[name].max) == (lo, hi)
        for v in (lo, hi):
            d.controls[name].value = v
    assert BOUNDS["kv_log10"][1] > np.log10(ov.real_kv_capacity_tokens())  # the real node is reachable
    d.controls["kv"].value = 10 ** BOUNDS["kv_log10"][0]
    assert "completed" in d.readout.value


def test_policy_comparison_dashboard():
    from mooncake_lab.dashboards.overload import PolicyComparisonDashboard

    d = PolicyComparisonDashboard()
    heights = lambda: [p.get_height() for ax in d.figure.axes for p in ax.patches]  # noqa: E731
    for name, value in [("speed", 1.25), ("kv", 100_000.0), ("trace", "toolagent-like")]:
        before = heights()
        d.controls[name].value = value
        assert heights() != before, name
    assert "ordering" in d.readout.value


# -------------------------------------------------------------------------------- exercises
def test_glossary_has_lecture_07_terms():
    from mooncake_lab.glossary import glossary

    terms = set(glossary("07")["term"])
    assert {"early rejection", "load prediction", "anti-phase oscillation", "overload"} <= terms


# ------------------------------------------------------------------------------ t_d (issue 13)
def test_decode_time_estimate_is_the_simulated_mean_decode_time():
    # was: t_d = 10 s everywhere ("182 tokens × ~55 ms"); under modern a step takes ≈ 15 ms
    for name, lo, hi in [("toolagent-like", 2.5, 3.0), ("conversation", 3.5, 6.0)]:
        est = ov.decode_time_estimate(name)
        assert lo < est < hi, (name, est)
        measured = ov.mean_decode_time(ov.run(name, 2.0, admission="early"))
        assert est == pytest.approx(measured, rel=0.1), name
    # the predicted policy runs with it unless told otherwise
    assert ov.run("toolagent-like", 2.0, admission="predicted").config.decode_time_s == pytest.approx(
        ov.decode_time_estimate("toolagent-like"))
    assert ov.decode_time_estimate("toolagent-like", decode_kv_capacity_tokens=None) > ov.decode_time_estimate()


def test_td_sweep_prediction_rejects_fewer_but_serves_fewer_at_the_derived_td():
    t = ov.td_sweep("toolagent-like", t_ds=(1.0, 10.0))
    assert t.derived.sum() == 1 and len(t) == 3
    d = t[t.derived].iloc[0]
    assert d.rejected_predicted < d.rejected_early      # Table 3's direction holds in rejections …
    assert d.goodput_predicted < d.goodput_early        # … not in requests served within the SLOs
    assert t.loc[10.0, "goodput_predicted"] > t.loc[10.0, "goodput_early"]  # a pessimistic t_d wins
    assert t.loc[1.0, "rejected_predicted"] < d.rejected_predicted        # too short: admits nearly all
    text = ov.describe_td_sweep(t, "toolagent-like")
    assert f"{int(d.rejected_predicted):,}" in text and "from t_d = 10 s" in text


def test_crossing_speed_interpolates_between_grid_points():
    import pandas as pd
    rows = [(1.0, 10, 7), (1.5, 12, 11), (2.0, 14, 17)]   # baseline − early: +3, +1, −3 → 1.5 + 0.5 × 1/4
    sw = pd.DataFrame([{"speed": s, "policy": p, "rejected": v} for s, b, e in rows
                       for p, v in (("baseline", b), ("early", e))])
    assert ov.crossing_speed(sw) == pytest.approx(1.625)
    assert ov.crossover_speed(sw) == 2.0
    assert np.isnan(ov.crossing_speed(sw[sw.speed < 2.0]))


# ------------------------------------------------------------- decode semantics (issue 14 part 6)
def test_semantics_config_paper_keys_win_and_a_new_key_reaches_every_run(monkeypatch):
    assert ov.semantics_config("paper", decode_kv_capacity_tokens=40_000.0)["decode_kv_capacity_tokens"] is None
    assert ov.semantics_config("lecture", decode_kv_capacity_tokens=80_000.0)["decode_kv_capacity_tokens"] == 80_000.0
    with pytest.raises(ValueError, match="semantics.*'lecture', 'paper'"):
        ov.semantics_config("papers")
    # another part of issue 14 will add a key to PAPER_DECODE: that alone must reach the runs
    monkeypatch.setitem(ov.PAPER_DECODE, "tbt_slo_s", 0.2)
    assert ov.semantics_config("paper")["tbt_slo_s"] == 0.2
    (job,) = ov.policy_jobs("toolagent-like", 2.0, ("early",), **ov.semantics_config("paper"))
    assert job[2].tbt_slo_s == 0.2 and job[2].decode_binding == "arrival"


def test_paper_decode_semantics_make_every_policy_reject_the_same():
    """§8: with the paper's decode semantics (real KV, binding at arrival, TBT load) the decode pool does not
    bind at 2× on either trace (none rejected at all); with the lecture's the three policies differ."""
    table = ov.semantics_table()
    for name in table.index.get_level_values(0).unique():
        pap, lec = table.loc[(name, "paper")], table.loc[(name, "lecture")]
        assert [pap[f"rejected_{p}"] for p in ov.POLICIES] == [0, 0, 0], (name, pap)
        assert pap["ordering"] == "baseline = early = predicted" and not pap["paper_ordering"]
        assert pap["decode_load_mean"] < 0.5 < lec["decode_load_mean"], name
        assert pap["prefill_load_mean"] < 0.5, name     # nor the prefill pool: nothing is overloaded (issue 25)
        assert lec["after_prefill_baseline"] > 0 and len({lec[f"rejected_{p}"] for p in ov.POLICIES}) == 3, name
    text = ov.describe_semantics(table)
    assert "no policy rejects a single request" in text and "Nothing is overloaded" in text
    assert "on preset `modern`" in text            # the preset is named: §3's 2,195 rejections are on `calibrated`
    assert "prefill-bound" not in text


def test_describe_semantics_names_what_is_true_by_hand():
    """Issue 25: rejections without a decode-side one are 'the decode pool never binds', not 'nothing is
    overloaded'; none at all with low loads is 'nothing is overloaded'."""
    import pandas as pd

    def row(trace, sem, rej, pre=0.1, dec=0.1):
        return {"trace": trace, "semantics": sem, **{f"rejected_{p}": rej for p in ov.POLICIES},
                **{f"after_prefill_{p}": 0 for p in ov.POLICIES}, "prefill_load_mean": pre, "decode_load_mean": dec,
                "ordering": "baseline = early = predicted", "paper_ordering": False}
    idle = pd.DataFrame([row("a", "lecture", 5), row("a", "paper", 0)]).set_index(["trace", "semantics"])
    assert "Nothing is overloaded" in ov.describe_semantics(idle)
    busy = pd.DataFrame([row("a", "lecture", 5), row("a", "paper", 7, pre=1.2)]).set_index(["trace", "semantics"])
    text = ov.describe_semantics(busy)
    assert "never binds" in text and "Nothing is overloaded" not in text


@pytest.mark.parametrize("trace", ov.TRACES)
def test_isolation_table_the_memory_load_decides_the_ordering(trace):
    """§8's one-at-a-time control, as the lecture's prose states it (released trace or stand-in): with
    40k-token nodes but the paper's TBT load the decode checks (almost) never fire and the full pool preempts;
    adding the memory term brings the paper's ordering back at the mild overload, output lengths unknown."""
    t = ov.isolation_table(trace)
    assert list(dict.fromkeys(t.index.get_level_values(0))) == list(ov.ISOLATION)
    n = t.attrs["requests"]
    for v in ov.ISOLATION_SPEEDS:
        tbt40 = t.loc[("paper's + 40k-token decode nodes", v)]
        assert not tbt40["paper_ordering"] and tbt40["after_prefill_baseline"] < 0.01 * n
        assert max(tbt40[f"rejected_{p}"] for p in ov.POLICIES) - min(tbt40[f"rejected_{p}"] for p in ov.POLICIES) < 0.01 * n
        assert tbt40["preemptions_early"] > 0 and t.loc[("lecture's", v), "preemptions_early"] == 0
    mild = min(ov.ISOLATION_SPEEDS)
    assert t.loc[("paper's + 40k-token nodes + memory load", mild), "paper_ordering"]
    assert t.loc[("lecture's", mild), "paper_ordering"]
    assert ov.ISOLATION["paper's + 40k-token nodes + memory load"]["output_lengths"] == "unknown"
    text = ov.describe_isolation(t)
    assert "Table 3's ordering appears in" in text and f'"paper\'s + 40k-token nodes + memory load" at {mild:g}×' in text
    assert f"of {len(t)} runs" in text
    if all(t.loc[("paper's + 40k-token decode nodes", v), "after_prefill_early"] == 0
           and len({t.loc[("paper's + 40k-token decode nodes", v), f"rejected_{p}"] for p in ov.POLICIES}) == 1
           for v in ov.ISOLATION_SPEEDS):      # toolagent-like: exactly the same rejections under the TBT load
        assert "under the TBT load alone, no decode check fires" in text


def test_split_table_decode_binds_only_when_starved():
    splits = ov.split_table("conversation")
    assert splits.attrs["requests"] == len(ov._trace("conversation"))
    assert splits.loc[("8P+8D", 2.0), "after_prefill_baseline"] == 0
    binding = splits[splits.after_prefill_baseline > 0]
    assert len(binding) and set(binding.index.get_level_values(0)) <= {"14P+2D", "15P+1D"}, splits
    first = binding.iloc[0]
    text = ov.describe_splits(splits, "conversation")
    assert f"{int(first.rejected_baseline):,} / {int(first.rejected_early):,} / {int(first.rejected_predicted):,}" in text


def test_describe_splits_when_nothing_binds_by_hand():
    import pandas as pd

    t = pd.DataFrame([{"split": "8P+8D", "speed": 2.0, "after_prefill_baseline": 0}]).set_index(["split", "speed"])
    assert "never binds" in ov.describe_splits(t, "x")


def test_dashboards_decode_semantics_control():
    from mooncake_lab.dashboards.overload import OverloadDashboard, PolicyComparisonDashboard

    d = PolicyComparisonDashboard(trace="toolagent-like")
    heights = lambda: [p.get_height() for ax in d.figure.axes for p in ax.patches]  # noqa: E731
    before = heights()
    assert "does not hold" in d.readout.value and not d.controls["kv"].disabled
    d.controls["decode"].value = "paper"
    assert heights() != before and d.controls["kv"].disabled
    assert "baseline = early = predicted" in d.readout.value and "does not bind" in d.readout.value
    assert f"{ov.real_kv_capacity_tokens():,.0f} tokens/node" in d.readout.value and "at arrival" in d.readout.value
    paper = heights()
    d.controls["kv"].value = 100_000.0          # switched off under the paper's semantics: same runs
    assert heights() == paper and "baseline = early = predicted" in d.readout.value
    d.controls["decode"].value = "lecture"
    assert not d.controls["kv"].disabled and "100,000 tokens/node" in d.readout.value
    d.controls["decode"].value = "papers"       # refused, named
    assert d.value("decode") == "lecture" and "papers" in d.notice.value
    o = OverloadDashboard(trace="toolagent-like", decode="paper")
    assert o.controls["kv"].disabled and "TBT / SLO" in o.readout.value
    with pytest.raises(ValueError, match=r"OverloadDashboard\(decode=...\): got 'x'"):
        OverloadDashboard(decode="x")


def test_reproduce_reports_table3_under_the_paper_decode_semantics():
    got = {m.name: m for m in ov._metrics()}
    pap = [got[f"overload.paper_decode.rejected.{p}"] for p in ov.POLICIES]
    assert [m.paper for m in pap] == [ov.PAPER_TABLE3_REJECTED[p] for p in ov.POLICIES]
    comp = ov.overload_comparison(**ov.semantics_config("paper"))
    assert [m.ours for m in pap] == [float(comp.loc[p, "rejected"]) for p in ov.POLICIES]
    assert "decode_binding='arrival'" in pap[0].source and "never binds" in pap[0].source


def test_split_table_where_decode_binds_goodput_collapses():
    """§8's prose: in the rows where the decode pool binds, every policy serves a small fraction within both SLOs."""
    splits = ov.split_table("conversation")
    binding = splits[splits.after_prefill_baseline > 0]
    assert len(binding)
    for p in ov.POLICIES:
        assert (binding[f"goodput_{p}"] < 0.25 * splits.attrs["requests"]).all(), (p, binding)
    assert "only at " + ", ".join(f"{k[0]} at {k[1]:g}×" for k in binding.index) in ov.describe_splits(splits, "c")


# ------------------------------------------------------------------ readability (issue 25)
def test_assumptions_table_columns_are_what_the_code_runs():
    """§3's assumptions table: the simulator default column is ClusterConfig's defaults, the lecture's column
    DEFAULT_CONFIG, the paper's column PAPER_DECODE (the same rows)."""
    d, lec = sim.ClusterConfig(), sim.ClusterConfig(**ov.DEFAULT_CONFIG)
    assert (d.preset, lec.preset) == ("calibrated", "modern")
    assert (d.decode_binding, lec.decode_binding, ov.PAPER_DECODE["decode_binding"]) == ("arrival", "ready", "arrival")
    assert (d.decode_load_metric, lec.decode_load_metric, ov.PAPER_DECODE["decode_load_metric"]) == \
        ("tbt", "tbt_or_memory", "tbt")
    assert (d.output_lengths, lec.output_lengths, ov.PAPER_DECODE["output_lengths"]) == ("unknown", "known", "unknown")
    assert (d.network_contention, lec.network_contention, ov.PAPER_DECODE["network_contention"]) == (True, False, True)
    assert d.decode_kv_capacity_tokens is None and ov.PAPER_DECODE["decode_kv_capacity_tokens"] is None


def test_tables_for_people_show_integers_labels_and_no_raw_names():
    comp = ov.overload_comparison()
    views = [ov.comparison_view(comp), ov.size_view(comp), ov.regime_view(ov.regime_table(progress=False)),
             ov.td_view(ov.td_sweep("toolagent-like")), ov.sweep_view(ov.speed_sweep(progress=False)),
             ov.semantics_view(ov.semantics_table(("toolagent-like",))),
             ov.isolation_view(ov.isolation_table("toolagent-like"))]
    for v in views:
        text = v.to_string()
        assert not any("_" in str(c) for c in v.columns), list(v.columns)       # no raw column names
        assert not re.search(r"\d,\d{3}\.0\b", text) and "e+" not in text, text     # no "8,438.0", no 1.6e+04
    assert ov.comparison_view(comp).loc["baseline", "completed"] == f"{int(comp.loc['baseline', 'completed']):,}"
    assert "(derived)" in " ".join(ov.td_view(ov.td_sweep("toolagent-like")).index)
    assert list(ov.sweep_view(ov.speed_sweep(progress=False)).index)[:2] == ["0.75×", "1×"]


def test_figure_colours_one_per_policy_and_no_quantity_in_a_policy_colour():
    from matplotlib.colors import to_hex

    fig = plots.policy_results(ov.overload_comparison(), ov.PAPER_TABLE3_REJECTED)
    policy = {to_hex(c) for c in plots.POLICY_COLORS.values()}
    where = {to_hex(b.get_facecolor()) for b in fig.axes[0].patches}
    assert where and not where & policy, where                      # where a request was rejected: not a policy
    done = [to_hex(b.get_facecolor()) for b in fig.axes[1].patches]
    assert done == [to_hex(plots.POLICY_COLORS[p]) for p in ov.POLICIES]
    lines = plots.load_over_time({"early": ov.load_timeseries(policy="early")})
    shown = {to_hex(l.get_color()) for ax in lines.axes for l in ax.get_lines()}
    assert not shown & policy, shown


@pytest.mark.parametrize("style", ["notebook", "projector"])
def test_overload_dashboard_title_inside_the_figure(style):
    """Issue 25: the dashboard's panel title was clipped on the left (the decode side in the title)."""
    from mooncake_lab import plots as base
    from mooncake_lab.dashboards.overload import OverloadDashboard

    base.style(style)
    try:
        d = OverloadDashboard(trace="toolagent-like", policy="predicted")
        fig = d.figure
        fig.canvas.draw()
        r = fig.canvas.get_renderer()
        box = fig.bbox
        for t in [ax.title for ax in fig.axes] + ([fig._suptitle] if fig._suptitle else []):  # noqa: SLF001
            if t.get_text().strip():
                b = t.get_window_extent(r)
                assert b.x0 >= box.x0 - 1 and b.x1 <= box.x1 + 1, (t.get_text(), b, box)
        assert ".0 of" not in d.readout.value and "completed <b>" in d.readout.value
    finally:
        base.style("notebook")


def test_both_pools_loaded_baseline_still_rejects_the_fewest():
    """§6's box: a loaded prefill pool does not give 'baseline > early' in our runs (the 'both pools loaded' row)."""
    name = next(k for k in ov.REGIMES if k.startswith("both pools loaded"))
    row = ov.regime_table(regimes={name: ov.REGIMES[name]}, progress=False).iloc[0]
    assert row.rejected_baseline < min(row.rejected_early, row.rejected_predicted)
    assert row.rejected_predicted > row.rejected_early       # and prediction rejects more than early there


# ------------------------------------------------------------- issue 25: sentences computed or checked
def test_quantity_colours_are_far_from_every_policy_colour():
    """Fig. 6: a quantity (where a request was rejected) must not look like a policy's colour, not just differ."""
    from matplotlib.colors import to_rgb

    far = min(np.linalg.norm(np.subtract(to_rgb(q), to_rgb(p))) * 255
              for q in (plots.QUANTITY_COLORS[k] for k in ("at_arrival", "after_prefill", "too_large"))
              for p in plots.POLICY_COLORS.values())
    assert far > 100, far


def test_sweep_sentences_are_what_the_sweep_shows():
    """§7's bullets ('the paper's ordering holds ≤ 1.25×', 'from 1.5× the baseline rejects fewer than early,
    and at 2× the fewest') and the computed note agree with the sweep, speed by speed."""
    sweep = ov.speed_sweep(progress=False)
    r = ov.sweep_regimes(sweep)
    piv = sweep.pivot(index="speed", columns="policy", values="rejected")
    s = ov.crossover_speed(sweep)
    assert r["flipped"] == [v for v in piv.index if v >= s]
    assert r["fewest"] == [ov.DEFAULT_SPEED]
    assert r["holds"] == [v for v in piv.index if v < s]
    for v in piv.index:   # the ordering at each speed, checked by hand
        b, e, p = (piv.loc[v, k] for k in ov.POLICIES)
        assert (v in r["fewest"]) == (b < e and b < p)
    text = ov.describe_sweep(sweep)
    assert text.endswith("and the fewest of all three at 2×.")


def test_describe_sweep_by_hand():
    import pandas as pd

    rows = [(1.0, 5, 3, 1), (2.0, 2, 6, 4)]
    sweep = pd.DataFrame([{"speed": v, "policy": p, "rejected": n} for v, *ns in rows
                          for p, n in zip(ov.POLICIES, ns)])
    text = ov.describe_sweep(sweep)
    assert text.startswith("The paper's ordering holds at 1×. The baseline rejects fewer than early rejection at 2×, "
                           "and the fewest of all three at 2×.")


def test_lecture_counts_the_decode_differences_it_states():
    """§3 says the decode side differs in "five more ways" besides the 40k-token nodes, §8 "in six rows":
    PAPER_DECODE holds exactly those six settings."""
    import nbformat

    text = " ".join(c.source for c in nbformat.read("notebooks/07_overload_scheduling.ipynb", 4).cells
                    if c.cell_type == "markdown")
    words = {4: "four", 5: "five", 6: "six"}
    assert f"in {words[len(ov.PAPER_DECODE) - 1]} more ways" in text
    assert f"differs in {words[len(ov.PAPER_DECODE)]} rows of the assumptions table" in text
    assert "Threshold `1.2`" not in text and "§6½" not in text and "4½" not in text


def test_comparison_dashboard_marks_the_paper_only_on_the_papers_setting():
    from mooncake_lab.dashboards.overload import PolicyComparisonDashboard

    d = PolicyComparisonDashboard()          # conversation at 2×: another workload, no marks
    assert d.controls["trace"].value == "conversation" and not len(d.view.paper.get_xdata())
    d.controls["trace"].value = "toolagent-like"
    assert len(d.view.paper.get_xdata()) == 3
    d.controls["speed"].value = 1.25
    assert not len(d.view.paper.get_xdata())


def test_summary_table_is_computed_from_the_runs():
    comp, conv = ov.overload_comparison("toolagent-like"), ov.overload_comparison("conversation")
    sweep = ov.speed_sweep(progress=False)
    sem = ov.semantics_table(("toolagent-like",))
    splits = ov.split_table("conversation", splits=((8, 8),), speeds=(2.0,))
    text = ov.summary_table(comp, conv, sweep, sem, splits, ("toolagent-like", "conversation"))
    assert f"| rejected, baseline | 4,183 | {int(comp.loc['baseline', 'rejected']):,} |" in text
    assert ov.rejection_ordering(comp["rejected"]) in text and "§6½" not in text
    assert len(text.splitlines()) == 2 + 9


def test_sweep_figure_says_why_a_point_is_missing_and_names_the_chosen_run():
    fig = plots.rejection_sweep(ov.speed_sweep(progress=False), chosen_speed=ov.DEFAULT_SPEED)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "the lecture's 2× run" in labels
    notes = [t.get_text() for t in fig.axes[1].texts]
    sw = ov.speed_sweep(progress=False)
    missing = sw[~np.isfinite(sw.rejected_kv_mean.to_numpy(dtype=float))]
    assert len(notes) == len(missing) and all("only too-large" in n for n in notes)
