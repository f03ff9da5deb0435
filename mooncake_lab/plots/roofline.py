"""Figures of lecture 01: the roofline, FLOPs per token, prefill vs length, decode vs batch, and
ideal vs calibrated vs measured.

Each function takes tidy DataFrames from :mod:`mooncake_lab.experiments.l01_roofline` and returns a
:class:`matplotlib.figure.Figure` with a title and axis labels with units. FLOP/s are shown in
TFLOP/s (1e12), intensities in FLOP per byte of HBM traffic.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.ticker import NullLocator

from . import PALETTE, new_figure, styled

__all__ = ["roofline_chart", "flops_per_token", "prefill_vs_length", "decode_vs_batch",
           "calibration_comparison", "prefill_decode_panels", "PRESET_COLORS"]

#: One colour per cost-model preset, used by every figure of the lecture.
PRESET_COLORS = {"ideal": PALETTE[0], "calibrated": PALETTE[1], "modern": PALETTE[2], "measured": "#000000"}
_PHASE_COLORS = {"prefill": PALETTE[3], "decode": PALETTE[4]}
_T = 1e12  # FLOP/s per TFLOP/s


def _preset_color(name: str) -> str:
    return PRESET_COLORS.get(str(name).split("+")[0], PALETTE[5])


def _decade_ticks(ax, axis: str, lo: float, hi: float, fmt=lambda v: f"{v:g}") -> None:
    """Decade ticks only, no minor labels (a log axis with minor labels triples redraw time)."""
    ticks = [10.0 ** k for k in range(int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi))) + 1)]
    if axis == "x":
        ax.set_xticks(ticks, [fmt(t) for t in ticks])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlim(lo, hi)
    else:
        ax.set_yticks(ticks, [fmt(t) for t in ticks])
        ax.yaxis.set_minor_locator(NullLocator())
        ax.set_ylim(lo, hi)


def _tok(v: float) -> str:
    """128 → "128", 8192 → "8k", 131072 → "128k"."""
    v = int(round(v))
    return f"{v // 1024}k" if v >= 1024 and v % 1024 == 0 else f"{v:,}"


def _pow2_axis(ax, values, max_ticks: int = 9) -> None:
    """Log-2 x axis with ticks at powers of two spanning ``values``, labelled 128, 1k, 128k."""
    v = np.asarray(values, dtype=float)
    lo, hi = int(np.floor(np.log2(v.min()))), int(np.ceil(np.log2(v.max())))
    step = max(1, int(np.ceil((hi - lo + 1) / max_ticks)))
    ticks = [2.0 ** k for k in range(lo, hi + 1, step)]
    ax.set_xscale("log", base=2)
    ax.set_xticks(ticks, [_tok(t) for t in ticks])
    ax.xaxis.set_minor_locator(NullLocator())


@styled
def roofline_chart(curve: pd.DataFrame, points: pd.DataFrame, *, node_label: str = "8×A800",
                   ridge: float | None = None, sweep: pd.DataFrame | None = None,
                   show_achieved: bool = False, preset_label: str = "ideal", title: str | None = None):
    """Attainable FLOP/s vs arithmetic intensity (log-log) with prefill and decode points.

    Parameters
    ----------
    curve : ``l01_roofline.roofline_curve`` frame (intensity, attainable_flops).
    points : ``roofline_points`` frame (phase, label, intensity, attainable_flops, achieved_flops);
        each point is drawn on the roof and labelled.
    ridge : ridge point in FLOP/B (drawn as a dotted line) or None.
    sweep : optional ``roofline_sweep`` frame: faint lines tracing prefill over lengths and decode
        over batch sizes.
    show_achieved : also draw each point's achieved FLOP/s under the preset (hollow markers, with a
        drop line from the roof): the gap is the preset's inefficiency.
    """
    fig, ax = new_figure(width=8, height=5)
    x, y = curve["intensity"].to_numpy(), curve["attainable_flops"].to_numpy() / _T
    ax.plot(x, y, color="k", lw=2.2, label=f"roofline, {node_label}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    if ridge is not None:
        ax.axvline(ridge, color="0.4", ls=":", lw=1.2)
        ax.annotate(f"ridge point\n{ridge:.0f} FLOP/B", (ridge, 0.0), xycoords=("data", "axes fraction"),
                    xytext=(5, 6), textcoords="offset points", fontsize="small", color="0.3")
    if sweep is not None:
        for phase, g in sweep.groupby("phase", sort=False):
            ax.plot(g["intensity"], g["attainable_flops"] / _T, color=_PHASE_COLORS[phase], lw=7, alpha=0.3,
                    solid_capstyle="round", label=f"{phase} sweep ({'length' if phase == 'prefill' else 'batch'})")
    markers = {"prefill": "o", "decode": "s"}
    for phase, g in points.groupby("phase", sort=False):
        col = _PHASE_COLORS[phase]
        ax.scatter(g["intensity"], g["attainable_flops"] / _T, marker=markers[phase], s=55, color=col,
                   zorder=4, label=f"{phase} (on the roof)")
        for r in g.itertuples():
            ax.annotate(r.label.replace(f"{phase} ", ""), (r.intensity, r.attainable_flops / _T),
                        xytext=(5, -12 if phase == "prefill" else 6), textcoords="offset points",
                        fontsize="small", color=col)
        if show_achieved:
            ax.scatter(g["intensity"], g["achieved_flops"] / _T, marker=markers[phase], s=55, facecolors="none",
                       edgecolors=col, zorder=4, label=f"{phase} achieved ({preset_label})")
            ax.vlines(g["intensity"], g["achieved_flops"] / _T, g["attainable_flops"] / _T, colors=col,
                      lw=0.8, ls="--")
    xlo, xhi = float(x.min()), float(x.max())
    ylo = min(float(y.min()), float(points["achieved_flops"].min() / _T) if show_achieved else np.inf)
    _decade_ticks(ax, "x", xlo, xhi)
    _decade_ticks(ax, "y", 10 ** np.floor(np.log10(ylo)), 10 ** np.ceil(np.log10(y.max() * 1.2)))
    ax.set_xlabel("arithmetic intensity (FLOP per byte of HBM traffic, log)")
    ax.set_ylabel(f"attainable FLOP/s of {node_label} (TFLOP/s, log)")
    ax.set_title(title or f"Roofline of {node_label}: prefill sits on the flat roof, decode on the slope")
    ax.legend(loc="upper left", fontsize="small")
    return fig


@styled
def flops_per_token(df: pd.DataFrame, model_label: str = "LLaMA2-70B"):
    """Stacked bars of prefill FLOPs per token (linear, causal attention, LM head) vs prompt length,
    with FAST'25 Eq. 1 per token as markers. ``df``: ``l01_roofline.flops_breakdown``."""
    fig, ax = new_figure(width=8, height=4.4)
    piv = df.pivot(index="n_tokens", columns="term", values="flops_per_token") / 1e9
    xs = np.arange(len(piv))
    bottom = np.zeros(len(piv))
    for term, col, lab in (("linear", PALETTE[0], "linear layers (2 FLOP per weight)"),
                           ("attention", PALETTE[3], "attention (causal, grows with length)"),
                           ("lm_head", PALETTE[1], "LM head (2·vocab·d)")):
        ax.bar(xs, piv[term], bottom=bottom, color=col, label=lab, width=0.7)
        bottom += piv[term].to_numpy()
    ax.plot(xs, piv["fast25_eq1"], "k_", ms=22, mew=2.5, label="FAST'25 Eq. 1 (a=4, b=22)")
    ax.set_xticks(xs, [f"{n // 1024}k" if n >= 1024 else str(n) for n in piv.index])
    ax.set_xlabel("prompt length n (tokens)")
    ax.set_ylabel("prefill FLOPs per prompt token (GFLOP)")
    ax.set_title(f"{model_label}: FLOPs per token are flat until attention takes over (superlinear prefill)")
    ax.legend(loc="upper left", fontsize="small")
    return fig


