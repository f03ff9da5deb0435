"""Lecture 02 (trading storage for computation): experiments, plots, dashboards, exercises."""
from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
from matplotlib.figure import Figure

from mooncake_lab import storage
from mooncake_lab.dashboards import storage as dash
from mooncake_lab.exercises import list_exercises
from mooncake_lab.experiments import l02_storage as l02
from mooncake_lab.hardware import A800_NODE
from mooncake_lab.models import LLAMA2_70B, OPT_13B
from mooncake_lab.plots import storage as plots
from mooncake_lab.roofline import prefill_time


# --- formulas -----------------------------------------------------------------------------------
def test_layerwise_time_hand_checked():
    # two-stage pipeline over 80 layers: 8 s compute, 2 s transfer → 8 + 2/80 = 8.025 s; serialized 10 s
    assert storage.layerwise_time(2.0, 8.0, 80) == pytest.approx(8.025)
    assert storage.layerwise_time(8.0, 2.0, 80) == pytest.approx(8.025)    # symmetric: the longer stage + 1/L of the other
    assert storage.layerwise_time(2.0, 8.0, 80, overlap=False) == pytest.approx(10.0)
    # one layer: nothing to pipeline, overlap = serialized
    assert storage.layerwise_time(2.0, 8.0, 1) == pytest.approx(10.0)


def test_kv_footprint_hand_checked():
    df = l02.kv_footprint().set_index("model")
    assert df.loc["OPT-13B", "kv_bytes_per_token"] == 2 * 40 * 40 * 128 * 2        # 819,200 B
    assert df.loc["LLaMA2-70B", "kv_bytes_per_token"] == 2 * 80 * 8 * 128 * 2      # 327,680 B = 320 KiB
    assert df.loc["LLaMA2-70B", "kv_kib_per_token"] == 320
    assert df.loc["DeepSeek-V3", "kv_bytes_per_token"] == 61 * (512 + 64) * 2      # 70,272 B (MLA latent + RoPE key)
    # ≈ 140 GFLOP per recomputed LLaMA2-70B token (137.4 matmul + LM head, + attention at a 4k prefix)
    assert 137 < df.loc["LLaMA2-70B", "gflop_per_token"] < 145
    # MHA moves > 10× more bytes per FLOP saved than GQA, MLA fewer still
    assert df.loc["OPT-13B", "kv_bytes_per_gflop"] > 10 * df.loc["LLaMA2-70B", "kv_bytes_per_gflop"]
    assert df.loc["DeepSeek-V3", "kv_bytes_per_gflop"] < df.loc["LLaMA2-70B", "kv_bytes_per_gflop"]


def test_tier_bandwidths_cited_defaults():
    tb = l02.tier_bandwidths(A800_NODE).set_index("tier")["bandwidth_gbs"]
    # FAST'25 Table 1: 128 GB/s H2D; 4 × 200 Gbps = 100 GB/s RDMA; 8 × 7 GB/s NVMe = 56 GB/s; one drive 7 GB/s
    assert tb.to_dict() == pytest.approx({"dram": 128.0, "remote_dram": 100.0, "ssd": 56.0, "one_nvme": 7.0})


def test_ssd_claims_window():
    window, table = l02.ssd_claims(A800_NODE)
    # lo = 10 × 4096 × 327,680 B / recompute time; hi = 4096 × 819,200 B / OPT-13B recompute time
    assert window["lo_gbs"] == pytest.approx(10 * 4096 * 327_680 / storage.recompute_time(LLAMA2_70B, A800_NODE) / 1e9)
    assert window["hi_gbs"] == pytest.approx(4096 * 819_200 / storage.recompute_time(OPT_13B, A800_NODE) / 1e9)
    assert 30 < window["lo_gbs"] < window["hi_gbs"] < 50           # the 34–45 GB/s window
    one, default = table.iloc[0], table.iloc[1]
    assert one["bandwidth_gbs"] == 7 and default["bandwidth_gbs"] == 56
    assert not one["claim_a"] and one["claim_b"]                   # one drive: LLaMA ≈ 2×, OPT ≈ 0.16×
    assert default["claim_a"] and not default["claim_b"]           # 56 GB/s: LLaMA ≈ 16×, OPT ≈ 1.25×
    # inside the window both hold; outside at least one fails
    _, inside = l02.ssd_claims(A800_NODE, ssd_gbs=[0.5 * (window["lo_gbs"] + window["hi_gbs"])])
    assert inside["claim_a"].iloc[0] and inside["claim_b"].iloc[0]


