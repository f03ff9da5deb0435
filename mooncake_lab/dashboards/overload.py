"""Dashboards of lecture 07: admission control under overload.

* :class:`OverloadDashboard`: trace, replay speed, admission policy, threshold, t_d, prediction
  horizon, decode KV capacity and decode semantics (the lecture's or the paper's,
  :data:`~mooncake_lab.experiments.l07_overload.DECODE_SEMANTICS`) → one simulation (≈ 0.1 s on the conversation trace at 2×, 0.25 s on
  toolagent-like; memoised in :func:`~mooncake_lab.experiments.l07_overload.run`, where parameters the
  policy does not read do not rerun it) → prefill and decode load over time + counts.
* :class:`PolicyComparisonDashboard`: trace, replay speed, decode KV capacity and decode semantics → the three
  policies side by side (three simulations per move, in parallel threads) → rejected / completed /
  wasted prefill bars.

Both build their figure once and redraw only the changing artists per move
(:class:`~mooncake_lab.dashboards.Dashboard`); a move that needs new simulations waits for them
(memoised: a value seen before costs no run).
"""
from __future__ import annotations

import math

import ipywidgets as widgets
import numpy as np

from .. import sim
from ..experiments import l07_overload as exp
from ..plots import overload as plots
from . import Dashboard, nice_ceiling, sticky_limit

__all__ = ["OverloadDashboard", "PolicyComparisonDashboard", "BOUNDS", "TRACE_CHOICES", "SEMANTICS_CHOICES"]

TRACE_CHOICES = exp.TRACES
#: The decode semantics control (:data:`~...l07_overload.DECODE_SEMANTICS`): the lecture's, or the paper's.
SEMANTICS_CHOICES = tuple(exp.DECODE_SEMANTICS)
#: Slider bounds (every value in them runs; tests sweep the corners).
BOUNDS = {
    "speed": (0.25, 3.0),             # × replay; 2× = arXiv Table 3
    "threshold": (0.5, 2.0),          # admission threshold on the loads (1 = at the SLO / memory full)
    "t_d": (1.0, 60.0),               # s, uniform decode time of the prediction (arXiv §7.4)
    "horizon": (0.0, 2.0),            # predict at arrival + horizon × (KV ready − arrival)
    "kv_log10": (4.0, 6.2),           # 10k … 1.58M tokens per decode node (real LLaMA2-70B node: 1.47M)
}


def _slider_style():
    return {"style": {"description_width": "initial"}, "continuous_update": False}


def _kv_slider():
    b = BOUNDS["kv_log10"]
    return widgets.FloatLogSlider(base=10, min=b[0], max=b[1], step=0.05, readout_format=",.0f",
                                  description="decode KV per node (tokens)", **_slider_style())


def _semantics_dropdown():
    return widgets.Dropdown(options=SEMANTICS_CHOICES, description="decode semantics", **_slider_style())


def _decode_overrides(semantics: str, kv: float) -> dict:
    """ClusterConfig overrides of the decode semantics control and the KV slider (the semantics win:
    the paper's uses the real KV capacity, and the slider is then switched off)."""
    return exp.semantics_config(semantics, decode_kv_capacity_tokens=float(kv))


def _decode_config(semantics: str, kv: float) -> sim.ClusterConfig:
    return sim.ClusterConfig(**{**exp.DEFAULT_CONFIG, **_decode_overrides(semantics, kv)})


def _decode_kv(semantics: str, kv: float) -> float:
    """Decode KV capacity (tokens per node) the run uses."""
    return float(_decode_config(semantics, kv).resolve().decode_kv_capacity)


def _decode_text(semantics: str, kv: float) -> str:
    """What the decode side is, from the config it runs (KV capacity, binding, load) — for a readout."""
    c = _decode_config(semantics, kv)
    when = {"ready": "when its KV is ready", "arrival": "at arrival"}.get(c.decode_binding, c.decode_binding)
    load = {"tbt": "TBT / SLO", "tbt_or_memory": "max(TBT / SLO, KV / capacity)"}.get(c.decode_load_metric,
                                                                                   c.decode_load_metric)
    return (f"<i>{semantics}</i> decode semantics: KV {_decode_kv(semantics, kv):,.0f} tokens/node, "
            f"decode node chosen {when}, decode load {load}")