@styled
def prefill_vs_length(df: pd.DataFrame, measured: pd.DataFrame | None = None, *, node_label: str = "8×A800",
                      measured_tp: int = 8):
    """Prefill time (log-log) and MFU vs prompt length, one line per preset.

    ``df``: ``l01_roofline.prefill_vs_length``; ``measured``: ``measured_prefill_mfu`` (rows with
    ``tp == measured_tp`` are drawn as black points: SplitwiseSim, A100 TP8).
    """
    fig, (ax_t, ax_m) = new_figure(1, 2, width=11, height=4.3)
    for name, g in df.groupby("preset", sort=False):
        col = _preset_color(name)
        ax_t.plot(g["n_new"], g["time_s"], "-o", ms=3, color=col, label=name)
        ax_m.plot(g["n_new"], g["mfu"] * 100, "-o", ms=3, color=col, label=name)
    if measured is not None:
        mm = measured[measured["tp"] == measured_tp]
        ax_t.plot(mm["prompt_tokens"], mm["measured_s"], "D", color="k", ms=6,
                  label=f"measured (A100 TP{measured_tp}, SplitwiseSim)")
        ax_m.plot(mm["prompt_tokens"], mm["mfu"] * 100, "D", color="k", ms=6, label="measured")
    n = np.sort(df["n_new"].unique())
    ideal = df[df["preset"] == df["preset"].iloc[0]].sort_values("n_new")
    ref = ideal["time_s"].iloc[len(ideal) // 3] * n / n[len(ideal) // 3]
    ax_t.plot(n, ref, color="0.6", ls=":", label="∝ n (linear, for reference)")
    for ax in (ax_t, ax_m):
        _pow2_axis(ax, n)
        ax.set_xlabel("prompt length n (tokens, log)")
    ax_t.set_yscale("log")
    ax_t.yaxis.set_minor_locator(NullLocator())
    ax_t.set_ylabel("prefill time (s, log)")
    ax_t.set_title(f"Prefill time on {node_label}: superlinear past ~16k")
    ax_m.set_ylabel("MFU (% of peak FLOP/s)")
    ax_m.set_ylim(0, 105)
    ax_m.set_title("Model FLOPs utilisation")
    ax_t.legend(fontsize="small")
    return fig


@styled
def decode_vs_batch(df: pd.DataFrame, *, node_label: str = "8×A800"):
    """Decode step time and throughput vs batch size, one line per preset.

    ``df``: ``l01_roofline.decode_vs_batch``; rows with ``fits == False`` (KV over capacity) are hollow.
    """
    fig, (ax_t, ax_r) = new_figure(1, 2, width=11, height=4.3)
    for name, g in df.groupby("preset", sort=False):
        col = _preset_color(name)
        ax_t.plot(g["batch_size"], g["step_s"] * 1e3, "-", color=col, label=name)
        ax_r.plot(g["batch_size"], g["tokens_per_s"], "-", color=col, label=name)
        ok, bad = g[g["fits"]], g[~g["fits"]]
        ax_t.plot(ok["batch_size"], ok["step_s"] * 1e3, "o", ms=4, color=col)
        ax_t.plot(bad["batch_size"], bad["step_s"] * 1e3, "o", ms=5, mfc="none", color=col)
        ax_r.plot(ok["batch_size"], ok["tokens_per_s"], "o", ms=4, color=col)
        ax_r.plot(bad["batch_size"], bad["tokens_per_s"], "o", ms=5, mfc="none", color=col)
    ctx = int(df["context_tokens"].iloc[0] / df["batch_size"].iloc[0])
    for ax in (ax_t, ax_r):
        _pow2_axis(ax, df["batch_size"])
        ax.set_xlabel(f"batch size (sequences of {ctx:,} tokens, log)")
    ax_t.set_ylim(bottom=0)
    ax_t.set_ylabel("decode step time = TBT (ms)")
    ax_t.set_title(f"Decode step on {node_label}: sublinear in batch")
    ax_r.set_yscale("log")
    ax_r.yaxis.set_minor_locator(NullLocator())
    ax_r.set_ylabel("decode throughput (tokens/s, log)")
    ax_r.set_title("Throughput grows almost ∝ batch (hollow: KV over capacity)")
    ax_t.legend(fontsize="small")
    return fig


@styled
def calibration_comparison(df: pd.DataFrame):
    """Ideal vs calibrated vs modern vs measured on one figure (LLaMA2-70B, A100-80GB).

    ``df``: ``calibration.compare_to_measured`` (one row per measured point; presets as
    ``<name>_s`` columns). Left: prefill time vs length (TP8 solid, TP4 dashed); right: decode step
    vs batch at 512-token prompts.
    """
    fig, (ax_p, ax_d) = new_figure(1, 2, width=11, height=4.5)
    presets = [c[:-2] for c in df.columns if c.endswith("_s") and c != "measured_s"]
    for ax, phase, xcol in ((ax_p, "prefill", "prompt_tokens"), (ax_d, "decode", "batch_size")):
        sub = df[df["phase"] == phase]
        for tp, ls, mk in ((8, "-", "D"), (4, "--", "o")):
            g = sub[sub["tp"] == tp].sort_values(xcol)
            if g.empty:
                continue
            scale = 1.0 if phase == "prefill" else 1e3
            for p in presets:
                ax.plot(g[xcol], g[f"{p}_s"] * scale, ls, color=_preset_color(p),
                        label=f"{p} TP{tp}" if phase == "prefill" else None)
            ax.plot(g[xcol], g["measured_s"] * scale, mk, color="k", ms=6 if tp == 8 else 5,
                    mfc="k" if tp == 8 else "none", label=f"measured TP{tp}")
        _pow2_axis(ax, sub[xcol])
    ax_p.set_yscale("log")
    ax_p.yaxis.set_minor_locator(NullLocator())
    ax_p.set_xlabel("prompt length (tokens, log)")
    ax_p.set_ylabel("prefill time (s, log)")
    ax_p.set_title("Prefill, batch 1")
    ax_d.set_xlabel("decode batch size (512-token prompts, log)")
    ax_d.set_ylabel("decode step time (ms)")
    ax_d.set_ylim(bottom=0)
    ax_d.set_title("Decode step")
    ax_p.legend(fontsize="x-small", ncol=2)
    ax_d.legend(fontsize="x-small")
    fig.suptitle("LLaMA2-70B on A100-80GB: ideal vs calibrated vs modern presets vs measured (SplitwiseSim)")
    return fig


@styled
def prefill_decode_panels(pre: pd.DataFrame, dec: pd.DataFrame, *, label: str,
                          ref_pre: pd.DataFrame | None = None, ref_dec: pd.DataFrame | None = None,
                          ref_label: str = "", measured: pd.DataFrame | None = None, node_label: str = "8×A800"):
    """Three panels for one configuration: prefill time vs length, MFU vs length, decode step vs batch.

    ``pre``/``dec``: one preset's rows of ``prefill_vs_length``/``decode_vs_batch``; ``ref_*`` the
    same for a reference configuration (dashed grey); ``measured``: ``measured_prefill_mfu`` (TP8
    rows drawn as black points).
    """
    fig, (ax_t, ax_m, ax_d) = new_figure(1, 3, width=13, height=4.2)
    col = _preset_color(str(pre["preset"].iloc[0]))
    for ax, d, xcol, ycol, scale in ((ax_t, pre, "n_new", "time_s", 1.0), (ax_m, pre, "n_new", "mfu", 100.0),
                                     (ax_d, dec, "batch_size", "step_s", 1e3)):
        ax.plot(d[xcol], d[ycol] * scale, "-o", ms=3, color=col, label=label)
    if ref_pre is not None:
        ax_t.plot(ref_pre["n_new"], ref_pre["time_s"], "--", color="0.5", label=ref_label)
        ax_m.plot(ref_pre["n_new"], ref_pre["mfu"] * 100, "--", color="0.5", label=ref_label)
    if ref_dec is not None:
        ax_d.plot(ref_dec["batch_size"], ref_dec["step_s"] * 1e3, "--", color="0.5", label=ref_label)
    if measured is not None:
        mm = measured[measured["tp"] == 8]
        ax_t.plot(mm["prompt_tokens"], mm["measured_s"], "D", color="k", ms=5, label="measured (A100 TP8)")
        ax_m.plot(mm["prompt_tokens"], mm["mfu"] * 100, "D", color="k", ms=5, label="measured (A100 TP8)")
    bad = dec[~dec["fits"]]
    if len(bad):
        ax_d.plot(bad["batch_size"], bad["step_s"] * 1e3, "o", ms=7, mfc="none", color=PALETTE[3],
                  label="KV over capacity")
    _pow2_axis(ax_t, pre["n_new"])
    _pow2_axis(ax_m, pre["n_new"])
    _pow2_axis(ax_d, dec["batch_size"])
    ax_t.set_yscale("log")
    ax_t.yaxis.set_minor_locator(NullLocator())
    ax_t.set_xlabel("prompt length (tokens, log)")
    ax_t.set_ylabel("prefill time (s, log)")
    ax_t.set_title("Prefill time")
    ax_m.set_xlabel("prompt length (tokens, log)")
    ax_m.set_ylabel("MFU (% of peak)")
    ax_m.set_ylim(0, 105)
    ax_m.set_title("Prefill MFU")
    ctx = int(dec["context_tokens"].iloc[0] / dec["batch_size"].iloc[0])
    ax_d.set_xlabel(f"decode batch (× {ctx:,}-token contexts, log)")
    ax_d.set_ylabel("decode step time (ms)")
    ax_d.set_ylim(bottom=0)
    ax_d.set_title("Decode step (TBT)")
    ax_t.legend(fontsize="x-small")
    ax_d.legend(fontsize="x-small")
    fig.suptitle(f"{node_label}: {label}")
    # A fixed layout: constrained layout would more than double the redraw time of this dashboard figure.
    fig.set_layout_engine("none")
    ax_t.get_gridspec().update(left=0.055, right=0.985, bottom=0.14, top=0.84, wspace=0.26)
    for ax in (ax_t, ax_m, ax_d):
        ax.set_position(ax.get_subplotspec().get_position(fig))
    return fig