def test_request_breakdown_hand_checked():
    df = l02.request_breakdown("llama2-70b", A800_NODE, 8700, 0.5).set_index("scenario")
    full = prefill_time(LLAMA2_70B, A800_NODE, 8700, 0, preset=storage.seed_preset())
    assert df.loc["recompute all", "total_s"] == pytest.approx(full)
    ser, lw = df.loc["reload from DRAM, serialized"], df.loc["reload from DRAM, layer-wise"]
    assert ser["n_cached"] == 4350
    assert ser["load_s"] == pytest.approx(4350 * 327_680 / 128e9)   # 11.1 ms
    compute = prefill_time(LLAMA2_70B, A800_NODE, 4350, 4350, preset=storage.seed_preset())
    assert ser["compute_s"] == pytest.approx(compute)
    assert ser["total_s"] == pytest.approx(ser["load_s"] + compute)
    assert lw["total_s"] == pytest.approx(compute + ser["load_s"] / 80)  # compute-bound: 1/80 of the load exposed
    assert lw["speedup"] == pytest.approx(full / lw["total_s"])
    assert (df["exposed_load_s"] >= 0).all()
    # a custom bandwidth replaces the tiers; OPT-13B at 7 GB/s loses to recomputing even layer-wise
    opt = l02.request_breakdown("opt-13b", A800_NODE, 8700, 0.5, bandwidth_gbs=7)
    assert len(opt) == 3 and (opt["speedup"].iloc[1:] < 1).all()
    assert l02.request_breakdown(hit_fraction=0.0)["load_s"].max() == 0


def test_layerwise_store_fig7_shape():
    df = l02.layerwise_store()
    first = df.iloc[0]
    assert first["n_tokens"] == 8192
    assert first["store_s"] == pytest.approx(8192 * 327_680 / 128e9)    # 20.97 ms
    assert first["exposed_serialized_s"] == pytest.approx(first["store_s"])
    assert first["exposed_layerwise_s"] == pytest.approx(first["store_s"] / 80)
    # Fig. 7: serialized store latency grows with length, layer-wise hides almost all of it
    assert np.all(np.diff(df["exposed_serialized_s"]) > 0)
    assert (df["hidden_fraction"] > 0.95).all()
    assert df["n_tokens"].min() == 8192 and df["n_tokens"].max() == 131072


def test_eq2_curves():
    df = l02.eq2_curves(("a800x8", "h800x8"), p_min=1024, p_max=65536, n_points=13)
    for node, sub in df.groupby("node"):
        assert np.all(np.diff(sub["min_gbs"]) < 0), node                # longer prefix → less bandwidth
    row = df[(df.node == "a800x8") & (df.prefix_len == 8192)]
    assert row["min_gbs"].iloc[0] == pytest.approx(storage.eq2_min_bandwidth("llama3-70b", "a800x8", 8192) / 1e9)
    for node, (p, paper) in l02.PAPER_EQ2.items():
        assert storage.eq2_min_bandwidth("llama3-70b", node, p) / 1e9 == pytest.approx(paper, abs=0.5)


@pytest.mark.parametrize("call,match", [
    (lambda: l02.request_breakdown(hit_fraction=1.0), "hit_fraction"),
    (lambda: l02.request_breakdown(hit_fraction=-0.1), "hit_fraction"),
    (lambda: l02.request_breakdown(n_tokens=1), "n_tokens"),
    (lambda: l02.request_breakdown(bandwidth_gbs=0), "bandwidth_gbs"),
    (lambda: l02.layerwise_store(lengths=(0,)), "n_tokens"),
    (lambda: l02.kv_footprint(prefix_len=0), "prefix_len"),
    (lambda: l02.eq2_curves(p_min=0), "p_min"),
    (lambda: l02.request_breakdown(model="gpt-5"), "model"),
])
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=rf"(^|\.){re.escape(match)}(\[[^\]]*\])?(: | must | values )"):
        # (the field named as the wrong one, not its letters anywhere)
        call()