def _derived_t_d(trace, kv_tokens) -> float:
    """t_d (s) derived from the trace and the decode KV capacity, on the slider's 0.5 s grid; for arguments the
    dashboard will refuse anyway (it names them), the slider's low end."""
    try:
        est = exp.decode_time_estimate(trace, decode_kv_capacity_tokens=float(kv_tokens))
    except (ValueError, TypeError, OverflowError):
        return BOUNDS["t_d"][0]
    return min(max(round(est * 2) / 2, BOUNDS["t_d"][0]), BOUNDS["t_d"][1])


class OverloadDashboard(Dashboard):
    """One admission policy on a whole trace: prefill and decode load over time, and the counts.

    Controls: ``trace``, ``policy`` (baseline / early / predicted / none), ``speed`` (0.25–3×),
    ``threshold`` (0.5–2), ``t_d`` (s, 1–60; default: :func:`~...l07_overload.decode_time_estimate` of the
    initial trace, to 0.5 s), ``horizon`` (0–2: 0 = now, 1 = the end of the prefill, 2 = as far again), ``kv`` (tokens per decode node,
    log, 10k–1.58M), ``decode`` (``"lecture"`` or ``"paper"`` decode semantics,
    :data:`~...l07_overload.DECODE_SEMANTICS`; the paper's uses the real KV capacity, so ``kv`` is then
    switched off). Preset ``modern`` (:data:`~...l07_overload.DEFAULT_CONFIG`).
    """

    title = "Lecture 07 · admission control on the whole trace (one simulation per move)"

    _KEYWORDS = {"kv": "kv_tokens"}

    def __init__(self, trace: str = "conversation", policy: str = "early", speed: float = exp.DEFAULT_SPEED,
                 threshold: float = 1.0, t_d: float | None = None, horizon: float = 1.0,
                 kv_tokens: float = exp.DEFAULT_CONFIG["decode_kv_capacity_tokens"], decode: str = "lecture"):
        if t_d is None:
            t_d = _derived_t_d(trace, kv_tokens)
        super().__init__(trace=trace, policy=policy, speed=speed, threshold=threshold, t_d=t_d, horizon=horizon,
                         kv=kv_tokens, decode=decode)

    def _build_controls(self) -> dict:
        b = BOUNDS
        return {
            "trace": widgets.Dropdown(options=TRACE_CHOICES, description="trace"),
            "policy": widgets.Dropdown(options=("baseline", "early", "predicted", "none"), description="admission"),
            "speed": widgets.FloatSlider(min=b["speed"][0], max=b["speed"][1], step=0.25,
                                         description="replay speed (×)", readout_format=".2f", **_slider_style()),
            "threshold": widgets.FloatSlider(min=b["threshold"][0], max=b["threshold"][1], step=0.05,
                                             description="threshold θ", readout_format=".2f", **_slider_style()),
            "t_d": widgets.FloatSlider(min=b["t_d"][0], max=b["t_d"][1], step=0.5,
                                       description="t_d (s)", readout_format=".1f", **_slider_style()),
            "horizon": widgets.FloatSlider(min=b["horizon"][0], max=b["horizon"][1], step=0.1,
                                           description="prediction horizon", readout_format=".1f",
                                           **_slider_style()),
            "kv": _kv_slider(),
            "decode": _semantics_dropdown(),
        }

    def _config(self, v: dict | None = None) -> dict:
        """ClusterConfig overrides of control values ``v`` (default: the current ones)."""
        v = v or {k: w.value for k, w in self.controls.items()}
        return dict(admission=v["policy"], admission_threshold=float(v["threshold"]),
                    decode_time_s=float(v["t_d"]), prediction_horizon=float(v["horizon"]),
                    **_decode_overrides(v["decode"], v["kv"]))

    def _prefetch_jobs(self, v: dict) -> list:
        """The other trace with the same settings, the other decode semantics, and the other admission
        policies on this one."""
        cfg = self._config(v)
        return ([(t, float(v["speed"]), exp._config(**cfg)) for t in TRACE_CHOICES if t != v["trace"]]
                + [(v["trace"], float(v["speed"]), exp._config(**self._config({**v, "decode": m})))
                   for m in SEMANTICS_CHOICES if m != v["decode"]]
                + [(v["trace"], float(v["speed"]), exp._config(**{**cfg, "admission": p}))
                   for p in self.controls["policy"].options if p != v["policy"]])

    def _setup(self):
        self.view = plots.LoadOverTime(1, live=True)
        self._xmax = self._tops = None
        return self.view.figure

    def _update(self):
        trace, speed, pol = self.value("trace"), float(self.value("speed")), self.value("policy")
        thr, kv, sem = float(self.value("threshold")), float(self.value("kv")), self.value("decode")
        cfg = self._config()
        self.controls["kv"].disabled = "decode_kv_capacity_tokens" in exp.DECODE_SEMANTICS[sem]
        res = exp.run(trace, speed, **cfg)
        s, name = res.summary(), exp._trace(trace).name  # (res.trace is the replayed copy: "… ×2")
        ts = exp.load_timeseries(trace, speed, cfg.pop("admission"), **cfg)
        top_d, top_p = self.view.fitted_tops(ts, thr)
        old = self._tops or (None, None)
        self._tops = (sticky_limit(old[0], top_d, headroom=1.0), sticky_limit(old[1], top_p, headroom=1.0))
        self._xmax = sticky_limit(self._xmax, float(ts.index.max()) if len(ts) else 1.0, headroom=1.02)
        self.view.update({pol: ts}, threshold=thr, xmax=self._xmax, tops=[self._tops],
                         context=f"{name} at {speed:g}×")   # the decode side is in the readout (a short title)
        self.readout.value = (
            f"<b>{pol}</b> on <code>{name}</code> at {speed:g}× ({_decode_text(sem, kv)}): "
            f"completed <b>{int(s['completed']):,}</b> of {int(s['requests']):,}; rejected {int(s['rejected']):,} "
            f"(at arrival {int(s['rejected_at_arrival']):,}, after prefill {int(s['rejected_after_prefill']):,}, "
            f"too large {int(s['rejected_too_large']):,}); wasted prefill {s['wasted_prefill_s']:,.0f} s; "
            f"within both SLOs {s['slo_attainment']:.1%}; load correlation r = {self.view.correlations[0]:+.2f}")


