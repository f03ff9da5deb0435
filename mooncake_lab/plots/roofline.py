"""Figures of lecture 01: the roofline, FLOPs per token, prefill vs length, decode vs batch, and
ideal vs calibrated vs measured.

Each function takes tidy DataFrames from :mod:`mooncake_lab.experiments.l01_roofline` and returns a
:class:`matplotlib.figure.Figure` with a title and axis labels with units (the dashboards' two
figures are view classes, built once and updated in place, that the functions wrap). FLOP/s are
shown in TFLOP/s (1e12), intensities in FLOP per byte of HBM traffic.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.ticker import FixedLocator, NullLocator

from . import PALETTE, log_limits, new_figure, styled

__all__ = ["RooflineChart", "PrefillDecodePanels", "roofline_chart", "flops_per_token", "prefill_vs_length",
           "decode_vs_batch", "calibration_comparison", "prefill_decode_panels", "PRESET_COLORS"]

#: One colour per cost-model preset, used by every figure of the lecture.
PRESET_COLORS = {"ideal": PALETTE[0], "calibrated": PALETTE[1], "modern": PALETTE[2], "measured": "#000000"}
_PHASE_COLORS = {"prefill": PALETTE[3], "decode": PALETTE[4]}
_MARKERS = {"prefill": "o", "decode": "s"}
_MS = 55 ** 0.5  # marker size (points) of a scatter with s=55 points²
_T = 1e12  # FLOP/s per TFLOP/s


def _preset_color(name: str) -> str:
    return PRESET_COLORS.get(str(name).split("+")[0], PALETTE[5])


def _decade_label(v: float) -> str:
    """A decade tick as a student reads it: 0.1, 1, 1,000, 1,000,000 — never "1e+06"."""
    return f"{v:,.0f}" if v >= 1 else f"{v:g}"


def _decade_ticks(ax, axis: str, lo: float, hi: float, fmt=_decade_label) -> None:
    """Decade ticks only, no minor labels (a log axis with minor labels triples redraw time).
    Nothing is done when the axis already has these ticks (re-creating tick labels is slow)."""
    axis_ = ax.xaxis if axis == "x" else ax.yaxis
    if isinstance(axis_.get_major_locator(), FixedLocator) and tuple(axis_.get_view_interval()) == (lo, hi):
        return
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


class RooflineChart:
    """Attainable FLOP/s vs arithmetic intensity (log-log) with prefill and decode points.

    Built once; :meth:`update` sets the data. ``sweep=True`` adds the faint lines tracing prefill over
    lengths and decode over batch sizes; ``live=True`` marks the artists that change on a dashboard
    move as animated. The legend sits under the axes, clear of the data.
    """

    @styled
    def __init__(self, *, sweep: bool = False, live: bool = False):
        self.figure, ax = new_figure(width=8, height=5.4 if sweep else 5)
        self.ax, self.live = ax, live
        ax.set_xscale("log")
        ax.set_yscale("log")
        self.roof, = ax.plot([], [], color="k", lw=2.2, label="roofline")
        self.ridge = ax.axvline(1.0, color="0.4", ls=":", lw=1.2)
        self.ridge_note = ax.annotate("", (1.0, 0.0), xycoords=("data", "axes fraction"), xytext=(5, 6),
                                      textcoords="offset points", fontsize="small", color="0.3")
        self.sweeps = {ph: ax.plot([], [], color=_PHASE_COLORS[ph], lw=7, alpha=0.3, solid_capstyle="round",
                                   label=f"{ph} sweep ({'length' if ph == 'prefill' else 'batch'})")[0]
                       for ph in _PHASE_COLORS} if sweep else {}
        self.points, self.achieved, self.drops = {}, {}, {}
        for ph, col in _PHASE_COLORS.items():     # markers as lines: cheaper to redraw than scatter collections
            self.points[ph], = ax.plot([], [], ls="none", marker=_MARKERS[ph], ms=_MS, color=col, zorder=4,
                                       label=f"{ph} (on the roof)")
            self.achieved[ph], = ax.plot([], [], ls="none", marker=_MARKERS[ph], ms=_MS, mfc="none", color=col,
                                         zorder=4)
            self.drops[ph], = ax.plot([], [], color=col, lw=0.8, ls="--")
        self.notes: list = []
        ax.set_xlabel("arithmetic intensity (FLOP per byte of HBM traffic, log)")
        ax.set_title(" ")
        self._legend, self.static_state = None, None
        if live:
            for a in (self.roof, self.ridge, self.ridge_note, *self.sweeps.values(), *self.points.values(),
                      *self.achieved.values(), *self.drops.values(), ax.title):
                a.set_animated(True)

    def update(self, curve: pd.DataFrame, points: pd.DataFrame, *, node_label: str = "8×A800",
               ridge: float | None = None, sweep: pd.DataFrame | None = None, show_achieved: bool = False,
               preset_label: str | None = "ideal", title: str | None = None):
        """Show ``curve`` (``roofline_curve``: intensity, attainable_flops), ``points``
        (``roofline_points``: phase, label, intensity, attainable_flops, achieved_flops), the ``ridge``
        (FLOP/B, dotted) and ``sweep`` (``roofline_sweep``). ``show_achieved``: hollow markers at the
        FLOP/s achieved under the preset, with a drop line from the roof."""
        ax = self.ax
        x, y = curve["intensity"].to_numpy(), curve["attainable_flops"].to_numpy() / _T
        self.roof.set_data(x, y)
        self.roof.set_label(f"roofline of {node_label}")
        self.ridge.set_visible(ridge is not None)
        self.ridge_note.set_visible(ridge is not None)
        if ridge is not None:
            self.ridge.set_xdata([ridge, ridge])
            self.ridge_note.xy = (ridge, 0.0)
            self.ridge_note.set_text(f"ridge point\n{ridge:.0f} FLOP/B")
        for ph, line in self.sweeps.items():
            g = sweep[sweep["phase"] == ph] if sweep is not None else sweep
            line.set_data(([], []) if g is None else (g["intensity"], g["attainable_flops"] / _T))
        for ph in _PHASE_COLORS:
            g = points[points["phase"] == ph]
            xi, roof, got = g["intensity"].to_numpy(), g["attainable_flops"].to_numpy() / _T, \
                g["achieved_flops"].to_numpy() / _T
            self.points[ph].set_data(xi, roof)
            self.achieved[ph].set_data(xi, got)
            nan = np.full_like(xi, np.nan)         # one vertical segment per point, NaN-separated
            self.drops[ph].set_data(np.c_[xi, xi, nan].ravel(), np.c_[got, roof, nan].ravel())
            self.achieved[ph].set_label((f"{ph} achieved" + (f" ({preset_label})" if preset_label else ""))
                                        if show_achieved else "_hidden")
            self.achieved[ph].set_visible(show_achieved)
            self.drops[ph].set_visible(show_achieved)
        self._label_points(points)
        ylo = min(float(y.min()), float(points["achieved_flops"].min() / _T) if show_achieved else np.inf)
        _decade_ticks(ax, "x", float(x.min()), float(x.max()))
        _decade_ticks(ax, "y", 10 ** np.floor(np.log10(ylo)), 10 ** np.ceil(np.log10(y.max() * 1.2)))
        ax.set_ylabel(f"attainable FLOP/s of {node_label} (TFLOP/s, log)")
        ax.set_title(title or f"Roofline of {node_label}: prefill sits on the flat roof, decode on the slope")
        handles = [a for a in (self.roof, *self.sweeps.values(), self.points["prefill"], self.achieved["prefill"],
                               self.points["decode"], self.achieved["decode"]) if not a.get_label().startswith("_")]
        state = tuple(h.get_label() for h in handles)
        if state != self.static_state:      # what the (static) legend shows
            if self._legend is not None:
                self._legend.remove()
            self._legend = self.figure.legend(handles=handles, loc="outside lower center", ncol=3,
                                              fontsize="small", frameon=False)
            self.static_state = state
        return self

    def _label_points(self, points: pd.DataFrame) -> None:
        """One text per point ("n=8192", "b=32"), created again only when the number of points changes."""
        if len(self.notes) != len(points):
            for t in self.notes:
                t.remove()
            self.notes = [self.ax.annotate("", (1, 1), xytext=(5, -12 if ph == "prefill" else -11),
                                           textcoords="offset points", fontsize="small", color=_PHASE_COLORS[ph],
                                           animated=self.live) for ph in points["phase"]]
        for t, r in zip(self.notes, points.itertuples()):
            t.set_text(r.label.replace(f"{r.phase} ", ""))
            t.xy = (r.intensity, r.attainable_flops / _T)
            t.set_color(_PHASE_COLORS[r.phase])
            t.set_position((5, -12 if r.phase == "prefill" else -11))  # below the rising slope, off the line


@styled
def roofline_chart(curve: pd.DataFrame, points: pd.DataFrame, *, node_label: str = "8×A800",
                   ridge: float | None = None, sweep: pd.DataFrame | None = None,
                   show_achieved: bool = False, preset_label: str = "ideal", title: str | None = None):
    """A figure of :class:`RooflineChart` (arguments: :meth:`RooflineChart.update`)."""
    return RooflineChart(sweep=sweep is not None).update(
        curve, points, node_label=node_label, ridge=ridge, sweep=sweep, show_achieved=show_achieved,
        preset_label=preset_label, title=title).figure


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
    over = not df["fits"].all()
    ax_r.set_title("Throughput grows almost ∝ batch" + ("\n(hollow: KV over capacity)" if over else ""))
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
    ax_p.legend(fontsize="small", ncol=2)
    ax_d.legend(fontsize="small")
    fig.suptitle("LLaMA2-70B on A100-80GB: ideal vs calibrated vs modern presets vs measured (SplitwiseSim)")
    return fig


class PrefillDecodePanels:
    """Three panels for one configuration: prefill time vs length, MFU vs length, decode step vs batch.

    Built once for the prompt ``lengths`` and decode ``batches`` (x values), with the fixed
    references: ``ref_pre`` (``prefill_vs_length`` rows of a reference configuration, dashed grey)
    and ``measured`` (``measured_prefill_mfu``; TP8 rows as black diamonds). :meth:`update` sets one
    configuration, drawn in its preset's colour, its preset named at the end of its lines (the
    legends hold only the fixed entries); ``live=True`` marks the changing artists as animated.
    """

    @styled
    def __init__(self, lengths, batches, *, ref_pre: pd.DataFrame | None = None,
                 ref_label: str = "", measured: pd.DataFrame | None = None, node_label: str = "8×A800",
                 live: bool = False):
        self.figure, axes = new_figure(1, 3, width=13, height=4.2)
        self.axes = ax_t, ax_m, ax_d = axes
        self.node_label = node_label
        self.time, = ax_t.plot([], [], "-o", ms=3)
        self.mfu, = ax_m.plot([], [], "-o", ms=3)
        self.step, = ax_d.plot([], [], "-o", ms=3)
        # the configuration's name at the last point of its prefill-time and decode-step lines
        self.names = [ax.annotate("", (1, 1), xytext=(-4, 6), textcoords="offset points", ha="right",
                                  va="bottom", fontsize="small") for ax in (ax_t, ax_d)]
        if ref_pre is not None:
            ax_t.plot(ref_pre["n_new"], ref_pre["time_s"], "--", color="0.5", label=ref_label)
            ax_m.plot(ref_pre["n_new"], ref_pre["mfu"] * 100, "--", color="0.5", label=ref_label)
        self.ref_step, = ax_d.plot([], [], "--", color="0.5", label=ref_label)
        if measured is not None:
            mm = measured[measured["tp"] == 8]
            ax_t.plot(mm["prompt_tokens"], mm["measured_s"], "D", color="k", ms=5, label="measured (A100 TP8)")
            ax_m.plot(mm["prompt_tokens"], mm["mfu"] * 100, "D", color="k", ms=5, label="measured (A100 TP8)")
        self.over, = ax_d.plot([], [], "o", ms=7, mfc="none", color=PALETTE[3], label="KV over capacity")
        self._ref_min = float(ref_pre["time_s"].min()) if ref_pre is not None else None
        for ax, xs in ((ax_t, lengths), (ax_m, lengths), (ax_d, batches)):
            _pow2_axis(ax, xs)
            ax.set_xlim(*log_limits(float(np.min(xs)), float(np.max(xs))))
        ax_t.set_yscale("log")
        ax_t.yaxis.set_minor_locator(NullLocator())
        ax_t.set_xlabel("prompt length (tokens, log)")
        ax_t.set_ylabel("prefill time (s, log)")
        ax_t.set_title("Prefill time")
        ax_m.set_xlabel("prompt length (tokens, log)")
        ax_m.set_ylabel("MFU (% of peak)")
        ax_m.set_ylim(0, 105)
        ax_m.set_title("Prefill MFU")
        ax_d.set_xlabel("decode batch (sequences, log)")
        ax_d.set_ylabel("decode step time (ms)")
        ax_d.set_title(" ")
        ax_t.legend(fontsize="small", loc="upper left")
        ax_d.legend(fontsize="small", loc="upper left")
        # The figure's title as a plain text (a suptitle is part of a dashboard's static background).
        self.heading = self.figure.text(0.5, 0.98, " ", ha="center", va="top", fontsize="large")
        # A fixed layout: constrained layout would more than double the redraw time of this dashboard figure.
        self.figure.set_layout_engine("none")
        ax_t.get_gridspec().update(left=0.055, right=0.985, bottom=0.14, top=0.84, wspace=0.26)
        for ax in axes:
            ax.set_position(ax.get_subplotspec().get_position(self.figure))
        if live:
            for a in (self.time, self.mfu, self.step, self.ref_step, self.over, self.heading, ax_d.title,
                      *self.names):
                a.set_animated(True)

    def update(self, pre: pd.DataFrame, dec: pd.DataFrame, *, label: str, ref_dec: pd.DataFrame | None = None,
               time_ymax_s: float | None = None, step_ymax_ms: float | None = None):
        """Show one configuration: ``pre``/``dec`` are one preset's rows of ``prefill_vs_length`` /
        ``decode_vs_batch``, ``ref_dec`` the reference's decode rows; ``label`` (the heading) names the
        configuration.
        ``time_ymax_s`` / ``step_ymax_ms`` fix the top of the prefill-time and decode-step axes
        (default: fit the data; the prefill axis always ends on a decade)."""
        ax_t, ax_m, ax_d = self.axes
        name = str(pre["preset"].iloc[0])
        col = _preset_color(name)
        for line, d, xcol, ycol, scale in ((self.time, pre, "n_new", "time_s", 1.0),
                                           (self.mfu, pre, "n_new", "mfu", 100.0),
                                           (self.step, dec, "batch_size", "step_s", 1e3)):
            x, y = d[xcol].to_numpy(), d[ycol].to_numpy() * scale
            line.set_data(x, y)
            line.set_color(col)
            if line is not self.mfu:
                note = self.names[0 if line is self.time else 1]
                note.xy = (x[-1], y[-1])
                note.set_text(name)
                note.set_color(col)
        self.ref_step.set_data(([], []) if ref_dec is None else (ref_dec["batch_size"], ref_dec["step_s"] * 1e3))
        bad = dec[~dec["fits"]]
        self.over.set_data(bad["batch_size"], bad["step_s"] * 1e3)
        lo = min([float(pre["time_s"].min())] + ([self._ref_min] if self._ref_min is not None else []))
        hi = max(float(pre["time_s"].max()) * 1.2 if time_ymax_s is None else time_ymax_s, lo)
        ax_t.set_ylim(10 ** np.floor(np.log10(lo)), 10 ** np.ceil(np.log10(hi)))
        top = float(dec["step_s"].max()) * 1e3
        if ref_dec is not None:
            top = max(top, float(ref_dec["step_s"].max()) * 1e3)
        ax_d.set_ylim(0, step_ymax_ms if step_ymax_ms is not None else top * 1.05)
        ctx = int(dec["context_tokens"].iloc[0] / dec["batch_size"].iloc[0])
        ax_d.set_title(f"Decode step (TBT), {ctx:,}-token contexts")
        self.heading.set_text(f"{self.node_label}: {label}")
        return self


@styled
def prefill_decode_panels(pre: pd.DataFrame, dec: pd.DataFrame, *, label: str,
                          ref_pre: pd.DataFrame | None = None, ref_dec: pd.DataFrame | None = None,
                          ref_label: str = "", measured: pd.DataFrame | None = None, node_label: str = "8×A800"):
    """A figure of :class:`PrefillDecodePanels` for one configuration (``label`` names it)."""
    return PrefillDecodePanels(pre["n_new"], dec["batch_size"], ref_pre=ref_pre,
                               ref_label=ref_label, measured=measured, node_label=node_label).update(
        pre, dec, label=label, ref_dec=ref_dec).figure