# --- figures ------------------------------------------------------------------------------------
def _assert_labelled(fig: Figure) -> None:
    assert isinstance(fig, Figure)
    titles = [ax.get_title() for ax in fig.axes] + ([fig._suptitle.get_text()] if fig._suptitle else [])
    assert any(t.strip() for t in titles)
    for ax in fig.axes:
        assert ax.get_xlabel().strip(), ax
        # a y label, or categorical y tick labels (bar charts of models / scenarios), on it or on an
        # axes it shares y with
        assert any(a.get_ylabel().strip() or any(t.get_text().strip() for t in a.get_yticklabels())
                   for a in ax.get_shared_y_axes().get_siblings(ax)), ax


def test_headline_figures_registered_and_labelled():
    from mooncake_lab import reproduce
    figs = reproduce.collect_figures("storage")
    assert set(figs) == {"l02_kv_footprint", "l02_tier_speedup", "l02_ssd_crossover", "l02_half_cached_request",
                         "l02_eq2_breakeven", "l02_layerwise_store"}
    for fig in figs.values():
        _assert_labelled(fig)


def test_ssd_crossover_plot_shades_the_window():
    window, _ = l02.ssd_claims()
    fig = plots.ssd_crossover(l02.speedup_vs_bandwidth(bandwidths_gbs=l02.SSD_SWEEP_GBS), window)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log"
    ys = sorted({round(float(l.get_ydata()[0]), 6) for l in ax.get_lines() if len(set(l.get_ydata())) == 1
                 and len(l.get_ydata()) == 2 and l.get_xdata()[0] == 0})
    assert 1.0 in ys and 10.0 in ys                                     # horizontal lines at 1× and 10×
    spans = [p for p in ax.patches if p.get_label().startswith("both SSD statements (A and B) hold")]
    assert len(spans) == 1
    x0, x1 = spans[0].get_x(), spans[0].get_x() + spans[0].get_width()
    assert (x0, x1) == pytest.approx((window["lo_gbs"], window["hi_gbs"]))


# --- dashboards ---------------------------------------------------------------------------------
def _content(fig: Figure):
    """What a figure shows: line data, patch vertices (data coordinates), texts and titles, rounded."""
    out = []
    for ax in fig.axes:
        for line in ax.get_lines():
            out.append(tuple(np.round(np.asarray(line.get_xydata(), float).ravel(), 9)))
        for p in ax.patches:
            out.append(tuple(np.round(p.get_patch_transform().transform(p.get_path().vertices).ravel(), 9)))
        out.append(tuple(t.get_text() for t in ax.texts))
        out.append(ax.get_title())
    return out


@pytest.mark.parametrize("name,value", [("bandwidth", 7.0), ("model", "opt-13b"), ("hit_fraction", 0.8),
                                        ("prompt_tokens", 65536.0), ("mfu", 0.9)])
def test_reload_dashboard_controls_change_the_figure(name, value):
    d = dash.ReloadDashboard()
    before, readout = _content(d.figure), d.readout.value
    d.controls[name].value = value
    assert d.n_draws == 2
    assert _content(d.figure) != before
    _assert_labelled(d.figure)
    if name in ("model", "hit_fraction", "mfu"):    # the readout's break-even depends on these
        assert d.readout.value != readout


def test_reload_dashboard_bar_labels_follow_the_bandwidth():
    # Issue 13 §10: after a bandwidth move the bars still said "reload from 56 GB/s". The row labels no
    # longer name a bandwidth (the title does, redrawn every move), so they cannot go stale.
    d = dash.ReloadDashboard(bandwidth_gbs=56.0)
    d.controls["bandwidth"].value = 7.0
    labels = [t.get_text() for t in d.view.ax.get_yticklabels()]
    assert labels[1:] == ["reload from the tier, serialized", "reload from the tier, layer-wise"]
    assert not any("56" in t for t in labels) and "7 GB/s" in d.view.ax.get_title()
    assert d.background_is_current()          # the image shown is a full redraw's, not a stale background


@pytest.mark.parametrize("name,value", [("prefix_len", 65536.0), ("node", "h20x8"), ("model", "opt-13b")])
def test_eq2_dashboard_controls_change_the_figure(name, value):
    d = dash.Eq2Dashboard()
    before, readout = _content(d.figure), d.readout.value
    d.controls[name].value = value
    assert _content(d.figure) != before
    assert d.readout.value != readout
    _assert_labelled(d.figure)


def test_eq2_dashboard_readout_matches_formula():
    d = dash.Eq2Dashboard(prefix_len=8192, node="h800x8")
    assert f"{storage.eq2_min_bandwidth('llama3-70b', 'h800x8', 8192) / 1e9:,.2f} GB/s" in d.readout.value