class PolicyComparisonDashboard(Dashboard):
    """The three admission policies side by side (three simulations per move, memoised, in parallel threads).

    Controls: ``trace``, ``speed`` (0.25–3×), ``kv`` (tokens per decode node, log, 10k–1.58M), ``decode``
    (``"lecture"`` or ``"paper"`` decode semantics: the ordering of Table 3 appears under the first and
    vanishes under the second; the paper's uses the real KV capacity, so ``kv`` is then switched off).
    """

    title = "Lecture 07 · baseline vs early vs predicted rejection"

    _KEYWORDS = {"kv": "kv_tokens"}

    def __init__(self, trace: str = "conversation", speed: float = exp.DEFAULT_SPEED,
                 kv_tokens: float = exp.DEFAULT_CONFIG["decode_kv_capacity_tokens"], decode: str = "lecture"):
        super().__init__(trace=trace, speed=speed, kv=kv_tokens, decode=decode)

    def _build_controls(self) -> dict:
        b = BOUNDS
        return {
            "trace": widgets.Dropdown(options=TRACE_CHOICES, description="trace"),
            "speed": widgets.FloatSlider(min=b["speed"][0], max=b["speed"][1], step=0.25,
                                         description="replay speed (×)", readout_format=".2f", **_slider_style()),
            "kv": _kv_slider(),
            "decode": _semantics_dropdown(),
        }

    def _paper(self):
        """Table 3's counts, marked only where the run stands for the paper's: its replay speed, on the trace of
        its size (toolagent-like; the conversation trace is another workload, so no marks there)."""
        same = float(self.value("speed")) == exp.DEFAULT_SPEED and self.value("trace") == exp.TRACES[0]
        return exp.PAPER_TABLE3_REJECTED if same else None

    def _static_key(self):
        return self._paper() is not None   # the legend lists the paper's marks only when shown

    def _setup(self):
        self.view = plots.PolicyResults(exp.POLICIES, live=True)
        self._ylims = None
        return self.view.figure

    def _prefetch_jobs(self, v: dict) -> list:
        """The other trace at this speed, the other decode semantics at this speed, then every speed of the
        slider nearest first (three runs each)."""
        w, kv, sem = self.controls["speed"], float(v["kv"]), v["decode"]
        speeds = [float(x) for x in np.round(np.arange(w.min, w.max + w.step / 2, w.step), 6)]
        states = [(t, float(v["speed"]), sem) for t in TRACE_CHOICES if t != v["trace"]]
        states += [(v["trace"], float(v["speed"]), m) for m in SEMANTICS_CHOICES if m != sem]
        states += [(v["trace"], x, sem) for x in sorted(speeds, key=lambda x: abs(x - v["speed"])) if x != v["speed"]]
        return [job for t, x, m in states for job in exp.policy_jobs(t, x, **_decode_overrides(m, kv))]

    def _update(self):
        trace, speed, kv, sem = (self.value("trace"), float(self.value("speed")), float(self.value("kv")),
                                 self.value("decode"))
        self.controls["kv"].disabled = "decode_kv_capacity_tokens" in exp.DECODE_SEMANTICS[sem]
        df = exp.policy_counts(trace, speed, **_decode_overrides(sem, kv))
        rej = df["rejected"]
        order = exp.rejection_ordering(rej)
        holds = exp.paper_ordering_holds(rej)
        same = ""
        if int(rej.sum()) == 0:
            same = "; no policy rejects a request: nothing is overloaded here (the decode pool does not bind)"
        elif int(df["rejected_after_prefill"].sum()) == 0 and rej.nunique() == 1:
            same = (f"; all three reject {int(rej.iloc[0]):,}, the baseline none after prefill (its arrival check is "
                    f"TTFT only): the decode pool does not bind here")
        self.readout.value = (f"{exp._trace(trace).name} at {speed:g}× ({_decode_text(sem, kv)}): "
                              f"rejected, most → fewest: <b>{order}</b> — the paper's ordering (baseline > early > "
                              f"predicted) {'<b>holds</b>' if holds else 'does not hold'} here{same}")
        need = self.view.fitted_ylims(df, self._paper())
        old = self._ylims or [(None, None)] * 3
        self._ylims = [(0.0, sticky_limit(old[0][1], need[0][1], headroom=1.3)),
                       _sticky_span(old[1], *need[1]),
                       (0.0, sticky_limit(old[2][1], need[2][1], headroom=1.3))]
        self.view.update(df, self._paper(), ylims=self._ylims)


def _sticky_span(current, lo: float, hi: float) -> tuple:
    """Axis limits for bars drawn from ``lo`` to ``hi`` (an axis not starting at 0): ``current``
    while it holds [lo, hi] and that fills ≥ 30% of it; else [lo, hi] widened by a quarter of its
    span on each side and rounded outwards to a nice step (so the next few moves fit too)."""
    if current[0] is not None and current[0] <= lo and hi <= current[1] \
            and hi - lo >= 0.3 * (current[1] - current[0]):
        return current
    step = nice_ceiling(max(hi - lo, 1.0) / 4)
    return (max(0.0, math.floor((lo - (hi - lo) / 4) / step) * step), math.ceil((hi + (hi - lo) / 4) / step) * step)