def test_slider_bounds_are_sane_and_extremes_draw():
    d = dash.ReloadDashboard()
    c = d.controls
    assert 10 ** c["bandwidth"].min >= 1 and 10 ** c["bandwidth"].max <= 2000 * (1 + 1e-9)
    assert 0 <= c["hit_fraction"].min and c["hit_fraction"].max < 1
    assert 2 ** c["prompt_tokens"].min >= 1024 and 2 ** c["prompt_tokens"].max <= 131072
    assert 0 < c["mfu"].min and c["mfu"].max <= 1
    assert set(c) == {"bandwidth", "model", "hit_fraction", "prompt_tokens", "mfu"}
    for name in ("bandwidth", "hit_fraction", "prompt_tokens", "mfu"):    # every slider (model is a dropdown)
        assert c[name].continuous_update is False, name
    # every corner of the slider box draws without error
    for bw, hit, n in itertools.product(("min", "max"), repeat=3):
        c["bandwidth"].value = 10 ** getattr(c["bandwidth"], bw)
        c["hit_fraction"].value = getattr(c["hit_fraction"], hit)
        c["prompt_tokens"].value = 2 ** getattr(c["prompt_tokens"], n)
        assert np.isfinite(d.figure.axes[0].get_xlim()).all()
    e = dash.Eq2Dashboard()
    p = e.controls["prefix_len"]
    assert 2 ** p.min >= 1 and 2 ** p.max <= 131072 and p.continuous_update is False
    for v in (2 ** p.min, 2 ** p.max):
        p.value = v
        assert "GB/s" in e.readout.value


# --- exercises and glossary ---------------------------------------------------------------------
def test_exercise_answers_hand_checked():
    exs = {e.id: e.answer() for e in list_exercises("02")}
    assert exs["02.kv_ratio"] == pytest.approx(2.5)                          # (40·40)/(80·8)
    assert exs["02.dram_tokens"] == pytest.approx(1e12 / 327_680)             # ≈ 3.05M tokens
    assert exs["02.eq2_h800"] == pytest.approx(8 * 989e12 * 4096 / (26 * 8192 ** 2) / 1e9)   # 18.57 GB/s
    assert exs["02.one_drive"] is False                                       # ≈ 2× at 7 GB/s


def test_dram_tokens_is_strict_about_kib():
    # Issue 13 §9: 1e12 / 320,000 = 3.125 M (KB read as 10³ B, the slip the lecture warns about) was accepted.
    from mooncake_lab import check
    assert check("02.dram_tokens", 1e12 / 327_680)
    assert check("02.dram_tokens", 3.05e6)
    assert not check("02.dram_tokens", 1e12 / 320_000)


def test_glossary_has_lecture_02_terms():
    from mooncake_lab.glossary import glossary
    terms = set(glossary("02")["term"])
    assert {"MHA (multi-head attention)", "break-even bandwidth", "recompute"} <= terms


def test_fig7_paper_bars_beside_ours():
    # Issue 13 §2: Fig. 7's bars are the time a store adds to a prefill: layer-wise ≈ 0.1 s at every
    # length, serialized 0.11 → 0.87 s; ours (128 GB/s, no per-layer cost) are 21 → 336 ms and 1/80 of that.
    from mooncake_lab import paper
    df = l02.fig7_comparison()
    assert list(df["n_tokens"]) == sorted(paper.FIG7_STORE_LATENCY_S["serialized"])
    assert df["paper_layerwise_s"].between(0.09, 0.13).all()
    assert df["paper_serialized_s"].iloc[0] == 0.11 and df["paper_serialized_s"].iloc[-1] == 0.87
    assert df["ours_serialized_s"].iloc[0] == pytest.approx(8192 * 327_680 / 128e9)
    assert df["ours_layerwise_s"].to_numpy() == pytest.approx(df["ours_serialized_s"].to_numpy() / 80)
    imp = l02.fig7_implied_store()
    slope, fixed = np.polyfit(np.array(df["n_tokens"]) * 327_680.0, df["paper_serialized_s"], 1)
    assert imp["bandwidth_gbs"] == pytest.approx(1 / slope / 1e9) and imp["fixed_s"] == pytest.approx(fixed)
    assert 40 < imp["bandwidth_gbs"] < 60 and imp["per_layer_ms"] == pytest.approx(0.104 / 80 * 1e3)


# --- the tables the lecture shows -----------------------------------------------------------------
_COUNT_COLUMNS = {"layers", "KV heads", "KV per token (B)", "KV bytes per GFLOP saved", "cached (tokens)"}


def test_reading_tables_label_their_columns_and_round_their_numbers():
    """Issue 25: counts as integers with thousands grouped, no "e+05", no raw column names, units in
    the headers, index labels that mean something."""
    node = A800_NODE
    store, fig7 = l02.layerwise_store("llama2-70b", node), l02.fig7_comparison("llama2-70b", node)
    frames = [l02.footprint_table(l02.kv_footprint()), l02.tier_table(node),
              l02.speedup_table(l02.reload_vs_recompute(l02.FOOTPRINT_MODELS, node)), l02.crossover_view(node),
              l02.ssd_table(node), l02.request_table(l02.request_breakdown("llama2-70b", node)),
              l02.fig7_table(store, fig7), l02.overlap_table(l02.layerwise_overlap(preset="ideal")),
              l02.eq2_view(l02.eq2_table(nodes=("a800x8", "h800x8"), prefix_lens=(2048, 131072))),
              l02.eq2_vs_ours()]
    for df in frames:
        cells = [str(v) for v in df.to_numpy().ravel()] + [str(i) for i in df.index]
        assert not any(re.search(r"\d[eE][+-]?\d", c) for c in cells), cells
        counts = [str(i) for i in df.index] + [str(v) for col in df.columns if str(col) in _COUNT_COLUMNS for v in df[col]]
        assert not any(re.fullmatch(r"\d[\d,]*\.0+", c) for c in counts), counts       # no "819,200.0"
        names = [str(c) for c in df.columns.get_level_values(-1)]
        assert not any("_" in n for n in names), names
    fp = frames[0]
    assert fp.loc["OPT-13B", "KV per token (B)"] == "819,200" and fp.loc["DeepSeek-V3", "KV heads"] == "— (latent)"
    assert frames[1]["bandwidth into HBM (GB/s)"].tolist() == ["128", "100", "56", "7"]
    sp = l02.reload_vs_recompute(["llama2-70b"], node, ["dram"])["speedup"].iloc[0]
    assert frames[2].loc["LLaMA2-70B", "from DRAM (×)"] == f"{sp:.2f}"        # ≈ 37×; the column's decimals
    ssd = frames[4]
    assert ssd.iloc[0].tolist()[2:] == ["fails", "holds"] and ssd.iloc[1].tolist()[2:] == ["holds", "fails"]
    assert frames[6].index.tolist() == ["8,192", "16,384", "32,768", "65,536", "131,072"]
    assert frames[8].index.tolist() == ["2,048", "131,072"] and list(frames[8].columns) == ["8 × A800", "8 × H800"]
    assert "52 GB/s" in l02.fig7_implied_note() and "1.3 ms per layer" in l02.fig7_implied_note()


def test_one_drive_is_a_true_false_question():
    """02 Q5 is true/false: False and "no" are right, True wrong, and 0 (or 1) is refused as a number,
    not read as False (issue 25)."""
    from mooncake_lab import check
    assert check("02.one_drive", False) and check("02.one_drive", "no")
    assert not check("02.one_drive", True)
    for n in (0, 1, 0.0):
        v = check("02.one_drive", n)
        assert not v and "true/false" in v.message


def test_the_lecture_names_no_seed_lecture():
    """Issue 25: lecture 02 argued with a "seed lecture" a student never meets; the course says it in
    its own words (notebook, solutions, exercises, plots, dashboards)."""
    import nbformat
    from pathlib import Path
    root = Path(__file__).parent.parent
    texts = [c.source for nb in (root / "notebooks").glob("**/02_*.ipynb")
             for c in nbformat.read(str(nb), as_version=4).cells]
    texts += [e.question + e.hint + e.why for e in list_exercises("02")]
    window, _ = l02.ssd_claims()
    fig = plots.ssd_crossover(l02.speedup_vs_bandwidth(bandwidths_gbs=l02.SSD_SWEEP_GBS), window)
    texts += [t.get_text() for ax in fig.axes for t in ax.texts + [ax.title]]
    texts += [h.get_label() for ax in fig.axes for h in ax.get_legend_handles_labels()[0]]
    assert not [t for t in texts if "seed" in t.lower()]
